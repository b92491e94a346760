/* IDX files (LeCun's MNIST format, also used by Fashion-MNIST).
 *
 * Layout: a big-endian 32-bit magic 0x000008TD, where T = 08 is the unsigned
 * byte element type and D the number of dimensions, then D big-endian 32-bit
 * sizes, then the elements row-major. Only the two shapes the datasets use
 * are accepted: images (D = 3: n, h, w) and labels (D = 1: n).
 *
 * The header is untrusted: every size is checked against sane limits before
 * any arithmetic, and the file length must equal the header's claim exactly,
 * since a short file (interrupted download) and a long one (wrong file
 * concatenated) are both signs the data is not what the header describes.
 * Sizes are computed in 64 bits, where 100M * 4096 * 4096 cannot overflow.
 */
#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

#include "data/blob.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_MAX_N 100000000u
#define IDX_MAX_SIDE 4096u

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *magic_hint(uint32_t magic) {
  if (magic == IDX_IMAGES_MAGIC) return " (this is an image file)";
  if (magic == IDX_LABELS_MAGIC) return " (this is a label file)";
  if ((magic >> 16) == 0x1f8b) return " (gzip data: decompress first)";
  return "";
}

/* Exact-length check shared by both shapes; what names the elements. */
static pt_status check_length(const char *name, size_t len, uint64_t expect, uint32_t n,
                              const char *what) {
  if (len < expect)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: truncated: header promises %u %s (%llu bytes), file has %zu bytes", name,
                   n, what, (unsigned long long)expect, len);
  if (len > expect)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %llu trailing bytes: header promises %u %s (%llu bytes), file has %zu "
                   "bytes",
                   name, (unsigned long long)(len - expect), n, what,
                   (unsigned long long)expect, len);
  return PT_OK;
}

/* The header of an IDX image file: its count and sides, checked against
 * the bytes there are. */
static pt_status image_header(const uint8_t *buf, size_t len, const char *name, uint32_t *n, uint32_t *h,
                              uint32_t *w) {
  /* Magic before length, so a label file passed as images says so. */
  if (len >= 4 && be32(buf) != IDX_IMAGES_MAGIC)
    return pt_fail(PT_ERR_FORMAT, "%s: bad magic 0x%08x, expected 0x%08x (IDX images)%s", name,
                   be32(buf), IDX_IMAGES_MAGIC, magic_hint(be32(buf)));
  if (len < 16)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %zu bytes is too short for an IDX image header (expected 16)", name, len);
  *n = be32(buf + 4), *h = be32(buf + 8), *w = be32(buf + 12);
  if (*n == 0 || *n > IDX_MAX_N)
    return pt_fail(PT_ERR_FORMAT, "%s: image count %u, expected 1..%u", name, *n, IDX_MAX_N);
  if (*h == 0 || *h > IDX_MAX_SIDE || *w == 0 || *w > IDX_MAX_SIDE)
    return pt_fail(PT_ERR_FORMAT, "%s: image size %ux%u, expected sides in 1..%u", name, *h, *w,
                   IDX_MAX_SIDE);
  return check_length(name, len, 16 + (uint64_t)*n * *h * *w, *n, "images");
}

static void set_images(pt_dataset *ds, uint8_t *images, uint32_t n, uint32_t h, uint32_t w) {
  ds->n = (int)n;
  ds->c = 1;
  ds->h = (int)h;
  ds->w = (int)w;
  ds->images = images;
}

pt_status pt_idx_parse_images(const uint8_t *buf, size_t len, const char *name, pt_dataset *ds) {
  uint32_t n = 0, h = 0, w = 0;
  PT_TRY(image_header(buf, len, name, &n, &h, &w));
  const size_t pixels = (size_t)n * h * w;
  uint8_t *images = pt_malloc(pixels); /* (n, 1, h, w) */
  if (!images) return pt_wrap(PT_ERR_NOMEM, "%s", name);
  memcpy(images, buf + 16, pixels);
  set_images(ds, images, n, h, w);
  return PT_OK;
}

pt_status pt_idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int expect_n,
                              int num_classes, uint8_t **labels) {
  *labels = NULL;
  if (expect_n <= 0)
    return pt_fail(PT_ERR_ARG, "%s: expected label count %d, must be positive", name, expect_n);
  if (num_classes < 1 || num_classes > 256)
    return pt_fail(PT_ERR_ARG, "%s: num_classes %d, expected 1..256", name, num_classes);
  if (len >= 4 && be32(buf) != IDX_LABELS_MAGIC)
    return pt_fail(PT_ERR_FORMAT, "%s: bad magic 0x%08x, expected 0x%08x (IDX labels)%s", name,
                   be32(buf), IDX_LABELS_MAGIC, magic_hint(be32(buf)));
  if (len < 8)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %zu bytes is too short for an IDX label header (expected 8)", name, len);
  uint32_t n = be32(buf + 4);
  if (n == 0 || n > IDX_MAX_N)
    return pt_fail(PT_ERR_FORMAT, "%s: label count %u, expected 1..%u", name, n, IDX_MAX_N);
  PT_TRY(check_length(name, len, 8 + (uint64_t)n, n, "labels"));
  /* After the length check, so a truncated file reports truncation rather
   * than a count that merely reflects a different file. */
  if (n != (uint32_t)expect_n)
    return pt_fail(PT_ERR_FORMAT, "%s: %u labels, expected %d (one per image)", name, n,
                   expect_n);

  const uint8_t *src = buf + 8; /* (n) */
  for (uint32_t i = 0; i < n; i++)
    if (src[i] >= num_classes)
      return pt_fail(PT_ERR_FORMAT, "%s: label at index %u is %u, expected < %d", name, i,
                     (unsigned)src[i], num_classes);
  uint8_t *out = pt_malloc(n);
  if (!out) return pt_wrap(PT_ERR_NOMEM, "%s", name);
  memcpy(out, src, n);
  *labels = out;
  return PT_OK;
}

/* The file's own buffer becomes the images, moved past the header: a
 * copy would hold the split twice at the peak (8 GB for a gzipped file of
 * 4 GB of pixels, the size limit). */
pt_status pt_idx_adopt_images(uint8_t *buf, size_t len, const char *name, pt_dataset *ds) {
  uint32_t n = 0, h = 0, w = 0;
  PT_TRY(image_header(buf, len, name, &n, &h, &w));
  const size_t pixels = (size_t)n * h * w;
  memmove(buf, buf + 16, pixels);
  uint8_t *images = realloc(buf, pixels); /* smaller: NULL only where buf stays as it is */
  set_images(ds, images ? images : buf, n, h, w);
  return PT_OK;
}

pt_status pt_idx_read_images(const char *path, pt_dataset *ds) {
  uint8_t *buf;
  size_t len;
  PT_TRY(pt_blob_read(path, PT_BLOB_MAX_BYTES, &buf, &len));
  const pt_status st = pt_idx_adopt_images(buf, len, path, ds);
  if (st != PT_OK) free(buf);
  return st;
}

pt_status pt_idx_read_labels(const char *path, int expect_n, int num_classes, uint8_t **labels) {
  *labels = NULL;
  uint8_t *buf;
  size_t len;
  PT_TRY(pt_blob_read(path, PT_BLOB_MAX_BYTES, &buf, &len));
  pt_status st = pt_idx_parse_labels(buf, len, path, expect_n, num_classes, labels);
  free(buf);
  return st;
}
