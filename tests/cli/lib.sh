# Helpers shared by the end-to-end tests. Each check prints what it expected
# and what it got, and the first failure ends the script with status 1.
set -euo pipefail
PTRAIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FMNIST=/usr/share/datasets/fashion-mnist
# Sanitizer builds: what libraries keep until exit is not a leak of ours.
export LSAN_OPTIONS=${LSAN_OPTIONS:-}${LSAN_OPTIONS:+:}suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lsan.supp

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# expect_exit CODE PATTERN -- command...: runs the command, checks its exit
# code and that its stderr matches PATTERN (grep -E).
expect_exit() {
  local code=$1 pattern=$2; shift 3
  local rc=0
  "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  [[ $rc == "$code" ]] || fail "'$*' exited $rc, expected $code; stderr: $(cat "$TMP/err")"
  grep -Eq -- "$pattern" "$TMP/err" || fail "'$*': stderr lacks /$pattern/: $(cat "$TMP/err")"
  pass "$* -> exit $code, /$pattern/"
}

need_fmnist() {
  if [[ ! -f $FMNIST/train-images-idx3-ubyte.gz ]]; then
    echo "SKIPPED: $FMNIST not found (apt-get install dataset-fashion-mnist)"
    exit 77
  fi
}

# The test accuracy printed on the final epoch line.
accuracy_of() { sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }

# make_cifar DIR N: a CIFAR-10-shaped set of N records per file in DIR (the
# five training batches and the test batch), deterministic noise with labels
# 0..9, for tests of cifar-convnet where the real set is absent.
make_cifar() {
  mkdir -p "$1"
  python3 - "$1" "$2" <<'PY'
import random, sys
d, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
for name in ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]:
    with open("%s/%s" % (d, name), "wb") as f:
        for i in range(n):
            f.write(bytes([i % 10]) + bytes(rng.getrandbits(8) for _ in range(3072)))
PY
}

# small_dropout_spec FILE [DEFAULTS]: a model small enough for many short
# runs (469 steps an epoch at batch 128, under a second each), with dropout
# so that a resume must carry the masks' position too; DEFAULTS replaces
# the preset-style defaults line (Adam, lr 0.002, batch 128).
small_dropout_spec() {
  cat >"$1" <<SPEC
name small-dropout
input 1 28 28
conv2d c1 out=4 kernel=5 stride=2
relu
dropout p=0.2
flatten
linear fc out=10
loss cross-entropy
defaults ${2:-optimizer=adam lr=0.002 batch=128}
SPEC
}

# train_small DIR FLAGS...: 2 epochs (469 steps each) of the model
# small_dropout_spec wrote to $TMP/small.txt, one thread, checkpoints in
# $TMP/DIR, what it prints appended to $TMP/DIR.out; a failure fails the test.
train_small() {
  local dir=$1; shift
  "$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --epochs 2 --checkpoint-dir "$TMP/$dir" "$@" \
    >>"$TMP/$dir.out" 2>&1 || fail "train $dir $*: $(cat "$TMP/$dir.out")"
}
