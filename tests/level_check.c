/* Linked into every per-level test: before main, choose the test's level
 * (PT_TEST_LEVEL, or PTRAIN_CPU where set) and, where this CPU cannot run
 * it (or this build lacks it), print why and exit 77, which ctest reports
 * as skipped. Compiled for the baseline, so nothing
 * wider than the CPU runs before the check. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/cpu/isa/cpu_level.h"

__attribute__((constructor)) static void pt_test_level_check(void) {
  const char *want = getenv("PTRAIN_CPU");
  if (!want || !*want) want = PT_TEST_LEVEL;
  if (pt_cpu_use(want) != PT_OK) {
    printf("SKIPPED: %s\n", pt_error_message());
    fflush(stdout);
    exit(77);
  }
#ifdef PT_EMULATE_AVX512
  const char *how = pt_cpu_level_current() == PT_CPU_AVX512 ? " (AVX-512 emulated on AVX2)" : "";
#else
  const char *how = "";
#endif
  printf("kernels at level %s%s on %s\n", pt_cpu_level_name(pt_cpu_level_current()), how, pt_cpu_model());
}
