#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

pt_status pt_read_file(const char *path, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer before
   * fstat could refuse it; it changes nothing for a regular file. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return pt_fail_errno(PT_ERR_IO, "%s: cannot open", path);
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    pt_status st = pt_fail_errno(PT_ERR_IO, "%s: cannot stat", path);
    close(fd);
    return st;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return pt_fail(PT_ERR_IO, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  uint8_t *buf = pt_malloc(size);
  if (!buf) {
    close(fd);
    return pt_wrap(PT_ERR_NOMEM, "%s", path);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      pt_status st = pt_fail_errno(PT_ERR_IO, "%s: read failed", path);
      close(fd);
      free(buf);
      return st;
    }
    if (r == 0) break; /* shrank under us */
    got += (size_t)r;
  }
  close(fd);
  *out = buf;
  *len = got;
  return PT_OK;
}

const char *pt_file_kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* A symbolic link to a file not there yet: the file it names, made as
 * writing through the link would make it, where its directory is there. A
 * link to a link is followed by realpath only when the chain ends in a
 * file; here it is refused. */
static pt_status dangling_target(const char *path, char **out) {
  char to[4096];
  const ssize_t n = readlink(path, to, sizeof to - 1);
  if (n <= 0) return pt_fail_errno(PT_ERR_IO, "%s: cannot read the symbolic link", path);
  to[n] = 0;
  const char *slash = strrchr(path, '/');
  const size_t dir = to[0] == '/' || !slash ? 0 : (size_t)(slash - path) + 1;
  char *t = malloc(dir + (size_t)n + 1);
  if (!t) return pt_fail(PT_ERR_NOMEM, "%s: out of memory", path);
  memcpy(t, path, dir);
  memcpy(t + dir, to, (size_t)n + 1);
  struct stat sb;
  if (lstat(t, &sb) == 0 || errno != ENOENT) {
    const pt_status st = pt_fail(PT_ERR_IO, "%s: a symbolic link to %s, which cannot be written through; expected a "
                                 "regular file or a link to one", path, t);
    free(t);
    return st;
  }
  *out = t;
  return PT_OK;
}

pt_status pt_file_replace_target(const char *path, char **out) {
  *out = NULL;
  if (!path || !*path) return pt_fail(PT_ERR_ARG, "empty path for a file to write");
  struct stat sb;
  if (lstat(path, &sb) != 0) {
    if (errno != ENOENT) return pt_fail_errno(PT_ERR_IO, "%s", path);
  } else if (S_ISLNK(sb.st_mode)) {
    char *real = realpath(path, NULL);
    if (!real && errno == ENOENT) return dangling_target(path, out);
    if (!real)
      return pt_fail_errno(PT_ERR_IO, "%s: a symbolic link whose file cannot be reached; expected a path to write",
                           path);
    if (stat(real, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      const pt_status st = pt_fail(PT_ERR_IO, "%s: a symbolic link to %s, which is %s; expected a regular file to "
                                   "replace", path, real, pt_file_kind(sb.st_mode));
      free(real);
      return st;
    }
    *out = real;
    return PT_OK;
  } else if (!S_ISREG(sb.st_mode)) {
    return pt_fail(PT_ERR_IO, "%s: %s, not a regular file; expected a path for the file to write", path,
                   pt_file_kind(sb.st_mode));
  }
  *out = strdup(path);
  return *out ? PT_OK : pt_fail(PT_ERR_NOMEM, "%s: out of memory", path);
}
