/* The communicator of --parallel ddp: MPI (Open MPI), one process per rank,
 * on one machine or many. Reductions are MPI's non-blocking collectives so
 * that gradient buckets travel while the backward pass goes on, their sums
 * added in rank order (mpi_sum); every wait
 * polls with a deadline, so a rank that died or hangs ends the job with a
 * message instead of hanging it.
 */
#include <limits.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"

static long env_long(const char *name) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : 0;
}

/* The launchers' own variables: Open MPI's mpirun, Slurm's srun, and the
 * PMI of MPICH-style launchers. */
static long launcher_world(void) {
  long n = env_long("OMPI_COMM_WORLD_SIZE");
  if (n < 1) n = env_long("PMI_SIZE");
  if (n < 1 && getenv("SLURM_STEP_ID")) n = env_long("SLURM_STEP_NUM_TASKS");
  return n;
}

int pt_comm_mpi_launched(void) { return launcher_world() > 1; }
int pt_comm_mpi_launcher_ranks(void) { return (int)launcher_world(); }

#ifdef PT_HAVE_MPI
#include <mpi.h>

#include "util/timer.h"
#include "util/watchdog.h"

/* The heartbeat. A rank that times out waiting sends a ping to every other
 * rank on a communicator of its own (a dup, so that no message of training
 * can match), and every rank that is itself waiting answers with a pong:
 * what it waits for, and at which step. The ranks that do not answer
 * within a grace period are the ones that are stopped (SIGSTOP, a
 * debugger), hung in computation, or dead, and the message names them with
 * their pid and host, gathered when the communicator was made. Nothing is
 * sent while training goes well: the roll call costs only a probe per
 * wait. */
enum { HB_PING = 1, HB_PONG = 2 };
typedef struct {
  int seq;
  int64_t step;
  char what[52];
} hb_pong;
typedef struct {
  int pid, world_rank;
  char host[56];
} hb_id;

/* A sum in flight. MPI_Iallreduce would leave the order of the sum to
 * the MPI library's algorithm (pairwise at 4 ranks), so ddp would differ
 * from dp, whose threads add in rank order, in the last bits. Instead
 * each rank is sent its share of every rank's buffer (an all-to-all), adds
 * the pieces in rank order, as dp does, and the sums are gathered back:
 * the same bytes on the wire as a ring, and dp's bits at any rank count. */
typedef struct {
  int phase; /* 1: the pieces are travelling, a sum and a gather to follow; 0: a plain request */
  char *buf;
  MPI_Datatype type;
  int *cnt, *dsp, *rcnt, *rdsp; /* (size) each, one allocation, kept for the slot */
  char *scratch;                /* (size, my piece) as received */
  size_t scratch_cap;
} mpi_sum;

typedef struct {
  pt_comm base;
  MPI_Comm comm;
  int npending;
  MPI_Request req[PT_COMM_MAX_PENDING];
  mpi_sum sum[PT_COMM_MAX_PENDING]; /* the reductions among them */
  /* The gathers of the sums: on a communicator of their own, started in
   * the order of their sums. MPI matches collectives by the order each
   * rank starts them on a communicator, and the sums' pieces arrive in
   * any order: a gather started at once could meet another's all-to-all. */
  MPI_Comm gcomm;
  int err;  /* an MPI error code from the last poll, or MPI_SUCCESS */
  /* isends not yet completed, with where they went for messages */
  int nsends;
  MPI_Request sreq[PT_COMM_MAX_SENDS];
  int sdst[PT_COMM_MAX_SENDS], stag[PT_COMM_MAX_SENDS];
  /* the heartbeat: its communicator, who each rank is, and per peer the
   * last pong sent to it (its buffer lives until the send completes) */
  MPI_Comm hb;
  hb_id *ids;          /* (size) */
  hb_pong *pong;       /* (size) */
  MPI_Request *pong_req; /* (size) */
  int ping_seq;        /* the roll call's number, echoed by its pongs */
} mpi_comm;

static int we_initialized;
static double world_timeout_s; /* --timeout, for MPI_Finalize's wait */

/* Named as the launcher numbers the ranks: MPI's own numbers are not
 * there yet, or no longer. */
static void guard(pt_watchdog *w, double seconds, const char *call, const char *what) {
  char why[320];
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = getenv("PMI_RANK");
  if (!r) r = getenv("SLURM_PROCID");
  snprintf(why, sizeof why,
           "ptrain: error: rank %s: no answer for %.0f s in %s, which waits for every rank %s: one is stopped, "
           "hung (in its file system?) or dead; giving up (--timeout)",
           r ? r : "?", seconds, call, what);
  pt_watchdog_start(w, seconds, why);
}

int pt_comm_mpi_available(void) { return 1; }

int pt_comm_mpi_version(char *buf, size_t len) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  MPI_Get_library_version(v, &n); /* allowed before MPI_Init */
  v[strcspn(v, ",\n")] = 0;
  snprintf(buf, len, "%s", v);
  return 1;
}

static pt_status mpi_error(mpi_comm *mc, int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return pt_fail(PT_ERR_COMM, "rank %d: MPI failed in %s at step %lld: %s", mc->base.rank,
                 mc->base.what ? mc->base.what : "a collective", (long long)mc->base.step, msg);
}

/* My piece of every rank's buffer, received, added in rank order into my
 * piece of mine. */
static void add_pieces(mpi_comm *mc, mpi_sum *r) {
  const int me = mc->base.rank, N = mc->base.size, len = r->rcnt[0];
  if (r->type == MPI_FLOAT) {
    const float *in = (const float *)r->scratch;
    float *out = (float *)r->buf + r->dsp[me];
    for (int i = 0; i < len; i++) {
      float s = in[i];
      for (int j = 1; j < N; j++) s += in[(size_t)j * len + i];
      out[i] = s;
    }
  } else {
    const double *in = (const double *)r->scratch;
    double *out = (double *)r->buf + r->dsp[me];
    for (int i = 0; i < len; i++) {
      double s = in[i];
      for (int j = 1; j < N; j++) s += in[(size_t)j * len + i];
      out[i] = s;
    }
  }
}

/* Advances every request; a sum whose pieces arrived is added and its
 * gather started, unless an earlier sum's gather has yet to start (held):
 * the gathers start in the order of their sums on every rank. 1 when all
 * are done, or on an error (in mc->err). */
static int poll_all(void *ctx) {
  mpi_comm *mc = ctx;
  int all = 1, held = 0;
  for (int i = 0; i < mc->npending; i++) {
    mpi_sum *r = &mc->sum[i];
    int done = 0;
    const int rc = MPI_Test(&mc->req[i], &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      mc->err = rc;
      return 1;
    }
    if (!done || r->phase == 1) all = 0;
    if (r->phase != 1) continue;
    if (!done || held) {
      held = 1;
      continue;
    }
    add_pieces(mc, r);
    r->phase = 0;
    const int g = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r->buf, r->cnt, r->dsp, r->type, mc->gcomm,
                                  &mc->req[i]);
    if (g != MPI_SUCCESS) {
      mc->err = g;
      return 1;
    }
  }
  return all;
}

static pt_status mpi_wait_all(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  if (!mc->npending) return PT_OK;
  mc->err = MPI_SUCCESS;
  pt_status st = pt_comm_poll_wait(c, poll_all, mc);
  const int err = mc->err;
  mc->npending = 0;
  if (st != PT_OK) return st;
  return err == MPI_SUCCESS ? PT_OK : mpi_error(mc, err);
}

static pt_status start(mpi_comm *mc, void *buf, size_t n, MPI_Datatype type) {
  if (mc->npending == PT_COMM_MAX_PENDING)
    return pt_fail(PT_ERR_STATE, "more than %d reductions in flight", PT_COMM_MAX_PENDING);
  if (n > (size_t)0x7fffffff) return pt_fail(PT_ERR_ARG, "a reduction of %zu elements exceeds MPI's count", n);
  const int N = mc->base.size, me = mc->base.rank;
  if (N == 1) return PT_OK;
  mpi_sum *r = &mc->sum[mc->npending];
  if (!r->cnt && !(r->cnt = malloc(sizeof(int) * 4 * (size_t)N)))
    return pt_fail(PT_ERR_NOMEM, "out of memory for a reduction's counts");
  r->dsp = r->cnt + N, r->rcnt = r->cnt + 2 * N, r->rdsp = r->cnt + 3 * N;
  for (int j = 0; j < N; j++) { /* rank j's piece: [n j / N, n (j + 1) / N) */
    r->dsp[j] = (int)(n * (size_t)j / (size_t)N);
    r->cnt[j] = (int)(n * (size_t)(j + 1) / (size_t)N) - r->dsp[j];
  }
  const size_t esz = type == MPI_FLOAT ? sizeof(float) : sizeof(double);
  const size_t need = (size_t)N * (size_t)r->cnt[me] * esz;
  if (need > r->scratch_cap) {
    char *p = realloc(r->scratch, need);
    if (!p) return pt_fail(PT_ERR_NOMEM, "out of memory for a reduction of %zu elements", n);
    r->scratch = p, r->scratch_cap = need;
  }
  for (int j = 0; j < N; j++) r->rcnt[j] = r->cnt[me], r->rdsp[j] = j * r->cnt[me];
  r->buf = buf;
  r->type = type;
  r->phase = 1;
  int rc = MPI_Ialltoallv(buf, r->cnt, r->dsp, type, r->scratch, r->rcnt, r->rdsp, type, mc->comm,
                          &mc->req[mc->npending]);
  if (rc != MPI_SUCCESS) return mpi_error(mc, rc);
  mc->npending++;
  return PT_OK;
}

static pt_status mpi_iallreduce_f32(pt_comm *c, float *buf, size_t n) { return start((mpi_comm *)c, buf, n, MPI_FLOAT); }
static pt_status mpi_iallreduce_f64(pt_comm *c, double *buf, size_t n) {
  return start((mpi_comm *)c, buf, n, MPI_DOUBLE);
}
static pt_status mpi_allreduce_f32(pt_comm *c, float *buf, size_t n) {
  PT_TRY(mpi_iallreduce_f32(c, buf, n));
  return mpi_wait_all(c);
}
static pt_status mpi_allreduce_f64(pt_comm *c, double *buf, size_t n) {
  PT_TRY(mpi_iallreduce_f64(c, buf, n));
  return mpi_wait_all(c);
}

static pt_status mpi_bcast(pt_comm *c, void *buf, size_t bytes, int root) {
  mpi_comm *mc = (mpi_comm *)c;
  /* In chunks, because MPI counts are ints and a model can pass 2 GiB. */
  const size_t chunk = (size_t)1 << 30;
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = bytes - off < chunk ? bytes - off : chunk;
    mc->sum[mc->npending].phase = 0;
    int rc = MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, mc->comm, &mc->req[mc->npending]);
    if (rc != MPI_SUCCESS) return mpi_error(mc, rc);
    mc->npending++;
    PT_TRY(mpi_wait_all(c));
  }
  return PT_OK;
}

static void mpi_progress(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  if (mc->npending) poll_all(mc); /* an error stays in mc->err for the wait */
}

/* Replies to every ping waiting: each peer has one pong buffer, and a peer
 * whose previous pong is still in flight is answered at the next call. */
static void mpi_answer(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  if (mc->hb == MPI_COMM_NULL) return;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, HB_PING, mc->hb, &flag, &st) != MPI_SUCCESS || !flag) return;
    const int src = st.MPI_SOURCE;
    if (mc->pong_req[src] != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&mc->pong_req[src], &done, MPI_STATUS_IGNORE);
      if (!done) return;
    }
    int seq = 0;
    if (MPI_Recv(&seq, 1, MPI_INT, src, HB_PING, mc->hb, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    hb_pong *p = &mc->pong[src];
    p->seq = seq;
    p->step = c->step;
    snprintf(p->what, sizeof p->what, "%s", c->what ? c->what : "a collective");
    MPI_Isend(p, (int)sizeof *p, MPI_BYTE, src, HB_PONG, mc->hb, &mc->pong_req[src]);
  }
}

static void name_rank(const mpi_comm *mc, int r, char *buf, size_t len) {
  const hb_id *id = &mc->ids[r];
  if (id->world_rank != r)
    snprintf(buf, len, "rank %d (world rank %d, pid %d on %s)", r, id->world_rank, id->pid, id->host);
  else
    snprintf(buf, len, "rank %d (pid %d on %s)", r, id->pid, id->host);
}

static void mpi_roll_call(pt_comm *c, char *buf, size_t len) {
  mpi_comm *mc = (mpi_comm *)c;
  buf[0] = 0;
  if (mc->hb == MPI_COMM_NULL || c->size < 2) return;
  const int n = c->size, seq = ++mc->ping_seq;
  static int ping; /* what the pings carry; sends may outlive this call */
  ping = seq;
  char *answered = calloc((size_t)n, 1);
  hb_pong *got = calloc((size_t)n, sizeof *got);
  MPI_Request *req = malloc(sizeof *req * (size_t)n);
  if (!answered || !got || !req) {
    free(answered), free(got), free(req);
    return;
  }
  for (int r = 0; r < n; r++) {
    req[r] = MPI_REQUEST_NULL;
    if (r != c->rank) MPI_Isend(&ping, 1, MPI_INT, r, HB_PING, mc->hb, &req[r]);
  }
  /* A waiting rank answers within a poll (microseconds to 0.2 ms); the
   * grace covers a loaded machine without adding much to the timeout. */
  const double grace = c->timeout_s / 4 < 1 ? 1 : c->timeout_s / 4 > 5 ? 5 : c->timeout_s / 4;
  const double t0 = pt_now();
  int missing = n - 1;
  while (missing > 0 && pt_now() - t0 < grace) {
    mpi_answer(c); /* the others may be calling the roll too */
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, HB_PONG, mc->hb, &flag, &st) == MPI_SUCCESS && flag) {
      hb_pong p;
      if (MPI_Recv(&p, (int)sizeof p, MPI_BYTE, st.MPI_SOURCE, HB_PONG, mc->hb, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
          p.seq == seq && !answered[st.MPI_SOURCE]) {
        answered[st.MPI_SOURCE] = 1;
        got[st.MPI_SOURCE] = p;
        got[st.MPI_SOURCE].what[sizeof p.what - 1] = 0;
        missing--;
      }
      continue;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  /* The pings to silent ranks never complete; the job is ending. */
  for (int r = 0; r < n; r++)
    if (req[r] != MPI_REQUEST_NULL) MPI_Request_free(&req[r]);
  size_t used = 0;
  char who[160];
  for (int r = 0; r < n && used < len; r++)
    if (r != c->rank && !answered[r]) {
      name_rank(mc, r, who, sizeof who);
      used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", who);
    }
  if (used && used < len)
    used += (size_t)snprintf(buf + used, len - used,
                             " did not answer a heartbeat within %.0f s: stopped (SIGSTOP, a debugger), hung or dead",
                             grace);
  for (int r = 0; r < n && used < len; r++)
    if (answered[r]) {
      name_rank(mc, r, who, sizeof who);
      used += (size_t)snprintf(buf + used, len - used, "; %s is waiting in %s at step %lld", who, got[r].what,
                               (long long)got[r].step);
    }
  free(answered), free(got), free(req);
}

/* Named by world rank, which is what mpirun's own messages use, even when
 * c was split off it. */
static void mpi_abort(pt_comm *c, const char *why) {
  (void)c;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  fprintf(stderr, "ptrain: rank %d of %d failed (%s); stopping every rank\n", rank, size, why);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* mc->comm is always ours (a dup of MPI_COMM_WORLD or a split), never
 * MPI_COMM_WORLD itself. Sends still in flight finish on their own. */
static void mpi_destroy(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  for (int i = 0; i < mc->nsends; i++) MPI_Request_free(&mc->sreq[i]);
  if (mc->pong_req)
    for (int r = 0; r < mc->base.size; r++)
      if (mc->pong_req[r] != MPI_REQUEST_NULL) MPI_Request_free(&mc->pong_req[r]);
  if (mc->hb != MPI_COMM_NULL) MPI_Comm_free(&mc->hb);
  MPI_Comm_free(&mc->gcomm);
  MPI_Comm_free(&mc->comm);
  free(mc->ids), free(mc->pong), free(mc->pong_req);
  for (int i = 0; i < PT_COMM_MAX_PENDING; i++) free(mc->sum[i].cnt), free(mc->sum[i].scratch);
  free(mc);
}

/* Drops the sends that have completed, keeping the rest in order. */
static void reap_sends(mpi_comm *mc) {
  int k = 0;
  for (int i = 0; i < mc->nsends; i++) {
    int done = 0;
    if (MPI_Test(&mc->sreq[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) continue;
    mc->sreq[k] = mc->sreq[i];
    mc->sdst[k] = mc->sdst[i];
    mc->stag[k] = mc->stag[i];
    k++;
  }
  mc->nsends = k;
}

static pt_status mpi_isend(pt_comm *c, const void *buf, size_t bytes, int dst, int tag) {
  mpi_comm *mc = (mpi_comm *)c;
  if (bytes > INT_MAX)
    return pt_fail(PT_ERR_ARG, "rank %d: a message of %zu bytes to rank %d exceeds MPI's count (at most %d)", c->rank,
                   bytes, dst, INT_MAX);
  if (mc->nsends == PT_COMM_MAX_SENDS) reap_sends(mc);
  if (mc->nsends == PT_COMM_MAX_SENDS)
    return pt_fail(PT_ERR_STATE,
                   "rank %d: isend to rank %d for %s at step %lld: %d sends are already in flight (pt_comm_wait_sends "
                   "completes them)",
                   c->rank, dst, c->what ? c->what : "a message", (long long)c->step, PT_COMM_MAX_SENDS);
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, tag, mc->comm, &mc->sreq[mc->nsends]);
  if (rc != MPI_SUCCESS) return mpi_error(mc, rc);
  mc->sdst[mc->nsends] = dst;
  mc->stag[mc->nsends] = tag;
  mc->nsends++;
  return PT_OK;
}

static int poll_sends(void *ctx) {
  mpi_comm *mc = ctx;
  int done = 0;
  int rc = MPI_Testall(mc->nsends, mc->sreq, &done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    mc->err = rc;
    return 1;
  }
  return done;
}

static pt_status mpi_wait_sends(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  if (!mc->nsends) return PT_OK;
  mc->err = MPI_SUCCESS;
  if (pt_comm_poll_wait(c, poll_sends, mc) != PT_OK) {
    reap_sends(mc);
    if (mc->nsends)
      return pt_fail(PT_ERR_COMM,
                     "rank %d: rank %d did not receive the message (tag %d) for %s at step %lld within %g s "
                     "(--timeout)%s%s",
                     c->rank, mc->sdst[0], mc->stag[0], c->what ? c->what : "a send", (long long)c->step,
                     c->timeout_s, c->silent[0] ? ": " : "", c->silent);
  }
  const int err = mc->err;
  mc->nsends = 0;
  return err == MPI_SUCCESS ? PT_OK : mpi_error(mc, err);
}

typedef struct {
  mpi_comm *mc;
  int src, tag;
  MPI_Message msg;
  MPI_Status status;
  MPI_Request req;
  int err;
} recv_ctx;

static int poll_probe(void *ctx) {
  recv_ctx *r = ctx;
  int found = 0;
  int rc = MPI_Improbe(r->src, r->tag, r->mc->comm, &found, &r->msg, &r->status);
  if (rc != MPI_SUCCESS) {
    r->err = rc;
    return 1;
  }
  return found;
}

static int poll_request(void *ctx) {
  recv_ctx *r = ctx;
  int done = 0;
  int rc = MPI_Test(&r->req, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    r->err = rc;
    return 1;
  }
  return done;
}

/* A matched probe first, then the receive: the probe tells the message's
 * size, so a mismatch names both sizes however large the message is, and a
 * message that never comes leaves no receive posted. */
static pt_status mpi_recv(pt_comm *c, void *buf, size_t bytes, int src, int tag) {
  mpi_comm *mc = (mpi_comm *)c;
  const char *w = c->what ? c->what : "a receive";
  if (bytes > INT_MAX)
    return pt_fail(PT_ERR_ARG, "rank %d: a message of %zu bytes from rank %d exceeds MPI's count (at most %d)",
                   c->rank, bytes, src, INT_MAX);
  recv_ctx r = {.mc = mc, .src = src, .tag = tag, .err = MPI_SUCCESS};
  if (pt_comm_poll_wait(c, poll_probe, &r) != PT_OK)
    return pt_fail(PT_ERR_COMM,
                   "rank %d: no message from rank %d (tag %d) for %s at step %lld within %g s (--timeout)%s%s",
                   c->rank, src, tag, w, (long long)c->step, c->timeout_s, c->silent[0] ? ": " : "", c->silent);
  if (r.err != MPI_SUCCESS) return mpi_error(mc, r.err);
  int count = 0;
  MPI_Get_count(&r.status, MPI_BYTE, &count);
  /* A message of the wrong size is still received, into a scratch buffer
   * when it would not fit, so that its sender's wait_sends completes. */
  void *into = buf, *scratch = NULL;
  if ((size_t)count > bytes && (scratch = malloc((size_t)count))) into = scratch;
  int rc = MPI_Imrecv(into, into == scratch ? count : (int)bytes, MPI_BYTE, &r.msg, &r.req);
  if (rc != MPI_SUCCESS) {
    free(scratch);
    return mpi_error(mc, rc);
  }
  pt_status st = pt_comm_poll_wait(c, poll_request, &r);
  if (st != PT_OK) {
    /* The buffer may still be written; the job is ending. */
    MPI_Cancel(&r.req);
    MPI_Request_free(&r.req);
    free(scratch);
    return pt_fail(PT_ERR_COMM,
                   "rank %d: the message from rank %d (tag %d) for %s at step %lld did not finish arriving within %g "
                   "s (--timeout)%s%s",
                   c->rank, src, tag, w, (long long)c->step, c->timeout_s, c->silent[0] ? ": " : "", c->silent);
  }
  free(scratch);
  if ((size_t)count != bytes)
    return pt_fail(PT_ERR_STATE, "rank %d: the message from rank %d (tag %d) for %s at step %lld has %d bytes, but %zu were expected",
                   c->rank, src, tag, w, (long long)c->step, count, bytes);
  return r.err == MPI_SUCCESS ? PT_OK : mpi_error(mc, r.err);
}

static pt_status wrap(MPI_Comm comm, double timeout_s, pt_comm **out);

/* MPI_Comm_split waits without a deadline, so the ranks first meet in a
 * non-blocking barrier that can time out: once it completes, every rank is
 * about to split and the split cannot hang on a missing one. */
static pt_status mpi_split(pt_comm *c, int color, int key, pt_comm **out) {
  mpi_comm *mc = (mpi_comm *)c;
  recv_ctx r = {.mc = mc, .err = MPI_SUCCESS};
  int rc = MPI_Ibarrier(mc->comm, &r.req);
  if (rc != MPI_SUCCESS) return mpi_error(mc, rc);
  const char *was = c->what;
  if (!was) c->what = "a communicator split";
  pt_status st = pt_comm_poll_wait(c, poll_request, &r);
  if (st == PT_OK && r.err != MPI_SUCCESS) st = mpi_error(mc, r.err);
  MPI_Comm sub = MPI_COMM_NULL;
  if (st == PT_OK && (rc = MPI_Comm_split(mc->comm, color < 0 ? MPI_UNDEFINED : color, key, &sub)) != MPI_SUCCESS)
    st = mpi_error(mc, rc);
  c->what = was;
  if (st != PT_OK || sub == MPI_COMM_NULL) return st;
  return wrap(sub, c->timeout_s, out);
}

static const pt_comm_ops mpi_ops = {
    .name = "mpi",
    .allreduce_f32 = mpi_allreduce_f32,
    .allreduce_f64 = mpi_allreduce_f64,
    .bcast = mpi_bcast,
    .iallreduce_f32 = mpi_iallreduce_f32,
    .iallreduce_f64 = mpi_iallreduce_f64,
    .progress = mpi_progress,
    .wait_all = mpi_wait_all,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
    .isend = mpi_isend,
    .recv = mpi_recv,
    .wait_sends = mpi_wait_sends,
    .split = mpi_split,
    .answer = mpi_answer,
    .roll_call = mpi_roll_call,
};

/* How many of this machine's ranks may run on a CPU this one may: a
 * launcher that binds each rank to its own cores (srun's task binding,
 * mpirun's) gives each its share already, and dividing it again among
 * every local rank would leave cores idle; unbound, or all held to one
 * set (taskset around mpirun), they share it. */
static int cpu_sharers(MPI_Comm node, int local_size) {
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);
  cpu_set_t *all = malloc(sizeof *all * (size_t)local_size);
  if (!all) return local_size;
  int n = local_size;
  if (MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node) == MPI_SUCCESS &&
      CPU_COUNT(&mine) > 0) {
    n = 0;
    for (int r = 0; r < local_size; r++) {
      cpu_set_t both;
      CPU_AND(&both, &mine, &all[r]);
      n += CPU_COUNT(&both) > 0 || CPU_COUNT(&all[r]) == 0; /* a rank that could not say shares them all */
    }
  }
  free(all);
  return n > 0 ? n : local_size;
}

/* Takes comm over (it is freed on failure too). */
static pt_status wrap(MPI_Comm comm, double timeout_s, pt_comm **out) {
  mpi_comm *mc = calloc(1, sizeof *mc);
  if (!mc) {
    MPI_Comm_free(&comm);
    return pt_fail(PT_ERR_NOMEM, "out of memory creating a communicator");
  }
  mc->comm = comm;
  /* Errors come back as codes, so they reach the user as messages. */
  MPI_Comm_set_errhandler(mc->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mc->comm, &mc->base.rank);
  MPI_Comm_size(mc->comm, &mc->base.size);
  if (MPI_Comm_dup(mc->comm, &mc->gcomm) != MPI_SUCCESS) {
    MPI_Comm_free(&mc->comm);
    free(mc);
    return pt_fail(PT_ERR_COMM, "cannot make the communicator of the gradient sums' gathers (MPI_Comm_dup)");
  }
  MPI_Comm_set_errhandler(mc->gcomm, MPI_ERRORS_RETURN);
  MPI_Comm node;
  MPI_Comm_split_type(mc->comm, MPI_COMM_TYPE_SHARED, mc->base.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &mc->base.local_rank);
  MPI_Comm_size(node, &mc->base.local_size);
  mc->base.cpu_sharers = cpu_sharers(node, mc->base.local_size);
  MPI_Comm_free(&node);
  /* The heartbeat's communicator and every rank's identity: collective, as
   * creating comm was, so no rank can be missing here. Without them the
   * timeouts still work, naming no rank. */
  const int n = mc->base.size;
  mc->hb = MPI_COMM_NULL;
  mc->ids = calloc((size_t)n, sizeof *mc->ids);
  mc->pong = calloc((size_t)n, sizeof *mc->pong);
  mc->pong_req = malloc(sizeof *mc->pong_req * (size_t)n);
  hb_id me = {.pid = (int)getpid()};
  MPI_Comm_rank(MPI_COMM_WORLD, &me.world_rank);
  if (gethostname(me.host, sizeof me.host - 1)) snprintf(me.host, sizeof me.host, "an unknown host");
  const int ok = mc->ids && mc->pong && mc->pong_req;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, mc->comm);
  if (all_ok && MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, mc->ids, (int)sizeof me, MPI_BYTE, mc->comm) == MPI_SUCCESS &&
      MPI_Comm_dup(mc->comm, &mc->hb) == MPI_SUCCESS) {
    MPI_Comm_set_errhandler(mc->hb, MPI_ERRORS_RETURN);
    for (int r = 0; r < n; r++) mc->pong_req[r] = MPI_REQUEST_NULL;
  } else {
    mc->hb = MPI_COMM_NULL;
    free(mc->ids), free(mc->pong), free(mc->pong_req);
    mc->ids = NULL, mc->pong = NULL, mc->pong_req = NULL;
  }
  mc->base.ops = &mpi_ops;
  mc->base.timeout_s = timeout_s;
  *out = &mc->base;
  return PT_OK;
}

/* Every call here waits for every rank (MPI_Init, the communicators' dups,
 * the gather of the ranks' names), and the heartbeat starts only after. */
static pt_status create_world(pt_comm **out, double timeout_s) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    /* Only the training thread calls MPI; the pool and the loader never do. */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return pt_fail(PT_ERR_COMM, "MPI_Init failed");
    we_initialized = 1;
    world_timeout_s = timeout_s;
  }
  MPI_Comm world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  return wrap(world, timeout_s, out);
}

pt_status pt_comm_mpi_create(pt_comm **out, double timeout_s) {
  const long launched = launcher_world();
  pt_watchdog w;
  guard(&w, timeout_s, "the ranks' start (MPI_Init, MPI_Comm_dup)", "to come");
  pt_comm *c;
  const pt_status st = create_world(&c, timeout_s);
  pt_watchdog_stop(&w);
  PT_TRY(st);
  if (launched > 1 && c->size != launched) {
    int size = c->size;
    mpi_destroy(c);
    return pt_fail(PT_ERR_COMM,
                   "the launcher started %ld processes but MPI sees a world of %d: under Slurm, start the ranks "
                   "with 'srun --mpi=pmix' (srun --mpi=list shows what this cluster has)",
                   launched, size);
  }
  *out = c;
  return PT_OK;
}

void pt_comm_mpi_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (we_initialized && !fin) {
    pt_watchdog w;
    guard(&w, world_timeout_s, "MPI_Finalize", "to end");
    MPI_Finalize();
    pt_watchdog_stop(&w);
  }
}

#else

int pt_comm_mpi_available(void) { return 0; }

int pt_comm_mpi_version(char *buf, size_t len) {
  if (len) buf[0] = 0;
  return 0;
}

pt_status pt_comm_mpi_create(pt_comm **out, double timeout_s) {
  (void)out, (void)timeout_s;
  return pt_fail(PT_ERR_ARG,
                 "--parallel ddp needs MPI, and this ptrain was built without it: install Debian's "
                 "libopenmpi-dev and openmpi-bin, then rebuild (make build)");
}

void pt_comm_mpi_finalize(void) {}

#endif
