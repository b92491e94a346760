/* A deadline for a call that may wait for ever and cannot be told to stop
 * (MPI_Init and MPI_Finalize wait for every rank, and no heartbeat runs
 * inside them). A thread of its own waits until pt_watchdog_stop or the
 * deadline; at the deadline it says why on standard error and ends the
 * process with status 1, which is all that is left to do: the launcher
 * then takes the job's other processes down.
 */
#ifndef PT_UTIL_WATCHDOG_H
#define PT_UTIL_WATCHDOG_H

#include <pthread.h>

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int done, started;
  double seconds;
  char why[320]; /* the line said at the deadline (one byte kept for its newline) */
} pt_watchdog;

/* Arms w for seconds; why is the line said if they pass. Where no thread
 * can be started, the call goes unguarded (started stays 0). */
void pt_watchdog_start(pt_watchdog *w, double seconds, const char *why);
void pt_watchdog_stop(pt_watchdog *w);

#endif
