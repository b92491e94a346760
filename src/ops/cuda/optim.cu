/* The optimizers' element-wise updates, as ops/cpu/sgd.c, adam.c and
 * adadelta.c: the same operations in the same order, each rounded as the
 * CPU rounds it (no FMA contraction), so a step on the GPU gives the CPU's
 * bits. Per-step scalars (Adam's bias corrections) are computed on the
 * host in double with the CPU's expressions and passed in; the config is
 * host memory, so its fields travel by value. In a captured step
 * (graph.h) the per-step scalars are read from the step's values in
 * device memory instead (dyn), which each replay uploads.
 */
#include <math.h>
#include <stdint.h>

#include "ops/cuda/graph.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/ops.h"

using namespace pt_cuda;

namespace {

__global__ void sgd_kernel(size_t n, float wd, float mom, float damp, int nesterov, int first, float lr,
                           const pt_cuda_step_values *dyn, float *__restrict__ p, const float *__restrict__ g,
                           float *__restrict__ buf) {
  if (dyn) lr = dyn->lr;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float d = g[i];
    if (wd != 0.0f) d = fadd_rn(d, fmul_rn(wd, p[i]));
    if (mom != 0.0f) {
      const float b = first ? d : fadd_rn(fmul_rn(mom, buf[i]), fmul_rn(damp, d));
      buf[i] = b;
      d = nesterov ? fadd_rn(d, fmul_rn(mom, b)) : b;
    }
    p[i] = fsub_rn(p[i], fmul_rn(lr, d));
  }
}

__global__ void adam_kernel(size_t n, float b1, float b2, float eps, float wd, int decoupled, float step_size,
                            float bc2_sqrt, float decay, const pt_cuda_step_values *dyn, float *__restrict__ p,
                            const float *__restrict__ g, float *__restrict__ m, float *__restrict__ v) {
  if (dyn) {
    step_size = dyn->adam_step_size;
    bc2_sqrt = dyn->adam_bc2_sqrt;
    decay = dyn->adam_decay;
  }
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float d = g[i];
    float pi = p[i];
    if (decoupled) pi = fmul_rn(pi, decay);
    else if (wd != 0.0f) d = fadd_rn(d, fmul_rn(wd, pi));
    const float mi = fadd_rn(fmul_rn(m[i], b1), fmul_rn(fsub_rn(1.0f, b1), d));
    const float vi = fadd_rn(fmul_rn(v[i], b2), fmul_rn(fmul_rn(fsub_rn(1.0f, b2), d), d));
    m[i] = mi;
    v[i] = vi;
    const float denom = fadd_rn(fdiv_rn(fsqrt_rn(vi), bc2_sqrt), eps);
    p[i] = fsub_rn(pi, fmul_rn(step_size, fdiv_rn(mi, denom)));
  }
}

__global__ void adadelta_kernel(size_t n, float rho, float eps, float wd, float lr, const pt_cuda_step_values *dyn,
                                float *__restrict__ p, const float *__restrict__ g, float *__restrict__ sq,
                                float *__restrict__ acc) {
  if (dyn) lr = dyn->lr;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float d = g[i];
    const float pi = p[i];
    if (wd != 0.0f) d = fadd_rn(d, fmul_rn(wd, pi));
    const float s = fadd_rn(fmul_rn(sq[i], rho), fmul_rn(fmul_rn(fsub_rn(1.0f, rho), d), d));
    sq[i] = s;
    const float rms = fsqrt_rn(fadd_rn(s, eps));
    const float delta = fmul_rn(fdiv_rn(fsqrt_rn(fadd_rn(acc[i], eps)), rms), d);
    acc[i] = fadd_rn(fmul_rn(acc[i], rho), fmul_rn(fmul_rn(fsub_rn(1.0f, rho), delta), delta));
    p[i] = fsub_rn(pi, fmul_rn(lr, delta));
  }
}

} // namespace

extern "C" void pt_cuda_sgd_update(const pt_opt_config *c, size_t n, float *p, const float *g, float *buf, int first,
                                   float lr) {
  if (n == 0) return;
  /* The first step starts the momentum buffer: a replay would start it again. */
  if (first && c->momentum != 0.0f) pt_cuda_capture_refuse("the first SGD step (it starts the momentum buffer)");
  const float damp = 1.0f - c->dampening;
  sgd_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, c->weight_decay, c->momentum, damp, c->nesterov, first, lr,
                                                     pt_cuda_capture_values(), p, g, buf);
  PT_CUDA_CHECK_LAUNCH("sgd_update");
}

extern "C" void pt_cuda_adam_update(const pt_opt_config *c, size_t n, float *p, const float *g, float *m, float *v,
                                    int64_t step, float lr) {
  if (n == 0) return;
  const float b1 = c->beta1, b2 = c->beta2, wd = c->weight_decay;
  float step_size, bc2_sqrt, decay;
  pt_cuda_adam_scalars(b1, b2, wd, step, lr, &step_size, &bc2_sqrt, &decay);
  pt_cuda_capture_adam(b1, b2, wd);
  adam_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, b1, b2, c->eps, wd, c->kind == PT_OPT_ADAMW, step_size,
                                                      bc2_sqrt, decay, pt_cuda_capture_values(), p, g, m, v);
  PT_CUDA_CHECK_LAUNCH("adam_update");
}

extern "C" void pt_cuda_adadelta_update(const pt_opt_config *c, size_t n, float *p, const float *g, float *sq,
                                        float *acc, float lr) {
  if (n == 0) return;
  adadelta_kernel<<<grid_for(n), kThreads, 0, stream()>>>(n, c->rho, c->eps, c->weight_decay, lr,
                                                          pt_cuda_capture_values(), p, g, sq, acc);
  PT_CUDA_CHECK_LAUNCH("adadelta_update");
}
