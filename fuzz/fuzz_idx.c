/* libFuzzer target for the IDX readers and the gzip layer under them.
 *
 * The first input byte picks the path, the rest is the file: 0/1 parse images
 * or labels directly, 2/3 gunzip first (as pt_idx_read_* does for .gz files)
 * and then parse. Labels are checked against the count the header itself
 * claims, so the fuzzer can get past the count check to the label values.
 * Decompression is capped at 16 MB so a small input cannot make the target
 * allocate gigabytes, which libFuzzer would report as a leak of time, not a bug.
 */
#include <stdint.h>
#include <stdlib.h>

#include "data/blob.h"
#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse(int labels, const uint8_t *buf, size_t len) {
  if (!labels) {
    pt_dataset ds = {0};
    if (pt_idx_parse_images(buf, len, "fuzz", &ds) == PT_OK) {
      /* Touch the last pixel: the claimed size must really be there. */
      volatile uint8_t last = ds.images[(size_t)ds.n * ds.h * ds.w - 1];
      (void)last;
    }
    pt_dataset_free(&ds);
    return;
  }
  int n = 1;
  if (len >= 8) {
    uint32_t claimed = (uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7];
    n = claimed == 0 || claimed > INT32_MAX ? 1 : (int)claimed;
  }
  uint8_t *out = NULL;
  if (pt_idx_parse_labels(buf, len, "fuzz", n, 10, &out) == PT_OK) {
    for (int i = 0; i < n; i++)
      if (out[i] >= 10) abort();
  }
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] & 3;
  data++;
  size--;
  if (mode < 2) {
    parse(mode, data, size);
    return 0;
  }
  uint8_t *raw = NULL;
  size_t len = 0;
  if (pt_blob_gunzip(data, size, "fuzz.gz", (size_t)16 << 20, &raw, &len) == PT_OK)
    parse(mode - 2, raw, len);
  free(raw);
  return 0;
}
