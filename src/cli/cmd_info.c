/* ptrain info: what this build has and what this machine offers. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "cuda/device.h"
#include "data/dataset.h"
#include "ops/cpu/isa/cpu_level.h"
#include "ops/cpu/ops.h"
#include "util/cores.h"

char *openblas_get_config(void);

static void print_cuda_devices(void) {
  int n = 0;
  char why[256];
  if (pt_cuda_device_count(&n, why, sizeof why) != PT_OK || n == 0) {
    printf("  cuda: none (%s)\n", n == 0 ? why : pt_error_message());
    return;
  }
  for (int i = 0; i < n; i++) {
    pt_cuda_device d;
    if (pt_cuda_device_info(i, &d) != PT_OK) {
      printf("  cuda:%d: unusable (%s)\n", i, pt_error_message());
      continue;
    }
    printf("  cuda:%d: %s, %.1f GiB, compute capability %d.%d, %d SMs\n", i, d.name,
           (double)d.total_memory / (1024.0 * 1024.0 * 1024.0), d.cc_major, d.cc_minor,
           d.multiprocessors);
  }
}

static void print_cuda_backends(void) {
  pt_cuda_versions v;
  if (!pt_cuda_built() || pt_cuda_version_info(&v) != PT_OK) {
    printf("  CUDA: no (this build is CPU-only: rebuild with the CUDA toolkit, nvcc on PATH or in /usr/local/cuda)\n");
    printf("  cuBLAS: no\n  cuDNN: no\n  NCCL: no\n");
    return;
  }
  printf("  CUDA: yes (runtime %s, %s%s)\n", v.runtime, v.driver[0] ? "driver supports " : "",
         v.driver[0] ? v.driver : "no NVIDIA driver installed");
  printf("  cuBLAS: %s%s%s\n", v.cublas[0] ? "yes (" : "no", v.cublas, v.cublas[0] ? ")" : "");
  printf("  cuDNN: %s%s%s\n", v.cudnn[0] ? "yes (" : "no", v.cudnn, v.cudnn[0] ? ")" : "");
  printf("  NCCL: %s%s%s\n", v.nccl[0] ? "yes (" : "no", v.nccl, v.nccl[0] ? ")" : "");
}

int pt_cmd_info(int argc, char **argv) {
  int help;
  int rc = pt_args_parse("info", NULL, 0, argc, argv, 2, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain info", "Show the build, the devices and the datasets found.", NULL, 0);
    return 0;
  }
  printf("ptrain %s\n", PT_VERSION);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int usable = pt_cores_usable();
  char mine[64] = "";
  if (usable != online) snprintf(mine, sizeof mine, " (%d this process may use)", usable);
  printf("devices:\n  cpu: %s, %ld cores online%s, BLAS %s\n", pt_cpu_model(), online, mine, openblas_get_config());
  char have[256], built[64] = "";
  pt_cpu_features(have, sizeof have);
  for (int l = 0; l < PT_CPU_LEVELS; l++)
    if (pt_cpu_level_built((pt_cpu_level)l))
      snprintf(built + strlen(built), sizeof built - strlen(built), "%s%s", built[0] ? " " : "", pt_cpu_level_name((pt_cpu_level)l));
  printf("  cpu kernels: %s (best here: %s; built: %s; PTRAIN_CPU chooses one)\n  cpu features: %s\n",
         pt_cpu_level_name(pt_cpu_level_current()), pt_cpu_level_name(pt_cpu_level_best()), built, have);
  print_cuda_devices();
  printf("backends built in:\n  CPU: yes\n");
  print_cuda_backends();
  char mpi[256];
  if (pt_comm_mpi_version(mpi, sizeof mpi))
    printf("  MPI: %s (--parallel ddp available; model and pipeline stages as ranks)\n", mpi);
  else
    printf("  MPI: no (--parallel ddp needs Debian's libopenmpi-dev at build time)\n");
  printf("datasets:\n");
  const pt_dataset_kind kinds[] = {PT_DS_FASHION_MNIST, PT_DS_MNIST, PT_DS_CIFAR10};
  for (int i = 0; i < 3; i++) {
    const char *dir = pt_dataset_default_dir(kinds[i]);
    /* Every file, not the directory: a failed fetch can leave it empty,
     * or holding the files it verified before it stopped. */
    char first[64];
    const int missing = pt_dataset_missing(kinds[i], dir, first, sizeof first);
    char hint[512] = "", what[128] = "";
    if (missing) pt_dataset_fetch_hint(hint, sizeof hint, kinds[i], dir);
    if (missing == pt_dataset_files(kinds[i])) snprintf(what, sizeof what, "  (not found: ");
    else if (missing) snprintf(what, sizeof what, "  (incomplete: %s%s missing; ", first, missing > 1 ? " and more" : "");
    printf("  %-14s %s%s%s%s\n", pt_dataset_kind_name(kinds[i]), dir, what, hint, missing ? ")" : "");
  }
  return 0;
}
