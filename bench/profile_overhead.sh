#!/usr/bin/env bash
# profile_overhead.sh - what --profile costs: `ptrain bench` with and
# without it, alternating (off, on, off, on, ...) so that drift and noisy
# neighbours hit both alike, ROUNDS pairs per model and thread count. Prints
# the median images/s of each and the overhead (1 - on/off). With --profile
# every layer is timed (two clock reads per layer and pass) and the table
# printed at the end, to stderr, which is discarded here.
#
# Usage: bench/profile_overhead.sh
# Environment: MODELS (default: mnist-cnn tutorial-cnn fmnist-mlp), THREADS
# (default: 1 2), ROUNDS (default 5), STEPS (default 200), PTRAIN (default
# build/ptrain), IDLE_MIN (default 90), IDLE_WAIT (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-"mnist-cnn tutorial-cnn fmnist-mlp"}
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-200}
PTRAIN=${PTRAIN:-build/ptrain}
IDLE_MIN=${IDLE_MIN:-90}
IDLE_WAIT=${IDLE_WAIT:-60}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source bench/lib.sh

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ips() { sed -n 's/.*"images_per_s":\([0-9.]*\).*/\1/p'; }

echo "| model | threads | steps | --profile off img/s | on img/s | overhead |"
echo "|---|---|---|---|---|---|"
for model in $MODELS; do
  for t in $THREADS; do
    steps=$STEPS
    [[ $model == mnist-cnn ]] && steps=$((STEPS / 4)) # 40 ms steps: keep the run short
    : >"$TMP/off"
    : >"$TMP/on"
    for ((r = 0; r < ROUNDS; r++)); do
      wait_idle
      "$PTRAIN" bench --model "$model" --threads "$t" --steps "$steps" --json 2>/dev/null | ips >>"$TMP/off"
      wait_idle
      "$PTRAIN" bench --model "$model" --threads "$t" --steps "$steps" --json --profile 2>/dev/null | ips >>"$TMP/on"
    done
    off=$(median <"$TMP/off")
    on=$(median <"$TMP/on")
    awk -v m="$model" -v t="$t" -v s="$steps" -v a="$off" -v b="$on" \
      'BEGIN { printf "| %s | %d | %d | %.0f | %.0f | %+.1f%% |\n", m, t, s, a, b, 100 * (1 - b / a) }'
  done
done
