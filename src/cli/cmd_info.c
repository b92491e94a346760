/* ptrain info: what this build has and what this machine offers. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "data/dataset.h"
#include "ops/cpu/ops.h"

char *openblas_get_config(void);

int pt_cmd_info(int argc, char **argv) {
  int help;
  int rc = pt_args_parse("info", NULL, 0, argc, argv, 2, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain info", "Show the build, the devices and the datasets found.", NULL, 0);
    return 0;
  }
  printf("ptrain %s\n", PT_VERSION);
  printf("devices:\n  cpu: %ld cores online, BLAS %s\n", sysconf(_SC_NPROCESSORS_ONLN), openblas_get_config());
  printf("backends built in:\n  CPU: yes\n  CUDA: no (this build is CPU-only)\n  NCCL: no\n");
  char mpi[256];
  if (pt_comm_mpi_version(mpi, sizeof mpi))
    printf("  MPI: %s (--parallel ddp available; model and pipeline stages as ranks)\n", mpi);
  else
    printf("  MPI: no (--parallel ddp needs Debian's libopenmpi-dev at build time)\n");
  printf("datasets:\n");
  const pt_dataset_kind kinds[] = {PT_DS_FASHION_MNIST, PT_DS_MNIST, PT_DS_CIFAR10};
  for (int i = 0; i < 3; i++) {
    const char *dir = pt_dataset_default_dir(kinds[i]);
    struct stat st;
    int found = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    printf("  %-14s %s%s\n", pt_dataset_kind_name(kinds[i]), dir,
           found ? "" : "  (not found: ptrain data fetch NAME --dir DIR)");
  }
  return 0;
}
