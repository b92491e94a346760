/* The draws the CUDA kernels make (util/draws.h), run on the host
 * against the CPU code they must reproduce bit for bit: dropout masks
 * against pt_dropout_forward, crops, flips and normalisation against the
 * loader's batches. The kernels call these same functions per thread, so
 * this checks their index arithmetic on any machine, GPU or not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/loader.h"
#include "ops/cpu/ops.h"
#include "util/draws.h"
#include "util/philox.h"

#include "random_dataset.h"

/* ---- dropout ---- */

/* What dropout_fwd_kernel computes: unit u (elements 8u ..) per thread. */
static void dropout_as_kernel(size_t n, float p, uint64_t key, uint64_t step, uint32_t layer, const float *x,
                              float *y, float *mask) {
  const uint32_t threshold = pt_dropout_threshold(p);
  const float scale = pt_dropout_scale(p);
  const size_t units = (n + 7) / 8;
  for (size_t u = 0; u < units; u++) pt_dropout_unit(n, u, key, step, layer, threshold, scale, x, y, mask);
}

static void test_dropout_masks(void **s) {
  (void)s;
  /* Sizes around the 8-element units and the CPU's 128-element calls, and
   * large enough (> 2 x 16384) for the CPU to split over two threads at a
   * unit that is not a multiple of 16. */
  const size_t sizes[] = {1, 7, 8, 9, 127, 128, 129, 1000, 40000, 100003};
  const float ps[] = {0.0f, 0.1f, 0.25f, 0.3f, 0.5f, 0.9f, 1.0f};
  const uint64_t keys[] = {0, 1, 0x0123456789abcdefull, UINT64_MAX};
  const uint64_t steps[] = {0, 7, (uint64_t)1 << 33};
  const uint32_t layers[] = {0, 3, 0xffffffu};
  const size_t nmax = 100003;
  float *x = malloc(nmax * sizeof *x), *y0 = malloc(nmax * sizeof *y0), *m0 = malloc(nmax * sizeof *m0);
  float *y1 = malloc(nmax * sizeof *y1), *m1 = malloc(nmax * sizeof *m1);
  assert_non_null(x);
  assert_non_null(y0);
  assert_non_null(m0);
  assert_non_null(y1);
  assert_non_null(m1);
  pt_rng r;
  pt_rng_init(&r, 3, 4);
  for (size_t i = 0; i < nmax; i++) x[i] = 2.0f * pt_rng_uniform(&r) - 1.0f;
  size_t dropped = 0, kept = 0;
  for (int threads = 1; threads <= 2; threads++) {
    assert_int_equal(pt_ops_set_threads(threads), 0);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
      for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
        for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++)
          for (size_t ti = 0; ti < sizeof steps / sizeof steps[0]; ti++) {
            const size_t n = sizes[si];
            const uint32_t layer = layers[(si + ki + ti) % 3];
            pt_dropout_forward(n, ps[pi], keys[ki], steps[ti], layer, x, y0, m0);
            dropout_as_kernel(n, ps[pi], keys[ki], steps[ti], layer, x, y1, m1);
            if (memcmp(m0, m1, n * sizeof *m0) || memcmp(y0, y1, n * sizeof *y0)) {
              size_t i = 0;
              while (i < n && m0[i] == m1[i] && y0[i] == y1[i]) i++;
              fail_msg("dropout n %zu p %g key %llx step %llu layer %u threads %d: element %zu mask %g vs %g", n,
                       (double)ps[pi], (unsigned long long)keys[ki], (unsigned long long)steps[ti], layer, threads,
                       i, (double)m0[i], (double)m1[i]);
            }
            for (size_t i = 0; i < n; i++) {
              if (m0[i] == 0.0f) dropped++;
              else kept++;
            }
          }
  }
  assert_int_equal(pt_ops_set_threads(1), 0);
  /* Not vacuous: both outcomes occurred many times. */
  assert_true(dropped > 100000 && kept > 100000);
  free(x);
  free(y0);
  free(m0);
  free(y1);
  free(m1);
}

/* ---- batches ---- */

typedef struct {
  int c, h, w, crop_pad, hflip;
} batch_case;

/* What make_batch_kernel computes for sample slot i of a batch. */
static void sample_as_kernel(const pt_dataset *ds, int32_t idx, const float mean[3], const float std[3],
                             int crop_pad, int hflip, uint64_t key, int epoch, float *out) {
  float lut[3][256];
  for (int i = 0; i < ds->c * 256; i++) lut[i >> 8][i & 255] = pt_normalize_byte(i & 255, mean[i >> 8], std[i >> 8]);
  const pt_augment a = pt_augment_draw(key, epoch, idx, crop_pad, hflip);
  const size_t hw = (size_t)ds->h * ds->w, chw = (size_t)ds->c * hw;
  const uint8_t *img = ds->images + (size_t)idx * chw;
  for (size_t e = 0; e < chw; e++) {
    const long long src = pt_augment_source(ds->h, ds->w, a, e);
    out[e] = lut[e / hw][src < 0 ? 0 : img[src]];
  }
}

static void check_batches(const batch_case *bc, int *flips, int *shifts) {
  pt_dataset ds = random_dataset(37, bc->c, bc->h, bc->w, 11, (uint64_t)bc->c * 100 + (uint64_t)bc->h);
  const size_t chw = (size_t)ds.c * ds.h * ds.w;

  pt_loader_config cfg = {.batch_size = 8, .shuffle = 1, .seed = 2024, .rank = 0, .world = 1,
                          .mean = {0.1307f, 0.5f, 0.4465f}, .std = {0.3081f, 0.25f, 0.2616f},
                          .crop_pad = bc->crop_pad, .hflip = bc->hflip};
  pt_loader *l;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
  const uint64_t key = pt_rng_key(cfg.seed, PT_RNG_AUGMENT);
  float *want = malloc(chw * sizeof *want);
  assert_non_null(want);
  const int epochs[] = {0, 1, 5};
  for (size_t ei = 0; ei < sizeof epochs / sizeof epochs[0]; ei++) {
    const int epoch = epochs[ei];
    assert_int_equal(pt_loader_start_epoch(l, epoch, 0), PT_OK);
    pt_batch b;
    for (;;) {
      assert_int_equal(pt_loader_next(l, &b), PT_OK);
      if (b.n == 0) break;
      for (int i = 0; i < b.n; i++) {
        const int32_t idx = b.index[i];
        sample_as_kernel(&ds, idx, cfg.mean, cfg.std, bc->crop_pad, bc->hflip, key, epoch, want);
        const float *got = b.x + (size_t)i * chw;
        if (memcmp(want, got, chw * sizeof *want)) {
          size_t e = 0;
          while (e < chw && want[e] == got[e]) e++;
          fail_msg("c %d %dx%d pad %d flip %d epoch %d sample %d: element %zu is %.9g, kernel would write %.9g",
                   bc->c, bc->h, bc->w, bc->crop_pad, bc->hflip, epoch, idx, e, (double)got[e], (double)want[e]);
        }
        assert_int_equal(b.y[i], ds.labels[idx]);
        const pt_augment a = pt_augment_draw(key, epoch, idx, bc->crop_pad, bc->hflip);
        *flips += a.flip;
        *shifts += a.dy != 0 || a.dx != 0;
      }
    }
  }
  free(want);
  pt_loader_destroy(l);
  pt_dataset_free(&ds);
}

static void test_batches_match_loader(void **s) {
  (void)s;
  const batch_case cases[] = {
      {1, 7, 7, 0, 0}, /* normalisation only */
      {1, 9, 7, 2, 0}, /* crop, non-square */
      {3, 8, 8, 0, 1}, /* flip */
      {3, 8, 9, 4, 1}, /* both, as CIFAR-10's training */
      {1, 5, 5, 9, 1}, /* padding wider than the image: whole windows outside */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int flips = 0, shifts = 0;
    check_batches(&cases[i], &flips, &shifts);
    /* 3 epochs x 37 samples: the draws did happen, both ways. */
    if (cases[i].hflip) assert_true(flips > 20 && flips < 91);
    if (cases[i].crop_pad) assert_true(shifts > 50);
    if (!cases[i].hflip && !cases[i].crop_pad) assert_int_equal(flips + shifts, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dropout_masks),
      cmocka_unit_test(test_batches_match_loader),
  };
  return cmocka_run_group_tests_name("cuda draws on the host", tests, NULL, NULL);
}
