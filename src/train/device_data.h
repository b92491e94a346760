/* A dataset kept in the backend's memory, and batches made there.
 *
 * On the CPU this is a pass-through: the loader's batch is the batch. On a
 * GPU the whole split is uploaded once as bytes (60,000 Fashion-MNIST images
 * are 47 MB), and each step uploads only the batch's indices: the device
 * gathers, augments and normalises, drawing every crop and flip from the
 * same (seed, epoch, index) stream as the loader, so a batch is the same
 * batch on either backend. The loader still chooses the order, so sharding,
 * resume and the epoch permutation stay in one place.
 */
#ifndef PT_TRAIN_DEVICE_DATA_H
#define PT_TRAIN_DEVICE_DATA_H

#include <stdint.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "ops/backend.h"

typedef struct {
  const pt_backend *be;
  uint8_t *images, *labels; /* (N, c, h, w), (N): the split, backend memory (GPU only) */
  int32_t *index;           /* (max_batch) the batch's dataset indices */
  float *x;                 /* (max_batch, c, h, w) */
  int32_t *y;               /* (max_batch) */
  double *sums;             /* (2) loss * samples, samples: running sums kept where the loss is */
  int64_t *correct;         /* (1), right after sums in the same allocation */
  int c, h, w, max_batch;
  float mean[3], std[3];
  int crop_pad, hflip;
  uint64_t augment_key;
} pt_device_data;

/* sums and correct are allocated on every backend; the rest on a GPU only.
 * Uploads ds for batches of at most max_batch made as lc says (its
 * normalisation and augmentation; its seed keys the augmentation). */
pt_status pt_device_data_init(pt_device_data *d, const pt_backend *be, const pt_dataset *ds,
                              const pt_loader_config *lc, int max_batch);
void pt_device_data_free(pt_device_data *d);
/* The batch b of epoch in backend memory: b's own arrays on the CPU, the
 * device's copy made from b's indices on a GPU (queued, no wait). */
void pt_device_data_batch(pt_device_data *d, const pt_batch *b, int epoch, const float **x, const int32_t **y);
/* The same in two halves, for a GPU step run as a graph (train/graph_step.c):
 * the upload of b's indices, which a graph cannot hold, and the making of
 * the batch from them, which it can. */
void pt_device_data_upload_index(pt_device_data *d, const pt_batch *b);
void pt_device_data_make(pt_device_data *d, int n, int epoch, const float **x, const int32_t **y);

/* Reads and clears sums and correct (waits for the device). */
pt_status pt_device_data_take_sums(pt_device_data *d, double sums[2], int64_t *correct);

#endif
