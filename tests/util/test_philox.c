/* Philox4x32-10 against the published known-answer vectors (Random123's
 * kat_vectors), and the properties the rest of ptrain relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/philox.h"

static void test_known_answers(void **s) {
  (void)s;
  uint32_t o[4];
  /* counter 0, key 0 */
  pt_philox4x32(0, 0, 0, o);
  assert_int_equal(o[0], 0x6627e8d5u);
  assert_int_equal(o[1], 0xe169c58du);
  assert_int_equal(o[2], 0xbc57ac4cu);
  assert_int_equal(o[3], 0x9b00dbd8u);
  /* counter all ones, key all ones */
  pt_philox4x32(UINT64_MAX, UINT64_MAX, UINT64_MAX, o);
  assert_int_equal(o[0], 0x408f276du);
  assert_int_equal(o[1], 0x41c83b0eu);
  assert_int_equal(o[2], 0xa20bc7c6u);
  assert_int_equal(o[3], 0x6d5451fdu);
  /* the digits of pi */
  pt_philox4x32(0x299f31d0a4093822ull, /* key words (k0, k1) = (a4093822, 299f31d0) */ 0x85a308d3243f6a88ull, 0x0370734413198a2eull, o);
  assert_int_equal(o[0], 0xd16cfe09u);
  assert_int_equal(o[1], 0x94fdccebu);
  assert_int_equal(o[2], 0x5001e420u);
  assert_int_equal(o[3], 0x24126ea1u);
}

static void test_below_is_uniform_and_bounded(void **s) {
  (void)s;
  pt_rng r;
  pt_rng_init(&r, 42, 7);
  int counts[10] = {0};
  for (int i = 0; i < 100000; i++) {
    uint32_t v = pt_rng_below(&r, 10);
    assert_true(v < 10);
    counts[v]++;
  }
  for (int k = 0; k < 10; k++) assert_in_range(counts[k], 9500, 10500);
  for (int i = 0; i < 1000; i++) {
    float u = pt_rng_uniform(&r);
    assert_true(u >= 0.0f && u < 1.0f);
  }
}

/* The 16-lane generator (a kernel, run here at the test's level) is the
 * scalar one, counter by counter, including across a carry into the
 * counter's high word and with every bit of the key and c0 in play: the
 * dropout masks it makes must not depend on the CPU. */
static void test_x16_matches_scalar(void **s) {
  (void)s;
  const uint64_t c1s[] = {0, 12345, 0xfffffffffffffff8ull, 0x00000000fffffff9ull, 0xfffffffffffffffcull};
  const uint64_t keys[] = {0x1234567890abcdefull, 0, UINT64_MAX, 0x8000000180000001ull};
  const uint64_t c0s[] = {77, 0, UINT64_MAX, 0xdeadbeef00000000ull};
  for (size_t a = 0; a < sizeof keys / sizeof keys[0]; a++)
    for (size_t b = 0; b < sizeof c0s / sizeof c0s[0]; b++)
      for (size_t t = 0; t < sizeof c1s / sizeof c1s[0]; t++) {
        uint32_t v[16][4], one[4];
        pt_philox4x32_x16(keys[a], c0s[b], c1s[t], v);
        for (int l = 0; l < 16; l++) {
          pt_philox4x32(keys[a], c0s[b], c1s[t] + (uint64_t)l, one);
          assert_memory_equal(v[l], one, sizeof one);
        }
      }
  /* and a run of counters as dropout walks them */
  pt_rng r;
  pt_rng_init(&r, 5, 0);
  for (int i = 0; i < 2000; i++) {
    const uint64_t key = (uint64_t)pt_rng_u32(&r) << 32 | pt_rng_u32(&r);
    const uint64_t c0 = (uint64_t)pt_rng_u32(&r) << 32 | pt_rng_u32(&r);
    const uint64_t c1 = (uint64_t)pt_rng_u32(&r) << 32 | pt_rng_u32(&r);
    uint32_t v[16][4], one[4];
    pt_philox4x32_x16(key, c0, c1, v);
    for (int l = 0; l < 16; l++) {
      pt_philox4x32(key, c0, c1 + (uint64_t)l, one);
      assert_memory_equal(v[l], one, sizeof one);
    }
  }
}

static void test_streams_differ(void **s) {
  (void)s;
  assert_true(pt_rng_key(1, PT_RNG_SHUFFLE) != pt_rng_key(1, PT_RNG_DROPOUT));
  assert_true(pt_rng_key(1, PT_RNG_SHUFFLE) != pt_rng_key(2, PT_RNG_SHUFFLE));
  assert_true(pt_rng_key(1, PT_RNG_SHUFFLE) == pt_rng_key(1, PT_RNG_SHUFFLE));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_answers),
      cmocka_unit_test(test_below_is_uniform_and_bounded),
      cmocka_unit_test(test_streams_differ),
      cmocka_unit_test(test_x16_matches_scalar),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
