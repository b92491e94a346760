/* The ranks' start-up checks, agreed: a rank that failed its checks alone
 * (its settings, its model file) and returned would leave the others
 * waiting for it in their first collective until the timeout, or, before
 * MPI started, for ever. */
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm.h"

pt_status pt_comm_agree_checks(pt_comm *comm, int outcome, int *first, int *first_outcome, char *why,
                               size_t why_len) {
  *first = -1;
  *first_outcome = 0;
  if (comm->size == 1) return PT_OK;
  double *at = calloc((size_t)comm->size, sizeof *at); /* (ranks) each rank's outcome */
  if (!at) return pt_fail(PT_ERR_NOMEM, "out of memory for %d ranks' start-up checks", comm->size);
  at[comm->rank] = outcome;
  comm->what = "the ranks' start-up checks";
  pt_status st = pt_comm_allreduce_f64(comm, at, (size_t)comm->size);
  for (int k = 0; st == PT_OK && k < comm->size && *first < 0; k++)
    if (at[k] > 0) {
      *first = k;
      *first_outcome = (int)at[k];
    }
  free(at);
  if (st == PT_OK && *first >= 0 && why) {
    if (*first == comm->rank) snprintf(why, why_len, "%s", pt_error_message());
    comm->what = "the failed rank's reason";
    st = pt_comm_bcast(comm, why, why_len, *first);
    why[why_len - 1] = 0;
  }
  return st;
}
