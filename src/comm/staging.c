/* A communicator for device memory over a host communicator: each
 * collective copies the buffer to the host, runs there, and copies the
 * result back.
 *
 * This is the path when NCCL cannot be used: several ranks sharing one GPU
 * (NCCL refuses a communicator with the same device twice), or a build
 * without NCCL. It is correct but slower, since every reduction waits for
 * the device and travels through host memory, so the trainer warns when it
 * falls back to it. The asynchronous reductions therefore complete at once;
 * the gradient buckets still start as soon as their layer is done, so only
 * the overlap with the rest of the backward pass is lost.
 *
 * Messages (model and pipeline stages as MPI ranks on GPUs) go the same
 * way: a send copies its bytes to a host buffer of its own, which the host
 * communicator may read until wait_sends, and a receive lands in a host
 * buffer and is copied up. The buffers are kept for the next batch, so
 * once the first batch has sent its pieces nothing more is allocated.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "ops/backend.h"

typedef struct {
  void *p;
  size_t cap;
} host_buf;

typedef struct {
  pt_comm base;
  pt_comm *host;
  const pt_backend *be;
  void *buf;       /* (cap bytes) the host copy of a buffer in flight */
  size_t cap;
  host_buf *sends; /* (nsends in flight of nslots kept) each send's host copy, until wait_sends */
  int nsends, nslots;
  host_buf recv;   /* a message received, on its way up */
} staging_comm;

/* b with room for bytes, keeping what it has when that is enough. */
static pt_status reserve(host_buf *b, size_t bytes) {
  if (b->cap >= bytes) return PT_OK;
  void *p = realloc(b->p, bytes ? bytes : 1);
  if (!p) return pt_fail(PT_ERR_NOMEM, "a host buffer of %zu bytes for a message between devices", bytes);
  b->p = p;
  b->cap = bytes;
  return PT_OK;
}

static staging_comm *S(pt_comm *c) { return (staging_comm *)c; }

/* The host communicator reports errors in terms of its own what/step. */
static pt_comm *host_of(pt_comm *c) {
  pt_comm *h = S(c)->host;
  h->what = c->what;
  h->step = c->step;
  h->timeout_s = c->timeout_s;
  return h;
}

static pt_status staged(pt_comm *c, void *dev, size_t bytes, pt_status (*op)(pt_comm *h, void *buf, size_t bytes, int arg),
                        int arg) {
  staging_comm *s = S(c);
  if (bytes > s->cap)
    return pt_fail(PT_ERR_STATE, "%s: %zu bytes through a staging buffer of %zu", c->what ? c->what : "collective",
                   bytes, s->cap);
  PT_TRY(s->be->download(s->buf, dev, bytes));
  PT_TRY(op(host_of(c), s->buf, bytes, arg));
  s->be->upload(dev, s->buf, bytes);
  return PT_OK;
}

static pt_status sum_f32(pt_comm *h, void *buf, size_t bytes, int arg) {
  (void)arg;
  return pt_comm_allreduce_f32(h, buf, bytes / sizeof(float));
}
static pt_status sum_f64(pt_comm *h, void *buf, size_t bytes, int arg) {
  (void)arg;
  return pt_comm_allreduce_f64(h, buf, bytes / sizeof(double));
}
static pt_status bcast_bytes(pt_comm *h, void *buf, size_t bytes, int root) { return pt_comm_bcast(h, buf, bytes, root); }

static pt_status st_allreduce_f32(pt_comm *c, float *buf, size_t n) {
  return staged(c, buf, n * sizeof(float), sum_f32, 0);
}
static pt_status st_allreduce_f64(pt_comm *c, double *buf, size_t n) {
  return staged(c, buf, n * sizeof(double), sum_f64, 0);
}
static pt_status st_bcast(pt_comm *c, void *buf, size_t bytes, int root) {
  return staged(c, buf, bytes, bcast_bytes, root);
}
static pt_status st_wait_all(pt_comm *c) { return pt_comm_wait_all(host_of(c)); }
static void st_abort(pt_comm *c, const char *why) { pt_comm_abort(S(c)->host, why); }
static void st_destroy(pt_comm *c) {
  staging_comm *s = S(c);
  /* Sends not waited for (a run ending on an error) may still be read by
   * the host communicator, whose in-flight sends finish on their own:
   * their copies are left allocated rather than freed under them. */
  for (int i = s->nsends; i < s->nslots; i++) free(s->sends[i].p);
  free(s->sends);
  free(s->recv.p);
  free(s->buf);
  free(c);
}
static pt_status st_isend(pt_comm *c, const void *buf, size_t bytes, int dst, int tag) {
  staging_comm *s = S(c);
  if (s->nsends == s->nslots) {
    host_buf *more = realloc(s->sends, sizeof *more * (size_t)(s->nslots * 2 + 4));
    if (!more) return pt_fail(PT_ERR_NOMEM, "out of memory for messages in flight");
    memset(more + s->nslots, 0, sizeof *more * (size_t)(s->nslots + 4));
    s->sends = more;
    s->nslots = s->nslots * 2 + 4;
  }
  host_buf *b = &s->sends[s->nsends];
  PT_TRY(reserve(b, bytes));
  /* The download waits for the device to finish writing buf. */
  if (bytes) PT_TRY(s->be->download(b->p, buf, bytes));
  PT_TRY(pt_comm_isend(host_of(c), b->p, bytes, dst, tag));
  s->nsends++;
  return PT_OK;
}
static pt_status st_recv(pt_comm *c, void *buf, size_t bytes, int src, int tag) {
  staging_comm *s = S(c);
  PT_TRY(reserve(&s->recv, bytes));
  PT_TRY(pt_comm_recv(host_of(c), s->recv.p, bytes, src, tag));
  /* Taken from recv's buffer before upload returns, so the next message
   * may land there. */
  if (bytes) s->be->upload(buf, s->recv.p, bytes);
  return PT_OK;
}
static pt_status st_wait_sends(pt_comm *c) {
  staging_comm *s = S(c);
  const pt_status st = pt_comm_wait_sends(host_of(c));
  if (st == PT_OK) s->nsends = 0; /* the host copies are free for the next sends */
  return st;
}
static pt_status st_split(pt_comm *c, int color, int key, pt_comm **out) {
  (void)c, (void)color, (void)key, (void)out;
  return pt_fail(PT_ERR_STATE, "splitting a host-staging communicator is not built");
}

static const pt_comm_ops staging_ops = {
    .name = "host staging",
    .allreduce_f32 = st_allreduce_f32,
    .allreduce_f64 = st_allreduce_f64,
    .bcast = st_bcast,
    /* Complete at once: see the top of the file. */
    .iallreduce_f32 = st_allreduce_f32,
    .iallreduce_f64 = st_allreduce_f64,
    .wait_all = st_wait_all,
    .abort = st_abort,
    .destroy = st_destroy,
    .isend = st_isend,
    .recv = st_recv,
    .wait_sends = st_wait_sends,
    .split = st_split,
};

pt_status pt_comm_staging_create(pt_comm **out, pt_comm *host, const pt_backend *be, size_t max_bytes) {
  *out = NULL;
  staging_comm *s = calloc(1, sizeof *s);
  if (!s || !(s->buf = malloc(max_bytes ? max_bytes : 1))) {
    free(s);
    return pt_fail(PT_ERR_NOMEM, "host staging buffer of %zu bytes", max_bytes);
  }
  s->cap = max_bytes;
  s->host = host;
  s->be = be;
  s->base = *host; /* rank, size, local rank, timeout */
  s->base.ops = &staging_ops;
  *out = &s->base;
  return PT_OK;
}
