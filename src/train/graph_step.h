/* A GPU training step run as a CUDA graph (--cuda-graphs).
 *
 * A step on one GPU queues about 40 kernels, memsets and library calls;
 * for the tutorials' small models the host's time to queue them is close
 * to the GPU's time to run them. The step (making the batch from its
 * indices, forward, loss, backward, the optimizer update) is captured
 * once per batch size and then replayed with one launch, after the upload
 * of the step's indices and per-step values (ops/cuda/graph.h). A replay
 * computes what the eager step computes, bit for bit.
 *
 * Eager steps come first (PT_GRAPH_WARMUP), so that the one-time work
 * (cuDNN plans, the cuDNN workspace, cuBLAS's start-up) happens outside any
 * capture. A capture that fails (graph.h lists what a graph cannot hold)
 * leaves the step to run as usual; after PT_GRAPH_TRIES failures the run
 * stays eager and why_off says why. Only full batches are captured: a
 * last, smaller batch runs eagerly. A graph is captured again when memory
 * it points into moved (the cuDNN workspace grew during an evaluation).
 */
#ifndef PT_TRAIN_GRAPH_STEP_H
#define PT_TRAIN_GRAPH_STEP_H

#include <stdint.h>

#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/device_data.h"

#define PT_GRAPH_WARMUP 2 /* eager steps before the first capture */
#define PT_GRAPH_TRIES 3  /* failed captures before the run stays eager */

typedef struct {
  int on;              /* asked for and not given up */
  void *graph;         /* the captured step, or NULL */
  uint64_t generation; /* the backend's memory generation at its capture */
  int warm;            /* eager steps taken before the first capture */
  int failures;
  int64_t captures, replays;
  char why_off[300];   /* why the run went back to eager steps */
} pt_graph_step;

void pt_graph_step_init(pt_graph_step *g, int on);
void pt_graph_step_free(pt_graph_step *g, const pt_backend *be);

/* What the next step does: runs eagerly (asked for no graphs, a batch of
 * n samples that is not a full one of batch, or one of the first
 * PT_GRAPH_WARMUP steps), is captured (and launched), or replays the
 * graph. A graph whose memory moved is dropped first (through be). */
typedef enum { PT_GRAPH_EAGER, PT_GRAPH_CAPTURE, PT_GRAPH_REPLAY } pt_graph_action;
pt_graph_action pt_graph_step_plan(pt_graph_step *g, const pt_backend *be, int n, int batch);
/* A capture's outcome: the graph, or why it failed (after PT_GRAPH_TRIES
 * failures the run stays eager, why_off saying why). */
void pt_graph_step_captured(pt_graph_step *g, const pt_backend *be, void *graph);
void pt_graph_step_failed(pt_graph_step *g, const char *why);

/* One optimizer step on batch b (of a run whose full batches hold batch
 * samples) as a graph: the batch made from b's
 * indices in dd, forward, the loss queued into dd->sums, backward, the
 * update at lr. *done 1: the step is queued (the optimizer's step count
 * advanced as by pt_train_update); 0: nothing was queued and the caller
 * runs the step as usual. Fails only on a device error. */
pt_status pt_graph_step_run(pt_graph_step *g, pt_model *m, pt_optimizer *opt, pt_device_data *dd, const pt_batch *b,
                            int batch, int epoch, uint64_t dropout_step, float loss_scale, float lr, int *done);

#endif
