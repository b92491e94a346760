/* Stages of a model: layers [lo, hi) whose parameters are views of the
 * whole model's. Chained by hand, forward then backward with the gradient
 * each stage hands the one before, they give the whole model's loss and
 * gradients; activation slots keep micro-batches apart. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nn/model.h"
#include "pipe/stage.h"

/* A conv and its ReLU cut apart (no fusion across stages), batch norm, pooling. */
static const char *spec_text =
    "name t\ninput 2 8 8\n"
    "conv2d c1 out=4 kernel=3 padding=1\nrelu\n"
    "batchnorm2d bn1\nmaxpool2d kernel=2\n"
    "conv2d c2 out=6 kernel=3\nrelu\nflatten\n"
    "linear fc out=5\nloss cross-entropy\n";

enum { N = 6 };

static pt_model *build_from(const char *text, uint64_t seed) {
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(text, "test", &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, N), PT_OK);
  pt_model_init(m, seed);
  return m;
}

static pt_model *build(void) { return build_from(spec_text, 7); }

static void fill(float *x, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
  }
}

static double rel(const float *a, const float *b, size_t n) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++) {
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    s += (double)a[i] * a[i];
  }
  return sqrt(d) / (sqrt(s) + 1e-30);
}

static void test_chained_stages_equal_whole(void **state) {
  (void)state;
  float x[N * 2 * 8 * 8];
  int32_t y[N] = {0, 1, 2, 3, 4, 0};
  fill(x, sizeof x / sizeof x[0], 1);
  pt_model *ref = build(), *whole = build();
  pt_model_zero_grad(ref);
  pt_model_forward(ref, x, N);
  const double loss_ref = pt_model_loss(ref, y, N, 1.0f);
  pt_model_backward(ref, x, N);

  const int bounds[] = {0, 1, 4, whole->nlayers};
  pt_model *st[3];
  for (int s = 0; s < 3; s++) {
    assert_int_equal(pt_model_create_stage(&st[s], whole, bounds[s], bounds[s + 1], N, 1), PT_OK);
    /* The stage's parameters are the whole's, under the same names. */
    for (int p = 0; p < st[s]->nparams; p++) {
      const float *data;
      const pt_tensor_info *t = pt_model_find(whole, st[s]->params[p].name, &data, NULL);
      assert_non_null(t);
      assert_ptr_equal(st[s]->param + st[s]->params[p].offset, data);
    }
  }
  pt_model_zero_grad(whole);
  const float *a0 = pt_model_forward(st[0], x, N);
  const float *a1 = pt_model_forward(st[1], a0, N);
  pt_model_forward(st[2], a1, N);
  const double loss = pt_model_loss(st[2], y, N, 1.0f);
  const float *d1 = pt_model_backward_from(st[2], a1, st[2]->dlogits, N, 1);
  const float *d0 = pt_model_backward_from(st[1], a0, d1, N, 1);
  assert_null(pt_model_backward_from(st[0], x, d0, N, 0));
  assert_float_equal(loss, loss_ref, 1e-6 * fabs(loss_ref));
  assert_true(rel(ref->grad, whole->grad, ref->nparam_total) < 1e-6);
  /* Batch-norm running statistics and counts landed in the whole model. */
  assert_true(rel(ref->buffer, whole->buffer, ref->nbuffer_total) < 1e-6);
  assert_int_equal(whole->layers[2].num_batches_tracked, 1);
  for (int s = 0; s < 3; s++) pt_model_destroy(st[s]);
  pt_model_destroy(ref);
  pt_model_destroy(whole);
}

static void test_slots_keep_micro_batches_apart(void **state) {
  (void)state;
  float xa[N * 2 * 8 * 8], xb[N * 2 * 8 * 8];
  int32_t y[N] = {4, 3, 2, 1, 0, 1};
  fill(xa, sizeof xa / sizeof xa[0], 2);
  fill(xb, sizeof xb / sizeof xb[0], 3);
  pt_model *ref = build(), *whole = build(), *st;
  pt_model_zero_grad(ref);
  pt_model_forward(ref, xa, N);
  pt_model_loss(ref, y, N, 1.0f);
  pt_model_backward(ref, xa, N);

  assert_int_equal(pt_model_create_stage(&st, whole, 0, whole->nlayers, N, 2), PT_OK);
  pt_model_zero_grad(whole);
  pt_model_use_slot(st, 0);
  pt_model_forward(st, xa, N);
  pt_model_use_slot(st, 1);
  pt_model_forward(st, xb, N); /* must not disturb slot 0's activations */
  pt_model_use_slot(st, 0);
  pt_model_loss(st, y, N, 1.0f);
  pt_model_backward(st, xa, N);
  /* xb's forward moved the running statistics once more; the gradients are xa's alone. */
  assert_true(rel(ref->grad, whole->grad, ref->nparam_total) < 1e-6);
  assert_int_equal(2 * st->slot_bytes > 0, 1);
  pt_model_destroy(st);
  pt_model_destroy(ref);
  pt_model_destroy(whole);
}

/* A conv, its ReLU and a 2x2 max-pool, which the whole model runs as one
 * op where the build can (pt_conv_pool_ok): cut between any two of them,
 * the stages run them apart, and chained they give the whole model's
 * numbers; with two slots, each keeps its own pooled output and codes. */
static const char *pooled_text =
    "name p\ninput 2 8 8\n"
    "conv2d c1 out=4 kernel=3 padding=1\nrelu\nmaxpool2d kernel=2\n"
    "conv2d c2 out=6 kernel=3\nrelu\nflatten\n"
    "linear fc out=5\nloss cross-entropy\n";

static pt_model *build_pooled(void) { return build_from(pooled_text, 11); }

static void test_fused_pool_cut_anywhere(void **state) {
  (void)state;
  float x[N * 2 * 8 * 8];
  int32_t y[N] = {1, 2, 3, 4, 0, 1};
  fill(x, sizeof x / sizeof x[0], 4);
  pt_model *ref = build_pooled();
  assert_int_equal(ref->layers[0].conv_pool, pt_conv_pool_ok(&ref->layers[0].conv));
  pt_model_zero_grad(ref);
  pt_model_forward(ref, x, N);
  const double loss_ref = pt_model_loss(ref, y, N, 1.0f);
  pt_model_backward(ref, x, N);
  for (int cut = 1; cut <= 3; cut++) { /* after the conv, after its ReLU, after the pool */
    pt_model *whole = build_pooled(), *a, *b;
    assert_int_equal(pt_model_create_stage(&a, whole, 0, cut, N, 1), PT_OK);
    assert_int_equal(pt_model_create_stage(&b, whole, cut, whole->nlayers, N, 1), PT_OK);
    assert_int_equal(a->layers[0].conv_pool, cut == 3 && ref->layers[0].conv_pool);
    pt_model_zero_grad(whole);
    const float *h = pt_model_forward(a, x, N);
    pt_model_forward(b, h, N);
    const double loss = pt_model_loss(b, y, N, 1.0f);
    const float *dh = pt_model_backward_from(b, h, b->dlogits, N, 1);
    assert_null(pt_model_backward_from(a, x, dh, N, 0));
    assert_float_equal(loss, loss_ref, 1e-6 * fabs(loss_ref));
    assert_true(rel(ref->grad, whole->grad, ref->nparam_total) < 1e-6);
    pt_model_destroy(a);
    pt_model_destroy(b);
    pt_model_destroy(whole);
  }
  /* two slots through the fused op: slot 1's forward leaves slot 0's alone */
  float xb[N * 2 * 8 * 8];
  fill(xb, sizeof xb / sizeof xb[0], 5);
  pt_model *whole = build_pooled(), *st;
  assert_int_equal(pt_model_create_stage(&st, whole, 0, whole->nlayers, N, 2), PT_OK);
  pt_model_zero_grad(whole);
  pt_model_use_slot(st, 0);
  pt_model_forward(st, x, N);
  pt_model_use_slot(st, 1);
  pt_model_forward(st, xb, N);
  pt_model_use_slot(st, 0);
  assert_float_equal(pt_model_loss(st, y, N, 1.0f), loss_ref, 1e-6 * fabs(loss_ref));
  pt_model_backward(st, x, N);
  assert_true(rel(ref->grad, whole->grad, ref->nparam_total) < 1e-6);
  pt_model_destroy(st);
  pt_model_destroy(whole);
  pt_model_destroy(ref);
}

static void test_bad_ranges(void **state) {
  (void)state;
  pt_model *whole = build(), *st;
  assert_int_not_equal(pt_model_create_stage(&st, whole, 2, 2, N, 1), PT_OK);
  assert_non_null(strstr(pt_error_message(), "non-empty range"));
  assert_int_not_equal(pt_model_create_stage(&st, whole, 0, whole->nlayers + 1, N, 1), PT_OK);
  assert_int_not_equal(pt_model_create_stage(&st, whole, 0, 1, N, 0), PT_OK);
  pt_model_destroy(whole);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chained_stages_equal_whole),
      cmocka_unit_test(test_slots_keep_micro_batches_apart),
      cmocka_unit_test(test_fused_pool_cut_anywhere),
      cmocka_unit_test(test_bad_ranges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
