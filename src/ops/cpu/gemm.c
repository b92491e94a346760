/* GEMM through the system CBLAS (OpenBLAS by default), and the thread pool
 * every op runs on.
 *
 * The BLAS is kept single-threaded: pt_sgemm splits C into one block of
 * columns (or rows) per pool thread and each thread multiplies its block.
 * Keeping every GEMM behind pt_sgemm also gives the profiler one place to
 * count FLOPs and lets another BLAS be linked in.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>

#include "ops/cpu/ops.h"
#include "util/threadpool.h"

/* OpenBLAS's thread control; declared here because not every cblas.h has it. */
void openblas_set_num_threads(int num_threads);

/* Per calling thread: each data-parallel worker is a thread that runs its
 * replica's ops on a pool of its own. */
static _Thread_local pt_pool *pool;
static _Thread_local int pool_threads = 1;

/* A thread that ends with a pool ends its workers too: a program whose
 * threads each train or evaluate once would otherwise keep every such
 * thread's workers, asleep, for as long as it runs. The key holds the
 * thread's pool; its destructor runs on the ending thread, before its
 * thread-locals go. */
static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;
static int pool_key_made;

static void end_pool_at_exit(void *p) {
  pt_pool_destroy(p);
  pool = NULL;
  pool_threads = 1;
}

static void make_pool_key(void) { pool_key_made = pthread_key_create(&pool_key, end_pool_at_exit) == 0; }

/* A library unloaded by dlclose must not leave a destructor behind that
 * points into it. */
__attribute__((destructor)) static void delete_pool_key(void) {
  if (pool_key_made) pthread_key_delete(pool_key);
  pool_key_made = 0;
}

/* pool becomes p, and the key follows it. */
static void install(pt_pool *p, int threads) {
  pool = p;
  pool_threads = threads;
  pthread_once(&pool_key_once, make_pool_key);
  if (pool_key_made) pthread_setspecific(pool_key, p);
}

int pt_ops_set_threads(int n) {
  if (n < 1) n = 1;
  openblas_set_num_threads(1);
  if (n == pool_threads && (pool || n == 1)) return 0;
  pt_pool_destroy(pool);
  install(NULL, 1);
  pt_pool *p = NULL;
  if (n > 1 && pt_pool_create(&p, n) != PT_OK) return -1;
  install(p, n);
  return 0;
}

int pt_ops_push_threads(int n, pt_ops_threads_saved *saved) {
  if (n < 1) n = 1;
  openblas_set_num_threads(1);
  saved->pool = pool;
  saved->threads = pool_threads;
  saved->kept = n == pool_threads && (pool || n == 1);
  if (saved->kept) return 0;
  pt_pool *p = NULL;
  if (n > 1 && pt_pool_create(&p, n) != PT_OK) return -1;
  install(p, n);
  return 0;
}

void pt_ops_pop_threads(const pt_ops_threads_saved *saved) {
  if (saved->kept) return;
  pt_pool_destroy(pool);
  install(saved->pool, saved->threads);
}

int pt_ops_get_threads(void) { return pool_threads; }

typedef struct {
  size_t total;
  pt_range_fn fn;
  void *ctx;
} range_job;

static void range_task(void *arg, int tid, int n) {
  range_job *j = arg;
  size_t lo, hi;
  pt_split(j->total, tid, n, &lo, &hi);
  if (hi > lo) j->fn(j->ctx, lo, hi);
}

void pt_parallel_for(size_t total, size_t min_chunk, pt_range_fn fn, void *ctx) {
  if (!pool || total < 2 * (min_chunk ? min_chunk : 1)) {
    if (total) fn(ctx, 0, total);
    return;
  }
  range_job j = {total, fn, ctx};
  pt_pool_run(pool, range_task, &j);
}

void pt_parallel(void (*fn)(void *ctx, int tid, int nthreads), void *ctx) {
  if (!pool) fn(ctx, 0, 1);
  else pt_pool_run(pool, fn, ctx);
}

void pt_sgemm_serial(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

typedef struct {
  int ta, tb, m, n, k;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int lda, ldb, ldc;
  int split_cols;
} gemm_job;

static void gemm_block(void *ctx, size_t lo, size_t hi) {
  const gemm_job *j = ctx;
  const int w = (int)(hi - lo);
  if (j->split_cols) {
    const float *b = j->tb ? j->b + lo * (size_t)j->ldb : j->b + lo;
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans, j->m, w, j->k,
                j->alpha, j->a, j->lda, b, j->ldb, j->beta, j->c + lo, j->ldc);
  } else {
    const float *a = j->ta ? j->a + lo : j->a + lo * (size_t)j->lda;
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans, w, j->n, j->k,
                j->alpha, a, j->lda, j->b, j->ldb, j->beta, j->c + lo * (size_t)j->ldc, j->ldc);
  }
}

void pt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc) {
  gemm_job j = {trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc, n >= m};
  /* Below ~2 MFLOP a GEMM is not worth waking threads for; blocks of at
   * least 32 columns (rows) keep the BLAS kernels at full width. */
  size_t min_chunk = (double)m * n * k < 1e6 ? (size_t)1 << 30 : 32;
  pt_parallel_for((size_t)(j.split_cols ? n : m), min_chunk, gemm_block, &j);
}
