/* pt_data: one split of a dataset, from the readers or the caller's arrays. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

pt_status pt_data_load(const char *name, const char *dir, int split, pt_data **out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_data_load: out is NULL");
  *out = NULL;
  if (split != PT_TRAIN && split != PT_TEST)
    return pt_fail(PT_ERR_ARG, "pt_data_load: split %d, expected PT_TRAIN (1) or PT_TEST (0)", split);
  if (!name)
    return pt_fail(PT_ERR_ARG, "pt_data_load: name is NULL; expected \"mnist\", \"fashion-mnist\" or \"cifar10\"");
  /* "" would be searched as the root: "tried /train-images-idx3-ubyte". */
  if (dir && !dir[0])
    return pt_fail(PT_ERR_ARG, "pt_data_load: empty dir: expected the dataset's directory, or NULL for the default");
  pt_dataset_kind kind;
  PT_TRY(pt_dataset_kind_parse(name, &kind));
  pt_data *d = calloc(1, sizeof *d);
  if (!d) return pt_fail(PT_ERR_NOMEM, "out of memory for a dataset");
  d->kind = (int)kind;
  if (!dir) dir = pt_dataset_default_dir(kind);
  pt_status st = pt_dataset_load(&d->ds, kind, dir, split == PT_TRAIN);
  if (st == PT_OK && !(d->dir = strdup(dir))) st = pt_fail(PT_ERR_NOMEM, "out of memory");
  if (st != PT_OK) {
    pt_dataset_free(&d->ds);
    free(d);
    return st;
  }
  *out = d;
  return PT_OK;
}

pt_status pt_data_from_arrays(const uint8_t *images, const uint8_t *labels, int n, int c, int h, int w, int classes,
                              pt_data **out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_data_from_arrays: out is NULL");
  *out = NULL;
  if (!images || !labels) return pt_fail(PT_ERR_ARG, "pt_data_from_arrays: images or labels is NULL");
  if (n < 1 || c < 1 || h < 1 || w < 1 || c > 3 || h > 4096 || w > 4096)
    return pt_fail(PT_ERR_ARG, "pt_data_from_arrays: %d images of %dx%dx%d; expected at least 1 image of 1 to 3 "
                               "channels and sides of 1 to 4096", n, c, h, w);
  if (classes < 2 || classes > 256)
    return pt_fail(PT_ERR_ARG, "pt_data_from_arrays: %d classes, expected 2 to 256", classes);
  for (int i = 0; i < n; i++)
    if (labels[i] >= classes)
      return pt_fail(PT_ERR_ARG, "pt_data_from_arrays: label %d of image %d is not below the %d classes", labels[i], i,
                     classes);
  const size_t bytes = (size_t)n * c * h * w;
  pt_data *d = calloc(1, sizeof *d);
  uint8_t *im = malloc(bytes), *lb = malloc((size_t)n);
  if (!d || !im || !lb) {
    free(d);
    free(im);
    free(lb);
    return pt_fail(PT_ERR_NOMEM, "out of memory for %zu bytes of images", bytes);
  }
  memcpy(im, images, bytes);
  memcpy(lb, labels, (size_t)n);
  d->kind = -1;
  d->ds = (pt_dataset){.n = n, .c = c, .h = h, .w = w, .num_classes = classes, .images = im, .labels = lb};
  *out = d;
  return PT_OK;
}

void pt_data_free(pt_data *data) {
  if (!data) return;
  pt_dataset_free(&data->ds);
  free(data->dir);
  free(data);
}

int pt_data_count(const pt_data *data) { return data ? data->ds.n : 0; }

const char *pt_data_class_name(const pt_data *data, int label) {
  if (!data || data->kind < 0) return NULL;
  return pt_dataset_class_name((pt_dataset_kind)data->kind, label);
}
