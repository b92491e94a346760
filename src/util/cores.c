/* The default thread count follows the CPUs a process may use, not those
 * the machine has: under Slurm, HTCondor or taskset a job on a large node
 * is given a few of its cores, and one thread per online core would
 * oversubscribe them (each thread of a pool waits for the slowest). */
#include "util/cores.h"

#include <sched.h>
#include <unistd.h>

int pt_cores_usable(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n >= 1) return n;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 1 ? (int)n : 1;
}
