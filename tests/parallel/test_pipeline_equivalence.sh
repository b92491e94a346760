# --parallel model and pipeline: after K steps the parameters equal one
# device's within 1e-5 relative (shuffling and dropout off), for model
# parallelism and both pipeline schedules at M = 1, 2, 4; over threads
# (cpu:N devices) and over MPI ranks, also as 2 stages x 2 replicas.
# Batch norm normalises each micro-batch alone (as GPipe does), so a
# pipeline of M micro-batches equals one device running the same M pieces
# with gradient accumulation, and differs from one device on the whole
# batch. 1F1B holds fewer micro-batches than GPipe at M = 8.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
common=(--model fmnist-mlp --no-shuffle --no-dropout --max-steps 4 --threads 1 --save-model --quiet
        --optimizer adam --batch-size 128)

"$PTRAIN" train "${common[@]}" --checkpoint-dir "$TMP/one" >/dev/null
"$PTRAIN" train "${common[@]}" --parallel model --devices cpu:0,cpu:1 --checkpoint-dir "$TMP/model" >/dev/null
check_close "fmnist-mlp, model parallel on cpu:0,cpu:1 = one device" "$TMP/one" "$TMP/model"
for sched in gpipe 1f1b; do
  for m in 1 2 4; do
    "$PTRAIN" train "${common[@]}" --parallel pipeline --micro-batches $m --schedule $sched \
      --checkpoint-dir "$TMP/$sched-$m" >/dev/null
    check_close "fmnist-mlp, pipeline $sched, $m micro-batches = one device" "$TMP/one" "$TMP/$sched-$m"
  done
done
# Both schedules sum the micro-batches' gradients in the same order.
cmp -s "$TMP/gpipe-4/model.safetensors" "$TMP/1f1b-4/model.safetensors" ||
  fail "gpipe and 1f1b at 4 micro-batches are not bit-identical"
pass "gpipe and 1f1b give the same bits"

# Three stages of a CNN, at boundaries given by name, with a short last batch
# (100 = 34 + 34 + 32) and the stage table in the log.
cnn=(--model mnist-cnn --no-shuffle --no-dropout --max-steps 3 --save-model --optimizer sgd --threads 1
     --batch-size 100 --log-interval 1000)
"$PTRAIN" train "${cnn[@]}" --quiet --checkpoint-dir "$TMP/cnn1" >/dev/null
"$PTRAIN" train "${cnn[@]}" --parallel pipeline --devices cpu:0,cpu:1,cpu:2 --split conv2,fc1 --micro-batches 3 \
  --checkpoint-dir "$TMP/cnn3" >"$TMP/cnn3.log"
check_close "mnist-cnn, 3 stages split at conv2 and fc1, 3 micro-batches = one device" "$TMP/cnn1" "$TMP/cnn3"
grep -q "stage 1: layers 2-6 (conv2d conv2 .. flatten)" "$TMP/cnn3.log" || fail "no stage plan: $(cat "$TMP/cnn3.log")"
grep -Eq "^bubble: .* ideal 40.0% for equal stages" "$TMP/cnn3.log" || fail "no bubble line: $(cat "$TMP/cnn3.log")"
pass "the log shows the stages and the bubble against (p-1)/(m+p-1)"

# Each stage's row covers its step: forward, backward, send and idle add
# up to most of the profiled step (the optimizer and the data are the
# rest). The last stage's wait for the first one's backward passes, after
# its own schedule, was once left out of its idle: 19.6 of a 34.9 ms step.
# The forward column is the layers' own time: handing the activations on
# was once in it (12.3 ms against 8.2 in the layers).
"$PTRAIN" train --model mnist-cnn --max-steps 20 --threads 1 --batch-size 64 --parallel model --profile \
  --log-interval 1000 --checkpoint-dir "$TMP/rows" >"$TMP/rows.log" 2>&1 || fail "model --profile: $(cat "$TMP/rows.log")"
python3 - "$TMP/rows.log" <<'PY' || fail "stage rows: $(cat "$TMP/rows.log")"
import re, sys
text = open(sys.argv[1]).read()
step = float(re.search(r"^profile: \d+ steps, ([0-9.]+) ms/step", text, re.M).group(1))
rows = re.findall(r"^([01]) +\d+-\d+ +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) ", text, re.M)
assert len(rows) == 2, rows
for stage, f, b, send, idle in rows:
    total = float(f) + float(b) + float(send) + float(idle)
    assert 0.8 * step <= total <= 1.05 * step, (stage, total, step)
    assert float(send) > 0, (stage, send)
# Stage 0's layers are the whole of its forward column, to within the
# model's own bookkeeping.
layer_row = r"^(\S+ \S+|\S+ \(fused\)|\S+) +([0-9.]+) +[0-9.]+ +[0-9.]+%"
layers = {m.group(1): float(m.group(2)) for m in re.finditer(layer_row, text, re.M)}
fwd0 = float(rows[0][1])
own = sum(v for k, v in layers.items() if k in ("conv2d conv1", "conv2d conv2", "dropout"))
assert fwd0 <= 1.2 * own + 0.5, (fwd0, own, layers)
PY
pass "model parallel: each stage's forward, backward, send and idle add up to its step; forward is the layers'"

# Batch norm.
bn=(--model-file docs/examples/small-cnn.txt --no-shuffle --no-dropout --max-steps 3 --threads 1 --save-model --quiet)
"$PTRAIN" train "${bn[@]}" --batch-size 64 --checkpoint-dir "$TMP/bn1" >/dev/null
"$PTRAIN" train "${bn[@]}" --batch-size 64 --parallel model --checkpoint-dir "$TMP/bn-model" >/dev/null
check_close "batch norm, model parallel = one device (the batch stays whole)" "$TMP/bn1" "$TMP/bn-model"
"$PTRAIN" train "${bn[@]}" --batch-size 16 --accum-steps 4 --checkpoint-dir "$TMP/bn-accum" >/dev/null
"$PTRAIN" train "${bn[@]}" --batch-size 64 --parallel pipeline --micro-batches 4 --checkpoint-dir "$TMP/bn-pipe" >/dev/null
check_close "batch norm, pipeline of 4 micro-batches = one device accumulating 4 x 16" "$TMP/bn-accum" "$TMP/bn-pipe"
if "$ST_CLOSE" "$TMP/bn1/model.safetensors" "$TMP/bn-pipe/model.safetensors" 1e-5 >/dev/null 2>&1; then
  fail "batch norm: the pipeline matched one device on the whole batch, so micro-batch statistics were not used"
fi
pass "batch norm: the pipeline differs from one device on the whole batch of 64, as it must"

# Peak activation memory: 1F1B keeps at most 2 micro-batches on stage 0 of 2, GPipe all 8.
for sched in gpipe 1f1b; do
  "$PTRAIN" train --model mnist-cnn --max-steps 2 --threads 1 --batch-size 64 --parallel pipeline --micro-batches 8 \
    --schedule $sched --log-interval 1000 >"$TMP/mem-$sched.log" || fail "$sched run: $(cat "$TMP/mem-$sched.log")"
done
g=$(awk '$1 == "0" && /MiB/ {print $(NF-3)}' "$TMP/mem-gpipe.log")
o=$(awk '$1 == "0" && /MiB/ {print $(NF-3)}' "$TMP/mem-1f1b.log")
grep -q "(8 micro-batches)" "$TMP/mem-gpipe.log" && grep -q "(2 micro-batches)" "$TMP/mem-1f1b.log" ||
  fail "micro-batches alive: $(grep MiB "$TMP/mem-gpipe.log" "$TMP/mem-1f1b.log")"
awk -v g="$g" -v o="$o" 'BEGIN { exit !(o > 0 && o * 3 < g) }' ||
  fail "stage 0's peak activations: 1f1b $o MiB, gpipe $g MiB"
pass "stage 0's peak activations at 8 micro-batches: 1f1b $o MiB, gpipe $g MiB"

# The trace draws one track per stage, with a span per micro-batch pass.
"$PTRAIN" train --model fmnist-mlp --max-steps 3 --threads 1 --parallel pipeline --micro-batches 4 --quiet \
  --trace "$TMP/pipe.json" >/dev/null || fail "trace run"
python3 - "$TMP/pipe.json" <<'PY' || fail "pipeline trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
for stage in ("stage 0", "stage 1"):
    tid = [t for t, n in names.items() if n == stage]
    assert tid, f"no track {stage}: {sorted(names.values())}"
    spans = {e["name"] for e in ev if e.get("tid") == tid[0] and e.get("ph") == "X"}
    for want in ("F0", "F3", "B0", "B3"):
        assert want in spans, f"{stage} has no span {want}"
PY
pass "--trace: a track per stage with F and B spans per micro-batch"

# Resume: 2 steps, then 2 more from the checkpoint, equals 4 straight.
"$PTRAIN" train "${common[@]}" --parallel pipeline --max-steps 2 --checkpoint-dir "$TMP/res" >/dev/null
"$PTRAIN" train "${common[@]}" --parallel pipeline --resume --checkpoint-dir "$TMP/res" >/dev/null
cmp -s "$TMP/res/model.safetensors" "$TMP/1f1b-4/model.safetensors" || fail "a resumed pipeline run differs"
pass "pipeline: stopped at step 2 and resumed = 4 steps straight, bit for bit"
# A stop during the stages' evaluation cuts it short, every stage at the
# same test batch (it once ran to its end, eating into the time before
# SIGKILL); the resumed run makes it again: the straight run's lines.
lines() { python3 -c 'import json,sys; print([(e["event"], e["step"], e["test_loss"]) for e in map(json.loads, open(sys.argv[1]))])' "$1"; }
for par in "pipeline --micro-batches 2" "model"; do
  ev=(--model fmnist-mlp --threads 1 --epochs 2 --max-steps 650 --batch-size 100 --parallel $par --save-model --quiet)
  rm -rf "$TMP/evs" "$TMP/evc" "$TMP"/ev?.jsonl
  "$PTRAIN" train "${ev[@]}" --checkpoint-dir "$TMP/evs" --metrics "$TMP/evs.jsonl" >/dev/null
  rc=0
  PTRAIN_TEST_STOP_IN_EVAL=3 "$PTRAIN" train "${ev[@]}" --checkpoint-dir "$TMP/evc" --metrics "$TMP/evc.jsonl" \
    >"$TMP/evc.out" 2>&1 || rc=$?
  [[ $rc == 85 ]] && grep -q "stopped by Terminated after step 600" "$TMP/evc.out" ||
    fail "$par: a stop in the evaluation of epoch 1: exit $rc: $(cat "$TMP/evc.out")"
  [[ ! -s $TMP/evc.jsonl ]] || fail "$par: a cut evaluation reported: $(cat "$TMP/evc.jsonl")"
  "$PTRAIN" train "${ev[@]}" --checkpoint-dir "$TMP/evc" --metrics "$TMP/evc.jsonl" --resume >/dev/null ||
    fail "$par: resuming a cut evaluation"
  [[ $(lines "$TMP/evc.jsonl") == "$(lines "$TMP/evs.jsonl")" ]] ||
    fail "$par: resumed $(lines "$TMP/evc.jsonl"), straight $(lines "$TMP/evs.jsonl")"
  cmp -s "$TMP/evs/model.safetensors" "$TMP/evc/model.safetensors" || fail "$par: the resumed weights differ"
done
pass "model and pipeline: a stop during evaluation cuts it at one batch for every stage; the resume makes it"

# Stages on GPUs hand pieces over by reference (a token, the neighbour's
# event, a device-to-device copy, an acknowledgement); the tests run the
# same hand-over on CPU threads, where it must give the same bits as
# messages, in training, evaluation and resume, for 2 and 3 stages.
for run in "gpipe-4:--micro-batches 4 --schedule gpipe" "1f1b-4:--micro-batches 4 --schedule 1f1b" "model:"; do
  name=${run%%:*}
  if [ "$name" = model ]; then par=(--parallel model); else par=(--parallel pipeline ${run#*:}); fi
  PTRAIN_TEST_PIPE_DIRECT=1 "$PTRAIN" train "${common[@]}" "${par[@]}" --checkpoint-dir "$TMP/direct-$name" \
    --metrics "$TMP/direct-$name.jsonl" >/dev/null || fail "direct hand-over, $name"
  cmp -s "$TMP/direct-$name/model.safetensors" "$TMP/$name/model.safetensors" ||
    fail "direct hand-over, $name: the weights differ from messages'"
done
PTRAIN_TEST_PIPE_DIRECT=1 "$PTRAIN" train "${cnn[@]}" --parallel pipeline --devices cpu:0,cpu:1,cpu:2 \
  --split conv2,fc1 --micro-batches 3 --checkpoint-dir "$TMP/direct-cnn3" --metrics "$TMP/direct-cnn3.jsonl" \
  --quiet >/dev/null || fail "direct hand-over, 3 stages"
cmp -s "$TMP/direct-cnn3/model.safetensors" "$TMP/cnn3/model.safetensors" ||
  fail "direct hand-over, 3 stages: the weights differ from messages'"
"$PTRAIN" train "${cnn[@]}" --parallel pipeline --devices cpu:0,cpu:1,cpu:2 --split conv2,fc1 --micro-batches 3 \
  --checkpoint-dir "$TMP/msg-cnn3" --metrics "$TMP/msg-cnn3.jsonl" --quiet >/dev/null || fail "3 stages"
acc() { python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "test_acc" in l][-1]["test_acc"])' "$1"; }
[ "$(acc "$TMP/direct-cnn3.jsonl")" = "$(acc "$TMP/msg-cnn3.jsonl")" ] ||
  fail "direct hand-over: test accuracy $(acc "$TMP/direct-cnn3.jsonl"), messages $(acc "$TMP/msg-cnn3.jsonl")"
PTRAIN_TEST_PIPE_DIRECT=1 "$PTRAIN" train "${common[@]}" --parallel pipeline --max-steps 2 \
  --checkpoint-dir "$TMP/direct-res" >/dev/null
PTRAIN_TEST_PIPE_DIRECT=1 "$PTRAIN" train "${common[@]}" --parallel pipeline --resume \
  --checkpoint-dir "$TMP/direct-res" >/dev/null
cmp -s "$TMP/direct-res/model.safetensors" "$TMP/1f1b-4/model.safetensors" || fail "direct hand-over: resume differs"
# The variable does switch the hand-over: only direct tags cap M at 8000.
PTRAIN_TEST_PIPE_DIRECT=1 "$PTRAIN" train --model fmnist-mlp --max-steps 1 --parallel pipeline --quiet \
  --micro-batches 8001 --batch-size 8001 >"$TMP/direct-max.out" 2>&1 && fail "direct hand-over took 8001 micro-batches"
grep -q "expected 1 to 8000 for stages in one process" "$TMP/direct-max.out" || fail "$(cat "$TMP/direct-max.out")"
pass "direct hand-over (GPUs' way) = messages, bit for bit: model, gpipe, 1f1b, 3 stages, evaluation, resume"

# Mistakes are refused with a message that names them.
expect_usage() {
  local want=$1
  shift
  "$PTRAIN" train --model fmnist-mlp --max-steps 1 "$@" >"$TMP/err.out" 2>&1 && fail "accepted: $*"
  grep -q -- "$want" "$TMP/err.out" || fail "$*: no '$want' in: $(cat "$TMP/err.out")"
}
expect_usage "are for --parallel pipeline" --parallel model --micro-batches 4
expect_usage "micro-batches already accumulate" --parallel pipeline --accum-steps 2
expect_usage "no layer of that name" --parallel model --split fc1
expect_usage "only 'flatten'" --parallel model --split 1
expect_usage "more than the batch size" --parallel pipeline --micro-batches 101
expect_usage "are for --parallel model or pipeline" --micro-batches 4
expect_usage "cpu:1 is named twice" --parallel model --devices cpu:0,cpu:1,cpu:1
expect_usage "--bucket-mb sizes the gradient buckets that data-parallel replicas sum; these 2 stages are one replica" \
  --parallel pipeline --bucket-mb 4
pass "mistakes in the flags are refused with a message naming them"

# MPI ranks as stages.
need_mpi
"$PTRAIN" train "${common[@]}" --batch-size 64 --checkpoint-dir "$TMP/one64" >/dev/null
timeout 300 mpirun -np 2 "$PTRAIN" train "${common[@]}" --parallel pipeline --micro-batches 4 \
  --checkpoint-dir "$TMP/mpi2" >/dev/null || fail "mpirun -np 2 pipeline"
check_close "MPI: 2 ranks as pipeline stages = one device" "$TMP/one" "$TMP/mpi2"
cmp -s "$TMP/mpi2/model.safetensors" "$TMP/1f1b-4/model.safetensors" || fail "ranks and threads differ"
pass "MPI stages and thread stages give the same bits"
timeout 300 mpirun -np 4 "$PTRAIN" train "${common[@]}" --batch-size 32 --parallel pipeline --stages 2 \
  --micro-batches 2 --bucket-mb 0.5 --checkpoint-dir "$TMP/mpi4" >/dev/null || fail "mpirun -np 4 pipeline"
check_close "MPI: 2 stages x 2 replicas at batch 32 = one device at 64" "$TMP/one64" "$TMP/mpi4"
timeout 300 mpirun -np 3 "$PTRAIN" train --model fmnist-mlp --max-steps 1 --parallel pipeline --stages 2 \
  >"$TMP/mpi3.out" 2>&1 && fail "3 ranks as replicas of 2 stages were accepted"
grep -q "cannot form whole replicas of 2 stages" "$TMP/mpi3.out" || fail "3 ranks: $(cat "$TMP/mpi3.out")"
pass "3 ranks for 2 stages are refused with a message"
# On GPUs the stages as ranks are one replica: several would sum their
# gradients between GPUs, which is not built for stages (refused before
# any GPU is touched, so this runs without one).
timeout 300 mpirun -np 2 "$PTRAIN" train --model fmnist-mlp --max-steps 1 --parallel pipeline --stages 1 \
  --device cuda >"$TMP/mpi-gpu.out" 2>&1 && fail "2 replicas of 1 stage on GPUs were accepted"
grep -q "2 replicas of the stages would sum their gradients between GPUs" "$TMP/mpi-gpu.out" ||
  fail "replicas of GPU stages: $(cat "$TMP/mpi-gpu.out")"
pass "replicas of stages on GPUs are refused with a message"
