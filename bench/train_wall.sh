#!/usr/bin/env bash
# train_wall.sh - real training as a user runs it: the wall-clock seconds of
# a whole process, start-up, data loading, shuffling, every step and the
# evaluation included, ptrain against PyTorch.
#
#   ptrain   ./build/ptrain train --model M --epochs E --threads T --quiet
#            (evaluates on the test split after every epoch)
#   PyTorch  bench/pytorch_train.py --model M --epochs E --threads T
#            (the tutorial's loop: DataLoader with shuffling over the split
#            in memory, evaluation once at the end)
#
# Runs are interleaved (ptrain, torch old, torch new, ptrain, ...) and
# repeated ROUNDS times; the table gives the median seconds and
# ptrain's images/s (epochs x 60,000 over the seconds) against each.
#
# Usage: bench/train_wall.sh            (from the repository root)
# Environment: MODELS (default: mnist-cnn tutorial-cnn fmnist-mlp), THREADS
# (1 2), EPOCHS (1), ROUNDS (3), PTRAIN (build/ptrain), PY_OLD
# (/usr/bin/python3), PY_NEW (/opt/torch-latest/bin/python; skipped where
# missing), PTRAIN_CPU (passed on).
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-mnist-cnn tutorial-cnn fmnist-mlp}
THREADS=${THREADS:-1 2}
EPOCHS=${EPOCHS:-1}
ROUNDS=${ROUNDS:-3}
PTRAIN=${PTRAIN:-build/ptrain}
PY_OLD=${PY_OLD:-/usr/bin/python3}
PY_NEW=${PY_NEW:-/opt/torch-latest/bin/python}
[[ -x $PTRAIN ]] || { echo "train_wall.sh: no ptrain binary at $PTRAIN (build it first: make)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ptrain-train-wall.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp "$PTRAIN" "$TMP/ptrain"

pys=()
for py in "$PY_OLD" "$PY_NEW"; do
  v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) || { echo "train_wall.sh: no torch in $py, skipped" >&2; continue; }
  pys+=("$py=$v")
done

# seconds COMMAND...: the wall seconds of one run (its output kept in $TMP/last).
seconds() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$TMP/last" 2>&1 || { echo "train_wall.sh: failed: $*" >&2; cat "$TMP/last" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $("$TMP/ptrain" info | sed -n 's/^  cpu kernels: \([a-z0-9]*\).*/\1/p') kernels; $EPOCHS epoch(s), $ROUNDS rounds"
printf '| model | threads | ptrain s | ptrain img/s |'
for p in "${pys[@]}"; do printf ' torch %s s | ptrain / torch %s |' "${p#*=}" "${p#*=}"; done
echo
printf '|---|---|---|---|'
for _ in "${pys[@]}"; do printf -- '---|---|'; done
echo
for m in $MODELS; do
  for t in $THREADS; do
    : >"$TMP/ptrain.s"
    for p in "${pys[@]}"; do : >"$TMP/${p#*=}.s"; done
    for ((r = 0; r < ROUNDS; r++)); do
      seconds "$TMP/ptrain" train --model "$m" --epochs "$EPOCHS" --threads "$t" --quiet >>"$TMP/ptrain.s"
      for p in "${pys[@]}"; do
        seconds "${p%%=*}" bench/pytorch_train.py --model "$m" --epochs "$EPOCHS" --threads "$t" >>"$TMP/${p#*=}.s"
      done
    done
    ps=$(median <"$TMP/ptrain.s")
    printf '| %s | %s | %.1f | %.0f |' "$m" "$t" "$ps" "$(echo "60000 * $EPOCHS / $ps" | bc -l)"
    for p in "${pys[@]}"; do
      ts=$(median <"$TMP/${p#*=}.s")
      printf ' %.1f | %.2fx |' "$ts" "$(echo "$ts / $ps" | bc -l)"
    done
    echo
  done
done
