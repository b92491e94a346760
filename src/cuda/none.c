/* src/cuda/device.h for a build without CUDA (no toolkit found, or
 * -DPT_WITH_CUDA=OFF): every question gets the same answer, so callers keep
 * one code path. Compiled only into such builds; see CMakeLists.txt. */
#include <stdio.h>

#include "cuda/device.h"
#include "ops/backend.h"

static const char built_without[] =
    "built without CUDA; install the CUDA toolkit and rebuild";

int pt_cuda_built(void) { return 0; }

pt_status pt_cuda_device_count(int *n, char *why, size_t why_size) {
  if (!n) return pt_fail(PT_ERR_ARG, "pt_cuda_device_count: n is NULL");
  *n = 0;
  if (why && why_size) snprintf(why, why_size, "%s", built_without);
  return PT_OK;
}

pt_status pt_cuda_device_info(int device, pt_cuda_device *out) {
  (void)out;
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s", device, built_without);
}

pt_status pt_cuda_selftest(int device) {
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s", device, built_without);
}

pt_status pt_cuda_version_info(pt_cuda_versions *out) {
  (void)out;
  return pt_fail(PT_ERR_DEVICE, "%s", built_without);
}

const pt_backend *pt_backend_cuda(void) {
  pt_fail(PT_ERR_DEVICE, "%s", built_without);
  return NULL;
}

pt_status pt_cuda_device_pci_bus_id(int device, char *buf, size_t size) {
  if (buf && size) buf[0] = '\0';
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s", device, built_without);
}

pt_status pt_cuda_device_uuid(int device, unsigned char uuid[16]) {
  (void)uuid;
  return pt_fail(PT_ERR_DEVICE, "cuda:%d: %s", device, built_without);
}
