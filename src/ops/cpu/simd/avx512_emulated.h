/* Tests only (cmake -DPT_EMULATE_AVX512=ON, never a product build): the
 * AVX-512 intrinsics v16_avx512.h uses, emulated with AVX2 by Debian's
 * SIMDe and, for the few SIMDe 0.7 lacks, below. With it the avx512
 * level's source -- v16_avx512.h itself and each kernel's 32-register
 * tiles -- compiles and runs on a CPU without AVX-512, so its tests run on
 * every machine. What it cannot check is the compiler's AVX-512 code and
 * the real instructions; the native avx512 tests do that where the CPU has
 * them. */
#ifndef PT_OPS_CPU_SIMD_AVX512_EMULATED_H
#define PT_OPS_CPU_SIMD_AVX512_EMULATED_H

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <string.h>

typedef uint16_t pt_emu_mmask16;
#undef __mmask16
#define __mmask16 pt_emu_mmask16

/* Lane by lane through memory: a masked load or store must not touch the
 * unselected lanes' memory, which may lie past a buffer's end. */
static inline __m512 pt_emu_mask_loadu_ps(__m512 src, uint16_t m, const void *p) {
  float v[16], s[16];
  memcpy(s, &src, sizeof s);
  for (int l = 0; l < 16; l++) v[l] = m >> l & 1u ? ((const float *)p)[l] : s[l];
  __m512 r;
  memcpy(&r, v, sizeof r);
  return r;
}
static inline void pt_emu_mask_storeu_ps(void *p, uint16_t m, __m512 a) {
  float v[16];
  memcpy(v, &a, sizeof v);
  for (int l = 0; l < 16; l++)
    if (m >> l & 1u) ((float *)p)[l] = v[l];
}
static inline __m512 pt_emu_maskz_expand_ps(uint16_t m, __m512 a) {
  float v[16], r[16] = {0};
  memcpy(v, &a, sizeof v);
  for (int l = 0, k = 0; l < 16; l++)
    if (m >> l & 1u) r[l] = v[k++];
  __m512 o;
  memcpy(&o, r, sizeof o);
  return o;
}
static inline float pt_emu_reduce_max_ps(__m512 a) {
  float v[16];
  memcpy(v, &a, sizeof v);
  float r = v[0];
  for (int l = 1; l < 16; l++) r = v[l] > r ? v[l] : r;
  return r;
}
static inline __m512d pt_emu_cvtps_pd(__m256 a) {
  float v[8];
  double d[8];
  memcpy(v, &a, sizeof v);
  for (int l = 0; l < 8; l++) d[l] = v[l];
  __m512d r;
  memcpy(&r, d, sizeof r);
  return r;
}
static inline __m256 pt_emu_cvtpd_ps(__m512d a) {
  double d[8];
  float v[8];
  memcpy(d, &a, sizeof d);
  for (int l = 0; l < 8; l++) v[l] = (float)d[l];
  __m256 r;
  memcpy(&r, v, sizeof r);
  return r;
}
static inline __m512i pt_emu_cvttps_epi32(__m512 a) {
  float v[16];
  int32_t i[16];
  memcpy(v, &a, sizeof v);
  for (int l = 0; l < 16; l++) i[l] = v[l] >= -2147483648.0f && v[l] < 2147483648.0f ? (int32_t)v[l] : INT32_MIN;
  __m512i r;
  memcpy(&r, i, sizeof r);
  return r;
}
#undef _mm512_mask_loadu_ps
#define _mm512_mask_loadu_ps pt_emu_mask_loadu_ps
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps pt_emu_mask_storeu_ps
#undef _mm512_maskz_expand_ps
#define _mm512_maskz_expand_ps pt_emu_maskz_expand_ps
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps pt_emu_reduce_max_ps
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd pt_emu_cvtps_pd
#undef _mm512_cvtpd_ps
#define _mm512_cvtpd_ps pt_emu_cvtpd_ps
#undef _mm512_shuffle_f32x4 /* SIMDe has it, without the alias */
#define _mm512_shuffle_f32x4 simde_mm512_shuffle_f32x4
#undef _mm512_cvttps_epi32
#define _mm512_cvttps_epi32 pt_emu_cvttps_epi32

#endif
