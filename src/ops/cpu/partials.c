/* The convolutions' weight and bias gradients: each pool thread sums its
 * block of the batch into a partial of its own, and the partials are added
 * here, in thread order, so the result depends on the thread count but
 * never on which thread finished first. */
#include "ops/cpu/ops.h"

typedef struct {
  float *dw, *db;
  size_t nw;
  const float *part0;
  size_t stride;
  int nparts;
} partials_job;

static void add_block(void *ctx, size_t lo, size_t hi) {
  const partials_job *j = ctx;
  for (int t = 0; t < j->nparts; t++) {
    const float *p = j->part0 + j->stride * (size_t)t;
    for (size_t i = lo; i < hi; i++) {
      if (i < j->nw) j->dw[i] += p[i];
      else if (j->db) j->db[i - j->nw] += p[i];
    }
  }
}

void pt_add_partials(float *dw, size_t nw, float *db, size_t nb, const float *part0, size_t stride, int nparts) {
  partials_job j = {dw, db, nw, part0, stride, nparts};
  pt_parallel_for(nw + nb, 4096, add_block, &j);
}
