/* This level's table: compiled once per level, where the build renames
 * every kernel to its level's copy (pt_relu_forward is
 * pt_relu_forward_avx2 in the AVX2 build), so `name` below is that copy. */
#include "ops/cpu/isa/kernels.h"

#define PT_ISA_TABLE2(a, b) a##_##b
#define PT_ISA_TABLE(a, b) PT_ISA_TABLE2(a, b)

const pt_cpu_kernels PT_ISA_TABLE(pt_cpu_kernels, PT_ISA) = {
#define PT_KERNEL(ret, name, params, args) .k_##name = name,
#define PT_KERNEL_VOID(name, params, args) .k_##name = name,
#include "ops/cpu/isa/kernels.def"
#undef PT_KERNEL
#undef PT_KERNEL_VOID
};
