/* Log-softmax over rows and the classification losses built on it. Sums use
 * double so the loss does not drift with the batch size; the row maximum is
 * subtracted first so exp never overflows. */
#include <math.h>

#include "ops/cpu/expf.h"
#include "ops/cpu/ops.h"

/* Rows are independent, so blocks of rows go to the pool. exp is taken in
 * float (pt_expf16, every lane with pt_expf's bits) and summed in double:
 * the sum is where precision is lost, not the terms. The double sum runs
 * in 16 partial sums, lane l taking the row's elements l, l + 16, l + 32,
 * ... in order, and the lanes are combined by halves (lane l plus lane
 * l + 8, then l + 4, l + 2, l + 1): a fixed order, so the same bits every
 * run and at every level (test_softmax writes it out one element at a
 * time), kept as two vectors of 8 doubles. For fmnist-mlp's 100 x 200 on
 * AVX-512, what GCC made of scalar rows took 22 us forward and 14 us
 * backward, these 14 and 10. */
typedef struct {
  int k;
  const float *x, *y, *dy;
  float *out;
  float *p; /* softmax (n, k): written forward, read backward; or NULL */
} lsm_job;

/* Lanes past the end of a row add +0.0, which changes no partial sum
 * (none is ever -0.0: they start at +0.0, and a sum is -0.0 only if both
 * terms are). */
typedef struct {
  pt_vd8 lo, hi; /* partial sums of lanes 0..7 and 8..15 */
} sum16;

static inline void sum16_add(sum16 *p, pt_v16 v) {
  p->lo = vd8_add(p->lo, vd8_from_lo(v));
  p->hi = vd8_add(p->hi, vd8_from_hi(v));
}

static inline double sum16_lanes(sum16 p) { return vd8_reduce_add(vd8_add(p.lo, p.hi)); }

/* The row's maximum in two vectors of running maxima: one running maximum
 * was a chain of dependent max instructions, 200 long in fmnist-mlp's
 * rows. The maximum of non-NaN values does not depend on the order, and a
 * NaN enters the running maxima only as the first element, where it makes
 * every lane, and the row, NaN (max(x, part) is part where either is NaN). */
static float max_of16(const float *v, int n) {
  pt_v16 a = v16_set1(v[0]), b = a;
  int c = 0;
  for (; c + 32 <= n; c += 32) {
    a = v16_max(v16_loadu(v + c), a);
    b = v16_max(v16_loadu(v + c + 16), b);
  }
  for (; c < n; c += 16) /* lanes past the end load a, which leaves them a */
    a = v16_max(v16_mask_loadu(a, v16_lanes(n - c), v + c), a);
  return v16_reduce_max(v16_max(a, b));
}

/* The sum of exp(x - mx) over a row, in the 16 partial lanes. */
static inline double exp_sum16(const float *xr, int k, float mx) {
  const pt_v16 vmx = v16_set1(mx);
  sum16 part = {vd8_zero(), vd8_zero()};
  int c = 0;
  for (; c + 16 <= k; c += 16) sum16_add(&part, pt_expf16_nonpos(v16_sub(v16_loadu(xr + c), vmx)));
  if (c < k) {
    const pt_m16 m = v16_lanes(k - c);
    sum16_add(&part, v16_maskz_mov(m, pt_expf16_nonpos(v16_sub(v16_maskz_loadu(m, xr + c), vmx))));
  }
  return sum16_lanes(part);
}

/* exp(x - mx) over a row into e, and nothing summed: each chunk is then
 * independent of the others, and the CPU overlaps more of their long
 * chains of dependent steps than when each also adds to the partial sums.
 * (Log-softmax's forward pass, AVX2, 0.93x the time.) */
static inline void exp_store16(const float *xr, int k, float mx, float *e) {
  const pt_v16 vmx = v16_set1(mx);
  int c = 0;
  for (; c + 16 <= k; c += 16) v16_storeu(e + c, pt_expf16_nonpos(v16_sub(v16_loadu(xr + c), vmx)));
  if (c < k) {
    const pt_m16 m = v16_lanes(k - c);
    v16_mask_storeu(e + c, m, pt_expf16_nonpos(v16_sub(v16_maskz_loadu(m, xr + c), vmx)));
  }
}

/* A row's sum in the 16 partial lanes: of what exp_store16 stored, the
 * same lanes in the same order as exp_sum16, so the same bits; and of dy
 * in the backward pass. */
static inline double sum_of16(const float *e, int k) {
  sum16 part = {vd8_zero(), vd8_zero()};
  int c = 0;
  for (; c + 16 <= k; c += 16) sum16_add(&part, v16_loadu(e + c));
  if (c < k) sum16_add(&part, v16_maskz_loadu(v16_lanes(k - c), e + c));
  return sum16_lanes(part);
}

/* exp_sum16's sum, with the exponentials also in e where it is not NULL:
 * stored first and summed from there. */
static inline double exp_sum_row(const float *xr, int k, float mx, float *e) {
  if (!e) return exp_sum16(xr, k, mx);
  exp_store16(xr, k, mx, e);
  return sum_of16(e, k);
}

/* A row's maximum, and in *sum the sum of exp(x - max) over it; the
 * exponentials also go to e where it is not NULL. */
static float exp_row(const float *xr, int k, float *e, double *sum) {
  const float mx = max_of16(xr, k);
  *sum = exp_sum_row(xr, k, mx, e);
  return mx;
}

/* A row's chunk of 16, or its last lanes m: the whole-vector loads and
 * stores where m is all of them (a constant in the loops over whole
 * chunks), since the masked ones cost more at the levels whose masks are
 * not registers. Lanes past the end load 0. */
static inline pt_v16 ld16(pt_m16 m, const float *p) { return m == 0xFFFFu ? v16_loadu(p) : v16_maskz_loadu(m, p); }
static inline void st16(float *p, pt_m16 m, pt_v16 v) {
  if (m == 0xFFFFu) v16_storeu(p, v);
  else v16_mask_storeu(p, m, v);
}

/* y = x - lse, and the kept exponentials times 1 / sum. */
static inline void fwd_chunk(const float *xr, float *yr, float *pr, pt_m16 m, pt_v16 lse, pt_v16 inv) {
  st16(yr, m, v16_sub(ld16(m, xr), lse));
  if (pr) st16(pr, m, v16_mul(ld16(m, pr), inv));
}

/* Rows in blocks, each step for every row of the block before the next
 * step: within a row, each step waits for the one before (the maximum, the
 * exponentials' sum, its log), and across rows the CPU overlaps them. */
#define LSM_BLOCK 8
static void lsm_fwd_rows(const float *x, float *y, float *p, int rows, int k) {
  float mx[LSM_BLOCK], lse[LSM_BLOCK];
  double sum[LSM_BLOCK];
  for (int r = 0; r < rows; r++) mx[r] = max_of16(x + (size_t)r * k, k);
  for (int r = 0; r < rows; r++) sum[r] = exp_sum_row(x + (size_t)r * k, k, mx[r], p ? p + (size_t)r * k : NULL);
  for (int r = 0; r < rows; r++) lse[r] = mx[r] + (float)log(sum[r]);
  for (int r = 0; r < rows; r++) {
    const pt_v16 v = v16_set1(lse[r]), inv = v16_set1((float)(1.0 / sum[r]));
    const float *xr = x + (size_t)r * k;
    float *yr = y + (size_t)r * k, *pr = p ? p + (size_t)r * k : NULL;
    int c = 0;
    for (; c + 16 <= k; c += 16) fwd_chunk(xr + c, yr + c, pr ? pr + c : NULL, 0xFFFFu, v, inv);
    if (c < k) fwd_chunk(xr + c, yr + c, pr ? pr + c : NULL, v16_lanes(k - c), v, inv);
  }
}

static inline void bwd_chunk(const float *yr, const float *pr, const float *dr, float *xr, pt_m16 m, pt_v16 fs) {
  const pt_v16 e = pr ? ld16(m, pr) : pt_expf16(ld16(m, yr));
  st16(xr, m, v16_sub(ld16(m, dr), v16_mul(e, fs)));
}

static void lsm_bwd_row(const float *yr, const float *pr, const float *dr, float *xr, int k) {
  const pt_v16 fs = v16_set1((float)sum_of16(dr, k));
  int c = 0;
  for (; c + 16 <= k; c += 16) bwd_chunk(yr + c, pr ? pr + c : NULL, dr + c, xr + c, 0xFFFFu, fs);
  if (c < k) bwd_chunk(yr + c, pr ? pr + c : NULL, dr + c, xr + c, v16_lanes(k - c), fs);
}

static void lsm_fwd(void *ctx, size_t lo, size_t hi) {
  const lsm_job *j = ctx;
  for (size_t s = lo; s < hi; s += LSM_BLOCK)
    lsm_fwd_rows(j->x + s * j->k, j->out + s * j->k, j->p ? j->p + s * j->k : NULL,
                 hi - s < LSM_BLOCK ? (int)(hi - s) : LSM_BLOCK, j->k);
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
 * exponentials are log-softmax's (pt_expf16, in float) and their sum the
 * same double sum in 16 partial lanes, so the loss has the same bits as
 * log-softmax's order written out in scalar C; each row keeps its exponentials in its row of
 * dz until the sum is known. Taken in double by the C library's exp, they
 * were 12 us of fmnist-mlp's step (100 x 10), a call per element. */
static void ce_grad(float *dr, int k, double sum, float scale, int n, int label) {
  /* one division a row: two an element, in double, were 3 us of
   * fmnist-mlp's step at 1 thread on Zen 3 */
  const double f = (double)scale / ((double)n * sum);
  for (int j = 0; j < k; j++) dr[j] = (float)((double)dr[j] * f);
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
