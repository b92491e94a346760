#include "cli/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/float_narrow.h"

static int usage(const char *cmd, const char *fmt, const char *a, const char *b, const char *c) {
  fprintf(stderr, "ptrain %s: ", cmd);
  fprintf(stderr, fmt, a, b, c);
  fprintf(stderr, " (see 'ptrain %s --help')\n", cmd);
  return PT_USAGE_ERROR;
}

/* Edits from a to b: insertions, deletions, substitutions, and swaps of
 * two neighbours ("trian"), each counting 1. Words of 63 characters at most. */
static int edit_distance(const char *a, const char *b) {
  const size_t n = strlen(a), m = strlen(b);
  if (n > 63 || m > 63) return 1 << 20;
  int d[64][64];
  for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

const char *pt_args_suggest(const char *word, const char *const *names, int n) {
  const char *best = NULL;
  int best_d = 1 << 20;
  for (int k = 0; k < n; k++) {
    const int dist = edit_distance(word, names[k]);
    if (dist < best_d) best_d = dist, best = names[k];
  }
  /* Close enough to be a slip of the fingers, not another word: at most
   * 2 edits, and at most one per 3 letters of what was typed. */
  size_t letters = strlen(word);
  while (letters && *word == '-') word++, letters--;
  return best && best_d <= 2 && (size_t)(3 * best_d) <= letters ? best : NULL;
}

static int in_choices(const char *choices, const char *v) {
  size_t n = strlen(v);
  for (const char *p = choices; *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && !strncmp(p, v, n)) return 1;
    if (!bar) break;
    p = bar + 1;
  }
  return 0;
}

static int set_value(const char *cmd, const pt_arg *a, const char *v) {
  char *end;
  char range[96];
  errno = 0;
  switch (a->type) {
    case ARG_U64: {
      /* The whole unsigned range (PyTorch's manual_seed takes it too);
       * strtoull would wrap "-1" to its largest value, so digits only. */
      unsigned long long x = (v[0] >= '0' && v[0] <= '9') ? strtoull(v, &end, 10) : 0;
      if (v[0] < '0' || v[0] > '9' || errno || *end || x < a->lo)
      {
        snprintf(range, sizeof range, "an integer in [%.0f, %llu]", a->lo, ULLONG_MAX);
        return usage(cmd, "%s: expected %s, got '%s'", a->name, range, v);
      }
      *(uint64_t *)a->dst = (uint64_t)x;
      return 0;
    }
    case ARG_INT:
    case ARG_I64: {
      long long x = strtoll(v, &end, 10);
      if (errno || end == v || *end || x < a->lo || x > a->hi) {
        if (a->hi >= 9e18) snprintf(range, sizeof range, "an integer >= %.0f", a->lo);
        else snprintf(range, sizeof range, "an integer in [%.0f, %.0f]", a->lo, a->hi);
        return usage(cmd, "%s: expected %s, got '%s'", a->name, range, v);
      }
      if (a->type == ARG_INT) *(int *)a->dst = (int)x;
      else *(int64_t *)a->dst = x;
      return 0;
    }
    case ARG_FLOAT: {
      /* Decimal only: strtod also reads hex ("0x10" is 16) and "inf". */
      double x = strtod(v, &end);
      if (errno || end == v || *end || v[strspn(v, "0123456789.eE+-")] || !isfinite(x) || x < a->lo || x > a->hi) {
        snprintf(range, sizeof range, "a number in [%g, %g]", a->lo, a->hi);
        return usage(cmd, "%s: expected %s, got '%s'", a->name, range, v);
      }
      /* The range is checked in double, but the value is kept as a float:
       * "1e-50" would become 0 (an --lr of 0, a --target-accuracy of none). */
      const char *lost = pt_float_narrow(x, (float *)a->dst);
      if (lost) {
        pt_float_range_text(range, sizeof range, a->lo, a->hi);
        char got[320];
        snprintf(got, sizeof got, "'%.256s' (%s as a float)", v, lost);
        return usage(cmd, "%s: expected %s, got %s", a->name, range, got);
      }
      return 0;
    }
    case ARG_CHOICE:
      if (!in_choices(a->choices, v)) return usage(cmd, "%s: expected one of %s, got '%s'", a->name, a->choices, v);
      *(const char **)a->dst = v;
      return 0;
    case ARG_STR:
      if (!*v) return usage(cmd, "%s: expected %s, got an empty value", a->name, a->meta ? a->meta : "a value", "");
      *(const char **)a->dst = v;
      return 0;
    case ARG_STRS: {
      pt_arg_strs *l = a->dst;
      if (!*v) return usage(cmd, "%s: expected %s, got an empty value", a->name, a->meta ? a->meta : "a value", "");
      if (l->n == PT_ARG_STRS_MAX) {
        snprintf(range, sizeof range, "%d", PT_ARG_STRS_MAX);
        return usage(cmd, "%s: given more than %s times, at '%s'", a->name, range, v);
      }
      l->v[l->n++] = v;
      return 0;
    }
    case ARG_FLAG: break;
  }
  return 0;
}

int pt_args_parse(const char *cmd, const pt_arg *table, int n, int argc, char **argv, int from, int *help,
                  const char **positional, int max_pos, int *npos) {
  *help = 0;
  if (npos) *npos = 0;
  for (int i = from; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      *help = 1;
      return 0;
    }
    if (strncmp(s, "--", 2) || !s[2]) {
      if (!npos || *npos >= max_pos) return usage(cmd, "unexpected argument '%s'", s, "", "");
      positional[(*npos)++] = s;
      continue;
    }
    char name[64];
    const char *eq = strchr(s, '=');
    size_t len = eq ? (size_t)(eq - s) : strlen(s);
    if (len >= sizeof name) return usage(cmd, "unknown flag '%s'", s, "", "");
    memcpy(name, s, len);
    name[len] = 0;
    const pt_arg *a = NULL;
    for (int k = 0; k < n; k++)
      if (!strcmp(table[k].name, name)) a = &table[k];
    if (!a) {
      const char *names[128];
      int nn = 0;
      for (int k = 0; k < n && nn < 127; k++) names[nn++] = table[k].name;
      names[nn++] = "--help";
      const char *near = pt_args_suggest(name, names, nn);
      if (near) return usage(cmd, "unknown flag '%s': did you mean %s?", name, near, "");
      return usage(cmd, "unknown flag '%s'", name, "", "");
    }
    if (a->type == ARG_FLAG) {
      if (eq) return usage(cmd, "%s takes no value", name, "", "");
      *(int *)a->dst = 1;
      continue;
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
      if (i + 1 >= argc) return usage(cmd, "%s: missing value (expected %s)", name, a->meta ? a->meta : "a value", "");
      v = argv[++i];
    }
    int rc = set_value(cmd, a, v);
    if (rc) return rc;
  }
  return 0;
}

void pt_args_print_options(const pt_arg *table, int n) {
  for (int k = 0; k < n; k++) {
    char left[64];
    if (table[k].type == ARG_FLAG) snprintf(left, sizeof left, "%s", table[k].name);
    else snprintf(left, sizeof left, "%s %s", table[k].name, table[k].meta ? table[k].meta : "V");
    printf("  %-28s %s\n", left, table[k].help);
  }
}

void pt_args_print_help(const char *usage_line, const char *about, const pt_arg *table, int n) {
  printf("usage: %s\n\n%s\n\noptions:\n", usage_line, about);
  pt_args_print_options(table, n);
  printf("  %-28s %s\n", "--help", "show this help");
}
