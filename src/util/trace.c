#include "util/trace.h"

#include "util/file.h"
#include "util/timer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  const char *name, *cat;
  double t0, t1;
  int tid;
} event;

#define MAX_NAMED 64

static atomic_int enabled;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static event *events;
static size_t count, cap, dropped;
static double origin;
static struct { int tid; char name[32]; } names[MAX_NAMED];
static int nnames;

static int my_tid(void) {
  static _Thread_local int tid;
  if (!tid) tid = (int)syscall(SYS_gettid);
  return tid;
}

pt_status pt_trace_start(size_t max_events) {
  pthread_mutex_lock(&mu);
  free(events);
  events = calloc(max_events, sizeof *events);
  if (!events) {
    pthread_mutex_unlock(&mu);
    return pt_fail(PT_ERR_NOMEM, "trace: cannot hold %zu events", max_events);
  }
  cap = max_events;
  count = dropped = 0;
  nnames = 0;
  origin = pt_now(); /* every span starts after this, so timestamps are >= 0 */
  atomic_store(&enabled, 1);
  pthread_mutex_unlock(&mu);
  return PT_OK;
}

int pt_trace_enabled(void) { return atomic_load_explicit(&enabled, memory_order_relaxed); }

void pt_trace_span(const char *name, const char *cat, double t0, double t1) {
  if (!pt_trace_enabled()) return;
  int tid = my_tid();
  pthread_mutex_lock(&mu);
  if (count < cap) events[count++] = (event){name, cat, t0, t1, tid};
  else dropped++;
  pthread_mutex_unlock(&mu);
}

void pt_trace_thread_name(const char *name) {
  if (!pt_trace_enabled()) return;
  pthread_mutex_lock(&mu);
  if (nnames < MAX_NAMED) {
    names[nnames].tid = my_tid();
    snprintf(names[nnames].name, sizeof names[nnames].name, "%s", name);
    nnames++;
  }
  pthread_mutex_unlock(&mu);
}

/* Names are ours (layer labels, literals) but escape quotes and backslashes anyway. */
static void put_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

pt_status pt_trace_check_path(const char *path) {
  char *target = NULL;
  pt_status st = pt_file_replace_target(path, &target);
  if (st != PT_OK) return pt_wrap(st, "cannot write trace %s (--trace)", path);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", target, (int)getpid());
  const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) st = pt_fail_errno(PT_ERR_IO, "cannot write trace %s", path);
  else {
    close(fd);
    unlink(tmp);
  }
  free(target);
  return st;
}

pt_status pt_trace_finish(const char *path, size_t *ndropped) {
  atomic_store(&enabled, 0);
  pthread_mutex_lock(&mu);
  if (ndropped) *ndropped = dropped;
  /* Written next to what it replaces, then renamed over it: a symbolic
   * link's file (the link stays), never a FIFO or a device made since the
   * start's check. */
  char tmp[4200];
  char *target = NULL;
  pt_status st = pt_file_replace_target(path, &target);
  FILE *f = NULL;
  if (st == PT_OK) {
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", target, (int)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
      st = pt_fail_errno(PT_ERR_IO, "cannot write trace %s", path);
      if (fd >= 0) close(fd);
    }
  } else {
    st = pt_wrap(st, "cannot write trace %s", path);
  }
  if (f) {
    int pid = (int)getpid();
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%zu},\"traceEvents\":[\n", dropped);
    for (int i = 0; i < nnames; i++) {
      fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, names[i].tid);
      put_str(f, names[i].name);
      fprintf(f, "}}%s\n", i + 1 < nnames || count ? "," : ""); /* none after the last: JSON has no trailing commas */
    }
    for (size_t i = 0; i < count; i++) {
      const event *e = &events[i];
      fprintf(f, "{\"ph\":\"X\",\"name\":");
      put_str(f, e->name);
      fprintf(f, ",\"cat\":");
      put_str(f, e->cat);
      fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}%s\n", pid, e->tid, 1e6 * (e->t0 - origin),
              1e6 * (e->t1 - e->t0), i + 1 < count ? "," : "");
    }
    fprintf(f, "]}\n");
    if (fflush(f) || ferror(f)) st = pt_fail_errno(PT_ERR_IO, "writing trace %s", path);
    if (fclose(f) && st == PT_OK) st = pt_fail_errno(PT_ERR_IO, "writing trace %s", path);
    if (st == PT_OK && rename(tmp, target)) st = pt_fail_errno(PT_ERR_IO, "cannot write trace %s", path);
    if (st != PT_OK) unlink(tmp);
  }
  free(target);
  free(events);
  events = NULL;
  cap = count = 0;
  pthread_mutex_unlock(&mu);
  return st;
}
