/* Whole-file reading and gzip decompression (src/data/blob.c).
 *
 * Corrupt and truncated gzip are the cases that matter: a download cut short
 * or a damaged disk must give PT_ERR_FORMAT with the file's name, never a
 * crash, a hang or silently wrong data. The byte-flip sweep checks every
 * position of a small stream; the sanitizer build makes any out-of-bounds
 * access there fatal.
 */
#include "fixture.h"

#include <unistd.h>
#include "../tmpdir.h"

#include "data/blob.h"


/* 20 KB of compressible but not trivial data. */
static fx_buf sample_data(void) {
  fx_buf b = fx_idx_images(20, 32, 32);
  return b;
}

static void test_is_gzip(void **state) {
  (void)state;
  const uint8_t gz[] = {0x1f, 0x8b, 8};
  const uint8_t raw[] = {0x00, 0x00, 0x08, 0x03};
  assert_true(pt_blob_is_gzip(gz, 3));
  assert_false(pt_blob_is_gzip(gz, 1));
  assert_false(pt_blob_is_gzip(raw, 4));
  assert_false(pt_blob_is_gzip(raw, 0));
}

static void test_gunzip_roundtrip(void **state) {
  (void)state;
  fx_buf d = sample_data();
  fx_buf z = fx_gzip(d.p, d.n);
  assert_true(z.n < d.n);
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_gunzip(z.p, z.n, "x.gz", PT_BLOB_MAX_BYTES, &out, &n), PT_OK);
  assert_int_equal(n, d.n);
  assert_memory_equal(out, d.p, d.n);
  free(out);
  fx_buf_free(&z);
  fx_buf_free(&d);
}

/* Payloads far below the first buffer's size, and none at all. */
static void test_gunzip_small_and_empty(void **state) {
  (void)state;
  const uint8_t one = 42;
  fx_buf z = fx_gzip(&one, 1);
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_gunzip(z.p, z.n, "one.gz", 10, &out, &n), PT_OK);
  assert_int_equal(n, 1);
  assert_int_equal(out[0], 42);
  free(out);
  fx_buf_free(&z);

  z = fx_gzip(&one, 0);
  assert_int_equal(pt_blob_gunzip(z.p, z.n, "empty.gz", 10, &out, &n), PT_OK);
  assert_int_equal(n, 0);
  free(out);
  fx_buf_free(&z);
}

static void test_gunzip_multimember(void **state) {
  (void)state;
  fx_buf d = sample_data();
  size_t half = d.n / 2;
  fx_buf a = fx_gzip(d.p, half), b = fx_gzip(d.p + half, d.n - half);
  uint8_t *cat = malloc(a.n + b.n);
  memcpy(cat, a.p, a.n);
  memcpy(cat + a.n, b.p, b.n);
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_gunzip(cat, a.n + b.n, "ab.gz", PT_BLOB_MAX_BYTES, &out, &n), PT_OK);
  assert_int_equal(n, d.n);
  assert_memory_equal(out, d.p, d.n);
  free(out);
  free(cat);
  fx_buf_free(&a);
  fx_buf_free(&b);
  fx_buf_free(&d);
}

static void expect_format(const uint8_t *buf, size_t len, const char *what) {
  uint8_t *out = (uint8_t *)1;
  size_t n = 99;
  pt_error_clear();
  assert_int_equal(pt_blob_gunzip(buf, len, "bad.gz", PT_BLOB_MAX_BYTES, &out, &n), PT_ERR_FORMAT);
  assert_null(out);
  assert_int_equal(n, 0);
  assert_error_contains("bad.gz");
  if (what) assert_error_contains(what);
}

static void test_gunzip_not_gzip(void **state) {
  (void)state;
  const uint8_t raw[] = {0, 0, 8, 3, 0, 0, 0, 1};
  expect_format(raw, sizeof raw, "magic");
}

static void test_gunzip_truncated(void **state) {
  (void)state;
  fx_buf d = sample_data();
  fx_buf z = fx_gzip(d.p, d.n);
  /* Mid-stream, inside the trailer, no trailer at all, header only. */
  size_t cuts[] = {z.n / 2, z.n - 1, z.n - 4, z.n - 8, 10, 2};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) expect_format(z.p, cuts[i], NULL);
  expect_format(z.p, z.n / 2, "truncated");
  fx_buf_free(&z);
  fx_buf_free(&d);
}

static void test_gunzip_corrupt(void **state) {
  (void)state;
  fx_buf d = sample_data();
  fx_buf z = fx_gzip(d.p, d.n);
  /* A byte flipped in the middle of the deflate data, in the CRC, in the
   * length trailer: each must be caught. */
  size_t at[] = {z.n / 2, z.n / 3, z.n - 6, z.n - 2};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    z.p[at[i]] ^= 0xff;
    expect_format(z.p, z.n, NULL);
    z.p[at[i]] ^= 0xff;
  }
  z.p[z.n - 6] ^= 0x01;
  expect_format(z.p, z.n, "corrupt");
  z.p[z.n - 6] ^= 0x01;
  /* Every byte after the 10-byte header: an error or, if the flip happened
   * not to matter, the exact original data; never a crash. */
  int errors = 0;
  for (size_t i = 10; i < z.n; i++) {
    z.p[i] ^= 0x5a;
    uint8_t *out;
    size_t n;
    pt_status st = pt_blob_gunzip(z.p, z.n, "sweep.gz", 1 << 20, &out, &n);
    if (st == PT_OK) {
      assert_int_equal(n, d.n);
      assert_memory_equal(out, d.p, d.n);
      free(out);
    } else {
      assert_int_equal(st, PT_ERR_FORMAT);
      errors++;
    }
    z.p[i] ^= 0x5a;
  }
  assert_true(errors > (int)(z.n - 10) * 9 / 10);
  fx_buf_free(&z);
  fx_buf_free(&d);
}

/* The size trailer is only a hint for the first buffer: one that claims too
 * little (a member of a multi-member file) must grow the buffer, one that
 * claims too much must not size it; both streams are judged by zlib. */
static void test_gunzip_size_hint_ignored(void **state) {
  (void)state;
  fx_buf d = sample_data();
  fx_buf a = fx_gzip(d.p, d.n - 10), b = fx_gzip(d.p + d.n - 10, 10);
  uint8_t *cat = malloc(a.n + b.n);
  memcpy(cat, a.p, a.n);
  memcpy(cat + a.n, b.p, b.n);
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_gunzip(cat, a.n + b.n, "ab.gz", PT_BLOB_MAX_BYTES, &out, &n), PT_OK);
  assert_int_equal(n, d.n);
  assert_memory_equal(out, d.p, d.n);
  free(out);
  /* Claim 4 GB - 1 in the last trailer: rejected by the length check. */
  memset(cat + a.n + b.n - 4, 0xff, 4);
  expect_format(cat, a.n + b.n, "corrupt");
  free(cat);
  fx_buf_free(&a);
  fx_buf_free(&b);
  fx_buf_free(&d);
}

static void test_gunzip_trailing_garbage(void **state) {
  (void)state;
  fx_buf d = sample_data();
  fx_buf z = fx_gzip(d.p, d.n);
  uint8_t *g = malloc(z.n + 3);
  memcpy(g, z.p, z.n);
  memcpy(g + z.n, "abc", 3);
  expect_format(g, z.n + 3, "3 trailing bytes");
  /* A lone 1f after the member is not a second member either. */
  g[z.n] = 0x1f;
  expect_format(g, z.n + 1, "trailing");
  free(g);
  fx_buf_free(&z);
  fx_buf_free(&d);
}

static void test_gunzip_limit(void **state) {
  (void)state;
  fx_buf d = sample_data();
  fx_buf z = fx_gzip(d.p, d.n);
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_gunzip(z.p, z.n, "big.gz", d.n - 1, &out, &n), PT_ERR_FORMAT);
  assert_error_contains("more than");
  assert_null(out);
  /* Exactly at the limit is fine. */
  assert_int_equal(pt_blob_gunzip(z.p, z.n, "big.gz", d.n, &out, &n), PT_OK);
  assert_int_equal(n, d.n);
  free(out);
  fx_buf_free(&z);
  fx_buf_free(&d);
}

static void test_read_plain_and_gz(void **state) {
  (void)state;
  fx_buf d = sample_data();
  char p1[512], p2[512];
  fx_write_buf(tmpdir, "plain.bin", d, p1);
  fx_write_gz(tmpdir, "packed.bin", d, p2); /* no .gz suffix: detected by magic */
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_read(p1, PT_BLOB_MAX_BYTES, &out, &n), PT_OK);
  assert_int_equal(n, d.n);
  assert_memory_equal(out, d.p, d.n);
  free(out);
  assert_int_equal(pt_blob_read(p2, PT_BLOB_MAX_BYTES, &out, &n), PT_OK);
  assert_int_equal(n, d.n);
  assert_memory_equal(out, d.p, d.n);
  free(out);
  assert_int_equal(pt_blob_read(p1, d.n - 1, &out, &n), PT_ERR_FORMAT);
  assert_error_contains(p1);
  fx_buf_free(&d);
  /* A sparse 1 TiB file past the limit: refused by its size, before any of
   * it is read (reading it would need the terabyte). */
  char big[512];
  snprintf(big, sizeof big, "%s/sparse.bin", tmpdir);
  FILE *f = fopen(big, "w");
  assert_non_null(f);
  fclose(f);
  if (truncate(big, (off_t)1 << 40) == 0) {
    assert_int_equal(pt_blob_read(big, PT_BLOB_MAX_BYTES, &out, &n), PT_ERR_FORMAT);
    assert_error_contains("1099511627776 bytes, more than the");
  }
  unlink(big);
}

static void test_read_missing_and_dir(void **state) {
  (void)state;
  char path[600];
  snprintf(path, sizeof path, "%s/nope.bin", tmpdir);
  uint8_t *out;
  size_t n;
  assert_int_equal(pt_blob_read(path, 100, &out, &n), PT_ERR_IO);
  assert_error_contains(path);
  assert_error_contains("No such file");
  assert_int_equal(pt_blob_read(tmpdir, 100, &out, &n), PT_ERR_IO);
  assert_error_contains("not a regular file");
}

static void test_read_empty_file(void **state) {
  (void)state;
  char p[512];
  fx_write(tmpdir, "empty.bin", NULL, 0, p);
  uint8_t *out;
  size_t n = 5;
  assert_int_equal(pt_blob_read(p, 100, &out, &n), PT_OK);
  assert_int_equal(n, 0);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_is_gzip),
      cmocka_unit_test(test_gunzip_roundtrip),
      cmocka_unit_test(test_gunzip_small_and_empty),
      cmocka_unit_test(test_gunzip_multimember),
      cmocka_unit_test(test_gunzip_not_gzip),
      cmocka_unit_test(test_gunzip_truncated),
      cmocka_unit_test(test_gunzip_corrupt),
      cmocka_unit_test(test_gunzip_size_hint_ignored),
      cmocka_unit_test(test_gunzip_trailing_garbage),
      cmocka_unit_test(test_gunzip_limit),
      cmocka_unit_test(test_read_plain_and_gz),
      cmocka_unit_test(test_read_missing_and_dir),
      cmocka_unit_test(test_read_empty_file),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
