# Training on GPUs against the CPU reference. Runs where `ptrain info` lists
# a GPU; elsewhere it is skipped with the reason (the refusals that need no
# GPU are tests/cli/test_device.sh's).
#   - K steps of each preset on the GPU end within 1e-4 (relative, as
#     st_close measures it) of the CPU with the same seed and no dropout,
#     under SGD: Adam's first steps are about lr * sign(g), so a gradient
#     entry that is only rounding noise can move a weight by a whole step
#     between two summation orders (the optimizers themselves are compared
#     op by op in tests/cuda/test_ops.c);
#   - cifar-convnet too, on a small CIFAR-shaped set, with batch norm and
#     augmentation;
#   - a GPU run repeated gives the same bits;
#   - a resumed GPU run equals an uninterrupted one;
#   - ddp with two ranks on one GPU falls back to host staging, warns, and
#     equals one GPU at twice the batch; dp over two GPUs does too, where
#     there are two.
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

K=10
make_cifar "$TMP/cifar" 256
for model in fmnist-mlp mnist-cnn tutorial-cnn cifar-convnet; do
  common=(train --model "$model" --max-steps $K --no-dropout --quiet --save-model --optimizer sgd --lr 0.01)
  [[ $model == cifar-convnet ]] && common+=(--data-dir "$TMP/cifar")
  "$PTRAIN" "${common[@]}" --device cpu --checkpoint-dir "$TMP/cpu-$model" >/dev/null ||
    fail "$model on the CPU"
  "$PTRAIN" "${common[@]}" --device cuda --checkpoint-dir "$TMP/gpu-$model" >"$TMP/log" 2>&1 ||
    fail "$model on the GPU: $(cat "$TMP/log")"
  "$ST_CLOSE" "$TMP/cpu-$model/model.safetensors" "$TMP/gpu-$model/model.safetensors" 1e-4 >"$TMP/close" 2>&1 ||
    fail "$model: GPU against CPU after $K steps: $(cat "$TMP/close")"
  pass "$model: $K steps on the GPU match the CPU: $(cat "$TMP/close")"
done

# The same seed on the same GPU: the same bits (no atomics in reductions).
"$PTRAIN" train --model mnist-cnn --max-steps $K --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/again" >/dev/null || fail "mnist-cnn on the GPU, again"
"$ST_CLOSE" "$TMP/gpu-mnist-cnn/model.safetensors" "$TMP/again/model.safetensors" 0 >/dev/null 2>&1 &&
  fail "a dropout run should differ from the --no-dropout one"
"$PTRAIN" train --model mnist-cnn --max-steps $K --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/again2" >/dev/null || fail "mnist-cnn on the GPU, a third time"
cmp -s "$TMP/again/model.safetensors" "$TMP/again2/model.safetensors" || fail "two GPU runs differ"
pass "two GPU runs with dropout give the same bits"

# Resume on the GPU.
"$PTRAIN" train --model tutorial-cnn --max-steps 4 --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/straight" >/dev/null || fail "4 steps straight"
"$PTRAIN" train --model tutorial-cnn --max-steps 2 --quiet --save-model --device cuda \
  --checkpoint-dir "$TMP/resumed" >/dev/null || fail "2 steps"
"$PTRAIN" train --model tutorial-cnn --max-steps 4 --quiet --save-model --device cuda --resume \
  --checkpoint-dir "$TMP/resumed" >/dev/null || fail "resumed to 4 steps"
cmp -s "$TMP/straight/model.safetensors" "$TMP/resumed/model.safetensors" || fail "resumed GPU run differs"
pass "a resumed GPU run equals an uninterrupted one"

# The loss is read back at log intervals only; a run's printed metrics exist.
"$PTRAIN" train --model fmnist-mlp --max-steps 25 --log-interval 10 --device cuda --metrics "$TMP/m.jsonl" \
  >/dev/null 2>&1 || fail "fmnist-mlp with metrics"
grep -q '"train_loss"' "$TMP/m.jsonl" || fail "no train_loss in the metrics: $(cat "$TMP/m.jsonl")"
pass "GPU metrics are written"

"$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --quiet --save-model --device cuda:0 \
  --batch-size 100 --checkpoint-dir "$TMP/one" >/dev/null || fail "one GPU at batch 100"
# ddp, two ranks sharing the one GPU: host staging, with a warning.
if command -v mpirun >/dev/null && "$PTRAIN" info | grep -q "MPI: .*ddp available"; then
  need_mpi
  CUDA_VISIBLE_DEVICES=0 mpirun -np 2 "$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --save-model \
    --device cuda --batch-size 50 --parallel ddp --checkpoint-dir "$TMP/ddp" >"$TMP/log" 2>&1 ||
    fail "ddp on one GPU: $(cat "$TMP/log")"
  grep -q "host memory" "$TMP/log" || fail "no host-staging warning: $(cat "$TMP/log")"
  check_close "ddp, 2 ranks on one GPU, equals one GPU at twice the batch" "$TMP/one" "$TMP/ddp"
fi

if [[ $ngpu -ge 2 ]]; then
  "$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --quiet --save-model --parallel dp \
    --devices cuda:0,cuda:1 --batch-size 50 --checkpoint-dir "$TMP/dp" >/dev/null || fail "dp on 2 GPUs"
  check_close "dp on 2 GPUs equals one GPU at twice the batch" "$TMP/one" "$TMP/dp"
fi
