/* Adam and AdamW as torch.optim: Adam adds weight decay to the gradient,
 * AdamW decays the parameter itself (p *= 1 - lr * wd) before the update.
 * Bias corrections are computed in double and applied as PyTorch does:
 * denom = sqrt(v) / sqrt(1 - beta2^t) + eps; p -= lr / (1 - beta1^t) * m / denom. */
#include <math.h>

#include "ops/cpu/updates.h"

void pt_adam_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                    int64_t step, float lr) {
  const float b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = c->weight_decay;
  const int decoupled = c->kind == PT_OPT_ADAMW;
  const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
  const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  const float decay = 1.0f - lr * wd;
  for (size_t i = 0; i < n; i++) {
    float d = g[i];
    if (decoupled) p[i] *= decay;
    else if (wd != 0.0f) d = d + wd * p[i];
    m[i] = m[i] * b1 + (1.0f - b1) * d;
    v[i] = v[i] * b2 + (1.0f - b2) * d * d;
    float denom = sqrtf(v[i]) / bc2_sqrt + eps;
    p[i] = p[i] - step_size * (m[i] / denom);
  }
}
