# kill -9 at every point of a checkpoint save (PTRAIN_TEST_KILL_AT, a
# test-only hook: SIGKILL at the Nth point of the saves), then --resume:
# the run ends with the weights of one never stopped, bit for bit, every
# time; nothing partial stays once a later save completes.
source "$(dirname "$0")/lib.sh"
need_fmnist

small_dropout_spec "$TMP/small.txt"
train() { # train DIR flags...: to the end of 2 epochs (938 steps)
  local dir=$1; shift
  "$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --epochs 2 --checkpoint-dir "$TMP/$dir" --quiet "$@" \
    >>"$TMP/$dir.out" 2>&1
}
train straight --save-model || fail "the straight run: $(cat "$TMP/straight.out")"
# the starting point: generations 400 and 500
train base --checkpoint-every 100 --max-steps 500 || fail "the base run: $(cat "$TMP/base.out")"

points=0
for n in $(seq 1 12); do
  rm -rf "$TMP/k$n"
  cp -r "$TMP/base" "$TMP/k$n"
  rc=0
  # resumes at 500, saves at 600: killed at its nth point
  PTRAIN_TEST_KILL_AT=$n train "k$n" --resume --checkpoint-every 100 || rc=$?
  if [[ $rc == 0 ]]; then break; fi
  [[ $rc == 137 ]] || fail "PTRAIN_TEST_KILL_AT=$n: exit $rc, expected 137 (SIGKILL): $(cat "$TMP/k$n.out")"
  points=$n
  train "k$n" --resume --checkpoint-every 100 || fail "resume after a kill at point $n: $(cat "$TMP/k$n.out")"
  cmp -s "$TMP/straight/model.safetensors" "$TMP/k$n/model.safetensors" ||
    fail "killed at point $n of a save and resumed: the weights differ from the straight run's ($(grep resuming "$TMP/k$n.out"))"
  [[ -z $(find "$TMP/k$n" -mindepth 1 -name '.*') ]] || fail "point $n: left behind: $(find "$TMP/k$n" -name '.*')"
done
((points >= 7)) || fail "only $points kill points were reached (expected the save's 7 and more)"
pass "killed at each of the first $points points of the saves (the whole save at step 600, into the next): every resume ended as the straight run, bit for bit"
