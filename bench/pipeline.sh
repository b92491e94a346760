#!/usr/bin/env bash
# pipeline.sh - model and pipeline parallelism on one machine: what the
# stages cost, and how much of it micro-batches win back.
#
# Trains MODEL (default mnist-cnn, batch 64, Fashion-MNIST, the preset's
# optimizer) in these configurations and prints steady-state images/s:
#   1x1              one device, one thread               (the baseline)
#   1x2              one device, two intra-op threads
#   model            2 stages (cpu:0, cpu:1), one thread each, whole batches
#   gpipe M, 1f1b M  the same 2 stages, M micro-batches, M = 2, 4, 8
#   mpi 1f1b 4       the 2 stages as 2 MPI ranks
# Steady state as in parallel.sh: two runs of S1 and S2 steps, rate =
# (S2 - S1) * batch / (t2 - t1) with t the training seconds from --metrics.
# Configurations are interleaved ROUNDS times; medians are printed with the
# measured bubble, the ideal one and stage 0's peak activation memory from
# the stage table of the S2 run.
#
# Usage: bench/pipeline.sh   (MODEL=mnist-cnn BATCH=64 ROUNDS=2 S1=10 S2=60;
#        MODEL_FILE=docs/examples/wide-mlp.txt BATCH=128 for stages of equal work)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PTRAIN:-./build/ptrain}
MODEL=${MODEL:-mnist-cnn}
MODEL_FILE=${MODEL_FILE:-}  # a spec file instead of a preset
BATCH=${BATCH:-64}
ROUNDS=${ROUNDS:-2}
S1=${S1:-10}
S2=${S2:-60}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[[ -n $MODEL_FILE ]] && MODEL=$(basename "$MODEL_FILE" .txt)
OUT=bench/results/pipeline-$MODEL-$(date +%Y%m%d-%H%M%S).tsv
mkdir -p bench/results

stages=(--parallel pipeline --devices cpu:0,cpu:1 --threads 1)
configs=("1x1|none|--threads 1" "1x2|none|--threads 2" "model|none|--parallel model --threads 1")
for m in 2 4 8; do
  configs+=("gpipe $m|none|${stages[*]} --schedule gpipe --micro-batches $m"
            "1f1b $m|none|${stages[*]} --schedule 1f1b --micro-batches $m")
done
configs+=("mpi 1f1b 4|mpi|--parallel pipeline --threads 1 --micro-batches 4")

source bench/lib.sh

run() { # launcher steps metrics log flags...
  local launch=$1 steps=$2 metrics=$3 log=$4
  shift 4
  rm -f "$metrics"
  local which=(--model "$MODEL")
  [[ -n $MODEL_FILE ]] && which=(--model-file "$MODEL_FILE")
  local cmd=("$P" train "${which[@]}" --batch-size "$BATCH" --max-steps "$steps" --log-interval 100000
             --metrics "$metrics" "$@")
  if [[ $launch == mpi ]]; then mpirun -np 2 "${cmd[@]}" >"$log" 2>&1; else "${cmd[@]}" >"$log" 2>&1; fi
}

printf "round\tconfig\timages_per_s\tbubble\tideal\tstage0_peak_mib\n" >"$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r name launch flags <<<"$c"
    read -ra f <<<"$flags"
    run "$launch" "$S1" "$TMP/m1" "$TMP/log1" "${f[@]}"
    run "$launch" "$S2" "$TMP/m2" "$TMP/log2" "${f[@]}"
    t1=$(seconds_of "$TMP/m1") t2=$(seconds_of "$TMP/m2")
    ips=$(python3 -c "print(round(($S2 - $S1) * $BATCH / ($t2 - $t1)))")
    bubble=$(sed -n 's/^bubble: \([0-9.]*\)% .* ideal \([0-9.]*\)%.*/\1\t\2/p' "$TMP/log2")
    peak=$(awk '$1 == "0" && /MiB/ {print $(NF-3)}' "$TMP/log2")
    printf "%d\t%s\t%s\t%s\t%s\n" "$r" "$name" "$ips" "${bubble:--	-}" "${peak:--}" | tee -a "$OUT"
  done
done

python3 - "$OUT" "$MODEL" "$BATCH" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for r in rows:
    by.setdefault(r["config"], []).append(r)
med = lambda v: statistics.median(float(r["images_per_s"]) for r in v)
base = med(by["1x1"])
print(f"\n{sys.argv[2]}, batch {sys.argv[3]}, steady-state images/s, median of {len(by['1x1'])} rounds ({sys.argv[1]})")
print(f"{'configuration':<14}{'images/s':>10}{'vs 1x1':>9}{'bubble':>9}{'ideal':>8}{'stage 0 peak':>14}")
for name, v in by.items():
    m, last = med(v), v[-1]
    b = f"{last['bubble']}%" if last["bubble"] != "-" else "-"
    i = f"{last['ideal']}%" if last["ideal"] != "-" else "-"
    p = f"{last['stage0_peak_mib']} MiB" if last["stage0_peak_mib"] != "-" else "-"
    print(f"{name:<14}{m:>10.0f}{m / base:>8.2f}x{b:>9}{i:>8}{p:>14}")
PY
