/* The communicators and the gradient buckets. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "comm/comm.h"
#include "nn/presets.h"
#include "train/grad_sync.h"

#define W 3
#define N 1000

typedef struct {
  pt_comm *c;
  float f[N];
  double d[2];
  char bytes[16];
  pt_status st[4];
  int skip_second; /* rank that stops early: tests failure and timeout */
  int abort_instead;
  double second_timeout; /* > 0: the second allreduce waits only this long */
  char msg[512];
} rank_job;

static float value(int rank, int i) { return 0.1f * (float)(rank + 1) + 1e-3f * (float)i; }

static void *rank_main(void *arg) {
  rank_job *j = arg;
  const int r = j->c->rank;
  for (int i = 0; i < N; i++) j->f[i] = value(r, i);
  j->d[0] = r;
  j->d[1] = 1.0;
  snprintf(j->bytes, sizeof j->bytes, "from rank %d", r);
  j->st[0] = pt_comm_allreduce_f32(j->c, j->f, N);
  j->st[1] = pt_comm_iallreduce_f64(j->c, j->d, 2);
  if (j->st[1] == PT_OK) j->st[1] = pt_comm_wait_all(j->c);
  j->st[2] = pt_comm_bcast(j->c, j->bytes, sizeof j->bytes, 1);
  if (j->abort_instead) {
    pt_comm_abort(j->c, "the disk is full");
    return NULL;
  }
  if (j->skip_second) return NULL;
  j->c->what = "the second allreduce";
  if (j->second_timeout > 0) j->c->timeout_s = j->second_timeout;
  j->st[3] = pt_comm_allreduce_f32(j->c, j->f, N);
  if (j->st[3] != PT_OK) snprintf(j->msg, sizeof j->msg, "%s", pt_error_message());
  return NULL;
}

static void run_group(rank_job *jobs, double timeout) {
  pt_comm_local_group *g;
  assert_int_equal(pt_comm_local_group_create(&g, W, timeout), PT_OK);
  pthread_t t[W];
  for (int r = 0; r < W; r++) {
    jobs[r].c = pt_comm_local_get(g, r);
    assert_int_equal(jobs[r].c->rank, r);
    assert_int_equal(jobs[r].c->size, W);
    pthread_create(&t[r], NULL, rank_main, &jobs[r]);
  }
  for (int r = 0; r < W; r++) pthread_join(t[r], NULL);
  pt_comm_local_group_destroy(g);
}

static void test_threads_collectives(void **state) {
  (void)state;
  rank_job jobs[W];
  memset(jobs, 0, sizeof jobs);
  run_group(jobs, 10.0);
  for (int r = 0; r < W; r++) {
    for (int k = 0; k < 4; k++) assert_int_equal(jobs[r].st[k], PT_OK);
    /* The sum in rank order, bit for bit, on every rank; twice reduced. */
    for (int i = 0; i < N; i++) {
      float once = (value(0, i) + value(1, i)) + value(2, i);
      float twice = (once + once) + once;
      assert_true(jobs[r].f[i] == twice);
    }
    assert_true(jobs[r].d[0] == 3.0 && jobs[r].d[1] == 3.0);
    assert_string_equal(jobs[r].bytes, "from rank 1");
  }
}

static void test_threads_failure_reaches_everyone(void **state) {
  (void)state;
  rank_job jobs[W];
  memset(jobs, 0, sizeof jobs);
  jobs[2].abort_instead = 1;
  run_group(jobs, 30.0); /* must end long before the timeout */
  for (int r = 0; r < 2; r++) {
    assert_int_equal(jobs[r].st[3], PT_ERR_COMM);
    assert_non_null(strstr(jobs[r].msg, "worker 2 failed: the disk is full"));
  }
}

static void test_threads_timeout(void **state) {
  (void)state;
  rank_job jobs[W];
  memset(jobs, 0, sizeof jobs);
  jobs[1].skip_second = 1; /* rank 1 never arrives, and says nothing */
  jobs[0].second_timeout = jobs[2].second_timeout = 0.3;
  run_group(jobs, 30.0);
  for (int r = 0; r < W; r += 2) {
    assert_int_equal(jobs[r].st[3], PT_ERR_COMM);
    assert_non_null(strstr(jobs[r].msg, "did not reach the second allreduce"));
  }
}

static int never(void *ctx) {
  (void)ctx;
  return 0;
}

static void test_poll_wait_gives_up(void **state) {
  (void)state;
  pt_comm *c;
  assert_int_equal(pt_comm_self_create(&c), PT_OK);
  c->timeout_s = 0.05;
  c->what = "a test wait";
  c->step = 7;
  assert_int_equal(pt_comm_poll_wait(c, never, NULL), PT_ERR_COMM);
  assert_non_null(strstr(pt_error_message(), "in a test wait at step 7"));
  float x = 2.0f;
  assert_int_equal(pt_comm_allreduce_f32(c, &x, 1), PT_OK); /* a world of one: unchanged */
  assert_true(x == 2.0f);
  pt_comm_destroy(c);
}

/* Buckets tile the gradient array from its end, end at layer boundaries,
 * and the first is small so that communication starts early. */
static void test_buckets(void **state) {
  (void)state;
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec("mnist-cnn", &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  pt_comm *c;
  assert_int_equal(pt_comm_self_create(&c), PT_OK);
  const double sizes[] = {25.0, 0.001, 1.0};
  for (int s = 0; s < 3; s++) {
    pt_grad_sync gs;
    assert_int_equal(pt_grad_sync_init(&gs, m, c, sizes[s]), PT_OK);
    assert_true(gs.nbuckets >= 1);
    size_t hi = m->nparam_total;
    for (int b = 0; b < gs.nbuckets; b++) {
      assert_int_equal(gs.buckets[b].hi, hi);
      assert_true(gs.buckets[b].lo < hi);
      hi = gs.buckets[b].lo;
      const pt_layer *L = &m->layers[gs.buckets[b].low_layer];
      assert_true(L->w >= 0);
      assert_int_equal(m->params[L->w].offset, gs.buckets[b].lo);
      assert_int_equal(gs.bucket_of[gs.buckets[b].low_layer], b);
    }
    assert_int_equal(hi, 0);
    if (s == 1) assert_int_equal(gs.nbuckets, 4); /* one per layer with weights */
    if (s == 0) assert_int_equal(gs.nbuckets, 2); /* fc2 (under 1 MB) and fc1 closes the first at 1 MB */
  }
  assert_null(m->grad_ready); /* a world of one needs no hook */
  pt_comm_destroy(c);
  pt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_collectives),
      cmocka_unit_test(test_threads_failure_reaches_everyone),
      cmocka_unit_test(test_threads_timeout),
      cmocka_unit_test(test_poll_wait_gives_up),
      cmocka_unit_test(test_buckets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
