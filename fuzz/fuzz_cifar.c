/* libFuzzer target for the CIFAR-10 batch parser.
 *
 * The input is parsed twice into the same dataset so the append path (realloc
 * of a non-empty dataset, and rejection that must leave it intact) is fuzzed
 * as well as the first batch; every stored label is then checked.
 */
#include <stdint.h>
#include <stdlib.h>

#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pt_dataset ds = {0};
  for (int pass = 0; pass < 2; pass++) {
    int before = ds.n;
    pt_status st = pt_cifar_parse_batch(data, size, "fuzz", &ds);
    if (st != PT_OK && ds.n != before) abort();
    if (st == PT_OK && (size_t)(ds.n - before) * 3073 != size) abort();
  }
  for (int i = 0; i < ds.n; i++)
    if (ds.labels[i] >= 10) abort();
  if (ds.n > 0) {
    volatile uint8_t last = ds.images[(size_t)ds.n * 3072 - 1];
    (void)last;
  }
  free(ds.images);
  free(ds.labels);
  return 0;
}
