#!/bin/bash
# The training core and its unit tests, cross-compiled for aarch64 and run
# under qemu-aarch64: the kernels' portable level compiles to NEON there,
# and every kernel test must pass as on x86-64. Arm speed is not measured
# here (emulation), only correctness. Usage: aarch64.sh BUILD_DIR
set -euo pipefail
build=$1
# The tests find the loader and libc.so.6 of Debian's arm64 multiarch
# packages (/lib/ld-linux-aarch64.so.1, then /etc/ld.so.cache), a matched
# pair. A prefix (QEMU_LD_PREFIX, or qemu-aarch64 -L /usr/aarch64-linux-gnu
# when running a test by hand) takes the cross package's loader instead,
# which then loads the multiarch libc.so.6 of another glibc build: the two
# disagree on pthread's shared stack cache, and pthread_create can loop
# forever in it.
unset QEMU_LD_PREFIX
skip() { echo "SKIPPED: $* (scripts/install-cross-deps.sh installs it)"; exit 77; }
command -v aarch64-linux-gnu-gcc >/dev/null || skip "no aarch64 cross compiler (gcc-aarch64-linux-gnu)"
command -v qemu-aarch64 >/dev/null || skip "no qemu-aarch64 (qemu-user)"
for lib in libopenblas libcmocka libcjson libz; do
  ls /usr/lib/aarch64-linux-gnu/$lib.so >/dev/null 2>&1 || skip "no arm64 $lib.so in /usr/lib/aarch64-linux-gnu"
done
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/tests/cross/aarch64.cmake" -DPT_CORE_ONLY=ON \
  -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$build.build.log" 2>&1 || { grep -E -A3 'error|warning' "$build.build.log" | head -60 || tail -n 40 "$build.build.log"; echo "FAIL: the aarch64 build"; exit 1; }
file "$build/tests/ops/test_gradcheck_generic" | grep -q 'ARM aarch64' || { echo "FAIL: not an aarch64 build"; exit 1; }
# the tests that read the real Fashion-MNIST are covered natively
cd "$build" && ctest -j "$(nproc)" --output-on-failure
