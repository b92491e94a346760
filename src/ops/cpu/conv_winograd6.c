/* conv2d 5x5, stride 1, by Winograd minimal filtering F(2x2, 5x5).
 *
 * Two outputs of a 5-tap correlation from 6 inputs take 6 multiplications
 * instead of 10, with the interpolation points 0, 1, -1, 2, -2 and infinity:
 *   y = A^T [(G g) . (B^T d)]
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   G   = [1/4 0 0 0 0; -1/6 (1 1 1 1 1); -1/6 (1 -1 1 -1 1);
 *          1/24 (1 2 4 8 16); 1/24 (1 -2 4 -8 16); 0 0 0 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1].
 * Nested in both dimensions, a 2x2 output tile from a 6x6 input tile takes
 * 36 multiplications where direct needs 100: summed over input channels,
 * 36 independent GEMMs, one per element xi of the transformed tile. These
 * are the points of cuDNN's and Lavin's F(4x4, 3x3), whose fp32 error
 * training tolerates; here the error stays under 1e-5 of the largest value
 * (test_conv_winograd).
 *
 * Unlike conv_winograd.c (F(2x2, 3x3), tiles in the vector lanes), the
 * channels are in the lanes: a sample is first copied into a padded
 * (h, w, channels) block. The 5x5 layers this is for have small images
 * (tutorial-cnn's conv2.0: 16 -> 32 channels on 14x14, 7 tiles a row),
 * where tiles in the lanes would leave half of every vector empty, while
 * their channel counts are multiples of 16. So every transform uses whole
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
#include "ops/cpu/conv_winograd5.h"

#include <stdint.h>
#include <string.h>

#include "util/threadpool.h"

#ifdef __AVX512F__
#include <immintrin.h>

#include "ops/cpu/transpose16.h"

#define NX 36 /* elements of a transformed 6x6 tile */
#define RT 7  /* GEMM register tile: tiles (x 2 vectors of output channels); 7 divides 7x7 tiles */
#define RC 8  /* weight-gradient register tile: input channels (x 2 vectors of output channels) */

static int up(int n, int m) { return (n + m - 1) / m * m; }
static size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }
static int imin(int a, int b) { return a < b ? a : b; }
static __mmask16 lanes(int n) { return (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1); }

/* One pass: input (cin, hin, win) padded by pad, output (cout, oh, ow) in
 * th x tw tiles of 2x2. C and CO are the channel counts rounded up to whole
 * vectors. The padded copy (hp, wp, C) covers every tile's 6x6 window and,
 * for the input gradient's pass, one zero row and column past the data:
 * the weight gradient reads dy's tiles from it, overhang included. */
typedef struct {
  int cin, hin, win, pad, cout;
  int oh, ow, th, tw, hp, wp;
  int C, CO;
  int T, Tr; /* tiles, and rounded up to RT */
} pass5;

static void pass_init(pass5 *p, int cin, int hin, int win, int pad, int cout) {
  p->cin = cin, p->hin = hin, p->win = win, p->pad = pad, p->cout = cout;
  p->oh = hin + 2 * pad - 4, p->ow = win + 2 * pad - 4;
  p->th = (p->oh + 1) / 2, p->tw = (p->ow + 1) / 2;
  p->hp = 2 * p->th + 4, p->wp = 2 * p->tw + 4;
  if (p->hp < hin + pad + 1) p->hp = hin + pad + 1;
  if (p->wp < win + pad + 1) p->wp = win + pad + 1;
  p->C = up(cin, 16), p->CO = up(cout, 16);
  p->T = p->th * p->tw, p->Tr = up(p->T, RT);
}

static size_t xp_floats(const pass5 *p) { return (size_t)p->hp * p->wp * p->C; }
static size_t v_floats(const pass5 *p) { return (size_t)NX * p->Tr * p->C; }
static size_t m_floats(const pass5 *p) { return (size_t)NX * p->Tr * p->CO; }
static size_t yp_floats(const pass5 *p) { return (size_t)4 * p->th * p->tw * p->CO; }
static size_t u_floats(const pass5 *p) { return (size_t)NX * p->C * p->CO; }
static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* The forward pass f and the input gradient's pass t, and where each
 * thread's buffers sit in its block (offsets in floats). The input gradient
 * reuses the forward's V and M regions, and Z shares M's: each is dead by
 * the time the next is written. */
typedef struct {
  pass5 f, t;
  size_t xp, v, m, yp, dyp, du, part, per, shared;
} plan5;

static void plan_init(plan5 *pl, const pt_conv_geom *g) {
  pass_init(&pl->f, g->c, g->h, g->w, g->pad, g->oc);
  pass_init(&pl->t, g->oc, g->oh, g->ow, 4 - g->pad, g->c);
  const pass5 *f = &pl->f, *t = &pl->t;
  size_t o = 0;
  pl->xp = o, o += up16(xp_floats(f));
  pl->v = o, o += up16(zmax(v_floats(f), v_floats(t)));
  pl->m = o, o += up16(zmax(m_floats(f), m_floats(t)));
  pl->yp = o, o += up16(zmax(yp_floats(f), yp_floats(t)));
  pl->dyp = o, o += up16(xp_floats(t));
  pl->du = o, o += up16(u_floats(f));
  pl->part = o, o += up16((size_t)g->oc * g->c * 25 + g->oc);
  pl->per = o;
  pl->shared = up16(zmax(u_floats(f), u_floats(t)));
}

/* Below 8 channels on either side the GEMMs are too thin for the
 * transforms to pay: tutorial-cnn's conv1.0 (1 -> 16) stays direct.
 * pad <= 4 keeps the input gradient's pass a plain padding; oc <= 1024
 * bounds the bias gradient's registers (backward_task). */
int pt_conv_wino5_ok(const pt_conv_geom *g) {
  return g->stride == 1 && g->kh == 5 && g->kw == 5 && g->pad >= 0 && g->pad <= 4 && g->c >= 8 && g->oc >= 8 &&
         g->oc <= 1024 && g->oh > 0 && g->ow > 0;
}

size_t pt_conv_wino5_workspace(const pt_conv_geom *g, int nthreads) {
  plan5 pl;
  plan_init(&pl, g);
  return pl.shared + pl.per * (size_t)(nthreads < 1 ? 1 : nthreads) + 16; /* + 16: room to align */
}

static float *align64(float *ws) { return (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63); }

/* U[xi] (C, CO) = G g G^T for every (o, ci), zero past cin and cout. w is
 * (cout, cin, 5, 5), or with flip the original (cin, cout, 5, 5) read
 * transposed and rotated by 180 degrees: the input gradient's weights.
 * In double, so that U carries one rounding. */
static void filter_transform(const pass5 *p, const float *w, int flip, float *U) {
  memset(U, 0, sizeof(float) * u_floats(p));
  for (int o = 0; o < p->cout; o++)
    for (int ci = 0; ci < p->cin; ci++) {
      double g[5][5], h[6][5];
      for (int ky = 0; ky < 5; ky++)
        for (int kx = 0; kx < 5; kx++)
          g[ky][kx] = flip ? w[((size_t)ci * p->cout + o) * 25 + (4 - ky) * 5 + (4 - kx)]
                           : w[((size_t)o * p->cin + ci) * 25 + ky * 5 + kx];
      for (int k = 0; k < 5; k++) { /* G g: combine rows */
        const double e = g[0][k] + g[2][k] + g[4][k], od = g[1][k] + g[3][k];
        const double e4 = g[0][k] + 4 * g[2][k] + 16 * g[4][k], o4 = 2 * g[1][k] + 8 * g[3][k];
        h[0][k] = g[0][k] / 4, h[1][k] = -(e + od) / 6, h[2][k] = -(e - od) / 6;
        h[3][k] = (e4 + o4) / 24, h[4][k] = (e4 - o4) / 24, h[5][k] = g[4][k];
      }
      for (int i = 0; i < 6; i++) { /* (G g) G^T: combine columns */
        const double *r = h[i];
        const double e = r[0] + r[2] + r[4], od = r[1] + r[3];
        const double e4 = r[0] + 4 * r[2] + 16 * r[4], o4 = 2 * r[1] + 8 * r[3];
        const double u[6] = {r[0] / 4, -(e + od) / 6, -(e - od) / 6, (e4 + o4) / 24, (e4 - o4) / 24, r[4]};
        for (int j = 0; j < 6; j++) U[((size_t)(6 * i + j) * p->C + ci) * p->CO + o] = (float)u[j];
      }
    }
}

/* src (cin, hin, win) into xp (hp, wp, C) at (pad, pad), channels in the
 * lanes, zeros elsewhere; with gate, only elements where gate > 0 (the
 * fused ReLU's mask). 16 channels x 16 columns at a time, transposed in
 * registers. */
static void pack(const pass5 *p, const float *src, const float *gate, float *xp) {
  memset(xp, 0, sizeof(float) * xp_floats(p));
  const size_t hw = (size_t)p->hin * p->win;
  const __m512 zero = _mm512_setzero_ps();
  for (int c0 = 0; c0 < p->cin; c0 += 16) {
    const int nc = imin(16, p->cin - c0);
    for (int y = 0; y < p->hin; y++)
      for (int x0 = 0; x0 < p->win; x0 += 16) {
        const int nx = imin(16, p->win - x0);
        const __mmask16 m = lanes(nx);
        __m512 r[16];
        for (int c = 0; c < 16; c++) {
          if (c >= nc) {
            r[c] = zero;
            continue;
          }
          const size_t at = hw * (size_t)(c0 + c) + (size_t)y * p->win + x0;
          r[c] = _mm512_maskz_loadu_ps(m, src + at);
          if (gate)
            r[c] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, gate + at), zero, _CMP_GT_OQ), r[c]);
        }
        pt_transpose16(r);
        float *d = xp + ((size_t)(y + p->pad) * p->wp + p->pad + x0) * p->C + c0;
        for (int l = 0; l < nx; l++) _mm512_store_ps(d + (size_t)l * p->C, r[l]);
      }
  }
}

/* r = B^T d for six vectors d */
static inline __attribute__((always_inline)) void bt6(const __m512 d[6], __m512 r[6]) {
  const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f);
  r[0] = _mm512_fmadd_ps(four, d[0], _mm512_fnmadd_ps(five, d[2], d[4]));
  const __m512 a = _mm512_fnmadd_ps(four, d[2], d[4]), b = _mm512_fnmadd_ps(four, d[1], d[3]);
  r[1] = _mm512_add_ps(a, b);
  r[2] = _mm512_sub_ps(a, b);
  const __m512 c = _mm512_sub_ps(d[4], d[2]), e = _mm512_sub_ps(d[3], d[1]);
  r[3] = _mm512_fmadd_ps(two, e, c);
  r[4] = _mm512_fnmadd_ps(two, e, c);
  r[5] = _mm512_fmadd_ps(four, d[1], _mm512_fnmadd_ps(five, d[3], d[5]));
}

/* V[xi] (Tr, C) = (B^T d B)[xi] of every tile; rows T..Tr zero, as the
 * GEMM reads them. */
static void input_transform(const pass5 *p, const float *xp, float *V) {
  const size_t C = (size_t)p->C, vs = (size_t)p->Tr * C, row = (size_t)p->wp * C;
  for (int ty = 0; ty < p->th; ty++)
    for (int tx = 0; tx < p->tw; tx++) {
      const size_t t = (size_t)ty * p->tw + tx;
      for (size_t c0 = 0; c0 < C; c0 += 16) {
        const float *s = xp + (size_t)(2 * ty) * row + (size_t)(2 * tx) * C + c0;
        __m512 u[6][6];
        for (int j = 0; j < 6; j++) { /* B^T d: combine the rows of column j */
          __m512 d[6], r[6];
          for (int i = 0; i < 6; i++) d[i] = _mm512_load_ps(s + row * i + C * j);
          bt6(d, r);
          for (int i = 0; i < 6; i++) u[i][j] = r[i];
        }
        for (int i = 0; i < 6; i++) { /* (B^T d) B: combine columns */
          __m512 r[6];
          bt6(u[i], r);
          for (int j = 0; j < 6; j++) _mm512_store_ps(V + vs * (6 * i + j) + t * C + c0, r[j]);
        }
      }
    }
  for (int xi = 0; xi < NX; xi++) memset(V + vs * xi + p->T * C, 0, sizeof(float) * (p->Tr - p->T) * C);
}

/* m (RT, nv vectors) = v (RT rows ldv apart, K) u (K, nv vectors, rows ldu
 * apart): per input channel nv loads and RT broadcasts feed RT * nv FMAs. */
static inline __attribute__((always_inline)) void gemm_tile(int K, const float *v, size_t ldv, const float *u,
                                                            size_t ldu, float *m, size_t ldm, int nv) {
  __m512 c[RT][2];
  for (int r = 0; r < RT; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int k = 0; k < K; k++) {
    const __m512 b0 = _mm512_load_ps(u + ldu * k);
    const __m512 b1 = nv > 1 ? _mm512_load_ps(u + ldu * k + 16) : _mm512_setzero_ps();
    for (int r = 0; r < RT; r++) {
      const __m512 a = _mm512_set1_ps(v[ldv * r + k]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      if (nv > 1) c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
    }
  }
  for (int r = 0; r < RT; r++) {
    _mm512_store_ps(m + ldm * r, c[r][0]);
    if (nv > 1) _mm512_store_ps(m + ldm * r + 16, c[r][1]);
  }
}

/* M[xi] (Tr, CO) = V[xi] (Tr, C) U[xi] (C, CO) for all 36 xi */
static void gemms(const pass5 *p, const float *U, const float *V, float *M) {
  const size_t C = (size_t)p->C, CO = (size_t)p->CO;
  for (int xi = 0; xi < NX; xi++) {
    const float *u = U + C * CO * xi, *v = V + (size_t)p->Tr * C * xi;
    float *m = M + (size_t)p->Tr * CO * xi;
    for (size_t t0 = 0; t0 < (size_t)p->Tr; t0 += RT)
      for (size_t o0 = 0; o0 < CO; o0 += 32) {
        if (CO - o0 >= 32) gemm_tile(p->C, v + t0 * C, C, u + o0, CO, m + t0 * CO + o0, CO, 2);
        else gemm_tile(p->C, v + t0 * C, C, u + o0, CO, m + t0 * CO + o0, CO, 1);
      }
  }
}

/* yp (2th, 2tw, CO) = A^T M A of every tile, + bias, ReLU'd. With
 * A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]. */
static inline __attribute__((always_inline)) void at6(const __m512 m[6], __m512 *y0, __m512 *y1) {
  const __m512 s = _mm512_add_ps(m[1], m[2]), d = _mm512_sub_ps(m[1], m[2]);
  const __m512 s2 = _mm512_add_ps(m[3], m[4]), d2 = _mm512_sub_ps(m[3], m[4]);
  *y0 = _mm512_add_ps(_mm512_add_ps(m[0], s), s2);
  *y1 = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(2.0f), d2, d), m[5]);
}

static void output_transform(const pass5 *p, const float *M, const float *bias, int relu, float *yp) {
  const size_t CO = (size_t)p->CO, ms = (size_t)p->Tr * CO, W2 = 2 * (size_t)p->tw;
  for (size_t o0 = 0; o0 < CO; o0 += 16) {
    const int no = (int)CO - (int)o0 < 16 ? (int)CO - (int)o0 : 16;
    const int nb = bias ? imin(no, p->cout - (int)o0) : 0;
    const __m512 bv = nb > 0 ? _mm512_maskz_loadu_ps(lanes(nb), bias + o0) : _mm512_setzero_ps();
    for (int ty = 0; ty < p->th; ty++)
      for (int tx = 0; tx < p->tw; tx++) {
        const size_t t = (size_t)ty * p->tw + tx;
        __m512 q[2][6];
        for (int j = 0; j < 6; j++) { /* A^T m: combine the rows of column j */
          __m512 m[6];
          for (int i = 0; i < 6; i++) m[i] = _mm512_load_ps(M + ms * (6 * i + j) + t * CO + o0);
          at6(m, &q[0][j], &q[1][j]);
        }
        for (int i = 0; i < 2; i++) {
          __m512 y0, y1;
          at6(q[i], &y0, &y1);
          y0 = _mm512_add_ps(y0, bv), y1 = _mm512_add_ps(y1, bv);
          if (relu) {
            y0 = _mm512_max_ps(y0, _mm512_setzero_ps());
            y1 = _mm512_max_ps(y1, _mm512_setzero_ps());
          }
          float *d = yp + ((2 * ty + i) * W2 + 2 * tx) * CO + o0;
          _mm512_store_ps(d, y0);
          _mm512_store_ps(d + CO, y1);
        }
      }
  }
}

/* out (cout, oh, ow) from yp (2th, 2tw, CO), 16 channels x 16 columns at a
 * time, transposed in registers. */
static void unpack(const pass5 *p, const float *yp, float *out) {
  const size_t CO = (size_t)p->CO, W2 = 2 * (size_t)p->tw, ohw = (size_t)p->oh * p->ow;
  for (int o0 = 0; o0 < p->cout; o0 += 16) {
    const int no = imin(16, p->cout - o0);
    for (int y = 0; y < p->oh; y++)
      for (int x0 = 0; x0 < p->ow; x0 += 16) {
        const int nx = imin(16, p->ow - x0);
        __m512 r[16];
        for (int l = 0; l < 16; l++)
          r[l] = l < nx ? _mm512_load_ps(yp + ((size_t)y * W2 + x0 + l) * CO + o0) : _mm512_setzero_ps();
        pt_transpose16(r);
        for (int c = 0; c < no; c++)
          _mm512_mask_storeu_ps(out + ohw * (size_t)(o0 + c) + (size_t)y * p->ow + x0, lanes(nx), r[c]);
      }
  }
}

/* One sample through a pass whose input is already packed at xp. */
static void run_packed(const pass5 *p, const float *U, const float *xp, const float *bias, int relu, float *out,
                       float *V, float *M, float *yp) {
  input_transform(p, xp, V);
  gemms(p, U, V, M);
  output_transform(p, M, bias, relu, yp);
  unpack(p, yp, out);
}

typedef struct {
  const pt_conv_geom *g;
  const plan5 *pl;
  int n, nparts;
  const float *x, *y, *dy, *b, *U; /* U: the forward's or the input gradient's transformed weights */
  float *out, *dw, *db, *dx, *ws;  /* ws: the per-thread blocks */
} job5;

static void forward_task(void *ctx, int tid, int nt) {
  const job5 *j = ctx;
  const plan5 *pl = j->pl;
  const pass5 *f = &pl->f;
  float *me = j->ws + pl->per * (size_t)tid;
  const size_t xs = (size_t)f->cin * f->hin * f->win, ys = (size_t)f->cout * f->oh * f->ow;
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s = lo; s < hi; s++) {
    pack(f, j->x + s * xs, NULL, me + pl->xp);
    run_packed(f, j->U, me + pl->xp, j->b, j->g->relu, j->out + s * ys, me + pl->v, me + pl->m, me + pl->yp);
  }
}

void pt_conv_wino5_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                           float *ws) {
  plan5 pl;
  plan_init(&pl, g);
  ws = align64(ws);
  filter_transform(&pl.f, w, 0, ws);
  job5 j = {.g = g, .pl = &pl, .n = n, .x = x, .b = b, .U = ws, .out = y, .ws = ws + pl.shared};
  pt_parallel(forward_task, &j);
}

/* ---- weight gradient ---- */

/* Z[xi] (T, CO) = (A dY A^T)[xi] of every 2x2 dy tile of the forward's
 * grid, read from the input gradient's packed dy (pd its padding), and
 * dbv (CO/16 vectors) += the tiles' sums. With A = A^T transposed, a pair
 * (e, f) becomes (e, e+f, e-f, e+2f, e-2f, f). */
static inline __attribute__((always_inline)) void a6(__m512 e, __m512 f, __m512 z[6]) {
  const __m512 two = _mm512_set1_ps(2.0f);
  z[0] = e, z[1] = _mm512_add_ps(e, f), z[2] = _mm512_sub_ps(e, f);
  z[3] = _mm512_fmadd_ps(two, f, e), z[4] = _mm512_fnmadd_ps(two, f, e), z[5] = f;
}

static void dy_transform(const pass5 *f, const pass5 *t, const float *dyp, float *Z, __m512 *dbv) {
  const size_t CO = (size_t)f->CO, zs = (size_t)f->Tr * CO, row = (size_t)t->wp * CO, pd = (size_t)t->pad;
  for (size_t o0 = 0; o0 < CO; o0 += 16) {
    __m512 sum = _mm512_setzero_ps();
    for (int ty = 0; ty < f->th; ty++)
      for (int tx = 0; tx < f->tw; tx++) {
        const float *s = dyp + (2 * ty + pd) * row + (2 * tx + pd) * CO + o0;
        const __m512 d00 = _mm512_load_ps(s), d01 = _mm512_load_ps(s + CO);
        const __m512 d10 = _mm512_load_ps(s + row), d11 = _mm512_load_ps(s + row + CO);
        sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_add_ps(d00, d01), _mm512_add_ps(d10, d11)));
        __m512 c0[6], c1[6]; /* A dY: the two columns, to 6 rows */
        a6(d00, d10, c0);
        a6(d01, d11, c1);
        float *z = Z + ((size_t)ty * f->tw + tx) * CO + o0;
        for (int i = 0; i < 6; i++) { /* (A dY) A^T: each row's pair to 6 */
          __m512 r[6];
          a6(c0[i], c1[i], r);
          for (int j = 0; j < 6; j++) _mm512_store_ps(z + zs * (6 * i + j), r[j]);
        }
      }
    dbv[o0 / 16] = _mm512_add_ps(dbv[o0 / 16], sum);
  }
}

/* du (RC rows lddu apart, nv vectors) += v (T rows ldv apart, RC)^T z (T
 * rows ldz apart, nv vectors): per tile nv loads and RC broadcasts feed
 * RC * nv FMAs. The sample's sum is formed in registers, then added. */
static inline __attribute__((always_inline)) void dw_tile(int T, const float *v, size_t ldv, const float *z,
                                                          size_t ldz, float *du, size_t lddu, int nv) {
  __m512 c[RC][2];
  for (int r = 0; r < RC; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int t = 0; t < T; t++) {
    const __m512 b0 = _mm512_load_ps(z + ldz * t);
    const __m512 b1 = nv > 1 ? _mm512_load_ps(z + ldz * t + 16) : _mm512_setzero_ps();
    for (int r = 0; r < RC; r++) {
      const __m512 a = _mm512_set1_ps(v[ldv * t + r]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      if (nv > 1) c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
    }
  }
  for (int r = 0; r < RC; r++) {
    float *d = du + lddu * r;
    _mm512_store_ps(d, _mm512_add_ps(_mm512_load_ps(d), c[r][0]));
    if (nv > 1) _mm512_store_ps(d + 16, _mm512_add_ps(_mm512_load_ps(d + 16), c[r][1]));
  }
}

/* DU[xi] (C, CO) += V[xi] (T, C)^T Z[xi] (T, CO) for all 36 xi */
static void dw_gemms(const pass5 *f, const float *V, const float *Z, float *DU) {
  const size_t C = (size_t)f->C, CO = (size_t)f->CO;
  for (int xi = 0; xi < NX; xi++) {
    const float *v = V + (size_t)f->Tr * C * xi, *z = Z + (size_t)f->Tr * CO * xi;
    float *du = DU + C * CO * xi;
    for (size_t c0 = 0; c0 < C; c0 += RC)
      for (size_t o0 = 0; o0 < CO; o0 += 32) {
        if (CO - o0 >= 32) dw_tile(f->T, v + c0, C, z + o0, CO, du + c0 * CO + o0, CO, 2);
        else dw_tile(f->T, v + c0, C, z + o0, CO, du + c0 * CO + o0, CO, 1);
      }
  }
}

static void backward_task(void *ctx, int tid, int nt) {
  const job5 *j = ctx;
  const plan5 *pl = j->pl;
  const pass5 *f = &pl->f, *t = &pl->t;
  const int oc = j->g->oc, c = j->g->c;
  float *me = j->ws + pl->per * (size_t)tid;
  float *xp = me + pl->xp, *V = me + pl->v, *M = me + pl->m, *dyp = me + pl->dyp, *DU = me + pl->du;
  float *part = me + pl->part, *dbp = part + (size_t)oc * c * 25;
  const size_t xs = (size_t)c * f->hin * f->win, ys = (size_t)oc * f->oh * f->ow;
  memset(DU, 0, sizeof(float) * u_floats(f));
  memset(part, 0, sizeof(float) * ((size_t)oc * c * 25 + oc));
  __m512 dbv[64]; /* CO / 16 vectors: pt_conv_wino5_ok keeps CO <= 1024 */
  for (int i = 0; i < f->CO / 16; i++) dbv[i] = _mm512_setzero_ps();
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s = lo; s < hi; s++) {
    pack(f, j->x + s * xs, NULL, xp);
    input_transform(f, xp, V);
    pack(t, j->dy + s * ys, j->g->relu ? j->y + s * ys : NULL, dyp);
    dy_transform(f, t, dyp, M, dbv);
    dw_gemms(f, V, M, DU);
    /* The input gradient of the same sample while its packed dy is in cache. */
    if (j->dx) run_packed(t, j->U, dyp, NULL, 0, j->dx + s * xs, V, M, me + pl->yp);
  }
  for (int o = 0; o < oc; o++) {
    float l[16];
    _mm512_storeu_ps(l, dbv[o / 16]);
    dbp[o] = l[o % 16];
  }
  /* the thread's partial dw (oc, c, 5, 5) = G^T DU G */
  const size_t C = (size_t)f->C, CO = (size_t)f->CO;
  for (int o = 0; o < oc; o++)
    for (int ci = 0; ci < c; ci++) {
      double u[6][6], h[5][6];
      for (int xi = 0; xi < NX; xi++) u[xi / 6][xi % 6] = DU[(xi * C + ci) * CO + o];
      for (int b = 0; b < 6; b++) { /* G^T u: combine rows */
        const double p1 = u[1][b] + u[2][b], m1 = u[1][b] - u[2][b];
        const double p2 = u[3][b] + u[4][b], m2 = u[3][b] - u[4][b];
        h[0][b] = u[0][b] / 4 - p1 / 6 + p2 / 24;
        h[1][b] = -m1 / 6 + m2 / 12;
        h[2][b] = -p1 / 6 + p2 / 6;
        h[3][b] = -m1 / 6 + m2 / 3;
        h[4][b] = -p1 / 6 + 2 * p2 / 3 + u[5][b];
      }
      float *dwp = part + ((size_t)o * c + ci) * 25;
      for (int a = 0; a < 5; a++) { /* (G^T u) G: combine columns */
        const double *r = h[a];
        const double p1 = r[1] + r[2], m1 = r[1] - r[2], p2 = r[3] + r[4], m2 = r[3] - r[4];
        dwp[a * 5 + 0] = (float)(r[0] / 4 - p1 / 6 + p2 / 24);
        dwp[a * 5 + 1] = (float)(-m1 / 6 + m2 / 12);
        dwp[a * 5 + 2] = (float)(-p1 / 6 + p2 / 6);
        dwp[a * 5 + 3] = (float)(-m1 / 6 + m2 / 3);
        dwp[a * 5 + 4] = (float)(-p1 / 6 + 2 * p2 / 3 + r[5]);
      }
    }
}

void pt_conv_wino5_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                            const float *dy, float *dw, float *db, float *dx, float *ws) {
  plan5 pl;
  plan_init(&pl, g);
  ws = align64(ws);
  if (dx) filter_transform(&pl.t, w, 1, ws);
  job5 j = {.g = g, .pl = &pl, .n = n, .x = x, .y = y, .dy = dy, .U = ws, .dw = dw, .db = db, .dx = dx,
            .ws = ws + pl.shared};
  j.nparts = pt_ops_get_threads();
  pt_parallel(backward_task, &j);
  pt_add_partials(dw, (size_t)g->oc * g->c * 25, db, (size_t)g->oc, j.ws + pl.part, pl.per, j.nparts);
}

#endif /* __AVX512F__; without it conv.c keeps to im2col + BLAS */
