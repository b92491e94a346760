#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
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
