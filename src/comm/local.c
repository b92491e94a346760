/* The in-process communicator of --parallel dp: workers are threads that
 * share memory, so a reduction needs no copies. Every worker publishes its
 * buffer, and after a barrier each one sums its own slice of the buffers
 * in rank order and writes the sum back into all of them; a second barrier
 * ends the collective. The work is spread over all workers, and the sum's
 * order, hence its rounding, does not depend on thread timing.
 *
 * A worker that fails marks the group failed with its message; every
 * barrier checks the mark, so the others stop with that message instead of
 * waiting for a worker that will never arrive.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "util/threadpool.h"

#define MAX_WORKERS 1024

typedef struct {
  void *buf;
  size_t n;
  int f64;
} pending_op;

typedef struct {
  pt_comm base;
  pt_comm_local_group *g;
  int npending;
  pending_op pending[PT_COMM_MAX_PENDING];
} local_comm;

struct pt_comm_local_group {
  int n;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  unsigned generation;
  int failed, failed_rank;
  char why[512];
  void *slot[MAX_WORKERS]; /* each worker's buffer in the collective under way */
  local_comm *members;     /* (n) */
};

static pt_status group_failure(const pt_comm_local_group *g, int self) {
  if (g->failed_rank == self) return pt_fail(PT_ERR_COMM, "%s", g->why);
  return pt_fail(PT_ERR_COMM, "worker %d failed: %s", g->failed_rank, g->why);
}

static pt_status barrier(local_comm *lc) {
  pt_comm_local_group *g = lc->g;
  pt_status st = PT_OK;
  pthread_mutex_lock(&g->mu);
  if (g->failed) {
    st = group_failure(g, lc->base.rank);
  } else if (++g->arrived == g->n) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->cv);
  } else {
    const unsigned gen = g->generation;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += lc->base.timeout_s > 0 ? (time_t)lc->base.timeout_s : (time_t)1 << 30;
    while (gen == g->generation && !g->failed) {
      if (pthread_cond_timedwait(&g->cv, &g->mu, &deadline) != 0 && gen == g->generation && !g->failed) {
        st = pt_fail(PT_ERR_COMM,
                     "worker %d: the other workers did not reach %s at step %lld within %.0f s (--timeout)",
                     lc->base.rank, lc->base.what ? lc->base.what : "a collective", (long long)lc->base.step,
                     lc->base.timeout_s);
        break;
      }
    }
    if (st == PT_OK && gen == g->generation && g->failed) st = group_failure(g, lc->base.rank);
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}

static pt_status reduce(local_comm *lc, void *buf, size_t n, int f64) {
  pt_comm_local_group *g = lc->g;
  const int me = lc->base.rank, W = g->n;
  g->slot[me] = buf;
  PT_TRY(barrier(lc));
  size_t lo, hi;
  pt_split(n, me, W, &lo, &hi);
  if (f64) {
    for (size_t i = lo; i < hi; i++) {
      double s = ((double *)g->slot[0])[i];
      for (int r = 1; r < W; r++) s += ((double *)g->slot[r])[i];
      for (int r = 0; r < W; r++) ((double *)g->slot[r])[i] = s;
    }
  } else {
    /* Blocks of 256 keep the running sums in registers across the ranks. */
    for (size_t b = lo; b < hi; b += 256) {
      const size_t e = hi - b < 256 ? hi : b + 256;
      float s[256];
      const float *s0 = (const float *)g->slot[0];
      for (size_t i = b; i < e; i++) s[i - b] = s0[i];
      for (int r = 1; r < W; r++) {
        const float *sr = (const float *)g->slot[r];
        for (size_t i = b; i < e; i++) s[i - b] += sr[i];
      }
      for (int r = 0; r < W; r++) memcpy((float *)g->slot[r] + b, s, sizeof(float) * (e - b));
    }
  }
  return barrier(lc);
}

static pt_status local_allreduce_f32(pt_comm *c, float *buf, size_t n) { return reduce((local_comm *)c, buf, n, 0); }
static pt_status local_allreduce_f64(pt_comm *c, double *buf, size_t n) { return reduce((local_comm *)c, buf, n, 1); }

static pt_status local_bcast(pt_comm *c, void *buf, size_t bytes, int root) {
  local_comm *lc = (local_comm *)c;
  lc->g->slot[c->rank] = buf;
  PT_TRY(barrier(lc));
  if (c->rank != root) memcpy(buf, lc->g->slot[root], bytes);
  return barrier(lc);
}

/* Threads have no spare progress to make: a reduction started during the
 * backward pass is done at wait_all, split over all workers. */
static pt_status push(local_comm *lc, void *buf, size_t n, int f64) {
  if (lc->npending == PT_COMM_MAX_PENDING)
    return pt_fail(PT_ERR_STATE, "more than %d reductions in flight", PT_COMM_MAX_PENDING);
  lc->pending[lc->npending++] = (pending_op){buf, n, f64};
  return PT_OK;
}
static pt_status local_iallreduce_f32(pt_comm *c, float *buf, size_t n) { return push((local_comm *)c, buf, n, 0); }
static pt_status local_iallreduce_f64(pt_comm *c, double *buf, size_t n) { return push((local_comm *)c, buf, n, 1); }

static pt_status local_wait_all(pt_comm *c) {
  local_comm *lc = (local_comm *)c;
  pt_status st = PT_OK;
  for (int i = 0; i < lc->npending && st == PT_OK; i++)
    st = reduce(lc, lc->pending[i].buf, lc->pending[i].n, lc->pending[i].f64);
  lc->npending = 0;
  return st;
}

static void local_abort(pt_comm *c, const char *why) {
  pt_comm_local_group *g = ((local_comm *)c)->g;
  pthread_mutex_lock(&g->mu);
  if (!g->failed) {
    g->failed = 1;
    g->failed_rank = c->rank;
    snprintf(g->why, sizeof g->why, "%s", why);
  }
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* Members belong to the group. */
static void local_destroy(pt_comm *c) { (void)c; }

static const pt_comm_ops local_ops = {
    .name = "threads",
    .allreduce_f32 = local_allreduce_f32,
    .allreduce_f64 = local_allreduce_f64,
    .bcast = local_bcast,
    .iallreduce_f32 = local_iallreduce_f32,
    .iallreduce_f64 = local_iallreduce_f64,
    .wait_all = local_wait_all,
    .abort = local_abort,
    .destroy = local_destroy,
};

pt_status pt_comm_local_group_create(pt_comm_local_group **out, int n, double timeout_s) {
  if (n < 1 || n > MAX_WORKERS) return pt_fail(PT_ERR_ARG, "%d workers: expected 1 to %d", n, MAX_WORKERS);
  pt_comm_local_group *g = calloc(1, sizeof *g);
  local_comm *m = calloc((size_t)n, sizeof *m);
  if (!g || !m) {
    free(g);
    free(m);
    return pt_fail(PT_ERR_NOMEM, "out of memory creating %d workers", n);
  }
  g->n = n;
  g->members = m;
  pthread_mutex_init(&g->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &ca);
  pthread_condattr_destroy(&ca);
  for (int r = 0; r < n; r++) {
    m[r].base = (pt_comm){.ops = &local_ops, .rank = r, .size = n, .local_rank = r, .local_size = n,
                          .timeout_s = timeout_s};
    m[r].g = g;
  }
  *out = g;
  return PT_OK;
}

pt_comm *pt_comm_local_get(pt_comm_local_group *g, int rank) { return &g->members[rank].base; }

void pt_comm_local_group_destroy(pt_comm_local_group *g) {
  if (!g) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g->members);
  free(g);
}
