/* Fork-join pool: a generation counter announces each job; workers spin on
 * it briefly (a training step issues dozens of short jobs back to back, and
 * a futex wake costs more than many of them) and then sleep on a condition
 * variable, so an idle pool costs no CPU. The spin is bounded in time, not
 * iterations: the serial stretches between jobs (a loss, a small layer)
 * run to 0.1 ms, and a spin of 20,000 loads (about 20 us) let the workers
 * fall asleep in them, so that the next job paid a wake-up of about 50 us
 * (fmnist-mlp's log-softmax backward took 4x longer at 2 threads than at
 * 1). */
#include "util/threadpool.h"

#include <pthread.h>
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
  pthread_cond_t cv;
  atomic_uint gen;      /* incremented per job */
  atomic_int pending;   /* workers still running the current job */
  atomic_int stop;
  pt_pool_fn fn;
  void *arg;
};

typedef struct {
  pt_pool *p;
  int tid;
} worker_arg;

static void *worker(void *a) {
  worker_arg *wa = a;
  pt_pool *p = wa->p;
  int tid = wa->tid;
  free(wa);
  unsigned seen = 0;
  for (;;) {
    unsigned g;
    const double until = pt_now() + SPIN_SECONDS;
    for (int spins = 1; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen; spins++)
      if (spins % SPIN_CHECK == 0 && pt_now() > until) break;
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    pt_fp_follow();
    p->fn(p->arg, tid, p->n);
    atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
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
  free(p->threads);
  free(p);
}

int pt_pool_threads(const pt_pool *p) { return p ? p->n : 1; }

void pt_pool_run(pt_pool *p, pt_pool_fn fn, void *arg) {
  pt_fp_follow();
  if (!p || p->n == 1) {
    fn(arg, 0, 1);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  fn(arg, 0, p->n);
  while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
  }
}
