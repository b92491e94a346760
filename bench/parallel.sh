#!/usr/bin/env bash
# parallel.sh - data parallel on one machine: is it worth it, and which kind?
#
# Trains mnist-cnn (the preset's optimizer, Fashion-MNIST, shuffling and
# dropout on) in these configurations and prints steady-state images/s:
#   1 x 1 thread     one worker, one thread, batch 64           (the baseline)
#   1 x 2 threads    one worker, intra-op threads, batch 2B
#   dp 2 x 1         two workers that are threads, batch B each
#   ddp 2 x 1        two MPI ranks (mpirun -np 2), batch B each
# for B = 64 (global batch 128: each worker keeps the baseline's batch) and
# B = 32 (global batch 64: the baseline's global batch split in two).
#
# Steady state: each configuration runs twice, for S1 and S2 optimizer steps,
# and the rate is (S2 - S1) * global batch / (t2 - t1), with t the training
# seconds ptrain writes to --metrics; start-up, data loading, the first
# steps and the evaluation cancel out. Configurations are interleaved and
# repeated ROUNDS times; the table gives medians. Finally one --profile run
# of each parallel configuration shows the share of communication.
#
# Usage: bench/parallel.sh            (ROUNDS=3 S1=10 S2=90 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PTRAIN:-./build/ptrain}
ROUNDS=${ROUNDS:-3}
S1=${S1:-10}
S2=${S2:-90}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=bench/results/parallel-$(date +%Y%m%d-%H%M%S).tsv
mkdir -p bench/results

# name | launcher | flags
configs=(
  "1x1 b64|none|--threads 1 --batch-size 64"
  "1x2threads b128|none|--threads 2 --batch-size 128"
  "dp2x1 b64|none|--threads 1 --batch-size 64 --parallel dp --workers 2"
  "ddp2x1 b64|mpi|--threads 1 --batch-size 64 --parallel ddp"
  "1x2threads b64|none|--threads 2 --batch-size 64"
  "dp2x1 b32|none|--threads 1 --batch-size 32 --parallel dp --workers 2"
  "ddp2x1 b32|mpi|--threads 1 --batch-size 32 --parallel ddp"
)

source bench/lib.sh

run() { # launcher steps metrics flags...
  local launch=$1 steps=$2 metrics=$3
  shift 3
  rm -f "$metrics"
  if [[ $launch == mpi ]]; then
    mpirun -np 2 "$P" train --model mnist-cnn --max-steps "$steps" --quiet --metrics "$metrics" "$@" >/dev/null 2>&1
  else
    "$P" train --model mnist-cnn --max-steps "$steps" --quiet --metrics "$metrics" "$@" >/dev/null 2>&1
  fi
}

global_batch() { # flags -> global batch
  local b w=1
  b=$(sed -n 's/.*--batch-size \([0-9]*\).*/\1/p' <<<"$1")
  [[ $1 == *--parallel* ]] && w=2
  echo $((b * w))
}

printf "round\tconfig\timages_per_s\n" >"$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r name launch flags <<<"$c"
    read -ra f <<<"$flags"
    run "$launch" "$S1" "$TMP/m1" "${f[@]}"
    run "$launch" "$S2" "$TMP/m2" "${f[@]}"
    t1=$(seconds_of "$TMP/m1") t2=$(seconds_of "$TMP/m2")
    gb=$(global_batch "$flags")
    ips=$(python3 -c "print(round(($S2 - $S1) * $gb / ($t2 - $t1)))")
    printf "%d\t%s\t%s\n" "$r" "$name" "$ips" | tee -a "$OUT"
  done
done

python3 - "$OUT" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for r in rows:
    by.setdefault(r["config"], []).append(float(r["images_per_s"]))
base = statistics.median(by["1x1 b64"])
print(f"\nmnist-cnn, steady-state images/s, median of {len(by['1x1 b64'])} rounds ({sys.argv[1]})")
print(f"{'configuration':<18}{'images/s':>10}{'vs 1x1':>9}")
for name, v in by.items():
    m = statistics.median(v)
    print(f"{name:<18}{m:>10.0f}{m / base:>8.2f}x")
PY

echo
echo "--profile of the parallel configurations (rank 0 / worker 0), batch 64 per worker:"
for c in "dp2x1 b64|none|--threads 1 --batch-size 64 --parallel dp --workers 2" \
         "ddp2x1 b64|mpi|--threads 1 --batch-size 64 --parallel ddp"; do
  IFS='|' read -r name launch flags <<<"$c"
  read -ra f <<<"$flags"
  echo "== $name"
  if [[ $launch == mpi ]]; then
    mpirun -np 2 "$P" train --model mnist-cnn --max-steps "$S2" --profile "${f[@]}" 2>/dev/null | sed -n '/^phase/,$p'
  else
    "$P" train --model mnist-cnn --max-steps "$S2" --profile "${f[@]}" 2>/dev/null | sed -n '/^phase/,$p'
  fi
done
