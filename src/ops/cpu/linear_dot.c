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

#include "ops/cpu/simd/v16.h"

/* The register tile: RS rows of x by RO rows of w, RS x RO vectors of sums
 * next to RO vectors of w and one of x. AVX-512: 8 x 2 = 16 of the 32
 * registers, reduced together by one transposing tree (v16_hsum16). On
 * AVX2 a vector takes two of the 16 registers: 4 x 2 spills some sums, but
 * ran faster than 2 x 2, which streams w from the L2 cache twice as often
 * (8 x 784 -> 200 at 1 thread, Zen 3: 61 us against 73). In the portable
 * build a vector takes four of SSE's 16, so 1 x 2. Those sums are each
 * reduced on their own (v16_reduce_add). */
#if PT_V16_REGS >= 32
#define RS 8
#elif PT_V16_REGS >= 8
#define RS 4
#else
#define RS 1
#endif
#define RO 2

typedef struct {
  int n, in, out;
  const float *x, *w, *b;
  float *y;
} job;

/* Outputs y[s0 .. s0 + NS) x [o0 .. o0 + no), no being RO or, for an odd
 * last output, 1. NS is a constant in each instantiation, so the loop has
 * no tests and the accumulators stay in registers from the first product
 * to the reduction: reducing and storing here, not in the caller, keeps
 * them from passing through memory (a 1 KB copy per tile, 2% of the pass). */
static inline __attribute__((always_inline)) void tile_rows(const int NS, const job *j, int s0, int o0, int no) {
  const int in = j->in;
  const float *x = j->x + (size_t)s0 * in, *w0 = j->w + (size_t)o0 * in;
  const float *w1 = no == RO ? w0 + in : w0; /* an odd last output: the second sums are dropped */
  pt_v16 acc[RS * RO];
  for (int i = 0; i < RS * RO; i++) acc[i] = v16_zero();
  int k = 0;
  for (; k + 16 <= in; k += 16) {
    const pt_v16 a = v16_loadu(w0 + k), b = v16_loadu(w1 + k);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
      const pt_v16 xv = v16_loadu(x + (size_t)s * in + k);
      acc[s * RO] = v16_fmadd(xv, a, acc[s * RO]);
      acc[s * RO + 1] = v16_fmadd(xv, b, acc[s * RO + 1]);
    }
  }
  if (k < in) { /* the last features, the lanes past in zero */
    const pt_m16 m = v16_lanes(in - k);
    const pt_v16 a = v16_maskz_loadu(m, w0 + k), b = v16_maskz_loadu(m, w1 + k);
#pragma GCC unroll 8
    for (int s = 0; s < NS; s++) {
      const pt_v16 xv = v16_maskz_loadu(m, x + (size_t)s * in + k);
      acc[s * RO] = v16_fmadd(xv, a, acc[s * RO]);
      acc[s * RO + 1] = v16_fmadd(xv, b, acc[s * RO + 1]);
    }
  }
  float *y = j->y + (size_t)s0 * j->out + o0;
#if RS * RO == 16
  float sums[16]; /* lane s * RO + o */
  v16_storeu(sums, v16_hsum16(acc));
#define SUM(i) sums[i]
#else
#define SUM(i) v16_reduce_add(acc[i])
#endif
#pragma GCC unroll 8
  for (int s = 0; s < NS; s++)
#pragma GCC unroll 2
    for (int o = 0; o < no; o++) y[(size_t)s * j->out + o] = j->b ? SUM(s * RO + o) + j->b[o0 + o] : SUM(s * RO + o);
#undef SUM
}

#define TILE_ROWS(NS) \
  static void tile_##NS(const job *j, int s0, int o0, int no) { tile_rows(NS, j, s0, o0, no); }
TILE_ROWS(1)
#if RS >= 2
TILE_ROWS(2)
#endif
#if RS >= 4
TILE_ROWS(3) TILE_ROWS(4)
#endif
#if RS >= 8
TILE_ROWS(5) TILE_ROWS(6) TILE_ROWS(7) TILE_ROWS(8)
#endif
static void (*const tiles[RS + 1])(const job *, int, int, int) = {
    NULL, tile_1,
#if RS >= 2
    tile_2,
#endif
#if RS >= 4
    tile_3, tile_4,
#endif
#if RS >= 8
    tile_5, tile_6, tile_7, tile_8,
#endif
};

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
  /* Measured against OpenBLAS at 1 thread (AVX-512): 0.92x the time at 100 x 784 ->
   * 200, 0.68x at 32 x 512 -> 256, 0.77x at 100 x 784 -> 32; but 2x at
   * 100 x 100 -> 100, where a 16-float step leaves little to amortise the
   * reduction over, and 1.2x with 10 outputs. */
  if (in < 256 || in > 1024 || out < 32 || n < 1) return 0;
  /* Below AVX-512, w passes the registers once for every 4 rows of x (or
   * 1) rather than 8, and OpenBLAS took half the time from 32 rows up (40
   * x 784 -> 200: 170 us against 311, AVX2 on Zen 3); for a few rows,
   * where its packing is not paid back, the two were even (8 rows: 62 us
   * against 61). */
  if (RS < 8 && n > 8) return 0;
  job j = {n, in, out, x, w, b, y};
  pt_parallel_for((size_t)(out + RO - 1) / RO, 8, pairs, &j);
  return 1;
}
