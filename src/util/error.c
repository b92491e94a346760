/* Thread-local error messages; see error.h for the contract. */
#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PT_ERRBUF 1024
static _Thread_local char errbuf[PT_ERRBUF];
static _Thread_local int err_errno;

static void vset(const char *fmt, va_list ap) { vsnprintf(errbuf, sizeof errbuf, fmt, ap); }

pt_status pt_fail(pt_status code, const char *fmt, ...) {
  err_errno = 0;
  va_list ap;
  va_start(ap, fmt);
  vset(fmt, ap);
  va_end(ap);
  return code;
}

pt_status pt_fail_errno(pt_status code, const char *fmt, ...) {
  int e = errno;
  err_errno = e;
  va_list ap;
  va_start(ap, fmt);
  vset(fmt, ap);
  va_end(ap);
  size_t n = strlen(errbuf);
  snprintf(errbuf + n, sizeof errbuf - n, ": %s", strerror(e));
  return code;
}

pt_status pt_wrap(pt_status code, const char *fmt, ...) {
  char prefix[PT_ERRBUF], old[PT_ERRBUF];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, errbuf, sizeof old);
  /* Truncation is acceptable: the message is for people, and the start of
   * it, where the context is, survives. */
  size_t n = strlen(prefix);
  if (n > sizeof errbuf - 3) n = sizeof errbuf - 3;
  memcpy(errbuf, prefix, n);
  errbuf[n] = ':';
  errbuf[n + 1] = ' ';
  size_t rest = sizeof errbuf - n - 2;
  size_t olen = strnlen(old, rest - 1);
  memcpy(errbuf + n + 2, old, olen);
  errbuf[n + 2 + olen] = 0;
  return code;
}

const char *pt_error_message(void) { return errbuf[0] ? errbuf : "no error"; }
void pt_error_clear(void) {
  errbuf[0] = 0;
  err_errno = 0;
}

int pt_error_errno(void) { return err_errno; }

const char *pt_status_name(pt_status code) {
  switch (code) {
    case PT_OK: return "ok";
    case PT_ERR_ARG: return "invalid argument";
    case PT_ERR_IO: return "I/O error";
    case PT_ERR_FORMAT: return "malformed input";
    case PT_ERR_NOMEM: return "out of memory";
    case PT_ERR_NET: return "network error";
    case PT_ERR_CHECKSUM: return "checksum mismatch";
    case PT_ERR_STATE: return "invalid state";
    case PT_ERR_COMM: return "communication error";
    case PT_ERR_DEVICE: return "device error";
  }
  return "unknown error";
}

void *pt_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) pt_fail(PT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
  return p;
}

void *pt_calloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) pt_fail(PT_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
  return p;
}

void *pt_alloc_aligned(size_t bytes) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p) {
    pt_fail(PT_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    return NULL;
  }
  memset(p, 0, rounded ? rounded : 64);
  return p;
}
