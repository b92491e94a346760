/* A watchdog stopped in time lets the process go on; one that reaches its
 * deadline says its line on standard error and ends the process with
 * status 1 (run in a child, which the test waits for). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "util/watchdog.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void test_stopped_in_time(void **state) {
  (void)state;
  pt_watchdog w;
  const double t0 = now();
  pt_watchdog_start(&w, 30.0, "should not be said");
  assert_true(w.started);
  pt_watchdog_stop(&w); /* at once: the thread is woken, not left to its deadline */
  assert_true(now() - t0 < 5.0);
  /* Again, with a wait before the stop. */
  pt_watchdog_start(&w, 30.0, "should not be said");
  usleep(50000);
  pt_watchdog_stop(&w);
}

static void test_deadline_ends_the_process(void **state) {
  (void)state;
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  const double t0 = now();
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], STDERR_FILENO);
    close(fd[0]);
    pt_watchdog w;
    pt_watchdog_start(&w, 0.3, "held past the deadline");
    sleep(30); /* the call that never returns */
    _exit(0);
  }
  close(fd[1]);
  char said[128] = {0};
  size_t got = 0;
  ssize_t n;
  while (got < sizeof said - 1 && (n = read(fd[0], said + got, sizeof said - 1 - got)) > 0) got += (size_t)n;
  close(fd[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  const double took = now() - t0;
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_string_equal(said, "held past the deadline\n");
  assert_true(took >= 0.3 && took < 20.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stopped_in_time),
      cmocka_unit_test(test_deadline_ends_the_process),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
