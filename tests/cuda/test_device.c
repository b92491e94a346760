/* Device discovery and the self-test. The tests that need no GPU run
 * everywhere; those that do run only where one is found, and a machine without
 * one reports the test skipped (exit 77) with the reason, not passed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cuda/device.h"
#ifdef PT_HAVE_CUDA
#include "ops/cuda/context.h"
/* From ops/cuda/check.h, which needs the CUDA headers. */
void pt_cuda_note_error(const char *what, const char *msg);
#endif

static void test_count_never_fails(void **s) {
  (void)s;
  int n = -1;
  char why[256] = "unset";
  assert_int_equal(pt_cuda_device_count(&n, why, sizeof why), PT_OK);
  assert_true(n >= 0);
  /* A user seeing no GPU is always told why. */
  if (n == 0) assert_true(why[0] != '\0' && strcmp(why, "unset") != 0);
  /* The reason is optional for callers that only want the number. */
  assert_int_equal(pt_cuda_device_count(&n, NULL, 0), PT_OK);
  assert_int_equal(pt_cuda_device_count(NULL, why, sizeof why), PT_ERR_ARG);
}

static void test_versions(void **s) {
  (void)s;
  pt_cuda_versions v;
  assert_int_equal(pt_cuda_version_info(&v), PT_OK);
  assert_true(v.runtime[0] != '\0');
  assert_true(v.cublas[0] != '\0');
#ifdef PT_HAVE_CUDNN
  assert_true(v.cudnn[0] != '\0');
#endif
#ifdef PT_HAVE_NCCL
  assert_true(v.nccl[0] != '\0');
#endif
}

static void test_without_cuda(void **s) {
  (void)s;
  int n = -1;
  char why[256];
  assert_int_equal(pt_cuda_device_count(&n, why, sizeof why), PT_OK);
  assert_int_equal(n, 0);
  assert_non_null(strstr(why, "built without CUDA"));
  pt_cuda_device d;
  assert_int_equal(pt_cuda_device_info(0, &d), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "built without CUDA"));
  assert_int_equal(pt_cuda_selftest(0), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "built without CUDA"));
  pt_cuda_versions v;
  assert_int_equal(pt_cuda_version_info(&v), PT_ERR_DEVICE);
}

static void test_device_info_sane(void **s) {
  (void)s;
  int n;
  assert_int_equal(pt_cuda_device_count(&n, NULL, 0), PT_OK);
  for (int i = 0; i < n; i++) {
    pt_cuda_device d;
    assert_int_equal(pt_cuda_device_info(i, &d), PT_OK);
    print_message("cuda:%d: %s, %zu bytes, compute capability %d.%d, %d SMs\n", i, d.name,
                  d.total_memory, d.cc_major, d.cc_minor, d.multiprocessors);
    assert_true(d.name[0] != '\0');
    assert_true(d.total_memory >= ((size_t)1 << 30));
    assert_true(d.cc_major >= 5 && d.cc_minor >= 0);
    assert_true(d.multiprocessors > 0);
  }
  pt_cuda_device d;
  assert_int_equal(pt_cuda_device_info(n, &d), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "no such device"));
  assert_int_equal(pt_cuda_device_info(-1, &d), PT_ERR_ARG);
}

static void test_selftest(void **s) {
  (void)s;
  int n;
  assert_int_equal(pt_cuda_device_count(&n, NULL, 0), PT_OK);
  for (int i = 0; i < n; i++) {
    pt_status st = pt_cuda_selftest(i);
    if (st != PT_OK) print_error("%s\n", pt_error_message());
    assert_int_equal(st, PT_OK);
  }
  assert_int_equal(pt_cuda_selftest(n), PT_ERR_ARG);
}

#ifdef PT_HAVE_CUDA
/* An error an op notes is reported once, by the next sync, whatever
 * happens between: a bind must not drop one noted before it, and unbind
 * (the end of a worker) must report one no sync has yet. */
static void test_errors_survive_bind_and_unbind(void **s) {
  (void)s;
  assert_int_equal(pt_cuda_unbind(), PT_OK); /* nothing bound */
  pt_cuda_note_error("an op before binding", "planted 1");
  assert_int_equal(pt_cuda_bind(0), PT_OK);
  assert_int_equal(pt_cuda_sync(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "planted 1"));
  assert_int_equal(pt_cuda_sync(), PT_OK); /* reported once */
  pt_cuda_note_error("an op before unbinding", "planted 2");
  assert_int_equal(pt_cuda_unbind(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "planted 2"));
  assert_int_equal(pt_cuda_bind(0), PT_OK);
  assert_int_equal(pt_cuda_sync(), PT_OK); /* the unbind reported it */
  assert_int_equal(pt_cuda_unbind(), PT_OK);
}
#endif

int main(void) {
  if (!pt_cuda_built()) {
    const struct CMUnitTest t[] = {cmocka_unit_test(test_without_cuda)};
    return cmocka_run_group_tests_name("cuda (built without)", t, NULL, NULL);
  }
  const struct CMUnitTest anywhere[] = {
      cmocka_unit_test(test_count_never_fails),
      cmocka_unit_test(test_versions),
  };
  int failed = cmocka_run_group_tests_name("cuda (no GPU needed)", anywhere, NULL, NULL);
  if (failed) return failed;
  int n;
  char why[256];
  if (pt_cuda_device_count(&n, why, sizeof why) != PT_OK) return 1;
  if (n == 0) {
    printf("SKIPPED: no GPU (%s)\n", why);
    return 77;
  }
  const struct CMUnitTest gpu[] = {
      cmocka_unit_test(test_device_info_sane),
      cmocka_unit_test(test_selftest),
#ifdef PT_HAVE_CUDA
      cmocka_unit_test(test_errors_survive_bind_and_unbind),
#endif
  };
  return cmocka_run_group_tests_name("cuda devices", gpu, NULL, NULL);
}
