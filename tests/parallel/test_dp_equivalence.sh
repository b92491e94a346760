# --parallel dp: N workers at batch b for K steps end with the same weights
# as one worker at batch N*b (shuffling off, dropout off), within 1e-5
# relative, for SGD and Adam, N = 2 and 4. Also: gradient accumulation (2
# workers x 2 micro-batches of b/4 = one batch b, also over an epoch whose
# last step is short), and bit-identical reruns.
source "$(dirname "$0")/lib.sh"
need_fmnist
common=(--model fmnist-mlp --no-shuffle --no-dropout --max-steps 4 --threads 1 --save-model --log-interval 1000)


for opt in sgd adam; do
  "$PTRAIN" train "${common[@]}" --optimizer $opt --batch-size 128 --checkpoint-dir "$TMP/one-$opt" >/dev/null
  for n in 2 4; do
    "$PTRAIN" train "${common[@]}" --optimizer $opt --batch-size $((128 / n)) --parallel dp --workers $n \
      --checkpoint-dir "$TMP/dp$n-$opt" >"$TMP/log"
    grep -q "data parallel: $n workers" "$TMP/log" || fail "dp $n: the log does not say it is data parallel"
    check_close "$opt, dp $n x $((128 / n)) = 1 x 128" "$TMP/one-$opt" "$TMP/dp$n-$opt"
  done
done

# The same through --devices, and with gradient accumulation.
"$PTRAIN" train "${common[@]}" --optimizer sgd --batch-size 32 --parallel dp --devices cpu:0,cpu:1 \
  --accum-steps 2 --checkpoint-dir "$TMP/accum" >/dev/null
check_close "sgd, dp 2 x 2 micro-batches x 32 = 1 x 128" "$TMP/one-sgd" "$TMP/accum"

# A whole epoch, whose last step is short: 60,000 = 234 x 256 + 96, so
# the accumulating runs end on micro-batches of 64 and 32 (one worker) or
# 32 and 16 (two). Each must count by its samples, as in one batch of 96.
epoch=(--model fmnist-mlp --no-shuffle --no-dropout --threads 1 --save-model --quiet --optimizer sgd)
"$PTRAIN" train "${epoch[@]}" --batch-size 256 --checkpoint-dir "$TMP/epoch-one" >/dev/null
"$PTRAIN" train "${epoch[@]}" --batch-size 64 --accum-steps 4 --checkpoint-dir "$TMP/epoch-accum" >/dev/null
check_close "an epoch ending short, 1 x 4 micro-batches x 64 = 1 x 256" "$TMP/epoch-one" "$TMP/epoch-accum"
"$PTRAIN" train "${epoch[@]}" --batch-size 32 --parallel dp --workers 2 --accum-steps 4 \
  --checkpoint-dir "$TMP/epoch-dp" >/dev/null
check_close "an epoch ending short, dp 2 x 4 micro-batches x 32 = 1 x 256" "$TMP/epoch-one" "$TMP/epoch-dp"

# A convolutional model, where each worker's conv kernels run on their own pool.
cnn=(--model mnist-cnn --no-shuffle --no-dropout --max-steps 3 --save-model --quiet --optimizer sgd)
"$PTRAIN" train "${cnn[@]}" --batch-size 32 --threads 1 --checkpoint-dir "$TMP/cnn1" >/dev/null
"$PTRAIN" train "${cnn[@]}" --batch-size 16 --parallel dp --workers 2 --threads 1 --checkpoint-dir "$TMP/cnn2" >/dev/null
check_close "mnist-cnn, dp 2 x 16 = 1 x 32" "$TMP/cnn1" "$TMP/cnn2"

# Same seed and workers: the same bits, shuffling and dropout on.
for run in a b; do
  "$PTRAIN" train --model fmnist-mlp --max-steps 6 --batch-size 50 --parallel dp --workers 2 --threads 1 \
    --save-model --quiet --checkpoint-dir "$TMP/rep-$run" >/dev/null
done
cmp -s "$TMP/rep-a/model.safetensors" "$TMP/rep-b/model.safetensors" || fail "two dp runs with one seed differ"
pass "two dp runs with the same seed are bit-identical"

# And the comparison can fail: a run at a different batch is not equivalent.
"$PTRAIN" train "${common[@]}" --optimizer sgd --batch-size 64 --checkpoint-dir "$TMP/half" >/dev/null
if "$ST_CLOSE" "$TMP/one-sgd/model.safetensors" "$TMP/half/model.safetensors" 1e-5 >/dev/null 2>&1; then
  fail "1 x 64 passed as equivalent to 1 x 128: the comparison cannot tell runs apart"
fi
pass "1 x 64 is told apart from 1 x 128"

# Batch norm. Without --sync-bn each worker normalises with its own half
# batch's statistics (DDP's default), so 2 x 32 is NOT the same computation
# as 1 x 64 and must differ; with --sync-bn the statistics are the global
# batch's and the runs agree.
# One step: bn1.bias's gradient is a sum that cancels to about 1/1000 of
# its terms, so the F(4x4, 3x3) convolution's rounding (a few 1e-6, which
# changes whenever the weights differ in their last bits) reaches 1e-3 of it
# by the third step, between any two ways of cutting the batch, 2 threads
# against 1 included. One step still checks the synchronised statistics,
# both gradients' sums and the running estimates.
bn=(--model-file docs/examples/small-cnn.txt --no-shuffle --no-dropout --max-steps 1 --threads 1 --save-model --quiet)
"$PTRAIN" train "${bn[@]}" --batch-size 64 --checkpoint-dir "$TMP/bn1" >/dev/null
"$PTRAIN" train "${bn[@]}" --batch-size 32 --parallel dp --workers 2 --sync-bn --checkpoint-dir "$TMP/bn-sync" >/dev/null
check_close "batch norm, dp 2 x 32 --sync-bn = 1 x 64" "$TMP/bn1" "$TMP/bn-sync"
"$PTRAIN" train "${bn[@]}" --batch-size 32 --parallel dp --workers 2 --checkpoint-dir "$TMP/bn-local" >/dev/null
if "$ST_CLOSE" "$TMP/bn1/model.safetensors" "$TMP/bn-local/model.safetensors" 1e-5 >/dev/null 2>&1; then
  fail "batch norm without --sync-bn matched 1 x 64: the workers' statistics were not their own"
fi
pass "batch norm without --sync-bn: per-worker statistics, as DDP (differs from 1 x 64)"
