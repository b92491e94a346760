/* GEMM through the system CBLAS (OpenBLAS by default). Keeping every GEMM
 * call behind pt_sgemm lets the profiler count FLOPs in one place and lets a
 * different BLAS be swapped in at link time. */
#include <cblas.h>

#include "ops/cpu/ops.h"

/* OpenBLAS's thread control; declared here because not every cblas.h has it. */
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

void pt_ops_set_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }
int pt_ops_get_threads(void) { return openblas_get_num_threads(); }

void pt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
