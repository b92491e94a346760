/* A sequential model: layers, their parameters in one flat buffer, and the
 * activation memory for a maximum batch, all allocated once at build time.
 *
 * Parameters, gradients and batch-norm buffers are each one contiguous float
 * array carved into named views (pt_tensor_info) in PyTorch's state_dict
 * order, so the optimizer, the gradient allreduce and the checkpoint writer
 * are single loops over one array. Activations live in buffers sized for
 * max_batch, so a training step allocates nothing.
 */
#ifndef PT_NN_MODEL_H
#define PT_NN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/spec.h"
#include "ops/backend.h"

typedef struct {
  char name[PT_NAME_LEN + 24]; /* "conv1.weight" */
  int ndim;
  int64_t shape[4];
  size_t offset, numel;        /* into the flat array */
  /* A linear weight (out, in) the backend keeps in panels of 16 outputs
   * (pt_linear_panels in ops/cpu/ops.h) rather than in PyTorch's order:
   * the gradient and the optimizer's state alike. Checkpoints hold
   * PyTorch's order; pt_tensor_to_torch and pt_tensor_from_torch convert. */
  int panels;
} pt_tensor_info;

/* dst (t's numel floats, PyTorch's order) <- src (t's order in the model's
 * arrays), and back; a plain copy for tensors without panels. src and dst
 * must not overlap. */
void pt_tensor_to_torch(const pt_tensor_info *t, const float *src, float *dst);
void pt_tensor_from_torch(const pt_tensor_info *t, const float *src, float *dst);
/* dst's weights and batch-norm buffers <- src's host copies (hparam,
 * hbuffer), tensor by tensor, then uploaded: two models of one spec,
 * wherever each lives. */
struct pt_model;
pt_status pt_model_copy_weights(struct pt_model *dst, const struct pt_model *src);

typedef struct {
  pt_layer_spec spec;
  int index;
  int in_c, in_h, in_w;     /* per-sample input */
  int out_c, out_h, out_w;  /* per-sample output */
  pt_conv_geom conv;
  int w, b;                 /* parameter indices, -1 if none */
  int rmean, rvar;          /* batch-norm buffer indices, -1 if none */
  int64_t num_batches_tracked;
  int fused;                /* runs inside the conv before it (a ReLU, or a ReLU's max-pool) */
  int view;                 /* a fused ReLU: y is a view of the conv's */
  int conv_pool;            /* conv: the ReLU and max-pool after it are fused into it */
  float *y;                 /* (max_batch, out_c, out_h, out_w) output of the current slot */
  int32_t *argmax;          /* max-pool: (max_batch, out) */
  float *mask;              /* dropout: its mask; log-softmax: the softmax, for the backward pass (max_batch, out) */
  float *save_mean, *save_invstd; /* batch-norm: (out_c) */
  float *keep;              /* linear in panels: what its forward pass keeps for its backward pass
                               (be->linear_keep_floats(max_batch, in_c)), or NULL */
  int *kept_n;              /* ... and the batch size it holds, 0 for none (host memory) */
  size_t keep_floats;
  /* The allocations the pointers above point into: nslots slots of
   * max_batch samples each (of out_c channels for the batch-norm saves). */
  float *y_mem, *mask_mem, *save_mem, *keep_mem;
  int *kept_n_mem;
  int32_t *argmax_mem;
  double *bn_sums;          /* batch-norm: (2 * out_c + 1) per-channel sums, backend memory */
  double *bn_host;          /* the same in host memory (bn_sums itself on the CPU), for --sync-bn */
  double bn_count;          /* batch-norm: samples x pixels the statistics came from */
  double fwd_ms, bwd_ms;    /* profiler accumulators */
  int bwd_dx;               /* the last backward pass computed this layer's input gradient */
  char label[PT_NAME_LEN + 24]; /* "conv2d conv1", for profiles and traces */
} pt_layer;

typedef struct pt_model {
  pt_model_spec spec;
  /* Where every array below lives and which kernels run the layers: the
   * CPU, or a GPU (then every float * here is device memory). */
  const pt_backend *be;
  int nlayers;
  pt_layer layers[PT_MAX_LAYERS];
  int max_batch;
  int num_classes;

  int nparams;
  pt_tensor_info params[2 * PT_MAX_LAYERS];
  size_t nparam_total;
  float *param;  /* (nparam_total) */
  float *grad;   /* (nparam_total) */

  int nbuffers;  /* batch-norm running statistics, saved but not trained */
  pt_tensor_info buffers[2 * PT_MAX_LAYERS];
  size_t nbuffer_total;
  float *buffer; /* (nbuffer_total) */
  /* Host copies of param and buffer for initialisation and checkpoints:
   * the arrays themselves on the CPU, separate on a GPU, where
   * pt_model_to_host / pt_model_from_host move them. */
  float *hparam, *hbuffer;
  double *loss_val; /* (1) the last loss, backend memory; a stage shares the whole's */

  float *dbuf[2];   /* (max_batch, max activation) ping-pong gradients */
  float *ws;        /* (ws_floats) im2col workspace, largest conv, split among ws_threads threads */
  size_t ws_floats;
  int ws_threads;   /* the pool size ws fits; a pass on a larger pool grows it first */
  float *dlogits;   /* (max_batch, num_classes) */
  size_t max_act;   /* floats per sample of the largest activation */

  /* A pipeline stage is layers [layer_base, layer_base + nlayers) of a
   * whole model; its parameters, gradients and buffers are views into the
   * whole's arrays at param_offset and buffer_offset, so the optimizer,
   * checkpoints and evaluation see one model. NULL whole: a model of its own. */
  struct pt_model *whole;
  int layer_base;
  size_t param_offset, buffer_offset;
  /* Activation slots: micro-batches whose activations are alive at once
   * (1 except in a pipeline stage); pt_model_use_slot picks the current one. */
  int nslots;
  size_t slot_bytes;  /* activations of one slot of max_batch samples */
  size_t work_bytes;  /* gradient ping-pong, workspace, loss gradient */

  int training;     /* dropout and batch statistics on */
  uint64_t dropout_key;
  uint64_t step;    /* counter for dropout masks */
  int profile;      /* time each layer */
  int grads_fresh;  /* the next backward writes the gradients it can, not adds (pt_model_start_grads) */
  /* Called as soon as a layer with parameters has its gradients, last layer
   * first, so data-parallel training can send a bucket of gradients while
   * the backward pass goes on below it. NULL: nothing is called. */
  void (*grad_ready)(void *ctx, int layer);
  void *grad_ready_ctx;
  /* Synchronised batch norm: buf holds this worker's n sums in backend
   * memory; host (n doubles of host memory, buf itself on the CPU) gets
   * their sums over all workers (buf is left as it was on a GPU). NULL:
   * each worker normalises with its own batch's statistics. */
  pt_status (*sum_stats)(void *ctx, double *host, const double *buf, size_t n);
  void *sum_stats_ctx;
  /* The first failure a pass met but cannot return (the passes return
   * nothing): a batch-norm sum, or a device wait under --profile or
   * --trace, which also reports the device's faults. Its message is kept
   * with it, since the thread's message may be overwritten before the
   * caller looks; pt_model_take_status reports and clears both. */
  pt_status sync_status;
  char sync_error[512];
} pt_model;

/* Builds the model for batches of at most max_batch; checks shapes layer by
 * layer and names the first layer whose input does not fit. */
pt_status pt_model_create(pt_model **out, const pt_model_spec *spec, int max_batch);
/* The same on a backend (the calling thread must be bound to it). */
pt_status pt_model_create_on(pt_model **out, const pt_model_spec *spec, int max_batch, const pt_backend *be);
void pt_model_destroy(pt_model *m);
/* hparam/hbuffer <- param/buffer (waits for the device); nothing on the CPU. */
pt_status pt_model_to_host(pt_model *m);
/* param/buffer <- hparam/hbuffer (queued); nothing on the CPU. */
void pt_model_from_host(pt_model *m);
/* PyTorch's default initialisation (Conv2d/Linear: U(-1/sqrt(fan_in), +) for
 * weight and bias; batch-norm: weight 1, bias 0, mean 0, var 1), from Philox. */
void pt_model_init(pt_model *m, uint64_t seed); /* drawn into hparam, then uploaded */
void pt_model_zero_grad(pt_model *m);
/* pt_model_zero_grad for the backward pass that comes next on this model:
 * the gradients that pass can write rather than add to (the linear
 * layers') are not cleared first, the others are zeroed. The pass after it
 * adds to them again, as after pt_model_zero_grad. */
void pt_model_start_grads(pt_model *m);
/* x (n, in_c, in_h, in_w) -> returns (n, num_classes), owned by the model. */
const float *pt_model_forward(pt_model *m, const float *x, int n);
/* Loss of the last forward against y; fills dlogits with d(loss)/d(output) * scale.
 * On a GPU this waits for the device; pt_model_loss_queue does not, leaving
 * the loss in loss_val (the whole model's, for a stage). */
double pt_model_loss(pt_model *m, const int32_t *y, int n, float scale);
void pt_model_loss_queue(pt_model *m, const int32_t *y, int n, float scale);
/* Accumulates parameter gradients of the last forward/loss into m->grad. */
void pt_model_backward(pt_model *m, const float *x, int n);
/* The failure kept in sync_status since the last call, with its message
 * (pt_fail), and clears it; PT_OK if none. Callers check it after a step
 * or an evaluation, before trusting what the passes computed. */
pt_status pt_model_take_status(pt_model *m);
/* Under --profile or --trace on a device, waits for the model's queued work
 * so that the time of what was queued outside the passes (the optimizer's
 * update) is known; a failure the wait reports is kept as the passes' are.
 * Nothing otherwise. */
void pt_model_timing_sync(pt_model *m);

/* A pipeline stage: layers [lo, hi) of whole, taking that layer's input and
 * producing its output (the loss only when hi is the last layer), with
 * nslots activation slots of max_batch samples. Parameters, gradients and
 * buffers are whole's memory; dropout masks are whole's (same layer ids). */
pt_status pt_model_create_stage(pt_model **out, pt_model *whole, int lo, int hi, int max_batch, int nslots);
/* The elements of the flat parameter (buffers 0) or batch-norm buffer
 * (buffers 1) array that layers [lo, hi) own: [*off, *off + *len). */
void pt_model_layer_tensors(const pt_model *m, int lo, int hi, int buffers, size_t *off, size_t *len);
/* Makes slot s (0 <= s < nslots) the one forward writes and backward reads. */
void pt_model_use_slot(pt_model *m, int s);
/* Backward from dy (n, output) instead of the loss's gradient; returns the
 * gradient of the model's input (n, input) when want_dx, in memory the
 * model owns until the next backward, or NULL. */
const float *pt_model_backward_from(pt_model *m, const float *x, const float *dy, int n, int want_dx);
/* Floats per sample of the input of layer i (of the output when i == nlayers). */
size_t pt_model_boundary_floats(const pt_model *m, int i);

/* Forward FLOPs per sample (2 per multiply-add) of conv and linear layers. */
double pt_model_flops(const pt_model *m);
double pt_layer_flops(const pt_layer *L);

/* Sizes of a model, from its spec alone: nothing is allocated, so this is
 * cheap even for cifar-convnet's 141 M parameters. */
typedef struct {
  size_t nparams;           /* trainable parameters */
  double flops;             /* forward, per sample */
  size_t activation_floats; /* all layers' outputs, per sample */
  int classes;              /* outputs of the last layer */
} pt_model_summary;
pt_status pt_model_summarize(const pt_model_spec *spec, pt_model_summary *out);
/* The model's layers with their shapes and parameter tables, nothing
 * allocated behind them (no weights, no activations): what a layer
 * listing or a stage partition needs. Free it with free(). */
pt_status pt_model_shapes(pt_model **out, const pt_model_spec *spec);
/* Whether layer index's output is flat, (N, C) as PyTorch sees it, rather
 * than a map: a conv's 1x1 output is still (N, C, 1, 1), and needs a
 * flatten before a linear layer. */
int pt_model_output_flat(const pt_model *m, int index);
/* The tensor called name, and (data) where it is in hparam or hbuffer, in
 * the model's order (see pt_tensor_info.panels). */
const pt_tensor_info *pt_model_find(const pt_model *m, const char *name, const float **data, int *is_buffer);

#endif
