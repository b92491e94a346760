#include "pipe/partition.h"

#include <stdlib.h>
#include <string.h>

double pt_pipe_range_flops(const pt_model *whole, int lo, int hi) {
  double f = 0.0;
  for (int i = lo; i < hi; i++) f += pt_layer_flops(&whole->layers[i]);
  return f;
}

/* A layer named by its module name or its index. */
static pt_status find_layer(const pt_model *m, const char *tok, int *index) {
  char *end;
  long k = strtol(tok, &end, 10);
  if (*tok && !*end) {
    if (k < 0 || k >= m->nlayers)
      return pt_fail(PT_ERR_ARG, "--split %s: %s has layers 0 to %d", tok, m->spec.name, m->nlayers - 1);
    *index = (int)k;
    return PT_OK;
  }
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].spec.name[0] && !strcmp(m->layers[i].spec.name, tok)) {
      *index = i;
      return PT_OK;
    }
  /* The names themselves: a model loaded from a checkpoint or built from
   * text has no preset or file that 'ptrain models --show' could take. */
  char names[512] = "";
  size_t used = 0;
  for (int i = 0; i < m->nlayers && used + 8 < sizeof names; i++)
    if (m->layers[i].spec.name[0])
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", m->layers[i].spec.name);
  if (used >= sizeof names - 8) snprintf(names + sizeof names - 8, 8, ", ...");
  return pt_fail(PT_ERR_ARG, "--split %s: %s has no layer of that name; its named layers are %s (or give an index "
                 "from 0 to %d; ptrain models --show lists them all)",
                 tok, m->spec.name, used ? names : "none", m->nlayers - 1);
}

static pt_status parse_split(const pt_model *m, int stages, const char *split, int *bounds) {
  int n = 0;
  const char *p = split;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char tok[PT_NAME_LEN + 8];
    if (len == 0 || len >= sizeof tok)
      return pt_fail(PT_ERR_ARG, "--split '%s': expected layer names or indices separated by commas", split);
    memcpy(tok, p, len);
    tok[len] = 0;
    if (n + 1 >= stages)
      return pt_fail(PT_ERR_ARG, "--split '%s' names more than %d boundar%s for %d stages", split, stages - 1,
                     stages == 2 ? "y" : "ies", stages);
    int k = 0;
    PT_TRY(find_layer(m, tok, &k));
    if (k == 0) return pt_fail(PT_ERR_ARG, "--split %s: the first stage would be empty", tok);
    if (k <= bounds[n])
      return pt_fail(PT_ERR_ARG, "--split '%s': boundaries must name later and later layers", split);
    bounds[++n] = k;
    p += len + (e ? 1 : 0);
    if (e && !*p) return pt_fail(PT_ERR_ARG, "--split '%s': a trailing comma", split);
  }
  if (n != stages - 1)
    return pt_fail(PT_ERR_ARG, "--split '%s' names %d boundar%s; %d stages need %d", split, n, n == 1 ? "y" : "ies",
                   stages, stages - 1);
  return PT_OK;
}

/* Whether layers [lo, hi) are only flatten: a stage that does nothing,
 * which the checks below refuse. */
static int only_flatten(const pt_model *m, int lo, int hi) {
  for (int i = lo; i < hi; i++)
    if (m->layers[i].spec.kind != PT_L_FLATTEN) return 0;
  return 1;
}

/* best[s * (L+1) + i]: the lowest possible cost of the most expensive stage
 * when layers [i, L) go on s stages, each holding a layer besides flatten.
 * The caller checks that there are layers enough. */
static void balance(const pt_model *m, int stages, int *bounds) {
  const int L = m->nlayers;
  static _Thread_local double best[(PT_MAX_LAYERS + 1) * (PT_MAX_LAYERS + 1)];
  const double inf = 1e300;
  for (int s = 0; s <= stages; s++)
    for (int i = 0; i <= L; i++) best[s * (L + 1) + i] = inf;
  best[0 * (L + 1) + L] = 0.0;
  for (int s = 1; s <= stages; s++)
    for (int i = L - 1; i >= 0; i--)
      for (int j = i + 1; j <= L; j++) {
        const double rest = best[(s - 1) * (L + 1) + j];
        if (rest >= inf || only_flatten(m, i, j)) continue;
        double c = pt_pipe_range_flops(m, i, j);
        if (rest > c) c = rest;
        if (c < best[s * (L + 1) + i]) best[s * (L + 1) + i] = c;
      }
  /* Among the optimal partitions, each boundary as late as possible, so
   * layers without FLOPs (ReLU, pooling) stay with the layer they follow. */
  const double opt = best[stages * (L + 1) + 0];
  bounds[0] = 0;
  for (int s = 0; s < stages - 1; s++) {
    const int i = bounds[s], left = stages - s - 1;
    int pick = i + 1;
    for (int j = i + 1; j <= L - left; j++) {
      if (only_flatten(m, i, j)) continue;
      double c = pt_pipe_range_flops(m, i, j), rest = best[left * (L + 1) + j];
      if (rest > c) c = rest;
      if (c <= opt * (1 + 1e-12)) pick = j;
    }
    bounds[s + 1] = pick;
  }
  bounds[stages] = L;
}

int pt_pipe_max_stages(const pt_model_spec *spec) {
  int n = 0;
  for (int i = 0; i < spec->nlayers; i++) n += spec->layers[i].kind != PT_L_FLATTEN;
  return n;
}

pt_status pt_pipe_partition(const pt_model *whole, int stages, const char *split, int *bounds) {
  if (stages < 1) return pt_fail(PT_ERR_ARG, "%d stages: expected at least 1", stages);
  const int working = pt_pipe_max_stages(&whole->spec);
  if (stages > working)
    return pt_fail(PT_ERR_ARG, "%d stages but %s has only %d layer%s%s, and each stage needs one", stages,
                   whole->spec.name, working, working == 1 ? "" : "s",
                   working < whole->nlayers ? " besides flatten" : "");
  bounds[0] = 0;
  bounds[stages] = whole->nlayers;
  if (split) PT_TRY(parse_split(whole, stages, split, bounds));
  else balance(whole, stages, bounds);
  for (int s = 0; s < stages; s++) {
    int compute = 0;
    for (int i = bounds[s]; i < bounds[s + 1]; i++) compute |= whole->layers[i].spec.kind != PT_L_FLATTEN;
    if (!compute)
      return pt_fail(PT_ERR_ARG, "stage %d would hold only 'flatten' (layers %d to %d); move the boundary", s,
                     bounds[s], bounds[s + 1] - 1);
  }
  return PT_OK;
}
