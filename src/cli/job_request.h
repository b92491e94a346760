/* What a batch job asks its scheduler for, and the lines a user may add
 * to it: shared by ptrain jobscript and ptrain scale --jobscript. Each
 * check prints "ptrain CMD: ..." and returns 2 (a usage error), or 0. */
#ifndef PT_CLI_JOB_REQUEST_H
#define PT_CLI_JOB_REQUEST_H

#include <stddef.h>

#include "nn/spec.h"

/* Characters that need no quoting anywhere in a bash word, first or not. */
extern const char pt_job_safe_word[];

/* Values that go into #SBATCH lines and submit files, which neither
 * scheduler reads as shell and each splits in its own way: one plain
 * token means the same to both, and to a reader. v may be NULL. */
int pt_job_check_token(const char *cmd, const char *flag, const char *v);

/* An option or command the generated file writes itself, or one that
 * would undo what it does, which an added line must not write: the
 * scheduler would settle the two by its order of reading, silently. why
 * is the refusal's reason: "the script writes it itself; give it with
 * --time". */
typedef struct {
  const char *name; /* --time */
  char letter;      /* its one-letter form, or 0 */
  const char *why;
} pt_job_sbatch_owned;

typedef struct {
  const char *name;      /* a submit command, request_memory */
  const char *attribute; /* the job attribute it sets, RequestMemory, or NULL */
  const char *why;
} pt_job_submit_owned;

/* A --sbatch value: one sbatch option as a single word, --name[=value] or
 * -Xvalue (letters of flags that take no value may come first, as sbatch
 * reads them), naming none of owned[0..n), in full or abbreviated. */
int pt_job_check_sbatch(const char *cmd, const char *v, const pt_job_sbatch_owned *owned, size_t n);
/* A --submit value: KEY = VALUE on one line of printable ASCII (tabs
 * allowed), not continued on the next (a trailing backslash), KEY none of
 * owned[0..n)'s commands or attributes, matched without regard to case
 * (an attribute also as MY.Name or +Name), nor condor_submit's other
 * spelling of one (stdout for output). */
int pt_job_check_submit(const char *cmd, const char *v, const pt_job_submit_owned *owned, size_t n);

/* A size in MiB, as --memory and --disk take it: 4GB, 512MB, 2048 (a bare
 * number is MB); 0 where it is not one. */
double pt_job_size_mib(const char *v);
int pt_job_valid_size(const char *v);
/* The size as a submit file takes it, unit and all: HTCondor reads a bare
 * request_memory as MB but a bare request_disk as KB, so a bare number
 * gets "MB". */
void pt_job_size_text(const char *v, char *out, size_t len);

/* What a run needs, in MiB, for each process that holds a replica of the
 * model; 0 for both where the model is a spec file that cannot be read
 * here. Upper bounds, not fits.
 *  memory: weights, gradients and the optimizer's state (none for plain
 *    SGD, one moment with momentum, two for Adam, AdamW and Adadelta); the
 *    layers' outputs and their gradients for a training batch, or the
 *    outputs of an evaluation batch, whichever is larger; the data set's
 *    bytes; 512 MiB for the rest (the process, the BLAS's buffers).
 *    cifar-convnet with Adam (batch 64, evaluation batch 1000) peaked at
 *    4.9 GiB on a CPU, where this says 8.6, and on a GPU the host holds
 *    less.
 *  disk: the checkpoints kept and the one being written, each the weights
 *    and the optimizer's state, and as many again where an earlier run's
 *    travel with the job (a restart finds them beside its own); the final
 *    weights; the data set, which may travel with the job; 256 MiB for the
 *    logs and the rest.
 *    cifar-convnet's checkpoints are 1.6 GB each with Adam's moments. */
typedef struct {
  double memory_mib, disk_mib;
} pt_job_need;

/* What of a run the estimate reads; NULL and unset values (see
 * pt_train_config) for the model's own. */
typedef struct {
  const char *model, *model_file, *dataset, *optimizer;
  float momentum; /* NaN: unset */
  int batch, test_batch, keep_checkpoints;
  int carried; /* an earlier run's checkpoints travel with the job, to continue */
} pt_job_run;

/* The dataset it settled on goes to dataset_out. */
pt_job_need pt_job_estimate(const pt_job_run *run, char *dataset_out, size_t dataset_len);
/* The same for a model already read (run->model and model_file unused). */
pt_job_need pt_job_estimate_spec(const pt_model_spec *spec, const pt_job_run *run, char *dataset_out,
                                 size_t dataset_len);

#endif
