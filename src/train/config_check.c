/* The ranges of a run's numeric settings, for callers of the library: the
 * command line's flag table takes the same bounds (config_bounds.h), so
 * its users never get here, but a pt_config filled in by a program can
 * hold anything. A value out of range (an infinite learning rate, a
 * thousand-fold batch, a million threads) otherwise trains without
 * complaint into NaN weights, or exhausts the machine's memory or
 * threads. The messages name a setting by its flag, as the trainer's
 * other messages do (pt_config's fields are named after the flags). */
#include <math.h>

#include "train/config_bounds.h"
#include "train/trainer.h"
#include "util/error.h"

/* NaN: "the preset's" */
static pt_status real_or_unset(const char *flag, double v, double lo, double hi) {
  if (isnan(v) || (v >= lo && v <= hi)) return PT_OK;
  return pt_fail(PT_ERR_ARG, "%s %g: expected a number in [%g, %g] (or NaN for the preset's)", flag, v, lo, hi);
}

/* zero_means: what 0 asks for, where 0 is allowed below lo's 1 */
static pt_status within(const char *flag, double v, double lo, double hi, const char *zero_means) {
  if (isfinite(v) && ((v >= lo && v <= hi) || (zero_means && v == 0))) return PT_OK;
  if (zero_means)
    return pt_fail(PT_ERR_ARG, "%s %.15g: expected 0 (%s) or a number in [%.15g, %.15g]", flag, v, zero_means, lo,
                   hi);
  return pt_fail(PT_ERR_ARG, "%s %.15g: expected a number in [%.15g, %.15g]", flag, v, lo, hi);
}

static pt_status int_or_unset(const char *flag, int v, int hi) {
  if (v == PT_UNSET_INT || (v >= 1 && v <= hi)) return PT_OK;
  return pt_fail(PT_ERR_ARG, "%s %d: expected 1 to %d (or -1 for the preset's)", flag, v, hi);
}

pt_status pt_train_config_check_numbers(const pt_train_config *c) {
  PT_TRY(real_or_unset("--lr", c->lr, 0, PT_LR_MAX));
  PT_TRY(real_or_unset("--momentum", c->momentum, 0, PT_MOMENTUM_MAX));
  PT_TRY(real_or_unset("--weight-decay", c->weight_decay, 0, PT_WEIGHT_DECAY_MAX));
  PT_TRY(real_or_unset("--gamma", c->gamma, 0, 1));
  PT_TRY(int_or_unset("--batch-size", c->batch_size, PT_BATCH_MAX));
  PT_TRY(int_or_unset("--test-batch-size", c->test_batch_size, PT_BATCH_MAX));
  if (!(c->target_accuracy >= 0 && c->target_accuracy <= 1))
    return pt_fail(PT_ERR_ARG, "--target-accuracy %g: expected an accuracy in [0, 1] (0: none)", c->target_accuracy);
  PT_TRY(within("--epochs", c->epochs, 1, PT_EPOCHS_MAX, NULL));
  PT_TRY(within("--keep-checkpoints", c->keep_checkpoints, 1, PT_KEEP_CHECKPOINTS_MAX, NULL));
  PT_TRY(within("--log-interval", c->log_interval, 1, PT_LOG_INTERVAL_MAX, NULL));
  PT_TRY(within("--accum-steps", c->accum_steps, 1, PT_ACCUM_STEPS_MAX, NULL));
  PT_TRY(within("--bucket-mb", c->bucket_mb, PT_BUCKET_MB_MIN, PT_BUCKET_MB_MAX, NULL));
  PT_TRY(within("--timeout", c->timeout_s, PT_TIMEOUT_MIN, PT_TIMEOUT_MAX, NULL));
  PT_TRY(within("--max-steps", (double)c->max_steps, 1, PT_COUNT_MAX, "no limit"));
  PT_TRY(within("--checkpoint-every", (double)c->checkpoint_every, 1, PT_COUNT_MAX, "only at epoch ends"));
  PT_TRY(within("--checkpoint-interval", c->checkpoint_interval, 1, PT_CHECKPOINT_INTERVAL_MAX, "none"));
  PT_TRY(within("--eval-every", (double)c->eval_every, 1, PT_COUNT_MAX, "at epoch ends only"));
  PT_TRY(within("--threads", c->threads, 1, PT_THREADS_MAX, "the cores"));
  PT_TRY(within("--workers", c->workers, 1, PT_WORKERS_MAX, "from --devices, else 2"));
  PT_TRY(within("--stages", c->stages, 1, PT_STAGES_MAX, "every rank"));
  PT_TRY(within("--micro-batches", c->micro_batches, 1, PT_MICRO_BATCHES_MAX, "4"));
  /* No flag takes a number here (--cuda-graphs is 1, --no-cuda-graphs -1),
   * so the field is named; out of range, a CPU run ignored it and a GPU
   * one blamed the GPU. */
  if (c->cuda_graphs < -1 || c->cuda_graphs > 1)
    return pt_fail(PT_ERR_ARG, "cuda_graphs %d: expected -1, 0 or 1 (never, where the run allows it, always)",
                   c->cuda_graphs);
  return PT_OK;
}
