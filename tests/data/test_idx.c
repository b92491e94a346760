/* IDX reader (src/data/idx.c): valid files raw and gzipped, and each way a
 * file can be wrong, checking both the status and that the message names the
 * file and what was expected.
 */
#include "fixture.h"
#include "../tmpdir.h"

#include "data/dataset.h"


static void check_images(const pt_dataset *ds, uint32_t n, uint32_t h, uint32_t w) {
  assert_int_equal(ds->n, n);
  assert_int_equal(ds->c, 1);
  assert_int_equal(ds->h, h);
  assert_int_equal(ds->w, w);
  assert_non_null(ds->images);
  for (uint32_t k = 0; k < n; k++)
    for (uint32_t i = 0; i < h * w; i++)
      assert_int_equal(ds->images[(size_t)k * h * w + i], fx_pixel(k, i));
}

static void test_parse_images(void **state) {
  (void)state;
  fx_buf b = fx_idx_images(5, 3, 4);
  pt_dataset ds = {0};
  assert_int_equal(pt_idx_parse_images(b.p, b.n, "img", &ds), PT_OK);
  check_images(&ds, 5, 3, 4);
  pt_dataset_free(&ds);
  assert_null(ds.images);
  fx_buf_free(&b);
}

/* Adopting the file's buffer: the same images, the buffer now the
 * dataset's (freed with it); refused, it stays the caller's to free. */
static void test_adopt_images(void **state) {
  (void)state;
  fx_buf b = fx_idx_images(5, 3, 4);
  pt_dataset ds = {0};
  assert_int_equal(pt_idx_adopt_images(b.p, b.n, "img", &ds), PT_OK);
  check_images(&ds, 5, 3, 4);
  pt_dataset_free(&ds); /* frees what was b.p */
  fx_buf bad = fx_idx_images(5, 3, 4);
  bad.p[3] = 1; /* a labels file's magic */
  assert_int_equal(pt_idx_adopt_images(bad.p, bad.n, "lbl", &ds), PT_ERR_FORMAT);
  assert_null(ds.images);
  fx_buf_free(&bad);
}

static void test_parse_labels(void **state) {
  (void)state;
  fx_buf b = fx_idx_labels(25, 10);
  uint8_t *labels = NULL;
  assert_int_equal(pt_idx_parse_labels(b.p, b.n, "lab", 25, 10, &labels), PT_OK);
  for (int i = 0; i < 25; i++) assert_int_equal(labels[i], i % 10);
  free(labels);
  fx_buf_free(&b);
}

static void test_read_raw_and_gz(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(7, 28, 28), lb = fx_idx_labels(7, 10);
  char pim[512], pimz[512], plb[512], plbz[512];
  fx_write_buf(tmpdir, "raw-images", im, pim);
  fx_write_gz(tmpdir, "raw-images.gz", im, pimz);
  fx_write_buf(tmpdir, "raw-labels", lb, plb);
  fx_write_gz(tmpdir, "raw-labels.gz", lb, plbz);
  const char *ipaths[] = {pim, pimz}, *lpaths[] = {plb, plbz};
  for (int k = 0; k < 2; k++) {
    pt_dataset ds = {0};
    assert_int_equal(pt_idx_read_images(ipaths[k], &ds), PT_OK);
    check_images(&ds, 7, 28, 28);
    assert_int_equal(pt_idx_read_labels(lpaths[k], ds.n, 10, &ds.labels), PT_OK);
    for (int i = 0; i < 7; i++) assert_int_equal(ds.labels[i], i % 10);
    pt_dataset_free(&ds);
  }
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void expect_images_error(fx_buf b, const char *sub1, const char *sub2) {
  pt_dataset ds = {0};
  pt_error_clear();
  assert_int_equal(pt_idx_parse_images(b.p, b.n, "train-images-idx3-ubyte", &ds), PT_ERR_FORMAT);
  assert_null(ds.images);
  assert_error_contains("train-images-idx3-ubyte");
  if (sub1) assert_error_contains(sub1);
  if (sub2) assert_error_contains(sub2);
}

static void expect_labels_error(fx_buf b, int expect_n, const char *sub1, const char *sub2) {
  uint8_t *labels = (uint8_t *)1;
  pt_error_clear();
  assert_int_equal(pt_idx_parse_labels(b.p, b.n, "t10k-labels-idx1-ubyte", expect_n, 10, &labels),
                   PT_ERR_FORMAT);
  assert_null(labels);
  assert_error_contains("t10k-labels-idx1-ubyte");
  if (sub1) assert_error_contains(sub1);
  if (sub2) assert_error_contains(sub2);
}

static void test_bad_magic(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(2, 4, 4), lb = fx_idx_labels(2, 10);
  im.p[3] = 0x04;
  expect_images_error(im, "bad magic 0x00000804", "expected 0x00000803");
  /* A label file given as images says so. */
  expect_images_error(lb, "0x00000801", "label file");
  lb.p[2] = 0x09;
  expect_labels_error(lb, 2, "bad magic 0x00000901", "expected 0x00000801");
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_bad_dims(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(2, 4, 4);
  fx_be32(im.p + 4, 0);
  expect_images_error(im, "image count 0", NULL);
  fx_be32(im.p + 4, 100000001u);
  expect_images_error(im, "image count 100000001", NULL);
  fx_be32(im.p + 4, 2);
  fx_be32(im.p + 8, 0);
  expect_images_error(im, "image size 0x4", NULL);
  fx_be32(im.p + 8, 4);
  fx_be32(im.p + 12, 4097);
  expect_images_error(im, "image size 4x4097", "4096");
  /* Huge dims whose product would overflow 32 bits must not wrap into a
   * plausible length. */
  fx_be32(im.p + 4, 100000000u);
  fx_be32(im.p + 8, 4096);
  fx_be32(im.p + 12, 4096);
  expect_images_error(im, "truncated", NULL);
  fx_buf_free(&im);

  fx_buf lb = fx_idx_labels(3, 10);
  fx_be32(lb.p + 4, 0);
  expect_labels_error(lb, 3, "label count 0", NULL);
  fx_buf_free(&lb);
}

static void test_short_header(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(1, 2, 2);
  for (size_t n = 0; n < 16; n++) {
    fx_buf cut = {im.p, n};
    expect_images_error(cut, "too short", NULL);
  }
  fx_buf lb = fx_idx_labels(1, 10);
  for (size_t n = 0; n < 8; n++) {
    fx_buf cut = {lb.p, n};
    expect_labels_error(cut, 1, "too short", NULL);
  }
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_truncated(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(3, 10, 10); /* 16 + 300 bytes */
  im.n -= 7;
  expect_images_error(im, "truncated", "316 bytes");
  expect_images_error(im, "file has 309 bytes", "3 images");
  fx_buf lb = fx_idx_labels(50, 10); /* 58 bytes */
  lb.n = 20;
  expect_labels_error(lb, 50, "truncated", "58 bytes");
  expect_labels_error(lb, 50, "file has 20 bytes", NULL);
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_trailing_bytes(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(3, 10, 10);
  fx_buf longer = {malloc(im.n + 5), im.n + 5};
  memcpy(longer.p, im.p, im.n);
  memset(longer.p + im.n, 0, 5);
  expect_images_error(longer, "5 trailing bytes", "316 bytes");
  fx_buf_free(&longer);
  fx_buf lb = fx_idx_labels(4, 10);
  longer.p = malloc(lb.n + 1);
  longer.n = lb.n + 1;
  memcpy(longer.p, lb.p, lb.n);
  longer.p[lb.n] = 1;
  expect_labels_error(longer, 4, "1 trailing bytes", NULL);
  fx_buf_free(&longer);
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_label_count_mismatch(void **state) {
  (void)state;
  fx_buf lb = fx_idx_labels(5, 10);
  expect_labels_error(lb, 6, "5 labels, expected 6", NULL);
  expect_labels_error(lb, 4, "5 labels, expected 4", NULL);
  fx_buf_free(&lb);
}

static void test_label_out_of_range(void **state) {
  (void)state;
  fx_buf lb = fx_idx_labels(20, 10);
  lb.p[8 + 12] = 11;
  expect_labels_error(lb, 20, "label at index 12 is 11, expected < 10", NULL);
  lb.p[8 + 12] = 9; /* the largest class is fine */
  uint8_t *labels;
  assert_int_equal(pt_idx_parse_labels(lb.p, lb.n, "l", 20, 10, &labels), PT_OK);
  free(labels);
  /* Fewer classes make the same file invalid. */
  assert_int_equal(pt_idx_parse_labels(lb.p, lb.n, "l", 20, 9, &labels), PT_ERR_FORMAT);
  assert_error_contains("is 9, expected < 9");
  fx_buf_free(&lb);
}

static void test_label_bad_args(void **state) {
  (void)state;
  fx_buf lb = fx_idx_labels(2, 10);
  uint8_t *labels;
  assert_int_equal(pt_idx_parse_labels(lb.p, lb.n, "l", 0, 10, &labels), PT_ERR_ARG);
  assert_int_equal(pt_idx_parse_labels(lb.p, lb.n, "l", 2, 0, &labels), PT_ERR_ARG);
  assert_int_equal(pt_idx_parse_labels(lb.p, lb.n, "l", 2, 257, &labels), PT_ERR_ARG);
  fx_buf_free(&lb);
}

static void test_read_errors_name_path(void **state) {
  (void)state;
  char path[512];
  fx_buf im = fx_idx_images(4, 5, 5);
  im.n -= 1;
  fx_write_gz(tmpdir, "short-images.gz", im, path);
  pt_dataset ds = {0};
  assert_int_equal(pt_idx_read_images(path, &ds), PT_ERR_FORMAT);
  assert_error_contains(path);
  assert_error_contains("truncated");
  assert_null(ds.images);

  fx_buf lb = fx_idx_labels(4, 10);
  lb.p[8 + 2] = 200;
  fx_write_gz(tmpdir, "t10k-labels-idx1-ubyte.gz", lb, path);
  uint8_t *labels;
  assert_int_equal(pt_idx_read_labels(path, 4, 10, &labels), PT_ERR_FORMAT);
  assert_error_contains("t10k-labels-idx1-ubyte.gz: label at index 2 is 200, expected < 10");

  snprintf(path, sizeof path, "%s/absent-idx3-ubyte", tmpdir);
  assert_int_equal(pt_idx_read_images(path, &ds), PT_ERR_IO);
  assert_error_contains(path);
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_read_corrupt_gz(void **state) {
  (void)state;
  fx_buf im = fx_idx_images(30, 28, 28);
  fx_buf z = fx_gzip(im.p, im.n);
  char path[512];
  /* Flipped bytes in the deflate stream. */
  for (size_t at = z.n / 4; at < z.n - 8; at += z.n / 4) {
    z.p[at] ^= 0xa5;
    z.p[at + 1] ^= 0x3c;
    fx_write(tmpdir, "corrupt-images.gz", z.p, z.n, path);
    pt_dataset ds = {0};
    pt_error_clear();
    assert_int_equal(pt_idx_read_images(path, &ds), PT_ERR_FORMAT);
    assert_error_contains(path);
    assert_null(ds.images);
    z.p[at] ^= 0xa5;
    z.p[at + 1] ^= 0x3c;
  }
  /* Truncated .gz: half, and all but the last byte. */
  size_t cuts[] = {z.n / 2, z.n - 1};
  for (int i = 0; i < 2; i++) {
    fx_write(tmpdir, "cut-images.gz", z.p, cuts[i], path);
    pt_dataset ds = {0};
    assert_int_equal(pt_idx_read_images(path, &ds), PT_ERR_FORMAT);
    assert_error_contains(path);
    assert_null(ds.images);
  }
  fx_write(tmpdir, "cut-images.gz", z.p, z.n / 2, path);
  pt_dataset ds = {0};
  assert_int_equal(pt_idx_read_images(path, &ds), PT_ERR_FORMAT);
  assert_error_contains("truncated gzip");
  fx_buf_free(&z);
  fx_buf_free(&im);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_images),
      cmocka_unit_test(test_adopt_images),
      cmocka_unit_test(test_parse_labels),
      cmocka_unit_test(test_read_raw_and_gz),
      cmocka_unit_test(test_bad_magic),
      cmocka_unit_test(test_bad_dims),
      cmocka_unit_test(test_short_header),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_trailing_bytes),
      cmocka_unit_test(test_label_count_mismatch),
      cmocka_unit_test(test_label_out_of_range),
      cmocka_unit_test(test_label_bad_args),
      cmocka_unit_test(test_read_errors_name_path),
      cmocka_unit_test(test_read_corrupt_gz),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
