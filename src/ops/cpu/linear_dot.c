/* The linear layer's forward pass as dot products, for inputs of up to
 * 1,024 features.
 *
 * y = x w^T + b with x (n, in) and w (out, in) both stored along in: each
 * output is the dot product of a row of x and a row of w. The BLAS runs this
 * as a GEMM with w transposed, and first copies ("packs") both operands into
 * its own layout: 0.94 MB a step for fmnist-mlp's lin1 (100 x 784 -> 200),
 * which it then multiplies at 139 GFLOP/s against 177 for its other GEMMs.
 * Here a register tile of 8 rows of x by 2 rows of w keeps 16 vectors of
 * 16 partial sums, streaming the rows as they lie: 10 loads feed 16 fused
 * multiply-adds per 16 features, the 8 rows of x (8 x 1,024 floats at
 * most) stay in the L1 cache while every pair of w's rows passes them, and
 * the 16 vectors are reduced to 16 outputs by one transposing tree of
 * additions, to which the bias is added. lin1's forward pass in training
 * went from 0.27 to 0.235 ms a step. Rows of x are read where they lie, so
 * they are best 64-byte aligned, as the loader's batches and every layer's
 * outputs are when in is a multiple of 16; otherwise each load straddles two
 * cache lines (the results are the same, only slower).
 *
 * Each output is lane l's sum over features l, l + 16, l + 32, ... in
 * order, combined by the tree in a fixed order, plus the bias: the same
 * bits at any thread count. */
#include "ops/cpu/ops.h"
#include "util/threadpool.h"

#ifdef __AVX512F__
#include <immintrin.h>

#define RS 8 /* rows of x per tile */
#define RO 2 /* rows of w per tile */

/* The 16 sums of 16 vectors: lane j of the result is the sum of v[j]'s
 * lanes. Pairs of vectors are interleaved and added, halving the vectors
 * and doubling the lanes each holds sums for, four times. */
static inline __m512 sum16(__m512 v[16]) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; i++) /* a[i]: lanes hold partial sums of v[2i] (even) and v[2i+1] (odd) */
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; i++) {
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  /* b[i]: each 128-bit block holds its own part of the sums for v[4i .. 4i+3] */
  for (int i = 0; i < 2; i++)
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  /* c[i]: blocks 0 and 1 hold halves of the sums for v[8i .. 8i+3], blocks
   * 2 and 3 for v[8i+4 .. 8i+7]; adding the halves leaves them in order */
  return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xDD));
}

/* acc[s * RO + o] = the tile's products over all in features, for NS rows
 * of x (a constant in each instantiation, so the loop has no tests and the
 * accumulators stay in registers) and the rows w0 and w1 of w. An odd last
 * output passes its row as both, and the second set of sums is dropped. */
static inline __attribute__((always_inline)) void tile_rows(const int NS, int in, const float *x, const float *w0,
                                                            const float *w1, __m512 out[RS * RO]) {
  /* local, not out: __m512 may alias the floats loaded, which would keep
   * out's vectors in memory across the loop */
  __m512 acc[RS * RO];
  for (int i = 0; i < RS * RO; i++) acc[i] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 <= in; k += 16) {
    const __m512 a = _mm512_loadu_ps(w0 + k), b = _mm512_loadu_ps(w1 + k);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
      const __m512 xv = _mm512_loadu_ps(x + (size_t)s * in + k);
      acc[s * RO] = _mm512_fmadd_ps(xv, a, acc[s * RO]);
      acc[s * RO + 1] = _mm512_fmadd_ps(xv, b, acc[s * RO + 1]);
    }
  }
  if (k < in) { /* the last features, the lanes past in zero */
    const __mmask16 m = (__mmask16)((1u << (in - k)) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(m, w0 + k), b = _mm512_maskz_loadu_ps(m, w1 + k);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)s * in + k);
      acc[s * RO] = _mm512_fmadd_ps(xv, a, acc[s * RO]);
      acc[s * RO + 1] = _mm512_fmadd_ps(xv, b, acc[s * RO + 1]);
    }
  }
  for (int i = 0; i < RS * RO; i++) out[i] = acc[i];
}

#define TILE_ROWS(NS)                                                                        \
  static void tile_##NS(int in, const float *x, const float *w0, const float *w1, __m512 *acc) { \
    tile_rows(NS, in, x, w0, w1, acc);                                                       \
  }
TILE_ROWS(1) TILE_ROWS(2) TILE_ROWS(3) TILE_ROWS(4) TILE_ROWS(5) TILE_ROWS(6) TILE_ROWS(7) TILE_ROWS(8)
static void (*const tiles[RS + 1])(int, const float *, const float *, const float *, __m512 *) = {
    NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6, tile_7, tile_8};

typedef struct {
  int n, in, out;
  const float *x, *w, *b;
  float *y;
} job;

/* Output pairs [lo, hi) for every row of x: a thread keeps its rows of w
 * to itself, and each row block of x stays in its L1 while the pairs pass. */
static void pairs(void *ctx, size_t lo, size_t hi) {
  const job *j = ctx;
  for (int s0 = 0; s0 < j->n; s0 += RS) {
    const int ns = j->n - s0 < RS ? j->n - s0 : RS;
    const float *x = j->x + (size_t)s0 * j->in;
    for (size_t pr = lo; pr < hi; pr++) {
      const int o0 = (int)pr * RO, no = j->out - o0 < RO ? j->out - o0 : RO;
      const float *w0 = j->w + (size_t)o0 * j->in;
      __m512 acc[RS * RO];
      tiles[ns](j->in, x, w0, no == RO ? w0 + j->in : w0, acc);
      float sums[RS * RO]; /* lane s * RO + o */
      _mm512_storeu_ps(sums, sum16(acc));
      for (int s = 0; s < ns; s++)
        for (int o = 0; o < no; o++) {
          const float v = sums[s * RO + o];
          j->y[(size_t)(s0 + s) * j->out + o0 + o] = j->b ? j->b[o0 + o] + v : v;
        }
    }
  }
}

int pt_linear_forward_dot(int n, int in, int out, const float *x, const float *w, const float *b, float *y) {
  /* Measured against OpenBLAS at 1 thread: 0.92x the time at 100 x 784 ->
   * 200, 0.68x at 32 x 512 -> 256, 0.77x at 100 x 784 -> 32; but 2x at
   * 100 x 100 -> 100, where a 16-float step leaves little to amortise the
   * reduction over, and 1.2x with 10 outputs. */
  if (in < 256 || in > 1024 || out < 32 || n < 1) return 0;
  job j = {n, in, out, x, w, b, y};
  pt_parallel_for((size_t)(out + RO - 1) / RO, 8, pairs, &j);
  return 1;
}

#else

int pt_linear_forward_dot(int n, int in, int out, const float *x, const float *w, const float *b, float *y) {
  (void)n, (void)in, (void)out, (void)x, (void)w, (void)b, (void)y;
  return 0;
}

#endif
