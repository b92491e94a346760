#!/usr/bin/env bash
# Installs the Debian packages ptrain needs to build and test, when missing.
# As root it runs apt-get; otherwise it prints the exact sudo line and fails,
# so `make` never hangs on a password prompt.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenblas-dev zlib1g-dev libcjson-dev libcurl4-openssl-dev libssl-dev libarchive-dev
  libcmocka-dev
  libcairo2-dev          # ptrain plot and scale --report draw PNG and SVG charts
  libpng-dev libjpeg-dev # ptrain predict reads the user's PNG and JPEG images (libjpeg-turbo)
  libopenmpi-dev openmpi-bin  # --parallel ddp, and its tests under mpirun
  iproute2               # the two-host ddp test builds its hosts with ip netns
  gdb                    # the ddp failure test holds a rank at chosen points of its start and end
  python3                # the loopback HTTP server of the download tests
  dataset-fashion-mnist  # the default dataset, so a first run needs no download
  qemu-user              # runs the binary as CPUs without AVX-512 or AVX (test_cpu_levels)
  libsimde-dev           # the avx512 kernels' tests, emulated on CPUs without AVX-512
  clang libclang-rt-dev  # make test runs the fuzzers (libFuzzer, in libclang-rt) for a minute
)

# One line per installed architecture: with arm64 multiarch libraries
# beside the native ones (scripts/install-cross-deps.sh), a package has two.
arch=$(dpkg --print-architecture)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status} ${Architecture}\n' "$p" 2>/dev/null || true)
  grep -qE "^installed ($arch|all)$" <<<"$status" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -eq 0 ]]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "ptrain needs these Debian packages; install them with:" >&2
echo "  sudo apt-get install ${missing[*]}" >&2
exit 1
