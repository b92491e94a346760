/* Chrome trace-event recording (--trace FILE.json), for Perfetto and
 * chrome://tracing: complete events ("ph":"X") per thread, so each thread
 * (the trainer, the data loader, later each rank) is one track.
 *
 * Events go into one buffer allocated when tracing starts; recording takes a
 * mutex briefly, and a full buffer stops recording (the file says how many
 * were dropped) rather than allocating during training. When tracing is
 * off, a call costs one load and a branch.
 */
#ifndef PT_UTIL_TRACE_H
#define PT_UTIL_TRACE_H

#include <stddef.h>

#include "util/error.h"

/* The spans a training run's trace holds at most: 2^21, 80 MB while it
 * runs (40 bytes a span), about 200 MB of JSON (some 100 bytes a span). */
#define PT_TRACE_MAX_EVENTS (1 << 21)

pt_status pt_trace_start(size_t max_events);
int pt_trace_enabled(void);
/* A span from t0 to t1 (pt_now() seconds) on the calling thread. name and
 * cat must stay valid until pt_trace_finish (string literals, or layer
 * labels of a model not yet destroyed). */
void pt_trace_span(const char *name, const char *cat, double t0, double t1);
/* Names the calling thread's track. */
void pt_trace_thread_name(const char *name);
/* Whether the trace can be written to path, tried as pt_trace_finish will
 * write it (a file beside it, then renamed): checked before a run, so that
 * a mistyped directory is said before hours of training rather than after. */
pt_status pt_trace_check_path(const char *path);
/* Writes the file atomically enough for a trace (write, then rename) and
 * frees the buffer. *dropped (may be NULL): the spans past the buffer's
 * max_events, left out. */
pt_status pt_trace_finish(const char *path, size_t *dropped);

#endif
