/* CPU kernels: forward and backward of every op, on plain float arrays.
 *
 * Layout is NCHW, float32, contiguous. Kernels know nothing of layers or
 * models: they take pointers and sizes, so the same table of shapes can drive
 * them from the layers, from the finite-difference tests and (later) from the
 * CUDA comparison tests. Backward kernels ACCUMULATE into parameter gradients
 * (so micro-batches and data-parallel replicas can sum) and OVERWRITE input
 * gradients. Any dx pointer may be NULL when the caller does not need it
 * (the first layer never does).
 */
#ifndef PT_OPS_CPU_OPS_H
#define PT_OPS_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus /* the CUDA sources include this for the geometry types */
extern "C" {
#endif

/* Threads the ops called from this thread use: a pool per calling thread,
 * so data-parallel workers (threads themselves) each have their own; the
 * BLAS runs single-threaded inside it. Returns non-zero if the pool cannot
 * start. A thread's pool ends with the thread (its workers are joined as
 * it exits), or at pt_ops_set_threads(1). */
int pt_ops_set_threads(int n);
int pt_ops_get_threads(void);

/* The calling thread's pool, set aside by pt_ops_push_threads. */
typedef struct {
  void *pool;
  int threads;
  int kept; /* the pool asked for was the one there: nothing was set aside */
} pt_ops_threads_saved;
/* n threads for this thread's ops until pt_ops_pop_threads(saved), which
 * puts the pool there before back, its threads untouched: for work inside
 * another's (an evaluation in a training run's callback) that must leave
 * the run's pool, and so its results, as they were. Returns non-zero,
 * with nothing changed, if the pool cannot start. */
int pt_ops_push_threads(int n, pt_ops_threads_saved *saved);
void pt_ops_pop_threads(const pt_ops_threads_saved *saved);

/* Runs fn(ctx, lo, hi) over contiguous blocks of [0, total), one block per
 * thread; serially when total < 2 * min_chunk. Blocks depend only on total
 * and the thread count, so results are reproducible. */
typedef void (*pt_range_fn)(void *ctx, size_t lo, size_t hi);
void pt_parallel_for(size_t total, size_t min_chunk, pt_range_fn fn, void *ctx);
/* Runs fn(ctx, tid, nthreads) once on every pool thread (tid 0 of 1 without a pool). */
void pt_parallel(void (*fn)(void *ctx, int tid, int nthreads), void *ctx);
/* pt_sgemm without the pool, for use inside a task already running on it. */
void pt_sgemm_serial(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);

/* dw (nw) and db (nb floats; NULL: none) += the partial sums of nparts pool
 * threads, thread t's being nw + nb floats (dw's, then db's) at part0 +
 * t * stride; added in thread order, so results depend on the thread count
 * only. Runs on the pool. */
void pt_add_partials(float *dw, size_t nw, float *db, size_t nb, const float *part0, size_t stride, int nparts);

/* C (M,N) = alpha * op(A) op(B) + beta * C, row-major. */
void pt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc);

/* ---- conv2d ---- */
typedef struct {
  int c, h, w;         /* input per sample */
  int oc, kh, kw;      /* output channels, kernel */
  int stride, pad;
  int oh, ow;          /* derived by pt_conv_init */
  int relu;            /* a ReLU follows, fused into this op: y = max(0, conv) */
} pt_conv_geom;

/* Fills oh, ow; returns 0 if the geometry is impossible (kernel larger than padded input). */
int pt_conv_init(pt_conv_geom *g);
/* Floats of workspace a call needs when run on nthreads threads (each thread
 * has its own unrolled sample and gradient partials). */
size_t pt_conv_workspace(const pt_conv_geom *g, int nthreads);
/* y (n, oc, oh, ow) = conv(x (n, c, h, w), w (oc, c, kh, kw)) + b (oc) [b may be NULL] */
void pt_conv2d_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b,
                       float *y, float *ws);
/* dw, db accumulate; dx overwritten (NULL = skip). With g->relu, y is the
 * forward output (after the ReLU) and dy is the gradient after the ReLU. */
void pt_conv2d_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *y,
                        const float *dy, float *dw, float *db, float *dx, float *ws);
/* conv + ReLU + 2x2 max-pool of stride 2 as one op, which never writes
 * the conv's full output: where pt_conv_pool_ok (g->relu set) says this
 * build can, y (n, oc, oh/2, ow/2) = the pool's output and code (same
 * shape) = where each maximum was (0 to 3, row-major in its window; -1
 * where the maximum is 0, so no gradient flows). The backward pass takes
 * the pool's output gradient dy (n, oc, oh/2, ow/2) and the codes; dw, db
 * accumulate and dx is overwritten (NULL = skip), as pt_conv2d_backward.
 * Results equal, bit for bit, the three ops run one after another. */
int pt_conv_pool_ok(const pt_conv_geom *g);
void pt_conv2d_pool_forward(const pt_conv_geom *g, int n, const float *x, const float *w, const float *b, float *y,
                            int32_t *code, float *ws);
void pt_conv2d_pool_backward(const pt_conv_geom *g, int n, const float *x, const float *w, const int32_t *code,
                             const float *dy, float *dw, float *db, float *dx, float *ws);

/* ---- linear: y (n, out) = x (n, in) w^T (in, out) + b ---- */
/* ... or with w in panels: for a layer whose inputs are mostly zeros
 * (unnormalised images), the forward pass skips each sample's zeros one by
 * one, which needs w's columns along the lanes. Panel p holds outputs
 * [16 p, 16 p + wd), wd = min(16, out - 16 p), as an (in, wd) matrix: every
 * row a whole, aligned cache line (rows of w^T would be 800 bytes at
 * fmnist-mlp's lin1, half of them straddling lines), and the whole still
 * out x in floats, so the flat parameter array keeps its offsets. */
static inline int pt_linear_panel_width(int out, int p) { return out - 16 * p < 16 ? out - 16 * p : 16; }
/* Where panel p starts, in floats from the weight's first. */
static inline size_t pt_linear_panel_offset(int in, int p) { return (size_t)16 * in * p; }
static inline size_t pt_linear_panel_index(int in, int out, int o, int k) {
  const int p = o / 16;
  return pt_linear_panel_offset(in, p) + (size_t)k * pt_linear_panel_width(out, p) + (size_t)(o % 16);
}
/* Whether the backend's kernels for w in panels serve this shape (then
 * pt_linear_forward_p and pt_linear_backward_p take dw, w in panels). */
int pt_linear_panels_ok(int in, int out);
void pt_linear_forward_p(int n, int in, int out, const float *x, const float *wp, const float *b, float *y,
                         float *ws, float *keep);
void pt_linear_backward_p(int n, int in, int out, const float *x, const float *wp, const float *dy, float *dwp,
                          float *db, float *dx, int add, float *ws, const float *kept);
/* What the forward pass on panels keeps for the weight gradient of the
 * same batch: keep, pt_linear_keep_floats(max_batch, in) floats, or NULL.
 * The sparse forward pass reads every input to find the nonzero ones; it
 * leaves them there as the weight gradient wants them (x by slabs of 16
 * inputs, and a 16-bit code of the nonzero ones per sample and slab), and
 * the backward pass given kept skips its own pass over x. Kept data are
 * valid for the x of the forward pass that wrote them (the caller keeps
 * one per batch in flight) and only when that pass was the sparse one. */
size_t pt_linear_keep_floats(int max_batch, int in);
/* ws: pt_linear_workspace(max_batch, in, out, threads) floats, or NULL (then only the
 * dot-product pass and the BLAS serve). */
void pt_linear_forward(int n, int in, int out, const float *x, const float *w, const float *b, float *y, float *ws);
size_t pt_linear_workspace(int max_batch, int in, int out, int nthreads);
/* The forward pass as outer products on the batch transposed a block at a
 * time (linear_xt.c), for the first n / 96 * 96 rows and 64 more where as
 * many are left, where the shape allows (n >= 64, in >= 32, out >= 16, ws
 * not NULL); returns the number of rows done, 0 elsewhere. */
int pt_linear_forward_xt(int n, int in, int out, const float *x, const float *w, const float *b, float *y, float *ws);
size_t pt_linear_xt_workspace(int in, int out, int nthreads);
/* The forward pass for 1 to 15 outputs (linear_narrow.c), where in >= 32
 * and ws is not NULL; returns 1 when done, 0, having done nothing,
 * elsewhere. ws: pt_linear_narrow_workspace(in, threads) floats. */
int pt_linear_forward_narrow(int n, int in, int out, const float *x, const float *w, const float *b, float *y,
                             float *ws);
size_t pt_linear_narrow_workspace(int in, int nthreads);
/* The forward pass as dot products (linear_dot.c), where the shape makes
 * it the faster (256 to 1,024 inputs, 32 outputs or more; below AVX-512,
 * at most 8 rows); returns 0, having done nothing, elsewhere.
 * pt_linear_forward takes it for the rows the outer products leave. */
int pt_linear_forward_dot(int n, int in, int out, const float *x, const float *w, const float *b, float *y);
/* add: dw and db += the gradients; 0: = them. */
void pt_linear_backward(int n, int in, int out, const float *x, const float *w, const float *dy,
                        float *dw, float *db, float *dx, int add, float *ws);
/* The gradients as sums of outer products (linear_outer.c), where the
 * shape allows: each returns 1 when done, 0, having done nothing,
 * elsewhere. The input gradient dx = dy w takes n >= 4, in >= 96, out >=
 * 16; the weight gradient dw (+)= dy^T x takes n >= 16, in >= 96, out >=
 * 16, and ws: pt_linear_dw_workspace(n or more, out) floats (NULL:
 * declined); below AVX-512, neither takes in a multiple of 1,024, where
 * the BLAS is faster. */
int pt_linear_backward_dx(int n, int in, int out, const float *dy, const float *w, float *dx);
int pt_linear_backward_dw(int n, int in, int out, const float *x, const float *dy, float *dw, int add, float *ws);
size_t pt_linear_dw_workspace(int max_batch, int out);
/* The weight gradient skipping the samples where 4 adjacent inputs are all
 * zero (linear_sparse.c), with pt_linear_backward_dw's bits, where the
 * shape allows (in a multiple of 16 and >= 64, out >= 16, n >= 16, x at
 * most 512 KB) and at most 66% of the samples are listed;
 * returns 1 when done, 0, having done nothing, elsewhere. ws:
 * pt_linear_sparse_workspace(n or more, in, out, threads) floats. */
int pt_linear_backward_dw_sparse(int n, int in, int out, const float *x, const float *dy, float *dw, int add,
                                 float *ws);
size_t pt_linear_sparse_workspace(int max_batch, int in, int out, int nthreads);
/* The same into weights in panels (see pt_linear_panels). */
int pt_linear_backward_dwp_sparse(int n, int in, int out, const float *x, const float *dy, float *dwp, int add,
                                  float *ws, const float *kept);
/* The forward pass on w in panels skipping each sample's zero inputs
 * (linear_sparse_forward.c), where the shape allows (in a multiple of 16
 * and >= 64, out >= 16, ws not NULL); returns 1 when done, 0, having done
 * nothing, elsewhere. ws:
 * pt_linear_sparse_forward_workspace(n or more, in) floats. */
int pt_linear_forward_sparse(int n, int in, int out, const float *x, const float *wp, const float *b, float *y,
                             float *ws, float *keep);
size_t pt_linear_sparse_forward_workspace(int max_batch, int in);

/* ---- max-pool (kernel k, stride s, no padding, floor mode as PyTorch) ---- */
void pt_maxpool_forward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *x,
                        float *y, int32_t *argmax);
void pt_maxpool_backward(int n, int c, int h, int w, int k, int s, int oh, int ow, const float *dy,
                         const int32_t *argmax, float *dx);

/* ---- activations ---- */
void pt_relu_forward(size_t n, const float *x, float *y);
/* Uses the forward OUTPUT y (y > 0 <=> x > 0), so the input need not be kept. */
void pt_relu_backward(size_t n, const float *y, const float *dy, float *dx);
/* Inverted dropout as PyTorch: kept elements scaled by 1/(1-p). mask (n) holds
 * 0 or 1/(1-p). The mask is a pure function of (key, step, layer, element). */
void pt_dropout_forward(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer,
                        const float *x, float *y, float *mask);
void pt_dropout_backward(size_t n, const float *mask, const float *dy, float *dx);

/* ---- log-softmax over rows (n, k) ---- */
/* p (n, k), or NULL: the forward pass writes the softmax there (the
 * exponentials it sums, times 1 / sum), and the backward pass, given it,
 * reads it where it would take exp(y) again. */
void pt_log_softmax_forward(int n, int k, const float *x, float *y, float *p);
void pt_log_softmax_backward(int n, int k, const float *y, const float *p, const float *dy, float *dx);

/* ---- losses: mean over the batch, as PyTorch's default reduction ---- */
/* NLL of log-probabilities lp (n, k); dlp (n, k) receives d(loss)/d(lp) * scale. */
double pt_nll_loss(int n, int k, const float *lp, const int32_t *y, float *dlp, float scale);
/* Cross-entropy of logits z (n, k) = NLL(log_softmax(z)); dz as above. */
double pt_cross_entropy_loss(int n, int k, const float *z, const int32_t *y, float *dz, float scale);
/* Count of rows whose argmax equals the label. */
int pt_count_correct(int n, int k, const float *scores, const int32_t *y);

/* ---- batch-norm 2d over (n, c, h, w), statistics per channel ---- */
typedef struct {
  int c;
  float eps, momentum;
} pt_bn_geom;
/* Training: batch statistics, running stats updated with unbiased variance.
 * save_mean, save_invstd (c) are kept for backward; scratch holds 2*c doubles. */
void pt_batchnorm_forward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                const float *gamma, const float *beta, float *running_mean,
                                float *running_var, float *save_mean, float *save_invstd, float *y,
                                double *scratch);
/* The pieces of forward_train, for statistics summed over several workers:
 * out[c] = sum of x (center NULL) or of (x - center[c])^2; then normalise
 * with mean and sq = sum((x - mean)^2) over count samples. */
void pt_batchnorm_sums(const pt_bn_geom *g, int n, int hw, const float *x, const double *center, double *out);
void pt_batchnorm_normalize(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                            const float *beta, const double *mean, const double *sq, double count,
                            float *running_mean, float *running_var, float *save_mean, float *save_invstd,
                            float *y);
void pt_batchnorm_forward_eval(const pt_bn_geom *g, int n, int hw, const float *x,
                               const float *gamma, const float *beta, const float *running_mean,
                               const float *running_var, float *y);
/* Backward of the training-mode forward. dgamma, dbeta accumulate. */
void pt_batchnorm_backward_train(const pt_bn_geom *g, int n, int hw, const float *x,
                                 const float *gamma, const float *save_mean,
                                 const float *save_invstd, const float *dy, float *dgamma,
                                 float *dbeta, float *dx, double *scratch);
/* The pieces of backward_train: sums (2, c) = sum dy, sum dy*xhat, which
 * dbeta and dgamma accumulate; then dx from sums over count samples. */
void pt_batchnorm_backward_sums(const pt_bn_geom *g, int n, int hw, const float *x, const float *save_mean,
                                const float *save_invstd, const float *dy, float *dgamma, float *dbeta,
                                double *sums);
void pt_batchnorm_backward_dx(const pt_bn_geom *g, int n, int hw, const float *x, const float *gamma,
                              const float *save_mean, const float *save_invstd, const float *dy,
                              const double *sums, double count, float *dx);
void pt_batchnorm_backward_eval(const pt_bn_geom *g, int n, int hw, const float *x,
                                const float *gamma, const float *running_mean,
                                const float *running_var, const float *dy, float *dgamma,
                                float *dbeta, float *dx);

#ifdef __cplusplus
}
#endif

#endif
