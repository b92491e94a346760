/* Parity with PyTorch 1.13 on the committed reference tensors
 * (tests/reference/make_reference.py): for each model, the same weights and
 * batch must give PyTorch's output, loss, every gradient and the batch-norm
 * running statistics; for each optimizer, five steps must give PyTorch's
 * parameters.
 *
 * Tolerance, per tensor: the relative error ||a - b|| / ||b|| (2-norms) is at
 * most 1e-4. Element by element that bound is unreachable for entries that
 * are sums of many terms cancelling to almost nothing (a conv weight gradient
 * sums 36,864 products per entry in mnist-cnn): any other summation order, and
 * PyTorch's is not ours, changes their low digits. So each element is also
 * held to |a - b| <= 1e-3 |b| + 1e-4 max|b|, which still catches any single
 * wrong entry. A tensor that is zero in exact arithmetic (the bias of a conv
 * followed by batch-norm) has no scale to be relative to: it must be below
 * 1e-6 in absolute value on both sides.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "io/safetensors.h"
#include "nn/model.h"
#include "nn/presets.h"
#include "optim/optimizer.h"

#define REF PT_SOURCE_DIR "/tests/reference/data/"

static const char *cifar_bn_small =
    "name cifar-bn-small\n"
    "input 3 32 32\n"
    "conv2d conv1 out=8 kernel=3 padding=1\n"
    "batchnorm2d bn1\n"
    "relu\n"
    "maxpool2d kernel=2\n"
    "conv2d conv2 out=16 kernel=3 padding=1\n"
    "batchnorm2d bn2\n"
    "relu\n"
    "maxpool2d kernel=2\n"
    "flatten\n"
    "linear fc out=10\n"
    "loss cross-entropy\n";

static const char *optnet =
    "name optnet\n"
    "input 1 8 8\n"
    "flatten\n"
    "linear fc1 out=16\n"
    "relu\n"
    "linear fc2 out=10\n"
    "loss cross-entropy\n";

static double worst;  /* largest error seen, in tolerance units, for the report */

static void expect_close(const char *what, const float *a, const float *b, size_t n) {
  double num = 0.0, den = 0.0;
  float scale = 0.0f;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
    scale = fmaxf(scale, fabsf(b[i]));
  }
  if (scale < 1e-6f) { /* zero up to rounding: compare absolutely */
    for (size_t i = 0; i < n; i++)
      if (!(fabsf(a[i]) < 1e-6f)) {
        print_error("%s: element %zu is %.9g, expected ~0 (PyTorch %.9g)\n", what, i, a[i], b[i]);
        fail();
      }
    return;
  }
  double rel = sqrt(num / den);
  if (rel / 1e-4 > worst) worst = rel / 1e-4;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)a[i] - b[i]);
    if (!(err <= 1e-3 * fabs(b[i]) + 1e-4 * scale)) {
      if (!bad) first = i;
      bad++;
    }
  }
  if (rel > 1e-4 || bad) {
    print_error("%s: relative error %.3g (limit 1e-4); %zu of %zu elements off, first at %zu: ours %.9g, "
                "PyTorch %.9g\n", what, rel, bad, n, first, a[first], b[first]);
    fail();
  }
}

static float *load_f32(const pt_st_file *f, const char *name, size_t n) {
  float *buf = malloc(n * sizeof(float) + 4);
  assert_non_null(buf);
  if (pt_st_get_f32(f, name, buf, n) != PT_OK) {
    print_error("%s\n", pt_error_message());
    fail();
  }
  return buf;
}

static int32_t *load_labels(const pt_st_file *f, const char *name, int n) {
  float *tmp = load_f32(f, name, (size_t)n);
  int32_t *y = malloc(sizeof(int32_t) * n);
  for (int i = 0; i < n; i++) y[i] = (int32_t)tmp[i];
  free(tmp);
  return y;
}

/* Parameter i of the flat array a (param or grad), in PyTorch's order (malloc'd). */
static float *in_torch_order(const pt_model *m, int i, const float *a) {
  float *t = malloc(sizeof(float) * m->params[i].numel);
  assert_non_null(t);
  pt_tensor_to_torch(&m->params[i], a + m->params[i].offset, t);
  return t;
}

/* Copies every parameter and buffer of the model from the file, by PyTorch name. */
static void load_state(pt_model *m, const pt_st_file *f, const char *prefix) {
  char name[160];
  for (int i = 0; i < m->nparams; i++) {
    snprintf(name, sizeof name, "%s%s", prefix, m->params[i].name);
    float *t = load_f32(f, name, m->params[i].numel);
    pt_tensor_from_torch(&m->params[i], t, m->param + m->params[i].offset);
    free(t);
  }
  for (int i = 0; i < m->nbuffers; i++) {
    snprintf(name, sizeof name, "%s%s", prefix, m->buffers[i].name);
    assert_int_equal(pt_st_get_f32(f, name, m->buffer + m->buffers[i].offset, m->buffers[i].numel), PT_OK);
  }
}

static void check_model(const char *file, const pt_model_spec *spec) {
  pt_st_file f;
  if (pt_st_read(file, &f) != PT_OK) {
    print_error("%s\n", pt_error_message());
    fail();
  }
  const char *mode = pt_st_meta(&f, "mode");
  const char *loss_kind = pt_st_meta(&f, "loss");
  assert_non_null(mode);
  assert_non_null(loss_kind);
  assert_string_equal(loss_kind, spec->loss == PT_LOSS_NLL ? "nll" : "cross_entropy");
  const pt_st_tensor *in = pt_st_find(&f, "input");
  assert_non_null(in);
  int n = (int)in->shape[0];
  pt_model *m;
  assert_int_equal(pt_model_create(&m, spec, n), PT_OK);
  load_state(m, &f, "");
  m->training = !strcmp(mode, "train");
  size_t in_numel = pt_st_numel(in);
  float *x = load_f32(&f, "input", in_numel);
  int32_t *y = load_labels(&f, "target", n);

  pt_model_zero_grad(m);
  const float *out = pt_model_forward(m, x, n);
  float *ref_out = load_f32(&f, "output", (size_t)n * m->num_classes);
  expect_close("output", out, ref_out, (size_t)n * m->num_classes);
  float loss = (float)pt_model_loss(m, y, n, 1.0f), ref_loss;
  assert_int_equal(pt_st_get_f32(&f, "loss", &ref_loss, 1), PT_OK);
  expect_close("loss", &loss, &ref_loss, 1);
  pt_model_backward(m, x, n);
  char name[160];
  for (int i = 0; i < m->nparams; i++) {
    snprintf(name, sizeof name, "grad.%s", m->params[i].name);
    float *g = load_f32(&f, name, m->params[i].numel), *mine = in_torch_order(m, i, m->grad);
    expect_close(name, mine, g, m->params[i].numel);
    free(g);
    free(mine);
  }
  for (int i = 0; i < m->nbuffers; i++) {
    snprintf(name, sizeof name, "after.%s", m->buffers[i].name);
    float *b = load_f32(&f, name, m->buffers[i].numel);
    expect_close(name, m->buffer + m->buffers[i].offset, b, m->buffers[i].numel);
    free(b);
  }
  free(x);
  free(y);
  free(ref_out);
  pt_model_destroy(m);
  pt_st_free(&f);
}

static void check_preset(const char *preset) {
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec(preset, &spec), PT_OK);
  char path[256];
  snprintf(path, sizeof path, REF "%s.safetensors", preset);
  check_model(path, &spec);
}

static void test_mnist_cnn(void **s) { (void)s; check_preset("mnist-cnn"); }
static void test_tutorial_cnn(void **s) { (void)s; check_preset("tutorial-cnn"); }
static void test_fmnist_mlp(void **s) { (void)s; check_preset("fmnist-mlp"); }

/* The parity tests above cover the fused conv + ReLU + max-pool only if
 * the presets take it: where the build has it (AVX-512), mnist-cnn's conv2
 * (Winograd) and tutorial-cnn's conv1.0 (direct) and conv2.0 (Winograd)
 * do; mnist-cnn's conv1 has no pool after it. */
static void test_presets_fuse_pools(void **s) {
  (void)s;
  pt_conv_geom probe = {16, 14, 14, 32, 5, 5, 1, 2, 0, 0, 1};
  assert_true(pt_conv_init(&probe));
  if (!pt_conv_pool_ok(&probe)) skip();
  pt_model_spec spec;
  pt_model *m;
  assert_int_equal(pt_preset_spec("mnist-cnn", &spec), PT_OK);
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  assert_true(m->layers[2].conv_pool && m->layers[4].fused && !m->layers[0].conv_pool);
  assert_ptr_equal(m->layers[2].y, m->layers[4].y);
  pt_model_destroy(m);
  assert_int_equal(pt_preset_spec("tutorial-cnn", &spec), PT_OK);
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  assert_true(m->layers[3].conv_pool && m->layers[5].fused);
  assert_true(m->layers[0].conv_pool && m->layers[2].fused);
  pt_model_destroy(m);
}

/* The fmnist-mlp parity test covers weights in panels only if the preset
 * takes them: lin1, which sees the unnormalised pixels, has them where the
 * build does (AVX-512); lin2, lin1 behind a mean subtracted, and a linear
 * layer on colour images do not.
 * Either way the initial weights are PyTorch's draws in PyTorch's order. */
static void test_fmnist_mlp_panels(void **s) {
  (void)s;
  if (!pt_linear_panels_ok(784, 200)) skip();
  pt_model_spec spec, norm;
  pt_model *m, *plain;
  assert_int_equal(pt_preset_spec("fmnist-mlp", &spec), PT_OK);
  norm = spec;
  norm.mean[0] = 0.5f;
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  assert_int_equal(pt_model_create(&plain, &norm, 2), PT_OK);
  const int w1 = m->layers[1].w, w2 = m->layers[3].w;
  assert_true(m->params[w1].panels && !m->params[w2].panels && !plain->params[w1].panels);
  pt_model_init(m, 1);
  pt_model_init(plain, 1);
  const pt_tensor_info *t = &m->params[w1];
  float *mine = in_torch_order(m, w1, m->param);
  assert_memory_equal(mine, plain->param + t->offset, sizeof(float) * t->numel);
  assert_memory_equal(m->param + m->params[w2].offset, plain->param + m->params[w2].offset,
                      sizeof(float) * m->params[w2].numel);
  free(mine);
  pt_model_destroy(m);
  pt_model_destroy(plain);
  assert_int_equal(pt_preset_spec("mnist-cnn", &spec), PT_OK); /* fc1 sees conv features */
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  for (int i = 0; i < m->nparams; i++) assert_false(m->params[i].panels);
  pt_model_destroy(m);
  /* colour images, unnormalised: few zeros */
  assert_int_equal(pt_spec_parse("name rgb\ninput 3 32 32\nflatten\nlinear fc out=64\nlinear out out=10\n", "rgb",
                                 &spec),
                   PT_OK);
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  assert_false(m->params[0].panels);
  pt_model_destroy(m);
}

static void test_cifar_bn_train(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(cifar_bn_small, "cifar-bn-small", &spec), PT_OK);
  check_model(REF "cifar-bn-small.safetensors", &spec);
}

static void test_cifar_bn_eval(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(cifar_bn_small, "cifar-bn-small", &spec), PT_OK);
  check_model(REF "cifar-bn-small-eval.safetensors", &spec);
}

static float meta_float(const pt_st_file *f, const char *key, float dflt) {
  const char *v = pt_st_meta(f, key);
  return v ? strtof(v, NULL) : dflt;
}

static void check_optimizer(const char *config) {
  char path[256];
  snprintf(path, sizeof path, REF "optim_%s.safetensors", config);
  pt_st_file f;
  if (pt_st_read(path, &f) != PT_OK) {
    print_error("%s\n", pt_error_message());
    fail();
  }
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(optnet, "optnet", &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, 8), PT_OK);
  load_state(m, &f, "init.");
  pt_opt_kind kind;
  assert_int_equal(pt_opt_kind_parse(pt_st_meta(&f, "optimizer"), &kind), PT_OK);
  pt_opt_config cfg;
  pt_opt_config_defaults(&cfg, kind);
  cfg.lr = meta_float(&f, "lr", cfg.lr);
  cfg.momentum = meta_float(&f, "momentum", 0.0f);
  cfg.dampening = meta_float(&f, "dampening", 0.0f);
  cfg.nesterov = (int)meta_float(&f, "nesterov", 0.0f);
  cfg.weight_decay = meta_float(&f, "weight_decay", cfg.weight_decay);
  cfg.eps = meta_float(&f, "eps", cfg.eps);
  cfg.rho = meta_float(&f, "rho", cfg.rho);
  pt_optimizer opt;
  assert_int_equal(pt_optimizer_init(&opt, &cfg, m->nparam_total), PT_OK);
  for (int k = 0; k < 5; k++) {
    char name[64];
    snprintf(name, sizeof name, "input.%d", k);
    float *x = load_f32(&f, name, 8 * 64);
    snprintf(name, sizeof name, "target.%d", k);
    int32_t *y = load_labels(&f, name, 8);
    pt_model_zero_grad(m);
    pt_model_forward(m, x, 8);
    float loss = (float)pt_model_loss(m, y, 8, 1.0f), ref;
    snprintf(name, sizeof name, "loss.%d", k);
    assert_int_equal(pt_st_get_f32(&f, name, &ref, 1), PT_OK);
    expect_close(name, &loss, &ref, 1);
    pt_model_backward(m, x, 8);
    pt_optimizer_step(&opt, m->param, m->grad, cfg.lr);
    free(x);
    free(y);
  }
  for (int i = 0; i < m->nparams; i++) {
    char name[160];
    snprintf(name, sizeof name, "final.%s", m->params[i].name);
    float *p = load_f32(&f, name, m->params[i].numel), *mine = in_torch_order(m, i, m->param);
    expect_close(name, mine, p, m->params[i].numel);
    free(p);
    free(mine);
  }
  pt_optimizer_free(&opt);
  pt_model_destroy(m);
  pt_st_free(&f);
}

static void test_sgd_plain(void **s) { (void)s; check_optimizer("sgd_plain"); }
static void test_sgd_momentum(void **s) { (void)s; check_optimizer("sgd_momentum"); }
static void test_sgd_nesterov(void **s) { (void)s; check_optimizer("sgd_nesterov"); }
static void test_adam(void **s) { (void)s; check_optimizer("adam"); }
static void test_adamw(void **s) { (void)s; check_optimizer("adamw"); }
static void test_adadelta(void **s) { (void)s; check_optimizer("adadelta"); }

static int report(void **s) {
  (void)s;
  printf("largest parity error: %.3f of the tolerance\n", worst);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mnist_cnn),   cmocka_unit_test(test_tutorial_cnn),
      cmocka_unit_test(test_fmnist_mlp),  cmocka_unit_test(test_cifar_bn_train),
      cmocka_unit_test(test_cifar_bn_eval), cmocka_unit_test(test_sgd_plain),
      cmocka_unit_test(test_sgd_momentum), cmocka_unit_test(test_sgd_nesterov),
      cmocka_unit_test(test_adam),        cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_adadelta),    cmocka_unit_test(test_presets_fuse_pools),
      cmocka_unit_test(test_fmnist_mlp_panels),
  };
  return cmocka_run_group_tests(tests, NULL, report);
}
