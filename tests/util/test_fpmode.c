/* Denormal flushing: the mode a thread sets is the one its pool's threads
 * compute with, before and after the pool starts; setting it back to
 * keeping denormals brings them back everywhere; and another thread's mode
 * reaches neither this thread nor its pool. */
#include <float.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/fpmode.h"
#include "util/threadpool.h"

#define THREADS 3
/* the CPUs whose flush mode fpmode.c sets (MXCSR, FPCR) */
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
#define HAS_FLUSH 1
#else
#define HAS_FLUSH 0
#endif

typedef struct {
  volatile float tiny;      /* a normal float that halves into a denormal */
  int denormal[THREADS];    /* per thread: the product stayed denormal */
  int flushing[THREADS];    /* per thread: MXCSR or FPCR says flush */
} probe_t;

static void probe(void *arg, int tid, int n) {
  (void)n;
  probe_t *p = arg;
  const volatile float half = p->tiny * 0.5f;
  p->denormal[tid] = half != 0.0f;
  p->flushing[tid] = pt_fp_flushing();
}

#if HAS_FLUSH
static void expect_mode(pt_pool *pool, int flush) {
  probe_t p = {.tiny = FLT_MIN};
  pt_pool_run(pool, probe, &p);
  for (int t = 0; t < THREADS; t++) {
    assert_int_equal(p.flushing[t], flush);
    assert_int_equal(p.denormal[t], !flush);
  }
}
#endif

static void test_pool_threads_follow(void **s) {
  (void)s;
#if HAS_FLUSH
  pt_fp_set_flush(0);
  pt_pool *pool;
  assert_int_equal(pt_pool_create(&pool, THREADS), PT_OK);
  expect_mode(pool, 0);
  pt_fp_set_flush(1); /* the workers already run: they take it up at their next job */
  expect_mode(pool, 1);
  pt_pool_destroy(pool);
  /* workers started while flushing inherit the creator's mode; keeping
   * must still reach them */
  assert_int_equal(pt_pool_create(&pool, THREADS), PT_OK);
  expect_mode(pool, 1);
  pt_fp_set_flush(0);
  expect_mode(pool, 0);
  pt_pool_destroy(pool);
#else
  skip();
#endif
}

#if HAS_FLUSH
static void *set_flush_1(void *unused) {
  (void)unused;
  pt_fp_set_flush(1);
  return NULL;
}
#endif

/* A pt_evaluate in another thread (which flushes) once switched a training
 * run that kept denormals to flushing, pool and all. */
static void test_other_threads_mode_stays_there(void **s) {
  (void)s;
#if HAS_FLUSH
  pt_fp_set_flush(0);
  pt_pool *pool;
  assert_int_equal(pt_pool_create(&pool, THREADS), PT_OK);
  expect_mode(pool, 0);
  pthread_t other;
  assert_int_equal(pthread_create(&other, NULL, set_flush_1, NULL), 0);
  assert_int_equal(pthread_join(other, NULL), 0);
  assert_false(pt_fp_flushing());
  expect_mode(pool, 0);
  pt_pool_destroy(pool);
#else
  skip();
#endif
}

static void test_caller_thread(void **s) {
  (void)s;
#if HAS_FLUSH
  volatile float tiny = FLT_MIN;
  pt_fp_set_flush(1);
  assert_true(pt_fp_flushing());
  assert_true(tiny * 0.5f == 0.0f);
  pt_fp_set_flush(0);
  assert_false(pt_fp_flushing());
  assert_true(tiny * 0.5f == FLT_MIN / 2);
#else
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_caller_thread),
      cmocka_unit_test(test_pool_threads_follow),
      cmocka_unit_test(test_other_threads_mode_stays_there),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
