/* Log-softmax over rows and the classification losses built on it. Sums use
 * double so the loss does not drift with the batch size; the row maximum is
 * subtracted first so exp never overflows. */
#include <math.h>

#include "ops/cpu/ops.h"

/* Rows are independent, so blocks of rows go to the pool. exp is taken in
 * float (expf, several times cheaper than exp) and summed in double: the
 * sum is where precision is lost, not the terms. */
typedef struct {
  int k;
  const float *x, *y, *dy;
  float *out;
} lsm_job;

static void lsm_fwd(void *ctx, size_t lo, size_t hi) {
  const lsm_job *j = ctx;
  const int k = j->k;
  for (size_t s = lo; s < hi; s++) {
    const float *xr = j->x + s * k;
    float *yr = j->out + s * k;
    float mx = xr[0];
    for (int c = 1; c < k; c++) mx = xr[c] > mx ? xr[c] : mx;
    double sum = 0.0;
    for (int c = 0; c < k; c++) sum += expf(xr[c] - mx);
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
    double sum = 0.0;
    for (int c = 0; c < k; c++) sum += dr[c];
    const float fs = (float)sum;
    for (int c = 0; c < k; c++) xr[c] = dr[c] - expf(yr[c]) * fs;
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

double pt_cross_entropy_loss(int n, int k, const float *z, const int32_t *y, float *dz, float scale) {
  double loss = 0.0;
  for (int s = 0; s < n; s++) {
    const float *zr = z + (size_t)s * k;
    float mx = zr[0];
    for (int j = 1; j < k; j++) mx = zr[j] > mx ? zr[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += exp((double)(zr[j] - mx));
    double lse = mx + log(sum);
    loss += lse - zr[y[s]];
    if (dz) {
      float *dr = dz + (size_t)s * k;
      for (int j = 0; j < k; j++) dr[j] = (float)(exp(zr[j] - lse) * scale / n);
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
