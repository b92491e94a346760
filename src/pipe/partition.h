/* Placing a model's layers on the stages of model or pipeline parallelism:
 * contiguous runs of layers, balanced by forward FLOPs or at the
 * boundaries the user names (--split). */
#ifndef PT_PIPE_PARTITION_H
#define PT_PIPE_PARTITION_H

#include "nn/model.h"

/* bounds (stages + 1): stage s runs layers [bounds[s], bounds[s+1]).
 * split NULL: the partition whose most expensive stage is cheapest, layers
 * without FLOPs staying with the layer before them. Otherwise a list of
 * stages - 1 layers, by name ("fc2") or by 0-based index in the model's
 * layer list, each the first layer of the next stage. */
pt_status pt_pipe_partition(const pt_model *whole, int stages, const char *split, int *bounds);
/* The most stages spec's layers make: each stage needs a layer besides
 * flatten, which does nothing alone. */
int pt_pipe_max_stages(const pt_model_spec *spec);
/* Forward FLOPs per sample of layers [lo, hi). */
double pt_pipe_range_flops(const pt_model *whole, int lo, int hi);

#endif
