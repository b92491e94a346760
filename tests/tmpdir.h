/* A scratch directory for a cmocka test group: tmpdir_setup makes a fresh
 * one under /tmp, tmpdir_teardown removes it with everything in it. Pass
 * them to cmocka_run_group_tests; the tests write under tmpdir. Included
 * once by each test file that needs it. */
#ifndef PT_TESTS_TMPDIR_H
#define PT_TESTS_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static int tmpdir_rm_entry(const char *path, const struct stat *sb, int type, struct FTW *f) {
  (void)sb;
  (void)type;
  (void)f;
  return remove(path);
}

static int tmpdir_setup(void **state) {
  (void)state;
  strcpy(tmpdir, "/tmp/ptrain-test-XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int tmpdir_teardown(void **state) {
  (void)state;
  return nftw(tmpdir, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
