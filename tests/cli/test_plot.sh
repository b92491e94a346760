# ptrain plot draws runs' --metrics curves as PNG and SVG through cairo,
# and refuses what is not a metrics file, naming the file and line.
source "$(dirname "$0")/lib.sh"
need_fmnist

"$PTRAIN" train --model fmnist-mlp --epochs 2 --threads 1 --metrics "$TMP/adam.jsonl" --quiet >/dev/null 2>&1 ||
  fail "the adam run"
"$PTRAIN" train --model fmnist-mlp --epochs 2 --threads 1 --optimizer sgd --lr 0.01 --metrics "$TMP/sgd.jsonl" \
  --quiet >/dev/null 2>&1 || fail "the sgd run"
"$PTRAIN" plot --output "$TMP/curves.png" "$TMP/adam.jsonl" "$TMP/sgd.jsonl" >"$TMP/png.out" 2>&1 ||
  fail "plot png: $(cat "$TMP/png.out")"
grep -q "wrote $TMP/curves.png: 2 runs" "$TMP/png.out" || fail "plot png: $(cat "$TMP/png.out")"
"$PTRAIN" plot --x epoch --output "$TMP/curves.svg" "$TMP/adam.jsonl" >"$TMP/svg.out" 2>&1 || fail "plot svg: $(cat "$TMP/svg.out")"
python3 - "$TMP/curves.png" "$TMP/curves.svg" <<'PY' || fail "the images"
import struct, sys
png = open(sys.argv[1], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", png[16:24])
assert w == 1280 and h >= 420, (w, h)  # two panels side by side (a legend below adds height)
svg = open(sys.argv[2]).read()
assert "<svg" in svg and 'width="1280' in svg, svg[:200]
assert svg.count("<path") > 20, "an empty drawing"
PY
pass "two runs as PNG (two panels, 1280 wide) and one as SVG"

# A run has one colour in both panels (its accuracy once took the colour of
# the other run's test loss): two runs, two colours besides the greys.
"$PTRAIN" plot --output "$TMP/two.svg" "$TMP/adam.jsonl" "$TMP/sgd.jsonl" >/dev/null || fail "plot two as svg"
python3 - "$TMP/two.svg" <<'PY' || fail "the runs' colours"
import re, sys
strokes = re.findall(r"stroke:rgb\(([0-9.]+)%,([0-9.]+)%,([0-9.]+)%\)", open(sys.argv[1]).read())
colours = {c for c in strokes if len(set(c)) > 1}  # greys (axes, grid, references) have equal parts
assert len(colours) == 2, colours
PY
pass "two runs: one colour each, in both panels"

# Eight runs: sixteen lines in the loss panel, each of its own look (the
# unit tests check the styles), and a legend that no corner holds goes
# below the plots, the figure taller, the plots the same.
for i in 1 2 3 4 5 6 7 8; do cp "$TMP/adam.jsonl" "$TMP/run$i.jsonl"; done
"$PTRAIN" plot --output "$TMP/eight.png" "$TMP"/run?.jsonl >"$TMP/eight.out" 2>&1 || fail "plot of 8 runs: $(cat "$TMP/eight.out")"
python3 - "$TMP/eight.png" <<'PY' || fail "the 8-run figure"
import struct, sys
w, h = struct.unpack(">II", open(sys.argv[1], "rb").read()[16:24])
assert w == 1280 and h > 420, (w, h)
PY
pass "eight runs: the legend below the plots"

expect_exit 2 "--output FILE.png|FILE.svg is required" -- "$PTRAIN" plot "$TMP/adam.jsonl"
expect_exit 2 "give one or more metrics files" -- "$PTRAIN" plot --output "$TMP/x.png"
expect_exit 2 "x.pdf: expected a file name ending in .png or .svg" -- "$PTRAIN" plot --output "$TMP/x.pdf" "$TMP/adam.jsonl"
# The figure never replaces a run it reads: by name, or through a link.
cp "$TMP/adam.jsonl" "$TMP/runs.svg"
ln -s "$TMP/adam.jsonl" "$TMP/link.png"
cp "$TMP/adam.jsonl" "$TMP/adam.before"
expect_exit 2 "--output [^ ]*runs.svg is the metrics file [^ ]*runs.svg: writing the figure would replace it" -- \
  "$PTRAIN" plot --output "$TMP/runs.svg" "$TMP/runs.svg"
expect_exit 2 "--output [^ ]*link.png is the metrics file [^ ]*adam.jsonl" -- \
  "$PTRAIN" plot --output "$TMP/link.png" "$TMP/runs.svg" "$TMP/adam.jsonl"
cmp -s "$TMP/adam.jsonl" "$TMP/adam.before" && cmp -s "$TMP/runs.svg" "$TMP/adam.before" ||
  fail "a refused plot changed a metrics file"
expect_exit 2 "[^ ]*adam.jsonl is given twice \(as [^ ]*adam.jsonl too\)" -- \
  "$PTRAIN" plot --output "$TMP/twice.png" "$TMP/adam.jsonl" "$TMP/./adam.jsonl"
# More runs than a figure holds are counted, whether or not past its 16 lines.
expect_exit 2 "at most 8 runs in one figure, got 9" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP"/run?.jsonl "$TMP/adam.jsonl"
expect_exit 2 "at most 8 runs in one figure, got 17" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP"/run?.jsonl "$TMP"/run?.jsonl "$TMP/adam.jsonl"
expect_exit 1 "$TMP: is a directory \(expected a file written by ptrain train --metrics FILE\)" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP"
printf '\nnot json\nnor this\n' >"$TMP/bad.jsonl"
expect_exit 1 "bad.jsonl:2: not a JSON object" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/bad.jsonl"
printf '{"event":"epoch","epoch":1}garbage\n' >"$TMP/trailing.jsonl"
expect_exit 1 "trailing.jsonl:1: not a JSON object" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/trailing.jsonl"
# a last line cut short (a run still writing): left out, with a note; the whole lines are drawn
{ head -n 2 "$TMP/adam.jsonl"; printf '{"event":"epoch","epoch":3,"st'; } >"$TMP/torn.jsonl"
"$PTRAIN" plot --output "$TMP/torn.svg" "$TMP/torn.jsonl" 2>"$TMP/torn.err" >/dev/null || fail "a torn last line: $(cat "$TMP/torn.err")"
grep -q "torn.jsonl:3: an unfinished last line, left out" "$TMP/torn.err" || fail "no note of the torn line: $(cat "$TMP/torn.err")"
# a line longer than any fixed buffer
python3 -c 'import json; print(json.dumps({"event": "epoch", "epoch": 1, "train_loss": 0.5, "test_loss": 0.4, "test_acc": 0.8, "seconds": 1, "pad": "x" * 40000}))' >"$TMP/long.jsonl"
"$PTRAIN" plot --output "$TMP/long.svg" "$TMP/long.jsonl" >/dev/null || fail "a 40 kB line"
printf '{"event":"profile","steps":3}\n' >"$TMP/none.jsonl"
expect_exit 1 "none.jsonl: no \"epoch\" or \"eval\" lines" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/none.jsonl"
expect_exit 1 "cannot open .*missing.jsonl" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/missing.jsonl"
expect_exit 1 "nowhere/x.png: cannot" -- "$PTRAIN" plot --output "$TMP/nowhere/x.png" "$TMP/adam.jsonl"
pass "bad input: the flag, the file and line, or the path, named"

# What a metrics file can hold besides one whole run. A fragment that a
# full disk cut short, which the writer leaves on a line of its own: left
# out with a note.
{ head -n 1 "$TMP/adam.jsonl"; printf '{"event":"epoch","epo\n'; tail -n +2 "$TMP/adam.jsonl"; } >"$TMP/mid.jsonl"
"$PTRAIN" plot --output "$TMP/mid.svg" "$TMP/mid.jsonl" >"$TMP/mid.out" 2>&1 || fail "a cut line inside: $(cat "$TMP/mid.out")"
grep -q "mid.jsonl:2: not a JSON object, left out (a write cut short" "$TMP/mid.out" ||
  fail "no note of the cut line: $(cat "$TMP/mid.out")"
# Two runs appended to one file (--metrics appends): two curves, said so.
cat "$TMP/adam.jsonl" "$TMP/sgd.jsonl" >"$TMP/twice.jsonl"
"$PTRAIN" plot --output "$TMP/twice.svg" "$TMP/twice.jsonl" >"$TMP/twice.out" 2>&1 || fail "two runs in a file: $(cat "$TMP/twice.out")"
grep -q "twice.jsonl holds 2 runs (its steps start again), drawn one by one" "$TMP/twice.out" &&
  grep -q "wrote $TMP/twice.svg: 2 runs" "$TMP/twice.out" || fail "two runs in a file: $(cat "$TMP/twice.out")"
# A run that diverged: NaN epochs are gaps, with a note; nothing finite at all is an error.
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
def line(e, v): return json.dumps({"event": "epoch", "epoch": e, "step": 10 * e, "train_loss": v, "test_loss": v, "test_acc": v, "seconds": 1}) + "\n"
open(d + "/nan.jsonl", "w").write(line(1, 0.5) + line(2, None) + line(3, None))
open(d + "/allnan.jsonl", "w").write(line(1, None) + line(2, None))
PY
"$PTRAIN" plot --output "$TMP/nan.svg" "$TMP/nan.jsonl" >"$TMP/nan.out" 2>&1 || fail "NaN epochs: $(cat "$TMP/nan.out")"
grep -q "nan.jsonl: 2 epochs with a NaN or infinite loss or accuracy, drawn as gaps" "$TMP/nan.out" ||
  fail "no note of the NaN epochs: $(cat "$TMP/nan.out")"
expect_exit 1 "allnan.jsonl: no epoch line has a finite loss or accuracy" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/allnan.jsonl"
pass "a cut line inside, two runs in one file, NaN epochs"

# A full disk: exit 1 naming the file, and no image, whole or partial, nor
# a temporary file. A file size limit stands in for it (no root needed),
# and ENOSPC itself is injected through the atomic writes' test hook.
mkdir "$TMP/full"
for ext in png svg; do
  rc=0
  (trap '' XFSZ; ulimit -f 1; "$PTRAIN" plot --output "$TMP/full/p.$ext" "$TMP/adam.jsonl") 2>"$TMP/err" || rc=$?
  [[ $rc == 1 ]] && grep -q "full/p.$ext: write to .* failed: File too large" "$TMP/err" ||
    fail "plot .$ext past the size limit exited $rc: $(cat "$TMP/err")"
  rc=0
  PTRAIN_TEST_ENOSPC_AFTER=500 "$PTRAIN" plot --output "$TMP/full/p.$ext" "$TMP/adam.jsonl" 2>"$TMP/err" || rc=$?
  [[ $rc == 1 ]] && grep -q "full/p.$ext: write to .* failed: No space left on device" "$TMP/err" ||
    fail "plot .$ext on a full disk exited $rc: $(cat "$TMP/err")"
done
[[ -z $(ls -A "$TMP/full") ]] || fail "a failed plot left files: $(ls -lA "$TMP/full")"
# An image there before is kept whole.
cp "$TMP/curves.png" "$TMP/full/keep.png"
PTRAIN_TEST_ENOSPC_AFTER=500 "$PTRAIN" plot --output "$TMP/full/keep.png" "$TMP/sgd.jsonl" 2>/dev/null &&
  fail "plot on a full disk exited 0"
cmp -s "$TMP/curves.png" "$TMP/full/keep.png" || fail "a failed plot changed the image there before"
pass "plot to a full disk: exit 1, no partial image, an older one kept"
