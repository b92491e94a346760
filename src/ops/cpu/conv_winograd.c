/* conv2d 3x3, stride 1, by Winograd minimal filtering F(2x2, 3x3).
 *
 * Two outputs of a 3-tap correlation, y0 = d0 g0 + d1 g1 + d2 g2 and
 * y1 = d1 g0 + d2 g1 + d3 g2, take 4 multiplications instead of 6:
 *   m0 = (d0 - d2) g0            m1 = (d1 + d2) (g0 + g1 + g2) / 2
 *   m2 = (d2 - d1) (g0 - g1 + g2) / 2    m3 = (d1 - d3) g2
 *   y0 = m0 + m1 + m2            y1 = m1 - m2 - m3
 * that is y = A^T [(G g) . (B^T d)] with
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1].
 * Nested in both dimensions, a 2x2 output tile from a 4x4 input tile d is
 * A^T [(G g G^T) . (B^T d B)] A: 16 multiplications where direct needs 36.
 * Summed over input channels, the element-wise products become 16
 * independent GEMMs, one per element xi of the 4x4 transformed tile:
 *   M[xi] (cout, tiles) = U[xi] (cout, cin) V[xi] (cin, tiles),
 * so 2.25x fewer multiply-adds go through the FMA units, and the transforms
 * (additions only) cost a few percent of that for channel counts of 32 and
 * more. All the constants are powers of two, so the error is that of a few
 * more additions: well within fp32 parity at these sizes (F(4x4, 3x3) would
 * save more but its constants of 1/24 grow the error several fold).
 *
 * Forward is one pass per sample: pad the sample so every tile, including
 * those overhanging an odd output edge, reads inside the copy; transform the
 * input tiles (V); 16 GEMMs on AVX-512 register tiles (8 output channels x
 * 48 tiles, tiles in the lanes); transform back and store with the bias and
 * the fused ReLU. The input gradient is the same pass over dy, masked by the
 * ReLU and padded by 2 - pad, with the weights transposed and rotated;
 * backward runs it per sample right after that sample's weight gradient
 * (below), so dy and y come from memory once for both. Samples are split
 * over threads in fixed blocks; the forward pass and the input gradient sum
 * nothing across threads, so they do not even depend on the thread count,
 * and the weight gradient's partials are added in thread order.
 */
#include "ops/cpu/conv_winograd.h"

#include <stdint.h>
#include <string.h>

#include "util/threadpool.h"

#ifdef __AVX512F__
#include <immintrin.h>

#include "ops/cpu/transpose16.h"

#define RB 8     /* register tile rows: output channels */
#define TB 48    /* register tile columns: tiles, 3 vectors of 16 */
#define NXI 16   /* elements of a transformed 4x4 tile */
#define SLACK 32 /* floats after the padded copy and M: the last tiles' vectors read up to 30 past them */

static int up(int n, int m) { return (n + m - 1) / m * m; }
static size_t up16(size_t n) { return (n + 15) & ~(size_t)15; }

/* One pass: input (cin, hin, win) padded by pad on each side, output (cout,
 * oh, ow) in th x tw tiles of 2x2. The padded copy (cin, hp, wp) also covers
 * the tiles' overhang past an odd oh or ow, with zeros. */
typedef struct {
  int cin, hin, win, pad, cout, oh, ow;
  int th, tw, hp, wp;
  int T, Tp; /* tiles of a sample, and rounded up to register tiles */
} wpass;

static void wpass_init(wpass *p, int cin, int hin, int win, int pad, int cout) {
  p->cin = cin, p->hin = hin, p->win = win, p->pad = pad, p->cout = cout;
  p->oh = hin + 2 * pad - 2, p->ow = win + 2 * pad - 2;
  p->th = (p->oh + 1) / 2, p->tw = (p->ow + 1) / 2;
  p->hp = 2 * p->th + 2, p->wp = 2 * p->tw + 2;
  p->T = p->th * p->tw, p->Tp = up(p->T, TB);
}

/* Floats between the planes of V (16, cin, Tp) or M (16, cout, Tp) of
 * rows channels. The transforms touch the 16 planes at once, and with rows
 * * Tp a multiple of 1024 (mnist-cnn's input gradient: 64 x 192) all 16
 * streams fall in one set of the 12-way L1 and evict each other; one cache
 * line more per plane spreads them over 16 sets. */
static size_t plane(const wpass *p, int rows) { return (size_t)rows * p->Tp + 16; }

/* Per-thread floats: padded copy, V, M. */
static size_t wpass_per(const wpass *p) {
  return up16((size_t)p->cin * p->hp * p->wp + SLACK) + NXI * plane(p, p->cin) + NXI * plane(p, p->cout) + SLACK;
}
/* Shared floats: U packed as (16, cout/8, cin, 8). */
static size_t wpass_shared(const wpass *p) { return up16((size_t)NXI * up(p->cout, RB) * p->cin); }

/* The weight gradient's per-thread block, in floats from its start. */
typedef struct {
  int cw;  /* input channels rounded up to 16: V transposed has them in the lanes */
  int ocz; /* output channels rounded up to the dW tile's rows */
  size_t xp, dyp, du, part, dx, v, vt, z, per;
} wdw;

#define RO 8 /* dW register tile rows: output channels (x 2 vectors of input channels) */

typedef struct {
  wpass f, t; /* forward, and the input gradient's pass */
  wpass d;    /* dy padded to whole tiles: (oc, 2 th, 2 tw) */
  wdw w;
  size_t shared, per;
} wplan;

static void wplan_init(wplan *pl, const pt_conv_geom *g) {
  wpass_init(&pl->f, g->c, g->h, g->w, g->pad, g->oc);
  wpass_init(&pl->t, g->oc, g->oh, g->ow, 2 - g->pad, g->c);
  pl->d = pl->f;
  pl->d.cin = g->oc, pl->d.hin = g->oh, pl->d.win = g->ow, pl->d.pad = 0;
  pl->d.hp = 2 * pl->f.th, pl->d.wp = 2 * pl->f.tw;
  wdw *w = &pl->w;
  const wpass *f = &pl->f;
  w->cw = up(g->c, 16), w->ocz = up(g->oc, RO);
  size_t o = 0;
  w->xp = o, o += up16((size_t)f->cin * f->hp * f->wp + SLACK);
  w->dyp = o, o += up16((size_t)g->oc * pl->d.hp * pl->d.wp + SLACK);
  w->du = o, o += (size_t)NXI * w->ocz * w->cw;
  w->part = o, o += up16((size_t)g->oc * g->c * 9 + g->oc);
  /* A sample's dW transforms and its input-gradient pass take turns in the
   * rest, so that one sample's working set stays within the L2. */
  w->dx = o;
  w->v = o, o += NXI * plane(f, f->cin);
  w->vt = o, o += (size_t)NXI * f->Tp * w->cw;
  w->z = o, o += NXI * plane(f, w->ocz);
  w->per = o > w->dx + wpass_per(&pl->t) ? o : w->dx + wpass_per(&pl->t);
  size_t sf = wpass_shared(&pl->f), st = wpass_shared(&pl->t);
  size_t pf = wpass_per(&pl->f), pt = wpass_per(&pl->t);
  pl->shared = sf > st ? sf : st;
  pl->per = pf > pt ? pf : pt;
  if (w->per > pl->per) pl->per = w->per;
}

/* Below 8 channels on either side the GEMMs are too thin for the
 * transforms to pay for themselves: mnist-cnn's conv1 (1 -> 32) stays
 * direct. pad <= 2 keeps the input gradient's pass a plain padding. */
int pt_conv_wino_ok(const pt_conv_geom *g) {
  return g->stride == 1 && g->kh == 3 && g->kw == 3 && g->pad >= 0 && g->pad <= 2 && g->c >= 8 && g->oc >= 8 &&
         g->oh > 0 && g->ow > 0;
}

size_t pt_conv_wino_workspace(const pt_conv_geom *g, int nthreads) {
  wplan pl;
  wplan_init(&pl, g);
  return pl.shared + pl.per * (size_t)(nthreads < 1 ? 1 : nthreads) + 16; /* + 16: room to align */
}

static float *align64(float *ws) { return (float *)(((uintptr_t)ws + 63) & ~(uintptr_t)63); }

/* U[xi] = G g G^T for every (o, ci), packed as (16, cout/8, cin, 8) with
 * zeros in rows past cout. w is (cout, cin, 3, 3), or with flip the
 * original (cin, cout, 3, 3) read transposed and rotated by 180 degrees:
 * the input gradient's weights. */
static void filter_transform(const wpass *p, const float *w, int flip, float *U) {
  const int nob = up(p->cout, RB) / RB;
  memset(U, 0, sizeof(float) * NXI * (size_t)nob * RB * p->cin);
  for (int o = 0; o < p->cout; o++)
    for (int ci = 0; ci < p->cin; ci++) {
      float g[3][3], gg[4][3], u[4][4];
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++)
          g[ky][kx] = flip ? w[((size_t)ci * p->cout + o) * 9 + (2 - ky) * 3 + (2 - kx)]
                           : w[((size_t)o * p->cin + ci) * 9 + ky * 3 + kx];
      for (int kx = 0; kx < 3; kx++) {
        gg[0][kx] = g[0][kx];
        gg[1][kx] = 0.5f * (g[0][kx] + g[1][kx] + g[2][kx]);
        gg[2][kx] = 0.5f * (g[0][kx] - g[1][kx] + g[2][kx]);
        gg[3][kx] = g[2][kx];
      }
      for (int i = 0; i < 4; i++) {
        u[i][0] = gg[i][0];
        u[i][1] = 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]);
        u[i][2] = 0.5f * (gg[i][0] - gg[i][1] + gg[i][2]);
        u[i][3] = gg[i][2];
      }
      for (int xi = 0; xi < NXI; xi++)
        U[(((size_t)xi * nob + o / RB) * p->cin + ci) * RB + o % RB] = u[xi / 4][xi % 4];
    }
}

/* src (cin, hin, win) into xp (cin, hp, wp) at (pad, pad), zeros elsewhere;
 * with gate, only elements where gate > 0 (the fused ReLU's mask). Rows are
 * 5-70 floats: masked vector moves, not a memcpy call a row. */
static void pad_sample(const wpass *p, const float *src, const float *gate, float *xp) {
  memset(xp, 0, sizeof(float) * ((size_t)p->cin * p->hp * p->wp + SLACK));
  const size_t in = (size_t)p->hin * p->win;
  for (int ci = 0; ci < p->cin; ci++)
    for (int y = 0; y < p->hin; y++) {
      const size_t at = in * ci + (size_t)y * p->win;
      float *d = xp + ((size_t)ci * p->hp + y + p->pad) * p->wp + p->pad;
      for (int x = 0; x < p->win; x += 16) {
        const int left = p->win - x;
        const __mmask16 m = (__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, src + at + x);
        if (gate)
          v = _mm512_maskz_mov_ps(
              _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, gate + at + x), _mm512_setzero_ps(), _CMP_GT_OQ), v);
        _mm512_mask_storeu_ps(d + x, m, v);
      }
    }
}

/* Even and odd lanes of the 32 floats at s: columns 2tx and 2tx+1 of 16
 * neighbouring tiles. */
static inline void deinterleave(const float *s, __m512 *ev, __m512 *od) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 a = _mm512_loadu_ps(s), b = _mm512_loadu_ps(s + 16);
  *ev = _mm512_permutex2var_ps(a, ie, b);
  *od = _mm512_permutex2var_ps(a, io, b);
}

/* V[xi][ci][t] = (B^T d B)[xi] of every tile t = ty*tw + tx, 16 tiles of a
 * tile row at a time; lanes past tw read the copy's next row or its slack
 * and are not stored. Tiles T..Tp are zeroed: the GEMM reads them. */
static void input_transform(const wpass *p, const float *xp, float *V) {
  const size_t Tp = (size_t)p->Tp, xs = plane(p, p->cin);
  for (int ci = 0; ci < p->cin; ci++) {
    const float *xc = xp + (size_t)ci * p->hp * p->wp;
    float *vc = V + (size_t)ci * Tp;
    for (int ty = 0; ty < p->th; ty++)
      for (int tx0 = 0; tx0 < p->tw; tx0 += 16) {
        const int left = p->tw - tx0;
        const __mmask16 m = (__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1);
        __m512 t[4][4];
        __m512 d[4][4];
        for (int r = 0; r < 4; r++) {
          const float *s = xc + (size_t)(2 * ty + r) * p->wp + 2 * tx0;
          deinterleave(s, &d[r][0], &d[r][1]);
          deinterleave(s + 2, &d[r][2], &d[r][3]);
        }
        for (int c = 0; c < 4; c++) { /* B^T d: combine rows */
          t[0][c] = _mm512_sub_ps(d[0][c], d[2][c]);
          t[1][c] = _mm512_add_ps(d[1][c], d[2][c]);
          t[2][c] = _mm512_sub_ps(d[2][c], d[1][c]);
          t[3][c] = _mm512_sub_ps(d[1][c], d[3][c]);
        }
        float *v = vc + (size_t)ty * p->tw + tx0;
        for (int r = 0; r < 4; r++) { /* (B^T d) B: combine columns */
          _mm512_mask_storeu_ps(v + xs * (4 * r + 0), m, _mm512_sub_ps(t[r][0], t[r][2]));
          _mm512_mask_storeu_ps(v + xs * (4 * r + 1), m, _mm512_add_ps(t[r][1], t[r][2]));
          _mm512_mask_storeu_ps(v + xs * (4 * r + 2), m, _mm512_sub_ps(t[r][2], t[r][1]));
          _mm512_mask_storeu_ps(v + xs * (4 * r + 3), m, _mm512_sub_ps(t[r][1], t[r][3]));
        }
      }
  }
  if (p->Tp > p->T)
    for (int xi = 0; xi < NXI; xi++)
      for (int ci = 0; ci < p->cin; ci++)
        memset(V + xs * xi + Tp * ci + p->T, 0, sizeof(float) * (size_t)(p->Tp - p->T));
}

/* M (cout, Tp) = U (cout/8, cin, 8) V (cin, Tp) for one xi: 8 channels x 48
 * tiles in 24 accumulators; per input channel 3 loads and 8 broadcasts feed
 * 24 FMAs. */
static void gemm_xi(const wpass *p, const float *U, const float *V, float *M) {
  const int nob = up(p->cout, RB) / RB, K = p->cin;
  const size_t Tp = (size_t)p->Tp;
  for (size_t t0 = 0; t0 < Tp; t0 += TB)
    for (int ob = 0; ob < nob; ob++) {
      __m512 c[RB][3];
      for (int r = 0; r < RB; r++) c[r][0] = c[r][1] = c[r][2] = _mm512_setzero_ps();
      const float *u = U + (size_t)ob * K * RB, *v = V + t0;
      for (int k = 0; k < K; k++) {
        const __m512 b0 = _mm512_load_ps(v + Tp * k), b1 = _mm512_load_ps(v + Tp * k + 16),
                     b2 = _mm512_load_ps(v + Tp * k + 32);
        for (int r = 0; r < RB; r++) {
          const __m512 a = _mm512_set1_ps(u[k * RB + r]);
          c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
          c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
          c[r][2] = _mm512_fmadd_ps(a, b2, c[r][2]);
        }
      }
      const int rows = p->cout - ob * RB < RB ? p->cout - ob * RB : RB;
      for (int r = 0; r < rows; r++) {
        float *mo = M + ((size_t)ob * RB + r) * Tp + t0;
        _mm512_store_ps(mo, c[r][0]);
        _mm512_store_ps(mo + 16, c[r][1]);
        _mm512_store_ps(mo + 32, c[r][2]);
      }
    }
}

/* out (cout, oh, ow) = A^T M A per tile, + bias, ReLU'd, 16 tiles of a tile
 * row at a time: the 2x2 results of neighbouring tiles interleave into two
 * output rows of 32, stored masked to the row's end (and the second row
 * only where oh has it). */
static void output_transform(const wpass *p, const float *M, const float *bias, int relu, float *out) {
  const size_t Tp = (size_t)p->Tp, ms = plane(p, p->cout), ohw = (size_t)p->oh * p->ow;
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int o = 0; o < p->cout; o++) {
    const __m512 bv = _mm512_set1_ps(bias ? bias[o] : 0.0f);
    const float *mo = M + (size_t)o * Tp;
    float *yo = out + ohw * o;
    for (int ty = 0; ty < p->th; ty++)
      for (int tx0 = 0; tx0 < p->tw; tx0 += 16) {
        const float *mt = mo + (size_t)ty * p->tw + tx0;
        __m512 m[4][4], r[2][4];
        for (int xi = 0; xi < NXI; xi++) m[xi / 4][xi % 4] = _mm512_loadu_ps(mt + ms * xi);
        for (int c = 0; c < 4; c++) { /* A^T m: combine rows */
          r[0][c] = _mm512_add_ps(_mm512_add_ps(m[0][c], m[1][c]), m[2][c]);
          r[1][c] = _mm512_sub_ps(_mm512_sub_ps(m[1][c], m[2][c]), m[3][c]);
        }
        const int cols = p->ow - 2 * tx0 < 32 ? p->ow - 2 * tx0 : 32; /* outputs of this row segment */
        const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xFFFFu : (1u << cols) - 1);
        const __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xFFFFu : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
        for (int i = 0; i < 2; i++) {
          const int oy = 2 * ty + i;
          if (oy >= p->oh) break;
          __m512 y0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[i][0], r[i][1]), r[i][2]), bv);
          __m512 y1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(r[i][1], r[i][2]), r[i][3]), bv);
          if (relu) {
            y0 = _mm512_max_ps(y0, _mm512_setzero_ps());
            y1 = _mm512_max_ps(y1, _mm512_setzero_ps());
          }
          float *yr = yo + (size_t)oy * p->ow + 2 * tx0;
          _mm512_mask_storeu_ps(yr, m0, _mm512_permutex2var_ps(y0, lo, y1));
          if (m1) _mm512_mask_storeu_ps(yr + 16, m1, _mm512_permutex2var_ps(y0, hi, y1));
        }
      }
  }
}

typedef struct {
  const wpass *p;
  size_t per;
  int n, relu;
  const float *x, *gate, *b, *U;
  float *out, *ws;
} wjob;

/* prefetch slice xi of 16 of the n floats at a into L2 */
static inline void prefetch_slice(const float *a, size_t n, int xi) {
  if (!a) return;
  const size_t sl = (n + NXI - 1) / NXI;
  for (size_t e = sl * xi; e < sl * (xi + 1) && e < n; e += 16) _mm_prefetch((const char *)(a + e), _MM_HINT_T1);
}

/* One sample of a pass, in the block at xp (wpass_per floats); nx and ng,
 * where not NULL, are the next sample's input and gate, to prefetch. */
static void run_sample(const wpass *p, const float *U, const float *x, const float *gate, const float *bias, int relu,
                       float *out, float *xp, const float *nx, const float *ng) {
  float *V = xp + up16((size_t)p->cin * p->hp * p->wp + SLACK);
  const size_t vs = plane(p, p->cin), ms = plane(p, p->cout), xs = (size_t)p->cin * p->hin * p->win;
  float *M = V + NXI * vs;
  const size_t us = (size_t)up(p->cout, RB) * p->cin;
  pad_sample(p, x, gate, xp);
  input_transform(p, xp, V);
  for (int xi = 0; xi < NXI; xi++) {
    prefetch_slice(nx, xs, xi);
    prefetch_slice(ng, xs, xi);
    gemm_xi(p, U + us * xi, V + vs * xi, M + ms * xi);
  }
  output_transform(p, M, bias, relu, out);
}

static void pass_task(void *ctx, int tid, int nt) {
  const wjob *j = ctx;
  const wpass *p = j->p;
  float *xp = j->ws + j->per * (size_t)tid;
  const size_t xs = (size_t)p->cin * p->hin * p->win, ys = (size_t)p->cout * p->oh * p->ow;
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s = lo; s < hi; s++) {
    /* The next sample's input (and gate) come from memory, at a few GB/s on
     * one core: fetch them into L2 a slice per GEMM while the FMAs run. */
    const float *nx = s + 1 < hi ? j->x + (s + 1) * xs : NULL;
    const float *ng = s + 1 < hi && j->gate ? j->gate + (s + 1) * xs : NULL;
    run_sample(p, j->U, j->x + s * xs, j->gate ? j->gate + s * xs : NULL, j->b, j->relu, j->out + s * ys, xp, nx, ng);
  }
}

void pt_conv_wino_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                          float *ws) {
  wplan pl;
  wplan_init(&pl, g);
  ws = align64(ws);
  filter_transform(&pl.f, w, 0, ws);
  wjob j = {.p = &pl.f, .per = pl.per, .n = n, .relu = g->relu, .x = x, .b = b, .U = ws, .out = y,
            .ws = ws + pl.shared};
  pt_parallel(pass_task, &j);
}

void pt_conv_wino_backward_data(const pt_conv_geom *g, int n, const float *w, const float *y, const float *dy,
                                float *dx, float *ws) {
  wplan pl;
  wplan_init(&pl, g);
  ws = align64(ws);
  filter_transform(&pl.t, w, 1, ws);
  wjob j = {.p = &pl.t, .per = pl.per, .n = n, .x = dy, .gate = g->relu ? y : NULL, .U = ws, .out = dx,
            .ws = ws + pl.shared};
  pt_parallel(pass_task, &j);
}

/* ---- weight gradient ----
 *
 * With U = G g G^T, the tile's output is A^T (U . V) A, so
 *   dL/dU[xi][o][c] = sum over tiles t of Z[xi][o][t] V[xi][c][t],
 *   Z = A dY A^T (the 2x2 dy tile, through the ReLU's mask, to 4x4),
 *   dL/dg = G^T dL/dU G,
 * 16 GEMMs with the tiles as the reduction, 2.25x fewer multiply-adds than
 * the direct dW. The GEMMs want the input channels in the lanes and the
 * tiles streaming past, so V is transposed (tiles, channels) in 16x16
 * blocks; every lane is then a real channel pair and the accumulators are
 * final sums, with no reduction across lanes. A thread sums its samples in
 * order into its own dL/dU, transforms that once, and the threads' partials
 * are added in thread order. */

/* Vt[xi] (Tp, cw) = V[xi] (cin, Tp) transposed; channels past cin are 0. */
static void transpose_v(const wpass *p, int cw, const float *V, float *Vt) {
  const size_t vs = plane(p, p->cin), Tp = (size_t)p->Tp;
  __m512 r[16];
  for (int xi = 0; xi < NXI; xi++)
    for (int c0 = 0; c0 < cw; c0 += 16)
      for (size_t t0 = 0; t0 < Tp; t0 += 16) {
        for (int a = 0; a < 16; a++)
          r[a] = c0 + a < p->cin ? _mm512_load_ps(V + vs * xi + Tp * (c0 + a) + t0) : _mm512_setzero_ps();
        pt_transpose16(r);
        float *dst = Vt + (Tp * xi + t0) * cw + c0;
        for (int l = 0; l < 16; l++) _mm512_store_ps(dst + (size_t)l * cw, r[l]);
      }
}

/* Z[xi][o][t] = (A dY A^T)[xi] of every 2x2 tile of dyp (oc, 2th, 2tw),
 * 16 tiles of a tile row at a time, and db[o] += the sum of dyp's plane o.
 * With A = [1 0; 1 1; 1 -1; 0 -1] a pair (e, f) becomes (e, e+f, e-f, -f). */
static void dy_transform(const wpass *f, const wpass *d, const float *dyp, float *Z, float *db) {
  const size_t zs = plane(f, up(d->cin, RO)), Tp = (size_t)f->Tp, dps = (size_t)d->hp * d->wp;
  for (int o = 0; o < d->cin; o++) {
    const float *dp = dyp + dps * o;
    __m512 sum = _mm512_setzero_ps();
    for (size_t i = 0; i < dps; i += 16) {
      const size_t left = dps - i;
      sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps((__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1), dp + i));
    }
    db[o] += _mm512_reduce_add_ps(sum);
    float *zo = Z + Tp * o;
    for (int ty = 0; ty < f->th; ty++)
      for (int tx0 = 0; tx0 < f->tw; tx0 += 16) {
        const int left = f->tw - tx0;
        const __mmask16 m = (__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1);
        __m512 e[2], g[2], t[4][2];
        deinterleave(dp + (size_t)(2 * ty) * d->wp + 2 * tx0, &e[0], &e[1]);
        deinterleave(dp + (size_t)(2 * ty + 1) * d->wp + 2 * tx0, &g[0], &g[1]);
        for (int c = 0; c < 2; c++) { /* A dY: combine rows */
          t[0][c] = e[c];
          t[1][c] = _mm512_add_ps(e[c], g[c]);
          t[2][c] = _mm512_sub_ps(e[c], g[c]);
          t[3][c] = _mm512_sub_ps(_mm512_setzero_ps(), g[c]);
        }
        float *z = zo + (size_t)ty * f->tw + tx0;
        for (int r = 0; r < 4; r++) { /* (A dY) A^T: combine columns */
          _mm512_mask_storeu_ps(z + zs * (4 * r + 0), m, t[r][0]);
          _mm512_mask_storeu_ps(z + zs * (4 * r + 1), m, _mm512_add_ps(t[r][0], t[r][1]));
          _mm512_mask_storeu_ps(z + zs * (4 * r + 2), m, _mm512_sub_ps(t[r][0], t[r][1]));
          _mm512_mask_storeu_ps(z + zs * (4 * r + 3), m, _mm512_sub_ps(_mm512_setzero_ps(), t[r][1]));
        }
      }
  }
}

/* du (RO, cw) += z (RO rows zs apart, Tp) vt (Tp, cw) for the cv (1 or 2)
 * vectors of channels at vt and du: 8 x 2 accumulators, per tile 2 loads
 * and 8 broadcasts for 16 FMAs. 8 rows, not 12: channel counts are
 * multiples of 8 more often than of 12 (mnist-cnn's 64 would waste 1/9). */
static inline __attribute__((always_inline)) void dw_tile(int Tp, const float *z, size_t zs, const float *vt,
                                                          int cw, float *du, int cv) {
  __m512 c[RO][2];
  for (int r = 0; r < RO; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int t = 0; t < Tp; t++) {
    const __m512 b0 = _mm512_load_ps(vt + (size_t)t * cw);
    const __m512 b1 = cv > 1 ? _mm512_load_ps(vt + (size_t)t * cw + 16) : _mm512_setzero_ps();
    for (int r = 0; r < RO; r++) {
      const __m512 a = _mm512_set1_ps(z[zs * r + t]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      if (cv > 1) c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
    }
  }
  for (int r = 0; r < RO; r++) {
    float *d = du + (size_t)r * cw;
    _mm512_store_ps(d, _mm512_add_ps(_mm512_load_ps(d), c[r][0]));
    if (cv > 1) _mm512_store_ps(d + 16, _mm512_add_ps(_mm512_load_ps(d + 16), c[r][1]));
  }
}

/* DU[xi] (ocz, cw) += Z[xi] (ocz, Tp) Vt[xi] (Tp, cw) */
static void dw_gemm_xi(const wpass *f, const wdw *w, const float *Z, const float *Vt, float *DU) {
  const size_t Tp = (size_t)f->Tp;
  for (int o0 = 0; o0 < w->ocz; o0 += RO)
    for (int c0 = 0; c0 < w->cw; c0 += 32) {
      const float *z = Z + Tp * o0, *vt = Vt + c0;
      float *du = DU + (size_t)o0 * w->cw + c0;
      if (w->cw - c0 >= 32) dw_tile(f->Tp, z, Tp, vt, w->cw, du, 2);
      else dw_tile(f->Tp, z, Tp, vt, w->cw, du, 1);
    }
}

typedef struct {
  const pt_conv_geom *g;
  const wplan *pl;
  int n, nparts;
  const float *x, *y, *dy, *Ut; /* Ut: the input gradient's transformed weights */
  float *dw, *db, *dx, *ws;     /* ws: the per-thread blocks */
} wdw_job;

static void dw_task(void *ctx, int tid, int nt) {
  const wdw_job *j = ctx;
  const wplan *pl = j->pl;
  const wpass *f = &pl->f, *d = &pl->d;
  const wdw *w = &pl->w;
  const int oc = j->g->oc, c = j->g->c;
  float *me = j->ws + pl->per * (size_t)tid;
  float *xp = me + w->xp, *V = me + w->v, *Vt = me + w->vt, *dyp = me + w->dyp, *Z = me + w->z;
  float *DU = me + w->du, *part = me + w->part;
  const size_t zs = plane(f, w->ocz), dus = (size_t)w->ocz * w->cw, vts = (size_t)f->Tp * w->cw;
  const size_t xs = (size_t)c * f->hin * f->win, ys = (size_t)oc * f->oh * f->ow;
  memset(Z, 0, sizeof(float) * NXI * zs); /* tiles past T and channels past oc stay 0 */
  memset(DU, 0, sizeof(float) * NXI * dus);
  memset(part, 0, sizeof(float) * ((size_t)oc * c * 9 + oc));
  float *dbp = part + (size_t)oc * c * 9;
  size_t lo, hi;
  pt_split((size_t)j->n, tid, nt, &lo, &hi);
  for (size_t s = lo; s < hi; s++) {
    pad_sample(f, j->x + s * xs, NULL, xp);
    input_transform(f, xp, V);
    transpose_v(f, w->cw, V, Vt);
    pad_sample(d, j->dy + s * ys, j->g->relu ? j->y + s * ys : NULL, dyp);
    dy_transform(f, d, dyp, Z, dbp);
    /* as in pass_task: the next sample's x into L2 under the FMAs; its dy
     * and y under the input gradient's */
    const int more = s + 1 < hi, gate = j->g->relu;
    for (int xi = 0; xi < NXI; xi++) {
      prefetch_slice(more ? j->x + (s + 1) * xs : NULL, xs, xi);
      dw_gemm_xi(f, w, Z + zs * xi, Vt + vts * xi, DU + dus * xi);
    }
    /* The input gradient of the same sample while its dy and y are still in
     * L2: read from memory once for both. */
    if (j->dx)
      run_sample(&pl->t, j->Ut, j->dy + s * ys, gate ? j->y + s * ys : NULL, NULL, 0,
                 j->dx + s * xs, me + w->dx, more ? j->dy + (s + 1) * ys : NULL,
                 more && gate ? j->y + (s + 1) * ys : NULL);
  }
  /* the thread's partial dw (oc, c, 3, 3) = G^T DU G, with
   * G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1] */
  for (int o = 0; o < oc; o++)
    for (int ci = 0; ci < c; ci++) {
      float u[4][4], h[3][4];
      for (int xi = 0; xi < NXI; xi++) u[xi / 4][xi % 4] = DU[dus * xi + (size_t)o * w->cw + ci];
      for (int b = 0; b < 4; b++) {
        h[0][b] = u[0][b] + 0.5f * (u[1][b] + u[2][b]);
        h[1][b] = 0.5f * (u[1][b] - u[2][b]);
        h[2][b] = 0.5f * (u[1][b] + u[2][b]) + u[3][b];
      }
      float *dwp = part + ((size_t)o * c + ci) * 9;
      for (int a = 0; a < 3; a++) {
        dwp[a * 3 + 0] = h[a][0] + 0.5f * (h[a][1] + h[a][2]);
        dwp[a * 3 + 1] = 0.5f * (h[a][1] - h[a][2]);
        dwp[a * 3 + 2] = 0.5f * (h[a][1] + h[a][2]) + h[a][3];
      }
    }
}

void pt_conv_wino_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                           const float *dy, float *dw, float *db, float *dx, float *ws) {
  wplan pl;
  wplan_init(&pl, g);
  ws = align64(ws);
  if (dx) filter_transform(&pl.t, w, 1, ws);
  wdw_job j = {.g = g, .pl = &pl, .n = n, .x = x, .y = y, .dy = dy, .Ut = ws, .dw = dw, .db = db, .dx = dx,
               .ws = ws + pl.shared};
  j.nparts = pt_ops_get_threads();
  pt_parallel(dw_task, &j);
  pt_add_partials(dw, (size_t)g->oc * g->c * 9, db, (size_t)g->oc, j.ws + pl.w.part, pl.per, j.nparts);
}

#endif /* __AVX512F__; without it conv.c keeps to im2col + BLAS */
