/* The communicator of --parallel ddp: MPI (Open MPI), one process per rank,
 * on one machine or many. Reductions are MPI's non-blocking collectives so
 * that gradient buckets travel while the backward pass goes on; every wait
 * polls with a deadline, so a rank that died or hangs ends the job with a
 * message instead of hanging it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#ifdef PT_HAVE_MPI
#include <mpi.h>

typedef struct {
  pt_comm base;
  MPI_Comm comm;
  int npending;
  MPI_Request req[PT_COMM_MAX_PENDING];
  int err;  /* an MPI error code from the last poll, or MPI_SUCCESS */
} mpi_comm;

static int we_initialized;

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

static int poll_all(void *ctx) {
  mpi_comm *mc = ctx;
  int done = 0;
  int rc = MPI_Testall(mc->npending, mc->req, &done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    mc->err = rc;
    return 1;
  }
  return done;
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
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, type, MPI_SUM, mc->comm, &mc->req[mc->npending]);
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
    int rc = MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, mc->comm, &mc->req[mc->npending]);
    if (rc != MPI_SUCCESS) return mpi_error(mc, rc);
    mc->npending++;
    PT_TRY(mpi_wait_all(c));
  }
  return PT_OK;
}

static void mpi_progress(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  int done;
  if (mc->npending) MPI_Testall(mc->npending, mc->req, &done, MPI_STATUSES_IGNORE);
}

static void mpi_abort(pt_comm *c, const char *why) {
  fprintf(stderr, "ptrain: rank %d of %d failed (%s); stopping every rank\n", c->rank, c->size, why);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void mpi_destroy(pt_comm *c) {
  mpi_comm *mc = (mpi_comm *)c;
  MPI_Comm_free(&mc->comm);
  free(mc);
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
};

pt_status pt_comm_mpi_create(pt_comm **out, double timeout_s) {
  const long launched = launcher_world();
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    /* Only the training thread calls MPI; the pool and the loader never do. */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return pt_fail(PT_ERR_COMM, "MPI_Init failed");
    we_initialized = 1;
  }
  mpi_comm *mc = calloc(1, sizeof *mc);
  if (!mc) return pt_fail(PT_ERR_NOMEM, "out of memory creating a communicator");
  MPI_Comm_dup(MPI_COMM_WORLD, &mc->comm);
  /* Errors come back as codes, so they reach the user as messages. */
  MPI_Comm_set_errhandler(mc->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mc->comm, &mc->base.rank);
  MPI_Comm_size(mc->comm, &mc->base.size);
  MPI_Comm node;
  MPI_Comm_split_type(mc->comm, MPI_COMM_TYPE_SHARED, mc->base.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &mc->base.local_rank);
  MPI_Comm_size(node, &mc->base.local_size);
  MPI_Comm_free(&node);
  mc->base.ops = &mpi_ops;
  mc->base.timeout_s = timeout_s;
  if (launched > 1 && mc->base.size != launched) {
    int size = mc->base.size;
    mpi_destroy(&mc->base);
    return pt_fail(PT_ERR_COMM,
                   "the launcher started %ld processes but MPI sees a world of %d: under Slurm, start the ranks "
                   "with 'srun --mpi=pmix' (srun --mpi=list shows what this cluster has)",
                   launched, size);
  }
  *out = &mc->base;
  return PT_OK;
}

void pt_comm_mpi_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (we_initialized && !fin) MPI_Finalize();
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
