/* conv2d by Winograd minimal filtering, stride 1: F(4x4, 5x5) on 8x8
 * input tiles for 5x5 kernels and F(4x4, 3x3) on 6x6 tiles for 3x3 ones.
 *
 * m outputs of an r-tap correlation from n = m + r - 1 inputs take n
 * multiplications instead of m r, at n interpolation points:
 *   y = A^T [(G g) . (B^T d)]
 * A^T (m x n): row a is the points' a-th powers, and [a = m-1] for
 * infinity; G (n x r): tap k is the point's k-th power over the product of
 * its distances to the other finite points (Lagrange's denominators), and
 * the last tap for infinity; B^T is what makes the identity hold, and
 * depends on the points alone. The 6x6 tiles use 0, 1, -1, 2, -2 and
 * infinity:
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 * and the 8x8 tiles add 1/2 and -1/2 (bt8 below); every constant of A^T
 * and B^T is exact in binary. Nested in both dimensions, an m x m output
 * tile takes n^2 multiplications where direct needs m^2 r^2: 64 instead
 * of 400 (5x5), 36 instead of 144 (3x3). Summed over input channels, these
 * are n^2 independent GEMMs, one per element xi of the transformed tile.
 * These are cuDNN's and Lavin's points, whose fp32 error training
 * tolerates: against the direct kernels, up to 1.4e-5 of the largest value
 * has been seen (test_conv_winograd bounds it at 3e-5). The 8x8 tiles
 * replaced F(2x2, 5x5) on 6x6 tiles: 42% fewer multiplications for
 * tutorial-cnn's conv2.0 (16 tiles of 64 against 49 of 36 on its 14x14
 * output), for the same measured error.
 *
 * The channels are in the vector lanes, not the tiles: a sample is first
 * copied into a padded (h, w, channels) block. The layers this is for have
 * small images (tutorial-cnn's conv2.0: 16 -> 32 channels on 14x14, 4
 * tiles a row; mnist-cnn's conv2: 32 -> 64 on 24x24, 6 tiles a row), where
 * tiles in the lanes would leave much of every vector empty, while their
 * channel counts are multiples of 16. So every transform uses whole
 * vectors, and the GEMMs broadcast the tile's transformed value against
 * whole vectors of output channels: M[xi] (tiles, cout) = V[xi] (tiles,
 * cin) U[xi] (cin, cout). The weight gradient is the same shape:
 *   DU[xi] (cin, cout) += V[xi]^T Z[xi],  Z = A dY A^T per tile,
 *   dL/dg = G^T DU G,
 * and the input gradient is the forward pass over dy (masked by the ReLU)
 * with the weights transposed and rotated. Per sample, the weight gradient
 * and the input gradient share the packed dy while it is in cache.
 *
 * Samples are split over threads in fixed blocks. The forward pass and the
 * input gradient sum nothing across samples, so they do not depend on the
 * thread count; the weight gradient's per-thread partials are added in
 * thread order.
 */
#include "ops/cpu/conv_winograd.h"

#include <stdint.h>
#include <string.h>

#include "util/threadpool.h"

#include "ops/cpu/pool_codes.h"
#include "ops/cpu/simd/v16.h"
#include "ops/cpu/transpose16.h"
#include "ops/cpu/workspace.h"

#define NMAX 8 /* the largest tile side */

/* The GEMMs' register tiles, sized to the registers a level has, loads and
 * the broadcast included, so that the accumulators never spill:
 *   forward / input gradient: RT_MIN..RT_MAX tiles x GEMM_NV vectors of
 *   output channels (pass_init picks the row count that wastes fewest);
 *   weight gradient: RC input channels x DW_NV vectors of output channels.
 * RC divides 16, as C is whole vectors. */
#if PT_V16_REGS >= 32
/* 32 zmm: 8 x 2 = 16 accumulators, 2 loads, 1 broadcast. */
#define RT_MIN 6
#define RT_MAX 8
#define GEMM_NV 2
#define RC 8
#define DW_NV 2
#elif PT_V16_REGS >= 8
/* 16 ymm, two a vector: 6 x 1 = 12 accumulators, a load's 2 and a
 * broadcast (the usual 6 x 16 AVX2 GEMM tile); the weight gradient's 4 x 1
 * keeps 8 independent sums, enough to cover the FMAs' latency. */
#define RT_MIN 4
#define RT_MAX 6
#define GEMM_NV 1
#define RC 4
#define DW_NV 1
#else
/* 16 xmm, four a vector: 2 or 3 x 1 = 8 or 12 accumulators, a load's 4. */
#define RT_MIN 2
#define RT_MAX 3
#define GEMM_NV 1
#define RC 2
#define DW_NV 1
#endif
_Static_assert(RT_MAX - RT_MIN <= 2, "gemms dispatches three register-tile heights");
_Static_assert(16 % RC == 0, "the weight gradient's channel tiles cover whole vectors");

static int imin(int a, int b) { return a < b ? a : b; }

/* One pass: input (cin, hin, win) padded by pad, r x r kernel, output
 * (cout, oh, ow) in th x tw tiles of m x m. C and CO are the channel counts
 * rounded up to whole vectors. The padded copy (hp, wp, C) covers every
 * tile's n x n window and, for the input gradient's pass, m - 1 zero rows and
 * columns past the data: the weight gradient reads dy's tiles from it,
 * overhang included. */
typedef struct {
  int cin, hin, win, pad, cout, r, m;
  int n, nx; /* tile side (6 or 8) and elements of a transformed tile */
  int oh, ow, th, tw, hp, wp;
  int C, CO;
  int T, rt, Tr; /* tiles; the GEMM's register tile (tiles); T rounded up to it */
} wpass;

static void pass_init(wpass *p, int cin, int hin, int win, int pad, int cout, int r) {
  p->cin = cin, p->hin = hin, p->win = win, p->pad = pad, p->cout = cout;
  p->r = r, p->n = r == 5 ? 8 : 6, p->nx = p->n * p->n, p->m = p->n + 1 - r;
  const int m = p->m;
  p->oh = hin + 2 * pad - (r - 1), p->ow = win + 2 * pad - (r - 1);
  p->th = (p->oh + m - 1) / m, p->tw = (p->ow + m - 1) / m;
  p->hp = m * p->th + r - 1, p->wp = m * p->tw + r - 1;
  if (p->hp < hin + pad + m - 1) p->hp = hin + pad + m - 1;
  if (p->wp < win + pad + m - 1) p->wp = win + pad + m - 1;
  p->C = pt_round_up(cin, 16), p->CO = pt_round_up(cout, 16);
  p->T = p->th * p->tw;
  /* RT_MIN to RT_MAX tiles a register tile, whichever wastes fewest (with
   * 6 to 8: 8 for 4x4 tiles, 6 for 6x6, 7 for 7x7), the tallest of equals */
  p->rt = RT_MAX;
  for (int rt = RT_MAX - 1; rt >= RT_MIN; rt--)
    if (pt_round_up(p->T, rt) < pt_round_up(p->T, p->rt)) p->rt = rt;
  p->Tr = pt_round_up(p->T, p->rt);
}

static size_t xp_floats(const wpass *p) { return (size_t)p->hp * p->wp * p->C; }
static size_t v_floats(const wpass *p) { return (size_t)p->nx * p->Tr * p->C; }
static size_t m_floats(const wpass *p) { return (size_t)p->nx * p->Tr * p->CO; }
static size_t yp_floats(const wpass *p) { return (size_t)p->m * p->m * p->th * p->tw * p->CO; }
static size_t u_floats(const wpass *p) { return (size_t)p->nx * p->C * p->CO; }
static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* The forward pass f and the input gradient's pass t, and where each
 * thread's buffers sit in its block (offsets in floats). The input gradient
 * reuses the forward's V and M regions, and Z shares M's: each is dead by
 * the time the next is written. va and za keep the first of a pair of
 * samples' V and Z for the weight gradient while the second is made. */
#define PAIR_TILES 16 /* pairs up to this many tiles a sample (see dw_tile) */
typedef struct {
  wpass f, t;
  int pairs; /* the weight gradient sums samples in pairs (dw_tile) */
  size_t xp, v, m, yp, dyp, va, za, du, db, part, per, shared;
} wplan;

static void plan_init(wplan *pl, const pt_conv_geom *g) {
  pass_init(&pl->f, g->c, g->h, g->w, g->pad, g->oc, g->kh);
  pass_init(&pl->t, g->oc, g->oh, g->ow, g->kh - 1 - g->pad, g->c, g->kh);
  const wpass *f = &pl->f, *t = &pl->t;
  size_t o = 0;
  pl->xp = o, o += pt_up16(xp_floats(f));
  pl->v = o, o += pt_up16(zmax(v_floats(f), v_floats(t)));
  pl->m = o, o += pt_up16(zmax(m_floats(f), m_floats(t)));
  pl->yp = o, o += pt_up16(zmax(yp_floats(f), yp_floats(t)));
  pl->dyp = o, o += pt_up16(xp_floats(t));
  pl->pairs = f->T <= PAIR_TILES;
  pl->va = o, o += pl->pairs ? pt_up16(v_floats(f)) : 0;
  pl->za = o, o += pl->pairs ? pt_up16(m_floats(f)) : 0;
  pl->du = o, o += 2 * pt_up16(u_floats(f)); /* doubles */
  pl->db = o, o += (size_t)f->CO;
  pl->part = o, o += pt_up16((size_t)g->oc * g->c * g->kh * g->kw + g->oc);
  pl->per = o;
  pl->shared = pt_up16(zmax(u_floats(f), u_floats(t)));
}

/* Below 8 channels on either side the GEMMs are too thin for the
 * transforms to pay: tutorial-cnn's conv1.0 (1 -> 16) stays direct.
 * pad < r keeps the input gradient's pass a plain padding. */
int pt_conv_wino_ok(const pt_conv_geom *g) {
  return g->stride == 1 && g->kh == g->kw && (g->kh == 5 || g->kh == 3) && g->pad >= 0 && g->pad < g->kh &&
         g->c >= 8 && g->oc >= 8 && g->oh > 0 && g->ow > 0;
}

size_t pt_conv_wino_workspace(const pt_conv_geom *g, int nthreads) {
  wplan pl;
  plan_init(&pl, g);
  return pl.shared + pl.per * (size_t)(nthreads < 1 ? 1 : nthreads) + 16; /* + 16: room to align */
}

/* The filter transforms run on 8 filters at once, one per lane of a
 * vector of doubles (o0 .. o0 + 7 for one input channel): GCC's vector
 * types take the scalar formulas as written, every operation lane by lane
 * as the scalar one, so each filter's bits are what one filter at a time
 * gave (4% of tutorial-cnn's step, then). */
typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

/* out (6) = G in (r taps, stride apart): the taps at the points 0, 1, -1,
 * 2, -2 with G's scales, and the last tap for infinity. */
static void g6(const v8d *in, int stride, int r, v8d out[6]) {
  v8d e = {0}, od = {0}, e2 = {0}, o2 = {0};
  double p2 = 1;
  for (int k = 0; k < r; k++, p2 *= 2) {
    const v8d v = in[k * stride];
    if (k % 2) od += v, o2 += p2 * v;
    else e += v, e2 += p2 * v;
  }
  out[0] = in[0] / 4, out[1] = -(e + od) / 6, out[2] = -(e - od) / 6;
  out[3] = (e2 + o2) / 24, out[4] = (e2 - o2) / 24, out[5] = in[(r - 1) * stride];
}

/* The 8x8 tiles' finite points; the last is infinity. */
static const double pts8[7] = {0, 1, -1, 2, -2, 0.5, -0.5};

/* G's constants for the 8x8 tiles: the finite points' tap powers, and the
 * product of each point's distances to the other finite points (Lagrange's
 * denominator, which G divides by; the B^T below is scaled to match). Made
 * once per transform of a whole filter bank, not per call of g8 and gt8:
 * recomputed per call, they were 5% of tutorial-cnn's step. The powers of
 * these points are exact, and each constant is the value the per-call loops
 * made, so the transforms' bits are the same. */
typedef struct {
  double pw[7][5];   /* pts8[i]^k */
  double den[7];
  double coef[7][5]; /* pw / den: gt8's weights */
} g8consts;

static void g8consts_init(g8consts *c) {
  for (int i = 0; i < 7; i++) {
    double den = 1, pw = 1;
    for (int q = 0; q < 7; q++)
      if (q != i) den *= pts8[i] - pts8[q];
    c->den[i] = den;
    for (int k = 0; k < 5; k++, pw *= pts8[i]) c->pw[i][k] = pw, c->coef[i][k] = pw / den;
  }
}

/* out (8) = G in (r <= 5 taps, stride apart) for the 8x8 tiles: tap powers
 * at each finite point over its denominator, and the last tap for infinity. */
static void g8(const g8consts *c, const v8d *in, int stride, int r, v8d out[8]) {
  for (int i = 0; i < 7; i++) {
    v8d sum = {0};
    for (int k = 0; k < r; k++) sum += c->pw[i][k] * in[k * stride];
    out[i] = sum / c->den[i];
  }
  out[7] = in[(r - 1) * stride];
}

/* out (r) = G^T in (8), the transpose of g8. */
static void gt8(const g8consts *c, const v8d in[8], int r, v8d *out) {
  const v8d zero = {0};
  for (int k = 0; k < r; k++) out[k] = k == r - 1 ? in[7] : zero;
  for (int i = 0; i < 7; i++)
    for (int k = 0; k < r; k++) out[k] += c->coef[i][k] * in[i];
}

static void gn(const g8consts *c, int n, const v8d *in, int stride, int r, v8d *out) {
  if (n == 8) g8(c, in, stride, r, out);
  else g6(in, stride, r, out);
}

/* U[xi] (C, CO) = G g G^T for every (o, ci), zero past cin and cout. w is
 * (cout, cin, r, r), or with flip the original (cin, cout, r, r) read
 * transposed and rotated by 180 degrees: the input gradient's weights.
 * In double, so that U carries one rounding. Lanes past cout transform
 * zeros into U's padding (CO is a multiple of 16). */
static void filter_transform(const wpass *p, const float *w, int flip, float *U) {
  const int r = p->r, rr = r * r, n = p->n;
  g8consts gc;
  g8consts_init(&gc);
  memset(U, 0, sizeof(float) * u_floats(p));
  for (int o0 = 0; o0 < p->cout; o0 += 8)
    for (int ci = 0; ci < p->cin; ci++) {
      v8d g[25], h[NMAX][5], col[NMAX], u[NMAX];
      for (int k = 0; k < rr; k++)
        for (int l = 0; l < 8; l++) {
          const int o = o0 + l;
          g[k][l] = o >= p->cout ? 0.0
                    : flip       ? w[((size_t)ci * p->cout + o) * rr + rr - 1 - k]
                                 : w[((size_t)o * p->cin + ci) * rr + k];
        }
      for (int k = 0; k < r; k++) { /* G g: combine rows */
        gn(&gc, n, g + k, r, r, col);
        for (int i = 0; i < n; i++) h[i][k] = col[i];
      }
      for (int i = 0; i < n; i++) { /* (G g) G^T: combine columns */
        gn(&gc, n, h[i], 1, r, u);
        for (int j = 0; j < n; j++) {
          const v8f uf = __builtin_convertvector(u[j], v8f);
          memcpy(U + ((size_t)(n * i + j) * p->C + ci) * p->CO + o0, &uf, sizeof uf);
        }
      }
    }
}

/* src (cin, hin, win) into xp (hp, wp, C) at (pad, pad), channels in the
 * lanes; with gate, only elements where gate > 0 (the fused ReLU's mask).
 * 16 channels x 16 columns at a time, transposed in registers. Every lane
 * of the data's rows and columns is written; the border around them is
 * left as it is, zeroed once per call (clear). */
static void clear(const wpass *p, float *xp) { memset(xp, 0, sizeof(float) * xp_floats(p)); }

static void pack(const wpass *p, const float *src, const float *gate, float *xp) {
  const size_t hw = (size_t)p->hin * p->win;
  for (int c0 = 0; c0 < p->cin; c0 += 16) {
    const int nc = imin(16, p->cin - c0);
    for (int y = 0; y < p->hin; y++)
      for (int x0 = 0; x0 < p->win; x0 += 16) {
        const int nx = imin(16, p->win - x0);
        const size_t at = hw * (size_t)c0 + (size_t)y * p->win + x0;
        pt_prefetch16_planes(src + at, gate ? gate + at : NULL, hw, nc, hw - (size_t)y * p->win - x0);
        pt_v16 r[16];
        pt_transpose16_planes(src + at, gate ? gate + at : NULL, hw, nc, v16_lanes(nx), r);
        float *d = xp + ((size_t)(y + p->pad) * p->wp + p->pad + x0) * p->C + c0;
        for (int l = 0; l < nx; l++) v16_store(d + (size_t)l * p->C, r[l]);
      }
  }
}

/* r = B^T d for six vectors d */
static inline __attribute__((always_inline)) void bt6(const pt_v16 d[6], pt_v16 r[6]) {
  const pt_v16 two = v16_set1(2.0f), four = v16_set1(4.0f), five = v16_set1(5.0f);
  r[0] = v16_fmadd(four, d[0], v16_fnmadd(five, d[2], d[4]));
  const pt_v16 a = v16_fnmadd(four, d[2], d[4]), b = v16_fnmadd(four, d[1], d[3]);
  r[1] = v16_add(a, b);
  r[2] = v16_sub(a, b);
  const pt_v16 c = v16_sub(d[4], d[2]), e = v16_sub(d[3], d[1]);
  r[3] = v16_fmadd(two, e, c);
  r[4] = v16_fnmadd(two, e, c);
  r[5] = v16_fmadd(four, d[1], v16_fnmadd(five, d[3], d[5]));
}

/* r = B^T d for eight vectors d, the points 0, 1, -1, 2, -2, 1/2, -1/2
 * and infinity: each pair of rows +p, -p is an even part plus and minus
 * an odd part. Every constant is exact in binary. */
static inline __attribute__((always_inline)) void bt8(const pt_v16 d[8], pt_v16 r[8]) {
  const pt_v16 c525 = v16_set1(5.25f), c425 = v16_set1(4.25f);
  r[0] = v16_sub(v16_fmadd(c525, v16_sub(d[2], d[4]), d[6]), d[0]);
  r[7] = v16_sub(v16_fmadd(c525, v16_sub(d[3], d[5]), d[7]), d[1]);
  const pt_v16 e1 = v16_fnmadd(c425, d[4], v16_add(d[2], d[6]));
  const pt_v16 o1 = v16_fnmadd(c425, d[3], v16_add(d[1], d[5]));
  r[1] = v16_add(e1, o1), r[2] = v16_sub(e1, o1);
  const pt_v16 e2 = v16_fnmadd(v16_set1(1.25f), d[4], v16_fmadd(v16_set1(0.25f), d[2], d[6]));
  const pt_v16 o2 = v16_fmadd(v16_set1(2.0f), d[5],
                                    v16_fnmadd(v16_set1(2.5f), d[3], v16_mul(v16_set1(0.5f), d[1])));
  r[3] = v16_add(e2, o2), r[4] = v16_sub(e2, o2);
  const pt_v16 e3 = v16_fnmadd(v16_set1(5.0f), d[4], v16_fmadd(v16_set1(4.0f), d[2], d[6]));
  const pt_v16 o3 = v16_fmadd(v16_set1(0.5f), d[5],
                                    v16_fnmadd(v16_set1(2.5f), d[3], v16_mul(v16_set1(2.0f), d[1])));
  r[5] = v16_add(e3, o3), r[6] = v16_sub(e3, o3);
}

static inline __attribute__((always_inline)) void btn(int n, const pt_v16 *d, pt_v16 *r) {
  if (n == 8) bt8(d, r);
  else bt6(d, r);
}

/* V[xi] (rows, C) = (B^T d B)[xi] of tiles t0 .. t0 + nt - 1 in rows 0 ..
 * nt - 1; rows nt .. rows - 1 zero, as the GEMM reads them. */
static inline __attribute__((always_inline)) void input_transform_n(int n, const wpass *p, const float *xp, int t0,
                                                                    int nt, int rows, float *V) {
  const size_t C = (size_t)p->C, vs = (size_t)rows * C, row = (size_t)p->wp * C;
  for (int tt = 0; tt < nt; tt++) {
    const int ty = (t0 + tt) / p->tw, tx = (t0 + tt) % p->tw;
    for (size_t c0 = 0; c0 < C; c0 += 16) {
      const float *s = xp + (size_t)(p->m * ty) * row + (size_t)(p->m * tx) * C + c0;
      pt_v16 u[NMAX][NMAX];
      for (int j = 0; j < n; j++) { /* B^T d: combine the rows of column j */
        pt_v16 d[NMAX], r[NMAX];
        for (int i = 0; i < n; i++) d[i] = v16_load(s + row * i + C * j);
        btn(n, d, r);
        for (int i = 0; i < n; i++) u[i][j] = r[i];
      }
      for (int i = 0; i < n; i++) { /* (B^T d) B: combine columns */
        pt_v16 r[NMAX];
        btn(n, u[i], r);
        for (int j = 0; j < n; j++) v16_store(V + vs * (n * i + j) + (size_t)tt * C + c0, r[j]);
      }
    }
  }
  if (nt < rows)
    for (int xi = 0; xi < p->nx; xi++)
      memset(V + vs * xi + (size_t)nt * C, 0, sizeof(float) * (size_t)(rows - nt) * C);
}

static void input_transform(const wpass *p, const float *xp, int t0, int nt, int rows, float *V) {
  if (p->n == 8) input_transform_n(8, p, xp, t0, nt, rows, V);
  else input_transform_n(6, p, xp, t0, nt, rows, V);
}

/* m (rt, nv vectors) = v (rt rows ldv apart, K) u (K, nv vectors, rows ldu
 * apart): per input channel nv loads and rt broadcasts feed rt * nv FMAs.
 * rt and nv are constants where it is inlined. */
static inline __attribute__((always_inline)) void gemm_tile(int rt, int K, const float *v, size_t ldv,
                                                            const float *u, size_t ldu, float *m, size_t ldm,
                                                            int nv) {
  pt_v16 c[RT_MAX][GEMM_NV];
  for (int r = 0; r < rt; r++)
    for (int h = 0; h < GEMM_NV; h++) c[r][h] = v16_zero();
  for (int k = 0; k < K; k++) {
    pt_v16 b[GEMM_NV];
    for (int h = 0; h < GEMM_NV; h++) b[h] = h < nv ? v16_load(u + ldu * k + 16 * h) : v16_zero();
#pragma GCC unroll 8 /* the accumulators must stay in registers */
    for (int r = 0; r < rt; r++) {
      const pt_v16 a = v16_set1(v[ldv * r + k]);
      for (int h = 0; h < GEMM_NV; h++)
        if (h < nv) c[r][h] = v16_fmadd(a, b[h], c[r][h]);
    }
  }
  for (int r = 0; r < rt; r++)
    for (int h = 0; h < nv; h++) v16_store(m + ldm * r + 16 * h, c[r][h]);
}

/* M[xi] (rows, CO) = V[xi] (rows, C) U[xi] (C, CO) for every xi; rows
 * a multiple of the register tile */
static void gemms(const wpass *p, const float *U, const float *V, int rows, float *M) {
  const size_t C = (size_t)p->C, CO = (size_t)p->CO;
  for (int xi = 0; xi < p->nx; xi++) {
    const float *u = U + C * CO * xi, *v = V + (size_t)rows * C * xi;
    float *m = M + (size_t)rows * CO * xi;
    for (size_t t0 = 0; t0 < (size_t)rows; t0 += (size_t)p->rt)
      for (size_t o0 = 0; o0 < CO; o0 += 16 * GEMM_NV) {
        const float *vt = v + t0 * C, *uo = u + o0;
        float *mt = m + t0 * CO + o0;
        const int whole = CO - o0 >= 16 * GEMM_NV; /* else one vector: CO is whole vectors */
#define GEMM_TILE(RT)                                             \
  do {                                                            \
    if (whole) gemm_tile(RT, p->C, vt, C, uo, CO, mt, CO, GEMM_NV); \
    else gemm_tile(RT, p->C, vt, C, uo, CO, mt, CO, 1);           \
  } while (0)
        if (p->rt == RT_MIN) GEMM_TILE(RT_MIN);
#if RT_MAX - RT_MIN == 2
        else if (p->rt == RT_MIN + 1) GEMM_TILE(RT_MIN + 1);
#endif
        else GEMM_TILE(RT_MAX);
#undef GEMM_TILE
      }
  }
}

/* y (m) = A^T x (6): rows (1 1 1 1 1 0), (0 1 -1 2 -2 [m=2]),
 * (0 1 1 4 4 0), (0 1 -1 8 -8 1). m is a constant where it is inlined. */
static inline __attribute__((always_inline)) void at6(int m, const pt_v16 x[6], pt_v16 *y) {
  const pt_v16 s = v16_add(x[1], x[2]), d = v16_sub(x[1], x[2]);
  const pt_v16 s2 = v16_add(x[3], x[4]), d2 = v16_sub(x[3], x[4]);
  y[0] = v16_add(v16_add(x[0], s), s2);
  if (m == 2) {
    y[1] = v16_add(v16_fmadd(v16_set1(2.0f), d2, d), x[5]);
  } else {
    y[1] = v16_fmadd(v16_set1(2.0f), d2, d);
    y[2] = v16_fmadd(v16_set1(4.0f), s2, s);
    y[3] = v16_add(v16_fmadd(v16_set1(8.0f), d2, d), x[5]);
  }
}

/* y (4) = A^T x (8) at the 8x8 tiles' points: rows (1 1 1 1 1 1 1 0),
 * (0 1 -1 2 -2 1/2 -1/2 0), (0 1 1 4 4 1/4 1/4 0), (0 1 -1 8 -8 1/8 -1/8 1). */
static inline __attribute__((always_inline)) void at8(const pt_v16 x[8], pt_v16 *y) {
  const pt_v16 s1 = v16_add(x[1], x[2]), d1 = v16_sub(x[1], x[2]);
  const pt_v16 s2 = v16_add(x[3], x[4]), d2 = v16_sub(x[3], x[4]);
  const pt_v16 s3 = v16_add(x[5], x[6]), d3 = v16_sub(x[5], x[6]);
  y[0] = v16_add(v16_add(x[0], s1), v16_add(s2, s3));
  y[1] = v16_fmadd(v16_set1(0.5f), d3, v16_fmadd(v16_set1(2.0f), d2, d1));
  y[2] = v16_fmadd(v16_set1(0.25f), s3, v16_fmadd(v16_set1(4.0f), s2, s1));
  y[3] = v16_add(v16_fmadd(v16_set1(0.125f), d3, v16_fmadd(v16_set1(8.0f), d2, d1)),
                       x[7]);
}

static inline __attribute__((always_inline)) void atn(int n, int m, const pt_v16 *x, pt_v16 *y) {
  if (n == 8) at8(x, y);
  else at6(m, x, y);
}

/* yp (m th, m tw, CO) = A^T M A, + bias, ReLU'd, of tiles t0 .. t0 + nt -
 * 1, whose M are rows 0 .. nt - 1 of M[xi] (rows, CO) */
static inline __attribute__((always_inline)) void output_transform_m(int n, int m, const wpass *p, const float *M,
                                                                     int t0, int nt, int rows, const float *bias,
                                                                     int relu, float *yp) {
  const size_t CO = (size_t)p->CO, ms = (size_t)rows * CO, W = (size_t)m * p->tw;
  for (size_t o0 = 0; o0 < CO; o0 += 16) {
    const int nb = bias ? imin(16, p->cout - (int)o0) : 0;
    const pt_v16 bv = nb > 0 ? v16_maskz_loadu(v16_lanes(nb), bias + o0) : v16_zero();
    for (int tt = 0; tt < nt; tt++) {
      const int ty = (t0 + tt) / p->tw, tx = (t0 + tt) % p->tw;
      pt_v16 q[4][NMAX];
      for (int j = 0; j < n; j++) { /* A^T x: combine the rows of column j */
        pt_v16 x[NMAX], y[4];
        for (int i = 0; i < n; i++) x[i] = v16_load(M + ms * (n * i + j) + (size_t)tt * CO + o0);
        atn(n, m, x, y);
        for (int i = 0; i < m; i++) q[i][j] = y[i];
      }
      for (int i = 0; i < m; i++) { /* (A^T x) A: combine columns */
        pt_v16 y[4];
        atn(n, m, q[i], y);
        float *d = yp + (((size_t)m * ty + i) * W + (size_t)m * tx) * CO + o0;
        for (int k = 0; k < m; k++) {
          pt_v16 v = v16_add(y[k], bv);
          if (relu) v = v16_max(v16_zero(), v); /* NaN passes (maxps gives its second) */
          v16_store(d + CO * k, v);
        }
      }
    }
  }
}

static void output_transform(const wpass *p, const float *M, int t0, int nt, int rows, const float *bias, int relu,
                             float *yp) {
  if (p->n == 8) output_transform_m(8, 4, p, M, t0, nt, rows, bias, relu, yp);
  else if (p->m == 2) output_transform_m(6, 2, p, M, t0, nt, rows, bias, relu, yp);
  else output_transform_m(6, 4, p, M, t0, nt, rows, bias, relu, yp);
}

/* out (cout, oh, ow) from yp (m th, m tw, CO), 16 channels x 16 columns at
 * a time, transposed in registers. */
static void unpack(const wpass *p, const float *yp, float *out) {
  const size_t CO = (size_t)p->CO, W = (size_t)p->m * p->tw, ohw = (size_t)p->oh * p->ow;
  for (int o0 = 0; o0 < p->cout; o0 += 16) {
    const int no = imin(16, p->cout - o0);
    for (int y = 0; y < p->oh; y++)
      for (int x0 = 0; x0 < p->ow; x0 += 16) {
        const int nx = imin(16, p->ow - x0);
        pt_v16 r[16];
        for (int l = 0; l < 16; l++)
          r[l] = l < nx ? v16_load(yp + ((size_t)y * W + x0 + l) * CO + o0) : v16_zero();
        pt_transpose16(r);
        for (int c = 0; c < no; c++)
          v16_mask_storeu(out + ohw * (size_t)(o0 + c) + (size_t)y * p->ow + x0, v16_lanes(nx), r[c]);
      }
  }
}

/* The fused 2x2 max-pool, stride 2, after the ReLU: out (cout, oh/2, ow/2)
 * = the window maxima of yp (m th, m tw, CO), and code (same shape) the
 * window position of each maximum or -1 (pt_pool_codes_max4): where the
 * maximum is 0 the ReLU stops the gradient whichever position the pool
 * picked. After the ReLU nothing is NaN. The m x m tiles hold whole windows (m is even),
 * so a window never straddles two tiles' outputs. */
static void unpack_pool(const wpass *p, const float *yp, float *out, int32_t *code) {
  const size_t CO = (size_t)p->CO, W = (size_t)p->m * p->tw;
  const int ph = p->oh / 2, pw = p->ow / 2;
  const size_t phw = (size_t)ph * pw;
  for (int o0 = 0; o0 < p->cout; o0 += 16) {
    const int no = imin(16, p->cout - o0);
    for (int y = 0; y < ph; y++)
      for (int x0 = 0; x0 < pw; x0 += 16) {
        const int nx = imin(16, pw - x0);
        pt_v16 r[16], a[16];
        for (int l = 0; l < 16; l++) {
          if (l >= nx) {
            r[l] = a[l] = v16_zero();
            continue;
          }
          const float *s = yp + ((size_t)(2 * y) * W + 2 * (size_t)(x0 + l)) * CO + o0;
          const pt_v16 v[4] = {v16_load(s), v16_load(s + CO), v16_load(s + W * CO),
                               v16_load(s + W * CO + CO)};
          pt_vi16 at;
          pt_pool_codes_max4(v, &r[l], &at);
          a[l] = vi16_as_float(at);
        }
        pt_transpose16(r);
        pt_transpose16(a);
        for (int c = 0; c < no; c++) {
          const size_t at = phw * (size_t)(o0 + c) + (size_t)y * pw + x0;
          v16_mask_storeu(out + at, v16_lanes(nx), r[c]);
          v16_mask_storeu((float *)(code + at), v16_lanes(nx), a[c]);
        }
      }
  }
}

/* The input gradient's packed dy (hp, wp, C) from the pooled gradient dy
 * (cin, hin/2, win/2) and unpack_pool's codes: each pooled gradient goes to
 * its window's maximum, at (pad, pad), and nowhere where the code is -1.
 * Element for element what pack would make of the unfused pool's and
 * ReLU's gradients, and as pack, writing every lane of the data's area. */
static void pack_pool(const wpass *p, const float *dy, const int32_t *code, float *xp) {
  const int ph = p->hin / 2, pw = p->win / 2;
  const size_t phw = (size_t)ph * pw, C = (size_t)p->C;
  for (int c0 = 0; c0 < p->cin; c0 += 16)
    for (int y = 0; y < ph; y++)
      for (int x0 = 0; x0 < pw; x0 += 16) {
        const size_t at = phw * (size_t)c0 + (size_t)y * pw + x0;
        float *d = xp + ((size_t)(2 * y + p->pad) * p->wp + p->pad + 2 * (size_t)x0) * C + c0;
        pt_prefetch16_planes(dy + at, code + at, phw, p->cin - c0, phw - (size_t)y * pw - x0);
        pt_pool_codes_scatter16(dy + at, code + at, phw, imin(16, p->cin - c0), imin(16, pw - x0), d,
                                (size_t)p->wp * C, C);
      }
}

/* One sample through a pass whose input is already packed at xp, to yp.
 * A register tile's rows of tiles at a time, so that the transformed
 * input and the GEMMs' output stay in the core's first caches between the
 * three steps (all tiles at once, mnist-cnn's conv2 went through 500 KB). */
static void run_packed(const wpass *p, const float *U, const float *xp, const float *bias, int relu, float *V,
                       float *M, float *yp) {
  for (int t0 = 0; t0 < p->T; t0 += p->rt) {
    const int nt = imin(p->rt, p->T - t0);
    input_transform(p, xp, t0, nt, p->rt, V);
    gemms(p, U, V, p->rt, M);
    output_transform(p, M, t0, nt, p->rt, bias, relu, yp);
  }
}

typedef struct {
  const pt_conv_geom *g;
  const wplan *pl;
  int n, nparts;
  const float *x, *y, *dy, *b, *U; /* U: the forward's or the input gradient's transformed weights */
  float *out, *dw, *db, *dx, *ws;  /* ws: the per-thread blocks */
  int32_t *code;                   /* a fused pool's codes (unpack_pool): written forward */
  const int32_t *code_in;          /* and read backward */
} wjob;

static void forward_task(void *ctx, int tid, int nt) {
  const wjob *j = ctx;
  const wplan *pl = j->pl;
  const wpass *f = &pl->f;
  float *me = j->ws + pl->per * (size_t)tid;
  const size_t xs = (size_t)f->cin * f->hin * f->win, ys = (size_t)f->cout * f->oh * f->ow;
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  clear(f, me + pl->xp);
  for (size_t s = lo; s < hi; s++) {
    pack(f, j->x + s * xs, NULL, me + pl->xp);
    run_packed(f, j->U, me + pl->xp, j->b, j->g->relu, me + pl->v, me + pl->m, me + pl->yp);
    if (j->code) unpack_pool(f, me + pl->yp, j->out + s * ys / 4, j->code + s * ys / 4);
    else unpack(f, me + pl->yp, j->out + s * ys);
  }
}

void pt_conv_wino_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                           int32_t *code, float *ws) {
  wplan pl;
  plan_init(&pl, g);
  ws = pt_align64(ws);
  filter_transform(&pl.f, w, 0, ws);
  wjob j = {.g = g, .pl = &pl, .n = n, .x = x, .b = b, .U = ws, .out = y, .code = code, .ws = ws + pl.shared};
  pt_parallel(forward_task, &j);
}

int pt_conv_wino_pool_ok(const pt_conv_geom *g) {
  return pt_conv_wino_ok(g) && g->relu && g->oh % 2 == 0 && g->ow % 2 == 0;
}

/* ---- weight gradient ---- */

/* z (6) = A e (m), A = A^T transposed: e's values at the points 0, 1, -1,
 * 2, -2 as a polynomial's coefficients, and its last for infinity. m is a
 * constant where it is inlined. */
static inline __attribute__((always_inline)) void a6(int m, const pt_v16 *e, pt_v16 z[6]) {
  const pt_v16 two = v16_set1(2.0f);
  if (m == 2) {
    z[0] = e[0], z[1] = v16_add(e[0], e[1]), z[2] = v16_sub(e[0], e[1]);
    z[3] = v16_fmadd(two, e[1], e[0]), z[4] = v16_fnmadd(two, e[1], e[0]), z[5] = e[1];
  } else {
    const pt_v16 ev = v16_add(e[0], e[2]), od = v16_add(e[1], e[3]);
    const pt_v16 ev2 = v16_fmadd(v16_set1(4.0f), e[2], e[0]);
    const pt_v16 od2 = v16_mul(two, v16_fmadd(v16_set1(4.0f), e[3], e[1]));
    z[0] = e[0], z[1] = v16_add(ev, od), z[2] = v16_sub(ev, od);
    z[3] = v16_add(ev2, od2), z[4] = v16_sub(ev2, od2), z[5] = e[3];
  }
}

/* z (8) = A e (4) at the 8x8 tiles' points: each pair +p, -p is an even
 * part plus and minus an odd part. */
static inline __attribute__((always_inline)) void a8(const pt_v16 *e, pt_v16 z[8]) {
  const pt_v16 ev = v16_add(e[0], e[2]), od = v16_add(e[1], e[3]);
  const pt_v16 ev2 = v16_fmadd(v16_set1(4.0f), e[2], e[0]);
  const pt_v16 od2 = v16_mul(v16_set1(2.0f), v16_fmadd(v16_set1(4.0f), e[3], e[1]));
  const pt_v16 ev3 = v16_fmadd(v16_set1(0.25f), e[2], e[0]);
  const pt_v16 od3 = v16_mul(v16_set1(0.5f), v16_fmadd(v16_set1(0.25f), e[3], e[1]));
  z[0] = e[0], z[1] = v16_add(ev, od), z[2] = v16_sub(ev, od);
  z[3] = v16_add(ev2, od2), z[4] = v16_sub(ev2, od2);
  z[5] = v16_add(ev3, od3), z[6] = v16_sub(ev3, od3), z[7] = e[3];
}

static inline __attribute__((always_inline)) void an(int n, int m, const pt_v16 *e, pt_v16 *z) {
  if (n == 8) a8(e, z);
  else a6(m, e, z);
}

/* Z[xi] (T, CO) = (A dY A^T)[xi] of every m x m dy tile of the forward's
 * grid, read from the input gradient's packed dy (pd its padding), and
 * db (CO) += the tiles' sums. */
static inline __attribute__((always_inline)) void dy_transform_m(int n, int m, const wpass *f, const wpass *t,
                                                                 const float *dyp, float *Z, float *db) {
  const size_t CO = (size_t)f->CO, zs = (size_t)f->Tr * CO, row = (size_t)t->wp * CO, pd = (size_t)t->pad;
  for (size_t o0 = 0; o0 < CO; o0 += 16) {
    pt_v16 sum = v16_zero();
    for (int ty = 0; ty < f->th; ty++)
      for (int tx = 0; tx < f->tw; tx++) {
        const float *s = dyp + ((size_t)m * ty + pd) * row + ((size_t)m * tx + pd) * CO + o0;
        pt_v16 c[4][NMAX]; /* A dY: each column of the tile to n rows */
        for (int j = 0; j < m; j++) {
          pt_v16 e[4], z[NMAX];
          for (int i = 0; i < m; i++) {
            e[i] = v16_load(s + row * i + CO * j);
            sum = v16_add(sum, e[i]);
          }
          an(n, m, e, z);
          for (int i = 0; i < n; i++) c[j][i] = z[i];
        }
        float *zt = Z + ((size_t)ty * f->tw + tx) * CO + o0;
        for (int i = 0; i < n; i++) { /* (A dY) A^T: each row's m values to n */
          pt_v16 e[4], z[NMAX];
          for (int j = 0; j < m; j++) e[j] = c[j][i];
          an(n, m, e, z);
          for (int j = 0; j < n; j++) v16_store(zt + zs * (n * i + j), z[j]);
        }
      }
    v16_store(db + o0, v16_add(v16_load(db + o0), sum));
  }
}

static void dy_transform(const wpass *f, const wpass *t, const float *dyp, float *Z, float *db) {
  if (f->n == 8) dy_transform_m(8, 4, f, t, dyp, Z, db);
  else if (f->m == 2) dy_transform_m(6, 2, f, t, dyp, Z, db);
  else dy_transform_m(6, 4, f, t, dyp, Z, db);
}

/* du (RC rows lddu apart, nv vectors) += v (T rows ldv apart, RC)^T z (T
 * rows ldz apart, nv vectors), and with v2 the same of v2 and z2 (a second
 * sample's, at the same offsets): per tile nv loads and RC broadcasts feed
 * RC * nv FMAs. The pair's sum is formed in registers, then added to du in
 * double. G^T DU G cancels much (DU's terms are up to 100x the data's), so
 * a float DU summed over a thread's samples would round at 100x dw's scale,
 * differently for each way of cutting the batch into threads and workers.
 * In double, each pair's float sum is the same whoever sums it (pairs are
 * the batch's samples 2i and 2i + 1, never split between threads). Pairs, not
 * single samples, where a sample has few tiles: the conversion to double
 * and the addition cost 40% of the tile's multiply-adds when a sample's 16
 * tiles (tutorial-cnn's conv2.0) were all it summed, and pairs took its
 * backward pass from 3.88 to 3.73 ms. With 36 tiles (mnist-cnn's conv2)
 * the saving is smaller than what the pair's buffers (0.5 MB more a
 * thread) cost in the L2 cache: 4% slower, so those stay single. */
static inline __attribute__((always_inline)) void dw_tile(int T, const float *v, size_t ldv, const float *z,
                                                          size_t ldz, const float *v2, const float *z2, double *du,
                                                          size_t lddu, int nv) {
  pt_v16 c[RC][DW_NV];
  for (int r = 0; r < RC; r++)
    for (int k = 0; k < DW_NV; k++) c[r][k] = v16_zero();
  for (int h = 0; h < 2; h++) {
    const float *vh = h ? v2 : v, *zh = h ? z2 : z;
    if (!vh) break;
    for (int t = 0; t < T; t++) {
      pt_v16 b[DW_NV];
      for (int k = 0; k < DW_NV; k++) b[k] = k < nv ? v16_load(zh + ldz * t + 16 * k) : v16_zero();
#pragma GCC unroll 8
      for (int r = 0; r < RC; r++) {
        const pt_v16 a = v16_set1(vh[ldv * t + r]);
        for (int k = 0; k < DW_NV; k++)
          if (k < nv) c[r][k] = v16_fmadd(a, b[k], c[r][k]);
      }
    }
  }
  for (int r = 0; r < RC; r++) {
    double *d = du + lddu * r;
    for (int h = 0; h < nv; h++) {
      vd8_store(d + 16 * h, vd8_add(vd8_load(d + 16 * h), vd8_from_lo(c[r][h])));
      vd8_store(d + 16 * h + 8, vd8_add(vd8_load(d + 16 * h + 8), vd8_from_hi(c[r][h])));
    }
  }
}

/* DU[xi] (C, CO) += V[xi] (T, C)^T Z[xi] (T, CO) for every xi, summed over
 * the pair (V, Z) and (V2, Z2), or V and Z alone when V2 is NULL */
static void dw_gemms(const wpass *f, const float *V, const float *Z, const float *V2, const float *Z2, double *DU) {
  const size_t C = (size_t)f->C, CO = (size_t)f->CO;
  for (int xi = 0; xi < f->nx; xi++) {
    const size_t vx = (size_t)f->Tr * C * xi, zx = (size_t)f->Tr * CO * xi;
    const float *v = V + vx, *z = Z + zx, *v2 = V2 ? V2 + vx : NULL, *z2 = V2 ? Z2 + zx : NULL;
    double *du = DU + C * CO * xi;
    for (size_t c0 = 0; c0 < C; c0 += RC)
      for (size_t o0 = 0; o0 < CO; o0 += 16 * DW_NV) {
        const float *v2c = v2 ? v2 + c0 : NULL, *z2o = v2 ? z2 + o0 : NULL;
        if (CO - o0 >= 16 * DW_NV) dw_tile(f->T, v + c0, C, z + o0, CO, v2c, z2o, du + c0 * CO + o0, CO, DW_NV);
        else dw_tile(f->T, v + c0, C, z + o0, CO, v2c, z2o, du + c0 * CO + o0, CO, 1);
      }
  }
}

/* out (r) = G^T in (6): tap k gathers the points' terms times k-th powers,
 * and the last tap infinity's. */
static void gt6(const v8d in[6], int r, v8d *out) {
  const v8d p1 = in[1] + in[2], m1 = in[1] - in[2], p2 = in[3] + in[4], m2 = in[3] - in[4], zero = {0};
  double pw = 1;
  for (int k = 0; k < r; k++, pw *= 2) {
    out[k] = (k % 2 ? -m1 / 6 + pw * m2 / 24 : -p1 / 6 + pw * p2 / 24) + (k == 0 ? in[0] / 4 : zero);
    if (k == r - 1) out[k] += in[5];
  }
}

static void backward_task(void *ctx, int tid, int nt) {
  const wjob *j = ctx;
  const wplan *pl = j->pl;
  const wpass *f = &pl->f, *t = &pl->t;
  const int oc = j->g->oc, c = j->g->c;
  float *me = j->ws + pl->per * (size_t)tid;
  float *xp = me + pl->xp, *V = me + pl->v, *M = me + pl->m, *dyp = me + pl->dyp;
  double *DU = (double *)(me + pl->du);
  float *part = me + pl->part, *dbp = part + (size_t)oc * c * f->r * f->r;
  const size_t xs = (size_t)c * f->hin * f->win, ys = (size_t)oc * f->oh * f->ow;
  memset(DU, 0, sizeof(double) * u_floats(f));
  memset(part, 0, sizeof(float) * ((size_t)oc * c * f->r * f->r + oc));
  float *db = me + pl->db; /* (CO) the bias gradient, whole vectors */
  memset(db, 0, sizeof(float) * (size_t)f->CO);
  clear(f, xp);
  clear(t, dyp);
  size_t lo, hi;
  if (pl->pairs) { /* whole pairs (2i, 2i + 1) to each thread, whatever the thread count */
    pt_split(((size_t)j->n + 1) / 2, tid, nt, &lo, &hi);
    lo *= 2, hi = 2 * hi < (size_t)j->n ? 2 * hi : (size_t)j->n;
  } else {
    pt_split((size_t)j->n, tid, nt, &lo, &hi);
  }
  float *Va = me + pl->va, *Za = me + pl->za;
  for (size_t s = lo; s < hi; s++) {
    /* Even samples open a pair: their V and Z wait in Va, Za (the input
     * gradient below reuses V and M) until the next sample's are made; an
     * odd batch's last sample has no partner. */
    const int first = s % 2 == 0, alone = !pl->pairs || (first && s + 1 == hi);
    float *Vs = first && !alone ? Va : V, *Zs = first && !alone ? Za : M;
    pack(f, j->x + s * xs, NULL, xp);
    input_transform(f, xp, 0, f->T, f->Tr, Vs);
    if (j->code_in) pack_pool(t, j->dy + s * ys / 4, j->code_in + s * ys / 4, dyp);
    else pack(t, j->dy + s * ys, j->g->relu ? j->y + s * ys : NULL, dyp);
    dy_transform(f, t, dyp, Zs, db);
    if (alone) dw_gemms(f, V, M, NULL, NULL, DU);
    else if (!first) dw_gemms(f, Va, Za, V, M, DU);
    /* The input gradient of the same sample while its packed dy is in cache. */
    if (j->dx) {
      run_packed(t, j->U, dyp, NULL, 0, V, M, me + pl->yp);
      unpack(t, me + pl->yp, j->dx + s * xs);
    }
  }
  memcpy(dbp, db, sizeof(float) * (size_t)oc);
  /* the thread's partial dw (oc, c, r, r) = G^T DU G */
  const size_t C = (size_t)f->C, CO = (size_t)f->CO;
  const int r = f->r, tn = f->n;
  g8consts gc;
  g8consts_init(&gc);
  for (int o0 = 0; o0 < oc; o0 += 8) /* 8 filters at once, as filter_transform */
    for (int ci = 0; ci < c; ci++) {
      v8d u[NMAX][NMAX], h[5][NMAX], v[5];
      for (int xi = 0; xi < f->nx; xi++) memcpy(&u[xi / tn][xi % tn], DU + (xi * C + ci) * CO + o0, sizeof(v8d));
      for (int b = 0; b < tn; b++) { /* G^T u: combine rows */
        v8d col[NMAX];
        for (int i = 0; i < tn; i++) col[i] = u[i][b];
        if (tn == 8) gt8(&gc, col, r, v);
        else gt6(col, r, v);
        for (int k = 0; k < r; k++) h[k][b] = v[k];
      }
      for (int a = 0; a < r; a++) { /* (G^T u) G: combine columns */
        if (tn == 8) gt8(&gc, h[a], r, v);
        else gt6(h[a], r, v);
        for (int l = 0; l < 8 && o0 + l < oc; l++) {
          float *dwp = part + ((size_t)(o0 + l) * c + ci) * r * r + a * r;
          for (int k = 0; k < r; k++) dwp[k] = (float)v[k][l];
        }
      }
    }
}

void pt_conv_wino_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                            const int32_t *code, const float *dy, float *dw, float *db, float *dx, float *ws) {
  wplan pl;
  plan_init(&pl, g);
  ws = pt_align64(ws);
  if (dx) filter_transform(&pl.t, w, 1, ws);
  wjob j = {.g = g, .pl = &pl, .n = n, .x = x, .y = y, .dy = dy, .U = ws, .dw = dw, .db = db, .dx = dx,
            .code_in = code, .ws = ws + pl.shared};
  j.nparts = pt_ops_get_threads();
  pt_parallel(backward_task, &j);
  pt_add_partials(dw, (size_t)g->oc * g->c * g->kh * g->kw, db, (size_t)g->oc, j.ws + pl.part, pl.per, j.nparts);
}
