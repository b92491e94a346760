/* Philox4x32-10 and the sequential draws of pt_rng as header-only functions
 * that compile for the host (C or C++) and, under nvcc, for the device too.
 *
 * The GPU must draw exactly what the CPU draws (dropout masks, crops and
 * flips), so both sides need one definition of the algorithm: this one.
 * philox.c builds the CPU's pt_philox4x32 and pt_rng on it; the CPU
 * kernels add a 16-counter vectorised copy for speed (src/ops/cpu/
 * philox16.c, one per instruction-set level), which tests/util/
 * test_philox.c checks against it word for word at every level.
 */
#ifndef PT_UTIL_PHILOX_CORE_H
#define PT_UTIL_PHILOX_CORE_H

#include <stdint.h>

#ifndef PT_HD
#ifdef __CUDACC__
#define PT_HD __host__ __device__
#else
#define PT_HD
#endif
#endif

#define PT_PHILOX_M0 0xD2511F53u
#define PT_PHILOX_M1 0xCD9E8D57u
#define PT_PHILOX_W0 0x9E3779B9u
#define PT_PHILOX_W1 0xBB67AE85u

/* out[0..3] = Philox4x32-10(counter = {c0, c1}, key), as pt_philox4x32. */
PT_HD static inline void pt_philox_core(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[4]) {
  uint32_t x0 = (uint32_t)c0, x1 = (uint32_t)(c0 >> 32);
  uint32_t x2 = (uint32_t)c1, x3 = (uint32_t)(c1 >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int round = 0; round < 10; round++) {
    /* One 32x32->64 multiply each; on the device this is a single wide
     * multiply-add instruction, so no __umulhi is needed. */
    const uint64_t p0 = (uint64_t)PT_PHILOX_M0 * x0;
    const uint64_t p1 = (uint64_t)PT_PHILOX_M1 * x2;
    const uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
    const uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    x1 = (uint32_t)p1;
    x3 = (uint32_t)p0;
    x0 = y0;
    x2 = y2;
    k0 += PT_PHILOX_W0;
    k1 += PT_PHILOX_W1;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

/* A float uniform in [0, 1) with 24 random bits, as pt_u32_to_unit. */
PT_HD static inline float pt_philox_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* The stream pt_rng draws from (key, c0): words in the order pt_rng_u32
 * returns them, counter c1 = 0, 1, 2, ... four words each. */
typedef struct {
  uint64_t key, c0, c1;
  uint32_t buf[4];
  int used; /* words of buf consumed; 4 = empty */
} pt_philox_seq;

PT_HD static inline void pt_philox_seq_init(pt_philox_seq *s, uint64_t key, uint64_t c0) {
  s->key = key;
  s->c0 = c0;
  s->c1 = 0;
  s->used = 4;
}

PT_HD static inline uint32_t pt_philox_seq_u32(pt_philox_seq *s) {
  if (s->used == 4) {
    pt_philox_core(s->key, s->c0, s->c1++, s->buf);
    s->used = 0;
  }
  return s->buf[s->used++];
}

/* pt_rng_uniform: one word. */
PT_HD static inline float pt_philox_seq_uniform(pt_philox_seq *s) { return pt_philox_unit(pt_philox_seq_u32(s)); }

/* pt_rng_below: Lemire's multiply-shift, drawing again while the low half
 * falls in the biased range, so it consumes one word or more exactly as
 * pt_rng_below does. n > 0. */
PT_HD static inline uint32_t pt_philox_seq_below(pt_philox_seq *s, uint32_t n) {
  uint64_t m = (uint64_t)pt_philox_seq_u32(s) * n;
  uint32_t lo = (uint32_t)m;
  if (lo < n) {
    const uint32_t threshold = (uint32_t)(0u - n) % n;
    while (lo < threshold) {
      m = (uint64_t)pt_philox_seq_u32(s) * n;
      lo = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

#endif
