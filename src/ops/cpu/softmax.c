/* Log-softmax over rows and the classification losses built on it. Sums use
 * double so the loss does not drift with the batch size; the row maximum is
 * subtracted first so exp never overflows. */
#include <math.h>

#include "ops/cpu/expf.h"
#include "ops/cpu/ops.h"

/* Rows are independent, so blocks of rows go to the pool. exp is taken in
 * float (pt_expf, which vectorises) and summed in double: the sum is where
 * precision is lost, not the terms. The double sums run in 8 partial sums
 * combined in a fixed order, which vectorises where one running sum could
 * not, and gives the same bits every run. */
typedef struct {
  int k;
  const float *x, *y, *dy;
  float *out;
} lsm_job;

#define LSM_LANES 8
#define LSM_CHUNK 256 /* floats of exponentials kept on the stack at a time */

static double sum_fixed_order(const float *v, int n) {
  double part[LSM_LANES] = {0};
  int c = 0;
  for (; c + LSM_LANES <= n; c += LSM_LANES)
    for (int l = 0; l < LSM_LANES; l++) part[l] += v[c + l];
  for (int l = 0; c < n; c++, l++) part[l] += v[c];
  double sum = 0.0;
  for (int l = 0; l < LSM_LANES; l++) sum += part[l];
  return sum;
}

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

static void lsm_fwd(void *ctx, size_t lo, size_t hi) {
  const lsm_job *j = ctx;
  const int k = j->k;
  float e[LSM_CHUNK];
  for (size_t s = lo; s < hi; s++) {
    const float *xr = j->x + s * k;
    float *yr = j->out + s * k;
    const float mx = max_of(xr, k);
    double sum = 0.0;
    for (int c0 = 0; c0 < k; c0 += LSM_CHUNK) {
      const int len = k - c0 < LSM_CHUNK ? k - c0 : LSM_CHUNK;
      for (int c = 0; c < len; c++) e[c] = pt_expf(xr[c0 + c] - mx);
      sum += sum_fixed_order(e, len);
    }
    float lse = mx + (float)log(sum);
    for (int c = 0; c < k; c++) yr[c] = xr[c] - lse;
  }
}

static void lsm_bwd(void *ctx, size_t lo, size_t hi) {
  const lsm_job *j = ctx;
  const int k = j->k;
  for (size_t s = lo; s < hi; s++) {
    const float *yr = j->y + s * k, *dr = j->dy + s * k;
    float *xr = j->out + s * k;
    const float fs = (float)sum_fixed_order(dr, k);
    for (int c = 0; c < k; c++) xr[c] = dr[c] - pt_expf(yr[c]) * fs;
  }
}

void pt_log_softmax_forward(int n, int k, const float *x, float *y) {
  lsm_job j = {k, x, NULL, NULL, y};
  pt_parallel_for((size_t)n, (size_t)(4096 / (k > 0 ? k : 1)) + 1, lsm_fwd, &j);
}

void pt_log_softmax_backward(int n, int k, const float *y, const float *dy, float *dx) {
  lsm_job j = {k, NULL, y, dy, dx};
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

/* The gradient is softmax(z) = exp(z - mx) / sum: the exponentials of the
 * sum, kept for rows of up to CE_KEEP classes, where taking them again was
 * half the loss's time. */
#define CE_KEEP 64
double pt_cross_entropy_loss(int n, int k, const float *z, const int32_t *y, float *dz, float scale) {
  double loss = 0.0;
  double e[CE_KEEP];
  for (int s = 0; s < n; s++) {
    const float *zr = z + (size_t)s * k;
    const float mx = max_of(zr, k);
    double sum = 0.0;
    for (int j = 0; j < k; j++) {
      const double t = exp((double)(zr[j] - mx));
      if (j < CE_KEEP) e[j] = t;
      sum += t;
    }
    double lse = mx + log(sum);
    loss += lse - zr[y[s]];
    if (dz) {
      float *dr = dz + (size_t)s * k;
      for (int j = 0; j < k; j++)
        dr[j] = (float)((j < CE_KEEP ? e[j] / sum : exp(zr[j] - lse)) * scale / n);
      dr[y[s]] -= scale / (float)n;
    }
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
