# Training on GPUs against the CPU reference. Runs where `ptrain info` lists
# a GPU; elsewhere it is skipped with the reason (the refusals that need no
# GPU are tests/cli/test_device.sh's).
#   - K steps of each preset on the GPU end within 1e-4 (relative, as
#     st_close measures it) of the CPU with the same seed and no dropout,
#     under SGD: Adam's first steps are about lr * sign(g), so a gradient
#     entry that is only rounding noise can move a weight by a whole step
#     between two summation orders (the optimizers themselves are compared
#     op by op in tests/cuda/test_ops.c);
#   - cifar-convnet too, on a small CIFAR-shaped set, with batch norm and
#     augmentation;
#   - a GPU run repeated gives the same bits;
#   - a resumed GPU run equals an uninterrupted one;
#   - ddp with two ranks on one GPU falls back to host staging, warns, and
#     equals one GPU at twice the batch; dp over two GPUs does too, where
#     there are two.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
"$PTRAIN" info >"$TMP/info"
# Usable GPUs only: `info` lists one it cannot open as "cuda:N: unusable".
ngpu=$(grep -E "^  cuda:[0-9]+: " "$TMP/info" | grep -vc ": unusable" || true)
if [[ $ngpu -lt 1 ]]; then
  echo "SKIPPED: no GPU ($(grep -E '^  cuda' "$TMP/info" | head -1 | sed 's/^ *//'))"
  exit 77
fi

K=10
make_cifar "$TMP/cifar" 256
for model in fmnist-mlp mnist-cnn tutorial-cnn cifar-convnet; do
  common=(train --model "$model" --max-steps $K --no-dropout --quiet --save-model --optimizer sgd --lr 0.01)
  [[ $model == cifar-convnet ]] && common+=(--data-dir "$TMP/cifar")
  "$PTRAIN" "${common[@]}" --device cpu --checkpoint-dir "$TMP/cpu-$model" >/dev/null ||
    fail "$model on the CPU"
  "$PTRAIN" "${common[@]}" --device cuda --checkpoint-dir "$TMP/gpu-$model" >"$TMP/log" 2>&1 ||
    fail "$model on the GPU: $(cat "$TMP/log")"
  "$ST_CLOSE" "$TMP/cpu-$model/model.safetensors" "$TMP/gpu-$model/model.safetensors" 1e-4 >"$TMP/close" 2>&1 ||
    fail "$model: GPU against CPU after $K steps: $(cat "$TMP/close")"
  pass "$model: $K steps on the GPU match the CPU: $(cat "$TMP/close")"
done

# The same seed on the same GPU: the same bits (no atomics in reductions).
"$PTRAIN" train --model mnist-cnn --max-steps $K --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/again" >/dev/null || fail "mnist-cnn on the GPU, again"
"$ST_CLOSE" "$TMP/gpu-mnist-cnn/model.safetensors" "$TMP/again/model.safetensors" 0 >/dev/null 2>&1 &&
  fail "a dropout run should differ from the --no-dropout one"
"$PTRAIN" train --model mnist-cnn --max-steps $K --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/again2" >/dev/null || fail "mnist-cnn on the GPU, a third time"
cmp -s "$TMP/again/model.safetensors" "$TMP/again2/model.safetensors" || fail "two GPU runs differ"
pass "two GPU runs with dropout give the same bits"

# Resume on the GPU.
"$PTRAIN" train --model tutorial-cnn --max-steps 4 --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/straight" >/dev/null || fail "4 steps straight"
"$PTRAIN" train --model tutorial-cnn --max-steps 2 --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/resumed" >/dev/null || fail "2 steps"
"$PTRAIN" train --model tutorial-cnn --max-steps 4 --quiet --save-model --device cuda --resume \
  --checkpoint-dir "$TMP/resumed" >/dev/null || fail "resumed to 4 steps"
cmp -s "$TMP/straight/model.safetensors" "$TMP/resumed/model.safetensors" || fail "resumed GPU run differs"
pass "a resumed GPU run equals an uninterrupted one"

# The loss is read back at log intervals only; a run's printed metrics exist.
# Where NVML samples the GPU, the line says over which window of Unix time
# its utilisation is the mean (for a comparison with nvidia-smi's samples).
t0=$(date +%s.%N)
"$PTRAIN" train --model fmnist-mlp --max-steps 25 --log-interval 10 --device cuda --metrics "$TMP/m.jsonl" \
  >/dev/null 2>&1 || fail "fmnist-mlp with metrics"
t1=$(date +%s.%N)
grep -q '"train_loss"' "$TMP/m.jsonl" || fail "no train_loss in the metrics: $(cat "$TMP/m.jsonl")"
python3 - "$TMP/m.jsonl" "$t0" "$t1" <<'PY' || fail "the GPU's window in the metrics"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if '"epoch"' in l][-1]
if "gpu_util_pct" in e:
    t0, t1 = float(sys.argv[2]), float(sys.argv[3])
    assert t0 <= e["gpu_since"] < e["gpu_until"] <= t1, (t0, e["gpu_since"], e["gpu_until"], t1)
PY
pass "GPU metrics are written"

# ptrain bench on the GPU: the steps queued as training queues them, the
# clock waiting for the GPU at both ends; a JSON line naming the GPU. The
# step is captured after 2 eager ones, within the 3 of warm-up, so every
# timed step is a graph's replay; --no-cuda-graphs launches them eagerly.
for model in mnist-cnn cifar-convnet; do
  extra=()
  [[ $model == cifar-convnet ]] && extra=(--data-dir "$TMP/cifar")
  for graphs in 20 0; do
    [[ $graphs == 0 ]] && extra+=(--no-cuda-graphs)
    "$PTRAIN" bench --model "$model" --device cuda --steps 20 --warmup 3 --json "${extra[@]}" >"$TMP/bench.json" \
      2>"$TMP/bench.err" || fail "bench --device cuda ${extra[*]}, $model: $(cat "$TMP/bench.err")"
    python3 - "$TMP/bench.json" "$graphs" <<'PY' || fail "bench --device cuda ${extra[*]}, $model: $(cat "$TMP/bench.json")"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["device"] == "cuda:0" and r["gpu"].startswith("cuda:0 (") and r["precision"] == "fp32", r
assert r["steps"] == 20 and r["images_per_s"] > 0, r
assert r["cuda_graph_steps"] == int(sys.argv[2]), r
assert abs(r["images_per_s"] * r["step_ms"] / 1000 - r["batch"]) < 0.01 * r["batch"], r
PY
    [[ ! -s $TMP/bench.err ]] || fail "bench --device cuda ${extra[*]}, $model said: $(cat "$TMP/bench.err")"
    pass "bench --device cuda ${extra[*]}, $model: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["images_per_s"], "images/s")' "$TMP/bench.json")"
  done
done

"$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --quiet --save-model --device cuda:0 \
  --batch-size 100 --checkpoint-dir "$TMP/one" >/dev/null || fail "one GPU at batch 100"
# ddp, two ranks sharing the one GPU: host staging, with a warning.
if mpi_usable >/dev/null; then
  need_mpi
  CUDA_VISIBLE_DEVICES=0 mpirun -np 2 "$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --save-model \
    --device cuda --batch-size 50 --parallel ddp --checkpoint-dir "$TMP/ddp" >"$TMP/log" 2>&1 ||
    fail "ddp on one GPU: $(cat "$TMP/log")"
  grep -q "host memory" "$TMP/log" || fail "no host-staging warning: $(cat "$TMP/log")"
  check_close "ddp, 2 ranks on one GPU, equals one GPU at twice the batch" "$TMP/one" "$TMP/ddp"
fi

# Stages on GPUs (the model-parallel tutorial): on one GPU two stages share
# it, each on its own stream; activations and gradients go device to
# device. Model, GPipe and 1F1B equal one GPU within 1e-5.
devs=cuda:0,cuda:0
devs3=cuda:0,cuda:0,cuda:0
[[ $ngpu -ge 2 ]] && devs=cuda:0,cuda:1 && devs3=cuda:0,cuda:1,cuda:0
st=(train --model fmnist-mlp --max-steps 5 --no-dropout --no-shuffle --quiet --save-model --optimizer sgd
    --lr 0.05 --batch-size 100)
"$PTRAIN" "${st[@]}" --device cuda:0 --checkpoint-dir "$TMP/st-one" --metrics "$TMP/st-one.jsonl" >/dev/null ||
  fail "fmnist-mlp on one GPU"
"$PTRAIN" "${st[@]}" --parallel model --devices $devs --checkpoint-dir "$TMP/st-model" \
  --metrics "$TMP/st-model.jsonl" >"$TMP/log" 2>&1 || fail "model parallel on $devs: $(cat "$TMP/log")"
check_close "model parallel, 2 stages on $devs, equals one GPU" "$TMP/st-one" "$TMP/st-model"
for sched in gpipe 1f1b; do
  "$PTRAIN" "${st[@]}" --parallel pipeline --devices $devs --micro-batches 4 --schedule $sched \
    --checkpoint-dir "$TMP/st-$sched" >"$TMP/log" 2>&1 || fail "pipeline $sched on $devs: $(cat "$TMP/log")"
  check_close "pipeline $sched, 4 micro-batches on $devs, equals one GPU" "$TMP/st-one" "$TMP/st-$sched"
done
cmp -s "$TMP/st-gpipe/model.safetensors" "$TMP/st-1f1b/model.safetensors" ||
  fail "gpipe and 1f1b on GPUs are not bit-identical"
pass "gpipe and 1f1b on GPUs give the same bits"
# The same stages as MPI ranks, each binding the GPU of its local rank:
# the pieces go through host memory (with a warning), and the run gives
# the bits of the stages as threads.
if mpi_usable >/dev/null; then
  need_mpi
  loud=()
  for a in "${st[@]}"; do [[ $a == --quiet ]] || loud+=("$a"); done
  mpirun -np 2 "$PTRAIN" "${loud[@]}" --parallel pipeline --device cuda --micro-batches 4 --schedule 1f1b \
    --checkpoint-dir "$TMP/st-mpi" >"$TMP/log" 2>&1 || fail "pipeline as 2 MPI ranks on GPUs: $(cat "$TMP/log")"
  grep -q "go through host memory" "$TMP/log" || fail "no host-staging warning for MPI stages: $(cat "$TMP/log")"
  cmp -s "$TMP/st-1f1b/model.safetensors" "$TMP/st-mpi/model.safetensors" ||
    fail "pipeline 1f1b as 2 MPI ranks on GPUs differs from the same stages as threads on $devs"
  pass "pipeline 1f1b as 2 MPI ranks on GPUs: the bits of the same stages as threads on $devs"
fi
# Evaluation through the stages: the test loss of one GPU.
python3 - "$TMP/st-one.jsonl" "$TMP/st-model.jsonl" <<'PY' || fail "evaluation through GPU stages"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"test_loss"' in l][-1] for f in sys.argv[1:])
assert abs(a["test_loss"] - b["test_loss"]) <= 1e-4 * abs(a["test_loss"]), (a, b)
assert abs(a["test_acc"] - b["test_acc"]) <= 2e-4, (a, b)
print(f"PASS: evaluation through GPU stages: test loss {b['test_loss']:.6f} (one GPU {a['test_loss']:.6f}), "
      f"accuracy {b['test_acc']} ({a['test_acc']})")
PY
# Three stages of a CNN, a short last micro-batch (100 = 34 + 34 + 32).
cnn=(train --model mnist-cnn --max-steps 3 --no-dropout --no-shuffle --quiet --save-model --optimizer sgd
     --batch-size 100)
"$PTRAIN" "${cnn[@]}" --device cuda:0 --checkpoint-dir "$TMP/cnn-one" >/dev/null || fail "mnist-cnn on one GPU"
"$PTRAIN" "${cnn[@]}" --parallel pipeline --devices $devs3 --split conv2,fc1 --micro-batches 3 \
  --checkpoint-dir "$TMP/cnn-3" >"$TMP/log" 2>&1 || fail "mnist-cnn, 3 stages on $devs3: $(cat "$TMP/log")"
"$ST_CLOSE" "$TMP/cnn-one/model.safetensors" "$TMP/cnn-3/model.safetensors" 1e-5 >"$TMP/close" 2>&1 ||
  fail "mnist-cnn, 3 GPU stages against one GPU: $(cat "$TMP/close")"
pass "mnist-cnn, 3 stages on $devs3, 3 micro-batches, equals one GPU: $(cat "$TMP/close")"
# Dropout masks and resume: the same bits.
drop=(train --model mnist-cnn --quiet --save-model --parallel pipeline --devices $devs --micro-batches 2)
"$PTRAIN" "${drop[@]}" --max-steps 4 --checkpoint-dir "$TMP/dr-a" >/dev/null || fail "pipeline with dropout"
"$PTRAIN" "${drop[@]}" --max-steps 2 --checkpoint-dir "$TMP/dr-b" >/dev/null || fail "pipeline, 2 steps"
"$PTRAIN" "${drop[@]}" --max-steps 4 --resume --checkpoint-dir "$TMP/dr-b" >/dev/null || fail "pipeline resumed"
cmp -s "$TMP/dr-a/model.safetensors" "$TMP/dr-b/model.safetensors" || fail "GPU stages: resumed run differs"
pass "GPU stages with dropout: a resumed run equals an uninterrupted one, bit for bit"

# No host sync in the steady-state step: over an epoch the host empties the
# GPU's queue only where it reads the loss back (every --log-interval steps
# and at the end), one download each, not once per step.
for model in fmnist-mlp mnist-cnn; do
  "$PTRAIN" train --model $model --epochs 1 --device cuda --log-interval 50 --quiet --metrics "$TMP/waits-$model.jsonl" \
    >/dev/null 2>&1 || fail "$model for the host waits"
  python3 - "$TMP/waits-$model.jsonl" $model <<'PY' || fail "$model: host waits"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if '"gpu_syncs"' in l][-1]
steps, reads, syncs = e["step"], e["gpu_loss_reads"], e["gpu_syncs"]
assert reads <= steps // 50 + 2, e
assert syncs <= reads + 2, f"{syncs} syncs in {steps} steps with {reads} loss reads: {e}"
print(f"PASS: {sys.argv[2]}: {syncs} syncs in {steps} steps, at {reads} loss reads "
      f"({e['gpu_ahead_waits']} waits with the host 16 uploads ahead of a busy GPU)")
PY
done

# CUDA graphs (the default on one GPU): the step captured once and
# replayed gives the eager steps' bits (--no-cuda-graphs). Two epochs each (the learning rate's schedule and the
# augmentation's epoch change, an evaluation runs between), with each
# optimizer the presets use: Adadelta with dropout (mnist-cnn, whose last
# batch of 32 runs eagerly), Adam and AdamW (fmnist-mlp), SGD with
# momentum (tutorial-cnn), and batch norm with augmentation (cifar-convnet).
# The metrics count the replayed steps: all but the first few of each
# epoch's.
for run in "mnist-cnn" "fmnist-mlp" "fmnist-mlp --optimizer adamw --weight-decay 0.01" \
  "tutorial-cnn --optimizer sgd --momentum 0.9" "cifar-convnet --data-dir $TMP/cifar"; do
  read -r -a extra <<<"$run"
  name=${run// /_}
  name=${name//\//_}
  for g in eager graphs; do
    flags=(train --model "${extra[@]}" --epochs 2 --device cuda --save-model --log-interval 100
      --metrics "$TMP/graph-$name-$g.jsonl" --checkpoint-dir "$TMP/graph-$name-$g")
    # the default for the presets, the flag for cifar-convnet: the same plan either way
    [[ $g == eager ]] && flags+=(--no-cuda-graphs)
    [[ $g == graphs && ${extra[0]} == cifar-convnet ]] && flags+=(--cuda-graphs)
    "$PTRAIN" "${flags[@]}" >"$TMP/log" 2>&1 || fail "$run $g: $(cat "$TMP/log")"
  done
  grep -q "^note: CUDA graphs" "$TMP/log" && fail "$run: the graphs were given up: $(grep '^note' "$TMP/log")"
  cmp -s "$TMP/graph-$name-eager/model.safetensors" "$TMP/graph-$name-graphs/model.safetensors" ||
    fail "$run: CUDA graphs changed the weights"
  python3 - "$TMP/graph-$name-eager.jsonl" "$TMP/graph-$name-graphs.jsonl" "$run" <<'PY' || fail "$run: graph metrics"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"test_acc"' in l] for f in sys.argv[1:3])
assert [e["train_loss"] for e in a] == [e["train_loss"] for e in b], (a, b)
assert [e["test_acc"] for e in a] == [e["test_acc"] for e in b], (a, b)
assert "graph_steps" not in a[-1], a[-1]
replayed = [e["graph_steps"] for e in b]
steps = [b[0]["step"]] + [y["step"] - x["step"] for x, y in zip(b, b[1:])]
assert all(r >= s - 4 for r, s in zip(replayed, steps)), (replayed, steps)
print(f"PASS: {sys.argv[3]}: CUDA graphs give the eager bits; {replayed} of {steps} steps replayed")
PY
done

if [[ $ngpu -ge 2 ]]; then
  "$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --quiet --save-model --parallel dp \
    --devices cuda:0,cuda:1 --batch-size 50 --checkpoint-dir "$TMP/dp" >/dev/null || fail "dp on 2 GPUs"
  check_close "dp on 2 GPUs equals one GPU at twice the batch" "$TMP/one" "$TMP/dp"
fi

# --precision tf32 and bf16: one epoch of mnist-cnn within half a point of
# FP32's test accuracy, and the same bits twice (each changes rounding,
# not order), but not FP32's bits. Any change of rounding sends a run down
# another path: TF32's rounding emulated on the CPU moved one seed's
# accuracy by -0.16, -0.35, +1.07 and -1.00 points (bench/bf16_emulation.py
# --tf32), so one pair would leave a sound precision failing now and then.
# The means over five seeds are compared; their difference still has a
# standard error of about 0.35 points, which a failure prints beside the
# seeds' differences, to tell noise from a fault.
# Last, and both precisions before failing: a failure here says nothing
# of the checks above, and each precision's figures are wanted.
seeds=(1 2 3 4 5)
acc_failed=()
for p in fp32 tf32 bf16; do
  for seed in "${seeds[@]}"; do
    "$PTRAIN" train --model mnist-cnn --epochs 1 --device cuda --precision $p --seed $seed --save-model \
      --log-interval 1000 --metrics "$TMP/prec-$p-$seed.jsonl" --checkpoint-dir "$TMP/prec-$p-$seed" \
      >"$TMP/log-$p" 2>&1 || fail "mnist-cnn --precision $p --seed $seed: $(cat "$TMP/log-$p")"
  done
done
for p in tf32 bf16; do
  grep -q "precision $p" "$TMP/log-$p" || fail "the $p run's header does not say $p: $(head -3 "$TMP/log-$p")"
  python3 - "$TMP" $p "${seeds[@]}" <<'PY' || acc_failed+=("$p")
import json, sys
tmp, p, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
def acc(prec, seed):
    return [json.loads(l) for l in open(f"{tmp}/prec-{prec}-{seed}.jsonl") if '"test_acc"' in l][-1]["test_acc"]
a, b = ([acc(q, s) for s in seeds] for q in ("fp32", p))
ma, mb = sum(a) / len(a), sum(b) / len(b)
d = [y - x for x, y in zip(a, b)]
se = (sum((x - (mb - ma)) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
assert abs(ma - mb) <= 0.005, (f"mean test accuracy over seeds {seeds}: fp32 {ma:.4f} {a}, {p} {mb:.4f} {b}; "
                               f"differences {[round(x, 4) for x in d]}, standard error {se:.4f}")
print(f"PASS: --precision {p}: one epoch of mnist-cnn at mean test accuracy {mb:.4f} {b} (fp32 {ma:.4f} {a})")
PY
  "$PTRAIN" train --model mnist-cnn --epochs 1 --device cuda --precision $p --save-model --quiet \
    --checkpoint-dir "$TMP/prec-$p-again" >/dev/null || fail "$p again"
  cmp -s "$TMP/prec-$p-1/model.safetensors" "$TMP/prec-$p-again/model.safetensors" || fail "two $p runs differ"
  cmp -s "$TMP/prec-$p-1/model.safetensors" "$TMP/prec-fp32-1/model.safetensors" &&
    fail "the $p run gave fp32's bits: $p was not in use"
  pass "--precision $p: two runs bit for bit, and not fp32's bits"
done
cmp -s "$TMP/prec-tf32-1/model.safetensors" "$TMP/prec-bf16-1/model.safetensors" &&
  fail "the bf16 run gave tf32's bits"
[[ ${#acc_failed[@]} -eq 0 ]] || fail "accuracy under --precision ${acc_failed[*]} (above)"
