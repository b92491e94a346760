/* Philox4x32-10: the CPU's entry points over util/philox_core.h. The
 * constants are the published ones; the round structure is two 32x32->64
 * multiplies whose halves are mixed with the key. The 16-counter vector
 * copy is a kernel (src/ops/cpu/philox16.c), built once per
 * instruction-set level: this library is built once, for the baseline. */
#include "util/philox.h"

/* The scalar generator is the header's (util/philox_core.h), which the
 * GPU runs too: one definition of the rounds. */
void pt_philox4x32(uint64_t key, uint64_t c0, uint64_t c1, uint32_t out[4]) { pt_philox_core(key, c0, c1, out); }

uint64_t pt_rng_key(uint64_t seed, uint32_t stream) {
  uint32_t o[4];
  pt_philox4x32(seed, stream, 0x7074726169ull /* "ptrai" */, o);
  return ((uint64_t)o[1] << 32) | o[0];
}

void pt_rng_init(pt_rng *r, uint64_t key, uint64_t c0) { pt_philox_seq_init(r, key, c0); }
uint32_t pt_rng_u32(pt_rng *r) { return pt_philox_seq_u32(r); }
float pt_rng_uniform(pt_rng *r) { return pt_philox_seq_uniform(r); }
uint32_t pt_rng_below(pt_rng *r, uint32_t n) { return pt_philox_seq_below(r, n); }
