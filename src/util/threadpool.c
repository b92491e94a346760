/* Fork-join pool: a generation counter announces each job; workers spin on
 * it briefly (a training step issues dozens of short jobs back to back, and
 * a futex wake costs more than many of them) and then sleep on a condition
 * variable, so an idle pool costs no CPU. The spin is bounded in time, not
 * iterations: the serial stretches between jobs (a loss, a small layer)
 * run to 0.1 ms, and a spin of 20,000 loads (about 20 us) let the workers
 * fall asleep in them, so that the next job paid a wake-up of about 50 us
 * (fmnist-mlp's log-softmax backward took 4x longer at 2 threads than at
 * 1).
 *
 * Every spin yields the core now and then, and the caller's wait for the
 * workers ends in a sleep too. On a machine with more runnable threads
 * than cores (a shared node, another job), a spinner that never yields
 * holds its core for a whole time slice while the thread it waits for
 * cannot run: fmnist-mlp trained 6x slower at 2 threads than at 1 with
 * one core taken by another process. */
#include "util/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/fpmode.h"
#include "util/timer.h"

#define SPIN_SECONDS 200e-6
#define SPIN_CHECK 1024 /* loads between looks at the clock */

struct pt_pool {
  int n;
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* a job was announced */
  pthread_cond_t done_cv; /* the last worker finished one, for a caller asleep */
  atomic_uint gen;      /* incremented per job */
  atomic_int pending;   /* workers still running the current job */
  atomic_int caller_asleep;
  atomic_int stop;
  pt_pool_fn fn;
  void *arg;
  int flush; /* the caller's denormal mode, which the job's workers take */
};

typedef struct {
  pt_pool *p;
  int tid;
} worker_arg;

/* Spins until done(p, ctx) or SPIN_SECONDS pass, yielding every SPIN_CHECK
 * loads; returns whether done. */
static int spin_until(pt_pool *p, int (*done)(pt_pool *, unsigned), unsigned ctx) {
  const double until = pt_now() + SPIN_SECONDS;
  for (int spins = 1; !done(p, ctx); spins++)
    if (spins % SPIN_CHECK == 0) {
      if (pt_now() > until) return 0;
      sched_yield();
    }
  return 1;
}

static int announced(pt_pool *p, unsigned seen) { return atomic_load_explicit(&p->gen, memory_order_acquire) != seen; }
static int finished(pt_pool *p, unsigned unused) {
  (void)unused;
  return atomic_load_explicit(&p->pending, memory_order_acquire) == 0;
}

static void *worker(void *a) {
  worker_arg *wa = a;
  pt_pool *p = wa->p;
  int tid = wa->tid;
  free(wa);
  unsigned seen = 0;
  for (;;) {
    unsigned g = seen;
    if (spin_until(p, announced, seen)) g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    pt_fp_follow(p->flush);
    p->fn(p->arg, tid, p->n);
    /* seq_cst against the caller's store of caller_asleep then load of
     * pending: one of the two sees the other's write. */
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_asleep)) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

pt_status pt_pool_create(pt_pool **out, int nthreads) {
  *out = NULL;
  if (nthreads < 1) return pt_fail(PT_ERR_ARG, "thread pool: %d threads, expected at least 1", nthreads);
  pt_pool *p = pt_calloc(1, sizeof *p);
  if (!p) return PT_ERR_NOMEM;
  p->n = nthreads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  p->threads = pt_calloc((size_t)nthreads, sizeof *p->threads);
  if (!p->threads) {
    free(p);
    return PT_ERR_NOMEM;
  }
  for (int t = 1; t < nthreads; t++) {
    worker_arg *wa = malloc(sizeof *wa);
    if (wa) *wa = (worker_arg){p, t}; /* before the thread can read it */
    if (!wa || pthread_create(&p->threads[t], NULL, worker, wa)) {
      free(wa);
      p->n = t; /* join the ones that started */
      pt_pool_destroy(p);
      return pt_fail(PT_ERR_STATE, "thread pool: cannot start thread %d of %d", t, nthreads);
    }
  }
  *out = p;
  return PT_OK;
}

void pt_pool_destroy(pt_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int t = 1; t < p->n; t++) pthread_join(p->threads[t], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  pthread_cond_destroy(&p->done_cv);
  free(p->threads);
  free(p);
}

int pt_pool_threads(const pt_pool *p) { return p ? p->n : 1; }

void pt_pool_run(pt_pool *p, pt_pool_fn fn, void *arg) {
  if (!p || p->n == 1) {
    fn(arg, 0, 1);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->flush = pt_fp_flushing();
  atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  fn(arg, 0, p->n);
  if (spin_until(p, finished, 0)) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->caller_asleep, 1);
  /* The store above and the load below are one half of a Dekker pair with
   * the last worker's decrement and load. C11's seq_cst orders them (stlr
   * then ldar on Arm), but qemu-user runs Arm's stlr and ldar on an x86
   * host as plain moves with barriers on their outer sides only, and x86
   * lets a store wait in its buffer past a later load: under emulation
   * both sides can then miss each other's write, and the caller sleeps with
   * no one left to wake it (cross_aarch64's test_threadpool was seen so, at
   * no CPU time: the caller on done_cv, both workers on cv). The worker's
   * side is a read-modify-write, a full barrier on such a host. A fence
   * costs nothing here: this is the path that goes to sleep. */
  atomic_thread_fence(memory_order_seq_cst);
  while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done_cv, &p->mu);
  atomic_store(&p->caller_asleep, 0);
  pthread_mutex_unlock(&p->mu);
}
