/* CUDA devices: whether this build has CUDA, which GPUs the machine offers,
 * and whether one of them actually runs code.
 *
 * The same header serves CPU-only builds (src/cuda/none.c answers "built
 * without CUDA"), so callers such as `ptrain info` need no #ifdefs. Nothing
 * here uses CUDA types, so C code includes it without the toolkit's headers.
 *
 * A machine without a usable GPU is a normal state, not an error:
 * pt_cuda_device_count reports 0 devices and says why, so a CPU-only run
 * on a laptop or CI container never fails for lack of a driver.
 */
#ifndef PT_CUDA_DEVICE_H
#define PT_CUDA_DEVICE_H

#include <stddef.h>

#include "util/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char name[256];
  size_t total_memory;  /* bytes */
  int cc_major, cc_minor;  /* compute capability */
  int multiprocessors;
} pt_cuda_device;

/* Version strings ("13.0", "9.10.2"); empty where the piece is absent (no
 * driver installed, or built without cuDNN or NCCL). */
typedef struct {
  char runtime[32];
  char driver[32];  /* the CUDA version the installed driver supports */
  char cublas[32];
  char cudnn[32];
  char nccl[32];
} pt_cuda_versions;

/* 1 when this build was compiled with CUDA, else 0. */
int pt_cuda_built(void);

/* The number of usable devices. Fails only on a bad argument: when the driver
 * or runtime cannot give devices (none installed, too old, none present,
 * hidden by CUDA_VISIBLE_DEVICES, or built without CUDA), *n is 0 and `why`
 * (when not NULL) says why, in words a user can act on. */
pt_status pt_cuda_device_count(int *n, char *why, size_t why_size);

pt_status pt_cuda_device_info(int device, pt_cuda_device *out);

/* Copies a buffer to the device, transforms it with a kernel and checks every
 * element on the way back: the proof that a device is usable, beyond the
 * driver merely listing it. */
pt_status pt_cuda_selftest(int device);

/* Never fails for a missing driver; only for a built-without-CUDA build. */
pt_status pt_cuda_version_info(pt_cuda_versions *out);

/* The device's PCI address as "0000:3B:00.0" (domain:bus:device.function),
 * which names the same GPU to NVML and nvidia-smi whatever
 * CUDA_VISIBLE_DEVICES renumbered; size must be 13 or more. */
pt_status pt_cuda_device_pci_bus_id(int device, char *buf, size_t size);
/* The GPU's 16-byte UUID (nvidia-smi shows it as GPU-xxxxxxxx-...): equal
 * for two ordinals, in one process or two, exactly when they are the same
 * physical GPU (or MIG instance). */
pt_status pt_cuda_device_uuid(int device, unsigned char uuid[16]);

#ifdef __cplusplus
}
#endif

#endif
