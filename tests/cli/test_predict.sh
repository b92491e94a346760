# ptrain predict: a trained model's classes for PNG images and for images
# of IDX and CIFAR-10 files, as a user runs it; and its errors.
source "$(dirname "$0")/lib.sh"
need_fmnist
"$PTRAIN" train --model fmnist-mlp --epochs 1 --save-model --checkpoint-dir "$TMP/ck" --quiet >"$TMP/train.out"
T10K=$FMNIST/t10k-images-idx3-ubyte.gz

# Ten test images, each with its label from the labels file beside it.
"$PTRAIN" predict --checkpoint "$TMP/ck" "$T10K" --index 0-9 >"$TMP/idx.out"
[[ $(wc -l <"$TMP/idx.out") == 10 ]] || fail "--index 0-9 printed $(wc -l <"$TMP/idx.out") lines, expected 10"
right=$(python3 - "$TMP/idx.out" <<'PY'
import re, sys
n = 0
for line in open(sys.argv[1]):
    m = re.match(r".*\[\d+\]: ([^,]+?) [0-9.]+%.*\(label: (.+)\)$", line.strip())
    assert m, "unexpected line: " + line
    n += m.group(1) == m.group(2)
print(n)
PY
)
[[ $right -ge 6 ]] || fail "only $right of 10 test images classified as labelled: $(cat "$TMP/idx.out")"
pass "IDX --index 0-9: 10 lines, $right right"
# An index past what a long holds is said as typed, not as strtol's LONG_MAX.
expect_exit 2 "--index 99999999999999999999: an index past 2147483647" -- \
  "$PTRAIN" predict --checkpoint "$TMP/ck" "$T10K" --index 99999999999999999999
grep -q "^$T10K\[0\]: Ankle boot" "$TMP/idx.out" || fail "image 0 (an ankle boot) not called one: $(head -1 "$TMP/idx.out")"

# Weights trained on another dataset than their model's default (here
# Fashion-MNIST's files posing as MNIST) record it: eval takes that test
# split, and predict that dataset's class names, also with --model given.
mkdir -p "$TMP/as-mnist"
ln -s "$FMNIST"/*.gz "$TMP/as-mnist/"
"$PTRAIN" train --model fmnist-mlp --dataset mnist --data-dir "$TMP/as-mnist" --max-steps 5 --save-model --quiet \
  --checkpoint-dir "$TMP/ck-mnist" >/dev/null || fail "training fmnist-mlp on MNIST's files"
for model in "" "--model fmnist-mlp"; do
  "$PTRAIN" eval --checkpoint "$TMP/ck-mnist" $model --data-dir "$TMP/as-mnist" >"$TMP/eval-mnist.out" ||
    fail "eval of weights trained on MNIST"
  grep -q "^fmnist-mlp on mnist test:" "$TMP/eval-mnist.out" || fail "eval ${model:-without --model} did not take MNIST's test split: $(cat "$TMP/eval-mnist.out")"
  "$PTRAIN" predict --checkpoint "$TMP/ck-mnist" $model "$TMP/as-mnist/t10k-images-idx3-ubyte.gz" --index 0 >"$TMP/pred-mnist.out"
  grep -q "(label: 9)$" "$TMP/pred-mnist.out" || fail "predict ${model:-without --model} did not name MNIST's classes: $(cat "$TMP/pred-mnist.out")"
done
pass "weights trained on MNIST: eval takes its test split and predict its class names"

# The labels beside, as the training reader finds them: the other of plain
# and gzipped, under a directory whose name has images-idx3 in it; labels
# that are there but do not fit are said, not dropped.
mkdir -p "$TMP/my-images-idx3"
cp "$T10K" "$TMP/my-images-idx3/"
gunzip -c "$FMNIST/t10k-labels-idx1-ubyte.gz" >"$TMP/my-images-idx3/t10k-labels-idx1-ubyte"
"$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/my-images-idx3/t10k-images-idx3-ubyte.gz" --index 0 >"$TMP/mix.out" 2>&1 ||
  fail "labels beside, plain: $(cat "$TMP/mix.out")"
grep -q "(label: Ankle boot)$" "$TMP/mix.out" || fail "a plain labels file beside gzipped images not read: $(cat "$TMP/mix.out")"
python3 - "$TMP/my-images-idx3/t10k-labels-idx1-ubyte" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[8 + 3] = 10  # image 3's label: a class the model has not
open(p, "wb").write(bytes(b))
PY
"$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/my-images-idx3/t10k-images-idx3-ubyte.gz" --index 0 >"$TMP/bad-label.out" 2>&1 ||
  fail "a bad labels file beside: $(cat "$TMP/bad-label.out")"
grep -q "warning: labels not shown: .*t10k-labels-idx1-ubyte: label at index 3 is 10, expected < 10" "$TMP/bad-label.out" &&
  ! grep -q "(label:" "$TMP/bad-label.out" || fail "a label out of range: $(cat "$TMP/bad-label.out")"
pass "labels beside: plain beside gzipped, under a directory named images-idx3, and a bad label said"

# PNG files: image 0 as it is (no conversion), and doubled in size in RGB,
# which averages back to the same pixels exactly.
python3 - "$T10K" "$TMP" <<'PY'
import gzip, struct, sys, zlib
raw = gzip.open(sys.argv[1]).read()
img = raw[16:16 + 784]
def png(path, w, h, colour, rows):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    data = b"".join(b"\0" + r for r in rows)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data)) + chunk(b"IEND", b""))
png(sys.argv[2] + "/boot.png", 28, 28, 0, [img[y * 28:(y + 1) * 28] for y in range(28)])
rows = []
for y in range(56):
    r = img[(y // 2) * 28:(y // 2 + 1) * 28]
    rows.append(bytes(v for x in range(56) for v in (r[x // 2],) * 3))
png(sys.argv[2] + "/boot-rgb-56.png", 56, 56, 2, rows)
data = open(sys.argv[2] + "/boot.png", "rb").read()
open(sys.argv[2] + "/truncated.png", "wb").write(data[:len(data) // 2])
open(sys.argv[2] + "/garbage.png", "wb").write(b"GIF89a" + bytes(100))
PY
"$PTRAIN" predict --checkpoint "$TMP/ck/model.safetensors" "$TMP/boot.png" "$TMP/boot-rgb-56.png" >"$TMP/png.out"
first=$(sed -n 1p "$TMP/idx.out" | sed 's/.*\]: //; s/ (label.*//')
grep -qF "$TMP/boot.png: $first" "$TMP/png.out" || fail "boot.png: expected '$first' as for IDX image 0; got $(cat "$TMP/png.out")"
grep -q "boot.png: .*converted" "$TMP/png.out" && fail "boot.png fits the model as it is, yet a conversion was reported"
grep -qF "$TMP/boot-rgb-56.png: $first (converted 56x56 RGB to 28x28 grey)" "$TMP/png.out" ||
  fail "boot-rgb-56.png: expected '$first' and the conversion said; got $(cat "$TMP/png.out")"
pass "PNG: the same classes and probabilities as the IDX image; a 56x56 RGB one converted and said so"

# --json: one object per image.
"$PTRAIN" predict --checkpoint "$TMP/ck" --json --top 2 "$T10K" --index 0,3 "$TMP/boot-rgb-56.png" >"$TMP/json.out"
python3 - "$TMP/json.out" <<'PY' || fail "--json output: $(cat "$TMP/json.out")"
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
assert len(objs) == 3, objs
assert [o.get("index") for o in objs] == [0, 3, None], objs
assert objs[0]["label"] == "Ankle boot" and "converted" in objs[2], objs
for o in objs:
    assert len(o["top"]) == 2 and o["top"][0]["probability"] >= o["top"][1]["probability"], o
    assert 0.0 < sum(t["probability"] for t in o["top"]) <= 1.0 + 1e-6, o
    assert all(isinstance(t["class"], str) and 0 <= t["index"] < 10 for t in o["top"]), o
PY
pass "--json: an object per image with its top classes"

# Errors: named, with the right exit codes; good images are still classified.
expect_exit 1 "truncated.png" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/truncated.png"
expect_exit 1 "garbage.png.*GIF" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/garbage.png"
gzip -c "$TMP/boot.png" >"$TMP/boot.png.gz"
expect_exit 1 "boot.png.gz: a compressed PNG or JPEG: give the image itself" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/boot.png.gz"
# a FIFO is refused by name, not opened (which would wait for a writer for ever)
mkfifo "$TMP/fifo.png"
expect_exit 1 "fifo.png: not a regular file" -- timeout 60 "$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/fifo.png"
expect_exit 1 "truncated.png" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/truncated.png" "$TMP/boot.png"
grep -qF "$TMP/boot.png: $first" "$TMP/out" || fail "the good image after a bad one was not classified"
expect_exit 2 "holds 10000 images: choose with --index" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$T10K"
expect_exit 2 "--index 0,10000: 10000 is past the file's last image, 9999" -- \
  "$PTRAIN" predict --checkpoint "$TMP/ck" "$T10K" --index 0,10000
expect_exit 2 "--index x: expected image numbers" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$T10K" --index x
expect_exit 2 "--index picks images of IDX and CIFAR-10 files, and none is given" -- \
  "$PTRAIN" predict --checkpoint "$TMP/ck" --index 0 "$TMP/boot.png"
expect_exit 2 "--checkpoint FILE is required" -- "$PTRAIN" predict "$TMP/boot.png"
expect_exit 2 "no image given" -- "$PTRAIN" predict --checkpoint "$TMP/ck"
expect_exit 1 "$TMP/none" -- "$PTRAIN" predict --checkpoint "$TMP/none" "$TMP/boot.png"
expect_exit 1 "$TMP/missing.png" -- "$PTRAIN" predict --checkpoint "$TMP/ck" "$TMP/missing.png"
make_cifar "$TMP/cifar" 3
expect_exit 2 "holds 3x32x32 images but model fmnist-mlp takes 1x28x28" -- \
  "$PTRAIN" predict --checkpoint "$TMP/ck" --index 0 "$TMP/cifar/test_batch.bin"

# A CIFAR-10 batch with a model for it: labels come from the records and
# classes have CIFAR-10's names.
cat >"$TMP/cifar.spec" <<SPEC
name tiny-cifar
input 3 32 32
flatten
linear fc out=10
loss cross-entropy
defaults dataset=cifar10 optimizer=adam lr=0.001 batch=10 test-batch=10
SPEC
"$PTRAIN" train --model-file "$TMP/cifar.spec" --data-dir "$TMP/cifar" --epochs 1 --save-model \
  --checkpoint-dir "$TMP/ckc" --quiet >/dev/null
"$PTRAIN" predict --checkpoint "$TMP/ckc" --index 0-2 "$TMP/cifar/test_batch.bin" >"$TMP/cifar.out"
for label in airplane automobile bird; do
  grep -q "(label: $label)" "$TMP/cifar.out" || fail "CIFAR-10: no line labelled $label: $(cat "$TMP/cifar.out")"
done
grep -Eq ": (airplane|automobile|bird|cat|deer|dog|frog|horse|ship|truck) [0-9.]+%" "$TMP/cifar.out" ||
  fail "CIFAR-10 classes not named: $(cat "$TMP/cifar.out")"
pass "CIFAR-10 batch: labels and class names"
# A batch whose first record begins as IDX's magic (label 0, pixels 0, 8,
# 3) is still a CIFAR-10 batch: its length says so where the header fails.
python3 - "$TMP/cifar/test_batch.bin" "$TMP/magic_batch.bin" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[0:4] = bytes([0, 0, 8, 3])
open(sys.argv[2], "wb").write(b)
PY
"$PTRAIN" predict --checkpoint "$TMP/ckc" --index 0 "$TMP/magic_batch.bin" >"$TMP/magic.out" 2>&1 ||
  fail "a CIFAR-10 batch starting as IDX's magic: $(cat "$TMP/magic.out")"
grep -q "(label: airplane)$" "$TMP/magic.out" || fail "the record's label 0 not read: $(cat "$TMP/magic.out")"
pass "a CIFAR-10 batch that begins with IDX's magic is read as one"
"$PTRAIN" eval --checkpoint "$TMP/ck" >"$TMP/eval.out"
grep -q "fmnist-mlp on fashion-mnist test: loss .*, accuracy" "$TMP/eval.out" || fail "eval: $(cat "$TMP/eval.out")"
pass "eval of the same checkpoint"

# A model of more classes than the dataset's (300 outputs on Fashion-MNIST,
# trained a few steps): every class is ranked, as many as asked are shown,
# and the classes past the dataset's ten have numbers for names.
cat >"$TMP/wide.spec" <<'SPEC'
input 1 28 28
flatten
linear fc out=300
SPEC
"$PTRAIN" train --model-file "$TMP/wide.spec" --max-steps 3 --save-model --checkpoint-dir "$TMP/ckw" --quiet >/dev/null ||
  fail "training a 300-class model"
"$PTRAIN" predict --checkpoint "$TMP/ckw" "$T10K" --index 0 --top 256 --json >"$TMP/wide.json" ||
  fail "predict with a 300-class model: $(cat "$TMP/wide.json")"
python3 - "$TMP/wide.json" <<'PY' || fail "predict with a 300-class model: $(cat "$TMP/wide.json")"
import json, sys
top = json.load(open(sys.argv[1]))["top"]
assert len(top) == 256, len(top)
p = [e["probability"] for e in top]
assert p == sorted(p, reverse=True), p
assert all(0 <= e["index"] < 300 for e in top) and len({e["index"] for e in top}) == 256
assert any(e["class"] == "class %d" % e["index"] for e in top if e["index"] >= 10)
# All 300 ranked: some of the last 44 are among the 256 likeliest.
assert any(e["index"] >= 256 for e in top), sorted(e["index"] for e in top)
PY
pass "a 300-class model: 256 classes ranked of 300"

# Finite weights whose outputs overflow float (+-3e38, a PyTorch-style file
# without ptrain's metadata): predict and eval say so, naming the checkpoint,
# rather than print "-nan" as a probability (invalid JSON) or a loss.
python3 - "$TMP/ckw/model.safetensors" "$TMP/huge.safetensors" <<'PY'
import json, struct, sys
src, out = sys.argv[1:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
header.pop("__metadata__", None)
data = bytearray(b[8 + n:])
begin, end = header["fc.weight"]["data_offsets"]
for i in range(begin, end, 4):
    data[i:i + 4] = struct.pack("<f", 3e38 if (i // 4) % 2 else -3e38)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))
PY
expect_exit 1 "$TMP/huge.safetensors: the model's outputs for $T10K\[0\] are not finite \(NaN or infinity\)" -- \
  "$PTRAIN" predict --model-file "$TMP/wide.spec" --checkpoint "$TMP/huge.safetensors" --json "$T10K" --index 0
[[ -s $TMP/out ]] && fail "predict printed output for non-finite outputs: $(cat "$TMP/out")"
expect_exit 1 "$TMP/huge.safetensors: the model's outputs for $TMP/boot.png are not finite" -- \
  "$PTRAIN" predict --model-file "$TMP/wide.spec" --checkpoint "$TMP/huge.safetensors" "$TMP/boot.png"
expect_exit 1 "$TMP/huge.safetensors: the model's test loss is not finite \(NaN or infinity\)" -- \
  "$PTRAIN" eval --model-file "$TMP/wide.spec" --checkpoint "$TMP/huge.safetensors"
grep -q "loss" "$TMP/out" && fail "eval printed a loss for non-finite outputs: $(cat "$TMP/out")"
pass "outputs that overflow float: predict and eval refuse them, naming the checkpoint"
# Training from them: the loss is bad before any update, and the advice
# names the starting weights, not the learning rate.
expect_exit 1 "loss is (nan|inf) at the first step, before any update: the starting weights \(--init-from $TMP/huge.safetensors\) give it, not the learning rate" -- \
  "$PTRAIN" train --model-file "$TMP/wide.spec" --init-from "$TMP/huge.safetensors" --max-steps 2 --checkpoint-dir "$TMP/huge-ck"
pass "training from weights whose loss overflows: the weights named, not the learning rate"
