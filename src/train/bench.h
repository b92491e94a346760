/* Steady-state throughput of training steps, for `ptrain bench`.
 *
 * Batches are prepared before the clock starts and reused in turn, so the
 * figure is forward + backward + optimizer alone: data loading and start-up
 * are excluded, the same way bench/pytorch_bench.py excludes them for
 * PyTorch. */
#ifndef PT_TRAIN_BENCH_H
#define PT_TRAIN_BENCH_H

#include "train/trainer.h"

typedef struct {
  int batch, threads, steps;
  double images_per_s, step_ms;
  double flops_per_image; /* training: 3 x forward */
  double gflops;
  double peak_rss_mb;
  int device;             /* -1: the CPU; else the CUDA device it ran on */
  int64_t graph_steps;    /* timed steps launched as a CUDA graph (the rest: eagerly) */
  char graphs_off[300];   /* why the steps went back to eager launches, or "" */
} pt_bench_result;

/* On the CPU, or with cfg->device "cuda[:N]" on that GPU, which holds
 * the dataset and makes each batch from its indices, and whose steps are
 * queued as training queues them (the loss stays on the device), replayed
 * as a CUDA graph as in training unless cfg->cuda_graphs is -1 or profile
 * asks for each layer's time; the clock waits for the GPU at both ends.
 * The timed steps run in blocks of `steps` until at least min_seconds
 * have passed (0: one block), as bench/pytorch_bench.py's --min-seconds
 * does, so that both sides of a comparison run equally long; out->steps
 * is the number run. profile: print the per-layer and per-phase table to
 * stderr after the timed steps. */
pt_status pt_bench_train(const pt_train_config *cfg, int warmup, int steps, double min_seconds, int profile,
                         pt_bench_result *out);
/* Best-of-5 SGEMM rate on n x n x n through pt_sgemm at the current thread count. */
pt_status pt_bench_sgemm(int n, double *gflops);

#endif
