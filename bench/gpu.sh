#!/usr/bin/env bash
# gpu.sh - GPU training: ptrain against PyTorch, one epoch per run, side by side.
#
# For each round (ROUNDS, default 3) and each preset (mnist-cnn tutorial-cnn
# cifar-convnet), runs one after another:
#   ptrain          PTRAIN train --model M --device cuda --epochs E --metrics FILE --data-dir DIR --quiet
#   torch tutorial  PY bench/pytorch_gpu_bench.py --model M --mode tutorial ...
#                   (DataLoader over host tensors, each batch moved to the GPU)
#   torch best      PY bench/pytorch_gpu_bench.py --model M --mode best ...
#                   (data on the GPU, cudnn.benchmark, fused optimizer, torch.compile)
# Same model, batch size, optimizer, learning rate, normalisation,
# augmentation and epochs everywhere; bench/pytorch_gpu_bench.py says
# exactly what each PyTorch mode does. Each result is the last epoch's
# training seconds (ptrain: its --metrics "seconds"; PyTorch: after warm-up
# steps, synchronised), images/s over it, and the test accuracy after it;
# wall_seconds is the whole process, start-up and data loading included.
#
# Data: Fashion-MNIST (FASHION_DIR) and CIFAR-10 (CIFAR_DIR). Where one is
# missing (a GPU machine without them and without network), a synthetic
# set of the same shape is written once into a temporary directory and
# every framework trains on it; results then name the data set
# "synthetic-...", and their accuracies only show that training worked.
# So do those of a directory that --make-synthetic wrote (it leaves a
# file SYNTHETIC there), as CIFAR_DIR or FASHION_DIR.
#
# Writes JSON lines to bench/results/gpu-<date>.jsonl (a "meta" line, then
# one per run with "round", "wall_seconds" and, where nvidia-smi exists,
# the GPU's mean utilisation and peak memory during the run), then the
# Markdown table (also saved beside it as .md):
#   PY bench/pytorch_gpu_bench.py --table bench/results/gpu-<date>.jsonl
#
# Usage (from anywhere; paths are relative to the repository root):
#   bench/gpu.sh                 # needs a GPU, a CUDA build of ptrain and PyTorch with CUDA
#   bench/gpu.sh --dry-run       # no GPU: checks the PyTorch models against ptrain's presets
#   ROUNDS=1 MODELS=cifar-convnet bench/gpu.sh
# Environment:
#   MODELS      presets (default: mnist-cnn tutorial-cnn cifar-convnet)
#   ROUNDS      rounds (default 3); the table gives the median
#   EPOCHS      epochs per run (default 1)
#   DEVICE      cuda or cuda:N (default cuda)
#   PTRAIN      the ptrain binary (default build/ptrain; a copy taken at the
#               start runs, so a rebuild mid-run cannot mix builds)
#   PY          Python with PyTorch (default: the first of python3 and
#               /opt/torch-latest/bin/python that imports torch)
#   COMPILE     torch.compile in the best mode: auto, on, off (default auto)
#   PRECISION   fp32 (default: no TF32 on either side), tf32 (TF32 in both) or
#               bf16 (ptrain --precision bf16; PyTorch under bf16 autocast)
#   EAGER       1: each round also runs ptrain with --no-cuda-graphs (its
#               steps launched kernel by kernel), and the table gives that
#               rate beside the default's, which replays the step as a
#               CUDA graph (default 0)
#   WARMUP      PyTorch's untimed steps before the epoch (default 5)
#   FASHION_DIR Fashion-MNIST (default /usr/share/datasets/fashion-mnist)
#   CIFAR_DIR   CIFAR-10 binary batches (default data/cifar10; ptrain data
#               fetch cifar10 puts them there)
#   IDLE_MIN    idle CPU percentage to wait for before each run (default 0:
#               don't wait); other processes' CPU use is recorded either way
#   RESULTS     the results file (default bench/results/gpu-<date>.jsonl)
#   PTRAIN_ARGS, TORCH_ARGS
#               extra arguments for every ptrain / PyTorch run. With
#               DEVICE=cpu they make a smoke test of this script on a
#               machine without a GPU, e.g. DEVICE=cpu MODELS=tutorial-cnn
#               ROUNDS=1 PTRAIN_ARGS="--max-steps 20" TORCH_ARGS="--max-steps
#               20" (its figures are no benchmark)
# Nothing here touches the network.

set -euo pipefail

cd "$(dirname "$0")/.."

MODELS=${MODELS:-"mnist-cnn tutorial-cnn cifar-convnet"}
ROUNDS=${ROUNDS:-3}
EPOCHS=${EPOCHS:-1}
DEVICE=${DEVICE:-cuda}
PTRAIN=${PTRAIN:-build/ptrain}
COMPILE=${COMPILE:-auto}
PRECISION=${PRECISION:-fp32}
WARMUP=${WARMUP:-5}
FASHION_DIR=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
CIFAR_DIR=${CIFAR_DIR:-data/cifar10}
IDLE_MIN=${IDLE_MIN:-0}
IDLE_WAIT=${IDLE_WAIT:-120}
BENCH=bench/pytorch_gpu_bench.py

die() { echo "gpu.sh: $*" >&2; exit 1; }

dry_run=0
case "${1:-}" in
  --dry-run) dry_run=1 ;;
  "") ;;
  *) die "unknown argument '$1' (expected --dry-run or nothing; settings are environment variables, see the header)" ;;
esac

if [[ -z ${PY:-} ]]; then
  for py in python3 /opt/torch-latest/bin/python; do
    if "$py" -c 'import torch' 2>/dev/null; then PY=$py; break; fi
  done
fi
[[ -n ${PY:-} ]] || die "no Python with PyTorch found (set PY=/path/to/python)"
"$PY" -c 'import torch, numpy' 2>/dev/null || die "$PY cannot import torch and numpy"
[[ -x $PTRAIN ]] || die "no ptrain binary at $PTRAIN (build it first: make)"

# Run a snapshot of the binary: the build directory may be rebuilt meanwhile.
TMP=$(mktemp -d /tmp/ptrain-gpu-bench.XXXXXX)
smi_pid=
cleanup() {
  [[ -n $smi_pid ]] && kill "$smi_pid" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
cp "$PTRAIN" "$TMP/ptrain"
BIN=$TMP/ptrain

if ((dry_run)); then
  echo "gpu.sh: checking the PyTorch models against $PTRAIN's presets (no GPU used)"
  # shellcheck disable=SC2086
  for m in $MODELS; do "$PY" "$BENCH" --dry-run --model "$m" --ptrain "$BIN" | grep -v augment_checks; done
  "$PY" "$BENCH" --dry-run --model tutorial-cnn --ptrain "$BIN" | grep augment_checks
  exit 0
fi

# Read whole, then searched: under pipefail, grep -q quitting at its first
# match can end the writer with SIGPIPE and fail the check it passed.
train_help=$("$BIN" train --help 2>&1 || true)
grep -q -- '--device' <<<"$train_help" ||
  die "$PTRAIN train has no --device flag: this build trains on the CPU only; rebuild from a newer tree"
if [[ $DEVICE != cpu ]]; then
  info=$("$BIN" info 2>&1 || true)
  grep -q '^  CUDA: yes' <<<"$info" ||
    die "$PTRAIN was built without CUDA ('ptrain info' says why): build it where the CUDA toolkit is installed"
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    die "PyTorch in $PY sees no GPU ($("$PY" -c 'import torch; print(torch.__version__)'))"
else
  echo "gpu.sh: DEVICE=cpu: a smoke test of this script, not a benchmark" >&2
fi

mkdir -p bench/results
RESULTS=${RESULTS:-bench/results/gpu-$(date +%Y%m%d-%H%M%S).jsonl}
TABLE=${RESULTS%.jsonl}.md

torch_version=$("$PY" -c 'import torch; print(torch.__version__)')
gpu=cpu
[[ $DEVICE == cpu ]] || gpu=$("$PY" -c "import torch; print(torch.cuda.get_device_name(torch.device('$DEVICE')))")
ptrain_version=$("$BIN" --version | head -n 1)
git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git_dirty=$([[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]] && echo true || echo false)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)

# The data sets: the real ones where present, else synthetic ones, made once.
declare -A data_dir data_label
for m in $MODELS; do
  case $m in
    cifar-convnet) ds=cifar10 dir=$CIFAR_DIR probe=test_batch.bin ;;
    mnist-cnn | tutorial-cnn) ds=fashion-mnist dir=$FASHION_DIR probe=t10k-labels-idx1-ubyte.gz ;;
    *) die "MODELS: no data set known for '$m' (expected mnist-cnn, tutorial-cnn or cifar-convnet)" ;;
  esac
  [[ -n ${data_dir[$ds]:-} ]] && continue
  if [[ -f $dir/SYNTHETIC ]]; then
    data_dir[$ds]=$dir data_label[$ds]=synthetic-$ds
  elif [[ -f $dir/$probe || -f $dir/cifar-10-batches-bin/$probe ]]; then
    data_dir[$ds]=$dir data_label[$ds]=$ds
  else
    echo "gpu.sh: no $ds in $dir: training on a synthetic $ds-shaped set instead (accuracies then only show that training worked)"
    "$PY" "$BENCH" --make-synthetic "$TMP/synthetic-$ds" --dataset "$ds"
    data_dir[$ds]=$TMP/synthetic-$ds data_label[$ds]=synthetic-$ds
  fi
done
dataset_of() { [[ $1 == cifar-convnet ]] && echo cifar10 || echo fashion-mnist; }

GPU=$gpu DRIVER=$driver CPU_MODEL=$cpu_model PTRAIN_VERSION=$ptrain_version GIT_REV=$git_rev GIT_DIRTY=$git_dirty \
  TORCH_VERSION=$torch_version ROUNDS=$ROUNDS EPOCHS=$EPOCHS COMPILE=$COMPILE WARMUP=$WARMUP MODELS=$MODELS PRECISION=$PRECISION \
  DEVICE=$DEVICE PYTHON=$PY "$PY" -c '
import datetime, json, os, sys
e = os.environ
meta = {"meta": True, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "gpu": e["GPU"],
        "driver": e["DRIVER"], "device": e["DEVICE"], "cpu": e["CPU_MODEL"], "ptrain": e["PTRAIN_VERSION"],
        "git": e["GIT_REV"], "git_dirty": e["GIT_DIRTY"] == "true", "torch": e["TORCH_VERSION"], "python": e["PYTHON"],
        "rounds": int(e["ROUNDS"]), "epochs": int(e["EPOCHS"]), "compile": e["COMPILE"], "warmup": int(e["WARMUP"]),
        "models": e["MODELS"].split(), "precision": e["PRECISION"]}
print(json.dumps(meta))' >"$RESULTS"

echo "ptrain: $ptrain_version (git $git_rev$([[ $git_dirty == true ]] && echo ', uncommitted changes'))"
echo "PyTorch $torch_version ($PY); GPU: $gpu${driver:+, driver $driver}"
echo "$ROUNDS round(s) of $EPOCHS epoch(s) per run; results: $RESULTS"
echo

# shellcheck source=bench/lib.sh
source bench/lib.sh

# GPU utilisation and memory while a run goes, from nvidia-smi where there is one.
smi_start() {
  smi_pid=
  command -v nvidia-smi >/dev/null || return 0
  local idx=${DEVICE#cuda}
  idx=${idx#:}
  # timestamped, every 0.1 s as ptrain samples NVML, so that the samples in
  # the window its metrics name can be compared with its own figures
  nvidia-smi --id="${idx:-0}" --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits \
    -lms 100 >"$TMP/smi.csv" 2>/dev/null &
  smi_pid=$!
}
smi_stop() {
  [[ -n $smi_pid ]] || return 0
  kill "$smi_pid" 2>/dev/null || true
  wait "$smi_pid" 2>/dev/null || true
  smi_pid=
}

failures=0
# run ROUND LABEL KIND MODEL COMMAND...: one run; its result line (the last
# JSON line it printed, or for ptrain its --metrics file) goes to RESULTS
# with the round, the wall time, other processes' CPU use and the GPU's.
run() {
  local round=$1 label=$2 kind=$3 model=$4 out line t0 t1 wall other=0
  shift 4
  rm -f "$TMP/metrics.jsonl" "$TMP/smi.csv"
  mark_start
  smi_start
  t0=$(date +%s.%N)
  if ! out=$("$@" 2>"$TMP/stderr"); then
    smi_stop
    echo "gpu.sh: round $round: $label failed: $*" >&2
    sed 's/^/  /' "$TMP/stderr" | tail -n 20 >&2
    "$PY" -c 'import json, sys; print(json.dumps({"error": True, "label": sys.argv[1], "command": sys.argv[2], "round": int(sys.argv[3])}))' \
      "$label" "$*" "$round" >>"$RESULTS"
    failures=$((failures + 1))
    return 0
  fi
  t1=$(date +%s.%N)
  smi_stop
  mark_end
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  if [[ $kind == ptrain || $kind == eager ]]; then
    out=$("$PY" "$BENCH" --record-ptrain "$TMP/metrics.jsonl" --ptrain-mode "$kind" --model "$model" --precision "$PRECISION" \
      --dataset-label "${data_label[$(dataset_of "$model")]}" --device "$DEVICE") || {
      echo "gpu.sh: round $round: $label wrote no epoch to its --metrics file" >&2
      failures=$((failures + 1))
      return 0
    }
  fi
  line=$(printf '%s\n' "$out" | grep '^{' | tail -n 1 || true)
  [[ -n $line ]] || { echo "gpu.sh: round $round: $label printed no JSON line" >&2; failures=$((failures + 1)); return 0; }
  line=$("$PY" "$BENCH" --merge-result "$line" --round "$round" --wall "$wall" --other-cores "$other" \
    $([[ -s $TMP/smi.csv ]] && echo --smi "$TMP/smi.csv"))
  printf '%s\n' "$line" >>"$RESULTS"
  "$PY" -c '
import json, sys
o = json.loads(sys.argv[1])
who = ("ptrain --no-cuda-graphs" if o["mode"] == "eager" else "ptrain") if o["framework"] == "ptrain" else "torch %s %s%s" % (o["torch"], o["mode"], " (compiled)" if o.get("compiled") else "")
util = " gpu %.0f%%" % o["gpu_util_mean_pct"] if "gpu_util_mean_pct" in o else ""
if "smi_window_util_pct" in o and o.get("ptrain_gpu_util_pct") is not None:
    util += "; in the window of the metrics: nvidia-smi %.0f%% %d MiB, ptrain %.0f%% %.0f MiB" % (o["smi_window_util_pct"],
        o["smi_window_mem_peak_mib"], o["ptrain_gpu_util_pct"], o["ptrain_gpu_mem_peak_mib"])
print("  %-16s %-40s %8.2f s/epoch %10.0f img/s  acc %.4f  (wall %.1f s%s)" % (o["model"], who, o["seconds"], o["images_per_s"], o["test_accuracy"], o["wall_seconds"], util))' "$line"
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS"
  for m in $MODELS; do
    ds=$(dataset_of "$m")
    dir=${data_dir[$ds]} label=${data_label[$ds]}
    for kind in ptrain $([[ ${EAGER:-0} == 1 ]] && echo eager); do
      graphs=$([[ $kind == eager ]] && echo --no-cuda-graphs || true)
      # shellcheck disable=SC2086 # the extra arguments are words on purpose
      run "$r" "$m ptrain${graphs:+ $graphs}" "$kind" "$m" \
        "$BIN" train --model "$m" --device "$DEVICE" --epochs "$EPOCHS" --data-dir "$dir" --metrics "$TMP/metrics.jsonl" \
        $([[ $PRECISION == fp32 ]] || echo --precision "$PRECISION") \
        --quiet $graphs ${PTRAIN_ARGS:-}
    done
    for mode in tutorial best; do
      # shellcheck disable=SC2086
      run "$r" "$m torch $torch_version $mode" torch "$m" \
        "$PY" "$BENCH" --model "$m" --mode "$mode" --device "$DEVICE" --epochs "$EPOCHS" --data-dir "$dir" \
        --dataset-label "$label" --compile "$COMPILE" --warmup "$WARMUP" --precision "$PRECISION" ${TORCH_ARGS:-}
    done
  done
done
echo

"$PY" "$BENCH" --table "$RESULTS" | tee "$TABLE"
echo
echo "results: $RESULTS; table: $TABLE"
if ((failures)); then
  echo "gpu.sh: $failures run(s) failed; see above" >&2
  exit 1
fi
