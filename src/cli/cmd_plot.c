/* ptrain plot: the training curves of runs' --metrics files, side by side:
 * loss and test accuracy against training time (or epoch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "plot/chart.h"
#include "plot/run_label.h"

#define MAX_POINTS 100000

typedef struct {
  double *t, *train_loss, *test_loss, *acc;
  int n;
} curve;

static void curve_free(curve *c) {
  free(c->t), free(c->train_loss), free(c->test_loss), free(c->acc);
  memset(c, 0, sizeof *c);
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The "epoch" lines of a metrics file; x is the training time so far (the
 * epochs' seconds summed: a resumed run's file continues it) or the epoch. */
static pt_status read_curve(const char *path, int by_epoch, curve *c) {
  memset(c, 0, sizeof *c);
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return pt_fail(PT_ERR_IO, "%s: is a directory (expected a file written by ptrain train --metrics FILE)", path);
  FILE *f = fopen(path, "r");
  if (!f) return pt_fail_errno(PT_ERR_IO, "cannot open %s", path);
  const size_t cap = MAX_POINTS;
  c->t = malloc(cap * sizeof(double));
  c->train_loss = malloc(cap * sizeof(double));
  c->test_loss = malloc(cap * sizeof(double));
  c->acc = malloc(cap * sizeof(double));
  if (!c->t || !c->train_loss || !c->test_loss || !c->acc) {
    fclose(f);
    curve_free(c);
    return pt_fail(PT_ERR_NOMEM, "%s: out of memory", path);
  }
  char *line = NULL; /* a line of any length */
  size_t line_cap = 0;
  ssize_t len;
  int lineno = 0;
  double clock = 0.0;
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
      /* The last line cut short: a run still writing, or killed mid-line.
       * The lines before it are whole (ptrain writes each at once). */
      fprintf(stderr, "ptrain plot: %s:%d: an unfinished last line, left out\n", path, lineno);
      break;
    }
    if (!o) {
      st = pt_fail(PT_ERR_FORMAT, "%s:%d: not a JSON object (expected the JSON lines of ptrain train --metrics)",
                   path, lineno);
      break;
    }
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "epoch") && c->n < MAX_POINTS) {
      const double secs = num(o, "seconds");
      if (isfinite(secs)) clock += secs;
      c->t[c->n] = by_epoch ? num(o, "epoch") : clock;
      c->train_loss[c->n] = num(o, "train_loss");
      c->test_loss[c->n] = num(o, "test_loss");
      c->acc[c->n] = num(o, "test_acc");
      c->n++;
    }
    cJSON_Delete(o);
  }
  free(line);
  fclose(f);
  if (st == PT_OK && c->n == 0)
    st = pt_fail(PT_ERR_FORMAT, "%s: no \"epoch\" lines (expected a file written by ptrain train --metrics)", path);
  if (st != PT_OK) curve_free(c);
  return st;
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
  const int by_epoch = !strcmp(xaxis, "epoch");
  curve cv[PT_CHART_MAX_SERIES / 2];
  if (nfiles > PT_CHART_MAX_SERIES / 2) {
    fprintf(stderr, "ptrain plot: at most %d runs in one figure, got %d\n", PT_CHART_MAX_SERIES / 2, nfiles);
    return PT_USAGE_ERROR;
  }
  pt_figure fig = {.npanels = 2};
  pt_panel *loss = &fig.panels[0], *acc = &fig.panels[1];
  snprintf(loss->title, sizeof loss->title, "train and test loss");
  snprintf(acc->title, sizeof acc->title, "test accuracy");
  snprintf(loss->xlabel, sizeof loss->xlabel, by_epoch ? "epoch" : "training time (s)");
  snprintf(acc->xlabel, sizeof acc->xlabel, by_epoch ? "epoch" : "training time (s)");
  snprintf(loss->ylabel, sizeof loss->ylabel, "loss");
  snprintf(acc->ylabel, sizeof acc->ylabel, "accuracy");
  int loaded = 0, status = 0;
  for (int i = 0; i < nfiles; i++) {
    if (read_curve(files[i], by_epoch, &cv[i]) != PT_OK) {
      status = pt_cli_fail("plot");
      break;
    }
    loaded++;
    pt_series *tr = &loss->series[loss->nseries++], *te = &loss->series[loss->nseries++];
    *tr = (pt_series){.x = cv[i].t, .y = cv[i].train_loss, .n = cv[i].n};
    snprintf(tr->label, sizeof tr->label, "%s train", pt_run_label(files, nfiles, i));
    *te = (pt_series){.x = cv[i].t, .y = cv[i].test_loss, .n = cv[i].n};
    snprintf(te->label, sizeof te->label, "%s test", pt_run_label(files, nfiles, i));
    pt_series *a = &acc->series[acc->nseries++];
    *a = (pt_series){.x = cv[i].t, .y = cv[i].acc, .n = cv[i].n};
    snprintf(a->label, sizeof a->label, "%s", pt_run_label(files, nfiles, i));
  }
  if (!status && pt_figure_write(&fig, output) != PT_OK) status = pt_cli_fail("plot");
  if (!status) printf("wrote %s: %d run%s\n", output, loaded, loaded == 1 ? "" : "s");
  for (int i = 0; i < loaded; i++) curve_free(&cv[i]);
  return status;
}
