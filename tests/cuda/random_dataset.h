/* A dataset of random bytes for the tests that check batches made from it
 * (test_draws, test_ops): n images (c, h, w) and labels of 10 classes, all
 * drawn in order from one pt_rng stream (key, c0), so a test names its
 * data by those two numbers. Free it with pt_dataset_free. Include after
 * cmocka.h. */
#ifndef PT_TESTS_CUDA_RANDOM_DATASET_H
#define PT_TESTS_CUDA_RANDOM_DATASET_H

#include <stdint.h>
#include <stdlib.h>

#include "data/dataset.h"
#include "util/philox.h"

static inline pt_dataset random_dataset(int n, int c, int h, int w, uint64_t key, uint64_t c0) {
  pt_dataset ds = {.n = n, .c = c, .h = h, .w = w, .num_classes = 10};
  const size_t bytes = (size_t)c * h * w * (size_t)n;
  ds.images = malloc(bytes);
  ds.labels = malloc((size_t)n);
  assert_non_null(ds.images);
  assert_non_null(ds.labels);
  pt_rng r;
  pt_rng_init(&r, key, c0);
  for (size_t i = 0; i < bytes; i++) ds.images[i] = (uint8_t)pt_rng_below(&r, 256);
  for (int i = 0; i < n; i++) ds.labels[i] = (uint8_t)pt_rng_below(&r, 10);
  return ds;
}

#endif
