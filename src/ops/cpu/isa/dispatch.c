/* The public kernel names: each calls the same function in the table of
 * the level in use (one indirect call per op, small beside any kernel). */
#include "ops/cpu/isa/dispatch.h"

#include <stdatomic.h>

static _Atomic(const pt_cpu_kernels *) current;

void pt_cpu_set_table(const pt_cpu_kernels *k) { atomic_store_explicit(&current, k, memory_order_release); }

const pt_cpu_kernels *pt_cpu_table(void) {
  const pt_cpu_kernels *k = atomic_load_explicit(&current, memory_order_acquire);
  if (k) return k;
  (void)pt_cpu_level_current(); /* chooses and sets one */
  return atomic_load_explicit(&current, memory_order_acquire);
}

#define PT_KERNEL(ret, name, params, args)                                                                           \
  ret name params { return pt_cpu_table()->k_##name args; }
#define PT_KERNEL_VOID(name, params, args)                                                                           \
  void name params { pt_cpu_table()->k_##name args; }
#include "ops/cpu/isa/kernels.def"
