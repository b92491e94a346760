/* CIFAR-10 binary batches.
 *
 * A batch file is a bare sequence of 3073-byte records: one label byte, then
 * a 3x32x32 image stored channel-major (1024 red, 1024 green, 1024 blue bytes,
 * each plane row-major), which is already the (c, h, w) layout the dataset
 * keeps, so a record's pixels are copied as they are. There is no header, so
 * the length being a positive multiple of the record size and every label
 * being a class are the only checks possible.
 *
 * The whole batch is validated before the dataset grows, so a bad file leaves
 * ds exactly as it was: the caller frees one consistent dataset either way.
 */
#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

#define CIFAR_C 3
#define CIFAR_HW 32
#define CIFAR_PIXELS (CIFAR_C * CIFAR_HW * CIFAR_HW)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10

pt_status pt_cifar_parse_batch(const uint8_t *buf, size_t len, const char *name, pt_dataset *ds) {
  if (len == 0 || len % CIFAR_RECORD != 0)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %zu bytes, expected a positive multiple of %d (1 label + 3x32x32 pixels "
                   "per record)",
                   name, len, CIFAR_RECORD);
  if (ds->n > 0 && (ds->c != CIFAR_C || ds->h != CIFAR_HW || ds->w != CIFAR_HW))
    return pt_fail(PT_ERR_ARG, "%s: cannot append 3x32x32 images to a dataset of %dx%dx%d", name,
                   ds->c, ds->h, ds->w);
  size_t m = len / CIFAR_RECORD;
  size_t old_n = ds->n > 0 ? (size_t)ds->n : 0;
  if (m > (size_t)INT32_MAX - old_n)
    return pt_fail(PT_ERR_FORMAT, "%s: %zu records would make the dataset too large", name, m);
  for (size_t i = 0; i < m; i++) {
    uint8_t label = buf[i * CIFAR_RECORD];
    if (label >= CIFAR_CLASSES)
      return pt_fail(PT_ERR_FORMAT, "%s: label at index %zu is %u, expected < %d", name, i,
                     (unsigned)label, CIFAR_CLASSES);
  }

  size_t n = old_n + m;
  /* Images first: if labels then fail to grow, ds is still consistent (n
   * unchanged, images merely over-allocated). */
  uint8_t *images = realloc(ds->images, n * CIFAR_PIXELS); /* (n, 3, 32, 32) */
  if (!images) return pt_fail(PT_ERR_NOMEM, "%s: out of memory for %zu images", name, n);
  ds->images = images;
  uint8_t *labels = realloc(ds->labels, n); /* (n) */
  if (!labels) return pt_fail(PT_ERR_NOMEM, "%s: out of memory for %zu labels", name, n);
  ds->labels = labels;

  for (size_t i = 0; i < m; i++) {
    const uint8_t *rec = buf + i * CIFAR_RECORD;
    labels[old_n + i] = rec[0];
    memcpy(images + (old_n + i) * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
  }
  ds->n = (int)n;
  ds->c = CIFAR_C;
  ds->h = CIFAR_HW;
  ds->w = CIFAR_HW;
  ds->num_classes = CIFAR_CLASSES;
  return PT_OK;
}
