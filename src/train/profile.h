/* The --profile report: where a training step's time goes, per layer
 * (forward and backward milliseconds per step, share of the step, achieved
 * GFLOP/s) and per phase (waiting for data, forward, backward, optimizer,
 * communication, other).
 *
 * Layers are timed by the model itself when m->profile is set: two clock
 * reads per layer per pass, well under 1% of a step of these models. With
 * the flag off nothing is read and nothing is printed.
 */
#ifndef PT_TRAIN_PROFILE_H
#define PT_TRAIN_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "nn/model.h"

typedef struct {
  double data_s, forward_s, backward_s, optimizer_s, comm_s, total_s;
  int64_t steps, images;
} pt_phase_times;

void pt_profile_reset(pt_model *m, pt_phase_times *t);
/* A layer's achieved GFLOP/s over fwd_ms + bwd_ms for images samples: the
 * forward FLOPs, once more for the weight gradient, and once more for the
 * input gradient where its last backward pass computed one (the first layer
 * with parameters computes none). 0 for layers without FLOPs. */
double pt_profile_layer_gflops(const pt_layer *L, double images, double fwd_ms, double bwd_ms);
void pt_profile_print(FILE *out, const pt_model *m, const pt_phase_times *t, int replicas, int stages);
/* The same split as one metrics line, for programs that compare runs
 * (ptrain scale): {"event":"profile","steps":..,"images":..,"seconds":..,
 * images counting every replica's (replicas: the data-parallel copies),
 * "images_per_s":..,"ms_per_step":.., "data_ms", "forward_ms",
 * "backward_ms", "optimizer_ms", "comm_ms", "other_ms" (per step),
 * "bubble" (a pipeline's idle share, or null), "peak_rss_mb"}. */
struct pt_metrics;
pt_status pt_profile_metrics(struct pt_metrics *mt, const pt_phase_times *t, int replicas, double bubble,
                             double peak_rss_mb);

#endif
