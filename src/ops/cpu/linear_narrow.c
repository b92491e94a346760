/* The linear layer's forward pass for fewer than 16 outputs: a
 * classifier's last layer (fmnist-mlp's lin2, 200 -> 10; mnist-cnn's fc2,
 * 128 -> 10; tutorial-cnn's fc3, 84 -> 10).
 *
 * y = x w^T + b with x (n, in) and w (out, in). The other passes want 16
 * outputs or more (linear_xt.c) or 32 (linear_dot.c), and the BLAS took
 * 13 us for lin2 at 1 thread on Zen 3 and ran on one thread at any count,
 * a GEMM of 10 columns being too narrow for pt_sgemm to split. Here w is
 * first transposed into wt (in, 16), zeros past out, and each sample's
 * outputs are one vector: for each input in turn, a broadcast of x times
 * wt's row, a chain of multiply-adds from the bias. A chain waits on the
 * one before (4 cycles on current x86 cores), so a register tile takes
 * NS samples at once, enough chains for the two FMA units (AVX-512: 8
 * vectors; AVX2, two registers a vector: 4, 8 registers; the portable
 * build: 2, 8 of SSE's 16). lin2 at 1 thread, Zen 3: 7.6 us.
 *
 * The threads take runs of tiles, each with a wt of its own, transposed 16
 * x 16 in registers (0.3 us at lin2). One wt written by the first thread
 * and read by the others took lin2 at 2 threads to 12-15 us: its 200
 * cache lines went from core to core and back on every call.
 *
 * Each output is its bias plus the products in the order of the inputs,
 * one fused multiply-add each (where the level has them), as in the other
 * forward passes, whichever thread computes it: the bits do not depend on
 * the thread count. */
#include "ops/cpu/ops.h"
#include "ops/cpu/workspace.h"

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/transpose16.h"
#include "util/threadpool.h"

#if PT_V16_REGS >= 32
#define NS 8
#elif PT_V16_REGS >= 8
#define NS 4
#else
#define NS 2
#endif
/* Inputs from which the transposition of w is paid back: below, a
 * sample's chain is too short to matter and the BLAS keeps the shape. */
#define NARROW_MIN_IN 32

typedef struct {
  int n, in, out;
  const float *x, *w, *b; /* x (n, in), w (out, in), b (out) or NULL */
  float *y;               /* (n, out) */
  float *wts;             /* per thread (in, 16) */
  const float *wt;        /* the calling thread's */
} job;

size_t pt_linear_narrow_workspace(int in, int nthreads) {
  return (size_t)nthreads * (size_t)in * 16 + 16; /* 16: room to align */
}

/* wt (in, 16) = w^T, 0 past out */
static void transpose(const float *w, int in, int out, float *wt) {
  for (int k0 = 0; k0 < in; k0 += 16) {
    const int kc = in - k0 < 16 ? in - k0 : 16;
    pt_v16 r[16];
    pt_transpose16_planes(w + k0, NULL, (size_t)in, out, v16_lanes(kc), r);
    for (int l = 0; l < kc; l++) v16_store(wt + (size_t)(k0 + l) * 16, r[l]);
  }
}

/* Samples t0 .. t0 + S; S a constant in each instantiation, so that the
 * sums stay in registers. */
static inline __attribute__((always_inline)) void tile(const int S, const job *j, int t0) {
  const pt_m16 m = v16_lanes(j->out);
  const pt_v16 init = j->b ? v16_maskz_loadu(m, j->b) : v16_zero();
  pt_v16 acc[NS];
#pragma GCC unroll 8
  for (int s = 0; s < S; s++) acc[s] = init;
  const float *x = j->x + (size_t)t0 * j->in;
  for (int k = 0; k < j->in; k++) {
    const pt_v16 w = v16_load(j->wt + (size_t)k * 16);
#pragma GCC unroll 8
    for (int s = 0; s < S; s++) acc[s] = v16_fmadd(v16_set1(x[(size_t)s * j->in + k]), w, acc[s]);
  }
#pragma GCC unroll 8
  for (int s = 0; s < S; s++) v16_mask_storeu(j->y + (size_t)(t0 + s) * j->out, m, acc[s]);
}

static void task(void *ctx, int tid, int nt) {
  job j = *(const job *)ctx;
  size_t lo, hi;
  pt_split((size_t)(j.n + NS - 1) / NS, tid, nt, &lo, &hi);
  if (lo == hi) return;
  float *wt = j.wts + (size_t)tid * j.in * 16;
  transpose(j.w, j.in, j.out, wt);
  j.wt = wt;
  for (size_t g = lo; g < hi; g++) {
    const int t0 = (int)g * NS, left = j.n - t0;
    if (left >= NS) {
      tile(NS, &j, t0);
      continue;
    }
    switch (left) { /* the last samples, fewer than NS (a case past NS is never reached) */
#define REST(k) \
  case k: tile((k) < NS ? (k) : 1, &j, t0); break;
      REST(7)
      REST(6)
      REST(5)
      REST(4)
      REST(3)
      REST(2)
#undef REST
      default: tile(1, &j, t0); break;
    }
  }
}

int pt_linear_forward_narrow(int n, int in, int out, const float *x, const float *w, const float *b, float *y,
                             float *ws) {
  if (!ws || out < 1 || out >= 16 || in < NARROW_MIN_IN || n < 1) return 0;
  job j = {n, in, out, x, w, b, y, pt_align64(ws), NULL};
  /* at least 4 tiles a thread: under that the pool's start costs more
   * than the second thread saves */
  if ((n + NS - 1) / NS < 8) task(&j, 0, 1);
  else pt_parallel(task, &j);
  return 1;
}
