# Checkpoints as one unit: generations published whole, the newest K kept,
# DIR/model.safetensors the newest weights; --resume takes the newest
# complete one, skipping (and naming) a broken or mismatched newer one, and
# still ends bit for bit where an uninterrupted run does; --checkpoint-every
# saves inside epochs; a full disk keeps the previous checkpoint and leaves
# no temporary files, and says whether there was one. --resume: into a
# directory without a checkpoint, or with another optimizer, a direct error;
# with nothing left to do, says so; a resumed run keeps checkpointing.
source "$(dirname "$0")/lib.sh"
need_fmnist

small_dropout_spec "$TMP/small.txt"
gens() { (cd "$TMP/$1" && ls -d step-* 2>/dev/null | tr '\n' ' '); }

train_small straight --save-model
train_small every --checkpoint-every 100
[[ $(gens every) == "step-000000000900 step-000000000938 " ]] ||
  fail "--checkpoint-every 100, default --keep-checkpoints 2: generations $(gens every)"
cmp -s "$TMP/every/model.safetensors" "$TMP/every/step-000000000938/model.safetensors" ||
  fail "DIR/model.safetensors is not the newest generation's weights"
cmp -s "$TMP/straight/model.safetensors" "$TMP/every/model.safetensors" || fail "saving inside epochs changed the run"
[[ -z $(find "$TMP/every" -name '.*' -mindepth 1) ]] || fail "files left behind: $(find "$TMP/every" -name '.*')"
pass "--checkpoint-every 100: generations 900 and 938 kept, DIR/model.safetensors the newest, the run unchanged"

# a run stopped at step 700 that kept 3: 500, 600, 700
train_small mid --checkpoint-every 100 --keep-checkpoints 3 --max-steps 700
[[ $(gens mid) == "step-000000000500 step-000000000600 step-000000000700 " ]] ||
  fail "--keep-checkpoints 3, --max-steps 700: generations $(gens mid)"
cp -r "$TMP/mid" "$TMP/mid-copy"
cp -r "$TMP/mid" "$TMP/mid-orig"

# the newest generation's state cut short: --resume names it and takes 600
truncate -s 1000 "$TMP/mid/step-000000000700/state.safetensors"
train_small mid --resume --save-model
grep -q "resuming from $TMP/mid/step-000000000600 .*skipped $TMP/mid/step-000000000700: " "$TMP/mid.out" ||
  fail "resume did not say it skipped the broken step 700: $(grep resuming "$TMP/mid.out")"
cmp -s "$TMP/straight/model.safetensors" "$TMP/mid/model.safetensors" || fail "resumed from 600: differs from straight"
pass "a cut state file: skipped with the reason, resumed from step 600, the straight run's weights"
# Under --quiet too: a damaged checkpoint skipped is no progress line.
cp -r "$TMP/mid-orig" "$TMP/quiet"
truncate -s 1000 "$TMP/quiet/step-000000000700/state.safetensors"
train_small quiet --resume --quiet
grep -q "resuming from $TMP/quiet/step-000000000600 .*skipped $TMP/quiet/step-000000000700: " "$TMP/quiet.out" ||
  fail "--quiet resume did not say it skipped the broken step 700: $(cat "$TMP/quiet.out")"
pass "--quiet: a damaged checkpoint skipped is still said"

# Saves behind a damaged newer generation: K resumable ones are kept, and
# the damaged one is left for the run to replace when it gets there.
cp -r "$TMP/mid-orig" "$TMP/prune"
truncate -s 1000 "$TMP/prune/step-000000000700/state.safetensors"
train_small prune --resume --checkpoint-every 20 --max-steps 660
[[ $(gens prune) == "step-000000000640 step-000000000660 step-000000000700 " ]] ||
  fail "behind a damaged step 700, --keep-checkpoints 2: generations $(gens prune)"
# Past it, without a save of its step: still not counted.
cp -r "$TMP/mid-orig" "$TMP/prune2"
truncate -s 1000 "$TMP/prune2/step-000000000700/state.safetensors"
train_small prune2 --resume --max-steps 750
[[ $(gens prune2) == "step-000000000600 step-000000000700 step-000000000750 " ]] ||
  fail "past a damaged step 700, --keep-checkpoints 2: generations $(gens prune2)"
# A save of the damaged step replaces it with a sound one, which counts.
cp -r "$TMP/mid-orig" "$TMP/prune3"
truncate -s 1000 "$TMP/prune3/step-000000000700/state.safetensors"
train_small prune3 --resume --checkpoint-every 50 --max-steps 800
[[ $(gens prune3) == "step-000000000750 step-000000000800 " ]] ||
  fail "past a damaged step 700 saved again, --keep-checkpoints 2: generations $(gens prune3)"
pass "behind and past a damaged generation: two resumable generations kept, the damaged one left until saved again"

# weights of another save in the newest generation: refused as a pair
cp "$TMP/mid-copy/step-000000000600/model.safetensors" "$TMP/mid-copy/step-000000000700/model.safetensors"
train_small mid-copy --resume --save-model
grep -q "skipped $TMP/mid-copy/step-000000000700: .*are not from the same save" "$TMP/mid-copy.out" ||
  fail "a mixed pair was not refused: $(grep resuming "$TMP/mid-copy.out")"
cmp -s "$TMP/straight/model.safetensors" "$TMP/mid-copy/model.safetensors" || fail "after a mixed pair: differs"
pass "a mixed pair refused, resumed from the one before, the straight run's weights"

# nothing complete: a clear error, not a start from scratch
mkdir -p "$TMP/broken/step-000000000100"
echo junk >"$TMP/broken/step-000000000100/model.safetensors"
expect_exit 1 "no complete checkpoint to resume from .*step-000000000100" -- \
  "$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --checkpoint-dir "$TMP/broken" --resume

# the single pair of earlier versions still resumes
mkdir -p "$TMP/legacy"
cp "$TMP/mid-orig/step-000000000600/state.safetensors" "$TMP/mid-orig/step-000000000600/model.safetensors" "$TMP/legacy/"
train_small legacy --resume --save-model
cmp -s "$TMP/straight/model.safetensors" "$TMP/legacy/model.safetensors" || fail "the old layout's resume differs"
pass "the old single-pair layout resumes"

# ptrain eval and --init-from take the directory
"$PTRAIN" eval --model-file "$TMP/small.txt" --checkpoint "$TMP/every" >"$TMP/eval.out" 2>&1 ||
  fail "eval DIR: $(cat "$TMP/eval.out")"
"$PTRAIN" train --model fmnist-mlp --max-steps 5 --save-model --checkpoint-dir "$TMP/preset" --quiet >/dev/null 2>&1 ||
  fail "a preset's run"
"$PTRAIN" eval --checkpoint "$TMP/preset" >"$TMP/eval2.out" 2>&1 || fail "eval DIR, model from the checkpoint: $(cat "$TMP/eval2.out")"
grep -q "^fmnist-mlp on fashion-mnist test" "$TMP/eval2.out" || fail "eval DIR: $(cat "$TMP/eval2.out")"
# --dataset naming images the model cannot take: a usage error, as in train
make_cifar "$TMP/cifar" 3
expect_exit 2 "model fmnist-mlp takes 1x28x28 input but the cifar10 images in $TMP/cifar are 3x32x32" -- \
  "$PTRAIN" eval --checkpoint "$TMP/preset" --dataset cifar10 --data-dir "$TMP/cifar"
state=$(ls -d "$TMP"/preset/step-*/state.safetensors | head -1)
expect_exit 1 "state.safetensors is a checkpoint's optimizer state, not its weights: give the model.safetensors beside it" -- \
  "$PTRAIN" eval --checkpoint "$state"
pass "ptrain eval --checkpoint DIR (the model named by the checkpoint, or by --model-file)"

# a full disk: a 3 MB tmpfs holds one fmnist-mlp checkpoint (0.6 MB of weights
# and 1.2 MB of Adam state), not two; where this machine lets us mount one
full=$TMP/full
mkdir -p "$full"
if mount -t tmpfs -o size=3m tmpfs "$full" 2>/dev/null; then
  trap 'umount "$full" 2>/dev/null || true; rm -rf "$TMP"' EXIT
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$full" --checkpoint-every 50 --max-steps 50 \
    --quiet >"$TMP/full.out" 2>&1 || fail "the first checkpoint did not fit in 3 MB: $(cat "$TMP/full.out")"
  rc=0
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$full" --resume --max-steps 100 --save-model \
    --quiet >"$TMP/full2.out" 2>&1 || rc=$?
  [[ $rc != 0 ]] || fail "a second checkpoint fit in 3 MB (expected no room): $(ls -la "$full")"
  grep -Eq "no space left for the checkpoint: it needs about [0-9.]+ MiB, [0-9.]+ MiB are free" "$TMP/full2.out" ||
    fail "the full disk's message: $(cat "$TMP/full2.out")"
  [[ $(cd "$full" && ls -A | tr '\n' ' ') == "model.safetensors step-000000000050 " ]] ||
    fail "after the full disk: $(cd "$full" && ls -A)"
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$full" --resume --max-steps 60 >"$TMP/full3.out" 2>&1 ||
    true
  grep -q "resuming from $full/step-000000000050 " "$TMP/full3.out" || fail "no resume after the full disk: $(cat "$TMP/full3.out")"
  umount "$full"
  pass "a full disk: exit $rc naming the space needed, step 50 kept and resumable, no temporary files"
else
  echo "no tmpfs here (mount refused): the full disk is only injected below"
fi

# The same full disk injected (PTRAIN_TEST_ENOSPC_AFTER, a test hook: every
# write past the first BYTES fails with ENOSPC), so that the case runs on
# machines that refuse the mount: the second save gets 1 MB, the weights
# (0.6 MB) fit and the optimizer state does not.
inj=$TMP/injected
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --checkpoint-every 50 --max-steps 50 \
  --quiet >"$TMP/inj.out" 2>&1 || fail "the first checkpoint: $(cat "$TMP/inj.out")"
rc=0
PTRAIN_TEST_ENOSPC_AFTER=1000000 "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --resume \
  --max-steps 100 --save-model --quiet >"$TMP/inj2.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "an injected full disk: exit $rc, expected 1: $(cat "$TMP/inj2.out")"
grep -Eq "$inj/\.partial-step-000000000100\.[0-9]+@[^/]+/state\.safetensors: no space left for the checkpoint: it needs about [0-9.]+ MiB, [0-9.]+ MiB are free; the previous checkpoint, $inj/step-000000000050, is kept" \
  "$TMP/inj2.out" || fail "the injected full disk's message: $(cat "$TMP/inj2.out")"
[[ $(cd "$inj" && ls -A | tr '\n' ' ') == "model.safetensors step-000000000050 " ]] ||
  fail "after the injected full disk: $(cd "$inj" && ls -A)"
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --resume --max-steps 100 --save-model \
  >"$TMP/inj3.out" 2>&1 || fail "resume after the injected full disk: $(cat "$TMP/inj3.out")"
grep -q "resuming from $inj/step-000000000050 " "$TMP/inj3.out" || fail "no resume from step 50: $(cat "$TMP/inj3.out")"
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$TMP/inj-straight" --max-steps 100 --save-model \
  --quiet >/dev/null 2>&1 || fail "the straight run"
cmp -s "$inj/model.safetensors" "$TMP/inj-straight/model.safetensors" ||
  fail "resumed after the injected full disk, the weights differ from a straight run's"
pass "an injected full disk: exit 1 naming the path and the space needed, step 50 kept, no temporary files, resumed = straight"

# The same full disk at a run's first save: no previous checkpoint to speak of.
rc=0
PTRAIN_TEST_ENOSPC_AFTER=1000000 "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$TMP/first-full" \
  --max-steps 50 --save-model --quiet >"$TMP/ff.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "an injected full disk at the first save: exit $rc: $(cat "$TMP/ff.out")"
grep -q "MiB are free; $TMP/first-full holds no earlier checkpoint, so there is none to resume from" "$TMP/ff.out" ||
  fail "the full disk's message at the first save: $(cat "$TMP/ff.out")"
grep -q "previous checkpoint" "$TMP/ff.out" && fail "a previous checkpoint claimed where there was none: $(cat "$TMP/ff.out")"
pass "a full disk at the first save says there is no earlier checkpoint"

# --resume where there is nothing to resume: said directly, and no directory made.
mkdir -p "$TMP/emptyck"
expect_exit 1 "no checkpoint to resume from in $TMP/emptyck \(no step-\* directory in it\); run without --resume" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$TMP/emptyck" --resume
expect_exit 1 "no checkpoint to resume from: $TMP/nock: no such directory; run without --resume" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$TMP/nock" --resume
[[ ! -e $TMP/nock ]] || fail "--resume created the directory it did not find"
mkdir -p "$TMP/weights-only"
cp "$inj/model.safetensors" "$TMP/weights-only/"
expect_exit 1 "$TMP/weights-only holds weights \(model.safetensors\) but no training state.*--init-from" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$TMP/weights-only" --resume
pass "--resume into an empty, a missing or a weights-only directory: what it holds and what to do"

# A new run into a directory that holds another run's generations is
# refused before it trains: its saves would mix with them, and pruning by
# step removed the new run's newest save at once (a resume then took the
# other run's). The other run's files stay as they were.
"$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 40 --checkpoint-every 10 --save-model \
  --quiet --checkpoint-dir "$TMP/other-run" >/dev/null || fail "the first run into other-run"
ls "$TMP/other-run" >"$TMP/other-before"
expect_exit 1 "$TMP/other-run already holds a run's checkpoints \(newest $TMP/other-run/step-000000000040\), and this run does not --resume it.*Continue that run with --resume, give this one another --checkpoint-dir" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 20 --seed 7 --save-model \
  --checkpoint-dir "$TMP/other-run"
grep -q "^epoch" "$TMP/out" && fail "the refused run trained first: $(cat "$TMP/out")"
ls "$TMP/other-run" | cmp -s - "$TMP/other-before" || fail "the refused run changed other-run: $(ls "$TMP/other-run")"
pass "a new run into another run's checkpoint directory: refused before training, nothing touched"

# A state whose metadata was edited (its CRC dropped, as the docs allow) is
# held to sane positions: a next_batch past int's range does not wrap into
# another batch, a version from a newer ptrain is named.
edit_state() { # DIR KEY VALUE: a copy of other-run's newest generation, one metadata entry set
  rm -rf "$1" && mkdir -p "$1" && cp -r "$TMP/other-run/step-000000000040" "$1/"
  python3 - "$1/step-000000000040/state.safetensors" "$2" "$3" <<'PY'
import json, struct, sys
path, key, value = sys.argv[1:]
b = open(path, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"].pop("ptrain.crc32")
h["__metadata__"][key] = value
s = json.dumps(h).encode()
s += b" " * ((8 - len(s) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
}
resume_edited() {
  "$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 50 --resume --checkpoint-dir "$1"
}
edit_state "$TMP/edited" next_batch 99999999999
expect_exit 1 "the training state's next_batch is 99999999999, expected 0 to" -- resume_edited "$TMP/edited"
edit_state "$TMP/edited" next_batch 7000
expect_exit 1 "the training state is at batch 7000 of an epoch of 6000: past its end" -- resume_edited "$TMP/edited"
edit_state "$TMP/edited" epoch_loss_sum nan
expect_exit 1 "the training state's epoch_loss_sum is nan, expected a finite number >= 0" -- resume_edited "$TMP/edited"
edit_state "$TMP/edited" ptrain.state_version 2
expect_exit 1 "training state version 2; this ptrain reads version 1" -- resume_edited "$TMP/edited"
edit_state "$TMP/edited" seed -1
expect_exit 1 "the run being resumed used seed 18446744073709551615; resume with --seed 18446744073709551615" -- \
  resume_edited "$TMP/edited"
edit_state "$TMP/edited" seed 12x
expect_exit 1 "metadata 'seed'='12x' is not an integer from 0 to 18446744073709551615" -- resume_edited "$TMP/edited"
pass "an edited training state: out-of-range positions and a newer version refused, naming them"
# Seeds span uint64, as PyTorch's manual_seed; the largest survives a resume.
"$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 10 --seed 18446744073709551615 \
  --save-model --quiet --checkpoint-dir "$TMP/big-seed" >/dev/null || fail "a run with the largest seed"
"$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 20 --seed 18446744073709551615 \
  --resume --quiet --checkpoint-dir "$TMP/big-seed" >"$TMP/big-seed.out" 2>&1 ||
  fail "resuming the largest seed: $(cat "$TMP/big-seed.out")"
pass "seeds: an old state's negative seed read as uint64, the largest seed resumed"
# What else the data position and the steps mean is held on resume too:
# the order (--no-shuffle) and --accum-steps.
expect_exit 1 "the run being resumed drew each epoch's order; resume without --no-shuffle" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 50 --resume --no-shuffle \
  --checkpoint-dir "$TMP/other-run"
expect_exit 1 "the run being resumed used --accum-steps 1; resume with --accum-steps 1" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 50 --resume --accum-steps 2 \
  --checkpoint-dir "$TMP/other-run"
# A forgotten --model (the default preset, whose optimizer differs too) is
# named as the model, not as the optimizer that follows from it.
expect_exit 1 "the run being resumed trained model 'fmnist-mlp', not 'mnist-cnn'" -- \
  "$PTRAIN" train --threads 1 --batch-size 10 --max-steps 50 --resume --checkpoint-dir "$TMP/other-run"
# A spec edited between the runs keeps its name, and here its tensors'
# shapes: the model the checkpoint records is compared, not only its name.
# A comment or a blank line is no change.
"$PTRAIN" models fmnist-mlp >"$TMP/mlp.txt"
sed 's/^logsoftmax$/relu/' "$TMP/mlp.txt" >"$TMP/mlp-relu.txt"
{ echo "# the same model"; echo; cat "$TMP/mlp.txt"; } >"$TMP/mlp-commented.txt"
"$PTRAIN" train --model-file "$TMP/mlp.txt" --threads 1 --batch-size 10 --max-steps 10 --checkpoint-every 5 --quiet \
  --checkpoint-dir "$TMP/respec" >/dev/null || fail "a run from the printed preset"
expect_exit 1 "the run being resumed trained another model named 'fmnist-mlp': in its model, layer 3 is logsoftmax, not relu; resume with the model it trained" -- \
  "$PTRAIN" train --model-file "$TMP/mlp-relu.txt" --threads 1 --batch-size 10 --max-steps 20 --resume \
  --checkpoint-dir "$TMP/respec"
"$PTRAIN" train --model-file "$TMP/mlp-commented.txt" --threads 1 --batch-size 10 --max-steps 20 --resume --quiet \
  --checkpoint-dir "$TMP/respec" >"$TMP/respec.out" 2>&1 || fail "a resume with comments added: $(cat "$TMP/respec.out")"
# Dropout's p is compared too, but not under --no-dropout, which sets it to 0.
sed 's/^dropout p=0.2$/dropout p=0.5/' "$TMP/small.txt" >"$TMP/small-p5.txt"
expect_exit 1 "the run being resumed trained another model named 'small-dropout': in its model, layer 3 \(dropout\) has p=0.2, not 0.5" -- \
  "$PTRAIN" train --model-file "$TMP/small-p5.txt" --threads 1 --epochs 2 --resume --checkpoint-dir "$TMP/straight"
"$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --epochs 2 --resume --no-dropout --quiet \
  --checkpoint-dir "$TMP/straight" >"$TMP/nodrop.out" 2>&1 || fail "a resume with --no-dropout: $(cat "$TMP/nodrop.out")"
# SGD's momentum buffers: dropped, or missing, is the run's setting, not damage.
"$PTRAIN" train --model fmnist-mlp --optimizer sgd --momentum 0.9 --threads 1 --batch-size 10 --max-steps 10 \
  --checkpoint-every 5 --quiet --checkpoint-dir "$TMP/momentum" >/dev/null || fail "a run with momentum"
expect_exit 1 "the run being resumed used SGD with momentum \(its state holds momentum buffers\), and this one has none; resume with the --momentum it used" -- \
  "$PTRAIN" train --model fmnist-mlp --optimizer sgd --threads 1 --batch-size 10 --max-steps 20 --resume \
  --checkpoint-dir "$TMP/momentum"
"$PTRAIN" train --model fmnist-mlp --optimizer sgd --threads 1 --batch-size 10 --max-steps 10 \
  --checkpoint-every 5 --quiet --checkpoint-dir "$TMP/no-momentum" >/dev/null || fail "a run without momentum"
expect_exit 1 "the run being resumed used SGD without momentum, and this one has --momentum 0.9; resume without --momentum" -- \
  "$PTRAIN" train --model fmnist-mlp --optimizer sgd --momentum 0.9 --threads 1 --batch-size 10 --max-steps 20 \
  --resume --checkpoint-dir "$TMP/no-momentum"
pass "resuming another model of the same name, or SGD with momentum changed: said directly"
# The same dataset's name from other files (another --data-dir): the
# order would be a permutation of another split.
mkdir -p "$TMP/small-data"
python3 - "$FMNIST" "$TMP/small-data" <<'PY'
import gzip, struct, sys
src, out = sys.argv[1:]
for kind, per, head in (("images-idx3", 784, 16), ("labels-idx1", 1, 8)):
    b = gzip.open(f"{src}/train-{kind}-ubyte.gz").read()
    h = bytearray(b[:head])
    h[4:8] = struct.pack(">I", 1000)
    open(f"{out}/train-{kind}-ubyte", "wb").write(bytes(h) + b[head:head + 1000 * per])
PY
ln -s "$FMNIST"/t10k-* "$TMP/small-data/"
expect_exit 1 "the run being resumed trained on 60000 fashion-mnist images, this one has 1000; resume with the same data \(--data-dir\)" -- \
  "$PTRAIN" train --model fmnist-mlp --optimizer sgd --threads 1 --batch-size 10 --max-steps 20 --resume \
  --data-dir "$TMP/small-data" --checkpoint-dir "$TMP/no-momentum"
pass "resuming on another split of the same name: said directly"

# Another optimizer: the same direct error as another seed, not a list of skipped generations.
expect_exit 1 "step-000000000100/state.safetensors: the run being resumed used --optimizer adam, not sgd; resume with --optimizer adam" -- \
  "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --resume --optimizer sgd --max-steps 200
grep -q "no complete checkpoint" "$TMP/err" && fail "another optimizer reported as broken checkpoints: $(cat "$TMP/err")"

# Nothing left to do: --max-steps as --epochs.
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --resume --max-steps 100 >"$TMP/done.out" 2>&1 ||
  fail "a resume with nothing to do: $(cat "$TMP/done.out")"
grep -q "^nothing to train: the checkpoint has 100 steps; ask for more with --max-steps" "$TMP/done.out" ||
  fail "a resume at --max-steps did not say so: $(cat "$TMP/done.out")"
"$PTRAIN" train --model-file "$TMP/small.txt" --threads 1 --checkpoint-dir "$TMP/straight" --resume --epochs 2 >"$TMP/done2.out" 2>&1 ||
  fail "a resume with all epochs done: $(cat "$TMP/done2.out")"
grep -q "^nothing to train: the checkpoint has 2 epochs; ask for more with --epochs" "$TMP/done2.out" ||
  fail "a resume at --epochs did not say so: $(cat "$TMP/done2.out")"
pass "resuming with another optimizer, or with nothing to do: said directly"

# A resumed run keeps checkpointing without --save-model: a second --resume does not redo its work.
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --resume --max-steps 120 >"$TMP/again.out" 2>&1 ||
  fail "resume to 120: $(cat "$TMP/again.out")"
[[ -d $inj/step-000000000120 ]] || fail "a resumed run without --save-model kept no final checkpoint: $(ls "$inj")"
grep -q "^done: 120 steps.*checkpoint in $inj" "$TMP/again.out" || fail "the done line: $(cat "$TMP/again.out")"
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$inj" --resume --max-steps 120 >"$TMP/again2.out" 2>&1 ||
  fail "the second resume to 120: $(cat "$TMP/again2.out")"
grep -q "^nothing to train: the checkpoint has 120 steps" "$TMP/again2.out" || fail "work redone: $(cat "$TMP/again2.out")"
pass "a resumed run checkpoints at its end: resumed again, it has nothing to redo"
