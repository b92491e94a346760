/* The curves of ptrain train --metrics files, read for a chart. */
#include "plot/metrics_runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

void pt_run_curve_free(pt_run_curve *c) {
  free(c->t), free(c->train_loss), free(c->test_loss), free(c->acc);
  memset(c, 0, sizeof *c);
}

static int run_grow(pt_run_curve *c) {
  const int cap = c->cap ? 2 * c->cap : 64;
  double **a[4] = {&c->t, &c->train_loss, &c->test_loss, &c->acc};
  for (int k = 0; k < 4; k++) {
    double *p = realloc(*a[k], (size_t)cap * sizeof(double));
    if (!p) return -1;
    *a[k] = p;
  }
  c->cap = cap;
  return 0;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The "eval" lines of the epoch in progress (--eval-every): their x is
 * known only at its epoch line, between the end of the epoch before and
 * its own, by step. (n, 5): step, train loss, test loss, accuracy, and
 * the seconds since the run's start (for a run with no epoch line yet). */
typedef struct {
  double *v;
  int n, cap;
} pending_evals;

static int pending_add(pending_evals *p, const cJSON *o) {
  if (p->n == p->cap) {
    const int cap = p->cap ? 2 * p->cap : 64;
    double *v = realloc(p->v, (size_t)cap * 5 * sizeof(double));
    if (!v) return -1;
    p->v = v;
    p->cap = cap;
  }
  double *e = p->v + (size_t)p->n++ * 5;
  e[0] = num(o, "step"), e[1] = num(o, "train_loss"), e[2] = num(o, "test_loss"), e[3] = num(o, "test_acc");
  e[4] = num(o, "seconds");
  return 0;
}

/* A point of the curve, its missing or non-finite values counted into
 * *nonfinite. Returns -1 out of memory, else whether it draws anything
 * (one value at least is finite). */
static int add_point(pt_run_curve *c, double t, double train_loss, double test_loss, double acc, int *nonfinite) {
  if (c->n == c->cap && run_grow(c)) return -1;
  c->t[c->n] = t, c->train_loss[c->n] = train_loss, c->test_loss[c->n] = test_loss, c->acc[c->n] = acc;
  c->n++;
  const int finite = isfinite(train_loss) + isfinite(test_loss) + isfinite(acc);
  *nonfinite += finite < 3;
  return finite > 0;
}

/* The pending evaluations after step0 (at x0) and before step1 (at x1,
 * the epoch line's own point, which the evaluation at its step repeats),
 * placed by step; the caller then clears them. Returns -1 out of memory,
 * else how many were drawn. */
static int place_pending(pt_run_curve *c, pending_evals *p, double step0, double x0, double step1, double x1,
                         int *nonfinite) {
  int drawn = 0;
  for (int i = 0; i < p->n; i++) {
    const double *e = p->v + (size_t)i * 5;
    if (!(e[0] > step0 && e[0] < step1)) continue;
    const int d = add_point(c, x0 + (e[0] - step0) / (step1 - step0) * (x1 - x0), e[1], e[2], e[3], nonfinite);
    if (d < 0) return -1;
    drawn += d;
  }
  return drawn;
}

/* The evaluations after a file's last epoch line (a run inside an epoch,
 * still writing or stopped): no line ends their epoch, so their x is
 * carried on from the last epoch line at the run's pace so far, x per
 * step (NaN: unknown), or, in a run with no epoch line yet, on the time
 * axis, their own seconds since the start. Returns -1 out of memory, else
 * how many were drawn; *left counts those that could not be placed. */
static int place_trailing(pt_run_curve *c, const pending_evals *p, double step0, double x0, double per_step,
                          int own_seconds, int *nonfinite, int *left) {
  int drawn = 0;
  for (int i = 0; i < p->n; i++) {
    const double *e = p->v + (size_t)i * 5;
    if (!own_seconds && !(e[0] > step0)) continue; /* the last epoch line's own point */
    const double x = own_seconds ? e[4] : x0 + (e[0] - step0) * per_step;
    if (!isfinite(x)) {
      (*left)++;
      continue;
    }
    const int d = add_point(c, x, e[1], e[2], e[3], nonfinite);
    if (d < 0) return -1;
    drawn += d;
  }
  return drawn;
}

pt_status pt_plot_read_runs(const char *path, int by_epoch, pt_run_curve *out, int *n, int max, pt_runs_notes *notes) {
  memset(notes, 0, sizeof *notes);
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return pt_fail(PT_ERR_IO, "%s: is a directory (expected a file written by ptrain train --metrics FILE)", path);
  FILE *f = fopen(path, "r");
  if (!f) return pt_fail_errno(PT_ERR_IO, "cannot open %s", path);
  char *line = NULL; /* a line of any length */
  size_t line_cap = 0;
  ssize_t len;
  int lineno = 0, bad = 0, first_bad = 0, objects = 0, nonfinite = 0, points = 0;
  const int first = *n;
  double clock = 0.0, last_step = -1.0, partial_secs = 0.0, partial_epoch = NAN;
  double prev_step = 0.0, prev_x = 0.0; /* the last epoch line's step and x: where the pending evaluations start */
  double partial_epoch_seen = NAN;      /* the epoch of the last line, where it was partial */
  double steps_per_epoch = NAN;         /* from an epoch line that ended its epoch */
  pending_evals pend = {0};
  pt_run_curve *c = NULL;
  pt_status st = PT_OK;
  while (st == PT_OK && (len = getline(&line, &line_cap, f)) >= 0) {
    lineno++;
    if (strspn(line, " \t\r\n") == (size_t)len) continue;
    /* One object and nothing after it but white space. */
    cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
    if (o && !cJSON_IsObject(o)) {
      cJSON_Delete(o);
      o = NULL;
    }
    if (!o && line[len - 1] != '\n') {
      /* The last line cut short: a run still writing, or killed mid-line. */
      notes->unfinished_line = lineno;
      break;
    }
    if (!o) {
      if (!bad++) first_bad = lineno;
      continue;
    }
    objects++;
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "eval") && isfinite(num(o, "step"))) {
      if (pending_add(&pend, o)) {
        st = pt_fail(PT_ERR_NOMEM, "%s: out of memory at line %d", path, lineno);
        cJSON_Delete(o);
        break;
      }
    } else if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "epoch")) {
      const double step = num(o, "step");
      if (!c || (isfinite(step) && step <= last_step)) { /* a run begins */
        if (*n == max) {
          st = pt_fail(PT_ERR_ARG, "%s: with the files before it, more than %d runs, which is what one figure holds "
                                   "(a file that --metrics appended to holds a run per start)", path, max);
          cJSON_Delete(o);
          break;
        }
        c = &out[(*n)++];
        memset(c, 0, sizeof *c);
        clock = partial_secs = 0.0;
        prev_step = prev_x = 0.0;
      }
      if (isfinite(step)) last_step = step;
      /* An epoch's seconds count from its start: after a stop mid-epoch
       * (a "partial" line) the resumed run's line for that epoch holds the
       * stopped part's seconds too. */
      const double secs = num(o, "seconds"), epoch = num(o, "epoch");
      if (partial_secs > 0 && epoch == partial_epoch) clock -= partial_secs;
      if (isfinite(secs)) clock += secs;
      const int partial = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "partial"));
      partial_secs = partial && isfinite(secs) ? secs : 0.0;
      partial_epoch = epoch;
      const double x = by_epoch ? epoch : clock;
      /* The evaluations inside this epoch first, by step; in the epoch
       * axis from the epoch's start, epoch - 1 (or where a partial line
       * of the same epoch left it). */
      const double x0 = by_epoch && epoch != partial_epoch_seen ? epoch - 1 : prev_x;
      const int placed = isfinite(step) ? place_pending(c, &pend, prev_step, x0, step, x, &nonfinite) : 0;
      pend.n = 0;
      const double tl = num(o, "train_loss"), vl = num(o, "test_loss"), acc = num(o, "test_acc");
      const int drawn = placed < 0 ? -1 : add_point(c, x, tl, vl, acc, &nonfinite);
      if (drawn < 0) {
        st = pt_fail(PT_ERR_NOMEM, "%s: out of memory at line %d", path, lineno);
        cJSON_Delete(o);
        break;
      }
      points += drawn + placed;
      if (isfinite(step)) prev_step = step, prev_x = x;
      if (!partial && step > 0 && epoch >= 1) steps_per_epoch = step / epoch;
      partial_epoch_seen = partial ? epoch : NAN;
    }
    cJSON_Delete(o);
  }
  if (st == PT_OK && pend.n > 0) {
    const int own_seconds = !c && !by_epoch;
    if (!c && !by_epoch && *n == max)
      st = pt_fail(PT_ERR_ARG, "%s: with the files before it, more than %d runs, which is what one figure holds", path,
                   max);
    if (st == PT_OK && !c && !by_epoch) {
      c = &out[(*n)++];
      memset(c, 0, sizeof *c);
    }
    if (st == PT_OK && c) {
      const double per_step = by_epoch ? 1.0 / steps_per_epoch : prev_step > 0 ? prev_x / prev_step : NAN;
      const int placed = place_trailing(c, &pend, prev_step, prev_x, per_step, own_seconds, &nonfinite,
                                        &notes->evals_left_out);
      if (placed < 0) st = pt_fail(PT_ERR_NOMEM, "%s: out of memory at its end", path);
      else points += placed;
    } else if (st == PT_OK) {
      notes->evals_left_out = pend.n;
    }
  }
  free(line);
  free(pend.v);
  fclose(f);
  if (st == PT_OK && !objects && bad)
    st = pt_fail(PT_ERR_FORMAT, "%s:%d: not a JSON object (expected the JSON lines of ptrain train --metrics)", path,
                 first_bad);
  else if (st == PT_OK && *n == first && notes->evals_left_out)
    st = pt_fail(PT_ERR_FORMAT, "%s: evaluations, but no epoch has ended, so they have no place on the epoch axis: "
                                "plot them against training time (leave out --x epoch)", path);
  else if (st == PT_OK && *n == first)
    st = pt_fail(PT_ERR_FORMAT, "%s: no \"epoch\" or \"eval\" lines (expected a file written by ptrain train "
                                "--metrics)", path);
  else if (st == PT_OK && !points)
    st = pt_fail(PT_ERR_FORMAT, "%s: no epoch line has a finite loss or accuracy (NaN or infinite: a run that "
                                "diverged?): nothing to draw", path);
  if (st != PT_OK) {
    while (*n > first) pt_run_curve_free(&out[--*n]);
    return st;
  }
  notes->not_json = bad;
  notes->first_not_json = first_bad;
  notes->nonfinite = nonfinite;
  return PT_OK;
}

