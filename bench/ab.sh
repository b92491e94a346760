#!/usr/bin/env bash
# ab.sh - two ptrain builds, or one build at two instruction-set levels,
# timed alternately: A, B, B, A, A, B, ... ROUNDS pairs per model and thread
# count, each run `ptrain bench` on the preset's staged batches. Running
# them in pairs makes drift and a noisy neighbour hit both alike; the table
# gives each side's median images/s and the median of the pairs' ratios
# B / A with their range, which is what says whether B is slower than A
# beyond noise.
#
# Usage (from anywhere; paths are relative to the repository root):
#   A=old/ptrain B=build/ptrain bench/ab.sh          # an older build against this one
#   A_ENV=PTRAIN_CPU=avx512 B_ENV=PTRAIN_CPU=avx2 bench/ab.sh   # one build, two levels
# Environment:
#   A, B         the two binaries (default: build/ptrain for both)
#   A_ENV, B_ENV VAR=value words set for that side's runs (default none)
#   MODELS       presets (default: mnist-cnn tutorial-cnn fmnist-mlp)
#   THREADS      thread counts (default: 1 2)
#   ROUNDS       pairs per model and thread count (default 5)
#   STEPS        timed steps per run (default: per model, about a second:
#                mnist-cnn 40, tutorial-cnn 100, fmnist-mlp 2000)
#   DATA_DIR     Fashion-MNIST (default: ptrain's own default)
#   IDLE_MIN, IDLE_WAIT  wait before each run for the machine to be this
#                idle, at most this long (default 90% and 60 s; 0: don't)
# Prints a markdown table; every run's JSON line goes to RESULTS (default
# bench/results/ab-<date>.jsonl) with "side", "model", "threads", "round".
set -euo pipefail
cd "$(dirname "$0")/.."
A=${A:-build/ptrain}
B=${B:-build/ptrain}
A_ENV=${A_ENV:-}
B_ENV=${B_ENV:-}
MODELS=${MODELS:-"mnist-cnn tutorial-cnn fmnist-mlp"}
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-5}
IDLE_MIN=${IDLE_MIN:-90}
IDLE_WAIT=${IDLE_WAIT:-60}
RESULTS=${RESULTS:-bench/results/ab-$(date +%Y%m%d-%H%M%S).jsonl}
for side in "$A" "$B"; do
  [[ -x $side ]] || { echo "ab.sh: $side: not an executable ptrain" >&2; exit 2; }
done
if [[ $A == "$B" && $A_ENV == "$B_ENV" ]]; then
  echo "ab.sh: A and B are the same binary with the same environment: set A, B, A_ENV or B_ENV" >&2
  exit 2
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source bench/lib.sh
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

steps_for() {
  if [[ -n ${STEPS:-} ]]; then echo "$STEPS"; return; fi
  case $1 in
    mnist-cnn) echo 40 ;;
    tutorial-cnn) echo 100 ;;
    fmnist-mlp) echo 2000 ;;
    *) echo 50 ;;
  esac
}

# run SIDE BIN ENV MODEL THREADS ROUND: prints images/s, appends the JSON line
run() {
  local side=$1 bin=$2 envs=$3 model=$4 t=$5 round=$6 out
  local args=(bench --model "$model" --threads "$t" --steps "$(steps_for "$model")" --json)
  [[ -n ${DATA_DIR:-} ]] && args+=(--data-dir "$DATA_DIR")
  wait_idle
  # shellcheck disable=SC2086  # the words of A_ENV / B_ENV are meant to split
  if ! out=$(env $envs "$bin" "${args[@]}" 2>"$TMP/err"); then
    echo "ab.sh: $side ($envs $bin) failed on $model at $t threads:" >&2
    sed 's/^/  /' "$TMP/err" >&2
    exit 1
  fi
  jq -c --arg side "$side" --arg model "$model" --argjson t "$t" --argjson r "$round" \
    '. + {side: $side, model: $model, threads: $t, round: $r}' <<<"$out" >>"$RESULTS"
  jq -r '.images_per_s' <<<"$out"
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

first=$(env $A_ENV "$A" bench --model fmnist-mlp --threads 1 --steps 1 --warmup 0 --json ${DATA_DIR:+--data-dir "$DATA_DIR"} 2>/dev/null |
  jq -r '"\(.cpu // "?") (\(.cpu_level // "?"))"' || echo "?")
second=$(env $B_ENV "$B" bench --model fmnist-mlp --threads 1 --steps 1 --warmup 0 --json ${DATA_DIR:+--data-dir "$DATA_DIR"} 2>/dev/null |
  jq -r '"\(.cpu // "?") (\(.cpu_level // "?"))"' || echo "?")
echo "A: ${A_ENV:+$A_ENV }$A on $first"
echo "B: ${B_ENV:+$B_ENV }$B on $second"
echo "$ROUNDS alternating pairs per row; results: $RESULTS"
echo
echo "| model | threads | A images/s | B images/s | B / A, median of pairs | range |"
echo "|---|---|---|---|---|---|"
for model in $MODELS; do
  for t in $THREADS; do
    : >"$TMP/a" && : >"$TMP/b" && : >"$TMP/r"
    for ((r = 1; r <= ROUNDS; r++)); do
      # A first in odd pairs, B first in even ones (ABBA): a side that
      # always ran second would always meet the caches, the clock and the
      # neighbours its partner left
      if ((r % 2)); then
        a=$(run A "$A" "$A_ENV" "$model" "$t" "$r")
        b=$(run B "$B" "$B_ENV" "$model" "$t" "$r")
      else
        b=$(run B "$B" "$B_ENV" "$model" "$t" "$r")
        a=$(run A "$A" "$A_ENV" "$model" "$t" "$r")
      fi
      echo "$a" >>"$TMP/a" && echo "$b" >>"$TMP/b"
      awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f\n", b / a }' >>"$TMP/r"
    done
    printf "| %s | %s | %.0f | %.0f | %.3f | %s-%s |\n" "$model" "$t" "$(median <"$TMP/a")" "$(median <"$TMP/b")" \
      "$(median <"$TMP/r")" "$(sort -g "$TMP/r" | head -1)" "$(sort -g "$TMP/r" | tail -1)"
  done
done
