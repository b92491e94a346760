# ptrain info names the CUDA state either way: built in or not, a GPU or the
# reason there is none.
source "$(dirname "$0")/lib.sh"

"$PTRAIN" info >"$TMP/info" || fail "ptrain info exited non-zero"
grep -Eq "^  CUDA: (yes \(runtime [0-9]+\.[0-9]+, |no \(this build is CPU-only: )" "$TMP/info" ||
  fail "no CUDA line: $(cat "$TMP/info")"
for lib in cuBLAS cuDNN NCCL; do
  grep -Eq "^  $lib: (yes \([0-9.]+\)|no)$" "$TMP/info" || fail "no $lib line: $(cat "$TMP/info")"
done
grep -Eq "^  cuda(:[0-9]+: .*compute capability [0-9]+\.[0-9]+, [0-9]+ SMs| \(none\)|: none \(.+\))$" "$TMP/info" ||
  fail "no cuda device line: $(cat "$TMP/info")"
if grep -q "^  CUDA: no" "$TMP/info"; then
  grep -q "^  cuda: none (built without CUDA" "$TMP/info" || fail "CPU-only build lists a GPU"
fi
pass "ptrain info names the CUDA state"

# A dataset not found comes with the command that fetches it, for that dataset and directory.
grep -q "NAME --dir DIR" "$TMP/info" && fail "a placeholder for the fetch command: $(cat "$TMP/info")"
(cd "$TMP" && "$PTRAIN" info) >"$TMP/info-here"
grep -qF 'data/mnist  (not found: run `ptrain data fetch mnist --dir data/mnist`)' "$TMP/info-here" ||
  fail "no fetch command for mnist: $(cat "$TMP/info-here")"
# an empty directory (what a failed fetch leaves) is no dataset, nor is
# one holding some of the files (a fetch cut short); one holding them all is
mkdir -p "$TMP/data/mnist" "$TMP/data/cifar10/cifar-10-batches-bin"
for f in data_batch_{1..5}.bin test_batch.bin; do : >"$TMP/data/cifar10/cifar-10-batches-bin/$f"; done
(cd "$TMP" && "$PTRAIN" info) >"$TMP/info-empty"
grep -qF 'data/mnist  (not found: run `ptrain data fetch mnist --dir data/mnist`)' "$TMP/info-empty" ||
  fail "an empty data/mnist counted as the dataset: $(cat "$TMP/info-empty")"
grep -Eq '^  cifar10 +data/cifar10$' "$TMP/info-empty" || fail "cifar10's files not found: $(cat "$TMP/info-empty")"
rm "$TMP/data/cifar10/cifar-10-batches-bin/test_batch.bin"
(cd "$TMP" && "$PTRAIN" info) >"$TMP/info-part"
grep -qF 'data/cifar10  (incomplete: test_batch.bin missing; run `ptrain data fetch cifar10 --dir data/cifar10`)' \
  "$TMP/info-part" || fail "a cifar10 without its test batch counted as the dataset: $(cat "$TMP/info-part")"
pass "ptrain info: a missing or incomplete dataset's fetch command"

# The default thread count is the CPUs this process may use (taskset, a
# batch system's cpuset), not those online.
if command -v taskset >/dev/null && (($(nproc) > 1)); then
  taskset -c 0 "$PTRAIN" info >"$TMP/info-one"
  grep -Eq "cores online \(1 this process may use\)" "$TMP/info-one" ||
    fail "info under taskset -c 0: $(grep cpu: "$TMP/info-one")"
  taskset -c 0 "$PTRAIN" bench --sgemm --size 64 >"$TMP/sgemm-one"
  grep -q ", 1 thread:" "$TMP/sgemm-one" || fail "bench under taskset -c 0: $(cat "$TMP/sgemm-one")"
  taskset -c 0 "$PTRAIN" train --model fmnist-mlp --max-steps 1 --checkpoint-dir "$TMP/one-cpu" >"$TMP/train-one"
  grep -q "batch 100, 1 thread," "$TMP/train-one" || fail "train under taskset -c 0: $(head -2 "$TMP/train-one")"
  pass "under taskset -c 0: info says 1 usable CPU, bench and train default to 1 thread"
fi

# A CUDA build loads cuBLAS when a GPU run first needs it: linked, it would
# cost every run (CPU runs too) about 210 MB at start-up.
if command -v ldd >/dev/null && ! grep -q "not a dynamic" <<<"$(ldd "$PTRAIN" 2>&1)"; then
  ! ldd "$PTRAIN" | grep "libcublas" >/dev/null || fail "ptrain links libcublas: $(ldd "$PTRAIN" | grep cublas)"
  pass "cuBLAS is not loaded at start-up"
fi
