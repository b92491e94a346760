/* JPEG through libjpeg(-turbo), from memory.
 *
 * libjpeg's default error handler prints and calls exit(); ours keeps the
 * library's text for the pt_fail message and longjmps back to the decode,
 * and its message hook prints nothing. Everything that must survive the
 * longjmp (the decompressor, the pixels) lives in a jpeg_job owned by the
 * caller of the setjmp, so no local is left indeterminate by it.
 *
 * Damaged entropy-coded data is only a warning to libjpeg (it fills in
 * what it cannot decode); like PIL, those are accepted, silently. A file
 * that ends early is not: jpeg_mem_src then invents an end-of-image marker
 * and warns JWRN_JPEG_EOF, which is turned into a truncation error, so a
 * half-downloaded photo is refused rather than classified half grey.
 *
 * A progressive JPEG may carry any number of scans, each a pass over the
 * whole image: a small file could keep the decoder busy for minutes. More
 * than JPEG_MAX_SCANS is refused (djpeg's -maxscans, the same guard).
 *
 * Grey stays grey, YCbCr and RGB arrive as RGB, CMYK (and YCCK) is
 * converted here to RGB; Adobe's writers store CMYK inverted, and mark it
 * with their APP14 marker, as PIL assumes too.
 */
#include "image/decoded.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#define JPEG_MAX_SCANS 500

typedef struct {
  struct jpeg_error_mgr pub; /* first: libjpeg hands back a pointer to it */
  jmp_buf jump;
  int truncated;
  char msg[JMSG_LENGTH_MAX]; /* the library's, or ours, error text */
} jpeg_errors;

typedef struct {
  const char *name;
  const uint8_t *buf;
  size_t len;
  struct jpeg_decompress_struct ci;
  jpeg_errors err;
  struct jpeg_progress_mgr progress;
  int created; /* ci needs jpeg_destroy_decompress */
  pt_image_pixels *out;
} jpeg_job;

static void on_error_exit(j_common_ptr ci) {
  jpeg_errors *e = (jpeg_errors *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jump, 1);
}

static void on_message(j_common_ptr ci, int level) {
  if (level >= 0) return; /* trace output */
  jpeg_errors *e = (jpeg_errors *)ci->err;
  if (ci->err->msg_code == JWRN_JPEG_EOF) {
    e->truncated = 1;
    longjmp(e->jump, 1);
  }
  ci->err->num_warnings++;
}

static void on_output(j_common_ptr ci) { (void)ci; }

static void on_progress(j_common_ptr ci) {
  if (!ci->is_decompressor) return;
  int scans = ((j_decompress_ptr)ci)->input_scan_number;
  if (scans > JPEG_MAX_SCANS) {
    jpeg_errors *e = (jpeg_errors *)ci->err;
    snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", JPEG_MAX_SCANS);
    longjmp(e->jump, 1);
  }
}

/* (n, 4) CMYK to (n, 3) RGB in place: each pixel's output starts no later
 * than its input. */
static void cmyk_to_rgb(uint8_t *px, size_t n, int inverted) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t *s = px + 4 * i;
    unsigned k = inverted ? s[3] : 255u - s[3];
    uint8_t rgb[3];
    for (int j = 0; j < 3; j++) {
      unsigned v = inverted ? s[j] : 255u - s[j];
      rgb[j] = (uint8_t)((v * k + 127) / 255);
    }
    memcpy(px + 3 * i, rgb, 3);
  }
}

static pt_status run(jpeg_job *job) {
  struct jpeg_decompress_struct *ci = &job->ci;
  if (setjmp(job->err.jump)) {
    if (job->err.truncated)
      return pt_fail(PT_ERR_FORMAT,
                     "%s: truncated JPEG: the file ends after %zu bytes, before the image is "
                     "complete",
                     job->name, job->len);
    return pt_fail(PT_ERR_FORMAT, "%s: malformed JPEG: %s", job->name, job->err.msg);
  }
  jpeg_create_decompress(ci);
  job->created = 1;
  job->progress.progress_monitor = on_progress;
  ci->progress = &job->progress;
  jpeg_mem_src(ci, job->buf, (unsigned long)job->len);
  jpeg_read_header(ci, TRUE);
  PT_TRY(pt_image_check_size(job->name, "JPEG", ci->image_width, ci->image_height));

  int c;
  switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: ci->out_color_space = JCS_GRAYSCALE; c = 1; break;
    case JCS_YCbCr:
    case JCS_RGB: ci->out_color_space = JCS_RGB; c = 3; break;
    case JCS_CMYK:
    case JCS_YCCK: ci->out_color_space = JCS_CMYK; c = 4; break;
    default:
      return pt_fail(PT_ERR_FORMAT,
                     "%s: unsupported JPEG colour space (%d components), expected grey, "
                     "YCbCr, RGB or CMYK",
                     job->name, ci->num_components);
  }
  jpeg_start_decompress(ci);
  if (ci->output_components != c)
    return pt_fail(PT_ERR_FORMAT, "%s: JPEG decodes to %d components, expected %d", job->name,
                   ci->output_components, c);

  pt_image_pixels *out = job->out;
  size_t w = ci->output_width, h = ci->output_height, stride = w * (size_t)c;
  out->px = pt_malloc(stride * h); /* (h, w, c) */
  if (!out->px) return pt_wrap(PT_ERR_NOMEM, "%s", job->name);
  while (ci->output_scanline < ci->output_height) {
    JSAMPROW row = out->px + stride * ci->output_scanline;
    if (jpeg_read_scanlines(ci, &row, 1) != 1) /* only a suspending source returns 0 */
      return pt_fail(PT_ERR_FORMAT, "%s: JPEG decoder returned no data", job->name);
  }
  /* To the end-of-image marker, so that a file cut after its last scan is
   * refused as well. */
  jpeg_finish_decompress(ci);
  out->stored_c = c;
  if (c == 4) {
    cmyk_to_rgb(out->px, w * h, ci->saw_Adobe_marker);
    out->cmyk = 1;
    c = 3;
  }
  out->c = c;
  out->h = (int)h;
  out->w = (int)w;
  out->bit_depth = 8;
  return PT_OK;
}

pt_status pt_image_decode_jpeg(const uint8_t *buf, size_t len, const char *name,
                               pt_image_pixels *out) {
  memset(out, 0, sizeof *out);
  jpeg_job job = {.name = name, .buf = buf, .len = len, .out = out};
  job.ci.err = jpeg_std_error(&job.err.pub);
  job.err.pub.error_exit = on_error_exit;
  job.err.pub.emit_message = on_message;
  job.err.pub.output_message = on_output;
  pt_status st = run(&job);
  if (job.created) jpeg_destroy_decompress(&job.ci);
  if (st != PT_OK) {
    free(out->px);
    out->px = NULL;
  }
  return st;
}
