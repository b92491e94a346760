/* Optimizers over one flat parameter array, with PyTorch's update rules
 * (torch.optim 1.13, single-tensor code path, written in the same operation
 * order so results agree to float rounding).
 *
 * State is up to two arrays the size of the parameters plus a step count;
 * they are named as PyTorch names them so a checkpoint's optimizer state is
 * readable: SGD "momentum_buffer"; Adam/AdamW "exp_avg", "exp_avg_sq";
 * Adadelta "square_avg", "acc_delta".
 */
#ifndef PT_OPTIM_OPTIMIZER_H
#define PT_OPTIM_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum { PT_OPT_SGD, PT_OPT_ADAM, PT_OPT_ADAMW, PT_OPT_ADADELTA } pt_opt_kind;

typedef struct {
  pt_opt_kind kind;
  float lr;
  float momentum, dampening; /* SGD */
  int nesterov;              /* SGD */
  float weight_decay;
  float beta1, beta2, eps;   /* Adam, AdamW; eps also Adadelta */
  float rho;                 /* Adadelta */
} pt_opt_config;

struct pt_backend;

typedef struct {
  pt_opt_config cfg;
  const struct pt_backend *be; /* where the state lives and the update runs */
  size_t n;
  int nstate;          /* state arrays in use (0..2) */
  float *state[2];     /* (n) each, backend memory */
  float *hstate[2];    /* host copies for checkpoints: state itself on the CPU */
  const char *state_name[2];
  int64_t step;        /* steps taken */
} pt_optimizer;

/* The names pt_opt_kind_parse takes, as flag tables and model specs list them. */
#define PT_OPT_NAMES "sgd|adam|adamw|adadelta"
pt_status pt_opt_kind_parse(const char *name, pt_opt_kind *kind);
const char *pt_opt_kind_name(pt_opt_kind kind);
/* PyTorch's defaults for a kind (lr left to the caller). */
void pt_opt_config_defaults(pt_opt_config *c, pt_opt_kind kind);
pt_status pt_opt_config_check(const pt_opt_config *c);

pt_status pt_optimizer_init(pt_optimizer *o, const pt_opt_config *cfg, size_t n);
/* The same with the state on a backend (the calling thread bound to it). */
pt_status pt_optimizer_init_on(pt_optimizer *o, const pt_opt_config *cfg, size_t n, const struct pt_backend *be);
/* hstate <- state (waits for the device) / state <- hstate; nothing on the CPU. */
pt_status pt_optimizer_to_host(pt_optimizer *o);
void pt_optimizer_from_host(pt_optimizer *o);
void pt_optimizer_free(pt_optimizer *o);
/* One step at learning rate lr (the schedule's current value). */
void pt_optimizer_step(pt_optimizer *o, float *param, const float *grad, float lr);
/* The same step for elements [lo, hi) only (a pipeline stage updates the
 * parameters it holds); param and grad are the whole arrays. */
void pt_optimizer_step_range(pt_optimizer *o, float *param, const float *grad, float lr, size_t lo, size_t hi);

/* Per-epoch learning-rate schedules, stepped once per epoch as the tutorials do. */
typedef enum { PT_SCHED_NONE, PT_SCHED_STEP, PT_SCHED_COSINE } pt_sched_kind;
#define PT_SCHED_NAMES "step|cosine|none" /* what pt_sched_kind_parse takes */
pt_status pt_sched_kind_parse(const char *name, pt_sched_kind *kind);
const char *pt_sched_kind_name(pt_sched_kind kind);
/* lr during epoch (0-based): StepLR(step_size=1, gamma) or
 * CosineAnnealingLR(T_max=total_epochs, eta_min=0). */
float pt_sched_lr(pt_sched_kind kind, float base_lr, float gamma, int epoch, int total_epochs);

#endif
