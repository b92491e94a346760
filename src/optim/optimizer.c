/* Optimizer set-up and dispatch; the update rules live one per file. */
#include "optim/optimizer.h"

#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"

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
  /* as torch.optim checks them; the Adam kernel's exact division by its
   * bias correction also needs that correction positive */
  if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
    return pt_fail(PT_ERR_ARG, "Adam betas (%g, %g): expected each in [0, 1)", c->beta1, c->beta2);
  if (!(c->eps >= 0.0f)) return pt_fail(PT_ERR_ARG, "epsilon %g: expected >= 0", c->eps);
  return PT_OK;
}

pt_status pt_optimizer_init(pt_optimizer *o, const pt_opt_config *cfg, size_t n) {
  return pt_optimizer_init_on(o, cfg, n, pt_backend_cpu());
}

pt_status pt_optimizer_init_on(pt_optimizer *o, const pt_opt_config *cfg, size_t n, const pt_backend *be) {
  memset(o, 0, sizeof *o);
  PT_TRY(pt_opt_config_check(cfg));
  o->cfg = *cfg;
  o->n = n;
  o->be = be;
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
  for (int i = 0; i < o->nstate; i++) {
    if (!(o->state[i] = be->alloc(sizeof(float) * (n ? n : 1)))) {
      pt_optimizer_free(o);
      return PT_ERR_NOMEM;
    }
    /* On the CPU the host copy is the state itself. */
    o->hstate[i] = be->kind == PT_BACKEND_CPU ? o->state[i] : pt_alloc_aligned(sizeof(float) * (n ? n : 1));
    if (!o->hstate[i]) {
      pt_optimizer_free(o);
      return PT_ERR_NOMEM;
    }
  }
  return PT_OK;
}

void pt_optimizer_free(pt_optimizer *o) {
  for (int i = 0; i < 2; i++) {
    if (o->hstate[i] != o->state[i]) free(o->hstate[i]);
    if (o->state[i]) o->be->free(o->state[i]);
  }
  memset(o, 0, sizeof *o);
}

pt_status pt_optimizer_to_host(pt_optimizer *o) {
  for (int i = 0; i < o->nstate; i++)
    if (o->hstate[i] != o->state[i]) PT_TRY(o->be->download(o->hstate[i], o->state[i], sizeof(float) * o->n));
  return PT_OK;
}

void pt_optimizer_from_host(pt_optimizer *o) {
  for (int i = 0; i < o->nstate; i++)
    if (o->hstate[i] != o->state[i]) o->be->upload(o->state[i], o->hstate[i], sizeof(float) * o->n);
}

void pt_optimizer_step(pt_optimizer *o, float *param, const float *grad, float lr) {
  pt_optimizer_step_range(o, param, grad, lr, 0, o->n);
}

/* The backend runs the element-wise rule over the range (the CPU in blocks
 * on its thread pool; each element's arithmetic is the same whatever the
 * split). */
void pt_optimizer_step_range(pt_optimizer *o, float *param, const float *grad, float lr, size_t lo, size_t hi) {
  o->step++;
  const size_t n = hi - lo;
  float *p = param + lo, *s0 = o->state[0] ? o->state[0] + lo : NULL, *s1 = o->state[1] ? o->state[1] + lo : NULL;
  const float *g = grad + lo;
  switch (o->cfg.kind) {
    case PT_OPT_SGD: o->be->sgd_update(&o->cfg, n, p, g, s0, o->step == 1, lr); break;
    case PT_OPT_ADAM:
    case PT_OPT_ADAMW: o->be->adam_update(&o->cfg, n, p, g, s0, s1, o->step, lr); break;
    case PT_OPT_ADADELTA: o->be->adadelta_update(&o->cfg, n, p, g, s0, s1, lr); break;
  }
}
