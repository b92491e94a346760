#!/usr/bin/env bash
# Optional: what the aarch64 cross test (tests/cross/aarch64.sh) needs, as
# root: Debian's cross compiler, qemu-user, and the arm64 builds of the
# libraries the training core links (this adds arm64 to dpkg's architectures).
set -euo pipefail
dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
  libopenblas-dev:arm64 libcmocka-dev:arm64 libcjson-dev:arm64 zlib1g-dev:arm64 >/dev/null
echo "aarch64 cross build ready: ctest -R cross_aarch64"
