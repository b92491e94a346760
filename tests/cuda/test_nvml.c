/* The NVML sampler. Its statistics and its behaviour without a driver are
 * tested everywhere; sampling real GPUs only where NVML and a GPU are
 * found, and elsewhere the test reports itself skipped (77) with the
 * reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "cuda/device.h"
#include "cuda/nvml.h"

static pt_gpu_sample sample(int has_util, unsigned util, int has_mem, uint64_t used, uint64_t total) {
  pt_gpu_sample x = {.has_util = has_util, .util_pct = util, .has_mem = has_mem, .mem_used = used, .mem_total = total};
  return x;
}

static void test_stats_start_empty(void **s) {
  (void)s;
  pt_gpu_stats st;
  memset(&st, 0x5a, sizeof st);
  pt_gpu_stats_reset(&st);
  assert_int_equal(st.samples, 0);
  assert_int_equal(st.util_samples, 0);
  assert_int_equal(st.failed, 0);
  /* "No reading yet" must not look like an idle GPU. */
  assert_true(st.util_pct < 0);
  assert_true(st.util_mean_pct < 0);
  assert_true(st.mem_peak == 0 && st.mem_used == 0);
}

static void test_stats_mean_and_peak(void **s) {
  (void)s;
  pt_gpu_stats st;
  pt_gpu_stats_reset(&st);
  const unsigned util[] = {10, 90, 50, 0, 100};
  const uint64_t used[] = {100, 700, 300, 900, 200};
  for (int i = 0; i < 5; i++) {
    pt_gpu_sample x = sample(1, util[i], 1, used[i], 1000);
    pt_gpu_stats_add(&st, &x);
  }
  assert_int_equal(st.samples, 5);
  assert_int_equal(st.util_samples, 5);
  assert_int_equal(st.failed, 0);
  assert_true(st.util_pct == 100.0);
  assert_true(st.util_mean_pct > 49.999 && st.util_mean_pct < 50.001);
  assert_true(st.mem_used == 200);
  assert_true(st.mem_peak == 900);
  assert_true(st.mem_total == 1000);
}

/* A million readings: the running mean does not drift. */
static void test_stats_long_run(void **s) {
  (void)s;
  pt_gpu_stats st;
  pt_gpu_stats_reset(&st);
  for (int i = 0; i < 1000000; i++) {
    pt_gpu_sample x = sample(1, (unsigned)(i % 2 ? 100 : 0), 1, (uint64_t)i, 1u << 30);
    pt_gpu_stats_add(&st, &x);
  }
  assert_true(st.util_mean_pct > 49.9999 && st.util_mean_pct < 50.0001);
  assert_true(st.mem_peak == 999999);
}

/* Readings that lack a part count, but only towards what they have. */
static void test_stats_partial_and_failed(void **s) {
  (void)s;
  pt_gpu_stats st;
  pt_gpu_stats_reset(&st);
  pt_gpu_sample mem_only = sample(0, 0, 1, 4096, 8192);
  pt_gpu_stats_add(&st, &mem_only);
  assert_int_equal(st.samples, 1);
  assert_int_equal(st.util_samples, 0);
  assert_true(st.util_mean_pct < 0);
  assert_true(st.mem_peak == 4096);
  pt_gpu_sample util_only = sample(1, 40, 0, 0, 0);
  pt_gpu_stats_add(&st, &util_only);
  assert_true(st.util_mean_pct == 40.0);
  assert_true(st.mem_used == 4096); /* the last memory reading stays */
  pt_gpu_stats_add(&st, NULL);
  pt_gpu_sample nothing = sample(0, 0, 0, 0, 0);
  pt_gpu_stats_add(&st, &nothing);
  assert_int_equal(st.samples, 4);
  assert_int_equal(st.failed, 2);
  assert_true(st.util_mean_pct == 40.0 && st.mem_peak == 4096);
}

static void test_open_arguments(void **s) {
  (void)s;
  pt_nvml *nv = (pt_nvml *)&nv;
  char why[256];
  const char *ids[] = {"0000:00:00.0"};
  assert_int_equal(pt_nvml_open(NULL, ids, 1, 0.1, why, sizeof why), PT_ERR_ARG);
  assert_int_equal(pt_nvml_open(&nv, ids, 0, 0.1, why, sizeof why), PT_ERR_ARG);
  assert_null(nv);
  assert_non_null(strstr(pt_error_message(), "0 GPUs"));
  assert_int_equal(pt_nvml_open(&nv, ids, 1, 0, why, sizeof why), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "interval"));
  assert_int_equal(pt_nvml_open(&nv, ids, 1, 1e9, why, sizeof why), PT_ERR_ARG);
  const char *null_id[] = {NULL};
  assert_int_equal(pt_nvml_open(&nv, null_id, 1, 0.1, why, sizeof why), PT_ERR_ARG);
  assert_int_equal(pt_nvml_read(NULL, 0, NULL), PT_ERR_ARG);
  pt_nvml_close(NULL);
  pt_nvml_reset(NULL);
}

/* A library that is not there, and one that is not NVML: both leave the
 * sampler absent with a reason, never an error. */
static void test_unusable_library(void **s) {
  (void)s;
  pt_nvml *nv = (pt_nvml *)&nv;
  char why[512] = "unset";
  assert_int_equal(pt_nvml_open_library(&nv, "libptrain-no-such-library.so.1", NULL, 1, 0.1, why, sizeof why),
                   PT_OK);
  assert_null(nv);
  assert_non_null(strstr(why, "libptrain-no-such-library.so.1"));
  assert_non_null(strstr(why, "no NVIDIA driver"));
  strcpy(why, "unset");
  assert_int_equal(pt_nvml_open_library(&nv, "libm.so.6", NULL, 1, 0.1, why, sizeof why), PT_OK);
  assert_null(nv);
  assert_non_null(strstr(why, "nvmlInit_v2"));
  /* why is optional. */
  assert_int_equal(pt_nvml_open_library(&nv, "libptrain-no-such-library.so.1", NULL, 1, 0.1, NULL, 0), PT_OK);
  assert_null(nv);
}

static int nvml_loadable(char *why, size_t size) {
  pt_nvml *nv = NULL;
  if (pt_nvml_open(&nv, NULL, 1, 0.1, why, size) != PT_OK) return 0;
  const int ok = nv != NULL;
  pt_nvml_close(nv);
  return ok;
}

/* Where libnvidia-ml.so.1 cannot be loaded, opening says so and names it. */
static void test_no_driver(void **s) {
  (void)s;
  char why[512] = "unset";
  pt_nvml *nv = (pt_nvml *)&nv;
  const char *ids[] = {"0000:00:00.0"};
  assert_int_equal(pt_nvml_open(&nv, ids, 1, 0.1, why, sizeof why), PT_OK);
  assert_null(nv);
  print_message("without a driver: %s\n", why);
  assert_non_null(strstr(why, "libnvidia-ml.so.1"));
}

static void test_sample_gpus(void **s) {
  (void)s;
  int n = 0;
  assert_int_equal(pt_cuda_device_count(&n, NULL, 0), PT_OK);
  char ids[8][32];
  const char *idp[8];
  if (n > 8) n = 8;
  for (int i = 0; i < n; i++) {
    assert_int_equal(pt_cuda_device_pci_bus_id(i, ids[i], sizeof ids[i]), PT_OK);
    idp[i] = ids[i];
  }
  pt_nvml *nv = NULL;
  char why[512] = "";
  assert_int_equal(pt_nvml_open(&nv, idp, n, 0.01, why, sizeof why), PT_OK);
  if (!nv) print_error("%s\n", why);
  assert_non_null(nv);
  /* One reading comes before open returns, more from the thread. */
  pt_gpu_stats st;
  assert_int_equal(pt_nvml_read(nv, 0, &st), PT_OK);
  assert_true(st.samples >= 1);
  struct timespec t = {0, 300000000};
  nanosleep(&t, NULL);
  for (int i = 0; i < n; i++) {
    assert_int_equal(pt_nvml_read(nv, i, &st), PT_OK);
    print_message("cuda:%d (%s): %ld readings, utilisation %.0f%% (mean %.1f%%), memory %llu of %llu bytes, peak %llu\n",
                  i, ids[i], st.samples, st.util_pct, st.util_mean_pct, (unsigned long long)st.mem_used,
                  (unsigned long long)st.mem_total, (unsigned long long)st.mem_peak);
    assert_true(st.samples >= 2);
    assert_true(st.mem_total > 0 && st.mem_used <= st.mem_total && st.mem_peak >= st.mem_used);
    pt_cuda_device d;
    assert_int_equal(pt_cuda_device_info(i, &d), PT_OK);
    /* NVML and CUDA agree on the GPU: the same memory size, to NVML's
     * reserved part. */
    assert_true(st.mem_total >= d.total_memory / 2 && st.mem_total <= d.total_memory * 2);
  }
  assert_int_equal(pt_nvml_read(nv, n, &st), PT_ERR_ARG);
  const long before = st.samples;
  pt_nvml_reset(nv);
  assert_int_equal(pt_nvml_read(nv, n - 1, &st), PT_OK);
  assert_true(st.samples < before);
  pt_nvml_close(nv);
}

int main(void) {
  const struct CMUnitTest anywhere[] = {
      cmocka_unit_test(test_stats_start_empty),
      cmocka_unit_test(test_stats_mean_and_peak),
      cmocka_unit_test(test_stats_long_run),
      cmocka_unit_test(test_stats_partial_and_failed),
      cmocka_unit_test(test_open_arguments),
      cmocka_unit_test(test_unusable_library),
  };
  int failed = cmocka_run_group_tests_name("nvml (no GPU needed)", anywhere, NULL, NULL);
  if (failed) return failed;
  char why[512] = "";
  if (!nvml_loadable(why, sizeof why)) {
    const struct CMUnitTest none[] = {cmocka_unit_test(test_no_driver)};
    failed = cmocka_run_group_tests_name("nvml (no driver)", none, NULL, NULL);
    if (failed) return failed;
    printf("SKIPPED: sampling real GPUs: %s\n", why);
    return 77;
  }
  int n = 0;
  char none_why[256] = "";
  if (pt_cuda_device_count(&n, none_why, sizeof none_why) != PT_OK) return 1;
  if (n == 0) {
    printf("SKIPPED: NVML loads, but no CUDA device to sample: %s\n", none_why);
    return 77;
  }
  const struct CMUnitTest gpu[] = {cmocka_unit_test(test_sample_gpus)};
  return cmocka_run_group_tests_name("nvml sampling", gpu, NULL, NULL);
}
