/* Judging each configuration against one worker, in plain words derived
 * from its measurements: how much faster, and where the rest went. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scale/scale.h"

/* The largest loss of the step, as a clause: cores shared, communication,
 * the pipeline's bubble, waiting for data, or a step too small to split. */
static void reason(const pt_scale_config *c, const pt_scale_config *base, int cores, char *out, size_t len) {
  const double step = c->ms_per_step > 0 ? c->ms_per_step : 1.0;
  const double comm = c->comm_ms / step, data = c->data_ms / step;
  const int threads = c->workers * c->threads;
  if (threads > cores) {
    snprintf(out, len, "its %d threads share %d cores%s", threads, cores,
             comm > 0.2 ? ", and communication takes a large share" : "");
    return;
  }
  if (isfinite(c->bubble) && c->bubble > 0.2) {
    snprintf(out, len, "the stages sit idle %.0f%% of the time (the pipeline's bubble)", 100.0 * c->bubble);
    return;
  }
  if (comm > 0.15) {
    snprintf(out, len, "%.0f%% of each step is communication", 100.0 * comm);
    return;
  }
  if (data > 0.15) {
    snprintf(out, len, "%.0f%% of each step waits for data", 100.0 * data);
    return;
  }
  if (base && base->ran && base->ms_per_step < 5.0) {
    snprintf(out, len, "a step is only %.2f ms of work, too little to split without losing it to coordination",
             base->ms_per_step);
    return;
  }
  snprintf(out, len, "each worker's share of the work runs slower than the whole did on one");
}

void pt_scale_judge(pt_scale_config *c, int n, int cores, char *rec, size_t rec_len) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    pt_scale_config *x = &c[i];
    x->speedup = x->efficiency = NAN;
    if (!x->ran) {
      snprintf(x->verdict, sizeof x->verdict, "%s, %d worker%s: %s: %s", pt_scale_strategy_name(x->strategy),
               x->workers, x->workers == 1 ? "" : "s", x->runnable ? "failed" : "not run", x->why);
      continue;
    }
    if (best < 0 || x->images_per_s > c[best].images_per_s) best = i;
    const pt_scale_config *base = x->baseline >= 0 ? &c[x->baseline] : NULL;
    if (!base) {
      x->speedup = x->efficiency = 1.0;
      snprintf(x->verdict, sizeof x->verdict, "the baseline: one worker, %d thread%s", x->threads,
               x->threads == 1 ? "" : "s");
      continue;
    }
    if (!base->ran) {
      snprintf(x->verdict, sizeof x->verdict, "no baseline to compare with (one worker did not run)");
      continue;
    }
    x->speedup = x->images_per_s / base->images_per_s;
    x->efficiency = x->speedup / x->workers;
    char why[200];
    reason(x, base, cores, why, sizeof why);
    const char *name = pt_scale_strategy_name(x->strategy);
    if (x->efficiency >= 0.9)
      snprintf(x->verdict, sizeof x->verdict, "%s, %d workers: %.2fx, %.0f%% efficiency: pays", name, x->workers,
               x->speedup, 100.0 * x->efficiency);
    else if (x->speedup >= 1.1)
      snprintf(x->verdict, sizeof x->verdict, "%s, %d workers: %.2fx, %.0f%% efficiency: pays in part: %s", name,
               x->workers, x->speedup, 100.0 * x->efficiency, why);
    else if (x->speedup >= 0.95)
      snprintf(x->verdict, sizeof x->verdict, "%s, %d workers: %.2fx, no faster: %s", name, x->workers, x->speedup,
               why);
    else
      snprintf(x->verdict, sizeof x->verdict, "%s, %d workers: %.2fx, slower: %s", name, x->workers, x->speedup,
               why);
  }
  if (best < 0) {
    snprintf(rec, rec_len, "nothing ran: see the reasons above");
    return;
  }
  const pt_scale_config *b = &c[best];
  char opt[64] = "";
  if (b->optimizer) snprintf(opt, sizeof opt, ", %s", b->optimizer);
  char batch[64] = "";
  if (b->batch > 0) snprintf(batch, sizeof batch, ", global batch %d", b->batch);
  if (b->baseline < 0 || !(b->speedup >= 1.1))
    snprintf(rec, rec_len,
             "stay on one worker (%d thread%s%s%s): %.0f images/s, and no parallel configuration was 1.1x faster",
             b->threads, b->threads == 1 ? "" : "s", batch, opt, b->images_per_s);
  else
    snprintf(rec, rec_len, "use %s with %d workers x %d thread%s%s%s: %.0f images/s, %.2fx one worker",
             pt_scale_strategy_name(b->strategy), b->workers, b->threads, b->threads == 1 ? "" : "s", batch, opt,
             b->images_per_s, b->speedup);
}
