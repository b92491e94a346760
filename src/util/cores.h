/* How many CPUs this process may run on. */
#ifndef PT_UTIL_CORES_H
#define PT_UTIL_CORES_H

/* The CPUs of the process's affinity mask (taskset, a batch system's
 * cgroup cpuset, mpirun's binding), else those online; at least 1. */
int pt_cores_usable(void);

#endif
