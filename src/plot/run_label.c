#include "plot/run_label.h"

#include <stdio.h>
#include <string.h>

/* The last k parts of a path ("b/metrics.jsonl" for k = 2); the whole
 * path where it has fewer. */
static const char *last_parts(const char *p, int k) {
  for (const char *s = p + strlen(p); s > p; s--)
    if (s[-1] == '/' && --k == 0) return s;
  return p;
}

const char *pt_run_label(const char *const *paths, int n, int i) {
  for (int k = 1;; k++) {
    const char *me = last_parts(paths[i], k);
    int clash = 0;
    for (int j = 0; j < n && !clash; j++) clash = j != i && !strcmp(last_parts(paths[j], k), me);
    if (!clash || me == paths[i]) return me;
  }
}

void pt_run_label_fit(char *out, size_t cap, const char *name, size_t max) {
  if (max + 1 > cap) max = cap - 1;
  const size_t len = strlen(name);
  if (len <= max) {
    snprintf(out, cap, "%s", name);
    return;
  }
  const size_t keep = max - 3, head = keep / 3, tail = keep - head;
  snprintf(out, cap, "%.*s...%s", (int)head, name, name + len - tail);
}
