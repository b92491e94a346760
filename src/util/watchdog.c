#include "util/watchdog.h"

#include "util/deadline.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *watch(void *arg) {
  pt_watchdog *w = arg;
  const struct timespec until = pt_deadline_in(w->seconds);
  pthread_mutex_lock(&w->mu);
  int rc = 0;
  while (!w->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
  const int fired = !w->done;
  pthread_mutex_unlock(&w->mu);
  if (fired) {
    /* write(), not stdio: the waiting thread may hold stderr's lock, in a
     * write that a launcher no longer reading its pipe never lets end. */
    const size_t len = strlen(w->why);
    w->why[len] = '\n';
    ssize_t wr = write(STDERR_FILENO, w->why, len + 1);
    (void)wr;
    _exit(1); /* exit() would run atexit handlers, MPI_Finalize among them: the very wait */
  }
  return NULL;
}

void pt_watchdog_start(pt_watchdog *w, double seconds, const char *why) {
  w->done = 0;
  w->seconds = seconds;
  snprintf(w->why, sizeof w->why, "%s", why);
  pthread_mutex_init(&w->mu, NULL);
  pt_cond_init_monotonic(&w->cv);
  w->started = pthread_create(&w->thread, NULL, watch, w) == 0;
}

void pt_watchdog_stop(pt_watchdog *w) {
  if (w->started) {
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
  }
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}
