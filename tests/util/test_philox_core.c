/* The header-only Philox (util/philox_core.h), which the CUDA kernels run,
 * against the CPU's entry points in philox.c (pt_philox4x32 and pt_rng,
 * now built on the header): the same words for any key and counter, and
 * the same sequential draws, rejections included. A difference here would
 * make GPU dropout masks and crops differ from the CPU's. The header's
 * words themselves are checked against the published vectors by
 * test_philox's known answers, which go through pt_philox4x32. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/philox.h"
#include "util/philox_core.h"

/* Keys and counters with carries, all-ones halves and high bits set, then
 * pseudo-random ones. */
static const uint64_t edges[] = {0, 1, 0xffffffffull, 0x100000000ull, 0xfffffffffffffffeull, UINT64_MAX,
                                 0x8000000000000000ull, (uint64_t)3 << 40, 0x00000000fffffff9ull};
#define NEDGES (sizeof edges / sizeof edges[0])

static void test_words_match(void **s) {
  (void)s;
  uint32_t a[4], b[4];
  for (size_t i = 0; i < NEDGES; i++)
    for (size_t j = 0; j < NEDGES; j++)
      for (size_t k = 0; k < NEDGES; k++) {
        pt_philox4x32(edges[i], edges[j], edges[k], a);
        pt_philox_core(edges[i], edges[j], edges[k], b);
        assert_memory_equal(a, b, sizeof a);
      }
  pt_rng r;
  pt_rng_init(&r, 99, 1);
  for (int t = 0; t < 100000; t++) {
    uint64_t key = (uint64_t)pt_rng_u32(&r) << 32 | pt_rng_u32(&r);
    uint64_t c0 = (uint64_t)pt_rng_u32(&r) << 32 | pt_rng_u32(&r);
    uint64_t c1 = (uint64_t)pt_rng_u32(&r) << 32 | pt_rng_u32(&r);
    pt_philox4x32(key, c0, c1, a);
    pt_philox_core(key, c0, c1, b);
    assert_memory_equal(a, b, sizeof a);
  }
}

static void test_unit_matches(void **s) {
  (void)s;
  const uint32_t xs[] = {0, 1, 255, 256, 0x7fffffffu, 0x80000000u, 0xffffff00u, 0xffffffffu};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    float a = pt_u32_to_unit(xs[i]), b = pt_philox_unit(xs[i]);
    assert_memory_equal(&a, &b, sizeof a);
  }
}

/* Mixed draws in one stream, as the loader mixes below() and uniform():
 * both generators must consume the same words, so every later draw agrees. */
static void test_sequences_match(void **s) {
  (void)s;
  /* Bounds from trivial to ones that reject almost half the draws. */
  const uint32_t bounds[] = {1, 2, 3, 9, 10, 17, 1000, 65537, 0x7fffffffu, 0x80000001u, 0xc0000001u, 0xfffffffeu,
                             0xffffffffu};
  const size_t nb = sizeof bounds / sizeof bounds[0];
  for (size_t ki = 0; ki < NEDGES; ki++)
    for (uint64_t c0 = 0; c0 < 64; c0++) {
      const uint64_t key = edges[ki] ^ (c0 * 0x9e3779b97f4a7c15ull);
      const uint64_t ctr = c0 << 32 | (c0 * 7919u);
      pt_rng r;
      pt_philox_seq q;
      pt_rng_init(&r, key, ctr);
      pt_philox_seq_init(&q, key, ctr);
      for (int t = 0; t < 200; t++) {
        switch ((t + (int)c0) % 3) {
          case 0: {
            const uint32_t n = bounds[(size_t)(t * 5 + (int)ki) % nb];
            assert_int_equal(pt_rng_below(&r, n), pt_philox_seq_below(&q, n));
            break;
          }
          case 1: {
            float a = pt_rng_uniform(&r), b = pt_philox_seq_uniform(&q);
            assert_memory_equal(&a, &b, sizeof a);
            break;
          }
          default: assert_int_equal(pt_rng_u32(&r), pt_philox_seq_u32(&q));
        }
      }
      /* Same position in the stream afterwards. */
      assert_int_equal(r.c1, q.c1);
      assert_int_equal(r.used, q.used);
    }
}

/* A bound of 2^31 + 1 rejects nearly half of the draws: make sure some
 * rejections happened in the sequences above by counting them here. */
static void test_rejections_happen(void **s) {
  (void)s;
  pt_philox_seq q;
  pt_philox_seq_init(&q, 5, 6);
  int words = 0;
  for (int t = 0; t < 1000; t++) {
    const uint64_t before = q.c1 * 4 + (uint64_t)q.used;
    (void)pt_philox_seq_below(&q, 0x80000001u);
    words += (int)(q.c1 * 4 + (uint64_t)q.used - before);
  }
  assert_true(words > 1300); /* about 2000 expected */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_words_match),
      cmocka_unit_test(test_unit_matches),
      cmocka_unit_test(test_sequences_match),
      cmocka_unit_test(test_rejections_happen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
