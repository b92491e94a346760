/* Expanding a sweep into configurations, and saying which cannot run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scale/scale.h"

const char *pt_scale_strategy_name(pt_scale_strategy s) {
  switch (s) {
    case PT_SCALE_NONE: return "none";
    case PT_SCALE_DP: return "dp";
    case PT_SCALE_DDP: return "ddp";
    case PT_SCALE_PIPELINE: return "pipeline";
  }
  return "?";
}

/* The next item of a comma-separated list at *p, of *len characters; an
 * empty one (",1", "1,,2", "1,") is refused, as a slip that would
 * otherwise drop a value unseen. */
static pt_status next_item(const char *flag, const char *text, const char **p, size_t *len) {
  *len = strcspn(*p, ",");
  if (*len == 0) return pt_fail(PT_ERR_ARG, "%s: an empty entry in '%s'", flag, text);
  if ((*p)[*len] == ',' && !(*p)[*len + 1]) return pt_fail(PT_ERR_ARG, "%s: a trailing comma in '%s'", flag, text);
  return PT_OK;
}

/* A value measured twice would be two rows of one configuration. */
static pt_status add_item(const char *flag, const char *text, int count, int seen) {
  if (seen) return pt_fail(PT_ERR_ARG, "%s: an entry given twice in '%s'", flag, text);
  if (count == PT_SCALE_MAX_LIST)
    return pt_fail(PT_ERR_ARG, "%s: at most %d values, got '%s'", flag, PT_SCALE_MAX_LIST, text);
  return PT_OK;
}

pt_status pt_scale_parse_ints(const char *flag, const char *text, int lo, int hi, int *out, int *n) {
  *n = 0;
  for (const char *p = text; *p;) {
    size_t len;
    PT_TRY(next_item(flag, text, &p, &len));
    char *end;
    errno = 0;
    const long v = strtol(p, &end, 10);
    if (end != p + len || errno || v < lo || v > hi || *p == '+' || *p == ' ')
      return pt_fail(PT_ERR_ARG, "%s: expected a comma-separated list of integers in [%d, %d], got '%s'", flag, lo,
                     hi, text);
    int seen = 0;
    for (int i = 0; i < *n; i++) seen |= out[i] == v;
    PT_TRY(add_item(flag, text, *n, seen));
    out[(*n)++] = (int)v;
    p += len + (p[len] == ',');
  }
  if (*n == 0) return pt_fail(PT_ERR_ARG, "%s: expected a comma-separated list of integers, got '%s'", flag, text);
  return PT_OK;
}

/* "a,b" over names[0..count): each entry's index into out, *n of them;
 * what: "strategy", expected: the choices as the message says them. */
static pt_status parse_names(const char *flag, const char *text, const char *const *names, int count,
                             const char *what, const char *expected, int *out, int *n) {
  *n = 0;
  for (const char *p = text; *p;) {
    size_t len;
    PT_TRY(next_item(flag, text, &p, &len));
    int k = -1;
    for (int i = 0; i < count; i++)
      if (strlen(names[i]) == len && !strncmp(p, names[i], len)) k = i;
    if (k < 0)
      return pt_fail(PT_ERR_ARG, "%s: unknown %s '%.*s' in '%s' (expected %s)", flag, what, (int)len, p, text,
                     expected);
    int seen = 0;
    for (int i = 0; i < *n; i++) seen |= out[i] == k;
    PT_TRY(add_item(flag, text, *n, seen));
    out[(*n)++] = k;
    p += len + (p[len] == ',');
  }
  if (!*n) return pt_fail(PT_ERR_ARG, "%s: expected a list such as %s,%s, got '%s'", flag, names[0], names[1], text);
  return PT_OK;
}

pt_status pt_scale_parse_strategies(const char *text, pt_scale_sweep *sw) {
  static const char *const names[] = {"none", "dp", "ddp", "pipeline"};
  int k[PT_SCALE_MAX_LIST];
  PT_TRY(parse_names("--strategies", text, names, 4, "strategy", "none, dp, ddp or pipeline", k, &sw->nstrategies));
  for (int i = 0; i < sw->nstrategies; i++) sw->strategies[i] = (pt_scale_strategy)k[i];
  return PT_OK;
}

pt_status pt_scale_parse_optimizers(const char *text, pt_scale_sweep *sw) {
  static const char *const names[] = {"sgd", "adam", "adamw", "adadelta"};
  int k[PT_SCALE_MAX_LIST];
  PT_TRY(parse_names("--optimizers", text, names, 4, "optimizer", "sgd, adam, adamw or adadelta", k,
                     &sw->noptimizers));
  for (int i = 0; i < sw->noptimizers; i++) sw->optimizers[i] = names[k[i]];
  return PT_OK;
}

/* Whether c can run, and if not why (into c->why). */
static void check(pt_scale_config *c, const pt_scale_sweep *sw, int cores, int have_mpi, int gpus,
                  const char *gpu_why) {
  c->runnable = 1;
  /* Each stage needs a layer of its own: train would refuse the run. */
  if (c->strategy == PT_SCALE_PIPELINE && sw->max_stages > 0 && c->workers > sw->max_stages) {
    c->runnable = 0;
    snprintf(c->why, sizeof c->why, "%d stages, but the model has %d layers a stage can hold (all but flatten)",
             c->workers, sw->max_stages);
    return;
  }
  if (gpus == 0) {
    c->runnable = 0;
    snprintf(c->why, sizeof c->why, "no GPU: %.200s", gpu_why && *gpu_why ? gpu_why : "none found");
    return;
  }
  /* one worker, or one stage, per GPU: NCCL refuses two ranks on one */
  if (gpus > 0 && c->workers > gpus) {
    c->runnable = 0;
    snprintf(c->why, sizeof c->why, "%d workers need %d GPUs, one each; this machine has %d", c->workers, c->workers,
             gpus);
    return;
  }
  if (c->strategy == PT_SCALE_DDP && !have_mpi) {
    c->runnable = 0;
    snprintf(c->why, sizeof c->why,
             "ddp needs mpirun and a ptrain built with MPI (apt-get install openmpi-bin libopenmpi-dev)");
    return;
  }
  if (c->batch > 0 && c->strategy != PT_SCALE_PIPELINE && c->strategy != PT_SCALE_NONE && c->worker_batch == 0) {
    c->runnable = 0;
    snprintf(c->why, sizeof c->why, "the global batch %d does not split into %d equal shares", c->batch,
             c->workers);
    return;
  }
  /* Oversubscribed configurations run: that more workers than cores is
   * slower is one of the things to measure. Absurd ones do not. */
  if (c->workers * c->threads > 8 * cores) {
    c->runnable = 0;
    snprintf(c->why, sizeof c->why, "%d workers x %d threads on %d cores: more than 8 threads a core",
             c->workers, c->threads, cores);
  }
}

pt_status pt_scale_expand(const pt_scale_sweep *sw, int cores, int have_mpi, int gpus, const char *gpu_why,
                          pt_scale_config **out, int *n) {
  const size_t most = (size_t)sw->noptimizers * sw->nbatches * sw->nthreads * (1 + 3 * (size_t)sw->nworkers);
  pt_scale_config *c = calloc(most ? most : 1, sizeof *c);
  if (!c) return pt_fail(PT_ERR_NOMEM, "out of memory for %zu configurations", most);
  int k = 0;
  for (int o = 0; o < sw->noptimizers; o++)
    for (int b = 0; b < sw->nbatches; b++)
      for (int t = 0; t < sw->nthreads; t++) {
        /* the baseline first: one worker; the strategies only from 2 */
        pt_scale_config base = {.strategy = PT_SCALE_NONE, .workers = 1, .threads = sw->threads[t],
                                .batch = sw->batches[b], .worker_batch = sw->batches[b],
                                .optimizer = sw->optimizers[o], .baseline = -1};
        check(&base, sw, cores, have_mpi, gpus, gpu_why);
        const int b0 = k;
        c[k++] = base;
        for (int s = 0; s < sw->nstrategies; s++) {
          if (sw->strategies[s] == PT_SCALE_NONE) continue;
          for (int w = 0; w < sw->nworkers; w++) {
            const int W = sw->workers[w];
            if (W < 2) continue;
            pt_scale_config x = base;
            x.strategy = sw->strategies[s];
            x.workers = W;
            x.baseline = b0;
            /* dp and ddp: each worker takes --batch-size samples a step;
             * a pipeline's stages pass one batch along */
            if (x.strategy == PT_SCALE_PIPELINE || sw->per_worker || x.batch == 0)
              x.worker_batch = x.batch;
            else
              x.worker_batch = x.batch % W ? 0 : x.batch / W;
            if (sw->per_worker && x.batch > 0 && x.strategy != PT_SCALE_PIPELINE) x.batch = x.worker_batch * W;
            check(&x, sw, cores, have_mpi, gpus, gpu_why);
            c[k++] = x;
          }
        }
      }
  *out = c;
  *n = k;
  return PT_OK;
}
