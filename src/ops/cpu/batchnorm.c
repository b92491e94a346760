/* Batch normalisation over (n, h, w) per channel, as torch.nn.BatchNorm2d:
 * training normalises with the biased batch variance and updates the running
 * variance with the unbiased one; eval uses the running statistics. Channel
 * sums are accumulated in double: a channel of a CIFAR batch has 65,536
 * values, where float sums lose the digits the parity tests check. */
#include <math.h>

#include "ops/cpu/ops.h"

void pt_batchnorm_forward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                const float *gamma, const float *beta, float *running_mean,
                                float *running_var, float *save_mean, float *save_invstd, float *y) {
  const size_t cnt = (size_t)n * hw;
  for (int c = 0; c < g->c; c++) {
    double sum = 0.0;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) sum += xp[i];
    }
    double mean = sum / (double)cnt, sq = 0.0;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) {
        double d = xp[i] - mean;
        sq += d * d;
      }
    }
    double var = sq / (double)cnt;
    float invstd = (float)(1.0 / sqrt(var + g->eps));
    save_mean[c] = (float)mean;
    save_invstd[c] = invstd;
    double unbiased = cnt > 1 ? sq / (double)(cnt - 1) : var;
    running_mean[c] = (float)((1.0 - g->momentum) * running_mean[c] + g->momentum * mean);
    running_var[c] = (float)((1.0 - g->momentum) * running_var[c] + g->momentum * unbiased);
    const float a = gamma[c] * invstd, b = beta[c] - (float)mean * a;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      float *yp = y + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) yp[i] = xp[i] * a + b;
    }
  }
}

void pt_batchnorm_forward_eval(const pt_bn_geom *g, int n, int hw, const float *x,
                               const float *gamma, const float *beta, const float *running_mean,
                               const float *running_var, float *y) {
  for (int c = 0; c < g->c; c++) {
    const float invstd = 1.0f / sqrtf(running_var[c] + g->eps);
    const float a = gamma[c] * invstd, b = beta[c] - running_mean[c] * a;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      float *yp = y + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) yp[i] = xp[i] * a + b;
    }
  }
}

void pt_batchnorm_backward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                 const float *gamma, const float *save_mean,
                                 const float *save_invstd, const float *dy, float *dgamma,
                                 float *dbeta, float *dx) {
  const double cnt = (double)n * hw;
  for (int c = 0; c < g->c; c++) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    double sdy = 0.0, sdyx = 0.0; /* sum dy, sum dy * xhat */
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      const float *dp = dy + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) {
        sdy += dp[i];
        sdyx += (double)dp[i] * (xp[i] - mean) * invstd;
      }
    }
    dgamma[c] += (float)sdyx;
    dbeta[c] += (float)sdy;
    if (!dx) continue;
    /* dx = gamma*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)) */
    const float k = gamma[c] * invstd, mdy = (float)(sdy / cnt), mdyx = (float)(sdyx / cnt);
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      const float *dp = dy + ((size_t)s * g->c + c) * hw;
      float *op = dx + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) op[i] = k * (dp[i] - mdy - (xp[i] - mean) * invstd * mdyx);
    }
  }
}

void pt_batchnorm_backward_eval(const pt_bn_geom *g, int n, int hw, const float *x,
                                const float *gamma, const float *running_mean,
                                const float *running_var, const float *dy, float *dgamma,
                                float *dbeta, float *dx) {
  for (int c = 0; c < g->c; c++) {
    const float invstd = 1.0f / sqrtf(running_var[c] + g->eps);
    double sdy = 0.0, sdyx = 0.0;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      const float *dp = dy + ((size_t)s * g->c + c) * hw;
      float *op = dx ? dx + ((size_t)s * g->c + c) * hw : NULL;
      for (int i = 0; i < hw; i++) {
        sdy += dp[i];
        sdyx += (double)dp[i] * (xp[i] - running_mean[c]) * invstd;
        if (op) op[i] = dp[i] * gamma[c] * invstd;
      }
    }
    dgamma[c] += (float)sdyx;
    dbeta[c] += (float)sdy;
  }
}
