/* Backends: where a model's memory lives and which kernels run its ops.
 *
 * The model, the optimizer and the trainer call every op through a
 * pt_backend, so one code path trains on the CPU or on a GPU. The CPU
 * backend is the reference (src/ops/cpu); the CUDA backend (src/ops/cuda)
 * mirrors it signature for signature, on device pointers, and is tested
 * against it op by op.
 *
 * Every pointer an op takes is the backend's memory (device memory for
 * CUDA), allocated with its alloc. Ops are queued in order on the calling
 * thread's stream (CUDA) or run at once (CPU): nothing waits for the
 * device except download and sync. A kernel fault on the device surfaces at
 * the next sync or download, as a status with a message.
 *
 * Losses and counts are written to backend memory rather than returned, so
 * a GPU step needs no round trip to the host; callers download them when
 * they need the number (the trainer: at the log interval).
 *
 * Threads: backends are per calling thread, as the CPU thread pool is. A
 * data-parallel worker thread calls pt_backend_bind once, which selects its
 * GPU and creates its stream and library handles.
 */
#ifndef PT_OPS_BACKEND_H
#define PT_OPS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ops/cpu/ops.h"
#include "ops/cpu/updates.h"
#include "ops/precision.h"
#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { PT_BACKEND_CPU = 0, PT_BACKEND_CUDA = 1 } pt_backend_kind;

/* What a replayed step takes that changes from step to step (graph_launch). */
typedef struct {
  uint64_t dropout_step; /* pt_model.step */
  int64_t opt_step;      /* the optimizer's step count, this step included */
  float lr;
  int epoch;             /* for the augmentation */
} pt_graph_vars;

/* Devices one process can name (cpu:N / cuda:N, N below this). */
#define PT_MAX_DEVICES 1024

typedef struct pt_backend {
  pt_backend_kind kind;
  const char *name; /* "cpu", "cuda" */

  /* ---- memory ---- */
  /* Zeroed, 64-byte aligned (256 on CUDA); NULL with a message on failure. */
  void *(*alloc)(size_t bytes);
  void (*free)(void *p);
  void (*zero)(void *p, size_t bytes);
  void (*copy)(void *dst, const void *src, size_t bytes);           /* within the backend */
  void (*upload)(void *dst, const void *host_src, size_t bytes);    /* host -> backend, ordered with the ops */
  pt_status (*download)(void *host_dst, const void *src, size_t bytes); /* backend -> host; waits */
  /* Waits for everything queued on this thread; reports a device fault. */
  pt_status (*sync)(void);
  /* See pt_backend_bind / pt_backend_unbind. */
  pt_status (*bind)(int device);
  pt_status (*unbind)(void);

  /* ---- ops: as in ops/cpu/ops.h, on backend memory ---- */
  size_t (*conv_workspace)(const pt_conv_geom *g, int nthreads);
  void (*conv2d_forward)(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                         float *ws);
  void (*conv2d_backward)(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                          const float *dy, float *dw, float *db, float *dx, float *ws);
  /* conv + ReLU + 2x2 max-pool in one op; NULL where the backend has none. */
  int (*conv_pool_ok)(const pt_conv_geom *g);
  void (*conv2d_pool_forward)(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                              float *y, int32_t *code, float *ws);
  void (*conv2d_pool_backward)(const pt_conv_geom *g, int n, const float *x, const float *w, const int32_t *code,
                               const float *dy, float *dw, float *db, float *dx, float *ws);
  size_t (*linear_workspace)(int max_batch, int in, int out, int nthreads);
  void (*linear_forward)(int n, int in, int out, const float *x, const float *w, const float *b, float *y,
                         float *ws);
  /* add: dw and db += the batch's gradients; 0: = them (what they held is
   * not read). */
  void (*linear_backward)(int n, int in, int out, const float *x, const float *w, const float *dy, float *dw,
                          float *db, float *dx, int add, float *ws);
  /* The same with w and dw in panels (pt_linear_panel_index), for layers
   * whose inputs are mostly zeros; linear_panels_ok NULL, or 0 for the
   * shape: the backend has no such kernels, and the model keeps PyTorch's
   * order. */
  int (*linear_panels_ok)(int in, int out);
  /* keep: what the forward pass leaves for the backward pass of the same
   * batch, linear_keep_floats(max_batch, in) floats per batch in flight,
   * or NULL (see pt_linear_keep_floats) */
  size_t (*linear_keep_floats)(int max_batch, int in);
  void (*linear_forward_p)(int n, int in, int out, const float *x, const float *wp, const float *b, float *y,
                           float *ws, float *keep);
  void (*linear_backward_p)(int n, int in, int out, const float *x, const float *wp, const float *dy, float *dwp,
                            float *db, float *dx, int add, float *ws, const float *kept);
  void (*maxpool_forward)(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x, float *y,
                          int32_t *argmax);
  void (*maxpool_backward)(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *dy,
                           const int32_t *argmax, float *dx);
  void (*relu_forward)(size_t n, const float *x, float *y);
  void (*relu_backward)(size_t n, const float *y, const float *dy, float *dx);
  void (*dropout_forward)(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer, const float *x,
                          float *y, float *mask);
  void (*dropout_backward)(size_t n, const float *mask, const float *dy, float *dx);
  /* p (n, k): room the backend may use to keep the softmax from the forward
   * pass for the backward pass (the CPU does; a GPU takes exp(y) again),
   * or NULL where there will be no backward pass. */
  void (*log_softmax_forward)(int n, int k, const float *x, float *y, float *p);
  void (*log_softmax_backward)(int n, int k, const float *y, const float *p, const float *dy, float *dx);
  /* *loss (one double, backend memory) = the batch's mean loss, as the CPU's
   * pt_nll_loss / pt_cross_entropy_loss return it; dlp may be NULL. */
  void (*nll_loss)(int n, int k, const float *lp, const int32_t *y, float *dlp, float scale, double *loss);
  void (*cross_entropy_loss)(int n, int k, const float *z, const int32_t *y, float *dz, float scale,
                             double *loss);
  /* *count (one int64, backend memory) += rows whose argmax is the label. */
  void (*count_correct)(int n, int k, const float *scores, const int32_t *y, int64_t *count);
  /* acc[0] += *loss * n, acc[1] += n (doubles, backend memory): the running
   * sums an epoch's mean loss comes from, kept on the device. */
  void (*accumulate_loss)(const double *loss, int n, double *acc);
  /* Batch norm; scratch is 2*c doubles of backend memory. */
  void (*batchnorm_forward_train)(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                  const float *beta, float *running_mean, float *running_var, float *save_mean,
                                  float *save_invstd, float *y, double *scratch);
  void (*batchnorm_forward_eval)(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                 const float *beta, const float *running_mean, const float *running_var, float *y);
  void (*batchnorm_backward_train)(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                   const float *save_mean, const float *save_invstd, const float *dy,
                                   float *dgamma, float *dbeta, float *dx, double *scratch);
  void (*batchnorm_backward_eval)(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                  const float *running_mean, const float *running_var, const float *dy,
                                  float *dgamma, float *dbeta, float *dx);
  /* Synchronised batch norm: the training forward and backward in the
   * steps between which the caller adds up every worker's sums (see
   * pt_batchnorm_sums and pt_batchnorm_backward_sums in ops/cpu/ops.h).
   * Every double * is backend memory; count is the global number of values
   * per channel. Sums are in double, in an order fixed by the shape. */
  void (*batchnorm_sums)(const pt_bn_geom *g, int n, int hw, const float *x, const double *center, double *out);
  void (*batchnorm_normalize)(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                              const float *beta, const double *mean, const double *sq, double count,
                              float *running_mean, float *running_var, float *save_mean, float *save_invstd,
                              float *y);
  void (*batchnorm_backward_sums)(const pt_bn_geom *g, int n, int hw, const float *x, const float *save_mean,
                                  const float *save_invstd, const float *dy, float *dgamma, float *dbeta,
                                  double *sums);
  void (*batchnorm_backward_dx)(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                                const float *save_mean, const float *save_invstd, const float *dy,
                                const double *sums, double count, float *dx);

  /* ---- optimizer updates: as in ops/cpu/updates.h ---- */
  void (*sgd_update)(const pt_opt_config *c, size_t n, float *p, const float *g, float *buf, int first, float lr);
  void (*adam_update)(const pt_opt_config *c, size_t n, float *p, const float *g, float *m, float *v,
                      int64_t step, float lr);
  void (*adadelta_update)(const pt_opt_config *c, size_t n, float *p, const float *g, float *sq, float *acc,
                          float lr);
  /* x *= a over n floats (gradient averaging after a sum). */
  void (*scale)(size_t n, float a, float *x);

  /* --precision for this thread's GEMMs and convolutions; NULL where the
   * backend has only FP32 (the CPU). */
  pt_status (*set_precision)(pt_precision p);
  /* The calling thread's host waits for the device so far: [0] for all
   * its queued work, [1] for an earlier point that was not yet reached;
   * NULL on the CPU, which never waits. */
  void (*host_waits)(uint64_t out[2]);

  /* ---- between devices: model and pipeline stages that are threads of
   * one process hand each other activations and gradients by reference.
   * An event marks a point in the calling thread's queue; another thread
   * can make its own queue wait for that point, and the host waits for
   * nothing. On the CPU, whose ops have finished when they return, events
   * are tokens and copy_from is memcpy. ---- */
  void *(*event_create)(void); /* NULL with a message on failure */
  void (*event_destroy)(void *ev);
  void (*event_record)(void *ev); /* the point after everything queued so far */
  void (*event_wait)(void *ev);   /* what is queued after this waits for ev's last recorded point */
  /* dst (this thread's device) <- src on device src_device, in queue
   * order: GPU to GPU directly where the two can reach each other. */
  void (*copy_from)(void *dst, const void *src, int src_device, size_t bytes);

  /* ---- data: a batch made on the device from a dataset kept there;
   * NULL on the CPU, where the loader makes batches. See
   * pt_cuda_make_batch in ops/cuda/ops.h. ---- */
  void (*make_batch)(const uint8_t *images, const uint8_t *labels, int c, int h, int w, const int32_t *index, int n,
                     const float mean[3], const float std[3], int crop_pad, int hflip, uint64_t augment_key,
                     int epoch, float *x, int32_t *y);

  /* ---- graphs: a step captured once and replayed (ops/cuda/graph.h);
   * NULL on the CPU. Between graph_begin and graph_end nothing runs: the
   * ops called are recorded. graph_end fails, naming why, when the step
   * did something a graph cannot hold; the step must then run as usual.
   * graph_launch runs the step again with v's values. A graph is valid
   * while memory_generation returns what it returned at the capture. ---- */
  pt_status (*graph_begin)(void);
  pt_status (*graph_end)(void **graph);
  pt_status (*graph_launch)(void *graph, const pt_graph_vars *v);
  void (*graph_destroy)(void *graph);
  uint64_t (*memory_generation)(void);
} pt_backend;

/* The CPU backend; always present. */
const pt_backend *pt_backend_cpu(void);
/* The CUDA backend, or NULL with a message (built without CUDA). */
const pt_backend *pt_backend_cuda(void);

/* Makes this thread run its ops on device (the CUDA ordinal; ignored for
 * the CPU): selects the GPU, creates the thread's stream and cuBLAS/cuDNN
 * handles. Fails with a message naming the device when it cannot. */
pt_status pt_backend_bind(const pt_backend *be, int device);
/* Frees this thread's stream and handles (before the thread ends), after
 * waiting for its queued work; returns the error that work met, which no
 * later call could report. Unbound either way. */
pt_status pt_backend_unbind(const pt_backend *be);

/* One device name, "cpu", "cpu:N", "cuda" (= cuda:0) or "cuda:N", into its
 * kind and index; an error names flag (the option it came from) and what
 * is expected. */
pt_status pt_device_parse(const char *dev, const char *flag, pt_backend_kind *kind, int *index);
/* The same for the one device of a run, an evaluation or a rank, where the
 * CPU is one device: cpu:N other than cpu:0 (a virtual device, which only
 * a list of stages or dp workers distinguishes) is refused. */
pt_status pt_device_parse_one(const char *dev, const char *flag, pt_backend_kind *kind, int *index);

#ifdef __cplusplus
}
#endif

#endif
