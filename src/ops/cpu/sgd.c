/* SGD as torch.optim.SGD: weight decay is added to the gradient; the momentum
 * buffer starts as a copy of the first gradient (no dampening on that step);
 * Nesterov uses g + momentum * buf. */
#include "ops/cpu/updates.h"

void pt_sgd_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict buf, int first, float lr) {
  const float wd = c->weight_decay, mom = c->momentum, damp = 1.0f - c->dampening;
  for (size_t i = 0; i < n; i++) {
    float d = g[i];
    if (wd != 0.0f) d = d + wd * p[i];
    if (mom != 0.0f) {
      float b = first ? d : mom * buf[i] + damp * d;
      buf[i] = b;
      d = c->nesterov ? d + mom * b : b;
    }
    p[i] = p[i] - lr * d;
  }
}
