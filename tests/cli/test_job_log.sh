# A batch job's log: standard output and standard error in one file, as
# Slurm writes it by default. The lines must come in the order they were
# printed, the resume line must name the position training really continues
# from (in this run's batches, also after the worker count changed), and a
# run with nothing left to do must not end with a rate of 0 img/s.
source "$(dirname "$0")/lib.sh"
need_fmnist

ck=$TMP/ck
run=(--model fmnist-mlp --threads 1 --checkpoint-dir "$ck" --log-interval 10)
# 2 workers of batch 100: 300 batches an epoch; step 30 has seen 6000 samples.
"$PTRAIN" train "${run[@]}" --parallel dp --workers 2 --max-steps 30 --save-model --quiet >/dev/null 2>&1 ||
  fail "the 2-worker run"
# One worker: 600 batches an epoch, so those 6000 samples are its batch 60.
"$PTRAIN" train "${run[@]}" --resume --max-steps 50 >"$TMP/log" 2>&1 || fail "the resume: $(cat "$TMP/log")"
grep -q "^resuming from $ck/step-000000000030 at epoch 1, batch 60 of 600 (step 30); the run had 2 workers at batch 100 (a global batch of 200), this one has 1 at 100 (100)$" \
  "$TMP/log" || fail "the resume line: $(cat "$TMP/log")"
grep -q "^epoch 1/1 step 40 batch 70/600 " "$TMP/log" || fail "training did not go on from batch 60: $(cat "$TMP/log")"
resume_at=$(grep -n "^resuming from" "$TMP/log" | cut -d: -f1)
step_at=$(grep -n "^epoch 1/1 step " "$TMP/log" | head -n 1 | cut -d: -f1)
((resume_at < step_at)) || fail "the resume line (line $resume_at) after the progress (line $step_at): $(cat "$TMP/log")"
[[ $(tail -n 1 "$TMP/log") == "done: 50 steps (20 in this run) in "* ]] ||
  fail "the log does not end with the done line, steps in all and in this run: $(cat "$TMP/log")"
pass "one log for both streams: in order, the resume at the batch it continues from, done last"

# Nothing left: said once, without a throughput of nothing.
"$PTRAIN" train "${run[@]}" --resume --max-steps 50 >"$TMP/log2" 2>&1 || fail "the resume at the end: $(cat "$TMP/log2")"
grep -q "^nothing to train: the checkpoint has 50 steps; ask for more with --max-steps" "$TMP/log2" ||
  fail "no 'nothing to train': $(cat "$TMP/log2")"
grep -q "^done: nothing left to train at step 50, checkpoint in $ck$" "$TMP/log2" || fail "the done line: $(cat "$TMP/log2")"
grep -q "img/s" "$TMP/log2" && fail "a rate for a run that trained nothing: $(cat "$TMP/log2")"
pass "a resume with nothing left to do says so, with no rate"
