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

typedef struct {
  const char *name;  /* "self", "threads", "mpi" */
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
} pt_comm_ops;

struct pt_comm {
  const pt_comm_ops *ops;
  int rank, size;
  int local_rank, local_size;  /* within this machine */
  double timeout_s;
  const char *what;            /* the operation in progress, for error messages */
  int64_t step;                /* the training step, for error messages */
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
static inline void pt_comm_abort(pt_comm *c, const char *why) {
  if (c->size > 1) c->ops->abort(c, why);
}
void pt_comm_destroy(pt_comm *c);

/* A world of one: every collective is a no-op. */
pt_status pt_comm_self_create(pt_comm **out);

/* --parallel dp: n workers that are threads of this process. The group
 * owns the shared state; pt_comm_local_get gives worker r its view. */
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
pt_status pt_comm_mpi_create(pt_comm **out, double timeout_s);
/* MPI_Finalize, once, at the end of the program (after every communicator is gone). */
void pt_comm_mpi_finalize(void);

/* Waits on a condition polled by poll(ctx) until it returns non-zero or
 * c's timeout passes. It polls without pause (yielding the core between
 * polls) for a second, since MPI progresses only while it is called, then
 * sleeps between polls. */
pt_status pt_comm_poll_wait(pt_comm *c, int (*poll)(void *ctx), void *ctx);

#endif
