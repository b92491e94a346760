#!/usr/bin/env bash
# Optional: what the aarch64 cross test (tests/cross/aarch64.sh) needs:
# Debian's cross compiler, qemu-user, and the arm64 builds of the libraries
# the training core links. This adds arm64 to dpkg's architectures, which is
# why `make test` does not do it for you. As root; otherwise prints the
# lines to run with sudo and fails.
set -euo pipefail

packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  libopenblas-dev:arm64 libcmocka-dev:arm64 libcjson-dev:arm64 zlib1g-dev:arm64)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "aarch64 cross build ready: ctest -R cross_aarch64"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "the aarch64 cross test needs, as root:" >&2
  echo "  sudo dpkg --add-architecture arm64 && sudo apt-get update && sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "aarch64 cross build ready: ctest -R cross_aarch64"
