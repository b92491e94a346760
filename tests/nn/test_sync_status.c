/* A failure a pass cannot return is kept with its message for the caller.
 *
 * On a GPU, --profile and --trace make the passes wait for the device
 * around every layer, and that wait is where a failed cuBLAS or cuDNN call
 * (or a kernel fault) is reported, once: the backend forgets it after
 * saying so. The model must keep it (pt_model_take_status) rather than
 * drop it and let the step go on with garbage. Here a backend that is the
 * CPU's in all but its name, kind and sync (which fails once, as the CUDA
 * backend's does) stands in for the GPU. The optimizer's update, queued
 * outside the passes, is waited for the same way when it is timed. */
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
#ifdef PT_TEST_TRAIN_UPDATE
#include "optim/optimizer.h"
#include "train/step.h"
#endif

#define N 4

static int syncs, fail_at, downloads_fail;

/* Fails at call fail_at (1-based), then succeeds: the fault was reported. */
static pt_status fake_sync(void) {
  syncs++;
  if (syncs == fail_at) return pt_fail(PT_ERR_DEVICE, "cuda:0: conv2d_forward: cudnnConvolutionForward: bad param");
  return PT_OK;
}

static pt_status fake_download(void *dst, const void *src, size_t bytes) {
  if (downloads_fail) return pt_fail(PT_ERR_DEVICE, "cuda:0: a queued operation failed: illegal address");
  memcpy(dst, src, bytes);
  return PT_OK;
}

static pt_backend fake;

static int setup(void **s) {
  (void)s;
  fake = *pt_backend_cpu();
  fake.kind = PT_BACKEND_CUDA;
  fake.name = "fake";
  fake.sync = fake_sync;
  fake.download = fake_download;
  syncs = 0;
  fail_at = 0;
  downloads_fail = 0;
  return 0;
}

static pt_model *make(void) {
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec("mnist-cnn", &spec), PT_OK);
  pt_model *m = NULL;
  assert_int_equal(pt_model_create_on(&m, &spec, N, &fake), PT_OK);
  pt_model_init(m, 3);
  return m;
}

static float *input(const pt_model *m) {
  const size_t n = (size_t)N * m->spec.in_c * m->spec.in_h * m->spec.in_w;
  float *x = calloc(n, sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) / 7.0f;
  return x;
}

/* Without --profile or --trace the passes never wait. */
static void test_no_wait_unprofiled(void **s) {
  (void)s;
  pt_model *m = make();
  float *x = input(m);
  m->training = 1;
  pt_model_forward(m, x, N);
  assert_int_equal(syncs, 0);
  assert_int_equal(pt_model_take_status(m), PT_OK);
  free(x);
  pt_model_destroy(m);
}

/* A forward pass's wait fails: the status and its own message survive
 * later passes (whose waits succeed) and other failures overwriting the
 * thread's message; taking it clears it. */
static void test_forward_failure_kept(void **s) {
  (void)s;
  pt_model *m = make();
  float *x = input(m);
  m->profile = 1;
  fail_at = 3;
  pt_model_forward(m, x, N);
  assert_true(syncs > fail_at);
  pt_model_forward(m, x, N);
  pt_fail(PT_ERR_IO, "something else entirely");
  assert_int_equal(pt_model_take_status(m), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "cudnnConvolutionForward: bad param"));
  assert_int_equal(pt_model_take_status(m), PT_OK);
  free(x);
  pt_model_destroy(m);
}

/* The same in the backward pass. */
static void test_backward_failure_kept(void **s) {
  (void)s;
  pt_model *m = make();
  float *x = input(m);
  int32_t y[N] = {1, 2, 3, 4};
  m->training = 1;
  pt_model_forward(m, x, N);
  pt_model_loss_queue(m, y, N, 1.0f);
  m->profile = 1;
  fail_at = 2;
  pt_model_backward(m, x, N);
  assert_true(syncs > fail_at);
  assert_int_equal(pt_model_take_status(m), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "bad param"));
  free(x);
  pt_model_destroy(m);
}

/* The first failure is the one reported: later ones are its echoes. */
static void test_first_failure_wins(void **s) {
  (void)s;
  pt_model *m = make();
  float *x = input(m);
  m->profile = 1;
  fail_at = 1;
  pt_model_forward(m, x, N);
  downloads_fail = 1;
  int32_t y[N] = {0, 1, 2, 3};
  assert_true(isnan(pt_model_loss(m, y, N, 1.0f)));
  assert_int_equal(pt_model_take_status(m), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "bad param"));
  assert_null(strstr(pt_error_message(), "illegal address"));
  free(x);
  pt_model_destroy(m);
}

/* A loss read that fails gives NaN, and the fault it reported is kept:
 * the next sync would no longer know of it. */
static void test_loss_download_failure_kept(void **s) {
  (void)s;
  pt_model *m = make();
  float *x = input(m);
  int32_t y[N] = {0, 1, 2, 3};
  pt_model_forward(m, x, N);
  downloads_fail = 1;
  assert_true(isnan(pt_model_loss(m, y, N, 1.0f)));
  assert_int_equal(pt_model_take_status(m), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "illegal address"));
  free(x);
  pt_model_destroy(m);
}

#ifdef PT_TEST_TRAIN_UPDATE
/* A timed update waits for the device once, so that its time is its own
 * and not the next step's first layer's, and keeps what that wait reports;
 * an untimed one waits for nothing. */
static void test_timed_update_waits(void **s) {
  (void)s;
  pt_model *m = make();
  pt_opt_config cfg;
  pt_opt_config_defaults(&cfg, PT_OPT_ADAM);
  pt_optimizer opt;
  assert_int_equal(pt_optimizer_init_on(&opt, &cfg, m->nparam_total, &fake), PT_OK);
  pt_train_update(m, &opt, 1e-3f, NULL);
  assert_int_equal(syncs, 0);

  pt_phase_times ph = {0};
  m->profile = 1;
  fail_at = 1;
  pt_train_update(m, &opt, 1e-3f, &ph);
  assert_int_equal(syncs, 1);
  assert_int_equal(ph.steps, 1);
  assert_int_equal(pt_model_take_status(m), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "bad param"));
  pt_train_update(m, &opt, 1e-3f, &ph);
  assert_int_equal(syncs, 2);
  assert_int_equal(pt_model_take_status(m), PT_OK);
  pt_optimizer_free(&opt);
  pt_model_destroy(m);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_no_wait_unprofiled, setup),
      cmocka_unit_test_setup(test_forward_failure_kept, setup),
      cmocka_unit_test_setup(test_backward_failure_kept, setup),
      cmocka_unit_test_setup(test_first_failure_wins, setup),
      cmocka_unit_test_setup(test_loss_download_failure_kept, setup),
#ifdef PT_TEST_TRAIN_UPDATE
      cmocka_unit_test_setup(test_timed_update_waits, setup),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
