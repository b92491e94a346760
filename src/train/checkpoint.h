/* Checkpoints: DIR/model.safetensors holds the weights and batch-norm
 * buffers under PyTorch's state_dict names (torch's load_state_dict takes
 * them as they are); DIR/state.safetensors beside it holds what resuming
 * needs: optimizer state per parameter ("optimizer.fc1.weight.exp_avg"),
 * and as metadata the position (next epoch and batch), the step count, the
 * seed and the hyper-parameters that must not change across a resume.
 * Random numbers are counter-based (seed, epoch, step), so the seed and the
 * position ARE the RNG state. Both files are written atomically, weights
 * first, so a crash leaves either the old pair or a new model with the old
 * state, never a torn file.
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
} pt_train_position;

/* Creates dir if needed and checks that files can be created in it, so a
 * run fails before training rather than at its first checkpoint. */
pt_status pt_checkpoint_prepare_dir(const char *dir);

/* Writes the host copies (hparam, hbuffer, hstate): on a GPU, call
 * pt_model_to_host and pt_optimizer_to_host first. Loading fills them and
 * uploads. */
pt_status pt_checkpoint_save(const char *dir, const pt_model *m, const pt_optimizer *opt,
                             const pt_train_position *pos, const char *spec_text);
/* Loads weights (and batch-norm buffers) by name from any safetensors file
 * (ours or PyTorch's), checking every shape; names missing from the file or
 * extra in it are errors that list them. */
pt_status pt_checkpoint_load_weights(const char *path, pt_model *m);
/* Loads DIR/model.safetensors and DIR/state.safetensors into a model and an
 * optimizer already built with the same configuration. */
pt_status pt_checkpoint_resume(const char *dir, pt_model *m, pt_optimizer *opt, pt_train_position *pos);
/* The model spec stored in a checkpoint's metadata, or NULL (malloc'd). */
char *pt_checkpoint_spec_text(const char *path);

#endif
