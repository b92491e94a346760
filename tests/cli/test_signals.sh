# A run asked to stop by SIGTERM (Slurm's time limit, preemption), SIGUSR1
# (sbatch --signal) or Ctrl-C finishes its step, writes a checkpoint even
# without --save-model, and exits 85; resumed, it ends with the weights of
# a run never stopped, bit for bit, on one worker and under --parallel dp.
# A second Ctrl-C quits at once with 130 (85 if the checkpoint is written). A signal while the run starts
# ends it with 85 too.
source "$(dirname "$0")/lib.sh"
need_fmnist

small_dropout_spec "$TMP/small.txt"
# run DIR flags...: trains 3 epochs in the foreground, with a checkpoint
run() {
  local dir=$1; shift
  "$PTRAIN" train --model-file "$TMP/small.txt" --epochs 3 --save-model --checkpoint-dir "$TMP/$dir" --quiet "$@" \
    >>"$TMP/$dir.out" 2>&1 || fail "train $dir $*: $(cat "$TMP/$dir.out")"
}
# stop SIGNAL DIR flags...: the same run, sent SIGNAL as soon as epoch 1's
# metrics line is written; expects exit 85 at that epoch's end or in epoch 2
stop() {
  local sig=$1 dir=$2; shift 2
  "$PTRAIN" train --model-file "$TMP/small.txt" --epochs 3 --checkpoint-dir "$TMP/$dir" --metrics "$TMP/$dir.jsonl" \
    "$@" >"$TMP/$dir.out" 2>&1 &
  local pid=$! rc=0
  for _ in $(seq 600); do [[ -s $TMP/$dir.jsonl ]] && break; sleep 0.05; done
  [[ -s $TMP/$dir.jsonl ]] || { kill -KILL $pid; fail "$dir: no epoch finished in 30 s: $(cat "$TMP/$dir.out")"; }
  kill -"$sig" $pid
  wait $pid || rc=$?
  [[ $rc == 85 ]] || fail "$dir: SIG$sig gave exit $rc, expected 85: $(cat "$TMP/$dir.out")"
  local step per
  per=$(sed -n 's/.*"epoch":1,"step":\([0-9]*\),.*/\1/p' "$TMP/$dir.jsonl")
  step=$(sed -n 's/.*stopped by .* after step \([0-9]*\);.*/\1/p' "$TMP/$dir.out")
  [[ -n $step ]] || fail "$dir: no 'stopped by ... after step N' line: $(cat "$TMP/$dir.out")"
  # Sent as epoch 1's line is written: seen after its evaluation (the
  # epoch's end) or after a step of epoch 2, as the threads fall.
  ((step >= per && step < 2 * per)) ||
    fail "$dir: stopped at step $step, expected epoch 1's end ($per) or a step inside epoch 2 (the machine too slow or too fast for this test?)"
  [[ -f $TMP/$dir/model.safetensors && -f $(printf '%s/step-%012d/state.safetensors' "$TMP/$dir" "$step") ]] ||
    fail "$dir: no checkpoint of step $step after SIG$sig: $(ls -R "$TMP/$dir" 2>&1)"
  pass "SIG$sig $*: exit 85 after step $step, checkpoint written"
}

run straight --threads 1
stop TERM term --threads 1   # no --save-model: the signal writes one anyway
run term --threads 1 --resume
cmp -s "$TMP/straight/model.safetensors" "$TMP/term/model.safetensors" ||
  fail "stopped by SIGTERM and resumed differs from the straight run"
pass "SIGTERM, --resume: the straight run's weights, bit for bit"

run dp-straight --parallel dp --workers 2 --threads 2
stop USR1 dp --parallel dp --workers 2 --threads 2
run dp --parallel dp --workers 2 --threads 2 --resume
cmp -s "$TMP/dp-straight/model.safetensors" "$TMP/dp/model.safetensors" ||
  fail "dp: stopped by SIGUSR1 and resumed differs from the straight run"
pass "dp, SIGUSR1, --resume: the straight run's weights, bit for bit"

# Ctrl-C twice: out at once, 130 (or 85 after the save). Two signals sent back to back may merge
# into one, so the second goes after the first is seen, inside a step long
# enough (mnist-cnn, 512 images a step, about 0.3 s on one thread).
"$PTRAIN" train --model mnist-cnn --batch-size 512 --threads 1 --log-interval 1 --checkpoint-dir "$TMP/int" \
  >"$TMP/int.out" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "step 1 " "$TMP/int.out" 2>/dev/null && break; sleep 0.05; done
kill -INT $pid
for _ in $(seq 2000); do grep -q "signal received" "$TMP/int.out" && break; done
kill -INT $pid
rc=0
wait $pid || rc=$?
# Which of the two messages depends on when the second came; each must be
# true, and the status say the same: 85 once the checkpoint is complete
# (a requeue looks for it), else 130.
if grep -q "Ctrl-C again: quitting now; the checkpoint is written" "$TMP/int.out"; then
  [[ $rc == 85 ]] || fail "two SIGINTs, the checkpoint written: exit $rc, expected 85: $(cat "$TMP/int.out")"
  compgen -G "$TMP/int/step-*/state.safetensors" >/dev/null ||
    fail "the second SIGINT claimed a written checkpoint: $(ls -RA "$TMP/int" 2>&1)"
else
  [[ $rc == 130 ]] || fail "two SIGINTs gave exit $rc, expected 130: $(cat "$TMP/int.out")"
  grep -q "Ctrl-C again: quitting now, without a checkpoint of this step" "$TMP/int.out" ||
    fail "the second SIGINT said neither message: $(cat "$TMP/int.out")"
fi
# a save cut short by the second SIGINT is cleared by the next save
if compgen -G "$TMP/int/.partial*" >/dev/null; then
  "$PTRAIN" train --model-file "$TMP/small.txt" --max-steps 1 --save-model --checkpoint-dir "$TMP/int" --quiet \
    >/dev/null 2>&1 || fail "a save after a cut one"
  ! compgen -G "$TMP/int/.partial*" >/dev/null || fail "the cut save was not cleared: $(ls -A "$TMP/int")"
fi
pass "two SIGINTs: out at once, 130 (85 where the checkpoint was written)"

# A signal during start-up (Slurm preempting a job that is still loading)
# ends the run with 85 as well, not the default action's 143, so that the
# job is requeued. Deterministic: the model file is a FIFO, and the writer's
# open returns only once ptrain has opened it, its handlers then in place;
# its first line is written before the signal (so ptrain is reading), the
# rest only after the signal was received.
mkfifo "$TMP/spec.fifo"
"$PTRAIN" train --model-file "$TMP/spec.fifo" --checkpoint-dir "$TMP/early" --metrics "$TMP/early.jsonl" \
  >"$TMP/early.out" 2>&1 &
pid=$!
exec 3>"$TMP/spec.fifo"
echo "# a spec written in two parts" >&3
kill -TERM $pid
for _ in $(seq 600); do grep -q "signal received" "$TMP/early.out" && break; sleep 0.05; done
cat "$TMP/small.txt" >&3
exec 3>&-
rc=0
wait $pid || rc=$?
[[ $rc == 85 ]] || fail "SIGTERM while starting gave exit $rc, expected 85: $(cat "$TMP/early.out")"
grep -q "stopped by Terminated before training began; nothing to checkpoint (exit status 85" "$TMP/early.out" ||
  fail "SIGTERM while starting: $(cat "$TMP/early.out")"
# It promised no checkpoint: there is no step to write one of.
grep -q "^ptrain: signal received: stopping before training begins$" "$TMP/early.out" &&
  ! grep -q "to write a checkpoint" "$TMP/early.out" || fail "SIGTERM while starting promised: $(cat "$TMP/early.out")"
[[ ! -e $TMP/early && ! -s $TMP/early.jsonl ]] || fail "SIGTERM while starting: it trained or saved: $(ls -R "$TMP/early")"
pass "SIGTERM while starting: exit 85 before training, nothing written"

# A model file that is a FIFO nobody writes to: SIGTERM ends the wait, with
# exit 1 and the file named, instead of leaving the run deaf to it (the
# handlers restart a blocking open).
mkfifo "$TMP/unwritten.fifo"
"$PTRAIN" train --model-file "$TMP/unwritten.fifo" --checkpoint-dir "$TMP/unwritten" >"$TMP/unwritten.out" 2>&1 &
pid=$!
for _ in $(seq 600); do ls -l /proc/$pid/fd 2>/dev/null | grep -q unwritten.fifo && break; sleep 0.05; done
kill -TERM $pid
rc=0
timeout 10 tail --pid=$pid -f /dev/null || fail "SIGTERM did not end the wait on a FIFO nobody writes to"
wait $pid || rc=$?
[[ $rc == 1 ]] || fail "SIGTERM on an unwritten FIFO gave exit $rc, expected 1: $(cat "$TMP/unwritten.out")"
grep -q "model file .*unwritten.fifo is a FIFO that nobody wrote to before Terminated" "$TMP/unwritten.out" ||
  fail "SIGTERM on an unwritten FIFO: $(cat "$TMP/unwritten.out")"
pass "SIGTERM while waiting on a FIFO nobody writes to: exit 1, the file named"

# A signal whose checkpoint cannot be written (the disk full, injected by the
# test hook PTRAIN_TEST_ENOSPC_AFTER; or, under mpirun, a collective that
# fails because another rank died): said plainly, and not exit 85, which
# would have a requeueing script resume from a checkpoint that is not there.
PTRAIN_TEST_ENOSPC_AFTER=1000 "$PTRAIN" train --model-file "$TMP/small.txt" --epochs 3 --threads 1 \
  --checkpoint-dir "$TMP/nock" --metrics "$TMP/nock.jsonl" >"$TMP/nock.out" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -s $TMP/nock.jsonl ]] && break; sleep 0.05; done
kill -TERM $pid
rc=0
wait $pid || rc=$?
[[ $rc == 1 ]] || fail "SIGTERM, then a save that fails: exit $rc, expected 1: $(cat "$TMP/nock.out")"
grep -q "^ptrain train: error: no checkpoint written after Terminated: .*no space left for the checkpoint" "$TMP/nock.out" ||
  fail "SIGTERM, then a save that fails: $(cat "$TMP/nock.out")"
grep -q "stopped by" "$TMP/nock.out" && fail "a stop claimed after a save that failed: $(cat "$TMP/nock.out")"
pass "SIGTERM, then a save that fails: exit 1, 'no checkpoint written' and why"

# ddp: the signal reaches one rank only (here rank 1's process); both stop
# after the same step and rank 0 writes the checkpoint
source "$(dirname "$0")/../parallel/mpi.sh"
ddp_case() {
  need_mpi
  mpirun -np 2 "$PTRAIN" train --model-file "$TMP/small.txt" --epochs 3 --threads 1 --parallel ddp \
    --checkpoint-dir "$TMP/ddp" --metrics "$TMP/ddp.jsonl" >"$TMP/ddp.out" 2>&1 &
  local job=$! victim rc=0
  for _ in $(seq 600); do [[ -s $TMP/ddp.jsonl ]] && break; sleep 0.05; done
  victim=$(rank_pid 1 $job) || { kill -KILL $job; fail "ddp: rank 1's process not found"; }
  kill -USR1 "$victim"
  wait $job || rc=$?
  [[ $rc == 85 ]] || fail "ddp: SIGUSR1 to one rank gave exit $rc, expected 85: $(cat "$TMP/ddp.out")"
  grep -q "stopped by a signal to another worker after step" "$TMP/ddp.out" ||
    fail "ddp: rank 0 did not report the other rank's stop: $(cat "$TMP/ddp.out")"
  compgen -G "$TMP/ddp/step-*/state.safetensors" >/dev/null || fail "ddp: no checkpoint: $(ls -R "$TMP/ddp")"
  pass "ddp: SIGUSR1 to rank 1 alone: both ranks stopped, exit 85, checkpoint written"
}
rc=0
(ddp_case) || rc=$?
[[ $rc == 0 || $rc == 77 ]] || exit $rc

# A signal after the run is over (a scheduler's SIGTERM while the process
# tears down): the process ends at once, with the status the run earned,
# 0 or 85, not the default action's 143, which would read as a failed job
# or a lost checkpoint. gdb holds the process where teardown begins.
if command -v gdb >/dev/null; then
  cat >"$TMP/late.gdb" <<'GDB'
set pagination off
handle SIGTERM nostop noprint pass
break pt_comm_mpi_finalize
run
signal SIGTERM
GDB
  late() { # late EXPECTED-EXIT-LINE MESSAGE -- ptrain flags
    local want=$1 msg=$2; shift 3
    timeout -k 5 120 gdb -batch -x "$TMP/late.gdb" --args "$PTRAIN" train "$@" >"$TMP/late.out" 2>&1
    grep -q "$msg" "$TMP/late.out" && grep -q "$want" "$TMP/late.out" || fail "a late SIGTERM: $(tail -5 "$TMP/late.out")"
  }
  late "exited normally" "signal while exiting: the run had finished (exit status 0)" -- \
    --model fmnist-mlp --threads 1 --max-steps 3 --quiet --checkpoint-dir "$TMP/late-done"
  PTRAIN_TEST_STOP_IN_EVAL=2 late "exited with code 0125" "the run stopped with its checkpoint written (exit status 85" -- \
    --model fmnist-mlp --threads 1 --max-steps 3 --quiet --checkpoint-dir "$TMP/late-stopped"
  pass "a signal during teardown: exit 0 after a finished run, 85 after a checkpointed stop"
  # A signal during the epoch's save, then a --metrics line that cannot be
  # written: the error says the checkpoint is there, not that none was.
  if [[ -w /dev/full ]]; then
    printf 'set pagination off\nhandle SIGTERM nostop noprint pass\nbreak pt_checkpoint_save\nrun\ndelete\nsignal SIGTERM\n' \
      >"$TMP/insave.gdb"
    timeout -k 5 120 gdb -batch -x "$TMP/insave.gdb" --args "$PTRAIN" train --model fmnist-mlp --threads 1 --epochs 2 \
      --metrics /dev/full --save-model --quiet --checkpoint-dir "$TMP/insave" >"$TMP/insave.out" 2>&1
    grep -q "error: after Terminated: /dev/full: writing metrics failed: .*; the epoch's checkpoint is written" \
      "$TMP/insave.out" && grep -q "exited with code 01" "$TMP/insave.out" && [[ -d $TMP/insave/step-000000000600 ]] ||
      fail "a signal in the save, then a failed --metrics line: $(tail -4 "$TMP/insave.out")"
    pass "a signal during the save, then a failed --metrics line: exit 1, the checkpoint said written"
  fi
fi
