/* The linear layer's input gradient as outer products.
 *
 * dx (n, in) = dy (n, out) w (out, in). w's rows run along the inputs, as
 * dx's do, so a register tile of 4 samples by 96 inputs (24 vectors of
 * sums) takes, for each output in turn, 6 vectors of w's row and 4
 * broadcasts of dy: 24 fused multiply-adds for 10 loads, and each sum ends
 * where it is stored, with nothing to transpose or reduce. The threads
 * take chunks of 96 inputs; within a chunk, every group of 4 samples
 * passes the same rows of w (out x 384 bytes: 48 KB at mnist-cnn's fc1),
 * which stay in the cache while the next chunk's are fetched ahead.
 *
 * At mnist-cnn's fc1 (64 x 128 -> 9216, at 1 thread) OpenBLAS took
 * 1.55-1.76 ms alone (85-97 GFLOP/s) and this 1.24-1.38 (110-122; 147 at
 * a shape whose weights fit in L2: fc1's 4.7 MB come from L3, and neither
 * prefetching them further ahead nor streaming stores for dx helped). In
 * training, fc1's backward pass (with the weight gradient) went from
 * 3.23-3.59 to 2.68-2.87 ms, and mnist-cnn gained about 10% at 1 thread
 * with the forward pass's block of 64 rows (linear_xt.c).
 *
 * Each gradient is the sum over outputs in order, one fused multiply-add
 * each, from 0, whichever thread computes it: the bits do not depend on
 * the thread count. */
#include "ops/cpu/ops.h"
#include "util/threadpool.h"

#ifdef __AVX512F__
#include <immintrin.h>

#include "ops/cpu/lanes.h"

#define DX_SV 6              /* vectors of inputs per tile */
#define DX_KC (DX_SV * 16)   /* inputs per chunk: 96 */
#define DX_MS 4              /* samples per tile */

typedef struct {
  int n, in, out, nchunks;
  const float *dy, *w;
  float *dx;
} job;

/* dx[s0 .. s0 + MS)[k0 .. k0 + 16 NV) for one chunk; unless FULL, the
 * last vector is masked by last. MS, NV and FULL are constants in each
 * instantiation, so the MS x NV sums stay in registers, and whole chunks
 * load w unmasked (masked loads there cost 5-8%). */
static inline __attribute__((always_inline)) void tile(const int MS, const int NV, const int FULL, const job *j,
                                                       int s0, int k0, __mmask16 last) {
  __m512 acc[DX_MS][DX_SV];
#pragma GCC unroll 4
  for (int s = 0; s < MS; s++)
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) acc[s][v] = _mm512_setzero_ps();
  const float *dy = j->dy + (size_t)s0 * j->out;
  const float *w = j->w + k0;
  for (int o = 0; o < j->out; o++, w += j->in) {
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) {
      const __m512 wv =
          FULL || v < NV - 1 ? _mm512_loadu_ps(w + v * 16) : _mm512_maskz_loadu_ps(last, w + v * 16);
#pragma GCC unroll 4
      for (int s = 0; s < MS; s++) acc[s][v] = _mm512_fmadd_ps(_mm512_set1_ps(dy[(size_t)s * j->out + o]), wv, acc[s][v]);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < MS; s++) {
    float *d = j->dx + (size_t)(s0 + s) * j->in + k0;
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(d + v * 16, v == NV - 1 ? last : (__mmask16)0xFFFF, acc[s][v]);
  }
}

/* The chunk's nv vectors as a constant: a whole chunk, or the last one's
 * 1 to 6 with the last vector partial. */
static inline __attribute__((always_inline)) void tile_nv(const int MS, const job *j, int s0, int k0, int nv,
                                                          __mmask16 last) {
  if (nv == DX_SV && last == (__mmask16)0xFFFF) {
    tile(MS, DX_SV, 1, j, s0, k0, last);
    return;
  }
  switch (nv) {
    case 1: tile(MS, 1, 0, j, s0, k0, last); break;
    case 2: tile(MS, 2, 0, j, s0, k0, last); break;
    case 3: tile(MS, 3, 0, j, s0, k0, last); break;
    case 4: tile(MS, 4, 0, j, s0, k0, last); break;
    case 5: tile(MS, 5, 0, j, s0, k0, last); break;
    default: tile(MS, DX_SV, 0, j, s0, k0, last); break;
  }
}

static void tile4(const job *j, int s0, int k0, int nv, __mmask16 last) { tile_nv(4, j, s0, k0, nv, last); }
static void tile1(const job *j, int s0, int k0, int nv, __mmask16 last) { tile_nv(1, j, s0, k0, nv, last); }

static void task(void *ctx, int tid, int nt) {
  const job *j = ctx;
  size_t lo, hi;
  pt_split((size_t)j->nchunks, tid, nt, &lo, &hi);
  for (size_t c = lo; c < hi; c++) {
    const int k0 = (int)c * DX_KC, kc = j->in - k0 < DX_KC ? j->in - k0 : DX_KC;
    const int nv = (kc + 15) / 16;
    const __mmask16 last = pt_lanes(kc - (nv - 1) * 16);
    const int groups = j->n / DX_MS;
    for (int g = 0; g < groups; g++) {
      /* The next chunk's rows of w, a share with each group: they lie in
       * floats apart, where the hardware does not look ahead. */
      if (c + 1 < hi && k0 + DX_KC + DX_KC <= j->in) {
        const int per = (j->out + groups - 1) / groups;
        for (int o = g * per; o < (g + 1) * per && o < j->out; o++)
          for (int l = 0; l < DX_KC; l += 16)
            _mm_prefetch((const char *)(j->w + (size_t)o * j->in + k0 + DX_KC + l), _MM_HINT_T0);
      }
      tile4(j, g * DX_MS, k0, nv, last);
    }
    for (int s = groups * DX_MS; s < j->n; s++) tile1(j, s, k0, nv, last);
  }
}

int pt_linear_backward_dx(int n, int in, int out, const float *dy, const float *w, float *dx) {
  if (n < DX_MS || in < DX_KC || out < 16) return 0;
  job j = {n, in, out, (in + DX_KC - 1) / DX_KC, dy, w, dx};
  pt_parallel(task, &j);
  return 1;
}

#else

int pt_linear_backward_dx(int n, int in, int out, const float *dy, const float *w, float *dx) {
  (void)n, (void)in, (void)out, (void)dy, (void)w, (void)dx;
  return 0;
}

#endif
