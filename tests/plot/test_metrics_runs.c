/* ptrain plot's reading of --metrics files: every epoch however many, a
 * run per start in a file that was appended to, a resumed epoch's time
 * counted once, cut lines left out and counted, nothing drawable refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot/metrics_runs.h"

#include "../tmpdir.h"

static char path[4096];

/* An epoch line as ptrain train writes it; v NaN writes null. */
static void epoch_line(FILE *f, int epoch, long step, double v, double secs, int partial) {
  char val[32];
  if (isnan(v)) snprintf(val, sizeof val, "null");
  else snprintf(val, sizeof val, "%.17g", v);
  fprintf(f, "{\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,\"train_loss\":%s,\"test_loss\":%s,\"test_acc\":%s,"
             "\"seconds\":%g%s}\n", epoch, step, val, val, val, secs, partial ? ",\"partial\":true" : "");
}

static FILE *start(const char *name) {
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  return f;
}

static void free_all(pt_run_curve *c, int n) {
  for (int i = 0; i < n; i++) pt_run_curve_free(&c[i]);
}

static void test_every_epoch_is_read(void **st) {
  (void)st;
  FILE *f = start("many.jsonl");
  for (int e = 1; e <= 150000; e++) epoch_line(f, e, 10L * e, 1.0 / e, 1.0, 0);
  fclose(f);
  pt_run_curve c[2];
  int n = 0;
  pt_runs_notes notes;
  assert_int_equal(pt_plot_read_runs(path, 1, c, &n, 2, &notes), PT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(c[0].n, 150000);
  assert_true(c[0].t[149999] == 150000.0);
  assert_true(c[0].acc[149999] == 1.0 / 150000);
  free_all(c, n);
}

/* --metrics appends: a second run's steps start again. A stop mid-epoch
 * and its resume are one run, the stopped part's seconds counted once. */
static void test_runs_and_resumes(void **st) {
  (void)st;
  FILE *f = start("runs.jsonl");
  epoch_line(f, 1, 100, 0.9, 2.0, 0);
  epoch_line(f, 2, 150, 0.8, 1.0, 1); /* stopped halfway */
  epoch_line(f, 2, 200, 0.7, 2.5, 0); /* resumed: 2.5 s, the stopped 1.0 included */
  epoch_line(f, 1, 100, 0.95, 2.0, 0); /* the next run */
  epoch_line(f, 2, 200, 0.85, 2.0, 0);
  fclose(f);
  pt_run_curve c[4];
  int n = 1; /* after a run of another file */
  memset(&c[0], 0, sizeof c[0]);
  pt_runs_notes notes;
  assert_int_equal(pt_plot_read_runs(path, 0, c, &n, 4, &notes), PT_OK);
  assert_int_equal(n, 3);
  assert_int_equal(c[1].n, 3);
  assert_true(c[1].t[0] == 2.0 && c[1].t[1] == 3.0 && c[1].t[2] == 4.5);
  assert_int_equal(c[2].n, 2);
  assert_true(c[2].t[0] == 2.0 && c[2].t[1] == 4.0);
  assert_true(c[2].train_loss[0] == 0.95);
  /* Room for fewer runs than the file holds: an error, nothing appended. */
  free_all(c + 1, 2);
  n = 1;
  assert_int_equal(pt_plot_read_runs(path, 0, c, &n, 2, &notes), PT_ERR_ARG);
  assert_int_equal(n, 1);
  assert_non_null(strstr(pt_error_message(), "more than 2 runs"));
}

static void eval_line(FILE *f, int epoch, long step, double acc) {
  fprintf(f, "{\"event\":\"eval\",\"epoch\":%d,\"step\":%ld,\"seconds\":99,\"train_loss\":%.17g,"
             "\"test_loss\":%.17g,\"test_acc\":%.17g}\n", epoch, step, 2 * acc, 3 * acc, acc);
}

/* --eval-every's evaluations are points of the curve between the epoch
 * lines, placed by step within their epoch (a short run that evaluates
 * every 30 steps was once one dot); the one at an epoch's last step is the
 * epoch line's own point; a resumed epoch's evaluations go on from where
 * the stopped part's partial line left them. */
static void test_evaluations_between_epochs(void **st) {
  (void)st;
  FILE *f = start("evals.jsonl");
  eval_line(f, 1, 25, 0.1);
  eval_line(f, 1, 50, 0.2);
  eval_line(f, 1, 100, 0.3); /* the epoch's end: its line's point */
  epoch_line(f, 1, 100, 0.3, 4.0, 0);
  eval_line(f, 2, 150, 0.4);
  epoch_line(f, 2, 160, 0.45, 2.4, 1); /* stopped at 160 after 2.4 s */
  eval_line(f, 2, 180, 0.5);
  epoch_line(f, 2, 200, 0.6, 4.0, 0); /* resumed: 4.0 s, the stopped 2.4 included */
  fclose(f);
  pt_run_curve c[1];
  for (int by_epoch = 0; by_epoch < 2; by_epoch++) {
    int n = 0;
    pt_runs_notes notes;
    assert_int_equal(pt_plot_read_runs(path, by_epoch, c, &n, 1, &notes), PT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].n, 7);
    const double acc[7] = {0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.6};
    const double t_time[7] = {1.0, 2.0, 4.0, 6.0, 6.4, 7.2, 8.0};
    /* the epoch axis puts a partial line at its epoch: what came before it is placed up to there */
    const double t_epoch[7] = {0.25, 0.5, 1.0, 1.0 + 50.0 / 60.0, 2.0, 2.0, 2.0};
    for (int i = 0; i < 7; i++) {
      assert_float_equal(c[0].acc[i], acc[i], 1e-12);
      assert_float_equal(c[0].t[i], by_epoch ? t_epoch[i] : t_time[i], 1e-12);
    }
    assert_float_equal(c[0].train_loss[0], 0.2, 1e-12);
    pt_run_curve_free(&c[0]);
  }
}

/* A run inside an epoch (still writing, or stopped): its evaluations
 * after the last epoch line go on at the run's pace so far, and a run with
 * no epoch line yet is drawn by its evaluations' own seconds. Without an
 * epoch's length the epoch axis has no place for them, and says so. */
static void test_evaluations_after_the_last_epoch(void **st) {
  (void)st;
  FILE *f = start("tail.jsonl");
  epoch_line(f, 1, 100, 0.3, 4.0, 0);
  eval_line(f, 1, 100, 0.3); /* the epoch line's own point, written after it */
  eval_line(f, 2, 150, 0.4);
  eval_line(f, 2, 180, 0.5);
  fclose(f);
  pt_run_curve c[1];
  pt_runs_notes notes;
  for (int by_epoch = 0; by_epoch < 2; by_epoch++) {
    int n = 0;
    assert_int_equal(pt_plot_read_runs(path, by_epoch, c, &n, 1, &notes), PT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].n, 3);
    assert_int_equal(notes.evals_left_out, 0);
    const double t_time[3] = {4.0, 6.0, 7.2}, t_epoch[3] = {1.0, 1.5, 1.8};
    for (int i = 0; i < 3; i++) assert_float_equal(c[0].t[i], by_epoch ? t_epoch[i] : t_time[i], 1e-12);
    assert_float_equal(c[0].acc[2], 0.5, 1e-12);
    pt_run_curve_free(&c[0]);
  }
  f = start("evals-only.jsonl");
  fputs("{\"event\":\"eval\",\"epoch\":1,\"step\":100,\"seconds\":0.5,\"train_loss\":1,\"test_loss\":0.9,"
        "\"test_acc\":0.7}\n{\"event\":\"eval\",\"epoch\":1,\"step\":200,\"seconds\":1.25,\"train_loss\":0.8,"
        "\"test_loss\":0.7,\"test_acc\":0.75}\n", f);
  fclose(f);
  int n = 0;
  assert_int_equal(pt_plot_read_runs(path, 0, c, &n, 1, &notes), PT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(c[0].n, 2);
  assert_true(c[0].t[0] == 0.5 && c[0].t[1] == 1.25 && c[0].acc[1] == 0.75);
  pt_run_curve_free(&c[0]);
  n = 0;
  assert_int_equal(pt_plot_read_runs(path, 1, c, &n, 1, &notes), PT_ERR_FORMAT);
  assert_int_equal(n, 0);
  assert_non_null(strstr(pt_error_message(), "no epoch has ended"));
}

static void test_cut_lines_and_gaps(void **st) {
  (void)st;
  FILE *f = start("cut.jsonl");
  epoch_line(f, 1, 10, 0.9, 1.0, 0);
  fputs("{\"event\":\"epoch\",\"epo\n", f); /* a write a full disk cut short */
  epoch_line(f, 2, 20, NAN, 1.0, 0);
  epoch_line(f, 3, 30, 0.5, 1.0, 0);
  fputs("{\"event\":\"epoch\",\"epoch\":4,\"st", f); /* still being written */
  fclose(f);
  pt_run_curve c[1];
  int n = 0;
  pt_runs_notes notes;
  assert_int_equal(pt_plot_read_runs(path, 1, c, &n, 1, &notes), PT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(c[0].n, 3);
  assert_int_equal(notes.not_json, 1);
  assert_int_equal(notes.first_not_json, 2);
  assert_int_equal(notes.unfinished_line, 5);
  assert_int_equal(notes.nonfinite, 1);
  assert_true(isnan(c[0].train_loss[1]));
  free_all(c, n);
}

static void test_nothing_to_draw(void **st) {
  (void)st;
  pt_run_curve c[1];
  int n = 0;
  pt_runs_notes notes;
  FILE *f = start("allnan.jsonl");
  epoch_line(f, 1, 10, NAN, 1.0, 0);
  epoch_line(f, 2, 20, INFINITY, 1.0, 0);
  fclose(f);
  assert_int_equal(pt_plot_read_runs(path, 1, c, &n, 1, &notes), PT_ERR_FORMAT);
  assert_int_equal(n, 0);
  assert_non_null(strstr(pt_error_message(), "no epoch line has a finite loss or accuracy"));
  f = start("text.jsonl");
  fputs("\nstep,loss\n1,0.5\n", f);
  fclose(f);
  assert_int_equal(pt_plot_read_runs(path, 1, c, &n, 1, &notes), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "text.jsonl:2: not a JSON object"));
  f = start("none.jsonl");
  fputs("{\"event\":\"profile\"}\n", f);
  fclose(f);
  assert_int_equal(pt_plot_read_runs(path, 1, c, &n, 1, &notes), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "no \"epoch\" or \"eval\" lines"));
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_epoch_is_read),
      cmocka_unit_test(test_runs_and_resumes),
      cmocka_unit_test(test_evaluations_between_epochs),
      cmocka_unit_test(test_evaluations_after_the_last_epoch),
      cmocka_unit_test(test_cut_lines_and_gaps),
      cmocka_unit_test(test_nothing_to_draw),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
