/* Which level the CPU runs, and the choice of table. */
#include "ops/cpu/isa/cpu_level.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/isa/dispatch.h"

#if defined(__x86_64__) && defined(PT_ISA_X86)
#include <cpuid.h>
#endif

static const char *const names[PT_CPU_LEVELS] = {"generic", "avx2", "avx512"};

const char *pt_cpu_level_name(pt_cpu_level l) { return (unsigned)l < PT_CPU_LEVELS ? names[l] : "unknown"; }

static const pt_cpu_kernels *table_of(pt_cpu_level l) {
  switch (l) {
  case PT_CPU_GENERIC: return &pt_cpu_kernels_generic;
#ifdef PT_ISA_X86
  case PT_CPU_AVX2: return &pt_cpu_kernels_avx2;
  case PT_CPU_AVX512: return &pt_cpu_kernels_avx512;
#endif
  default: return NULL;
  }
}

int pt_cpu_level_built(pt_cpu_level l) { return table_of(l) != NULL; }

#ifdef PT_ISA_X86
/* x86-64-v3 and -v4 as GCC's __builtin_cpu_supports knows them; clang
 * (the fuzzing build) knows only the single features, which add up to the
 * same where the kernels are concerned. */
static int runs_v3(void) {
#ifdef __clang__
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#else
  return __builtin_cpu_supports("x86-64-v3") != 0;
#endif
}
static int runs_v4(void) {
#if defined(PT_EMULATE_AVX512) /* a test build: the avx512 kernels run emulated on AVX2 */
  return runs_v3();
#elif defined(__clang__)
  return runs_v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return __builtin_cpu_supports("x86-64-v4") != 0;
#endif
}
#endif

int pt_cpu_level_runs(pt_cpu_level l) {
#ifdef PT_ISA_X86
  /* libgcc's checks include the operating system's (XGETBV): a CPU with
   * AVX-512 under a kernel that does not save the registers reports no. */
  __builtin_cpu_init();
  switch (l) {
  case PT_CPU_GENERIC: return 1;
  case PT_CPU_AVX2: return runs_v3();
  case PT_CPU_AVX512: return runs_v4();
  default: return 0;
  }
#else
  return l == PT_CPU_GENERIC;
#endif
}

pt_cpu_level pt_cpu_level_best(void) {
  for (int l = PT_CPU_LEVELS - 1; l > 0; l--)
    if (pt_cpu_level_built((pt_cpu_level)l) && pt_cpu_level_runs((pt_cpu_level)l)) return (pt_cpu_level)l;
  return PT_CPU_GENERIC;
}

static atomic_int chosen = -1;

pt_status pt_cpu_use(const char *name) {
  const char *from = "level "; /* how the message names the request */
  if (!name) {
    name = getenv("PTRAIN_CPU");
    from = "PTRAIN_CPU=";
  }
  pt_cpu_level l = pt_cpu_level_best();
  if (name && *name && strcmp(name, "auto") != 0) {
    int found = -1;
    for (int i = 0; i < PT_CPU_LEVELS; i++)
      if (strcmp(name, names[i]) == 0) found = i;
    if (found < 0) return pt_fail(PT_ERR_ARG, "%s%s: unknown level; expected generic, avx2, avx512 or auto", from, name);
    l = (pt_cpu_level)found;
    if (!pt_cpu_level_built(l))
      return pt_fail(PT_ERR_ARG, "%s%s: this build has no %s kernels (not an x86-64 build); use generic", from, name,
                     name);
    if (!pt_cpu_level_runs(l)) {
      char have[256];
      pt_cpu_features(have, sizeof have);
      return pt_fail(PT_ERR_ARG, "%s%s: this CPU (%s) cannot run %s kernels; it has: %s (best level: %s)", from, name,
                     pt_cpu_model(), name, have, pt_cpu_level_name(pt_cpu_level_best()));
    }
  }
  pt_cpu_set_table(table_of(l));
  atomic_store(&chosen, (int)l);
  return PT_OK;
}

pt_status pt_cpu_check_env(void) {
  const char *e = getenv("PTRAIN_CPU");
  return e && *e ? pt_cpu_use(NULL) : PT_OK;
}

pt_cpu_level pt_cpu_level_current(void) {
  int l = atomic_load(&chosen);
  if (l >= 0) return (pt_cpu_level)l;
  /* a bad PTRAIN_CPU is reported where the program starts (pt_cpu_use);
   * a kernel called before that runs at the best level */
  if (pt_cpu_use(NULL) != PT_OK) {
    pt_cpu_set_table(table_of(pt_cpu_level_best()));
    atomic_store(&chosen, (int)pt_cpu_level_best());
  }
  return (pt_cpu_level)atomic_load(&chosen);
}

const char *pt_cpu_model(void) {
  static char model[128];
  static atomic_int done;
  if (atomic_load(&done)) return model;
  char m[128] = "";
#if defined(__x86_64__) && defined(PT_ISA_X86)
  unsigned r[12];
  if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
    for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    memcpy(m, r, sizeof r);
    m[sizeof r] = '\0';
  }
#else
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (colon && (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0)) {
      snprintf(m, sizeof m, "%s", colon + 2);
      break;
    }
  }
  if (f) fclose(f);
#endif
  /* trim the brand string's padding and the line's end */
  char *s = m;
  while (*s == ' ') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\n')) s[--n] = '\0';
  snprintf(model, sizeof model, "%s", n ? s : "unknown CPU");
  atomic_store(&done, 1);
  return model;
}

void pt_cpu_features(char *buf, size_t size) {
  if (!size) return;
  buf[0] = '\0';
#ifdef PT_ISA_X86
  static const char *const feats[] = {"sse2", "sse4.2", "avx", "avx2", "fma", "bmi2", "avx512f", "avx512bw",
                                      "avx512dq", "avx512vl", "avx512_bf16", "amx-tile"};
  __builtin_cpu_init();
  size_t at = 0;
  for (size_t i = 0; i < sizeof feats / sizeof *feats; i++) {
    int has = 0;
    /* __builtin_cpu_supports takes string literals only */
    switch (i) {
    case 0: has = __builtin_cpu_supports("sse2"); break;
    case 1: has = __builtin_cpu_supports("sse4.2"); break;
    case 2: has = __builtin_cpu_supports("avx"); break;
    case 3: has = __builtin_cpu_supports("avx2"); break;
    case 4: has = __builtin_cpu_supports("fma"); break;
    case 5: has = __builtin_cpu_supports("bmi2"); break;
    case 6: has = __builtin_cpu_supports("avx512f"); break;
    case 7: has = __builtin_cpu_supports("avx512bw"); break;
    case 8: has = __builtin_cpu_supports("avx512dq"); break;
    case 9: has = __builtin_cpu_supports("avx512vl"); break;
#ifndef __clang__ /* clang 14 knows neither name */
    case 10: has = __builtin_cpu_supports("avx512bf16"); break;
    case 11: has = __builtin_cpu_supports("amx-tile"); break;
#endif
    }
    if (has && at + strlen(feats[i]) + 2 < size) at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? " " : "", feats[i]);
  }
  if (!at) snprintf(buf, size, "none of SSE2 to AVX-512");
#else
#if defined(__aarch64__)
  snprintf(buf, size, "neon (the aarch64 baseline)");
#else
  snprintf(buf, size, "no x86 vector extensions (not an x86-64 build)");
#endif
#endif
}
