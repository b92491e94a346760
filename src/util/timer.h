/* Monotonic wall-clock time, for throughput and profiles. */
#ifndef PT_UTIL_TIMER_H
#define PT_UTIL_TIMER_H
#include <time.h>
static inline double pt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif
