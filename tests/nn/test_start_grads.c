/* pt_model_start_grads: the linear layers' gradients are written by the
 * backward pass that follows, not cleared and added to. Against
 * pt_model_zero_grad, on the same weights and batches: the same bits in
 * every gradient after one backward pass, and after a second that adds to
 * it (a second micro-batch), with what the gradients held before (NaN
 * here) read by neither. On a model with convolutions, batch norm and
 * linear layers around them, on fmnist-mlp (linear layers only) and on
 * mnist-cnn (dropout too). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nn/model.h"
#include "nn/presets.h"
#include "util/philox.h"

#define N 20 /* samples: at least 16, so the larger layers' kernels take them */

static const char *mixed =
    "name mixed\n"
    "input 3 16 16\n"
    "conv2d conv1 out=8 kernel=3 padding=1\n"
    "batchnorm2d bn1\n"
    "relu\n"
    "maxpool2d kernel=2\n"
    "flatten\n"
    "linear fc1 out=40\n"
    "relu\n"
    "linear fc2 out=10\n"
    "loss cross-entropy\n";

static void batch(pt_rng *r, const pt_model *m, float *x, int32_t *y) {
  const size_t in = (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w;
  for (size_t i = 0; i < (size_t)N * in; i++) x[i] = pt_rng_uniform(r) < 0.4f ? 0.0f : pt_rng_uniform(r);
  for (int s = 0; s < N; s++) y[s] = (int32_t)(pt_rng_u32(r) % (uint32_t)m->num_classes);
}

static void pass(pt_model *m, const float *x, const int32_t *y, uint64_t step) {
  m->step = step;
  pt_model_forward(m, x, N);
  pt_model_loss(m, y, N, 0.5f);
  pt_model_backward(m, x, N);
}

static void check(const pt_model_spec *spec) {
  pt_model *a, *b;
  assert_int_equal(pt_model_create(&a, spec, N), PT_OK);
  assert_int_equal(pt_model_create(&b, spec, N), PT_OK);
  pt_model_init(a, 11);
  pt_model_init(b, 11);
  const size_t in = (size_t)spec->in_c * spec->in_h * spec->in_w;
  float *x = malloc(sizeof(float) * N * in);
  int32_t *y = malloc(sizeof(int32_t) * N);
  assert_non_null(x);
  assert_non_null(y);
  pt_rng r;
  pt_rng_init(&r, 5, 0);
  batch(&r, a, x, y);
  for (size_t i = 0; i < a->nparam_total; i++) a->grad[i] = b->grad[i] = NAN;
  pt_model_zero_grad(a);
  pass(a, x, y, 1);
  pt_model_start_grads(b);
  pass(b, x, y, 1);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < a->nparams; i++) {
      const size_t o = a->params[i].offset, k = a->params[i].numel;
      for (size_t e = 0; e < k; e++)
        if (isnan(b->grad[o + e])) fail_msg("%s, pass %d: %s[%zu] is NaN", spec->name, round + 1, a->params[i].name, e);
      if (memcmp(a->grad + o, b->grad + o, sizeof(float) * k))
        fail_msg("%s, pass %d: %s differs from zero_grad's", spec->name, round + 1, a->params[i].name);
    }
    batch(&r, a, x, y); /* a second micro-batch, added to the first */
    pass(a, x, y, 2);
    pass(b, x, y, 2);
  }
  free(x);
  free(y);
  pt_model_destroy(a);
  pt_model_destroy(b);
}

static void test_mixed(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(mixed, "mixed", &spec), PT_OK);
  check(&spec);
}

static void test_presets(void **s) {
  (void)s;
  const char *names[] = {"fmnist-mlp", "mnist-cnn"};
  for (int i = 0; i < 2; i++) {
    pt_model_spec spec;
    assert_int_equal(pt_preset_spec(names[i], &spec), PT_OK);
    check(&spec);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mixed),
      cmocka_unit_test(test_presets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
