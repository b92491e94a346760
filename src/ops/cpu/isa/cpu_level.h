/* The CPU's instruction-set level and the one the kernels run at.
 *
 * The kernels are compiled once per level (portable C, AVX2 + FMA,
 * AVX-512) and one table of them is chosen at start-up: the best the CPU
 * runs, or the one PTRAIN_CPU names. OpenBLAS's DYNAMIC_ARCH and PyTorch's
 * CPU capability work the same way; so one binary runs on any x86-64 and
 * is fast wherever it lands. */
#ifndef PT_OPS_CPU_ISA_CPU_LEVEL_H
#define PT_OPS_CPU_ISA_CPU_LEVEL_H

#include <stddef.h>

#include "util/error.h"

typedef enum {
  PT_CPU_GENERIC = 0, /* portable C: SSE2 on x86-64, NEON on aarch64 */
  PT_CPU_AVX2 = 1,    /* x86-64-v3: AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE */
  PT_CPU_AVX512 = 2,  /* x86-64-v4: AVX-512 F, BW, CD, DQ, VL */
  PT_CPU_LEVELS
} pt_cpu_level;

/* "generic", "avx2", "avx512". */
const char *pt_cpu_level_name(pt_cpu_level l);
/* Whether this binary has the level's kernels, and whether this CPU (and
 * its operating system, which must save the wider registers) runs them. */
int pt_cpu_level_built(pt_cpu_level l);
int pt_cpu_level_runs(pt_cpu_level l);
/* The best level both built and run here. */
pt_cpu_level pt_cpu_level_best(void);

/* Chooses the kernels: name is a level's name, "auto" or NULL for the
 * best, and NULL reads PTRAIN_CPU first. An unknown name or a level this
 * CPU cannot run is refused with a message naming what the CPU has, and
 * the level in use is left as it was. */
pt_status pt_cpu_use(const char *name);
/* pt_cpu_use(NULL) where PTRAIN_CPU is set, so that a bad value is an
 * error where a run starts rather than a quiet fall back; PT_OK otherwise. */
pt_status pt_cpu_check_env(void);
/* The level in use; the first kernel call chooses one (as pt_cpu_use(NULL),
 * or the best where PTRAIN_CPU is not usable) if nothing has yet. */
pt_cpu_level pt_cpu_level_current(void);

/* The CPU's model name ("AMD EPYC 7B13"), or "unknown CPU". */
const char *pt_cpu_model(void);
/* The vector features this CPU has, as words ("sse2 avx avx2 fma
 * avx512f ..."), into buf. */
void pt_cpu_features(char *buf, size_t size);

#endif
