/* Philox4x32-10: the CPU's entry points over util/philox_core.h, and 16
 * counters at a time with vector instructions. The constants are the
 * published ones; the round structure is two 32x32->64 multiplies whose
 * halves are mixed with the key. */
#include "util/philox.h"

/* The scalar generator is the header's (util/philox_core.h), which the
 * GPU runs too: one definition of the rounds. */
void pt_philox4x32(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[4]) { pt_philox_core(key, c0, c1, out); }

#ifndef __AVX512F__ /* with it, philox_x16_avx512 below */
/* Eight lanes at once with the compiler's vector types (GCC and Clang):
 * each 64-bit lane holds one 32-bit word, so a lane product is the full
 * 32x32->64 multiply Philox needs, and its halves are a shift and a mask. */
typedef uint64_t v8u64 __attribute__((vector_size(64)));

static void philox_x8(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[8][4]) {
  v8u64 x0, x1, x2, x3;
  for (int l = 0; l < 8; l++) {
    uint64_t cl = c1 + (uint64_t)l;
    x0[l] = (uint32_t)c0;
    x1[l] = (uint32_t)(c0 >> 32);
    x2[l] = (uint32_t)cl;
    x3[l] = (uint32_t)(cl >> 32);
  }
  const uint64_t lo32 = 0xffffffffu;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int round = 0; round < 10; round++) {
    v8u64 p0 = x0 * (uint64_t)PT_PHILOX_M0, p1 = x2 * (uint64_t)PT_PHILOX_M1;
    v8u64 y0 = (p1 >> 32) ^ x1 ^ (uint64_t)k0;
    v8u64 y2 = (p0 >> 32) ^ x3 ^ (uint64_t)k1;
    x1 = p1 & lo32;
    x3 = p0 & lo32;
    x0 = y0;
    x2 = y2;
    k0 += PT_PHILOX_W0;
    k1 += PT_PHILOX_W1;
  }
  for (int l = 0; l < 8; l++) {
    out[l][0] = (uint32_t)x0[l];
    out[l][1] = (uint32_t)x1[l];
    out[l][2] = (uint32_t)x2[l];
    out[l][3] = (uint32_t)x3[l];
  }
}
#endif

#ifdef __AVX512F__
#include <immintrin.h>

/* Sixteen lanes as two vectors of eight, through the rounds side by side.
 * philox_x8's vector types compile their lane product to a full 64x64
 * multiply (vpmullq, three uops and 15 cycles' latency), as the compiler
 * cannot see that both factors fit in 32 bits; the 32x32->64 multiply
 * (vpmuludq) is one uop and 5 cycles, and the two chains hide each other's
 * latency. The same words as philox_x8. */
static void philox_x16_avx512(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[16][4]) {
  const __m512i lo32 = _mm512_set1_epi64(0xffffffffll), lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i m0 = _mm512_set1_epi64(PT_PHILOX_M0), m1 = _mm512_set1_epi64(PT_PHILOX_M1);
  __m512i x0[2], x1[2], x2[2], x3[2];
  for (int h = 0; h < 2; h++) {
    const __m512i cl = _mm512_add_epi64(_mm512_set1_epi64((long long)(c1 + 8 * (uint64_t)h)), lane);
    x0[h] = _mm512_set1_epi64((uint32_t)c0);
    x1[h] = _mm512_set1_epi64((uint32_t)(c0 >> 32));
    x2[h] = _mm512_and_si512(cl, lo32);
    x3[h] = _mm512_srli_epi64(cl, 32);
  }
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int round = 0; round < 10; round++) {
    const __m512i vk0 = _mm512_set1_epi64(k0), vk1 = _mm512_set1_epi64(k1);
    for (int h = 0; h < 2; h++) {
      const __m512i p0 = _mm512_mul_epu32(x0[h], m0), p1 = _mm512_mul_epu32(x2[h], m1);
      x0[h] = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p1, 32), x1[h]), vk0);
      x2[h] = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p0, 32), x3[h]), vk1);
      x1[h] = _mm512_and_si512(p1, lo32);
      x3[h] = _mm512_and_si512(p0, lo32);
    }
    k0 += PT_PHILOX_W0;
    k1 += PT_PHILOX_W1;
  }
  for (int h = 0; h < 2; h++) {
    uint64_t w[4][8];
    _mm512_storeu_si512(w[0], x0[h]);
    _mm512_storeu_si512(w[1], x1[h]);
    _mm512_storeu_si512(w[2], x2[h]);
    _mm512_storeu_si512(w[3], x3[h]);
    for (int l = 0; l < 8; l++)
      for (int q = 0; q < 4; q++) out[8 * h + l][q] = (uint32_t)w[q][l];
  }
}
#endif

void pt_philox4x32_x16(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[16][4]) {
#ifdef __AVX512F__
  philox_x16_avx512(key, c0, c1, out);
#else
  philox_x8(key, c0, c1, out);
  philox_x8(key, c0, c1 + 8, out + 8);
#endif
}

uint64_t pt_rng_key(uint64_t seed, uint32_t stream) {
  uint32_t o[4];
  pt_philox4x32(seed, stream, 0x7074726169ull /* "ptrai" */, o);
  return ((uint64_t)o[1] << 32) | o[0];
}

void pt_rng_init(pt_rng *r, uint64_t key, uint64_t c0) { pt_philox_seq_init(r, key, c0); }
uint32_t pt_rng_u32(pt_rng *r) { return pt_philox_seq_u32(r); }
float pt_rng_uniform(pt_rng *r) { return pt_philox_seq_uniform(r); }
uint32_t pt_rng_below(pt_rng *r, uint32_t n) { return pt_philox_seq_below(r, n); }
