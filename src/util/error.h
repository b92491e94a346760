/* Errors with context.
 *
 * Library code never exits on bad input: it returns a pt_status and leaves a
 * message in a thread-local buffer that names the thing that was wrong and what
 * was expected ("train-images-idx3-ubyte.gz: bad magic 0x00000000, expected
 * 0x00000803"). The caller that finally reports the error (the CLI) prints
 * pt_error_message(). Each thread has its own buffer, so a loader thread's
 * error never overwrites the trainer's. A message too long for the buffer
 * (paths of up to PATH_MAX fit) loses its middle, marked " [...] ", and keeps
 * its start and its end: the context and the reason.
 */
#ifndef PT_UTIL_ERROR_H
#define PT_UTIL_ERROR_H

#include <stddef.h>

#include "ptrain.h"

/* C linkage for the CUDA sources, which nvcc compiles as C++. */
#ifdef __cplusplus
extern "C" {
#endif

/* The longest message kept, with its NUL: room for two paths of PATH_MAX
 * and the text around them. A copy of a message (to say it for another
 * thread or rank) keeps it whole in a buffer of this size. */
#define PT_ERROR_MAX 10240

/* pt_status, pt_error_message and pt_status_name are the public API's
 * (include/ptrain.h): one definition for the library and its users. */

/* Sets the thread's message (printf-style) and returns code, so call sites read
 * `return pt_fail(PT_ERR_FORMAT, "%s: truncated", path);`. */
pt_status pt_fail(pt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* pt_fail with ": strerror(errno)" appended. */
pt_status pt_fail_errno(pt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends "context: " to the current message, keeping the code, so a caller
 * can add what it was doing: pt_wrap(st, "loading %s", path). */
pt_status pt_wrap(pt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *pt_error_message(void);
/* The errno of the thread's last pt_fail_errno (0 after pt_fail, pt_error_clear
 * or none): what failed, kept with the message, so that a caller can tell a
 * full disk from a missing file after cleanup calls have changed errno. */
int pt_error_errno(void);
const char *pt_status_name(pt_status code);
void pt_error_clear(void);

/* Propagate a failure unchanged. */
#define PT_TRY(expr)                   \
  do {                                 \
    pt_status pt_try_st_ = (expr);     \
    if (pt_try_st_ != PT_OK) return pt_try_st_; \
  } while (0)

/* Allocation that reports, for use in functions returning pt_status. */
void *pt_malloc(size_t bytes);   /* NULL + message on failure */
void *pt_calloc(size_t n, size_t size);
/* 64-byte aligned, zeroed; free with pt_free_aligned (== free). */
void *pt_alloc_aligned(size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
