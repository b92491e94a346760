/* ReLU and dropout, run in blocks on the thread pool. Dropout masks come
 * from Philox keyed by (seed, step, layer, element block), so they are the same
 * for any thread count or batch split and a resumed run draws the masks an
 * uninterrupted one would. */
#include <string.h>

#include "ops/cpu/ops.h"
#include "util/draws.h"
#include "util/philox.h"

#define EW_CHUNK 16384 /* elements: below two of these, one thread is faster */

typedef struct {
  const float *x, *y, *dy, *mask;
  float *out, *mask_out;
  float p, scale;
  uint64_t key, step;
  uint32_t layer;
  size_t n;
} ew_job;

/* NaN passes through, as in PyTorch: a ReLU that made it 0 would hide
 * broken weights behind a finite loss. */
static void relu_fwd(void *c, size_t lo, size_t hi) {
  const ew_job *j = c;
  for (size_t i = lo; i < hi; i++) j->out[i] = !(j->x[i] <= 0.0f) ? j->x[i] : 0.0f;
}

static void relu_bwd(void *c, size_t lo, size_t hi) {
  const ew_job *j = c;
  for (size_t i = lo; i < hi; i++) j->out[i] = j->y[i] > 0.0f ? j->dy[i] : 0.0f;
}

void pt_relu_forward(size_t n, const float *x, float *y) {
  ew_job j = {.x = x, .out = y};
  pt_parallel_for(n, EW_CHUNK, relu_fwd, &j);
}

void pt_relu_backward(size_t n, const float *y, const float *dy, float *dx) {
  ew_job j = {.y = y, .dy = dy, .out = dx};
  pt_parallel_for(n, EW_CHUNK, relu_bwd, &j);
}

/* Blocks are in units of 8 elements: one Philox call gives 128 bits, and
 * each element's keep/drop draw uses 16 of them. A drop probability is thus
 * resolved to 1/65536, far finer than any dropout rate needs, at half the
 * cost of 32 bits an element (Philox dominated this op). */
static void dropout_fwd(void *c, size_t lo, size_t hi) {
  const ew_job *j = c;
  const uint32_t threshold = pt_dropout_threshold(j->p); /* drop if u16 < threshold */
  const uint64_t ctr = (uint64_t)j->layer << 40;
  /* In a local, not read through j inside the loop: a conditional load of
   * it kept the loop below from vectorising, which made it cost more than
   * the random numbers. */
  const float scale = j->scale;
  uint32_t r[16][4];
  uint16_t u[128]; /* element k of block q is bits 16(k%2).. of word k/2: little-endian halves */
  for (size_t q0 = lo; q0 < hi; q0 += 16) {
    pt_philox4x32_x16(j->key, j->step, ctr | q0, r);
    memcpy(u, r, sizeof u);
    const size_t i0 = 8 * q0, end = 8 * hi < j->n ? 8 * hi : j->n;
    const size_t cnt = end - i0 < 128 ? end - i0 : 128;
    float *mo = j->mask_out + i0, *out = j->out + i0;
    const float *x = j->x + i0;
    for (size_t k = 0; k < cnt; k++) {
      float m = u[k] < threshold ? 0.0f : scale;
      mo[k] = m;
      out[k] = x[k] * m;
    }
  }
}

static void dropout_bwd(void *c, size_t lo, size_t hi) {
  const ew_job *j = c;
  for (size_t i = lo; i < hi; i++) j->out[i] = j->dy[i] * j->mask[i];
}

void pt_dropout_forward(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer,
                        const float *x, float *y, float *mask) {
  ew_job j = {.x = x, .out = y, .mask_out = mask, .p = p, .key = key, .step = step, .layer = layer, .n = n};
  j.scale = pt_dropout_scale(p);
  pt_parallel_for((n + 7) / 8, EW_CHUNK / 8, dropout_fwd, &j);
}

void pt_dropout_backward(size_t n, const float *mask, const float *dy, float *dx) {
  ew_job j = {.mask = mask, .dy = dy, .out = dx};
  pt_parallel_for(n, EW_CHUNK, dropout_bwd, &j);
}
