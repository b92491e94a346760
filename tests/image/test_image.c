/* Image reader (src/image/): PNG and JPEG variants decoded to exact bytes,
 * colour conversion, resizing, and each way a file can be wrong, checking
 * both the status and that the message names the file and what was wrong.
 *
 * Every image is written here with libpng or libjpeg, so there are no
 * binary fixtures and each test shows what its file holds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "../tmpdir.h"
#include "image/image.h"

#define assert_error_contains(sub)                                                     \
  do {                                                                                 \
    const char *m_ = pt_error_message();                                               \
    if (!strstr(m_, (sub))) fail_msg("error message \"%s\" lacks \"%s\"", m_, (sub)); \
  } while (0)

typedef struct {
  uint8_t *p;
  size_t n, cap;
} mem;

static void mem_put(mem *m, const void *d, size_t n) {
  if (m->n + n > m->cap) {
    m->cap = (m->n + n) * 2;
    m->p = realloc(m->p, m->cap);
    assert_non_null(m->p);
  }
  memcpy(m->p + m->n, d, n);
  m->n += n;
}

static void on_png_write(png_structp png, png_bytep d, size_t n) {
  mem_put(png_get_io_ptr(png), d, n);
}
static void on_png_flush(png_structp png) { (void)png; }

/* A PNG with this IHDR: rows is (h, rowbytes) as PNG stores it (16-bit
 * samples big-endian, 1/2/4-bit ones packed), pal and trns optional. */
static mem png_file(int w, int h, int type, int depth, int interlace, const uint8_t *rows,
                    const png_color *pal, int npal, const uint8_t *trns, int ntrns) {
  mem m = {0};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  assert_non_null(info);
  png_bytep ptrs[64]; /* (h) */
  assert_true(h <= 64);
  if (setjmp(png_jmpbuf(png))) fail_msg("libpng could not write the test image");
  png_set_write_fn(png, &m, on_png_write, on_png_flush);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, type, interlace,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (pal) png_set_PLTE(png, info, pal, npal);
  if (trns) png_set_tRNS(png, info, trns, ntrns, NULL);
  png_write_info(png, info);
  size_t stride = png_get_rowbytes(png, info);
  for (int y = 0; y < h; y++) ptrs[y] = (png_bytep)rows + stride * (size_t)y;
  png_write_image(png, ptrs);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return m;
}

/* A JPEG of (h, w, comps) pixels in colour space cs. */
static mem jpeg_file(int w, int h, int comps, J_COLOR_SPACE cs, int quality, int progressive,
                     const uint8_t *px) {
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr err;
  ci.err = jpeg_std_error(&err);
  jpeg_create_compress(&ci);
  unsigned char *out = NULL;
  unsigned long n = 0;
  jpeg_mem_dest(&ci, &out, &n);
  ci.image_width = (JDIMENSION)w;
  ci.image_height = (JDIMENSION)h;
  ci.input_components = comps;
  ci.in_color_space = cs;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  if (progressive) jpeg_simple_progression(&ci);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)comps);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  return (mem){out, n, n};
}

static void write_file(const char *name, const uint8_t *p, size_t n, char *path) {
  snprintf(path, 512, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* A reproducible byte pattern, not smooth, so that resizing errors show. */
static uint8_t pattern(int i) { return (uint8_t)((uint32_t)i * 2654435761u >> 24); }

static void test_png_grey_exact(void **state) {
  (void)state;
  uint8_t px[28 * 28]; /* (28, 28) */
  for (int i = 0; i < 28 * 28; i++) px[i] = pattern(i);
  mem m = png_file(28, 28, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  uint8_t out[28 * 28];
  pt_image_info info;
  /* Named .jpg: the signature decides. */
  char path[512];
  write_file("digit.jpg", m.p, m.n, path);
  assert_int_equal(pt_image_read(path, 1, 28, 28, out, &info), PT_OK);
  assert_memory_equal(out, px, sizeof px);
  assert_int_equal(info.src_c, 1);
  assert_int_equal(info.src_h, 28);
  assert_int_equal(info.src_w, 28);
  assert_int_equal(info.bit_depth, 8);
  assert_false(info.converted_colour || info.resized || info.dropped_alpha);
  assert_string_equal(info.note, "");
  /* From memory, without info. */
  memset(out, 0, sizeof out);
  assert_int_equal(pt_image_decode(m.p, m.n, "mem", 1, 28, 28, out, NULL), PT_OK);
  assert_memory_equal(out, px, sizeof px);
  free(m.p);
}

static void test_rgb_to_grey(void **state) {
  (void)state;
  /* Red, green, blue, white, black and a mixed colour: BT.601 luma as PIL's
   * convert("L") rounds it. */
  static const uint8_t px[6 * 3] = {255, 0,   0,   0, 255, 0, 0,  0,   255,
                                    255, 255, 255, 0, 0,   0, 10, 200, 30};
  static const uint8_t want[6] = {76, 150, 29, 255, 0, 124};
  mem m = png_file(6, 1, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  uint8_t out[6];
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "colours.png", 1, 1, 6, out, &info), PT_OK);
  assert_memory_equal(out, want, 6);
  assert_int_equal(info.src_c, 3);
  assert_true(info.converted_colour);
  assert_false(info.resized);
  assert_string_equal(info.note, "converted 6x1 RGB to 6x1 grey");
  /* RGB stays RGB, now planar. */
  uint8_t rgb[3 * 6];
  assert_int_equal(pt_image_decode(m.p, m.n, "colours.png", 3, 1, 6, rgb, &info), PT_OK);
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 3; k++) assert_int_equal(rgb[k * 6 + i], px[i * 3 + k]);
  assert_string_equal(info.note, "");
  free(m.p);
}

static void test_grey_to_rgb(void **state) {
  (void)state;
  uint8_t px[2 * 3]; /* (2, 3) */
  for (int i = 0; i < 6; i++) px[i] = pattern(i + 100);
  mem m = png_file(3, 2, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  uint8_t out[3 * 2 * 3]; /* (3, 2, 3) */
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "g.png", 3, 2, 3, out, &info), PT_OK);
  for (int k = 0; k < 3; k++) assert_memory_equal(out + k * 6, px, 6);
  assert_true(info.converted_colour);
  assert_string_equal(info.note, "converted 3x2 grey to 3x2 RGB");
  free(m.p);
}

static void test_shrink_area_average(void **state) {
  (void)state;
  uint8_t px[56 * 56]; /* (56, 56) */
  for (int i = 0; i < 56 * 56; i++) px[i] = pattern(i);
  mem m = png_file(56, 56, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  uint8_t out[28 * 28];
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "big.png", 1, 28, 28, out, &info), PT_OK);
  for (int y = 0; y < 28; y++)
    for (int x = 0; x < 28; x++) {
      const uint8_t *s = px + 2 * y * 56 + 2 * x;
      int sum = s[0] + s[1] + s[56] + s[57];
      assert_int_equal(out[y * 28 + x], (sum + 2) / 4); /* the mean, rounded half up */
    }
  assert_true(info.resized);
  assert_false(info.converted_colour);
  assert_string_equal(info.note, "converted 56x56 grey to 28x28 grey");
  free(m.p);

  /* 3 -> 2: each target pixel covers one and a half source pixels. */
  static const uint8_t row[3] = {0, 90, 210};
  m = png_file(3, 1, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, row, NULL, 0, NULL, 0);
  uint8_t two[2];
  assert_int_equal(pt_image_decode(m.p, m.n, "row.png", 1, 1, 2, two, NULL), PT_OK);
  assert_int_equal(two[0], 30);  /* (2 * 0 + 1 * 90) / 3 */
  assert_int_equal(two[1], 170); /* (1 * 90 + 2 * 210) / 3 */
  free(m.p);
}

static void test_enlarge_bilinear(void **state) {
  (void)state;
  uint8_t px[14 * 14]; /* (14, 14) */
  for (int i = 0; i < 14 * 14; i++) px[i] = pattern(i + 7);
  mem m = png_file(14, 14, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  uint8_t out[28 * 28];
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "small.png", 1, 28, 28, out, &info), PT_OK);
  /* Target i's centre is at source i / 2 - 1/4: weights in quarters between
   * source i / 2 - 1 and i / 2 (odd i: 3/4 and 1/4 of (i-1)/2 and (i+1)/2),
   * clamped at the edges. */
  for (int y = 0; y < 28; y++)
    for (int x = 0; x < 28; x++) {
      int ys[2], wy[2], xs[2], wx[2];
      int *idx[2] = {ys, xs}, *wt[2] = {wy, wx}, at[2] = {y, x};
      for (int a = 0; a < 2; a++) {
        int i = at[a];
        int j = i % 2 ? (i - 1) / 2 : i / 2 - 1; /* the left source pixel */
        int wl = i % 2 ? 3 : 1;
        if (j < 0) j = 0, wl = 4;
        if (j >= 13) j = 12, wl = 0;
        idx[a][0] = j, idx[a][1] = j + 1, wt[a][0] = wl, wt[a][1] = 4 - wl;
      }
      int acc = 0;
      for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) acc += wy[a] * wx[b] * px[ys[a] * 14 + xs[b]];
      assert_int_equal(out[y * 28 + x], (acc + 8) / 16);
    }
  assert_true(info.resized);
  assert_string_equal(info.note, "converted 14x14 grey to 28x28 grey");
  free(m.p);
}

static void test_palette(void **state) {
  (void)state;
  static const png_color pal[5] = {
      {0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {10, 20, 30}, {255, 255, 255}};
  /* 6x2 at 4 bits a pixel: indices 0..4 packed two to a byte. */
  static const uint8_t idx[2][6] = {{0, 1, 2, 3, 4, 0}, {4, 3, 2, 1, 0, 4}};
  uint8_t rows[2 * 3];
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 6; x += 2) rows[y * 3 + x / 2] = (uint8_t)(idx[y][x] << 4 | idx[y][x + 1]);
  mem m = png_file(6, 2, PNG_COLOR_TYPE_PALETTE, 4, PNG_INTERLACE_NONE, rows, pal, 5, NULL, 0);
  uint8_t out[3 * 2 * 6]; /* (3, 2, 6) */
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "pal.png", 3, 2, 6, out, &info), PT_OK);
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 6; x++) {
      const png_color *c = &pal[idx[y][x]];
      assert_int_equal(out[0 * 12 + y * 6 + x], c->red);
      assert_int_equal(out[1 * 12 + y * 6 + x], c->green);
      assert_int_equal(out[2 * 12 + y * 6 + x], c->blue);
    }
  assert_int_equal(info.src_c, 3);
  assert_string_equal(info.note, "");
  free(m.p);

  /* Transparent entries (tRNS) become alpha, composited onto black. */
  static const uint8_t trns[2] = {255, 0}; /* entry 1 (red) fully transparent */
  m = png_file(6, 2, PNG_COLOR_TYPE_PALETTE, 4, PNG_INTERLACE_NONE, rows, pal, 5, trns, 2);
  assert_int_equal(pt_image_decode(m.p, m.n, "pal.png", 3, 2, 6, out, &info), PT_OK);
  assert_int_equal(info.src_c, 4);
  assert_true(info.dropped_alpha);
  assert_int_equal(out[0 * 12 + 1], 0); /* was red */
  assert_int_equal(out[1 * 12 + 2], 255); /* green stays */
  assert_string_equal(info.note, "converted 6x2 palette+alpha to 6x2 RGB, dropped alpha (composited onto black)");
  free(m.p);

  /* The note names a palette as such, not as the RGB it is expanded to. */
  m = png_file(6, 2, PNG_COLOR_TYPE_PALETTE, 4, PNG_INTERLACE_NONE, rows, pal, 5, NULL, 0);
  uint8_t grey[2 * 6];
  assert_int_equal(pt_image_decode(m.p, m.n, "pal.png", 1, 2, 6, grey, &info), PT_OK);
  assert_string_equal(info.note, "converted 6x2 palette to 6x2 grey");
  free(m.p);
}

static void test_16_bit(void **state) {
  (void)state;
  /* 5x2 grey, big-endian 16-bit samples: k * 257 is exactly k in 8 bits,
   * 0x12ff is 18.996 and rounds to 19 (not the high byte, 18). */
  uint16_t v[10] = {0, 257, 2 * 257, 100 * 257, 65535, 0x12ff, 0x1280, 0x127f, 1, 65534};
  uint8_t want[10] = {0, 1, 2, 100, 255, 19, 18, 18, 0, 255};
  uint8_t rows[10 * 2];
  for (int i = 0; i < 10; i++) rows[2 * i] = (uint8_t)(v[i] >> 8), rows[2 * i + 1] = (uint8_t)v[i];
  mem m = png_file(5, 2, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_NONE, rows, NULL, 0, NULL, 0);
  uint8_t out[10];
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "deep.png", 1, 2, 5, out, &info), PT_OK);
  assert_memory_equal(out, want, 10);
  assert_int_equal(info.bit_depth, 16);
  assert_false(info.converted_colour || info.resized);
  assert_string_equal(info.note, "converted 5x2 16-bit grey to 5x2 grey");
  free(m.p);
}

static void test_alpha(void **state) {
  (void)state;
  /* Opaque white, transparent white, half-transparent orange. */
  static const uint8_t rgba[3 * 4] = {255, 255, 255, 255, 255, 255, 255, 0, 200, 100, 50, 128};
  mem m = png_file(3, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, PNG_INTERLACE_NONE, rgba, NULL, 0, NULL, 0);
  uint8_t grey[3], rgb[9];
  pt_image_info info;
  assert_int_equal(pt_image_decode(m.p, m.n, "a.png", 1, 1, 3, grey, &info), PT_OK);
  assert_int_equal(grey[0], 255);
  assert_int_equal(grey[1], 0);
  assert_int_equal(grey[2], 62); /* luma 124.20 * 128 / 255 */
  assert_int_equal(info.src_c, 4);
  assert_true(info.dropped_alpha);
  assert_true(info.converted_colour);
  assert_string_equal(info.note,
                      "converted 3x1 RGBA to 3x1 grey, dropped alpha (composited onto black)");
  assert_int_equal(pt_image_decode(m.p, m.n, "a.png", 3, 1, 3, rgb, &info), PT_OK);
  static const uint8_t want[9] = {255, 0, 100, 255, 0, 50, 255, 0, 25}; /* (3, 1, 3) */
  assert_memory_equal(rgb, want, 9);
  assert_false(info.converted_colour);
  assert_true(info.dropped_alpha);
  free(m.p);

  /* Grey + alpha. */
  static const uint8_t ga[2 * 2] = {200, 255, 200, 51};
  m = png_file(2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, PNG_INTERLACE_NONE, ga, NULL, 0, NULL, 0);
  assert_int_equal(pt_image_decode(m.p, m.n, "ga.png", 1, 1, 2, grey, &info), PT_OK);
  assert_int_equal(grey[0], 200);
  assert_int_equal(grey[1], 40);
  assert_int_equal(info.src_c, 2);
  assert_false(info.converted_colour);
  assert_string_equal(info.note,
                      "converted 2x1 grey+alpha to 2x1 grey, "
                      "dropped alpha (composited onto black)");
  free(m.p);
}

static void test_interlaced(void **state) {
  (void)state;
  uint8_t px[7 * 9 * 3]; /* (7, 9, 3): every Adam7 pass has pixels */
  for (int i = 0; i < 7 * 9 * 3; i++) px[i] = pattern(i);
  mem m = png_file(9, 7, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7, px, NULL, 0, NULL, 0);
  uint8_t out[3 * 7 * 9];
  assert_int_equal(pt_image_decode(m.p, m.n, "i.png", 3, 7, 9, out, NULL), PT_OK);
  for (int i = 0; i < 63; i++)
    for (int k = 0; k < 3; k++) assert_int_equal(out[k * 63 + i], px[i * 3 + k]);
  free(m.p);

  /* 1-bit grey: 0 and 1 are black and white. */
  static const uint8_t bits[1] = {0xa0}; /* 1 0 1 0 */
  m = png_file(4, 1, PNG_COLOR_TYPE_GRAY, 1, PNG_INTERLACE_NONE, bits, NULL, 0, NULL, 0);
  uint8_t four[4];
  assert_int_equal(pt_image_decode(m.p, m.n, "b.png", 1, 1, 4, four, NULL), PT_OK);
  static const uint8_t want[4] = {255, 0, 255, 0};
  assert_memory_equal(four, want, 4);
  free(m.p);
}

/* Largest difference between two byte arrays. */
static int max_diff(const uint8_t *a, const uint8_t *b, size_t n) {
  int d = 0;
  for (size_t i = 0; i < n; i++) {
    int e = abs((int)a[i] - (int)b[i]);
    if (e > d) d = e;
  }
  return d;
}

static void test_jpeg_round_trip(void **state) {
  (void)state;
  enum { W = 32, H = 24 };
  uint8_t grey[H * W], rgb[H * W * 3], planar[3 * H * W];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      grey[y * W + x] = (uint8_t)(x * 6 + y * 2);
      for (int k = 0; k < 3; k++) {
        rgb[(y * W + x) * 3 + k] = (uint8_t)(k == 0 ? x * 7 : k == 1 ? y * 9 : 128);
        planar[k * H * W + y * W + x] = rgb[(y * W + x) * 3 + k];
      }
    }
  uint8_t out[3 * H * W];
  pt_image_info info;
  for (int progressive = 0; progressive < 2; progressive++) {
    mem m = jpeg_file(W, H, 1, JCS_GRAYSCALE, 95, progressive, grey);
    assert_int_equal(pt_image_decode(m.p, m.n, "g.jpg", 1, H, W, out, &info), PT_OK);
    assert_in_range(max_diff(out, grey, H * W), 0, 4);
    assert_int_equal(info.src_c, 1);
    assert_string_equal(info.note, "");
    free(m.p);

    m = jpeg_file(W, H, 3, JCS_RGB, 95, progressive, rgb);
    assert_int_equal(pt_image_decode(m.p, m.n, "c.jpg", 3, H, W, out, &info), PT_OK);
    assert_in_range(max_diff(out, planar, 3 * H * W), 0, 8);
    assert_int_equal(info.src_c, 3);
    assert_string_equal(info.note, "");
    free(m.p);
  }

  /* CMYK as Adobe writes it (inverted): red is C=0 M=Y=255 K=0. */
  uint8_t cmyk[16 * 16 * 4];
  for (int i = 0; i < 16 * 16; i++) memcpy(cmyk + 4 * i, (uint8_t[4]){255, 0, 0, 255}, 4);
  mem m = jpeg_file(16, 16, 4, JCS_CMYK, 95, 0, cmyk);
  assert_int_equal(pt_image_decode(m.p, m.n, "cmyk.jpg", 3, 16, 16, out, &info), PT_OK);
  for (int i = 0; i < 16 * 16; i++) {
    assert_in_range(out[i], 250, 255);
    assert_in_range(out[256 + i], 0, 5);
    assert_in_range(out[512 + i], 0, 5);
  }
  assert_int_equal(info.src_c, 4);
  assert_true(info.converted_colour);
  assert_false(info.dropped_alpha);
  assert_string_equal(info.note, "converted 16x16 CMYK to 16x16 RGB");
  free(m.p);
}

/* Every way in, from memory and from a file: PT_ERR_FORMAT naming it. */
static void expect_format_error(const uint8_t *p, size_t n, const char *sub) {
  uint8_t out[3 * 28 * 28];
  pt_error_clear();
  assert_int_equal(pt_image_decode(p, n, "user-image", 1, 28, 28, out, NULL), PT_ERR_FORMAT);
  assert_error_contains("user-image: ");
  if (sub) assert_error_contains(sub);
  char path[512];
  write_file("bad-image", p, n, path);
  pt_image_info info;
  memset(&info, 0xff, sizeof info);
  assert_int_equal(pt_image_read(path, 3, 32, 32, out, &info), PT_ERR_FORMAT);
  assert_error_contains(path);
  if (sub) assert_error_contains(sub);
  assert_string_equal(info.note, ""); /* cleared, not left as it was */
}

static void test_truncated(void **state) {
  (void)state;
  uint8_t px[28 * 28];
  for (int i = 0; i < 28 * 28; i++) px[i] = pattern(i);
  mem m = png_file(28, 28, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  /* In the signature, the header, the image data, and IEND. */
  size_t cuts[] = {5, 8, 20, 33, 40, m.n / 2, m.n - 12, m.n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
    expect_format_error(m.p, cuts[i], "truncated PNG");
  free(m.p);

  uint8_t rgb[28 * 28 * 3];
  for (int i = 0; i < 28 * 28 * 3; i++) rgb[i] = pattern(i);
  for (int progressive = 0; progressive < 2; progressive++) {
    m = jpeg_file(28, 28, 3, JCS_RGB, 90, progressive, rgb);
    size_t jcuts[] = {2, 3, 30, m.n / 2, m.n - 2};
    for (size_t i = 0; i < sizeof jcuts / sizeof *jcuts; i++)
      expect_format_error(m.p, jcuts[i], "truncated JPEG");
    free(m.p);
  }
}

static void test_garbage(void **state) {
  (void)state;
  uint8_t junk[300];
  for (int i = 0; i < 300; i++) junk[i] = pattern(i);
  junk[0] = 0x42; /* not 89 or ff */
  expect_format_error(junk, sizeof junk, "expected a PNG or JPEG image (signature 42 ");
  expect_format_error((const uint8_t *)"hello", 5, "signature 68 65 6c 6c 6f)");
  expect_format_error((const uint8_t *)"GIF89a\x01\x00\x01\x00", 10, "which is GIF");
  expect_format_error(junk, 1, "signature 42)");
  expect_format_error((const uint8_t *)"", 0, "empty file");

  /* The right signatures, then junk. */
  uint8_t fake[300];
  memcpy(fake, junk, sizeof fake);
  memcpy(fake, "\x89PNG\r\n\x1a\n", 8);
  expect_format_error(fake, sizeof fake, "malformed PNG");
  memcpy(fake, "\xff\xd8\xff\xe0", 4);
  expect_format_error(fake, sizeof fake, "JPEG");

  /* A damaged PNG: one flipped bit in IHDR fails its CRC. */
  uint8_t px[16];
  memset(px, 7, sizeof px);
  mem m = png_file(4, 4, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  m.p[18] ^= 1;
  expect_format_error(m.p, m.n, "malformed PNG: IHDR: CRC error");
  free(m.p);
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* A PNG header claiming w x h, then an IDAT chunk (so that libpng reaches
 * the end of the header) with nothing behind it. */
static mem png_header(uint32_t w, uint32_t h) {
  mem m = {0};
  mem_put(&m, "\x89PNG\r\n\x1a\n", 8);
  uint8_t ihdr[4 + 4 + 13 + 4] = {0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  put_be32(ihdr + 8, w);
  put_be32(ihdr + 12, h);
  ihdr[16] = 8; /* 8-bit grey, deflate, no filter, no interlace */
  put_be32(ihdr + 21, (uint32_t)crc32(0, ihdr + 4, 17));
  mem_put(&m, ihdr, sizeof ihdr);
  uint8_t idat[12] = {0, 0, 0, 0, 'I', 'D', 'A', 'T'};
  put_be32(idat + 8, (uint32_t)crc32(0, idat + 4, 4));
  mem_put(&m, idat, sizeof idat);
  return m;
}

static void test_oversize(void **state) {
  (void)state;
  mem m = png_header(100000, 100000);
  expect_format_error(m.p, m.n,
                      "PNG image of 100000x100000 pixels (width x height), above the limit of "
                      "16384 pixels a side");
  free(m.p);
  m = png_header(16384, 16384);
  expect_format_error(m.p, m.n, "16384x16384 pixels is 256.0 Mpixel, above the limit of 64 Mpixel");
  free(m.p);
  m = png_header(0, 5);
  expect_format_error(m.p, m.n, "malformed PNG");
  free(m.p);
  /* The hand-made header is right: at the limits, only the data is missing. */
  m = png_header(8192, 8192);
  expect_format_error(m.p, m.n, "truncated PNG");
  free(m.p);

  uint8_t row[20000];
  memset(row, 9, sizeof row);
  m = jpeg_file(20000, 1, 1, JCS_GRAYSCALE, 50, 0, row);
  expect_format_error(m.p, m.n,
                      "JPEG image of 20000x1 pixels (width x height), above the limit of 16384");
  free(m.p);
}

static void test_missing_file_and_bad_args(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/no-such-image.png", tmpdir);
  uint8_t out[3 * 28 * 28];
  assert_int_equal(pt_image_read(path, 1, 28, 28, out, NULL), PT_ERR_IO);
  assert_error_contains(path);
  assert_int_equal(pt_image_read(tmpdir, 1, 28, 28, out, NULL), PT_ERR_IO);
  assert_error_contains("not a regular file");
  /* A file too large to be read whole (sparse: it takes no disk). */
  snprintf(path, sizeof path, "%s/huge.png", tmpdir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(ftruncate(fileno(f), (off_t)300 << 20), 0);
  fclose(f);
  assert_int_equal(pt_image_read(path, 1, 28, 28, out, NULL), PT_ERR_FORMAT);
  assert_error_contains("larger than the 256 MiB an image may have");

  uint8_t px[4] = {1, 2, 3, 4};
  mem m = png_file(2, 2, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, px, NULL, 0, NULL, 0);
  assert_int_equal(pt_image_decode(m.p, m.n, "x.png", 2, 28, 28, out, NULL), PT_ERR_ARG);
  assert_error_contains("x.png: the model takes 2 channels, expected 1 (grey) or 3 (RGB)");
  assert_int_equal(pt_image_decode(m.p, m.n, "x.png", 1, 0, 28, out, NULL), PT_ERR_ARG);
  assert_int_equal(pt_image_decode(m.p, m.n, "x.png", 1, 28, 16385, out, NULL), PT_ERR_ARG);
  free(m.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_png_grey_exact),
      cmocka_unit_test(test_rgb_to_grey),
      cmocka_unit_test(test_grey_to_rgb),
      cmocka_unit_test(test_shrink_area_average),
      cmocka_unit_test(test_enlarge_bilinear),
      cmocka_unit_test(test_palette),
      cmocka_unit_test(test_16_bit),
      cmocka_unit_test(test_alpha),
      cmocka_unit_test(test_interlaced),
      cmocka_unit_test(test_jpeg_round_trip),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_oversize),
      cmocka_unit_test(test_missing_file_and_bad_args),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
