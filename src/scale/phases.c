/* A configuration's step time split into phases, from its two runs.
 *
 * The step time is the difference of the two runs' seconds over the
 * difference of their steps, so start-up and the first steps cancel. Each
 * phase's own difference does the same, and the differences add up to the
 * step, since each run's phases add up to its seconds. But a phase the runs
 * spend little time in can come out below zero: a pipeline's short run
 * that waited 10 ms longer for one message than the long run did gives its
 * waiting a negative difference. Dropping such a phase to zero left the
 * others adding up to 10% more than the step on a busy machine. Where any
 * difference is negative the differences are not to be trusted phase by
 * phase, so the step is split in the shares the longer run measured over
 * all its steps instead: the phases again add up to the step, and no
 * phase is negative. */
#include "scale/scale.h"

void pt_scale_phases(const double short_s[PT_SCALE_NPHASES], const double long_s[PT_SCALE_NPHASES], double steps,
                     double ms_per_step, double out_ms[PT_SCALE_NPHASES]) {
  int negative = 0;
  for (int k = 0; k < PT_SCALE_NPHASES; k++) {
    out_ms[k] = 1e3 * (long_s[k] - short_s[k]) / steps;
    /* A difference a hair below zero is a phase too small to measure. */
    if (out_ms[k] < -1e-3 * ms_per_step) negative = 1;
    if (out_ms[k] < 0) out_ms[k] = 0;
  }
  if (!negative) return;
  double total = 0;
  for (int k = 0; k < PT_SCALE_NPHASES; k++) total += long_s[k] > 0 ? long_s[k] : 0;
  for (int k = 0; k < PT_SCALE_NPHASES; k++)
    out_ms[k] = total > 0 && long_s[k] > 0 ? ms_per_step * long_s[k] / total : 0;
}
