/* Gradient averaging for data-parallel training, in buckets that are sent
 * while the backward pass is still running, as PyTorch's DDP does.
 *
 * The flat gradient array is in layer order, and the backward pass walks
 * the layers from the last, so a bucket is a contiguous range at the end of
 * what is still to come: layers are added from the last one up until the
 * bucket holds --bucket-mb (the first bucket is capped at 1 MB, as in DDP,
 * so that communication starts early). When the lowest layer of a bucket
 * has its gradients, the bucket's reduction starts; the optimizer waits for
 * all of them.
 *
 * Gradients are summed, not averaged: the loss gradient was already scaled
 * by 1 / (workers * accumulation steps) before the backward pass, which
 * gives the same mean without another pass over the array.
 */
#ifndef PT_TRAIN_GRAD_SYNC_H
#define PT_TRAIN_GRAD_SYNC_H

#include "comm/comm.h"
#include "nn/model.h"

typedef struct {
  size_t lo, hi; /* [lo, hi) of the flat gradient array */
  int low_layer; /* complete once this layer's backward is done */
} pt_bucket;

typedef struct {
  pt_comm *comm;
  float *grad;
  int nbuckets;
  pt_bucket buckets[PT_MAX_LAYERS];
  int bucket_of[PT_MAX_LAYERS]; /* bucket completed by layer i, or -1 */
  int active;                   /* this backward pass communicates */
  pt_status status;             /* the first failure to start a reduction */
  double wait_s;                /* seconds waiting for the reductions after the backward pass */
} pt_grad_sync;

/* Plans the buckets of m's gradients and hooks m's backward pass. */
pt_status pt_grad_sync_init(pt_grad_sync *s, pt_model *m, pt_comm *c, double bucket_mb);
/* Waits until every bucket of this backward pass is reduced. */
pt_status pt_grad_sync_finish(pt_grad_sync *s);

#endif
