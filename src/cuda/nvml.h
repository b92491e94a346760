/* GPU utilisation and memory, sampled in the background through NVML.
 *
 * NVML (libnvidia-ml.so.1) comes with the NVIDIA driver, not with the CUDA
 * toolkit, so it is loaded with dlopen when a sampler is opened: ptrain
 * builds, links and runs on machines without a driver, and there the
 * sampler is simply absent (pt_nvml_open gives NULL and says why), which is
 * not an error. CPU-only builds have it too, since nothing here needs CUDA.
 *
 * GPUs are named by PCI bus id (pt_cuda_device_pci_bus_id), because NVML
 * numbers every GPU of the machine while CUDA numbers only those that
 * CUDA_VISIBLE_DEVICES leaves visible, in its own order: the bus id is what
 * both agree on.
 *
 * What NVML reports is the whole GPU's, not this process's: utilisation is
 * the share of NVML's last sample period (between 1/6 s and 1 s, by GPU)
 * in which any kernel ran, and memory used counts every process on the GPU
 * and the driver's own reservation.
 */
#ifndef PT_CUDA_NVML_H
#define PT_CUDA_NVML_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One reading of one GPU; a part NVML could not give is marked absent (a
 * MIG instance, for one, has no utilisation). */
typedef struct {
  int has_util;
  unsigned util_pct;
  int has_mem;
  uint64_t mem_used, mem_total; /* bytes */
} pt_gpu_sample;

/* What a sampler has seen of one GPU since it was opened or reset. */
typedef struct {
  long samples;         /* readings taken, whole or partial */
  long failed;          /* readings that gave nothing (NVML returned an error) */
  long util_samples;    /* readings with a utilisation */
  double util_pct;      /* the last utilisation, % (-1: none yet) */
  double util_mean_pct; /* mean over util_samples (-1: none yet) */
  uint64_t mem_used;    /* the last reading, bytes */
  uint64_t mem_peak;    /* the highest reading */
  uint64_t mem_total;
} pt_gpu_stats;

/* The accumulation, kept apart from NVML so that it can be tested anywhere. */
void pt_gpu_stats_reset(pt_gpu_stats *s);
/* x NULL counts a failed reading. */
void pt_gpu_stats_add(pt_gpu_stats *s, const pt_gpu_sample *x);

typedef struct pt_nvml pt_nvml;

/* Starts sampling n GPUs every interval_s seconds (0.1 is a good choice;
 * 0.001 to 3600 accepted) on a thread of its own, after one reading taken
 * before returning. pci_bus_ids[i] names GPU i ("0000:3B:00.0"); NULL
 * takes NVML's indices 0..n-1 instead, which match CUDA's ordinals only
 * without CUDA_VISIBLE_DEVICES and with CUDA_DEVICE_ORDER=PCI_BUS_ID.
 * Fails only on bad arguments or when no thread can be started. Where NVML
 * cannot be used (no driver, too old, a GPU it does not know), *out is
 * NULL, the result PT_OK, and why (when not NULL) says why, naming
 * libnvidia-ml.so.1. */
pt_status pt_nvml_open(pt_nvml **out, const char *const *pci_bus_ids, int n, double interval_s, char *why,
                       size_t why_size);
/* pt_nvml_open with another library than libnvidia-ml.so.1, for tests. */
pt_status pt_nvml_open_library(pt_nvml **out, const char *library, const char *const *pci_bus_ids, int n,
                               double interval_s, char *why, size_t why_size);
/* GPU i's statistics so far (i as in pci_bus_ids). */
pt_status pt_nvml_read(pt_nvml *nv, int i, pt_gpu_stats *out);
/* Starts every GPU's mean and peak afresh, e.g. at the start of an epoch. */
void pt_nvml_reset(pt_nvml *nv);
/* Stops the thread (without waiting out the interval) and unloads NVML; NULL is fine. */
void pt_nvml_close(pt_nvml *nv);

#ifdef __cplusplus
}
#endif

#endif
