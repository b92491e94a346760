/* The NCCL communicator. What needs no GPU runs everywhere: the local-rank
 * helpers, the answers of a build without NCCL, and the failures on a
 * machine without a GPU, including under mpirun, where every rank must
 * fail alike instead of some waiting for the others. What needs GPUs runs
 * where they are: one GPU checks the ordering of NCCL's stream against the
 * thread's; two check sums across GPUs, a timeout and an abort; under
 * mpirun, each rank takes a GPU by local rank, and ranks sharing one are
 * told so. Elsewhere the test reports itself skipped (77) with the reason.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "comm/comm.h"
#include "cuda/device.h"

#ifdef PT_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "ops/cuda/context.h"
#endif

static void test_local_gpu(void **s) {
  (void)s;
  assert_int_equal(pt_comm_local_gpu(0, 4), 0);
  assert_int_equal(pt_comm_local_gpu(5, 4), 1);
  assert_int_equal(pt_comm_local_gpu(3, 1), 0);
  assert_int_equal(pt_comm_local_gpu(0, 0), -1);
  assert_int_equal(pt_comm_local_gpu(-1, 2), -1);
}

static void test_env_local_rank(void **s) {
  (void)s;
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("MPI_LOCALRANKID");
  unsetenv("SLURM_LOCALID");
  unsetenv("SLURM_STEP_ID");
  assert_int_equal(pt_comm_env_local_rank(), -1);
  /* A batch script has SLURM_LOCALID too, but is no job step. */
  setenv("SLURM_LOCALID", "3", 1);
  assert_int_equal(pt_comm_env_local_rank(), -1);
  setenv("SLURM_STEP_ID", "0", 1);
  assert_int_equal(pt_comm_env_local_rank(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  assert_int_equal(pt_comm_env_local_rank(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x1", 1);
  assert_int_equal(pt_comm_env_local_rank(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "-2", 1);
  assert_int_equal(pt_comm_env_local_rank(), 3);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("SLURM_LOCALID");
  unsetenv("SLURM_STEP_ID");
}

static void test_availability(void **s) {
  (void)s;
  char v[64] = "unset";
#ifdef PT_HAVE_NCCL
  assert_int_equal(pt_comm_nccl_available(), 1);
  assert_int_equal(pt_comm_nccl_version(v, sizeof v), 1);
  print_message("%s\n", v);
  assert_memory_equal(v, "NCCL 2.", 7);
#else
  assert_int_equal(pt_comm_nccl_available(), 0);
  assert_int_equal(pt_comm_nccl_version(v, sizeof v), 0);
  assert_string_equal(v, "");
#endif
}

static void test_arguments(void **s) {
  (void)s;
  pt_comm_nccl_group *g = (pt_comm_nccl_group *)&g;
  const int dev[] = {0, 1};
  if (!pt_comm_nccl_available()) return;
  assert_int_equal(pt_comm_nccl_group_create(&g, 0, dev, 5), PT_ERR_ARG);
  assert_null(g);
  assert_int_equal(pt_comm_nccl_group_create(&g, 1, NULL, 5), PT_ERR_ARG);
  assert_int_equal(pt_comm_nccl_group_create(NULL, 1, dev, 5), PT_ERR_ARG);
  assert_null(pt_comm_nccl_get(NULL, 0));
  pt_comm_nccl_group_destroy(NULL);
  pt_comm *self;
  assert_int_equal(pt_comm_self_create(&self), PT_OK);
  pt_comm *c = (pt_comm *)&c;
  assert_int_equal(pt_comm_nccl_create(&c, self, 0, 5, NULL, NULL, 0), PT_ERR_ARG);
  assert_null(c);
  /* Not an NCCL communicator: nothing to wait for. */
  assert_int_equal(pt_comm_nccl_sync(self), PT_OK);
  pt_comm_destroy(self);
}

/* Without NCCL or without a GPU, both constructors fail and say why. */
static void test_unusable(void **s) {
  (void)s;
  const int dev[] = {0};
  pt_comm_nccl_group *g = (pt_comm_nccl_group *)&g;
  assert_int_equal(pt_comm_nccl_group_create(&g, 1, dev, 5), PT_ERR_DEVICE);
  assert_null(g);
  print_message("group: %s\n", pt_error_message());
  if (!pt_comm_nccl_available()) assert_non_null(strstr(pt_error_message(), "built without"));
  else assert_non_null(strstr(pt_error_message(), "cuda:0"));
  pt_comm *self;
  assert_int_equal(pt_comm_self_create(&self), PT_OK);
  pt_comm *c = (pt_comm *)&c;
  int shared = -1;
  char why[256] = "unset";
  assert_int_equal(pt_comm_nccl_create(&c, self, 0, 5, &shared, why, sizeof why), PT_ERR_DEVICE);
  print_message("ddp: %s\n", pt_error_message());
  assert_null(c);
  assert_int_equal(shared, 0);
  assert_string_equal(why, "");
  if (!pt_comm_nccl_available()) assert_non_null(strstr(pt_error_message(), "built without NCCL"));
  pt_comm_destroy(self);
}

#ifdef PT_HAVE_NCCL

/* A device buffer of n floats holding v[0..n-1], and back. cudaMemcpy from
 * pageable memory may return before its DMA lands, and the thread's
 * stream (non-blocking) is not ordered after the legacy stream it used, so
 * the collective that follows could read the buffer early: wait here. */
static float *upload(const float *v, size_t n) {
  float *d = NULL;
  assert_int_equal(cudaMalloc((void **)&d, n * sizeof *d), cudaSuccess);
  assert_int_equal(cudaMemcpy(d, v, n * sizeof *d, cudaMemcpyHostToDevice), cudaSuccess);
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
  return d;
}
static void download(float *v, const float *d, size_t n) {
  assert_int_equal(cudaMemcpy(v, d, n * sizeof *v, cudaMemcpyDeviceToHost), cudaSuccess);
}

static void *unbound_allreduce(void *arg) {
  pt_comm *c = arg;
  float x = 0;
  pt_status st = c->ops->allreduce_f32(c, &x, 1);
  char *msg = strdup(st == PT_ERR_STATE ? pt_error_message() : "");
  return msg;
}

/* A world of one skips its collectives in the wrappers, so the ops are
 * called directly: the whole path runs, and a sum over one rank changes
 * nothing. */
static void test_one_gpu(void **s) {
  (void)s;
  pt_comm *self, *c = NULL;
  assert_int_equal(pt_comm_self_create(&self), PT_OK);
  int shared = -1;
  assert_int_equal(pt_cuda_bind(0), PT_OK);
  pt_status st = pt_comm_nccl_create(&c, self, 0, 30, &shared, NULL, 0);
  if (st != PT_OK) print_error("%s\n", pt_error_message());
  assert_int_equal(st, PT_OK);
  assert_int_equal(shared, 0);
  assert_string_equal(c->ops->name, "nccl");

  enum { N = 1 << 20 };
  float *v = malloc(N * sizeof *v), *w = malloc(N * sizeof *w);
  for (int i = 0; i < N; i++) v[i] = (float)i;
  float *d = upload(v, N);
  assert_int_equal(c->ops->allreduce_f32(c, d, N), PT_OK);
  download(w, d, N);
  assert_memory_equal(v, w, N * sizeof *v);
  /* Several buckets in flight, completed by stream order alone; the sync
   * is the host's wait. */
  for (int k = 0; k < 4; k++) assert_int_equal(c->ops->iallreduce_f32(c, d + k * (N / 4), N / 4), PT_OK);
  assert_int_equal(c->ops->wait_all(c), PT_OK);
  assert_int_equal(pt_comm_nccl_sync(c), PT_OK);
  download(w, d, N);
  assert_memory_equal(v, w, N * sizeof *v);
  assert_int_equal(c->ops->bcast(c, d, N * sizeof *d, 0), PT_OK);
  assert_int_equal(c->ops->bcast(c, d, 4, 1), PT_ERR_ARG);

  /* The refusals name what is not supported. */
  assert_int_equal(c->ops->isend(c, d, 4, 0, 0), PT_ERR_STATE);
  assert_non_null(strstr(pt_error_message(), "collectives only"));
  assert_int_equal(c->ops->recv(c, d, 4, 0, 0), PT_ERR_STATE);
  pt_comm *sub = NULL;
  assert_int_equal(pt_comm_split(c, 0, 0, &sub), PT_ERR_STATE);
  assert_non_null(strstr(pt_error_message(), "split"));
  assert_null(sub);

  /* A thread not bound to the GPU is told to bind. */
  pthread_t t;
  void *msg;
  pthread_create(&t, NULL, unbound_allreduce, c);
  pthread_join(t, &msg);
  assert_non_null(strstr(msg, "pt_cuda_bind(0)"));
  free(msg);

  c->what = "the test allreduce";
  c->step = 7;
  pt_comm_abort(c, "test abort");
  assert_int_equal(c->ops->allreduce_f32(c, d, N), PT_ERR_COMM);
  print_message("after abort: %s\n", pt_error_message());
  assert_non_null(strstr(pt_error_message(), "the test allreduce at step 7"));
  pt_comm_destroy(c);
  pt_comm_destroy(self);
  cudaFree(d);
  free(v);
  free(w);
}

/* Two workers on two GPUs, as --parallel dp runs them. */
typedef struct {
  pt_comm *c;
  int device, rank;
  int late; /* this worker skips the collective the other times out in */
  pt_status st[8];
  char msg[8][512];
  float got[4];
  pthread_barrier_t *bar;
} worker;

static void note(worker *w, int k, pt_status st) {
  w->st[k] = st;
  snprintf(w->msg[k], sizeof w->msg[k], "%s", st == PT_OK ? "" : pt_error_message());
}

static void *run_worker(void *arg) {
  worker *w = arg;
  pt_comm *c = w->c;
  note(w, 0, pt_cuda_bind(w->device));
  const float mine[4] = {(float)(w->rank + 1), 10.0f * (float)(w->rank + 1), -1, 0.5f};
  float *d = upload(mine, 4);
  note(w, 1, pt_comm_allreduce_f32(c, d, 4));
  download(w->got, d, 4);
  /* Buckets, then the host's bounded wait. */
  note(w, 2, pt_comm_iallreduce_f32(c, d, 2));
  if (w->st[2] == PT_OK) note(w, 2, pt_comm_iallreduce_f32(c, d + 2, 2));
  if (w->st[2] == PT_OK) note(w, 2, pt_comm_wait_all(c));
  if (w->st[2] == PT_OK) note(w, 2, pt_comm_nccl_sync(c));
  note(w, 3, pt_comm_bcast(c, d, 4 * sizeof(float), 1));
  pthread_barrier_wait(w->bar);
  /* Worker 1 stays away: worker 0 times out, aborts, and worker 1's next
   * collective reports worker 0's failure. */
  c->what = "the lonely allreduce";
  c->step = 42;
  if (!w->late) {
    note(w, 4, pt_comm_allreduce_f32(c, d, 4));
    pt_comm_abort(c, w->msg[4]);
  }
  pthread_barrier_wait(w->bar);
  if (w->late) note(w, 5, pt_comm_allreduce_f32(c, d, 4));
  pthread_barrier_wait(w->bar);
  cudaFree(d);
  (void)pt_cuda_unbind();
  return NULL;
}

static void test_two_gpus(void **s) {
  (void)s;
  const int devices[] = {0, 1};
  pt_comm_nccl_group *g = NULL;
  const int dup[] = {1, 1};
  assert_int_equal(pt_comm_nccl_group_create(&g, 2, dup, 5), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "cuda:1 is given to workers 0 and 1"));
  pt_status st = pt_comm_nccl_group_create(&g, 2, devices, 2.0);
  if (st != PT_OK) print_error("%s\n", pt_error_message());
  assert_int_equal(st, PT_OK);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  worker w[2];
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    memset(&w[r], 0, sizeof w[r]);
    w[r] = (worker){.c = pt_comm_nccl_get(g, r), .device = devices[r], .rank = r, .late = r == 1, .bar = &bar};
    pthread_create(&t[r], NULL, run_worker, &w[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < 2; r++) {
    for (int k = 0; k < 4; k++) {
      if (w[r].st[k] != PT_OK) print_error("worker %d, step %d: %s\n", r, k, w[r].msg[k]);
      assert_int_equal(w[r].st[k], PT_OK);
    }
    const float want[4] = {3, 30, -2, 1};
    assert_memory_equal(w[r].got, want, sizeof want);
  }
  print_message("timed out: %s\nthe other: %s\n", w[0].msg[4], w[1].msg[5]);
  assert_int_equal(w[0].st[4], PT_ERR_COMM);
  assert_non_null(strstr(w[0].msg[4], "the lonely allreduce at step 42"));
  assert_int_equal(w[1].st[5], PT_ERR_COMM);
  assert_non_null(strstr(w[1].msg[5], "worker 0 failed"));
  pthread_barrier_destroy(&bar);
  pt_comm_nccl_group_destroy(g);
}

#endif

/* Under mpirun: one GPU per local rank where there are enough, else the
 * ranks that share one are told, all of them alike. */
static int run_ddp(void) {
  pt_comm *mpi = NULL;
  if (pt_comm_mpi_create(&mpi, 60) != PT_OK) {
    fprintf(stderr, "%s\n", pt_error_message());
    return 1;
  }
  int ngpus = 0;
  char why[512] = "";
  pt_cuda_device_count(&ngpus, why, sizeof why);
  const int dev = ngpus ? pt_comm_local_gpu(mpi->local_rank, ngpus) : 0;
#ifdef PT_HAVE_NCCL
  if (ngpus && pt_cuda_bind(dev) != PT_OK) {
    fprintf(stderr, "rank %d: %s\n", mpi->rank, pt_error_message());
    return 1;
  }
#endif
  pt_comm *c = NULL;
  int shared = -1;
  pt_status st = pt_comm_nccl_create(&c, mpi, dev, 60, &shared, why, sizeof why);
  int rc = 0;
  if (ngpus == 0 || !pt_comm_nccl_available()) {
    /* Every rank must fail, none wait: that is the whole check here. */
    rc = st == PT_ERR_DEVICE && !c && shared == 0 ? 77 : 1;
    printf("%s: %s\n", rc == 77 ? "SKIPPED: no GPU or no NCCL, every rank failed alike" : "FAILED",
           pt_error_message());
  } else if (ngpus < mpi->local_size) {
    rc = st == PT_OK && !c && shared == 1 && strstr(why, "share the GPU") ? 0 : 1;
    printf("rank %d: %s (%s)\n", mpi->rank, rc ? "FAILED" : "shared GPU found", st == PT_OK ? why : pt_error_message());
  }
#ifdef PT_HAVE_NCCL
  else if (st != PT_OK || !c) {
    printf("FAILED: rank %d: %s\n", mpi->rank, st != PT_OK ? pt_error_message() : why);
    rc = 1;
  } else {
    float v[3] = {1, (float)mpi->rank, 2}, *d = NULL;
    cudaMalloc((void **)&d, sizeof v);
    cudaMemcpy(d, v, sizeof v, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize(); /* as upload(): the copy lands before NCCL reads d */
    st = pt_comm_allreduce_f32(c, d, 3);
    if (st == PT_OK) st = pt_comm_iallreduce_f32(c, d, 3);
    if (st == PT_OK) st = pt_comm_wait_all(c);
    if (st == PT_OK) st = pt_comm_nccl_sync(c);
    cudaMemcpy(v, d, sizeof v, cudaMemcpyDeviceToHost);
    const float n = (float)mpi->size, ranks = n * (n - 1) / 2;
    rc = st == PT_OK && v[0] == n * n && v[1] == n * ranks && v[2] == 2 * n * n ? 0 : 1;
    printf("rank %d on cuda:%d: %s %g %g %g\n", mpi->rank, dev, rc ? "FAILED" : "summed", v[0], v[1], v[2]);
    if (st != PT_OK) printf("  %s\n", pt_error_message());
    cudaFree(d);
    pt_comm_destroy(c);
  }
#endif
  fflush(stdout);
  pt_comm_destroy(mpi);
  pt_comm_mpi_finalize();
  return rc;
}

int main(void) {
  if (pt_comm_mpi_launched()) return run_ddp();
  const struct CMUnitTest anywhere[] = {
      cmocka_unit_test(test_local_gpu),     cmocka_unit_test(test_env_local_rank),
      cmocka_unit_test(test_availability),  cmocka_unit_test(test_arguments),
  };
  int failed = cmocka_run_group_tests_name("nccl (no GPU needed)", anywhere, NULL, NULL);
  if (failed) return failed;
  int n = 0;
  char why[256] = "";
  if (pt_cuda_device_count(&n, why, sizeof why) != PT_OK) return 1;
  if (n == 0 || !pt_comm_nccl_available()) {
    const struct CMUnitTest none[] = {cmocka_unit_test(test_unusable)};
    failed = cmocka_run_group_tests_name("nccl (unusable here)", none, NULL, NULL);
    if (failed) return failed;
    printf("SKIPPED: NCCL on GPUs: %s\n", pt_comm_nccl_available() ? why : "built without NCCL");
    return 77;
  }
#ifdef PT_HAVE_NCCL
  const struct CMUnitTest one[] = {cmocka_unit_test(test_one_gpu)};
  failed = cmocka_run_group_tests_name("nccl (one GPU)", one, NULL, NULL);
  if (failed) return failed;
  if (n < 2) {
    /* The one-GPU group has run the whole NCCL path; only the sums across
     * two GPUs and the timeout between workers need a second one. */
    printf("not run: two workers on two GPUs (this machine has one)\n");
    return 0;
  }
  const struct CMUnitTest two[] = {cmocka_unit_test(test_two_gpus)};
  return cmocka_run_group_tests_name("nccl (two GPUs)", two, NULL, NULL);
#endif
  return 0;
}
