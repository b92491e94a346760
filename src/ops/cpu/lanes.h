/* The mask of a vector's first lanes, for the AVX-512 kernels' partial
 * vectors at the ends of rows. */
#ifndef PT_OPS_CPU_LANES_H
#define PT_OPS_CPU_LANES_H

#ifdef __AVX512F__
#include <immintrin.h>

/* The first n lanes (none for n <= 0, all for n >= 16). */
static inline __mmask16 pt_lanes(int n) { return (__mmask16)(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1); }
#endif

#endif
