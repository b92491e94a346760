/* The linear layer's forward pass as outer products, on the batch
 * transposed a block at a time, for batches of 96 rows or more.
 *
 * y = x w^T + b with x (n, in) and w (out, in) both stored along in. The
 * dot-product pass (linear_dot.c) streams w's rows from the L2 cache for
 * every 8 rows of x and ends each output in a horizontal sum: 130 GFLOP/s
 * at fmnist-mlp's lin1 (100 x 784 -> 200). Here 96 rows of x at a time
 * are transposed, 64 inputs at a time, into xt (64, 96), which stays in the
 * L1 cache while every output passes it: a register tile of 4 outputs by 96
 * samples (24 vectors of sums) takes one input's 4 weights as broadcasts
 * and its 6 vectors of samples from xt, 24 fused multiply-adds for 10
 * loads, and nothing to reduce. The tile's sums (out, 96) wait in yt
 * between blocks of inputs and are transposed into y at the end, with the
 * bias. 160 GFLOP/s on that shape alone, with the next tile's weights
 * prefetched into L1; lin1's forward in training went from 0.235-0.254 to
 * 0.209-0.238 ms.
 *
 * Where 64 rows or more are left after the blocks of 96, one more block of
 * 64 takes them with tiles of 4 outputs by 64 samples (16 sums for 8
 * loads): mnist-cnn's fc1 (64 x 9216 -> 128) went from OpenBLAS's 1.63-1.75
 * ms a step to 1.08-1.13 at 1 thread. The rows past that are left to the
 * caller (pt_linear_forward), which gives them to the dot-product pass or
 * the BLAS: padding 100 rows to 112 cost more than those 4 rows take there.
 *
 * Each output is b + the sum over inputs in order, one fused multiply-add
 * each, whichever thread computes it: threads take whole blocks of 16
 * outputs, so the bits do not depend on the thread count. */
#include "ops/cpu/ops.h"
#include "ops/cpu/workspace.h"
#include "util/threadpool.h"

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/transpose16.h"

#define XT_SV 6               /* vectors of samples per block */
#define XT_ROWS (XT_SV * 16)  /* rows of x per block: 96 */
#define XT_SV_LAST 4          /* a last block of 64 rows, where that many are left */
#define XT_KC 64              /* inputs per block: xt is 24 KB */
#define XT_MR 4               /* outputs per unit of work */
/* The register tile: XT_NR outputs by XT_TV vectors of samples, next to a
 * vector of xt and a broadcast of w. On AVX-512 the whole block, 4 x 6 = 24
 * of the 32 registers (4 x 4 in the block of 64). On AVX2 a vector takes
 * two of the 16 registers: 4 x 1, 8 sums, as many as the two FMA units
 * need to cover their latency; in the portable build four of SSE's 16: 2
 * x 1. The narrower tiles pass over the block's vectors in turn. */
#if PT_V16_REGS >= 32
#define XT_NR 4
#define XT_TV XT_SV
#elif PT_V16_REGS >= 8
#define XT_NR 4
#define XT_TV 1
#else
#define XT_NR 2
#define XT_TV 1
#endif

static size_t yt_floats(int out) { return pt_up16((size_t)out * XT_ROWS); }
static size_t xt_floats(void) { return (size_t)XT_KC * XT_ROWS; }

size_t pt_linear_xt_workspace(int in, int out, int nthreads) {
  (void)in;
  return yt_floats(out) + (size_t)nthreads * xt_floats() + 16; /* 16: room to align */
}

typedef struct {
  int rows, in, out, nunits; /* rows: those done here; units: groups of XT_MR outputs */
  const float *x, *w, *b;
  float *y, *yt, *xt; /* yt (out, 96) shared; xt (64, 96) per thread */
} job;

/* xt[k][s] = x[s0 + s][k0 + k] for k < kc and s < 16 sv_n, in 16 x 16
 * transposes: the rows of x are the "planes" whose elements go into the
 * lanes. */
static void pack(const job *j, int s0, int sv_n, int k0, int kc, float *xt) {
  for (int kk = 0; kk < kc; kk += 16) {
    const pt_m16 m = v16_lanes(kc - kk);
    for (int sv = 0; sv < sv_n; sv++) {
      pt_v16 r[16];
      pt_transpose16_planes(j->x + (size_t)(s0 + sv * 16) * j->in + k0 + kk, NULL, (size_t)j->in, 16, m, r);
      for (int i = 0; i < 16 && kk + i < kc; i++) v16_store(xt + (size_t)(kk + i) * XT_ROWS + sv * 16, r[i]);
    }
  }
}

/* yt rows [o, o + NR) += w[o .. o + NR)[k0 .. k0 + kc) xt, over SV vectors
 * of samples from v0; first: = instead of +=. NR and SV are constants in
 * each instantiation, so the NR x SV sums stay in registers. */
static inline __attribute__((always_inline)) void tile(const int NR, const int SV, const job *j, int o, int v0,
                                                       int k0, int kc, const float *xt, int first) {
  const float *w = j->w + (size_t)o * j->in + k0;
  float *yt = j->yt + (size_t)o * XT_ROWS + v0 * 16;
  xt += v0 * 16;
  pt_v16 acc[XT_NR][XT_TV];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++)
#pragma GCC unroll 6
    for (int v = 0; v < SV; v++) acc[r][v] = first ? v16_zero() : v16_load(yt + r * XT_ROWS + v * 16);
  /* The next tile's weights, which otherwise arrive one miss at a time:
   * its rows are in floats apart, too far for the hardware to guess. Once
   * per tile of outputs, by its first pass over the block. */
  if (v0 == 0 && o + 2 * XT_NR <= j->out)
    for (int r = 0; r < XT_NR; r++)
      for (int l = 0; l < kc; l += 16) __builtin_prefetch(w + (size_t)(XT_NR + r) * j->in + l, 0, 3);
  for (int k = 0; k < kc; k++) {
#pragma GCC unroll 6
    for (int v = 0; v < SV; v++) {
      const pt_v16 xv = v16_load(xt + (size_t)k * XT_ROWS + v * 16);
#pragma GCC unroll 4
      for (int r = 0; r < NR; r++) acc[r][v] = v16_fmadd(v16_set1(w[(size_t)r * j->in + k]), xv, acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++)
#pragma GCC unroll 6
    for (int v = 0; v < SV; v++) v16_store(yt + r * XT_ROWS + v * 16, acc[r][v]);
}

/* Tiles of XT_NR outputs, then single outputs, for [o0, o1) over sv_n
 * vectors of samples (XT_SV, or XT_SV_LAST for the block of 64), XT_TV of
 * them at a time. */
static void tiles(const job *j, int sv_n, int o0, int o1, int k0, int kc, const float *xt, int first) {
  int o = o0;
#if XT_TV == XT_SV
  if (sv_n == XT_SV) {
    for (; o + XT_NR <= o1; o += XT_NR) tile(XT_NR, XT_SV, j, o, 0, k0, kc, xt, first);
    for (; o < o1; o++) tile(1, XT_SV, j, o, 0, k0, kc, xt, first);
  } else {
    for (; o + XT_NR <= o1; o += XT_NR) tile(XT_NR, XT_SV_LAST, j, o, 0, k0, kc, xt, first);
    for (; o < o1; o++) tile(1, XT_SV_LAST, j, o, 0, k0, kc, xt, first);
  }
#else
  for (; o + XT_NR <= o1; o += XT_NR)
    for (int v0 = 0; v0 < sv_n; v0 += XT_TV) tile(XT_NR, XT_TV, j, o, v0, k0, kc, xt, first);
  for (; o < o1; o++)
    for (int v0 = 0; v0 < sv_n; v0 += XT_TV) tile(1, XT_TV, j, o, v0, k0, kc, xt, first);
#endif
}

/* y[s0 + s][o] = yt[o][s] + b[o] for the outputs [o0, o1), 16 at a time
 * (the last group may be short), and the first 16 sv_n samples. */
static void unpack(const job *j, int s0, int sv_n, int o0, int o1) {
  for (int g = o0; g < o1; g += 16) {
    const int no = o1 - g < 16 ? o1 - g : 16;
    const pt_m16 m = v16_lanes(no);
    const pt_v16 bias = j->b ? v16_maskz_loadu(m, j->b + g) : v16_zero();
    for (int sv = 0; sv < sv_n; sv++) {
      pt_v16 r[16];
      pt_transpose16_planes(j->yt + (size_t)g * XT_ROWS + sv * 16, NULL, XT_ROWS, no, 0xFFFFu, r);
      for (int i = 0; i < 16; i++) v16_mask_storeu(j->y + (size_t)(s0 + sv * 16 + i) * j->out + g, m, v16_add(r[i], bias));
    }
  }
}

static void task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  size_t lo, hi;
  pt_split((size_t)j->nunits, tid, nt, &lo, &hi);
  const int o0 = (int)lo * XT_MR, o1 = (int)hi * XT_MR < j->out ? (int)hi * XT_MR : j->out;
  if (o0 >= o1) return;
  float *xt = j->xt + (size_t)tid * xt_floats();
  for (int s0 = 0; s0 < j->rows; s0 += XT_ROWS) {
    const int sv_n = j->rows - s0 < XT_ROWS ? XT_SV_LAST : XT_SV; /* the block of 64 */
    for (int k0 = 0; k0 < j->in; k0 += XT_KC) {
      const int kc = j->in - k0 < XT_KC ? j->in - k0 : XT_KC;
      pack(j, s0, sv_n, k0, kc, xt);
      tiles(j, sv_n, o0, o1, k0, kc, xt, k0 == 0);
    }
    unpack(j, s0, sv_n, o0, o1);
  }
}

int pt_linear_forward_xt(int n, int in, int out, const float *x, const float *w, const float *b, float *y, float *ws) {
  /* Measured against the faster of the dot-product pass and OpenBLAS at 1
   * thread, with the caches flushed between calls (AVX-512): 0.83x its time at 100 x
   * 784 -> 200, 0.81x at 100 x 512 -> 512, 0.83x at 100 x 256 -> 256,
   * 0.74x at 256 x 9216 -> 128, 0.84x at 100 x 65536 -> 256, 0.69x at 100
   * x 784 -> 16; at 1,000 x 784 -> 200 the same as OpenBLAS. At 2 threads
   * fmnist-mlp's lin1 takes as long as with the dot products. */
  const int last = n % XT_ROWS >= XT_SV_LAST * 16 ? XT_SV_LAST * 16 : 0;
  const int rows = n / XT_ROWS * XT_ROWS + last;
  if (!ws || rows == 0 || in < 32 || out < 16) return 0;
  float *base = pt_align64(ws);
  job j = {rows, in, out, (out + XT_MR - 1) / XT_MR, x, w, b, y, base, base + yt_floats(out)};
  pt_parallel(task, &j);
  return rows;
}
