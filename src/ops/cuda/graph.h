/* CUDA graphs: the steady-state training step captured once on the
 * thread's stream and replayed, one launch instead of the step's 40-odd.
 *
 * A capture records kernels with their arguments frozen. Four of a step's
 * arguments change from step to step: the dropout step (the masks' Philox
 * counter), the learning rate, Adam's bias corrections (and AdamW's decay,
 * which takes the learning rate) and the epoch the augmentation draws
 * with. While the thread captures, the ops that take them launch their
 * kernels with a pointer to the thread's pt_cuda_step_values in device
 * memory, and each replay first uploads that step's values there, on the
 * same stream: the kernels read what the eager step would have passed, so
 * a replayed step has the eager step's bits.
 *
 * What a graph cannot hold makes the capture fail, and the step runs as
 * usual: a host wait (a sync, a download), an upload from host memory, a
 * cuDNN workspace that has to grow, a first SGD step (which starts the
 * momentum buffer). Errors during a capture are the capture's, not the
 * run's: they are kept as the reason it failed rather than as the
 * thread's pending error.
 */
#ifndef PT_OPS_CUDA_GRAPH_H
#define PT_OPS_CUDA_GRAPH_H

#include <stdint.h>

#include "ops/backend.h"
#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device memory, one per bound thread. */
typedef struct {
  uint64_t dropout_step;
  float lr;             /* SGD, Adadelta */
  float adam_step_size; /* lr / (1 - beta1^t) */
  float adam_bc2_sqrt;  /* sqrt(1 - beta2^t) */
  float adam_decay;     /* AdamW: 1 - lr * weight decay */
  int32_t epoch;        /* the augmentation's */
} pt_cuda_step_values;

/* Whether this thread is capturing. */
int pt_cuda_capturing(void);
/* The thread's step values while it captures (ops pass it to their
 * kernels); NULL otherwise (ops pass their arguments). */
const pt_cuda_step_values *pt_cuda_capture_values(void);
/* Adam's constants, noted by adam_update while capturing: a replay
 * computes the bias corrections from them. */
void pt_cuda_capture_adam(float beta1, float beta2, float weight_decay);
/* Makes the capture in progress fail with why (the first reason kept);
 * 1 when a capture is in progress, 0 (and nothing done) otherwise, so
 * that an op a graph cannot hold can return at once. */
int pt_cuda_capture_refuse(const char *why);
/* Bumped whenever memory that captured kernels may point into moves (the
 * cuDNN workspace grew): a graph captured before must be captured again. */
uint64_t pt_cuda_memory_generation(void);
void pt_cuda_memory_moved(void);
/* Frees the thread's step values (pt_cuda_unbind). */
void pt_cuda_graph_release(void);

/* Adam's per-step scalars as adam.c computes them, in double on the host:
 * eager steps pass them, replays upload them. */
void pt_cuda_adam_scalars(float beta1, float beta2, float weight_decay, int64_t step, float lr, float *step_size,
                          float *bc2_sqrt, float *decay);

/* The backend's graph ops (pt_backend.graph_*). */
pt_status pt_cuda_graph_begin(void);
pt_status pt_cuda_graph_end(void **graph);
pt_status pt_cuda_graph_launch(void *graph, const pt_graph_vars *v);
void pt_cuda_graph_destroy(void *graph);

#ifdef __cplusplus
}
#endif

#endif
