/* The NVML sampler: libnvidia-ml.so.1 loaded at run time, and a thread
 * that reads every GPU at a fixed interval into running statistics.
 *
 * NVML's few types are declared here rather than taken from nvml.h, which
 * the CUDA toolkit does not always ship and CPU-only builds never have;
 * the functions used are part of NVML's stable ABI (the _v2 names exist
 * since driver 319).
 */
#include "cuda/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/deadline.h"

typedef int nvml_return;                 /* nvmlReturn_t; 0 is NVML_SUCCESS */
typedef struct nvml_device_st *nvml_device; /* nvmlDevice_t */
typedef struct {
  unsigned int gpu, memory;
} nvml_utilization; /* nvmlUtilization_t */
typedef struct {
  unsigned long long total, free, used;
} nvml_memory; /* nvmlMemory_t (version 1) */
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvml_memory_v2; /* nvmlMemory_v2_t */
/* NVML_STRUCT_VERSION(Memory, 2): the struct's size, and the version in the top byte. */
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvml_memory_v2) | (2u << 24)))

#define NVML_LIBRARY "libnvidia-ml.so.1"
#define MAX_GPUS 256

typedef struct {
  nvml_return (*init)(void);
  nvml_return (*shutdown)(void);
  const char *(*error_string)(nvml_return);
  nvml_return (*by_bus_id)(const char *, nvml_device *);
  nvml_return (*by_index)(unsigned int, nvml_device *);
  nvml_return (*utilization)(nvml_device, nvml_utilization *);
  nvml_return (*memory)(nvml_device, nvml_memory *);
  nvml_return (*memory_v2)(nvml_device, nvml_memory_v2 *); /* NULL before driver 510 */
} nvml_api;

struct pt_nvml {
  void *lib;
  nvml_api api;
  int n;
  nvml_device *dev;
  double interval_s;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  pt_gpu_stats *stats; /* (n), under mu */
};

void pt_gpu_stats_reset(pt_gpu_stats *s) {
  memset(s, 0, sizeof *s);
  s->util_pct = -1;
  s->util_mean_pct = -1;
}

void pt_gpu_stats_add(pt_gpu_stats *s, const pt_gpu_sample *x) {
  s->samples++;
  if (!x || (!x->has_util && !x->has_mem)) {
    s->failed++;
    return;
  }
  if (x->has_util) {
    s->util_samples++;
    s->util_pct = x->util_pct;
    /* The running form of the mean: no sum to overflow or lose precision
     * over a long run. */
    if (s->util_samples == 1)
      s->util_mean_pct = x->util_pct;
    else
      s->util_mean_pct += ((double)x->util_pct - s->util_mean_pct) / (double)s->util_samples;
  }
  if (x->has_mem) {
    s->mem_used = x->mem_used;
    s->mem_total = x->mem_total;
    if (x->mem_used > s->mem_peak) s->mem_peak = x->mem_used;
  }
}

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t why_size, const char *fmt, ...) {
  if (!why || !why_size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, why_size, fmt, ap);
  va_end(ap);
}

/* dlsym gives a data pointer; copying its bytes is POSIX's sanctioned way to
 * a function pointer without the cast ISO C leaves undefined. */
static int resolve(void *lib, const char *name, void *fp, size_t size) {
  void *p = dlsym(lib, name);
  if (!p) return 0;
  memcpy(fp, &p, size);
  return 1;
}

static const char *nvml_error(const pt_nvml *nv, nvml_return r) {
  const char *s = nv->api.error_string ? nv->api.error_string(r) : NULL;
  return s ? s : "unknown NVML error";
}

static void read_one(pt_nvml *nv, int i, pt_gpu_sample *x) {
  memset(x, 0, sizeof *x);
  nvml_utilization u;
  if (nv->api.utilization(nv->dev[i], &u) == 0) {
    x->has_util = 1;
    x->util_pct = u.gpu;
  }
  /* Version 2 leaves out what the driver reserves for itself (about
   * 500 MiB on an H100), as nvidia-smi's memory.used does; version 1
   * counts it as used. */
  nvml_memory_v2 m2 = {.version = NVML_MEMORY_V2};
  if (nv->api.memory_v2 && nv->api.memory_v2(nv->dev[i], &m2) == 0) {
    x->has_mem = 1;
    x->mem_used = m2.used;
    x->mem_total = m2.total;
    return;
  }
  nvml_memory m;
  if (nv->api.memory(nv->dev[i], &m) == 0) {
    x->has_mem = 1;
    x->mem_used = m.used;
    x->mem_total = m.total;
  }
}

/* NVML is read outside the lock: a reading can take a millisecond, and
 * pt_nvml_read must not wait for it. */
static void sample_all(pt_nvml *nv) {
  pt_gpu_sample x[MAX_GPUS];
  for (int i = 0; i < nv->n; i++) read_one(nv, i, &x[i]);
  pthread_mutex_lock(&nv->mu);
  for (int i = 0; i < nv->n; i++) pt_gpu_stats_add(&nv->stats[i], &x[i]);
  pthread_mutex_unlock(&nv->mu);
}

/* Deadlines advance by the interval from the previous one rather than from
 * the end of a reading, so the samples stay evenly spaced and the mean
 * weights time evenly. */
static void *sampler(void *arg) {
  pt_nvml *nv = arg;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (;;) {
    pt_timespec_add(&next, nv->interval_s);
    pthread_mutex_lock(&nv->mu);
    int r = 0;
    while (!nv->stop && r != ETIMEDOUT) r = pthread_cond_timedwait(&nv->cv, &nv->mu, &next);
    const int stop = nv->stop;
    pthread_mutex_unlock(&nv->mu);
    if (stop) break;
    sample_all(nv);
    /* After a stall (a suspended machine, a debugger), start afresh rather
     * than fire a burst of catch-up readings. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > next.tv_sec + 1) next = now;
  }
  return NULL;
}

static void unload(pt_nvml *nv) {
  if (nv->lib) {
    if (nv->api.shutdown) nv->api.shutdown();
    dlclose(nv->lib);
  }
  pthread_cond_destroy(&nv->cv);
  pthread_mutex_destroy(&nv->mu);
  free(nv->dev);
  free(nv->stats);
  free(nv);
}

pt_status pt_nvml_open_library(pt_nvml **out, const char *library, const char *const *pci_bus_ids, int n,
                               double interval_s, char *why, size_t why_size) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_nvml_open: out is NULL");
  *out = NULL;
  if (why && why_size) why[0] = '\0';
  if (!library) return pt_fail(PT_ERR_ARG, "pt_nvml_open: library is NULL");
  if (n < 1 || n > MAX_GPUS) return pt_fail(PT_ERR_ARG, "pt_nvml_open: %d GPUs, expected 1 to %d", n, MAX_GPUS);
  if (!(interval_s >= 0.001 && interval_s <= 3600))
    return pt_fail(PT_ERR_ARG, "pt_nvml_open: interval %g s, expected 0.001 to 3600", interval_s);
  for (int i = 0; pci_bus_ids && i < n; i++)
    if (!pci_bus_ids[i]) return pt_fail(PT_ERR_ARG, "pt_nvml_open: PCI bus id %d of %d is NULL", i, n);

  pt_nvml *nv = calloc(1, sizeof *nv);
  if (!nv) return pt_fail(PT_ERR_NOMEM, "out of memory opening the GPU sampler");
  nv->n = n;
  nv->interval_s = interval_s;
  pthread_mutex_init(&nv->mu, NULL);
  pt_cond_init_monotonic(&nv->cv);
  nv->dev = calloc((size_t)n, sizeof *nv->dev);
  nv->stats = calloc((size_t)n, sizeof *nv->stats);
  if (!nv->dev || !nv->stats) {
    unload(nv);
    return pt_fail(PT_ERR_NOMEM, "out of memory opening the GPU sampler");
  }

  /* RTLD_LOCAL: NVML's symbols stay out of the global namespace, where they
   * could capture a later library's lookups. */
  nv->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!nv->lib) {
    const char *e = dlerror();
    /* dlerror names the library already. */
    if (e)
      say(why, why_size, "no NVIDIA driver here (%s), so GPU use is not sampled", e);
    else
      say(why, why_size, "no NVIDIA driver here (%s not found), so GPU use is not sampled", library);
    unload(nv);
    return PT_OK;
  }
  const struct {
    const char *name;
    void *fp;
    size_t size;
  } syms[] = {
      {"nvmlInit_v2", &nv->api.init, sizeof nv->api.init},
      {"nvmlShutdown", &nv->api.shutdown, sizeof nv->api.shutdown},
      {"nvmlErrorString", &nv->api.error_string, sizeof nv->api.error_string},
      {"nvmlDeviceGetHandleByPciBusId_v2", &nv->api.by_bus_id, sizeof nv->api.by_bus_id},
      {"nvmlDeviceGetHandleByIndex_v2", &nv->api.by_index, sizeof nv->api.by_index},
      {"nvmlDeviceGetUtilizationRates", &nv->api.utilization, sizeof nv->api.utilization},
      {"nvmlDeviceGetMemoryInfo", &nv->api.memory, sizeof nv->api.memory},
  };
  for (size_t k = 0; k < sizeof syms / sizeof syms[0]; k++) {
    if (!resolve(nv->lib, syms[k].name, syms[k].fp, syms[k].size)) {
      say(why, why_size, "%s has no %s: the NVIDIA driver is too old to sample GPU use", library, syms[k].name);
      /* Not initialised, so not to be shut down. */
      nv->api.shutdown = NULL;
      unload(nv);
      return PT_OK;
    }
  }
  (void)resolve(nv->lib, "nvmlDeviceGetMemoryInfo_v2", &nv->api.memory_v2, sizeof nv->api.memory_v2);
  nvml_return r = nv->api.init();
  if (r != 0) {
    char what[160];
    snprintf(what, sizeof what, "nvmlInit failed: %s", nvml_error(nv, r));
    say(why, why_size, "%s: %s (is the NVIDIA driver loaded?)", library, what);
    nv->api.shutdown = NULL;
    unload(nv);
    return PT_OK;
  }
  for (int i = 0; i < n; i++) {
    r = pci_bus_ids ? nv->api.by_bus_id(pci_bus_ids[i], &nv->dev[i]) : nv->api.by_index((unsigned)i, &nv->dev[i]);
    if (r != 0) {
      char what[160];
      if (pci_bus_ids)
        snprintf(what, sizeof what, "no GPU at PCI bus id %s: %s", pci_bus_ids[i], nvml_error(nv, r));
      else
        snprintf(what, sizeof what, "no GPU with index %d: %s", i, nvml_error(nv, r));
      say(why, why_size, "%s: %s", library, what);
      unload(nv);
      return PT_OK;
    }
  }
  for (int i = 0; i < n; i++) pt_gpu_stats_reset(&nv->stats[i]);
  sample_all(nv);
  int e = pthread_create(&nv->thread, NULL, sampler, nv);
  if (e != 0) {
    unload(nv);
    errno = e;
    return pt_fail_errno(PT_ERR_NOMEM, "starting the GPU sampler's thread");
  }
  *out = nv;
  return PT_OK;
}

pt_status pt_nvml_open(pt_nvml **out, const char *const *pci_bus_ids, int n, double interval_s, char *why,
                       size_t why_size) {
  return pt_nvml_open_library(out, NVML_LIBRARY, pci_bus_ids, n, interval_s, why, why_size);
}

pt_status pt_nvml_read(pt_nvml *nv, int i, pt_gpu_stats *out) {
  if (!nv || !out) return pt_fail(PT_ERR_ARG, "pt_nvml_read: %s is NULL", nv ? "out" : "the sampler");
  if (i < 0 || i >= nv->n)
    return pt_fail(PT_ERR_ARG, "pt_nvml_read: GPU %d, but the sampler has GPUs 0 to %d", i, nv->n - 1);
  pthread_mutex_lock(&nv->mu);
  *out = nv->stats[i];
  pthread_mutex_unlock(&nv->mu);
  return PT_OK;
}

void pt_nvml_reset(pt_nvml *nv) {
  if (!nv) return;
  pthread_mutex_lock(&nv->mu);
  for (int i = 0; i < nv->n; i++) pt_gpu_stats_reset(&nv->stats[i]);
  pthread_mutex_unlock(&nv->mu);
}

void pt_nvml_close(pt_nvml *nv) {
  if (!nv) return;
  pthread_mutex_lock(&nv->mu);
  nv->stop = 1;
  pthread_cond_signal(&nv->cv);
  pthread_mutex_unlock(&nv->mu);
  pthread_join(nv->thread, NULL);
  unload(nv);
}
