/* libFuzzer target for the PNG and JPEG readers (src/image/), as ptrain
 * predict calls them on a user's file.
 *
 * Each input is decoded for the two input shapes the presets take: 28x28
 * grey (MNIST, Fashion-MNIST) and 32x32 RGB (CIFAR-10), so both colour
 * conversions and both resizing directions are reached. Each is decoded
 * twice, into buffers filled differently beforehand: an accepted image must
 * write every output byte, and the same ones both times.
 *
 * The seeds (fuzz/corpus/fuzz_image, written with libpng and libjpeg) are
 * one small file of each kind the reader handles: 8-bit grey, a 4-bit
 * palette with transparency, 16-bit RGBA interlaced; JPEG grey, RGB
 * progressive, CMYK.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode(const uint8_t *data, size_t size, int c, int h, int w) {
  uint8_t a[3 * 32 * 32], b[3 * 32 * 32]; /* (c, h, w) */
  size_t n = (size_t)c * h * w;
  memset(a, 0x00, n);
  memset(b, 0xff, n);
  pt_image_info ia, ib;
  pt_status sa = pt_image_decode(data, size, "fuzz", c, h, w, a, &ia);
  pt_status sb = pt_image_decode(data, size, "fuzz", c, h, w, b, &ib);
  if (sa != sb) abort();
  if (sa != PT_OK) return;
  if (memcmp(a, b, n) != 0 || memcmp(&ia, &ib, sizeof ia) != 0) abort();
  if (ia.src_c < 1 || ia.src_c > 4 || ia.src_h < 1 || ia.src_h > PT_IMAGE_MAX_SIDE ||
      ia.src_w < 1 || ia.src_w > PT_IMAGE_MAX_SIDE)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  decode(data, size, 1, 28, 28);
  decode(data, size, 3, 32, 32);
  return 0;
}
