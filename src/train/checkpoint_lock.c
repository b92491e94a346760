/* The checkpoint directory's lock; checkpoint_lock.h says why.
 *
 * The file is removed when the lock is released, so that a finished run
 * leaves the directory as it found it. That opens a race: a second run may
 * have opened the file just before it went, and then locks a file no one
 * else will ever open, while a third run creates a new one and locks that.
 * So after locking, the path must still name the file locked; if not, the
 * lock is of no use and is taken again. */
#include "train/checkpoint_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int no_locks_here(int e) {
  return e == ENOLCK || e == EOPNOTSUPP || e == ENOTSUP || e == EINVAL || e == ENOSYS;
}

/* Tests only: PTRAIN_TEST_NO_LOCKS=1 makes flock fail as it does on an NFS
 * mount without locks, so that the run's way on without one is tested
 * where every filesystem has them. */
static int flock_or_not(int fd) {
  const char *e = getenv("PTRAIN_TEST_NO_LOCKS");
  if (e && !strcmp(e, "1")) {
    errno = ENOLCK;
    return -1;
  }
  return flock(fd, LOCK_EX | LOCK_NB);
}

/* "process 1234 on node7", from what the holder wrote into the file. */
static void describe_holder(int fd, char *out, size_t size) {
  char buf[256];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  long pid = 0;
  char host[200] = "";
  if (n > 0) {
    buf[n] = 0;
    if (sscanf(buf, "%ld %199s", &pid, host) < 1) pid = 0;
  }
  if (pid > 0 && host[0]) snprintf(out, size, "process %ld on %s", pid, host);
  else if (pid > 0) snprintf(out, size, "process %ld", pid);
  else snprintf(out, size, "another process (it has not written its PID yet)");
}

pt_status pt_checkpoint_lock_take(const char *dir, pt_checkpoint_lock *lock, int *unsupported, char *why,
                                  size_t why_size) {
  memset(lock, 0, sizeof *lock);
  lock->fd = -1;
  *unsupported = 0;
  if (why_size) why[0] = 0;
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--; /* "ck/" names ck/.ptrain.lock, not ck//.ptrain.lock */
  if (snprintf(lock->path, sizeof lock->path, "%.*s/.ptrain.lock", (int)n, dir) >= (int)sizeof lock->path)
    return pt_fail(PT_ERR_ARG, "checkpoint directory path too long: %s", dir);
  for (int attempt = 0; attempt < 100; attempt++) {
    const int fd = open(lock->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return pt_fail_errno(PT_ERR_IO, "cannot create the lock file %s", lock->path);
    if (flock_or_not(fd)) {
      const int e = errno;
      if (e == EWOULDBLOCK) {
        char holder[300];
        describe_holder(fd, holder, sizeof holder);
        close(fd);
        return pt_fail(PT_ERR_STATE,
                       "checkpoint directory %s is in use by another run: %s holds its lock (%s); give each run "
                       "its own --checkpoint-dir, or wait for that run to end",
                       dir, holder, lock->path);
      }
      close(fd);
      if (no_locks_here(e)) {
        unlink(lock->path); /* nothing can hold it; the file would only mislead */
        *unsupported = 1;
        if (why_size) snprintf(why, why_size, "flock: %s", strerror(e));
        return PT_OK;
      }
      errno = e;
      return pt_fail_errno(PT_ERR_IO, "cannot lock %s", lock->path);
    }
    struct stat held, named;
    if (fstat(fd, &held) == 0 && stat(lock->path, &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      char id[300], host[256] = "";
      if (gethostname(host, sizeof host - 1)) host[0] = 0;
      const int n = snprintf(id, sizeof id, "%ld %s\n", (long)getpid(), host[0] ? host : "?");
      if (ftruncate(fd, 0) || pwrite(fd, id, (size_t)n, 0) != n) {
        /* The PID is for another run's message only: without it the lock holds all the same. */
      }
      lock->fd = fd;
      lock->held = 1;
      return PT_OK;
    }
    close(fd); /* removed by the run that released it: take the new one */
  }
  return pt_fail(PT_ERR_IO, "cannot lock %s: it keeps being replaced by other processes", lock->path);
}

void pt_checkpoint_lock_release(pt_checkpoint_lock *lock) {
  if (!lock->held) return;
  /* Removed while still locked: whoever opens it from now on sees a new file. */
  unlink(lock->path);
  close(lock->fd);
  lock->held = 0;
  lock->fd = -1;
}
