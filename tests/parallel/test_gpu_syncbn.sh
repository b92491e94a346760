# --sync-bn on GPUs: each worker normalises with the global batch's
# statistics, as on the CPU. Runs where `ptrain info` lists a usable GPU;
# elsewhere it is skipped with the reason. With small-cnn (two batchnorm2d
# layers), shuffling and dropout off, SGD:
#   - ddp, N = 2 and 4 ranks sharing one GPU (host staging), --sync-bn,
#     N x 64/N equals the CPU's ddp --sync-bn run and one GPU at batch 64
#     (statistics synchronised over the parts are the whole batch's);
#     without --sync-bn it must differ from one GPU at 64;
#   - two such GPU runs of several steps give the same bits;
#   - dp over two GPUs, where there are two, equals one GPU and the CPU's dp.
# Within TOL (st_close's 2-norm per tensor). Neither comparison is of the
# same kernels cut differently, as on the CPU (1e-5 in
# test_ddp_equivalence.sh): against the CPU, conv2 runs Winograd there and
# cuDNN here; against one GPU at batch 64, the convolutions may take another
# algorithm for another batch size. After one step bn1.bias is its first
# gradient alone (it starts at zero), a sum that cancels to about 1/1000 of
# its terms, so those roundings reach it at close to 1e-3: on an H200,
# 6.9e-4 against the CPU, the worst tensor of the run. TOL = 2e-3 still
# tells a run whose statistics were not synchronised apart, by 5x: without
# --sync-bn the running estimates alone differ by about 1e-2, and the last
# check holds that at the same TOL. One step checks both forward sums, both
# backward sums, the parameters' gradients and the running estimates.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
"$PTRAIN" info >"$TMP/info"
# Usable GPUs only: `info` lists one it cannot open as "cuda:N: unusable".
ngpu=$(grep -E "^  cuda:[0-9]+: " "$TMP/info" | grep -vc ": unusable" || true)
if [[ $ngpu -lt 1 ]]; then
  echo "SKIPPED: no GPU ($(grep -E '^  cuda' "$TMP/info" | head -1 | sed 's/^ *//'))"
  exit 77
fi

TOL=2e-3
bn=(--model-file docs/examples/small-cnn.txt --no-shuffle --no-dropout --max-steps 1 --optimizer sgd --lr 0.01
    --save-model)

# close NAME TOL REFERENCE_DIR CANDIDATE_DIR
close() {
  "$ST_CLOSE" "$3/model.safetensors" "$4/model.safetensors" "$2" >"$TMP/close" 2>&1 || fail "$1: $(cat "$TMP/close")"
  pass "$1: $(cat "$TMP/close")"
}

"$PTRAIN" train "${bn[@]}" --device cuda:0 --batch-size 64 --checkpoint-dir "$TMP/gpu1" >"$TMP/log" 2>&1 ||
  fail "one GPU at batch 64: $(cat "$TMP/log")"
# A world of one: --sync-bn has nothing to pool, and the CLI says so.
if "$PTRAIN" train "${bn[@]}" --device cuda:0 --batch-size 64 --sync-bn --checkpoint-dir "$TMP/gpu1-sync" \
  >"$TMP/log" 2>&1; then
  fail "one GPU with --sync-bn and no --parallel ran instead of being refused"
fi
grep -q "this run has one" "$TMP/log" || fail "one GPU with --sync-bn: refused, but not saying why: $(cat "$TMP/log")"
pass "one GPU: --sync-bn with one worker is refused, saying why"

if [[ $ngpu -ge 2 ]]; then
  "$PTRAIN" train "${bn[@]}" --threads 1 --batch-size 32 --parallel dp --workers 2 --sync-bn \
    --checkpoint-dir "$TMP/cpu-dp" >/dev/null || fail "CPU dp --sync-bn"
  "$PTRAIN" train "${bn[@]}" --batch-size 32 --parallel dp --devices cuda:0,cuda:1 --sync-bn \
    --checkpoint-dir "$TMP/gpu-dp" >"$TMP/log" 2>&1 || fail "dp --sync-bn on 2 GPUs: $(cat "$TMP/log")"
  close "dp --sync-bn, 2 GPUs x 32 = the CPU's dp 2 x 32" $TOL "$TMP/cpu-dp" "$TMP/gpu-dp"
  close "dp --sync-bn, 2 GPUs x 32 = one GPU x 64" $TOL "$TMP/gpu1" "$TMP/gpu-dp"
else
  echo "note: one GPU; dp over two GPUs not run"
fi

need_mpi
for n in 2 4; do
  b=$((64 / n))
  mpirun -np $n "$PTRAIN" train "${bn[@]}" --threads 1 --batch-size $b --parallel ddp --sync-bn \
    --checkpoint-dir "$TMP/cpu-ddp$n" >/dev/null 2>"$TMP/err" || fail "CPU ddp $n --sync-bn: $(cat "$TMP/err")"
  CUDA_VISIBLE_DEVICES=0 mpirun -np $n "$PTRAIN" train "${bn[@]}" --batch-size $b --parallel ddp --device cuda \
    --sync-bn --checkpoint-dir "$TMP/gpu-ddp$n" >"$TMP/log" 2>&1 ||
    fail "ddp $n --sync-bn on one GPU: $(cat "$TMP/log")"
  grep -q "host memory" "$TMP/log" || fail "ddp $n on one GPU: no host-staging warning: $(cat "$TMP/log")"
  close "ddp --sync-bn, $n ranks x $b on one GPU = the CPU's ddp $n x $b" $TOL "$TMP/cpu-ddp$n" "$TMP/gpu-ddp$n"
  close "ddp --sync-bn, $n ranks x $b on one GPU = one GPU x 64" $TOL "$TMP/gpu1" "$TMP/gpu-ddp$n"
done

# Without --sync-bn each rank normalises with its own half: not 1 x 64.
CUDA_VISIBLE_DEVICES=0 mpirun -np 2 "$PTRAIN" train "${bn[@]}" --batch-size 32 --parallel ddp --device cuda \
  --checkpoint-dir "$TMP/gpu-ddp-local" >"$TMP/log" 2>&1 || fail "ddp 2 without --sync-bn: $(cat "$TMP/log")"
if "$ST_CLOSE" "$TMP/gpu1/model.safetensors" "$TMP/gpu-ddp-local/model.safetensors" $TOL >/dev/null 2>&1; then
  fail "ddp on one GPU without --sync-bn matched 1 x 64: the ranks' statistics were not their own"
fi
pass "ddp on one GPU without --sync-bn: per-rank statistics (differs from 1 x 64)"

# Same seed, same GPU, same ranks: the same bits, over several steps with
# shuffling (momentum on, running estimates updated every step).
many=(--model-file docs/examples/small-cnn.txt --no-dropout --max-steps 6 --optimizer sgd --lr 0.01 --save-model
      --batch-size 32 --parallel ddp --device cuda --sync-bn)
for k in 1 2; do
  CUDA_VISIBLE_DEVICES=0 mpirun -np 2 "$PTRAIN" train "${many[@]}" --checkpoint-dir "$TMP/again$k" >"$TMP/log" 2>&1 ||
    fail "ddp --sync-bn on one GPU, 6 steps, run $k: $(cat "$TMP/log")"
done
cmp -s "$TMP/again1/model.safetensors" "$TMP/again2/model.safetensors" || fail "two GPU ddp --sync-bn runs differ"
pass "two GPU ddp --sync-bn runs of 6 steps give the same bits"
