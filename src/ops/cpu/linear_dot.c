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

#include "ops/cpu/lanes.h"

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

typedef struct {
  int n, in, out;
  const float *x, *w, *b;
  float *y;
} job;

/* Outputs y[s0 .. s0 + NS) x [o0 .. o0 + no), no being RO or, for an odd
 * last output, 1. NS is a constant in each instantiation, so the loop has
 * no tests and the accumulators stay in registers from the first product
 * to the store: reducing and storing here, not in the caller, keeps them
 * from passing through memory (a 1 KB copy per tile, 2% of the pass). */
static inline __attribute__((always_inline)) void tile_rows(const int NS, const job *j, int s0, int o0, int no) {
  const int in = j->in;
  const float *x = j->x + (size_t)s0 * in, *w0 = j->w + (size_t)o0 * in;
  const float *w1 = no == RO ? w0 + in : w0; /* an odd last output: the second sums are dropped */
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
    const __mmask16 m = pt_lanes(in - k);
    const __m512 a = _mm512_maskz_loadu_ps(m, w0 + k), b = _mm512_maskz_loadu_ps(m, w1 + k);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)s * in + k);
      acc[s * RO] = _mm512_fmadd_ps(xv, a, acc[s * RO]);
      acc[s * RO + 1] = _mm512_fmadd_ps(xv, b, acc[s * RO + 1]);
    }
  }
  __m512 sums = sum16(acc); /* lane s * RO + o */
  if (j->b) { /* b[o0], b[o0 + 1] in every pair of lanes */
    const __m128 bias = no == RO ? _mm_castpd_ps(_mm_load_sd((const double *)(j->b + o0))) : _mm_load_ss(j->b + o0);
    sums = _mm512_add_ps(sums, _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_castps_pd(bias))));
  }
  float *y = j->y + (size_t)s0 * j->out + o0;
  if (no == RO) { /* each row's pair of outputs lies together: one 8-byte store per row */
    const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(j->out));
    _mm512_mask_i32scatter_pd(y, (__mmask8)((1u << NS) - 1), rows, _mm512_castps_pd(sums), 4);
  } else {
    _mm512_mask_i32scatter_ps(y, (__mmask16)(0x5555u & ((1u << (RO * NS)) - 1)),
                              _mm512_mullo_epi32(_mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                                                      11, 12, 13, 14, 15), 1),
                                                 _mm512_set1_epi32(j->out)),
                              sums, 4);
  }
}

#define TILE_ROWS(NS) \
  static void tile_##NS(const job *j, int s0, int o0, int no) { tile_rows(NS, j, s0, o0, no); }
TILE_ROWS(1) TILE_ROWS(2) TILE_ROWS(3) TILE_ROWS(4) TILE_ROWS(5) TILE_ROWS(6) TILE_ROWS(7) TILE_ROWS(8)
static void (*const tiles[RS + 1])(const job *, int, int, int) = {
    NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6, tile_7, tile_8};

/* Output pairs [lo, hi) for every row of x: a thread keeps its rows of w
 * to itself, and each row block of x stays in its L1 while the pairs pass. */
static void pairs(void *ctx, size_t lo, size_t hi) {
  const job *j = ctx;
  for (int s0 = 0; s0 < j->n; s0 += RS) {
    const int ns = j->n - s0 < RS ? j->n - s0 : RS;
    for (size_t pr = lo; pr < hi; pr++) {
      const int o0 = (int)pr * RO;
      tiles[ns](j, s0, o0, j->out - o0 < RO ? j->out - o0 : RO);
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
