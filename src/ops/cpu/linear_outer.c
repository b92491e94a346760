/* The linear layer's two gradients as sums of outer products.
 *
 * Both are c (m, k) = sum over t of a column of a (m) times a row of b
 * (k), with b's rows and c's rows along the layer's inputs:
 *   input gradient  dx (n, in)   = dy (n, out) w (out, in):  t runs over
 *                   the outputs, a = dy, b = w;
 *   weight gradient dw (out, in) += dy^T (out, n) x (n, in): t runs over
 *                   the samples, b = x, and a = dy's columns, copied
 *                   first into panels of a tile's rows (below).
 * On AVX-512, a register tile of 4 rows of c by 96 inputs (24 vectors of
 * sums) takes,
 * for each t in turn, 6 vectors of b's row and 4 broadcasts of a: 24 fused
 * multiply-adds for 10 loads, and each sum ends where it is stored, with
 * nothing to transpose or reduce and nothing packed first. The threads
 * take units of 96 inputs by 4 rows of c, chunk by chunk; within a chunk,
 * every tile passes the same 96 columns of b (t x 384 bytes), which stay
 * in the cache while the next chunk's are fetched ahead. Levels with
 * fewer registers take narrower tiles (OP_SV, OP_MS below).
 *
 * Input gradient, at mnist-cnn's fc1 (64 x 128 -> 9216, at 1 thread):
 * OpenBLAS took 1.55-1.76 ms alone (85-97 GFLOP/s) and this 1.24-1.38
 * (110-122; 147 at a shape whose weights fit in L2: fc1's 4.7 MB come from
 * L3, and neither prefetching them further ahead nor streaming stores for
 * dx helped). In training, fc1's backward pass went from 3.23-3.59 to
 * 2.68-2.87 ms, and mnist-cnn gained about 10% at 1 thread with the
 * forward pass's block of 64 rows (linear_xt.c).
 *
 * Weight gradient, at fmnist-mlp's lin1 (100 x 784 -> 200, at 1 thread):
 * read from dy in place, each tile's broadcasts came from 100 cache
 * lines, of which it used 16 bytes each; a pass over a chunk streamed all
 * of dy (80 KB) through the L1 cache and pushed out the chunk of x the
 * tiles share, and it ran at OpenBLAS's speed (205-215 us). With dy's
 * columns copied into panels, 4 at a time and along t ((out / 4, n, 4):
 * 2 us), a tile reads 1.6 KB in order and x's chunk stays: 194-197 us.
 *
 * Each element of c is the sum over t in order, one fused multiply-add
 * each, from 0 (and then added to what c held, for a weight gradient that
 * accumulates), whichever thread computes it: the bits do not depend on
 * the thread count. That is also OpenBLAS's order for these shapes, so the weight
 * gradient has the bits it had there. */
#include "ops/cpu/ops.h"
#include "ops/cpu/workspace.h"
#include "util/threadpool.h"

#include "ops/cpu/simd/v16.h"

/* The register tile: OP_MS rows of c by OP_SV vectors of inputs, its sums
 * in registers next to a vector of b's row and a broadcast of a. On
 * AVX-512, 4 x 6 = 24 of the 32 registers. On AVX2 a vector takes two of
 * the 16 registers, so 4 x 1: 8 sums, as many as the two FMA units need to
 * cover their latency, with 2 for b's row and 1 for a broadcast. In the
 * portable build a vector takes four of SSE's 16, and 2 x 1 already takes
 * 8 of them. The chunks of inputs stay 96 wide at every level, a
 * narrower tile passing over them a few vectors at a time: chunks one
 * vector wide, at fc1's 9,216 inputs, read every row of w from its own
 * page, all into one set of the L1 cache, and ran at a third of the BLAS's
 * speed. */
#if PT_V16_REGS >= 32
#define OP_SV 6
#define OP_MS 4
#elif PT_V16_REGS >= 8
#define OP_SV 1
#define OP_MS 4
#else
#define OP_SV 1
#define OP_MS 2
#endif
#define OP_KC 96 /* inputs per chunk */
/* Rows past the last whole tile of OP_MS (fmnist-mlp's lin2 has 10
 * outputs: two tiles of 4 and 2 rows left) take tiles as wide as the
 * registers allow for their 1 to OP_MS - 1 rows. On AVX2 a tile of one row
 * by one vector is 2 chains of multiply-adds where the two FMA units need
 * 8 to cover their latency: lin2's last 2 rows, a tile per row and vector,
 * took half of its weight gradient's 9 us. Two vectors wide, 2 rows keep 8
 * chains (3 rows 12, of the 16 registers with b's two vectors and a
 * broadcast). AVX-512's tiles are already 6 vectors wide. */
#if PT_V16_REGS >= 32
#define OP_SV_REST OP_SV
#elif PT_V16_REGS >= 8
#define OP_SV_REST 2
#else
#define OP_SV_REST 1
#endif
#define OP_SV_MAX (OP_SV > OP_SV_REST ? OP_SV : OP_SV_REST)
/* The smallest shapes taken, the same at every level: under 96 inputs or 4
 * rows of c there is too little to amortise a tile's start over. */
#define OP_MIN_K 96
#define OP_MIN_M 4

/* Where b's rows lie a multiple of 4 KB apart, each column of a chunk maps
 * into one set of the caches, and t rows of it do not stay there for the
 * next tile. AVX-512's wide tile reads each line once for 24 multiply-adds
 * and outran OpenBLAS even so; AVX2's 4 x 1 read it for 8, and at
 * mnist-cnn's fc1 (64 x 9,216 -> 128, 1 thread, Zen 3) took 1.7x
 * OpenBLAS's time for dx and 1.8x for dw, against 1.0x and 1.1x at 9,200
 * inputs. There, on the narrower levels, the BLAS (which packs its
 * operands) keeps those shapes. */
static int aliased(int k) { return PT_V16_REGS < 32 && k % 1024 == 0; }

typedef struct {
  int m, k, t;    /* c (m, k), summed over t */
  const float *a; /* a[g * a_g + s * a_m + t * a_t] for row i = OP_MS g + s of c */
  size_t a_m, a_t, a_g;
  const float *b; /* b[t * k + j]: rows as long as c's */
  float *c;       /* c[i * k + j] */
  int add;        /* c += the sums, rather than = */
} job;

/* c[i0 .. i0 + MS)[k0 .. k0 + 16 NV); unless FULL, the last vector is
 * masked by last. MS, NV and FULL are constants in each instantiation, so
 * the MS x NV sums stay in registers, and whole chunks load b unmasked
 * (masked loads there cost 5-8%). */
static inline __attribute__((always_inline)) void tile(const int MS, const int NV, const int FULL, const job *j,
                                                       int i0, int k0, pt_m16 last) {
  pt_v16 acc[OP_MS][OP_SV_MAX];
#pragma GCC unroll 4
  for (int s = 0; s < MS; s++)
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) acc[s][v] = v16_zero();
  /* What c holds, which the tile adds to at its end: from L3 where c is
   * large (mnist-cnn's fc1: 4.7 MB), and latency the tile's sums can hide. */
  if (j->add)
    for (int s = 0; s < MS; s++)
      for (int v = 0; v < NV; v++) __builtin_prefetch(j->c + (size_t)(i0 + s) * j->k + k0 + v * 16, 0, 3);
  const float *a = j->a + (size_t)(i0 / OP_MS) * j->a_g + (size_t)(i0 % OP_MS) * j->a_m;
  const float *b = j->b + k0;
  for (int t = 0; t < j->t; t++, a += j->a_t, b += j->k) {
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) {
      const pt_v16 bv = FULL || v < NV - 1 ? v16_loadu(b + v * 16) : v16_maskz_loadu(last, b + v * 16);
#pragma GCC unroll 4
      for (int s = 0; s < MS; s++) acc[s][v] = v16_fmadd(v16_set1(a[(size_t)s * j->a_m]), bv, acc[s][v]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < MS; s++) {
    float *d = j->c + (size_t)(i0 + s) * j->k + k0;
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) {
      const pt_m16 mv = v == NV - 1 ? last : 0xFFFFu;
      const pt_v16 sum = j->add ? v16_add(v16_maskz_loadu(mv, d + v * 16), acc[s][v]) : acc[s][v];
      v16_mask_storeu(d + v * 16, mv, sum);
    }
  }
}

/* The chunk's nv vectors as a constant: a whole chunk, or the last one's
 * 1 to OP_SV with the last vector partial. */
static inline __attribute__((always_inline)) void tile_nv(const int MS, const job *j, int i0, int k0, int nv,
                                                          pt_m16 last) {
  if (nv == OP_SV && last == 0xFFFFu) {
    tile(MS, OP_SV, 1, j, i0, k0, last);
    return;
  }
  switch (nv) {
#if OP_SV > 1
    case 1: tile(MS, 1, 0, j, i0, k0, last); break;
    case 2: tile(MS, 2, 0, j, i0, k0, last); break;
    case 3: tile(MS, 3, 0, j, i0, k0, last); break;
    case 4: tile(MS, 4, 0, j, i0, k0, last); break;
    case 5: tile(MS, 5, 0, j, i0, k0, last); break;
#endif
    default: tile(MS, OP_SV, 0, j, i0, k0, last); break;
  }
}

static void tile_ms(const job *j, int i0, int k0, int nv, pt_m16 last) { tile_nv(OP_MS, j, i0, k0, nv, last); }

/* The ms (1 to OP_MS - 1) rows past the last whole tile, nv (1 to
 * OP_SV_REST) vectors, both constants in each instantiation. */
static inline __attribute__((always_inline)) void tile_rest_nv(const int MS, const job *j, int i0, int k0, int nv,
                                                               pt_m16 last) {
#if OP_SV_REST > OP_SV
  if (nv == OP_SV_REST && last == 0xFFFFu) tile(MS, OP_SV_REST, 1, j, i0, k0, last);
  else if (nv == OP_SV_REST) tile(MS, OP_SV_REST, 0, j, i0, k0, last);
  else tile(MS, 1, 0, j, i0, k0, last);
#else
  tile_nv(MS, j, i0, k0, nv, last);
#endif
}

static void tile_rest(const job *j, int i0, int ms, int k0, int nv, pt_m16 last) {
  switch (ms) {
    case 1: tile_rest_nv(1, j, i0, k0, nv, last); break;
#if OP_MS > 2
    case 2: tile_rest_nv(2, j, i0, k0, nv, last); break;
    case 3: tile_rest_nv(3, j, i0, k0, nv, last); break;
#endif
    default: break;
  }
}

static void task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  /* units: chunks of OP_KC inputs by tiles of OP_MS rows (the last may be short) */
  const size_t nchunks = ((size_t)j->k + OP_KC - 1) / OP_KC, groups = ((size_t)j->m + OP_MS - 1) / OP_MS;
  size_t lo, hi;
  pt_split(nchunks * groups, tid, nt, &lo, &hi);
  for (size_t u = lo; u < hi; u++) {
    const size_t c = u / groups, g = u % groups;
    const int k0 = (int)c * OP_KC, kc = j->k - k0 < OP_KC ? j->k - k0 : OP_KC;
    const int nv = (kc + 15) / 16;
    const pt_m16 last = v16_lanes(kc - (nv - 1) * 16);
    /* The next chunk's rows of b, a share with each tile: they lie k floats
     * apart, where the hardware does not look ahead. */
    if ((c + 1) * groups < hi && k0 + OP_KC + OP_KC <= j->k) {
      const size_t per = ((size_t)j->t + groups - 1) / groups;
      for (size_t t = g * per; t < (g + 1) * per && t < (size_t)j->t; t++)
        for (int l = 0; l < OP_KC; l += 16) __builtin_prefetch(j->b + t * (size_t)j->k + k0 + OP_KC + l, 0, 3);
    }
    const int i0 = (int)g * OP_MS, ms = j->m - i0 < OP_MS ? j->m - i0 : OP_MS;
    const int step = ms == OP_MS ? OP_SV : OP_SV_REST;
    for (int v0 = 0; v0 < nv; v0 += step) {
      const int tv = nv - v0 < step ? nv - v0 : step;
      const pt_m16 tl = v0 + tv == nv ? last : 0xFFFFu;
      if (ms == OP_MS) tile_ms(j, i0, k0 + 16 * v0, tv, tl);
      else tile_rest(j, i0, ms, k0 + 16 * v0, tv, tl);
    }
  }
}

static int run(job j) {
  pt_parallel(task, &j);
  return 1;
}

/* From 8 outputs (fmnist-mlp's lin2 and mnist-cnn's fc2 have 10): on Zen 3
 * (AVX2) the BLAS took 13 us for lin2's input gradient (100 x 10 -> 200)
 * and this 6.8, at 1 thread and at 2; the weight gradient 9.1 against 7.4,
 * and at fc2 (64 x 10 -> 128) both together 9.4 against 5.9. With lin2's
 * last 2 rows in tiles two vectors wide (OP_SV_REST), its weight gradient
 * took 6.6-8.3 us against 8.5-10.1 (medians of 3,000 calls, alternating
 * processes, a contended host). */
#define OP_MIN_OUT 8

int pt_linear_backward_dx(int n, int in, int out, const float *dy, const float *w, float *dx) {
  if (n < OP_MIN_M || in < OP_MIN_K || out < OP_MIN_OUT || aliased(in)) return 0;
  return run((job){n, in, out, dy, (size_t)out, 1, (size_t)OP_MS * out, w, dx, 0});
}

size_t pt_linear_dw_workspace(int max_batch, int out) {
  return pt_up16((size_t)pt_round_up(out, OP_MS) * (size_t)max_batch) + 16; /* 16: room to align */
}

int pt_linear_backward_dw(int n, int in, int out, const float *x, const float *dy, float *dw, int add, float *ws) {
  if (!ws || out < OP_MIN_OUT || in < OP_MIN_K || n < 16 || aliased(in)) return 0;
  /* panel (out / OP_MS, n, OP_MS): panel[g][t][s] = dy[t][OP_MS g + s], 0 past out */
  float *panel = pt_align64(ws);
  const int groups = (out + OP_MS - 1) / OP_MS, whole = out / OP_MS;
  for (int t = 0; t < n; t++) {
    const float *d = dy + (size_t)t * out;
    float *p = panel + (size_t)t * OP_MS;
    for (int g = 0; g < whole; g++)
      for (int s = 0; s < OP_MS; s++) p[(size_t)g * OP_MS * n + s] = d[g * OP_MS + s];
    if (whole < groups)
      for (int s = 0; s < OP_MS; s++)
        p[(size_t)whole * OP_MS * n + s] = whole * OP_MS + s < out ? d[whole * OP_MS + s] : 0.0f;
  }
  return run((job){out, in, n, panel, 1, OP_MS, (size_t)OP_MS * n, x, dw, add});
}
