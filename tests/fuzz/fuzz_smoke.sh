#!/bin/bash
# Each libFuzzer target in fuzz/ (IDX, CIFAR-10, safetensors, checkpoints,
# PNG and JPEG images)
# built with clang, ASan and UBSan (-DPT_FUZZ=ON, the training core only)
# and run for PT_FUZZ_SECONDS (default 12) from a copy of its seed corpus in
# fuzz/corpus/NAME. Any crash, leak, sanitizer report or timeout fails the
# test; the input that did it is kept in BUILD_DIR/artifacts/. Usage:
# fuzz_smoke.sh BUILD_DIR
set -euo pipefail
build=$1
secs=${PT_FUZZ_SECONDS:-12}
skip() { echo "SKIPPED: $*"; exit 77; }
command -v clang >/dev/null || skip "no clang for libFuzzer (scripts/install-deps.sh installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; return (int)(n & 0); }\n' \
  >"$tmp/probe.c"
clang -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" 2>/dev/null || skip "clang here cannot link libFuzzer (-fsanitize=fuzzer)"

fuzzers=()
for src in fuzz/fuzz_*.c; do fuzzers+=("$(basename "$src" .c)"); done
CC=clang cmake -S . -B "$build" -DPT_FUZZ=ON -DPT_CORE_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${fuzzers[@]}" >"$build.build.log" 2>&1 ||
  { grep -E -A3 'error|warning' "$build.build.log" | head -60 || tail -n 40 "$build.build.log"; echo "FAIL: the fuzzers' build"; exit 1; }
mkdir -p "$build/artifacts"
for f in "${fuzzers[@]}"; do
  [[ -d fuzz/corpus/$f ]] || { echo "FAIL: no seed corpus fuzz/corpus/$f"; exit 1; }
  rm -rf "$tmp/corpus"
  cp -r "fuzz/corpus/$f" "$tmp/corpus"
  if ! "$build/fuzz/$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/$f-" "$tmp/corpus" >"$tmp/$f.log" 2>&1; then
    tail -n 40 "$tmp/$f.log"
    echo "FAIL: $f found a bug; the input is in $build/artifacts/ (replay: $build/fuzz/$f FILE)"
    exit 1
  fi
  echo "ok: $f, $secs s: $(grep -o 'Done [0-9]* runs' "$tmp/$f.log" | tail -1)"
done
