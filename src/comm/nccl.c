/* The GPU communicator: NCCL, with buffers in device memory.
 *
 * Two ways to make one, matching the CPU communicators: a group of
 * communicators for the threads of one process, one GPU each (--parallel
 * dp), or one per MPI rank, its NCCL id passed around over MPI (--parallel
 * ddp).
 *
 * Ordering without the host. Each communicator has a CUDA stream of its
 * own, on which NCCL runs. A collective first makes that stream wait (on
 * the GPU, through an event) for everything the calling thread has queued
 * so far on its own stream (pt_cuda_current_stream: the backward kernels
 * that wrote the gradients), then queues the NCCL operation on it and
 * returns. wait_all makes the thread's stream wait, again through an event
 * and again on the GPU, for everything queued on NCCL's stream, so the
 * optimizer kernels queued after it see the sums. Nothing blocks the host,
 * and a bucket's reduction overlaps the backward kernels that come after
 * it, which one shared stream would serialise.
 *
 * Nothing waits forever. The communicators are NCCL's non-blocking kind
 * (ncclConfig_t.blocking = 0): initialisation and collectives return at
 * once, possibly "in progress", and every wait polls ncclCommGetAsyncError
 * with the communicator's timeout_s, as the MPI communicator does. A
 * collective queued on the GPU has no host wait to bound, so the bound
 * applies where the host does wait: the blocking collectives (allreduce,
 * bcast), and pt_comm_nccl_sync, which the trainer uses instead of a bare
 * stream synchronisation where the thread's stream holds NCCL work. A peer
 * that died then ends the wait with a PT_ERR_COMM naming c->what and
 * c->step, and pt_comm_abort (ncclCommAbort) stops the kernels waiting
 * for it.
 *
 * Aborting a group aborts all its communicators, also those other threads
 * use: a thread stuck in a stream synchronisation behind a collective that
 * its failed peer will never join is freed only by an abort of its own
 * communicator. Each communicator's NCCL handle is therefore used only
 * under its own mutex, held for one NCCL call at a time (never for a
 * wait), and is NULL once aborted.
 *
 * Device numbers are CUDA ordinals, so within CUDA_VISIBLE_DEVICES: with
 * CUDA_VISIBLE_DEVICES=2,3, cuda:0 is the machine's third GPU. The runtime
 * applies it; nothing here reads it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"

int pt_comm_local_gpu(int local_rank, int ngpus) {
  return local_rank >= 0 && ngpus > 0 ? local_rank % ngpus : -1;
}

/* A non-negative decimal, or -1. */
static int env_index(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return -1;
  char *end;
  long x = strtol(v, &end, 10);
  return *end == '\0' && x >= 0 && x < (1L << 30) ? (int)x : -1;
}

/* The launchers' variables, as mpi.c reads the world size: Open MPI's
 * mpirun, MPICH's Hydra, and Slurm's srun (SLURM_LOCALID only inside a job
 * step, as the batch script itself also has one). */
int pt_comm_env_local_rank(void) {
  int r = env_index("OMPI_COMM_WORLD_LOCAL_RANK");
  if (r < 0) r = env_index("MPI_LOCALRANKID");
  if (r < 0 && getenv("SLURM_STEP_ID")) r = env_index("SLURM_LOCALID");
  return r;
}

#ifdef PT_HAVE_NCCL
#include <pthread.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cuda/device.h"
#include "ops/cuda/context.h"

#define MAX_GPUS 1024

typedef struct nccl_comm nccl_comm;
struct nccl_comm {
  pt_comm base;
  pthread_mutex_t mu;
  ncclComm_t comm; /* under mu; NULL once aborted or destroyed */
  int device;
  cudaStream_t stream; /* NCCL's */
  cudaEvent_t ready;   /* the thread's stream up to a collective */
  cudaEvent_t done;    /* NCCL's stream up to wait_all */
  int npending;
  pt_comm_nccl_group *g; /* dp: the group that owns this one */
  pt_comm *mpi;          /* ddp: the communicator it was made over (not owned) */
  /* the outcome of the last poll */
  ncclResult_t err;
  cudaError_t cuda_err;
  int gone;
};

struct pt_comm_nccl_group {
  int n;
  nccl_comm *members; /* (n) */
  pthread_mutex_t mu;
  int failed, failed_rank; /* under mu */
  char why[512];
};

static const char *what(const pt_comm *c, const char *otherwise) { return c->what ? c->what : otherwise; }

static pt_status nccl_fail(nccl_comm *nc, ncclResult_t r, const char *op) {
  /* ncclGetLastError keeps NCCL's own detail ("peer ... closed the
   * connection"); it ignores its argument. */
  const char *detail = ncclGetLastError(NULL);
  return pt_fail(PT_ERR_COMM, "rank %d (cuda:%d): NCCL failed in %s (%s) at step %lld: %s%s%s", nc->base.rank,
                 nc->device, what(&nc->base, "a collective"), op, (long long)nc->base.step, ncclGetErrorString(r),
                 detail && *detail ? ": " : "", detail ? detail : "");
}

static pt_status cuda_fail(nccl_comm *nc, cudaError_t e, const char *op) {
  (void)cudaGetLastError();
  return pt_fail(PT_ERR_DEVICE, "rank %d (cuda:%d): %s for %s at step %lld: %s (%s)", nc->base.rank, nc->device, op,
                 what(&nc->base, "a collective"), (long long)nc->base.step, cudaGetErrorName(e),
                 cudaGetErrorString(e));
}

static int group_failed(nccl_comm *nc) {
  if (!nc->g) return 0;
  pthread_mutex_lock(&nc->g->mu);
  const int f = nc->g->failed;
  pthread_mutex_unlock(&nc->g->mu);
  return f;
}

/* Why a communicator can no longer be used: a worker of its group failed
 * (its message), or it was aborted. */
static pt_status gone_status(nccl_comm *nc) {
  pt_comm_nccl_group *g = nc->g;
  if (g) {
    char why[sizeof g->why];
    pthread_mutex_lock(&g->mu);
    const int failed = g->failed, who = g->failed_rank;
    memcpy(why, g->why, sizeof why);
    pthread_mutex_unlock(&g->mu);
    if (failed && who == nc->base.rank) return pt_fail(PT_ERR_COMM, "%s", why);
    if (failed) return pt_fail(PT_ERR_COMM, "worker %d failed: %s", who, why);
  }
  return pt_fail(PT_ERR_COMM, "rank %d (cuda:%d): the NCCL communicator was aborted before %s at step %lld",
                 nc->base.rank, nc->device, what(&nc->base, "a collective"), (long long)nc->base.step);
}

/* The NCCL handle with the mutex held, or NULL (mutex released) once aborted. */
static ncclComm_t hold(nccl_comm *nc) {
  pthread_mutex_lock(&nc->mu);
  ncclComm_t comm = nc->comm;
  if (!comm) pthread_mutex_unlock(&nc->mu);
  return comm;
}
static void release(nccl_comm *nc) { pthread_mutex_unlock(&nc->mu); }

/* The communicator's state; ncclInProgress while a call has yet to finish. */
static ncclResult_t state(nccl_comm *nc) {
  ncclComm_t comm = hold(nc);
  if (!comm) {
    nc->gone = 1;
    return ncclInvalidUsage;
  }
  ncclResult_t st = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm, &st);
  release(nc);
  return r == ncclSuccess ? st : r;
}

static int poll_state(void *ctx) {
  nccl_comm *nc = ctx;
  if (group_failed(nc)) {
    nc->gone = 1;
    return 1;
  }
  nc->err = state(nc);
  return nc->err != ncclInProgress;
}

/* A non-blocking NCCL call's result: ncclInProgress means it goes on in the
 * background, and NCCL wants no further call on the communicator (nor work
 * on its stream) until it finished. */
static pt_status settle(nccl_comm *nc, ncclResult_t r, const char *op) {
  if (r == ncclSuccess) return PT_OK;
  if (r != ncclInProgress) return nc->gone ? gone_status(nc) : nccl_fail(nc, r, op);
  nc->gone = 0;
  nc->err = ncclSuccess;
  PT_TRY(pt_comm_poll_wait(&nc->base, poll_state, nc));
  if (nc->gone) return gone_status(nc);
  return nc->err == ncclSuccess ? PT_OK : nccl_fail(nc, nc->err, op);
}

/* An error NCCL met in the background (a peer's connection lost), without waiting. */
static pt_status check_async(nccl_comm *nc, const char *op) {
  if (group_failed(nc)) return gone_status(nc);
  nc->gone = 0;
  ncclResult_t st = state(nc);
  if (nc->gone) return gone_status(nc);
  return st == ncclSuccess || st == ncclInProgress ? PT_OK : nccl_fail(nc, st, op);
}

static pt_status wait_device(void *ctx, const char *what, int (*ready)(void *), void *ready_ctx);

/* Collectives are queued behind the calling thread's stream, so the thread
 * must be bound to this communicator's GPU. From its first collective on,
 * the thread's stream may wait for NCCL's, so every host wait of the
 * thread's CUDA backend goes through wait_device from then on. */
static pt_status thread_stream(nccl_comm *nc, cudaStream_t *out) {
  const int dev = pt_cuda_current_device();
  if (dev != nc->device) {
    char bound[32] = "to no GPU";
    if (dev >= 0) snprintf(bound, sizeof bound, "to cuda:%d", dev);
    return pt_fail(PT_ERR_STATE,
                   "rank %d: %s at step %lld on the NCCL communicator of cuda:%d from a thread bound %s "
                   "(pt_cuda_bind(%d) first)",
                   nc->base.rank, what(&nc->base, "a collective"), (long long)nc->base.step, nc->device, bound,
                   nc->device);
  }
  *out = (cudaStream_t)pt_cuda_current_stream();
  if (!*out)
    return pt_fail(PT_ERR_STATE, "rank %d (cuda:%d): the thread is bound but has no stream", nc->base.rank,
                   nc->device);
  pt_cuda_set_wait(wait_device, nc);
  return PT_OK;
}

/* Queues an in-place sum (or, with bcast, a broadcast of count bytes from
 * root) on NCCL's stream, behind the thread's stream. */
static pt_status enqueue(nccl_comm *nc, void *buf, size_t count, ncclDataType_t type, int bcast, int root) {
  const char *op = bcast ? "ncclBroadcast" : "ncclAllReduce";
  cudaStream_t compute;
  PT_TRY(thread_stream(nc, &compute));
  if (nc->npending == PT_COMM_MAX_PENDING)
    return pt_fail(PT_ERR_STATE, "rank %d: more than %d reductions in flight", nc->base.rank, PT_COMM_MAX_PENDING);
  PT_TRY(check_async(nc, op));
  cudaError_t e = cudaEventRecord(nc->ready, compute);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(nc->stream, nc->ready, 0);
  if (e != cudaSuccess) return cuda_fail(nc, e, "ordering NCCL's stream after the thread's");
  nc->gone = 0;
  ncclComm_t comm = hold(nc);
  if (!comm) return gone_status(nc);
  ncclResult_t r = bcast ? ncclBroadcast(buf, buf, count, ncclUint8, root, comm, nc->stream)
                         : ncclAllReduce(buf, buf, count, type, ncclSum, comm, nc->stream);
  release(nc);
  PT_TRY(settle(nc, r, op));
  nc->npending++;
  return PT_OK;
}

/* The stream order completes the reductions: the thread's stream waits, on
 * the GPU, for NCCL's, so whatever the thread queues next (the optimizer)
 * runs on the sums. The host goes on at once; an error NCCL already knows
 * of is reported here, one still to come at the next host wait. */
static pt_status nccl_wait_all(pt_comm *c) {
  nccl_comm *nc = (nccl_comm *)c;
  if (!nc->npending) return check_async(nc, "wait_all");
  cudaStream_t compute;
  PT_TRY(thread_stream(nc, &compute));
  cudaError_t e = cudaEventRecord(nc->done, nc->stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(compute, nc->done, 0);
  if (e != cudaSuccess) return cuda_fail(nc, e, "ordering the thread's stream after NCCL's");
  nc->npending = 0;
  return check_async(nc, "wait_all");
}

typedef struct {
  nccl_comm *nc;
  cudaStream_t stream;
} stream_wait;

static int poll_stream(void *ctx) {
  stream_wait *w = ctx;
  nccl_comm *nc = w->nc;
  if (poll_state(nc) && (nc->gone || nc->err != ncclSuccess)) return 1;
  nc->err = ncclSuccess;
  cudaError_t q = cudaStreamQuery(w->stream);
  if (q == cudaErrorNotReady) return 0;
  nc->cuda_err = q;
  return 1;
}

/* The host waits for stream, bounded by the timeout, watching for NCCL's
 * errors meanwhile: a collective whose peer died never completes, and
 * only NCCL's error state (or the timeout) says so. */
static pt_status host_wait(nccl_comm *nc, cudaStream_t stream) {
  stream_wait w = {nc, stream};
  nc->gone = 0;
  nc->err = ncclSuccess;
  nc->cuda_err = cudaSuccess;
  PT_TRY(pt_comm_poll_wait(&nc->base, poll_stream, &w));
  if (nc->gone) return gone_status(nc);
  if (nc->err != ncclSuccess) return nccl_fail(nc, nc->err, "waiting for the GPU");
  if (nc->cuda_err != cudaSuccess) return cuda_fail(nc, nc->cuda_err, "waiting for the GPU");
  return PT_OK;
}

typedef struct {
  nccl_comm *nc;
  int (*ready)(void *);
  void *ready_ctx;
} device_wait;

static int poll_device(void *ctx) {
  device_wait *w = ctx;
  nccl_comm *nc = w->nc;
  if (poll_state(nc) && (nc->gone || nc->err != ncclSuccess)) return 1;
  nc->err = ncclSuccess;
  return w->ready(w->ready_ctx);
}

/* The CUDA backend's host waits on this thread (pt_cuda_set_wait): for
 * an upload slot, a download, a sync, an allocation. The same bound and
 * error check as host_wait, for waits the backend makes on its own; what
 * names the wait in the timeout's message. */
static pt_status wait_device(void *ctx, const char *what, int (*ready)(void *), void *ready_ctx) {
  nccl_comm *nc = ctx;
  device_wait w = {nc, ready, ready_ctx};
  const char *was = nc->base.what;
  char named[160];
  snprintf(named, sizeof named, "%s (behind NCCL's work on the GPU)", what ? what : "waiting for the GPU");
  nc->base.what = named;
  nc->gone = 0;
  nc->err = ncclSuccess;
  pt_status st = pt_comm_poll_wait(&nc->base, poll_device, &w);
  if (st == PT_OK && nc->gone) st = gone_status(nc);
  else if (st == PT_OK && nc->err != ncclSuccess) st = nccl_fail(nc, nc->err, "waiting for the GPU");
  nc->base.what = was;
  return st;
}

static pt_status blocking(nccl_comm *nc, void *buf, size_t count, ncclDataType_t type, int bcast, int root) {
  PT_TRY(enqueue(nc, buf, count, type, bcast, root));
  PT_TRY(nccl_wait_all(&nc->base));
  return host_wait(nc, nc->stream);
}

static pt_status nccl_iallreduce_f32(pt_comm *c, float *buf, size_t n) {
  return enqueue((nccl_comm *)c, buf, n, ncclFloat32, 0, 0);
}
static pt_status nccl_iallreduce_f64(pt_comm *c, double *buf, size_t n) {
  return enqueue((nccl_comm *)c, buf, n, ncclFloat64, 0, 0);
}
static pt_status nccl_allreduce_f32(pt_comm *c, float *buf, size_t n) {
  return blocking((nccl_comm *)c, buf, n, ncclFloat32, 0, 0);
}
static pt_status nccl_allreduce_f64(pt_comm *c, double *buf, size_t n) {
  return blocking((nccl_comm *)c, buf, n, ncclFloat64, 0, 0);
}
static pt_status nccl_bcast(pt_comm *c, void *buf, size_t bytes, int root) {
  if (root < 0 || root >= c->size)
    return pt_fail(PT_ERR_ARG, "rank %d: broadcast from rank %d, but the communicator has ranks 0 to %d", c->rank,
                   root, c->size - 1);
  return blocking((nccl_comm *)c, buf, bytes, ncclUint8, 1, root);
}

/* The GPU kernels and NCCL's proxy thread move the data on their own. */
static void nccl_progress(pt_comm *c) { (void)c; }

static void abort_one(nccl_comm *nc) {
  pthread_mutex_lock(&nc->mu);
  if (nc->comm) (void)ncclCommAbort(nc->comm);
  nc->comm = NULL;
  pthread_mutex_unlock(&nc->mu);
}

/* Aborts every member still open, all in one NCCL group call: NCCL wants
 * each local member of a communicator aborted, and one thread that owns
 * several must do it as it made them, grouped, or an abort may wait for
 * the members not yet aborted. The mutexes are taken in index order, so
 * two threads aborting at once cannot deadlock, and are held only for the
 * group call (aborts do not wait for peers). */
static void abort_members(nccl_comm *m, int n) {
  for (int r = 0; r < n; r++) pthread_mutex_lock(&m[r].mu);
  int any = 0;
  for (int r = 0; r < n && !any; r++) any = m[r].comm != NULL;
  if (any) {
    (void)ncclGroupStart();
    for (int r = 0; r < n; r++)
      if (m[r].comm) (void)ncclCommAbort(m[r].comm);
    (void)ncclGroupEnd();
  }
  for (int r = 0; r < n; r++) m[r].comm = NULL;
  for (int r = n - 1; r >= 0; r--) pthread_mutex_unlock(&m[r].mu);
}

static void nccl_abort(pt_comm *c, const char *why) {
  nccl_comm *nc = (nccl_comm *)c;
  pt_comm_nccl_group *g = nc->g;
  if (g) {
    pthread_mutex_lock(&g->mu);
    if (!g->failed) {
      g->failed = 1;
      g->failed_rank = c->rank;
      snprintf(g->why, sizeof g->why, "%s", why);
    }
    pthread_mutex_unlock(&g->mu);
    abort_members(g->members, g->n);
    return;
  }
  abort_one(nc);
  if (nc->mpi) pt_comm_abort(nc->mpi, why);
}

/* Point-to-point messages and split are the CPU communicators' job: NCCL
 * has no tags and no unmatched sends, which pt_comm_isend promises. */
static pt_status nccl_isend(pt_comm *c, const void *buf, size_t bytes, int dst, int tag) {
  (void)buf, (void)bytes, (void)tag;
  return pt_fail(PT_ERR_STATE,
                 "rank %d: isend to rank %d: the NCCL communicator carries collectives only; point-to-point "
                 "messages (pipeline stages) go over the MPI or threads communicator",
                 c->rank, dst);
}
static pt_status nccl_recv(pt_comm *c, void *buf, size_t bytes, int src, int tag) {
  (void)buf, (void)bytes, (void)tag;
  return pt_fail(PT_ERR_STATE,
                 "rank %d: recv from rank %d: the NCCL communicator carries collectives only; point-to-point "
                 "messages (pipeline stages) go over the MPI or threads communicator",
                 c->rank, src);
}
static pt_status nccl_wait_sends(pt_comm *c) {
  (void)c;
  return PT_OK; /* no send can have started */
}
static pt_status nccl_split(pt_comm *c, int color, int key, pt_comm **out) {
  (void)color, (void)key, (void)out;
  return pt_fail(PT_ERR_STATE,
                 "rank %d: splitting an NCCL communicator is not supported; split the MPI or threads "
                 "communicator instead (stages and their replicas exchange data through those)",
                 c->rank);
}

static void free_stream(nccl_comm *nc) {
  int prev = 0;
  (void)cudaGetDevice(&prev);
  if (cudaSetDevice(nc->device) == cudaSuccess) {
    if (nc->ready) (void)cudaEventDestroy(nc->ready);
    if (nc->done) (void)cudaEventDestroy(nc->done);
    if (nc->stream) (void)cudaStreamDestroy(nc->stream);
  }
  nc->ready = nc->done = NULL;
  nc->stream = NULL;
  (void)cudaSetDevice(prev);
  (void)cudaGetLastError();
}

/* NCCL's stream gets the GPU's highest priority, so that a bucket's
 * reduction starts as soon as its gradients are ready instead of queueing
 * behind the backward kernels' blocks. */
static pt_status make_stream(nccl_comm *nc) {
  int prev = 0, least = 0, greatest = 0;
  (void)cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(nc->device);
  if (e == cudaSuccess) e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&nc->stream, cudaStreamNonBlocking, greatest);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&nc->ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&nc->done, cudaEventDisableTiming);
  (void)cudaSetDevice(prev);
  if (e != cudaSuccess) {
    pt_status st = cuda_fail(nc, e, "creating NCCL's stream");
    free_stream(nc);
    return st;
  }
  return PT_OK;
}

static int poll_finalized(void *ctx) {
  pt_comm_nccl_group *g = ctx;
  for (int r = 0; r < g->n; r++)
    if (g->members[r].comm && state(&g->members[r]) == ncclInProgress) return 0;
  return 1;
}

/* Finalize flushes what is queued and waits for the peers to do the same,
 * so it too is bounded; whatever does not finish in time is aborted. */
static void close_all(nccl_comm *members, int n) {
  pt_comm_nccl_group tmp = {.n = n, .members = members};
  /* This thread's host waits must not outlive the communicator. */
  for (int r = 0; r < n; r++) pt_cuda_clear_wait(&members[r]);
  int any = 0, failed = 0;
  for (int r = 0; r < n; r++) {
    if (!members[r].comm) continue;
    ncclResult_t res = ncclCommFinalize(members[r].comm);
    if (res != ncclSuccess && res != ncclInProgress) failed = 1;
    else any = 1;
  }
  /* One member that cannot finalize leaves the others waiting for it. */
  if (failed) {
    abort_members(members, n);
    any = 0;
  }
  if (any) {
    pt_comm *c = &members[0].base;
    const char *was = c->what;
    c->what = "closing the NCCL communicator";
    const int ok = pt_comm_poll_wait(c, poll_finalized, &tmp) == PT_OK;
    c->what = was;
    for (int r = 0; r < n; r++) {
      if (!members[r].comm) continue;
      if (ok && state(&members[r]) == ncclSuccess) {
        (void)ncclCommDestroy(members[r].comm);
        members[r].comm = NULL;
      }
    }
    abort_members(members, n); /* those that did not finish in time */
  }
  for (int r = 0; r < n; r++) {
    free_stream(&members[r]);
    pthread_mutex_destroy(&members[r].mu);
  }
}

/* The group owns its members: destroying one alone does nothing. */
static void nccl_destroy(pt_comm *c) {
  nccl_comm *nc = (nccl_comm *)c;
  if (nc->g) return;
  close_all(nc, 1);
  free(nc);
}

static const pt_comm_ops nccl_ops = {
    .name = "nccl",
    .allreduce_f32 = nccl_allreduce_f32,
    .allreduce_f64 = nccl_allreduce_f64,
    .bcast = nccl_bcast,
    .iallreduce_f32 = nccl_iallreduce_f32,
    .iallreduce_f64 = nccl_iallreduce_f64,
    .progress = nccl_progress,
    .wait_all = nccl_wait_all,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
    .isend = nccl_isend,
    .recv = nccl_recv,
    .wait_sends = nccl_wait_sends,
    .split = nccl_split,
};

int pt_comm_nccl_available(void) { return 1; }

int pt_comm_nccl_version(char *buf, size_t len) {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) {
    if (len) buf[0] = '\0';
    return 0;
  }
  /* NCCL changed its encoding at 2.9, from 1000 * major to 10000 * major. */
  const int scale = v >= 10000 ? 10000 : 1000;
  snprintf(buf, len, "NCCL %d.%d.%d", v / scale, v % scale / 100, v % 100);
  return 1;
}

pt_status pt_comm_nccl_sync(pt_comm *c) {
  if (!c || c->ops != &nccl_ops) return PT_OK;
  nccl_comm *nc = (nccl_comm *)c;
  cudaStream_t compute;
  PT_TRY(thread_stream(nc, &compute));
  return host_wait(nc, compute);
}

static void init_member(nccl_comm *nc, int rank, int size, int device, double timeout_s) {
  nc->base = (pt_comm){.ops = &nccl_ops, .rank = rank, .size = size, .local_rank = rank, .local_size = size,
                       .timeout_s = timeout_s};
  nc->device = device;
  pthread_mutex_init(&nc->mu, NULL);
}

static pt_status check_device(int device, const char *who) {
  int n = 0;
  char why[256];
  PT_TRY(pt_cuda_device_count(&n, why, sizeof why));
  if (n == 0) return pt_fail(PT_ERR_DEVICE, "%s: cuda:%d: %s", who, device, why);
  if (device < 0 || device >= n)
    return pt_fail(PT_ERR_ARG, "%s: cuda:%d: no such device (this machine has cuda:0 to cuda:%d)", who, device,
                   n - 1);
  return PT_OK;
}

static ncclConfig_t nonblocking_config(void) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

static int poll_init(void *ctx) {
  pt_comm_nccl_group *g = ctx;
  for (int r = 0; r < g->n; r++) {
    nccl_comm *nc = &g->members[r];
    if (!nc->comm) continue;
    nc->err = state(nc);
    if (nc->err == ncclInProgress) return 0;
  }
  return 1;
}

static void group_free(pt_comm_nccl_group *g) {
  pthread_mutex_destroy(&g->mu);
  free(g->members);
  free(g);
}

pt_status pt_comm_nccl_group_create(pt_comm_nccl_group **out, int n, const int *devices, double timeout_s) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_comm_nccl_group_create: out is NULL");
  *out = NULL;
  if (n < 1 || n > MAX_GPUS) return pt_fail(PT_ERR_ARG, "%d GPU workers: expected 1 to %d", n, MAX_GPUS);
  if (!devices) return pt_fail(PT_ERR_ARG, "pt_comm_nccl_group_create: devices is NULL");
  for (int i = 0; i < n; i++) {
    PT_TRY(check_device(devices[i], "data parallel on GPUs"));
    for (int j = 0; j < i; j++)
      if (devices[j] == devices[i])
        return pt_fail(PT_ERR_ARG,
                       "cuda:%d is given to workers %d and %d: NCCL needs a GPU of its own for each worker",
                       devices[i], j, i);
  }
  pt_comm_nccl_group *g = calloc(1, sizeof *g);
  nccl_comm *m = calloc((size_t)n, sizeof *m);
  if (!g || !m) {
    free(g);
    free(m);
    return pt_fail(PT_ERR_NOMEM, "out of memory creating %d GPU workers", n);
  }
  g->n = n;
  g->members = m;
  pthread_mutex_init(&g->mu, NULL);
  for (int r = 0; r < n; r++) {
    init_member(&m[r], r, n, devices[r], timeout_s);
    m[r].g = g;
  }

  pt_status st = PT_OK;
  ncclUniqueId id;
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess) st = nccl_fail(&m[0], res, "ncclGetUniqueId");
  if (st == PT_OK) {
    /* One thread starts every rank, so the inits go in one group: alone,
     * each would wait for the others to join. */
    ncclConfig_t cfg = nonblocking_config();
    int prev = 0;
    (void)cudaGetDevice(&prev);
    res = ncclGroupStart();
    for (int r = 0; r < n && res == ncclSuccess; r++) {
      cudaError_t e = cudaSetDevice(devices[r]);
      if (e != cudaSuccess) {
        st = cuda_fail(&m[r], e, "selecting the GPU");
        break;
      }
      res = ncclCommInitRankConfig(&m[r].comm, n, id, r, &cfg);
      if (res == ncclInProgress) res = ncclSuccess;
    }
    ncclResult_t end = ncclGroupEnd();
    (void)cudaSetDevice(prev);
    if (st == PT_OK && res != ncclSuccess) st = nccl_fail(&m[0], res, "ncclCommInitRankConfig");
    if (st == PT_OK && end != ncclSuccess && end != ncclInProgress) st = nccl_fail(&m[0], end, "ncclGroupEnd");
  }
  if (st == PT_OK) {
    const char *was = m[0].base.what;
    m[0].base.what = "the NCCL initialisation";
    st = pt_comm_poll_wait(&m[0].base, poll_init, g);
    for (int r = 0; r < n && st == PT_OK; r++)
      if (m[r].err != ncclSuccess) st = nccl_fail(&m[r], m[r].err, "ncclCommInitRankConfig");
    m[0].base.what = was;
  }
  for (int r = 0; r < n && st == PT_OK; r++) st = make_stream(&m[r]);
  if (st != PT_OK) {
    abort_members(m, n);
    close_all(m, n);
    group_free(g);
    return st;
  }
  *out = g;
  return PT_OK;
}

pt_comm *pt_comm_nccl_get(pt_comm_nccl_group *g, int rank) {
  return g && rank >= 0 && rank < g->n ? &g->members[rank].base : NULL;
}

void pt_comm_nccl_group_destroy(pt_comm_nccl_group *g) {
  if (!g) return;
  close_all(g->members, g->n);
  group_free(g);
}

/* A UUID as 16 bytes in 3 doubles of at most 6 bytes each: below 2^48, so
 * exact, and a sum with the other ranks' zeros leaves it unchanged. */
#define UUID_SLOTS 3
static void pack_uuid(const unsigned char u[16], double *d) {
  for (int k = 0; k < UUID_SLOTS; k++) {
    uint64_t v = 0;
    for (int b = 0; b < 6 && 6 * k + b < 16; b++) v |= (uint64_t)u[6 * k + b] << (8 * b);
    d[k] = (double)v + 1.0; /* never 0, so a slot left empty shows */
  }
}

static void format_uuid(const double *d, char *out, size_t size) {
  unsigned char u[18] = {0};
  for (int k = 0; k < UUID_SLOTS; k++) {
    const uint64_t v = (uint64_t)(d[k] - 1.0);
    for (int b = 0; b < 6; b++) u[6 * k + b] = (unsigned char)(v >> (8 * b));
  }
  snprintf(out, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
           u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* Every rank learns every rank's GPU, so all reach the same verdict and
 * either all go on to NCCL or none does. */
static pt_status find_shared_gpu(pt_comm *mpi, int device, int *shared, char *why, size_t why_size) {
  const int n = mpi->size;
  double *all = calloc((size_t)n * UUID_SLOTS, sizeof *all);
  if (!all) return pt_fail(PT_ERR_NOMEM, "out of memory comparing the GPUs of %d ranks", n);
  unsigned char uuid[16];
  pt_status mine = pt_cuda_device_uuid(device, uuid);
  if (mine == PT_OK) pack_uuid(uuid, all + (size_t)mpi->rank * UUID_SLOTS);
  else all[(size_t)mpi->rank * UUID_SLOTS] = -1; /* tells the others this rank has no GPU to offer */
  const char *was = mpi->what;
  mpi->what = "comparing the ranks' GPUs";
  pt_status st = pt_comm_allreduce_f64(mpi, all, (size_t)n * UUID_SLOTS);
  mpi->what = was;
  if (st != PT_OK || mine != PT_OK) {
    free(all);
    return st != PT_OK ? st : pt_wrap(mine, "rank %d", mpi->rank);
  }
  for (int i = 0; i < n; i++)
    if (all[(size_t)i * UUID_SLOTS] < 0) {
      free(all);
      return pt_fail(PT_ERR_DEVICE, "rank %d could not use its GPU (its own message says why)", i);
    }
  for (int i = 0; i < n && !*shared; i++)
    for (int j = i + 1; j < n && !*shared; j++)
      if (!memcmp(all + (size_t)i * UUID_SLOTS, all + (size_t)j * UUID_SLOTS, UUID_SLOTS * sizeof *all)) {
        *shared = 1;
        char name[64];
        format_uuid(all + (size_t)i * UUID_SLOTS, name, sizeof name);
        if (why && why_size)
          snprintf(why, why_size,
                   "ranks %d and %d share the GPU %s, and NCCL needs a GPU of its own for each rank "
                   "(start at most as many ranks per machine as it has GPUs)",
                   i, j, name);
      }
  free(all);
  return PT_OK;
}

pt_status pt_comm_nccl_create(pt_comm **out, pt_comm *mpi, int device, double timeout_s, int *shared_gpu, char *why,
                              size_t why_size) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_comm_nccl_create: out is NULL");
  *out = NULL;
  if (shared_gpu) *shared_gpu = 0;
  if (why && why_size) why[0] = '\0';
  if (!mpi || !shared_gpu) return pt_fail(PT_ERR_ARG, "pt_comm_nccl_create: %s is NULL", mpi ? "shared_gpu" : "mpi");

  PT_TRY(find_shared_gpu(mpi, device, shared_gpu, why, why_size));
  if (*shared_gpu) return PT_OK;

  /* Rank 0's id, and whether it has one: a rank 0 that failed must not
   * leave the others waiting for an id that never comes. */
  struct {
    int32_t ok;
    ncclUniqueId id;
  } hello;
  memset(&hello, 0, sizeof hello);
  ncclResult_t res = ncclSuccess;
  if (mpi->rank == 0) {
    res = ncclGetUniqueId(&hello.id);
    hello.ok = res == ncclSuccess;
  }
  const char *was = mpi->what;
  mpi->what = "passing the NCCL id";
  pt_status st = pt_comm_bcast(mpi, &hello, sizeof hello, 0);
  mpi->what = was;
  if (st != PT_OK) return st;
  if (!hello.ok)
    return mpi->rank == 0 ? pt_fail(PT_ERR_COMM, "rank 0: ncclGetUniqueId failed: %s", ncclGetErrorString(res))
                          : pt_fail(PT_ERR_COMM, "rank %d: rank 0 could not make an NCCL id (its own message says why)",
                                    mpi->rank);

  nccl_comm *nc = calloc(1, sizeof *nc);
  if (!nc) return pt_fail(PT_ERR_NOMEM, "out of memory creating the NCCL communicator");
  init_member(nc, mpi->rank, mpi->size, device, timeout_s);
  nc->base.local_rank = mpi->local_rank;
  nc->base.local_size = mpi->local_size;
  nc->base.cpu_sharers = mpi->cpu_sharers;
  nc->mpi = mpi;

  ncclConfig_t cfg = nonblocking_config();
  int prev = 0;
  (void)cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    st = cuda_fail(nc, e, "selecting the GPU");
  } else {
    res = ncclCommInitRankConfig(&nc->comm, mpi->size, hello.id, mpi->rank, &cfg);
    nc->base.what = "the NCCL initialisation";
    st = settle(nc, res, "ncclCommInitRankConfig");
    nc->base.what = NULL;
  }
  (void)cudaSetDevice(prev);
  if (st == PT_OK) st = make_stream(nc);
  if (st != PT_OK) {
    abort_one(nc);
    close_all(nc, 1);
    free(nc);
    return st;
  }
  *out = &nc->base;
  return PT_OK;
}

#else /* no NCCL */

#ifdef PT_HAVE_CUDA
static const char without[] =
    "this ptrain was built without NCCL (CUDA it has): install NCCL's development files (nccl.h and "
    "libnccl.so; Debian and NVIDIA's repositories call them libnccl-dev) and rebuild";
#else
static const char without[] =
    "this ptrain was built without NCCL, and without CUDA: install the CUDA toolkit and NCCL, then rebuild";
#endif

int pt_comm_nccl_available(void) { return 0; }

int pt_comm_nccl_version(char *buf, size_t len) {
  if (len) buf[0] = '\0';
  return 0;
}

pt_status pt_comm_nccl_group_create(pt_comm_nccl_group **out, int n, const int *devices, double timeout_s) {
  (void)n, (void)devices, (void)timeout_s;
  if (out) *out = NULL;
  return pt_fail(PT_ERR_DEVICE, "data parallel on GPUs needs NCCL; %s", without);
}

pt_comm *pt_comm_nccl_get(pt_comm_nccl_group *g, int rank) {
  (void)g, (void)rank;
  return NULL;
}

void pt_comm_nccl_group_destroy(pt_comm_nccl_group *g) { (void)g; }

pt_status pt_comm_nccl_create(pt_comm **out, pt_comm *mpi, int device, double timeout_s, int *shared_gpu, char *why,
                              size_t why_size) {
  (void)mpi, (void)device, (void)timeout_s;
  if (out) *out = NULL;
  if (shared_gpu) *shared_gpu = 0;
  if (why && why_size) why[0] = '\0';
  return pt_fail(PT_ERR_DEVICE, "--parallel ddp on GPUs needs NCCL; %s", without);
}

pt_status pt_comm_nccl_sync(pt_comm *c) {
  (void)c;
  return PT_OK;
}

#endif
