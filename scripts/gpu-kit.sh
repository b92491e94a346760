#!/usr/bin/env bash
# Packs a CUDA build for a GPU host that has the NVIDIA driver, the CUDA
# toolkit and PyTorch (with its nvidia-* libraries) but none of ptrain's
# other dependencies, so that the GPU tests and bench/gpu.sh run there
# without installing anything. Here:
#
#   scripts/gpu-kit.sh [KIT]          # KIT defaults to build-kit
#
# writes KIT/kit.tar.xz (about 27 MB) and KIT/data.tar.xz (about 27 MB;
# copy both, together or one after the other). There, from a copy of the
# repository, as root:
#
#   mkdir -p /opt/ptrain-kit && for a in KIT/*.tar.xz; do tar -xJf "$a" -C /opt/ptrain-kit; done
#   source /opt/ptrain-kit/env.sh && (cd build && ctest -L gpu)
#
# The kit holds:
#   build/  the executables the GPU tests and benchmarks run, with ctest's
#           files, stripped (a slim copy of BUILD, default build)
#   lib/    every shared library they need, found with ldd here, except
#           the C library's and CUDA's (the host's own: cudart, cuBLAS,
#           cuDNN, NCCL); env.sh drops the ones the host already has, so
#           that its own programs (Python) keep their own
#   mpi/    Open MPI's mpirun, orted and plugins, moved with OPAL_PREFIX
#   data/   Fashion-MNIST, which the tests train on, as raw IDX (xz packs
#           that tighter than gzip; env.sh gzips it again)
#
# ctest's files name absolute paths, so env.sh links /work/main to the
# repository there when it lies elsewhere, and build to the kit's build.
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=${1:-build-kit}
BUILD=${BUILD:-build}
FASHION_DIR=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
die() { echo "gpu-kit: $*" >&2; exit 1; }

[[ -x $BUILD/ptrain ]] || die "no $BUILD/ptrain: build first (make build)"
"$BUILD/ptrain" info 2>/dev/null | grep "CUDA" >/dev/null || die "$BUILD/ptrain was built without CUDA"
[[ $(realpath "$BUILD") == /work/main/build ]] ||
  echo "gpu-kit: note: ctest's files name $(realpath "$BUILD"); env.sh links only /work/main/build" >&2
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [[ -f $FASHION_DIR/$f ]] || die "no $FASHION_DIR/$f (FASHION_DIR)"
done
command -v orterun >/dev/null || die "no orterun: install openmpi-bin"

rm -rf "$KIT"
OUTDIR=$KIT
KIT=$KIT/stage
mkdir -p "$KIT"/{build,lib,mpi/usr/bin,mpi/usr/share,data}

# The GPU tests (ctest -L gpu) and what they run: every file of the build
# a test command names (the test's executable, or for a script the programs
# it is given: ptrain, st_close), and ptrain for the benchmarks.
exes=()
while read -r t; do exes+=("${t#"$(realpath "$BUILD")/"}"); done < <(
  cd "$BUILD" && { realpath ptrain; ctest -N -V -L gpu | grep '^[0-9]*: Test command: ' | grep -o "$(realpath .)/[^\" ]*"; } |
    sort -u | while read -r f; do [[ -f $f && -x $f ]] && echo "$f"; done)
(cd "$BUILD" && find . -name CTestTestfile.cmake) | while read -r f; do
  mkdir -p "$KIT/build/$(dirname "$f")" && cp "$BUILD/$f" "$KIT/build/$f"
done
for e in "${exes[@]}"; do
  mkdir -p "$KIT/build/$(dirname "$e")"
  cp "$BUILD/$e" "$KIT/build/$e"
  strip --strip-debug "$KIT/build/$e"
done

# Shared libraries: those of the executables and of Open MPI's programs
# and plugins, whatever they load in turn (ldd lists the whole tree).
ompi_pkg=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
[[ -d $ompi_pkg ]] || die "cannot find Open MPI's plugins (ompi_info --path pkglibdir)"
pmix_dir=$(dirname "$(readlink -f "$(ldconfig -p | sed -n 's/.*libpmix\.so\.2 .*=> //p' | head -1)")" 2>/dev/null || true)
skip='/(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux[^/]*)\.so|/lib(cudart|cudnn[^/]*|nccl|cublas[^/]*|nvidia-ml|cuda)\.so'
# One node's ranks talk through shared memory: the plugins for network
# fabrics (and the libraries they bring, over 50 MB) stay behind, and
# Open MPI skips what it cannot load (env.sh keeps that quiet).
fabric='(ucx|ucc|ofi|psm|verbs|openib|usnic|uct|portals|hcoll|fca|cuda|smcuda|rocm)'
plugins=$(find "$ompi_pkg" ${pmix_dir:+"$pmix_dir/pmix"} -name '*.so' 2>/dev/null | grep -vE "_${fabric}[^/]*\.so$" || true)
{
  for e in "${exes[@]}"; do ldd "$KIT/build/$e"; done
  ldd "$(readlink -f "$(command -v orterun)")" "$(readlink -f "$(command -v orted)")"
  for p in $plugins; do ldd "$p"; done 2>/dev/null
} | awk '/=> \//{print $3}' | sort -u | grep -vE "$skip" | grep -vE "/lib${fabric}[^/]*\.so|/lib(fabric|efa|ibverbs|psm[^/]*|infinipath|mlx[^/]*|rdmacm)\.so" |
  while read -r l; do cp -L "$l" "$KIT/lib/"; done

# Open MPI, laid out under a prefix that OPAL_PREFIX moves (its plugin
# directory is derived from the prefix; /etc/openmpi is not, and its
# defaults are given in env.sh).
cp -L "$(command -v orterun)" "$KIT/mpi/usr/bin/orterun"
cp -L "$(command -v orted)" "$KIT/mpi/usr/bin/orted"
ln -s orterun "$KIT/mpi/usr/bin/mpirun"
mkdir -p "$KIT/mpi/${ompi_pkg#/}"
for p in $plugins; do [[ $p == "$ompi_pkg"/* ]] && cp -L "$p" "$KIT/mpi/${ompi_pkg#/}/"; done
[[ -d /usr/share/openmpi ]] && cp -r /usr/share/openmpi "$KIT/mpi/usr/share/"
if [[ -n $pmix_dir && -d $pmix_dir/pmix ]]; then
  mkdir -p "$KIT/mpi/pmix/lib/pmix"
  for p in $plugins; do [[ $p == "$pmix_dir"/pmix/* ]] && cp -L "$p" "$KIT/mpi/pmix/lib/pmix/"; done
  [[ -d $(dirname "$pmix_dir")/share ]] && cp -r "$(dirname "$pmix_dir")/share" "$KIT/mpi/pmix/"
fi
strip --strip-debug "$KIT"/lib/*.so* "$KIT"/mpi/usr/bin/* 2>/dev/null || true

for f in "$FASHION_DIR"/*-ubyte.gz; do gzip -dc "$f" >"$KIT/data/$(basename "$f" .gz)"; done
cat >"$KIT/env.sh" <<'EOF'
# Sourced on the GPU host, from the repository's root: see scripts/gpu-kit.sh.
PT_KIT=/opt/ptrain-kit
[[ -x $PT_KIT/build/ptrain && -d $PT_KIT/data ]] ||
  { echo "env.sh: unpack both of the kit's archives into $PT_KIT first" >&2; return 1; }
# The host's own libraries first: drop the kit's copy of any it has
# (PT_KIT_PRUNE=0 keeps them all, to check the kit on a host that has them).
if [[ ${PT_KIT_PRUNE:-1} != 0 ]]; then
  pt_have=$(ldconfig -p)
  for l in "$PT_KIT"/lib/*.so*; do
    [[ $pt_have == *$'\t'"$(basename "$l") "* ]] && rm -f "$l"
  done
fi
# CUDA's libraries: the toolkit's, then those PyTorch's wheels bring.
pt_cuda_dirs=$(find /usr/local /opt /usr/lib \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o \
  -name 'libcublas.so.13' -o -name 'libcudart.so.13' \) -printf '%h\n' 2>/dev/null | awk '!seen[$0]++' | paste -sd: -)
export LD_LIBRARY_PATH="$PT_KIT/lib${pt_cuda_dirs:+:$pt_cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$PT_KIT/mpi/usr" PATH="$PT_KIT/mpi/usr/bin:$PATH"
[[ -d $PT_KIT/mpi/pmix ]] && export PMIX_INSTALL_PREFIX="$PT_KIT/mpi/pmix" \
  PMIX_MCA_mca_base_component_path="$PT_KIT/mpi/pmix/lib/pmix"
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_mca_base_component_show_load_errors=0
for f in "$PT_KIT"/data/*-ubyte; do [[ -f $f.gz ]] || gzip -1 -c "$f" >"$f.gz"; done
mkdir -p /usr/share/datasets
[[ -e /usr/share/datasets/fashion-mnist ]] || ln -s "$PT_KIT/data" /usr/share/datasets/fashion-mnist
[[ -e build ]] || ln -s "$PT_KIT/build" build
# ctest runs test_nccl_mpi with the mpiexec CMake found here.
[[ -x /usr/bin/mpiexec ]] || ln -sf "$PT_KIT/mpi/usr/bin/orterun" /usr/bin/mpiexec
if [[ $(realpath .) != /work/main ]]; then
  [[ -e /work/main ]] && { echo "env.sh: /work/main exists and is not this repository" >&2; return 1; }
  mkdir -p /work && ln -s "$(realpath .)" /work/main
fi
EOF
tar -C "$KIT" -cf - build lib mpi env.sh | xz -T0 "${XZ_LEVEL:--9}" >"$OUTDIR/kit.tar.xz"
tar -C "$KIT" -cf - data | xz -T0 "${XZ_LEVEL:--9}" >"$OUTDIR/data.tar.xz"
rm -rf "$KIT"
ls -l "$OUTDIR"
