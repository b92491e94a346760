/* The ranges of a run's numeric settings, for callers of the library: the
 * command line's flag table holds the same bounds, so its users never get
 * here, but a pt_config filled in by a program can hold anything. A value
 * out of range (an infinite learning rate, a negative interval) otherwise
 * trains without complaint and ends in NaN weights or no saves at all.
 * The messages name a setting by its flag, as the trainer's other
 * messages do (pt_config's fields are named after the flags). */
#include <math.h>

#include "train/trainer.h"
#include "util/error.h"

/* NaN: "the preset's" */
static pt_status real_or_unset(const char *flag, double v, double lo, double hi) {
  if (isnan(v) || (v >= lo && v <= hi)) return PT_OK;
  return pt_fail(PT_ERR_ARG, "%s %g: expected a number in [%g, %g] (or NaN for the preset's)", flag, v, lo, hi);
}

static pt_status at_least(const char *flag, double v, double lo, const char *zero_means) {
  if (v >= lo && isfinite(v)) return PT_OK;
  return pt_fail(PT_ERR_ARG, "%s %g: expected at least %g%s%s", flag, v, lo, zero_means ? "; 0: " : "",
                 zero_means ? zero_means : "");
}

pt_status pt_train_config_check_numbers(const pt_train_config *c) {
  /* the same bounds as ptrain train's flags (cli/train_args.c) */
  PT_TRY(real_or_unset("--lr", c->lr, 0, 1e3));
  PT_TRY(real_or_unset("--momentum", c->momentum, 0, 0.999999));
  PT_TRY(real_or_unset("--weight-decay", c->weight_decay, 0, 1));
  PT_TRY(real_or_unset("--gamma", c->gamma, 0, 1));
  if (!(c->target_accuracy >= 0 && c->target_accuracy <= 1))
    return pt_fail(PT_ERR_ARG, "--target-accuracy %g: expected an accuracy in [0, 1] (0: none)", c->target_accuracy);
  PT_TRY(at_least("--keep-checkpoints", c->keep_checkpoints, 1, NULL));
  PT_TRY(at_least("--log-interval", c->log_interval, 1, NULL));
  PT_TRY(at_least("--max-steps", (double)c->max_steps, 0, "no limit"));
  PT_TRY(at_least("--checkpoint-every", (double)c->checkpoint_every, 0, "only at epoch ends"));
  PT_TRY(at_least("--checkpoint-interval", c->checkpoint_interval, 0, "none"));
  PT_TRY(at_least("--eval-every", (double)c->eval_every, 0, "at epoch ends only"));
  PT_TRY(at_least("--threads", c->threads, 0, "the cores"));
  PT_TRY(at_least("--workers", c->workers, 0, "from --devices, else 2"));
  PT_TRY(at_least("--stages", c->stages, 0, "every rank"));
  PT_TRY(at_least("--micro-batches", c->micro_batches, 0, "4"));
  return PT_OK;
}
