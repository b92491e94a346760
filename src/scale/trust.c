/* Which measurements a sweep may judge from.
 *
 * A configuration's figures are the difference of two runs, so start-up
 * cancels; what does not cancel is noise: another process taking a core
 * for a few milliseconds, a page fault storm, the clock ramping. Its size
 * does not shrink with the run, so a difference of a few tens of
 * milliseconds (10 steps of a small MLP) is mostly noise: such a sweep
 * reported 5.12x from 2 workers on 2 cores, and its recommendation flipped
 * from one run of the command to the next. Two signs give it away without
 * running anything again: too little time measured, and a speed-up beyond
 * what the workers can give, which no real measurement shows. A little
 * above linear can be real (each worker's share fits the cache better),
 * hence the tolerance in PT_SCALE_MAX_EFFICIENCY. */
#include <math.h>
#include <stdio.h>

#include "scale/scale.h"

pt_scale_steadiness pt_scale_steadiness_of(const pt_scale_totals *shorter, const pt_scale_totals *longer, char *why,
                                           size_t len) {
  const double ds = longer->seconds - shorter->seconds, di = longer->images - shorter->images;
  if (len) why[0] = 0;
  if (!(ds > 0) || !(di > 0) || !(longer->steps > shorter->steps)) {
    snprintf(why, len, "the longer run took no longer than the shorter (%.1f ms against %.1f ms), so these are its "
             "own figures, start-up included; raise --steps", 1e3 * longer->seconds, 1e3 * shorter->seconds);
    return PT_SCALE_ROUGH_NO_DIFF;
  }
  if (ds < PT_SCALE_MIN_MEASURED_S) {
    snprintf(why, len, "its %d measured steps took %.0f ms in all, too little to outweigh a busy machine's noise "
             "(%.0f ms at least); raise --steps", longer->steps - shorter->steps, 1e3 * ds,
             1e3 * PT_SCALE_MIN_MEASURED_S);
    return PT_SCALE_ROUGH_SHORT;
  }
  return PT_SCALE_STEADY;
}

int pt_scale_impossible_speedup(double speedup, int workers, char *why, size_t len) {
  if (len) why[0] = 0;
  if (workers < 1 || !(speedup / workers > PT_SCALE_MAX_EFFICIENCY)) return 0;
  snprintf(why, len, "%.0f%% efficiency, more than %d worker%s can give: the runs' noise, not speed; raise --steps",
           100.0 * speedup / workers, workers, workers == 1 ? "" : "s");
  return 1;
}

int pt_scale_steps_for(const pt_scale_totals *shorter, const pt_scale_totals *longer, int measured) {
  const double ds = longer->seconds - shorter->seconds, dn = (double)(longer->steps - shorter->steps);
  if (!(ds > 0) || !(dn > 0) || ds >= PT_SCALE_MIN_MEASURED_S) return measured;
  const double want = ceil(dn * 2 * PT_SCALE_MIN_MEASURED_S / ds), most = (double)measured * PT_SCALE_MAX_STEPS_FACTOR;
  return want > most ? (int)most : want > measured ? (int)want : measured;
}
