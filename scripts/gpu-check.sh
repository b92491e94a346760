#!/usr/bin/env bash
# What a GPU host checks, in one go: the GPU tests, the benchmark against
# PyTorch, and cifar-convnet's per-layer profiles. From the repository's
# root, after a CUDA build (or after `source /opt/ptrain-kit/env.sh`, see
# scripts/gpu-kit.sh):
#
#   scripts/gpu-check.sh OUTDIR [STEP...]
#
# Steps, in the order given (default: tests bench profile):
#   tests      ctest's GPU tests (ctest -L gpu -V)    -> OUTDIR/ctest.txt
#   bench      bench/gpu.sh, one round of each preset, at each of
#              PRECISIONS (default "fp32 bf16")      -> OUTDIR/gpu-<precision>.{jsonl,md}
#   profile    200 profiled steps of cifar-convnet (CIFAR_DIR, else a
#              synthetic set of its shape) with each convolution
#              choice and precision, the cuDNN plans of two of them
#              logged (PT_CUDA_CONV_LOG)             -> OUTDIR/profiles.txt
#   rates      ptrain bench's steady-state rate, with CUDA graphs and
#              without, beside one epoch of ptrain train, for mnist-cnn,
#              tutorial-cnn and cifar-convnet          -> OUTDIR/rates.{jsonl,txt}
# Each step's output is also printed. A step that fails is reported and the
# next one still runs; the exit status is the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR [tests|bench|profile|rates]...}
shift
mkdir -p "$OUT"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(tests bench profile)
PRECISIONS=${PRECISIONS:-"fp32 bf16"}
PTRAIN=${PTRAIN:-build/ptrain}
failed=0

# Verbose into the file: a passing test's figures (the precisions'
# accuracies, the bf16 rows' roundings) are wanted too. The summary is
# printed.
step_tests() {
  local rc=0
  (cd build && ctest -L gpu -V --timeout 900) >"$OUT/ctest.txt" 2>&1 || rc=1
  grep -E 'Test +#|tests passed|FAILED|PASS:|FAIL:|(^|: )ok:' "$OUT/ctest.txt"
  return $rc
}

step_bench() {
  local p rc=0
  for p in $PRECISIONS; do
    ROUNDS=${ROUNDS:-1} PRECISION=$p RESULTS="$OUT/gpu-$p.jsonl" bench/gpu.sh 2>&1 | tee "$OUT/gpu-$p.log" || rc=1
  done
  return $rc
}

# Each profile: an environment setting (or none) and ptrain's flags.
PROFILES=("PT_CUDA_CONV_LOG=1|" "PT_CUDA_CONV=gemm|" "PT_CUDA_WINOGRAD=fused PT_CUDA_CONV_LOG=1|" "|--precision tf32" "|--precision bf16")

# CIFAR-10 where it is, else a synthetic set of its shape (the timings do
# not depend on the pixels), into cifar_dir.
find_cifar() {
  cifar_dir=${CIFAR_DIR:-data/cifar10}
  if [[ ! -f $cifar_dir/data_batch_1.bin && ! -f $cifar_dir/cifar-10-batches-bin/data_batch_1.bin ]]; then
    cifar_dir=$OUT/synthetic-cifar10
    [[ -f $cifar_dir/data_batch_1.bin ]] ||
      "${PY:-python3}" bench/pytorch_gpu_bench.py --make-synthetic "$cifar_dir" --dataset cifar10 >/dev/null
  fi
}

step_profile() {
  local cifar_dir
  find_cifar || return 1
  local data=$cifar_dir
  {
    local rc=0 run env_ flags
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
    for run in "${PROFILES[@]}"; do
      env_=${run%%|*} flags=${run#*|}
      echo "# cifar-convnet --profile --max-steps 200 ${env_:-(default convolutions)} $flags, data $data"
      # shellcheck disable=SC2086 # flags are words
      env $env_ "$PTRAIN" train --model cifar-convnet --device cuda --profile --max-steps 200 --data-dir "$data" \
        --checkpoint-dir "$OUT/ck-profile" $flags 2>&1 || rc=1
    done
    rm -rf "$OUT/ck-profile"
    exit $rc
  } | tee "$OUT/profiles.txt"
}

# bench's rate is the steady state: no start-up, evaluation or epoch end,
# which train's epoch rate includes. The two apart by more than those
# costs would mean bench does not run train's step.
step_rates() {
  local cifar_dir model data rc=0
  find_cifar || return 1
  : >"$OUT/rates.jsonl"
  for model in mnist-cnn tutorial-cnn cifar-convnet; do
    data=()
    [[ $model == cifar-convnet ]] && data=(--data-dir "$cifar_dir")
    "$PTRAIN" bench --model "$model" --device cuda --min-seconds 3 --json "${data[@]}" >>"$OUT/rates.jsonl" || rc=1
    "$PTRAIN" bench --model "$model" --device cuda --min-seconds 3 --json --no-cuda-graphs "${data[@]}" \
      >>"$OUT/rates.jsonl" || rc=1
    rm -f "$OUT/rates-train.jsonl"
    "$PTRAIN" train --model "$model" --device cuda --quiet --metrics "$OUT/rates-train.jsonl" \
      --checkpoint-dir "$OUT/ck-rates" "${data[@]}" >/dev/null || rc=1
    "${PY:-python3}" -c 'import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if "\"epoch\"" in l][-1]
print(json.dumps({"framework": "ptrain train", "model": sys.argv[2], "images_per_s": e["images_per_s"],
                  "test_acc": e["test_acc"]}))' "$OUT/rates-train.jsonl" "$model" >>"$OUT/rates.jsonl" || rc=1
    rm -rf "$OUT/ck-rates" "$OUT/rates-train.jsonl"
  done
  "${PY:-python3}" -c 'import json, sys
rows = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    kind = "train" if r["framework"] != "ptrain" else "graph" if r["cuda_graph_steps"] == r["steps"] else "eager"
    rows.setdefault(r["model"], {})[kind] = r["images_per_s"]
print("| model | bench, CUDA graph | bench, eager | graph/eager | train, one epoch | train/bench |")
print("|---|---|---|---|---|---|")
for m, r in rows.items():
    g, e, t = r.get("graph", 0), r.get("eager", 0), r.get("train", 0)
    print(f"| {m} | {g:,.0f} | {e:,.0f} | {g / e if e else 0:.2f}x | {t:,.0f} | {t / g if g else 0:.2f} |")' \
    "$OUT/rates.jsonl" | tee "$OUT/rates.txt" || rc=1
  return $rc
}

for s in "${steps[@]}"; do
  case $s in
    tests | bench | profile | rates)
      echo "== $s: $(date -u +%H:%M:%S)"
      "step_$s" || { echo "== $s: FAILED"; failed=$((failed + 1)); }
      ;;
    *) echo "gpu-check: unknown step '$s' (expected tests, bench or profile)" >&2; exit 2 ;;
  esac
done
echo "== done: $(date -u +%H:%M:%S), $failed step(s) failed"
exit $failed
