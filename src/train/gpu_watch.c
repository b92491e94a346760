#include "train/gpu_watch.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "cuda/device.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The wall clock, not pt_now()'s monotonic one: other tools' timestamps
 * are on it. */
static double unix_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

pt_status pt_gpu_watch_open(pt_gpu_watch *g, const int *devices, int n, FILE *note) {
  memset(g, 0, sizeof *g);
  g->n = n < PT_GPU_WATCH_MAX ? n : PT_GPU_WATCH_MAX;
  char ids[PT_GPU_WATCH_MAX][32];
  const char *idp[PT_GPU_WATCH_MAX];
  for (int i = 0; i < g->n; i++) {
    g->devices[i] = devices[i];
    PT_TRY(pt_cuda_device_pci_bus_id(devices[i], ids[i], sizeof ids[i]));
    idp[i] = ids[i];
  }
  char why[256] = "";
  /* A tenth of a second: finer than NVML's own sample period on most GPUs. */
  g->since = unix_now();
  PT_TRY(pt_nvml_open(&g->nv, idp, g->n, 0.1, why, sizeof why));
  if (!g->nv && note) fprintf(note, "note: no GPU utilisation or memory figures: %s\n", why);
  return PT_OK;
}

void pt_gpu_watch_line(const pt_gpu_watch *g, char *buf, size_t size) {
  buf[0] = 0;
  if (!g->nv || size == 0) return;
  size_t at = 0;
  pt_gpu_stats s[PT_GPU_WATCH_MAX];
  for (int i = 0; i < g->n; i++)
    if (pt_nvml_read(g->nv, i, &s[i]) != PT_OK) return;
  at += (size_t)snprintf(buf + at, size - at, "gpu");
  for (int i = 0; i < g->n && at < size; i++) {
    if (s[i].util_pct >= 0) at += (size_t)snprintf(buf + at, size - at, " %.0f%%", s[i].util_pct);
    else at += (size_t)snprintf(buf + at, size - at, " -");
  }
  if (g->n == 1 && at < size)
    snprintf(buf + at, size - at, " %.1f/%.0f GiB", s[0].mem_used / GIB, s[0].mem_total / GIB);
  else if (at < size) {
    at += (size_t)snprintf(buf + at, size - at, " mem");
    for (int i = 0; i < g->n && at < size; i++) at += (size_t)snprintf(buf + at, size - at, " %.1f", s[i].mem_used / GIB);
    if (at < size) snprintf(buf + at, size - at, " GiB");
  }
}

void pt_gpu_watch_metrics(const pt_gpu_watch *g, pt_metrics *mt) {
  if (!g->nv) return;
  double util = 0.0;
  int with_util = 0;
  uint64_t peak = 0;
  for (int i = 0; i < g->n; i++) {
    pt_gpu_stats s;
    if (pt_nvml_read(g->nv, i, &s) != PT_OK) return;
    if (s.util_mean_pct >= 0) {
      util += s.util_mean_pct;
      with_util++;
    }
    if (s.mem_peak > peak) peak = s.mem_peak;
  }
  pt_metrics_int(mt, "gpus", g->n);
  pt_metrics_num(mt, "gpu_util_pct", with_util ? util / with_util : NAN);
  pt_metrics_num(mt, "gpu_mem_peak_mib", peak / (1024.0 * 1024.0));
  pt_metrics_num(mt, "gpu_since", g->since);
  pt_metrics_num(mt, "gpu_until", unix_now());
}

void pt_gpu_watch_summary(const pt_gpu_watch *g, FILE *out) {
  if (!g->nv || !out) return;
  for (int i = 0; i < g->n; i++) {
    pt_gpu_stats s;
    if (pt_nvml_read(g->nv, i, &s) != PT_OK) return;
    pt_cuda_device d;
    const char *name = pt_cuda_device_info(g->devices[i], &d) == PT_OK ? d.name : "GPU";
    fprintf(out, "cuda:%d (%s): mean utilisation ", g->devices[i], name);
    if (s.util_mean_pct >= 0) fprintf(out, "%.0f%%", s.util_mean_pct);
    else fprintf(out, "not reported");
    fprintf(out, " over %ld samples, peak memory %.2f of %.0f GiB (the whole GPU's)\n", s.samples,
            s.mem_peak / GIB, s.mem_total / GIB);
  }
}

void pt_gpu_watch_close(pt_gpu_watch *g) {
  pt_nvml_close(g->nv);
  memset(g, 0, sizeof *g);
}
