/* Atomic file replacement (see atomic_file.h for the contract).
 *
 * Writes go through a 64 KiB buffer so that formats made of many small pieces
 * (a checkpoint's biases, an 8-byte length prefix) do not cost a system call
 * each, while large tensors bypass the buffer and are written straight from
 * the caller's memory. The first failure is remembered in the handle: the
 * content is already incomplete, so nothing after it may reach PATH.
 *
 * Raw file descriptors rather than stdio, because stdio hides write errors
 * until fclose and offers no fsync of its own.
 */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/file.h"

#define PT_AF_BUFSIZE (64 * 1024)

struct pt_atomic_file {
  int fd;
  int failed;          /* a write failed: the temp file is incomplete */
  char *path, *tmp;
  size_t used;
  unsigned char buf[PT_AF_BUFSIZE];
};

static void af_free(pt_atomic_file *h) {
  free(h->path);
  free(h->tmp);
  free(h);
}

/* Removes the temporary file and frees the handle, keeping the caller's error
 * message: cleanup failures are secondary to what went wrong first. */
static void af_discard(pt_atomic_file *h) {
  if (h->fd >= 0) close(h->fd);
  unlink(h->tmp);
  af_free(h);
}

pt_status pt_atomic_file_open(const char *path, pt_atomic_file **out) {
  *out = NULL;
  char *target = NULL;
  PT_TRY(pt_file_replace_target(path, &target));
  pt_atomic_file *h = pt_malloc(sizeof *h);
  if (!h) {
    free(target);
    return PT_ERR_NOMEM;
  }
  h->fd = -1;
  h->failed = 0;
  h->used = 0;
  h->path = target;
  size_t tmplen = strlen(target) + 32;
  h->tmp = malloc(tmplen);
  if (!h->tmp) {
    af_free(h);
    return pt_fail(PT_ERR_NOMEM, "%s: out of memory", path);
  }
  /* The pid and a count of this process's files: two threads saving to
   * one path each write a file of their own, the last rename wins, and
   * neither renames the other's half-written one. */
  static atomic_uint opened;
  snprintf(h->tmp, tmplen, "%s.tmp.%ld.%u", target, (long)getpid(), atomic_fetch_add(&opened, 1));
  /* O_TRUNC rather than O_EXCL: a leftover with our pid can only come from a
   * dead process that had the same pid, so reusing it is safe; O_NOFOLLOW so
   * a planted symlink cannot redirect the write. */
  h->fd = open(h->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (h->fd < 0) {
    pt_status st = pt_fail_errno(PT_ERR_IO, "%s: cannot create temporary file %s", path, h->tmp);
    af_free(h);
    return st;
  }
  *out = h;
  return PT_OK;
}

/* Tests only: PTRAIN_TEST_ENOSPC_AFTER=BYTES makes every write past the
 * first BYTES this process writes through atomic files fail with ENOSPC,
 * a disk that fills up, for machines where a test cannot mount a small
 * tmpfs. Counted across threads without a lock: the tests write from one. */
static ssize_t checked_write(int fd, const void *p, size_t len) {
  static long long limit = -2, written;
  if (limit == -2) {
    const char *e = getenv("PTRAIN_TEST_ENOSPC_AFTER");
    limit = e && *e ? atoll(e) : -1;
  }
  if (limit >= 0) {
    if (written >= limit) {
      errno = ENOSPC;
      return -1;
    }
    if ((long long)len > limit - written) len = (size_t)(limit - written);
  }
  ssize_t n = write(fd, p, len);
  if (n > 0) written += n;
  return n;
}

static pt_status write_all(pt_atomic_file *h, const unsigned char *p, size_t len) {
  while (len > 0) {
    ssize_t n = checked_write(h->fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      h->failed = 1;
      return pt_fail_errno(PT_ERR_IO, "%s: write to %s failed", h->path, h->tmp);
    }
    if (n == 0) { /* cannot happen for regular files, but must not spin */
      h->failed = 1;
      return pt_fail(PT_ERR_IO, "%s: write to %s made no progress", h->path, h->tmp);
    }
    p += n;
    len -= (size_t)n;
  }
  return PT_OK;
}

static pt_status flush_buf(pt_atomic_file *h) {
  size_t n = h->used;
  h->used = 0;
  return write_all(h, h->buf, n);
}

pt_status pt_atomic_file_write(pt_atomic_file *h, const void *buf, size_t len) {
  if (!h) return pt_fail(PT_ERR_ARG, "atomic file: NULL handle");
  if (h->failed) return pt_fail(PT_ERR_IO, "%s: an earlier write failed", h->path);
  if (len == 0) return PT_OK;
  if (!buf) return pt_fail(PT_ERR_ARG, "%s: NULL buffer of %zu bytes", h->path, len);
  if (h->used + len <= PT_AF_BUFSIZE) {
    memcpy(h->buf + h->used, buf, len);
    h->used += len;
    return PT_OK;
  }
  PT_TRY(flush_buf(h));
  if (len < PT_AF_BUFSIZE) {
    memcpy(h->buf, buf, len);
    h->used = len;
    return PT_OK;
  }
  return write_all(h, buf, len);
}

/* Length of the directory part of path, for the directory fsync; 0 means ".". */
static size_t dir_len(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return 0;
  if (slash == path) return 1; /* "/name" lives in "/" */
  return (size_t)(slash - path);
}

pt_status pt_sync_dir(const char *dir) {
  pt_status st = PT_OK;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return pt_fail_errno(PT_ERR_IO, "cannot open directory %s to sync it", dir);
  /* Some filesystems cannot sync directories at all (EINVAL); there is
   * nothing more durable we could do there, so it is not an error. */
  if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    st = pt_fail_errno(PT_ERR_IO, "fsync of directory %s failed", dir);
  close(fd);
  return st;
}

/* The directory holding path, synced. */
static pt_status fsync_dir(const char *path) {
  size_t n = dir_len(path);
  char *dir = malloc(n ? n + 1 : 2);
  if (!dir) return pt_fail(PT_ERR_NOMEM, "%s: out of memory", path);
  if (n) {
    memcpy(dir, path, n);
    dir[n] = 0;
  } else {
    strcpy(dir, ".");
  }
  pt_status st = pt_sync_dir(dir);
  free(dir);
  return st == PT_OK ? PT_OK : pt_wrap(st, "%s", path);
}

pt_status pt_atomic_file_sync(pt_atomic_file *h) {
  if (!h) return pt_fail(PT_ERR_ARG, "atomic file: NULL handle");
  if (h->failed) return pt_fail(PT_ERR_IO, "%s: an earlier write failed", h->path);
  PT_TRY(flush_buf(h));
  if (fsync(h->fd) != 0) {
    h->failed = 1;
    return pt_fail_errno(PT_ERR_IO, "%s: fsync of %s failed", h->path, h->tmp);
  }
  return PT_OK;
}

pt_status pt_atomic_file_set_mode(pt_atomic_file *h, mode_t mode) {
  if (!h) return pt_fail(PT_ERR_ARG, "atomic file: NULL handle");
  if (fchmod(h->fd, mode) != 0) return pt_fail_errno(PT_ERR_IO, "%s: cannot set the mode of %s", h->path, h->tmp);
  return PT_OK;
}

/* Puts the finished temporary file in place: over PATH, or with exclusive,
 * only where PATH is not there. link() fails with EEXIST atomically, which
 * a check before a rename cannot; filesystems without hard links get that
 * check instead, the best they allow. */
static pt_status publish(pt_atomic_file *h, int exclusive) {
  if (!exclusive) {
    if (rename(h->tmp, h->path) != 0)
      return pt_fail_errno(PT_ERR_IO, "%s: cannot rename %s over it", h->path, h->tmp);
    return PT_OK;
  }
  if (link(h->tmp, h->path) == 0) {
    unlink(h->tmp);
    return PT_OK;
  }
  if (errno == EEXIST) return pt_fail_errno(PT_ERR_IO, "%s", h->path);
  if (errno != EPERM && errno != ENOTSUP && errno != ENOSYS && errno != EMLINK)
    return pt_fail_errno(PT_ERR_IO, "%s: cannot link %s to it", h->path, h->tmp);
  struct stat sb;
  if (lstat(h->path, &sb) == 0) {
    errno = EEXIST;
    return pt_fail_errno(PT_ERR_IO, "%s", h->path);
  }
  if (rename(h->tmp, h->path) != 0) return pt_fail_errno(PT_ERR_IO, "%s: cannot rename %s to it", h->path, h->tmp);
  return PT_OK;
}

static pt_status commit(pt_atomic_file *h, int exclusive) {
  if (!h) return pt_fail(PT_ERR_ARG, "atomic file: NULL handle");
  if (h->failed) {
    pt_status st = pt_fail(PT_ERR_IO, "%s: not replaced, an earlier write failed", h->path);
    af_discard(h);
    return st;
  }
  pt_status st = flush_buf(h);
  if (st != PT_OK) {
    af_discard(h);
    return st;
  }
  /* Delayed allocation means ENOSPC or EIO may only surface here or at close. */
  if (fsync(h->fd) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "%s: fsync of %s failed", h->path, h->tmp);
    af_discard(h);
    return st;
  }
  int rc = close(h->fd);
  h->fd = -1;
  if (rc != 0) {
    st = pt_fail_errno(PT_ERR_IO, "%s: close of %s failed", h->path, h->tmp);
    af_discard(h);
    return st;
  }
  if ((st = publish(h, exclusive)) != PT_OK) {
    af_discard(h);
    return st;
  }
  /* The new content is in place; a failed directory sync only means the
   * rename might not survive a power loss, which the caller should hear of. */
  st = fsync_dir(h->path);
  af_free(h);
  return st;
}

pt_status pt_atomic_file_commit(pt_atomic_file *h) { return commit(h, 0); }

pt_status pt_atomic_file_commit_new(pt_atomic_file *h) { return commit(h, 1); }

void pt_atomic_file_abort(pt_atomic_file *h) {
  if (h) af_discard(h);
}
