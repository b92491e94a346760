/* CUDA graphs (graph.h): capture, replay, and the per-step values the
 * captured kernels read from device memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/context.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/ops.h"

namespace {

struct capture_state {
  int device = -1;                         /* where values lives */
  pt_cuda_step_values *values = nullptr;   /* device memory */
  bool capturing = false;
  bool refused = false;
  char why[256] = {0};
  bool adam = false;
  float b1 = 0, b2 = 0, wd = 0;
  unsigned long long generation = 0;
};
thread_local capture_state t_cap;

struct graph {
  cudaGraphExec_t exec;
  int device;
  bool adam;
  float b1, b2, wd;
};

pt_status cuda_status(cudaError_t e, const char *what) {
  (void)cudaGetLastError();
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s: %s (%s)", pt_cuda_current_device(), what, cudaGetErrorString(e),
                 cudaGetErrorName(e));
}

} // namespace

extern "C" int pt_cuda_capturing(void) { return t_cap.capturing; }

extern "C" const pt_cuda_step_values *pt_cuda_capture_values(void) {
  return t_cap.capturing ? t_cap.values : nullptr;
}

extern "C" void pt_cuda_capture_adam(float beta1, float beta2, float weight_decay) {
  if (!t_cap.capturing) return;
  if (t_cap.adam && (t_cap.b1 != beta1 || t_cap.b2 != beta2 || t_cap.wd != weight_decay)) {
    pt_cuda_capture_refuse("two Adam configurations in one step");
    return;
  }
  t_cap.adam = true;
  t_cap.b1 = beta1;
  t_cap.b2 = beta2;
  t_cap.wd = weight_decay;
}

extern "C" int pt_cuda_capture_refuse(const char *why) {
  if (!t_cap.capturing) return 0;
  if (!t_cap.refused) {
    t_cap.refused = true;
    snprintf(t_cap.why, sizeof t_cap.why, "%s", why);
  }
  return 1;
}

extern "C" uint64_t pt_cuda_memory_generation(void) { return t_cap.generation; }
extern "C" void pt_cuda_memory_moved(void) { t_cap.generation++; }

extern "C" void pt_cuda_graph_release(void) {
  if (t_cap.values) (void)cudaFree(t_cap.values);
  t_cap.values = nullptr;
  t_cap.device = -1;
  t_cap.capturing = false;
  (void)cudaGetLastError();
}

extern "C" void pt_cuda_adam_scalars(float beta1, float beta2, float weight_decay, int64_t step, float lr,
                                     float *step_size, float *bc2_sqrt, float *decay) {
  /* adam.c's expressions, evaluated on the host as it evaluates them. */
  const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
  *step_size = (float)(lr / bc1);
  *bc2_sqrt = (float)sqrt(bc2);
  *decay = 1.0f - lr * weight_decay;
}

extern "C" pt_status pt_cuda_graph_begin(void) {
  const int dev = pt_cuda_current_device();
  if (dev < 0) return pt_fail(PT_ERR_STATE, "CUDA graphs: this thread has no GPU bound");
  if (t_cap.capturing) return pt_fail(PT_ERR_STATE, "CUDA graphs: a capture is already in progress");
  /* Allocated before the capture: an allocation inside it would end it. */
  if (t_cap.values && t_cap.device != dev) pt_cuda_graph_release();
  if (!t_cap.values) {
    const cudaError_t e = cudaMalloc((void **)&t_cap.values, sizeof(pt_cuda_step_values));
    if (e != cudaSuccess) {
      t_cap.values = nullptr;
      return cuda_status(e, "CUDA graphs: allocating the step's values");
    }
    t_cap.device = dev;
  }
  /* Errors pending from before belong to the eager steps: the next sync
   * reports them, not the capture. */
  const cudaError_t e = cudaStreamBeginCapture((cudaStream_t)pt_cuda_current_stream(), cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return cuda_status(e, "CUDA graphs: starting a capture");
  t_cap.capturing = true;
  t_cap.refused = false;
  t_cap.why[0] = 0;
  t_cap.adam = false;
  return PT_OK;
}

extern "C" pt_status pt_cuda_graph_end(void **out) {
  *out = nullptr;
  if (!t_cap.capturing) return pt_fail(PT_ERR_STATE, "CUDA graphs: no capture in progress");
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture((cudaStream_t)pt_cuda_current_stream(), &g);
  t_cap.capturing = false;
  (void)cudaGetLastError(); /* an invalidated capture leaves its error behind */
  if (t_cap.refused || e != cudaSuccess || !g) {
    if (g) (void)cudaGraphDestroy(g);
    if (t_cap.refused) return pt_fail(PT_ERR_STATE, "the step cannot be captured: %s", t_cap.why);
    return cuda_status(e == cudaSuccess ? cudaErrorStreamCaptureInvalidated : e, "CUDA graphs: ending the capture");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0);
  (void)cudaGraphDestroy(g);
  if (ie != cudaSuccess) return cuda_status(ie, "CUDA graphs: instantiating the captured step");
  graph *gr = (graph *)malloc(sizeof *gr);
  if (!gr) {
    (void)cudaGraphExecDestroy(exec);
    return pt_fail(PT_ERR_NOMEM, "CUDA graphs: no memory for a graph");
  }
  *gr = graph{exec, pt_cuda_current_device(), t_cap.adam, t_cap.b1, t_cap.b2, t_cap.wd};
  *out = gr;
  return PT_OK;
}

extern "C" pt_status pt_cuda_graph_launch(void *p, const pt_graph_vars *v) {
  graph *gr = (graph *)p;
  if (!gr || gr->device != pt_cuda_current_device() || !t_cap.values)
    return pt_fail(PT_ERR_STATE, "CUDA graphs: the graph belongs to another GPU or thread");
  pt_cuda_step_values s;
  memset(&s, 0, sizeof s);
  s.dropout_step = v->dropout_step;
  s.lr = v->lr;
  s.epoch = v->epoch;
  if (gr->adam) pt_cuda_adam_scalars(gr->b1, gr->b2, gr->wd, v->opt_step, v->lr, &s.adam_step_size, &s.adam_bc2_sqrt,
                                     &s.adam_decay);
  /* In stream order, through the staging ring: the copy lands before the
   * graph's kernels read it, and the host does not wait. */
  pt_cuda_upload(t_cap.values, &s, sizeof s);
  const cudaError_t e = cudaGraphLaunch(gr->exec, (cudaStream_t)pt_cuda_current_stream());
  if (e != cudaSuccess) return cuda_status(e, "CUDA graphs: launching the captured step");
  return pt_cuda_last_error();
}

extern "C" void pt_cuda_graph_destroy(void *p) {
  graph *gr = (graph *)p;
  if (!gr) return;
  (void)cudaGraphExecDestroy(gr->exec);
  (void)cudaGetLastError();
  free(gr);
}
