/* The table of the level in use, for dispatch.c's wrappers and
 * cpu_level.c's choice. */
#ifndef PT_OPS_CPU_ISA_DISPATCH_H
#define PT_OPS_CPU_ISA_DISPATCH_H

#include "ops/cpu/isa/cpu_level.h"
#include "ops/cpu/isa/kernels.h"

void pt_cpu_set_table(const pt_cpu_kernels *k);
const pt_cpu_kernels *pt_cpu_table(void);

#endif
