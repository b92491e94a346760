/* Atomic file replacement: a reader of PATH sees either the old content or the
 * complete new content, never a half-written file, even across a crash or a
 * full disk.
 *
 * The content goes to "PATH.tmp.<pid>.<n>" in the same directory (so the final
 * rename cannot cross a filesystem), every write is checked, the file is
 * fsync'ed, renamed over PATH, and the directory is fsync'ed so the rename
 * itself is durable. Any failure up to the rename removes the temporary file
 * and leaves PATH as it was. A failed directory sync after the rename is still
 * reported: the new content is in place but might not survive a power cut.
 *
 * The temporary name is per file opened (the pid and a count), so two
 * threads saving the same PATH at once each publish a complete file, the
 * last rename winning, as pt_net_save's callers on several threads expect.
 *
 * Usage: open, any number of writes, then exactly one of commit or abort; both
 * free the handle whatever happens. After a failed write the caller should
 * abort (a commit would also refuse and clean up).
 */
#ifndef PT_IO_ATOMIC_FILE_H
#define PT_IO_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

typedef struct pt_atomic_file pt_atomic_file;

/* Creates the temporary file next to path. On failure *out is NULL and the
 * message names path. What is replaced is pt_file_replace_target's: where
 * path is a symbolic link, the file it names (the link stays); a FIFO, a
 * device or a directory is refused, saying what it is. */
pt_status pt_atomic_file_open(const char *path, pt_atomic_file **out);
/* Appends len bytes (buffered). PT_ERR_IO naming the path on failure, e.g.
 * ENOSPC; the error sticks, so later writes and the commit fail too. */
pt_status pt_atomic_file_write(pt_atomic_file *h, const void *buf, size_t len);
/* The permissions PATH gets, exactly (the umask does not apply): a script
 * that must be executable, say. Without it PATH gets 0666 less the umask. */
pt_status pt_atomic_file_set_mode(pt_atomic_file *h, mode_t mode);
/* Writes out and fsyncs what is buffered, publishing nothing: files that
 * belong together (a submit file and its script) are all synced before the
 * first is committed, so a full disk leaves none of them half replaced. */
pt_status pt_atomic_file_sync(pt_atomic_file *h);
/* Flushes, fsyncs, renames over the path, fsyncs the directory; frees h. */
pt_status pt_atomic_file_commit(pt_atomic_file *h);
/* The same for a file that must not exist yet: where PATH exists, even one
 * created since the open, it is left alone and the commit fails with
 * PT_ERR_IO, naming it, pt_error_errno() EEXIST. So a second run never
 * silently replaces a file the user has edited. */
pt_status pt_atomic_file_commit_new(pt_atomic_file *h);
/* Closes and removes the temporary file; PATH is untouched; frees h. NULL ok. */
void pt_atomic_file_abort(pt_atomic_file *h);

/* fsync of a directory, so that renames and removals in it are durable;
 * filesystems that cannot sync directories are not an error. */
pt_status pt_sync_dir(const char *dir);

#endif
