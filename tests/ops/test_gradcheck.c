/* Every op's backward against central finite differences.
 *
 * One table of (op, shape) cases drives the check, as ggml's test-backend-ops
 * does. For each case we take f(x, w, b) = sum(r * op(x, w, b)) for a fixed
 * random r, so backward with dy = r must give df/dx, df/dw, df/db. A sample
 * of coordinates of each input is perturbed by +-h and the difference
 * quotient compared with the analytic gradient.
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

#include "ops/cpu/ops.h"
#include "util/philox.h"

typedef enum { OP_CONV, OP_LINEAR, OP_MAXPOOL, OP_RELU, OP_DROPOUT, OP_LOGSOFTMAX, OP_BN_TRAIN, OP_BN_EVAL,
               OP_NLL, OP_XENT } op_t;

typedef struct {
  const char *label;
  op_t op;
  int n, c, h, w;    /* input */
  int oc, k, s, pad; /* conv / pool / linear(out=oc) */
  int relu;          /* conv: with the fused ReLU */
} gcase;

static const gcase cases[] = {
    {"conv 3x3", OP_CONV, 2, 3, 7, 7, 4, 3, 1, 0, 0},
    {"conv 5x5 pad 2", OP_CONV, 2, 2, 6, 6, 3, 5, 1, 2, 0},
    {"conv 3x3 stride 2 pad 1", OP_CONV, 2, 3, 7, 8, 2, 3, 2, 1, 0},
    {"conv 1x1", OP_CONV, 2, 4, 5, 5, 3, 1, 1, 0, 0},
    {"conv 2x2 stride 2", OP_CONV, 1, 2, 6, 6, 2, 2, 2, 0, 0},
    {"conv 3x3 pad 1 + fused relu", OP_CONV, 2, 3, 6, 6, 4, 3, 1, 1, 1},
    {"conv 3x3 stride 3 pad 2", OP_CONV, 1, 2, 8, 8, 2, 3, 3, 2, 0},
    /* wide rows: the stride-1 kernels' output vectors span rows (ow 18 on a
     * padded width of 20), and 12 channels fill one register tile and part
     * of another */
    {"conv 3x3 wide", OP_CONV, 3, 2, 5, 20, 12, 3, 1, 0, 0},
    /* vectors by output row: one per row of 14, two per row of 30 */
    {"conv 5x5 pad 2 rows of 14", OP_CONV, 2, 2, 3, 14, 8, 5, 1, 2, 0},
    {"conv 5x5 pad 2 rows of 30", OP_CONV, 2, 3, 2, 30, 9, 5, 1, 2, 0},
    /* 3x3 with 8 channels or more takes the Winograd path: odd outputs
     * (tiles overhanging the edge), 9 and 12 channels, batch 1; the fused
     * ReLU there is checked against the direct path (test_conv_winograd),
     * as with 72 inputs a sum too many outputs sit within h of the kink */
    {"conv 3x3 winograd odd 7x9", OP_CONV, 1, 8, 7, 9, 9, 3, 1, 0, 0},
    {"conv 3x3 winograd pad 2", OP_CONV, 2, 9, 5, 6, 12, 3, 1, 2, 0},
    {"linear", OP_LINEAR, 3, 7, 1, 1, 5, 0, 0, 0, 0},
    {"maxpool 2", OP_MAXPOOL, 2, 3, 6, 6, 0, 2, 2, 0, 0},
    {"maxpool 3 stride 2 (overlapping)", OP_MAXPOOL, 2, 2, 7, 7, 0, 3, 2, 0, 0},
    {"maxpool 2 on odd 7x5 (edges dropped)", OP_MAXPOOL, 2, 2, 7, 5, 0, 2, 2, 0, 0},
    {"relu", OP_RELU, 2, 3, 4, 4, 0, 0, 0, 0, 0},
    {"dropout 0.3", OP_DROPOUT, 2, 3, 4, 4, 0, 0, 0, 0, 0},
    {"log-softmax", OP_LOGSOFTMAX, 4, 10, 1, 1, 0, 0, 0, 0, 0},
    {"batchnorm train", OP_BN_TRAIN, 3, 4, 3, 3, 0, 0, 0, 0, 0},
    {"batchnorm eval", OP_BN_EVAL, 3, 4, 3, 3, 0, 0, 0, 0, 0},
    {"nll loss", OP_NLL, 5, 10, 1, 1, 0, 0, 0, 0, 0},
    {"cross-entropy loss", OP_XENT, 5, 10, 1, 1, 0, 0, 0, 0, 0},
};

typedef struct {
  const gcase *gc;
  size_t nx, nw, nb, ny;
  float *x, *w, *b, *r;
  float *rmean, *rvar;  /* batch-norm running stats */
  int32_t *labels;
  pt_conv_geom geom;
  int oh, ow;
} ctx_t;

static void fill(float *a, size_t n, uint64_t stream, float scale) {
  pt_rng r;
  pt_rng_init(&r, 12345, stream);
  for (size_t i = 0; i < n; i++) a[i] = (2.0f * pt_rng_uniform(&r) - 1.0f) * scale;
}

static void setup_case(ctx_t *t, const gcase *gc) {
  memset(t, 0, sizeof *t);
  t->gc = gc;
  t->nx = (size_t)gc->n * gc->c * gc->h * gc->w;
  switch (gc->op) {
    case OP_CONV:
      t->geom = (pt_conv_geom){gc->c, gc->h, gc->w, gc->oc, gc->k, gc->k, gc->s, gc->pad, 0, 0, gc->relu};
      assert_true(pt_conv_init(&t->geom));
      t->nw = (size_t)gc->oc * gc->c * gc->k * gc->k;
      t->nb = gc->oc;
      t->ny = (size_t)gc->n * gc->oc * t->geom.oh * t->geom.ow;
      break;
    case OP_LINEAR:
      t->nw = (size_t)gc->oc * gc->c;
      t->nb = gc->oc;
      t->ny = (size_t)gc->n * gc->oc;
      break;
    case OP_MAXPOOL:
      t->oh = (gc->h - gc->k) / gc->s + 1;
      t->ow = (gc->w - gc->k) / gc->s + 1;
      t->ny = (size_t)gc->n * gc->c * t->oh * t->ow;
      break;
    case OP_BN_TRAIN:
    case OP_BN_EVAL:
      t->nw = t->nb = gc->c;
      t->ny = t->nx;
      break;
    case OP_NLL:
    case OP_XENT: t->ny = 1; break;
    default: t->ny = t->nx;
  }
  t->x = calloc(t->nx, sizeof(float));
  t->w = calloc(t->nw + 1, sizeof(float));
  t->b = calloc(t->nb + 1, sizeof(float));
  t->r = calloc(t->ny, sizeof(float));
  t->rmean = calloc(gc->c, sizeof(float));
  t->rvar = calloc(gc->c, sizeof(float));
  t->labels = calloc(gc->n, sizeof(int32_t));
  fill(t->x, t->nx, 1, 1.0f);
  fill(t->w, t->nw, 2, 0.5f);
  fill(t->b, t->nb, 3, 0.5f);
  fill(t->r, t->ny, 4, 1.0f);
  fill(t->rmean, gc->c, 5, 0.3f);
  for (int i = 0; i < gc->c; i++) t->rvar[i] = 0.5f + 0.1f * (float)i;
  if (gc->op == OP_BN_TRAIN || gc->op == OP_BN_EVAL)
    for (size_t i = 0; i < t->nw; i++) t->w[i] += 1.0f;
  for (int i = 0; i < gc->n; i++) t->labels[i] = (i * 7 + 3) % gc->c;
  if (gc->op == OP_NLL) pt_log_softmax_forward(gc->n, gc->c, t->x, t->x, NULL); /* valid log-probabilities */
}

static void teardown_case(ctx_t *t) {
  free(t->x); free(t->w); free(t->b); free(t->r); free(t->rmean); free(t->rvar); free(t->labels);
}

/* f = sum(r * op(x)) (or the loss itself), in double */
static double eval_f(ctx_t *t) {
  const gcase *gc = t->gc;
  float *y = calloc(t->ny, sizeof(float));
  float *ws = calloc(pt_conv_workspace(&t->geom, 1) + 1, sizeof(float));
  int32_t *am = calloc(t->ny, sizeof(int32_t));
  float *mask = calloc(t->ny, sizeof(float));
  float sm[64], si[64], rm[64], rv[64];
  double scratch[129];
  double f = 0.0;
  switch (gc->op) {
    case OP_CONV: pt_conv2d_forward(&t->geom, gc->n, t->x, t->w, t->b, y, ws); break;
    case OP_LINEAR: pt_linear_forward(gc->n, gc->c, gc->oc, t->x, t->w, t->b, y, NULL); break;
    case OP_MAXPOOL: pt_maxpool_forward(gc->n, gc->c, gc->h, gc->w, gc->k, gc->s, t->oh, t->ow, t->x, y, am); break;
    case OP_RELU: pt_relu_forward(t->nx, t->x, y); break;
    case OP_DROPOUT: pt_dropout_forward(t->nx, 0.3f, 99, 7, 1, t->x, y, mask); break;
    case OP_LOGSOFTMAX: pt_log_softmax_forward(gc->n, gc->c, t->x, y, NULL); break;
    case OP_BN_TRAIN: {
      pt_bn_geom g = {gc->c, 1e-5f, 0.1f};
      memcpy(rm, t->rmean, sizeof(float) * gc->c);
      memcpy(rv, t->rvar, sizeof(float) * gc->c);
      pt_batchnorm_forward_train(&g, gc->n, gc->h * gc->w, t->x, t->w, t->b, rm, rv, sm, si, y, scratch);
      break;
    }
    case OP_BN_EVAL: {
      pt_bn_geom g = {gc->c, 1e-5f, 0.1f};
      pt_batchnorm_forward_eval(&g, gc->n, gc->h * gc->w, t->x, t->w, t->b, t->rmean, t->rvar, y);
      break;
    }
    case OP_NLL: f = pt_nll_loss(gc->n, gc->c, t->x, t->labels, NULL, 1.0f); break;
    case OP_XENT: f = pt_cross_entropy_loss(gc->n, gc->c, t->x, t->labels, NULL, 1.0f); break;
  }
  if (gc->op != OP_NLL && gc->op != OP_XENT)
    for (size_t i = 0; i < t->ny; i++) f += (double)t->r[i] * y[i];
  free(y); free(ws); free(am); free(mask);
  return f;
}

static void analytic(ctx_t *t, float *dx, float *dw, float *db) {
  const gcase *gc = t->gc;
  float *y = calloc(t->ny, sizeof(float));
  float *ws = calloc(pt_conv_workspace(&t->geom, 1) + 1, sizeof(float));
  int32_t *am = calloc(t->ny, sizeof(int32_t));
  float *mask = calloc(t->ny, sizeof(float));
  float sm[64], si[64], rm[64], rv[64];
  double scratch[129];
  pt_bn_geom g = {gc->c, 1e-5f, 0.1f};
  switch (gc->op) {
    case OP_CONV:
      pt_conv2d_forward(&t->geom, gc->n, t->x, t->w, t->b, y, ws);
      pt_conv2d_backward(&t->geom, gc->n, t->x, t->w, y, t->r, dw, db, dx, ws);
      break;
    case OP_LINEAR: pt_linear_backward(gc->n, gc->c, gc->oc, t->x, t->w, t->r, dw, db, dx, 1, NULL); break;
    case OP_MAXPOOL:
      pt_maxpool_forward(gc->n, gc->c, gc->h, gc->w, gc->k, gc->s, t->oh, t->ow, t->x, y, am);
      pt_maxpool_backward(gc->n, gc->c, gc->h, gc->w, gc->k, gc->s, t->oh, t->ow, t->r, am, dx);
      break;
    case OP_RELU:
      pt_relu_forward(t->nx, t->x, y);
      pt_relu_backward(t->nx, y, t->r, dx);
      break;
    case OP_DROPOUT:
      pt_dropout_forward(t->nx, 0.3f, 99, 7, 1, t->x, y, mask);
      pt_dropout_backward(t->nx, mask, t->r, dx);
      break;
    case OP_LOGSOFTMAX:
      pt_log_softmax_forward(gc->n, gc->c, t->x, y, mask); /* as in training: the softmax kept */
      pt_log_softmax_backward(gc->n, gc->c, y, mask, t->r, dx);
      break;
    case OP_BN_TRAIN:
      memcpy(rm, t->rmean, sizeof(float) * gc->c);
      memcpy(rv, t->rvar, sizeof(float) * gc->c);
      pt_batchnorm_forward_train(&g, gc->n, gc->h * gc->w, t->x, t->w, t->b, rm, rv, sm, si, y, scratch);
      pt_batchnorm_backward_train(&g, gc->n, gc->h * gc->w, t->x, t->w, sm, si, t->r, dw, db, dx, scratch);
      break;
    case OP_BN_EVAL:
      pt_batchnorm_backward_eval(&g, gc->n, gc->h * gc->w, t->x, t->w, t->rmean, t->rvar, t->r, dw, db, dx);
      break;
    case OP_NLL: pt_nll_loss(gc->n, gc->c, t->x, t->labels, dx, 1.0f); break;
    case OP_XENT: pt_cross_entropy_loss(gc->n, gc->c, t->x, t->labels, dx, 1.0f); break;
  }
  free(y); free(ws); free(am); free(mask);
}

/* Compares analytic grad g of array a (n) against differences of eval_f. */
static int check_array(ctx_t *t, const char *what, float *a, size_t n, const float *g, int *skipped) {
  const float h = 1e-2f;
  int bad = 0, checked = 0;
  size_t stride = n > 60 ? n / 60 : 1; /* a spread sample keeps the test fast */
  for (size_t i = 0; i < n; i += stride) {
    float keep = a[i];
    a[i] = keep + h;
    double fp = eval_f(t);
    a[i] = keep - h;
    double fm = eval_f(t);
    a[i] = keep;
    double f0 = eval_f(t);
    /* A perturbation that crosses a kink (ReLU at 0, a max-pool tie) has
     * one-sided slopes that disagree; the difference quotient means nothing
     * there, so such points are skipped, and counted. */
    double right = (fp - f0) / h, left = (f0 - fm) / h;
    if (fabs(right - left) > 1e-2 * fmax(1.0, fmax(fabs(right), fabs(left)))) {
      (*skipped)++;
      continue;
    }
    double num = (fp - fm) / (2.0 * h);
    double err = fabs(num - g[i]) / fmax(1e-2, fmax(fabs(num), fabs(g[i])));
    checked++;
    if (err > 2e-2) {
      if (bad < 5)
        print_error("%s: d/d%s[%zu]: analytic %.6g, numeric %.6g\n", t->gc->label, what, i, g[i], num);
      bad++;
    }
  }
  if (checked == 0) {
    print_error("%s: d/d%s: every sampled point was at a kink\n", t->gc->label, what);
    bad++;
  }
  return bad;
}

static void test_all_ops(void **state) {
  (void)state;
  int failures = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ctx_t t;
    setup_case(&t, &cases[c]);
    /* NLL's gradient is in log-probability space, where a perturbation of one
     * input alone is still a valid direction for the linear loss. */
    float *dx = calloc(t.nx, sizeof(float)), *dw = calloc(t.nw + 1, sizeof(float)),
          *db = calloc(t.nb + 1, sizeof(float));
    analytic(&t, dx, dw, db);
    int skipped = 0;
    int bad = check_array(&t, "x", t.x, t.nx, dx, &skipped);
    if (t.nw) bad += check_array(&t, "w", t.w, t.nw, dw, &skipped);
    if (t.nb) bad += check_array(&t, "b", t.b, t.nb, db, &skipped);
    if (skipped > 8) {
      print_error("%s: %d points skipped as kinks, too many to trust the check\n", cases[c].label, skipped);
      bad++;
    }
    if (bad) print_error("FAILED: %s (%d mismatches)\n", cases[c].label, bad);
    failures += bad;
    free(dx); free(dw); free(db);
    teardown_case(&t);
  }
  assert_int_equal(failures, 0);
}

/* Parameter gradients accumulate (micro-batches and replicas rely on it);
 * input gradients are overwritten. */
static void test_backward_accumulates(void **state) {
  (void)state;
  ctx_t t;
  setup_case(&t, &cases[0]);
  float *dx = calloc(t.nx, sizeof(float)), *dw = calloc(t.nw, sizeof(float)), *db = calloc(t.nb, sizeof(float));
  analytic(&t, dx, dw, db);
  float w0 = dw[3], b0 = db[1], x0 = dx[5];
  analytic(&t, dx, dw, db);
  assert_float_equal(dw[3], 2 * w0, 1e-5 * fabs(w0) + 1e-7);
  assert_float_equal(db[1], 2 * b0, 1e-5 * fabs(b0) + 1e-7);
  assert_float_equal(dx[5], x0, 0);
  free(dx); free(dw); free(db);
  teardown_case(&t);
}

static void test_dropout_statistics(void **state) {
  (void)state;
  enum { N = 100000 };
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *m = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = 1.0f;
  pt_dropout_forward(N, 0.25f, 5, 1, 0, x, y, m);
  int zeros = 0;
  for (int i = 0; i < N; i++) {
    if (y[i] == 0.0f) zeros++;
    else assert_float_equal(y[i], 1.0f / 0.75f, 1e-6);
  }
  assert_in_range(zeros, 24000, 26000);
  /* Same key and step: same mask; next step: a different one. */
  float *y2 = malloc(N * sizeof(float));
  pt_dropout_forward(N, 0.25f, 5, 1, 0, x, y2, m);
  assert_memory_equal(y, y2, N * sizeof(float));
  pt_dropout_forward(N, 0.25f, 5, 2, 0, x, y2, m);
  assert_true(memcmp(y, y2, N * sizeof(float)) != 0);
  free(x); free(y); free(y2); free(m);
}

static void test_conv_geometry(void **state) {
  (void)state;
  pt_conv_geom g = {1, 28, 28, 32, 3, 3, 1, 0, 0, 0, 0};
  assert_true(pt_conv_init(&g));
  assert_int_equal(g.oh, 26);
  pt_conv_geom p = {1, 28, 28, 16, 5, 5, 1, 2, 0, 0, 0};
  assert_true(pt_conv_init(&p));
  assert_int_equal(p.oh, 28);
  pt_conv_geom bad = {1, 2, 2, 1, 5, 5, 1, 0, 0, 0, 0};
  assert_false(pt_conv_init(&bad));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_ops),
      cmocka_unit_test(test_backward_accumulates),
      cmocka_unit_test(test_dropout_statistics),
      cmocka_unit_test(test_conv_geometry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
