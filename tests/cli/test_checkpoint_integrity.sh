# Damaged checkpoints are never used. A generation whose bytes changed after
# its save (its CRC-32 no longer matches: the weights, or a metadata value)
# is skipped by --resume with the reason, as a cut one is, and the run still
# ends bit for bit where an uninterrupted one does; eval and predict refuse
# such a file, and weights holding NaN, naming the file. Where a checkpoint
# cannot be read at all (missing, cut, a directory without weights), eval
# and predict say why, rather than ask for the model.
source "$(dirname "$0")/lib.sh"
need_fmnist

small_dropout_spec "$TMP/small.txt"
# corrupt FILE: 4 bytes 1000 from the end made a NaN, as a bad disk sector or copy would
corrupt() { printf '\xff\xff\xff\x7f' | dd of="$1" bs=1 seek=$(($(stat -c%s "$1") - 1000)) conv=notrunc status=none; }
T10K=$FMNIST/t10k-images-idx3-ubyte.gz
g600=step-000000000600 g700=step-000000000700

train_small straight --save-model
train_small base --checkpoint-every 100 --keep-checkpoints 3 --max-steps 700
for d in weights meta; do cp -a "$TMP/base" "$TMP/$d"; done # -a: DIR/model.safetensors stays a link

# The newest generation's weights damaged (DIR/model.safetensors is the same file).
corrupt "$TMP/weights/$g700/model.safetensors"
expect_exit 1 "$TMP/weights/model.safetensors: CRC-32 mismatch: the file's bytes give [0-9a-f]{8}, its metadata 'ptrain.crc32' records [0-9a-f]{8}" -- \
  "$PTRAIN" eval --checkpoint "$TMP/weights"
expect_exit 1 "$TMP/weights/$g700/model.safetensors: CRC-32 mismatch" -- \
  "$PTRAIN" eval --model-file "$TMP/small.txt" --checkpoint "$TMP/weights/$g700/model.safetensors"
expect_exit 1 "$TMP/weights/model.safetensors: CRC-32 mismatch" -- \
  "$PTRAIN" predict --checkpoint "$TMP/weights" "$T10K" --index 0
grep -q "%" "$TMP/out" && fail "predict printed a prediction from damaged weights: $(cat "$TMP/out")"
train_small weights --resume --save-model
grep -q "resuming from $TMP/weights/$g600 .*skipped $TMP/weights/$g700: $TMP/weights/$g700/model.safetensors: CRC-32 mismatch" \
  "$TMP/weights.out" || fail "resume did not skip the damaged step 700: $(cat "$TMP/weights.out")"
cmp -s "$TMP/straight/model.safetensors" "$TMP/weights/model.safetensors" || fail "resumed from 600: differs from straight"
pass "damaged weights: eval and predict refuse them naming the file; --resume skips them and ends as the straight run"

# A metadata value of the newest state changed (the step): the header is covered too.
python3 - "$TMP/meta/$g700/state.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
assert b.count(b'"step":"700"') == 1, "premise: the state records step 700"
open(p, "wb").write(b.replace(b'"step":"700"', b'"step":"800"'))
PY
train_small meta --resume --save-model
grep -q "resuming from $TMP/meta/$g600 .*skipped $TMP/meta/$g700: $TMP/meta/$g700/state.safetensors: CRC-32 mismatch" \
  "$TMP/meta.out" || fail "resume did not skip the altered state: $(cat "$TMP/meta.out")"
cmp -s "$TMP/straight/model.safetensors" "$TMP/meta/model.safetensors" || fail "after an altered state: differs"
pass "an altered metadata value: the generation skipped, the run ends as the straight one"

# Weights holding NaN, in a file without a CRC (as PyTorch writes them).
python3 - "$TMP/base/$g600/model.safetensors" "$TMP/nan.safetensors" "$TMP/plain.safetensors" <<'PY'
import json, struct, sys
src, nan_out, plain_out = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
header.pop("__metadata__")
data = bytearray(b[8 + n:])
def write(path, data):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))
write(plain_out, data)
begin = header["fc.weight"]["data_offsets"][0]
data[begin + 4 * 5:begin + 4 * 6] = struct.pack("<f", float("nan"))
write(nan_out, data)
PY
expect_exit 1 "$TMP/nan.safetensors: tensor 'fc.weight' holds NaN at element 5 of 5760: these weights are unusable" -- \
  "$PTRAIN" eval --model-file "$TMP/small.txt" --checkpoint "$TMP/nan.safetensors"
expect_exit 1 "$TMP/nan.safetensors: tensor 'fc.weight' holds NaN" -- \
  "$PTRAIN" predict --model-file "$TMP/small.txt" --checkpoint "$TMP/nan.safetensors" "$T10K" --index 0
expect_exit 1 "$TMP/nan.safetensors: tensor 'fc.weight' holds NaN" -- \
  "$PTRAIN" train --model-file "$TMP/small.txt" --init-from "$TMP/nan.safetensors" --max-steps 1
"$PTRAIN" eval --model-file "$TMP/small.txt" --checkpoint "$TMP/plain.safetensors" >"$TMP/plain.out" 2>&1 ||
  fail "the same file without the NaN: $(cat "$TMP/plain.out")"
pass "NaN in weights refused by eval, predict and --init-from, naming the file and the tensor"

# Names as PyTorch's load_state_dict says them: a state_dict saved from
# DataParallel or DDP ("module." before every name), and a renamed layer,
# whose missing and unexpected names are said together.
python3 - "$TMP/plain.safetensors" "$TMP/module.safetensors" "$TMP/renamed.safetensors" <<'PY'
import json, struct, sys
src, module_out, renamed_out = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header, data = json.loads(b[8:8 + n]), b[8 + n:]
def write(path, h):
    t = json.dumps(h, separators=(",", ":")).encode()
    t += b" " * (-len(t) % 8)
    open(path, "wb").write(struct.pack("<Q", len(t)) + t + data)
write(module_out, {"module." + k: v for k, v in header.items()})
write(renamed_out, {("out.weight" if k == "fc.weight" else k): v for k, v in header.items()})
PY
expect_exit 1 "module.safetensors: its tensors are named 'module.c1.weight' and so on, where model small-dropout has 'c1.weight': a state_dict saved from DataParallel or DistributedDataParallel" -- \
  "$PTRAIN" eval --model-file "$TMP/small.txt" --checkpoint "$TMP/module.safetensors"
expect_exit 1 "renamed.safetensors: has no tensor 'fc.weight', and has 'out.weight', which model small-dropout does not" -- \
  "$PTRAIN" train --model-file "$TMP/small.txt" --init-from "$TMP/renamed.safetensors" --max-steps 1
pass "a DataParallel state_dict, and a renamed layer, said as such"

# A batch norm's running variance below 0 (its square root NaN) is refused:
# a ReLU after it once hid the NaN behind a finite, wrong evaluation.
printf 'input 1 28 28\nconv2d c out=4 kernel=3\nbatchnorm2d bn\nrelu\nflatten\nlinear fc out=10\n' >"$TMP/bn.txt"
"$PTRAIN" train --model-file "$TMP/bn.txt" --max-steps 2 --batch-size 16 --threads 1 --quiet \
  --save-model --checkpoint-dir "$TMP/bn" --data-dir "$FMNIST" >/dev/null || fail "a batch-norm model, 2 steps"
python3 - "$TMP/bn/model.safetensors" "$TMP/negvar.safetensors" <<'PY'
import json, struct, sys
src, out = sys.argv[1:]
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
header.pop("__metadata__")
begin = 8 + n + header["bn.running_var"]["data_offsets"][0]
b[begin:begin + 4] = struct.pack("<f", -1.0)
t = json.dumps(header, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(out, "wb").write(struct.pack("<Q", len(t)) + t + bytes(b[8 + n:]))
PY
expect_exit 1 "negvar.safetensors: tensor 'bn.running_var' holds -1 at element 0 of 4: a variance is never below 0" -- \
  "$PTRAIN" eval --model-file "$TMP/bn.txt" --checkpoint "$TMP/negvar.safetensors"
pass "a negative running variance refused, naming the tensor"

# The real reason a checkpoint cannot be read comes first.
cp "$TMP/base/$g600/model.safetensors" "$TMP/cut.safetensors"
truncate -s 5000 "$TMP/cut.safetensors"
mkdir -p "$TMP/emptydir" "$TMP/loopdir"
ln -s model.safetensors "$TMP/loopdir/model.safetensors"
for cmd in eval predict; do
  args=()
  [[ $cmd == predict ]] && args=("$T10K" --index 0)
  expect_exit 1 "$TMP/missing.safetensors: cannot open: No such file" -- \
    "$PTRAIN" $cmd --checkpoint "$TMP/missing.safetensors" "${args[@]}"
  expect_exit 1 "$TMP/cut.safetensors: .*truncated file" -- "$PTRAIN" $cmd --checkpoint "$TMP/cut.safetensors" "${args[@]}"
  expect_exit 1 "$TMP/emptydir: a directory without model.safetensors" -- \
    "$PTRAIN" $cmd --checkpoint "$TMP/emptydir" "${args[@]}"
  ! grep -q "records no model" "$TMP/err" || fail "$cmd: the model asked for before the real cause: $(cat "$TMP/err")"
  expect_exit 1 "$TMP/loopdir: cannot look into it for model.safetensors: Too many levels of symbolic links" -- \
    "$PTRAIN" $cmd --checkpoint "$TMP/loopdir" "${args[@]}"
  expect_exit 1 "$TMP/plain.safetensors records no model .*weights saved by another program.*--model or --model-file" -- \
    "$PTRAIN" $cmd --checkpoint "$TMP/plain.safetensors" "${args[@]}"
done
pass "eval and predict: a missing, cut or empty checkpoint says so; a readable one without a model asks for it"

# A checkpoint directory whose model.safetensors is gone: the newest
# generation's weights, the same ones, are evaluated.
"$PTRAIN" train --model fmnist-mlp --threads 1 --batch-size 10 --max-steps 30 --checkpoint-every 10 --save-model \
  --quiet --checkpoint-dir "$TMP/nolatest" >/dev/null || fail "the run for nolatest"
"$PTRAIN" eval --checkpoint "$TMP/nolatest" >"$TMP/with.out" 2>&1 || fail "eval of nolatest: $(cat "$TMP/with.out")"
rm "$TMP/nolatest/model.safetensors"
"$PTRAIN" eval --checkpoint "$TMP/nolatest" >"$TMP/without.out" 2>&1 ||
  fail "eval without DIR/model.safetensors: $(cat "$TMP/without.out")"
cmp -s "$TMP/with.out" "$TMP/without.out" || fail "the newest generation evaluated otherwise: $(cat "$TMP/without.out")"
pass "eval of a checkpoint directory without model.safetensors: its newest generation"
