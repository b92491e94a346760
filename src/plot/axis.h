/* An axis's ticks: multiples of a step of 1, 2 or 5 times a power of ten,
 * about 5 over the axis, each labelled with the value it stands at.
 */
#ifndef PT_PLOT_AXIS_H
#define PT_PLOT_AXIS_H

#include <stddef.h>

/* A step of 1, 2 or 5 times a power of ten giving about 5 ticks over span. */
double pt_axis_step(double span);
/* The ticks are the multiples of step within [lo, hi]: the first is *first
 * times step; returns the count, at most 101. The ends of an axis need
 * not be multiples of step (they may be of a finer one). */
int pt_axis_ticks(double lo, double hi, double step, double *first);
/* v as its tick's label, with the decimals step needs. */
void pt_axis_label(char *buf, size_t len, double v, double step);

#endif
