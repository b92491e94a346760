/* Deadlines for timed waits on condition variables, on the monotonic clock
 * (a wall-clock step, NTP's, would move a deadline on CLOCK_REALTIME). */
#ifndef PT_UTIL_DEADLINE_H
#define PT_UTIL_DEADLINE_H
#include <pthread.h>
#include <time.h>

/* A condition variable whose timed waits take monotonic deadlines. */
static inline void pt_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

/* t moved on by s seconds (s >= 0, fractions too). */
static inline void pt_timespec_add(struct timespec *t, double s) {
  const time_t whole = (time_t)s;
  t->tv_sec += whole;
  t->tv_nsec += (long)((s - (double)whole) * 1e9);
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec++;
    t->tv_nsec -= 1000000000L;
  }
}

/* The monotonic time s seconds from now; s of 0 or less, or past about 34
 * years, waits (practically) for ever. */
static inline struct timespec pt_deadline_in(double s) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  const double max = (double)((time_t)1 << 30);
  pt_timespec_add(&t, s > 0 && s < max ? s : max);
  return t;
}
#endif
