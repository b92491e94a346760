/* The learning rate a run takes when no flag gives one: a spec's own, or
 * for a spec that names none, SGD's 0.01 as its default optimizer and
 * PyTorch's default for any other it names (Adam once trained at SGD's
 * 0.01); a flag's optimizer other than the spec's gets PyTorch's default. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "nn/spec.h"
#include "train/trainer.h"

static float lr_of(const char *text, const char *optimizer) {
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(text, "spec.txt", &spec), PT_OK);
  pt_train_config cfg;
  pt_train_config_defaults(&cfg);
  cfg.spec = &spec;
  cfg.optimizer = optimizer;
  pt_train_plan plan;
  assert_int_equal(pt_train_plan_make(&cfg, &plan), PT_OK);
  return plan.opt.lr;
}

#define BODY "input 1 28 28\nflatten\nlinear fc out=10\n"

static void test_rates(void **s) {
  (void)s;
  assert_true(lr_of(BODY, NULL) == 0.01f);
  assert_true(lr_of(BODY "defaults optimizer=adam\n", NULL) == 0.001f);
  assert_true(lr_of(BODY "defaults optimizer=adadelta\n", NULL) == 1.0f);
  assert_true(lr_of(BODY "defaults optimizer=adam lr=0.02\n", NULL) == 0.02f);
  assert_true(lr_of(BODY "defaults optimizer=adam\n", "adam") == 0.001f);
  assert_true(lr_of(BODY "defaults optimizer=adam lr=0.02\n", "sgd") == 0.001f);
  assert_true(lr_of(BODY, "adam") == 0.001f);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rates)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
