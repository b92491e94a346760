/* ptrain plot: the training curves of runs' --metrics files, side by side:
 * loss and test accuracy against training time (or epoch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "plot/chart.h"
#include "plot/series_style.h"
#include "plot/metrics_runs.h"
#include "plot/run_label.h"

/* Runs in one figure: two series each in the loss panel. */
#define MAX_RUNS (PT_CHART_MAX_SERIES / 2)

static int same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int pt_cmd_plot(int argc, char **argv) {
  const char *output = NULL, *xaxis = "time";
  const pt_arg flags[] = {
      {"--output", ARG_STR, &output, 0, 0, NULL, "FILE", "the figure: FILE.png or FILE.svg (required)"},
      {"--x", ARG_CHOICE, &xaxis, 0, 0, "time|epoch", "AXIS", "time: training seconds (default); epoch"},
  };
  const int nf = (int)(sizeof flags / sizeof flags[0]);
  /* More than a figure holds, so that too many runs are counted and said
   * so below rather than met as an unexpected argument. */
  enum { MAX_FILES_READ = 256 };
  const char *files[MAX_FILES_READ];
  int nfiles = 0, help;
  int rc = pt_args_parse("plot", flags, nf, argc, argv, 2, &help, files, MAX_FILES_READ, &nfiles);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain plot --output FILE.png|FILE.svg RUN.jsonl...",
                       "Draw the training curves of runs' --metrics files side by side: train and test loss,\n"
                       "and test accuracy, against training time (or epoch), one line per run.",
                       flags, nf);
    return 0;
  }
  if (!output || !nfiles) {
    fprintf(stderr, "ptrain plot: %s (see 'ptrain plot --help')\n",
            !output ? "--output FILE.png|FILE.svg is required" : "give one or more metrics files");
    return PT_USAGE_ERROR;
  }
  /* The figure's format comes from its name: a wrong one is said before any file is read. */
  const size_t len = strlen(output);
  if (len < 4 || (strcmp(output + len - 4, ".png") && strcmp(output + len - 4, ".svg"))) {
    fprintf(stderr, "ptrain plot: --output %s: expected a file name ending in .png or .svg (see 'ptrain plot --help')\n",
            output);
    return PT_USAGE_ERROR;
  }
  /* Each run's file, once, for the two checks below: by device and inode,
   * so that another name for one (a link, ./x) is the same file. */
  struct stat out_st, in_st[MAX_FILES_READ];
  int found[MAX_FILES_READ];
  for (int i = 0; i < nfiles; i++) found[i] = stat(files[i], &in_st[i]) == 0;
  /* The figure replaces its file whole: never one of the runs it reads
   * (a slip of the argument order, or a link to one). */
  if (stat(output, &out_st) == 0)
    for (int i = 0; i < nfiles; i++)
      if (found[i] && same_file(&in_st[i], &out_st)) {
        fprintf(stderr, "ptrain plot: --output %s is the metrics file %s: writing the figure would replace it "
                        "(see 'ptrain plot --help')\n", output, files[i]);
        return PT_USAGE_ERROR;
      }
  const int by_epoch = !strcmp(xaxis, "epoch");
  pt_run_curve cv[MAX_RUNS];
  char label[MAX_RUNS][100];
  int ncurves = 0, status = 0;
  if (nfiles > MAX_RUNS) {
    fprintf(stderr, "ptrain plot: at most %d runs in one figure, got %d\n", MAX_RUNS, nfiles);
    return PT_USAGE_ERROR;
  }
  /* A run given twice would be drawn twice, under one label. */
  for (int i = 0; i < nfiles; i++)
    for (int j = 0; j < i; j++)
      if (found[i] && found[j] && same_file(&in_st[i], &in_st[j])) {
        fprintf(stderr, "ptrain plot: %s is given twice (as %s too) (see 'ptrain plot --help')\n", files[i], files[j]);
        return PT_USAGE_ERROR;
      }
  for (int i = 0; i < nfiles && !status; i++) {
    const int from = ncurves;
    pt_runs_notes note;
    if (pt_plot_read_runs(files[i], by_epoch, cv, &ncurves, MAX_RUNS, &note) != PT_OK) {
      status = pt_cli_fail("plot");
      break;
    }
    const char *name = pt_run_label(files, nfiles, i), *path = files[i];
    for (int k = from; k < ncurves; k++) {
      char fit[80];
      pt_run_label_fit(fit, sizeof fit, name, ncurves - from == 1 ? 72 : 64);
      if (ncurves - from == 1) snprintf(label[k], sizeof label[k], "%s", fit);
      else snprintf(label[k], sizeof label[k], "%s, run %d", fit, k - from + 1);
    }
    if (ncurves - from > 1)
      fprintf(stderr, "ptrain plot: %s holds %d runs (its steps start again), drawn one by one\n", path,
              ncurves - from);
    if (note.unfinished_line)
      fprintf(stderr, "ptrain plot: %s:%d: an unfinished last line, left out\n", path, note.unfinished_line);
    if (note.not_json == 1)
      fprintf(stderr, "ptrain plot: %s:%d: not a JSON object, left out (a write cut short, as by a full disk, or "
                      "a line that --metrics did not write)\n",
              path, note.first_not_json);
    else if (note.not_json)
      fprintf(stderr, "ptrain plot: %s: %d lines that are not JSON objects (the first, line %d) left out (writes "
              "cut short, as by a full disk, or lines that --metrics did not write)\n",
              path, note.not_json, note.first_not_json);
    if (note.evals_left_out)
      fprintf(stderr, "ptrain plot: %s: %d evaluation%s after the last epoch line left out: no epoch has ended to "
                      "place them by (they are drawn against training time)\n", path, note.evals_left_out,
              note.evals_left_out == 1 ? "" : "s");
    if (note.nonfinite)
      fprintf(stderr, "ptrain plot: %s: %d epoch%s with a NaN or infinite loss or accuracy, drawn as gaps\n", path,
              note.nonfinite, note.nonfinite == 1 ? "" : "s");
  }
  pt_figure fig = {.npanels = 2};
  pt_panel *loss = &fig.panels[0], *acc = &fig.panels[1];
  snprintf(loss->title, sizeof loss->title, "train and test loss");
  snprintf(acc->title, sizeof acc->title, "test accuracy");
  snprintf(loss->xlabel, sizeof loss->xlabel, by_epoch ? "epoch" : "training time (s)");
  snprintf(acc->xlabel, sizeof acc->xlabel, by_epoch ? "epoch" : "training time (s)");
  snprintf(loss->ylabel, sizeof loss->ylabel, "loss");
  snprintf(acc->ylabel, sizeof acc->ylabel, "accuracy");
  /* A run has one colour in both panels: its test curves solid, its
   * train loss in the next cycle's dashes and markers (the runs are fewer
   * than a cycle's colours). */
  for (int i = 0; i < ncurves && !status; i++) {
    pt_series *tr = &loss->series[loss->nseries++], *te = &loss->series[loss->nseries++];
    *tr = (pt_series){.x = cv[i].t, .y = cv[i].train_loss, .n = cv[i].n, .style = 1 + i + PT_STYLE_NCOLOURS};
    snprintf(tr->label, sizeof tr->label, "%.80s train", label[i]);
    *te = (pt_series){.x = cv[i].t, .y = cv[i].test_loss, .n = cv[i].n, .style = 1 + i};
    snprintf(te->label, sizeof te->label, "%.80s test", label[i]);
    pt_series *a = &acc->series[acc->nseries++];
    *a = (pt_series){.x = cv[i].t, .y = cv[i].acc, .n = cv[i].n, .style = 1 + i};
    snprintf(a->label, sizeof a->label, "%.80s", label[i]);
  }
  const int loaded = ncurves;
  if (!status && pt_figure_write(&fig, output) != PT_OK) status = pt_cli_fail("plot");
  if (!status) printf("wrote %s: %d run%s\n", output, loaded, loaded == 1 ? "" : "s");
  for (int i = 0; i < ncurves; i++) pt_run_curve_free(&cv[i]);
  return status;
}
