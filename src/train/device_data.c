#include "train/device_data.h"

#include <string.h>

#include "util/philox.h"

pt_status pt_device_data_init(pt_device_data *d, const pt_backend *be, const pt_dataset *ds,
                              const pt_loader_config *lc, int max_batch) {
  memset(d, 0, sizeof *d);
  d->be = be;
  /* sums and correct side by side: one download reads both, so a read
   * of the loss empties the GPU's queue once, not twice. */
  if (!(d->sums = be->alloc(3 * sizeof(double)))) return PT_ERR_NOMEM;
  d->correct = (int64_t *)(d->sums + 2);
  if (be->kind == PT_BACKEND_CPU) return PT_OK;
  if (!be->make_batch) return pt_fail(PT_ERR_STATE, "the %s backend cannot make batches on the device", be->name);
  d->c = ds->c;
  d->h = ds->h;
  d->w = ds->w;
  d->max_batch = max_batch;
  memcpy(d->mean, lc->mean, sizeof d->mean);
  memcpy(d->std, lc->std, sizeof d->std);
  d->crop_pad = lc->crop_pad;
  d->hflip = lc->hflip;
  d->augment_key = pt_rng_key(lc->seed, PT_RNG_AUGMENT);
  const size_t img = (size_t)ds->c * ds->h * ds->w;
  if (!(d->images = be->alloc(img * (size_t)ds->n)) || !(d->labels = be->alloc((size_t)ds->n)) ||
      !(d->index = be->alloc(sizeof(int32_t) * (size_t)max_batch)) ||
      !(d->x = be->alloc(sizeof(float) * img * (size_t)max_batch)) ||
      !(d->y = be->alloc(sizeof(int32_t) * (size_t)max_batch))) {
    pt_device_data_free(d);
    return pt_wrap(PT_ERR_NOMEM, "keeping the dataset (%d images) in %s memory", ds->n, be->name);
  }
  be->upload(d->images, ds->images, img * (size_t)ds->n);
  be->upload(d->labels, ds->labels, (size_t)ds->n);
  return be->sync();
}

void pt_device_data_free(pt_device_data *d) {
  if (d->be) {
    d->be->free(d->sums); /* correct with it */
  }
  if (d->be && d->be->kind != PT_BACKEND_CPU) {
    d->be->free(d->images);
    d->be->free(d->labels);
    d->be->free(d->index);
    d->be->free(d->x);
    d->be->free(d->y);
  }
  memset(d, 0, sizeof *d);
}

void pt_device_data_batch(pt_device_data *d, const pt_batch *b, int epoch, const float **x, const int32_t **y) {
  if (d->be->kind == PT_BACKEND_CPU) {
    *x = b->x;
    *y = b->y;
    return;
  }
  pt_device_data_upload_index(d, b);
  pt_device_data_make(d, b->n, epoch, x, y);
}

void pt_device_data_upload_index(pt_device_data *d, const pt_batch *b) {
  d->be->upload(d->index, b->index, sizeof(int32_t) * (size_t)b->n);
}

void pt_device_data_make(pt_device_data *d, int n, int epoch, const float **x, const int32_t **y) {
  d->be->make_batch(d->images, d->labels, d->c, d->h, d->w, d->index, n, d->mean, d->std, d->crop_pad, d->hflip,
                    d->augment_key, epoch, d->x, d->y);
  *x = d->x;
  *y = d->y;
}

pt_status pt_device_data_take_sums(pt_device_data *d, double sums[2], int64_t *correct) {
  unsigned char both[3 * sizeof(double)];
  PT_TRY(d->be->download(both, d->sums, sizeof both));
  memcpy(sums, both, 2 * sizeof(double));
  memcpy(correct, both + 2 * sizeof(double), sizeof *correct);
  d->be->zero(d->sums, sizeof both);
  return PT_OK;
}
