/* A failure a GPU reports only when waited for must not vanish when layers
 * are timed (--profile, --trace), whose waits are the only ones in a step.
 * A stand-in backend runs the CPU kernels but calls itself a GPU, with a
 * sync that fails on its third call and a device wait (the trainer's NCCL
 * bound) that can fail too: the step's status and message are the first
 * failure's, and later layers stop waiting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nn/model.h"
#include "nn/spec.h"

static int syncs, fail_at;

static pt_status flaky_sync(void) {
  if (++syncs == fail_at) return pt_fail(PT_ERR_DEVICE, "cuda:0: planted cuBLAS failure %d", syncs);
  return PT_OK;
}

static pt_status dead_peer(void *ctx) {
  (void)ctx;
  return pt_fail(PT_ERR_COMM, "the gradient allreduce: rank 1 did not answer within 300 s");
}

static const char *mlp = "name mlp\ninput 1 4 4\nflatten\nlinear fc1 out=8\nrelu\nlinear fc2 out=3\n"
                         "loss cross-entropy\n";

static pt_model *make(pt_backend *fake) {
  *fake = *pt_backend_cpu();
  fake->kind = PT_BACKEND_CUDA;
  fake->sync = flaky_sync;
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse(mlp, "mlp", &spec), PT_OK);
  pt_model *m = NULL;
  assert_int_equal(pt_model_create_on(&m, &spec, 2, fake), PT_OK);
  pt_model_init(m, 3);
  m->training = 1;
  m->profile = 1;
  return m;
}

static void test_sync_failure_is_kept(void **s) {
  (void)s;
  pt_backend fake;
  pt_model *m = make(&fake);
  const float x[2 * 16] = {0.5f, 1.0f};
  const int32_t y[2] = {1, 2};
  syncs = 0;
  fail_at = 3; /* after fc1's forward */
  pt_model_forward(m, x, 2);
  assert_int_equal(m->sync_status, PT_ERR_DEVICE);
  assert_non_null(strstr(m->sync_error, "planted cuBLAS failure 3"));
  const int after = syncs;
  pt_model_loss(m, y, 2, 1.0f);
  pt_model_backward(m, x, 2);
  assert_int_equal(syncs, after); /* no more timed waits once one failed */
  assert_non_null(strstr(m->sync_error, "planted cuBLAS failure 3"));
  pt_model_destroy(m);
}

static void test_device_wait_failure_is_kept(void **s) {
  (void)s;
  pt_backend fake;
  pt_model *m = make(&fake);
  m->device_wait = dead_peer;
  const float x[2 * 16] = {0};
  syncs = 0;
  fail_at = -1;
  pt_model_forward(m, x, 2);
  assert_int_equal(m->sync_status, PT_ERR_COMM);
  assert_non_null(strstr(m->sync_error, "rank 1 did not answer"));
  assert_int_equal(syncs, 0); /* the backend's sync waits behind the bounded wait */
  pt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(test_sync_failure_is_kept),
                                 cmocka_unit_test(test_device_wait_failure_is_kept)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
