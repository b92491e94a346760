/* Thread-local error messages; see error.h for the contract. */
#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for two paths of PATH_MAX (4096) and the text around them: a
 * message names the file, and a rename names two. */
#define PT_ERRBUF PT_ERROR_MAX
static _Thread_local char errbuf[PT_ERRBUF];
static _Thread_local int err_errno;

/* A message is context first and the reason last ("loading X: X: cannot
 * open: No such file or directory"), and what makes one too long is a part
 * in between (a path, a name the caller passed). One that does not fit
 * keeps its start and its end and loses its middle, so that both the
 * context and the reason survive. */
#define ELLIPSIS " [...] "

/* The concatenation of n parts, read without building it. */
typedef struct {
  const char *s[3];
  size_t len[3];
  int n;
} parts;

static char byte_at(const parts *p, size_t at) {
  for (int i = 0; i < p->n; at -= p->len[i], i++)
    if (at < p->len[i]) return p->s[i][at];
  return 0;
}

/* Bytes [from, to) of the parts into dst; returns dst past them. */
static char *copy_range(const parts *p, size_t from, size_t to, char *dst) {
  size_t base = 0;
  for (int i = 0; i < p->n && from < to; base += p->len[i], i++) {
    const size_t end = base + p->len[i];
    if (from >= end) continue;
    const size_t k = (to < end ? to : end) - from;
    memcpy(dst, p->s[i] + (from - base), k);
    dst += k;
    from += k;
  }
  return dst;
}

/* A UTF-8 character's continuation byte: a cut there would split it. */
static int continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

/* The parts into errbuf, which none of them may point into. */
static void store(const parts *p) {
  size_t total = 0;
  for (int i = 0; i < p->n; i++) total += p->len[i];
  if (total < sizeof errbuf) {
    *copy_range(p, 0, total, errbuf) = 0;
    return;
  }
  const size_t keep = sizeof errbuf - 1 - (sizeof ELLIPSIS - 1);
  size_t head = keep / 2, tail = total - (keep - head);
  while (head > 0 && continuation(byte_at(p, head))) head--;
  while (tail < total && continuation(byte_at(p, tail))) tail++;
  char *d = copy_range(p, 0, head, errbuf);
  memcpy(d, ELLIPSIS, sizeof ELLIPSIS - 1);
  *copy_range(p, tail, total, d + sizeof ELLIPSIS - 1) = 0;
}

/* fmt's text: in buf (of PT_ERRBUF bytes) where it fits, else on the heap
 * (*heap, for the caller to free). Where the heap has no room either, the
 * start that buf holds has to do. */
static const char *format(char *buf, char **heap, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  const int n = vsnprintf(buf, PT_ERRBUF, fmt, ap);
  *heap = NULL;
  if (n >= PT_ERRBUF && (*heap = malloc((size_t)n + 1))) vsnprintf(*heap, (size_t)n + 1, fmt, again);
  va_end(again);
  if (n < 0) buf[0] = 0;
  return *heap ? *heap : buf;
}

pt_status pt_fail(pt_status code, const char *fmt, ...) {
  err_errno = 0;
  char buf[PT_ERRBUF], *heap;
  va_list ap;
  va_start(ap, fmt);
  const char *msg = format(buf, &heap, fmt, ap);
  va_end(ap);
  parts p = {{msg}, {strlen(msg)}, 1};
  store(&p);
  free(heap);
  return code;
}

pt_status pt_fail_errno(pt_status code, const char *fmt, ...) {
  const int e = errno;
  err_errno = e;
  char buf[PT_ERRBUF], *heap;
  va_list ap;
  va_start(ap, fmt);
  const char *msg = format(buf, &heap, fmt, ap);
  va_end(ap);
  const char *why = strerror(e);
  parts p = {{msg, ": ", why}, {strlen(msg), 2, strlen(why)}, 3};
  store(&p);
  free(heap);
  return code;
}

pt_status pt_wrap(pt_status code, const char *fmt, ...) {
  /* store writes errbuf, so the old message goes in from a copy. */
  char old[PT_ERRBUF], buf[PT_ERRBUF], *heap;
  memcpy(old, errbuf, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  const char *prefix = format(buf, &heap, fmt, ap);
  va_end(ap);
  parts p = {{prefix, ": ", old}, {strlen(prefix), 2, strlen(old)}, 3};
  store(&p);
  free(heap);
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
