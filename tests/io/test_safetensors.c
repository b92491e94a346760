/* safetensors reader and writer.
 *
 * Round trips cover every dtype, a 0-d scalar, an empty tensor and metadata.
 * Malformed inputs are built by hand (length prefix + header text + data) so
 * each test breaks exactly one rule, and each asserts not only the status but
 * that the message names the file and the offending tensor: the message is
 * what a user sees.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"

#include "../tmpdir.h"


static void path_in_tmp(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", tmpdir, name);
}

/* Length prefix + header + data, as a malloc'ed buffer. */
static uint8_t *make_file(const char *header, const void *data, size_t data_len, size_t *len) {
  size_t n = strlen(header);
  *len = 8 + n + data_len;
  uint8_t *buf = malloc(*len);
  assert_non_null(buf);
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(buf + 8, header, n);
  if (data_len) memcpy(buf + 8 + n, data, data_len);
  return buf;
}

/* Parses header + data_len zero bytes, expects PT_ERR_FORMAT with a message
 * containing the file name and every NULL-terminated substring given. */
static void expect_bad(const char *header, size_t data_len, ...) {
  uint8_t zeros[256] = {0};
  assert_true(data_len <= sizeof zeros);
  size_t len;
  uint8_t *buf = make_file(header, zeros, data_len, &len);
  pt_st_file f;
  pt_error_clear();
  pt_status st = pt_st_parse(buf, len, "bad.safetensors", &f);
  free(buf);
  const char *msg = pt_error_message();
  if (st != PT_ERR_FORMAT) fail_msg("header %s: status %d (%s), expected PT_ERR_FORMAT", header, st, msg);
  assert_null(f.buf);
  assert_int_equal(f.count, 0);
  assert_non_null(strstr(msg, "bad.safetensors"));
  va_list ap;
  va_start(ap, data_len);
  for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
    if (!strstr(msg, s)) fail_msg("message \"%s\" lacks \"%s\"", msg, s);
  va_end(ap);
  pt_st_free(&f); /* must be harmless after a failed parse */
}

static void test_round_trip(void **state) {
  (void)state;
  float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7e20f};
  double f64[4] = {0.1, -INFINITY, 3.0, 2.5}; /* an infinity stays one (a finite value past float is refused) */
  int64_t i64[4] = {INT64_MIN, -1, 0, (int64_t)1 << 40};
  int32_t i32[3] = {INT32_MAX, -5, 7};
  uint8_t u8[5] = {0, 1, 127, 128, 255};
  float scalar = 42.0f;
  int64_t s23[2] = {2, 3}, s4[1] = {4}, s22[2] = {2, 2}, s3[1] = {3}, s5[1] = {5}, s03[2] = {0, 3};

  pt_st_writer *w = pt_st_writer_new();
  assert_non_null(w);
  /* U8 first so the writer's alignment-ordering actually has work to do. */
  assert_int_equal(pt_st_writer_add(w, "bytes", PT_ST_U8, 1, s5, u8), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "layer.weight", PT_ST_F32, 2, s23, f32), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "doubles", PT_ST_F64, 1, s4, f64), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "longs", PT_ST_I64, 2, s22, i64), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "ints", PT_ST_I32, 1, s3, i32), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "step", PT_ST_F32, 0, NULL, &scalar), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "empty", PT_ST_F32, 2, s03, NULL), PT_OK);
  assert_int_equal(pt_st_writer_meta(w, "format", "pt"), PT_OK);
  assert_int_equal(pt_st_writer_meta(w, "note", "quote \" backslash \\ newline \n done"), PT_OK);
  assert_int_equal(pt_st_writer_meta(w, "format", "pt2"), PT_OK); /* replaces */
  char path[128];
  path_in_tmp(path, sizeof path, "model.safetensors");
  assert_int_equal(pt_st_writer_write(w, path), PT_OK);
  pt_st_writer_free(w);

  pt_st_file f;
  if (pt_st_read(path, &f) != PT_OK) fail_msg("%s", pt_error_message());
  assert_int_equal(f.count, 7);
  /* Header padded to 8 so the data buffer starts aligned. */
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)f.buf[i] << (8 * i);
  assert_int_equal(hlen % 8, 0);
  assert_int_equal(f.buf[8], '{');

  const pt_st_tensor *t = pt_st_find(&f, "layer.weight");
  assert_non_null(t);
  assert_int_equal(t->dtype, PT_ST_F32);
  assert_int_equal(t->ndim, 2);
  assert_int_equal(t->shape[0], 2);
  assert_int_equal(t->shape[1], 3);
  assert_int_equal(t->nbytes, sizeof f32);
  assert_memory_equal(t->data, f32, sizeof f32);

  struct { const char *name; pt_st_dtype dt; const void *data; size_t nbytes; int ndim; } want[] = {
      {"doubles", PT_ST_F64, f64, sizeof f64, 1}, {"longs", PT_ST_I64, i64, sizeof i64, 2},
      {"ints", PT_ST_I32, i32, sizeof i32, 1},     {"bytes", PT_ST_U8, u8, sizeof u8, 1},
      {"step", PT_ST_F32, &scalar, 4, 0},          {"empty", PT_ST_F32, NULL, 0, 2},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    t = pt_st_find(&f, want[i].name);
    assert_non_null(t);
    assert_int_equal(t->dtype, want[i].dt);
    assert_int_equal(t->ndim, want[i].ndim);
    assert_int_equal(t->nbytes, want[i].nbytes);
    if (want[i].nbytes) assert_memory_equal(t->data, want[i].data, want[i].nbytes);
    size_t off = (size_t)(t->data - (f.buf + 8 + hlen));
    assert_int_equal(off % pt_st_dtype_size(t->dtype), 0);
  }
  t = pt_st_find(&f, "step");
  assert_int_equal(pt_st_numel(t), 1);
  assert_int_equal(pt_st_numel(pt_st_find(&f, "empty")), 0);
  assert_null(pt_st_find(&f, "missing"));

  assert_string_equal(pt_st_meta(&f, "format"), "pt2");
  assert_string_equal(pt_st_meta(&f, "note"), "quote \" backslash \\ newline \n done");
  assert_null(pt_st_meta(&f, "absent"));
  assert_int_equal(f.meta_count, 2);

  /* Conversions to f32. */
  float out[6];
  assert_int_equal(pt_st_get_f32(&f, "layer.weight", out, 6), PT_OK);
  assert_memory_equal(out, f32, sizeof f32);
  assert_int_equal(pt_st_get_f32(&f, "doubles", out, 4), PT_OK);
  assert_true(out[0] == 0.1f && out[2] == 3.0f && out[3] == 2.5f && out[1] == -INFINITY);
  assert_int_equal(pt_st_get_f32(&f, "longs", out, 4), PT_OK);
  assert_true(out[0] == (float)INT64_MIN && out[1] == -1.0f && out[3] == 1099511627776.0f);
  assert_int_equal(pt_st_get_f32(&f, "ints", out, 3), PT_OK);
  assert_true(out[0] == (float)INT32_MAX && out[1] == -5.0f && out[2] == 7.0f);
  assert_int_equal(pt_st_get_f32(&f, "bytes", out, 5), PT_OK);
  assert_true(out[0] == 0.0f && out[3] == 128.0f && out[4] == 255.0f);
  assert_int_equal(pt_st_get_f32(&f, "step", out, 1), PT_OK);
  assert_true(out[0] == 42.0f);
  assert_int_equal(pt_st_get_f32(&f, "empty", NULL, 0), PT_OK);
  pt_st_free(&f);
  assert_null(f.buf);

  /* No temporary file is left behind. */
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  struct dirent *de;
  while ((de = readdir(d)))
    if (strstr(de->d_name, ".tmp.")) fail_msg("temporary file %s left", de->d_name);
  closedir(d);
}

static void test_empty_file_and_parse_copy(void **state) {
  (void)state;
  pt_st_writer *w = pt_st_writer_new();
  char path[128];
  path_in_tmp(path, sizeof path, "empty.safetensors");
  assert_int_equal(pt_st_writer_write(w, path), PT_OK);
  pt_st_writer_free(w);
  pt_st_file f;
  assert_int_equal(pt_st_read(path, &f), PT_OK);
  assert_int_equal(f.count, 0);
  assert_int_equal(f.meta_count, 0);
  pt_st_free(&f);

  /* pt_st_parse copies: the caller's buffer may go away. */
  float v[2] = {1, 2};
  uint8_t *buf;
  size_t len;
  buf = make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v, 8, &len);
  assert_int_equal(pt_st_parse(buf, len, "mem", &f), PT_OK);
  memset(buf, 0xff, len);
  free(buf);
  float out[2];
  assert_int_equal(pt_st_get_f32(&f, "a", out, 2), PT_OK);
  assert_true(out[0] == 1.0f && out[1] == 2.0f);
  pt_st_free(&f);
}

static void test_get_f32_errors(void **state) {
  (void)state;
  static float data[288];
  int64_t shape[4] = {32, 1, 3, 3};
  pt_st_writer *w = pt_st_writer_new();
  assert_int_equal(pt_st_writer_add(w, "conv1.weight", PT_ST_F32, 4, shape, data), PT_OK);
  char path[128];
  path_in_tmp(path, sizeof path, "conv.safetensors");
  assert_int_equal(pt_st_writer_write(w, path), PT_OK);
  pt_st_writer_free(w);
  pt_st_file f;
  assert_int_equal(pt_st_read(path, &f), PT_OK);
  static float out[320];
  assert_int_equal(pt_st_get_f32(&f, "conv1.weight", out, 320), PT_ERR_FORMAT);
  assert_string_equal(pt_error_message(),
                      "conv1.weight: has 288 elements (shape [32,1,3,3]), expected 320");
  assert_int_equal(pt_st_get_f32(&f, "conv2.weight", out, 320), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "conv2.weight"));
  pt_st_free(&f);
}

/* Half-precision tensors (as PyTorch saves a model.half() or bfloat16
 * state_dict) are read as float32, exactly; an F64 value past float's
 * range is refused, not made infinite. */
static void test_half_precision_and_f64_range(void **state) {
  (void)state;
  /* F16: 1, -2, 65504 (the largest), 2^-24 (the smallest subnormal), -0, inf;
   * BF16: 1, -3.5, 1e38's top half */
  const uint16_t f16[6] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00};
  const uint16_t bf16[3] = {0x3f80, 0xc060, 0x7e96};
  uint8_t data[24 + 8];
  memcpy(data, f16, 12), memcpy(data + 12, bf16, 6);
  memset(data + 18, 0, 6);
  const double big = 1e300;
  memcpy(data + 24, &big, 8);
  const char *header = "{\"h\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[0,12]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[12,18]},"
                       "\"pad\":{\"dtype\":\"U8\",\"shape\":[6],\"data_offsets\":[18,24]},"
                       "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[24,32]}}";
  size_t len;
  uint8_t *buf = make_file(header, data, sizeof data, &len);
  pt_st_file f;
  assert_int_equal(pt_st_parse(buf, len, "half.safetensors", &f), PT_OK);
  float h[6], b[3], d[1];
  assert_int_equal(pt_st_get_f32(&f, "h", h, 6), PT_OK);
  assert_true(h[0] == 1.0f && h[1] == -2.0f && h[2] == 65504.0f && h[3] == ldexpf(1.0f, -24));
  assert_true(h[4] == 0.0f && signbit(h[4]) && isinf(h[5]) && h[5] > 0);
  assert_int_equal(pt_st_get_f32(&f, "b", b, 3), PT_OK);
  uint32_t top;
  memcpy(&top, &b[2], 4);
  assert_true(b[0] == 1.0f && b[1] == -3.5f && top == 0x7e960000u);
  assert_int_equal(pt_st_get_f32(&f, "d", d, 1), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "d: element 0 is 1e+300, beyond the range of float32"));
  pt_st_free(&f);
  free(buf);
}

static void test_bad_lengths(void **state) {
  (void)state;
  pt_st_file f;
  uint8_t tiny[5] = {1, 0, 0, 0, 0};
  assert_int_equal(pt_st_parse(tiny, sizeof tiny, "bad.safetensors", &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "bad.safetensors"));
  assert_non_null(strstr(pt_error_message(), "8-byte"));
  assert_int_equal(pt_st_parse(NULL, 0, "bad.safetensors", &f), PT_ERR_FORMAT);

  /* Header length that lies: bigger than the file. */
  size_t len;
  uint8_t *buf = make_file("{}", NULL, 0, &len);
  buf[0] = 200;
  assert_int_equal(pt_st_parse(buf, len, "bad.safetensors", &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "header length 200"));
  /* Absurdly large: over the 100 MB limit, and an overflow risk for len + 8. */
  memset(buf, 0xff, 8);
  assert_int_equal(pt_st_parse(buf, len, "bad.safetensors", &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "limit"));
  buf[0] = 0x00; buf[1] = 0xe2; buf[2] = 0xf5; buf[3] = 0x05; /* 100000256 */
  memset(buf + 4, 0, 4);
  assert_int_equal(pt_st_parse(buf, len, "bad.safetensors", &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "limit"));
  free(buf);
}

static void test_bad_json(void **state) {
  (void)state;
  expect_bad("", 0, "JSON", NULL);
  expect_bad("{\"a\":", 0, "not valid JSON", NULL);
  expect_bad("[1,2]", 0, "expected a JSON object", NULL);
  expect_bad("\"str\"", 0, "expected a JSON object", NULL);
  expect_bad("{}  x", 0, "trailing", NULL);
  expect_bad("{} {}", 0, "trailing", NULL);
  char with_nul[] = "{}\0 ";
  size_t len;
  uint8_t *buf = make_file("{}    ", NULL, 0, &len);
  memcpy(buf + 8, with_nul, 4);
  pt_st_file f;
  assert_int_equal(pt_st_parse(buf, len, "bad.safetensors", &f), PT_ERR_FORMAT);
  free(buf);
}

#define E(body) "{\"other\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[15,16]}," \
                "\"w.bad\":" body "}"

static void test_bad_entries(void **state) {
  (void)state;
  expect_bad(E("5"), 16, "'w.bad'", "expected an object", NULL);
  expect_bad(E("{\"shape\":[2],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dtype", "missing", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"data_offsets\":[0,8]}"), 16, "'w.bad'", "shape", "missing", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2]}"), 16, "'w.bad'", "data_offsets", "missing", NULL);
  expect_bad(E("{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dtype is a number", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}"), 16, "'w.bad'", "shape is a string", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,8]}"), 16, "'w.bad'", "expected an array", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":{}}"), 16, "'w.bad'", "data_offsets", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}"), 16, "'w.bad'", "[begin, end]", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}"), 16, "'w.bad'", "[begin, end]", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,\"8\"]}"), 16, "'w.bad'", "data_offsets[1] is a string", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}"), 16, "'w.bad'", "data_offsets[0]", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8]}"), 16, "'w.bad'", "data_offsets[0]", NULL);
  expect_bad(E("{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}"), 16, "'w.bad'", "unknown dtype \"F8_E4M3\"", NULL);
  expect_bad(E("{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "unknown dtype", NULL);
  /* Shapes. */
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dim 0 is -2", "non-negative integer", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dim 1 is 1.5", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dim 0 is a string", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dim 0 is null", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "dim 0", NULL);
  expect_bad(E("{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}"), 16, "'w.bad'", "more than 8 dims", NULL);
  /* Offsets against the data buffer and the byte count. */
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}"), 16, "'w.bad'", "begin > end", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}"), 16, "'w.bad'", "past the data buffer of 16 bytes", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "hold 8 bytes, expected 12", "[3]", NULL);
  expect_bad(E("{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}"), 16, "'w.bad'", "expected 16", NULL);
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}"), 16, "'w.bad'", "expected 4", NULL);
  /* numel * size overflows 64 bits; must not wrap around to a small count. */
  expect_bad(E("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}"), 16, "'w.bad'", "2^64", NULL);
  expect_bad(E("{\"dtype\":\"F64\",\"shape\":[1125899906842624,4096],\"data_offsets\":[0,0]}"), 16, "'w.bad'", "2^64", NULL);
  /* Above 2^53 a JSON double no longer holds the integer exactly. */
  expect_bad(E("{\"dtype\":\"U8\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}"), 16, "'w.bad'", "dim 0", "2^53", NULL);
  expect_bad(E("{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,16]}"), 16, "'w.bad'", "expected 0", NULL);
}

static void test_overlap_and_duplicates(void **state) {
  (void)state;
  expect_bad("{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"w.b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             16, "overlaps", "'w.a'", "'w.b'", NULL);
  /* One tensor inside another. */
  expect_bad("{\"w.a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
             "\"w.b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
             16, "overlaps", "'w.a'", "'w.b'", NULL);
  /* Identical ranges, listed in reverse order. */
  expect_bad("{\"w.b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]},"
             "\"w.a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]},"
             "\"w.c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
             16, "overlaps", "'w.a'", "'w.b'", NULL);
  expect_bad("{\"w.a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"w.a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
             16, "'w.a'", "twice", NULL);

  /* Bytes after the last tensor's data, which the reference reader refuses. */
  expect_bad("{\"w.a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 16,
             "12 bytes after the last tensor's data, expected none", NULL);
  /* Empty tensors occupy nothing and adjacent ranges touch without overlapping. */
  const char *ok = "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                   "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
                   "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16]}}";
  uint8_t data[16] = {0};
  size_t len;
  uint8_t *buf = make_file(ok, data, 16, &len);
  pt_st_file f;
  if (pt_st_parse(buf, len, "ok", &f) != PT_OK) fail_msg("%s", pt_error_message());
  assert_int_equal(f.count, 3);
  pt_st_free(&f);
  free(buf);
}

static void test_bad_metadata(void **state) {
  (void)state;
  expect_bad("{\"__metadata__\":{\"epoch\":3}}", 0, "__metadata__", "'epoch'", "expected a string", NULL);
  expect_bad("{\"__metadata__\":{\"a\":\"x\",\"b\":null}}", 0, "'b'", "expected a string", NULL);
  expect_bad("{\"__metadata__\":[\"x\"]}", 0, "__metadata__", "expected an object", NULL);
  expect_bad("{\"__metadata__\":{\"k\":\"x\",\"k\":\"y\"}}", 0, "'k'", "twice", NULL);
  expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "two __metadata__", NULL);
}

static void test_truncated_file(void **state) {
  (void)state;
  double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t shape[1] = {8};
  pt_st_writer *w = pt_st_writer_new();
  assert_int_equal(pt_st_writer_add(w, "fc.bias", PT_ST_F64, 1, shape, v), PT_OK);
  char path[128];
  path_in_tmp(path, sizeof path, "trunc.safetensors");
  assert_int_equal(pt_st_writer_write(w, path), PT_OK);
  pt_st_writer_free(w);
  assert_int_equal(truncate(path, 100), 0);
  pt_st_file f;
  assert_int_equal(pt_st_read(path, &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), path));
  assert_non_null(strstr(pt_error_message(), "'fc.bias'"));
  assert_non_null(strstr(pt_error_message(), "truncated"));
  /* Cut inside the header: the length prefix now lies. */
  assert_int_equal(truncate(path, 20), 0);
  assert_int_equal(pt_st_read(path, &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "header length"));
}

/* PyTorch's own formats are named as such, not as a header length. */
static void test_torch_save_files_named(void **state) {
  (void)state;
  static const uint8_t zip[16] = {'P', 'K', 3, 4, 0, 0, 8, 8};
  static const uint8_t pickle[16] = {0x80, 2, '}', 'q', 0};
  pt_st_file f;
  assert_int_equal(pt_st_parse(zip, sizeof zip, "m.pt", &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "m.pt: a zip archive, as torch.save writes (.pt, .pth), not safetensors"));
  assert_int_equal(pt_st_parse(pickle, sizeof pickle, "m.pkl", &f), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "m.pkl: a Python pickle, as torch.save writes"));
  /* A safetensors file whose header is 0x280 bytes starts like a pickle
   * (80 02): it is read as safetensors. */
  uint8_t st[8 + 0x280];
  memset(st, ' ', sizeof st);
  memset(st, 0, 8);
  st[0] = 0x80;
  st[1] = 0x02;
  memcpy(st + 8, "{\"__metadata__\":{\"k\":\"v\"}}", 26);
  assert_int_equal(pt_st_parse(st, sizeof st, "ok.safetensors", &f), PT_OK);
  pt_st_free(&f);
  /* Other files given as weights are named as what they are, not as a
   * header length of 8e18. */
  static const struct {
    const char *bytes, *says;
  } other[] = {{"hello world\n", "x: not a safetensors file: text"},
               {"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", "x: not a safetensors file: gzip data"},
               {"\x89PNG\r\n\x1a\n\0\0", "x: not a safetensors file: a PNG image"},
               {"\0\0\x08\x03\0\0\x27\x10\0\0", "x: not a safetensors file: an IDX image file"}};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    assert_int_equal(pt_st_parse((const uint8_t *)other[i].bytes, 10, "x", &f), PT_ERR_FORMAT);
    if (!strstr(pt_error_message(), other[i].says)) fail_msg("%s", pt_error_message());
  }
}

static void test_read_missing_file(void **state) {
  (void)state;
  pt_st_file f;
  assert_int_equal(pt_st_read("/nonexistent/x.safetensors", &f), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "/nonexistent/x.safetensors"));
  assert_int_equal(pt_st_read(tmpdir, &f), PT_ERR_IO); /* a directory */
}

static void test_writer_errors(void **state) {
  (void)state;
  float v[4] = {0};
  int64_t good[1] = {4}, neg[1] = {-1};
  pt_st_writer *w = pt_st_writer_new();
  assert_int_equal(pt_st_writer_add(w, "a", PT_ST_F32, 1, good, v), PT_OK);
  assert_int_equal(pt_st_writer_add(w, "a", PT_ST_F32, 1, good, v), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "a: tensor added twice"));
  assert_int_equal(pt_st_writer_add(w, "b", PT_ST_F32, 1, neg, v), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "b:"));
  assert_int_equal(pt_st_writer_add(w, "c", PT_ST_F32, 9, good, v), PT_ERR_ARG);
  assert_int_equal(pt_st_writer_add(w, "d", (pt_st_dtype)17, 1, good, v), PT_ERR_ARG);
  assert_int_equal(pt_st_writer_add(w, "e", PT_ST_F32, 1, good, NULL), PT_ERR_ARG);
  assert_int_equal(pt_st_writer_add(w, "__metadata__", PT_ST_F32, 1, good, v), PT_ERR_ARG);
  assert_int_equal(pt_st_writer_add(w, NULL, PT_ST_F32, 1, good, v), PT_ERR_ARG);

  const char *path = "/nonexistent-dir-pt/sub/model.safetensors";
  assert_int_equal(pt_st_writer_write(w, path), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), path));
  pt_st_writer_free(w);
  pt_st_writer_free(NULL);
}

/* Many tensors of mixed sizes: exercises the writer's buffering and the
 * reader's sort-based checks with more than a handful of entries. */
static void test_many_tensors(void **state) {
  (void)state;
  enum { N = 500 };
  static float data[N][37];
  static char names[N][32];
  pt_st_writer *w = pt_st_writer_new();
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < 37; j++) data[i][j] = (float)(i * 100 + j);
    snprintf(names[i], sizeof names[i], "layer%03d.w", N - i);
    int64_t shape[1] = {1 + i % 37};
    assert_int_equal(pt_st_writer_add(w, names[i], i % 3 ? PT_ST_F32 : PT_ST_U8, 1, shape, data[i]), PT_OK);
  }
  char path[128];
  path_in_tmp(path, sizeof path, "many.safetensors");
  assert_int_equal(pt_st_writer_write(w, path), PT_OK);
  /* Writing again over the existing file replaces it. */
  assert_int_equal(pt_st_writer_write(w, path), PT_OK);
  pt_st_writer_free(w);
  pt_st_file f;
  if (pt_st_read(path, &f) != PT_OK) fail_msg("%s", pt_error_message());
  assert_int_equal(f.count, N);
  for (int i = 0; i < N; i++) {
    const pt_st_tensor *t = pt_st_find(&f, names[i]);
    assert_non_null(t);
    assert_int_equal(t->shape[0], 1 + i % 37);
    assert_memory_equal(t->data, data[i], t->nbytes);
  }
  pt_st_free(&f);
}

/* Flips one byte of the file at offset at (from the end where negative). */
static void flip_byte(const char *path, long at) {
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, at, at < 0 ? SEEK_END : SEEK_SET), 0);
  int c = fgetc(fp);
  assert_true(c != EOF);
  assert_int_equal(fseek(fp, -1, SEEK_CUR), 0);
  fputc(c ^ 0x40, fp);
  fclose(fp);
}

static pt_status read_and_verify(const char *path) {
  pt_st_file f;
  pt_status st = pt_st_read(path, &f);
  if (st != PT_OK) return st;
  st = pt_st_verify_checksum(&f, path, "ck.crc32");
  pt_st_free(&f);
  return st;
}

/* A checksummed file reads back verified; one byte changed anywhere (the
 * data, a metadata value in the header, the recorded CRC itself) is caught
 * and named; a file without the key passes, as others' files must. */
static void test_checksum(void **state) {
  (void)state;
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)i * 0.25f;
  int64_t shape[2] = {8, 8};
  char path[128], plain[128];
  path_in_tmp(path, sizeof path, "crc.safetensors");
  path_in_tmp(plain, sizeof plain, "nocrc.safetensors");
  for (int with = 0; with < 2; with++) {
    pt_st_writer *w = pt_st_writer_new();
    assert_int_equal(pt_st_writer_add(w, "fc.weight", PT_ST_F32, 2, shape, v), PT_OK);
    assert_int_equal(pt_st_writer_meta(w, "step", "123456"), PT_OK);
    if (with) assert_int_equal(pt_st_writer_checksum(w, "ck.crc32"), PT_OK);
    assert_int_equal(pt_st_writer_write(w, with ? path : plain), PT_OK);
    pt_st_writer_free(w);
  }
  if (read_and_verify(path) != PT_OK) fail_msg("%s", pt_error_message());
  pt_st_file f;
  assert_int_equal(pt_st_read(path, &f), PT_OK);
  const char *recorded = pt_st_meta(&f, "ck.crc32");
  assert_non_null(recorded);
  char crc[16];
  snprintf(crc, sizeof crc, "%s", recorded);
  pt_st_free(&f);
  assert_int_equal(strlen(crc), 8);
  assert_int_not_equal(strcmp(crc, PT_ST_CHECKSUM_ZERO), 0);
  assert_int_equal(read_and_verify(plain), PT_OK);

  /* a byte of the weights */
  flip_byte(path, -17);
  assert_int_equal(read_and_verify(path), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), path));
  assert_non_null(strstr(pt_error_message(), "CRC-32 mismatch"));
  assert_non_null(strstr(pt_error_message(), crc)); /* what was recorded, beside what the bytes give */
  flip_byte(path, -17);
  assert_int_equal(read_and_verify(path), PT_OK);

  /* a digit of a metadata value: the header is covered too */
  assert_int_equal(pt_st_read(path, &f), PT_OK);
  const long digit = (long)((const uint8_t *)strstr((const char *)f.buf + 8, "123456") - f.buf);
  pt_st_free(&f);
  flip_byte(path, digit);
  assert_int_equal(read_and_verify(path), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "CRC-32 mismatch"));
  flip_byte(path, digit);

  /* the recorded CRC made no longer hex */
  assert_int_equal(pt_st_read(path, &f), PT_OK);
  const long rec = (long)((const uint8_t *)strstr((const char *)f.buf + 8, "\"ck.crc32\":\"") - f.buf) + 12;
  pt_st_free(&f);
  flip_byte(path, rec);
  assert_int_equal(read_and_verify(path), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "ck.crc32"));
}

static void test_checksum_key_errors(void **state) {
  (void)state;
  pt_st_writer *w = pt_st_writer_new();
  assert_int_equal(pt_st_writer_checksum(w, "bad key\""), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "bad key"));
  assert_int_equal(pt_st_writer_checksum(w, ""), PT_ERR_ARG);
  /* a value given to the key afterwards would be written as the CRC's */
  assert_int_equal(pt_st_writer_checksum(w, "ck"), PT_OK);
  assert_int_equal(pt_st_writer_meta(w, "ck", "mine"), PT_OK);
  char path[128];
  path_in_tmp(path, sizeof path, "ck.safetensors");
  assert_int_equal(pt_st_writer_write(w, path), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "'ck'"));
  assert_int_equal(access(path, F_OK), -1);
  pt_st_writer_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_torch_save_files_named),
      cmocka_unit_test(test_empty_file_and_parse_copy),
      cmocka_unit_test(test_get_f32_errors),
      cmocka_unit_test(test_half_precision_and_f64_range),
      cmocka_unit_test(test_bad_lengths),
      cmocka_unit_test(test_bad_json),
      cmocka_unit_test(test_bad_entries),
      cmocka_unit_test(test_overlap_and_duplicates),
      cmocka_unit_test(test_bad_metadata),
      cmocka_unit_test(test_truncated_file),
      cmocka_unit_test(test_read_missing_file),
      cmocka_unit_test(test_writer_errors),
      cmocka_unit_test(test_many_tensors),
      cmocka_unit_test(test_checksum),
      cmocka_unit_test(test_checksum_key_errors),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
