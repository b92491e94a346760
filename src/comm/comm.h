/* Communicators: what data-parallel training needs from the other workers,
 * behind one interface so the training loop is the same for one worker,
 * for workers that are threads of one process (--parallel dp) and for
 * workers that are processes on one or many machines (--parallel ddp, MPI).
 *
 * Every collective is called by all ranks in the same order, as in MPI.
 * Results are identical on every rank, and for a given world size they are
 * the same from run to run: reductions sum in a fixed order.
 *
 * Nothing waits forever. A collective that gets no answer from its peers
 * within the communicator's timeout fails with a message saying which
 * operation and which step, and pt_comm_abort takes the other ranks down,
 * so a dead or stuck worker ends the job instead of hanging it.
 *
 * Pipeline parallelism adds point-to-point messages between two ranks
 * (activations forward, gradients back) and pt_comm_split, which carves a
 * communicator into groups (the stages, or the replicas of one stage).
 */
#ifndef PT_COMM_COMM_H
#define PT_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct pt_comm pt_comm;

/* Asynchronous reductions are started one after another and finished
 * together by pt_comm_wait_all; this many may be in flight. */
#define PT_COMM_MAX_PENDING 64

/* A rank may have this many isends not yet completed by pt_comm_wait_sends,
 * and (threads) this many messages waiting to be received. The bound is
 * fixed so that sending allocates nothing while training. */
#define PT_COMM_MAX_SENDS 4096
/* Tags are 0 .. PT_COMM_TAG_LIMIT-1: what every MPI guarantees. */
#define PT_COMM_TAG_LIMIT 32768

typedef struct {
  const char *name;  /* "self", "threads", "mpi", "nccl" */
  pt_status (*allreduce_f32)(pt_comm *c, float *buf, size_t n);
  pt_status (*allreduce_f64)(pt_comm *c, double *buf, size_t n);
  pt_status (*bcast)(pt_comm *c, void *buf, size_t bytes, int root);
  /* Starts an in-place sum; buf must not be touched until wait_all. */
  pt_status (*iallreduce_f32)(pt_comm *c, float *buf, size_t n);
  pt_status (*iallreduce_f64)(pt_comm *c, double *buf, size_t n);
  /* Lets started reductions advance (MPI moves data only inside its calls). */
  void (*progress)(pt_comm *c);
  pt_status (*wait_all)(pt_comm *c);
  /* Ends the whole job after this rank failed: the other ranks stop with
   * an error naming this rank and why. */
  void (*abort)(pt_comm *c, const char *why);
  void (*destroy)(pt_comm *c);
  /* Point-to-point and split; see the wrappers below. Peers and tags are
   * checked before these are called. */
  pt_status (*isend)(pt_comm *c, const void *buf, size_t bytes, int dst, int tag);
  pt_status (*recv)(pt_comm *c, void *buf, size_t bytes, int src, int tag);
  pt_status (*wait_sends)(pt_comm *c);
  pt_status (*split)(pt_comm *c, int color, int key, pt_comm **out);
  /* Optional (processes only): the heartbeat. answer replies to the roll
   * calls of ranks that gave up waiting; pt_comm_poll_wait calls it while
   * this rank waits. roll_call, on a timeout, asks every other rank to
   * answer and writes into buf which did not, and who they are. */
  void (*answer)(pt_comm *c);
  void (*roll_call)(pt_comm *c, char *buf, size_t len);
} pt_comm_ops;

struct pt_comm {
  const pt_comm_ops *ops;
  int rank, size;
  int local_rank, local_size;  /* within this machine */
  /* Of those, the ranks whose CPUs overlap this one's, itself included:
   * the ones its CPUs are divided among (all of them unbound, one where
   * each is bound to its own cores); 0: not known, take local_size. */
  int cpu_sharers;
  double timeout_s;
  const char *what;            /* the operation in progress, for error messages */
  int64_t step;                /* the training step, for error messages */
  /* After a timeout: the roll call's findings ("rank 1 (pid 42 on node3)
   * did not answer ..."), for the message; empty when there were none. */
  char silent[512];
};

static inline pt_status pt_comm_allreduce_f32(pt_comm *c, float *buf, size_t n) {
  return c->size == 1 ? PT_OK : c->ops->allreduce_f32(c, buf, n);
}
static inline pt_status pt_comm_allreduce_f64(pt_comm *c, double *buf, size_t n) {
  return c->size == 1 ? PT_OK : c->ops->allreduce_f64(c, buf, n);
}
static inline pt_status pt_comm_bcast(pt_comm *c, void *buf, size_t bytes, int root) {
  return c->size == 1 ? PT_OK : c->ops->bcast(c, buf, bytes, root);
}
static inline pt_status pt_comm_iallreduce_f32(pt_comm *c, float *buf, size_t n) {
  return c->size == 1 ? PT_OK : c->ops->iallreduce_f32(c, buf, n);
}
static inline pt_status pt_comm_iallreduce_f64(pt_comm *c, double *buf, size_t n) {
  return c->size == 1 ? PT_OK : c->ops->iallreduce_f64(c, buf, n);
}
static inline void pt_comm_progress(pt_comm *c) {
  if (c->size > 1 && c->ops->progress) c->ops->progress(c);
}
static inline pt_status pt_comm_wait_all(pt_comm *c) {
  return c->size == 1 ? PT_OK : c->ops->wait_all(c);
}
/* Not skipped for a size of one: a communicator split off a larger one can
 * have a single rank, and its abort must still end the whole job. */
static inline void pt_comm_abort(pt_comm *c, const char *why) { c->ops->abort(c, why); }
void pt_comm_destroy(pt_comm *c);

/* PT_ERR_ARG naming op when peer is not a rank of c or tag is outside
 * 0 .. PT_COMM_TAG_LIMIT-1. */
pt_status pt_comm_check_peer(const pt_comm *c, const char *op, int peer, int tag);

/* Starts sending bytes of buf to rank dst with tag. It never waits for the
 * receiver, so buf may be read any time later (threads copy straight from
 * it at the receive) and must stay untouched until pt_comm_wait_sends
 * returns. Fails (PT_ERR_STATE) rather than waits
 * when PT_COMM_MAX_SENDS messages are already outstanding. A world of one
 * (pt_comm_self_create) has no peer and refuses. */
static inline pt_status pt_comm_isend(pt_comm *c, const void *buf, size_t bytes, int dst, int tag) {
  PT_TRY(pt_comm_check_peer(c, "isend to", dst, tag));
  return c->ops->isend(c, buf, bytes, dst, tag);
}
/* Receives the message with tag from src into buf, which must be exactly
 * as long as the message: a different size fails (PT_ERR_STATE, naming
 * both sizes) and the message is consumed. Messages with the same (src,
 * tag) arrive in the order they were sent; different tags may be received
 * in any order. Waits at most timeout_s, then fails with PT_ERR_COMM
 * naming src, c->what and c->step; a pt_comm_abort elsewhere fails it at
 * once with the abort's message. */
static inline pt_status pt_comm_recv(pt_comm *c, void *buf, size_t bytes, int src, int tag) {
  PT_TRY(pt_comm_check_peer(c, "recv from", src, tag));
  return c->ops->recv(c, buf, bytes, src, tag);
}
/* Waits until every isend of this rank on c has completed, so its buffers
 * may be reused; bounded by timeout_s and failed by an abort like recv.
 * After a failure the job is ending: the threads communicator withdraws
 * the messages not yet received (their buffers may then be freed), MPI
 * keeps them until MPI_Abort. */
static inline pt_status pt_comm_wait_sends(pt_comm *c) { return c->ops->wait_sends(c); }
/* As MPI_Comm_split, and like it called by every rank of c: ranks with the
 * same color >= 0 form a new communicator, ranked by key (ties by rank in
 * c); a negative color joins none and gets *out == NULL. *out inherits
 * timeout_s, its local_rank/local_size count its ranks on this machine, and
 * the caller destroys it (pt_comm_destroy) before c. pt_comm_abort on it
 * still ends the whole job. */
static inline pt_status pt_comm_split(pt_comm *c, int color, int key, pt_comm **out) {
  *out = NULL;
  return c->ops->split(c, color, key, out);
}

/* A world of one: every collective is a no-op. */
pt_status pt_comm_self_create(pt_comm **out);

/* --parallel dp: n workers that are threads of this process. The group
 * owns the shared state; pt_comm_local_get gives worker r its view.
 * Communicators split from it share its failure mark, so an abort on any
 * of them stops every worker; destroy them before the group. */
typedef struct pt_comm_local_group pt_comm_local_group;
pt_status pt_comm_local_group_create(pt_comm_local_group **out, int n, double timeout_s);
pt_comm *pt_comm_local_get(pt_comm_local_group *g, int rank);
void pt_comm_local_group_destroy(pt_comm_local_group *g);

/* --parallel ddp: MPI_COMM_WORLD. Fails with a message that says how to
 * launch when this build has no MPI or the process was not started by a
 * launcher (mpirun, srun). */
int pt_comm_mpi_available(void);
/* The MPI library's name and version ("Open MPI v4.1.4, ..."), first line;
 * returns 0 without MPI. */
int pt_comm_mpi_version(char *buf, size_t len);
/* True when a launcher started this process as one of several ranks. */
int pt_comm_mpi_launched(void);
/* The ranks a launcher says it started (1 for mpirun -np 1), 0 for none. */
int pt_comm_mpi_launcher_ranks(void);
pt_status pt_comm_mpi_create(pt_comm **out, double timeout_s);
/* MPI_Finalize, once, at the end of the program (after every communicator is gone). */
void pt_comm_mpi_finalize(void);

/* After each rank's start-up checks, before anything waits on another
 * rank: every rank's outcome (0 passed; a positive kind, the caller's,
 * where it failed). *first is the lowest rank that failed (-1: none) and
 * *first_outcome its kind; with why, every rank gets that rank's message
 * (pt_error_message) in why. Fails only where the ranks cannot agree (one
 * is dead, or hangs). */
pt_status pt_comm_agree_checks(pt_comm *comm, int outcome, int *first, int *first_outcome, char *why,
                               size_t why_len);

/* Collectives on device memory (a GPU backend's) over host, whose ranks
 * it shares: each copies the buffer to a host buffer of max_bytes, runs on
 * host and copies back. The fallback where NCCL cannot run (several ranks
 * on one GPU, or no NCCL); host outlives it. */
struct pt_backend;
pt_status pt_comm_staging_create(pt_comm **out, pt_comm *host, const struct pt_backend *be, size_t max_bytes);

/* GPUs: NCCL. Buffers are device pointers on the communicator's GPU, and
 * a thread uses its communicator only after pt_cuda_bind(its device)
 * (src/ops/cuda/context.h). Reductions are queued on the GPU behind the
 * thread's stream and wait_all orders the thread's stream after them, so
 * neither waits on the host; allreduce and bcast do wait, bounded by
 * timeout_s. isend, recv and split are refused (PT_ERR_STATE): pipeline
 * stages talk over the MPI or threads communicator. Device numbers are
 * CUDA's, within CUDA_VISIBLE_DEVICES. Builds without NCCL have these
 * functions too; they fail saying "built without NCCL". */
int pt_comm_nccl_available(void);
/* "NCCL 2.28.9", of the library loaded; returns 0 without NCCL. */
int pt_comm_nccl_version(char *buf, size_t len);
/* --parallel dp on GPUs: worker r of n (a thread) on GPU devices[r], all
 * distinct. As with the threads group, the group owns the communicators:
 * pt_comm_destroy on one does nothing, and an abort on any stops all. */
typedef struct pt_comm_nccl_group pt_comm_nccl_group;
pt_status pt_comm_nccl_group_create(pt_comm_nccl_group **out, int n, const int *devices, double timeout_s);
pt_comm *pt_comm_nccl_get(pt_comm_nccl_group *g, int rank);
void pt_comm_nccl_group_destroy(pt_comm_nccl_group *g);
/* --parallel ddp on GPUs: called by every rank of mpi (pt_comm_mpi_create)
 * with its GPU; rank r of the result is rank r of mpi, which must outlive
 * it (pt_comm_abort on the result aborts NCCL, then mpi). When two ranks
 * would share a GPU, which NCCL refuses, every rank gets PT_OK, *out NULL,
 * *shared_gpu 1 and, in why (may be NULL), which ranks and GPU: the caller
 * falls back to mpi with host copies and warns. */
pt_status pt_comm_nccl_create(pt_comm **out, pt_comm *mpi, int device, double timeout_s, int *shared_gpu, char *why,
                              size_t why_size);
/* Waits on the host for the calling thread's stream, as long as timeout_s
 * at most and failing with NCCL's error if a collective on it failed: use
 * it where the host must wait for a stream that holds NCCL work, since a
 * plain synchronisation would wait forever for a dead peer. Returns PT_OK
 * at once for communicators that are not NCCL's. */
pt_status pt_comm_nccl_sync(pt_comm *c);

/* This process's rank on its machine from the launcher's environment
 * (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's
 * SLURM_LOCALID in a job step), or -1: for choosing a GPU before MPI is
 * up. Once it is, comm->local_rank says the same, counted by MPI. */
int pt_comm_env_local_rank(void);
/* The GPU for a local rank: local_rank % ngpus, ngpus being the CUDA
 * devices visible (so CUDA_VISIBLE_DEVICES applies); -1 when either is
 * negative or ngpus is 0. */
int pt_comm_local_gpu(int local_rank, int ngpus);

/* Waits on a condition polled by poll(ctx) until it returns non-zero or
 * c's timeout passes. It polls without pause (yielding the core between
 * polls) for a second, since MPI progresses only while it is called, then
 * sleeps between polls. While it waits, it answers the other ranks' roll
 * calls; when the timeout passes, it makes one (c->silent), so that the
 * message names the rank that is stopped or hung, not only "the others". */
pt_status pt_comm_poll_wait(pt_comm *c, int (*poll)(void *ctx), void *ctx);

#endif
