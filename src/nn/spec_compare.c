/* Whether two specs describe the same computation, for a resume: a spec
 * file edited between the runs (a layer's width, an activation, the
 * normalisation) keeps the model's name, and its tensors may keep their
 * shapes, so neither of those checks sees it.
 *
 * Left out of the comparison: the name (checked on its own, with its own
 * advice), the lines and origin (where the text came from), the training
 * defaults (flags override them, and the state records the optimizer) and
 * dropout's p where this run's is 0: --no-dropout sets it so after the
 * text is read, and the weights record the text. */
#include "nn/spec_compare.h"

#include <stdio.h>
#include <string.h>

static int layer_differs(const pt_layer_spec *a, const pt_layer_spec *b, int i, char *what, size_t n) {
  const char *kind = pt_layer_kind_name(a->kind);
  if (a->kind != b->kind) {
    snprintf(what, n, "layer %d is %s, not %s", i + 1, pt_layer_kind_name(b->kind), kind);
    return 1;
  }
  if (strcmp(a->name, b->name)) {
    snprintf(what, n, "layer %d (%s) is named '%s', not '%s'", i + 1, kind, b->name, a->name);
    return 1;
  }
  const struct {
    const char *key;
    double x, y;
  } v[] = {{"out", a->out, b->out},       {"kernel", a->kernel, b->kernel},   {"stride", a->stride, b->stride},
           {"padding", a->padding, b->padding}, {"bias", a->bias, b->bias},  {"eps", a->eps, b->eps},
           {"momentum", a->momentum, b->momentum}};
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
    if (v[k].x != v[k].y) {
      snprintf(what, n, "layer %d (%s%s%s) has %s=%g, not %g", i + 1, kind, a->name[0] ? " " : "", a->name, v[k].key,
               v[k].y, v[k].x);
      return 1;
    }
  if (a->kind == PT_L_DROPOUT && a->p != 0 && a->p != b->p) {
    snprintf(what, n, "layer %d (dropout) has p=%g, not %g", i + 1, b->p, a->p);
    return 1;
  }
  return 0;
}

/* "mean=0.5 std=0.1", a value per input channel as the spec writes it */
static const char *normalisation(const pt_model_spec *s, char *buf, size_t n) {
  const int c = s->in_c >= 1 && s->in_c <= 3 ? s->in_c : 3;
  size_t len = (size_t)snprintf(buf, n, "mean=");
  for (int i = 0; i < c && len < n; i++) len += (size_t)snprintf(buf + len, n - len, "%s%g", i ? "," : "", s->mean[i]);
  if (len < n) len += (size_t)snprintf(buf + len, n - len, " std=");
  for (int i = 0; i < c && len < n; i++) len += (size_t)snprintf(buf + len, n - len, "%s%g", i ? "," : "", s->std[i]);
  return buf;
}

int pt_spec_differs(const pt_model_spec *a, const pt_model_spec *b, char *what, size_t n) {
  if (a->in_c != b->in_c || a->in_h != b->in_h || a->in_w != b->in_w) {
    snprintf(what, n, "its input is %dx%dx%d, not %dx%dx%d", b->in_c, b->in_h, b->in_w, a->in_c, a->in_h, a->in_w);
    return 1;
  }
  if (a->nlayers != b->nlayers) {
    snprintf(what, n, "it has %d layers, not %d", b->nlayers, a->nlayers);
    return 1;
  }
  for (int i = 0; i < a->nlayers; i++)
    if (layer_differs(&a->layers[i], &b->layers[i], i, what, n)) return 1;
  if (a->loss != b->loss) {
    snprintf(what, n, "its loss is %s, not %s", pt_loss_kind_name(b->loss), pt_loss_kind_name(a->loss));
    return 1;
  }
  if (memcmp(a->mean, b->mean, sizeof a->mean) || memcmp(a->std, b->std, sizeof a->std)) {
    char was[96], now[96];
    snprintf(what, n, "its normalisation is %s, not %s", normalisation(b, was, sizeof was),
             normalisation(a, now, sizeof now));
    return 1;
  }
  if (a->crop_pad != b->crop_pad || a->hflip != b->hflip) {
    snprintf(what, n, "its augmentation differs (crop padding %d, flip %d, not %d, %d)", b->crop_pad, b->hflip,
             a->crop_pad, a->hflip);
    return 1;
  }
  return 0;
}
