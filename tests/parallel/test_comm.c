/* The communicators and the gradient buckets. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "comm/comm.h"
#include "nn/presets.h"
#include "ops/backend.h"
#include "train/grad_sync.h"
#include "util/timer.h"

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

/* Point-to-point messages and split. Each worker runs its own routine on
 * its communicator and records what it saw. */
typedef struct p2p_job p2p_job;
struct p2p_job {
  pt_comm *c;
  void (*run)(p2p_job *j);
  pt_status st[4];
  char msg[4][512];
  char got[3][32];
  double value;
  double seconds;
};

static void note(p2p_job *j, int k, pt_status st) {
  j->st[k] = st;
  if (st != PT_OK) snprintf(j->msg[k], sizeof j->msg[k], "%s", pt_error_message());
}

static void *p2p_main(void *arg) {
  p2p_job *j = arg;
  j->run(j);
  return NULL;
}

static void run_p2p(p2p_job *jobs, int n, double timeout) {
  pt_comm_local_group *g;
  assert_int_equal(pt_comm_local_group_create(&g, n, timeout), PT_OK);
  pthread_t t[8];
  for (int r = 0; r < n; r++) {
    jobs[r].c = pt_comm_local_get(g, r);
    pthread_create(&t[r], NULL, p2p_main, &jobs[r]);
  }
  for (int r = 0; r < n; r++) pthread_join(t[r], NULL);
  pt_comm_local_group_destroy(g);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void send_three(p2p_job *j) {
  /* Distinct buffers that stay put until wait_sends, as isend requires. */
  static const char a[32] = "first five", b[32] = "six", c[32] = "second five";
  note(j, 0, pt_comm_isend(j->c, a, sizeof a, 1, 5));
  if (j->st[0] == PT_OK) note(j, 0, pt_comm_isend(j->c, b, sizeof b, 1, 6));
  if (j->st[0] == PT_OK) note(j, 0, pt_comm_isend(j->c, c, sizeof c, 1, 5));
  note(j, 1, pt_comm_wait_sends(j->c));
}
static void receive_three(p2p_job *j) {
  sleep_ms(20); /* the sends are all queued by now: a tag 5 is ahead of the 6 */
  note(j, 0, pt_comm_recv(j->c, j->got[0], sizeof j->got[0], 0, 6));
  note(j, 1, pt_comm_recv(j->c, j->got[1], sizeof j->got[1], 0, 5));
  note(j, 2, pt_comm_recv(j->c, j->got[2], sizeof j->got[2], 0, 5));
}

static void test_threads_messages(void **state) {
  (void)state;
  p2p_job jobs[2] = {{.run = send_three}, {.run = receive_three}};
  run_p2p(jobs, 2, 10.0);
  assert_int_equal(jobs[0].st[0], PT_OK);
  assert_int_equal(jobs[0].st[1], PT_OK);
  for (int k = 0; k < 3; k++) assert_int_equal(jobs[1].st[k], PT_OK);
  assert_string_equal(jobs[1].got[0], "six");
  assert_string_equal(jobs[1].got[1], "first five");
  assert_string_equal(jobs[1].got[2], "second five");
}

static void send_eight(p2p_job *j) {
  static const double x = 1.0;
  note(j, 0, pt_comm_isend(j->c, &x, sizeof x, 1, 3));
  note(j, 1, pt_comm_wait_sends(j->c));
}
static void receive_sixteen(p2p_job *j) { note(j, 0, pt_comm_recv(j->c, j->got[0], 16, 0, 3)); }

static void test_threads_message_size_mismatch(void **state) {
  (void)state;
  p2p_job jobs[2] = {{.run = send_eight}, {.run = receive_sixteen}};
  run_p2p(jobs, 2, 10.0);
  assert_int_equal(jobs[1].st[0], PT_ERR_STATE);
  assert_non_null(strstr(jobs[1].msg[0], "has 8 bytes, but 16 were expected"));
  /* The wrong message was consumed, so its sender is not left waiting. */
  assert_int_equal(jobs[0].st[0], PT_OK);
  assert_int_equal(jobs[0].st[1], PT_OK);
}

/* Nobody sends and nobody receives: both sides give up after the timeout
 * and say what they were waiting for. */
static void test_threads_message_timeout(void **state) {
  (void)state;
  pt_comm_local_group *g;
  assert_int_equal(pt_comm_local_group_create(&g, 2, 0.2), PT_OK);
  pt_comm *c0 = pt_comm_local_get(g, 0), *c1 = pt_comm_local_get(g, 1);
  c1->what = "the activations of stage 0";
  c1->step = 42;
  char buf[8];
  double t0 = pt_now();
  assert_int_equal(pt_comm_recv(c1, buf, sizeof buf, 0, 9), PT_ERR_COMM);
  double waited = pt_now() - t0;
  assert_true(waited >= 0.19 && waited < 5.0);
  assert_non_null(strstr(pt_error_message(), "no message from worker 0"));
  assert_non_null(strstr(pt_error_message(), "the activations of stage 0 at step 42"));

  c0->what = "the gradients";
  c0->step = 7;
  static const char x[4] = "abc";
  assert_int_equal(pt_comm_isend(c0, x, sizeof x, 1, 2), PT_OK);
  assert_int_equal(pt_comm_wait_sends(c0), PT_ERR_COMM);
  assert_non_null(strstr(pt_error_message(), "worker 1 did not receive the message (tag 2) for the gradients at step 7"));
  /* A failed wait_sends withdrew the message: the buffer is free again. */
  assert_int_equal(pt_comm_recv(c1, buf, sizeof x, 0, 2), PT_ERR_COMM);
  assert_int_equal(pt_comm_wait_sends(c0), PT_OK);
  pt_comm_local_group_destroy(g);
}

static void abort_later(p2p_job *j) {
  sleep_ms(100);
  pt_comm_abort(j->c, "the loader died");
}
static void receive_forever(p2p_job *j) {
  double t0 = pt_now();
  note(j, 0, pt_comm_recv(j->c, j->got[0], 4, 2, 1));
  j->seconds = pt_now() - t0;
}
static void send_unreceived(p2p_job *j) {
  static const char x[4] = "abc";
  double t0 = pt_now();
  note(j, 0, pt_comm_isend(j->c, x, sizeof x, 0, 1));
  if (j->st[0] == PT_OK) note(j, 0, pt_comm_wait_sends(j->c));
  j->seconds = pt_now() - t0;
}

static void test_threads_abort_wakes_messages(void **state) {
  (void)state;
  p2p_job jobs[3] = {{.run = abort_later}, {.run = receive_forever}, {.run = send_unreceived}};
  run_p2p(jobs, 3, 30.0); /* must end long before the timeout */
  for (int r = 1; r < 3; r++) {
    assert_int_equal(jobs[r].st[0], PT_ERR_COMM);
    assert_non_null(strstr(jobs[r].msg[0], "worker 0 failed: the loader died"));
    assert_true(jobs[r].seconds < 10.0);
  }
}

/* Five workers: even ranks, odd ranks (ordered by descending key), and
 * worker 4 in neither. */
static void split_and_reduce(p2p_job *j) {
  const int r = j->c->rank;
  const int color = r == 4 ? -1 : r % 2;
  pt_comm *sub = NULL;
  note(j, 0, pt_comm_split(j->c, color, color ? -r : 0, &sub));
  if (j->st[0] != PT_OK) return;
  if (color < 0) {
    j->value = sub ? -2 : -1;
    return;
  }
  snprintf(j->got[0], sizeof j->got[0], "%d of %d, %d of %d", sub->rank, sub->size, sub->local_rank,
           sub->local_size);
  double v = r + 1;
  note(j, 1, pt_comm_allreduce_f64(sub, &v, 1));
  j->value = v;
  /* A message around the ring of the sub-communicator, addressed by its ranks. */
  int token = r, got = -1;
  note(j, 2, pt_comm_isend(sub, &token, sizeof token, (sub->rank + 1) % sub->size, 0));
  if (j->st[2] == PT_OK) note(j, 2, pt_comm_recv(sub, &got, sizeof got, (sub->rank + 1) % sub->size, 0));
  if (j->st[2] == PT_OK) note(j, 2, pt_comm_wait_sends(sub));
  snprintf(j->got[1], sizeof j->got[1], "%d", got);
  if (sub->timeout_s != j->c->timeout_s) j->value = -3;
  pt_comm_destroy(sub);
}

static void test_threads_split(void **state) {
  (void)state;
  p2p_job jobs[5];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < 5; r++) jobs[r].run = split_and_reduce;
  run_p2p(jobs, 5, 10.0);
  for (int r = 0; r < 5; r++) assert_int_equal(jobs[r].st[0], PT_OK);
  assert_true(jobs[4].value == -1); /* no communicator */
  /* Even: old order (equal keys). Odd: key -r puts 3 first. */
  assert_string_equal(jobs[0].got[0], "0 of 2, 0 of 2");
  assert_string_equal(jobs[2].got[0], "1 of 2, 1 of 2");
  assert_string_equal(jobs[3].got[0], "0 of 2, 0 of 2");
  assert_string_equal(jobs[1].got[0], "1 of 2, 1 of 2");
  for (int r = 0; r < 4; r++) {
    assert_int_equal(jobs[r].st[1], PT_OK);
    assert_int_equal(jobs[r].st[2], PT_OK);
    assert_true(jobs[r].value == (r % 2 ? 2.0 + 4.0 : 1.0 + 3.0));
  }
  /* Each pair swapped tokens. */
  assert_string_equal(jobs[0].got[1], "2");
  assert_string_equal(jobs[2].got[1], "0");
  assert_string_equal(jobs[1].got[1], "3");
  assert_string_equal(jobs[3].got[1], "1");
}

/* An abort on one split communicator reaches a worker waiting in another. */
static void split_then_fail(p2p_job *j) {
  const int r = j->c->rank;
  pt_comm *sub = NULL;
  note(j, 0, pt_comm_split(j->c, r, 0, &sub));
  if (j->st[0] != PT_OK) return;
  if (r == 0) {
    sleep_ms(100);
    pt_comm_abort(sub, "out of memory in stage 0");
  } else {
    double t0 = pt_now();
    pt_comm *other = NULL;
    note(j, 1, pt_comm_split(sub, 0, 0, &other)); /* a group of one, split again */
    if (j->st[1] == PT_OK) note(j, 2, pt_comm_recv(other, j->got[0], 4, 0, 0));
    j->seconds = pt_now() - t0;
    pt_comm_destroy(other);
  }
  pt_comm_destroy(sub);
}

static void test_threads_split_shares_failure(void **state) {
  (void)state;
  p2p_job jobs[2] = {{.run = split_then_fail}, {.run = split_then_fail}};
  run_p2p(jobs, 2, 30.0);
  assert_int_equal(jobs[1].st[1], PT_OK);
  assert_int_equal(jobs[1].st[2], PT_ERR_COMM);
  assert_non_null(strstr(jobs[1].msg[2], "worker 0 failed: out of memory in stage 0"));
  assert_true(jobs[1].seconds < 10.0);
}

static void test_self_messages_and_split(void **state) {
  (void)state;
  pt_comm *c, *sub;
  assert_int_equal(pt_comm_self_create(&c), PT_OK);
  c->timeout_s = 12.5;
  char x[4] = "abc";
  assert_int_equal(pt_comm_isend(c, x, sizeof x, 0, 1), PT_ERR_STATE);
  assert_non_null(strstr(pt_error_message(), "no peer"));
  assert_int_equal(pt_comm_recv(c, x, sizeof x, 0, 1), PT_ERR_STATE);
  assert_int_equal(pt_comm_isend(c, x, sizeof x, 1, 1), PT_ERR_ARG);
  assert_int_equal(pt_comm_isend(c, x, sizeof x, 0, PT_COMM_TAG_LIMIT), PT_ERR_ARG);
  assert_int_equal(pt_comm_wait_sends(c), PT_OK);
  assert_int_equal(pt_comm_split(c, 3, 0, &sub), PT_OK);
  assert_non_null(sub);
  assert_int_equal(sub->size, 1);
  assert_true(sub->timeout_s == 12.5);
  pt_comm_destroy(sub);
  assert_int_equal(pt_comm_split(c, -1, 0, &sub), PT_OK);
  assert_null(sub);
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

/* Host staging (device memory over a host communicator) with the CPU
 * backend standing in for a GPU's memory: collectives, and messages whose
 * bytes are taken when sent, so the sender may write over its buffer at
 * once; the host copies are reused batch after batch. */
typedef struct {
  pt_comm *host, *c;
  pt_status st[8];
  char msg[512];
  float got[3][64];
  float sum[4];
} staged_job;

static void *staged_main(void *arg) {
  staged_job *j = arg;
  const pt_backend *be = pt_backend_cpu();
  pt_status *st = j->st;
  st[0] = pt_comm_staging_create(&j->c, j->host, be, 64);
  if (st[0] != PT_OK) return NULL;
  const int r = j->c->rank;
  for (int k = 0; k < 4; k++) j->sum[k] = (float)(r + 1) * (float)(k + 1);
  st[1] = pt_comm_allreduce_f32(j->c, j->sum, 4);
  for (int round = 0; round < 2; round++) {
    const int n = round ? 64 : 16; /* the second round's messages are longer: the host copies grow */
    if (r == 0) {
      float buf[64];
      for (int m = 0; m < 3 && st[2] == PT_OK; m++) {
        for (int i = 0; i < n; i++) buf[i] = (float)(100 * round + 10 * m + i);
        st[2] = pt_comm_isend(j->c, buf, sizeof(float) * (size_t)n, 1, 7 + m);
        memset(buf, 0xff, sizeof buf); /* written over before the receiver has it */
      }
      if (st[2] == PT_OK) st[3] = pt_comm_wait_sends(j->c);
    } else {
      for (int m = 2; m >= 0 && st[2] == PT_OK; m--) /* tags in another order */
        st[2] = pt_comm_recv(j->c, j->got[m], sizeof(float) * (size_t)n, 0, 7 + m);
      for (int m = 0; m < 3 && round == 0; m++)
        for (int i = 0; i < n; i++)
          if (j->got[m][i] != (float)(10 * m + i)) st[4] = PT_ERR_STATE;
    }
  }
  /* A message of the wrong size fails the receive, naming both sizes. */
  if (r == 0) {
    float one = 1.0f;
    st[5] = pt_comm_isend(j->c, &one, sizeof one, 1, 20);
    if (st[5] == PT_OK) st[5] = pt_comm_wait_sends(j->c);
  } else {
    float two[2];
    st[5] = pt_comm_recv(j->c, two, sizeof two, 0, 20);
    if (st[5] != PT_OK) snprintf(j->msg, sizeof j->msg, "%s", pt_error_message());
  }
  pt_comm_destroy(j->c);
  return NULL;
}

static void test_staging(void **state) {
  (void)state;
  pt_comm_local_group *g;
  assert_int_equal(pt_comm_local_group_create(&g, 2, 10.0), PT_OK);
  staged_job jobs[2];
  memset(jobs, 0, sizeof jobs);
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    jobs[r].host = pt_comm_local_get(g, r);
    pthread_create(&t[r], NULL, staged_main, &jobs[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  pt_comm_local_group_destroy(g);
  for (int r = 0; r < 2; r++) {
    for (int k = 0; k < 4; k++) assert_int_equal(jobs[r].st[k], PT_OK);
    for (int k = 0; k < 4; k++) assert_true(jobs[r].sum[k] == 3.0f * (float)(k + 1));
  }
  assert_int_equal(jobs[1].st[4], PT_OK); /* round 0's bytes as sent */
  for (int m = 0; m < 3; m++)             /* round 1's, longer, through the grown copies */
    for (int i = 0; i < 64; i++) assert_true(jobs[1].got[m][i] == (float)(100 + 10 * m + i));
  assert_int_equal(jobs[1].st[5], PT_ERR_STATE);
  assert_non_null(strstr(jobs[1].msg, "has 4 bytes, but 8 were expected"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_collectives),
      cmocka_unit_test(test_threads_failure_reaches_everyone),
      cmocka_unit_test(test_threads_timeout),
      cmocka_unit_test(test_poll_wait_gives_up),
      cmocka_unit_test(test_threads_messages),
      cmocka_unit_test(test_threads_message_size_mismatch),
      cmocka_unit_test(test_threads_message_timeout),
      cmocka_unit_test(test_threads_abort_wakes_messages),
      cmocka_unit_test(test_threads_split),
      cmocka_unit_test(test_threads_split_shares_failure),
      cmocka_unit_test(test_self_messages_and_split),
      cmocka_unit_test(test_buckets),
      cmocka_unit_test(test_staging),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
