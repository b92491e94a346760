#!/usr/bin/env bash
# accuracy.sh - does ptrain reach PyTorch's test accuracy on Fashion-MNIST?
#
# For each model preset and seed, trains the preset's defaults for EPOCHS
# epochs three ways and tabulates the final test accuracy:
#   pytorch     bench/pytorch_train.py (the tutorial's code, PyTorch 1.13)
#   ptrain      ./build/ptrain train --model M --seed S --quiet --threads 2
#   ptrain+pti  the same, started from PyTorch's initial weights for that
#               seed (--init-from the file pytorch_train.py --export-only
#               writes), which takes weight initialisation out of the
#               comparison
# then prints, per model, the mean and min/max over the seeds.
#
# Everything runs one command at a time (the bench machine has 2 cores).
#
# Usage (from anywhere; paths are relative to the repository root):
#   bench/accuracy.sh
#   MODELS="fmnist-mlp tutorial-cnn" SEEDS="1 2 3" bench/accuracy.sh
#   MNIST_CNN_SEEDS="1" bench/accuracy.sh      # mnist-cnn is slow: ~1.5 min
#                                              # per epoch per run
# Environment:
#   MODELS           presets to run (default: fmnist-mlp tutorial-cnn mnist-cnn)
#   SEEDS            seeds (default: 1 2 3)
#   MNIST_CNN_SEEDS  seeds for mnist-cnn (default: $SEEDS)
#   EPOCHS           epochs per run (default 1)
#   THREADS          threads for both frameworks (default 2)
#   PTRAIN           the ptrain binary (default build/ptrain)
#   PYTHON           the Python with PyTorch (default /usr/bin/python3,
#                    Debian's python3-torch; not a pyenv python on PATH)
#   WORK_DIR         where the logs, init files and results.tsv go
#                    (default: a new directory under /tmp)
# Needs no network: the data are /usr/share/datasets/fashion-mnist.

set -euo pipefail

cd "$(dirname "$0")/.."

MODELS=${MODELS:-"fmnist-mlp tutorial-cnn mnist-cnn"}
SEEDS=${SEEDS:-"1 2 3"}
MNIST_CNN_SEEDS=${MNIST_CNN_SEEDS:-$SEEDS}
EPOCHS=${EPOCHS:-1}
THREADS=${THREADS:-2}
PTRAIN=${PTRAIN:-build/ptrain}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK_DIR=${WORK_DIR:-$(mktemp -d /tmp/ptrain-accuracy.XXXXXX)}
mkdir -p "$WORK_DIR"
RESULTS=$WORK_DIR/results.tsv

[[ -x $PTRAIN ]] || { echo "accuracy.sh: no ptrain binary at $PTRAIN" >&2; exit 1; }

torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)')
echo "PyTorch $torch_version ($PYTHON), $("$PTRAIN" --version), $EPOCHS epoch(s), $THREADS threads"
echo "logs in $WORK_DIR"
echo

# The test accuracy from ptrain's last "epoch N/N: ... test accuracy 0.XXXX" line.
ptrain_acc() {
  sed -n 's/^epoch [0-9]*\/[0-9]*:.*test accuracy \([0-9.]*\).*/\1/p' "$1" | tail -n 1
}

# The test accuracy from pytorch_train.py's JSON line.
pytorch_acc() {
  "$PYTHON" -c 'import json,sys; print("%.4f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["test_accuracy"])' <"$1"
}

# Runs a command with its output in a log; prints the accuracy or "fail".
run_one() {
  local log=$1 kind=$2
  shift 2
  if "$@" >"$log" 2>&1; then
    local acc
    if [[ $kind == pytorch ]]; then acc=$(pytorch_acc "$log" 2>/dev/null || true); else acc=$(ptrain_acc "$log"); fi
    echo "${acc:-fail}"
  else
    echo "run failed, see $log" >&2
    echo fail
  fi
}

printf 'model\tseed\tpytorch\tptrain\tptrain_pt_init\n' >"$RESULTS"
printf '%-13s %4s  %8s  %8s  %14s\n' model seed pytorch ptrain ptrain+pt-init
for m in $MODELS; do
  seeds=$SEEDS
  [[ $m == mnist-cnn ]] && seeds=$MNIST_CNN_SEEDS
  for s in $seeds; do
    base=$WORK_DIR/$m-seed$s
    a_pt=$(run_one "$base.pytorch.log" pytorch \
      "$PYTHON" bench/pytorch_train.py --model "$m" --seed "$s" --epochs "$EPOCHS" --threads "$THREADS")
    a_pp=$(run_one "$base.ptrain.log" ptrain \
      "$PTRAIN" train --model "$m" --seed "$s" --epochs "$EPOCHS" --quiet --threads "$THREADS")
    if "$PYTHON" bench/pytorch_train.py --model "$m" --seed "$s" --threads "$THREADS" \
      --export-init "$base.init.safetensors" --export-only >"$base.export.log" 2>&1; then
      a_pi=$(run_one "$base.ptrain-ptinit.log" ptrain \
        "$PTRAIN" train --model "$m" --seed "$s" --epochs "$EPOCHS" --quiet --threads "$THREADS" \
        --init-from "$base.init.safetensors")
    else
      echo "export failed, see $base.export.log" >&2
      a_pi=fail
    fi
    printf '%-13s %4s  %8s  %8s  %14s\n' "$m" "$s" "$a_pt" "$a_pp" "$a_pi"
    printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$s" "$a_pt" "$a_pp" "$a_pi" >>"$RESULTS"
  done
done

echo
echo "per model over seeds: mean [min, max]"
awk -F'\t' '
  NR == 1 { for (c = 3; c <= 5; c++) col[c] = $c; next }
  {
    if (!($1 in seen)) { seen[$1] = 1; order[++nm] = $1 }
    for (c = 3; c <= 5; c++) {
      if ($c == "fail") continue
      k = $1 SUBSEP c
      n[k]++; sum[k] += $c
      if (!(k in lo) || $c < lo[k]) lo[k] = $c
      if (!(k in hi) || $c > hi[k]) hi[k] = $c
    }
  }
  END {
    printf "%-13s %5s  %-24s  %-24s  %-24s\n", "model", "seeds", "pytorch", "ptrain", "ptrain+pt-init"
    for (i = 1; i <= nm; i++) {
      m = order[i]; line = sprintf("%-13s %5d", m, n[m SUBSEP 3])
      for (c = 3; c <= 5; c++) {
        k = m SUBSEP c
        cell = n[k] ? sprintf("%.4f [%.4f, %.4f]", sum[k] / n[k], lo[k], hi[k]) : "-"
        line = line sprintf("  %-24s", cell)
      }
      print line
    }
  }' "$RESULTS"
echo
echo "results: $RESULTS"
