/* The linear layer's weight gradient for inputs with many zeros, skipping
 * the samples where a group of 4 adjacent inputs is all zero.
 *
 * dw[o][k] = sum over samples t of dy[t][o] x[t][k]. Unnormalised
 * Fashion-MNIST, the input of fmnist-mlp's lin1, is half zeros, and a
 * product with a zero input adds nothing. Skipping them one input at a time
 * costs a load per multiply-add, which ran no faster than the dense kernel
 * (linear_outer.c). Here 4 adjacent inputs share one list of samples, those
 * where any of the 4 is nonzero: neighbouring pixels are zero together, so
 * the list holds 62% of the samples on Fashion-MNIST's training images
 * (55% for 2 inputs, 72% for 8). A register tile of the 4 inputs by up to
 * 6 vectors of outputs takes, for each listed sample, 6 vectors of its row
 * of dy and 4 broadcasts of x: 24 fused multiply-adds for 10 loads, as in
 * the dense kernel, on 62% of the samples. That is on AVX-512; on AVX2
 * the tile is the 4 inputs by 3 half vectors (SP_NT below).
 *
 * The lists are bit masks over the samples: for each sample and 16 inputs
 * (a slab), a 16-bit code of the nonzero ones; for each group of 4 inputs,
 * one vector test of 32 samples' codes gives 32 bits of its mask. The tile
 * walks the set bits. Its sums have outputs in the lanes, where dw's rows
 * want inputs there: the 4 groups of a slab leave theirs in a buffer, and
 * 16 x 16 transpositions turn them into whole cache lines of dw's rows.
 * (Records of 4 inputs written straight from the tile, a masked 128-bit
 * lane each, straddled cache lines and took 65 us of the 200.) Into a
 * weight kept in panels (pt_linear_panel_index), which is where the
 * model puts fmnist-mlp's lin1, the sums are already rows of the panels
 * and are stored as they are, whole aligned lines: the same bits, and
 * lin1's backward pass went from 0.170 to 0.146 ms in training.
 *
 * At lin1 (100 x 784 -> 200, 1 thread, alone, AVX-512): 160-168 us
 * against the dense kernel's 186-195, the same bits; the masks take 5 us,
 * the transpositions and stores 27, the tiles the rest. In training,
 * fmnist-mlp went from 175,076 to 185,508 images/s at 1 thread and from
 * 271,735 to 278,274 at 2 (the masks are built on one thread). On AVX2
 * (Zen 3, Fashion-MNIST batches, best of 200 on a shared machine): 306 us
 * into panels and 333 in PyTorch's order against the BLAS's 383; with two
 * vectors of outputs per tile, spilling, 350 and 377.
 *
 * The bits are the dense kernel's: each element is the sum over the
 * samples in order, one v16_fmadd each (fused where the level has FMA),
 * from +0. A skipped term is dy times a zero input, +0 or -0, and adding
 * either to a nonzero sum changes nothing, so leaving it out gives the
 * same bits, up to the sign of a sum that is zero (which is -0 only where
 * products underflow, and moves no weight either way), for any finite dy.
 * (An infinite or NaN dy times 0 is NaN, which the dense kernel would
 * spread into dw and this one does not; by then the loss is NaN either
 * way.) Inputs that denormals-are-zero treats as zero are zero here too:
 * the compare sees them as the multiply does. */
#include "ops/cpu/ops.h"
#include "ops/cpu/workspace.h"
#include "util/threadpool.h"

#include "ops/cpu/simd/v16.h"
#include "ops/cpu/transpose16.h"

#define SP_SLAB 16 /* inputs per code */
/* The tile: 4 inputs by SP_NT tile vectors of outputs, the sums in
 * registers next to the loads of dy and a broadcast of x. On AVX-512 a
 * tile vector is a whole vector and 6 of them make 24 sums of 32
 * registers. On AVX2 a whole vector takes two of the 16 registers: 4 x 1
 * of them (8 registers) left the loop bound by the multiply-adds' latency
 * and its own overhead (6 loads and 8 multiply-adds per sample), and 4 x 2
 * spilled. Half vectors give 4 x 3, 12 sums beside 3 loads of dy and a
 * broadcast: 12 multiply-adds for 7 loads, and 200 outputs in 25 halves
 * rather than 13 vectors. At lin1 (Zen 3, AVX2, 1 thread, Fashion-MNIST
 * batches, medians of 3,000 calls) 348-370 us became 304-306, the same
 * bits. The portable build takes one half vector (8 of 16 SSE registers;
 * a whole vector's 16 sums spilled there). The buffer of a slab's sums
 * keeps room for the widest tile at every level, so that the workspace
 * does not depend on the level.
 *
 * On AVX2 the lists are of 2 inputs, by up to 6 half vectors: 55% of the
 * samples listed rather than 62%, so 11% fewer multiply-adds, 12 (or, for
 * lin1's 25 halves in blocks of 5, 10) of them for 7 or 8 loads, and as
 * many walks over the bits. At lin1 (Zen 3, 1 thread, Fashion-MNIST
 * batches, 4,000 calls of each alternating) 0.96x the time of 4 x 3 by the
 * median of the pairs' ratios (p25 0.91-0.94, p75 0.98-1.02), the same
 * bits; single inputs by 9 or 12 halves took 1.34-1.38x. */
#define SP_G_MIN 2 /* the smallest list at any level: the workspace's masks are sized for it */
#if PT_V16_REGS >= 32
typedef pt_v16 sp_vec;
#define SP_G 4 /* inputs per list */
#define SP_W 16
#define SP_NT 6
#define sp_zero v16_zero
#define sp_set1 v16_set1
#define sp_load v16_load
#define sp_fmadd v16_fmadd
#define sp_add v16_add
#define sp_maskz_loadu v16_maskz_loadu
#define sp_mask_storeu v16_mask_storeu
#define sp_storeu v16_storeu
#else
typedef pt_v8 sp_vec;
#define SP_W 8
#if PT_V16_REGS >= 8
#define SP_G 2
#define SP_NT 6
#else
#define SP_G 4
#define SP_NT 1
#endif
#define sp_zero v8_zero
#define sp_set1 v8_set1
#define sp_load v8_load
#define sp_fmadd v8_fmadd
#define sp_add v8_add
#define sp_maskz_loadu v8_maskz_loadu
#define sp_mask_storeu v8_mask_storeu
#define sp_storeu v8_storeu
#endif
#define SP_COLS 96 /* floats of a slab's sums per input: the widest tile, 6 x 16 */

/* The share of samples listed, over all groups, above which the dense
 * kernel is faster: against it alone at 1 thread, with inputs zeroed in
 * random groups of 4, 0.65x its time at 40%, 0.88x at 60%, 0.96x at 70%
 * and 1.08x at 80% (100 x 784 -> 200, AVX-512), and at 64 x 9216 -> 128
 * even at about 62%. */
#define SP_MAX_DENSITY 0.66
#define SP_MAX_X ((size_t)128 << 10) /* floats of x: 512 KB */

typedef struct {
  int n, in, out, out16; /* out16: out rounded up to whole vectors */
  int words;             /* 64-bit words per mask */
  int nvec, nblocks;     /* tile vectors of outputs, in blocks of nvec / nblocks (the first nvec % nblocks one more) */
  const float *xs;       /* x by slabs (in / 16, n, 16) */
  const float *dyp;      /* dy (n, out16), 0 past out */
  const uint64_t *mask;  /* (in / 4, words): bit t set where x[t][4 g .. 4 g + 4) has a nonzero */
  float *dw;             /* (out, in), or in panels (pt_linear_panels) */
  int add, panels;
  float *buf;            /* per thread (16, SP_COLS): a slab's sums */
} job;

size_t pt_linear_sparse_workspace(int max_batch, int in, int out, int nthreads) {
  const size_t xn = (size_t)max_batch * (size_t)in, xs = pt_up16(xn < SP_MAX_X ? xn : SP_MAX_X);
  const size_t dyp = pt_up16((size_t)pt_round_up(out, 16) * (size_t)max_batch);
  const size_t words = (size_t)(max_batch + 63) / 64;
  const size_t codes = (size_t)(in + SP_SLAB - 1) / SP_SLAB * (size_t)pt_round_up(max_batch, 32); /* uint16 */
  const size_t mask = (size_t)(in / SP_G_MIN) * words;                                            /* uint64 */
  const size_t buf = (size_t)nthreads * SP_SLAB * SP_COLS;
  return xs + dyp + pt_up16(codes / 2 + 1) + pt_up16(mask * 2) + buf + 16; /* 16: room to align */
}

/* The sums for inputs k .. k + 4 (k = 4 g) and the block's tile vectors
 * u0 .. u0 + NT, summed over the samples of group g's mask: into the
 * panels, or into buf[i][SP_W u ..] for slab() to transpose. */
static inline __attribute__((always_inline)) void tile(const int NT, const job *j, int g, int u0, float *buf) {
  sp_vec acc[SP_G][SP_NT];
#pragma GCC unroll 4
  for (int i = 0; i < SP_G; i++)
#pragma GCC unroll 6
    for (int u = 0; u < NT; u++) acc[i][u] = sp_zero();
  const int k = g * SP_G;
  const uint64_t *mask = j->mask + (size_t)g * j->words;
  const float *xk = j->xs + (size_t)(k / SP_SLAB) * j->n * SP_SLAB + k % SP_SLAB, *dk = j->dyp + (size_t)u0 * SP_W;
  for (int w = 0; w < j->words; w++)
    for (uint64_t bits = mask[w]; bits; bits &= bits - 1) {
      const size_t t = (size_t)w * 64 + (size_t)__builtin_ctzll(bits);
      const float *xr = xk + t * SP_SLAB, *dr = dk + t * (size_t)j->out16;
      sp_vec d[SP_NT];
#pragma GCC unroll 6
      for (int u = 0; u < NT; u++) d[u] = sp_load(dr + u * SP_W);
#pragma GCC unroll 4
      for (int i = 0; i < SP_G; i++) {
        const sp_vec b = sp_set1(xr[i]);
#pragma GCC unroll 6
        for (int u = 0; u < NT; u++) acc[i][u] = sp_fmadd(b, d[u], acc[i][u]);
      }
    }
  if (j->panels) { /* the sums are parts of rows of the panels: stored as they are */
#pragma GCC unroll 6
    for (int u = 0; u < NT; u++) {
      const int o = (u0 + u) * SP_W, p = o / 16, wd = pt_linear_panel_width(j->out, p);
      const pt_m16 m = v16_lanes(wd - o % 16);
      float *d = j->dw + pt_linear_panel_offset(j->in, p) + (size_t)k * wd + o % 16;
#pragma GCC unroll 4
      for (int i = 0; i < SP_G; i++) {
        float *r = d + (size_t)i * wd;
        if (wd - o % 16 >= SP_W) /* a whole tile vector: no mask */
          sp_storeu(r, j->add ? sp_add(sp_maskz_loadu(m, r), acc[i][u]) : acc[i][u]);
        else
          sp_mask_storeu(r, m, j->add ? sp_add(sp_maskz_loadu(m, r), acc[i][u]) : acc[i][u]);
      }
    }
    return;
  }
  float *b = buf + (size_t)(k % SP_SLAB) * SP_COLS;
#pragma GCC unroll 4
  for (int i = 0; i < SP_G; i++)
#pragma GCC unroll 6
    for (int u = 0; u < NT; u++) sp_storeu(b + (size_t)i * SP_COLS + u * SP_W, acc[i][u]);
}

static void slab(const job *j, int s, int u0, int nu, float *buf) {
  /* nu as a constant in each instantiation, so that the sums stay in registers */
  for (int g = s * SP_SLAB / SP_G; g < (s + 1) * SP_SLAB / SP_G; g++) {
    switch (nu) {
#if SP_NT >= 6
      case 1: tile(1, j, g, u0, buf); break;
      case 2: tile(2, j, g, u0, buf); break;
      case 3: tile(3, j, g, u0, buf); break;
      case 4: tile(4, j, g, u0, buf); break;
      case 5: tile(5, j, g, u0, buf); break;
#endif
      default: tile(SP_NT, j, g, u0, buf); break;
    }
  }
  if (j->panels) return;
  /* buf (16 inputs, nu * SP_W outputs) into dw's rows, 16 x 16 at a time */
  const int o0 = u0 * SP_W, cols = nu * SP_W;
  for (int c = 0; c < cols; c += 16) {
    pt_v16 r[16];
    pt_transpose16_planes(buf + c, NULL, SP_COLS, 16, 0xFFFFu, r);
    for (int i = 0; i < 16 && c + i < cols && o0 + c + i < j->out; i++) {
      float *d = j->dw + (size_t)(o0 + c + i) * j->in + s * SP_SLAB;
      v16_storeu(d, j->add ? v16_add(v16_loadu(d), r[i]) : r[i]);
    }
  }
}

/* Units: a block of output vectors by a slab of 16 inputs, block by block,
 * so that a block's columns of dy (n x nv x 64 bytes) stay in the L1 cache
 * while the slabs pass. Each element of dw is computed in one unit, whose
 * order does not depend on the threads. */
static void task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  const int nslabs = j->in / SP_SLAB;
  float *buf = j->buf + (size_t)tid * SP_SLAB * SP_COLS;
  size_t lo, hi;
  pt_split((size_t)j->nblocks * (size_t)nslabs, tid, nt, &lo, &hi);
  for (size_t u = lo; u < hi; u++) {
    const int b = (int)(u / (size_t)nslabs), s = (int)(u % (size_t)nslabs);
    const int per = j->nvec / j->nblocks, extra = j->nvec % j->nblocks;
    slab(j, s, b * per + (b < extra ? b : extra), per + (b < extra), buf);
  }
}

/* What the tiles read, made on the pool: each thread's samples' codes,
 * slabs of x and padded rows of dy, then each thread's groups' masks (a
 * group's mask reads every sample's code). One thread made them all at
 * first: 0.27 us a parallel region against about 20 us of work, which at
 * 2 threads left one core idle for half of it. Every code and mask is the
 * same whatever the split. */
typedef struct {
  int n, in, out, out16, nslabs, n32, words, groups;
  int kept; /* xs and codes were made by the forward pass */
  const float *x, *dy;
  float *xs, *dyp;   /* xs unused where kept */
  uint16_t *codes_w; /* where the codes are made, unless kept */
  const uint16_t *codes;
  uint64_t *mask;
} prep;

static void prep_samples(void *ctx, int tid, int nt) {
  const prep *p = ctx;
  size_t lo, hi;
  pt_split((size_t)p->n, tid, nt, &lo, &hi);
  /* codes[s][t]: bit i set where x[t][16 s + i] is nonzero */
  const pt_v16 zero = v16_zero();
  for (size_t t = lo; t < hi; t++) {
    const float *xr = p->x + t * p->in;
    if (!p->kept)
      for (int s = 0; s < p->nslabs; s++) {
        const pt_v16 xv = v16_loadu(xr + s * SP_SLAB);
        p->codes_w[(size_t)s * p->n32 + t] = (uint16_t)v16_cmpneq(xv, zero);
        v16_store(p->xs + ((size_t)s * p->n + t) * SP_SLAB, xv);
      }
    /* dyp (n, out16): dy's rows padded to whole vectors, so that every load
     * in the tiles is whole */
    for (int o = 0; o < p->out16; o += 16) {
      const pt_m16 m = v16_lanes(p->out - o);
      v16_store(p->dyp + t * p->out16 + o, v16_maskz_loadu(m, p->dy + t * p->out + o));
    }
  }
}

/* mask[g]: 32 samples' codes tested against the group's bits at once */
static void prep_masks(void *ctx, int tid, int nt) {
  const prep *p = ctx;
  size_t lo, hi;
  pt_split((size_t)p->groups, tid, nt, &lo, &hi);
  for (size_t g = lo; g < hi; g++) {
    const int s = (int)g * SP_G / SP_SLAB;
    const uint16_t sel = (uint16_t)(((1u << SP_G) - 1u) << ((int)g * SP_G % SP_SLAB));
    uint64_t *mg = p->mask + g * p->words;
    for (int w = 0; w < p->words; w++) mg[w] = 0;
    for (int t = 0; t < p->n32; t += 32) {
      const uint32_t bits = v16_test_u16x32(p->codes + (size_t)s * p->n32 + t, sel);
      mg[t / 64] |= (uint64_t)bits << (t % 64);
    }
  }
}

static int dw_sparse(int n, int in, int out, const float *x, const float *dy, float *dw, int add, int panels,
                     float *ws, const float *kept) {
  /* x is read twice, for the masks and by the tiles: from the L2 cache at
   * fmnist-mlp's lin1 (314 KB), but from L3 at mnist-cnn's fc1 (64 x 9216,
   * 2.4 MB), where the second pass cost more than the skipped work saved
   * (mnist-cnn 6% slower at 1 thread, 8% at 2). */
  if (!ws || in % SP_SLAB || in < 64 || out < 16 || n < 16 || (size_t)n * in > SP_MAX_X) return 0;
  const int out16 = pt_round_up(out, 16), words = (n + 63) / 64, nslabs = in / SP_SLAB;
  const int n32 = pt_round_up(n, 32), groups = in / SP_G;
  /* x by slabs (nslabs, n, 16): a unit's tiles read one slab of each
   * listed sample, which in x's rows (3,136 bytes apart at lin1) was a line
   * from L2 per sample; copied here, where x is read anyway, a slab's lines
   * are one run of 6.4 KB. lin1 at 1 thread on Zen 3: 304-310 us -> 283-285. */
  float *xs = pt_align64(ws);
  float *dyp = xs + pt_up16((size_t)n * in);
  uint16_t *codes = (uint16_t *)(dyp + pt_up16((size_t)out16 * n)); /* (nslabs, n32) */
  uint64_t *mask = (uint64_t *)((float *)codes + pt_up16((size_t)nslabs * n32 / 2 + 1));
  /* or both as the forward pass kept them (pt_linear_keep_floats) */
  const float *xs_k = kept ? pt_align64_const(kept) : NULL;
  const uint16_t *codes_k = kept ? (const uint16_t *)(xs_k + pt_linear_kept_codes_at(n, in)) : NULL;

  if (!kept)
    for (int s = 0; s < nslabs; s++)
      for (int t = n; t < n32; t++) codes[(size_t)s * n32 + t] = 0;
  prep p = {n,  in, out, out16, nslabs, n32, words, groups, kept != NULL, x, dy, xs, dyp, codes,
            kept ? codes_k : codes, mask};
  pt_parallel(prep_samples, &p);
  pt_parallel(prep_masks, &p);
  size_t listed = 0;
  for (size_t i = 0; i < (size_t)groups * words; i++) listed += (size_t)__builtin_popcountll(mask[i]);
  if ((double)listed > SP_MAX_DENSITY * (double)groups * n) return 0;

  /* the tile vectors of outputs in blocks of at most SP_NT, as even as they go */
  const int nvec = (out + SP_W - 1) / SP_W;
  float *buf = (float *)mask + pt_up16((size_t)groups * words * 2);
  job j = {n, in, out, out16, words, nvec, (nvec + SP_NT - 1) / SP_NT, kept ? xs_k : xs, dyp, mask, dw, add, panels, buf};
  pt_parallel(task, &j);
  return 1;
}

int pt_linear_backward_dw_sparse(int n, int in, int out, const float *x, const float *dy, float *dw, int add,
                                 float *ws) {
  return dw_sparse(n, in, out, x, dy, dw, add, 0, ws, NULL);
}

int pt_linear_backward_dwp_sparse(int n, int in, int out, const float *x, const float *dy, float *dwp, int add,
                                  float *ws, const float *kept) {
  return dw_sparse(n, in, out, x, dy, dwp, add, 1, ws, kept);
}
