# One binary on every x86-64: the Release binary under qemu-user's models
# of CPUs without AVX-512 (Haswell) and without AVX at all (Nehalem) takes
# the level each has, trains two steps of fmnist-mlp without an illegal
# instruction, and gets the losses of a native run forced to that level.
# Also: PTRAIN_CPU refuses unknown levels and levels this CPU lacks.
source "$(dirname "$0")/lib.sh"

expect_exit 2 "PTRAIN_CPU=sse9: unknown level; expected generic, avx2, avx512 or auto" -- \
  env PTRAIN_CPU=sse9 "$PTRAIN" info
best=$("$PTRAIN" info | sed -n 's/^  cpu kernels: [a-z0-9]* (best here: \([a-z0-9]*\);.*/\1/p')
[[ -n $best ]] || fail "ptrain info names no best level: $("$PTRAIN" info)"
for level in avx2 avx512; do
  if [[ $best == generic || ($best == avx2 && $level == avx512) ]]; then
    expect_exit 2 "PTRAIN_CPU=$level: this CPU \(.*\) cannot run $level kernels; it has: .*best level: $best" -- \
      env PTRAIN_CPU=$level "$PTRAIN" info
  fi
done

[[ $(uname -m) == x86_64 ]] || { echo "SKIPPED: qemu-x86_64 models x86-64 CPUs; this is $(uname -m)"; exit 77; }
command -v qemu-x86_64 >/dev/null || { echo "SKIPPED: qemu-x86_64 not found (apt-get install qemu-user)"; exit 77; }
# Under qemu-user, AddressSanitizer's shadow memory is committed page by
# page: the emulated run grew past 24 GB and was killed. The proof is about
# the Release binary anyway. (ldd's output is read whole first: piped into
# grep -q, which exits at the first match, ldd could die of SIGPIPE, and
# under pipefail the check then failed and the emulated run went ahead.)
libs=$(ldd "$PTRAIN" 2>/dev/null || true)
if grep -q 'libasan\|libubsan' <<<"$libs"; then
  echo "SKIPPED: the qemu runs need the Release binary; $PTRAIN is built with sanitizers (make test SANITIZE=1)"
  exit 77
fi
need_fmnist

# 1,000 training and 100 test images: under emulation, decoding the whole
# set would take most of a minute.
mkdir -p "$TMP/data"
python3 - "$FMNIST" "$TMP/data" <<'PY'
import gzip, sys
src, dst = sys.argv[1], sys.argv[2]
for name, n in (("train", 1000), ("t10k", 100)):
    for kind, head, size in (("images", 16, 784), ("labels", 8, 1)):
        f = "%s-%s-idx%d-ubyte.gz" % (name, kind, 3 if kind == "images" else 1)
        raw = gzip.open("%s/%s" % (src, f)).read()
        out = bytearray(raw[:head])
        out[4:8] = n.to_bytes(4, "big")
        gzip.open("%s/%s" % (dst, f), "wb").write(bytes(out) + raw[head:head + n * size])
PY

# run LOG [qemu-x86_64 -cpu MODEL]: two steps, one thread; OpenBLAS held to
# the model's kernel set (OPENBLAS_CORETYPE), so that natively too only
# ptrain's level decides.
run() {
  local log=$1
  shift
  OPENBLAS_CORETYPE=$model "$@" "$PTRAIN" train --model fmnist-mlp --data-dir "$TMP/data" --max-steps 2 \
    --threads 1 --epochs 1 --metrics "$log.jsonl" >"$log" 2>&1 || fail "$* ptrain train: $(grep -v "TCG doesn't" "$log")"
}
loss_of() { sed -n 's/.*"train_loss":\([^,]*\),"test_loss":\([^,]*\),.*/\1 \2/p' "$1.jsonl"; }

for pair in Haswell:avx2 Nehalem:generic; do
  model=${pair%%:*} level=${pair##*:}
  [[ $level == avx2 && $best == generic ]] && { echo "skipped: a native avx2 run to compare $model with (this CPU: $best)"; continue; }
  run "$TMP/$model" qemu-x86_64 -cpu "$model"
  grep -q "$level kernels" "$TMP/$model" || fail "under -cpu $model: expected $level kernels: $(head -1 "$TMP/$model")"
  PTRAIN_CPU=$level run "$TMP/native-$level"
  [[ -n $(loss_of "$TMP/$model") && $(loss_of "$TMP/$model") == $(loss_of "$TMP/native-$level") ]] ||
    fail "-cpu $model: losses $(loss_of "$TMP/$model"), native at $level: $(loss_of "$TMP/native-$level")"
  pass "-cpu $model: $level kernels, two steps, losses $(loss_of "$TMP/$model") as native at $level"
done
