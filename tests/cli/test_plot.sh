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
assert (w, h) == (1280, 420), (w, h)  # two panels side by side
svg = open(sys.argv[2]).read()
assert "<svg" in svg and 'width="1280' in svg, svg[:200]
assert svg.count("<path") > 20, "an empty drawing"
PY
pass "two runs as PNG (two panels, 1280 x 420) and one as SVG"

expect_exit 2 "--output FILE.png|FILE.svg is required" -- "$PTRAIN" plot "$TMP/adam.jsonl"
expect_exit 2 "give one or more metrics files" -- "$PTRAIN" plot --output "$TMP/x.png"
expect_exit 2 "x.pdf: expected a file name ending in .png or .svg" -- "$PTRAIN" plot --output "$TMP/x.pdf" "$TMP/adam.jsonl"
printf '{"event":"epoch","epoch":1}\nnot json\n' >"$TMP/bad.jsonl"
expect_exit 1 "bad.jsonl:2: not a JSON object" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/bad.jsonl"
printf '{"event":"profile","steps":3}\n' >"$TMP/none.jsonl"
expect_exit 1 "none.jsonl: no \"epoch\" lines" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/none.jsonl"
expect_exit 1 "cannot open .*missing.jsonl" -- "$PTRAIN" plot --output "$TMP/x.png" "$TMP/missing.jsonl"
expect_exit 1 "nowhere/x.png: cannot" -- "$PTRAIN" plot --output "$TMP/nowhere/x.png" "$TMP/adam.jsonl"
pass "bad input: the flag, the file and line, or the path, named"
