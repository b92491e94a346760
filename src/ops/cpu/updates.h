/* The optimizers' update rules, one per file, on raw arrays: element-wise
 * kernels like the other ops, which the CUDA backend mirrors. */
#ifndef PT_OPS_CPU_UPDATES_H
#define PT_OPS_CPU_UPDATES_H

#include <stddef.h>
#include <stdint.h>

#include "optim/optimizer.h" /* pt_opt_config: the type only */

#ifdef __cplusplus /* the CUDA sources include this through ops/backend.h */
#define restrict __restrict__
extern "C" {
#endif

/* buf (n) may be NULL without momentum; first: buf is not yet initialised. */
void pt_sgd_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict buf, int first, float lr);
void pt_adam_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                    int64_t step, float lr);
void pt_adadelta_update(const pt_opt_config *c, size_t n, float *restrict p, const float *restrict g, float *restrict sq, float *restrict acc,
                        float lr);

#ifdef __cplusplus
}
#undef restrict
#endif

#endif
