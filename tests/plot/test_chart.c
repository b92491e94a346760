/* Charts a reader can read: no two series look alike, the legend hides no
 * data, and a figure that cannot be written whole leaves no file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "plot/chart.h"
#include "plot/legend.h"
#include "plot/run_label.h"
#include "plot/series_style.h"

#include "../file_size_limit.h"
#include "../tmpdir.h"

static int same_look(const pt_series_style *a, const pt_series_style *b) {
  if (memcmp(a->rgb, b->rgb, sizeof a->rgb) || a->mark != b->mark || a->ndash != b->ndash) return 0;
  for (int i = 0; i < a->ndash; i++)
    if (a->dash[i] != b->dash[i]) return 0;
  return 1;
}

/* The most series a figure holds, and the reference line: all different. */
static void test_every_series_looks_different(void **st) {
  (void)st;
  pt_series_style s[PT_CHART_MAX_SERIES + 1];
  for (int k = 0; k < PT_CHART_MAX_SERIES; k++) pt_series_style_of(k, 0, &s[k]);
  pt_series_style_of(0, 1, &s[PT_CHART_MAX_SERIES]);
  for (int a = 0; a <= PT_CHART_MAX_SERIES; a++)
    for (int b = a + 1; b <= PT_CHART_MAX_SERIES; b++)
      if (same_look(&s[a], &s[b])) fail_msg("series %d and %d look the same", a, b);
  /* The first colours are all different, so few series need no dashes. */
  for (int a = 0; a < PT_STYLE_NCOLOURS; a++) {
    assert_int_equal(s[a].ndash, 0);
    for (int b = a + 1; b < PT_STYLE_NCOLOURS; b++) assert_true(memcmp(s[a].rgb, s[b].rgb, sizeof s[a].rgb) != 0);
  }
}

/* A 500 x 300 pixel plot area showing 0..1 on both axes. */
static const pt_chart_frame frame = {.L = 100, .R = 600, .T = 50, .B = 350, .x0 = 0, .x1 = 1, .y0 = 0, .y1 = 1};

static pt_panel panel_of(const double *x, const double *y, int n) {
  pt_panel p = {.nseries = 1};
  p.series[0] = (pt_series){.x = x, .y = y, .n = n};
  return p;
}

/* A loss curve falls from the upper left to the lower right: the upper left
 * is taken, the upper right is free. */
static void test_legend_avoids_a_falling_curve(void **st) {
  (void)st;
  const double x[] = {0, 0.1, 0.2, 0.4, 0.7, 1.0}, y[] = {1.0, 0.6, 0.4, 0.25, 0.15, 0.1};
  pt_panel p = panel_of(x, y, 6);
  double lx, ly;
  assert_int_equal(pt_legend_place(&p, &frame, 150, 60, &lx, &ly), PT_LEGEND_UPPER_RIGHT);
  assert_true(lx + 150 <= frame.R && lx >= frame.L && ly >= frame.T);
  /* A rising accuracy curve leaves the upper left. */
  const double acc[] = {0.1, 0.5, 0.7, 0.8, 0.85, 0.9};
  p = panel_of(x, acc, 6);
  assert_int_equal(pt_legend_place(&p, &frame, 150, 60, &lx, &ly), PT_LEGEND_UPPER_LEFT);
}

/* A line between two points far outside the upper left box still crosses
 * it: the box is not free although no point lies in it. */
static void test_legend_avoids_lines_not_only_points(void **st) {
  (void)st;
  const double x[] = {0.0, 0.5}, y[] = {0.6, 1.0};
  pt_panel p = panel_of(x, y, 2);
  double lx, ly;
  assert_int_equal(pt_legend_place(&p, &frame, 150, 60, &lx, &ly), PT_LEGEND_UPPER_RIGHT);
  /* The same points with a gap (NaN) between them draw no line. */
  const double xg[] = {0.0, NAN, 0.5}, yg[] = {0.6, NAN, 1.0};
  p = panel_of(xg, yg, 3);
  assert_int_equal(pt_legend_place(&p, &frame, 150, 60, &lx, &ly), PT_LEGEND_UPPER_LEFT);
}

/* Data along the top and the bottom edges: no corner is free, and a
 * legend taller than the plot never fits; both go below. */
static void test_legend_goes_below_when_no_corner_is_free(void **st) {
  (void)st;
  const double x[] = {0, 1}, top[] = {1, 1}, bottom[] = {0, 0};
  pt_panel p = {.nseries = 2};
  p.series[0] = (pt_series){.x = x, .y = top, .n = 2};
  p.series[1] = (pt_series){.x = x, .y = bottom, .n = 2, .dashed = 1};
  double lx, ly;
  assert_int_equal(pt_legend_place(&p, &frame, 150, 60, &lx, &ly), PT_LEGEND_BELOW);
  pt_panel empty = {.nseries = 0};
  assert_int_equal(pt_legend_place(&empty, &frame, 150, 400, &lx, &ly), PT_LEGEND_BELOW);
  assert_int_equal(pt_legend_place(&empty, &frame, 150, 60, &lx, &ly), PT_LEGEND_UPPER_LEFT);
}

/* Every point, and so its marker, lies inside the frame with room to
 * spare: a target line at the lowest accuracy drawn is not hidden in the
 * frame's edge. An axis that starts at 0 starts there exactly. */
static void test_range_keeps_points_off_the_frame(void **st) {
  (void)st;
  const double t[] = {0.087, 0.090, 0.094}, acc[] = {0.750, 0.753, 0.756};
  pt_panel p = panel_of(t, acc, 3);
  double lo, hi;
  pt_chart_range(&p, 1, &lo, &hi);
  const double span = 0.756 - 0.750;
  assert_true(lo <= 0.750 - 0.04 * span && hi >= 0.756 + 0.04 * span);
  assert_true(lo > 0.7 && hi < 0.8); /* a margin, not a zoom out */
  pt_chart_range(&p, 0, &lo, &hi);
  assert_true(lo < 0.087 && hi > 0.094 && lo > 0.08);
  p.x_from_zero = 1;
  pt_chart_range(&p, 0, &lo, &hi);
  assert_true(lo == 0 && hi > 0.094);
  const double w[] = {1, 2, 4}, up[] = {1, 1.8, 3.1};
  p = panel_of(w, up, 3);
  p.y_from_zero = 1;
  pt_chart_range(&p, 1, &lo, &hi);
  assert_true(lo == 0 && hi > 3.1);
  pt_chart_range(&p, 0, &lo, &hi);
  assert_true(lo < 1 && hi > 4);
}

static int only_entry(const char *dir, const char *name) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int ok = 1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (!name || strcmp(e->d_name, name))) ok = 0;
  closedir(d);
  return ok;
}

static double xs[16][5], ys[16][5];

/* 16 series that cross the whole plot: the legend cannot sit inside. */
static pt_figure crowded(void) {
  pt_figure f = {.npanels = 1};
  pt_panel *p = &f.panels[0];
  for (int s = 0; s < PT_CHART_MAX_SERIES; s++) {
    for (int i = 0; i < 5; i++) xs[s][i] = i, ys[s][i] = (s % 2 ? 4 - i : i) + 0.01 * s;
    p->series[s] = (pt_series){.x = xs[s], .y = ys[s], .n = 5};
    snprintf(p->series[s].label, sizeof p->series[s].label, "run %d with a long label", s);
  }
  p->nseries = PT_CHART_MAX_SERIES;
  return f;
}

/* A legend below the plot makes the figure taller, not the plot smaller. */
static void test_figure_grows_for_a_legend_below(void **st) {
  (void)st;
  char path[128];
  snprintf(path, sizeof path, "%s/crowded.png", tmpdir);
  pt_figure f = crowded();
  if (pt_figure_write(&f, path) != PT_OK) fail_msg("%s", pt_error_message());
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  unsigned char h[24];
  assert_int_equal(fread(h, 1, 24, fp), 24);
  fclose(fp);
  assert_memory_equal(h, "\x89PNG\r\n\x1a\n", 8);
  const unsigned w = (unsigned)h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19];
  const unsigned ht = (unsigned)h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23];
  assert_int_equal(w, 640);
  assert_true(ht > 420);
}

/* A write that fails part-way (the file size limit, as a full disk would)
 * leaves no file, neither the image nor its temporary, and an image there
 * before keeps its content; both formats. */
static void test_failed_write_leaves_no_file(void **st) {
  (void)st;
  char dir[128], path[160];
  snprintf(dir, sizeof dir, "%s/full", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  pt_figure f = crowded();
  assert_int_equal(file_size_limit(2000), 0);
  const char *names[] = {"p.png", "p.svg"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    assert_int_equal(pt_figure_write(&f, path), PT_ERR_IO);
    assert_non_null(strstr(pt_error_message(), path));
    assert_true(only_entry(dir, NULL));
  }
  /* An older image is kept whole. */
  snprintf(path, sizeof path, "%s/p.png", dir);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fputs("old", fp);
  fclose(fp);
  assert_int_equal(pt_figure_write(&f, path), PT_ERR_IO);
  assert_true(only_entry(dir, "p.png"));
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_size, 3);
  assert_int_equal(file_size_unlimit(NULL), 0);
}

/* Values so large that a step of 1 or of the tick spacing does not change
 * them (a diverged loss of 2e16, 1e17 seconds): the figure is drawn, in
 * finite time, rather than the tick loop standing still. */
static void test_huge_flat_values_are_drawn(void **st) {
  (void)st;
  static const double one_x[1] = {12.5}, one_y[1] = {2e16};
  static const double far_x[2] = {1e17, 1e17}, far_y[2] = {1e17, 1e17};
  const double *xs[2] = {one_x, far_x}, *ys[2] = {one_y, far_y};
  const int ns[2] = {1, 2};
  for (int c = 0; c < 2; c++) {
    pt_figure f;
    memset(&f, 0, sizeof f);
    f.npanels = 1;
    pt_panel *p = &f.panels[0];
    snprintf(p->title, sizeof p->title, "loss");
    p->nseries = 1;
    p->series[0] = (pt_series){.x = xs[c], .y = ys[c], .n = ns[c]};
    snprintf(p->series[0].label, sizeof p->series[0].label, "run");
    char path[160];
    snprintf(path, sizeof path, "%s/huge%d.svg", tmpdir, c);
    if (pt_figure_write(&f, path) != PT_OK) fail_msg("%s", pt_error_message());
  }
}

/* Runs named apart in the legend: the file name, and as many directories
 * as tell same-named files apart. */
static void test_run_labels_tell_runs_apart(void **st) {
  (void)st;
  const char *const a[3] = {"x/adam/metrics.jsonl", "x/sgd/metrics.jsonl", "other.jsonl"};
  assert_string_equal(pt_run_label(a, 3, 0), "adam/metrics.jsonl");
  assert_string_equal(pt_run_label(a, 3, 1), "sgd/metrics.jsonl");
  assert_string_equal(pt_run_label(a, 3, 2), "other.jsonl");
  const char *const b[2] = {"/runs/1/m.jsonl", "m.jsonl"};
  assert_string_equal(pt_run_label(b, 2, 0), "1/m.jsonl");
  assert_string_equal(pt_run_label(b, 2, 1), "m.jsonl");
  /* Long names that differ only at the end stay apart when shortened. */
  const char *base = "experiment_fashion_mnist_mlp_sweep_learning_rate_schedule_cosine_warmup_500_steps";
  char la[100], lb[100], name[200];
  snprintf(name, sizeof name, "%s_adam.jsonl", base);
  pt_run_label_fit(la, sizeof la, name, 72);
  snprintf(name, sizeof name, "%s_sgd.jsonl", base);
  pt_run_label_fit(lb, sizeof lb, name, 72);
  assert_int_equal(strlen(la), 72);
  assert_string_not_equal(la, lb);
  assert_non_null(strstr(la, "..."));
  assert_non_null(strstr(lb, "steps_sgd.jsonl"));
  assert_int_equal(strncmp(la, "experiment_", 11), 0);
  pt_run_label_fit(la, sizeof la, "short.jsonl", 72);
  assert_string_equal(la, "short.jsonl");
  const char *const same[2] = {"r/m.jsonl", "r/m.jsonl"}; /* the same file twice: its whole path */
  assert_string_equal(pt_run_label(same, 2, 0), "r/m.jsonl");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_series_looks_different),
      cmocka_unit_test(test_range_keeps_points_off_the_frame),
      cmocka_unit_test(test_legend_avoids_a_falling_curve),
      cmocka_unit_test(test_legend_avoids_lines_not_only_points),
      cmocka_unit_test(test_legend_goes_below_when_no_corner_is_free),
      cmocka_unit_test(test_figure_grows_for_a_legend_below),
      cmocka_unit_test(test_huge_flat_values_are_drawn),
      cmocka_unit_test(test_run_labels_tell_runs_apart),
      cmocka_unit_test_teardown(test_failed_write_leaves_no_file, file_size_unlimit),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
