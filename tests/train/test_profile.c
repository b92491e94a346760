/* The profile's per-layer GFLOP/s count the work each layer did: its
 * forward FLOPs, as many again for the weight gradient, and as many again
 * for the input gradient only where the backward pass computed one. The
 * first layer with parameters computes none in training, so counting it at
 * 3x the forward overstated fmnist-mlp's lin1, 99% of the model's FLOPs, by
 * half. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nn/model.h"
#include "nn/presets.h"
#include "train/profile.h"

#define N 16

static pt_layer *find(pt_model *m, const char *label) {
  for (int i = 0; i < m->nlayers; i++)
    if (!strcmp(m->layers[i].label, label)) return &m->layers[i];
  fail_msg("no layer '%s'", label);
  return NULL;
}

static void test_input_gradient_counted_where_computed(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec("fmnist-mlp", &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, N), PT_OK);
  pt_model_init(m, 3);
  float *x = calloc((size_t)N * 784, sizeof(float));
  int32_t y[N];
  assert_non_null(x);
  for (int i = 0; i < N * 784; i++) x[i] = (float)(i % 7) / 7.0f;
  for (int i = 0; i < N; i++) y[i] = i % 10;
  pt_layer *lin1 = find(m, "linear lin1"), *lin2 = find(m, "linear lin2"), *lsm = find(m, "logsoftmax");
  const double f1 = 2.0 * 784 * 200, f2 = 2.0 * 200 * 10; /* forward FLOPs per sample */

  pt_model_start_grads(m);
  pt_model_forward(m, x, N);
  pt_model_loss(m, y, N, 1.0f);
  pt_model_backward(m, x, N);
  assert_int_equal(lin1->bwd_dx, 0);
  assert_int_equal(lin2->bwd_dx, 1);
  /* 100 samples in 1 + 1 ms */
  assert_float_equal(pt_profile_layer_gflops(lin1, 100, 1.0, 1.0), 2.0 * f1 * 100 / 2e-3 / 1e9, 1e-9);
  assert_float_equal(pt_profile_layer_gflops(lin2, 100, 1.0, 1.0), 3.0 * f2 * 100 / 2e-3 / 1e9, 1e-9);
  assert_float_equal(pt_profile_layer_gflops(lsm, 100, 1.0, 1.0), 0.0, 0.0);
  assert_float_equal(pt_profile_layer_gflops(lin1, 100, 0.0, 0.0), 0.0, 0.0);

  /* A pipeline stage's backward pass wants the input gradient: lin1 then
   * computes one, and counts it. */
  pt_model_forward(m, x, N);
  pt_model_loss(m, y, N, 1.0f);
  assert_non_null(pt_model_backward_from(m, x, m->dlogits, N, 1));
  assert_int_equal(lin1->bwd_dx, 1);
  assert_float_equal(pt_profile_layer_gflops(lin1, 100, 1.0, 1.0), 3.0 * f1 * 100 / 2e-3 / 1e9, 1e-9);
  free(x);
  pt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_gradient_counted_where_computed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
