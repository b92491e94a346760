#include "util/notice.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

enum { LINE = 512 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char lines[PT_NOTICE_MAX][LINE];
static int held;       /* lines[0..held) wait to be printed */
static long dropped;   /* lines past PT_NOTICE_MAX since the last flush */
static atomic_int waiting;

void pt_notice(const char *fmt, ...) {
  char line[LINE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&lock);
  int seen = 0;
  for (int i = 0; i < held && !seen; i++) seen = !strcmp(lines[i], line);
  if (!seen && held < PT_NOTICE_MAX) memcpy(lines[held++], line, sizeof line);
  else if (!seen) dropped++;
  atomic_store(&waiting, 1);
  pthread_mutex_unlock(&lock);
}

int pt_notice_pending(void) { return atomic_load_explicit(&waiting, memory_order_relaxed); }

int pt_notice_flush(FILE *out) {
  if (!out) return 0;
  pthread_mutex_lock(&lock);
  const int n = held;
  for (int i = 0; i < held; i++) fprintf(out, "warning: %s\n", lines[i]);
  if (dropped) fprintf(out, "warning: %ld more warning%s not shown\n", dropped, dropped == 1 ? "" : "s");
  fflush(out);
  held = 0;
  dropped = 0;
  atomic_store(&waiting, 0);
  pthread_mutex_unlock(&lock);
  return n;
}
