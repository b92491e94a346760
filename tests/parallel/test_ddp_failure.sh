# A rank that dies mid-epoch (SIGKILL) ends the whole ddp job within
# --timeout, non-zero, with a message naming the lost rank; nothing hangs;
# the last checkpoint is intact and --resume continues from it. A rank that
# hangs (SIGSTOP) makes the others give up after --timeout with a message
# that names it, pid and host, found by the heartbeat's roll call; so does a
# pipeline stage.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
need_mpi
# mnist-cnn: steps slow enough (tens of ms) to kill a rank mid-epoch.
run=(--model mnist-cnn --threads 1 --batch-size 32 --log-interval 2 --save-model --checkpoint-dir "$TMP/ck")

"$PTRAIN" train "${run[@]}" --max-steps 3 --quiet >/dev/null
before=$(sha256sum "$TMP/ck/model.safetensors" "$TMP"/ck/step-*/*.safetensors)

# signal_rank1 SIGNAL NAME TIMEOUT: runs 2 ranks resuming from the
# checkpoint, sends SIGNAL to rank 1 once training is under way, and waits
# for the job: sets rc, elapsed (seconds from the signal) and victim; the
# output is in $TMP/NAME.out and .err.
signal_rank1() {
  timeout 120 mpirun -np 2 "$PTRAIN" train "${run[@]}" "${mode[@]}" --resume --timeout "$3" \
    >"$TMP/$2.out" 2>"$TMP/$2.err" &
  local job=$! t0
  wait_for "step [0-9]+ batch" "$TMP/$2.err" 60 || fail "the job made no progress: $(cat "$TMP/$2.err")"
  victim=$(rank_pid 1 "$job") || fail "rank 1's process not found"
  kill "-$1" "$victim"
  t0=$(date +%s)
  rc=0
  wait $job || rc=$?
  elapsed=$(($(date +%s) - t0))
}

mode=(--parallel ddp)
# The job: 2 ranks, resuming (from a 1-process checkpoint: the world grows).
signal_rank1 KILL job 20
[[ $rc != 0 ]] || fail "the job exited 0 after rank 1 was killed"
[[ $rc != 124 ]] || fail "the job hung until timeout(1) killed it"
((elapsed <= 20)) || fail "the job took $elapsed s to stop, more than --timeout 20"
grep -Eq "rank 1 .*(exited on signal 9|Killed)" "$TMP/job.err" || fail "no message names rank 1: $(cat "$TMP/job.err")"
pass "rank 1 killed: the job stopped in $elapsed s, exit $rc, naming rank 1"

after=$(sha256sum "$TMP/ck/model.safetensors" "$TMP"/ck/step-*/*.safetensors)
[[ "$before" == "$after" ]] || fail "the checkpoint changed although no epoch ended"
ls -A "$TMP/ck" | grep -q 'tmp\|partial' && fail "a temporary file was left in the checkpoint directory"
pass "the last checkpoint is intact"

timeout 120 mpirun -np 2 "$PTRAIN" train "${run[@]}" --parallel ddp --resume --max-steps 6 \
  >"$TMP/resume.out" 2>"$TMP/resume.err" || fail "resume failed: $(cat "$TMP/resume.err")"
grep -q "resuming from .* (step 3)" "$TMP/resume.out" || fail "resume did not start at step 3: $(cat "$TMP/resume.out")"
grep -q "^done: 6 steps" "$TMP/resume.out" || fail "resume did not reach step 6: $(cat "$TMP/resume.out")"
pass "--resume continues from the checkpoint"

# A rank that stops answering: the others wait --timeout, then end the job.
signal_rank1 STOP stuck 3
kill -KILL "$victim" 2>/dev/null || true
[[ $rc != 0 && $rc != 124 ]] || fail "a stuck rank: exit $rc"
grep -Eq "rank 0: no answer for [0-9]+ s in the gradient allreduce at step [0-9]+: rank 1 \(pid $victim on [^)]+\) did not answer a heartbeat" \
  "$TMP/stuck.err" || fail "no timeout message naming rank 1 (pid $victim): $(cat "$TMP/stuck.err")"
pass "rank 1 stopped: rank 0 gave up after --timeout 3, naming rank 1 and its pid (job ended in $elapsed s, exit $rc)"

# Three ranks, the last one stopped: the roll call names it and says where
# the rank that did answer was waiting.
timeout 120 mpirun -np 3 "$PTRAIN" train --model fmnist-mlp --threads 1 --log-interval 2 --parallel ddp \
  --max-steps 100000 --timeout 3 >"$TMP/three.out" 2>"$TMP/three.err" &
job=$!
wait_for "step [0-9]+ batch" "$TMP/three.err" 60 || fail "the 3-rank job made no progress: $(cat "$TMP/three.err")"
victim=$(rank_pid 2 "$job") || fail "rank 2's process not found"
kill -STOP "$victim"
rc=0
wait $job || rc=$?
kill -KILL "$victim" 2>/dev/null || true
[[ $rc != 0 && $rc != 124 ]] || fail "a stuck rank of 3: exit $rc"
# Whichever of ranks 0 and 1 gives up first speaks (a sanitizer build's
# timings can make it rank 1); it names rank 2 and where the other waits.
grep -Eq "rank ([01]): no answer for [0-9]+ s in .*: rank 2 \(pid $victim on [^)]+\) did not answer a heartbeat.*; rank [01] \(pid [0-9]+ on [^)]+\) is waiting in .* at step [0-9]+" \
  "$TMP/three.err" || fail "no survivor's message names rank 2 and the other's wait: $(cat "$TMP/three.err")"
pass "3 ranks, rank 2 stopped: a survivor names rank 2 and says where the other waits"

# Pipeline stages: stage 1 stops answering, and stage 0 gives up after
# --timeout, naming the stage and the message it waited for (one that never
# came, or one cut off mid-transfer), or, if the
# stop came between the stage's last message and the loss allreduce, the
# collective).
mode=(--parallel pipeline --micro-batches 4)
signal_rank1 STOP stage 3
kill -KILL "$victim" 2>/dev/null || true
[[ $rc != 0 && $rc != 124 ]] || fail "a stuck stage: exit $rc"
grep -Eq "((no message|the message) from rank 1 .* for the (gradients|activations) .* at step|no answer for [0-9]+ s in).*: rank 1 \(pid $victim on [^)]+\) did not answer a heartbeat" \
  "$TMP/stage.err" ||
  fail "no timeout message naming stage 1 (pid $victim): $(cat "$TMP/stage.err")"
pass "pipeline stage 1 stopped: stage 0 gave up after --timeout 3, naming rank 1 and its pid (job ended in $elapsed s, exit $rc)"

# Before training and after it the ranks wait for one another inside MPI
# (MPI_Init and the communicators' making, MPI_Finalize), where no
# heartbeat runs: a rank held there (stuck in its file system, stopped)
# ends the others after --timeout too, saying where they waited. Rank 1 is
# stopped as soon as it exists, wherever in its start that is.
timeout 120 mpirun -np 2 "$PTRAIN" train --model fmnist-mlp --threads 1 --parallel ddp --max-steps 20 --timeout 3 \
  --checkpoint-dir "$TMP/ck-start" >"$TMP/start.out" 2>"$TMP/start.err" &
job=$!
victim=
for _ in $(seq 1 2000); do
  victim=$(rank_pid 1 "$job") && break
  kill -0 "$job" 2>/dev/null || break
done
[[ -n $victim ]] || fail "rank 1's process not found: $(cat "$TMP/start.err")"
kill -STOP "$victim"
t0=$(date +%s)
rc=0
wait $job || rc=$?
elapsed=$(($(date +%s) - t0))
kill -KILL "$victim" 2>/dev/null || true
[[ $rc != 0 && $rc != 124 && $elapsed -lt 60 ]] || fail "rank 1 stopped at its start: exit $rc after $elapsed s"
grep -Eq "rank 0: no answer for [0-9]+ s in " "$TMP/start.err" ||
  fail "rank 0 did not say where it waited: $(cat "$TMP/start.err")"
pass "rank 1 stopped at its start: rank 0 gave up after --timeout 3 (job ended in $elapsed s, exit $rc)"

# Held by a debugger at chosen points: in the start-up checks, before it
# reads its data (rank 0 then waits in the making of the run's
# communicator), and at MPI_Finalize after training.
if command -v gdb >/dev/null && gdb -q -batch -ex run --args true >/dev/null 2>&1; then
  for at in pt_comm_agree_checks:"the ranks. start-up checks" pt_data_load:"the ranks' start" pt_comm_mpi_finalize:"MPI_Finalize"; do
    fn=${at%%:*} where=${at#*:}
    args=(train --model fmnist-mlp --threads 1 --parallel ddp --max-steps 20 --timeout 3 --quiet
      --checkpoint-dir "$TMP/ck-$fn")
    t0=$(date +%s)
    rc=0
    timeout 120 mpirun -np 1 "$PTRAIN" "${args[@]}" : -np 1 gdb -q -batch -ex "break $fn" -ex run \
      -ex 'shell sleep 60' -ex kill --args "$PTRAIN" "${args[@]}" >"$TMP/held.out" 2>"$TMP/held.err" || rc=$?
    elapsed=$(($(date +%s) - t0))
    [[ $rc != 0 && $rc != 124 && $elapsed -lt 50 ]] || fail "rank 1 held in $fn: exit $rc after $elapsed s"
    grep -Eq "rank 0: no answer for 3 s in $where" "$TMP/held.err" ||
      fail "rank 1 held in $fn: rank 0 did not say it waited in $where: $(cat "$TMP/held.err")"
    pass "rank 1 held in $fn: rank 0 gave up after --timeout 3, saying where it waited (job ended in $elapsed s)"
  done
fi
