/* A fixed pool of worker threads that run one function on every thread at
 * once (fork-join), with static partitioning.
 *
 * Why not the BLAS's threads: OpenBLAS's workers spin and yield between
 * calls, so on a small machine they steal the cores from everything that is
 * not a GEMM (im2col, pooling, activations, the optimizer, the data loader).
 * One pool that runs all of a step's work, with the BLAS single-threaded
 * inside it, keeps every core busy with useful work. Work is split by index
 * ranges that depend only on the thread count, so results are bit-identical
 * from run to run for a given --threads.
 */
#ifndef PT_UTIL_THREADPOOL_H
#define PT_UTIL_THREADPOOL_H

#include <stddef.h>

#include "util/error.h"

typedef struct pt_pool pt_pool;
typedef void (*pt_pool_fn)(void *arg, int tid, int nthreads);

/* nthreads >= 1; the caller is thread 0, so nthreads - 1 workers start. */
pt_status pt_pool_create(pt_pool **out, int nthreads);
void pt_pool_destroy(pt_pool *p);
int pt_pool_threads(const pt_pool *p);
/* Runs fn(arg, tid, n) on all n threads and returns when all are done.
 * Not reentrant: a task must not call pt_pool_run itself. */
void pt_pool_run(pt_pool *p, pt_pool_fn fn, void *arg);

/* Thread tid's share [*lo, *hi) of [0, total), in contiguous blocks. */
static inline void pt_split(size_t total, int tid, int n, size_t *lo, size_t *hi) {
  size_t base = total / (size_t)n, rem = total % (size_t)n, t = (size_t)tid;
  *lo = t * base + (t < rem ? t : rem);
  *hi = *lo + base + (t < rem ? 1 : 0);
}

#endif
