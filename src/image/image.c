/* An image fitted to a model's input; see image.h for the contract.
 *
 * The format is told by the signature, so a misnamed file still loads. The
 * decoders (read_png.c, read_jpeg.c) give 8-bit interleaved pixels; this
 * file converts them to the model's channels, planar, then resizes.
 *
 * Colour first, size second, each rounded to bytes, in the order a PyTorch
 * user writes it (img.convert("L").resize(...)), so that the grey values
 * match PIL's exactly before resizing. Luma is PIL's fixed-point BT.601,
 * (19595 R + 38470 G + 7471 B + 2^15) >> 16; alpha is composited onto black
 * (the MNIST family is white on black, so a transparent background becomes
 * the background the model knows), with a single rounding for both.
 *
 * Resizing is area averaging when shrinking (every source pixel that a
 * target pixel covers, weighted by the part of it covered) and bilinear
 * when enlarging (pixel centres aligned, as PIL and OpenCV do), chosen per
 * axis. The weights are exact integers, so the result is the same on every
 * platform and compiler, with no floating-point rounding to differ.
 */
#include "image/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image/decoded.h"
#include "util/file.h"

pt_status pt_image_check_size(const char *name, const char *format, uint64_t w, uint64_t h) {
  if (w == 0 || h == 0)
    return pt_fail(PT_ERR_FORMAT, "%s: %s image of %llux%llu pixels, expected at least 1x1",
                   name, format, (unsigned long long)w, (unsigned long long)h);
  if (w > PT_IMAGE_MAX_SIDE || h > PT_IMAGE_MAX_SIDE)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %s image of %llux%llu pixels (width x height), above the limit of %d "
                   "pixels a side",
                   name, format, (unsigned long long)w, (unsigned long long)h, PT_IMAGE_MAX_SIDE);
  if (w * h > (uint64_t)PT_IMAGE_MAX_PIXELS)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %s image of %llux%llu pixels is %.1f Mpixel, above the limit of %d "
                   "Mpixel",
                   name, format, (unsigned long long)w, (unsigned long long)h,
                   (double)(w * h) / (1 << 20), (int)(PT_IMAGE_MAX_PIXELS >> 20));
  return PT_OK;
}

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

/* What a file that is neither PNG nor JPEG probably is, for the message. */
static const char *other_format(const uint8_t *b, size_t n) {
  if (n >= 4 && !memcmp(b, "GIF8", 4)) return ", which is GIF";
  if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return ", which is WebP";
  if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) return ", which is TIFF";
  if (n >= 2 && !memcmp(b, "BM", 2)) return ", which may be BMP";
  if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return ", which is gzip";
  return "";
}

/* (h, w, p->c) interleaved to (c, h, w) planar, c 1 or 3. */
static void to_planar(const pt_image_pixels *p, int c, uint8_t *dst) {
  size_t n = (size_t)p->h * (size_t)p->w;
  int sc = p->c, alpha = sc == 2 || sc == 4, colour = sc >= 3;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *s = p->px + i * (size_t)sc;
    uint64_t a = alpha ? s[sc - 1] : 255;
    if (c == 1) {
      uint64_t l16 = colour ? 19595u * s[0] + 38470u * s[1] + 7471u * s[2] : 65536u * s[0];
      dst[i] = (uint8_t)((l16 * a + 255u * 32768u) / (255u * 65536u));
    } else {
      for (int k = 0; k < 3; k++)
        dst[(size_t)k * n + i] = (uint8_t)((s[colour ? k : 0] * a + 127) / 255);
    }
  }
}

/* The source pixels behind target index i on an axis of src pixels made dst:
 * n (the return) integer weights wt for indices *first.., summing to *den.
 * Shrinking, in units of 1/dst of a source pixel: the target covers
 * [i src, (i + 1) src), source pixel j covers [j dst, (j + 1) dst), and
 * each j weighs its overlap (den = src). Enlarging, in units of
 * 1/(2 dst): the target's centre falls at (2i + 1) src - dst, between two
 * source centres, each weighing its nearness (den = 2 dst); clamped at the
 * edges. At most src / dst + 2 weights. */
static int taps(int i, int src, int dst, int *first, int64_t *wt, int64_t *den) {
  if (dst <= src) {
    int64_t lo = (int64_t)i * src, hi = lo + src;
    int j0 = (int)(lo / dst), j1 = (int)((hi - 1) / dst);
    for (int j = j0; j <= j1; j++) {
      int64_t a = (int64_t)j * dst, b = a + dst;
      wt[j - j0] = (hi < b ? hi : b) - (lo > a ? lo : a);
    }
    *first = j0;
    *den = src;
    return j1 - j0 + 1;
  }
  int64_t d = 2 * (int64_t)dst, at = (int64_t)(2 * i + 1) * src - dst;
  *den = d;
  int j = at <= 0 ? 0 : (int)(at / d);
  if (at <= 0 || j >= src - 1) {
    *first = at <= 0 ? 0 : src - 1;
    wt[0] = d;
    return 1;
  }
  *first = j;
  wt[1] = at % d;
  wt[0] = d - wt[1];
  return 2;
}

/* One plane (sh, sw) to (dh, dw), area averaging or bilinear per axis,
 * rounded half up. wy and wx hold sh / dh + 2 and sw / dw + 2 weights. */
static void resize(const uint8_t *src, int sh, int sw, uint8_t *dst, int dh, int dw, int64_t *wy,
                   int64_t *wx) {
  for (int y = 0; y < dh; y++) {
    int y0, x0;
    int64_t deny, denx;
    int ny = taps(y, sh, dh, &y0, wy, &deny);
    for (int x = 0; x < dw; x++) {
      int nx = taps(x, sw, dw, &x0, wx, &denx);
      int64_t acc = 0; /* at most 255 deny denx < 2^39 */
      for (int a = 0; a < ny; a++) {
        const uint8_t *row = src + (size_t)(y0 + a) * (size_t)sw + (size_t)x0;
        int64_t sum = 0;
        for (int b = 0; b < nx; b++) sum += wx[b] * row[b];
        acc += wy[a] * sum;
      }
      int64_t den = deny * denx;
      dst[(size_t)y * (size_t)dw + (size_t)x] = (uint8_t)((acc + den / 2) / den);
    }
  }
}

static const char *channels_name(int c) { return c == 1 ? "grey" : "RGB"; }

static void describe(const pt_image_pixels *p, int c, int h, int w, pt_image_info *info) {
  static const char *const stored[] = {"", "grey", "grey+alpha", "RGB", "RGBA"};
  info->src_c = p->stored_c;
  info->src_h = p->h;
  info->src_w = p->w;
  info->bit_depth = p->bit_depth;
  info->dropped_alpha = p->c == 2 || p->c == 4;
  info->converted_colour = p->cmyk || (c == 1) != (p->c <= 2);
  info->resized = p->h != h || p->w != w;
  info->note[0] = 0;
  if (info->converted_colour || info->resized || info->dropped_alpha || p->bit_depth != 8)
    snprintf(info->note, sizeof info->note, "converted %dx%d %s%s to %dx%d %s%s", p->w, p->h,
             p->bit_depth == 16 ? "16-bit " : "",
             p->cmyk ? "CMYK" : p->palette ? (p->c == 4 ? "palette+alpha" : "palette") : stored[p->c], w, h,
             channels_name(c),
             info->dropped_alpha ? ", dropped alpha (composited onto black)" : "");
}

pt_status pt_image_decode(const uint8_t *buf, size_t len, const char *name, int c, int h, int w,
                          uint8_t *out, pt_image_info *info) {
  pt_image_info unused;
  if (!info) info = &unused;
  memset(info, 0, sizeof *info);
  if (c != 1 && c != 3)
    return pt_fail(PT_ERR_ARG, "%s: the model takes %d channels, expected 1 (grey) or 3 (RGB)",
                   name, c);
  if (h < 1 || h > PT_IMAGE_MAX_SIDE || w < 1 || w > PT_IMAGE_MAX_SIDE)
    return pt_fail(PT_ERR_ARG, "%s: the model takes %dx%d images, expected sides in 1..%d", name,
                   w, h, PT_IMAGE_MAX_SIDE);
  if (len == 0) return pt_fail(PT_ERR_FORMAT, "%s: empty file, expected a PNG or JPEG image", name);

  pt_image_pixels p;
  pt_status st;
  /* A prefix of the PNG signature is a truncated PNG, for libpng to say so. */
  if (len >= 4 && !memcmp(buf, png_signature, len < 8 ? len : 8)) {
    st = pt_image_decode_png(buf, len, name, &p);
  } else if (len >= 2 && buf[0] == 0xff && buf[1] == 0xd8) {
    st = pt_image_decode_jpeg(buf, len, name, &p);
  } else {
    char sig[8 * 3] = ""; /* "89 50 4e 47 0d 0a 1a 0a" */
    for (size_t i = 0, at = 0; i < len && i < 8; i++)
      at += (size_t)snprintf(sig + at, sizeof sig - at, i ? " %02x" : "%02x", buf[i]);
    return pt_fail(PT_ERR_FORMAT, "%s: expected a PNG or JPEG image (signature %s%s)", name, sig,
                   other_format(buf, len));
  }
  PT_TRY(st);

  describe(&p, c, h, w, info);
  if (!info->resized) {
    to_planar(&p, c, out);
    free(p.px);
    return PT_OK;
  }
  size_t plane = (size_t)p.h * (size_t)p.w;
  uint8_t *planar = pt_malloc((size_t)c * plane); /* (c, src_h, src_w) */
  int64_t *wy = pt_malloc(sizeof *wy * (size_t)(p.h / h + p.w / w + 4));
  int64_t *wx = wy ? wy + p.h / h + 2 : NULL;
  if (planar && wy) {
    to_planar(&p, c, planar);
    for (int k = 0; k < c; k++)
      resize(planar + k * plane, p.h, p.w, out + (size_t)k * h * w, h, w, wy, wx);
  } else {
    st = pt_wrap(PT_ERR_NOMEM, "%s", name);
  }
  free(wy);
  free(planar);
  free(p.px);
  return st;
}

pt_status pt_image_read(const char *path, int c, int h, int w, uint8_t *out,
                        pt_image_info *info) {
  if (info) memset(info, 0, sizeof *info);
  /* The file is read whole: bound it first, as the pixels are bounded
   * after. 64 Mpixel of RGBA compresses to far less than this. */
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > PT_IMAGE_MAX_FILE_BYTES)
    return pt_fail(PT_ERR_FORMAT, "%s: %llu bytes, larger than the %llu MiB an image may have here", path,
                   (unsigned long long)sb.st_size, (unsigned long long)(PT_IMAGE_MAX_FILE_BYTES >> 20));
  uint8_t *buf;
  size_t len;
  PT_TRY(pt_read_file(path, &buf, &len));
  pt_status st = pt_image_decode(buf, len, path, c, h, w, out, info);
  free(buf);
  return st;
}
