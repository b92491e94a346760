#!/usr/bin/env bash
# time_to_acc.sh - wall-clock seconds to a test accuracy on Fashion-MNIST.
#
# Trains MODEL (default tutorial-cnn) with the preset's defaults until the
# test accuracy reaches TARGET (default 0.88), with ptrain and with each
# PyTorch, one run at a time, and prints the seconds from starting the
# process to the evaluation that first reached the target (the clock
# includes start-up, data loading and every evaluation; for PyTorch, the
# seconds from the start of training, evaluations included, are given too):
#
#   ptrain   ./build/ptrain train --model M --epochs E --threads T --seed S
#            --metrics FILE --quiet. ptrain evaluates on the test split after
#            each epoch (and after every --eval-interval steps where the build
#            has that flag). The script follows the metrics file and stamps
#            each line as it appears; the first with test_acc >= TARGET is the
#            time, and the run is then stopped.
#   PyTorch  bench/pytorch_bench.py --target-accuracy TARGET --eval-interval 100
#            (the tutorial's training loop, evaluating on the whole test split
#            every 100 steps and stopping at the first evaluation >= TARGET).
#
# PyTorch is checked every EVAL_INTERVAL steps (100 = 1/6 epoch at batch 100).
# ptrain, without --eval-interval, is checked once an epoch, so its time is
# rounded up to its next epoch end; for a like-for-like row PyTorch then also
# runs evaluating only at each epoch end (--eval-interval 0). The table says
# which granularity each row had.
#
# Each run's line also records "other_cores": the CPU other processes used
# meanwhile, in cores (the machine is shared; above OTHER_MAX, default 0.10,
# the script warns that the time is not clean). IDLE_MIN and IDLE_WAIT as in
# bench/cpu.sh.
#
# Usage (from anywhere; paths are relative to the repository root):
#   bench/time_to_acc.sh
#   SEEDS="1 2 3" TORCH_THREADS="2" bench/time_to_acc.sh
# Environment:
#   MODEL          preset (default tutorial-cnn)
#   TARGET         test accuracy to reach (default 0.88)
#   SEEDS          seeds (default 1)
#   THREADS        ptrain's threads (default 2)
#   TORCH_THREADS  PyTorch's thread counts, each run (default: 1 2)
#   EPOCHS         most epochs to try (default 5)
#   EVAL_INTERVAL  PyTorch's (and ptrain's, if it has the flag) steps between
#                  evaluations (default 100)
#   PTRAIN, PY_OLD, PY_NEW   as in bench/cpu.sh
#   RESULTS        JSON lines out (default bench/results/time-to-acc-<date>.jsonl)
# Nothing here touches the network. Run nothing else heavy meanwhile.

set -euo pipefail

cd "$(dirname "$0")/.."

MODEL=${MODEL:-tutorial-cnn}
TARGET=${TARGET:-0.88}
SEEDS=${SEEDS:-1}
THREADS=${THREADS:-2}
TORCH_THREADS=${TORCH_THREADS:-"1 2"}
EPOCHS=${EPOCHS:-5}
EVAL_INTERVAL=${EVAL_INTERVAL:-100}
PTRAIN=${PTRAIN:-build/ptrain}
PY_OLD=${PY_OLD:-/usr/bin/python3}
PY_NEW=${PY_NEW:-/opt/torch-latest/bin/python}
mkdir -p bench/results
RESULTS=${RESULTS:-bench/results/time-to-acc-$(date +%Y%m%d-%H%M%S).jsonl}

die() { echo "time_to_acc.sh: $*" >&2; exit 1; }
[[ -x $PTRAIN ]] || die "no ptrain binary at $PTRAIN (build it first: make)"

TMP=$(mktemp -d /tmp/ptrain-tta.XXXXXX)
ptrain_pid=
cleanup() {
  if [[ -n $ptrain_pid ]]; then kill "$ptrain_pid" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
cp "$PTRAIN" "$TMP/ptrain"
BIN=$TMP/ptrain

extra=()
granularity="per epoch"
help=$("$BIN" train --help 2>&1 || true)
if grep -q -- '--eval-interval' <<<"$help"; then
  extra+=(--eval-interval "$EVAL_INTERVAL")
  granularity="every $EVAL_INTERVAL steps"
fi
grep -q -- '--target-accuracy' <<<"$help" && extra+=(--target-accuracy "$TARGET")
torch_intervals=("$EVAL_INTERVAL")
[[ $granularity == "per epoch" ]] && torch_intervals+=(0)

echo "time to $TARGET test accuracy, $MODEL; ptrain $("$BIN" --version | head -n 1), $THREADS threads, evaluated $granularity"
echo "results: $RESULTS"
echo

now() { date +%s.%N; }

# As in bench/cpu.sh: before each run wait (up to IDLE_WAIT s) for the machine
# to be IDLE_MIN% idle; after it, record how many cores' worth of CPU other
# processes used meanwhile ("other_cores"; all CPU time from /proc/stat less
# the run's own from this shell's children rusage) and warn above OTHER_MAX.
IDLE_MIN=${IDLE_MIN:-90}
IDLE_WAIT=${IDLE_WAIT:-120}
OTHER_MAX=${OTHER_MAX:-0.10}
source bench/lib.sh
# Warns when other processes used more than OTHER_MAX cores during a run.
warn_if_disturbed() {
  mark_end
  if awk -v o="$other" -v m="$OTHER_MAX" 'BEGIN { exit !(o > m) }'; then
    echo "time_to_acc.sh: warning: other processes used $other cores during this run; its time is not clean" >&2
  fi
}

# ptrain_run SEED: writes one JSON line to $TMP/line (run in this shell, not in
# $(...), so that the EXIT trap can stop ptrain).
ptrain_run() {
  local seed=$1 metrics=$TMP/metrics-$1.jsonl t0 seen=0 n line acc hit="" stamp
  rm -f "$metrics"
  : >"$TMP/stamps"
  mark_start
  t0=$(now)
  "$BIN" train --model "$MODEL" --epochs "$EPOCHS" --threads "$THREADS" --seed "$seed" \
    --metrics "$metrics" --quiet "${extra[@]}" >"$TMP/ptrain.out" 2>&1 &
  ptrain_pid=$!
  while kill -0 "$ptrain_pid" 2>/dev/null; do
    sleep 0.05
    [[ -f $metrics ]] || continue
    n=$(grep -c '' "$metrics" || true)
    while ((seen < n)); do
      seen=$((seen + 1))
      stamp=$(now)
      line=$(sed -n "${seen}p" "$metrics")
      echo "$stamp $line" >>"$TMP/stamps"
      acc=$(jq -r '.test_acc // empty' <<<"$line")
      if [[ -n $acc ]] && awk -v a="$acc" -v t="$TARGET" 'BEGIN { exit !(a >= t) }'; then
        hit=$(jq -c --argjson s "$(awk -v a="$stamp" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')" \
          '{seconds: $s, step: .step, epoch: .epoch, test_acc: .test_acc}' <<<"$line")
        break 2
      fi
    done
  done
  if [[ -z $hit ]]; then
    wait "$ptrain_pid" || true
    # The last lines may have landed between the last look and the exit.
    n=$(grep -c '' "$metrics" 2>/dev/null || echo 0)
    while ((seen < n)); do
      seen=$((seen + 1))
      line=$(sed -n "${seen}p" "$metrics")
      stamp=$(now)
      echo "$stamp $line" >>"$TMP/stamps"
      acc=$(jq -r '.test_acc // empty' <<<"$line")
      if [[ -n $acc ]] && awk -v a="$acc" -v t="$TARGET" 'BEGIN { exit !(a >= t) }'; then
        hit=$(jq -c --argjson s "$(awk -v a="$stamp" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')" \
          '{seconds: $s, step: .step, epoch: .epoch, test_acc: .test_acc}' <<<"$line")
        break
      fi
    done
  else
    kill "$ptrain_pid" 2>/dev/null || true
    wait "$ptrain_pid" 2>/dev/null || true
  fi
  ptrain_pid=
  warn_if_disturbed
  # ptrain's own training seconds (evaluation excluded) up to the hit, from the
  # per-epoch "seconds" of the metrics lines so far.
  local evals train_s
  evals=$(awk '{ $1 = ""; print }' "$TMP/stamps" | jq -sc '[.[] | select(.test_acc != null) | [.step, (.test_acc * 10000 | round / 10000)]]')
  train_s=$(awk '{ $1 = ""; print }' "$TMP/stamps" | jq -s '[.[] | .seconds // 0] | add // 0 | . * 100 | round / 100')
  if [[ -z $hit ]]; then
    hit='{"seconds": null}'
    echo "time_to_acc.sh: ptrain seed $seed did not reach $TARGET in $EPOCHS epochs" >&2
    sed 's/^/  /' "$TMP/ptrain.out" | tail -n 5 >&2
  fi
  jq -c --arg model "$MODEL" --argjson seed "$seed" --argjson threads "$THREADS" --argjson target "$TARGET" \
    --arg gran "$granularity" --argjson evals "$evals" --argjson train_s "$train_s" --argjson other "$other" \
    '{framework: "ptrain", model: $model, seed: $seed, threads: $threads, target_accuracy: $target,
      reached: (.seconds != null), evaluated: $gran} + . + {train_seconds_excl_eval: $train_s, evals: $evals,
      other_cores: $other}' \
    <<<"$hit" >"$TMP/line"
}

# torch_run PYTHON THREADS SEED INTERVAL: writes one JSON line to $TMP/line.
torch_run() {
  local py=$1 t=$2 seed=$3 iv=$4 t0 t1 out gran
  mark_start
  t0=$(now)
  out=$("$py" bench/pytorch_bench.py --model "$MODEL" --threads "$t" --seed "$seed" --target-accuracy "$TARGET" \
    --eval-interval "$iv" --max-epochs "$EPOCHS" || true)
  t1=$(now)
  warn_if_disturbed
  gran="every $iv steps"
  [[ $iv == 0 ]] && gran="per epoch"
  jq -c --argjson wall "$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')" --arg gran "$gran" \
    --argjson other "$other" \
    '. + {seconds_in_process: .seconds, seconds: (if .reached then $wall else null end), evaluated: $gran,
          other_cores: $other}' <<<"$out" >"$TMP/line"
}

for seed in $SEEDS; do
  echo "seed $seed"
  ptrain_run "$seed"
  line=$(<"$TMP/line")
  echo "$line" >>"$RESULTS"
  jq -r '"  ptrain  \(.threads)T, evaluated \(.evaluated): \(if .seconds then "\(.seconds) s (step \(.step), epoch \(.epoch), test acc \(.test_acc))" else "not reached" end)"' <<<"$line"
  for py in "$PY_OLD" "$PY_NEW"; do
    for t in $TORCH_THREADS; do
      for iv in "${torch_intervals[@]}"; do
        torch_run "$py" "$t" "$seed" "$iv"
        line=$(<"$TMP/line")
        echo "$line" >>"$RESULTS"
        jq -r '"  torch \(.torch) \(.threads)T, evaluated \(.evaluated): \(if .seconds then "\(.seconds) s (step \(.steps), \(.epochs) epochs, test acc \(.test_accuracy); \(.seconds_in_process) s from the start of training)" else "not reached" end)"' <<<"$line"
      done
    done
  done
done
echo

# Table: per framework and threads, the median over the seeds.
jq -rs '
  def med: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
           else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  group_by([.framework, .torch, .threads, .evaluated]) | map({
    who: (if .[0].framework == "ptrain" then "ptrain" else "torch \(.[0].torch)" end),
    threads: .[0].threads, evaluated: .[0].evaluated, n: length,
    reached: (map(select(.reached)) | length),
    seconds: (map(select(.reached) | .seconds) | med),
    in_process: (map(select(.reached) | .seconds_in_process // empty) | med),
    steps: (map(select(.reached) | (.step // .steps)) | med),
    other: (map(.other_cores // 0) | max)}) |
  (["| run | threads | evaluated | seeds reached | seconds from launch (median) | seconds from training start (median) | steps (median) | other processes, most cores |", "|---|---|---|---|---|---|---|---|"]
   + map("| \(.who) | \(.threads) | \(.evaluated) | \(.reached)/\(.n) | \(.seconds // "-") | \(.in_process // "-") | \(.steps // "-") | \(.other) |")) | .[]
' "$RESULTS"
