/* Metrics log: one JSON object per line ("JSON lines"), e.g.
 *   {"event":"epoch","epoch":1,"train_loss":0.53,"val_acc":0.981}
 * so a plotting script reads it with one json.loads per line, and a run that
 * is killed mid-way leaves every finished line intact.
 *
 * A line is built field by field between begin and end:
 *   pt_metrics_begin(m, "epoch");
 *   pt_metrics_int(m, "epoch", 1);
 *   pt_metrics_num(m, "train_loss", 0.53);
 *   PT_TRY(pt_metrics_end(m));
 * The field calls cannot fail at the call site: the first problem (a NULL or
 * repeated key, a field outside begin/end, out of memory) is kept and
 * returned by pt_metrics_end, which then writes nothing for that line. So a
 * caller checks one status per line, not one per number.
 *
 * end writes the line to the file at once, so a crash loses at most the line being
 * built. Non-finite numbers become null, keeping every line valid JSON.
 * A pt_metrics is not thread-safe; one thread (the trainer) owns it.
 */
#ifndef PT_IO_METRICS_H
#define PT_IO_METRICS_H

#include <stdint.h>
#include "util/error.h"

typedef struct pt_metrics pt_metrics;

/* append != 0 continues an existing file (a resumed run); 0 truncates it. */
pt_status pt_metrics_open(const char *path, int append, pt_metrics **out);
/* Starts a line whose first key is "event": event. */
void pt_metrics_begin(pt_metrics *m, const char *event);
void pt_metrics_int(pt_metrics *m, const char *key, int64_t value);
void pt_metrics_num(pt_metrics *m, const char *key, double value); /* NaN/inf -> null */
void pt_metrics_str(pt_metrics *m, const char *key, const char *value);
void pt_metrics_bool(pt_metrics *m, const char *key, int value);
/* Writes and flushes the line, or reports the first error since begin. */
pt_status pt_metrics_end(pt_metrics *m);
/* Flushes, fsyncs and closes; reports an unfinished line or a write error.
 * Frees m whatever happens; NULL is ok. */
pt_status pt_metrics_close(pt_metrics *m);

#endif
