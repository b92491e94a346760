/* Test fixtures for the data tests: a scratch directory, small IDX and CIFAR
 * files built in memory, and gzip compression.
 *
 * The real datasets may be absent (CI), so every test makes its own tiny
 * files with known content under a fresh mkdtemp directory and removes it
 * afterwards. Functions are static inline so each test program can use any
 * subset without unused-function warnings.
 */
#ifndef PT_TESTS_DATA_FIXTURE_H
#define PT_TESTS_DATA_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/error.h"

/* Fails the test, showing the message, unless the thread's error message
 * contains sub. */
#define assert_error_contains(sub)                                              \
  do {                                                                          \
    const char *m_ = pt_error_message();                                        \
    if (!strstr(m_, (sub))) fail_msg("error message \"%s\" lacks \"%s\"", m_, (sub)); \
  } while (0)

#define assert_error_lacks(sub)                                                 \
  do {                                                                          \
    const char *m_ = pt_error_message();                                        \
    if (strstr(m_, (sub))) fail_msg("error message \"%s\" has \"%s\"", m_, (sub)); \
  } while (0)

typedef struct {
  uint8_t *p;
  size_t n;
} fx_buf;

static inline void fx_buf_free(fx_buf *b) {
  free(b->p);
  b->p = NULL;
  b->n = 0;
}

static inline void fx_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Pixel i of image k: a pattern that differs between images and pixels. */
static inline uint8_t fx_pixel(uint32_t k, uint32_t i) { return (uint8_t)(k * 31u + i * 7u + 3u); }

/* IDX images file: n images of h x w, pixels fx_pixel. */
static inline fx_buf fx_idx_images(uint32_t n, uint32_t h, uint32_t w) {
  fx_buf b;
  b.n = 16 + (size_t)n * h * w;
  b.p = malloc(b.n);
  assert_non_null(b.p);
  fx_be32(b.p, 0x00000803u);
  fx_be32(b.p + 4, n);
  fx_be32(b.p + 8, h);
  fx_be32(b.p + 12, w);
  for (uint32_t k = 0; k < n; k++)
    for (uint32_t i = 0; i < h * w; i++) b.p[16 + (size_t)k * h * w + i] = fx_pixel(k, i);
  return b;
}

/* IDX labels file: label i is i % classes. */
static inline fx_buf fx_idx_labels(uint32_t n, uint32_t classes) {
  fx_buf b;
  b.n = 8 + (size_t)n;
  b.p = malloc(b.n);
  assert_non_null(b.p);
  fx_be32(b.p, 0x00000801u);
  fx_be32(b.p + 4, n);
  for (uint32_t i = 0; i < n; i++) b.p[8 + i] = (uint8_t)(i % classes);
  return b;
}

/* CIFAR-10 batch of n records; record i has label (first + i) % 10 and
 * pixels fx_pixel(first + i, j). */
static inline fx_buf fx_cifar(uint32_t n, uint32_t first) {
  fx_buf b;
  b.n = (size_t)n * 3073;
  b.p = malloc(b.n ? b.n : 1);
  assert_non_null(b.p);
  for (uint32_t i = 0; i < n; i++) {
    uint8_t *r = b.p + (size_t)i * 3073;
    r[0] = (uint8_t)((first + i) % 10);
    for (uint32_t j = 0; j < 3072; j++) r[1 + j] = fx_pixel(first + i, j);
  }
  return b;
}

/* One gzip member holding in[0..n). */
static inline fx_buf fx_gzip(const uint8_t *in, size_t n) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  fx_buf b;
  size_t cap = deflateBound(&zs, (uLong)n) + 64;
  b.p = malloc(cap);
  assert_non_null(b.p);
  zs.next_in = (Bytef *)in;
  zs.avail_in = (uInt)n;
  zs.next_out = b.p;
  zs.avail_out = (uInt)cap;
  assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
  b.n = cap - zs.avail_out;
  deflateEnd(&zs);
  return b;
}

/* Writes buf to dir/name; path gets the full name. */
static inline void fx_write(const char *dir, const char *name, const uint8_t *buf, size_t n,
                            char path[512]) {
  char local[512];
  if (!path) path = local;
  snprintf(path, 512, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(buf, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static inline void fx_write_buf(const char *dir, const char *name, fx_buf b, char path[512]) {
  fx_write(dir, name, b.p, b.n, path);
}

static inline void fx_write_gz(const char *dir, const char *name, fx_buf b, char path[512]) {
  fx_buf z = fx_gzip(b.p, b.n);
  fx_write(dir, name, z.p, z.n, path);
  fx_buf_free(&z);
}

#endif
