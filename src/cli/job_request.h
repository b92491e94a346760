/* What a batch job asks its scheduler for, and the lines a user may add
 * to it: shared by ptrain jobscript and ptrain scale --jobscript. Each
 * check prints "ptrain CMD: ..." and returns 2 (a usage error), or 0. */
#ifndef PT_CLI_JOB_REQUEST_H
#define PT_CLI_JOB_REQUEST_H

#include <stddef.h>

/* Characters that need no quoting anywhere in a bash word, first or not. */
extern const char pt_job_safe_word[];

/* Values that go into #SBATCH lines and submit files, which neither
 * scheduler reads as shell and each splits in its own way: one plain
 * token means the same to both, and to a reader. v may be NULL. */
int pt_job_check_token(const char *cmd, const char *flag, const char *v);

/* An option or command the generated file writes itself, which an added
 * line must not write again: the scheduler would settle the two by its
 * order of reading, silently. hint ends the refusal: "; give it with
 * --time", or why the file needs its own. letter: an #SBATCH option's
 * one-letter form, or 0. */
typedef struct {
  const char *name;
  char letter;
  const char *hint;
} pt_job_owned;

/* A --sbatch value: one sbatch option as a single word, --name[=value] or
 * -Xvalue, none of owned[0..n). */
int pt_job_check_sbatch(const char *cmd, const char *v, const pt_job_owned *owned, size_t n);
/* A --submit value: KEY = VALUE on one line of printable text, KEY none
 * of owned[0..n) (HTCondor's keys ignore case). */
int pt_job_check_submit(const char *cmd, const char *v, const pt_job_owned *owned, size_t n);

/* A size in MiB, as --memory and --disk take it: 4GB, 512MB, 2048 (HTCondor
 * reads a bare number as MB); 0 where it is not one. */
double pt_job_size_mib(const char *v);
int pt_job_valid_size(const char *v);

/* What a run needs, in MiB; 0 for both where the model is a spec file
 * that cannot be read here. Upper bounds, not fits.
 *  memory: weights, gradients and two moments of optimizer state; the
 *    layers' outputs and their gradients for a training batch, or the
 *    outputs of an evaluation batch, whichever is larger; the data set's
 *    bytes; 512 MiB for the rest (the process, the BLAS's buffers).
 *    cifar-convnet (batch 64, evaluation batch 1000) peaked at 4.9 GiB on
 *    a CPU, where this says 8.6, and on a GPU the host holds less.
 *  disk: the checkpoints kept and the one being written, each the weights
 *    and up to two moments of optimizer state; the final weights; the data
 *    set, which may travel with the job; 256 MiB for the logs and the
 *    rest. cifar-convnet's checkpoints are 1.6 GB each with Adam's
 *    moments. */
typedef struct {
  double memory_mib, disk_mib;
} pt_job_need;

/* model or model_file (NULL: mnist-cnn); dataset NULL for the model's;
 * batch, test_batch and keep_checkpoints 0 for the defaults. The dataset
 * it settled on goes to dataset_out. */
pt_job_need pt_job_estimate(const char *model, const char *model_file, const char *dataset, int batch, int test_batch,
                            int keep_checkpoints, char *dataset_out, size_t dataset_len);

#endif
