/* Checkpoints. Each save is one generation directory,
 * DIR/step-NNNNNNNNNNNN/, holding model.safetensors (the weights and
 * batch-norm buffers under PyTorch's state_dict names; torch's
 * load_state_dict takes them as they are) and state.safetensors (what
 * resuming needs: optimizer state per parameter,
 * "optimizer.fc1.weight.exp_avg", and as metadata the position, the step
 * count, the seed and the hyper-parameters that must not change across a
 * resume). Random numbers are counter-based (seed, epoch, step), so the
 * seed and the position ARE the RNG state.
 *
 * Why generations: a checkpoint is two files, and replacing them one at a
 * time left, after a full disk or a kill between the two, new weights
 * beside an old state that a resume took without a word. Here both files
 * are written (and fsync'ed) into DIR/.partial-step-N.PID and published by
 * one rename of that directory, so a generation is complete or absent.
 * Both files also carry one id of the save ("ptrain.checkpoint"), and a
 * pair whose ids differ is refused; and each a CRC-32 of its own bytes
 * ("ptrain.crc32"), checked wherever a file is read. After a generation
 * is complete, DIR/model.safetensors is pointed at its weights (a hard
 * link, renamed into place), so PyTorch users and `ptrain eval DIR` find
 * the newest weights where they always did, and generations beyond the
 * newest `keep` are removed. Resuming takes the newest generation that
 * loads and names any newer one it skipped and why.
 */
#ifndef PT_TRAIN_CHECKPOINT_H
#define PT_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "nn/model.h"
#include "optim/optimizer.h"

typedef struct {
  int next_epoch, next_batch; /* where training continues */
  int64_t step;               /* optimizer steps taken */
  uint64_t seed;
  int batch_size;             /* per worker */
  int world;                  /* workers; a resume may change it */
  double epoch_loss_sum;      /* running training loss of a partial epoch, all workers */
  int64_t epoch_samples;      /* samples of the partial epoch, all workers */
  double epoch_seconds;
  /* What else decides the data position and the steps, compared on resume;
   * states of earlier versions lack them: shuffle, accum and train_samples -1,
   * dataset "". */
  int shuffle;                /* 1: the epoch's order is drawn; 0: --no-shuffle */
  int accum;                  /* --accum-steps */
  char dataset[48];           /* the data set's name */
  int64_t train_samples;      /* its training split's size (-1: not recorded) */
  /* 1: stopped at --max-steps inside an epoch before the evaluation that
   * ends the run (a signal cut it): a resume to the same --max-steps makes
   * it, epoch line and all, rather than find nothing to do. */
  int eval_due;
  /* 1: saved after its step's --eval-every evaluation was made and written
   * (at a run's end), which a resume there must not make again; 0: saved
   * before it (every save inside an epoch), where a stop may have cut it. */
  int evaluated;
} pt_train_position;

/* Creates dir if needed and checks that files can be created in it, so a
 * run fails before training rather than at its first checkpoint. */
pt_status pt_checkpoint_prepare_dir(const char *dir);

/* Writes the host copies (hparam, hbuffer, hstate): on a GPU, call
 * pt_model_to_host and pt_optimizer_to_host first. Loading fills them and
 * uploads. */
/* The generations a resume skipped as damaged. */
typedef struct {
  int64_t step[16];
  int n;
} pt_checkpoint_skipped;

/* keep: the generations kept, this one among them; those in damaged (may
 * be NULL), which nothing can resume from, do not count and are left in
 * place (a save of the same step replaces one). */
pt_status pt_checkpoint_save(const char *dir, const pt_model *m, const pt_optimizer *opt,
                             const pt_train_position *pos, const char *spec_text, int keep,
                             const pt_checkpoint_skipped *damaged);
/* Loads weights (and batch-norm buffers) by name from any safetensors file
 * (ours or PyTorch's), or a checkpoint directory's newest, checking every
 * shape; names missing from the file or extra in it are errors that list
 * them. dataset (may be NULL with dataset_size 0) gets the data set the
 * file records its weights were trained on, "" where none (PyTorch's,
 * earlier versions', the caller's arrays'). */
pt_status pt_checkpoint_load_weights(const char *path, pt_model *m, char *dataset, size_t dataset_size);
/* PT_OK where DIR holds something to resume from (a generation, or the
 * single pair of earlier versions); otherwise an error that says what DIR
 * holds and what to do instead. */
pt_status pt_checkpoint_present(const char *dir);
/* PT_OK where a run that does not resume may write its checkpoints into
 * DIR: it holds no generation of another run. Otherwise an error that
 * names the newest and the ways on: --resume, another directory, removing
 * them. */
pt_status pt_checkpoint_fresh_ok(const char *dir);
/* 1 where DIR holds no checkpoint yet: absent, or a directory with no
 * generation and neither file of earlier versions' pair. Anything else
 * (another kind of file, weights alone, an unreadable directory) is 0, for
 * the resume to name. */
int pt_checkpoint_none_yet(const char *dir);
/* Loads the newest complete generation in DIR (or DIR's own pair, the
 * layout of earlier versions) into a model and an optimizer already built
 * with the same configuration. note (may be NULL) gets the generation's
 * path and, where newer ones were skipped, which and why: damaged files
 * (a cut file, a CRC-32 that does not match, a mixed pair) are skipped;
 * a state of another configuration (--optimizer, model) is an error at
 * once (PT_ERR_ARG). skipped (may be NULL) gets their steps. */
pt_status pt_checkpoint_resume(const char *dir, pt_model *m, pt_optimizer *opt, pt_train_position *pos,
                               char *note, size_t note_size, pt_checkpoint_skipped *skipped);
/* The weights alone (hparam, hbuffer) as one safetensors file, replaced
 * atomically, with the spec and the dataset trained on (NULL: none of
 * ours) in its metadata: what pt_net_save writes. */
pt_status pt_checkpoint_save_weights(const char *path, const pt_model *m, const char *spec_text,
                                     const char *dataset);
/* The model spec stored in a checkpoint's metadata (malloc'd) in *text, or
 * NULL where the file records none (weights saved by another program);
 * an error where the file cannot be read or fails its CRC. */
pt_status pt_checkpoint_spec_text(const char *path, char **text);

#endif
