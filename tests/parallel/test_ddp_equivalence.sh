# --parallel ddp under mpirun: N ranks at batch b for K steps end with the
# same weights as one process at batch N*b (shuffling and dropout off),
# within 1e-5 relative, for SGD and Adam, N = 2 and 4 (4 oversubscribes 2
# cores); dp and ddp give the same bits, at 4 ranks too. Also: only rank 0
# prints, and the launcher checks.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
need_mpi
common=(--model fmnist-mlp --no-shuffle --no-dropout --max-steps 4 --threads 1 --save-model --log-interval 1000)


for opt in sgd adam; do
  "$PTRAIN" train "${common[@]}" --optimizer $opt --batch-size 128 --checkpoint-dir "$TMP/one-$opt" >/dev/null
  for n in 2 4; do
    mpirun -np $n "$PTRAIN" train "${common[@]}" --optimizer $opt --batch-size $((128 / n)) --parallel ddp \
      --checkpoint-dir "$TMP/ddp$n-$opt" >"$TMP/log" 2>"$TMP/err" || fail "mpirun -np $n: $(cat "$TMP/err")"
    grep -q "data parallel: $n ranks (MPI)" "$TMP/log" || fail "ddp $n: the log does not say it is ddp: $(cat "$TMP/log")"
    [[ $(grep -c "^epoch 1/1" "$TMP/log") == 1 ]] || fail "ddp $n: more than rank 0 printed: $(cat "$TMP/log")"
    check_close "$opt, ddp $n x $((128 / n)) = 1 x 128" "$TMP/one-$opt" "$TMP/ddp$n-$opt"
  done
done

# dp and ddp agree with each other too, with shuffling on.
mpirun -np 2 "$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --threads 1 --batch-size 50 --parallel ddp \
  --save-model --quiet --checkpoint-dir "$TMP/ddp-shuffled" >/dev/null 2>&1
"$PTRAIN" train --model fmnist-mlp --max-steps 5 --no-dropout --threads 1 --batch-size 50 --parallel dp --workers 2 \
  --save-model --quiet --checkpoint-dir "$TMP/dp-shuffled" >/dev/null
check_close "shuffled, ddp 2 = dp 2" "$TMP/dp-shuffled" "$TMP/ddp-shuffled"
# Bit for bit, at 4 ranks too, where MPI's own allreduce would sum in
# pairs and dp's threads sum in rank order: mnist-cnn, whose convolutions'
# gradients make every bucket's last bits count.
cnn=(--model mnist-cnn --max-steps 4 --threads 1 --batch-size 16 --save-model --quiet --bucket-mb 0.5)
mpirun -np 4 "$PTRAIN" train "${cnn[@]}" --parallel ddp --checkpoint-dir "$TMP/ddp4-cnn" >/dev/null 2>"$TMP/err" ||
  fail "ddp 4, mnist-cnn: $(cat "$TMP/err")"
"$PTRAIN" train "${cnn[@]}" --parallel dp --workers 4 --checkpoint-dir "$TMP/dp4-cnn" >/dev/null
cmp -s "$TMP/dp4-cnn/model.safetensors" "$TMP/ddp4-cnn/model.safetensors" ||
  fail "dp 4 and ddp 4 are not bit-identical (mnist-cnn, 4 steps, buckets of 0.5 MB)"
pass "dp 4 = ddp 4, bit for bit"

# Launch mistakes get a message, not N processes writing one checkpoint.
expect_exit 2 "runs one process per rank; start them with a launcher" -- "$PTRAIN" train --parallel ddp --max-steps 1
expect_exit 2 "add --parallel ddp" -- mpirun -np 2 "$PTRAIN" train --model fmnist-mlp --max-steps 1
expect_exit 2 "--parallel ddp with 1 rank: there is no other to sum gradients with" -- \
  mpirun -np 1 "$PTRAIN" train --model fmnist-mlp --parallel ddp --max-steps 1

# Synchronised batch norm across processes: 2 ranks x 32 = 1 x 64.
# One step: bn1.bias's gradient is a sum that cancels to about 1/1000 of
# its terms, so the F(4x4, 3x3) convolution's rounding (a few 1e-6, which
# changes whenever the weights differ in their last bits) reaches 1e-3 of it
# by the third step, between any two ways of cutting the batch, 2 threads
# against 1 included. One step still checks the synchronised statistics,
# both gradients' sums and the running estimates.
bn=(--model-file docs/examples/small-cnn.txt --no-shuffle --no-dropout --max-steps 1 --threads 1 --save-model --quiet)
"$PTRAIN" train "${bn[@]}" --batch-size 64 --checkpoint-dir "$TMP/bn1" >/dev/null
mpirun -np 2 "$PTRAIN" train "${bn[@]}" --batch-size 32 --parallel ddp --sync-bn --checkpoint-dir "$TMP/bn-sync" \
  >/dev/null 2>"$TMP/err" || fail "ddp --sync-bn: $(cat "$TMP/err")"
check_close "batch norm, ddp 2 x 32 --sync-bn = 1 x 64" "$TMP/bn1" "$TMP/bn-sync"
