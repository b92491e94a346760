/* Progress reporting during an epoch. On a terminal: one line redrawn in
 * place with a bar, the running loss, images/s and the ETA. Elsewhere (a
 * log file, a batch job): a plain line every log-interval steps, because
 * carriage returns make unreadable Slurm logs. */
#ifndef PT_IO_PROGRESS_H
#define PT_IO_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
  FILE *out;
  int tty;          /* redraw in place */
  int log_interval; /* plain mode: steps between lines */
  int epoch, epochs, total;
  double t0, last_draw;
  char extra[160];  /* appended to every line when set (GPU utilisation and memory) */
  int base;         /* batches of the epoch done before this run's first (-1: none seen yet) */
  int dumb;         /* TERM=dumb: no escape sequences */
  int drawn;        /* characters the last redraw left on the line */
} pt_progress;

void pt_progress_start(pt_progress *p, FILE *out, int tty, int log_interval, int epoch, int epochs, int total);
/* done: batches finished this epoch; samples: images so far this epoch. */
void pt_progress_update(pt_progress *p, int done, int64_t step, double loss, double images_per_s);
void pt_progress_finish(pt_progress *p);
/* Text shown at the end of the following lines ("" for none). */
void pt_progress_set_extra(pt_progress *p, const char *text);

#endif
