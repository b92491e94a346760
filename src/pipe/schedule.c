#include "pipe/schedule.h"

#include <string.h>

pt_status pt_pipe_schedule_parse(const char *name, pt_pipe_schedule *kind) {
  if (!strcmp(name, "gpipe")) *kind = PT_PIPE_GPIPE;
  else if (!strcmp(name, "1f1b")) *kind = PT_PIPE_1F1B;
  else return pt_fail(PT_ERR_ARG, "--schedule %s: expected gpipe or 1f1b", name);
  return PT_OK;
}

const char *pt_pipe_schedule_name(pt_pipe_schedule kind) { return kind == PT_PIPE_GPIPE ? "gpipe" : "1f1b"; }

/* Forwards stage s may run before its first backward: the later stages
 * each need one to start. */
static int warmup(pt_pipe_schedule kind, int stages, int s, int M) {
  int w = kind == PT_PIPE_GPIPE ? M : stages - s - 1;
  return w < M ? w : M;
}

int pt_pipe_schedule_ops(pt_pipe_schedule kind, int stages, int s, int M, pt_pipe_op *ops) {
  const int w = warmup(kind, stages, s, M);
  int n = 0, f = 0, b = 0;
  while (f < w) ops[n++] = (pt_pipe_op){1, f++};
  while (f < M) { /* steady state: one forward, one backward */
    ops[n++] = (pt_pipe_op){1, f++};
    ops[n++] = (pt_pipe_op){0, b++};
  }
  while (b < M) ops[n++] = (pt_pipe_op){0, b++};
  return n;
}

int pt_pipe_schedule_live(pt_pipe_schedule kind, int stages, int s, int M) {
  const int w = warmup(kind, stages, s, M);
  return w < M ? w + 1 : M;
}

double pt_pipe_ideal_bubble(int stages, int M) { return (double)(stages - 1) / (double)(M + stages - 1); }
