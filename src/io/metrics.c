/* JSON-lines metrics log (see metrics.h for the contract).
 *
 * Each line is a cJSON object built in memory and printed unformatted, so
 * keys and strings are escaped correctly. Numbers, though, are formatted here
 * and inserted as raw text: cJSON stores numbers as doubles, which would round
 * step counts above 2^53, and its printer accepts %.15g whenever the result
 * is within a relative epsilon of the value, so the last bit can be lost (and
 * DBL_MAX prints as a number that reads back as infinity). We print the
 * shortest of %.15g/%.16g/%.17g that reads back bit-exactly.
 *
 * Lines go out with one write() on an O_APPEND descriptor rather than
 * through stdio: after a failed stdio flush, how much of the line is still
 * buffered (and would be emitted later, gluing fragments together) is
 * unspecified. If a write fails part-way, the next line starts with a
 * newline so the fragment sits on a line of its own and every complete line
 * stays parseable.
 *
 * The sticky error keeps its own copy of the message: the thread-local
 * message could be overwritten by unrelated calls between a failed field and
 * the end that reports it.
 */
#include "io/metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pt_metrics {
  int fd;
  int torn;         /* a write failed part-way: the file may end mid-line */
  char *path;
  cJSON *line;      /* the line being built, NULL between end and begin */
  pt_status err;    /* first error since the last end */
  char errmsg[512];
};

pt_status pt_metrics_open(const char *path, int append, pt_metrics **out) {
  *out = NULL;
  if (!path || !*path) return pt_fail(PT_ERR_ARG, "metrics: empty path");
  pt_metrics *m = pt_calloc(1, sizeof *m);
  if (!m) return PT_ERR_NOMEM;
  m->path = strdup(path);
  if (!m->path) {
    free(m);
    return pt_fail(PT_ERR_NOMEM, "%s: out of memory", path);
  }
  /* Non-blocking to open: a FIFO that no process reads would otherwise
   * block here for good, deaf to the stop signals (open() is restarted). */
  m->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | (append ? 0 : O_TRUNC), 0666);
  pt_status st = PT_OK;
  if (m->fd < 0 && errno == ENXIO)
    st = pt_fail(PT_ERR_IO, "%s: a FIFO that no process reads: start its reader first, or give a file (--metrics)",
                 path);
  else if (m->fd < 0)
    st = pt_fail_errno(PT_ERR_IO, "%s: cannot open metrics log", path);
  else if (fcntl(m->fd, F_SETFL, O_APPEND) != 0) /* lines are written whole: blocking from here on */
    st = pt_fail_errno(PT_ERR_IO, "%s: cannot open metrics log", path);
  if (st != PT_OK) {
    if (m->fd >= 0) close(m->fd);
    free(m->path);
    free(m);
    return st;
  }
  /* Appending after an earlier run whose last line was cut (a full disk, a
   * kill): the first line starts on a line of its own, as after a write of
   * this run's cut short. */
  struct stat sb;
  if (append && fstat(m->fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
    const int rfd = open(path, O_RDONLY | O_CLOEXEC); /* the log's descriptor writes only */
    char last = '\n';
    if (rfd >= 0 && pread(rfd, &last, 1, sb.st_size - 1) == 1 && last != '\n') m->torn = 1;
    if (rfd >= 0) close(rfd);
  }
  *out = m;
  return PT_OK;
}

__attribute__((format(printf, 3, 4)))
static void note_error(pt_metrics *m, pt_status code, const char *fmt, ...) {
  if (m->err != PT_OK) return; /* the first error is the informative one */
  m->err = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->errmsg, sizeof m->errmsg, fmt, ap);
  va_end(ap);
}

void pt_metrics_begin(pt_metrics *m, const char *event) {
  if (!m) return;
  if (m->line) {
    note_error(m, PT_ERR_STATE, "%s: metrics line begun before the previous one ended", m->path);
    cJSON_Delete(m->line);
    m->line = NULL;
  }
  m->line = cJSON_CreateObject();
  if (!m->line) {
    note_error(m, PT_ERR_NOMEM, "%s: out of memory building a metrics line", m->path);
    return;
  }
  if (!event) {
    note_error(m, PT_ERR_ARG, "%s: metrics line with a NULL event name", m->path);
    return;
  }
  cJSON *v = cJSON_CreateString(event);
  if (!v || !cJSON_AddItemToObject(m->line, "event", v)) {
    cJSON_Delete(v);
    note_error(m, PT_ERR_NOMEM, "%s: out of memory building a metrics line", m->path);
  }
}

/* Adds item under key, taking ownership of item in every case. */
static void add_field(pt_metrics *m, const char *key, cJSON *item) {
  if (!m) {
    cJSON_Delete(item);
    return;
  }
  const char *event = "?";
  if (m->line) {
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(m->line, "event");
    if (cJSON_IsString(ev) && ev->valuestring) event = ev->valuestring;
  }
  if (!m->line)
    note_error(m, PT_ERR_STATE, "%s: metrics field '%s' outside begin/end", m->path,
               key ? key : "(null)");
  else if (!key)
    note_error(m, PT_ERR_ARG, "%s: metrics event '%s': field with a NULL key", m->path, event);
  else if (!item)
    note_error(m, PT_ERR_NOMEM, "%s: metrics event '%s': out of memory for '%s'", m->path, event,
               key);
  else if (cJSON_GetObjectItemCaseSensitive(m->line, key))
    note_error(m, PT_ERR_ARG, "%s: metrics event '%s': key '%s' given twice", m->path, event,
               key);
  else if (cJSON_AddItemToObject(m->line, key, item))
    return;
  else
    note_error(m, PT_ERR_NOMEM, "%s: metrics event '%s': out of memory for '%s'", m->path, event,
               key);
  cJSON_Delete(item);
}

void pt_metrics_int(pt_metrics *m, const char *key, int64_t value) {
  char s[24];
  snprintf(s, sizeof s, "%" PRId64, value);
  add_field(m, key, cJSON_CreateRaw(s));
}

/* Shortest %g form that strtod maps back to exactly v (%.17g always does). */
static void format_double(char *out, size_t cap, double v) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(out, cap, "%.*g", prec, v);
    if (strtod(out, NULL) == v) break;
  }
  /* JSON wants '.', whatever LC_NUMERIC a host program may have set. */
  for (char *p = out; *p; p++)
    if (*p == ',') *p = '.';
}

void pt_metrics_num(pt_metrics *m, const char *key, double value) {
  if (!isfinite(value)) {
    add_field(m, key, cJSON_CreateNull());
    return;
  }
  char s[40];
  format_double(s, sizeof s, value);
  add_field(m, key, cJSON_CreateRaw(s));
}

void pt_metrics_str(pt_metrics *m, const char *key, const char *value) {
  add_field(m, key, value ? cJSON_CreateString(value) : cJSON_CreateNull());
}

void pt_metrics_bool(pt_metrics *m, const char *key, int value) {
  add_field(m, key, cJSON_CreateBool(value != 0));
}

/* Returns the pending error (restoring its message) and clears it. */
static pt_status take_error(pt_metrics *m) {
  pt_status st = m->err;
  if (st != PT_OK) pt_fail(st, "%s", m->errmsg);
  m->err = PT_OK;
  m->errmsg[0] = 0;
  return st;
}

pt_status pt_metrics_end(pt_metrics *m) {
  if (!m) return pt_fail(PT_ERR_ARG, "metrics: NULL log");
  cJSON *line = m->line;
  m->line = NULL;
  if (!line && m->err == PT_OK)
    note_error(m, PT_ERR_STATE, "%s: metrics line ended without begin", m->path);
  pt_status st = take_error(m);
  if (st != PT_OK) {
    cJSON_Delete(line);
    return st;
  }
  char *json = cJSON_PrintUnformatted(line);
  cJSON_Delete(line);
  if (!json) return pt_fail(PT_ERR_NOMEM, "%s: out of memory printing a metrics line", m->path);
  size_t n = strlen(json);
  char *text = malloc(n + 3);
  if (!text) {
    cJSON_free(json);
    return pt_fail(PT_ERR_NOMEM, "%s: out of memory printing a metrics line", m->path);
  }
  size_t len = 0;
  if (m->torn) text[len++] = '\n';
  memcpy(text + len, json, n);
  len += n;
  text[len++] = '\n';
  cJSON_free(json);
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(m->fd, text + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      st = pt_fail_errno(PT_ERR_IO, "%s: writing metrics failed", m->path);
      break;
    }
    done += (size_t)w;
  }
  free(text);
  /* Only a write that got nothing out leaves the file ending in a newline. */
  if (st != PT_OK) m->torn = m->torn || done > 0;
  else m->torn = 0;
  return st;
}

pt_status pt_metrics_close(pt_metrics *m) {
  if (!m) return PT_OK;
  pt_status st = PT_OK;
  if (m->line) {
    cJSON_Delete(m->line);
    m->line = NULL;
    note_error(m, PT_ERR_STATE, "%s: metrics log closed with an unfinished line", m->path);
  }
  st = take_error(m);
  if (fsync(m->fd) != 0 && errno != EINVAL && st == PT_OK)
    st = pt_fail_errno(PT_ERR_IO, "%s: fsync of metrics failed", m->path);
  if (close(m->fd) != 0 && st == PT_OK)
    st = pt_fail_errno(PT_ERR_IO, "%s: closing metrics failed", m->path);
  free(m->path);
  free(m);
  return st;
}
