# A short real run on Fashion-MNIST reaches a stated accuracy, writes the
# metrics it promises, and the same seed gives identical results twice.
source "$(dirname "$0")/lib.sh"
need_fmnist

run() { # run NAME extra-flags...
  local name=$1; shift
  "$PTRAIN" train --model fmnist-mlp --threads 2 --epochs 1 --save-model --checkpoint-dir "$TMP/$name" \
    --metrics "$TMP/$name.jsonl" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
    fail "train $name: $(cat "$TMP/$name.err")"
}
run a
run b
acc=$(accuracy_of "$TMP/a.out")
# fmnist-mlp after one epoch (seed 1): 0.69 here; PyTorch lands 0.69-0.80 over seeds.
awk -v a="$acc" 'BEGIN { exit !(a >= 0.65) }' || fail "accuracy $acc after one epoch, expected >= 0.65"
pass "one epoch of fmnist-mlp: test accuracy $acc"

cmp -s "$TMP/a/model.safetensors" "$TMP/b/model.safetensors" || fail "same seed, different weights"
strip() { sed -E 's/"(images_per_s|seconds)":[^,}]*//g' "$1"; }
[[ "$(strip "$TMP/a.jsonl")" == "$(strip "$TMP/b.jsonl")" ]] || fail "same seed, different metrics"
pass "same seed: bit-identical weights and metrics"

# The metrics line has every promised key.
python3 - "$TMP/a.jsonl" <<'PY' || fail "metrics line"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
m = json.loads(lines[0])
for k in ["event", "epoch", "step", "train_loss", "test_loss", "test_acc", "images_per_s", "seconds", "lr"]:
    assert k in m, k
assert m["event"] == "epoch" and m["epoch"] == 1 and m["step"] == 600, m
assert 0 < m["test_acc"] <= 1 and m["lr"] == 0.01, m
PY
pass "metrics JSON line"

# Denormals flushed (the default) or kept: the same model to the accuracy a
# user reads.
run k --keep-denormals
acc_k=$(accuracy_of "$TMP/k.out")
awk -v a="$acc" -v k="$acc_k" 'BEGIN { d = a - k; exit !(d < 0.005 && d > -0.005) }' ||
  fail "accuracy $acc_k with --keep-denormals, $acc flushing them"
pass "--keep-denormals: accuracy $acc_k, flushing $acc"

# Another seed gives other weights (the seed is really used).
run c --seed 2
cmp -s "$TMP/a/model.safetensors" "$TMP/c/model.safetensors" && fail "seed 2 gave seed 1's weights"
pass "different seed, different weights"

# More threads than cores: said, with the counts (no more: nothing said).
cores=$(nproc)
"$PTRAIN" train --model fmnist-mlp --threads $((cores + 1)) --max-steps 1 --checkpoint-dir "$TMP/over" \
  >"$TMP/over.out" 2>&1 || fail "--threads past the cores: $(cat "$TMP/over.out")"
grep -q "^note: $((cores + 1)) threads on $cores cores*: they take turns on the cores" "$TMP/over.out" ||
  fail "no note of threads past the cores: $(cat "$TMP/over.out")"
if ((cores >= 2)) && grep -q "take turns" "$TMP/a.out"; then fail "a note at 2 threads on $cores cores: $(cat "$TMP/a.out")"; fi
pass "more threads than cores: said"

# ptrain eval on the checkpoint reproduces the final test accuracy.
"$PTRAIN" eval --checkpoint "$TMP/a/model.safetensors" >"$TMP/eval.out" 2>"$TMP/eval.err" || fail "eval: $(cat "$TMP/eval.err")"
eval_acc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$TMP/eval.out")
[[ "$eval_acc" == "$acc" ]] || fail "eval says $eval_acc, training said $acc"
pass "eval reproduces accuracy $acc"

# --init-from starts from given weights: with a zero learning rate the
# weights stay as loaded, so the accuracy is exactly the checkpoint's.
"$PTRAIN" train --model fmnist-mlp --threads 2 --init-from "$TMP/a/model.safetensors" --optimizer sgd --lr 0 \
  --max-steps 1 --quiet >"$TMP/init.out" 2>&1 || fail "init-from: $(cat "$TMP/init.out")"
init_acc=$(accuracy_of "$TMP/init.out")
[[ "$init_acc" == "$acc" ]] || fail "from the trained weights at lr 0: accuracy $init_acc, expected $acc"
expect_exit 1 "has no tensor 'conv1.weight': it holds model fmnist-mlp [(]wrong --model[?][)]" -- "$PTRAIN" train --model mnist-cnn \
  --init-from "$TMP/a/model.safetensors" --max-steps 1
pass "--init-from"

# --profile prints the per-layer and per-phase table; --trace writes a Chrome
# trace with a span per layer pass, the loader's work on its own track (at
# 1 thread, where a core is left for the prefetch thread; where the threads
# take every core, the pool prepares the batches, on the trainer's track).
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 30 --profile --trace "$TMP/trace.json" \
  >"$TMP/prof.out" 2>&1 || fail "profile/trace run: $(cat "$TMP/prof.out")"
for row in "linear lin1" "linear lin2" "waiting for data" "forward" "backward" "optimizer" "communication"; do
  grep -q "^$row " "$TMP/prof.out" || fail "profile lacks '$row'"
done
python3 - "$TMP/trace.json" <<'PY' || fail "trace file"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
spans = [e for e in ev if e["ph"] == "X"]
names = {e["args"]["name"]: e["tid"] for e in ev if e["ph"] == "M"}
assert "trainer" in names, names
cores = __import__("os").cpu_count()
assert cores < 2 or "data loader" in names, names
fwd = [e for e in spans if e["cat"] == "forward" and e["name"] == "linear lin1"]
bwd = [e for e in spans if e["cat"] == "backward" and e["name"] == "linear lin1"]
assert len(bwd) == 30 and len(fwd) >= 30, (len(fwd), len(bwd))  # eval adds forward spans
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
assert any(e["cat"] == "data" and (cores < 2 or e["tid"] != names["trainer"]) for e in spans), "loader track"
assert sum(1 for e in spans if e["name"] == "optimizer") == 30
PY
pass "--profile and --trace"

# Under dp the profile's rate is the run's, every replica's images, as the
# metrics' profile record gives it (it once counted one worker's).
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 40 --parallel dp --workers 2 --profile --quiet \
  --metrics "$TMP/dp-prof.jsonl" >"$TMP/dp-prof.out" 2>&1 || fail "dp --profile: $(cat "$TMP/dp-prof.out")"
printed=$(sed -n 's/^profile: .* ms\/step, \([0-9]*\) images\/s (2 replicas; .*/\1/p' "$TMP/dp-prof.out")
recorded=$(python3 -c 'import json, sys
print(round([json.loads(l) for l in open(sys.argv[1]) if "profile" in l][-1]["images_per_s"]))' "$TMP/dp-prof.jsonl")
[[ -n $printed && $(( printed - recorded )) -ge -1 && $(( printed - recorded )) -le 1 ]] ||
  fail "dp --profile printed ${printed:-nothing} images/s, the metrics say $recorded: $(cat "$TMP/dp-prof.out")"
pass "dp --profile: the printed rate is the run's, as in the metrics"
# Stages run side by side: the profile says its layer shares overlap and
# whose phases it shows.
"$PTRAIN" train --model fmnist-mlp --parallel pipeline --threads 1 --max-steps 10 --profile \
  --checkpoint-dir "$TMP/pp-prof" >"$TMP/pp-prof.out" 2>&1 || fail "pipeline --profile: $(cat "$TMP/pp-prof.out")"
grep -q "^(2 stages at once: each layer's share is of a step's time, and the stages' shares overlap; the phases are stage 0's" \
  "$TMP/pp-prof.out" || fail "pipeline --profile: $(cat "$TMP/pp-prof.out")"
pass "pipeline --profile says its shares overlap and its phases are stage 0's"

# A diverging run stops with the loss named as printf would not: "nan", not "-nan".
expect_exit 1 "loss became (nan|inf) at epoch 1, step [0-9]+: lower the learning rate \(now 1000\)" -- \
  "$PTRAIN" train --model fmnist-mlp --optimizer sgd --lr 1000 --max-steps 200 --checkpoint-dir "$TMP/diverge"
# ... at the step the metrics would give it: one after the last evaluated.
"$PTRAIN" train --model fmnist-mlp --optimizer sgd --lr 1000 --threads 1 --max-steps 200 --eval-every 1 \
  --metrics "$TMP/diverge.jsonl" --checkpoint-dir "$TMP/diverge2" >"$TMP/diverge.out" 2>&1 && fail "diverging run exited 0"
bad=$(sed -n 's/.*loss became [a-z-]* at epoch 1, step \([0-9]*\):.*/\1/p' "$TMP/diverge.out")
last=$(python3 -c 'import json, sys; print([e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "eval"][-1]["step"])' \
  "$TMP/diverge.jsonl")
[[ -n $bad && $bad == $((last + 1)) ]] || fail "the bad loss named at step ${bad:-none}, the last evaluation at $last"
pass "a diverging loss is named, at its step"
# A trace whose buffer fills says so (a test hook makes it small).
PTRAIN_TEST_TRACE_MAX=50 "$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 20 --trace "$TMP/full.json" \
  --checkpoint-dir "$TMP/full" >"$TMP/full.out" 2>&1 || fail "a trace past its buffer: $(cat "$TMP/full.out")"
grep -q "note: $TMP/full.json holds the run's first spans, as many as it has room for; the [0-9]* after them were left out" \
  "$TMP/full.out" || fail "a full trace buffer not said: $(cat "$TMP/full.out")"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); assert t["otherData"]["dropped_events"] > 0' "$TMP/full.json" ||
  fail "the trace's dropped_events"
pass "a trace that drops spans says so"
# Another optimizer than the preset's starts from PyTorch's default rate
# for it: SGD's is 0.001 (torch.optim.SGD's lr default).
"$PTRAIN" train --model mnist-cnn --optimizer sgd --threads 1 --max-steps 1 --checkpoint-dir "$TMP/sgd-lr" \
  >"$TMP/sgd-lr.out" 2>&1 || fail "mnist-cnn with sgd: $(cat "$TMP/sgd-lr.out")"
grep -q "optimizer sgd lr 0.001," "$TMP/sgd-lr.out" || fail "sgd's default rate: $(head -3 "$TMP/sgd-lr.out")"
pass "--optimizer sgd on a preset of another optimizer: lr 0.001, PyTorch's default"
# --quiet prints the run's last epoch line alone, also where the run stops
# before its last epoch (here --max-steps inside epoch 1 of 2).
"$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 8 --epochs 2 --max-steps 3 --quiet \
  --checkpoint-dir "$TMP/quiet" >"$TMP/quiet.out" 2>&1 || fail "a quiet run stopped early: $(cat "$TMP/quiet.out")"
[[ $(wc -l <"$TMP/quiet.out") == 1 ]] && grep -q "^epoch 1/2 (stopped early): train loss" "$TMP/quiet.out" ||
  fail "--quiet, stopped by --max-steps: $(cat "$TMP/quiet.out")"
pass "--quiet: the last epoch line of a run stopped early"
# A trace that cannot be written is said before training, naming the file
# given (not the temporary one beside it), and nothing is left behind.
expect_exit 1 "cannot write trace $TMP/nodir/t.json: No such file" -- "$PTRAIN" train --model fmnist-mlp --epochs 2 \
  --trace "$TMP/nodir/t.json"
grep -q "^epoch" "$TMP/out" && fail "--trace to a missing directory: trained first: $(cat "$TMP/out")"
expect_exit 1 "cannot write trace $TMP .*: a directory, not a regular file" -- "$PTRAIN" train --model fmnist-mlp --trace "$TMP"
compgen -G "$TMP.tmp.*" >/dev/null && fail "a temporary trace file was left: $(ls -d "$TMP".tmp.*)"
# A FIFO is refused, not replaced by a file; a symbolic link's file is
# written and the link stays.
mkfifo "$TMP/trace-fifo"
expect_exit 1 "trace-fifo: a FIFO, not a regular file" -- "$PTRAIN" train --model fmnist-mlp --trace "$TMP/trace-fifo"
[[ -p $TMP/trace-fifo ]] || fail "--trace replaced a FIFO"
ln -s trace-real.json "$TMP/trace-link.json"
"$PTRAIN" train --model fmnist-mlp --max-steps 2 --quiet --trace "$TMP/trace-link.json" >/dev/null ||
  fail "--trace through a symbolic link"
[[ -L $TMP/trace-link.json && -s $TMP/trace-real.json ]] || fail "--trace through a link: $(ls -l "$TMP"/trace-*)"
# A run with no span to record (a resume with nothing left to train):
# still valid JSON, its thread names and no trailing comma.
"$PTRAIN" train --model fmnist-mlp --max-steps 2 --quiet --save-model --checkpoint-dir "$TMP/trace-done" >/dev/null
"$PTRAIN" train --model fmnist-mlp --max-steps 2 --quiet --resume --checkpoint-dir "$TMP/trace-done" \
  --trace "$TMP/trace-empty.json" >/dev/null || fail "--trace on a resume with nothing to do"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["traceEvents"], d' "$TMP/trace-empty.json" ||
  fail "--trace with no spans: not valid JSON: $(cat "$TMP/trace-empty.json")"
pass "--trace to a missing directory, a directory or a FIFO: refused before training; through a link: written"

# Under an address-space limit (ulimit -v, as some batch systems set) the
# run ends: OpenBLAS's idle threads, whose buffers the limit refused, hung
# the exit for ever. Not under sanitizers, whose shadow memory the limit
# would refuse first.
# (ldd's whole output first: grep -q ending the pipe early kills ldd, and
# pipefail then read a sanitizer build as a plain one.)
if ! grep -q 'libasan\|libubsan' <<<"$(ldd "$PTRAIN")"; then
  rc=0
  (ulimit -v 400000; timeout -k 5 60 "$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 5 --quiet \
    >"$TMP/vlimit.out" 2>&1) || rc=$?
  [[ $rc == 0 ]] || fail "under ulimit -v 400000: exit $rc (124 or 137: it hung): $(cat "$TMP/vlimit.out")"
  pass "under ulimit -v: the run ends, exit 0"
fi

# --eval-every N evaluates inside epochs (an "eval" metrics line each) without
# changing the training; --target-accuracy stops at the first evaluation
# that reaches it, with a "target" line.
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 250 --save-model --checkpoint-dir "$TMP/ev0" --quiet \
  >/dev/null 2>&1 || fail "plain run"
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 250 --eval-every 100 --save-model --checkpoint-dir "$TMP/ev1" \
  --metrics "$TMP/ev1.jsonl" --quiet >/dev/null 2>&1 || fail "--eval-every run"
cmp -s "$TMP/ev0/model.safetensors" "$TMP/ev1/model.safetensors" || fail "--eval-every changed the weights"
[[ $(grep -c '"event":"eval"' "$TMP/ev1.jsonl") == 3 ]] || fail "expected evaluations at steps 100, 200 and 250: $(cat "$TMP/ev1.jsonl")"
grep -q '"event":"eval","epoch":1,"step":100,"seconds":' "$TMP/ev1.jsonl" || fail "no eval line at step 100"
# --max-steps on an evaluation's step: that evaluation ends the epoch, once.
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 200 --eval-every 100 --metrics "$TMP/ev2.jsonl" --quiet \
  >/dev/null 2>&1 || fail "--eval-every run stopping on an evaluation"
[[ $(grep -c '"event":"eval"' "$TMP/ev2.jsonl") == 2 ]] ||
  fail "expected one evaluation each at steps 100 and 200: $(cat "$TMP/ev2.jsonl")"
python3 - "$TMP/ev2.jsonl" <<'PY' || fail "the epoch line after an evaluation at its step"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
last_eval = [e for e in ev if e["event"] == "eval"][-1]
epoch = [e for e in ev if e["event"] == "epoch"][-1]
assert last_eval["step"] == epoch["step"] == 200 and last_eval["test_acc"] == epoch["test_acc"], (last_eval, epoch)
PY
# Resumed past it (to --max-steps 400), with and without a checkpoint
# saved at that step before its evaluation: the evaluation at step 200 is
# not made again, and the run ends on the straight run's weights.
for every in 0 200; do
  ck=(--checkpoint-dir "$TMP/ev3-$every" --save-model)
  ((every)) && ck+=(--checkpoint-every "$every")
  "$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 200 --eval-every 100 --metrics "$TMP/ev3-$every.jsonl" \
    "${ck[@]}" --quiet >/dev/null 2>&1 || fail "--eval-every run to 200 ($every)"
  "$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 400 --eval-every 100 --metrics "$TMP/ev3-$every.jsonl" \
    "${ck[@]}" --resume --quiet >/dev/null 2>&1 || fail "--eval-every resume to 400 ($every)"
  steps=$(python3 -c 'import json, sys; print(*[e["step"] for e in map(json.loads, open(sys.argv[1])) if e["event"] == "eval"])' \
    "$TMP/ev3-$every.jsonl")
  [[ $steps == "100 200 300 400" ]] || fail "evaluations after a resume at an evaluation's step ($every): $steps"
  # The resumed epoch's rate is the whole epoch's, as its seconds are: 400 steps of 100.
  python3 -c 'import json, sys
e = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "epoch"][-1]
assert e["step"] == 400 and abs(e["images_per_s"] * e["seconds"] - 400 * 100) < 0.01 * 400 * 100, e' \
    "$TMP/ev3-$every.jsonl" || fail "a resumed epoch's images_per_s and seconds disagree ($every)"
done
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 400 --eval-every 100 --save-model --checkpoint-dir "$TMP/ev4" \
  --quiet >/dev/null 2>&1 || fail "--eval-every run to 400"
cmp -s "$TMP/ev4/model.safetensors" "$TMP/ev3-0/model.safetensors" || fail "resumed at an evaluation: other weights"
"$PTRAIN" train --model fmnist-mlp --threads 1 --epochs 3 --eval-every 50 --target-accuracy 0.6 \
  --metrics "$TMP/tg.jsonl" >"$TMP/tg.out" 2>&1 || fail "--target-accuracy: $(cat "$TMP/tg.out")"
grep -q "^target accuracy 0.6 reached: test accuracy 0\.[6-9][0-9]* at step [0-9]*, [0-9.]* s into training" "$TMP/tg.out" ||
  fail "no target line: $(cat "$TMP/tg.out")"
python3 - "$TMP/tg.jsonl" <<'PY' || fail "the target's metrics"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
evals = [e for e in ev if e["event"] == "eval"]
tgt = [e for e in ev if e["event"] == "target"]
assert len(tgt) == 1 and tgt[0]["reached"] and tgt[0]["accuracy"] == 0.6, tgt
assert evals[-1]["test_acc"] >= 0.6 and all(e["test_acc"] < 0.6 for e in evals[:-1]), evals
assert evals[-1]["step"] == tgt[0]["step"] and tgt[0]["step"] < 1800, (evals[-1], tgt)
assert all(a["seconds"] < b["seconds"] for a, b in zip(evals, evals[1:])), evals
# stopped inside an epoch, it still ends with that epoch's line, from the evaluation that met the target
epochs = [e for e in ev if e["event"] == "epoch"]
assert epochs and epochs[-1]["step"] == tgt[0]["step"] and epochs[-1]["test_acc"] == evals[-1]["test_acc"], epochs
assert epochs[-1]["partial"] or epochs[-1]["step"] % 600 == 0, epochs
PY
"$PTRAIN" plot --output "$TMP/tg.svg" "$TMP/tg.jsonl" >/dev/null || fail "plot of a run stopped at its target"
"$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 60 --eval-every 30 --target-accuracy 0.99 \
  --metrics "$TMP/tn.jsonl" >"$TMP/tn.out" 2>&1 || fail "an unreached target: $(cat "$TMP/tn.out")"
grep -q "target accuracy 0.99 not reached in 60 steps" "$TMP/tn.out" || fail "no 'not reached': $(cat "$TMP/tn.out")"
grep -q '"event":"target","accuracy":0.99,"reached":false' "$TMP/tn.jsonl" || fail "no unreached target line"
pass "--eval-every leaves the weights unchanged; --target-accuracy stops at the first evaluation reaching it"

# A stop request during an --eval-every evaluation (a test hook stands in
# for SIGTERM after its 2nd batch) stops the run at that step, reporting
# nothing from part of the split; the resumed run makes that evaluation
# first, so its metrics and weights are the straight run's. So does a run
# resumed after --exit-after-checkpoint at an evaluation's step, whose
# evaluation comes after the save (both were once lost).
ev=(--model fmnist-mlp --threads 1 --max-steps 250 --eval-every 100 --save-model --quiet)
evals() { python3 -c 'import json,sys; print([(e["step"], e["test_loss"], e["test_acc"]) for e in map(json.loads, open(sys.argv[1])) if e["event"] == "eval"])' "$1"; }
rc=0
PTRAIN_TEST_STOP_IN_EVAL=2 "$PTRAIN" train "${ev[@]}" --checkpoint-dir "$TMP/ec" --metrics "$TMP/ec.jsonl" \
  >"$TMP/ec.out" 2>&1 || rc=$?
[[ $rc == 85 ]] || fail "stop during an --eval-every evaluation: exit $rc, expected 85: $(cat "$TMP/ec.out")"
! grep -q '"event":"eval"' "$TMP/ec.jsonl" || fail "a cut evaluation was reported: $(cat "$TMP/ec.jsonl")"
"$PTRAIN" train "${ev[@]}" --checkpoint-dir "$TMP/ec" --metrics "$TMP/ec.jsonl" --resume >/dev/null 2>&1 ||
  fail "resuming after a cut --eval-every evaluation"
[[ $(evals "$TMP/ec.jsonl") == "$(evals "$TMP/ev1.jsonl")" ]] ||
  fail "resumed evaluations: $(evals "$TMP/ec.jsonl"), straight: $(evals "$TMP/ev1.jsonl")"
cmp -s "$TMP/ev1/model.safetensors" "$TMP/ec/model.safetensors" || fail "the resumed run's weights differ"
rc=0
"$PTRAIN" train "${ev[@]}" --checkpoint-every 100 --exit-after-checkpoint --checkpoint-dir "$TMP/ex" \
  --metrics "$TMP/ex.jsonl" >/dev/null 2>&1 || rc=$?
[[ $rc == 85 ]] || fail "--exit-after-checkpoint: exit $rc"
for _ in 1 2; do
  rc=0
  "$PTRAIN" train "${ev[@]}" --checkpoint-every 100 --exit-after-checkpoint --checkpoint-dir "$TMP/ex" \
    --metrics "$TMP/ex.jsonl" --resume >/dev/null 2>&1 || rc=$?
  [[ $rc == 85 || $rc == 0 ]] || fail "--exit-after-checkpoint, resumed: exit $rc"
done
[[ $(evals "$TMP/ex.jsonl") == "$(evals "$TMP/ev1.jsonl")" ]] ||
  fail "evaluations across --exit-after-checkpoint: $(evals "$TMP/ex.jsonl"), straight: $(evals "$TMP/ev1.jsonl")"
cmp -s "$TMP/ev1/model.safetensors" "$TMP/ex/model.safetensors" || fail "--exit-after-checkpoint's weights differ"
pass "an --eval-every evaluation cut by a stop, or after an --exit-after-checkpoint save, is made on resuming"

# The same for the evaluation that ends a --max-steps run, inside an epoch
# (alone or at an --eval-every step) or at its end: the resume to the same --max-steps
# makes it, where it once found nothing to do and never reported the run.
lines() { python3 -c 'import json,sys; print([(e["event"], e["step"], e["test_loss"], e["test_acc"]) for e in map(json.loads, open(sys.argv[1])) if e["event"] in ("eval", "epoch")])' "$1"; }
for every in "--max-steps 5" "--max-steps 5 --eval-every 5" "--max-steps 600 --epochs 2"; do # the last at an epoch's end
  ms=(--model fmnist-mlp --threads 1 --save-model --quiet $every)
  rm -rf "$TMP/ms-straight" "$TMP/ms-cut" "$TMP"/ms-*.jsonl
  "$PTRAIN" train "${ms[@]}" --checkpoint-dir "$TMP/ms-straight" --metrics "$TMP/ms-straight.jsonl" >/dev/null
  rc=0
  PTRAIN_TEST_STOP_IN_EVAL=2 "$PTRAIN" train "${ms[@]}" --checkpoint-dir "$TMP/ms-cut" --metrics "$TMP/ms-cut.jsonl" \
    >"$TMP/ms.out" 2>&1 || rc=$?
  [[ $rc == 85 ]] || fail "stop in the closing evaluation${every:+ ($every)}: exit $rc: $(cat "$TMP/ms.out")"
  "$PTRAIN" train "${ms[@]}" --checkpoint-dir "$TMP/ms-cut" --metrics "$TMP/ms-cut.jsonl" --resume >"$TMP/ms.out" 2>&1 ||
    fail "resuming a cut closing evaluation: $(cat "$TMP/ms.out")"
  [[ $(lines "$TMP/ms-cut.jsonl") == "$(lines "$TMP/ms-straight.jsonl")" ]] ||
    fail "resumed${every:+ ($every)}: $(lines "$TMP/ms-cut.jsonl"), straight: $(lines "$TMP/ms-straight.jsonl")"
  "$PTRAIN" train "${ms[@]}" --checkpoint-dir "$TMP/ms-cut" --metrics "$TMP/ms-cut.jsonl" --resume >/dev/null 2>&1
  [[ $(lines "$TMP/ms-cut.jsonl") == "$(lines "$TMP/ms-straight.jsonl")" ]] ||
    fail "a second resume evaluated again: $(lines "$TMP/ms-cut.jsonl")"
done
pass "the evaluation closing a --max-steps run, cut by a stop, is made on resuming, once"
