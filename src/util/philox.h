/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
 *
 * Every random draw in ptrain is a pure function of (key, counter): the key
 * comes from the seed and what the draw is for (data order, augmentation,
 * dropout), the counter from where it happens (epoch, step, sample, element).
 * Nothing depends on which thread asks or in what order, which is what makes
 * runs bit-identical across thread counts and resumable mid-epoch.
 */
#ifndef PT_UTIL_PHILOX_H
#define PT_UTIL_PHILOX_H

#include <stdint.h>

#include "util/philox_core.h"

/* Streams keep the purposes of random numbers apart. */
enum {
  PT_RNG_SHUFFLE = 1,
  PT_RNG_AUGMENT = 2,
  PT_RNG_DROPOUT = 3,
  PT_RNG_INIT = 4,
};

/* out[0..3] = Philox4x32-10(counter = {c0, c1}, key = {k}) */
void pt_philox4x32(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[4]);

/* Philox4x32-10 for 16 consecutive counters (c0, c1 + i), i = 0..15:
 * out[i] holds the four words of counter i, exactly as pt_philox4x32
 * gives them, at every instruction-set level. A CPU kernel (pt_ops, not
 * this library): src/ops/cpu/philox16.c, built once per level. */
void pt_philox4x32_x16(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[16][4]);

/* A key for a purpose under a seed. */
uint64_t pt_rng_key(uint64_t seed, uint32_t stream);

/* A float uniform in [0, 1) with 24 random bits. */
static inline float pt_u32_to_unit(uint32_t x) { return pt_philox_unit(x); }

/* A sequential generator over one (key, c0) stream, for code that draws many
 * numbers in a fixed order on one thread (weight initialisation, shuffles):
 * the core's stream, which the GPU kernels draw from too. */
typedef pt_philox_seq pt_rng;

void pt_rng_init(pt_rng *r, uint64_t key, uint64_t c0);
uint32_t pt_rng_u32(pt_rng *r);
float pt_rng_uniform(pt_rng *r);              /* [0, 1) */
uint32_t pt_rng_below(pt_rng *r, uint32_t n); /* [0, n), unbiased */

#endif
