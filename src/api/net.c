/* pt_net: a model's layers and, once trained or loaded, its weights. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "nn/presets.h"
#include "train/checkpoint.h"

static pt_status net_from_text(const char *text, const char *origin, pt_net **out) {
  *out = NULL;
  if (!text) return pt_fail(PT_ERR_ARG, "no model spec given");
  pt_net *net = calloc(1, sizeof *net);
  if (!net) return pt_fail(PT_ERR_NOMEM, "out of memory for a model");
  pt_status st = pt_spec_parse(text, origin, &net->spec);
  /* Shapes too, now: a layer that cannot take its input is the file's
   * error, better said before any data is read than when training starts. */
  pt_model_summary unused;
  if (st == PT_OK) st = pt_model_summarize(&net->spec, &unused);
  if (st == PT_OK && !(net->spec_text = strdup(text))) st = pt_fail(PT_ERR_NOMEM, "out of memory for a model spec");
  if (st != PT_OK) {
    pt_net_free(net);
    return st;
  }
  *out = net;
  return PT_OK;
}

pt_status pt_net_preset(const char *name, pt_net **out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_net_preset: out is NULL");
  *out = NULL;
  if (!name) return pt_fail(PT_ERR_ARG, "pt_net_preset: name is NULL; expected a preset's name, as \"mnist-cnn\"");
  const pt_preset *p = pt_preset_find(name);
  if (!p) {
    pt_model_spec unused;
    return pt_preset_spec(name, &unused); /* the message lists the presets */
  }
  return net_from_text(p->text, p->name, out);
}

pt_status pt_net_spec(const char *text, pt_net **out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_net_spec: out is NULL");
  return net_from_text(text, "model spec", out);
}

pt_status pt_net_spec_file(const char *path, pt_net **out) {
  if (!out || !path) return pt_fail(PT_ERR_ARG, "pt_net_spec_file: path or out is NULL");
  *out = NULL;
  if (!path[0]) return pt_fail(PT_ERR_ARG, "pt_net_spec_file: empty path: expected a spec file's path");
  char *text;
  PT_TRY(pt_spec_read_file(path, &text));
  pt_status st = net_from_text(text, path, out);
  free(text);
  return st;
}

pt_status pt_net_load(const char *checkpoint, const char *model, pt_net **out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_net_load: out is NULL");
  *out = NULL;
  if (!checkpoint) return pt_fail(PT_ERR_ARG, "pt_net_load: checkpoint is NULL");
  if (!checkpoint[0])
    return pt_fail(PT_ERR_ARG, "pt_net_load: empty checkpoint: expected a .safetensors file or a checkpoint directory");
  if (model && !model[0])
    return pt_fail(PT_ERR_ARG, "pt_net_load: empty model: expected a preset's name or a spec file's path, or NULL "
                               "for the layers the checkpoint records");
  pt_status st;
  char trained_on[sizeof (*out)->trained_on] = "";
  if (model) {
    /* A preset's name, or else a spec file's path. A name with a dot or a
     * slash is a path (no preset has either): a missing file says so. */
    const int path = strchr(model, '/') || strchr(model, '.') || !access(model, F_OK);
    st = pt_preset_find(model) || !path ? pt_net_preset(model, out) : pt_net_spec_file(model, out);
  } else {
    char *text;
    /* A file that cannot be read says why first; only a readable one
     * without a spec needs the model named. */
    PT_TRY(pt_checkpoint_spec_text(checkpoint, &text));
    if (!text)
      return pt_fail(PT_ERR_ARG, "%s records no model (its metadata has no ptrain.spec: weights saved by another "
                                 "program); name the model's preset or spec file (--model or --model-file)",
                     checkpoint);
    st = net_from_text(text, checkpoint, out);
    free(text);
  }
  if (st != PT_OK) return st;
  pt_net *net = *out;
  st = pt_model_create(&net->m, &net->spec, 1);
  if (st != PT_OK) st = pt_wrap(st, "%s: model %s", checkpoint, net->spec.name);
  if (st == PT_OK) st = pt_checkpoint_load_weights(checkpoint, net->m, trained_on, sizeof trained_on);
  /* Trained on another dataset than the spec's default (mnist-cnn on
   * MNIST): eval's test split and predict's class names are that one's. */
  if (st == PT_OK) memcpy(net->trained_on, trained_on, sizeof trained_on);
  if (st != PT_OK) {
    pt_net_free(net);
    *out = NULL;
  }
  return st;
}

pt_status pt_net_save(const pt_net *net, const char *path) {
  if (!net || !path) return pt_fail(PT_ERR_ARG, "pt_net_save: net or path is NULL");
  if (!path[0]) return pt_fail(PT_ERR_ARG, "pt_net_save: empty path: expected a .safetensors file's path");
  if (!net->m)
    return pt_fail(PT_ERR_STATE, "%s: model %s has no weights to save yet (train it or load a checkpoint)", path,
                   net->spec.name);
  return pt_checkpoint_save_weights(path, net->m, net->spec_text, net->trained_on[0] ? net->trained_on : NULL);
}

void pt_net_free(pt_net *net) {
  if (!net) return;
  pt_model_destroy(net->m);
  free(net->spec_text);
  free(net);
}

const char *pt_net_name(const pt_net *net) { return net ? net->spec.name : NULL; }

void pt_net_shape(const pt_net *net, int *c, int *h, int *w, int *classes) {
  if (c) *c = net ? net->spec.in_c : 0;
  if (h) *h = net ? net->spec.in_h : 0;
  if (w) *w = net ? net->spec.in_w : 0;
  if (classes) {
    pt_model_summary s;
    *classes = net && pt_model_summarize(&net->spec, &s) == PT_OK ? s.classes : 0;
  }
}

size_t pt_net_parameters(const pt_net *net) {
  pt_model_summary s;
  return net && pt_model_summarize(&net->spec, &s) == PT_OK ? s.nparams : 0;
}

int pt_net_has_weights(const pt_net *net) { return net && net->m; }
const char *pt_net_dataset(const pt_net *net) {
  return !net ? NULL : net->trained_on[0] ? net->trained_on : net->spec.defaults.dataset;
}
const char *pt_net_spec_text(const pt_net *net) { return net ? net->spec_text : NULL; }

const char *pt_preset_name(int i) {
  const pt_preset *p = i >= 0 && i < pt_preset_count() ? pt_preset_at(i) : NULL;
  return p ? p->name : NULL;
}

const char *pt_version(void) { return PT_VERSION; }

pt_status pt_net_model_for(pt_net *net, int want, pt_model **m) {
  *m = NULL;
  if (!net->m)
    return pt_fail(PT_ERR_STATE, "model %s has no weights yet: train it or load a checkpoint", net->spec.name);
  if (want > 256) want = 256;
  if (want < 1) want = 1;
  if (net->m->max_batch < want) {
    pt_model *big;
    PT_TRY(pt_model_create(&big, &net->spec, want));
    pt_status st = pt_model_copy_weights(big, net->m);
    if (st != PT_OK) {
      pt_model_destroy(big);
      return st;
    }
    pt_model_destroy(net->m);
    net->m = big;
  }
  *m = net->m;
  return PT_OK;
}

const char *pt_net_class_name(const pt_net *net, int label) {
  pt_dataset_kind kind;
  if (!net || pt_dataset_kind_parse(pt_net_dataset(net), &kind) != PT_OK) return NULL;
  return pt_dataset_class_name(kind, label);
}
