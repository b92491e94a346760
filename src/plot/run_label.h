/* A run's name in a chart's legend, from its file's path. */
#ifndef PT_PLOT_RUN_LABEL_H
#define PT_PLOT_RUN_LABEL_H

/* The file name of paths[i], with as many of its directories as tell it
 * from the other paths ("a/metrics.jsonl" beside "b/metrics.jsonl"); a
 * pointer into paths[i]. */
const char *pt_run_label(const char *const *paths, int n, int i);

#endif
