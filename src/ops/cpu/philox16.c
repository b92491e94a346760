/* Philox4x32-10 for 16 consecutive counters over the vector layer, built
 * once per instruction-set level like the other kernels (dropout draws its
 * masks from it): util/philox.c, compiled once for the baseline, could only
 * offer the AVX-512 copy to a build made for AVX-512. Every level gives
 * pt_philox4x32's words exactly (integer arithmetic only), so dropout
 * masks do not depend on the CPU; test_philox checks each level.
 *
 * Each 64-bit lane holds one 32-bit word, so the 32x32->64 multiply
 * (vi16_mul_epu32: vpmuludq, one uop) gives the full product Philox needs,
 * its halves a shift and a mask; a 64-bit lane product (vpmullq) is three
 * uops and 15 cycles' latency. The 16 counters are two vectors of 8,
 * taken through the rounds side by side where the registers hold both
 * (their chains hide each other's latency); with fewer registers one half
 * at a time, each vector already being two or four independent registers. */
#include "util/philox.h"

#include "ops/cpu/simd/v16.h"

#if PT_V16_REGS >= 32
#define PHILOX_CHAINS 2
#else
#define PHILOX_CHAINS 1
#endif

/* Counters c1 + 8 h + l, l = 0..7, for h = h0 .. h0 + PHILOX_CHAINS - 1.
 * Only the low word of each 64-bit lane is a Philox word: the multiply
 * reads only low words, the shift brings the product's high word down, and
 * the output takes low words, so whatever the high words hold never
 * reaches a result. The masks and 64-bit broadcasts that would keep them
 * zero (two of the round's ten operations) are left out. */
static inline void philox_halves(uint64_t key, uint64_t c0, uint64_t c1, int h0, uint32_t out[16][4]) {
  const pt_vi16 m0 = vi16_set1((int32_t)PT_PHILOX_M0), m1 = vi16_set1((int32_t)PT_PHILOX_M1);
  pt_vi16 x0[PHILOX_CHAINS], x1[PHILOX_CHAINS], x2[PHILOX_CHAINS], x3[PHILOX_CHAINS];
  for (int h = 0; h < PHILOX_CHAINS; h++) {
    int32_t lo[16], hi[16];
    for (int l = 0; l < 8; l++) {
      const uint64_t cl = c1 + 8 * (uint64_t)(h0 + h) + (uint64_t)l;
      lo[2 * l] = (int32_t)(uint32_t)cl, hi[2 * l] = (int32_t)(uint32_t)(cl >> 32);
      lo[2 * l + 1] = hi[2 * l + 1] = 0;
    }
    x0[h] = vi16_set1((int32_t)(uint32_t)c0);
    x1[h] = vi16_set1((int32_t)(uint32_t)(c0 >> 32));
    x2[h] = vi16_loadu(lo);
    x3[h] = vi16_loadu(hi);
  }
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int round = 0; round < 10; round++) {
    const pt_vi16 vk0 = vi16_set1((int32_t)k0), vk1 = vi16_set1((int32_t)k1);
    for (int h = 0; h < PHILOX_CHAINS; h++) {
      const pt_vi16 p0 = vi16_mul_epu32(x0[h], m0), p1 = vi16_mul_epu32(x2[h], m1);
      x0[h] = vi16_xor(vi16_xor(vi16_srli_epi64(p1, 32), x1[h]), vk0);
      x2[h] = vi16_xor(vi16_xor(vi16_srli_epi64(p0, 32), x3[h]), vk1);
      x1[h] = p1; /* its low word; the high one goes to x0's high word only */
      x3[h] = p0;
    }
    k0 += PT_PHILOX_W0;
    k1 += PT_PHILOX_W1;
  }
  for (int h = 0; h < PHILOX_CHAINS; h++) {
    int32_t w[4][16]; /* word q of counter l in w[q][2 l] */
    vi16_storeu(w[0], x0[h]);
    vi16_storeu(w[1], x1[h]);
    vi16_storeu(w[2], x2[h]);
    vi16_storeu(w[3], x3[h]);
    for (int l = 0; l < 8; l++)
      for (int q = 0; q < 4; q++) out[8 * (h0 + h) + l][q] = (uint32_t)w[q][2 * l];
  }
}

void pt_philox4x32_x16(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[16][4]) {
  for (int h0 = 0; h0 < 2; h0 += PHILOX_CHAINS) philox_halves(key, c0, c1, h0, out);
}
