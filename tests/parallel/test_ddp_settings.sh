# Ranks are started one by one, each with its own command line. One started
# with other training flags than rank 0 must stop the whole job at start-up
# with a message naming the flag and both values, not crash inside MPI, hang
# or train something else than was asked. Flags that may differ per rank
# (--threads, the output files) must still be accepted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
need_mpi

# Rank 1 gets $EXTRA1 after the common flags; the others get them alone.
cat >"$TMP/per-rank.sh" <<'SH'
#!/bin/bash
if [[ $OMPI_COMM_WORLD_RANK == 1 ]]; then exec "$PTRAIN_BIN" train "$@" $EXTRA1; else exec "$PTRAIN_BIN" train "$@"; fi
SH
chmod +x "$TMP/per-rank.sh"
export PTRAIN_BIN=$PTRAIN

common=(--model fmnist-mlp --threads 1 --max-steps 4 --checkpoint-dir "$TMP/ck" --timeout 20)

# differ NAME EXTRA PATTERN [FLAGS...]: rank 1 also gets EXTRA; the job must
# end non-zero, not by timeout(1), with PATTERN in its stderr.
differ() {
  local name=$1 extra=$2 pattern=$3 rc=0; shift 3
  EXTRA1=$extra timeout -k 10 120 mpirun -np 2 -x EXTRA1 -x PTRAIN_BIN "$TMP/per-rank.sh" "${common[@]}" "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
  last_rc=$rc
  [[ $rc != 0 ]] || fail "$name: rank 1 with $extra: the job exited 0: $(cat "$TMP/$name.out")"
  [[ $rc != 124 && $rc != 137 ]] || fail "$name: rank 1 with $extra: the job hung: $(cat "$TMP/$name.err")"
  grep -Eq -- "$pattern" "$TMP/$name.err" || fail "$name: rank 1 with $extra: stderr lacks /$pattern/: $(cat "$TMP/$name.err")"
  grep -q "MPI_ERR\|Out of resource" "$TMP/$name.err" && fail "$name: an MPI error: $(cat "$TMP/$name.err")"
  grep -q "^epoch\|^done" "$TMP/$name.out" && fail "$name: training went on: $(cat "$TMP/$name.out")"
  pass "$name: rank 1 with $extra: exit $rc, /$pattern/"
}

same="every rank must be started with the same training flags"
differ optimizer "--optimizer sgd" "rank 1's --optimizer is sgd, rank 0's is adam: $same" --parallel ddp
differ seed "--seed 2" "rank 1's --seed is 2, rank 0's is 1: $same" --parallel ddp
differ batch "--batch-size 50" "rank 1's --batch-size is 50, rank 0's is 100: $same" --parallel ddp
differ model "--model mnist-cnn" "rank 1's --model is mnist-cnn, rank 0's is fmnist-mlp: $same" --parallel ddp
differ steps "--max-steps 7" "rank 1's --max-steps is 7, rank 0's is 4: $same" --parallel ddp
differ lr "--lr 0.5" "rank 1's --lr is 0.5, rank 0's is 0.01: $same" --parallel ddp
differ target "--target-accuracy 0.6" "rank 1's --target-accuracy is 0.6, rank 0's is 0: $same" --parallel ddp
differ micro "--micro-batches 2" "rank 1's --micro-batches is 2, rank 0's is 4: $same" --parallel pipeline
differ dataset "--dataset mnist --data-dir $FMNIST" "rank 1's --dataset is mnist, rank 0's is fashion-mnist: $same" \
  --parallel ddp

# A flag refused on rank 1 alone (--gamma without a step schedule) stops
# every rank at the start-up checks: exit 2 and rank 1's reason, once.
# Rank 0 used to wait for rank 1 in the comparison of settings until
# --timeout, then exit 1 blaming a hung rank.
differ alone "--gamma 0.5" "^ptrain train: rank 1: --gamma applies to --scheduler step, not none" --parallel ddp
[[ $last_rc == 2 ]] || fail "a usage error on rank 1 alone: exit $last_rc, expected 2: $(cat "$TMP/alone.err")"
grep -q "no answer" "$TMP/alone.err" && fail "a usage error on rank 1 alone: rank 0 waited: $(cat "$TMP/alone.err")"
[[ $(grep -c "gamma applies" "$TMP/alone.err") == 1 ]] || fail "rank 1's reason not said once: $(cat "$TMP/alone.err")"
pass "a usage error on rank 1 alone: exit 2, said once, no waiting"
# The same refused flag on every rank: said once, by rank 0.
EXTRA1= timeout -k 10 120 mpirun -np 2 -x EXTRA1 -x PTRAIN_BIN "$TMP/per-rank.sh" "${common[@]}" --parallel ddp \
  --gamma 0.5 >"$TMP/all.out" 2>"$TMP/all.err" && fail "--gamma without a step schedule on every rank: exit 0"
[[ $(grep -c "^ptrain train: --gamma applies" "$TMP/all.err") == 1 ]] ||
  fail "a usage error on every rank: not said once, by rank 0: $(cat "$TMP/all.err")"
pass "a usage error on every rank: said once, by rank 0"

# What may differ: threads (machines differ in cores) and where output goes.
EXTRA1="--threads 2 --metrics $TMP/rank1.jsonl --quiet" timeout -k 10 120 mpirun -np 2 -x EXTRA1 -x PTRAIN_BIN \
  "$TMP/per-rank.sh" "${common[@]}" --parallel ddp >"$TMP/ok.out" 2>"$TMP/ok.err" ||
  fail "rank 1 with its own --threads, --metrics and --quiet: exit $?: $(cat "$TMP/ok.err")"
grep -q "^done: 4 steps" "$TMP/ok.out" || fail "the run with per-rank output flags did not finish: $(cat "$TMP/ok.out")"
pass "rank 1 with its own --threads, --metrics and --quiet trains"

# --resume: each rank reads the checkpoint directory itself; ranks that see
# different checkpoints (node-local disks) must not go on from different steps.
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 3 --save-model --checkpoint-dir "$TMP/ck3" --quiet >/dev/null
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 5 --save-model --checkpoint-dir "$TMP/ck5" --quiet >/dev/null
common=(--model fmnist-mlp --threads 1 --max-steps 8 --timeout 20 --resume)
differ resume "--checkpoint-dir $TMP/ck5" \
  "rank 1's checkpoint to resume from is at step 5 .*, rank 0's is at step 3 .*: every rank must see the same checkpoints" \
  --parallel ddp --checkpoint-dir "$TMP/ck3"

# The default threads divide a rank's CPUs among the ranks that share
# them: two ranks held to one CPU (taskset around mpirun) take turns on
# it, and say so; each bound to a CPU of its own shares with none.
if command -v taskset >/dev/null && (($(nproc) > 1)); then
  taskset -c 0 timeout -k 10 120 mpirun -np 2 --bind-to none "$PTRAIN" train --model fmnist-mlp --max-steps 1 \
    --parallel ddp --checkpoint-dir "$TMP/shared-cpu" >"$TMP/shared.out" 2>&1 || fail "two ranks on one CPU: $(cat "$TMP/shared.out")"
  grep -q "^note: 2 workers x 1 thread on 1 core" "$TMP/shared.out" ||
    fail "two ranks held to one CPU: not said as sharing it: $(cat "$TMP/shared.out")"
  timeout -k 10 120 mpirun -np 2 --bind-to core "$PTRAIN" train --model fmnist-mlp --max-steps 1 --parallel ddp \
    --checkpoint-dir "$TMP/own-cpu" >"$TMP/own.out" 2>&1 || fail "two ranks bound to a core each: $(cat "$TMP/own.out")"
  grep -q ", 1 thread, " "$TMP/own.out" && ! grep -q "^note: .* take turns" "$TMP/own.out" ||
    fail "two ranks bound to a core each: $(cat "$TMP/own.out")"
  pass "default threads: ranks on one CPU share it; ranks bound to their own cores do not"
fi
