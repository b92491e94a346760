/* Adadelta as torch.optim.Adadelta: the step is
 * sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g, scaled by lr, and
 * acc_delta is updated after the step is formed. */
#include <math.h>

#include "ops/cpu/updates.h"

void pt_adadelta_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict sq, float *restrict acc,
                        float lr) {
  const float rho = c->rho, eps = c->eps, wd = c->weight_decay;
  for (size_t i = 0; i < n; i++) {
    float d = g[i];
    if (wd != 0.0f) d = d + wd * p[i];
    sq[i] = sq[i] * rho + (1.0f - rho) * d * d;
    float std = sqrtf(sq[i] + eps);
    float delta = sqrtf(acc[i] + eps) / std * d;
    acc[i] = acc[i] * rho + (1.0f - rho) * delta * delta;
    p[i] = p[i] - lr * delta;
  }
}
