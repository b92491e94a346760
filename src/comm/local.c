/* The in-process communicator of --parallel dp: workers are threads that
 * share memory, so a reduction needs no copies. Every worker publishes its
 * buffer, and after a barrier each one sums its own slice of the buffers
 * in rank order and writes the sum back into all of them; a second barrier
 * ends the collective. The work is spread over all workers, and the sum's
 * order, hence its rounding, does not depend on thread timing.
 *
 * A point-to-point message is not copied when it is sent: the sender
 * leaves a descriptor of its buffer in the receiver's inbox and the
 * receiver copies straight from that buffer, which is why the sender must
 * wait_sends before touching it again.
 *
 * A worker that fails marks the group failed with its message; every
 * wait checks the mark, so the others stop with that message instead of
 * waiting for a worker that will never arrive. Groups split from a group
 * share its lock, condition variable and mark (they live in the root
 * group): one abort reaches every worker, whichever groups it waits in.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "util/deadline.h"
#include "util/threadpool.h"

#define MAX_WORKERS 1024

typedef struct {
  void *buf;
  size_t n;
  int f64;
} pending_op;

typedef struct {
  int src, tag;
  const void *buf;
  size_t bytes;
} message;

typedef struct local_comm local_comm;
struct local_comm {
  pt_comm base;
  pt_comm_local_group *g;
  int world_rank; /* in the root group: failure messages name workers by it */
  int npending;
  pending_op pending[PT_COMM_MAX_PENDING];
  /* Under the root's lock: */
  message *inbox; /* (PT_COMM_MAX_SENDS) messages sent to this worker, oldest first */
  int ninbox;
  int unreceived; /* this worker's sends still in an inbox */
  int copying;    /* this worker's sends being copied by their receiver */
  /* split's arguments, read by rank 0 of the group, and its answer */
  int split_color, split_key;
  local_comm *split_out;
};

struct pt_comm_local_group {
  int n;
  pt_comm_local_group *root; /* itself for a group made by pt_comm_local_group_create */
  /* The root's own; a split group uses its root's. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int failed, failed_rank; /* failed_rank: a world rank */
  char why[512];
  pt_comm_local_group *subs; /* the root's split groups still alive */
  /* Every group's own: */
  int arrived;
  unsigned generation;
  void *slot[MAX_WORKERS]; /* each worker's buffer in the collective under way */
  local_comm *members;     /* (n) */
  message *inboxes;        /* (n * PT_COMM_MAX_SENDS) */
  int refs;                /* split group: members not yet destroyed */
  pt_comm_local_group *next_sub;
  pt_status split_status; /* rank 0's, for the others to report */
};

static pt_status group_failure(const pt_comm_local_group *root, int self) {
  if (root->failed_rank == self) return pt_fail(PT_ERR_COMM, "%s", root->why);
  return pt_fail(PT_ERR_COMM, "worker %d failed: %s", root->failed_rank, root->why);
}

static const char *what(const pt_comm *c, const char *otherwise) { return c->what ? c->what : otherwise; }

static pt_status barrier(local_comm *lc) {
  pt_comm_local_group *g = lc->g, *root = g->root;
  pt_status st = PT_OK;
  pthread_mutex_lock(&root->mu);
  if (root->failed) {
    st = group_failure(root, lc->world_rank);
  } else if (++g->arrived == g->n) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&root->cv);
  } else {
    const unsigned gen = g->generation;
    const struct timespec deadline = pt_deadline_in(lc->base.timeout_s);
    while (gen == g->generation && !root->failed) {
      if (pthread_cond_timedwait(&root->cv, &root->mu, &deadline) != 0 && gen == g->generation && !root->failed) {
        st = pt_fail(PT_ERR_COMM,
                     "worker %d: the other workers did not reach %s at step %lld within %g s (--timeout)",
                     lc->world_rank, what(&lc->base, "a collective"), (long long)lc->base.step,
                     lc->base.timeout_s);
        break;
      }
    }
    if (st == PT_OK && gen == g->generation && root->failed) st = group_failure(root, lc->world_rank);
  }
  pthread_mutex_unlock(&root->mu);
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

static pt_status local_isend(pt_comm *c, const void *buf, size_t bytes, int dst, int tag) {
  local_comm *lc = (local_comm *)c;
  pt_comm_local_group *g = lc->g, *root = g->root;
  local_comm *to = &g->members[dst];
  pt_status st = PT_OK;
  pthread_mutex_lock(&root->mu);
  if (root->failed) {
    st = group_failure(root, lc->world_rank);
  } else if (to->ninbox == PT_COMM_MAX_SENDS) {
    st = pt_fail(PT_ERR_STATE,
                 "worker %d: isend to worker %d for %s at step %lld: %d messages to it are already waiting to be "
                 "received",
                 lc->world_rank, to->world_rank, what(c, "a message"), (long long)c->step, PT_COMM_MAX_SENDS);
  } else {
    to->inbox[to->ninbox++] = (message){c->rank, tag, buf, bytes};
    lc->unreceived++;
    pthread_cond_broadcast(&root->cv);
  }
  pthread_mutex_unlock(&root->mu);
  return st;
}

static pt_status local_recv(pt_comm *c, void *buf, size_t bytes, int src, int tag) {
  local_comm *lc = (local_comm *)c;
  pt_comm_local_group *g = lc->g, *root = g->root;
  local_comm *from = &g->members[src];
  const struct timespec deadline = pt_deadline_in(c->timeout_s);
  message m = {0};
  int found = 0, timed_out = 0;
  pt_status st = PT_OK;
  pthread_mutex_lock(&root->mu);
  while (!root->failed) {
    int i = 0;
    while (i < lc->ninbox && (lc->inbox[i].src != src || lc->inbox[i].tag != tag)) i++;
    if (i < lc->ninbox) {
      m = lc->inbox[i];
      memmove(&lc->inbox[i], &lc->inbox[i + 1], sizeof *lc->inbox * (size_t)(lc->ninbox - i - 1));
      lc->ninbox--;
      from->unreceived--;
      from->copying++;
      found = 1;
      break;
    }
    if (timed_out) break;
    timed_out = pthread_cond_timedwait(&root->cv, &root->mu, &deadline) == ETIMEDOUT;
  }
  if (!found)
    st = root->failed ? group_failure(root, lc->world_rank)
                      : pt_fail(PT_ERR_COMM,
                                "worker %d: no message from worker %d (tag %d) for %s at step %lld within %g s "
                                "(--timeout)",
                                lc->world_rank, from->world_rank, tag, what(c, "a receive"), (long long)c->step,
                                c->timeout_s);
  pthread_mutex_unlock(&root->mu);
  if (!found) return st;
  /* The copy runs unlocked, so that workers exchanging large activations
   * do not queue behind each other; the sender's copying count keeps its
   * buffer alive meanwhile. */
  if (m.bytes == bytes && bytes) memcpy(buf, m.buf, bytes);
  pthread_mutex_lock(&root->mu);
  from->copying--;
  pthread_cond_broadcast(&root->cv);
  pthread_mutex_unlock(&root->mu);
  if (m.bytes != bytes)
    return pt_fail(PT_ERR_STATE,
                   "worker %d: the message from worker %d (tag %d) for %s at step %lld has %zu bytes, but %zu "
                   "were expected",
                   lc->world_rank, from->world_rank, tag, what(c, "a receive"), (long long)c->step, m.bytes,
                   bytes);
  return PT_OK;
}

/* Takes back this worker's messages not yet received, so that a failed
 * wait_sends can hand the buffers back: nobody will read them any more. */
static void withdraw(local_comm *lc) {
  pt_comm_local_group *g = lc->g;
  for (int r = 0; r < g->n; r++) {
    local_comm *to = &g->members[r];
    int k = 0;
    for (int i = 0; i < to->ninbox; i++)
      if (to->inbox[i].src != lc->base.rank) to->inbox[k++] = to->inbox[i];
    to->ninbox = k;
  }
  lc->unreceived = 0;
}

static pt_status local_wait_sends(pt_comm *c) {
  local_comm *lc = (local_comm *)c;
  pt_comm_local_group *g = lc->g, *root = g->root;
  const struct timespec deadline = pt_deadline_in(c->timeout_s);
  int timed_out = 0;
  pt_status st = PT_OK;
  pthread_mutex_lock(&root->mu);
  while (lc->unreceived + lc->copying > 0 && !root->failed && !timed_out)
    timed_out = pthread_cond_timedwait(&root->cv, &root->mu, &deadline) == ETIMEDOUT;
  if (root->failed) {
    st = group_failure(root, lc->world_rank);
  } else if (lc->unreceived + lc->copying > 0) {
    const message *late = NULL;
    int to = -1;
    for (int r = 0; r < g->n && !late; r++)
      for (int i = 0; i < g->members[r].ninbox && !late; i++)
        if (g->members[r].inbox[i].src == c->rank) late = &g->members[r].inbox[i], to = g->members[r].world_rank;
    if (late)
      st = pt_fail(PT_ERR_COMM,
                   "worker %d: worker %d did not receive the message (tag %d) for %s at step %lld within %g s "
                   "(--timeout)",
                   lc->world_rank, to, late->tag, what(c, "a send"), (long long)c->step, c->timeout_s);
    else
      st = pt_fail(PT_ERR_COMM, "worker %d: the messages for %s at step %lld were not copied within %g s (--timeout)",
                   lc->world_rank, what(c, "a send"), (long long)c->step, c->timeout_s);
  }
  if (st != PT_OK) {
    withdraw(lc);
    /* A copy already under way takes no longer than a memcpy. */
    while (lc->copying > 0) pthread_cond_wait(&root->cv, &root->mu);
  }
  pthread_mutex_unlock(&root->mu);
  return st;
}

static void local_abort(pt_comm *c, const char *why) {
  pt_comm_local_group *root = ((local_comm *)c)->g->root;
  pthread_mutex_lock(&root->mu);
  if (!root->failed) {
    root->failed = 1;
    root->failed_rank = ((local_comm *)c)->world_rank;
    snprintf(root->why, sizeof root->why, "%s", why);
  }
  pthread_cond_broadcast(&root->cv);
  pthread_mutex_unlock(&root->mu);
}

static void group_free(pt_comm_local_group *g) {
  if (g == g->root) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
  }
  free(g->inboxes);
  free(g->members);
  free(g);
}

/* The root's members belong to the root; a split group goes when its last
 * member does. */
static void local_destroy(pt_comm *c) {
  pt_comm_local_group *g = ((local_comm *)c)->g, *root = g->root;
  if (g == root) return;
  pthread_mutex_lock(&root->mu);
  const int last = --g->refs == 0;
  if (last) {
    pt_comm_local_group **p = &root->subs;
    while (*p != g) p = &(*p)->next_sub;
    *p = g->next_sub;
  }
  pthread_mutex_unlock(&root->mu);
  if (last) group_free(g);
}

static pt_status local_split(pt_comm *c, int color, int key, pt_comm **out);

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
    .isend = local_isend,
    .recv = local_recv,
    .wait_sends = local_wait_sends,
    .split = local_split,
};

/* A group of n workers with their inboxes; root NULL makes a root. */
static pt_comm_local_group *group_alloc(int n, pt_comm_local_group *root) {
  pt_comm_local_group *g = calloc(1, sizeof *g);
  local_comm *m = calloc((size_t)n, sizeof *m);
  message *in = calloc((size_t)n * PT_COMM_MAX_SENDS, sizeof *in);
  if (!g || !m || !in) {
    free(g);
    free(m);
    free(in);
    return NULL;
  }
  g->n = n;
  g->members = m;
  g->inboxes = in;
  g->root = root ? root : g;
  for (int r = 0; r < n; r++) {
    m[r].g = g;
    m[r].inbox = in + (size_t)r * PT_COMM_MAX_SENDS;
  }
  if (!root) {
    pthread_mutex_init(&g->mu, NULL);
    pt_cond_init_monotonic(&g->cv);
  }
  return g;
}

/* Rank 0 of the group makes every new group while the others wait at a
 * barrier: one thread deciding is the simplest way for all to agree. */
static pt_status make_splits(pt_comm_local_group *g) {
  const int n = g->n;
  local_comm *m = g->members;
  pt_comm_local_group *made[MAX_WORKERS];
  int nmade = 0, order[MAX_WORKERS], done[MAX_WORKERS] = {0};
  for (int r = 0; r < n; r++) m[r].split_out = NULL;
  for (int r = 0; r < n; r++) {
    if (done[r] || m[r].split_color < 0) continue;
    int cnt = 0;
    for (int q = r; q < n; q++) {
      if (m[q].split_color != m[r].split_color) continue;
      done[q] = 1;
      /* Insertion by (key, old rank); old ranks come in increasing order. */
      int i = cnt++;
      while (i > 0 && m[order[i - 1]].split_key > m[q].split_key) {
        order[i] = order[i - 1];
        i--;
      }
      order[i] = q;
    }
    pt_comm_local_group *s = group_alloc(cnt, g->root);
    if (!s) {
      for (int k = 0; k < nmade; k++) group_free(made[k]);
      for (int q = 0; q < n; q++) m[q].split_out = NULL;
      return pt_fail(PT_ERR_NOMEM, "out of memory splitting a group of %d workers", n);
    }
    made[nmade++] = s;
    s->refs = cnt;
    for (int k = 0; k < cnt; k++) {
      const local_comm *old = &m[order[k]];
      s->members[k].base = (pt_comm){.ops = &local_ops, .rank = k, .size = cnt, .local_rank = k,
                                     .local_size = cnt, .timeout_s = old->base.timeout_s};
      s->members[k].world_rank = old->world_rank;
      m[order[k]].split_out = &s->members[k];
    }
  }
  pt_comm_local_group *root = g->root;
  pthread_mutex_lock(&root->mu);
  for (int k = 0; k < nmade; k++) {
    made[k]->next_sub = root->subs;
    root->subs = made[k];
  }
  pthread_mutex_unlock(&root->mu);
  return PT_OK;
}

/* If a barrier fails, the groups rank 0 made stay on the root's list and go
 * with the root: the job is ending anyway. */
static pt_status local_split(pt_comm *c, int color, int key, pt_comm **out) {
  local_comm *lc = (local_comm *)c;
  pt_comm_local_group *g = lc->g;
  const char *was = c->what;
  if (!was) c->what = "a communicator split";
  lc->split_color = color;
  lc->split_key = key;
  pt_status st = barrier(lc);
  if (st == PT_OK && c->rank == 0) g->split_status = make_splits(g);
  if (st == PT_OK) st = barrier(lc);
  c->what = was;
  if (st != PT_OK) return st;
  if (g->split_status != PT_OK)
    return c->rank == 0 ? g->split_status
                        : pt_fail(PT_ERR_NOMEM,
                                  "worker %d: worker %d could not make the split communicators (out of memory)",
                                  lc->world_rank, g->members[0].world_rank);
  if (color >= 0) *out = &lc->split_out->base;
  return PT_OK;
}

pt_status pt_comm_local_group_create(pt_comm_local_group **out, int n, double timeout_s) {
  if (n < 1 || n > MAX_WORKERS) return pt_fail(PT_ERR_ARG, "%d workers: expected 1 to %d", n, MAX_WORKERS);
  pt_comm_local_group *g = group_alloc(n, NULL);
  if (!g) return pt_fail(PT_ERR_NOMEM, "out of memory creating %d workers", n);
  for (int r = 0; r < n; r++) {
    g->members[r].base = (pt_comm){.ops = &local_ops, .rank = r, .size = n, .local_rank = r, .local_size = n,
                                   .timeout_s = timeout_s};
    g->members[r].world_rank = r;
  }
  *out = g;
  return PT_OK;
}

pt_comm *pt_comm_local_get(pt_comm_local_group *g, int rank) { return &g->members[rank].base; }

void pt_comm_local_group_destroy(pt_comm_local_group *g) {
  if (!g) return;
  while (g->subs) {
    pt_comm_local_group *s = g->subs;
    g->subs = s->next_sub;
    group_free(s);
  }
  group_free(g);
}
