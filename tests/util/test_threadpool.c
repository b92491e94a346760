/* The fork-join pool: every index of a range is handled exactly once by
 * exactly the thread pt_split assigns it to, over many back-to-back jobs
 * (the hand-off between jobs is where a pool goes wrong); a caller that
 * waits past its spin and sleeps is woken when the workers finish, with
 * their writes visible; and pools start and stop cleanly many times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "util/threadpool.h"

typedef struct {
  size_t total;
  int *owner; /* (total) which thread handled each index, -1 if none */
  int *hits;  /* (total) how many times */
} job_t;

static void mark(void *arg, int tid, int n) {
  job_t *j = arg;
  size_t lo, hi;
  pt_split(j->total, tid, n, &lo, &hi);
  for (size_t i = lo; i < hi; i++) {
    j->owner[i] = tid;
    j->hits[i]++;
  }
}

static void test_split_covers_range(void **s) {
  (void)s;
  for (size_t total = 0; total < 50; total++)
    for (int n = 1; n <= 7; n++) {
      size_t expect = 0;
      for (int t = 0; t < n; t++) {
        size_t lo, hi;
        pt_split(total, t, n, &lo, &hi);
        assert_int_equal(lo, expect);
        assert_true(hi >= lo && hi - lo <= total / n + 1);
        expect = hi;
      }
      assert_int_equal(expect, total);
    }
}

static void test_every_index_once(void **s) {
  (void)s;
  for (int n = 1; n <= 4; n++) {
    pt_pool *p;
    assert_int_equal(pt_pool_create(&p, n), PT_OK);
    assert_int_equal(pt_pool_threads(p), n);
    for (int rep = 0; rep < 2000; rep++) {
      size_t total = (size_t)(rep % 37);
      job_t j = {total, calloc(total + 1, sizeof(int)), calloc(total + 1, sizeof(int))};
      pt_pool_run(p, mark, &j);
      for (size_t i = 0; i < total; i++) {
        size_t lo, hi;
        int want = -1;
        for (int t = 0; t < n; t++) {
          pt_split(total, t, n, &lo, &hi);
          if (i >= lo && i < hi) want = t;
        }
        assert_int_equal(j.hits[i], 1);
        assert_int_equal(j.owner[i], want);
      }
      free(j.owner);
      free(j.hits);
    }
    pt_pool_destroy(p);
  }
}

/* Workers outlast the caller's spin (0.2 ms) by sleeping 0.3 ms and more,
 * some jobs by a little and some by a lot, so that the caller goes to
 * sleep and the last worker's finish meets it both just before and long
 * after. A lost wake-up hangs here. */
static void slow_workers(void *arg, int tid, int n) {
  int *done = arg;
  if (tid > 0) {
    const struct timespec ts = {0, (long)(300000 + 400000 * (done[n] % 3) * tid)}; /* 0.3 to 2.7 ms */
    nanosleep(&ts, NULL);
  }
  done[tid] = done[n] + 1;
}

static void test_caller_sleeps_and_wakes(void **s) {
  (void)s;
  for (int n = 2; n <= 4; n++) {
    pt_pool *p;
    assert_int_equal(pt_pool_create(&p, n), PT_OK);
    int done[5] = {0};
    for (int rep = 0; rep < 60; rep++) {
      done[n] = rep; /* the job's number, read by every thread */
      pt_pool_run(p, slow_workers, done);
      for (int t = 0; t < n; t++) assert_int_equal(done[t], rep + 1);
    }
    pt_pool_destroy(p);
  }
}

static void test_create_destroy_cycles(void **s) {
  (void)s;
  for (int i = 0; i < 200; i++) {
    pt_pool *p;
    assert_int_equal(pt_pool_create(&p, 1 + i % 4), PT_OK);
    pt_pool_destroy(p);
  }
  pt_pool *p;
  assert_int_equal(pt_pool_create(&p, 0), PT_ERR_ARG);
  assert_null(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_covers_range),
      cmocka_unit_test(test_every_index_once),
      cmocka_unit_test(test_caller_sleeps_and_wakes),
      cmocka_unit_test(test_create_destroy_cycles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
