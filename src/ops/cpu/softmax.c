/* Log-softmax over rows and the classification losses built on it. Sums use
 * double so the loss does not drift with the batch size; the row maximum is
 * subtracted first so exp never overflows. */
#include <math.h>

#include "ops/cpu/ops.h"

void pt_log_softmax_forward(int n, int k, const float *x, float *y) {
  for (int s = 0; s < n; s++) {
    const float *xr = x + (size_t)s * k;
    float *yr = y + (size_t)s * k;
    float mx = xr[0];
    for (int j = 1; j < k; j++) mx = xr[j] > mx ? xr[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += exp((double)(xr[j] - mx));
    float lse = mx + (float)log(sum);
    for (int j = 0; j < k; j++) yr[j] = xr[j] - lse;
  }
}

void pt_log_softmax_backward(int n, int k, const float *y, const float *dy, float *dx) {
  /* dx = dy - softmax * sum(dy) */
  for (int s = 0; s < n; s++) {
    const float *yr = y + (size_t)s * k, *dr = dy + (size_t)s * k;
    float *xr = dx + (size_t)s * k;
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += dr[j];
    for (int j = 0; j < k; j++) xr[j] = dr[j] - expf(yr[j]) * (float)sum;
  }
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
