/* One run at a time in a checkpoint directory. Two runs writing the same
 * DIR remove each other's partial saves and replace each other's
 * generations, and a resume then pairs nothing sensible; so the run that
 * writes checkpoints (rank 0, the only writer under ddp, dp and stages)
 * holds flock(2) on DIR/.ptrain.lock from start-up to its end, and a
 * second run stops before training with an error naming the directory and
 * the process that holds it. The kernel drops the lock when the holder
 * dies, however it dies (kill -9 included), so a stale file never locks a
 * directory. Where the filesystem has no locks (some NFS mounts), the run
 * goes on without one and the caller says so.
 */
#ifndef PT_TRAIN_CHECKPOINT_LOCK_H
#define PT_TRAIN_CHECKPOINT_LOCK_H

#include "util/error.h"

typedef struct {
  int held;            /* fd is open and locked */
  int fd;
  char path[4200];
} pt_checkpoint_lock;

/* Locks dir (which must exist). PT_OK with lock->held where it is locked;
 * PT_OK without, and *unsupported set, where the filesystem refuses locks
 * (why: flock's error); an error naming dir and the holder's PID and host
 * where another process holds it. */
pt_status pt_checkpoint_lock_take(const char *dir, pt_checkpoint_lock *lock, int *unsupported, char *why,
                                  size_t why_size);
/* Removes the lock file and unlocks; nothing where nothing is held. */
void pt_checkpoint_lock_release(pt_checkpoint_lock *lock);

#endif
