/* A full disk for a test without mounting one: file_size_limit caps the
 * size any file of the process may grow to (RLIMIT_FSIZE), so that a write
 * past it fails part-way as on a full disk; file_size_unlimit puts the cap
 * back, and as a cmocka teardown does so even after an assertion jumped
 * out of the test. Included once by each test file that needs it. */
#ifndef PT_TESTS_FILE_SIZE_LIMIT_H
#define PT_TESTS_FILE_SIZE_LIMIT_H

#include <signal.h>
#include <sys/resource.h>

static struct rlimit file_size_saved;
static void (*file_size_saved_xfsz)(int);
static int file_size_changed;

/* Returns setrlimit's result. */
static int file_size_limit(rlim_t bytes) {
  if (getrlimit(RLIMIT_FSIZE, &file_size_saved)) return -1;
  struct rlimit lim = file_size_saved;
  lim.rlim_cur = bytes;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < lim.rlim_cur) lim.rlim_cur = lim.rlim_max;
  /* Without ignoring SIGXFSZ the kernel would kill the test instead of
   * failing the write with EFBIG. */
  file_size_saved_xfsz = signal(SIGXFSZ, SIG_IGN);
  file_size_changed = 1;
  return setrlimit(RLIMIT_FSIZE, &lim);
}

static int file_size_unlimit(void **state) {
  (void)state;
  if (!file_size_changed) return 0;
  file_size_changed = 0;
  signal(SIGXFSZ, file_size_saved_xfsz);
  return setrlimit(RLIMIT_FSIZE, &file_size_saved);
}

#endif
