/* Every CUDA op against the CPU op it mirrors, on the same inputs.
 *
 * One table of (op, shape) rows drives the test, as in
 * tests/ops/test_gradcheck.c. Each row makes its inputs on the host from a
 * fixed seed, then runs forward and backward through pt_backend_cpu() and
 * through pt_backend_cuda() alike (alloc, upload, run, download), and the
 * two sets of downloads must agree:
 *  - floating-point outputs element by element within a relative error of
 *    1e-4:
 *        |cuda_i - cpu_i| <= 1e-4 * max(|cpu_i|, floor),
 *    floor being 1% of the array's largest magnitude (and at least 1e-30):
 *    an entry far below its array's scale (a sum that mostly cancelled)
 *    carries rounding of that scale, but one wrong entry, however small
 *    (one channel's bias gradient), is caught, which a tolerance against
 *    the array's largest value alone let through; NaN must meet NaN;
 *  - convolutions: an entry also passes within 1e-5 of the sum of its
 *    terms' magnitudes (sum |x||w| + |b| for y, and likewise for dx, dw,
 *    db, the accumulated start included). Two fp32 convolutions differ by
 *    rounding that scales with those magnitudes, not with the result: the
 *    CPU's Winograd transforms (3x3 and 5x5, stride 1, 8+ channels) and
 *    long reductions (dw over 200 samples, 1.6 million terms) leave entries
 *    that cancelled to well below their terms off by more than 1e-4 of
 *    themselves (on an H200: a y of 0.125, from 288 terms, 5.9e-4 from
 *    the CPU's Winograd, where cuDNN and the gemm path agree to 2e-6). 1e-5
 *    of the magnitudes is about 80 roundings of float32; a term missing or
 *    counted twice, a chunk's samples lost, is far beyond it;
 *  - the synchronised batch-norm steps' outputs with a stricter floor: an
 *    element under a millionth of the array's largest magnitude is held to
 *    1e-4 of that millionth, since a worker's sums and statistics are each
 *    used on their own, not as one array;
 *  - what is exact by construction, exactly: dropout masks and outputs,
 *    max-pool argmax, ReLU, scaling, correct-counts, and a batch made on
 *    the device (crops, flips, normalisation, labels) against the loader's.
 * Parameter gradients and optimizer state start non-zero, so accumulation
 * is checked too; input gradients start as garbage, so overwriting is.
 * Convolutions over 200 samples run the gemm path in several chunks (its
 * offsets, and dw summed chunk after chunk).
 *
 * PT_CUDA_CONV picks the convolution (ctest runs the test once for each
 * value), and every convolution row checks that the implementation asked
 * for is the one that ran: a direction that cuDNN turns down would
 * otherwise pass on the gemm path unnoticed.
 *
 * Where no GPU is usable the CPU side of every row still runs, the no-GPU
 * behaviour is checked (pt_backend_cuda() is NULL with the reason), and the
 * test exits 77, which ctest reports as skipped.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda/device.h"
#include "data/loader.h"
#include "nn/presets.h"
#include "ops/backend.h"
#include "ops/cuda/context.h"
#include "ops/cuda/ops.h"
#include "util/philox.h"

#include "random_dataset.h"

#ifdef PT_HAVE_CUDA
/* context.cu; declared in ops/cuda/check.h, which needs the CUDA headers. */
void pt_cuda_note_error(const char *what, const char *msg);
#endif

#define TOL 1e-4
#define TINY 1e-30
/* An element's tolerance is TOL of itself, or of this fraction of its
 * array's largest magnitude where it is smaller. */
#define FLOOR_FRACTION 1e-2

typedef enum {
  OP_CONV, OP_LINEAR, OP_MAXPOOL, OP_RELU, OP_DROPOUT, OP_LOGSOFTMAX, OP_NLL, OP_XENT, OP_COUNT, OP_BN_TRAIN,
  OP_BN_EVAL, OP_BN_SYNC, OP_SGD, OP_ADAM, OP_ADAMW, OP_ADADELTA, OP_SCALE, OP_BATCH
} op_t;

enum {
  F_BIAS = 1 << 0,      /* conv, linear: with a bias */
  F_RELU = 1 << 1,      /* conv: the fused ReLU */
  F_NO_DX = 1 << 2,     /* backward without an input gradient (a first layer) */
  F_TIES = 1 << 3,      /* inputs on a coarse grid, so maxima tie */
  F_NAN = 1 << 4,       /* count: rows with NaN; relu: a NaN input */
  F_NO_GRAD = 1 << 5,   /* losses: dlp / dz NULL */
  F_INPLACE = 1 << 6,   /* log-softmax: y over x */
  F_NESTEROV = 1 << 7,  /* sgd */
  F_WD = 1 << 8,        /* optimizers: weight decay */
  F_DAMP = 1 << 9,      /* sgd: dampening */
  F_CROP = 1 << 10,     /* batch: random crop after padding by pad */
  F_FLIP = 1 << 11,     /* batch: random horizontal flip */
  F_WRITE = 1 << 12,    /* linear: the gradients written over junk, not added */
};

/* Shapes: n, c, h, w is the input (n, c, h, w); for row ops (log-softmax,
 * losses, count) n rows of k = c; for element-wise ops and optimizers
 * n * c * h * w elements. a: dropout p, loss scale, sgd momentum, scale
 * factor. */
typedef struct {
  const char *label;
  op_t op;
  int n, c, h, w;
  int oc, k, s, pad; /* conv: out channels, kernel, stride, padding; linear: out = oc; pool: k, s; dropout: layer = oc;
                      * batchnorm sync: workers = oc */
  float a;
  int flags;
} ocase;

static const ocase cases[] = {
    {"conv 3x3 + bias", OP_CONV, 2, 3, 7, 7, 4, 3, 1, 0, 0, F_BIAS},
    {"conv 5x5 pad 2, no bias", OP_CONV, 2, 2, 6, 6, 3, 5, 1, 2, 0, 0},
    {"conv 3x3 stride 2 pad 1 + bias", OP_CONV, 2, 3, 7, 8, 2, 3, 2, 1, 0, F_BIAS},
    {"conv 1x1 + bias", OP_CONV, 3, 4, 5, 5, 3, 1, 1, 0, 0, F_BIAS},
    {"conv 3x3 pad 1 + bias + fused relu", OP_CONV, 2, 3, 6, 6, 4, 3, 1, 1, 0, F_BIAS | F_RELU},
    {"conv 3x3 stride 3 pad 2, no bias, fused relu", OP_CONV, 1, 2, 8, 8, 2, 3, 3, 2, 0, F_RELU},
    {"conv first layer 1->32 3x3 on 28x28 + relu, no dx", OP_CONV, 8, 1, 28, 28, 32, 3, 1, 0, 0,
     F_BIAS | F_RELU | F_NO_DX},
    {"conv 32->64 3x3 on 26x26 + bias + relu", OP_CONV, 4, 32, 26, 26, 64, 3, 1, 0, 0, F_BIAS | F_RELU},
    /* 48 channels and more, 3x3, stride 1: cuDNN's Winograd (the rule in
     * conv.cu), fused for y and dx, nonfused for dw. */
    {"conv 48->96 3x3 pad 1 on 16x16 + bias + relu", OP_CONV, 4, 48, 16, 16, 96, 3, 1, 1, 0, F_BIAS | F_RELU},
    /* An RGB image's first layer, which the default puts on the gemm path. */
    {"conv RGB 3->48 3x3 pad 1 on 32x32 + bias + relu", OP_CONV, 4, 3, 32, 32, 48, 3, 1, 1, 0,
     F_BIAS | F_RELU},
    /* Several chunks of the gemm path (test_chunks checks how many). */
    {"conv 1->2 5x5 on 104x104 + bias, 200 samples", OP_CONV, 200, 1, 104, 104, 2, 5, 1, 0, 0, F_BIAS},
    {"conv 1->2 7x7 pad 3 on 60x60 + bias + relu, 200 samples", OP_CONV, 200, 1, 60, 60, 2, 7, 1, 3, 0,
     F_BIAS | F_RELU},
    {"conv 1->3 3x3 stride 2 pad 1 on 180x180, no bias, 200 samples", OP_CONV, 200, 1, 180, 180, 3, 3, 2, 1, 0, 0},
    {"linear 7->5 + bias", OP_LINEAR, 3, 7, 1, 1, 5, 0, 0, 0, 0, F_BIAS},
    {"linear 9216->128 + bias", OP_LINEAR, 16, 9216, 1, 1, 128, 0, 0, 0, 0, F_BIAS},
    {"linear 784->200 + bias, 100 rows", OP_LINEAR, 100, 784, 1, 1, 200, 0, 0, 0, 0, F_BIAS},
    {"linear 784->200 + bias, gradients written", OP_LINEAR, 100, 784, 1, 1, 200, 0, 0, 0, 0, F_BIAS | F_WRITE},
    {"linear 7->5 + bias, gradients written", OP_LINEAR, 3, 7, 1, 1, 5, 0, 0, 0, 0, F_BIAS | F_WRITE},
    {"linear 128->10, no bias, no dx", OP_LINEAR, 33, 128, 1, 1, 10, 0, 0, 0, 0, F_NO_DX},
    {"maxpool 2", OP_MAXPOOL, 2, 3, 6, 6, 0, 2, 2, 0, 0, 0},
    {"maxpool 3 stride 2 (overlapping)", OP_MAXPOOL, 2, 2, 7, 7, 0, 3, 2, 0, 0, 0},
    {"maxpool 2 on odd 7x5 (edges dropped)", OP_MAXPOOL, 2, 2, 7, 5, 0, 2, 2, 0, 0, 0},
    {"maxpool 2 with ties", OP_MAXPOOL, 4, 8, 24, 24, 0, 2, 2, 0, 0, F_TIES},
    {"maxpool 3 stride 2 with ties", OP_MAXPOOL, 2, 4, 13, 13, 0, 3, 2, 0, 0, F_TIES},
    {"relu, a NaN among the inputs", OP_RELU, 2, 3, 4, 4, 0, 0, 0, 0, 0, F_NAN},
    {"relu, odd size", OP_RELU, 1, 1, 1, 100003, 0, 0, 0, 0, 0, F_NAN},
    {"dropout 0.5, odd size", OP_DROPOUT, 1, 1, 1, 100003, 2, 0, 0, 0, 0.5f, 0},
    {"dropout 0.1, 13 elements", OP_DROPOUT, 1, 1, 1, 13, 0, 0, 0, 0, 0.1f, 0},
    {"dropout 0.25, layer 7", OP_DROPOUT, 64, 128, 1, 1, 7, 0, 0, 0, 0.25f, 0},
    {"dropout 0 (identity)", OP_DROPOUT, 2, 50, 1, 1, 1, 0, 0, 0, 0.0f, 0},
    {"log-softmax 4x10", OP_LOGSOFTMAX, 4, 10, 1, 1, 0, 0, 0, 0, 0, 0},
    {"log-softmax 130x10 in place", OP_LOGSOFTMAX, 130, 10, 1, 1, 0, 0, 0, 0, 0, F_INPLACE},
    {"log-softmax 3x1000 (rows wider than a warp)", OP_LOGSOFTMAX, 3, 1000, 1, 1, 0, 0, 0, 0, 0, 0},
    {"nll 5x10", OP_NLL, 5, 10, 1, 1, 0, 0, 0, 0, 1.0f, 0},
    {"nll 64x10 scale 0.5", OP_NLL, 64, 10, 1, 1, 0, 0, 0, 0, 0.5f, 0},
    {"nll 300x47, no gradient", OP_NLL, 300, 47, 1, 1, 0, 0, 0, 0, 1.0f, F_NO_GRAD},
    {"cross-entropy 5x10", OP_XENT, 5, 10, 1, 1, 0, 0, 0, 0, 1.0f, 0},
    {"cross-entropy 64x10 scale 0.25", OP_XENT, 64, 10, 1, 1, 0, 0, 0, 0, 0.25f, 0},
    {"cross-entropy 2000x10", OP_XENT, 2000, 10, 1, 1, 0, 0, 0, 0, 1.0f, 0},
    {"cross-entropy 7x100, no gradient", OP_XENT, 7, 100, 1, 1, 0, 0, 0, 0, 1.0f, F_NO_GRAD},
    {"count_correct 64x10 with ties and NaN", OP_COUNT, 64, 10, 1, 1, 0, 0, 0, 0, 0, F_TIES | F_NAN},
    {"count_correct 1000x100", OP_COUNT, 1000, 100, 1, 1, 0, 0, 0, 0, 0, 0},
    {"count_correct 300x3 with ties", OP_COUNT, 300, 3, 1, 1, 0, 0, 0, 0, 0, F_TIES},
    {"batchnorm train 3x4x3x3", OP_BN_TRAIN, 3, 4, 3, 3, 0, 0, 0, 0, 0, 0},
    {"batchnorm train 8x3x16x16", OP_BN_TRAIN, 8, 3, 16, 16, 0, 0, 0, 0, 0, 0},
    {"batchnorm train 32x6x1x1 (hw = 1)", OP_BN_TRAIN, 32, 6, 1, 1, 0, 0, 0, 0, 0, 0},
    {"batchnorm train 2x5x33x35, no dx", OP_BN_TRAIN, 2, 5, 33, 35, 0, 0, 0, 0, 0, F_NO_DX},
    {"batchnorm eval 3x4x3x3", OP_BN_EVAL, 3, 4, 3, 3, 0, 0, 0, 0, 0, 0},
    {"batchnorm eval 8x3x16x16, no dx", OP_BN_EVAL, 8, 3, 16, 16, 0, 0, 0, 0, 0, F_NO_DX},
    {"batchnorm sync steps 3x4x3x3, 1 worker", OP_BN_SYNC, 3, 4, 3, 3, 1, 0, 0, 0, 0, 0},
    {"batchnorm sync steps 3x4x3x3 of 2 workers", OP_BN_SYNC, 3, 4, 3, 3, 2, 0, 0, 0, 0, 0},
    {"batchnorm sync steps 8x3x16x16 of 4 workers", OP_BN_SYNC, 8, 3, 16, 16, 4, 0, 0, 0, 0, 0},
    {"batchnorm sync steps 32x6x1x1 (hw = 1) of 2 workers", OP_BN_SYNC, 32, 6, 1, 1, 2, 0, 0, 0, 0, 0},
    {"batchnorm sync steps 2x5x33x35 of 3 workers, no dx", OP_BN_SYNC, 2, 5, 33, 35, 3, 0, 0, 0, 0, F_NO_DX},
    {"batchnorm sync steps 32x16x28x28 of 2 workers (small-cnn bn1)", OP_BN_SYNC, 32, 16, 28, 28, 2, 0, 0, 0, 0, 0},
    {"sgd", OP_SGD, 1, 1, 1, 1000, 0, 0, 0, 0, 0.0f, 0},
    {"sgd weight decay", OP_SGD, 1, 1, 1, 1000, 0, 0, 0, 0, 0.0f, F_WD},
    {"sgd momentum 0.9", OP_SGD, 1, 1, 1, 70001, 0, 0, 0, 0, 0.9f, 0},
    {"sgd momentum 0.9 nesterov", OP_SGD, 1, 1, 1, 1000, 0, 0, 0, 0, 0.9f, F_NESTEROV},
    {"sgd momentum 0.5 dampening weight decay", OP_SGD, 1, 1, 1, 1000, 0, 0, 0, 0, 0.5f, F_DAMP | F_WD},
    {"adam", OP_ADAM, 1, 1, 1, 70001, 0, 0, 0, 0, 0, 0},
    {"adam weight decay", OP_ADAM, 1, 1, 1, 1000, 0, 0, 0, 0, 0, F_WD},
    {"adamw", OP_ADAMW, 1, 1, 1, 1000, 0, 0, 0, 0, 0, F_WD},
    {"adadelta", OP_ADADELTA, 1, 1, 1, 1000, 0, 0, 0, 0, 0, 0},
    {"adadelta weight decay", OP_ADADELTA, 1, 1, 1, 70001, 0, 0, 0, 0, 0, F_WD},
    {"scale", OP_SCALE, 1, 1, 1, 100003, 0, 0, 0, 0, 1.0f / 3.0f, 0},
    {"make_batch 1x28x28", OP_BATCH, 40, 1, 28, 28, 0, 0, 0, 0, 0, 0},
    {"make_batch 3x32x32 crop 4 + flip", OP_BATCH, 40, 3, 32, 32, 0, 0, 0, 4, 0, F_CROP | F_FLIP},
    {"make_batch 1x28x28 crop 2", OP_BATCH, 40, 1, 28, 28, 0, 0, 0, 2, 0, F_CROP},
    {"make_batch 3x9x7 flip", OP_BATCH, 40, 3, 9, 7, 0, 0, 0, 0, 0, F_FLIP},
    {"make_batch 1x5x5 crop 7 (windows outside the image)", OP_BATCH, 40, 1, 5, 5, 0, 0, 0, 7, 0, F_CROP | F_FLIP},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* ---- one run of a row on one backend ---- */

typedef enum { T_F32, T_F64, T_I32, T_I64 } dtype;

typedef struct {
  const char *name;
  dtype t;
  int exact;
  int per_elem; /* also within TOL of each element's own value */
  size_t count;
  void *host;
} result;

#define MAX_DEV 48
#define MAX_RES 16

typedef struct {
  const pt_backend *be;
  void *dev[MAX_DEV];
  int ndev;
  result res[MAX_RES];
  int nres;
} run_t;

static size_t dsize(dtype t) { return t == T_F32 || t == T_I32 ? 4 : 8; }

/* Backend memory holding a copy of host (bytes), or zeros when host is NULL. */
static void *put(run_t *r, const void *host, size_t bytes) {
  assert_true(r->ndev < MAX_DEV);
  void *d = r->be->alloc(bytes ? bytes : 4);
  if (!d) fail_msg("%s: alloc of %zu bytes: %s", r->be->name, bytes, pt_error_message());
  if (host && bytes) r->be->upload(d, host, bytes);
  r->dev[r->ndev++] = d;
  return d;
}

static void take(run_t *r, const char *name, dtype t, int exact, const void *dev, size_t count) {
  assert_true(r->nres < MAX_RES);
  void *h = malloc(count * dsize(t) + 1);
  assert_non_null(h);
  const pt_status st = r->be->download(h, dev, count * dsize(t));
  if (st != PT_OK) fail_msg("%s: download of %s: %s", r->be->name, name, pt_error_message());
  r->res[r->nres++] = (result){name, t, exact, 0, count, h};
}

/* take, for an array compared element by element too. */
static void take_each(run_t *r, const char *name, dtype t, const void *dev, size_t count) {
  take(r, name, t, 0, dev, count);
  r->res[r->nres - 1].per_elem = 1;
}

static void release(run_t *r) {
  for (int i = 0; i < r->ndev; i++) r->be->free(r->dev[i]);
  for (int i = 0; i < r->nres; i++) free(r->res[i].host);
  r->ndev = r->nres = 0;
}

/* Inputs: a pure function of (stream, index), identical for both backends. */
static float *rnd(size_t n, uint64_t stream, float lo, float hi) {
  float *a = malloc((n ? n : 1) * sizeof *a);
  assert_non_null(a);
  pt_rng g;
  pt_rng_init(&g, 0x7e57, stream);
  for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * pt_rng_uniform(&g);
  return a;
}

static float *constant(size_t n, float v) {
  float *a = malloc((n ? n : 1) * sizeof *a);
  assert_non_null(a);
  for (size_t i = 0; i < n; i++) a[i] = v;
  return a;
}

static int32_t *labels(int n, int k, uint64_t stream) {
  int32_t *y = malloc((size_t)(n ? n : 1) * sizeof *y);
  assert_non_null(y);
  pt_rng g;
  pt_rng_init(&g, 0x7e57, stream);
  for (int i = 0; i < n; i++) y[i] = (int32_t)pt_rng_below(&g, (uint32_t)k);
  return y;
}

static void quantize(float *a, size_t n) {
  for (size_t i = 0; i < n; i++) a[i] = floorf(a[i] * 4.0f) / 4.0f;
}

/* --precision bf16 rounds what a GEMM multiplies to bf16 (8 significant
 * bits), to nearest, ties to even, as the conversion instructions do. The
 * CPU's reference for a bf16 row rounds those inputs first (ROUND_XW: x
 * and w; ROUND_DY: dy too) and then computes in fp32 as usual: products of
 * such values are exact in fp32, so what is left between the two sides is
 * the order of the fp32 sums. */
enum { ROUND_XW = 1, ROUND_DY = 2 };
enum { BF16_DROP = 16, TF32_DROP = 13 }; /* the low bits of an fp32 each drops */
static int round_inputs, round_drop = BF16_DROP;

static float round_to(float v, int drop) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return v; /* inf and NaN as they are */
  u += (1u << (drop - 1)) - 1u + ((u >> drop) & 1u);
  u &= ~((1u << drop) - 1u);
  memcpy(&v, &u, sizeof v);
  return v;
}

static float bf16_round(float v) { return round_to(v, BF16_DROP); }

static float *rounded(float *a, size_t n, int which) {
  if (round_inputs & which)
    for (size_t i = 0; i < n; i++) a[i] = round_to(a[i], round_drop);
  return a;
}

#define FREE_ALL(...)                                        \
  do {                                                       \
    void *fa_[] = {__VA_ARGS__};                             \
    for (size_t i_ = 0; i_ < sizeof fa_ / sizeof fa_[0]; i_++) free(fa_[i_]); \
  } while (0)

/* A convolution row's geometry and host inputs, the same for both
 * backends and for the magnitudes that bound its rounding. */
typedef struct {
  pt_conv_geom g;
  size_t nx, nw, ny;
  float *x, *w, *b, *dy, *dw0, *db0; /* db0: the bias gradient's starting value */
} conv_inputs;

static void conv_inputs_make(const ocase *tc, conv_inputs *in) {
  in->g = (pt_conv_geom){tc->c, tc->h, tc->w, tc->oc, tc->k, tc->k, tc->s, tc->pad, 0, 0, (tc->flags & F_RELU) != 0};
  assert_true(pt_conv_init(&in->g));
  in->nx = (size_t)tc->n * tc->c * tc->h * tc->w;
  in->nw = (size_t)tc->oc * tc->c * tc->k * tc->k;
  in->ny = (size_t)tc->n * tc->oc * in->g.oh * in->g.ow;
  in->x = rounded(rnd(in->nx, 1, -1, 1), in->nx, ROUND_XW);
  in->w = rounded(rnd(in->nw, 2, -0.5f, 0.5f), in->nw, ROUND_XW);
  in->b = rnd((size_t)tc->oc, 3, -0.5f, 0.5f);
  in->dy = rounded(rnd(in->ny, 4, -1, 1), in->ny, ROUND_DY);
  in->dw0 = rnd(in->nw, 5, -0.1f, 0.1f);
  in->db0 = rnd((size_t)tc->oc, 6, -0.1f, 0.1f);
}

static void conv_inputs_free(conv_inputs *in) { FREE_ALL(in->x, in->w, in->b, in->dy, in->dw0, in->db0); }

/* Where set, a fused ReLU's backward masks by this y (another run's: the
 * GPU's) instead of the run's own. A bf16 forward pass moves entries near
 * zero across it, and one entry masked differently moves a weight
 * gradient by a whole term. */
static const float *relu_y_from;

static void run_conv(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  conv_inputs in;
  conv_inputs_make(tc, &in);
  const pt_conv_geom g = in.g;
  const size_t nx = in.nx, nw = in.nw, ny = in.ny;
  const float *x = in.x, *w = in.w, *b = in.b, *dy = in.dy, *dw0 = in.dw0, *db0 = in.db0;
  float *junk = constant(nx, 7.0f);
  const int bias = (tc->flags & F_BIAS) != 0;
  const size_t wsf = be->conv_workspace(&g, pt_ops_get_threads());
  float *X = put(r, x, nx * 4), *W = put(r, w, nw * 4), *B = bias ? put(r, b, (size_t)tc->oc * 4) : NULL;
  float *Y = put(r, NULL, ny * 4), *WS = put(r, NULL, (wsf ? wsf : 1) * 4);
  be->conv2d_forward(&g, tc->n, X, W, B, Y, WS);
  take(r, "y", T_F32, 0, Y, ny);
  if (relu_y_from && (tc->flags & F_RELU)) be->upload(Y, relu_y_from, ny * 4);
  float *DY = put(r, dy, ny * 4), *DW = put(r, dw0, nw * 4), *DB = bias ? put(r, db0, (size_t)tc->oc * 4) : NULL;
  float *DX = tc->flags & F_NO_DX ? NULL : put(r, junk, nx * 4);
  be->conv2d_backward(&g, tc->n, X, W, Y, DY, DW, DB, DX, WS);
  take(r, "dw", T_F32, 0, DW, nw);
  if (DB) take(r, "db", T_F32, 0, DB, (size_t)tc->oc);
  if (DX) take(r, "dx", T_F32, 0, DX, nx);
  free(junk);
  conv_inputs_free(&in);
}

static void run_linear(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const int n = tc->n, in = tc->c, out = tc->oc;
  const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
  float *x = rounded(rnd(nx, 1, -1, 1), nx, ROUND_XW), *w = rounded(rnd(nw, 2, -0.1f, 0.1f), nw, ROUND_XW);
  float *b = rnd((size_t)out, 3, -0.5f, 0.5f), *dy = rounded(rnd(ny, 4, -1, 1), ny, ROUND_DY);
  float *dw0 = rnd(nw, 5, -0.1f, 0.1f), *db0 = rnd((size_t)out, 6, -0.1f, 0.1f);
  float *junk = constant(nx > nw ? nx : nw, 7.0f); /* dx, or dw and db when written over */
  const int bias = (tc->flags & F_BIAS) != 0;
  float *X = put(r, x, nx * 4), *W = put(r, w, nw * 4), *B = bias ? put(r, b, (size_t)out * 4) : NULL;
  const size_t wsf = be->linear_workspace(n, in, out, pt_ops_get_threads());
  float *Y = put(r, NULL, ny * 4), *WS = put(r, NULL, (wsf ? wsf : 1) * 4);
  be->linear_forward(n, in, out, X, W, B, Y, WS);
  take(r, "y", T_F32, 0, Y, ny);
  const int add = !(tc->flags & F_WRITE);
  float *DY = put(r, dy, ny * 4), *DW = put(r, add ? dw0 : junk, nw * 4);
  float *DB = bias ? put(r, add ? db0 : junk, (size_t)out * 4) : NULL;
  float *DX = tc->flags & F_NO_DX ? NULL : put(r, junk, nx * 4);
  be->linear_backward(n, in, out, X, W, DY, DW, DB, DX, add, WS);
  take(r, "dw", T_F32, 0, DW, nw);
  if (DB) take(r, "db", T_F32, 0, DB, (size_t)out);
  if (DX) take(r, "dx", T_F32, 0, DX, nx);
  FREE_ALL(x, w, b, dy, dw0, db0, junk);
}

static void run_maxpool(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const int oh = (tc->h - tc->k) / tc->s + 1, ow = (tc->w - tc->k) / tc->s + 1;
  const size_t nx = (size_t)tc->n * tc->c * tc->h * tc->w, ny = (size_t)tc->n * tc->c * oh * ow;
  float *x = rnd(nx, 1, -1, 1), *dy = rnd(ny, 2, -1, 1), *junk = constant(nx, 7.0f);
  if (tc->flags & F_TIES) quantize(x, nx);
  float *X = put(r, x, nx * 4), *Y = put(r, NULL, ny * 4);
  int32_t *A = put(r, NULL, ny * 4);
  be->maxpool_forward(tc->n, tc->c, tc->h, tc->w, tc->k, tc->s, oh, ow, X, Y, A);
  take(r, "y", T_F32, 1, Y, ny);
  take(r, "argmax", T_I32, 1, A, ny);
  float *DY = put(r, dy, ny * 4), *DX = put(r, junk, nx * 4);
  be->maxpool_backward(tc->n, tc->c, tc->h, tc->w, tc->k, tc->s, oh, ow, DY, A, DX);
  take(r, "dx", T_F32, 0, DX, nx);
  FREE_ALL(x, dy, junk);
}

static void run_relu(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const size_t n = (size_t)tc->n * tc->c * tc->h * tc->w;
  float *x = rnd(n, 1, -1, 1), *dy = rnd(n, 2, -1, 1), *junk = constant(n, 7.0f);
  for (size_t i = 0; i < n; i += 5) x[i] = i % 10 ? 0.0f : -0.0f; /* the boundary, both signs */
  x[3] = NAN; /* passes through, as PyTorch's; its gradient is 0 */
  float *X = put(r, x, n * 4), *Y = put(r, junk, n * 4);
  be->relu_forward(n, X, Y);
  take(r, "y", T_F32, 1, Y, n);
  float *DY = put(r, dy, n * 4), *DX = put(r, junk, n * 4);
  be->relu_backward(n, Y, DY, DX);
  take(r, "dx", T_F32, 1, DX, n);
  FREE_ALL(x, dy, junk);
}

static void run_dropout(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const size_t n = (size_t)tc->n * tc->c * tc->h * tc->w;
  float *x = rnd(n, 1, -1, 1), *dy = rnd(n, 2, -1, 1), *junk = constant(n, 7.0f);
  float *X = put(r, x, n * 4), *Y = put(r, junk, n * 4), *M = put(r, junk, n * 4);
  be->dropout_forward(n, tc->a, 0x0123456789abcdefull, 7 + (uint64_t)n, (uint32_t)tc->oc, X, Y, M);
  take(r, "y", T_F32, 1, Y, n);
  take(r, "mask", T_F32, 1, M, n);
  float *DY = put(r, dy, n * 4), *DX = put(r, junk, n * 4);
  be->dropout_backward(n, M, DY, DX);
  take(r, "dx", T_F32, 1, DX, n);
  FREE_ALL(x, dy, junk);
}

static void run_log_softmax(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const size_t n = (size_t)tc->n * tc->c;
  float *x = rnd(n, 1, -5, 5), *dy = rnd(n, 2, -1, 1), *junk = constant(n, 7.0f);
  float *X = put(r, x, n * 4), *Y = tc->flags & F_INPLACE ? X : put(r, junk, n * 4);
  float *P = put(r, junk, n * 4); /* the CPU keeps the softmax there; a GPU ignores it */
  be->log_softmax_forward(tc->n, tc->c, X, Y, P);
  take(r, "y", T_F32, 0, Y, n);
  float *DY = put(r, dy, n * 4), *DX = put(r, junk, n * 4);
  be->log_softmax_backward(tc->n, tc->c, Y, P, DY, DX);
  take(r, "dx", T_F32, 0, DX, n);
  FREE_ALL(x, dy, junk);
}

/* nll and cross-entropy, then accumulate_loss of the result. */
static void run_loss(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const size_t n = (size_t)tc->n * tc->c;
  float *x = rnd(n, 1, -4, 4), *junk = constant(n, 7.0f);
  int32_t *y = labels(tc->n, tc->c, 2);
  if (tc->op == OP_NLL) pt_log_softmax_forward(tc->n, tc->c, x, x, NULL); /* valid log-probabilities */
  const double acc0[2] = {1.5, 3.0};
  float *X = put(r, x, n * 4), *G = tc->flags & F_NO_GRAD ? NULL : put(r, junk, n * 4);
  int32_t *Yl = put(r, y, (size_t)tc->n * 4);
  double *L = put(r, NULL, 8), *ACC = put(r, acc0, sizeof acc0);
  if (tc->op == OP_NLL) be->nll_loss(tc->n, tc->c, X, Yl, G, tc->a, L);
  else be->cross_entropy_loss(tc->n, tc->c, X, Yl, G, tc->a, L);
  be->accumulate_loss(L, tc->n, ACC);
  take(r, "loss", T_F64, 0, L, 1);
  take(r, "acc", T_F64, 0, ACC, 2);
  if (G) take(r, "grad", T_F32, 0, G, n);
  FREE_ALL(x, junk, y);
}

static void run_count(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const int n = tc->n, k = tc->c;
  float *s = rnd((size_t)n * k, 1, -1, 1);
  int32_t *y = labels(n, k, 2);
  if (tc->flags & F_TIES) quantize(s, (size_t)n * k);
  if (tc->flags & F_NAN) {
    s[0] = NAN;                       /* row 0: NaN first, the CPU's scan keeps index 0 */
    s[(size_t)k + 1] = NAN;           /* row 1: NaN inside is never the maximum */
    for (int j = 0; j < k; j++) s[(size_t)2 * k + j] = NAN; /* row 2: all NaN */
    y[0] = 0;
    y[2] = 0;
  }
  /* Half the rows labelled with their argmax (first maximum, NaN never
   * chosen unless first), so the count is neither 0 nor n. */
  for (int i = 1; i < n; i += 2) {
    const float *row = s + (size_t)i * k;
    int best = 0;
    for (int j = 1; j < k; j++)
      if (row[j] > row[best]) best = j;
    y[i] = best;
  }
  const int64_t c0 = 5;
  float *S = put(r, s, (size_t)n * k * 4);
  int32_t *Y = put(r, y, (size_t)n * 4);
  int64_t *C = put(r, &c0, sizeof c0);
  be->count_correct(n, k, S, Y, C);
  be->count_correct(n, k, S, Y, C); /* accumulates */
  take(r, "count", T_I64, 1, C, 1);
  FREE_ALL(s, y);
}

static void run_batchnorm(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const int c = tc->c, hw = tc->h * tc->w;
  const size_t nx = (size_t)tc->n * c * hw;
  const pt_bn_geom g = {c, 1e-5f, 0.1f};
  /* An offset far from zero, as a layer's pre-activations often have. */
  float *x = rnd(nx, 1, 2, 4), *dy = rnd(nx, 2, -1, 1), *junk = constant(nx, 7.0f);
  float *gamma = rnd((size_t)c, 3, 0.5f, 1.5f), *beta = rnd((size_t)c, 4, -0.5f, 0.5f);
  float *rm = rnd((size_t)c, 5, -0.3f, 0.3f), *rv = rnd((size_t)c, 6, 0.5f, 1.5f);
  float *dg0 = rnd((size_t)c, 7, -0.1f, 0.1f), *db0 = rnd((size_t)c, 8, -0.1f, 0.1f);
  float *X = put(r, x, nx * 4), *GA = put(r, gamma, (size_t)c * 4), *BE = put(r, beta, (size_t)c * 4);
  float *RM = put(r, rm, (size_t)c * 4), *RV = put(r, rv, (size_t)c * 4), *Y = put(r, junk, nx * 4);
  float *DY = put(r, dy, nx * 4), *DG = put(r, dg0, (size_t)c * 4), *DB = put(r, db0, (size_t)c * 4);
  float *DX = tc->flags & F_NO_DX ? NULL : put(r, junk, nx * 4);
  if (tc->op == OP_BN_TRAIN) {
    float *SM = put(r, NULL, (size_t)c * 4), *SI = put(r, NULL, (size_t)c * 4);
    double *SCR = put(r, NULL, (size_t)2 * c * 8);
    be->batchnorm_forward_train(&g, tc->n, hw, X, GA, BE, RM, RV, SM, SI, Y, SCR);
    take(r, "y", T_F32, 0, Y, nx);
    take(r, "running_mean", T_F32, 0, RM, (size_t)c);
    take(r, "running_var", T_F32, 0, RV, (size_t)c);
    take(r, "save_mean", T_F32, 0, SM, (size_t)c);
    take(r, "save_invstd", T_F32, 0, SI, (size_t)c);
    be->batchnorm_backward_train(&g, tc->n, hw, X, GA, SM, SI, DY, DG, DB, DX, SCR);
    take(r, "scratch (sum dy, sum dy*xhat)", T_F64, 0, SCR, (size_t)2 * c);
  } else {
    be->batchnorm_forward_eval(&g, tc->n, hw, X, GA, BE, RM, RV, Y);
    take(r, "y", T_F32, 0, Y, nx);
    be->batchnorm_backward_eval(&g, tc->n, hw, X, GA, RM, RV, DY, DG, DB, DX);
  }
  take(r, "dgamma", T_F32, 0, DG, (size_t)c);
  take(r, "dbeta", T_F32, 0, DB, (size_t)c);
  if (DX) take(r, "dx", T_F32, 0, DX, nx);
  FREE_ALL(x, dy, junk, gamma, beta, rm, rv, dg0, db0);
}

/* The four steps of synchronised batch norm, each on its own inputs: the
 * global sums and statistics they take come from all workers (oc of them,
 * this one's shard among them), so they are made up here, near what such a
 * batch gives, and count is the global batch's. */
static void run_bn_sync(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const int c = tc->c, hw = tc->h * tc->w;
  const size_t nx = (size_t)tc->n * c * hw, C = (size_t)c;
  const pt_bn_geom g = {c, 1e-5f, 0.1f};
  const double count = (double)tc->oc * tc->n * hw;
  float *x = rnd(nx, 1, 2, 4), *dy = rnd(nx, 2, -1, 1), *junk = constant(nx, 7.0f);
  float *gamma = rnd(C, 3, 0.5f, 1.5f), *beta = rnd(C, 4, -0.5f, 0.5f);
  float *rm = rnd(C, 5, -0.3f, 0.3f), *rv = rnd(C, 6, 0.5f, 1.5f);
  float *dg0 = rnd(C, 7, -0.1f, 0.1f), *db0 = rnd(C, 8, -0.1f, 0.1f);
  /* x is uniform on [2, 4]: mean 3, variance 1/3, 1/std about 1.7. */
  float *u = rnd(C, 9, -1, 1), *v = rnd(C, 10, 0.2f, 0.5f), *w1 = rnd(C, 11, -1, 1), *w2 = rnd(C, 12, -1, 1);
  float *sm = rnd(C, 13, 2.8f, 3.2f), *si = rnd(C, 14, 1.4f, 2.0f);
  double *center = malloc(C * sizeof *center), *sq = malloc(C * sizeof *sq), *sums = malloc(2 * C * sizeof *sums);
  double *djunk = malloc(2 * C * sizeof *djunk); /* outputs start as garbage: written, not added to */
  assert_true(center && sq && sums && djunk);
  for (size_t i = 0; i < 2 * C; i++) djunk[i] = 7.0;
  for (size_t i = 0; i < C; i++) {
    center[i] = 3.0 + u[i] / 7.0; /* not a float */
    sq[i] = count * v[i];
    sums[i] = sqrt(count) * w1[i];
    sums[C + i] = sqrt(count) * w2[i];
  }
  float *X = put(r, x, nx * 4), *GA = put(r, gamma, C * 4), *BE = put(r, beta, C * 4);
  float *RM = put(r, rm, C * 4), *RV = put(r, rv, C * 4), *Y = put(r, junk, nx * 4);
  float *DY = put(r, dy, nx * 4), *DG = put(r, dg0, C * 4), *DB = put(r, db0, C * 4);
  float *SM = put(r, sm, C * 4), *SI = put(r, si, C * 4);
  float *SM2 = put(r, junk, C * 4), *SI2 = put(r, junk, C * 4);
  double *CENTER = put(r, center, C * 8), *SQ = put(r, sq, C * 8), *SUMS = put(r, sums, 2 * C * 8);
  double *OUT = put(r, djunk, C * 8), *OUT2 = put(r, djunk, C * 8), *BSUMS = put(r, djunk, 2 * C * 8);
  float *DX = tc->flags & F_NO_DX ? NULL : put(r, junk, nx * 4);
  be->batchnorm_sums(&g, tc->n, hw, X, NULL, OUT);
  take_each(r, "sum x", T_F64, OUT, C);
  be->batchnorm_sums(&g, tc->n, hw, X, CENTER, OUT2);
  take_each(r, "sum (x - center)^2", T_F64, OUT2, C);
  be->batchnorm_normalize(&g, tc->n, hw, X, GA, BE, CENTER, SQ, count, RM, RV, SM2, SI2, Y);
  take_each(r, "y", T_F32, Y, nx);
  take_each(r, "running_mean", T_F32, RM, C);
  take_each(r, "running_var", T_F32, RV, C);
  take_each(r, "save_mean", T_F32, SM2, C);
  take_each(r, "save_invstd", T_F32, SI2, C);
  be->batchnorm_backward_sums(&g, tc->n, hw, X, SM, SI, DY, DG, DB, BSUMS);
  take_each(r, "sums (sum dy, sum dy*xhat)", T_F64, BSUMS, 2 * C);
  take_each(r, "dgamma", T_F32, DG, C);
  take_each(r, "dbeta", T_F32, DB, C);
  if (DX) {
    be->batchnorm_backward_dx(&g, tc->n, hw, X, GA, SM, SI, DY, SUMS, count, DX);
    take_each(r, "dx", T_F32, DX, nx);
  }
  FREE_ALL(x, dy, junk, gamma, beta, rm, rv, dg0, db0, u, v, w1, w2, sm, si, center, sq, sums, djunk);
}

/* Gradients of magnitude 0.05 to 1, sign kept. Adam's and Adadelta's
 * steps divide by a root of the square average, so where it and the
 * gradient are both near zero the step is about lr * sign(g), and an
 * element compared there measures how each backend rounds 0/0 rather than
 * the update; the tests/nn parity tests meet the same with gradients
 * that come out of a backward pass and compare what is well conditioned. */
static float *away_from_zero(float *g, size_t n) {
  for (size_t i = 0; i < n; i++) g[i] = (g[i] < 0.0f ? -1.0f : 1.0f) * (0.05f + 0.95f * fabsf(g[i]));
  return g;
}

/* Three steps with fresh gradients and a decaying learning rate, from
 * non-zero state, so every term of each update rule is exercised. */
static void run_optimizer(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  const size_t n = (size_t)tc->n * tc->c * tc->h * tc->w;
  pt_opt_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.999f;
  cfg.rho = 0.9f;
  cfg.eps = tc->op == OP_ADADELTA ? 1e-6f : 1e-8f;
  float lr = 0.05f;
  switch (tc->op) {
    case OP_SGD:
      cfg.kind = PT_OPT_SGD;
      cfg.momentum = tc->a;
      cfg.dampening = tc->flags & F_DAMP ? 0.1f : 0.0f;
      cfg.nesterov = (tc->flags & F_NESTEROV) != 0;
      cfg.weight_decay = tc->flags & F_WD ? 1e-2f : 0.0f;
      break;
    case OP_ADAM:
    case OP_ADAMW:
      cfg.kind = tc->op == OP_ADAM ? PT_OPT_ADAM : PT_OPT_ADAMW;
      cfg.weight_decay = tc->flags & F_WD ? 1e-2f : 0.0f;
      lr = 1e-3f;
      break;
    default:
      cfg.kind = PT_OPT_ADADELTA;
      cfg.weight_decay = tc->flags & F_WD ? 0.1f : 0.0f;
      lr = 1.0f;
  }
  cfg.lr = lr;
  /* State 0: momentum or Adam's first moment (any sign), Adadelta's
   * square average (not negative); state 1 is a square average, kept off
   * zero for the reason the gradients are (away_from_zero). */
  float *p = rnd(n, 1, -1, 1), *s1 = rnd(n, 3, 1e-6f, 1e-4f);
  float *s0 = tc->op == OP_ADADELTA ? rnd(n, 2, 0.0f, 0.01f) : rnd(n, 2, -0.01f, 0.01f);
  float *P = put(r, p, n * 4);
  float *S0 = tc->op == OP_SGD && cfg.momentum == 0.0f ? NULL : put(r, s0, n * 4);
  float *S1 = tc->op == OP_SGD ? NULL : put(r, s1, n * 4);
  float *G = put(r, NULL, n * 4);
  for (int t = 0; t < 3; t++) {
    float *g = away_from_zero(rnd(n, 10 + (uint64_t)t, -1, 1), n);
    be->upload(G, g, n * 4);
    free(g);
    const float lr_t = lr * (1.0f - 0.2f * (float)t);
    switch (tc->op) {
      case OP_SGD: be->sgd_update(&cfg, n, P, G, S0, t == 0, lr_t); break;
      case OP_ADAM:
      case OP_ADAMW: be->adam_update(&cfg, n, P, G, S0, S1, t + 1, lr_t); break;
      default: be->adadelta_update(&cfg, n, P, G, S0, S1, lr_t);
    }
  }
  take(r, "param", T_F32, 0, P, n);
  if (S0) take(r, "state 0", T_F32, 0, S0, n);
  if (S1) take(r, "state 1", T_F32, 0, S1, n);
  FREE_ALL(p, s0, s1);
}

static void run_scale(run_t *r, const ocase *tc) {
  const size_t n = (size_t)tc->n * tc->c * tc->h * tc->w;
  float *x = rnd(n, 1, -3, 3);
  float *X = put(r, x, n * 4);
  r->be->scale(n, tc->a, X);
  take(r, "x", T_F32, 1, X, n);
  free(x);
}

/* The reference is the loader's batch (the CPU backend has no make_batch:
 * on the CPU the loader makes batches); the device makes the same batch
 * from the dataset bytes and the loader's indices. Batches 0 (full) and
 * 2 (the short last one) of epoch 3. */
static void run_batch(run_t *r, const ocase *tc) {
  const pt_backend *be = r->be;
  pt_dataset ds = random_dataset(tc->n, tc->c, tc->h, tc->w, 0x7e57, 99);
  const size_t chw = (size_t)ds.c * ds.h * ds.w;
  pt_loader_config cfg = {.batch_size = 16, .shuffle = 1, .seed = 31, .world = 1,
                          .mean = {0.4914f, 0.4822f, 0.4465f}, .std = {0.2470f, 0.2435f, 0.2616f},
                          .crop_pad = tc->flags & F_CROP ? tc->pad : 0, .hflip = (tc->flags & F_FLIP) != 0};
  const int epoch = 3;
  pt_loader *l;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
  assert_int_equal(pt_loader_num_batches(l), 3);
  assert_int_equal(pt_loader_start_epoch(l, epoch, 0), PT_OK);
  uint8_t *IM = NULL, *LB = NULL;
  if (be->make_batch) {
    IM = put(r, ds.images, chw * (size_t)ds.n);
    LB = put(r, ds.labels, (size_t)ds.n);
  }
  for (int b = 0; b < 3; b++) {
    pt_batch bt;
    assert_int_equal(pt_loader_next(l, &bt), PT_OK);
    if (b == 1) continue;
    float *X;
    int32_t *Y;
    if (be->make_batch) {
      int32_t *IDX = put(r, bt.index, (size_t)bt.n * 4);
      X = put(r, NULL, (size_t)bt.n * chw * 4);
      Y = put(r, NULL, (size_t)bt.n * 4);
      be->make_batch(IM, LB, ds.c, ds.h, ds.w, IDX, bt.n, cfg.mean, cfg.std, cfg.crop_pad, cfg.hflip,
                     pt_rng_key(cfg.seed, PT_RNG_AUGMENT), epoch, X, Y);
    } else {
      X = put(r, bt.x, (size_t)bt.n * chw * 4);
      Y = put(r, bt.y, (size_t)bt.n * 4);
    }
    take(r, b == 0 ? "x (batch 0)" : "x (batch 2)", T_F32, 1, X, (size_t)bt.n * chw);
    take(r, b == 0 ? "y (batch 0)" : "y (batch 2)", T_I32, 1, Y, (size_t)bt.n);
  }
  pt_loader_destroy(l);
  pt_dataset_free(&ds);
}

static void run_case(const pt_backend *be, const ocase *tc, run_t *r) {
  memset(r, 0, sizeof *r);
  r->be = be;
  switch (tc->op) {
    case OP_CONV: run_conv(r, tc); break;
    case OP_LINEAR: run_linear(r, tc); break;
    case OP_MAXPOOL: run_maxpool(r, tc); break;
    case OP_RELU: run_relu(r, tc); break;
    case OP_DROPOUT: run_dropout(r, tc); break;
    case OP_LOGSOFTMAX: run_log_softmax(r, tc); break;
    case OP_NLL:
    case OP_XENT: run_loss(r, tc); break;
    case OP_COUNT: run_count(r, tc); break;
    case OP_BN_TRAIN:
    case OP_BN_EVAL: run_batchnorm(r, tc); break;
    case OP_BN_SYNC: run_bn_sync(r, tc); break;
    case OP_SGD:
    case OP_ADAM:
    case OP_ADAMW:
    case OP_ADADELTA: run_optimizer(r, tc); break;
    case OP_SCALE: run_scale(r, tc); break;
    case OP_BATCH: run_batch(r, tc); break;
  }
  const pt_status st = be->sync();
  if (st != PT_OK) fail_msg("%s: %s: %s", tc->label, be->name, pt_error_message());
}

static double value(const result *res, size_t i) {
  switch (res->t) {
    case T_F32: return ((const float *)res->host)[i];
    case T_F64: return ((const double *)res->host)[i];
    case T_I32: return ((const int32_t *)res->host)[i];
    default: return (double)((const int64_t *)res->host)[i];
  }
}

/* ---- the tests ---- */

/* CPU side alone: every row runs and gives finite numbers (NaN only where
 * the row puts it in). */
static void test_cpu_side(void **state) {
  const ocase *tc = *state;
  run_t r;
  run_case(pt_backend_cpu(), tc, &r);
  assert_true(r.nres > 0);
  for (int i = 0; i < r.nres; i++)
    for (size_t j = 0; j < r.res[i].count; j++)
      if (!isfinite(value(&r.res[i], j)) && !(tc->flags & F_NAN))
        fail_msg("%s: %s[%zu] = %g", tc->label, r.res[i].name, j, value(&r.res[i], j));
  release(&r);
}

/* The bf16 references' rounding: to nearest, ties to even, at bf16's 8
 * significant bits, whatever the exponent. */
static void test_bf16_round(void **s) {
  (void)s;
  const float ulp = 1.0f / 128.0f; /* bf16's spacing in [1, 2) */
  assert_true(bf16_round(1.0f) == 1.0f);
  assert_true(bf16_round(1.0f + ulp / 4) == 1.0f);
  assert_true(bf16_round(1.0f + ulp * 3 / 4) == 1.0f + ulp);
  assert_true(bf16_round(1.0f + ulp / 2) == 1.0f);              /* a tie: to the even 1 */
  assert_true(bf16_round(1.0f + ulp * 3 / 2) == 1.0f + 2 * ulp); /* a tie: to the even 1 + 2 ulp */
  assert_true(bf16_round(-(1.0f + ulp * 3 / 4)) == -(1.0f + ulp));
  assert_true(bf16_round(3.0e-3f * (1.0f + ulp / 4)) == bf16_round(3.0e-3f));
  assert_true(bf16_round(0x1.fffffep127f) == INFINITY); /* rounds past the largest bf16 */
  assert_true(isnan(bf16_round(NAN)));
  round_inputs = ROUND_XW;
  float a[2] = {1.0f + ulp / 4, 1.0f + ulp / 4};
  rounded(a, 1, ROUND_DY);
  rounded(a + 1, 1, ROUND_XW);
  round_inputs = 0;
  assert_true(a[0] == 1.0f + ulp / 4 && a[1] == 1.0f);
  /* TF32: 11 significant bits, the same rule. */
  const float tulp = 1.0f / 1024.0f;
  assert_true(round_to(1.0f + tulp / 2, TF32_DROP) == 1.0f);
  assert_true(round_to(1.0f + tulp * 3 / 2, TF32_DROP) == 1.0f + 2 * tulp);
  assert_true(round_to(1.0f + tulp * 3 / 4, TF32_DROP) == 1.0f + tulp);
  assert_true(round_to(1.0f + ulp / 4, TF32_DROP) == 1.0f + ulp / 4); /* exact in TF32 */
}

static void test_without_cuda(void **s) {
  (void)s;
  assert_null(pt_backend_cuda());
  assert_non_null(strstr(pt_error_message(), "built without CUDA"));
}

/* The rest needs the CUDA context (ops/cuda/context.cu): CUDA builds only. */
#ifdef PT_HAVE_CUDA
/* The plan cache of the cuDNN path holds every preset's convolutions at
 * the four batch sizes a run meets (training, its short last batch, and
 * the same for evaluation), twice over: otherwise each epoch evicts plans
 * and queries cuDNN's heuristics again. */
static void test_plan_cache_fits_presets(void **s) {
  (void)s;
  const char *names[] = {"mnist-cnn", "tutorial-cnn", "fmnist-mlp", "cifar-convnet"};
  int most = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    pt_model_spec spec;
    assert_int_equal(pt_preset_spec(names[i], &spec), PT_OK);
    int convs = 0;
    for (int l = 0; l < spec.nlayers; l++) convs += spec.layers[l].kind == PT_L_CONV2D;
    if (4 * convs > most) most = 4 * convs;
  }
  assert_int_equal(most, 24); /* cifar-convnet's six convolutions */
  if (pt_cuda_conv_plan_slots() == 0) return; /* no cuDNN in this build */
  if (pt_cuda_conv_plan_slots() < 2 * most)
    fail_msg("the cuDNN plan cache holds %d plans; the presets need up to %d, and twice that leaves room",
             pt_cuda_conv_plan_slots(), most);
}

/* The 200-sample convolution rows run the gemm path in several chunks
 * (the chunk size follows the layer, so a change of budget could quietly
 * make them one chunk). */
static void test_chunks(void **s) {
  (void)s;
  int rows = 0;
  for (size_t i = 0; i < NCASES; i++) {
    const ocase *tc = &cases[i];
    if (tc->op != OP_CONV || tc->n < 200) continue;
    pt_conv_geom g = {tc->c, tc->h, tc->w, tc->oc, tc->k, tc->k, tc->s, tc->pad, 0, 0, 0};
    assert_true(pt_conv_init(&g));
    const int chunk = pt_cuda_conv_chunk(&g);
    if ((tc->n + chunk - 1) / chunk < 2) fail_msg("%s: one chunk of %d samples", tc->label, chunk);
    rows++;
  }
  assert_true(rows >= 2);
}

/* The convolution asked for (PT_CUDA_CONV) is the one that ran, in every
 * direction; unset, the default (cuDNN where built in) may hand a
 * direction to the gemm path, and the row says so. */
static void check_conv_path(const ocase *tc) {
  const pt_cuda_conv_paths p = pt_cuda_conv_paths_get();
  const char *want = getenv("PT_CUDA_CONV");
  if (p.cudnn + p.gemm == 0) fail_msg("%s: no convolution direction was counted", tc->label);
  if (want && !strcmp(want, "cudnn") && p.gemm)
    fail_msg("%s: PT_CUDA_CONV=cudnn, but %llu direction(s) ran on the gemm path: %s", tc->label, p.gemm, p.why);
  if (want && !strcmp(want, "gemm") && p.cudnn)
    fail_msg("%s: PT_CUDA_CONV=gemm, but %llu direction(s) ran on cuDNN", tc->label, p.cudnn);
  if (!want && p.gemm) print_message("    %s: %llu direction(s) on the gemm path: %s\n", tc->label, p.gemm, p.why);
  /* The default's fixed rule (conv.cu): 5x5 kernels, and 3x3 kernels on a
   * grey or RGB first layer's 1 to 3 channels, never run on cuDNN. */
  const int gemm_rule = tc->k == 5 || (tc->k == 3 && tc->c <= 3);
  if (!want && gemm_rule && p.cudnn)
    fail_msg("%s: %llu direction(s) ran on cuDNN, where the default puts %s on the gemm path", tc->label, p.cudnn,
             tc->k == 5 ? "5x5 kernels" : "3x3 kernels on 1 to 3 channels in");
}

/* ---- convolutions and linear layers: the magnitudes each entry is a sum of ---- */

#define SUM_TOL 1e-5

typedef struct {
  double *y, *dx, *dw, *db; /* as run_conv's or run_linear's results, NULL where it has none */
} term_sums;

/* Over the row's own inputs (conv_inputs_make); the ReLU's mask left out
 * of dy, which only makes the sums larger. */
static void conv_magnitudes(const ocase *tc, term_sums *m) {
  conv_inputs in;
  conv_inputs_make(tc, &in);
  const pt_conv_geom g = in.g;
  const int k = tc->k, bias = (tc->flags & F_BIAS) != 0;
  const size_t nx = in.nx, nw = in.nw, ny = in.ny;
  const float *x = in.x, *w = in.w, *b = in.b, *dy = in.dy, *dw0 = in.dw0, *db0 = in.db0;
  m->y = calloc(ny, sizeof(double));
  m->dw = calloc(nw, sizeof(double));
  m->db = bias ? calloc((size_t)tc->oc, sizeof(double)) : NULL;
  m->dx = tc->flags & F_NO_DX ? NULL : calloc(nx, sizeof(double));
  assert_true(m->y && m->dw && (m->db || !bias) && (m->dx || (tc->flags & F_NO_DX)));
  for (size_t i = 0; i < nw; i++) m->dw[i] = fabs(dw0[i]);
  for (int o = 0; m->db && o < tc->oc; o++) m->db[o] = fabs(db0[o]);
  for (int s = 0; s < tc->n; s++)
    for (int o = 0; o < tc->oc; o++)
      for (int oy = 0; oy < g.oh; oy++)
        for (int ox = 0; ox < g.ow; ox++) {
          const size_t yi = (((size_t)s * tc->oc + o) * g.oh + oy) * g.ow + ox;
          const double d = fabs(dy[yi]);
          double acc = bias ? fabs(b[o]) : 0.0;
          if (m->db) m->db[o] += d;
          for (int c = 0; c < tc->c; c++)
            for (int ky = 0; ky < k; ky++) {
              const int iy = oy * tc->s + ky - tc->pad;
              if (iy < 0 || iy >= tc->h) continue;
              for (int kx = 0; kx < k; kx++) {
                const int ix = ox * tc->s + kx - tc->pad;
                if (ix < 0 || ix >= tc->w) continue;
                const size_t xi = (((size_t)s * tc->c + c) * tc->h + iy) * tc->w + ix;
                const size_t wi = (((size_t)o * tc->c + c) * k + ky) * k + kx;
                const double ax = fabs(x[xi]), aw = fabs(w[wi]);
                acc += ax * aw;
                m->dw[wi] += d * ax;
                if (m->dx) m->dx[xi] += d * aw;
              }
            }
          m->y[yi] = acc;
        }
  conv_inputs_free(&in);
}

/* The same for a linear row, over run_linear's inputs: only bf16 rows use
 * them, whose tensor-core sums may truncate each partial sum rather than
 * round it (about K/16 truncations for K terms). */
static void linear_magnitudes(const ocase *tc, term_sums *m) {
  const int n = tc->n, in = tc->c, out = tc->oc, bias = (tc->flags & F_BIAS) != 0;
  const int add = !(tc->flags & F_WRITE);
  const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
  float *x = rnd(nx, 1, -1, 1), *w = rnd(nw, 2, -0.1f, 0.1f), *b = rnd((size_t)out, 3, -0.5f, 0.5f);
  float *dy = rnd(ny, 4, -1, 1), *dw0 = rnd(nw, 5, -0.1f, 0.1f), *db0 = rnd((size_t)out, 6, -0.1f, 0.1f);
  m->y = calloc(ny, sizeof(double));
  m->dw = calloc(nw, sizeof(double));
  m->db = bias ? calloc((size_t)out, sizeof(double)) : NULL;
  m->dx = tc->flags & F_NO_DX ? NULL : calloc(nx, sizeof(double));
  assert_true(m->y && m->dw && (m->db || !bias) && (m->dx || (tc->flags & F_NO_DX)));
  for (size_t i = 0; add && i < nw; i++) m->dw[i] = fabs(dw0[i]);
  for (int o = 0; add && m->db && o < out; o++) m->db[o] = fabs(db0[o]);
  for (int r = 0; r < n; r++)
    for (int o = 0; o < out; o++) {
      const double d = fabs(dy[(size_t)r * out + o]);
      double acc = bias ? fabs(b[o]) : 0.0;
      if (m->db) m->db[o] += d;
      for (int i = 0; i < in; i++) {
        const double ax = fabs(x[(size_t)r * in + i]), aw = fabs(w[(size_t)o * in + i]);
        acc += ax * aw;
        m->dw[(size_t)o * in + i] += d * ax;
        if (m->dx) m->dx[(size_t)r * in + i] += d * aw;
      }
      m->y[(size_t)r * out + o] = acc;
    }
  FREE_ALL(x, w, b, dy, dw0, db0);
}

static const double *sum_of(const term_sums *m, const char *name) {
  return !strcmp(name, "y") ? m->y : !strcmp(name, "dx") ? m->dx : !strcmp(name, "dw") ? m->dw
                                                              : !strcmp(name, "db") ? m->db : NULL;
}

/* The worst relative error of cuda's array b against the cpu's a, under
 * the rules at the top of the file (sums: the conv entries' magnitudes, or
 * NULL); NaN must meet NaN. */
typedef struct {
  double rel, maxref, floor;
  size_t at;
} array_error;

static array_error compare_arrays(const ocase *tc, const result *ra, const result *rb, const double *sums) {
  array_error r = {0.0, 0.0, TINY, 0};
  for (size_t j = 0; j < ra->count; j++) {
    const double u = value(ra, j), v = value(rb, j);
    if (isnan(u) || isnan(v)) {
      if (isnan(u) != isnan(v)) fail_msg("%s: %s[%zu]: cpu %g, cuda %g", tc->label, ra->name, j, u, v);
      continue;
    }
    if (fabs(u) > r.maxref) r.maxref = fabs(u);
  }
  if (FLOOR_FRACTION * r.maxref > TINY) r.floor = FLOOR_FRACTION * r.maxref;
  for (size_t j = 0; j < ra->count; j++) {
    const double u = value(ra, j), v = value(rb, j);
    if (isnan(u)) continue;
    const double e = fabs(u - v) / (fabs(u) > r.floor ? fabs(u) : r.floor);
    if (sums && fabs(u - v) <= SUM_TOL * sums[j]) continue; /* rounding of the terms (top of the file) */
    if (e > r.rel) {
      r.rel = e;
      r.at = j;
    }
  }
  return r;
}

static void test_cuda_matches_cpu(void **state) {
  const ocase *tc = *state;
  const pt_backend *cuda = pt_backend_cuda();
  assert_non_null(cuda);
  run_t a, b;
  run_case(pt_backend_cpu(), tc, &a);
  pt_cuda_conv_paths_reset();
  run_case(cuda, tc, &b);
  if (tc->op == OP_CONV) check_conv_path(tc);
  term_sums mags = {0};
  if (tc->op == OP_CONV) conv_magnitudes(tc, &mags);
  assert_int_equal(a.nres, b.nres);
  double worst = 0.0;
  const char *worst_name = "";
  for (int i = 0; i < a.nres; i++) {
    const result *ra = &a.res[i], *rb = &b.res[i];
    assert_string_equal(ra->name, rb->name);
    assert_int_equal(ra->count, rb->count);
    if (ra->exact) {
      /* Bit for bit, but a NaN is any NaN: the GPU's select gives the
       * canonical one where the CPU passes the input's bits on. */
      for (size_t j = 0; j < ra->count; j++) {
        const size_t at = j * dsize(ra->t);
        if (!memcmp((const char *)ra->host + at, (const char *)rb->host + at, dsize(ra->t))) continue;
        if (ra->t == T_F32 && isnan(value(ra, j)) && isnan(value(rb, j))) continue;
        fail_msg("%s: %s[%zu]: cpu %.9g, cuda %.9g (must be equal)", tc->label, ra->name, j, value(ra, j),
                 value(rb, j));
      }
      continue;
    }
    const double *sums = sum_of(&mags, ra->name);
    const array_error ae = compare_arrays(tc, ra, rb, sums);
    const double rel = ae.rel, maxref = ae.maxref, floor_ = ae.floor;
    const size_t at = ae.at;
    if (ra->per_elem) {
      const double floor = maxref * 1e-6 > TINY ? maxref * 1e-6 : TINY;
      for (size_t j = 0; j < ra->count; j++) {
        const double u = value(ra, j), v = value(rb, j);
        if (isnan(u) || isnan(v)) continue;
        const double e = fabs(u - v) / (fabs(u) > floor ? fabs(u) : floor);
        if (e > TOL)
          fail_msg("%s: %s[%zu]: relative error %.3g > %g per element (cpu %.17g, cuda %.17g)", tc->label, ra->name,
                   j, e, TOL, u, v);
      }
    }
    if (rel > TOL)
      fail_msg("%s: %s[%zu]: relative error %.3g > %g (cpu %.9g, cuda %.9g; max |cpu| %.3g, so errors of entries "
               "below %.3g count against %.3g)",
               tc->label, ra->name, at, rel, TOL, value(ra, at), value(rb, at), maxref, floor_, floor_);
    if (rel >= worst) {
      worst = rel;
      worst_name = ra->name;
    }
  }
  print_message("    %-52s worst relative error %.2g (%s)%s\n", tc->label, worst, worst_name,
                tc->op == OP_CONV ? ", entries within 1e-5 of their terms' magnitudes aside" : "");
  FREE_ALL(mags.y, mags.dx, mags.dw, mags.db);
  release(&a);
  release(&b);
}

/* ---- --precision bf16: the GEMMs of linear layers and convolutions ----
 *
 * Each conv and linear row runs again on CUDA under bf16, and each array
 * (db aside) must match bf16's reference, the CPU on bf16-rounded inputs
 * (y, dw, dx from rounded x, w and dy), at the usual tolerances and not
 * TF32's or fp32's: an H100 once ran TF32 kernels where the compute type
 * only allowed bf16 (CUBLAS_COMPUTE_32F_FAST_16BF), and a GEMM that
 * ignores the precision must not pass. db, an fp32 sum of dy, must match
 * the reference on rounded x and w. Each reference's backward pass masks
 * a fused ReLU by the GPU's y, and an entry also passes within 1e-5 of the
 * sum of its terms' magnitudes, linear rows' too: tensor cores may
 * truncate their fp32 partial sums rather than round them. Rows the gemm
 * path splits into chunks run in fp32 only: bf16 changes the GEMM, not
 * the chunks' offsets. Which reference each array came nearest is
 * printed. Under PT_CUDA_CONV=cudnn a bf16 convolution must be refused
 * at the sync, naming why. */
static int bf16_arrays; /* arrays that matched bf16's reference and not fp32's */

static int bf16_on(void **s) {
  (void)s;
  round_inputs = 0;
  relu_y_from = NULL;
  round_drop = BF16_DROP;
  return pt_backend_cuda()->set_precision(PT_PRECISION_BF16) == PT_OK ? 0 : -1;
}

static int bf16_off(void **s) {
  (void)s;
  round_inputs = 0;
  relu_y_from = NULL;
  round_drop = BF16_DROP;
  return pt_backend_cuda()->set_precision(PT_PRECISION_FP32) == PT_OK ? 0 : -1;
}

static void cpu_reference(const ocase *tc, int rounding, int drop, run_t *r) {
  round_inputs = rounding;
  round_drop = drop;
  run_case(pt_backend_cpu(), tc, r);
  round_inputs = 0;
  round_drop = BF16_DROP;
}

/* The rows run again under bf16: conv and linear rows, a convolution in
 * one chunk of the gemm path (see above). */
static int bf16_row(const ocase *tc) {
  if (tc->op == OP_LINEAR) return 1;
  if (tc->op != OP_CONV) return 0;
  pt_conv_geom g = {tc->c, tc->h, tc->w, tc->oc, tc->k, tc->k, tc->s, tc->pad, 0, 0, (tc->flags & F_RELU) != 0};
  assert_true(pt_conv_init(&g));
  return tc->n <= pt_cuda_conv_chunk(&g);
}

/* Holds a bf16 run's arrays (dev) to the references above, failing where
 * one matches none; returns how many matched bf16's and no finer
 * rounding's. emulated: dev is the CPU's on rounded inputs, whose db sums
 * rounded dy where the GPU's sums dy as it is, so db is not held. */
static int bf16_match(const ocase *tc, const run_t *dev, int emulated) {
  run_t full, xw[2], all[2];
  assert_string_equal(dev->res[0].name, "y");
  relu_y_from = dev->res[0].host;
  /* [0] bf16, [1] TF32: x and w rounded, then dy too; full: none */
  cpu_reference(tc, 0, BF16_DROP, &full);
  for (int k = 0; k < 2; k++) {
    cpu_reference(tc, ROUND_XW, k ? TF32_DROP : BF16_DROP, &xw[k]);
    cpu_reference(tc, ROUND_XW | ROUND_DY, k ? TF32_DROP : BF16_DROP, &all[k]);
  }
  relu_y_from = NULL;
  term_sums mags = {0};
  if (tc->op == OP_CONV) conv_magnitudes(tc, &mags);
  else linear_magnitudes(tc, &mags);
  assert_int_equal(full.nres, dev->nres);
  char said[256] = "";
  int bf16 = 0;
  for (int i = 0; i < dev->nres; i++) {
    const result *g = &dev->res[i];
    const int db = !strcmp(g->name, "db");
    if (db && emulated) continue;
    const result *refs[3] = {db ? &xw[0].res[i] : &all[0].res[i], db ? &xw[1].res[i] : &all[1].res[i],
                             &full.res[i]};
    static const char *const names[3] = {"bf16", "tf32", "fp32"};
    assert_string_equal(full.res[i].name, g->name);
    const double *sums = sum_of(&mags, g->name);
    array_error e[3];
    int first = 0; /* the nearest */
    for (int k = 0; k < 3; k++) {
      e[k] = compare_arrays(tc, refs[k], g, sums);
      if (e[k].rel < e[first].rel) first = k;
    }
    if (e[first].rel > TOL)
      fail_msg("%s: %s matches no reference: relative error %.3g against bf16-rounded inputs ([%zu]: cpu %.9g, "
               "cuda %.9g), %.3g against TF32-rounded, %.3g against fp32 ([%zu]: cpu %.9g)",
               tc->label, g->name, e[0].rel, e[0].at, value(refs[0], e[0].at), value(g, e[0].at), e[1].rel, e[2].rel,
               e[2].at, value(refs[2], e[2].at));
    /* bf16 shows where the array is bf16's and no finer rounding's. */
    if (first == 0 && e[1].rel > TOL && e[2].rel > TOL) bf16++;
    const size_t len = strlen(said);
    snprintf(said + len, sizeof said - len, "%s%s %s (%.1g)", len ? ", " : "", g->name, names[first], e[first].rel);
  }
  print_message("    %-52s %s\n", tc->label, said);
  FREE_ALL(mags.y, mags.dx, mags.dw, mags.db);
  release(&full);
  for (int k = 0; k < 2; k++) {
    release(&xw[k]);
    release(&all[k]);
  }
  return bf16;
}

/* The bf16 rows' checking, on the CPU: a stand-in for the GPU computes on
 * bf16-rounded inputs, as bf16's GEMMs do, and every array it gives (db
 * aside) must be taken for bf16's and for no finer rounding's. */
static void test_bf16_check_itself(void **s) {
  (void)s;
  int rows = 0;
  for (size_t i = 0; i < NCASES; i++) {
    const ocase *tc = &cases[i];
    if (!bf16_row(tc)) continue;
    run_t dev;
    cpu_reference(tc, ROUND_XW | ROUND_DY, BF16_DROP, &dev);
    int want = 0;
    for (int k = 0; k < dev.nres; k++) want += strcmp(dev.res[k].name, "db") != 0;
    const int got = bf16_match(tc, &dev, 1);
    if (got != want) fail_msg("%s: %d of %d arrays taken for bf16's", tc->label, got, want);
    release(&dev);
    rows++;
  }
  assert_true(rows >= 10);
}

static void test_cuda_bf16(void **state) {
  const ocase *tc = *state;
  const pt_backend *cuda = pt_backend_cuda();
  assert_non_null(cuda);
  assert_int_equal(pt_cuda_precision(), PT_PRECISION_BF16);
  const char *want = getenv("PT_CUDA_CONV");
  pt_cuda_conv_paths_reset();
  if (tc->op == OP_CONV && want && !strcmp(want, "cudnn")) {
    /* The forward pass alone: run_conv's downloads would meet the error
     * first. */
    conv_inputs in;
    conv_inputs_make(tc, &in);
    run_t r;
    memset(&r, 0, sizeof r);
    r.be = cuda;
    const size_t wsf = cuda->conv_workspace(&in.g, pt_ops_get_threads());
    float *X = put(&r, in.x, in.nx * 4), *W = put(&r, in.w, in.nw * 4), *Y = put(&r, NULL, in.ny * 4);
    float *WS = put(&r, NULL, (wsf ? wsf : 1) * 4);
    pt_error_clear();
    cuda->conv2d_forward(&in.g, tc->n, X, W, NULL, Y, WS);
    const pt_status st = cuda->sync();
    release(&r);
    conv_inputs_free(&in);
    if (st == PT_OK) fail_msg("%s: PT_CUDA_CONV=cudnn under bf16 ran instead of being refused", tc->label);
    if (!strstr(pt_error_message(), "PT_CUDA_CONV=cudnn with --precision bf16"))
      fail_msg("%s: refused, but not naming bf16: %s", tc->label, pt_error_message());
    print_message("    %-52s refused under PT_CUDA_CONV=cudnn, as it should be\n", tc->label);
    return;
  }
  run_t gpu;
  run_case(cuda, tc, &gpu);
  if (tc->op == OP_CONV && pt_cuda_conv_paths_get().cudnn)
    fail_msg("%s: a bf16 convolution ran on cuDNN, which would compute it in fp32", tc->label);
  int arrays = 0;
  for (int k = 0; k < gpu.nres; k++) arrays += strcmp(gpu.res[k].name, "db") != 0;
  const int got = bf16_match(tc, &gpu, 0);
  release(&gpu);
  if (got != arrays)
    fail_msg("%s: %d of %d arrays matched bf16's rounding and no finer one", tc->label, got, arrays);
  bf16_arrays += got;
}

/* After every bf16 row: bf16 rounding showed in some array. */
static void test_bf16_ran(void **s) {
  (void)s;
  const char *want = getenv("PT_CUDA_CONV");
  pt_cuda_device d;
  assert_int_equal(pt_cuda_device_info(0, &d), PT_OK);
  if (d.cc_major < 8) {
    print_message("    %s (compute capability %d.%d) has no bf16 tensor cores: cuBLAS may compute in fp32\n", d.name,
                  d.cc_major, d.cc_minor);
    skip();
  }
  if (bf16_arrays == 0)
    fail_msg("no array of the bf16 rows matched bf16's rounding rather than TF32's or fp32's%s",
             want && !strcmp(want, "cudnn") ? " (the linear rows at least should have)" : "");
  print_message("    %d arrays of the bf16 rows matched bf16's rounding and not TF32's or fp32's\n", bf16_arrays);
}

/* A CUDA build without a usable GPU: no backend, and the reason why. */
static void test_no_gpu(void **s) {
  (void)s;
  int n = -1;
  char why[256];
  assert_int_equal(pt_cuda_device_count(&n, why, sizeof why), PT_OK);
  assert_int_equal(n, 0);
  pt_error_clear();
  assert_null(pt_backend_cuda());
  assert_non_null(strstr(pt_error_message(), why));
  /* Binding fails with a message naming the device, and nothing is bound. */
  assert_int_equal(pt_cuda_bind(0), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "cuda:0"));
  assert_int_equal(pt_cuda_current_device(), -1);
  assert_null(pt_cuda_current_stream());
  assert_null(pt_cuda_cublas());
  assert_null(pt_cuda_cudnn());
  /* A precision needs a bound GPU, and says so. */
  assert_int_equal(pt_cuda_set_precision(PT_PRECISION_BF16), PT_ERR_STATE);
  assert_non_null(strstr(pt_error_message(), "no GPU bound"));
  assert_int_equal(pt_cuda_precision(), PT_PRECISION_FP32);
  (void)pt_cuda_unbind(); /* harmless when not bound */
  /* Error capture needs no device: the first error is kept, reported as
   * PT_ERR_DEVICE, and cleared by a sync. */
  assert_int_equal(pt_cuda_last_error(), PT_OK);
  pt_cuda_note_error("first op", "it failed");
  pt_cuda_note_error("second op", "so did this");
  assert_int_equal(pt_cuda_last_error(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "first op: it failed"));
  assert_null(strstr(pt_error_message(), "second op"));
  assert_int_equal(pt_cuda_sync(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "first op: it failed"));
  assert_int_equal(pt_cuda_last_error(), PT_OK);
}

/* The bounded waits' plumbing, with fake wait functions (no GPU needed:
 * without a driver every stream query answers at once, with an error). */
static int fake_calls;
static int fake_ctx, other_ctx;

/* A communicator that found its peer dead. */
static pt_status fake_dead_peer(void *ctx, const char *what, int (*ready)(void *), void *ready_ctx) {
  (void)ready, (void)ready_ctx;
  assert_ptr_equal(ctx, &fake_ctx);
  fake_calls++;
  return pt_fail(PT_ERR_COMM, "rank 1 (cuda:0): NCCL failed in %s: remote process exited", what);
}

/* A communicator in good health: polls until the GPU answers. */
static pt_status fake_healthy(void *ctx, const char *what, int (*ready)(void *), void *ready_ctx) {
  (void)ctx, (void)what;
  fake_calls++;
  while (!ready(ready_ctx)) {
  }
  return PT_OK;
}

static void test_waits_without_gpu(void **s) {
  (void)s;
  pt_error_clear();
  /* Unbinding with nothing bound reports nothing. */
  assert_int_equal(pt_cuda_unbind(), PT_OK);
  /* An error noted before a bind stays pending through it. */
  pt_cuda_note_error("an op before bind", "it failed");
  assert_int_equal(pt_cuda_bind(0), PT_ERR_DEVICE);
  assert_int_equal(pt_cuda_last_error(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "an op before bind: it failed"));
  assert_int_equal(pt_cuda_sync(), PT_ERR_DEVICE);

  /* A wait function that gives up: sync reports its failure with its
   * code, and later waits fail at once instead of waiting out a timeout
   * again. */
  fake_calls = 0;
  pt_cuda_set_wait(fake_dead_peer, &fake_ctx);
  assert_int_equal(pt_cuda_sync(), PT_ERR_COMM);
  assert_non_null(strstr(pt_error_message(), "remote process exited"));
  assert_int_equal(pt_cuda_wait_stream("upload: waiting for a staging slot"), PT_ERR_COMM);
  assert_non_null(strstr(pt_error_message(), "remote process exited"));
  assert_int_equal(fake_calls, 1);
  /* An op's error pending is named first, the wait's after it. */
  pt_cuda_note_error("conv2d_forward: sgemm", "CUBLAS_STATUS_EXECUTION_FAILED");
  assert_int_equal(pt_cuda_sync(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "conv2d_forward: sgemm: CUBLAS_STATUS_EXECUTION_FAILED"));
  assert_non_null(strstr(pt_error_message(), "remote process exited"));
  /* Only the communicator that set it clears it. */
  pt_cuda_clear_wait(&other_ctx);
  assert_int_equal(pt_cuda_sync(), PT_ERR_COMM);
  pt_cuda_clear_wait(&fake_ctx);
  assert_int_equal(fake_calls, 1);

  /* A healthy wait function polls the GPU; what it finds (here: no
   * driver) is reported as the device's error, naming the wait. */
  fake_calls = 0;
  pt_cuda_set_wait(fake_healthy, &fake_ctx);
  assert_int_equal(pt_cuda_wait_stream("conv2d: waiting to grow the cuDNN workspace"), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "waiting to grow the cuDNN workspace"));
  assert_int_equal(fake_calls, 1);
  pt_cuda_set_wait(NULL, NULL);
  assert_int_equal(pt_cuda_last_error(), PT_OK);
}

/* On a GPU: the context's binding, error capture and allocation failure. */
static void test_context(void **s) {
  (void)s;
  int n = 0;
  assert_int_equal(pt_cuda_device_count(&n, NULL, 0), PT_OK);
  const pt_backend *be = pt_backend_cuda();
  assert_non_null(be);
  assert_int_equal(pt_backend_bind(be, 0), PT_OK);
  void *stream = pt_cuda_current_stream();
  assert_int_equal(pt_cuda_current_device(), 0);
  assert_non_null(stream);
  assert_non_null(pt_cuda_cublas());
#ifdef PT_HAVE_CUDNN
  assert_non_null(pt_cuda_cudnn());
#endif
  /* Binding the bound device again keeps its stream. */
  assert_int_equal(pt_backend_bind(be, 0), PT_OK);
  assert_ptr_equal(pt_cuda_current_stream(), stream);
  assert_int_equal(pt_cuda_bind(n), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "no such device"));
  assert_int_equal(pt_cuda_current_device(), 0);

  assert_int_equal(pt_cuda_last_error(), PT_OK);
  pt_cuda_note_error("an op", "a failure");
  pt_cuda_note_error("a later op", "its consequence");
  assert_int_equal(pt_cuda_last_error(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "cuda:0: an op: a failure"));
  assert_int_equal(be->sync(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "cuda:0: an op: a failure"));
  assert_int_equal(be->sync(), PT_OK);

  /* An impossible allocation names its size and the device, and leaves
   * the context usable. */
  pt_error_clear();
  assert_null(be->alloc((size_t)1 << 50));
  assert_non_null(strstr(pt_error_message(), "cuda:0"));
  assert_non_null(strstr(pt_error_message(), "1125899906842624 bytes"));
  assert_int_equal(be->sync(), PT_OK);
  float host[5] = {1, 2, 3, 4, 5}, back[5];
  float *d = be->alloc(sizeof host);
  assert_non_null(d);
  be->download(back, d, sizeof back);
  for (int i = 0; i < 5; i++) assert_true(back[i] == 0.0f); /* alloc zeroes */
  be->upload(d, host, sizeof host);
  be->scale(5, 2.0f, d);
  assert_int_equal(be->download(back, d, sizeof back), PT_OK);
  for (int i = 0; i < 5; i++) assert_true(back[i] == 2.0f * host[i]);
  be->zero(d, sizeof host);
  assert_int_equal(be->download(back, d, sizeof back), PT_OK);
  for (int i = 0; i < 5; i++) assert_true(back[i] == 0.0f);
  be->free(d);

  /* Unbinding frees the stream; binding again makes a new one. */
  assert_int_equal(pt_backend_unbind(be), PT_OK);
  assert_int_equal(pt_cuda_current_device(), -1);
  assert_null(pt_cuda_current_stream());
  assert_int_equal(pt_backend_bind(be, 0), PT_OK);
  assert_non_null(pt_cuda_current_stream());

  /* An error pending at unbind is reported by it, not dropped; one noted
   * before a bind is still pending after it. */
  pt_cuda_note_error("the last op", "it failed");
  assert_int_equal(pt_backend_unbind(be), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "the last op: it failed"));
  pt_cuda_note_error("an op before bind", "it failed too");
  assert_int_equal(pt_backend_bind(be, 0), PT_OK);
  assert_int_equal(be->sync(), PT_ERR_DEVICE);
  assert_non_null(strstr(pt_error_message(), "an op before bind: it failed too"));
  assert_int_equal(be->sync(), PT_OK);

  /* With a wait function set (as NCCL sets one), the backend's waits go
   * through it: downloads and allocations included. */
  fake_calls = 0;
  pt_cuda_set_wait(fake_healthy, &fake_ctx);
  float *e = be->alloc(sizeof host);
  assert_non_null(e);
  be->upload(e, host, sizeof host);
  assert_int_equal(be->download(back, e, sizeof back), PT_OK);
  for (int i = 0; i < 5; i++) assert_true(back[i] == host[i]);
  assert_true(fake_calls >= 2);
  pt_cuda_set_wait(fake_dead_peer, &fake_ctx);
  assert_int_equal(be->download(back, e, sizeof back), PT_ERR_COMM);
  assert_non_null(strstr(pt_error_message(), "remote process exited"));
  pt_cuda_set_wait(NULL, NULL);
  assert_int_equal(be->sync(), PT_OK);
  be->free(e);
}

static int bind_gpu(void **s) {
  (void)s;
  const pt_backend *be = pt_backend_cuda();
  if (!be || pt_backend_bind(be, 0) != PT_OK) {
    print_error("cannot bind cuda:0: %s\n", pt_error_message());
    return -1;
  }
  return 0;
}

static int unbind_gpu(void **s) {
  (void)s;
  const pt_backend *be = pt_backend_cuda();
  if (be) (void)pt_backend_unbind(be);
  return 0;
}
#endif

/* One cmocka test per row, named by the row. */
static struct CMUnitTest *row_tests(void (*fn)(void **), const struct CMUnitTest *first, size_t nfirst,
                                    size_t *count) {
  struct CMUnitTest *t = calloc(nfirst + NCASES, sizeof *t);
  assert_non_null(t);
  for (size_t i = 0; i < nfirst; i++) t[i] = first[i];
  for (size_t i = 0; i < NCASES; i++)
    t[nfirst + i] = (struct CMUnitTest){cases[i].label, fn, NULL, NULL, (void *)&cases[i]};
  *count = nfirst + NCASES;
  return t;
}

#ifdef PT_HAVE_CUDA
/* "bf16: <row>" for each conv and linear row, then test_bf16_ran. */
static struct CMUnitTest *bf16_tests(size_t *count) {
  struct CMUnitTest *t = calloc(NCASES + 1, sizeof *t);
  assert_non_null(t);
  size_t k = 0;
  for (size_t i = 0; i < NCASES; i++) {
    if (!bf16_row(&cases[i])) continue;
    char *name = malloc(strlen(cases[i].label) + 8);
    assert_non_null(name);
    sprintf(name, "bf16: %s", cases[i].label);
    t[k++] = (struct CMUnitTest){name, test_cuda_bf16, bf16_on, bf16_off, (void *)&cases[i]};
  }
  t[k++] = (struct CMUnitTest){"bf16 ran", test_bf16_ran, NULL, NULL, NULL};
  *count = k;
  return t;
}
#endif

int main(void) {
  size_t count;
  if (!pt_cuda_built()) {
    const struct CMUnitTest first[] = {cmocka_unit_test(test_without_cuda), cmocka_unit_test(test_bf16_round)};
    struct CMUnitTest *t = row_tests(test_cpu_side, first, sizeof first / sizeof first[0], &count);
    const int failed = _cmocka_run_group_tests("cuda ops (built without CUDA): the CPU side", t, count, NULL, NULL);
    free(t);
    return failed;
  }
#ifdef PT_HAVE_CUDA
  int n = 0;
  char why[256] = "";
  if (pt_cuda_device_count(&n, why, sizeof why) != PT_OK) return 1;
  if (n == 0) {
    const struct CMUnitTest first[] = {cmocka_unit_test(test_no_gpu), cmocka_unit_test(test_waits_without_gpu),
                                       cmocka_unit_test(test_plan_cache_fits_presets), cmocka_unit_test(test_chunks),
                                       cmocka_unit_test(test_bf16_round), cmocka_unit_test(test_bf16_check_itself)};
    struct CMUnitTest *t = row_tests(test_cpu_side, first, sizeof first / sizeof first[0], &count);
    const int failed = _cmocka_run_group_tests("cuda ops (no GPU): the CPU side", t, count, NULL, NULL);
    free(t);
    if (failed) return failed;
    printf("SKIPPED: no GPU (%s)\n", why);
    return 77;
  }
  const struct CMUnitTest first[] = {cmocka_unit_test(test_context), cmocka_unit_test(test_plan_cache_fits_presets),
                                     cmocka_unit_test(test_chunks), cmocka_unit_test(test_bf16_round),
                                     cmocka_unit_test(test_bf16_check_itself)};
  struct CMUnitTest *t = row_tests(test_cuda_matches_cpu, first, sizeof first / sizeof first[0], &count);
  int failed = _cmocka_run_group_tests("cuda ops against the cpu", t, count, bind_gpu, unbind_gpu);
  free(t);
  t = bf16_tests(&count);
  failed += _cmocka_run_group_tests("cuda ops under --precision bf16 against the cpu", t, count, bind_gpu, unbind_gpu);
  for (size_t i = 0; i + 1 < count; i++) free((char *)t[i].name);
  free(t);
  return failed;
#else
  return 1; /* pt_cuda_built() says CUDA without PT_HAVE_CUDA: a build error */
#endif
}
