/* The settings every rank of an MPI launch must share. Ranks are started
 * one by one (mpirun, srun), each with its own command line, and nothing
 * else makes them agree: a rank with another model, batch size or seed
 * would post collectives of other sizes (MPI's "message truncated", or a
 * crash), or train something else than rank 0 without a word.
 */
#ifndef PT_TRAIN_RANK_SETTINGS_H
#define PT_TRAIN_RANK_SETTINGS_H

#include "comm/comm.h"
#include "data/dataset.h"
#include "train/trainer.h"

/* Called by every rank of comm, before any collective whose shape depends
 * on the settings: compares this rank's settings that must agree with rank
 * 0's. On a difference every rank gets the same PT_ERR_ARG, naming the
 * first rank that differs, the setting and both values, and *differ = 1 (no
 * rank then needs taking down: all stop alike). Other failures are the
 * communicator's, with *differ = 0. */
pt_status pt_rank_settings_agree(pt_comm *comm, const pt_train_config *c, const pt_train_plan *r,
                                 const pt_dataset *train, const pt_dataset *test, int *differ);

/* The same for a resumed position (each rank reads the checkpoint
 * directory itself, and ranks may see it differently: node-local disks,
 * a cache). */
pt_status pt_rank_position_agree(pt_comm *comm, int64_t step, int epoch, int batch, int *differ);

#endif
