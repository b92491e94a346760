/* ptrain scale --report DIR: the speed-up chart (PNG and SVG) and a
 * markdown report that embeds it, with the table and the verdicts. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "plot/chart.h"
#include "scale/scale.h"

/* Configurations of one strategy at one (threads, batch, optimizer): the
 * baseline's point (1, 1) and each measured worker count, in order. */
typedef struct {
  double x[PT_SCALE_MAX_LIST + 1], y[PT_SCALE_MAX_LIST + 1];
  int n;
} points;

/* One cell of the table: v * scale in fmt, or "-" where v is not a number. */
static void cell(FILE *f, const char *fmt, double v, double scale) {
  if (!isfinite(v)) {
    fprintf(f, " - |");
    return;
  }
  fputc(' ', f);
  fprintf(f, fmt, v * scale);
  fprintf(f, " |");
}

static int same_setting(const pt_scale_config *a, const pt_scale_config *b) {
  return a->baseline == b->baseline;
}

/* Test loss and accuracy against time, one line per configuration that
 * made the run to the target. */
static pt_status write_curves(const char *dir, const pt_scale_config *c, int n, double target, int *wrote) {
  *wrote = 0;
  pt_figure fig = {.npanels = 2};
  pt_panel *l = &fig.panels[0], *a = &fig.panels[1];
  snprintf(l->title, sizeof l->title, "test loss");
  snprintf(a->title, sizeof a->title, "test accuracy (target %g)", target);
  snprintf(l->xlabel, sizeof l->xlabel, "seconds of training");
  snprintf(a->xlabel, sizeof a->xlabel, "seconds of training");
  snprintf(l->ylabel, sizeof l->ylabel, "loss");
  snprintf(a->ylabel, sizeof a->ylabel, "accuracy");
  l->x_from_zero = a->x_from_zero = 1; /* both from the start, as the target line is */
  for (int i = 0; i < n && l->nseries < PT_CHART_MAX_SERIES - 1; i++) {
    const pt_scale_config *x = &c[i];
    if (!x->ran || x->curve_n == 0) continue;
    char label[96];
    snprintf(label, sizeof label, "%s x %d, %d thr, batch %d%s%s", pt_scale_strategy_name(x->strategy), x->workers,
             x->threads, x->batch, x->optimizer ? ", " : "", x->optimizer ? x->optimizer : "");
    pt_series *sl = &l->series[l->nseries++], *sa = &a->series[a->nseries++];
    *sl = (pt_series){.x = x->curve_t, .y = x->curve_loss, .n = x->curve_n};
    *sa = (pt_series){.x = x->curve_t, .y = x->curve_acc, .n = x->curve_n};
    snprintf(sl->label, sizeof sl->label, "%s", label);
    snprintf(sa->label, sizeof sa->label, "%s", label);
  }
  if (!l->nseries) return PT_OK;
  static double tx[2], ty[2];
  tx[0] = 0, tx[1] = 0;
  for (int k = 0; k < a->nseries; k++)
    for (int j = 0; j < a->series[k].n; j++)
      if (a->series[k].x[j] > tx[1]) tx[1] = a->series[k].x[j];
  ty[0] = ty[1] = target;
  pt_series *t = &a->series[a->nseries++];
  *t = (pt_series){.x = tx, .y = ty, .n = 2, .dashed = 1};
  snprintf(t->label, sizeof t->label, "target");
  char path[4200];
  snprintf(path, sizeof path, "%s/curves.png", dir);
  PT_TRY(pt_figure_write(&fig, path));
  snprintf(path, sizeof path, "%s/curves.svg", dir);
  PT_TRY(pt_figure_write(&fig, path));
  *wrote = 1;
  return PT_OK;
}

pt_status pt_scale_report(const char *dir, const char *title, const pt_scale_config *c, int n, double target,
                          const char *rec) {
  if (mkdir(dir, 0755) && errno != EEXIST) return pt_fail_errno(PT_ERR_IO, "cannot create the report directory %s", dir);
  pt_figure fig = {.npanels = 1};
  pt_panel *p = &fig.panels[0];
  snprintf(p->title, sizeof p->title, "speed-up over one worker");
  snprintf(p->xlabel, sizeof p->xlabel, "workers");
  snprintf(p->ylabel, sizeof p->ylabel, "speed-up (images/s over one worker's)");
  p->y_from_zero = 1;
  p->x_whole = 1; /* workers */
  static points pts[PT_CHART_MAX_SERIES];
  int settings = 0, maxw = 1;
  for (int i = 0; i < n; i++)
    if (c[i].baseline < 0) settings++;
  for (int i = 0; i < n; i++) {
    const pt_scale_config *x = &c[i];
    if (x->baseline < 0 || !x->ran || !isfinite(x->speedup)) continue;
    if (x->workers > maxw) maxw = x->workers;
    int s = -1;
    /* the series of this strategy and setting */
    for (int k = 0; k < p->nseries && s < 0; k++) {
      const int j = (int)pts[k].x[PT_SCALE_MAX_LIST]; /* the configuration that opened it */
      if (c[j].strategy == x->strategy && same_setting(&c[j], x)) s = k;
    }
    if (s < 0) {
      if (p->nseries == PT_CHART_MAX_SERIES - 1) continue;
      s = p->nseries++;
      pts[s].n = 1;
      pts[s].x[0] = 1.0, pts[s].y[0] = 1.0; /* one worker is the baseline itself */
      pts[s].x[PT_SCALE_MAX_LIST] = i;
      const pt_scale_config *b = &c[x->baseline];
      if (settings > 1)
        snprintf(p->series[s].label, sizeof p->series[s].label, "%s, %d thread%s, batch %d, %s",
                 pt_scale_strategy_name(x->strategy), b->threads, b->threads == 1 ? "" : "s", b->batch,
                 b->optimizer ? b->optimizer : "model's optimizer");
      else
        snprintf(p->series[s].label, sizeof p->series[s].label, "%s", pt_scale_strategy_name(x->strategy));
    }
    if (pts[s].n < PT_SCALE_MAX_LIST) { /* in order of workers, as --workers 4,3,2 may not be */
      int j = pts[s].n++;
      for (; j > 0 && pts[s].x[j - 1] > x->workers; j--) pts[s].x[j] = pts[s].x[j - 1], pts[s].y[j] = pts[s].y[j - 1];
      pts[s].x[j] = x->workers;
      pts[s].y[j] = x->speedup;
    }
  }
  for (int k = 0; k < p->nseries; k++) {
    p->series[k].x = pts[k].x;
    p->series[k].y = pts[k].y;
    p->series[k].n = pts[k].n;
  }
  static double ideal_x[2], ideal_y[2];
  ideal_x[0] = ideal_y[0] = 1.0;
  ideal_x[1] = ideal_y[1] = maxw > 1 ? maxw : 2;
  pt_series *id = &p->series[p->nseries++];
  *id = (pt_series){.x = ideal_x, .y = ideal_y, .n = 2, .dashed = 1};
  snprintf(id->label, sizeof id->label, "ideal (workers x one worker)");

  char path[4200];
  snprintf(path, sizeof path, "%s/speedup.png", dir);
  PT_TRY(pt_figure_write(&fig, path));
  snprintf(path, sizeof path, "%s/speedup.svg", dir);
  PT_TRY(pt_figure_write(&fig, path));

  int curves = 0;
  if (target > 0) PT_TRY(write_curves(dir, c, n, target, &curves));
  snprintf(path, sizeof path, "%s/report.md", dir);
  FILE *f = fopen(path, "w");
  if (!f) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  fprintf(f, "# Does parallelism pay? %s\n\n", title);
  fprintf(f, "**Recommendation:** %s.\n\n", rec);
  fprintf(f, "![speed-up against workers](speedup.svg)\n\n");
  if (curves) fprintf(f, "![test loss and accuracy against time](curves.svg)\n\n");
  fprintf(f, "| strategy | workers | threads | global batch | per worker | optimizer | images/s | speed-up | "
             "efficiency | communication | waiting for data | bubble | peak MiB | seconds to target |\n");
  fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n; i++) {
    const pt_scale_config *x = &c[i];
    fprintf(f, "| %s | %d | %d | %d |", pt_scale_strategy_name(x->strategy), x->workers, x->threads, x->batch);
    /* A figure not measured (a run that did not happen, a result without
     * it, a speed-up with no baseline) is "-", as in the printed table. */
    if (x->worker_batch > 0) fprintf(f, " %d |", x->worker_batch);
    else fprintf(f, " - |");
    fprintf(f, " %s |", x->optimizer ? x->optimizer : "the model's");
    if (!x->ran) {
      fprintf(f, " - | - | - | - | - | - | - | - |\n");
      continue;
    }
    const double step = x->ms_per_step > 0 ? x->ms_per_step : 1;
    cell(f, "%.0f", x->images_per_s, 1);
    cell(f, x->rough ? "%.2fx (rough)" : "%.2fx", x->speedup, 1); /* its verdict says why */
    cell(f, "%.0f%%", x->efficiency, 100);
    cell(f, "%.0f%%", x->comm_ms / step, 100);
    cell(f, "%.0f%%", x->data_ms / step, 100);
    cell(f, "%.0f%%", x->bubble, 100);
    cell(f, "%.0f", x->peak_rss_mb, 1);
    cell(f, "%.1f", x->target_s, 1);
    fprintf(f, "\n");
  }
  fprintf(f, "\n## Verdicts\n\n");
  for (int i = 0; i < n; i++) fprintf(f, "- %s\n", c[i].verdict);
  fprintf(f, "\n## How this was measured\n\n"
             "Each configuration ran `ptrain train --profile` twice, for a few steps and for more; the difference "
             "of the two runs is its steady state, with start-up, loading and the first steps cancelled. "
             "Speed-ups are against one worker at the same threads, batch and optimizer. Every measurement is in "
             "`scale.jsonl`.\n");
  if (fclose(f)) return pt_fail_errno(PT_ERR_IO, "cannot write %s", path);
  return PT_OK;
}
