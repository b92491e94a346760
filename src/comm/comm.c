/* What every communicator shares: destruction, the bounded wait, and the
 * world of one. */
#include "comm/comm.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "util/timer.h"

void pt_comm_destroy(pt_comm *c) {
  if (c) c->ops->destroy(c);
}

pt_status pt_comm_check_peer(const pt_comm *c, const char *op, int peer, int tag) {
  if (peer < 0 || peer >= c->size)
    return pt_fail(PT_ERR_ARG, "rank %d: %s rank %d, but the communicator has ranks 0 to %d", c->rank, op, peer,
                   c->size - 1);
  if (tag < 0 || tag >= PT_COMM_TAG_LIMIT)
    return pt_fail(PT_ERR_ARG, "rank %d: %s rank %d with tag %d: expected 0 to %d", c->rank, op, peer, tag,
                   PT_COMM_TAG_LIMIT - 1);
  return PT_OK;
}

pt_status pt_comm_poll_wait(pt_comm *c, int (*poll)(void *ctx), void *ctx) {
  const double t0 = pt_now();
  c->silent[0] = 0;
  for (unsigned spins = 0;; spins++) {
    if (poll(ctx)) return PT_OK;
    /* MPI moves a message only inside its calls, and a large reduction is
     * many rounds of messages: polling without pause is what makes it
     * fast. sched_yield still hands the core over when ranks outnumber
     * cores. A peer that is a second late is busy elsewhere (evaluating,
     * writing a checkpoint) or gone, and then sleeping costs nothing. */
    if (spins % 64) {
      sched_yield();
      continue;
    }
    if (c->ops->answer) c->ops->answer(c);
    const double waited = pt_now() - t0;
    if (c->timeout_s > 0 && waited > c->timeout_s) {
      if (c->ops->roll_call) c->ops->roll_call(c, c->silent, sizeof c->silent);
      if (c->silent[0])
        return pt_fail(PT_ERR_COMM, "rank %d: no answer for %.0f s in %s at step %lld: %s (--timeout sets this limit)",
                       c->rank, waited, c->what ? c->what : "a collective", (long long)c->step, c->silent);
      return pt_fail(PT_ERR_COMM,
                     "rank %d: no answer from the other ranks for %.0f s in %s at step %lld; a rank has died or "
                     "is stuck (its own log says which and why; --timeout sets this limit)",
                     c->rank, waited, c->what ? c->what : "a collective", (long long)c->step);
    }
    if (waited > 1.0) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    } else {
      sched_yield();
    }
  }
}

static pt_status self_nop_f32(pt_comm *c, float *buf, size_t n) {
  (void)c, (void)buf, (void)n;
  return PT_OK;
}
static pt_status self_nop_f64(pt_comm *c, double *buf, size_t n) {
  (void)c, (void)buf, (void)n;
  return PT_OK;
}
static pt_status self_bcast(pt_comm *c, void *buf, size_t bytes, int root) {
  (void)c, (void)buf, (void)bytes, (void)root;
  return PT_OK;
}
static pt_status self_wait(pt_comm *c) {
  (void)c;
  return PT_OK;
}
static void self_abort(pt_comm *c, const char *why) { (void)c, (void)why; }
static void self_destroy(pt_comm *c) { free(c); }

/* Sending to oneself would only make sense to a caller that lost track of
 * the world's size, and a receive of it would have nothing to wait for. */
static pt_status self_isend(pt_comm *c, const void *buf, size_t bytes, int dst, int tag) {
  (void)c, (void)buf, (void)bytes, (void)tag;
  return pt_fail(PT_ERR_STATE, "isend to rank %d: a world of one has no peer to send to", dst);
}
static pt_status self_recv(pt_comm *c, void *buf, size_t bytes, int src, int tag) {
  (void)c, (void)buf, (void)bytes, (void)tag;
  return pt_fail(PT_ERR_STATE, "recv from rank %d: a world of one has no peer to receive from", src);
}
static pt_status self_split(pt_comm *c, int color, int key, pt_comm **out) {
  (void)key;
  if (color < 0) return PT_OK;
  PT_TRY(pt_comm_self_create(out));
  (*out)->timeout_s = c->timeout_s;
  return PT_OK;
}

static const pt_comm_ops self_ops = {
    .name = "self",
    .allreduce_f32 = self_nop_f32,
    .allreduce_f64 = self_nop_f64,
    .bcast = self_bcast,
    .iallreduce_f32 = self_nop_f32,
    .iallreduce_f64 = self_nop_f64,
    .wait_all = self_wait,
    .abort = self_abort,
    .destroy = self_destroy,
    .isend = self_isend,
    .recv = self_recv,
    .wait_sends = self_wait,
    .split = self_split,
};

pt_status pt_comm_self_create(pt_comm **out) {
  pt_comm *c = calloc(1, sizeof *c);
  if (!c) return pt_fail(PT_ERR_NOMEM, "out of memory creating a communicator");
  c->ops = &self_ops;
  c->size = c->local_size = 1;
  *out = c;
  return PT_OK;
}
