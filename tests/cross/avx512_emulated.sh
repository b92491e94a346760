#!/bin/bash
# The avx512 level's kernels and their tests, on a CPU without AVX-512:
# the training core built with -DPT_EMULATE_AVX512=ON, where that level is
# compiled for AVX2 with its AVX-512 intrinsics emulated (Debian's SIMDe),
# and every per-level test run at avx512. This checks the level's source
# (v16_avx512.h and each kernel's 32-register tiles) against the portable
# reference on every machine; the native *_avx512 tests check the real
# instructions where the CPU has them. Usage: avx512_emulated.sh BUILD_DIR
set -euo pipefail
build=$1
skip() { echo "SKIPPED: $*"; exit 77; }
[[ -f /usr/include/simde/x86/avx512.h ]] || skip "no SIMDe headers (libsimde-dev; scripts/install-deps.sh installs it)"
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || skip "this CPU has no AVX2 and FMA to emulate AVX-512 with"
flags=$(grep -m1 '^flags' /proc/cpuinfo)
for f in avx512f avx512bw avx512dq avx512vl; do grep -qw $f <<<"$flags" || native=no; done
[[ ${native:-yes} == no ]] || skip "this CPU runs AVX-512 itself: the native *_avx512 tests check that level here"
cmake -S . -B "$build" -DPT_CORE_ONLY=OFF -DPT_WITH_CUDA=OFF -DPT_EMULATE_AVX512=ON -DCMAKE_BUILD_TYPE=Release \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
# only the avx512 tests (and what they link), and the binary and tool the
# script tests at avx512 run: the other levels run natively
targets=$(cmake --build "$build" --target help | sed -n 's/^\.\.\. \([a-z0-9_]*_avx512\)$/\1/p' | grep '^test_')
[[ -n "$targets" ]] || { echo "FAIL: no *_avx512 test targets in $build"; exit 1; }
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $targets ptrain st_close >"$build.build.log" 2>&1 ||
  { grep -E -A3 'error|warning' "$build.build.log" | head -60 || tail -n 40 "$build.build.log"; echo "FAIL: the emulated avx512 build"; exit 1; }
cd "$build"
out=$(ctest -R '_avx512$' -j "$(nproc)" --output-on-failure) || { echo "$out"; exit 1; }
echo "$out"
# every test must have run, none skipped: a skip here would pass nothing
! grep -q 'Not Run\|Skipped' <<<"$out" || { echo "FAIL: some avx512 tests did not run"; exit 1; }
# nor any test case inside them (cmocka's skip() passes under ctest)
for t in $targets; do
  log=$(PTRAIN_CPU=avx512 "$(find tests -name "$t" -type f | head -1)" 2>&1) || { echo "$log"; exit 1; }
  ! grep -q '^\[  SKIPPED \]' <<<"$log" || { echo "$log"; echo "FAIL: $t skipped a case at avx512"; exit 1; }
done
first=$(./tests/ops/test_expf_avx512)
first=${first%%$'\n'*}
grep -q "AVX-512 emulated" <<<"$first" || { echo "FAIL: the tests did not run emulated: $first"; exit 1; }
echo "$first"
