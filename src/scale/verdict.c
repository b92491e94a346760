/* Judging each configuration against one worker, in plain words derived
 * from its measurements: how much faster, and where the rest went. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scale/scale.h"

/* The largest loss of the step, as a clause: cores shared (said first
 * where it holds, as it has no share of its own to weigh), then the
 * largest measured share of the pipeline's bubble, communication and
 * waiting for data, else a step too small to split. */
static void reason(const pt_scale_config *c, const pt_scale_config *base, int cores, char *out, size_t len) {
  if (c->cores > 0) cores = c->cores; /* a task judged on its own machine's */
  const double step = c->ms_per_step > 0 ? c->ms_per_step : 1.0;
  const double comm = c->comm_ms / step, data = c->data_ms / step;
  const double bubble = isfinite(c->bubble) ? c->bubble : 0;
  const int threads = c->workers * c->threads;
  char loss[160] = "";
  if (bubble > 0.2 && bubble >= comm && bubble >= data)
    snprintf(loss, sizeof loss, "the stages sit idle %.0f%% of the time (the pipeline's bubble)", 100.0 * bubble);
  else if (comm > 0.15 && comm >= data)
    snprintf(loss, sizeof loss, "%.0f%% of each step is communication", 100.0 * comm);
  else if (data > 0.15)
    snprintf(loss, sizeof loss, "%.0f%% of each step waits for data", 100.0 * data);
  if (threads > cores) {
    snprintf(out, len, "its %d threads share %d cores%s%s", threads, cores, loss[0] ? ", and " : "", loss);
    return;
  }
  if (loss[0]) {
    snprintf(out, len, "%s", loss);
    return;
  }
  if (base && base->ran && base->ms_per_step < 5.0) {
    snprintf(out, len, "a step is only %.2f ms of work, too little to split without losing it to coordination",
             base->ms_per_step);
    return;
  }
  snprintf(out, len, "each worker's share of the work runs slower than the whole did on one");
}

/* "; reaches 0.85 in 12.3 s (1.6x sooner than one worker)" */
static void append_target(pt_scale_config *x, const pt_scale_config *c, double target) {
  if (!(target > 0)) return;
  const size_t used = strlen(x->verdict);
  char *p = x->verdict + used;
  const size_t left = sizeof x->verdict - used;
  if (!isfinite(x->target_s)) {
    if (x->why[0]) snprintf(p, left, "; no time to %g: %s", target, x->why);
    else snprintf(p, left, "; does not reach %g test accuracy in the epochs allowed", target);
    return;
  }
  const pt_scale_config *b = x->baseline >= 0 ? &c[x->baseline] : NULL;
  if (b && b->ran && isfinite(b->target_s))
    snprintf(p, left, "; reaches %g in %.1f s (%.2fx %s than one worker)", target, x->target_s,
             x->target_s <= b->target_s ? b->target_s / x->target_s : x->target_s / b->target_s,
             x->target_s <= b->target_s ? "sooner" : "later");
  else
    snprintf(p, left, "; reaches %g in %.1f s", target, x->target_s);
}

/* "2 threads, global batch 200, adam": a configuration's setting, its
 * batch and optimizer where they are not the model's own. */
static void setting_of(const pt_scale_config *x, char *out, size_t len) {
  char opt[64] = "", batch[64] = "";
  if (x->optimizer) snprintf(opt, sizeof opt, ", %s", x->optimizer);
  if (x->batch > 0) snprintf(batch, sizeof batch, ", global batch %d", x->batch);
  snprintf(out, len, "%d thread%s%s%s", x->threads, x->threads == 1 ? "" : "s", batch, opt);
}

static void describe(const pt_scale_config *b, char *out, size_t len) {
  char set[160];
  setting_of(b, set, sizeof set);
  if (b->baseline < 0) snprintf(out, len, "one worker (%s)", set);
  else snprintf(out, len, "%s with %d workers x %s", pt_scale_strategy_name(b->strategy), b->workers, set);
}

/* The configuration to recommend on time to accuracy: the one with the
 * fewest workers among those within PT_SCALE_SOONER of the soonest (then
 * the sooner of those). A single run to a target carries the host's noise,
 * and more workers are worth their cost only where they clearly pay, as
 * with throughput's 1.1x. */
static int fewest_workers_near(const pt_scale_config *c, int n, int soonest) {
  int pick = soonest;
  for (int i = 0; i < n; i++) {
    if (!c[i].ran || !isfinite(c[i].target_s) || c[i].target_s > PT_SCALE_SOONER * c[soonest].target_s)
      continue;
    if (c[i].workers < c[pick].workers || (c[i].workers == c[pick].workers && c[i].target_s < c[pick].target_s))
      pick = i;
  }
  return pick;
}

/* "dp, 2 workers", and where the sweep has several settings (threads,
 * batch, optimizer), which: " (1 thread, global batch 200, adam)". */
static void name_of(const pt_scale_config *x, int settings, char *out, size_t len) {
  char set[160] = "";
  if (settings > 1) setting_of(x, set, sizeof set);
  snprintf(out, len, "%s, %d worker%s%s%s%s", pt_scale_strategy_name(x->strategy), x->workers,
           x->workers == 1 ? "" : "s", set[0] ? " (" : "", set, set[0] ? ")" : "");
}

void pt_scale_judge(pt_scale_config *c, int n, int cores, double target, char *rec, size_t rec_len) {
  int best = -1, soonest = -1, settings = 0;
  for (int i = 0; i < n; i++)
    if (c[i].baseline < 0) settings++;
  for (int i = 0; i < n; i++) {
    pt_scale_config *x = &c[i];
    x->speedup = x->efficiency = NAN;
    char name[200];
    name_of(x, settings, name, sizeof name);
    if (!x->ran) {
      snprintf(x->verdict, sizeof x->verdict, "%s: %s: %s", name, x->runnable ? "failed" : "not run", x->why);
      continue;
    }
    if (best < 0 || x->images_per_s > c[best].images_per_s) best = i;
    if (target > 0 && isfinite(x->target_s) && (soonest < 0 || x->target_s < c[soonest].target_s)) soonest = i;
    const pt_scale_config *base = x->baseline >= 0 ? &c[x->baseline] : NULL;
    if (!base) {
      x->speedup = x->efficiency = 1.0;
      if (settings > 1) {
        char set[160];
        setting_of(x, set, sizeof set);
        snprintf(x->verdict, sizeof x->verdict, "the baseline: one worker, %s", set);
      } else {
        snprintf(x->verdict, sizeof x->verdict, "the baseline: one worker, %d thread%s", x->threads,
                 x->threads == 1 ? "" : "s");
      }
      if (x->rough) {
        const size_t used = strlen(x->verdict);
        snprintf(x->verdict + used, sizeof x->verdict - used, " (rough: %s)", x->rough_why);
      }
      append_target(x, c, target);
      continue;
    }
    if (!base->ran) {
      snprintf(x->verdict, sizeof x->verdict, "%s: no baseline to compare with (one worker did not run)", name);
      continue;
    }
    x->speedup = x->images_per_s / base->images_per_s;
    x->efficiency = x->speedup / x->workers;
    /* A ratio is as rough as either of its figures, and one that no
     * workers could reach is rough whatever the runs looked like. */
    if (!x->rough && base->rough) {
      x->rough = 1;
      snprintf(x->rough_why, sizeof x->rough_why, "the one-worker figures it is compared with are rough: %.320s",
               base->rough_why);
    }
    if (!x->rough) x->rough = pt_scale_impossible_speedup(x->speedup, x->workers, x->rough_why, sizeof x->rough_why);
    char why[640];
    reason(x, base, cores, why, sizeof why);
    if (x->rough)
      snprintf(x->verdict, sizeof x->verdict, "%s: %.2fx, %.0f%% efficiency: rough, not to be trusted: %s", name,
               x->speedup, 100.0 * x->efficiency, x->rough_why);
    else if (x->efficiency >= 0.9)
      snprintf(x->verdict, sizeof x->verdict, "%s: %.2fx, %.0f%% efficiency: pays", name, x->speedup,
               100.0 * x->efficiency);
    else if (x->speedup >= 1.1)
      snprintf(x->verdict, sizeof x->verdict, "%s: %.2fx, %.0f%% efficiency: pays in part: %s", name, x->speedup,
               100.0 * x->efficiency, why);
    else if (x->speedup >= 0.95)
      snprintf(x->verdict, sizeof x->verdict, "%s: %.2fx, no faster: %s", name, x->speedup, why);
    else
      snprintf(x->verdict, sizeof x->verdict, "%s: %.2fx, slower: %s", name, x->speedup, why);
    append_target(x, c, target);
  }
  if (best < 0) {
    snprintf(rec, rec_len, "nothing ran: see the reasons above");
    return;
  }
  /* Only one worker measured (the other tasks' results missing, or their
   * runs failed): nothing to compare with, so no conclusion. Said as it
   * is, not as a sweep in which parallelism did not pay. */
  int parallel = 0, measured = 0, missing = -1;
  for (int i = 0; i < n; i++) {
    if (c[i].baseline < 0) continue;
    parallel++;
    if (c[i].ran) measured++;
    else if (missing < 0) missing = i;
  }
  char what[200];
  if (parallel && !measured) {
    const pt_scale_config *m = &c[missing];
    describe(&c[best], what, sizeof what);
    snprintf(rec, rec_len, "no recommendation: no parallel configuration was measured (%d without a measurement; "
             "%s, %d workers: %s: %.560s); %s ran at %.0f images/s, with nothing to compare it with", parallel,
             pt_scale_strategy_name(m->strategy), m->workers, m->runnable ? "failed" : "not run", m->why, what,
             c[best].images_per_s);
    return;
  }
  if (soonest >= 0) { /* judged on convergence: the soonest to the target, a run of its own */
    const int pick = fewest_workers_near(c, n, soonest);
    const pt_scale_config *s = &c[pick];
    describe(s, what, sizeof what);
    if (pick == soonest) {
      snprintf(rec, rec_len, "%s %s: it reaches %g test accuracy soonest, in %.1f s (%.0f images/s)",
               s->baseline < 0 ? "stay on" : "use", what, target, s->target_s, s->images_per_s);
      return;
    }
    char fast[200];
    describe(&c[soonest], fast, sizeof fast);
    snprintf(rec, rec_len, "%s %s: it reaches %g test accuracy in %.1f s (%.0f images/s); the soonest, %s, was "
             "not %.1fx sooner (%.1f s)", s->baseline < 0 ? "stay on" : "use", what, target, s->target_s,
             s->images_per_s, fast, PT_SCALE_SOONER, c[soonest].target_s);
    return;
  }
  /* Any rough figure could reorder them: no recommendation on throughput. */
  int rough = 0, ran = 0, first = -1;
  for (int i = 0; i < n; i++) {
    if (!c[i].ran) continue;
    ran++;
    if (c[i].rough && !rough++) first = i;
  }
  if (rough) {
    const pt_scale_config *r = &c[first];
    snprintf(rec, rec_len, "none to trust: %d of %d measurements are rough (%s, %d worker%s: %.560s); run again "
             "with a larger --steps", rough, ran, pt_scale_strategy_name(r->strategy), r->workers,
             r->workers == 1 ? "" : "s", r->rough_why);
    return;
  }
  const pt_scale_config *b = &c[best];
  if (b->baseline >= 0 && !c[b->baseline].ran) {
    /* Its baseline failed or was stopped: neither "stay on" that one
     * worker, which has no rate, nor "use" a speed-up never measured. */
    const pt_scale_config *one = &c[b->baseline];
    describe(b, what, sizeof what);
    snprintf(rec, rec_len, "no recommendation: the one-worker baseline (%d thread%s) %s: %.560s; %s ran at %.0f "
             "images/s, with nothing to compare it with", one->threads, one->threads == 1 ? "" : "s",
             one->runnable ? "failed" : "was not run", one->why, what, b->images_per_s);
    return;
  }
  if (b->baseline < 0 || !(b->speedup >= 1.1)) {
    /* One worker of the same threads, batch and optimizer as the fastest,
     * with its own rate: the fastest's is a parallel one's. */
    const pt_scale_config *one = b->baseline < 0 ? b : &c[b->baseline];
    describe(one, what, sizeof what);
    if (parallel)
      snprintf(rec, rec_len, "stay on %s: %.0f images/s, and no parallel configuration was 1.1x faster", what,
               one->images_per_s);
    else
      snprintf(rec, rec_len, "stay on %s: %.0f images/s (the sweep had no parallel configuration to compare)",
               what, one->images_per_s);
  } else {
    describe(b, what, sizeof what);
    snprintf(rec, rec_len, "use %s: %.0f images/s, %.2fx one worker", what, b->images_per_s, b->speedup);
  }
}
