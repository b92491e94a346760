/* Internal to src/image: the two decoders' common result, before the
 * colour conversion and resizing that image.c does for both. */
#ifndef PT_IMAGE_DECODED_H
#define PT_IMAGE_DECODED_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct {
  int c, h, w;      /* px's shape: c is 1 (grey), 2 (grey+alpha), 3 (RGB) or 4 (RGBA) */
  int stored_c;     /* what pt_image_info reports: 4 for CMYK, which arrives here as RGB */
  int cmyk;         /* converted from CMYK by the JPEG decoder */
  int palette;      /* expanded from a PNG palette to RGB (RGBA with tRNS) */
  int bit_depth;    /* 8, or 16 when scaled to 8 */
  uint8_t *px;      /* (h, w, c) interleaved, 8-bit; malloc'ed */
} pt_image_pixels;

/* Each fills *out (px NULL on failure) or fails with PT_ERR_FORMAT naming
 * name; buf starts with the format's signature. */
pt_status pt_image_decode_png(const uint8_t *buf, size_t len, const char *name,
                              pt_image_pixels *out);
pt_status pt_image_decode_jpeg(const uint8_t *buf, size_t len, const char *name,
                               pt_image_pixels *out);
/* The size limits of image.h, checked from a header before the pixels are
 * allocated; format names the format in the message. */
pt_status pt_image_check_size(const char *name, const char *format, uint64_t w, uint64_t h);

#endif
