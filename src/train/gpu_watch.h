/* What users watch nvidia-smi for, inside the run: each GPU's utilisation
 * and memory, sampled through NVML while training, shown in the progress
 * line, written to the metrics, and summed up (mean utilisation, peak
 * memory) at the end.
 *
 * A process watches its own GPUs: all of a dp run's, one under ddp (rank
 * 0's is the one reported). Where NVML cannot be used (no driver library,
 * a MIG slice without utilisation) the run goes on without it and says so
 * once. NVML's figures are the whole GPU's, other processes included.
 */
#ifndef PT_TRAIN_GPU_WATCH_H
#define PT_TRAIN_GPU_WATCH_H

#include <stdio.h>

#include "cuda/nvml.h"
#include "io/metrics.h"

#define PT_GPU_WATCH_MAX 16

typedef struct {
  pt_nvml *nv;  /* NULL: nothing to report */
  int n;
  int devices[PT_GPU_WATCH_MAX]; /* CUDA ordinals */
  double since;                  /* Unix time when sampling began */
} pt_gpu_watch;

/* Starts sampling devices[0..n) (the first PT_GPU_WATCH_MAX); without NVML,
 * g->nv stays NULL and note (when not NULL) says why. */
pt_status pt_gpu_watch_open(pt_gpu_watch *g, const int *devices, int n, FILE *note);
/* "gpu 87% 3.1/80 GiB" (one GPU) or "gpu 87% 85% mem 3.1 3.0 GiB"; "" without NVML. */
void pt_gpu_watch_line(const pt_gpu_watch *g, char *buf, size_t size);
/* gpu_util_pct (mean over the GPUs of their mean since the run started)
 * and gpu_mem_peak_mib (the highest of their peaks) into the open metrics
 * line, with the window they cover as Unix times, gpu_since and
 * gpu_until: what an nvidia-smi sampled beside the run must be averaged
 * over to be compared with them. */
void pt_gpu_watch_metrics(const pt_gpu_watch *g, pt_metrics *mt);
/* One line per GPU: mean utilisation and peak memory over the whole run. */
void pt_gpu_watch_summary(const pt_gpu_watch *g, FILE *out);
void pt_gpu_watch_close(pt_gpu_watch *g);

#endif
