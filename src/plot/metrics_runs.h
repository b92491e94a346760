/* The training curves in a --metrics file, for ptrain plot. */
#ifndef PT_PLOT_METRICS_RUNS_H
#define PT_PLOT_METRICS_RUNS_H

#include "util/error.h"

/* One run's "epoch" lines: n points, NaN where a value is missing or not
 * finite (a gap in the chart). */
typedef struct {
  double *t, *train_loss, *test_loss, *acc;
  int n, cap;
} pt_run_curve;

/* What a file held besides whole runs, for the caller to tell. */
typedef struct {
  int not_json, first_not_json; /* lines that are not JSON objects, left out */
  int unfinished_line;          /* the number of a last line cut short (0: none), left out */
  int nonfinite;                /* epochs with a NaN or infinite value */
  int evals_left_out;           /* evaluations after the last epoch line that have no place on the axis */
} pt_runs_notes;

/* Appends the runs of the metrics file path to out[*n..max): x is the
 * training time so far (each epoch's seconds, a stopped epoch's counted
 * once when the resumed run completes it) or, with by_epoch, the epoch.
 * --metrics appends, so a file may hold several runs: a step that goes
 * back or stays starts the next. Lines that are not JSON objects (a write
 * a full disk cut short, which the writer leaves on a line of its own)
 * are left out as long as the file has lines that are. On an error
 * nothing is appended. */
pt_status pt_plot_read_runs(const char *path, int by_epoch, pt_run_curve *out, int *n, int max, pt_runs_notes *notes);
void pt_run_curve_free(pt_run_curve *c);

#endif
