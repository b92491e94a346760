/* Placing layers on stages: balanced by FLOPs (the tutorial's split of
 * fmnist-mlp comes out by itself), at named or numbered boundaries, and
 * clear errors for boundaries that cannot be. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nn/presets.h"
#include "pipe/partition.h"

static pt_model *build(const char *preset) {
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec(preset, &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, 1), PT_OK);
  return m;
}

static void test_balanced(void **state) {
  (void)state;
  int b[8];
  /* flatten, lin1, logsoftmax | lin2: lin1 and its log-softmax on the first
   * device, lin2 on the second, as the model-parallel tutorial places them. */
  pt_model *m = build("fmnist-mlp");
  assert_int_equal(pt_pipe_partition(m, 2, NULL, b), PT_OK);
  assert_int_equal(b[0], 0);
  assert_int_equal(b[1], 3);
  assert_int_equal(b[2], 4);
  pt_model_destroy(m);
  /* cifar-convnet over 4 stages: no stage is costlier than the best
   * possible, and the boundaries increase. */
  m = build("cifar-convnet");
  assert_int_equal(pt_pipe_partition(m, 4, NULL, b), PT_OK);
  double worst = 0, total = pt_pipe_range_flops(m, 0, m->nlayers);
  for (int s = 0; s < 4; s++) {
    assert_true(b[s + 1] > b[s]);
    double f = pt_pipe_range_flops(m, b[s], b[s + 1]);
    if (f > worst) worst = f;
  }
  /* The cheapest possible worst stage, by trying every partition. */
  double best = total;
  const int L = m->nlayers;
  for (int i = 1; i < L; i++)
    for (int j = i + 1; j < L; j++)
      for (int k = j + 1; k < L; k++) {
        double f[4] = {pt_pipe_range_flops(m, 0, i), pt_pipe_range_flops(m, i, j), pt_pipe_range_flops(m, j, k),
                       pt_pipe_range_flops(m, k, L)};
        double w = f[0];
        for (int q = 1; q < 4; q++) w = f[q] > w ? f[q] : w;
        if (w < best) best = w;
      }
  assert_float_equal(worst, best, 1e-9 * best);
  pt_model_destroy(m);
}

static void test_named(void **state) {
  (void)state;
  int b[8];
  pt_model *m = build("mnist-cnn");
  assert_int_equal(pt_pipe_partition(m, 3, "conv2,fc1", b), PT_OK);
  assert_int_equal(b[1], 2);
  assert_int_equal(b[2], 7);
  assert_int_equal(b[3], m->nlayers);
  assert_int_equal(pt_pipe_partition(m, 2, "5", b), PT_OK);
  assert_int_equal(b[1], 5);
  pt_model_destroy(m);
}

static void expect_error(const char *preset, int stages, const char *split, const char *needle) {
  int b[PT_MAX_LAYERS + 1];
  pt_model *m = build(preset);
  assert_int_not_equal(pt_pipe_partition(m, stages, split, b), PT_OK);
  if (!strstr(pt_error_message(), needle)) print_error("message '%s' lacks '%s'\n", pt_error_message(), needle);
  assert_non_null(strstr(pt_error_message(), needle));
  pt_model_destroy(m);
}

static void test_errors(void **state) {
  (void)state;
  expect_error("mnist-cnn", 2, "fc9", "no layer of that name");
  expect_error("mnist-cnn", 2, "99", "has layers 0 to");
  expect_error("mnist-cnn", 3, "fc1", "names 1 boundary; 3 stages need 2");
  expect_error("mnist-cnn", 2, "conv2,fc1", "more than 1 boundary");
  expect_error("mnist-cnn", 3, "fc1,conv2", "later and later");
  expect_error("mnist-cnn", 2, "0", "first stage would be empty");
  expect_error("mnist-cnn", 2, "conv2,", "trailing comma");
  expect_error("fmnist-mlp", 2, "1", "only 'flatten'");
  expect_error("fmnist-mlp", 5, NULL, "only 3 layers besides flatten");
  expect_error("fmnist-mlp", 4, NULL, "4 stages but fmnist-mlp has only 3 layers besides flatten");
  expect_error("mnist-cnn", 12, NULL, "only 11 layers besides flatten");
}

/* As many stages as there are layers besides flatten: the balance puts
 * flatten with a neighbour, never alone on a stage (8 to 11 stages of
 * mnist-cnn once were refused, naming a boundary no one had given). */
static void test_flatten_never_alone(void **state) {
  (void)state;
  int b[PT_MAX_LAYERS + 1];
  pt_model *m = build("mnist-cnn");
  for (int stages = 2; stages <= 11; stages++) {
    assert_int_equal(pt_pipe_partition(m, stages, NULL, b), PT_OK);
    for (int s = 0; s < stages; s++) {
      assert_true(b[s + 1] > b[s]);
      int working = 0;
      for (int i = b[s]; i < b[s + 1]; i++) working += m->layers[i].spec.kind != PT_L_FLATTEN;
      if (!working) fail_msg("%d stages: stage %d holds only flatten", stages, s);
    }
  }
  pt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_balanced),
      cmocka_unit_test(test_named),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_flatten_never_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
