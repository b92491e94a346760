/* Learning-rate schedules, evaluated in closed form from the epoch so that a
 * resumed run needs no schedule state to agree with an uninterrupted one. */
#include <math.h>
#include <string.h>

#include "optim/optimizer.h"

pt_status pt_sched_kind_parse(const char *name, pt_sched_kind *kind) {
  if (!strcmp(name, "none")) *kind = PT_SCHED_NONE;
  else if (!strcmp(name, "step")) *kind = PT_SCHED_STEP;
  else if (!strcmp(name, "cosine")) *kind = PT_SCHED_COSINE;
  else return pt_fail(PT_ERR_ARG, "unknown scheduler '%s' (expected step, cosine or none)", name);
  return PT_OK;
}

const char *pt_sched_kind_name(pt_sched_kind kind) {
  return kind == PT_SCHED_STEP ? "step" : kind == PT_SCHED_COSINE ? "cosine" : "none";
}

float pt_sched_lr(pt_sched_kind kind, float base_lr, float gamma, int epoch, int total_epochs) {
  switch (kind) {
    case PT_SCHED_STEP: return (float)(base_lr * pow(gamma, epoch));
    case PT_SCHED_COSINE:
      if (total_epochs < 1) return base_lr;
      return (float)(0.5 * base_lr * (1.0 + cos(M_PI * (double)epoch / (double)total_epochs)));
    case PT_SCHED_NONE: break;
  }
  return base_lr;
}
