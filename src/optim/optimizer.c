/* Optimizer set-up and dispatch; the update rules live one per file. */
#include "optim/optimizer.h"

#include <stdlib.h>
#include <string.h>

#include "ops/cpu/ops.h"
#include "ops/cpu/updates.h"

static const char *names[] = {"sgd", "adam", "adamw", "adadelta"};

pt_status pt_opt_kind_parse(const char *name, pt_opt_kind *kind) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, names[i])) {
      *kind = (pt_opt_kind)i;
      return PT_OK;
    }
  return pt_fail(PT_ERR_ARG, "unknown optimizer '%s' (expected sgd, adam, adamw or adadelta)", name);
}

const char *pt_opt_kind_name(pt_opt_kind kind) { return names[kind]; }

void pt_opt_config_defaults(pt_opt_config *c, pt_opt_kind kind) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->lr = 0.01f;
  c->beta1 = 0.9f;
  c->beta2 = 0.999f;
  c->eps = kind == PT_OPT_ADADELTA ? 1e-6f : 1e-8f;
  c->rho = 0.9f;
  c->weight_decay = kind == PT_OPT_ADAMW ? 0.01f : 0.0f; /* torch.optim.AdamW's default */
}

pt_status pt_opt_config_check(const pt_opt_config *c) {
  if (!(c->lr >= 0.0f)) return pt_fail(PT_ERR_ARG, "learning rate %g: expected >= 0", c->lr);
  if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
    return pt_fail(PT_ERR_ARG, "momentum %g: expected in [0, 1)", c->momentum);
  if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
    return pt_fail(PT_ERR_ARG, "Nesterov momentum requires a momentum > 0 and zero dampening");
  if (!(c->weight_decay >= 0.0f)) return pt_fail(PT_ERR_ARG, "weight decay %g: expected >= 0", c->weight_decay);
  return PT_OK;
}

pt_status pt_optimizer_init(pt_optimizer *o, const pt_opt_config *cfg, size_t n) {
  memset(o, 0, sizeof *o);
  PT_TRY(pt_opt_config_check(cfg));
  o->cfg = *cfg;
  o->n = n;
  switch (cfg->kind) {
    case PT_OPT_SGD:
      o->nstate = cfg->momentum > 0.0f ? 1 : 0;
      o->state_name[0] = "momentum_buffer";
      break;
    case PT_OPT_ADAM:
    case PT_OPT_ADAMW:
      o->nstate = 2;
      o->state_name[0] = "exp_avg";
      o->state_name[1] = "exp_avg_sq";
      break;
    case PT_OPT_ADADELTA:
      o->nstate = 2;
      o->state_name[0] = "square_avg";
      o->state_name[1] = "acc_delta";
      break;
  }
  for (int i = 0; i < o->nstate; i++)
    if (!(o->state[i] = pt_alloc_aligned(sizeof(float) * n))) {
      pt_optimizer_free(o);
      return PT_ERR_NOMEM;
    }
  return PT_OK;
}

void pt_optimizer_free(pt_optimizer *o) {
  for (int i = 0; i < 2; i++) free(o->state[i]);
  memset(o, 0, sizeof *o);
}

/* The update is element-wise, so blocks of the flat arrays run on the ops'
 * thread pool; each element's arithmetic is the same whatever the split. */
typedef struct {
  pt_optimizer *o;
  float *param;
  const float *grad;
  float lr;
  size_t base; /* the range stepped starts here */
} step_job;

static void step_block(void *ctx, size_t lo, size_t hi) {
  step_job *j = ctx;
  lo += j->base;
  hi += j->base;
  pt_optimizer *o = j->o;
  const size_t n = hi - lo;
  float *p = j->param + lo, *s0 = o->state[0] ? o->state[0] + lo : NULL, *s1 = o->state[1] ? o->state[1] + lo : NULL;
  const float *g = j->grad + lo;
  switch (o->cfg.kind) {
    case PT_OPT_SGD: pt_sgd_update(&o->cfg, n, p, g, s0, o->step == 1, j->lr); break;
    case PT_OPT_ADAM:
    case PT_OPT_ADAMW: pt_adam_update(&o->cfg, n, p, g, s0, s1, o->step, j->lr); break;
    case PT_OPT_ADADELTA: pt_adadelta_update(&o->cfg, n, p, g, s0, s1, j->lr); break;
  }
}

void pt_optimizer_step(pt_optimizer *o, float *param, const float *grad, float lr) {
  pt_optimizer_step_range(o, param, grad, lr, 0, o->n);
}

void pt_optimizer_step_range(pt_optimizer *o, float *param, const float *grad, float lr, size_t lo, size_t hi) {
  o->step++;
  step_job j = {o, param, grad, lr, lo};
  pt_parallel_for(hi - lo, 1 << 15, step_block, &j);
}
