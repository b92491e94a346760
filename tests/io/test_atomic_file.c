/* Atomic file replacement, including the failure that matters most in
 * practice: the disk filling up while a checkpoint is written.
 *
 * A full disk is simulated two ways. A 64 KiB tmpfs gives a real ENOSPC, but
 * mounting needs root (skipped otherwise). RLIMIT_FSIZE needs no privilege and
 * makes write() fail with EFBIG part-way through, exercising the same path.
 * In both cases the old file must keep its content, no temporary file may be
 * left, and the message must name the path.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/safetensors.h"

#include "../file_size_limit.h"
#include "../tmpdir.h"
static char mnt[128];
static int mounted;


static void write_whole(const char *path, const void *buf, size_t len) {
  pt_atomic_file *h;
  if (pt_atomic_file_open(path, &h) != PT_OK) fail_msg("%s", pt_error_message());
  assert_int_equal(pt_atomic_file_write(h, buf, len), PT_OK);
  if (pt_atomic_file_commit(h) != PT_OK) fail_msg("%s", pt_error_message());
}

/* Reads a whole file into a malloc'ed buffer. */
static char *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
  buf[n] = 0;
  fclose(fp);
  *len = (size_t)n;
  return buf;
}

static void assert_content(const char *path, const char *want) {
  size_t len;
  char *got = slurp(path, &len);
  assert_int_equal(len, strlen(want));
  assert_string_equal(got, want);
  free(got);
}

/* Fails if dir holds anything but the names given (NULL-terminated). */
static void assert_only_files(const char *dir, ...) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    int expected = 0;
    va_list ap;
    va_start(ap, dir);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
      expected |= strcmp(s, de->d_name) == 0;
    va_end(ap);
    if (!expected) {
      closedir(d);
      fail_msg("unexpected file %s/%s", dir, de->d_name);
    }
  }
  closedir(d);
}

/* Two threads saving one path at once: every save succeeds, and a reader
 * finds one thread's whole content, never a mix or a part. */
#define RACE_BYTES (64 * 1024)
typedef struct {
  const char *path;
  char fill;
  int failures, bad_reads;
} racer;

static void *race(void *arg) {
  racer *r = arg;
  static char bufs[2][RACE_BYTES];
  char *buf = bufs[r->fill == 'b'];
  memset(buf, r->fill, RACE_BYTES);
  for (int i = 0; i < 200; i++) {
    pt_atomic_file *h;
    if (pt_atomic_file_open(r->path, &h) != PT_OK) {
      r->failures++;
      continue;
    }
    /* two writes, so that the other thread runs in between */
    if (pt_atomic_file_write(h, buf, RACE_BYTES / 2) != PT_OK ||
        pt_atomic_file_write(h, buf + RACE_BYTES / 2, RACE_BYTES / 2) != PT_OK || pt_atomic_file_commit(h) != PT_OK) {
      r->failures++;
      continue;
    }
    FILE *f = fopen(r->path, "rb");
    char got[RACE_BYTES + 1];
    const size_t n = f ? fread(got, 1, sizeof got, f) : 0;
    if (f) fclose(f);
    int uniform = n == RACE_BYTES;
    for (size_t k = 1; uniform && k < n; k++) uniform = got[k] == got[0];
    r->bad_reads += !uniform;
  }
  return NULL;
}

static void test_two_threads_one_path(void **state) {
  (void)state;
  char dir[128], path[160];
  snprintf(dir, sizeof dir, "%s/race", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/shared.bin", dir);
  racer r[2] = {{path, 'a', 0, 0}, {path, 'b', 0, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++)
    if (r[i].failures || r[i].bad_reads)
      fail_msg("thread '%c': %d saves failed, %d reads found a mixed or short file (%s)", r[i].fill, r[i].failures,
               r[i].bad_reads, pt_error_message());
  assert_only_files(dir, "shared.bin", NULL);
}

static void test_commit_creates_and_replaces(void **state) {
  (void)state;
  char dir[128], path[160];
  snprintf(dir, sizeof dir, "%s/replace", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/f.txt", dir);
  write_whole(path, "first", 5);
  assert_content(path, "first");
  struct stat a, b;
  assert_int_equal(stat(path, &a), 0);
  write_whole(path, "second version", 14);
  assert_content(path, "second version");
  assert_int_equal(stat(path, &b), 0);
  /* A new inode: the file was replaced, not rewritten in place. */
  assert_true(a.st_ino != b.st_ino);
  assert_only_files(dir, "f.txt", NULL);
}

static void test_abort_keeps_old(void **state) {
  (void)state;
  char dir[128], path[160];
  snprintf(dir, sizeof dir, "%s/abort", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/f.txt", dir);
  write_whole(path, "old", 3);
  pt_atomic_file *h;
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  assert_int_equal(pt_atomic_file_write(h, "new data", 8), PT_OK);
  pt_atomic_file_abort(h);
  pt_atomic_file_abort(NULL);
  assert_content(path, "old");
  assert_only_files(dir, "f.txt", NULL);
}

/* A symbolic link's file is replaced and the link stays; a FIFO, a device
 * or a directory is refused, saying what it is, and stays as it was. */
static void test_links_and_special_files(void **state) {
  (void)state;
  char dir[128], path[200], link[200], fifo[200], dev[200];
  snprintf(dir, sizeof dir, "%s/special", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/real.txt", dir);
  snprintf(link, sizeof link, "%s/link.txt", dir);
  write_whole(path, "old", 3);
  assert_int_equal(symlink("real.txt", link), 0);
  write_whole(link, "through the link", 16);
  struct stat sb;
  assert_int_equal(lstat(link, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  assert_content(path, "through the link");

  pt_atomic_file *h = NULL;
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0644), 0);
  assert_int_equal(pt_atomic_file_open(fifo, &h), PT_ERR_IO);
  assert_null(h);
  assert_non_null(strstr(pt_error_message(), "a FIFO, not a regular file"));
  assert_int_equal(lstat(fifo, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  assert_int_equal(pt_atomic_file_open(dir, &h), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "a directory, not a regular file"));
  /* A link to a FIFO is refused too, and one to nothing. */
  snprintf(link, sizeof link, "%s/to-fifo", dir);
  assert_int_equal(symlink("fifo", link), 0);
  assert_int_equal(pt_atomic_file_open(link, &h), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "which is a FIFO"));
  /* A link to a file not there yet makes it; one into a missing directory
   * says so. */
  snprintf(link, sizeof link, "%s/dangling", dir);
  assert_int_equal(symlink("made.txt", link), 0);
  write_whole(link, "made", 4);
  snprintf(path, sizeof path, "%s/made.txt", dir);
  assert_content(path, "made");
  assert_int_equal(lstat(link, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  snprintf(link, sizeof link, "%s/nowhere", dir);
  assert_int_equal(symlink("no-dir/x.txt", link), 0);
  assert_int_equal(pt_atomic_file_open(link, &h), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "no-dir/x.txt"));
  /* A character device, where one can be made (root): /dev/null's kind. */
  snprintf(dev, sizeof dev, "%s/null", dir);
  if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    assert_int_equal(pt_atomic_file_open(dev, &h), PT_ERR_IO);
    assert_non_null(strstr(pt_error_message(), "a character device"));
    assert_int_equal(lstat(dev, &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
  }
}

static void test_large_mixed_writes(void **state) {
  (void)state;
  char path[160];
  snprintf(path, sizeof path, "%s/big.bin", tmpdir);
  size_t total = 1 << 20;
  unsigned char *src = malloc(total);
  assert_non_null(src);
  for (size_t i = 0; i < total; i++) src[i] = (unsigned char)(i * 2654435761u >> 13);
  pt_atomic_file *h;
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  /* Sizes straddling the internal buffer: tiny, exactly full, larger than it. */
  size_t sizes[] = {1, 7, 65536, 3, 65535, 200000, 8, 100000, 0};
  size_t off = 0;
  for (int i = 0; off < total; i = (i + 1) % 9) {
    size_t n = sizes[i];
    if (n > total - off) n = total - off;
    assert_int_equal(pt_atomic_file_write(h, src + off, n), PT_OK);
    off += n;
  }
  assert_int_equal(pt_atomic_file_commit(h), PT_OK);
  size_t len;
  char *got = slurp(path, &len);
  assert_int_equal(len, total);
  assert_memory_equal(got, src, total);
  free(got);
  free(src);
}

static void test_relative_path(void **state) {
  (void)state;
  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(tmpdir), 0);
  pt_atomic_file *h;
  pt_status st = pt_atomic_file_open("rel.txt", &h);
  if (st == PT_OK) st = pt_atomic_file_write(h, "x", 1);
  if (st == PT_OK) st = pt_atomic_file_commit(h);
  assert_int_equal(chdir(cwd), 0);
  if (st != PT_OK) fail_msg("%s", pt_error_message());
  char path[160];
  snprintf(path, sizeof path, "%s/rel.txt", tmpdir);
  assert_content(path, "x");
}

/* A script written atomically must still be executable: the mode is set
 * exactly, whatever the umask. */
static void test_set_mode(void **state) {
  (void)state;
  char path[160];
  snprintf(path, sizeof path, "%s/run.sh", tmpdir);
  const mode_t old_mask = umask(077);
  pt_atomic_file *h;
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  assert_int_equal(pt_atomic_file_write(h, "#!/bin/sh\n", 10), PT_OK);
  assert_int_equal(pt_atomic_file_set_mode(h, 0755), PT_OK);
  const pt_status st = pt_atomic_file_commit(h);
  umask(old_mask);
  if (st != PT_OK) fail_msg("%s", pt_error_message());
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0755);
}

/* commit_new creates a file that is not there, and leaves one that is (an
 * edited job script) as it was, even when it appeared after the open. */
static void test_commit_new_never_replaces(void **state) {
  (void)state;
  char dir[128], path[160];
  snprintf(dir, sizeof dir, "%s/new", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/job.sub", dir);
  pt_atomic_file *h;
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  assert_int_equal(pt_atomic_file_write(h, "first", 5), PT_OK);
  if (pt_atomic_file_commit_new(h) != PT_OK) fail_msg("%s", pt_error_message());
  assert_content(path, "first");

  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  assert_int_equal(pt_atomic_file_write(h, "second", 6), PT_OK);
  assert_int_equal(pt_atomic_file_commit_new(h), PT_ERR_IO);
  assert_int_equal(pt_error_errno(), EEXIST);
  assert_non_null(strstr(pt_error_message(), path));
  assert_content(path, "first");
  assert_only_files(dir, "job.sub", NULL);

  /* Created by someone else between the open and the commit. */
  char other[170];
  snprintf(other, sizeof other, "%s/late.sub", dir);
  assert_int_equal(pt_atomic_file_open(other, &h), PT_OK);
  assert_int_equal(pt_atomic_file_write(h, "ours", 4), PT_OK);
  /* (plainly: another atomic file of this process would share the
   * temporary name) */
  FILE *fp = fopen(other, "w");
  assert_non_null(fp);
  fputs("theirs", fp);
  assert_int_equal(fclose(fp), 0);
  assert_int_equal(pt_atomic_file_commit_new(h), PT_ERR_IO);
  assert_content(other, "theirs");
  assert_only_files(dir, "job.sub", "late.sub", NULL);
}

static void test_open_and_rename_failures(void **state) {
  (void)state;
  pt_atomic_file *h = (pt_atomic_file *)1;
  const char *bad = "/nonexistent-dir-pt/x/out.bin";
  assert_int_equal(pt_atomic_file_open(bad, &h), PT_ERR_IO);
  assert_null(h);
  assert_non_null(strstr(pt_error_message(), bad));

  /* PATH becomes a non-empty directory after the open: everything works
   * until the rename. (One there before is refused by the open.) */
  char dir[128], path[160], inner[200];
  snprintf(dir, sizeof dir, "%s/rename", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/target", dir);
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  assert_int_equal(pt_atomic_file_write(h, "data", 4), PT_OK);
  assert_int_equal(mkdir(path, 0755), 0);
  snprintf(inner, sizeof inner, "%s/keep", path);
  write_whole(inner, "k", 1);
  assert_int_equal(pt_atomic_file_commit(h), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), path));
  assert_only_files(dir, "target", NULL);
  assert_content(inner, "k");
}

/* The write path of a failure: the write (or the commit, for data still in
 * the buffer) fails, the old file survives, no temporary file remains. */
static void fill_and_check(const char *dir, const char *path, const char *why) {
  size_t big = 1 << 20;
  char *junk = calloc(1, big);
  assert_non_null(junk);

  /* Direct use: one large write. */
  pt_atomic_file *h;
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  pt_status st = pt_atomic_file_write(h, junk, big);
  assert_int_equal(st, PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), path));
  assert_non_null(strstr(pt_error_message(), why));
  /* The failure sticks: no later write or commit may succeed. */
  assert_int_equal(pt_atomic_file_write(h, "x", 1), PT_ERR_IO);
  assert_int_equal(pt_atomic_file_commit(h), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), path));
  assert_content(path, "old checkpoint");
  assert_only_files(dir, "ckpt.safetensors", NULL);

  /* Small writes that only reach the disk when the buffer flushes. */
  assert_int_equal(pt_atomic_file_open(path, &h), PT_OK);
  st = PT_OK;
  for (size_t off = 0; st == PT_OK && off < big; off += 1000)
    st = pt_atomic_file_write(h, junk, 1000);
  if (st == PT_OK) st = pt_atomic_file_commit(h);
  else pt_atomic_file_abort(h);
  assert_int_equal(st, PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), path));
  assert_content(path, "old checkpoint");
  assert_only_files(dir, "ckpt.safetensors", NULL);

  /* Through the safetensors writer, as a checkpoint save would. */
  pt_st_writer *w = pt_st_writer_new();
  int64_t shape[1] = {(int64_t)(big / 4)};
  assert_int_equal(pt_st_writer_add(w, "fc.weight", PT_ST_F32, 1, shape, junk), PT_OK);
  assert_int_equal(pt_st_writer_write(w, path), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), path));
  assert_non_null(strstr(pt_error_message(), why));
  pt_st_writer_free(w);
  assert_content(path, "old checkpoint");
  assert_only_files(dir, "ckpt.safetensors", NULL);
  free(junk);
}

static int unmount_tmpfs(void **state) {
  (void)state;
  if (mounted && umount(mnt) != 0) return -1;
  mounted = 0;
  return 0;
}

static void test_full_disk_tmpfs(void **state) {
  (void)state;
  snprintf(mnt, sizeof mnt, "%s/tmpfs", tmpdir);
  assert_int_equal(mkdir(mnt, 0755), 0);
  if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
    print_message("cannot mount a tmpfs (%s); skipping the ENOSPC test\n", strerror(errno));
    skip();
  }
  mounted = 1;
  char path[200];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", mnt);
  write_whole(path, "old checkpoint", 14);
  fill_and_check(mnt, path, "No space left on device");
}

static void test_full_disk_rlimit(void **state) {
  (void)state;
  char dir[128], path[200];
  snprintf(dir, sizeof dir, "%s/rlimit", tmpdir);
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  write_whole(path, "old checkpoint", 14);

  assert_int_equal(file_size_limit(100000), 0);
  fill_and_check(dir, path, "File too large");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commit_creates_and_replaces),
      cmocka_unit_test(test_two_threads_one_path),
      cmocka_unit_test(test_abort_keeps_old),
      cmocka_unit_test(test_large_mixed_writes),
      cmocka_unit_test(test_relative_path),
      cmocka_unit_test(test_links_and_special_files),
      cmocka_unit_test(test_open_and_rename_failures),
      cmocka_unit_test(test_set_mode),
      cmocka_unit_test(test_commit_new_never_replaces),
      cmocka_unit_test_teardown(test_full_disk_tmpfs, unmount_tmpfs),
      cmocka_unit_test_teardown(test_full_disk_rlimit, file_size_unlimit),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
