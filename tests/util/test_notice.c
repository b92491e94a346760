/* Warnings held for the trainer to print: each once, in the order raised,
 * at most PT_NOTICE_MAX with a count of the rest, kept while there is
 * nowhere to print them, and taken from several threads at once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/notice.h"

/* Flushes into a string (the caller frees it). */
static char *flushed(int *count) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  assert_non_null(f);
  *count = pt_notice_flush(f);
  fclose(f);
  return buf;
}

static void test_once_in_order(void **state) {
  (void)state;
  int n;
  free(flushed(&n)); /* nothing left from another test */
  assert_false(pt_notice_pending());
  pt_notice("conv %d -> %d on the gemm path", 3, 48);
  assert_true(pt_notice_pending());
  pt_notice("peer copies through the driver");
  pt_notice("conv %d -> %d on the gemm path", 3, 48); /* again: held once */
  char *out = flushed(&n);
  assert_int_equal(n, 2);
  assert_string_equal(out, "warning: conv 3 -> 48 on the gemm path\nwarning: peer copies through the driver\n");
  free(out);
  assert_false(pt_notice_pending());
  out = flushed(&n);
  assert_int_equal(n, 0);
  assert_string_equal(out, "");
  free(out);
}

static void test_kept_without_output(void **state) {
  (void)state;
  int n;
  free(flushed(&n));
  pt_notice("held");
  assert_int_equal(pt_notice_flush(NULL), 0);
  assert_true(pt_notice_pending());
  char *out = flushed(&n);
  assert_int_equal(n, 1);
  assert_string_equal(out, "warning: held\n");
  free(out);
}

static void test_cap(void **state) {
  (void)state;
  int n;
  free(flushed(&n));
  for (int i = 0; i < PT_NOTICE_MAX + 3; i++) pt_notice("line %d", i);
  char *out = flushed(&n);
  assert_int_equal(n, PT_NOTICE_MAX);
  char last[64];
  snprintf(last, sizeof last, "warning: line %d\n", PT_NOTICE_MAX - 1);
  assert_non_null(strstr(out, last));
  assert_non_null(strstr(out, "warning: 3 more warnings not shown\n"));
  snprintf(last, sizeof last, "line %d\n", PT_NOTICE_MAX);
  assert_null(strstr(out, last));
  free(out);
  /* The count starts again after a flush. */
  pt_notice("after");
  out = flushed(&n);
  assert_string_equal(out, "warning: after\n");
  free(out);
}

enum { THREADS = 4, EACH = 200 };

static void *raise_many(void *arg) {
  const int t = (int)(intptr_t)arg;
  for (int i = 0; i < EACH; i++) pt_notice("thread %d", t); /* one line per thread */
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  int n;
  free(flushed(&n));
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, raise_many, (void *)(intptr_t)t), 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  char *out = flushed(&n);
  assert_int_equal(n, THREADS);
  for (int t = 0; t < THREADS; t++) {
    char want[32];
    snprintf(want, sizeof want, "warning: thread %d\n", t);
    assert_non_null(strstr(out, want));
  }
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_once_in_order),
      cmocka_unit_test(test_kept_without_output),
      cmocka_unit_test(test_cap),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
