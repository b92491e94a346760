/* Batches for training and evaluation, prepared one ahead on a worker thread.
 *
 * The order of samples is a function of (seed, epoch) alone, and augmentation of
 * (seed, epoch, sample index), so a run is reproducible whatever the thread
 * timing, and resuming at batch b of an epoch yields the same batches as an
 * uninterrupted run. Sharding (rank, world) follows PyTorch's DistributedSampler:
 * the permuted index list is padded (by wrapping) to a multiple of world, or its
 * tail dropped, and rank r takes positions r, r+world, r+2*world, ...
 */
#ifndef PT_DATA_LOADER_H
#define PT_DATA_LOADER_H

#include <stdint.h>
#include "data/dataset.h"

typedef struct {
  int batch_size;
  int shuffle;        /* reshuffle each epoch */
  int drop_last;      /* drop the last incomplete batch (and the shard tail) */
  uint64_t seed;
  int rank, world;    /* 0, 1 for a single process */
  int uneven;         /* evaluation: no padding, no dropping; shards differ by at most
                         one sample, so across ranks every sample counts exactly once */
  /* Normalisation per channel after scaling to [0, 1]: (x/255 - mean) / std. */
  float mean[3], std[3];
  /* Augmentation (training only): random crop of the original size after
   * zero-padding by crop_pad (0 = off), horizontal flip with p = 0.5 (0 = off). */
  int crop_pad;
  int hflip;
  int prefetch;       /* 1: prepare the next batch on a worker thread */
  /* Without prefetch: runs fn(ctx, tid, n) on n threads of the caller's
   * (the trainer's pool, pt_parallel), which then prepare a batch's
   * samples in n shares; NULL: the caller's thread alone. The batch is the
   * same either way. */
  void (*parallel)(void (*fn)(void *ctx, int tid, int nthreads), void *ctx);
  int indices_only;   /* fill index and y but not x: a GPU makes the images itself */
} pt_loader_config;

typedef struct {
  int n;          /* samples in this batch (<= batch_size) */
  float *x;       /* (n, c, h, w), normalised (not filled with indices_only) */
  int32_t *y;     /* (n) */
  int32_t *index; /* (n) dataset indices, for tests */
} pt_batch;

typedef struct pt_loader pt_loader;

pt_status pt_loader_create(pt_loader **out, const pt_dataset *ds, const pt_loader_config *cfg);
void pt_loader_destroy(pt_loader *l);
/* Batches per epoch for this rank. */
int pt_loader_num_batches(const pt_loader *l);
/* Samples per epoch for this rank (after padding/dropping). */
int pt_loader_num_samples(const pt_loader *l);
/* Starts an epoch (0-based) at batch start_batch (for resume). */
pt_status pt_loader_start_epoch(pt_loader *l, int epoch, int start_batch);
/* The next batch; *batch stays valid until the next call. Returns PT_OK with
 * batch->n == 0 at the end of the epoch. */
pt_status pt_loader_next(pt_loader *l, pt_batch *batch);
/* Seconds the caller spent blocked in pt_loader_next waiting for data. */
double pt_loader_wait_seconds(const pt_loader *l);

#endif
