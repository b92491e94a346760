/* A run's name in a chart's legend, from its file's path. */
#ifndef PT_PLOT_RUN_LABEL_H
#define PT_PLOT_RUN_LABEL_H

#include <stddef.h>

/* The file name of paths[i], with as many of its directories as tell it
 * from the other paths ("a/metrics.jsonl" beside "b/metrics.jsonl"); a
 * pointer into paths[i]. */
const char *pt_run_label(const char *const *paths, int n, int i);

/* name in out (cap bytes), at most max characters: a longer one keeps its
 * start and its end with "..." between, as the end (a suffix, a file's
 * name) is what tells two long names apart. */
void pt_run_label_fit(char *out, size_t cap, const char *name, size_t max);

#endif
