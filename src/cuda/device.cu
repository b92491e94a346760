/* Device discovery and the self-test kernel, on the CUDA runtime API. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda/device.h"

extern "C" int pt_cuda_built(void) { return 1; }

/* A failed call leaves its error pending for the next cudaGetLastError; reading
 * it here keeps a probe's failure from being blamed on a later, healthy call. */
static pt_status device_fail(cudaError_t e, int device, const char *what) {
  (void)cudaGetLastError();
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s: %s (%s)", device, what, cudaGetErrorName(e),
                 cudaGetErrorString(e));
}

/* The runtime's own messages ("CUDA driver version is insufficient for CUDA
 * runtime version") name neither versions nor a remedy. */
static void explain(cudaError_t e, char *why, size_t why_size) {
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  if (e == cudaErrorInsufficientDriver && driver == 0)
    snprintf(why, why_size, "no NVIDIA driver found: libcuda.so.1 is not installed");
  else if (e == cudaErrorInsufficientDriver)
    snprintf(why, why_size,
             "the NVIDIA driver supports CUDA %d.%d, this build needs %d.%d: update the driver",
             driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  else if (e == cudaErrorNoDevice && visible)
    snprintf(why, why_size, "no CUDA device visible (CUDA_VISIBLE_DEVICES=\"%s\")", visible);
  else if (e == cudaErrorMemoryAllocation)
    snprintf(why, why_size, "the CUDA driver could not map its memory (under AddressSanitizer, "
                            "ASAN_OPTIONS=protect_shadow_gap=0 lets it)");
  else if (e == cudaErrorNoDevice || e == cudaSuccess)
    snprintf(why, why_size, "no CUDA device found");
  else
    snprintf(why, why_size, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}

extern "C" pt_status pt_cuda_device_count(int *n, char *why, size_t why_size) {
  if (!n) return pt_fail(PT_ERR_ARG, "pt_cuda_device_count: n is NULL");
  if (why && why_size) why[0] = '\0';
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (count == 0 && why && why_size) explain(e, why, why_size);
  *n = count;
  return PT_OK;
}

static pt_status check_index(int device) {
  int n;
  char why[256];
  PT_TRY(pt_cuda_device_count(&n, why, sizeof why));
  if (n == 0) return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s", device, why);
  if (device < 0 || device >= n)
    return pt_fail(PT_ERR_ARG, "cuda:%d: no such device (this machine has cuda:0 to cuda:%d)",
                   device, n - 1);
  return PT_OK;
}

extern "C" pt_status pt_cuda_device_info(int device, pt_cuda_device *out) {
  if (!out) return pt_fail(PT_ERR_ARG, "pt_cuda_device_info: out is NULL");
  PT_TRY(check_index(device));
  cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return device_fail(e, device, "reading its properties");
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", p.name);
  out->total_memory = p.totalGlobalMem;
  out->cc_major = p.major;
  out->cc_minor = p.minor;
  out->multiprocessors = p.multiProcessorCount;
  return PT_OK;
}

/* XOR with a non-zero constant changes every element, so a kernel that never
 * ran cannot pass; distinct inputs catch elements written to the wrong place. */
static const uint32_t selftest_mask = 0x9e3779b9u;

static uint32_t selftest_input(size_t i) { return (uint32_t)i * 2654435761u; }

static __global__ void selftest_kernel(uint32_t *buf, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] ^= selftest_mask;
}

extern "C" pt_status pt_cuda_selftest(int device) {
  PT_TRY(check_index(device));
  /* 16 MiB: many blocks, and transfers large enough to cross pages. */
  const size_t n = (size_t)1 << 22;
  const unsigned threads = 256;
  const unsigned blocks = (unsigned)((n + threads - 1) / threads);
  uint32_t *host = NULL, *dev = NULL;
  int previous = 0;
  cudaError_t e;
  pt_status st = PT_OK;

  (void)cudaGetDevice(&previous);
  if ((e = cudaSetDevice(device)) != cudaSuccess) return device_fail(e, device, "selecting it");
  host = (uint32_t *)pt_malloc(n * sizeof *host);
  if (!host) {
    st = PT_ERR_NOMEM;
    goto done;
  }
  for (size_t i = 0; i < n; i++) host[i] = selftest_input(i);
  if ((e = cudaMalloc((void **)&dev, n * sizeof *dev)) != cudaSuccess) {
    st = device_fail(e, device, "allocating 16 MiB");
    goto done;
  }
  if ((e = cudaMemcpy(dev, host, n * sizeof *host, cudaMemcpyHostToDevice)) != cudaSuccess) {
    st = device_fail(e, device, "copying to the device");
    goto done;
  }
  selftest_kernel<<<blocks, threads>>>(dev, n);
  /* A launch error (no kernel image for this GPU's architecture) shows at
   * launch; a fault while running shows only at the synchronize. */
  if ((e = cudaGetLastError()) != cudaSuccess ||
      (e = cudaDeviceSynchronize()) != cudaSuccess) {
    st = device_fail(e, device, "running the self-test kernel");
    goto done;
  }
  if ((e = cudaMemcpy(host, dev, n * sizeof *host, cudaMemcpyDeviceToHost)) != cudaSuccess) {
    st = device_fail(e, device, "copying back from the device");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t want = selftest_input(i) ^ selftest_mask;
    if (host[i] != want) {
      st = pt_fail(PT_ERR_DEVICE, "cuda:%d: self-test: element %zu is 0x%08x, expected 0x%08x",
                   device, i, (unsigned)host[i], (unsigned)want);
      goto done;
    }
  }
done:
  if (dev) (void)cudaFree(dev);
  free(host);
  (void)cudaSetDevice(previous);
  return st;
}

extern "C" pt_status pt_cuda_device_pci_bus_id(int device, char *buf, size_t size) {
  if (!buf || size < 13)
    return pt_fail(PT_ERR_ARG, "pt_cuda_device_pci_bus_id: expected a buffer of 13 bytes or more");
  buf[0] = '\0';
  PT_TRY(check_index(device));
  cudaError_t e = cudaDeviceGetPCIBusId(buf, size > 64 ? 64 : (int)size, device);
  if (e != cudaSuccess) return device_fail(e, device, "reading its PCI bus id");
  return PT_OK;
}

extern "C" pt_status pt_cuda_device_uuid(int device, unsigned char uuid[16]) {
  if (!uuid) return pt_fail(PT_ERR_ARG, "pt_cuda_device_uuid: uuid is NULL");
  PT_TRY(check_index(device));
  cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return device_fail(e, device, "reading its UUID");
  memcpy(uuid, p.uuid.bytes, 16);
  return PT_OK;
}
