/* The table of one instruction-set level's kernels (kernels.def), and the
 * choice of level at run time. */
#ifndef PT_OPS_CPU_ISA_KERNELS_H
#define PT_OPS_CPU_ISA_KERNELS_H

#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_winograd.h"
#include "ops/cpu/ops.h"
#include "ops/cpu/pool_codes.h"
#include "ops/cpu/updates.h"
#include "util/philox.h" /* pt_philox4x32_x16 */

typedef struct pt_cpu_kernels {
#define PT_KERNEL(ret, name, params, args) ret(*k_##name) params;
#define PT_KERNEL_VOID(name, params, args) void(*k_##name) params;
#include "ops/cpu/isa/kernels.def"
#undef PT_KERNEL
#undef PT_KERNEL_VOID
} pt_cpu_kernels;

/* One per level this build compiled (table.c, built once per level). */
extern const pt_cpu_kernels pt_cpu_kernels_generic;
#ifdef PT_ISA_X86
extern const pt_cpu_kernels pt_cpu_kernels_avx2;
extern const pt_cpu_kernels pt_cpu_kernels_avx512;
#endif

#endif
