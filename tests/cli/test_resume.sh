# --resume continues bit for bit: 2 epochs straight equal 1 epoch + resume
# to 2, and a run stopped mid-epoch by --max-steps, resumed, equals one
# that never stopped. A custom model with dropout checks that the dropout
# masks resume too. Corrupt checkpoints are refused with a clear error.
source "$(dirname "$0")/lib.sh"
need_fmnist

small_dropout_spec "$TMP/small.txt" "optimizer=sgd lr=0.05 momentum=0.9 batch=128 scheduler=step gamma=0.5"
train() { # train DIR flags...
  local dir=$1; shift
  "$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --save-model --checkpoint-dir "$TMP/$dir" --quiet "$@" \
    >>"$TMP/$dir.out" 2>&1 || fail "train $dir $*: $(cat "$TMP/$dir.out")"
}

train straight --epochs 2
train split --epochs 1
train split --epochs 2 --resume
cmp -s "$TMP/straight/model.safetensors" "$TMP/split/model.safetensors" || fail "epoch-boundary resume differs"
pass "2 epochs = 1 epoch + resume"

train mid --epochs 2 --max-steps 700   # stops inside epoch 2 (469 steps an epoch)
grep -q "stopped early" "$TMP/mid.out" || fail "max-steps did not stop mid-epoch"
train mid --epochs 2 --resume
cmp -s "$TMP/straight/model.safetensors" "$TMP/mid/model.safetensors" || fail "mid-epoch resume differs"
pass "stopped at step 700 and resumed = straight run"

# --resume with --init-from, the command a job script runs each time: with
# no checkpoint yet it starts from the given weights, as --init-from alone;
# with one, it resumes, as --resume alone.
train_loud() { # as train, without --quiet: what the run says of its start
  local dir=$1; shift
  "$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --save-model --checkpoint-dir "$TMP/$dir" "$@" \
    >"$TMP/$dir.out" 2>&1 || fail "train $dir $*: $(cat "$TMP/$dir.out")"
}
train io --epochs 1 --init-from "$TMP/straight/model.safetensors"
train_loud ir --epochs 1 --init-from "$TMP/straight/model.safetensors" --resume
grep -q "no checkpoint in $TMP/ir yet: starting from" "$TMP/ir.out" || fail "no word of starting: $(cat "$TMP/ir.out")"
cmp -s "$TMP/io/model.safetensors" "$TMP/ir/model.safetensors" || fail "--resume --init-from in an empty dir differs"
train io --epochs 2 --resume
train_loud ir --epochs 2 --init-from "$TMP/straight/model.safetensors" --resume
grep -q "resuming from $TMP/ir/step-" "$TMP/ir.out" || fail "did not resume: $(cat "$TMP/ir.out")"
cmp -s "$TMP/io/model.safetensors" "$TMP/ir/model.safetensors" || fail "--resume --init-from with a checkpoint differs"
pass "--resume --init-from: starts from the weights, then resumes"

# Resuming with a changed batch size is refused: the data position would mean nothing.
expect_exit 1 "used batch size 128; resume with --batch-size 128" -- "$PTRAIN" train --model-file "$TMP/small.txt" \
  --checkpoint-dir "$TMP/straight" --resume --epochs 3 --batch-size 64

# Every checkpoint truncated: a clear error, nothing overwritten.
cp -r "$TMP/straight" "$TMP/broken"
for f in "$TMP"/broken/step-*/model.safetensors; do truncate -s 100 "$f"; done
expect_exit 1 "no complete checkpoint to resume from .*model.safetensors" -- "$PTRAIN" train \
  --model-file "$TMP/small.txt" --checkpoint-dir "$TMP/broken" --resume --epochs 3
for f in "$TMP"/broken/step-*/model.safetensors; do
  [[ $(stat -c %s "$f") == 100 ]] || fail "a failed resume rewrote $f"
done
# A state file from another model.
cp "$TMP/straight/model.safetensors" "$TMP/other.safetensors"
expect_exit 1 "no tensor|not a parameter" -- "$PTRAIN" train --model fmnist-mlp --init-from "$TMP/other.safetensors"
expect_exit 1 "no checkpoint to resume from: $TMP/none: no such directory" -- "$PTRAIN" train --model-file "$TMP/small.txt" \
  --checkpoint-dir "$TMP/none" --resume
pass "bad checkpoints refused"

# An unusable checkpoint directory is refused before any training.
touch "$TMP/afile"
expect_exit 1 "the checkpoint directory [^ ]*afile \\(--checkpoint-dir\\) exists and is not a directory" -- "$PTRAIN" train --model-file "$TMP/small.txt" --save-model \
  --checkpoint-dir "$TMP/afile" --epochs 1
grep -q "epoch 1" "$TMP/out" && fail "trained before refusing the checkpoint directory"
pass "checkpoint directory checked up front"
