/* The library's handles (include/ptrain.h) as the rest of ptrain sees
 * them: the CLI reaches through them to what the public API leaves out. */
#ifndef PT_API_API_H
#define PT_API_API_H

#include "ptrain.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "train/trainer.h"

struct pt_net {
  pt_model_spec spec;
  char *spec_text;  /* recorded in every checkpoint and save */
  pt_model *m;      /* the weights, on the CPU; NULL until trained or loaded */
  /* The data set the weights were trained on, where it is one of ours:
   * recorded by the run that trained them or read from their file; ""
   * where none is known (the caller's arrays, PyTorch's weights). */
  char trained_on[24];
};

struct pt_data {
  pt_dataset ds;
  int kind;         /* a pt_dataset_kind, or -1 for the caller's arrays */
  char *dir;        /* where it was read from; NULL for arrays */
};

struct pt_run {
  pt_net *net;
  const pt_data *train, *test;
  pt_config pub;
  pt_train_config cfg;   /* pub in the trainer's terms */
  pt_comm *comm;         /* ddp, and stages as MPI ranks: made by pt_run_train */
  pt_result result;
  int trained;
  int stop_signal;       /* the signal a stop was requested by here (0: none, or only another rank's) */
  int stop_saved;        /* and its checkpoint was written (rank 0 knows) */
  int failed_alike;      /* pt_run_train failed on every rank alike (settings that differ between ranks) */
};

/* The checks pt_run_train makes of cfg's settings against each other and
 * the net, without data: what the command line reports as usage errors
 * (PT_ERR_ARG) before it reads any. dataset: the one to be loaded (NULL:
 * the net's); comm: the MPI world of a ddp run or of stages as ranks.
 * plan (may be NULL) gets the run's plan, for the checks against the data
 * once it is read (pt_train_check_batches). */
pt_status pt_run_check(const pt_net *net, const char *dataset, const pt_config *cfg, pt_comm *comm,
                       pt_train_plan *plan);

/* Whether the calling thread is inside pt_run_train: a callback of its run. */
int pt_run_training_here(void);

/* pt_evaluate in batches of at most batch_max, flushing denormals or not
 * (util/fpmode.h). */
pt_status pt_evaluate_with(pt_net *net, const pt_data *data, const char *device, int threads, int batch_max,
                           int flush, pt_eval *out);

/* The net's model with room for batches of at least want samples (up to
 * 256), rebuilt with the same weights when it has less. */
pt_status pt_net_model_for(pt_net *net, int want, pt_model **m);

#endif
