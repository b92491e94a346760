/* Pipeline schedules: the order in which one stage runs the forward (F)
 * and backward (B) passes of a batch's M micro-batches.
 *
 * GPipe runs every forward, then every backward, so a stage keeps all M
 * micro-batches' activations. 1F1B (PipeDream-flush) lets stage s of S run
 * only S - s - 1 forwards ahead, then alternates one forward and one
 * backward, so it keeps at most S - s of them; the bubble is the same.
 * Both run the micro-batches' backwards in order 0..M-1, so gradients are
 * summed in the same order and the two schedules give identical results.
 */
#ifndef PT_PIPE_SCHEDULE_H
#define PT_PIPE_SCHEDULE_H

#include "util/error.h"

typedef enum { PT_PIPE_GPIPE, PT_PIPE_1F1B } pt_pipe_schedule;

typedef struct {
  int forward; /* 1: F, 0: B */
  int mb;      /* micro-batch */
} pt_pipe_op;

/* "gpipe", "1f1b". */
pt_status pt_pipe_schedule_parse(const char *name, pt_pipe_schedule *kind);
const char *pt_pipe_schedule_name(pt_pipe_schedule kind);
/* Fills ops (2M) with stage s's order; returns 2M. */
int pt_pipe_schedule_ops(pt_pipe_schedule kind, int stages, int s, int M, pt_pipe_op *ops);
/* The most micro-batches whose activations stage s holds at once. */
int pt_pipe_schedule_live(pt_pipe_schedule kind, int stages, int s, int M);
/* The bubble a schedule of equal stages cannot avoid: (S-1)/(M+S-1). */
double pt_pipe_ideal_bubble(int stages, int M);

#endif
