/* CIFAR-10 batches (src/data/cifar.c) and loading them from a directory
 * (src/data/dataset.c): record layout, appending, and rejection of bad
 * lengths and labels without disturbing what was already loaded.
 */
#include "fixture.h"
#include "../tmpdir.h"

#include <sys/stat.h>

#include "data/dataset.h"


/* Sample k of ds is record `first + k` of fx_cifar. */
static void check_records(const pt_dataset *ds, int from, int count, uint32_t first) {
  for (int k = 0; k < count; k++) {
    assert_int_equal(ds->labels[from + k], (first + (uint32_t)k) % 10);
    const uint8_t *img = ds->images + (size_t)(from + k) * 3072; /* (3, 32, 32) */
    for (uint32_t j = 0; j < 3072; j++) assert_int_equal(img[j], fx_pixel(first + (uint32_t)k, j));
  }
}

static void test_parse_and_append(void **state) {
  (void)state;
  fx_buf a = fx_cifar(3, 0), b = fx_cifar(2, 100);
  pt_dataset ds = {0};
  assert_int_equal(pt_cifar_parse_batch(a.p, a.n, "a.bin", &ds), PT_OK);
  assert_int_equal(ds.n, 3);
  assert_int_equal(ds.c, 3);
  assert_int_equal(ds.h, 32);
  assert_int_equal(ds.w, 32);
  assert_int_equal(ds.num_classes, 10);
  check_records(&ds, 0, 3, 0);
  assert_int_equal(pt_cifar_parse_batch(b.p, b.n, "b.bin", &ds), PT_OK);
  assert_int_equal(ds.n, 5);
  check_records(&ds, 0, 3, 0);
  check_records(&ds, 3, 2, 100);
  pt_dataset_free(&ds);
  fx_buf_free(&a);
  fx_buf_free(&b);
}

static void expect_reject(pt_dataset *ds, const uint8_t *p, size_t n, const char *sub) {
  int n0 = ds->n;
  uint8_t *img0 = ds->images;
  pt_error_clear();
  assert_int_equal(pt_cifar_parse_batch(p, n, "data_batch_2.bin", ds), PT_ERR_FORMAT);
  assert_error_contains("data_batch_2.bin");
  assert_error_contains(sub);
  assert_int_equal(ds->n, n0);
  assert_ptr_equal(ds->images, img0);
}

static void test_bad_length(void **state) {
  (void)state;
  fx_buf a = fx_cifar(3, 0);
  pt_dataset ds = {0};
  assert_int_equal(pt_cifar_parse_batch(a.p, 3073, "first.bin", &ds), PT_OK);
  size_t lens[] = {0, 1, 3072, 3074, 2 * 3073 + 1, 3 * 3073 - 1};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) expect_reject(&ds, a.p, lens[i], "3073");
  expect_reject(&ds, a.p, 3074, "3074 bytes");
  check_records(&ds, 0, 1, 0);
  pt_dataset_free(&ds);
  fx_buf_free(&a);
}

static void test_bad_label(void **state) {
  (void)state;
  fx_buf a = fx_cifar(3, 0);
  pt_dataset ds = {0};
  assert_int_equal(pt_cifar_parse_batch(a.p, a.n, "first.bin", &ds), PT_OK);
  a.p[1 * 3073] = 10;
  expect_reject(&ds, a.p, a.n, "label at index 1 is 10, expected < 10");
  a.p[1 * 3073] = 255;
  expect_reject(&ds, a.p, a.n, "is 255");
  check_records(&ds, 0, 3, 0);
  pt_dataset_free(&ds);
  fx_buf_free(&a);
}

static void test_append_to_other_shape(void **state) {
  (void)state;
  fx_buf a = fx_cifar(1, 0);
  uint8_t img[4] = {0}, lab[1] = {0};
  pt_dataset ds = {.n = 1, .c = 1, .h = 2, .w = 2, .images = img, .labels = lab};
  assert_int_equal(pt_cifar_parse_batch(a.p, a.n, "x.bin", &ds), PT_ERR_ARG);
  assert_int_equal(ds.n, 1);
  fx_buf_free(&a);
}

/* Writes the five train batches (2, 3, 4, 5, 6 records) and a test batch
 * (4 records) into d. */
static void write_cifar_dir(const char *d) {
  uint32_t first = 0;
  for (int i = 1; i <= 5; i++) {
    char name[32];
    snprintf(name, sizeof name, "data_batch_%d.bin", i);
    fx_buf b = fx_cifar((uint32_t)i + 1, first);
    fx_write_buf(d, name, b, NULL);
    fx_buf_free(&b);
    first += (uint32_t)i + 1;
  }
  fx_buf t = fx_cifar(4, 500);
  fx_write_buf(d, "test_batch.bin", t, NULL);
  fx_buf_free(&t);
}

static void check_loaded(const char *d) {
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 1), PT_OK);
  assert_int_equal(ds.n, 20);
  assert_int_equal(ds.c, 3);
  assert_int_equal(ds.num_classes, 10);
  check_records(&ds, 0, 20, 0);
  pt_dataset_free(&ds);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 0), PT_OK);
  assert_int_equal(ds.n, 4);
  check_records(&ds, 0, 4, 500);
  pt_dataset_free(&ds);
}

static void test_load_dir(void **state) {
  (void)state;
  char d[128];
  snprintf(d, sizeof d, "%s/flat", tmpdir);
  assert_int_equal(mkdir(d, 0755), 0);
  write_cifar_dir(d);
  check_loaded(d);
}

static void test_load_batches_subdir(void **state) {
  (void)state;
  char d[128], sub[192];
  snprintf(d, sizeof d, "%s/nested", tmpdir);
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", d);
  assert_int_equal(mkdir(d, 0755), 0);
  assert_int_equal(mkdir(sub, 0755), 0);
  write_cifar_dir(sub);
  check_loaded(d);
}

static void test_load_missing(void **state) {
  (void)state;
  char d[128];
  snprintf(d, sizeof d, "%s/empty", tmpdir);
  assert_int_equal(mkdir(d, 0755), 0);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 1), PT_ERR_IO);
  assert_error_contains("data_batch_1.bin");
  assert_error_contains("cifar-10-batches-bin");
  char hint[256];
  snprintf(hint, sizeof hint, "ptrain data fetch cifar10 --dir %s", d);
  assert_error_contains(hint);
  assert_null(ds.images);

  /* One batch of five missing. */
  write_cifar_dir(d);
  char p[256];
  snprintf(p, sizeof p, "%s/data_batch_3.bin", d);
  assert_int_equal(unlink(p), 0);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 1), PT_ERR_IO);
  assert_error_contains(p);
  assert_error_contains(hint);
  assert_int_equal(ds.n, 0);
  assert_null(ds.images);

  /* That batch in the other place the archive may unpack to: the batches
   * are split, said as such rather than as an incomplete download. */
  char sub[192], moved[640];
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", d);
  assert_int_equal(mkdir(sub, 0755), 0);
  fx_buf b = fx_cifar(2, 0);
  fx_write(sub, "data_batch_3.bin", b.p, b.n, NULL);
  fx_buf_free(&b);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 1), PT_ERR_IO);
  snprintf(moved, sizeof moved, "%s not found, but %s/data_batch_3.bin is there: the batches are split", p, sub);
  assert_error_contains(moved);
  assert_error_lacks("incomplete download");
}

/* The test batch comes from where data_batch_1.bin is, never from another
 * copy (a stray test_batch.bin of 3 records beside a subdirectory holding
 * the set was once read as the test set); a directory with the test batch
 * alone serves evaluation. */
static void test_test_batch_follows_the_first(void **state) {
  (void)state;
  char d[128], sub[192], p[256];
  snprintf(d, sizeof d, "%s/stray", tmpdir);
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", d);
  assert_int_equal(mkdir(d, 0755), 0);
  assert_int_equal(mkdir(sub, 0755), 0);
  write_cifar_dir(sub);
  fx_buf stray = fx_cifar(3, 900);
  fx_write_buf(d, "test_batch.bin", stray, NULL);
  fx_buf_free(&stray);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 0), PT_OK);
  assert_int_equal(ds.n, 4); /* the subdirectory's, not the stray 3 */
  pt_dataset_free(&ds);
  /* The test batch missing beside data_batch_1.bin, there elsewhere: said. */
  snprintf(p, sizeof p, "%s/test_batch.bin", sub);
  assert_int_equal(unlink(p), 0);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 0), PT_ERR_IO);
  assert_error_contains("the batches are split");
  /* The test batch alone. */
  char only[128];
  snprintf(only, sizeof only, "%s/test-only", tmpdir);
  assert_int_equal(mkdir(only, 0755), 0);
  fx_buf t = fx_cifar(4, 500);
  fx_write_buf(only, "test_batch.bin", t, NULL);
  fx_buf_free(&t);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, only, 0), PT_OK);
  assert_int_equal(ds.n, 4);
  pt_dataset_free(&ds);
}

static void test_load_corrupt_batch(void **state) {
  (void)state;
  char d[128];
  snprintf(d, sizeof d, "%s/corrupt", tmpdir);
  assert_int_equal(mkdir(d, 0755), 0);
  write_cifar_dir(d);
  fx_buf b = fx_cifar(2, 0);
  fx_write(d, "data_batch_4.bin", b.p, b.n - 1, NULL);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_CIFAR10, d, 1), PT_ERR_FORMAT);
  assert_error_contains("data_batch_4.bin");
  assert_error_contains("multiple of 3073");
  assert_int_equal(ds.n, 0);
  assert_null(ds.images);
  assert_null(ds.labels);
  fx_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_and_append),
      cmocka_unit_test(test_bad_length),
      cmocka_unit_test(test_bad_label),
      cmocka_unit_test(test_append_to_other_shape),
      cmocka_unit_test(test_load_dir),
      cmocka_unit_test(test_load_batches_subdir),
      cmocka_unit_test(test_load_missing),
      cmocka_unit_test(test_test_batch_follows_the_first),
      cmocka_unit_test(test_load_corrupt_batch),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
