/* Batch normalisation over (n, h, w) per channel, as torch.nn.BatchNorm2d:
 * training normalises with the biased batch variance and updates the running
 * variance with the unbiased one; eval uses the running statistics. Channel
 * sums are accumulated in double: a channel of a CIFAR batch has 65,536
 * values, where float sums lose the digits the parity tests check. */
#include <math.h>

#include "ops/cpu/ops.h"

/* Training statistics come in two sums per channel, so that synchronised
 * batch norm can add them up over all workers between the steps: first
 * sum(x), then, around the (global) mean, sum((x - mean)^2). One worker
 * alone runs the same code, so both paths round the same way. */
void pt_batchnorm_sums(const pt_bn_geom *g, int n, int hw, const float *x, const double *center, double *out) {
  for (int c = 0; c < g->c; c++) {
    double acc = 0.0;
    if (!center) {
      for (int s = 0; s < n; s++) {
        const float *xp = x + ((size_t)s * g->c + c) * hw;
        for (int i = 0; i < hw; i++) acc += xp[i];
      }
    } else {
      const double mean = center[c];
      for (int s = 0; s < n; s++) {
        const float *xp = x + ((size_t)s * g->c + c) * hw;
        for (int i = 0; i < hw; i++) {
          double d = xp[i] - mean;
          acc += d * d;
        }
      }
    }
    out[c] = acc;
  }
}

void pt_batchnorm_normalize(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                            const float *beta, const double *mean, const double *sq, double count,
                            float *running_mean, float *running_var, float *save_mean, float *save_invstd,
                            float *y) {
  for (int c = 0; c < g->c; c++) {
    double var = sq[c] / count;
    float invstd = (float)(1.0 / sqrt(var + g->eps));
    save_mean[c] = (float)mean[c];
    save_invstd[c] = invstd;
    double unbiased = count > 1 ? sq[c] / (count - 1) : var;
    running_mean[c] = (float)((1.0 - g->momentum) * running_mean[c] + g->momentum * mean[c]);
    running_var[c] = (float)((1.0 - g->momentum) * running_var[c] + g->momentum * unbiased);
    const float a = gamma[c] * invstd, b = beta[c] - (float)mean[c] * a;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      float *yp = y + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) yp[i] = xp[i] * a + b;
    }
  }
}

void pt_batchnorm_forward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                const float *gamma, const float *beta, float *running_mean,
                                float *running_var, float *save_mean, float *save_invstd, float *y,
                                double *scratch) {
  const double cnt = (double)n * hw;
  double *mean = scratch, *sq = scratch + g->c;
  pt_batchnorm_sums(g, n, hw, x, NULL, mean);
  for (int c = 0; c < g->c; c++) mean[c] /= cnt;
  pt_batchnorm_sums(g, n, hw, x, mean, sq);
  pt_batchnorm_normalize(g, n, hw, x, gamma, beta, mean, sq, cnt, running_mean, running_var, save_mean,
                         save_invstd, y);
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

/* sums (2, c): sum dy and sum dy * xhat per channel over this worker's
 * batch; they are also the gradients of beta and gamma, added here from the
 * local sums: under synchronised batch norm the parameters' gradients are
 * averaged with the others, not summed over the workers twice. */
void pt_batchnorm_backward_sums(const pt_bn_geom *g, int n, int hw, const float *x, const float *save_mean,
                                const float *save_invstd, const float *dy, float *dgamma, float *dbeta,
                                double *sums) {
  for (int c = 0; c < g->c; c++) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    double sdy = 0.0, sdyx = 0.0;
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      const float *dp = dy + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) {
        sdy += dp[i];
        sdyx += (double)dp[i] * (xp[i] - mean) * invstd;
      }
    }
    sums[c] = sdy;
    sums[g->c + c] = sdyx;
    dgamma[c] += (float)sdyx;
    dbeta[c] += (float)sdy;
  }
}

/* dx = gamma*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)), the means
 * over count samples (all workers' under synchronised batch norm). */
void pt_batchnorm_backward_dx(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                              const float *save_mean, const float *save_invstd, const float *dy,
                              const double *sums, double count, float *dx) {
  for (int c = 0; c < g->c; c++) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    const float k = gamma[c] * invstd, mdy = (float)(sums[c] / count), mdyx = (float)(sums[g->c + c] / count);
    for (int s = 0; s < n; s++) {
      const float *xp = x + ((size_t)s * g->c + c) * hw;
      const float *dp = dy + ((size_t)s * g->c + c) * hw;
      float *op = dx + ((size_t)s * g->c + c) * hw;
      for (int i = 0; i < hw; i++) op[i] = k * (dp[i] - mdy - (xp[i] - mean) * invstd * mdyx);
    }
  }
}

void pt_batchnorm_backward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                 const float *gamma, const float *save_mean,
                                 const float *save_invstd, const float *dy, float *dgamma,
                                 float *dbeta, float *dx, double *scratch) {
  pt_batchnorm_backward_sums(g, n, hw, x, save_mean, save_invstd, dy, dgamma, dbeta, scratch);
  if (dx) pt_batchnorm_backward_dx(g, n, hw, x, gamma, save_mean, save_invstd, dy, scratch, (double)n * hw, dx);
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
