/* CUDA kernels: the CPU ops (ops/cpu/ops.h, ops/cpu/updates.h) on device
 * pointers, signature for signature, queued on the calling thread's stream
 * (context.h). The backend table (backend.cu) collects them.
 *
 * Results are deterministic for a given device: reductions run in a fixed
 * order (no floating-point atomics), and library algorithms are chosen
 * among the deterministic ones.
 */
#ifndef PT_OPS_CUDA_OPS_H
#define PT_OPS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/ops.h"
#include "ops/cpu/updates.h"

#ifdef __cplusplus
extern "C" {
#endif

/* conv.cu: im2col + cuBLAS, or cuDNN when built in and faster */
size_t pt_cuda_conv_workspace(const pt_conv_geom *g, int nthreads);
/* Which implementation ran this thread's conv2d calls since the last
 * reset, counted per direction (forward, filter gradient, data gradient):
 * how many cuDNN ran and how many the gemm path did, and why the latest
 * gemm one was not cuDNN's (PT_CUDA_CONV=gemm, no cuDNN, no qualifying
 * algorithm, or the cuDNN error that turned the direction off). */
typedef struct {
  unsigned long long cudnn, gemm;
  char why[384];
} pt_cuda_conv_paths;
pt_cuda_conv_paths pt_cuda_conv_paths_get(void);
void pt_cuda_conv_paths_reset(void);
/* cuDNN plans cached per thread (one per convolution and batch size); 0
 * without cuDNN. */
int pt_cuda_conv_plan_slots(void);
/* Samples per chunk of the gemm path for g. */
int pt_cuda_conv_chunk(const pt_conv_geom *g);
void pt_cuda_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                            float *ws);
void pt_cuda_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                             const float *dy, float *dw, float *db, float *dx, float *ws);
/* backend.cu: host -> device in stream order, through the thread's staging ring */
void pt_cuda_upload(void *dst, const void *host_src, size_t bytes);
/* linear.cu */
size_t pt_cuda_linear_workspace(int max_batch, int in, int out, int nthreads);
void pt_cuda_linear_forward(int n, int in, int out, const float *x, const float *w, const float *b, float *y,
                            float *ws);
void pt_cuda_linear_backward(int n, int in, int out, const float *x, const float *w, const float *dy, float *dw,
                             float *db, float *dx, int add, float *ws);
/* pool.cu */
void pt_cuda_maxpool_forward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x, float *y,
                             int32_t *argmax);
void pt_cuda_maxpool_backward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *dy,
                              const int32_t *argmax, float *dx);
/* activation.cu */
void pt_cuda_relu_forward(size_t n, const float *x, float *y);
void pt_cuda_relu_backward(size_t n, const float *y, const float *dy, float *dx);
void pt_cuda_dropout_forward(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer, const float *x,
                             float *y, float *mask);
void pt_cuda_dropout_backward(size_t n, const float *mask, const float *dy, float *dx);
void pt_cuda_scale(size_t n, float a, float *x);
/* softmax.cu: log-softmax, losses, counts */
void pt_cuda_log_softmax_forward(int n, int k, const float *x, float *y, float *p);
void pt_cuda_log_softmax_backward(int n, int k, const float *y, const float *p, const float *dy, float *dx);
void pt_cuda_nll_loss(int n, int k, const float *lp, const int32_t *y, float *dlp, float scale, double *loss);
void pt_cuda_cross_entropy_loss(int n, int k, const float *z, const int32_t *y, float *dz, float scale,
                                double *loss);
void pt_cuda_count_correct(int n, int k, const float *scores, const int32_t *y, int64_t *count);
void pt_cuda_accumulate_loss(const double *loss, int n, double *acc);
/* batchnorm.cu */
void pt_cuda_batchnorm_forward_train(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                     const float *beta, float *running_mean, float *running_var, float *save_mean,
                                     float *save_invstd, float *y, double *scratch);
void pt_cuda_batchnorm_forward_eval(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                    const float *beta, const float *running_mean, const float *running_var,
                                    float *y);
void pt_cuda_batchnorm_backward_train(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                      const float *save_mean, const float *save_invstd, const float *dy,
                                      float *dgamma, float *dbeta, float *dx, double *scratch);
void pt_cuda_batchnorm_backward_eval(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                     const float *running_mean, const float *running_var, const float *dy,
                                     float *dgamma, float *dbeta, float *dx);
/* The four steps of synchronised batch norm, as pt_batchnorm_sums,
 * pt_batchnorm_normalize, pt_batchnorm_backward_sums and
 * pt_batchnorm_backward_dx; center, mean, sq, out and sums are device memory. */
void pt_cuda_batchnorm_sums(const pt_bn_geom *g, int n, int hw, const float *x, const double *center, double *out);
void pt_cuda_batchnorm_normalize(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                 const float *beta, const double *mean, const double *sq, double count,
                                 float *running_mean, float *running_var, float *save_mean, float *save_invstd,
                                 float *y);
void pt_cuda_batchnorm_backward_sums(const pt_bn_geom *g, int n, int hw, const float *x, const float *save_mean,
                                     const float *save_invstd, const float *dy, float *dgamma, float *dbeta,
                                     double *sums);
void pt_cuda_batchnorm_backward_dx(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                   const float *save_mean, const float *save_invstd, const float *dy,
                                   const double *sums, double count, float *dx);
/* optim.cu */
void pt_cuda_sgd_update(const pt_opt_config *c, size_t n, float *p, const float *g, float *buf, int first, float lr);
void pt_cuda_adam_update(const pt_opt_config *c, size_t n, float *p, const float *g, float *m, float *v,
                         int64_t step, float lr);
void pt_cuda_adadelta_update(const pt_opt_config *c, size_t n, float *p, const float *g, float *sq, float *acc,
                             float lr);

/* batch.cu: a training or test batch made on the device from a dataset
 * kept there as bytes. images (N, c, h, w) uint8 and labels (N) uint8 are
 * the whole dataset in device memory; index (n) the batch's dataset indices
 * (device memory). Writes x (n, c, h, w) = (pixel/255 - mean[ch]) / std[ch]
 * after the loader's augmentation (crop_pad > 0: a random crop after
 * zero padding; hflip: a horizontal flip with p = 0.5), drawn exactly as
 * src/data/loader.c draws it from (augment_key, epoch, dataset index), and
 * y (n) = labels[index]. */
void pt_cuda_make_batch(const uint8_t *images, const uint8_t *labels, int c, int h, int w, const int32_t *index,
                        int n, const float mean[3], const float std[3], int crop_pad, int hflip,
                        uint64_t augment_key, int epoch, float *x, int32_t *y);

#ifdef __cplusplus
}
#endif

#endif
