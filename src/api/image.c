/* Images from files as a net's input. */
#include <stdlib.h>

#include "api/api.h"
#include "image/image.h"

pt_status pt_image_load(const char *path, const pt_net *net, float *pixels, char *note, size_t note_size) {
  if (note && note_size) note[0] = 0;
  if (!path || !net || !pixels) return pt_fail(PT_ERR_ARG, "pt_image_load: path, net or pixels is NULL");
  if (!path[0]) return pt_fail(PT_ERR_ARG, "pt_image_load: empty path: expected a PNG or JPEG file's path");
  const pt_model_spec *s = &net->spec;
  const size_t n = (size_t)s->in_c * s->in_h * s->in_w;
  uint8_t *bytes = pt_malloc(n); /* (c, h, w) */
  if (!bytes) return PT_ERR_NOMEM;
  pt_image_info info;
  pt_status st = pt_image_read(path, s->in_c, s->in_h, s->in_w, bytes, &info);
  if (st == PT_OK) {
    for (size_t i = 0; i < n; i++) pixels[i] = bytes[i] / 255.0f;
    if (note && note_size) snprintf(note, note_size, "%s", info.note);
  }
  free(bytes);
  return st;
}
