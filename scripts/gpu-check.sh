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
# Each step's output is also printed. A step that fails is reported and the
# next one still runs; the exit status is the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR [tests|bench|profile]...}
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

step_profile() {
  # CIFAR-10 where it is, else a synthetic set of its shape (the timings
  # do not depend on the pixels).
  local data=${CIFAR_DIR:-data/cifar10}
  if [[ ! -f $data/data_batch_1.bin && ! -f $data/cifar-10-batches-bin/data_batch_1.bin ]]; then
    data=$OUT/synthetic-cifar10
    [[ -f $data/data_batch_1.bin ]] ||
      "${PY:-python3}" bench/pytorch_gpu_bench.py --make-synthetic "$data" --dataset cifar10 >/dev/null || return 1
  fi
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

for s in "${steps[@]}"; do
  case $s in
    tests | bench | profile)
      echo "== $s: $(date -u +%H:%M:%S)"
      "step_$s" || { echo "== $s: FAILED"; failed=$((failed + 1)); }
      ;;
    *) echo "gpu-check: unknown step '$s' (expected tests, bench or profile)" >&2; exit 2 ;;
  esac
done
echo "== done: $(date -u +%H:%M:%S), $failed step(s) failed"
exit $failed
