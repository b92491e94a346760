/* The CPU backend: host memory and the reference kernels of this folder.
 *
 * Most entries are the kernels themselves. The wrappers below adapt the
 * few whose CPU form returns a value (losses, counts) to the backend's
 * write-to-memory form, and run the optimizers' element-wise updates in
 * blocks on the thread pool: each element's arithmetic is the same whatever
 * the split, so results do not depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "util/error.h"

static void *cpu_alloc(size_t bytes) { return pt_alloc_aligned(bytes ? bytes : 1); }
static void cpu_free(void *p) { free(p); }
static void cpu_zero(void *p, size_t bytes) {
  if (bytes) memset(p, 0, bytes);
}
static void cpu_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
}
static pt_status cpu_download(void *dst, const void *src, size_t bytes) {
  cpu_copy(dst, src, bytes);
  return PT_OK;
}
static pt_status cpu_sync(void) { return PT_OK; }
static pt_status cpu_bind(int device) {
  (void)device;
  return PT_OK;
}
static pt_status cpu_unbind(void) { return PT_OK; }

static void cpu_nll(int n, int k, const float *lp, const int32_t *y, float *dlp, float scale, double *loss) {
  *loss = pt_nll_loss(n, k, lp, y, dlp, scale);
}
static void cpu_ce(int n, int k, const float *z, const int32_t *y, float *dz, float scale, double *loss) {
  *loss = pt_cross_entropy_loss(n, k, z, y, dz, scale);
}
static void cpu_count(int n, int k, const float *scores, const int32_t *y, int64_t *count) {
  *count += pt_count_correct(n, k, scores, y);
}
static void cpu_accumulate_loss(const double *loss, int n, double *acc) {
  acc[0] += *loss * n;
  acc[1] += n;
}

/* ---- optimizer updates in blocks on the pool ---- */
typedef struct {
  const pt_opt_config *c;
  float *p, *s0, *s1;
  const float *g;
  int first;
  int64_t step;
  float lr;
} update_job;

#define UPDATE_CHUNK ((size_t)1 << 15)

static void sgd_block(void *ctx, size_t lo, size_t hi) {
  const update_job *j = ctx;
  pt_sgd_update(j->c, hi - lo, j->p + lo, j->g + lo, j->s0 ? j->s0 + lo : NULL, j->first, j->lr);
}
static void adam_block(void *ctx, size_t lo, size_t hi) {
  const update_job *j = ctx;
  pt_adam_update(j->c, hi - lo, j->p + lo, j->g + lo, j->s0 + lo, j->s1 + lo, j->step, j->lr);
}
static void adadelta_block(void *ctx, size_t lo, size_t hi) {
  const update_job *j = ctx;
  pt_adadelta_update(j->c, hi - lo, j->p + lo, j->g + lo, j->s0 + lo, j->s1 + lo, j->lr);
}
static void cpu_sgd(const pt_opt_config *c, size_t n, float *p, const float *g, float *buf, int first, float lr) {
  update_job j = {.c = c, .p = p, .g = g, .s0 = buf, .first = first, .lr = lr};
  pt_parallel_for(n, UPDATE_CHUNK, sgd_block, &j);
}
static void cpu_adam(const pt_opt_config *c, size_t n, float *p, const float *g, float *m, float *v, int64_t step,
                     float lr) {
  update_job j = {.c = c, .p = p, .g = g, .s0 = m, .s1 = v, .step = step, .lr = lr};
  pt_parallel_for(n, UPDATE_CHUNK, adam_block, &j);
}
static void cpu_adadelta(const pt_opt_config *c, size_t n, float *p, const float *g, float *sq, float *acc, float lr) {
  update_job j = {.c = c, .p = p, .g = g, .s0 = sq, .s1 = acc, .lr = lr};
  pt_parallel_for(n, UPDATE_CHUNK, adadelta_block, &j);
}
static void cpu_scale(size_t n, float a, float *x) {
  for (size_t i = 0; i < n; i++) x[i] *= a;
}

/* Stages on the CPU: an op has finished when it returns, so an event has
 * nothing to mark; any non-NULL pointer will do. */
static char cpu_event_token;
static void *cpu_event_create(void) { return &cpu_event_token; }
static void cpu_event_nop(void *ev) { (void)ev; }
static void cpu_copy_from(void *dst, const void *src, int src_device, size_t bytes) {
  (void)src_device;
  cpu_copy(dst, src, bytes);
}

static const pt_backend cpu_backend = {
    .kind = PT_BACKEND_CPU,
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_download,
    .sync = cpu_sync,
    .bind = cpu_bind,
    .unbind = cpu_unbind,
    .conv_workspace = pt_conv_workspace,
    .conv2d_forward = pt_conv2d_forward,
    .conv2d_backward = pt_conv2d_backward,
    .conv_pool_ok = pt_conv_pool_ok,
    .conv2d_pool_forward = pt_conv2d_pool_forward,
    .conv2d_pool_backward = pt_conv2d_pool_backward,
    .linear_workspace = pt_linear_workspace,
    .linear_forward = pt_linear_forward,
    .linear_backward = pt_linear_backward,
    .linear_panels_ok = pt_linear_panels_ok,
    .linear_keep_floats = pt_linear_keep_floats,
    .linear_forward_p = pt_linear_forward_p,
    .linear_backward_p = pt_linear_backward_p,
    .maxpool_forward = pt_maxpool_forward,
    .maxpool_backward = pt_maxpool_backward,
    .relu_forward = pt_relu_forward,
    .relu_backward = pt_relu_backward,
    .dropout_forward = pt_dropout_forward,
    .dropout_backward = pt_dropout_backward,
    .log_softmax_forward = pt_log_softmax_forward,
    .log_softmax_backward = pt_log_softmax_backward,
    .nll_loss = cpu_nll,
    .cross_entropy_loss = cpu_ce,
    .count_correct = cpu_count,
    .accumulate_loss = cpu_accumulate_loss,
    .batchnorm_forward_train = pt_batchnorm_forward_train,
    .batchnorm_forward_eval = pt_batchnorm_forward_eval,
    .batchnorm_backward_train = pt_batchnorm_backward_train,
    .batchnorm_backward_eval = pt_batchnorm_backward_eval,
    .batchnorm_sums = pt_batchnorm_sums,
    .batchnorm_normalize = pt_batchnorm_normalize,
    .batchnorm_backward_sums = pt_batchnorm_backward_sums,
    .batchnorm_backward_dx = pt_batchnorm_backward_dx,
    .sgd_update = cpu_sgd,
    .adam_update = cpu_adam,
    .adadelta_update = cpu_adadelta,
    .scale = cpu_scale,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_nop,
    .event_record = cpu_event_nop,
    .event_wait = cpu_event_nop,
    .copy_from = cpu_copy_from,
};

const pt_backend *pt_backend_cpu(void) { return &cpu_backend; }

pt_status pt_backend_bind(const pt_backend *be, int device) { return be->bind(device); }
pt_status pt_backend_unbind(const pt_backend *be) { return be->unbind(); }

pt_status pt_device_parse(const char *dev, const char *flag, pt_backend_kind *kind, int *index) {
  const char *num;
  if (!strncmp(dev, "cuda", 4)) {
    *kind = PT_BACKEND_CUDA;
    num = dev + 4;
  } else if (!strncmp(dev, "cpu", 3)) {
    *kind = PT_BACKEND_CPU;
    num = dev + 3;
  } else {
    return pt_fail(PT_ERR_ARG, "%s: '%s' is not a device; expected cpu, cpu:N, cuda or cuda:N", flag, dev);
  }
  *index = 0;
  if (!*num) return PT_OK;
  /* Decimal digits only: strtol would also take a space, a sign or "-0",
   * so "cpu: 1" and "cpu:+1" named devices that "cpu:1 " did not. */
  const char *digits = *num == ':' ? num + 1 : "";
  const size_t nd = strspn(digits, "0123456789");
  long k = nd && !digits[nd] && nd <= 9 ? strtol(digits, NULL, 10) : -1;
  if (k < 0 || k >= PT_MAX_DEVICES)
    return pt_fail(PT_ERR_ARG, "%s: '%s': expected %s:N with N from 0 to %d", flag, dev,
                   *kind == PT_BACKEND_CUDA ? "cuda" : "cpu", PT_MAX_DEVICES - 1);
  *index = (int)k;
  return PT_OK;
}

pt_status pt_device_parse_one(const char *dev, const char *flag, pt_backend_kind *kind, int *index) {
  PT_TRY(pt_device_parse(dev, flag, kind, index));
  if (*kind == PT_BACKEND_CPU && *index != 0)
    return pt_fail(PT_ERR_ARG, "%s: '%s': the CPU is one device, cpu (or cpu:0), whose cores --threads sets; "
                               "cpu:N names a stage or a dp worker in --devices", flag, dev);
  return PT_OK;
}
