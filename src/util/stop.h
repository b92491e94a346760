/* Stopping a run cleanly on a signal. Slurm sends SIGTERM at a job's time
 * limit and on preemption (then SIGKILL after KillWait), HTCondor sends it
 * on eviction, and a user presses Ctrl-C: in each case the run should lose
 * nothing. The program's signal handlers call pt_train_stop_request; the
 * trainer reads the request after each step, agrees on it with every other
 * worker (the flag travels with the loss's allreduce, so workers signalled
 * at different steps, or not at all, stop at the same one), writes a
 * checkpoint and returns with pt_train_result.stopped_by set. It lives in
 * util so that waits before training (a model file that is a FIFO) can
 * give up on it too. */
#ifndef PT_UTIL_STOP_H
#define PT_UTIL_STOP_H

/* The exit status of a run that stopped on a signal with a complete
 * checkpoint, to be resumed: HTCondor's checkpoint_exit_code and a
 * requeueing Slurm script test for it. */
#define PT_EXIT_CHECKPOINTED 85

/* Asks the running trainer to stop after its current step; sig is the
 * signal's number. Safe in a signal handler. Returns the number of
 * requests so far, this one included. */
int pt_train_stop_request(int sig);
/* The signal of the first request, or 0 if none. */
int pt_train_stop_signal(void);
/* The trainer has written the checkpoint a request asked for; what is
 * left is the run's closing lines. Safe in a signal handler. */
void pt_train_stop_saved(void);
int pt_train_stop_is_saved(void);
/* The signal of the first request (0 if none), and forgets the requests:
 * what a run that is over answered, or came too late for. */
int pt_train_stop_take(void);

#endif
