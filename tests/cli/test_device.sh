# --device and --devices: names are checked, CPU and CUDA are not mixed, what
# GPUs cannot do yet is refused by name, and a machine without a usable GPU
# says why instead of failing obscurely. The GPU run itself is compared with
# the CPU by tests/parallel/test_gpu_training.sh where a GPU is present.
source "$(dirname "$0")/lib.sh"
need_fmnist

T=("$PTRAIN" train --model fmnist-mlp --max-steps 2 --quiet)
expect_exit 2 "'gpu' is not a device; expected cpu, cpu:N, cuda or cuda:N" -- "${T[@]}" --device gpu
expect_exit 2 "'cuda:x': expected cuda:N" -- "${T[@]}" --device cuda:x
expect_exit 2 "'cuda:' : expected|'cuda:': expected cuda:N" -- "${T[@]}" --device cuda:
# The index is decimal digits alone: no space, no sign, no "-0" (strtol
# took those, while a trailing space was refused).
for d in "cpu: 1" "cpu:-0" "cpu:+1" "cpu:1 "; do
  expect_exit 2 "--devices: '${d/+/\\+}': expected cpu:N with N from 0 to" -- "${T[@]}" --parallel dp --devices "cpu:0,$d"
done
expect_exit 2 "--device: 'cpu:\+0': expected cpu:N" -- "${T[@]}" --device cpu:+0
expect_exit 2 "--device: 'cuda:-0': expected cuda:N" -- "$PTRAIN" eval --checkpoint x --device cuda:-0
expect_exit 2 "--device: 'cuda: 1': expected cuda:N" -- "${T[@]}" --device "cuda: 1"
# The CPU is one device: cpu:N names only a stage or a dp worker of --devices.
expect_exit 2 "--device: 'cpu:1': the CPU is one device, cpu [(]or cpu:0[)]" -- "${T[@]}" --device cpu:1
expect_exit 2 "--device: 'cpu:3': the CPU is one device" -- "$PTRAIN" eval --checkpoint x --model fmnist-mlp --device cpu:3
expect_exit 2 "mixes CPU and CUDA devices" -- "${T[@]}" --parallel dp --devices cuda:0,cpu:1
expect_exit 2 "cuda:0 is named twice" -- "${T[@]}" --parallel dp --devices cuda:0,cuda:0
expect_exit 2 "list the GPUs with --devices cuda:0,cuda:1" -- "${T[@]}" --parallel dp --device cuda
expect_exit 2 "--device names the one device" -- "${T[@]}" --device cuda --parallel dp --devices cuda:0,cuda:1
expect_exit 2 "name the stages' devices with --devices cuda:0,cuda:1" -- "${T[@]}" --device cuda --parallel model
expect_exit 2 "--precision tf32 is for GPUs" -- "${T[@]}" --precision tf32
expect_exit 2 "--precision bf16 is for GPUs" -- "${T[@]}" --precision bf16
expect_exit 2 "expected one of fp32[|]tf32[|]bf16, got 'fp16'" -- "${T[@]}" --precision fp16
# --cuda-graphs: one GPU's whole steps, timed as one launch; refused, naming why, elsewhere.
expect_exit 2 "--cuda-graphs is for a GPU" -- "${T[@]}" --cuda-graphs
expect_exit 2 "--cuda-graphs captures the step of one GPU" -- "${T[@]}" --cuda-graphs --parallel dp --devices cuda:0,cuda:1
expect_exit 2 "--cuda-graphs captures the step of one GPU" -- "${T[@]}" --cuda-graphs --parallel model --devices cuda:0,cuda:0
expect_exit 2 "not with --accum-steps 2" -- "${T[@]}" --cuda-graphs --device cuda --accum-steps 2
expect_exit 2 "--profile and --trace time each layer" -- "${T[@]}" --cuda-graphs --device cuda --profile
expect_exit 2 "--profile and --trace time each layer" -- "${T[@]}" --cuda-graphs --device cuda --trace "$TMP/t.json"
expect_exit 2 "--cuda-graphs and --no-cuda-graphs contradict each other" -- "${T[@]}" --cuda-graphs --no-cuda-graphs
# By default the CPU and what cannot be captured just run eagerly.
"${T[@]}" --no-cuda-graphs >/dev/null || fail "--no-cuda-graphs on the CPU"
"${T[@]}" --metrics "$TMP/g.jsonl" >"$TMP/g.log" 2>&1 || fail "a CPU run: $(cat "$TMP/g.log")"
grep -q "graph_steps" "$TMP/g.jsonl" && fail "a CPU run counts graph steps"
grep -qi "graph" "$TMP/g.log" && fail "a CPU run talks of CUDA graphs: $(cat "$TMP/g.log")"
pass "CUDA graphs: off on the CPU without a word; the two flags contradict"
# Stages may share a GPU; without one the run says so, naming the device.
# (no grep -q in the pipe: exiting at its first match could kill the
# writer, and pipefail would turn a usable GPU into none)
usable=$("$PTRAIN" info 2>/dev/null | grep -E "^  cuda:[0-9]+: " | grep -v ": unusable" || true)
if [[ -z $usable ]]; then
  expect_exit 1 "training on cuda:0: " -- "${T[@]}" --parallel pipeline --devices cuda:0,cuda:0
fi

expect_exit 2 "--device: 'gpu' is not a device; expected cpu, cpu:N, cuda or cuda:N" -- "$PTRAIN" eval --checkpoint x --model fmnist-mlp \
  --device gpu

# --device cpu is the default, bit for bit.
"${T[@]}" --metrics "$TMP/a.jsonl" >/dev/null
"${T[@]}" --metrics "$TMP/b.jsonl" --device cpu:0 >/dev/null
cmp -s <(grep -o '"train_loss":[^,]*' "$TMP/a.jsonl") <(grep -o '"train_loss":[^,]*' "$TMP/b.jsonl") ||
  fail "--device cpu:0 trains differently from the default"
pass "--device cpu:0 is the default"

# Without a usable GPU, --device cuda fails with the reason (no driver, no
# device, or a CPU-only build), before any training.
if ! "$PTRAIN" info | grep -E "^  cuda:[0-9]+: " >/dev/null; then
  expect_exit 1 "training on cuda:0: .*(no NVIDIA driver|no CUDA-capable|built without CUDA|CUDA_VISIBLE_DEVICES|driver)" \
    -- "${T[@]}" --device cuda
  expect_exit 1 "cuda:[01]: .*(driver|device|built without)" -- "${T[@]}" --parallel dp --devices cuda:0,cuda:1
  # --sync-bn is built for GPUs: refused here for the missing GPU only.
  expect_exit 1 "cuda:[01]: .*(driver|device|built without)" -- "${T[@]}" --parallel dp --devices cuda:0,cuda:1 \
    --sync-bn
fi
