/* The linear layer's forward pass on a weight in panels (pt_linear_panel_index)
 * for inputs with many zeros: each sample's row of y is its bias plus, for
 * each nonzero input k, x[t][k] times row k of every panel.
 *
 * Unnormalised Fashion-MNIST, fmnist-mlp's input, is half zeros. The dense
 * pass (linear_xt.c) has samples along the lanes and can skip an input
 * only where it is zero in every sample of a vector, which is rare (8% of
 * the inputs for 16 samples). With the outputs along the lanes, one
 * sample's zero inputs are skipped one by one: per nonzero input, a
 * broadcast of x and one aligned row from each of 13 panels, for 13 fused
 * multiply-adds.
 *
 * The weight does not fit in L1 (627 KB at lin1), so the inputs go in
 * slabs (SF_SLAB) and every sample passes through a slab before the
 * next: each row of the weight is loaded
 * from L2 once per call, and the partial rows of y go back and forth
 * instead. Outputs go in blocks of at most 13 vectors, the sums in
 * registers. Which inputs are nonzero, a bit each, is found first in
 * one pass over x.
 *
 * At lin1 (100 x 784 -> 200, 1 thread, alone, Fashion-MNIST batches):
 * 188-195 us with the caches warm against 193-205 for the dense pass on
 * PyTorch's order; 215-220 against 238-247 with 4 MB touched between
 * calls; in training about the same as the dense pass (0.203 ms). What it
 * buys is the panels themselves, which let the weight gradient skip its
 * transpositions (linear_sparse.c): the BLAS on panels takes 390 us. At
 * 100% nonzero inputs it takes 337 us; a layer whose inputs are dense
 * should not be given panels (the model gives them only to a first layer
 * on one-channel images with no mean subtracted).
 *
 * Each element of y is its bias plus the products in the order of the
 * inputs, one fused multiply-add each, computed whole by one thread: the
 * bits do not depend on the threads. A skipped product is x = +0 or -0
 * times a finite weight; adding it to a nonzero sum changes nothing. NaN
 * inputs compare as nonzero and are kept. */
#include "ops/cpu/ops.h"
#include "ops/cpu/workspace.h"
#include "util/threadpool.h"

#include "ops/cpu/simd/v16.h"

/* Inputs per pass over the samples: the block's rows of the slab stay in
 * L1 (AVX-512: 32 inputs, 13 vectors, 26 KB) while each sample's partial
 * sums come from y and go back. Below AVX-512 a block is at most 7 vectors
 * and 64 inputs fit (28 KB): half the round trips of y and half the
 * mispredicted ends of the loop over a slab's inputs. At lin1 on Zen 3
 * (AVX2, Fashion-MNIST batches, 1 thread, medians of 3,000 calls) 32
 * inputs took 322-333 us, 48 took 292-294 and 64 took 280-285. */
#if PT_V16_REGS >= 32
#define SF_SLAB 32
#else
#define SF_SLAB 64
#endif/* At most this many vectors of outputs per block: the sums, a broadcast of
 * x and the loads of the last, partial panel in registers (AVX-512: 13 of
 * 32; AVX2, two registers a vector: 7 of 8, the panel rows read straight
 * from memory by the multiply-adds). */
#if PT_V16_REGS >= 32
#define SF_NV 13
#elif PT_V16_REGS >= 8
#define SF_NV 7
#else
#define SF_NV 3
#endif

typedef struct {
  int n, in, out, nslabs, nblocks, nvec;
  const float *x, *wp, *b; /* x (n, in), wp (out, in) in panels, b (out) or NULL */
  uint64_t *codes;         /* (n, nslabs): bit i set where x[t][SF_SLAB s + i] is nonzero */
  float *y;                /* (n, out) */
  float *xs;               /* kept for the weight gradient, or NULL: x by slabs (in / 16, n, 16) */
  uint16_t *codes16;       /* ... and (in / 16, n rounded up to 32): bit i where x[t][16 s + i] is nonzero */
} job;

size_t pt_linear_sparse_forward_workspace(int max_batch, int in) {
  /* a 64-bit code per slab of at least 32 inputs, whatever the level */
  return pt_up16(2 * (size_t)max_batch * (size_t)((in + 31) / 32)) + 16;
}

/* y[t][16 v0 .. 16 (v0 + NV)) for the samples [lo, hi), through slab s.
 * PART: the block's last panel is narrower than 16 and its rows are read
 * masked; a constant, so that blocks of whole panels hold no mask (on AVX2
 * a mask takes two of the 16 registers, and with it the seventh vector's
 * sums spilled to the stack, a load-add-store chain per nonzero input that
 * doubled the pass's time). HALF: that panel is exactly 8 wide, and its
 * sums are a half vector (pt_v8) read with plain loads: where a vector is
 * two registers (AVX2) one multiply-add instead of two and no masked load
 * (fmnist-mlp's lin1, 200 outputs, 1 thread on Zen 3, alone: 280-281 us
 * -> 265). */
static inline __attribute__((always_inline)) void block(const int NV, const int PART, const int HALF, const job *j,
                                                        int s, int v0, int lo, int hi) {
  const int out = j->out, in = j->in, o0 = v0 * 16;
  const int wl = PART ? pt_linear_panel_width(out, v0 + NV - 1) : 16; /* the block's last panel's width */
  const pt_m16 last = v16_lanes(wl);
  const int NW = HALF ? NV - 1 : NV; /* whole vectors of sums */
  /* panel v0 + v, row 32 s: the first NV - 1 are 16 wide, 16 in apart */
  const float *ws = j->wp + pt_linear_panel_offset(in, v0) + (size_t)s * SF_SLAB * 16;
  const float *wls = j->wp + pt_linear_panel_offset(in, v0 + NV - 1) + (size_t)s * SF_SLAB * wl;
  const size_t pstride = pt_linear_panel_offset(in, 1);
  for (int t = lo; t < hi; t++) {
    uint64_t bits = j->codes[(size_t)t * j->nslabs + s];
    /* a slab with no nonzero input adds nothing; past the first, whose
     * pass writes the bias, its sums need not go back and forth (13% of
     * the slabs of Fashion-MNIST's images: their edges) */
    if (!bits && s > 0) continue;
    float *yr = j->y + (size_t)t * out + o0;
    pt_v16 acc[SF_NV];
    pt_v8 half = v8_zero();
#pragma GCC unroll 13
    for (int v = 0; v < NW; v++) {
      const pt_m16 m = v == NV - 1 ? last : 0xFFFFu;
      if (s > 0) acc[v] = v16_maskz_loadu(m, yr + v * 16);
      else if (j->b) acc[v] = v16_maskz_loadu(m, j->b + o0 + v * 16);
      else acc[v] = v16_zero();
    }
    if (HALF) {
      if (s > 0) half = v8_loadu(yr + (NV - 1) * 16);
      else if (j->b) half = v8_loadu(j->b + o0 + (NV - 1) * 16);
    }
    const float *xr = j->x + (size_t)t * j->in + s * SF_SLAB;
    for (; bits; bits &= bits - 1) {
      const int k = __builtin_ctzll(bits);
      const pt_v16 xv = v16_set1(xr[k]);
      /* row k of each whole panel: one offset from bases the compiler
       * keeps in registers (v16_fmadd_at) */
      const size_t o = (size_t)k * 16 * sizeof(float);
#pragma GCC unroll 13
      for (int v = 0; v < NV - 1; v++) acc[v] = v16_fmadd_at(xv, ws + v * pstride, o, acc[v]);
      if (HALF) half = v8_fmadd_at(v8_set1(xr[k]), wls, o / 2, half);
      else if (PART) acc[NV - 1] = v16_fmadd(xv, v16_maskz_loadu(last, wls + (size_t)k * wl), acc[NV - 1]);
      else acc[NV - 1] = v16_fmadd_at(xv, wls, o, acc[NV - 1]);
    }
#pragma GCC unroll 13
    for (int v = 0; v < NW; v++)
      v16_mask_storeu(yr + v * 16, v == NV - 1 ? last : 0xFFFFu, acc[v]);
    if (HALF) v8_storeu(yr + (NV - 1) * 16, half);
  }
}

#define PT_SF_BLOCK(nv_)                                                                                             \
  case nv_:                                                                                                          \
    if (wl == 8) block(nv_, 1, 1, j, s, v0, lo, hi);                                                         \
    else if (wl < 16) block(nv_, 1, 0, j, s, v0, lo, hi);                                                    \
    else block(nv_, 0, 0, j, s, v0, lo, hi);                                                                 \
    break;

static void pass(const job *j, int s, int v0, int nv, int lo, int hi) {
  /* nv and the last panel's kind as constants in each instantiation, so
   * that the sums stay in registers */
  const int wl = pt_linear_panel_width(j->out, v0 + nv - 1);
  switch (nv) {
    PT_SF_BLOCK(1)
    PT_SF_BLOCK(2)
#if SF_NV > 3
    PT_SF_BLOCK(3)
    PT_SF_BLOCK(4)
    PT_SF_BLOCK(5)
    PT_SF_BLOCK(6)
#endif
#if SF_NV > 7
    PT_SF_BLOCK(7)
    PT_SF_BLOCK(8)
    PT_SF_BLOCK(9)
    PT_SF_BLOCK(10)
    PT_SF_BLOCK(11)
    PT_SF_BLOCK(12)
#endif
    default:
      if (wl == 8) block(SF_NV, 1, 1, j, s, v0, lo, hi);
      else if (wl < 16) block(SF_NV, 1, 0, j, s, v0, lo, hi);
      else block(SF_NV, 0, 0, j, s, v0, lo, hi);
      break;
  }
}
#undef PT_SF_BLOCK

/* Which of the samples [lo, hi)'s inputs are nonzero; and where the
 * weight gradient is to find them kept, x by slabs of 16 and their codes
 * (linear_sparse.c's layout), from the same loads: in training the
 * backward pass then skips its own pass over x (lin1 on Zen 3 at 1
 * thread: this pass 1.04x its time, the weight gradient 0.92x). */
static void make_codes(const job *j, size_t lo, size_t hi) {
  const pt_v16 zero = v16_zero();
  const size_t n32 = (size_t)pt_round_up(j->n, 32);
  for (size_t t = lo; t < hi; t++) {
    const float *xr = j->x + t * j->in;
    for (int s = 0; s < j->nslabs; s++) {
      uint64_t code = 0;
      for (int q = 0; q < SF_SLAB / 16 && s * SF_SLAB + 16 * q < j->in; q++) {
        const pt_v16 xv = v16_loadu(xr + s * SF_SLAB + 16 * q);
        const pt_m16 c = v16_cmpneq(xv, zero);
        code |= (uint64_t)c << (16 * q);
        if (j->xs) {
          const size_t s16 = (size_t)s * (SF_SLAB / 16) + (size_t)q;
          v16_store(j->xs + (s16 * (size_t)j->n + t) * 16, xv);
          j->codes16[s16 * n32 + t] = (uint16_t)c;
        }
      }
      j->codes[t * j->nslabs + s] = code;
    }
  }
}

/* Each thread takes a run of samples through every block and slab, so a
 * row of y is one thread's, summed in the same order for any thread count.
 * It first finds which of its samples' inputs are nonzero: no other
 * thread reads those codes, so they need no pass (and no wait for every
 * thread) of their own, and its rows of x are then in its caches. */
static void task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  if (lo == hi) return;
  make_codes(j, lo, hi);
  const int per = j->nvec / j->nblocks, extra = j->nvec % j->nblocks;
  for (int b = 0, v0 = 0; b < j->nblocks; b++) {
    const int nv = per + (b < extra);
    for (int s = 0; s < j->nslabs; s++) pass(j, s, v0, nv, (int)lo, (int)hi);
    v0 += nv;
  }
}

int pt_linear_forward_sparse(int n, int in, int out, const float *x, const float *wp, const float *b, float *y,
                             float *ws, float *keep) {
  if (!ws || in % 16 || in < 64 || out < 16 || n < 1) return 0;
  float *xs = keep ? pt_align64(keep) : NULL;
  uint16_t *codes16 = keep ? (uint16_t *)(xs + pt_linear_kept_codes_at(n, in)) : NULL;
  const int n32 = pt_round_up(n, 32);
  if (keep) /* the codes of the samples past n, up to a multiple of 32: none */
    for (int s = 0; s < in / 16; s++)
      for (int t = n; t < n32; t++) codes16[(size_t)s * n32 + t] = 0;
  const int nslabs = (in + SF_SLAB - 1) / SF_SLAB;
  uint64_t *codes = (uint64_t *)pt_align64(ws); /* (n, nslabs) */
  const int nvec = (out + 15) / 16;
  int nblocks = (nvec + SF_NV - 1) / SF_NV;
  /* The last block, the one with a narrow panel, has the fewest vectors;
   * where a mask costs registers (not on AVX-512, whose masks have their
   * own), it must leave room for one. */
  if (PT_V16_REGS < 32 && out % 16 && nvec / nblocks == SF_NV) nblocks++;
  job j = {n, in, out, nslabs, nblocks, nvec, x, wp, b, codes, y, xs, codes16};
  pt_parallel(task, &j);
  return 1;
}
