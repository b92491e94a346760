# Usage errors: exit code 2 and one line naming the flag and what was expected.
# Errors met in files or while running exit 1.
source "$(dirname "$0")/lib.sh"

expect_exit 2 "unknown flag '--bogus'" -- "$PTRAIN" train --bogus
expect_exit 2 "--epochs: missing value" -- "$PTRAIN" train --epochs
expect_exit 2 "--epochs: expected an integer in \[1, 100000\], got '0'" -- "$PTRAIN" train --epochs 0
expect_exit 2 "--exit-after-checkpoint needs --checkpoint-every N or --checkpoint-interval SECONDS" -- "$PTRAIN" train --exit-after-checkpoint
expect_exit 2 "--batch-size: expected an integer .*got 'abc'" -- "$PTRAIN" train --batch-size abc
expect_exit 2 "--lr: expected a number .*got '-1'" -- "$PTRAIN" train --lr -1
expect_exit 2 "--lr: expected a number in \[0, 1000\], got '0x1p-3'" -- "$PTRAIN" train --lr 0x1p-3
# In range as typed, but 0 or a denormal once kept as a float: an lr of 0,
# a --target-accuracy of none.
# FLT_MIN as the message writes it is itself taken
"$PTRAIN" train --model fmnist-mlp --lr 1.17549435e-38 --max-steps 1 --quiet --checkpoint-dir "$TMP/lr-min" >/dev/null ||
  fail "--lr at FLT_MIN, as the message writes it, refused"
expect_exit 2 "--lr: expected 0 or a number in \[1.17549435e-38, 1000\], got '1e-50' \(0 as a float\)" -- \
  "$PTRAIN" train --lr 1e-50
expect_exit 2 "--lr: expected 0 or a number in \[1.17549435e-38, 1000\], got '1e-40' \(a denormal as a float\)" -- \
  "$PTRAIN" train --lr 1e-40
expect_exit 2 "--target-accuracy: expected 0 or a number in \[1.17549435e-38, 1\], got '1e-50'" -- \
  "$PTRAIN" train --target-accuracy 1e-50
expect_exit 2 "--target-accuracy: expected 0 or a number in \[1.17549435e-38, 1\], got '1e-50'" -- \
  "$PTRAIN" scale --target-accuracy 1e-50
for f in --gamma --weight-decay --momentum; do
  expect_exit 2 "$f: expected 0 or a number in \[1.17549435e-38, .*\], got '1e-45' \(a denormal as a float\)" -- \
    "$PTRAIN" train $f 1e-45
done
expect_exit 2 "--seed: expected an integer in \[0, 18446744073709551615\], got '-1'" -- "$PTRAIN" train --seed -1
expect_exit 2 "--seed: expected an integer in \[0, 18446744073709551615\], got '18446744073709551616'" -- \
  "$PTRAIN" train --seed 18446744073709551616
expect_exit 2 "--optimizer: expected one of sgd\|adam\|adamw\|adadelta, got 'rmsprop'" -- "$PTRAIN" train --optimizer rmsprop
expect_exit 2 "--dataset: expected one of" -- "$PTRAIN" train --dataset imagenet
expect_exit 2 "--nesterov takes no value" -- "$PTRAIN" train --nesterov=1
expect_exit 2 "unexpected argument 'extra'" -- "$PTRAIN" train extra
expect_exit 2 "--model and --model-file" -- "$PTRAIN" train --model mnist-cnn --model-file x.txt
expect_exit 2 "unknown command 'trian': did you mean train\?" -- "$PTRAIN" trian
expect_exit 2 "unknown command 'xyz' \(expected train, eval" -- "$PTRAIN" xyz
expect_exit 2 "unknown flag '--epoch': did you mean --epochs\?" -- "$PTRAIN" train --epoch 2
expect_exit 2 "unknown flag '--chekpoint': did you mean --checkpoint\?" -- "$PTRAIN" eval --chekpoint x
expect_exit 2 "unknown flag '--bogus' \(see" -- "$PTRAIN" train --bogus
expect_exit 2 "--checkpoint FILE is required" -- "$PTRAIN" eval
expect_exit 2 "unknown dataset 'svhn'" -- "$PTRAIN" data fetch svhn
# Flag values and combinations the library refuses are usage errors too,
# and said before any data is read (no dataset is needed for these).
expect_exit 2 "unknown model 'resnet'" -- "$PTRAIN" train --model resnet --data-dir "$TMP/nowhere"
expect_exit 2 "--device: 'gpu' is not a device" -- "$PTRAIN" train --device gpu --data-dir "$TMP/nowhere"
expect_exit 2 "--split nosuch: fmnist-mlp has no layer of that name" -- \
  "$PTRAIN" train --model fmnist-mlp --parallel pipeline --split nosuch --data-dir "$TMP/nowhere"
expect_exit 2 "--workers and --devices need --parallel dp" -- "$PTRAIN" train --workers 3 --data-dir "$TMP/nowhere"
expect_exit 2 "--momentum and --nesterov apply to --optimizer sgd, not adam" -- \
  "$PTRAIN" train --optimizer adam --momentum 0.9 --data-dir "$TMP/nowhere"
expect_exit 2 "momentum and --nesterov apply to --optimizer sgd" -- "$PTRAIN" train --optimizer adam --nesterov
# A spec's defaults follow the same rule; --gamma needs the step scheduler,
# --sync-bn workers to pool over.
printf 'input 1 28 28\nflatten\nlinear fc out=10\ndefaults optimizer=adam momentum=0.9\n' >"$TMP/adam-momentum.txt"
expect_exit 1 "adam-momentum.txt:4: defaults: momentum=0.9 applies to optimizer sgd, not adam: drop momentum" -- \
  "$PTRAIN" train --model-file "$TMP/adam-momentum.txt" --data-dir "$TMP/nowhere"
expect_exit 2 "--gamma applies to --scheduler step, not cosine" -- \
  "$PTRAIN" train --model fmnist-mlp --scheduler cosine --gamma 0.5 --data-dir "$TMP/nowhere"
expect_exit 2 "--sync-bn pools batch-norm statistics over --parallel dp or ddp workers; this run has one" -- \
  "$PTRAIN" train --sync-bn --data-dir "$TMP/nowhere"
# The trace would replace, at the end, the metrics appended to the same file.
: >"$TMP/same.json"
ln -sf same.json "$TMP/same-link.json"
expect_exit 2 "--metrics and --trace name the same file, $TMP/same.json: the trace, written at the end, would replace the metrics" -- \
  "$PTRAIN" train --metrics "$TMP/same.json" --trace "$TMP/same.json" --data-dir "$TMP/nowhere"
expect_exit 2 "--metrics and --trace name the same file" -- \
  "$PTRAIN" train --metrics "$TMP/same-link.json" --trace "$TMP/same.json" --data-dir "$TMP/nowhere"
# Settings for several workers, in a run of one: a forgotten --parallel.
expect_exit 2 "--bucket-mb is for runs with several workers \(--parallel dp, ddp, model or pipeline\); this run has one" -- \
  "$PTRAIN" train --bucket-mb 4 --data-dir "$TMP/nowhere"
expect_exit 2 "--timeout is for runs with several workers" -- \
  "$PTRAIN" train --parallel none --timeout 10 --data-dir "$TMP/nowhere"
expect_exit 2 "5 stages but fmnist-mlp has only 3 layers besides flatten" -- \
  "$PTRAIN" train --model fmnist-mlp --parallel model --devices cpu:0,cpu:1,cpu:2,cpu:3,cpu:4 --data-dir "$TMP/nowhere"
make_cifar "$TMP/cifar" 3
expect_exit 2 "model mnist-cnn takes 1x28x28 input but the cifar10 images are 3x32x32 \(--dataset names a dataset the model cannot take\)" -- \
  "$PTRAIN" train --model mnist-cnn --dataset cifar10 --data-dir "$TMP/cifar"
# IDX files of another size than the dataset's own: the files are wrong, not a flag (1)
mkdir -p "$TMP/idx14"
python3 - "$TMP/idx14" <<'PY'
import struct, sys
d = sys.argv[1]
for split, n in (("train", 20), ("t10k", 10)):
    open("%s/%s-images-idx3-ubyte" % (d, split), "wb").write(struct.pack(">IIII", 0x803, n, 14, 14) + bytes(n * 196))
    open("%s/%s-labels-idx1-ubyte" % (d, split), "wb").write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
expect_exit 1 "the fashion-mnist training images in $TMP/idx14 are 1x14x14, where fashion-mnist's are 1x28x28: those files are not fashion-mnist's" -- \
  "$PTRAIN" train --model mnist-cnn --data-dir "$TMP/idx14" --max-steps 1
# The test split alone of another size: the same, naming it.
mkdir -p "$TMP/idx-test14"
python3 - "$TMP/idx-test14" <<'PY'
import struct, sys
d, n = sys.argv[1], 20
open(d + "/train-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(n * 784))
open(d + "/train-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
cp "$TMP/idx14/t10k-"* "$TMP/idx-test14/"
expect_exit 1 "the fashion-mnist test images in $TMP/idx-test14 are 1x14x14, where fashion-mnist's are 1x28x28" -- \
  "$PTRAIN" train --model mnist-cnn --data-dir "$TMP/idx-test14" --max-steps 1
expect_exit 2 "unknown model 'resnet'" -- "$PTRAIN" eval --checkpoint "$TMP/none" --model resnet
# a missing --model-file is said as such, whatever its name
expect_exit 1 "cannot open model file $TMP/none.txt: No such file" -- "$PTRAIN" eval --checkpoint "$TMP/none" --model-file "$TMP/none.txt"
expect_exit 1 "cannot open model file nosuchspec: No such file" -- "$PTRAIN" predict --checkpoint "$TMP/none" --model-file nosuchspec "$TMP/none.idx"
expect_exit 2 "--device: 'gpu' is not a device" -- "$PTRAIN" eval --checkpoint "$TMP/none" --model fmnist-mlp --device gpu
expect_exit 2 "--index a: expected image numbers" -- "$PTRAIN" predict --checkpoint "$TMP/none" --index a "$TMP/none.idx"
expect_exit 2 "--index : expected|--index: expected" -- "$PTRAIN" predict --checkpoint "$TMP/none" --index '' "$TMP/none.idx"
expect_exit 2 "--output x.gif: expected a file name ending in .png or .svg" -- "$PTRAIN" plot --output x.gif "$TMP/none.jsonl"

# Every subcommand has --help, exiting 0 with a usage line.
for cmd in train eval models info data bench; do
  "$PTRAIN" $cmd --help >"$TMP/help" || fail "ptrain $cmd --help exited non-zero"
  grep -q "^usage: ptrain $cmd" "$TMP/help" || fail "ptrain $cmd --help: no usage line"
done
"$PTRAIN" --help | grep "^usage: ptrain COMMAND" >/dev/null || fail "ptrain --help"
"$PTRAIN" --version | grep -E "^ptrain [0-9]+\.[0-9]+\.[0-9]+$" >/dev/null || fail "ptrain --version"
pass "--help and --version"

# Runtime errors: exit 1 with a message naming the thing: a missing or
# malformed file stays one, whatever flag named it.
expect_exit 1 "train-images-idx3-ubyte.*ptrain data fetch" -- "$PTRAIN" train --data-dir "$TMP/nowhere"
expect_exit 1 "$TMP/none" -- "$PTRAIN" eval --checkpoint "$TMP/none" --model fmnist-mlp
expect_exit 1 "cannot open.*none.jsonl" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/none.jsonl"
printf 'input 1 28 28\nconv2d c out=4 kernal=3\n' >"$TMP/bad.txt"
expect_exit 1 "bad.txt:2: unknown option 'kernal'" -- "$PTRAIN" train --model-file "$TMP/bad.txt"
expect_exit 1 "model file $TMP is a directory; expected a spec file" -- "$PTRAIN" train --model-file "$TMP"
# a shape error names the file and line too, with no 'name' line to go by
printf 'input 1 28 28\nconv2d c out=4 kernel=3\nlinear fc out=10\n' >"$TMP/flat.txt"
expect_exit 1 "flat.txt:3: linear fc: input 4x26x26: linear takes flat input" -- "$PTRAIN" train --model-file "$TMP/flat.txt"

# ptrain models lists every preset with its size.
"$PTRAIN" models >"$TMP/models"
for m in mnist-cnn tutorial-cnn fmnist-mlp cifar-convnet; do grep -q "^$m " "$TMP/models" || fail "models lacks $m"; done
grep -q "^mnist-cnn *1199882 " "$TMP/models" || fail "mnist-cnn parameter count"
"$PTRAIN" models fmnist-mlp | grep "^linear lin1 out=200" >/dev/null || fail "models NAME prints the spec"
# --show: the layers by the index and name --split takes, for a preset or a spec file
"$PTRAIN" models --show fmnist-mlp >"$TMP/show"
grep -q "^fmnist-mlp: input 1x28x28, 4 layers, 159010 parameters" "$TMP/show" || fail "models --show: $(cat "$TMP/show")"
grep -Eq "^ +1  linear lin1 +200 +157000 " "$TMP/show" || fail "models --show: lin1's line: $(cat "$TMP/show")"
grep -Eq "^ +3  linear lin2 +10 +2010 " "$TMP/show" || fail "models --show: lin2's line: $(cat "$TMP/show")"
"$PTRAIN" models --show mnist-cnn | grep -E "^ +0  conv2d conv1 +32x26x26 +320 " >/dev/null || fail "models --show mnist-cnn"
printf 'input 1 28 28\nflatten\nlinear fc out=10\n' >"$TMP/tiny.txt"
"$PTRAIN" models --show "$TMP/tiny.txt" | grep -E "^ +1  linear fc +10 +7850 " >/dev/null || fail "models --show FILE"
# a conv's 1x1 output is a map, not flat: shown as "4" it would read as
# what a linear layer takes without a flatten
printf 'input 1 28 28\nconv2d c out=4 kernel=28\nflatten\nlinear fc out=10\n' >"$TMP/one.txt"
"$PTRAIN" models --show "$TMP/one.txt" >"$TMP/show"
grep -Eq "^ +0  conv2d c +4x1x1 " "$TMP/show" || fail "models --show: a 1x1 map: $(cat "$TMP/show")"
grep -Eq "^ +1  flatten +4 " "$TMP/show" || fail "models --show: flatten's output: $(cat "$TMP/show")"
# conv2d and maxpool2d after a flatten: PyTorch would fail, so the spec does
printf 'input 1 28 28\nflatten\nconv2d c out=2 kernel=1\nflatten\nlinear a out=10\n' >"$TMP/convflat.txt"
expect_exit 1 "convflat.txt:3: conv2d c: input 784: conv2d needs an image input \(C x H x W\); the input here is flat \(784\)" -- \
  "$PTRAIN" train --model-file "$TMP/convflat.txt" --max-steps 2
expect_exit 2 "unknown model 'nosuch'" -- "$PTRAIN" models --show nosuch
expect_exit 2 "unknown model 'nosuch'" -- "$PTRAIN" models nosuch
expect_exit 2 "tiny.txt is a spec file, not a preset: 'ptrain models --show .*tiny.txt' lists its layers" -- \
  "$PTRAIN" models "$TMP/tiny.txt"
expect_exit 1 "flat.txt:3: linear fc" -- "$PTRAIN" models --show "$TMP/flat.txt"
# the --split error points there, and what it points to exists
expect_exit 2 "fmnist-mlp has no layer of that name; its named layers are lin1, lin2 \(or give an index from 0 to 3" -- \
  "$PTRAIN" train --model fmnist-mlp --parallel model --split nosuch
pass "models"

# Output that cannot be written (a full disk; /dev/full here) is an error,
# never exit 0 with what was asked for missing: a spec, a JSON line, a script.
for args in "models fmnist-mlp" "--version" "models" "bench --sgemm --size 64 --threads 1 --json" \
  "jobscript slurm -- --epochs 1" "models --help"; do
  rc=0
  # shellcheck disable=SC2086 # the words of the command
  "$PTRAIN" $args >/dev/full 2>"$TMP/full.err" || rc=$?
  [[ $rc == 1 ]] && grep -q "error: writing .*standard output" "$TMP/full.err" ||
    fail "ptrain $args >/dev/full: exit $rc, $(cat "$TMP/full.err")"
done
pass "a full standard output is exit 1, said"
# A --metrics file on a full disk ends the run, after the epoch's
# checkpoint, whose directory has room; --resume goes on from it.
if [[ -w /dev/full && -f $FMNIST/train-images-idx3-ubyte.gz ]]; then
  expect_exit 1 "/dev/full: writing metrics failed: No space left on device; the epoch's checkpoint is written" -- \
    "$PTRAIN" train --model fmnist-mlp --threads 1 --epochs 2 --metrics /dev/full --quiet --save-model \
    --checkpoint-dir "$TMP/full-metrics"
  [[ -d $TMP/full-metrics/step-000000000600 ]] || fail "no checkpoint of epoch 1: $(ls -A "$TMP/full-metrics")"
  # the checkpoint is of the epoch before its evaluation: its line comes again
  "$PTRAIN" train --model fmnist-mlp --threads 1 --epochs 2 --metrics "$TMP/full-metrics.jsonl" --quiet --save-model \
    --checkpoint-dir "$TMP/full-metrics" --resume >/dev/null || fail "resuming after a full --metrics"
  [[ $(python3 -c 'import json, sys; print([e["epoch"] for e in map(json.loads, open(sys.argv[1])) if e["event"] == "epoch"])' \
    "$TMP/full-metrics.jsonl") == "[1, 2]" ]] || fail "the resumed run's epoch lines: $(cat "$TMP/full-metrics.jsonl")"
  pass "--metrics on a full disk: the epoch's checkpoint written first, its line written on resuming"
fi

# ptrain bench measures what it says: a JSON line with consistent fields.
if [[ -f $FMNIST/train-images-idx3-ubyte.gz ]]; then
  "$PTRAIN" bench --model fmnist-mlp --steps 5 --warmup 1 --threads 1 --json >"$TMP/bench.json" || fail "bench"
  python3 - "$TMP/bench.json" <<'PY' || fail "bench JSON"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["framework"] == "ptrain" and r["batch"] == 100 and r["threads"] == 1 and r["steps"] == 5, r
assert r["images_per_s"] > 0 and abs(r["flops_per_image"] - 3 * 2 * (784 * 200 + 200 * 10)) < 1, r
assert abs(r["gflops"] - r["images_per_s"] * r["flops_per_image"] / 1e9) < 0.01 * r["gflops"] + 0.01, r
PY
  # --min-seconds: whole blocks of --steps until the time is up, all counted
  "$PTRAIN" bench --model fmnist-mlp --steps 3 --warmup 1 --threads 1 --min-seconds 0.2 --json \
    >"$TMP/bench-min.json" || fail "bench --min-seconds"
  python3 - "$TMP/bench-min.json" <<'PY' || fail "bench --min-seconds JSON"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["steps"] % 3 == 0 and r["steps"] > 3, r
# the timed steps took at least 0.2 s: from images/s, whose two decimals
# are exact to 1e-8, not step_ms, whose three can round a 0.25 ms step down
# by 0.2% (786 steps of 0.2544 ms printed as 0.254: 199.6 ms)
assert r["steps"] * r["batch"] / r["images_per_s"] >= 0.2 * 0.999, r
assert abs(r["images_per_s"] * r["step_ms"] / 1000 - r["batch"]) < 0.01 * r["batch"], r
PY
  "$PTRAIN" bench --sgemm --size 256 --threads 1 --json | grep '"sgemm_gflops":' >/dev/null || fail "bench --sgemm"
  # a spec file's path with a quote and a backslash still makes one JSON object
  odd="$TMP/we\"ird\\name.txt"
  printf 'input 1 28 28\nflatten\nlinear fc out=10\n' >"$odd"
  "$PTRAIN" bench --model-file "$odd" --steps 2 --warmup 1 --threads 1 --json >"$TMP/odd.json" || fail "bench --model-file $odd"
  python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); assert o["model"] == sys.argv[2], o' "$TMP/odd.json" "$odd" ||
    fail "bench --json with an odd path: $(cat "$TMP/odd.json")"
  # the SGEMM rate reads no model, and the other mode's flags are slips, not settings
  expect_exit 2 "bench: --model-file is for the training benchmark; --sgemm measures SGEMM alone" -- \
    "$PTRAIN" bench --sgemm --size 64 --threads 1 --model-file "$TMP/nowhere.txt"
  expect_exit 2 "bench: --steps is for the training benchmark" -- "$PTRAIN" bench --sgemm --size 64 --steps 3
  expect_exit 2 "bench: --size is the SGEMM's: give --sgemm too" -- "$PTRAIN" bench --size 64 --steps 1
  expect_exit 2 "bench: --sgemm measures this CPU's SGEMM; not with --device cuda" -- \
    "$PTRAIN" bench --sgemm --size 64 --device cuda
  # A model that does not fit the data is train's usage error here too, not
  # a read past the batch: other images, or labels past the outputs.
  printf 'input 3 32 32\nflatten\nlinear fc out=10\n' >"$TMP/cifar-shaped.txt"
  printf 'input 1 28 28\nflatten\nlinear fc out=5\n' >"$TMP/five.txt"
  expect_exit 2 "bench: model custom takes 3x32x32 input but the training images of fashion-mnist are 1x28x28 \(use --dataset\)" \
    -- "$PTRAIN" bench --model-file "$TMP/cifar-shaped.txt" --steps 1
  expect_exit 2 "bench: model custom has 5 outputs, but the training split of fashion-mnist has labels up to 9" \
    -- "$PTRAIN" bench --model-file "$TMP/five.txt" --steps 1
  expect_exit 2 "train: model custom has 5 outputs, but the training split of fashion-mnist has labels up to 9" \
    -- "$PTRAIN" train --model-file "$TMP/five.txt" --max-steps 1 --checkpoint-dir "$TMP/five-ck"
  # A batch the split cannot fill once --drop-last drops the short one:
  # a flag that does not fit the data, as above, per worker under dp.
  expect_exit 2 "train: no training batch: 60000 samples per worker with --drop-last and batch 70000; give a smaller --batch-size" \
    -- "$PTRAIN" train --model fmnist-mlp --drop-last --batch-size 70000 --checkpoint-dir "$TMP/drop-ck"
  expect_exit 2 "train: no training batch: 20000 samples per worker with --drop-last and batch 20001" \
    -- "$PTRAIN" train --model fmnist-mlp --parallel dp --workers 3 --drop-last --batch-size 20001 \
    --checkpoint-dir "$TMP/drop-ck"
  # Fewer batches than bench cycles through (9 of 7000), and one batch
  # larger than the split, which it then holds whole.
  for b in 7000 70000; do
    "$PTRAIN" bench --model fmnist-mlp --batch-size $b --steps 2 --warmup 0 --threads 1 --json >"$TMP/big.json" ||
      fail "bench --batch-size $b"
    # and each timed step trains that many images: no short last batch among them
    python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); b = int(sys.argv[2]); assert o["batch"] == b, o
assert abs(o["images_per_s"] * o["step_ms"] / 1000 - b) < 0.01 * b, o' \
      "$TMP/big.json" "$((b < 60000 ? b : 60000))" || fail "bench --batch-size $b: $(cat "$TMP/big.json")"
  done
  # --device and --precision, as train takes them; a GPU that is not there is an error naming it
  expect_exit 2 "bench: --device: 'gpu' is not a device" -- "$PTRAIN" bench --device gpu --steps 1
  expect_exit 2 "bench: --precision tf32 is for GPUs" -- "$PTRAIN" bench --precision tf32 --steps 1
  "$PTRAIN" info >"$TMP/info.txt" 2>&1
  if grep -q "^  cuda: none" "$TMP/info.txt"; then
    expect_exit 1 "bench: error: benchmarking on cuda:0: " -- "$PTRAIN" bench --model fmnist-mlp --device cuda --steps 1
  fi
  pass "bench"
fi
expect_exit 2 "--steps: expected an integer" -- "$PTRAIN" bench --steps 0
expect_exit 2 "unknown model 'nosuch'" -- "$PTRAIN" bench --model nosuch
expect_exit 2 "--mirror /srv/mnist: expected a URL \(https://..., or file:///srv/mnist for that directory\)" -- \
  "$PTRAIN" data fetch mnist --mirror /srv/mnist --dir "$TMP/fetched"
for m in file://mirror ftp://example.org/mnist; do
  expect_exit 2 "--mirror $m: expected https://, http:// or file:// and a directory's absolute path" -- \
    "$PTRAIN" data fetch mnist --mirror "$m" --dir "$TMP/fetched"
done
[[ ! -e $TMP/fetched ]] || fail "a refused --mirror made $TMP/fetched"
# A fetch stopped by SIGTERM mid-download (a mirror that sends 3 MB, then
# stalls) removes its part file and exits 128 + 15.
mkdir -p "$TMP/mirror"
mkfifo "$TMP/mirror/train-images-idx3-ubyte.gz"
( (head -c 3000000 /dev/zero; sleep 30) >"$TMP/mirror/train-images-idx3-ubyte.gz" & echo $! >"$TMP/feeder.pid" )
# Started as nohup starts it, SIGHUP ignored: that stays so.
bash -c 'trap "" HUP; exec "$0" "$@"' "$PTRAIN" data fetch fashion-mnist --mirror "file://$TMP/mirror" \
  --dir "$TMP/stopped" 2>"$TMP/stopped.err" &
fetcher=$!
for _ in $(seq 1 300); do
  [[ -s $TMP/stopped/train-images-idx3-ubyte.gz.part ]] && break
  sleep 0.1
done
[[ -s $TMP/stopped/train-images-idx3-ubyte.gz.part ]] || fail "the fetch wrote no part file: $(cat "$TMP/stopped.err")"
kill -HUP "$fetcher"
sleep 1.5
kill -0 "$fetcher" 2>/dev/null || fail "a fetch that ignored SIGHUP (nohup) stopped on it: $(cat "$TMP/stopped.err")"
kill -TERM "$fetcher"
rc=0
wait "$fetcher" || rc=$?
pkill -P "$(cat "$TMP/feeder.pid")" 2>/dev/null || true
[[ $rc == 143 ]] || fail "a fetch stopped by SIGTERM exited $rc: $(cat "$TMP/stopped.err")"
[[ ! -e $TMP/stopped/train-images-idx3-ubyte.gz.part ]] || fail "a fetch stopped by SIGTERM left its part file"
grep -q "train-images-idx3-ubyte.gz: stopped by Terminated; the partial download .* is removed" "$TMP/stopped.err" ||
  fail "a fetch stopped by SIGTERM said: $(cat "$TMP/stopped.err")"
pass "data fetch stopped by SIGTERM: exit 143, no part file left; an ignored SIGHUP stays ignored"
[[ ! -e $TMP/fetched ]] || fail "a refused fetch created its directory"
expect_exit 2 "give either --model or --model-file, not both" -- "$PTRAIN" bench --model mnist-cnn --model-file "$TMP/tiny.txt"
expect_exit 2 "--min-seconds: expected a number in .0, 86400., got '-1'" -- "$PTRAIN" bench --min-seconds -1
