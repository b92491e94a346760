/* The user's own images, PNG or JPEG, as a model's input: for `ptrain
 * predict`, which classifies them with a trained model.
 *
 * An image is decoded whole (libpng, libjpeg-turbo), its colours converted
 * to the model's channels and its size fitted to the model's, and written as
 * bytes 0..255 in the layout the datasets use: planar (c, h, w), row-major,
 * the layout pt_dataset's images have, so the same normalisation applies.
 * What was changed on the way is reported in pt_image_info, so that the
 * caller can tell the user ("converted 640x480 RGB to 28x28 grey") rather
 * than classify something other than what they think.
 *
 * The file is untrusted: its sides and pixel count are checked against the
 * limits below before anything is allocated for the pixels, and every
 * failure of the libraries is a pt_status with a message that names the
 * file, never an exit or a line on stderr.
 */
#ifndef PT_IMAGE_IMAGE_H
#define PT_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Far above any photograph a classifier is given, far below what would
 * exhaust memory: the decoded pixels take at most 4 bytes each. */
#define PT_IMAGE_MAX_SIDE 16384
#define PT_IMAGE_MAX_FILE_BYTES ((uint64_t)256 << 20)
/* The fuzz build lowers the pixel limit (CMakeLists.txt): a JPEG of a few
 * hundred bytes may claim 25 Mpixel of damaged data, which libjpeg fills in
 * (0.6 s here), but which the instrumented conversion and resizing took 13 s
 * to turn out, over the fuzzer's 10 s bound on one input. */
#ifndef PT_IMAGE_MAX_PIXELS
#define PT_IMAGE_MAX_PIXELS ((int64_t)64 << 20) /* 64 Mpixel */
#endif

/* What pt_image_* did to fit the image to the model's input. */
typedef struct {
  /* As stored: channels 1 (grey), 2 (grey+alpha), 3 (RGB), 4 (RGBA, or a
   * JPEG's CMYK) as decoded, a PNG's palette expanded to RGB or RGBA. */
  int src_c, src_h, src_w;
  /* Grey to RGB (replicated), RGB to grey (ITU-R BT.601 luma, the weights
   * PIL's convert("L") uses), or CMYK to either. */
  int converted_colour;
  int resized;       /* the size differed: area average shrinking, bilinear enlarging */
  int dropped_alpha; /* an alpha channel was composited onto black */
  int bit_depth;     /* 16 when 16-bit samples were scaled to 8, otherwise 8 */
  /* "converted 640x480 RGB to 28x28 grey" (sizes width x height), or ""
   * when the image already was what the model takes. */
  char note[256];
} pt_image_info;

/* Decodes a PNG or JPEG (told apart by the signature, not the file name) from
 * memory into out (c, h, w) bytes 0..255 in the layout the datasets use
 * (planar, row-major), converting channels and resizing to (c, h, w). c is 1
 * or 3; h and w are 1..PT_IMAGE_MAX_SIDE. name is used in messages. info may
 * be NULL. A malformed, truncated, oversized or unsupported image is
 * PT_ERR_FORMAT naming name and what was expected; out is then undefined. */
pt_status pt_image_decode(const uint8_t *buf, size_t len, const char *name, int c, int h, int w,
                          uint8_t *out, pt_image_info *info);
/* The same from a file; a missing or unreadable one is PT_ERR_IO naming path. */
pt_status pt_image_read(const char *path, int c, int h, int w, uint8_t *out, pt_image_info *info);

#endif
