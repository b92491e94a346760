/* Whole-file reads, for the readers of untrusted files (IDX, CIFAR-10,
 * safetensors), which all validate a complete buffer rather than stream;
 * and what a file written by replacement (a temporary file renamed over
 * the path) may replace. */
#ifndef PT_UTIL_FILE_H
#define PT_UTIL_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* Reads a regular file into a new buffer (*out, free()d by the caller).
 * A file that shrinks while read yields the shorter length; the caller's
 * validation reports what is missing. Errors name the path. */
pt_status pt_read_file(const char *path, uint8_t **out, size_t *len);

/* The file that writing path by replacement replaces: path itself where it
 * is a regular file or nothing yet; the file a symbolic link names, so that
 * the link stays a link; and nothing else, since a rename over a FIFO, a
 * device (/dev/null, as root) or a directory's entry destroys it: those
 * fail with PT_ERR_IO saying what path is. *out is malloc'ed, or NULL on
 * failure. Writers check their path with it before the work whose result
 * they write, and again when they write. */
pt_status pt_file_replace_target(const char *path, char **out);

/* What a file of mode m is, for messages: "a directory", "a FIFO", "a
 * character device", ..., or "not a regular file". */
const char *pt_file_kind(mode_t m);

#endif
