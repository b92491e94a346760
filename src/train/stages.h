/* A worker's part in model and pipeline parallelism (--parallel model,
 * --parallel pipeline): which stage of which replica it is, the
 * communicators that joins it to the other stages of its replica and to the
 * same stage of the other replicas, and the steps of the training loop that
 * differ from data parallelism: evaluation through the stages, gathering
 * the stages' parameters for a checkpoint, and the stage report.
 *
 * World ranks are laid out replica by replica: rank = replica * stages +
 * stage. Every worker holds the whole model's parameter arrays (so
 * checkpoints and resume work as for one device) but computes and updates
 * only its stage's slice of them.
 */
#ifndef PT_TRAIN_STAGES_H
#define PT_TRAIN_STAGES_H

#include <stdio.h>

#include "comm/comm.h"
#include "data/loader.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "pipe/stage.h"
#include "train/device_data.h"
#include "train/evaluate.h"

typedef struct {
  int stages, replicas, stage, replica;
  double bubble; /* after pt_stages_report: the share of the stages' time they sat idle (rank 0's view) */
  int bounds[PT_MAX_LAYERS + 1]; /* stage s runs layers [bounds[s], bounds[s+1]) */
  pt_comm *pipe;                 /* this replica's stages; rank = stage */
  pt_comm *dpipe;                /* the same for backend memory: pipe itself, or host staging over it (GPUs) */
  pt_comm *peers;                /* this stage in every replica; rank = replica */
  int own_pipe, own_peers;       /* made here, destroyed here */
  pt_pipe_stage st;
} pt_stages;

/* world: every worker (threads or MPI ranks), stages * replicas of them.
 * direct and device: as pt_pipe_stage_init's. */
pt_status pt_stages_init(pt_stages *S, pt_model *whole, pt_comm *world, int stages, const char *split,
                         pt_pipe_schedule kind, int micro, int batch, int direct, int device);
void pt_stages_free(pt_stages *S);

/* The test split through the stages, its batches made by dd (this
 * worker's: on a GPU, from indices); sums on the last stage, 0 elsewhere. */
pt_status pt_stages_evaluate(pt_stages *S, pt_loader *test, pt_device_data *dd, pt_eval_sums *ev);
/* Brings every stage's parameters, buffers, optimizer state and batch-norm
 * counts into every worker's whole arrays (called by all workers). */
pt_status pt_stages_gather(pt_stages *S, pt_model *whole, pt_optimizer *opt);
/* One line per stage: its layers and forward MFLOP per image. */
void pt_stages_print_plan(FILE *out, const pt_stages *S, const pt_model *whole);
/* Collects the stages' measurements (called by all workers) and, where out
 * is not NULL, prints each stage's busy and idle time per step, the bubble
 * against the ideal (S-1)/(M+S-1), and its peak activation memory. With
 * layer_times, the per-layer times land in whole's layers for the profile. */
pt_status pt_stages_report(FILE *out, pt_stages *S, pt_model *whole, int layer_times);

#endif
