/* Building and running a sequential model. Shape inference walks the spec
 * once, registering parameters with their PyTorch names; the same walk sizes
 * every activation buffer, so forward and backward only index memory that
 * already exists. */
#include "nn/model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/philox.h"
#include "util/timer.h"
#include "util/trace.h"

static int add_tensor(pt_tensor_info *tab, int *count, size_t *total, const char *layer,
                      const char *what, int ndim, const int64_t *shape) {
  pt_tensor_info *t = &tab[(*count)];
  snprintf(t->name, sizeof t->name, "%s.%s", layer, what);
  t->ndim = ndim;
  t->numel = 1;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->numel *= (size_t)shape[i];
  }
  t->offset = *total;
  *total += t->numel;
  return (*count)++;
}

static int add_param(pt_model *m, const char *layer, const char *what, int ndim, const int64_t *shape) {
  return add_tensor(m->params, &m->nparams, &m->nparam_total, layer, what, ndim, shape);
}

static int add_buffer(pt_model *m, const char *layer, const char *what, int ndim, const int64_t *shape) {
  return add_tensor(m->buffers, &m->nbuffers, &m->nbuffer_total, layer, what, ndim, shape);
}

/* Whether layer index takes flat (N, C) input, as PyTorch sees it: the
 * nearest layer before it that sets the shape is a linear or a flatten.
 * A convolution's or a pooling's 1x1 output is still (N, C, 1, 1), and so
 * is the model's input. A stage looks back through the whole model, so
 * that a split never changes what a spec means. */
static int takes_flat(const pt_model *m, int index) {
  const pt_model_spec *whole = m->whole ? &m->whole->spec : &m->spec;
  for (int i = m->layer_base + index - 1; i >= 0; i--) {
    const pt_layer_kind k = whole->layers[i].kind;
    if (k == PT_L_LINEAR || k == PT_L_FLATTEN) return 1;
    if (k == PT_L_CONV2D || k == PT_L_MAXPOOL2D) return 0;
  }
  return 0;
}

int pt_model_output_flat(const pt_model *m, int index) { return takes_flat(m, index + 1); }

/* A flat input prints as its length alone: "784x1x1" would read as an
 * image of 784 channels, which a conv or a pool could take. */
static pt_status shape_error(const pt_model *m, const pt_layer *L, const char *origin, const char *what) {
  char in[48];
  if (takes_flat(m, L->index)) snprintf(in, sizeof in, "%d", L->in_c);
  else snprintf(in, sizeof in, "%dx%dx%d", L->in_c, L->in_h, L->in_w);
  return pt_fail(PT_ERR_FORMAT, "%s:%d: %s%s%s: input %s: %s", origin, L->spec.line, pt_layer_kind_name(L->spec.kind),
                 L->spec.name[0] ? " " : "", L->spec.name, in, what);
}

/* Conv2d and MaxPool2d take (N, C, H, W) in PyTorch: after a flatten or a
 * linear, the input is (N, C) and PyTorch would fail, so the spec must. */
static pt_status needs_image(const pt_model *m, const pt_layer *L, const char *origin) {
  if (!takes_flat(m, L->index)) return PT_OK;
  char msg[128];
  snprintf(msg, sizeof msg, "%s needs an image input (C x H x W); the input here is flat (%d)",
           pt_layer_kind_name(L->spec.kind), L->in_c);
  return shape_error(m, L, origin, msg);
}

/* Whether layer i sees the model's input as it is (nothing but flatten
 * before it, in the whole model for a stage), and that input is likely to
 * be mostly zeros, which a linear layer with its weight in panels skips:
 * one channel with no mean subtracted, as unnormalised MNIST and
 * Fashion-MNIST are (half their pixels are 0). Colour photographs
 * (CIFAR-10) have few zeros, and on dense input the panels' forward pass
 * is slower than the dense kernels on PyTorch's order. */
static int zeros_kept(const pt_model *m, int i) {
  const pt_model_spec *whole = m->whole ? &m->whole->spec : &m->spec;
  if (whole->in_c != 1 || whole->mean[0] != 0.0f) return 0;
  for (int j = 0; j < m->layer_base + i; j++)
    if (whole->layers[j].kind != PT_L_FLATTEN) return 0;
  return 1;
}

/* The kernels index a sample's activation and a parameter tensor with
 * int, so n values (counted in int64, where no spec can overflow them) of
 * either must fit one. */
static pt_status check_size(const pt_model *m, const pt_layer *L, const char *origin, const char *what, int64_t n) {
  if (n <= INT_MAX) return PT_OK;
  char msg[160];
  snprintf(msg, sizeof msg, "%s of %lld values: at most %d", what, (long long)n, INT_MAX);
  return shape_error(m, L, origin, msg);
}

/* Floats of workspace layer L needs when its op is split among threads. */
static size_t layer_workspace(const pt_model *m, const pt_layer *L, int threads) {
  const pt_backend *be = m->be ? m->be : pt_backend_cpu();
  if (L->spec.kind == PT_L_CONV2D) return be->conv_workspace(&L->conv, threads);
  if (L->spec.kind == PT_L_LINEAR) return be->linear_workspace(m->max_batch, L->in_c, L->out_c, threads);
  return 0;
}

/* Where the model's end is declared, for its errors: the origin and the
 * last layer's line, as the parser names its own errors. */
static void last_layer_at(const pt_model *m, const pt_model_spec *spec, char *at, size_t len) {
  const char *origin = spec->origin[0] ? spec->origin : spec->name;
  const int line = m->nlayers ? m->layers[m->nlayers - 1].spec.line : 0;
  if (line > 0) snprintf(at, len, "%s:%d", origin, line);
  else snprintf(at, len, "%s", origin);
}

/* Infers L's output shape from its input and registers its parameters. */
static pt_status infer_layer(pt_model *m, pt_layer *L, size_t *ws_max) {
  const pt_layer_spec *s = &L->spec;
  const char *origin = m->spec.origin[0] ? m->spec.origin : m->spec.name;
  L->out_c = L->in_c;
  L->out_h = L->in_h;
  L->out_w = L->in_w;
  L->w = L->b = L->rmean = L->rvar = -1;
  switch (s->kind) {
    case PT_L_CONV2D: {
      PT_TRY(needs_image(m, L, origin));
      pt_conv_geom g = {.c = L->in_c, .h = L->in_h, .w = L->in_w, .oc = s->out, .kh = s->kernel, .kw = s->kernel,
                        .stride = s->stride, .pad = s->padding};
      if (!pt_conv_init(&g)) return shape_error(m, L, origin, "kernel larger than the padded input");
      L->conv = g;
      L->out_c = s->out;
      L->out_h = g.oh;
      L->out_w = g.ow;
      int64_t ws[4] = {s->out, L->in_c, s->kernel, s->kernel}, bs[1] = {s->out};
      PT_TRY(check_size(m, L, origin, "weight", ws[0] * ws[1] * ws[2] * ws[3]));
      PT_TRY(check_size(m, L, origin, "output", (int64_t)g.oc * g.oh * g.ow)); /* before the workspace's sums */
      L->w = add_param(m, s->name, "weight", 4, ws);
      if (s->bias) L->b = add_param(m, s->name, "bias", 1, bs);
      size_t need = layer_workspace(m, L, pt_ops_get_threads());
      if (need > *ws_max) *ws_max = need;
      break;
    }
    case PT_L_LINEAR: {
      /* PyTorch's Linear acts on the last dimension, so a 1x1 map, which
       * is (N, C, 1, 1), needs its flatten too. */
      if (!takes_flat(m, L->index))
        return shape_error(m, L, origin, "linear takes flat input: add 'flatten' before it");
      L->out_c = s->out;
      int64_t ws[2] = {s->out, L->in_c}, bs[1] = {s->out};
      PT_TRY(check_size(m, L, origin, "weight", ws[0] * ws[1]));
      L->w = add_param(m, s->name, "weight", 2, ws);
      if (s->bias) L->b = add_param(m, s->name, "bias", 1, bs);
      const pt_backend *be = m->be ? m->be : pt_backend_cpu();
      m->params[L->w].panels = zeros_kept(m, L->index) && be->linear_panels_ok && be->linear_panels_ok(L->in_c, s->out);
      size_t need = layer_workspace(m, L, pt_ops_get_threads());
      if (need > *ws_max) *ws_max = need;
      break;
    }
    case PT_L_BATCHNORM2D: {
      if (takes_flat(m, L->index))
        return shape_error(m, L, origin, "batchnorm2d needs (C, H, W) input, not flat (PyTorch's BatchNorm2d takes "
                                      "4-D input)");
      int64_t cs[1] = {L->in_c};
      L->w = add_param(m, s->name, "weight", 1, cs);
      L->b = add_param(m, s->name, "bias", 1, cs);
      L->rmean = add_buffer(m, s->name, "running_mean", 1, cs);
      L->rvar = add_buffer(m, s->name, "running_var", 1, cs);
      break;
    }
    case PT_L_MAXPOOL2D:
      PT_TRY(needs_image(m, L, origin));
      if (L->in_h < s->kernel || L->in_w < s->kernel)
        return shape_error(m, L, origin, "pooling kernel larger than the input");
      L->out_h = (L->in_h - s->kernel) / s->stride + 1;
      L->out_w = (L->in_w - s->kernel) / s->stride + 1;
      break;
    case PT_L_FLATTEN: {
      const int64_t n = (int64_t)L->in_c * L->in_h * L->in_w;
      PT_TRY(check_size(m, L, origin, "output", n));
      L->out_c = (int)n;
      L->out_h = L->out_w = 1;
      break;
    }
    case PT_L_LOGSOFTMAX:
      if (L->in_h != 1 || L->in_w != 1) return shape_error(m, L, origin, "logsoftmax takes flat input");
      break;
    case PT_L_RELU:
    case PT_L_DROPOUT: break;
  }
  return check_size(m, L, origin, "output", (int64_t)L->out_c * L->out_h * L->out_w);
}

static size_t out_size(const pt_layer *L) { return (size_t)L->out_c * L->out_h * L->out_w; }

/* Backend memory, zeroed; NULL (and the backend's message) when it fails. */
static void *balloc(const pt_model *m, size_t bytes) { return m->be->alloc(bytes ? bytes : 1); }

static pt_status alloc_activations(pt_model *m, size_t ws_max) {
  const size_t B = (size_t)m->max_batch, S = (size_t)m->nslots;
  m->max_act = (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w;
  m->slot_bytes = 0;
  for (int i = 0; i < m->nlayers; i++) {
    pt_layer *L = &m->layers[i];
    size_t o = out_size(L);
    if (o > m->max_act) m->max_act = o;
    if (L->view) continue; /* y is the conv's, set by pt_model_use_slot */
    if (L->spec.kind == PT_L_CONV2D && L->conv_pool) continue; /* writes the pool's y */
    if (L->spec.kind != PT_L_FLATTEN) {
      if (!(L->y_mem = balloc(m, sizeof(float) * S * B * o))) return PT_ERR_NOMEM;
      m->slot_bytes += sizeof(float) * B * o;
    }
    if (L->spec.kind == PT_L_MAXPOOL2D) {
      if (!(L->argmax_mem = balloc(m, sizeof(int32_t) * S * B * o))) return PT_ERR_NOMEM;
      m->slot_bytes += sizeof(int32_t) * B * o;
    }
    if (L->spec.kind == PT_L_DROPOUT || L->spec.kind == PT_L_LOGSOFTMAX) {
      if (!(L->mask_mem = balloc(m, sizeof(float) * S * B * o))) return PT_ERR_NOMEM;
      m->slot_bytes += sizeof(float) * B * o;
    }
    if (L->spec.kind == PT_L_LINEAR && m->params[L->w].panels && m->be->linear_keep_floats) {
      L->keep_floats = m->be->linear_keep_floats((int)B, L->in_c);
      if (!(L->keep_mem = balloc(m, sizeof(float) * S * L->keep_floats)) || !(L->kept_n_mem = pt_calloc(S, sizeof(int))))
        return PT_ERR_NOMEM;
      m->slot_bytes += sizeof(float) * L->keep_floats;
    }
    if (L->spec.kind == PT_L_BATCHNORM2D) {
      /* (nslots, 2, out_c): mean and 1/std of each slot's batch */
      if (!(L->save_mem = balloc(m, sizeof(float) * S * 2 * L->out_c)) ||
          !(L->bn_sums = balloc(m, sizeof(double) * (2 * (size_t)L->out_c + 1))))
        return PT_ERR_NOMEM;
      if (m->be->kind == PT_BACKEND_CPU) {
        L->bn_host = L->bn_sums;
      } else if (!(L->bn_host = calloc(2 * (size_t)L->out_c + 1, sizeof(double)))) {
        return pt_fail(PT_ERR_NOMEM, "%s: host copy of %d channels' batch-norm sums", L->label, L->out_c);
      }
      m->slot_bytes += sizeof(float) * 2 * L->out_c;
    }
  }
  for (int k = 0; k < 2; k++)
    if (!(m->dbuf[k] = balloc(m, sizeof(float) * B * m->max_act))) return PT_ERR_NOMEM;
  if (!(m->ws = balloc(m, sizeof(float) * (ws_max ? ws_max : 1)))) return PT_ERR_NOMEM;
  m->ws_floats = ws_max ? ws_max : 1;
  m->ws_threads = pt_ops_get_threads();
  const size_t classes = m->num_classes > 0 ? (size_t)m->num_classes : 1;
  /* every slot's rows: a forward-only pass may use the slots as one batch */
  if (!(m->dlogits = balloc(m, sizeof(float) * S * B * classes))) return PT_ERR_NOMEM;
  m->work_bytes = sizeof(float) * (2 * B * m->max_act + (ws_max ? ws_max : 1) + S * B * classes);
  pt_model_use_slot(m, 0);
  if (m->whole) { /* views into the whole model's arrays */
    m->param = m->whole->param + m->param_offset;
    m->grad = m->whole->grad + m->param_offset;
    m->buffer = m->whole->buffer + m->buffer_offset;
    m->hparam = m->whole->hparam + m->param_offset;
    m->hbuffer = m->whole->hbuffer + m->buffer_offset;
    m->loss_val = m->whole->loss_val;
    return PT_OK;
  }
  if (!(m->param = balloc(m, sizeof(float) * m->nparam_total)) ||
      !(m->grad = balloc(m, sizeof(float) * m->nparam_total)) ||
      !(m->buffer = balloc(m, sizeof(float) * (m->nbuffer_total ? m->nbuffer_total : 1))) ||
      !(m->loss_val = balloc(m, sizeof(double))))
    return PT_ERR_NOMEM;
  if (m->be->kind == PT_BACKEND_CPU) { /* the host copy is the memory itself */
    m->hparam = m->param;
    m->hbuffer = m->buffer;
  } else if (!(m->hparam = pt_alloc_aligned(sizeof(float) * (m->nparam_total ? m->nparam_total : 1))) ||
             !(m->hbuffer = pt_alloc_aligned(sizeof(float) * (m->nbuffer_total ? m->nbuffer_total : 1)))) {
    return PT_ERR_NOMEM;
  }
  return PT_OK;
}

void pt_model_use_slot(pt_model *m, int s) {
  const size_t B = (size_t)m->max_batch;
  for (int i = 0; i < m->nlayers; i++) {
    pt_layer *L = &m->layers[i];
    const size_t at = (size_t)s * B * out_size(L);
    if (L->view) {
      L->y = m->layers[i - 1].y;
      continue;
    }
    L->y = L->y_mem ? L->y_mem + at : NULL;
    L->argmax = L->argmax_mem ? L->argmax_mem + at : NULL;
    L->mask = L->mask_mem ? L->mask_mem + at : NULL;
    L->keep = L->keep_mem ? L->keep_mem + (size_t)s * L->keep_floats : NULL;
    L->kept_n = L->kept_n_mem ? L->kept_n_mem + s : NULL;
    if (L->save_mem) {
      L->save_mean = L->save_mem + (size_t)s * 2 * L->out_c;
      L->save_invstd = L->save_mean + L->out_c;
    }
  }
  /* A conv with the pool fused writes the pool's output: the next layer
   * reads it as the conv's (and its ReLU view's) y. */
  for (int i = 0; i + 2 < m->nlayers; i++)
    if (m->layers[i].spec.kind == PT_L_CONV2D && m->layers[i].conv_pool)
      m->layers[i].y = m->layers[i + 1].y = m->layers[i + 2].y;
}

/* Walks the spec: shapes, parameter and buffer tables, conv+ReLU fusion.
 * Allocates nothing, so sizes can be asked of a model too big to build. */
static pt_status infer_model(pt_model *m, const pt_model_spec *spec, int max_batch, size_t *ws_max) {
  m->spec = *spec;
  m->nslots = 1;
  m->nlayers = spec->nlayers;
  m->max_batch = max_batch;
  m->training = 1;
  *ws_max = 0;
  int c = spec->in_c, h = spec->in_h, w = spec->in_w;
  for (int i = 0; i < m->nlayers; i++) {
    pt_layer *L = &m->layers[i];
    L->spec = spec->layers[i];
    L->index = i;
    L->in_c = c;
    L->in_h = h;
    L->in_w = w;
    snprintf(L->label, sizeof L->label, "%s%s%s", pt_layer_kind_name(L->spec.kind), L->spec.name[0] ? " " : "",
             L->spec.name);
    PT_TRY(infer_layer(m, L, ws_max));
    c = L->out_c;
    h = L->out_h;
    w = L->out_w;
  }
  if (m->whole && m->layer_base + m->nlayers < m->whole->nlayers) {
    m->num_classes = 0; /* a stage before the last: no loss here */
  } else if (!takes_flat(m, m->nlayers)) {
    /* A 1x1 map too: PyTorch's loss would take (N, C, 1, 1) as a map of
     * one-pixel predictions, with targets of that shape. */
    char at[PT_ORIGIN_LEN + 16];
    last_layer_at(m, spec, at, sizeof at);
    return pt_fail(PT_ERR_FORMAT, "%s: the last layer's output is %dx%dx%d; a classifier must end flat "
                   "(add 'flatten'%s)", at, c, h, w, h == 1 && w == 1 ? "" : " and a 'linear' layer");
  } else if (c < 2) {
    char at[PT_ORIGIN_LEN + 16];
    last_layer_at(m, spec, at, sizeof at);
    return pt_fail(PT_ERR_FORMAT, "%s: the model has %d output%s; a classifier needs at least 2", at, c,
                   c == 1 ? "" : "s");
  } else {
    m->num_classes = c;
  }
  /* conv + ReLU run as one op: the ReLU is applied while the conv's output
   * is written and its mask while the conv's gradient is read, saving two
   * passes over the largest activations. */
  for (int i = 1; i < m->nlayers; i++)
    if (m->layers[i].spec.kind == PT_L_RELU && m->layers[i - 1].spec.kind == PT_L_CONV2D) {
      m->layers[i - 1].conv.relu = 1;
      m->layers[i].fused = m->layers[i].view = 1;
    }
  /* And a 2x2 max-pool after them, where the backend can: the conv's full
   * output, the largest activation, then never goes to memory, nor its
   * gradient (mnist-cnn's conv2: 9.4 MB each way a step). */
  for (int i = 2; i < m->nlayers; i++) {
    pt_layer *C = &m->layers[i - 2], *P = &m->layers[i];
    if (P->spec.kind == PT_L_MAXPOOL2D && P->spec.kernel == 2 && P->spec.stride == 2 && m->layers[i - 1].view &&
        C->spec.kind == PT_L_CONV2D && m->be && m->be->conv_pool_ok && m->be->conv_pool_ok(&C->conv)) {
      C->conv_pool = 1;
      P->fused = 1;
    }
  }
  return PT_OK;
}

pt_status pt_model_create(pt_model **out, const pt_model_spec *spec, int max_batch) {
  return pt_model_create_on(out, spec, max_batch, pt_backend_cpu());
}

pt_status pt_model_create_on(pt_model **out, const pt_model_spec *spec, int max_batch, const pt_backend *be) {
  *out = NULL;
  if (max_batch < 1) return pt_fail(PT_ERR_ARG, "batch size %d: expected at least 1", max_batch);
  pt_model *m = pt_calloc(1, sizeof *m);
  if (!m) return PT_ERR_NOMEM;
  m->be = be;
  size_t ws_max;
  pt_status st = infer_model(m, spec, max_batch, &ws_max);
  if (st == PT_OK) st = alloc_activations(m, ws_max);
  if (st != PT_OK) {
    pt_model_destroy(m);
    return st;
  }
  *out = m;
  return PT_OK;
}

pt_status pt_model_shapes(pt_model **out, const pt_model_spec *spec) {
  *out = NULL;
  pt_model *m = pt_calloc(1, sizeof *m);
  if (!m) return PT_ERR_NOMEM;
  size_t ws_max;
  pt_status st = infer_model(m, spec, 1, &ws_max);
  if (st != PT_OK) {
    free(m);
    return st;
  }
  *out = m;
  return PT_OK;
}

pt_status pt_model_summarize(const pt_model_spec *spec, pt_model_summary *out) {
  memset(out, 0, sizeof *out);
  pt_model *m;
  PT_TRY(pt_model_shapes(&m, spec));
  out->nparams = m->nparam_total;
  out->flops = pt_model_flops(m);
  out->classes = m->num_classes;
  for (int i = 0; i < m->nlayers; i++)
    out->activation_floats += (size_t)m->layers[i].out_c * m->layers[i].out_h * m->layers[i].out_w;
  free(m); /* nothing else was allocated */
  return PT_OK;
}

void pt_model_destroy(pt_model *m) {
  if (!m) return;
  if (m->be) {
    void (*bfree)(void *) = m->be->free;
    for (int i = 0; i < m->nlayers; i++) {
      pt_layer *L = &m->layers[i];
      bfree(L->y_mem);
      bfree(L->argmax_mem);
      bfree(L->mask_mem);
      bfree(L->keep_mem);
      free(L->kept_n_mem);
      bfree(L->save_mem);
      if (L->bn_host != L->bn_sums) free(L->bn_host);
      bfree(L->bn_sums);
    }
    bfree(m->dbuf[0]);
    bfree(m->dbuf[1]);
    bfree(m->ws);
    bfree(m->dlogits);
    if (!m->whole) {
      bfree(m->param);
      bfree(m->grad);
      bfree(m->buffer);
      bfree(m->loss_val);
      if (m->hparam != m->param) free(m->hparam);
      if (m->hbuffer != m->buffer) free(m->hbuffer);
    }
  }
  free(m);
}

pt_status pt_model_to_host(pt_model *m) {
  if (m->hparam == m->param && m->hbuffer == m->buffer) return PT_OK;
  PT_TRY(m->be->download(m->hparam, m->param, sizeof(float) * m->nparam_total));
  return m->be->download(m->hbuffer, m->buffer, sizeof(float) * m->nbuffer_total);
}

void pt_model_from_host(pt_model *m) {
  if (m->hparam == m->param && m->hbuffer == m->buffer) return;
  m->be->upload(m->param, m->hparam, sizeof(float) * m->nparam_total);
  m->be->upload(m->buffer, m->hbuffer, sizeof(float) * m->nbuffer_total);
}

void pt_model_init(pt_model *m, uint64_t seed) {
  uint64_t key = pt_rng_key(seed, PT_RNG_INIT);
  m->dropout_key = pt_rng_key(seed, PT_RNG_DROPOUT);
  for (int i = 0; i < m->nlayers; i++) {
    pt_layer *L = &m->layers[i];
    L->num_batches_tracked = 0;
    if (L->w < 0) continue;
    pt_tensor_info *w = &m->params[L->w];
    if (L->spec.kind == PT_L_BATCHNORM2D) {
      for (size_t k = 0; k < w->numel; k++) m->hparam[w->offset + k] = 1.0f;
      memset(m->hparam + m->params[L->b].offset, 0, sizeof(float) * m->params[L->b].numel);
      memset(m->hbuffer + m->buffers[L->rmean].offset, 0, sizeof(float) * m->buffers[L->rmean].numel);
      for (size_t k = 0; k < m->buffers[L->rvar].numel; k++) m->hbuffer[m->buffers[L->rvar].offset + k] = 1.0f;
      continue;
    }
    /* kaiming_uniform_(a=sqrt(5)) reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and
     * PyTorch draws the bias from the same bound. */
    size_t fan_in = w->numel / (size_t)w->shape[0];
    float bound = 1.0f / sqrtf((float)fan_in);
    pt_rng r;
    pt_rng_init(&r, key, (uint64_t)L->w);
    /* drawn in PyTorch's order, whatever the order kept */
    float *dst = m->hparam + w->offset;
    const int rows = (int)w->shape[0], cols = (int)(w->numel / (size_t)w->shape[0]);
    for (int o = 0; o < rows; o++)
      for (int k = 0; k < cols; k++)
        dst[w->panels ? pt_linear_panel_index(cols, rows, o, k) : (size_t)o * cols + k] =
            (2.0f * pt_rng_uniform(&r) - 1.0f) * bound;
    if (L->b >= 0) {
      pt_tensor_info *b = &m->params[L->b];
      pt_rng_init(&r, key, (uint64_t)L->b);
      for (size_t k = 0; k < b->numel; k++) m->hparam[b->offset + k] = (2.0f * pt_rng_uniform(&r) - 1.0f) * bound;
    }
  }
  pt_model_from_host(m);
}

void pt_model_zero_grad(pt_model *m) { m->be->zero(m->grad, sizeof(float) * m->nparam_total); }

static float *P(pt_model *m, int idx) { return idx < 0 ? NULL : m->param + m->params[idx].offset; }
static float *G(pt_model *m, int idx) { return idx < 0 ? NULL : m->grad + m->params[idx].offset; }
static float *Bf(pt_model *m, int idx) { return m->buffer + m->buffers[idx].offset; }

/* The layers whose backward pass can write its parameters' gradients
 * rather than add to them (the backend's linear_backward takes add). */
static int writes_grads(const pt_layer *L) { return L->spec.kind == PT_L_LINEAR; }

/* Clearing fmnist-mlp's 636 KB of gradients was 2% of its step, and the
 * weight gradient then read the zeros back. The tensors that are cleared
 * are cleared in runs of neighbours, one call each: on a GPU, mnist-cnn's
 * four (both convolutions' weights and biases) are one launch. */
void pt_model_start_grads(pt_model *m) {
  size_t lo = 0, hi = 0; /* the run being gathered, floats of m->grad */
  for (int i = 0; i < m->nlayers; i++) {
    const pt_layer *L = &m->layers[i];
    if (writes_grads(L)) continue;
    const int idx[2] = {L->w, L->b};
    for (int k = 0; k < 2; k++) {
      if (idx[k] < 0) continue;
      const size_t off = m->params[idx[k]].offset, len = m->params[idx[k]].numel;
      if (off != hi) {
        if (hi > lo) m->be->zero(m->grad + lo, sizeof(float) * (hi - lo));
        lo = off;
      }
      hi = off + len;
    }
  }
  if (hi > lo) m->be->zero(m->grad + lo, sizeof(float) * (hi - lo));
  m->grads_fresh = 1;
}

/* The input a layer saw in the last forward. */
static const float *layer_input(const pt_model *m, int i, const float *x) {
  for (int j = i - 1; j >= 0; j--)
    if (m->layers[j].spec.kind != PT_L_FLATTEN) return m->layers[j].y;
  return x;
}

/* The first failure wins: later ones are usually its consequences. */
static void keep_status(pt_model *m, pt_status st) {
  if (st == PT_OK || m->sync_status != PT_OK) return;
  m->sync_status = st;
  snprintf(m->sync_error, sizeof m->sync_error, "%s", pt_error_message());
}

pt_status pt_model_take_status(pt_model *m) {
  const pt_status st = m->sync_status;
  if (st == PT_OK) return PT_OK;
  m->sync_status = PT_OK;
  return pt_fail(st, "%s", m->sync_error);
}

/* A layer's time on a GPU is known only once its kernels ran. The wait
 * also reports any fault queued before it, and reporting clears it from
 * the device's context, so what it returns is kept here for the caller
 * rather than dropped: otherwise a failed cuBLAS or cuDNN call under
 * --profile would leave the step to go on with garbage. */
static void timing_sync(pt_model *m) {
  if (m->be->kind != PT_BACKEND_CPU) keep_status(m, m->be->sync());
}

/* Whether the passes and the update are timed: then a GPU is waited for. */
static int timed(const pt_model *m) { return m->profile || pt_trace_enabled(); }

void pt_model_timing_sync(pt_model *m) {
  if (timed(m)) timing_sync(m);
}

/* Synchronised batch norm: the per-channel sums of every worker's batch
 * are added up, so each worker normalises with the statistics of the global
 * batch, as torch.nn.SyncBatchNorm does. Forward: sum(x) and the count, then
 * sum((x - mean)^2) around the global mean; backward: sum(dy) and
 * sum(dy * xhat). The gradients of gamma and beta stay local sums: they are
 * parameters, averaged with the others.
 *
 * The backend computes the sums where the activations are (bn_sums); the
 * callback adds them up over the workers into bn_host, and what the next
 * step needs goes back. On the CPU both are one array and nothing moves. On
 * a GPU each of the three additions per layer and step waits for the
 * device and moves a few (C + 1) doubles through host memory and the host
 * communicator: a pause per batch-norm layer that --sync-bn accepts, since
 * the count and the global means are needed on the host anyway (the ops
 * take count as a number, as the CPU's do). */
static void sum_stats(pt_model *m, double *host, const double *buf, size_t n) {
  keep_status(m, m->sum_stats(m->sum_stats_ctx, host, buf, n));
}

/* The global sums back where the backend reads them; nothing on the CPU. */
static void stats_to_backend(const pt_model *m, double *buf, const double *host, size_t n) {
  if (buf != host) m->be->upload(buf, host, n * sizeof(double));
}

static void bn_forward_synced(pt_model *m, pt_layer *L, const pt_bn_geom *g, int n, int hw, const float *x) {
  const int C = g->c;
  const pt_backend *be = m->be;
  /* (C + 1): the sums of x, then the means, and the count at [C]; (C): the
   * sums of squares. Backend memory, and its host view. */
  double *mean = L->bn_sums, *sq = L->bn_sums + C + 1;
  double *hmean = L->bn_host, *hsq = L->bn_host + C + 1;
  const double count = (double)n * hw;
  be->batchnorm_sums(g, n, hw, x, NULL, mean);
  be->upload(mean + C, &count, sizeof count); /* the count travels with the sums */
  sum_stats(m, hmean, mean, (size_t)C + 1);
  L->bn_count = hmean[C];
  for (int c = 0; c < C; c++) hmean[c] /= L->bn_count;
  stats_to_backend(m, mean, hmean, (size_t)C);
  be->batchnorm_sums(g, n, hw, x, mean, sq);
  sum_stats(m, hsq, sq, (size_t)C);
  stats_to_backend(m, sq, hsq, (size_t)C);
  be->batchnorm_normalize(g, n, hw, x, P(m, L->w), P(m, L->b), mean, sq, L->bn_count, Bf(m, L->rmean),
                          Bf(m, L->rvar), L->save_mean, L->save_invstd, L->y);
}

static void bn_backward_synced(pt_model *m, pt_layer *L, const pt_bn_geom *g, int n, int hw, const float *x,
                               const float *dy, float *dx) {
  const size_t C = (size_t)g->c;
  double *sums = L->bn_sums, *hsums = L->bn_host; /* (2, C): sum dy, sum dy * xhat */
  m->be->batchnorm_backward_sums(g, n, hw, x, L->save_mean, L->save_invstd, dy, G(m, L->w), G(m, L->b), sums);
  if (!dx) return;
  sum_stats(m, hsums, sums, 2 * C);
  stats_to_backend(m, sums, hsums, 2 * C);
  m->be->batchnorm_backward_dx(g, n, hw, x, P(m, L->w), L->save_mean, L->save_invstd, dy, sums, L->bn_count, dx);
}

/* A stage counts its batch-norm batches in the whole model, whose counts
 * the checkpoint saves. */
static void count_batch(pt_model *m, const pt_layer *L) {
  pt_layer *owner = m->whole ? &m->whole->layers[m->layer_base + L->index] : (pt_layer *)L;
  owner->num_batches_tracked++;
}

/* Where a linear layer's forward pass keeps data for the backward pass of
 * the same batch, which reads them only if they are of a batch of its
 * size (kept_n): a training pass keeps them, an evaluation's (which may
 * take several slots' rows at once) does not. */
static float *keep_for(const pt_model *m, pt_layer *L, int n) {
  float *k = m->training && n <= m->max_batch ? L->keep : NULL;
  if (L->kept_n) *L->kept_n = k ? n : 0;
  return k;
}
static const float *kept_for(const pt_layer *L, int n) { return L->kept_n && *L->kept_n == n ? L->keep : NULL; }

static void layer_forward(pt_model *m, pt_layer *L, const float *x, int n) {
  const size_t o = out_size(L);
  const int hw = L->in_h * L->in_w;
  switch (L->spec.kind) {
    case PT_L_CONV2D:
      if (L->conv_pool)
        m->be->conv2d_pool_forward(&L->conv, n, x, P(m, L->w), P(m, L->b), L->y, m->layers[L->index + 2].argmax,
                                   m->ws);
      else
        m->be->conv2d_forward(&L->conv, n, x, P(m, L->w), P(m, L->b), L->y, m->ws);
      break;
    case PT_L_LINEAR:
      if (m->params[L->w].panels)
        m->be->linear_forward_p(n, L->in_c, L->out_c, x, P(m, L->w), P(m, L->b), L->y, m->ws, keep_for(m, L, n));
      else
        m->be->linear_forward(n, L->in_c, L->out_c, x, P(m, L->w), P(m, L->b), L->y, m->ws);
      break;
    case PT_L_BATCHNORM2D: {
      pt_bn_geom g = {L->in_c, L->spec.eps, L->spec.momentum};
      if (m->training && m->sum_stats) {
        bn_forward_synced(m, L, &g, n, hw, x);
        count_batch(m, L);
      } else if (m->training) {
        m->be->batchnorm_forward_train(&g, n, hw, x, P(m, L->w), P(m, L->b), Bf(m, L->rmean), Bf(m, L->rvar),
                                   L->save_mean, L->save_invstd, L->y, L->bn_sums);
        L->bn_count = (double)n * hw;
        count_batch(m, L);
      } else {
        m->be->batchnorm_forward_eval(&g, n, hw, x, P(m, L->w), P(m, L->b), Bf(m, L->rmean), Bf(m, L->rvar), L->y);
      }
      break;
    }
    case PT_L_MAXPOOL2D:
      m->be->maxpool_forward(n, L->in_c, L->in_h, L->in_w, L->spec.kernel, L->spec.stride, L->out_h, L->out_w, x,
                         L->y, L->argmax);
      break;
    case PT_L_RELU: m->be->relu_forward((size_t)n * o, x, L->y); break;
    case PT_L_DROPOUT:
      if (m->training && L->spec.p > 0.0f)
        m->be->dropout_forward((size_t)n * o, L->spec.p, m->dropout_key, m->step, (uint32_t)(m->layer_base + L->index), x,
                           L->y, L->mask);
      else
        m->be->copy(L->y, x, sizeof(float) * (size_t)n * o);
      break;
    case PT_L_LOGSOFTMAX: m->be->log_softmax_forward(n, L->in_c, x, L->y, m->training ? L->mask : NULL); break;
    case PT_L_FLATTEN: break;
  }
}

/* The ops split the workspace among the calling thread's pool, which is
 * not necessarily the one the model was built on: a net's model outlives
 * the pt_evaluate or pt_train that resized the pool, and may be used from
 * another thread. A pass on a pool the workspace does not fit grows it
 * first; on the pool it was built for (every training step) this is one
 * comparison. 0: out of memory, kept in sync_status. */
static int fit_workspace(pt_model *m) {
  const int threads = pt_ops_get_threads();
  if (threads == m->ws_threads) return 1;
  size_t need = 1;
  for (int i = 0; i < m->nlayers; i++) {
    const size_t k = layer_workspace(m, &m->layers[i], threads);
    if (k > need) need = k;
  }
  if (need > m->ws_floats) {
    float *ws = balloc(m, sizeof(float) * need);
    if (!ws) {
      keep_status(m, pt_fail(PT_ERR_NOMEM, "%s: workspace for %d threads (%zu floats)", m->spec.name, threads, need));
      return 0;
    }
    m->be->free(m->ws);
    m->ws = ws;
    m->work_bytes += sizeof(float) * (need - m->ws_floats);
    m->ws_floats = need;
  }
  m->ws_threads = threads;
  return 1;
}

const float *pt_model_forward(pt_model *m, const float *x, int n) {
  /* Without room the layers are not run; the caller's status check sees why. */
  if (!fit_workspace(m)) return layer_input(m, m->nlayers, x);
  const float *cur = x;
  for (int i = 0; i < m->nlayers; i++) {
    pt_layer *L = &m->layers[i];
    if (L->spec.kind == PT_L_FLATTEN || L->fused) continue; /* views: same memory */
    const int timing = timed(m);
    /* A GPU only queues the layer: its time is known after a sync, which
     * profiling and tracing pay for and a plain run does not. */
    if (timing) timing_sync(m);
    double t0 = timing ? pt_now() : 0.0;
    layer_forward(m, L, cur, n);
    if (timing) {
      timing_sync(m);
      double t1 = pt_now();
      if (m->profile) L->fwd_ms += 1e3 * (t1 - t0);
      pt_trace_span(L->label, "forward", t0, t1);
    }
    cur = L->y;
  }
  return cur;
}

void pt_model_loss_queue(pt_model *m, const int32_t *y, int n, float scale) {
  const float *out = layer_input(m, m->nlayers, NULL);
  if (m->spec.loss == PT_LOSS_NLL) m->be->nll_loss(n, m->num_classes, out, y, m->dlogits, scale, m->loss_val);
  else m->be->cross_entropy_loss(n, m->num_classes, out, y, m->dlogits, scale, m->loss_val);
}

double pt_model_loss(pt_model *m, const int32_t *y, int n, float scale) {
  pt_model_loss_queue(m, y, n, scale);
  double loss = NAN;
  const double *at = m->loss_val;
  /* A device fault leaves NAN, which every caller already treats as a
   * failed step; the download reported (and so cleared) the fault, so it
   * is kept for the caller's check to name it. */
  const pt_status st = m->be->download(&loss, at, sizeof loss);
  if (st != PT_OK) {
    keep_status(m, st);
    return NAN;
  }
  return loss;
}

/* dy -> dx for one layer; dx NULL when no one needs it. */
static void layer_backward(pt_model *m, pt_layer *L, const float *x, const float *dy, float *dx, int n) {
  const size_t o = out_size(L);
  const int hw = L->in_h * L->in_w;
  switch (L->spec.kind) {
    case PT_L_CONV2D:
      if (L->conv_pool)
        m->be->conv2d_pool_backward(&L->conv, n, x, P(m, L->w), m->layers[L->index + 2].argmax, dy, G(m, L->w),
                                    G(m, L->b), dx, m->ws);
      else
        m->be->conv2d_backward(&L->conv, n, x, P(m, L->w), L->y, dy, G(m, L->w), G(m, L->b), dx, m->ws);
      break;
    case PT_L_LINEAR:
      if (m->params[L->w].panels)
        m->be->linear_backward_p(n, L->in_c, L->out_c, x, P(m, L->w), dy, G(m, L->w), G(m, L->b), dx,
                                 !(m->grads_fresh && writes_grads(L)), m->ws, kept_for(L, n));
      else
        m->be->linear_backward(n, L->in_c, L->out_c, x, P(m, L->w), dy, G(m, L->w), G(m, L->b), dx,
                               !(m->grads_fresh && writes_grads(L)), m->ws);
      break;
    case PT_L_BATCHNORM2D: {
      pt_bn_geom g = {L->in_c, L->spec.eps, L->spec.momentum};
      if (m->training && m->sum_stats)
        bn_backward_synced(m, L, &g, n, hw, x, dy, dx);
      else if (m->training)
        m->be->batchnorm_backward_train(&g, n, hw, x, P(m, L->w), L->save_mean, L->save_invstd, dy, G(m, L->w),
                                    G(m, L->b), dx, L->bn_sums);
      else
        m->be->batchnorm_backward_eval(&g, n, hw, x, P(m, L->w), Bf(m, L->rmean), Bf(m, L->rvar), dy, G(m, L->w),
                                   G(m, L->b), dx);
      break;
    }
    case PT_L_MAXPOOL2D:
      if (dx)
        m->be->maxpool_backward(n, L->in_c, L->in_h, L->in_w, L->spec.kernel, L->spec.stride, L->out_h, L->out_w, dy,
                            L->argmax, dx);
      break;
    case PT_L_RELU:
      if (dx) m->be->relu_backward((size_t)n * o, L->y, dy, dx);
      break;
    case PT_L_DROPOUT:
      if (!dx) break;
      if (m->training && L->spec.p > 0.0f) m->be->dropout_backward((size_t)n * o, L->mask, dy, dx);
      else m->be->copy(dx, dy, sizeof(float) * (size_t)n * o);
      break;
    case PT_L_LOGSOFTMAX:
      if (dx) m->be->log_softmax_backward(n, L->in_c, L->y, m->training ? L->mask : NULL, dy, dx);
      break;
    case PT_L_FLATTEN: break;
  }
}

static const float *backward_from(pt_model *m, const float *x, const float *dy, int n, int want_dx) {
  int which = 0;
  for (int i = m->nlayers - 1; i >= 0; i--) {
    pt_layer *L = &m->layers[i];
    if (L->spec.kind == PT_L_FLATTEN || L->fused) continue;
    /* The first layer with parameters needs no input gradient unless the
     * caller wants it (a pipeline stage sends it to the stage before):
     * nothing below it learns, so skip that work entirely. */
    int needs_dx = want_dx;
    for (int j = i - 1; j >= 0 && !needs_dx; j--)
      if (m->layers[j].w >= 0) needs_dx = 1;
    float *dx = needs_dx ? m->dbuf[which] : NULL;
    L->bwd_dx = needs_dx;
    const int timing = timed(m);
    if (timing) timing_sync(m);
    double t0 = timing ? pt_now() : 0.0;
    layer_backward(m, L, layer_input(m, i, x), dy, dx, n);
    if (timing) {
      timing_sync(m);
      double t1 = pt_now();
      if (m->profile) L->bwd_ms += 1e3 * (t1 - t0);
      pt_trace_span(L->label, "backward", t0, t1);
    }
    if (m->grad_ready && (L->w >= 0 || L->b >= 0)) m->grad_ready(m->grad_ready_ctx, i);
    if (!dx) return NULL;
    dy = dx;
    which ^= 1;
  }
  return want_dx ? dy : NULL; /* flatten only: the gradient passes through */
}

const float *pt_model_backward_from(pt_model *m, const float *x, const float *dy, int n, int want_dx) {
  if (!fit_workspace(m)) return want_dx ? m->dbuf[0] : NULL; /* memory the caller may read; the status says */
  const float *dx = backward_from(m, x, dy, n, want_dx);
  m->grads_fresh = 0;
  return dx;
}

void pt_model_backward(pt_model *m, const float *x, int n) { pt_model_backward_from(m, x, m->dlogits, n, 0); }

size_t pt_model_boundary_floats(const pt_model *m, int i) {
  if (i == 0) return (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w;
  const pt_layer *L = &m->layers[i - 1];
  return out_size(L);
}

void pt_model_layer_tensors(const pt_model *m, int lo, int hi, int buffers, size_t *off, size_t *len) {
  /* Layers register their tensors in state_dict order, so layers [lo, hi)
   * own the run that starts after the tensors of the layers before lo. */
  int first = 0, count = 0;
  for (int i = 0; i < hi; i++) {
    const pt_layer *L = &m->layers[i];
    const int k = buffers ? (L->rmean >= 0) + (L->rvar >= 0) : (L->w >= 0) + (L->b >= 0);
    if (i < lo) first += k;
    else count += k;
  }
  const pt_tensor_info *tab = buffers ? m->buffers : m->params;
  const int ntab = buffers ? m->nbuffers : m->nparams;
  *off = first < ntab ? tab[first].offset : buffers ? m->nbuffer_total : m->nparam_total;
  *len = count ? tab[first + count - 1].offset + tab[first + count - 1].numel - *off : 0;
}

pt_status pt_model_create_stage(pt_model **out, pt_model *whole, int lo, int hi, int max_batch, int nslots) {
  *out = NULL;
  if (lo < 0 || hi > whole->nlayers || lo >= hi)
    return pt_fail(PT_ERR_ARG, "stage layers %d..%d: expected a non-empty range within the %d layers of %s", lo,
                   hi - 1, whole->nlayers, whole->spec.name);
  if (max_batch < 1 || nslots < 1)
    return pt_fail(PT_ERR_ARG, "stage of %s: batch %d, slots %d: expected at least 1", whole->spec.name, max_batch,
                   nslots);
  pt_model_spec sub = whole->spec;
  const pt_layer *first = &whole->layers[lo];
  sub.in_c = first->in_c;
  sub.in_h = first->in_h;
  sub.in_w = first->in_w;
  sub.nlayers = hi - lo;
  memmove(sub.layers, whole->spec.layers + lo, sizeof(pt_layer_spec) * (size_t)(hi - lo));
  pt_model *m = pt_calloc(1, sizeof *m);
  if (!m) return PT_ERR_NOMEM;
  m->whole = whole;
  m->be = whole->be;
  m->layer_base = lo;
  size_t len;
  pt_model_layer_tensors(whole, lo, hi, 0, &m->param_offset, &len);
  pt_model_layer_tensors(whole, lo, hi, 1, &m->buffer_offset, &len);
  size_t ws_max;
  pt_status st = infer_model(m, &sub, max_batch, &ws_max);
  m->nslots = nslots;
  /* A conv and its ReLU split over two stages are not fused; the whole
   * model, which only holds parameters, is unaffected. */
  if (st == PT_OK) st = alloc_activations(m, ws_max);
  if (st != PT_OK) {
    pt_model_destroy(m);
    return st;
  }
  m->dropout_key = whole->dropout_key;
  *out = m;
  return PT_OK;
}

double pt_layer_flops(const pt_layer *L) {
  if (L->spec.kind == PT_L_CONV2D)
    return 2.0 * L->out_c * L->out_h * L->out_w * L->in_c * L->spec.kernel * L->spec.kernel;
  if (L->spec.kind == PT_L_LINEAR) return 2.0 * L->in_c * L->out_c;
  return 0.0;
}

double pt_model_flops(const pt_model *m) {
  double f = 0.0;
  for (int i = 0; i < m->nlayers; i++) f += pt_layer_flops(&m->layers[i]);
  return f;
}

const pt_tensor_info *pt_model_find(const pt_model *m, const char *name, const float **data, int *is_buffer) {
  for (int i = 0; i < m->nparams; i++)
    if (!strcmp(m->params[i].name, name)) {
      if (data) *data = m->hparam + m->params[i].offset;
      if (is_buffer) *is_buffer = 0;
      return &m->params[i];
    }
  for (int i = 0; i < m->nbuffers; i++)
    if (!strcmp(m->buffers[i].name, name)) {
      if (data) *data = m->hbuffer + m->buffers[i].offset;
      if (is_buffer) *is_buffer = 1;
      return &m->buffers[i];
    }
  return NULL;
}
