/* Whole-file reads, for the readers of untrusted files (IDX, CIFAR-10,
 * safetensors), which all validate a complete buffer rather than stream. */
#ifndef PT_UTIL_FILE_H
#define PT_UTIL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Reads a regular file into a new buffer (*out, free()d by the caller).
 * A file that shrinks while read yields the shorter length; the caller's
 * validation reports what is missing. Errors name the path. */
pt_status pt_read_file(const char *path, uint8_t **out, size_t *len);

#endif
