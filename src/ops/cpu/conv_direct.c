/* conv2d, stride 1, as an implicit GEMM with register tiles.
 *
 * For stride 1 the unrolled column of output position (oy, ox) and kernel
 * tap k = (ci, ky, kx) is xp[ci][(oy + ky) * wp + ox + kx] of the zero-padded
 * input xp (c, hp, wp): 16 neighbouring outputs of one row read 16
 * neighbouring floats. So the GEMM's B operand is loaded straight from xp at
 * offset koff[k] = ci*hp*wp + ky*wp + kx, and the im2col matrix, its copy by
 * the BLAS into packed panels, and the scatter of the GEMM's result all
 * disappear: forward is one pass over the padded input, in L1, and the
 * results are stored to (n, oc, oh, ow) with the bias and ReLU applied.
 *
 * Output positions go in 16-lane vectors, one of two ways, whichever needs
 * fewer vectors for the geometry:
 *  - row mode: each output row in ceil(ow/16) vectors, lanes past ow unused
 *    (a masked store);
 *  - flat mode: positions j = oy*wp + ox over the padded width, 16 at a time,
 *    lanes with ox >= ow unused; the used lanes of a vector are consecutive
 *    outputs, so a compressing store puts them in place.
 * mnist-cnn's conv2 (ow 24, wp 26) wastes 8% flat and 25% by rows;
 * tutorial-cnn's conv2 (ow 14, wp 18) 22% flat and 12.5% by rows.
 *
 * A register tile is RB output channels x VB vectors. With 32 vector
 * registers (AVX-512) it is 8 x 3: 24 accumulators, and per tap 3 loads of
 * input and 8 broadcasts of weights for 24 FMAs, so the two FMA ports, not
 * the loads, set the pace. Where a vector takes two registers (AVX2: 16
 * ymm) it is 6 x 1: 12 ymm accumulators, the 16-lane load's two and a
 * broadcast, and still a broadcast per two FMAs. Weights are repacked per
 * call as (oc/RB, K, RB) so a tap's RB broadcasts are adjacent.
 *
 * Backward, per group of samples:
 *  - dW[k][o] += sum over positions of B[k][pos] * dy[o][pos], with the
 *    output channels in the lanes: dy is first transposed, through the
 *    ReLU's mask, to (positions, channels), and blocks of kernel taps
 *    broadcast the input against it (the DWT kernels below).
 *  - dx is the forward convolution of dy, padded by k-1-pad, with the
 *    weights transposed and flipped, so it runs on the forward tiles.
 * With a 2x2 max-pool fused after the ReLU (pt_conv2d_pool_*), a group's
 * output goes to a scratch the size of the group, in cache, and is pooled
 * from there (pool_codes.c); backward, the transposed dy is built straight
 * from the pooled gradient and the codes.
 * Every thread takes a fixed block of the batch and sums its own partials in
 * a fixed order; the partials are added in thread order, so results depend
 * on the thread count but never on timing.
 */
#include "ops/cpu/conv_direct.h"

#include <stdint.h>
#include <string.h>

#include "util/threadpool.h"

#include "ops/cpu/pool_codes.h"
#include "ops/cpu/simd/v16.h"
#include "ops/cpu/transpose16.h"
#include "ops/cpu/workspace.h"

/* The forward tile: RB rows (output channels) x VB vectors (16 output
 * positions each), RB * VB accumulators plus VB loads and a broadcast
 * within the machine's registers. */
#ifdef EXP_RB
#define RB EXP_RB
#define VB EXP_VB
#elif PT_V16_REGS >= 32
#define RB 8
#define VB 3
#elif PT_V16_REGS >= 8
#define RB 6
#define VB 1
#else
#define RB 3
#define VB 1
#endif
#define SLACK 32 /* floats after a group's padded inputs: the last vectors read up to 15 past the end */
/* Samples per group: the group's padded input, padded dy and gathered dy
 * stay within 512 KiB of the core's 2 MiB L2. */
#define GROUP_BUDGET_FLOATS ((size_t)128 << 10)

/* One convolution pass: input (cin, hin, win) padded into (cin, hp, wp),
 * output (cout, oh, ow). Forward and the dx pass of backward are both one. */
typedef struct {
  int cin, hin, win, padh, padw, hp, wp, plane, sample;
  int cout, kh, kw, oh, ow, K;
  int vpr;  /* row mode: vectors per output row; 0 in flat mode */
  int nvec; /* vectors per sample */
} pass;

static void pass_init(pass *p, int cin, int hin, int win, int padh, int padw, int cout, int kh, int kw) {
  p->cin = cin, p->hin = hin, p->win = win, p->padh = padh, p->padw = padw;
  p->hp = hin + 2 * padh, p->wp = win + 2 * padw, p->plane = p->hp * p->wp, p->sample = cin * p->plane;
  p->cout = cout, p->kh = kh, p->kw = kw, p->oh = p->hp - kh + 1, p->ow = p->wp - kw + 1, p->K = cin * kh * kw;
  int flat = ((p->oh - 1) * p->wp + p->ow + 15) / 16, vpr = (p->ow + 15) / 16;
  if (p->oh * vpr <= flat) p->vpr = vpr, p->nvec = p->oh * vpr;
  else p->vpr = 0, p->nvec = flat;
}

/* Vector d of a sample: where its lanes read the padded input, where its
 * first used lane goes in the (oh*ow) output, and which lanes are used. */
static void vec_desc(const pass *p, int d, int *xoff, int *ooff, unsigned *mask) {
  if (p->vpr) {
    int oy = d / p->vpr, v = d % p->vpr * 16, left = p->ow - v;
    *xoff = oy * p->wp + v;
    *ooff = oy * p->ow + v;
    *mask = left >= 16 ? 0xFFFFu : (1u << left) - 1;
    return;
  }
  int j = d * 16, oy = j / p->wp, ox = j % p->wp;
  unsigned m = 0;
  for (int l = 0; l < 16; l++) {
    int q = j + l;
    if (q / p->wp < p->oh && q % p->wp < p->ow) m |= 1u << l;
  }
  *xoff = j;
  *ooff = oy * p->ow + (ox < p->ow ? ox : p->ow);
  *mask = m;
}

/* The vectors of cn samples in a row, padded with unused ones to a whole
 * number of tiles: input offsets into the group's padded copy, output
 * offsets from the group's first output sample (ystride floats each). */
static int group_tables(const pass *p, int cn, size_t ystride, int *xo, int *oo, unsigned *mk) {
  int T = cn * p->nvec;
  for (int i = 0, t = 0; i < cn; i++)
    for (int d = 0; d < p->nvec; d++, t++) {
      int xoff, ooff;
      vec_desc(p, d, &xoff, &ooff, &mk[t]);
      xo[t] = i * p->sample + xoff;
      oo[t] = (int)((size_t)i * ystride) + ooff;
    }
  for (int t = T; t < pt_round_up(T, VB); t++) xo[t] = 0, oo[t] = 0, mk[t] = 0;
  return T;
}

/* The cn samples of src (cin, hin, win) into dst (cin, hp, wp) each with a
 * zero border, and SLACK zeros after them: unused lanes read the border and
 * the slack, and in backward multiply a zero, so these must be finite.
 * With gate, only elements where gate > 0 are kept (the fused ReLU's mask). */
static void pad_group(const pass *p, int cn, const float *src, const float *gate, float *dst) {
  const size_t in = (size_t)p->hin * p->win;
  for (int i = 0; i < cn * p->cin; i++) {
    const float *s = src + in * i, *gt = gate ? gate + in * i : NULL;
    float *d = dst + (size_t)p->plane * i;
    memset(d, 0, sizeof(float) * (size_t)p->padh * p->wp);
    for (int y = 0; y < p->hin; y++) {
      float *r = d + (size_t)(y + p->padh) * p->wp;
      const float *sr = s + (size_t)y * p->win;
      for (int x = 0; x < p->padw; x++) r[x] = r[p->padw + p->win + x] = 0.0f;
      if (gt) {
        const float *gr = gt + (size_t)y * p->win;
        for (int x = 0; x < p->win; x++) r[p->padw + x] = gr[x] > 0.0f ? sr[x] : 0.0f;
      } else {
        memcpy(r + p->padw, sr, sizeof(float) * (size_t)p->win);
      }
    }
    memset(d + (size_t)(p->padh + p->hin) * p->wp, 0, sizeof(float) * (size_t)p->padh * p->wp);
  }
  memset(dst + (size_t)p->sample * cn, 0, sizeof(float) * SLACK);
}

/* The used lanes m of v to dst[0, popcount(m)): a masked store where they
 * are a prefix, a compressing one where not (flat mode, across a row's end). */
static inline void store_vec(float *dst, unsigned m, pt_v16 v) {
  if (m == 0xFFFFu) v16_storeu(dst, v);
  else if (m & (m + 1)) v16_compress_storeu(dst, m, v);
  else v16_mask_storeu(dst, m, v);
}

/* out rows [0, rows) of a tile: o[v][r*ostride ...] = relu?(sum_k w[k][r] * x[v][koff[k]] + bias[r]). */
static inline __attribute__((always_inline)) void tile(int K, const int *koff, const float *w,
                                                       const float *const x[VB], float *const o[VB],
                                                       const unsigned *mk, size_t ostride, int rows,
                                                       const float *bias, int relu) {
  pt_v16 c[RB][VB];
  for (int r = 0; r < RB; r++)
    for (int v = 0; v < VB; v++) c[r][v] = v16_zero();
  for (int k = 0; k < K; k++) {
    const int off = koff[k];
    pt_v16 b[VB];
    for (int v = 0; v < VB; v++) b[v] = v16_loadu(x[v] + off);
    const float *wk = w + (size_t)k * RB;
    for (int r = 0; r < RB; r++) {
      const pt_v16 a = v16_set1(wk[r]);
      for (int v = 0; v < VB; v++) c[r][v] = v16_fmadd(a, b[v], c[r][v]);
    }
  }
  for (int r = 0; r < RB; r++) {
    if (r >= rows) break;
    const pt_v16 bv = v16_set1(bias ? bias[r] : 0.0f);
    for (int v = 0; v < VB; v++) {
      pt_v16 s = v16_add(c[r][v], bv);
      if (relu) s = v16_max(v16_zero(), s); /* maxps gives its second where one is NaN: NaN passes */
      store_vec(o[v] + (size_t)r * ostride, mk[v], s);
    }
  }
}

/* A group's padded input up to this many floats stays in L1 while every
 * block of output channels passes over it. */
#define L1_INPUT_FLOATS 4096

/* One tile: the block of output channels ob at the vectors from t. */
static inline __attribute__((always_inline)) void tile_at(const pass *p, int t, int ob, const int *xo, const int *oo,
                                                          const unsigned *mk, const float *xg, const float *wpk,
                                                          const int *koff, float *out, const float *bias, int relu) {
  const size_t ohw = (size_t)p->oh * p->ow;
  const int o0 = ob * RB, rows = p->cout - o0 < RB ? p->cout - o0 : RB;
  float *ob0 = out + ohw * o0;
  const float *x[VB];
  float *o[VB];
  for (int v = 0; v < VB; v++) x[v] = xg + xo[t + v], o[v] = ob0 + oo[t + v];
  tile(p->K, koff, wpk + (size_t)ob * RB * p->K, x, o, mk + t, ohw, rows, bias ? bias + o0 : NULL, relu);
}

/* All tiles of a group of cn samples: out (cout, oh*ow) per sample from
 * the padded xg, weights packed (cout/RB, K, RB). Where out is the layer's
 * output in memory (not a fused pool's scratch, which stays in cache) and
 * the group's input fits in L1, a block of output channels at a time over
 * every position: its stores then go to RB planes of the output, where
 * position by position they went to all cout at once, more streams than
 * the hardware prefetches, and each line missed. mnist-cnn's conv1 (1 ->
 * 32, 9 taps, 5.5 MB out a step): 0.67x the time at 1 thread on Zen 3
 * with the caches flushed between calls. With many input channels the
 * other order keeps a position's taps in L1 for every block (mnist-cnn's
 * conv2). */
static void run_tiles(const pass *p, int cn, int to_memory, int T, const int *xo, const int *oo, const unsigned *mk,
                      const float *xg, const float *wpk, const int *koff, float *out, const float *bias, int relu) {
  const int nob = pt_round_up(p->cout, RB) / RB;
  if (to_memory && (size_t)cn * p->sample <= L1_INPUT_FLOATS)
    for (int ob = 0; ob < nob; ob++)
      for (int t = 0; t < T; t += VB) tile_at(p, t, ob, xo, oo, mk, xg, wpk, koff, out, bias, relu);
  else
    for (int t = 0; t < T; t += VB)
      for (int ob = 0; ob < nob; ob++) tile_at(p, t, ob, xo, oo, mk, xg, wpk, koff, out, bias, relu);
}

/* dW, with the output channels in the lanes: dwT[k][o] += sum over positions
 * p of x_k[p] * dyT[p][o], where x_k[p] = xg[xpos[p] + koff[k]] is one
 * broadcast and dyT (positions, channels) is dy transposed. Every lane is a
 * real (k, o) pair and every position a real output, so no lanes are wasted
 * on the gaps of the forward's vectors and the accumulators are the final
 * sums, not partials to be reduced across lanes. A block is NB rows of KW
 * taps (a kernel row: offsets base, base+1, ...) times VO vectors of 16
 * channels; NB*KW*VO accumulators stay in registers over a chunk of
 * positions, and each chunk's sums are added to acc: a sum in blocks, whose
 * rounding grows with the chunk, not with the batch. */
#define DWT_KERNEL(NB, KW, VO)                                                                              \
  static void dwt_##NB##_##KW##_##VO(int P, const int *xpos, const float *xg, const int *rb,               \
                                     const float *dyt, size_t ld, float *acc) {                            \
    pt_v16 c[NB * KW][VO];                                                                                  \
    int b[NB];                                                                                              \
    for (int n = 0; n < NB; n++) b[n] = rb[n];                                                              \
    for (int r = 0; r < NB * KW; r++)                                                                       \
      for (int v = 0; v < VO; v++) c[r][v] = v16_zero();                                                    \
    for (int p = 0; p < P; p++) {                                                                           \
      const float *xb = xg + xpos[p];                                                                       \
      pt_v16 d[VO];                                                                                         \
      for (int v = 0; v < VO; v++) d[v] = v16_load(dyt + ld * p + 16 * v);                                 \
      for (int n = 0; n < NB; n++)                                                                          \
        for (int kx = 0; kx < KW; kx++) {                                                                   \
          const pt_v16 a = v16_set1(xb[b[n] + kx]);                                                         \
          for (int v = 0; v < VO; v++) c[n * KW + kx][v] = v16_fmadd(a, d[v], c[n * KW + kx][v]);          \
        }                                                                                                   \
    }                                                                                                       \
    for (int r = 0; r < NB * KW; r++)                                                                       \
      for (int v = 0; v < VO; v++) {                                                                        \
        float *a = acc + ld * r + 16 * v;                                                                   \
        v16_store(a, v16_add(v16_load(a), c[r][v]));                                                        \
      }                                                                                                     \
  }
typedef void (*dwt_fn)(int, const int *, const float *, const int *, const float *, size_t, float *);
typedef struct {
  int kw, vo, nb;
  dwt_fn fn;
} dwt_shape;

/* The block shapes for kernel rows of kw taps (3 and 5 as rows, others one
 * tap a row) and VO vectors of channels, as many accumulators as leave
 * room for the VO loads and a broadcast: about 24 with 32 registers; with
 * two registers a vector (AVX2), about 6, and one vector of channels, since
 * each broadcast then feeds two FMAs anyway; fewer again with four. */
#if PT_V16_REGS >= 32
DWT_KERNEL(1, 5, 4)
DWT_KERNEL(1, 5, 3)
DWT_KERNEL(2, 5, 2)
DWT_KERNEL(5, 5, 1)
DWT_KERNEL(2, 3, 4)
DWT_KERNEL(2, 3, 3)
DWT_KERNEL(4, 3, 2)
DWT_KERNEL(8, 3, 1)
DWT_KERNEL(6, 1, 4)
DWT_KERNEL(8, 1, 3)
DWT_KERNEL(12, 1, 2)
DWT_KERNEL(16, 1, 1)
static const dwt_shape dwt_shapes[] = {
    {5, 4, 1, dwt_1_5_4}, {5, 3, 1, dwt_1_5_3}, {5, 2, 2, dwt_2_5_2},   {5, 1, 5, dwt_5_5_1},
    {3, 4, 2, dwt_2_3_4}, {3, 3, 2, dwt_2_3_3}, {3, 2, 4, dwt_4_3_2},   {3, 1, 8, dwt_8_3_1},
    {1, 4, 6, dwt_6_1_4}, {1, 3, 8, dwt_8_1_3}, {1, 2, 12, dwt_12_1_2}, {1, 1, 16, dwt_16_1_1}};
#elif PT_V16_REGS >= 8
DWT_KERNEL(1, 5, 1)
DWT_KERNEL(2, 3, 1)
DWT_KERNEL(6, 1, 1)
static const dwt_shape dwt_shapes[] = {{5, 1, 1, dwt_1_5_1}, {3, 1, 2, dwt_2_3_1}, {1, 1, 6, dwt_6_1_1}};
#else
DWT_KERNEL(1, 3, 1)
DWT_KERNEL(3, 1, 1)
static const dwt_shape dwt_shapes[] = {{3, 1, 1, dwt_1_3_1}, {1, 1, 3, dwt_3_1_1}};
#endif

/* The block for kernel rows of kwr taps with the most vectors of channels,
 * up to vmax; NULL if none takes such rows. */
static const dwt_shape *dwt_pick(int kwr, int vmax) {
  const dwt_shape *best = NULL;
  for (size_t i = 0; i < sizeof dwt_shapes / sizeof dwt_shapes[0]; i++)
    if (dwt_shapes[i].kw == kwr && dwt_shapes[i].vo <= vmax && (!best || dwt_shapes[i].vo > best->vo))
      best = &dwt_shapes[i];
  return best;
}

/* ---- geometry and workspace ---- */

#define PCHUNK 128 /* positions per pass of the dW blocks: dyT's chunk stays in L1 */

typedef struct {
  pass f, t;   /* forward; dx = forward of padded dy with flipped weights */
  int G;       /* samples per group */
  int ocp, cp; /* channels rounded up to RB */
  int tmax;    /* vectors of a group, rounded up to tiles, in either pass */
  int ocw;     /* dyT's row: output channels rounded up to 16 */
  int kwr;     /* taps per kernel row the dW blocks take as one (kw, or 1) */
  int rows;    /* kernel rows (K / kwr), and room for the last block's padding */
  /* offsets in floats from the aligned workspace */
  size_t wf, wt, kf, kt, shared;                        /* shared by the threads */
  size_t xg, xo, oo, mk, xpos, dyt, dyp, dwt, dbv, part, ysc, per; /* within a thread's block */
} plan;

static void plan_init(plan *pl, const pt_conv_geom *g) {
  pass_init(&pl->f, g->c, g->h, g->w, g->pad, g->pad, g->oc, g->kh, g->kw);
  pass_init(&pl->t, g->oc, g->oh, g->ow, g->kh - 1 - g->pad, g->kw - 1 - g->pad, g->c, g->kh, g->kw);
  pl->ocp = pt_round_up(g->oc, RB), pl->cp = pt_round_up(g->c, RB), pl->ocw = pt_round_up(g->oc, 16);
  pl->kwr = (g->kw == 3 || g->kw == 5) && dwt_pick(g->kw, 1) ? g->kw : 1;
  pl->rows = pl->f.K / pl->kwr + 16;
  const size_t ohw = (size_t)g->oh * g->ow;
  size_t per_sample = (size_t)pl->f.sample + pl->t.sample + ohw * pl->ocw;
  size_t G = GROUP_BUDGET_FLOATS / per_sample;
  pl->G = G < 1 ? 1 : G > 64 ? 64 : (int)G;
  int nv = pl->f.nvec > pl->t.nvec ? pl->f.nvec : pl->t.nvec;
  pl->tmax = pt_round_up(pl->G * nv, VB);
  size_t o = 0;
  pl->wf = o, o += pt_up16((size_t)pl->ocp * pl->f.K);
  pl->wt = o, o += pt_up16((size_t)pl->cp * pl->t.K);
  pl->kf = o, o += pt_up16((size_t)pl->f.K);
  pl->kt = o, o += pt_up16((size_t)pl->t.K);
  pl->shared = o;
  o = 0;
  pl->xg = o, o += pt_up16((size_t)pl->G * pl->f.sample + SLACK);
  pl->xo = o, o += pt_up16((size_t)pl->tmax);
  pl->oo = o, o += pt_up16((size_t)pl->tmax);
  pl->mk = o, o += pt_up16((size_t)pl->tmax);
  pl->xpos = o, o += pt_up16((size_t)pl->G * ohw);
  pl->dyt = o, o += (size_t)pl->G * ohw * pl->ocw;
  pl->dyp = o, o += pt_up16((size_t)pl->G * pl->t.sample + SLACK);
  pl->dwt = o, o += (size_t)pl->rows * pl->kwr * pl->ocw;
  pl->dbv = o, o += (size_t)pl->ocw;
  pl->part = o, o += pt_up16((size_t)g->oc * pl->f.K + g->oc);
  /* with a fused pool: the group's full-size output, or its rebuilt
   * gradient, kept in cache (G was set without it, so that it does not
   * change how the unfused op groups samples) */
  pl->ysc = o, o += pt_up16((size_t)pl->G * g->oc * ohw);
  pl->per = o;
}

int pt_conv_direct_ok(const pt_conv_geom *g) {
  return g->stride == 1 && g->pad <= g->kh - 1 && g->pad <= g->kw - 1 && g->oh * g->ow > 0;
}

size_t pt_conv_direct_workspace(const pt_conv_geom *g, int nthreads) {
  plan pl;
  plan_init(&pl, g);
  return pl.shared + pl.per * (size_t)(nthreads < 1 ? 1 : nthreads) + 16; /* + 16: room to align */
}

/* Tap offsets into a padded sample, and the weights as (cout/RB, K, RB) with
 * zero rows past cout; flip: w is (cin, cout, kh, kw) read transposed and
 * rotated by 180 degrees, the dx pass's weights. */
static void pack(const pass *p, const float *w, int flip, int kpad, float *wpk, int *koff) {
  const int K = p->K, khw = p->kh * p->kw;
  for (int k = 0; k < kpad; k++) {
    int ci = k / khw, ky = k % khw / p->kw, kx = k % p->kw;
    koff[k] = k < K ? ci * p->plane + ky * p->wp + kx : 0;
  }
  for (int o = 0; o < pt_round_up(p->cout, RB); o++)
    for (int k = 0; k < K; k++) {
      float v = 0.0f;
      if (o < p->cout) {
        if (!flip) {
          v = w[(size_t)o * K + k];
        } else {
          int ci = k / khw, rest = khw - 1 - k % khw; /* the rotated tap */
          v = w[((size_t)ci * p->cout + o) * khw + rest];
        }
      }
      wpk[((size_t)(o / RB) * K + k) * RB + o % RB] = v;
    }
}

typedef struct {
  const pt_conv_geom *g;
  const plan *pl;
  int n, nparts;
  const float *x, *b, *y, *dy;
  float *out, *dw, *db, *dx, *ws;
  int32_t *code;          /* a fused pool's codes (pool_codes.h): written forward */
  const int32_t *code_in; /* and read backward */
} job;

static void forward_task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  const plan *pl = j->pl;
  const pass *p = &pl->f;
  float *me = j->ws + pl->shared + pl->per * (size_t)tid;
  float *xg = me + pl->xg;
  int *xo = (int *)(me + pl->xo), *oo = (int *)(me + pl->oo);
  unsigned *mk = (unsigned *)(me + pl->mk);
  const size_t xs = (size_t)p->cin * p->hin * p->win, ys = (size_t)p->cout * p->oh * p->ow;
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s0 = lo; s0 < hi; s0 += (size_t)pl->G) {
    const int cn = hi - s0 < (size_t)pl->G ? (int)(hi - s0) : pl->G;
    pad_group(p, cn, j->x + s0 * xs, NULL, xg);
    int T = group_tables(p, cn, ys, xo, oo, mk);
    float *out = j->code ? me + pl->ysc : j->out + s0 * ys;
    run_tiles(p, cn, !j->code, T, xo, oo, mk, xg, j->ws + pl->wf, (const int *)(j->ws + pl->kf), out, j->b, j->g->relu);
    if (j->code)
      pt_pool_codes_forward((size_t)cn * p->cout, p->oh, p->ow, out, j->out + s0 * ys / 4, j->code + s0 * ys / 4);
  }
}

void pt_conv_direct_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                            float *y, int32_t *code, float *ws) {
  plan pl;
  plan_init(&pl, g);
  ws = pt_align64(ws);
  pack(&pl.f, w, 0, pl.f.K, ws + pl.wf, (int *)(ws + pl.kf));
  job j = {.g = g, .pl = &pl, .n = n, .x = x, .b = b, .out = y, .code = code, .ws = ws};
  pt_parallel(forward_task, &j);
}

int pt_conv_direct_pool_ok(const pt_conv_geom *g) {
  return pt_conv_direct_ok(g) && g->relu && g->oh % 2 == 0 && g->ow % 2 == 0;
}

/* dyT (positions, ocw) of cn samples from dy (cn, oc, ohw), through the
 * ReLU's mask (gate = y), 16x16 blocks at a time; channels past oc are 0. */
static void transpose_dy(int cn, int oc, int ocw, size_t ohw, const float *dy, const float *gate, float *dyt) {
  pt_v16 r[16];
  for (int i = 0; i < cn; i++)
    for (int o0 = 0; o0 < ocw; o0 += 16)
      for (size_t p0 = 0; p0 < ohw; p0 += 16) {
        const int np = ohw - p0 < 16 ? (int)(ohw - p0) : 16;
        const size_t at = ((size_t)i * oc + o0) * ohw + p0;
        pt_prefetch16_planes(dy + at, gate ? gate + at : NULL, ohw, oc - o0, ohw - p0);
        pt_transpose16_planes(dy + at, gate ? gate + at : NULL, ohw, oc - o0 < 16 ? oc - o0 : 16, v16_lanes(np), r);
        for (int l = 0; l < np; l++) v16_store(dyt + ((size_t)i * ohw + p0 + l) * ocw + o0, r[l]);
      }
}

/* The same dyT from a fused pool's gradient dy (cn, oc, oh/2, ow/2) and
 * codes: every output position is in exactly one window, so each row of
 * dyT is written once, the window's gradient where the code points to it
 * and 0 elsewhere. One pass, where rebuilding dy first took two. */
static void transpose_dy_pooled(int cn, int oc, int ocw, int oh, int ow, const float *dy, const int32_t *code,
                                float *dyt) {
  const int ph = oh / 2, pw = ow / 2;
  const size_t phw = (size_t)ph * pw, ohw = (size_t)oh * ow;
  for (int i = 0; i < cn; i++)
    for (int o0 = 0; o0 < ocw; o0 += 16)
      for (int py = 0; py < ph; py++)
        for (int px = 0; px < pw; px += 16) {
          const size_t at = ((size_t)i * oc + o0) * phw + (size_t)py * pw + px;
          float *d = dyt + ((size_t)i * ohw + (size_t)(2 * py) * ow + 2 * (size_t)px) * ocw + o0;
          pt_prefetch16_planes(dy + at, code + at, phw, oc - o0, phw - (size_t)py * pw - px);
          pt_pool_codes_scatter16(dy + at, code + at, phw, oc - o0 < 16 ? oc - o0 : 16, pw - px < 16 ? pw - px : 16,
                                  d, (size_t)ow * ocw, (size_t)ocw);
        }
}

static void backward_task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  const pt_conv_geom *g = j->g;
  const plan *pl = j->pl;
  const pass *p = &pl->f, *q = &pl->t;
  float *me = j->ws + pl->shared + pl->per * (size_t)tid;
  float *xg = me + pl->xg, *dyt = me + pl->dyt, *dyp = me + pl->dyp, *dwt = me + pl->dwt;
  float *dbv = me + pl->dbv, *part = me + pl->part;
  int *xo = (int *)(me + pl->xo), *oo = (int *)(me + pl->oo), *xpos = (int *)(me + pl->xpos);
  unsigned *mk = (unsigned *)(me + pl->mk);
  const int *kf = (const int *)(j->ws + pl->kf), *kt = (const int *)(j->ws + pl->kt);
  const int oc = g->oc, K = p->K, ocw = pl->ocw, kwr = pl->kwr, nrows = K / kwr;
  const size_t xs = (size_t)p->cin * p->hin * p->win, ohw = (size_t)p->oh * p->ow, ys = (size_t)oc * ohw;
  memset(dwt, 0, sizeof(float) * (pl->dbv + (size_t)ocw - pl->dwt));
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s0 = lo; s0 < hi; s0 += (size_t)pl->G) {
    const int cn = hi - s0 < (size_t)pl->G ? (int)(hi - s0) : pl->G;
    const float *dy = j->dy + s0 * ys, *gate = g->relu ? j->y + s0 * ys : NULL;
    pad_group(p, cn, j->x + s0 * xs, NULL, xg);
    if (j->code_in) {
      transpose_dy_pooled(cn, oc, ocw, p->oh, p->ow, j->dy + s0 * ys / 4, j->code_in + s0 * ys / 4, dyt);
      if (j->dx) { /* the input gradient's pass reads dy whole: the gradient the pool and ReLU would pass */
        pt_pool_codes_backward((size_t)cn * oc, p->oh, p->ow, j->dy + s0 * ys / 4, j->code_in + s0 * ys / 4,
                               me + pl->ysc);
        dy = me + pl->ysc, gate = NULL;
      }
    } else {
      transpose_dy(cn, oc, ocw, ohw, dy, gate, dyt);
    }
    const int P = cn * (int)ohw;
    for (int i = 0, t = 0; i < cn; i++)
      for (int oy = 0; oy < p->oh; oy++)
        for (int ox = 0; ox < p->ow; ox++) xpos[t++] = i * p->sample + oy * p->wp + ox;
    /* The bias gradient in four running sums over positions t mod 4, added
     * in a fixed order: one running sum was a chain of dependent additions
     * (4 cycles each, 1% of tutorial-cnn's step for conv1.0). */
    for (int v = 0; v < ocw; v += 16) {
      pt_v16 sb[4] = {v16_zero(), v16_zero(), v16_zero(), v16_zero()};
      int t = 0;
      for (; t + 4 <= P; t += 4)
        for (int l = 0; l < 4; l++) sb[l] = v16_add(sb[l], v16_load(dyt + (size_t)(t + l) * ocw + v));
      for (int l = 0; t < P; t++, l++) sb[l] = v16_add(sb[l], v16_load(dyt + (size_t)t * ocw + v));
      const pt_v16 group = v16_add(v16_add(sb[0], sb[1]), v16_add(sb[2], sb[3]));
      v16_store(dbv + v, v16_add(v16_load(dbv + v), group));
    }
    for (int p0 = 0; p0 < P; p0 += PCHUNK) {
      const int np = P - p0 < PCHUNK ? P - p0 : PCHUNK;
      for (int v0 = 0, vo; v0 < ocw; v0 += 16 * vo) {
        const dwt_shape *s = dwt_pick(kwr, (ocw - v0) / 16);
        const int nb = s->nb;
        vo = s->vo;
        for (int r0 = 0; r0 < nrows; r0 += nb) {
          int b[16]; /* kernel rows' offsets; rows past the last read 0 and are dropped */
          for (int n = 0; n < nb; n++) b[n] = r0 + n < nrows ? kf[(r0 + n) * kwr] : 0;
          s->fn(np, xpos + p0, xg, b, dyt + (size_t)p0 * ocw + v0, (size_t)ocw, dwt + (size_t)r0 * kwr * ocw + v0);
        }
      }
    }
    if (j->dx) {
      pad_group(q, cn, dy, gate, dyp);
      const size_t dxs = (size_t)q->cout * q->oh * q->ow;
      const int Tq = group_tables(q, cn, dxs, xo, oo, mk);
      run_tiles(q, cn, 1, Tq, xo, oo, mk, dyp, j->ws + pl->wt, kt, j->dx + s0 * dxs, NULL, 0);
    }
  }
  /* the thread's partial dw (oc, K), db (oc) */
  for (int o = 0; o < oc; o++) {
    for (int k = 0; k < K; k++) part[(size_t)o * K + k] = dwt[(size_t)k * ocw + o];
    part[(size_t)oc * K + o] = dbv[o];
  }
}

void pt_conv_direct_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                             const int32_t *code, const float *dy, float *dw, float *db, float *dx, float *ws) {
  plan pl;
  plan_init(&pl, g);
  ws = pt_align64(ws);
  pack(&pl.f, w, 0, pl.f.K, ws + pl.wf, (int *)(ws + pl.kf));
  if (dx) pack(&pl.t, w, 1, pl.t.K, ws + pl.wt, (int *)(ws + pl.kt));
  job j = {.g = g, .pl = &pl, .n = n, .x = x, .y = y, .dy = dy, .dw = dw, .db = db, .dx = dx, .code_in = code,
           .ws = ws};
  j.nparts = pt_ops_get_threads();
  pt_parallel(backward_task, &j);
  pt_add_partials(dw, (size_t)g->oc * pl.f.K, db, (size_t)g->oc, ws + pl.shared + pl.part, pl.per, j.nparts);
}
