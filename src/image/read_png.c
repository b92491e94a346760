/* PNG through libpng, from memory.
 *
 * libpng reports errors by calling an error function that must not return;
 * its default prints to stderr and longjmps to the jmp_buf in png_struct.
 * Ours keeps libpng's text for the pt_fail message and longjmps there
 * silently, and warnings (a bad CRC on an ancillary chunk, which libpng
 * then skips) are dropped: the library never prints. Everything that must
 * survive the longjmp (the buffers to free) lives in a png_job owned by the
 * caller of the setjmp, so no local is left indeterminate by it.
 *
 * The input comes through a read callback rather than a FILE, so a file
 * that ends early is known to be truncated rather than reported as
 * whatever libpng was parsing at the time.
 *
 * Every variant is normalised to 8-bit grey, grey+alpha, RGB or RGBA:
 * palettes expanded, 1/2/4-bit grey expanded exactly, a tRNS colour key
 * turned into alpha, 16-bit samples scaled with rounding (png_set_scale_16,
 * not truncated to the high byte), Adam7 interlacing undone. Gamma and
 * colour profiles are ignored, as PIL ignores them, so a model trained on
 * PIL-loaded images sees the same bytes.
 */
#include "image/decoded.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *name;
  const uint8_t *buf;
  size_t len, pos; /* pos: the next byte libpng reads */
  int truncated;
  char msg[256]; /* libpng's error text */
  png_structp png;
  png_infop info;
  png_bytep *rows; /* (h) pointers into out->px */
  pt_image_pixels *out;
} png_job;

static void on_error(png_structp png, png_const_charp msg) {
  png_job *job = png_get_error_ptr(png);
  snprintf(job->msg, sizeof job->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static void on_read(png_structp png, png_bytep dst, size_t n) {
  png_job *job = png_get_io_ptr(png);
  if (n > job->len - job->pos) {
    job->truncated = 1;
    png_error(png, "unexpected end of file");
  }
  memcpy(dst, job->buf + job->pos, n);
  job->pos += n;
}

static pt_status run(png_job *job) {
  png_structp png = job->png;
  png_infop info = job->info;
  if (setjmp(png_jmpbuf(png))) {
    if (job->truncated)
      return pt_fail(PT_ERR_FORMAT,
                     "%s: truncated PNG: the file ends after %zu bytes, before the image is "
                     "complete",
                     job->name, job->len);
    return pt_fail(PT_ERR_FORMAT, "%s: malformed PNG: %s", job->name, job->msg);
  }
  png_set_read_fn(png, job, on_read);
  /* libpng's own limit would refuse a large image with its message; ours
   * (pt_image_check_size) names the limit and applies to JPEG alike. */
  png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_read_info(png, info);
  png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  PT_TRY(pt_image_check_size(job->name, "PNG", w, h));

  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_scale_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  int c = png_get_channels(png, info);
  size_t stride = png_get_rowbytes(png, info);
  if (png_get_bit_depth(png, info) != 8 || c < 1 || c > 4 || stride != (size_t)w * (size_t)c)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: unsupported PNG (colour type %d, bit depth %d), expected grey, RGB or "
                   "palette with or without alpha",
                   job->name, type, depth);

  pt_image_pixels *out = job->out;
  out->px = pt_malloc(stride * h); /* (h, w, c) */
  job->rows = pt_malloc(sizeof *job->rows * h);
  if (!out->px || !job->rows) return pt_wrap(PT_ERR_NOMEM, "%s", job->name);
  for (png_uint_32 y = 0; y < h; y++) job->rows[y] = out->px + stride * y;
  png_read_image(png, job->rows);
  /* To IEND, so that a file cut after its image data is refused as well. */
  png_read_end(png, NULL);
  out->c = out->stored_c = c;
  out->h = (int)h;
  out->w = (int)w;
  out->bit_depth = depth == 16 ? 16 : 8;
  out->palette = type == PNG_COLOR_TYPE_PALETTE;
  return PT_OK;
}

pt_status pt_image_decode_png(const uint8_t *buf, size_t len, const char *name,
                              pt_image_pixels *out) {
  memset(out, 0, sizeof *out);
  png_job job = {.name = name, .buf = buf, .len = len, .out = out};
  job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, on_error, on_warning);
  if (!job.png) return pt_fail(PT_ERR_NOMEM, "%s: cannot initialise libpng", name);
  job.info = png_create_info_struct(job.png);
  pt_status st = job.info ? run(&job) : pt_fail(PT_ERR_NOMEM, "%s: cannot initialise libpng", name);
  png_destroy_read_struct(&job.png, job.info ? &job.info : NULL, NULL);
  free(job.rows);
  if (st != PT_OK) {
    free(out->px);
    out->px = NULL;
  }
  return st;
}
