/* Log-softmax over rows and the classification losses built on it. Sums use
 * double so the loss does not drift with the batch size; the row maximum is
 * subtracted first so exp never overflows. */
#include <math.h>

#include "ops/cpu/expf.h"
#include "ops/cpu/lanes.h"
#include "ops/cpu/ops.h"

/* Rows are independent, so blocks of rows go to the pool. exp is taken in
 * float (pt_expf) and summed in double: the sum is where precision is
 * lost, not the terms. The double sum runs in 16 partial sums, lane l
 * taking the row's elements l, l + 16, l + 32, ... in order, and the lanes
 * are combined by halves (lane l plus lane l + 8, then l + 4, l + 2,
 * l + 1): a fixed order, so the same bits every run, and one the AVX-512
 * rows below follow exactly, two vectors of 8 doubles at a time. */
typedef struct {
  int k;
  const float *x, *y, *dy;
  float *out;
  float *p; /* softmax (n, k): written forward, read backward; or NULL */
} lsm_job;

#define LSM_LANES 16

#ifdef PT_HAVE_EXPF16
/* The scalar rows below, operation for operation, in vectors: the same
 * bits. For fmnist-mlp's 100 x 200, what GCC made of the scalar rows took
 * 22 us forward and 14 us backward, these 14 and 10. Lanes past the
 * end of a row add +0.0, which changes no partial sum (none is ever -0.0:
 * they start at +0.0, and a sum is -0.0 only if both terms are). */
typedef struct {
  __m512d lo, hi; /* partial sums of lanes 0..7 and 8..15 */
} sum16;

static inline void sum16_add(sum16 *p, __m512 v) {
  p->lo = _mm512_add_pd(p->lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  p->hi = _mm512_add_pd(p->hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

static inline double sum16_lanes(sum16 p) {
  const __m512d h8 = _mm512_add_pd(p.lo, p.hi);
  const __m256d h4 = _mm256_add_pd(_mm512_castpd512_pd256(h8), _mm512_extractf64x4_pd(h8, 1));
  const __m128d h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h2, _mm_unpackhi_pd(h2, h2)));
}

/* Two running maxima where max_of has one: half the chain of dependent
 * instructions, and, the order not mattering, the same result. */
static float max_of16(const float *v, int n) {
  __m512 a = _mm512_set1_ps(v[0]), b = a;
  int c = 0;
  for (; c + 32 <= n; c += 32) { /* max_ps(x, part) is x > part ? x : part */
    a = _mm512_max_ps(_mm512_loadu_ps(v + c), a);
    b = _mm512_max_ps(_mm512_loadu_ps(v + c + 16), b);
  }
  for (; c < n; c += 16) {
    const __mmask16 m = pt_lanes(n - c);
    a = _mm512_mask_max_ps(a, m, _mm512_maskz_loadu_ps(m, v + c), a);
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(a, b));
}

/* The sum of exp(x - mx) over a row, in the 16 partial lanes; the
 * exponentials also go to e where it is not NULL. */
static inline double exp_sum16(const float *xr, int k, float mx, float *e) {
  const __m512 vmx = _mm512_set1_ps(mx);
  sum16 part = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  for (int c = 0; c < k; c += 16) {
    const __mmask16 m = pt_lanes(k - c);
    const __m512 ec = _mm512_maskz_mov_ps(m, pt_expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + c), vmx)));
    sum16_add(&part, ec);
    if (e) _mm512_mask_storeu_ps(e + c, m, ec);
  }
  return sum16_lanes(part);
}

/* A row's maximum, and in *sum the sum of exp(x - max) over it; the
 * exponentials also go to e where it is not NULL. */
static float exp_row(const float *xr, int k, float *e, double *sum) {
  const float mx = max_of16(xr, k);
  *sum = exp_sum16(xr, k, mx, e);
  return mx;
}

/* Rows in blocks, each step for every row of the block before the next
 * step: within a row, each step waits for the one before (the maximum, the
 * exponentials' sum, its log), and across rows the CPU overlaps them. */
#define LSM_BLOCK 8
static void lsm_fwd_rows(const float *x, float *y, float *p, int rows, int k) {
  float mx[LSM_BLOCK], lse[LSM_BLOCK];
  double sum[LSM_BLOCK];
  for (int r = 0; r < rows; r++) mx[r] = max_of16(x + (size_t)r * k, k);
  for (int r = 0; r < rows; r++) sum[r] = exp_sum16(x + (size_t)r * k, k, mx[r], p ? p + (size_t)r * k : NULL);
  for (int r = 0; r < rows; r++) lse[r] = mx[r] + (float)log(sum[r]);
  for (int r = 0; r < rows; r++) {
    const __m512 v = _mm512_set1_ps(lse[r]), inv = _mm512_set1_ps((float)(1.0 / sum[r]));
    for (int c = 0; c < k; c += 16) {
      const __mmask16 m = pt_lanes(k - c);
      _mm512_mask_storeu_ps(y + (size_t)r * k + c, m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + (size_t)r * k + c), v));
      if (p) {
        float *pr = p + (size_t)r * k + c;
        _mm512_mask_storeu_ps(pr, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, pr), inv));
      }
    }
  }
}

static void lsm_bwd_row(const float *yr, const float *pr, const float *dr, float *xr, int k) {
  sum16 part = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  for (int c = 0; c < k; c += 16) sum16_add(&part, _mm512_maskz_loadu_ps(pt_lanes(k - c), dr + c));
  const __m512 fs = _mm512_set1_ps((float)sum16_lanes(part));
  for (int c = 0; c < k; c += 16) {
    const __mmask16 m = pt_lanes(k - c);
    const __m512 e = pr ? _mm512_maskz_loadu_ps(m, pr + c) : pt_expf16(_mm512_maskz_loadu_ps(m, yr + c));
    _mm512_mask_storeu_ps(xr + c, m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dr + c), _mm512_mul_ps(e, fs)));
  }
}

#else

/* The row's maximum in 16 running maxima, so that it vectorises: one
 * running maximum was a chain of dependent scalar max instructions, 200
 * long in fmnist-mlp's rows, and three quarters of the forward pass. The
 * maximum of non-NaN values does not depend on the order; a NaN makes the
 * whole row NaN either way. */
#define LSM_MAXLANES 16
static float max_of(const float *v, int n) {
  float part[LSM_MAXLANES];
  for (int l = 0; l < LSM_MAXLANES; l++) part[l] = v[0];
  int c = 0;
  for (; c + LSM_MAXLANES <= n; c += LSM_MAXLANES)
    for (int l = 0; l < LSM_MAXLANES; l++) part[l] = v[c + l] > part[l] ? v[c + l] : part[l];
  for (int l = 0; c < n; c++, l++) part[l] = v[c] > part[l] ? v[c] : part[l];
  float mx = part[0];
  for (int l = 1; l < LSM_MAXLANES; l++) mx = part[l] > mx ? part[l] : mx;
  return mx;
}

static double sum_lanes(double part[LSM_LANES]) {
  for (int w = LSM_LANES / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) part[l] += part[l + w];
  return part[0];
}

/* A row's maximum, and in *sum the sum of exp(x - max) over it; the
 * exponentials also go to e where it is not NULL. */
static float exp_row(const float *xr, int k, float *e, double *sum) {
  const float mx = max_of(xr, k);
  double part[LSM_LANES] = {0};
  for (int c = 0; c < k; c++) {
    const float ec = pt_expf(xr[c] - mx);
    part[c % LSM_LANES] += ec;
    if (e) e[c] = ec;
  }
  *sum = sum_lanes(part);
  return mx;
}

static void lsm_fwd_row(const float *xr, float *yr, float *pr, int k) {
  double sum;
  const float mx = exp_row(xr, k, pr, &sum);
  const float lse = mx + (float)log(sum), inv = (float)(1.0 / sum);
  for (int c = 0; c < k; c++) yr[c] = xr[c] - lse;
  if (pr)
    for (int c = 0; c < k; c++) pr[c] *= inv;
}

static void lsm_bwd_row(const float *yr, const float *pr, const float *dr, float *xr, int k) {
  double part[LSM_LANES] = {0};
  for (int c = 0; c < k; c++) part[c % LSM_LANES] += dr[c];
  const float fs = (float)sum_lanes(part);
  for (int c = 0; c < k; c++) xr[c] = dr[c] - (pr ? pr[c] : pt_expf(yr[c])) * fs;
}

#endif

static void lsm_fwd(void *ctx, size_t lo, size_t hi) {
  const lsm_job *j = ctx;
#ifdef PT_HAVE_EXPF16
  for (size_t s = lo; s < hi; s += LSM_BLOCK)
    lsm_fwd_rows(j->x + s * j->k, j->out + s * j->k, j->p ? j->p + s * j->k : NULL,
                 hi - s < LSM_BLOCK ? (int)(hi - s) : LSM_BLOCK, j->k);
#else
  for (size_t s = lo; s < hi; s++) lsm_fwd_row(j->x + s * j->k, j->out + s * j->k, j->p ? j->p + s * j->k : NULL, j->k);
#endif
}

static void lsm_bwd(void *ctx, size_t lo, size_t hi) {
  const lsm_job *j = ctx;
  for (size_t s = lo; s < hi; s++)
    lsm_bwd_row(j->y + s * j->k, j->p ? j->p + s * j->k : NULL, j->dy + s * j->k, j->out + s * j->k, j->k);
}

void pt_log_softmax_forward(int n, int k, const float *x, float *y, float *p) {
  lsm_job j = {k, x, NULL, NULL, y, p};
  pt_parallel_for((size_t)n, (size_t)(4096 / (k > 0 ? k : 1)) + 1, lsm_fwd, &j);
}

void pt_log_softmax_backward(int n, int k, const float *y, const float *p, const float *dy, float *dx) {
  lsm_job j = {k, NULL, y, dy, dx, (float *)p}; /* read only here */
  pt_parallel_for((size_t)n, (size_t)(4096 / (k > 0 ? k : 1)) + 1, lsm_bwd, &j);
}

double pt_nll_loss(int n, int k, const float *lp, const int32_t *y, float *dlp, float scale) {
  double loss = 0.0;
  for (int s = 0; s < n; s++) loss -= lp[(size_t)s * k + y[s]];
  if (dlp) {
    const float g = -scale / (float)n;
    for (int s = 0; s < n; s++) {
      for (int j = 0; j < k; j++) dlp[(size_t)s * k + j] = 0.0f;
      dlp[(size_t)s * k + y[s]] = g;
    }
  }
  return loss / n;
}

/* Cross-entropy on the logits: loss = log(sum exp(z - mx)) + mx - z[y],
 * and the gradient softmax(z) - onehot(y), times scale / n. The
 * exponentials are log-softmax's (pt_expf, in float) and their sum the
 * same double sum in 16 partial lanes, so that the scalar and the AVX-512
 * rows agree bit for bit; each row keeps its exponentials in its row of
 * dz until the sum is known. Taken in double by the C library's exp, they
 * were 12 us of fmnist-mlp's step (100 x 10), a call per element. */
static void ce_grad(float *dr, int k, double sum, float scale, int n, int label) {
  for (int j = 0; j < k; j++) dr[j] = (float)((double)dr[j] / sum * scale / n);
  dr[label] -= scale / (float)n;
}

double pt_cross_entropy_loss(int n, int k, const float *z, const int32_t *y, float *dz, float scale) {
  double loss = 0.0;
  for (int s = 0; s < n; s++) {
    const float *zr = z + (size_t)s * k;
    float *dr = dz ? dz + (size_t)s * k : NULL;
    double sum;
    const double mx = exp_row(zr, k, dr, &sum);
    loss += mx + log(sum) - zr[y[s]];
    if (dr) ce_grad(dr, k, sum, scale, n, y[s]);
  }
  return loss / n;
}

int pt_count_correct(int n, int k, const float *scores, const int32_t *y) {
  int correct = 0;
  for (int s = 0; s < n; s++) {
    const float *r = scores + (size_t)s * k;
    int best = 0;
    for (int j = 1; j < k; j++)
      if (r[j] > r[best]) best = j;
    correct += best == y[s];
  }
  return correct;
}
