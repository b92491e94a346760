# Installs the build into a temporary prefix (cmake --install --prefix), checks
# the installed files, then builds the installed examples against them twice,
# with pkg-config and with CMake's find_package(ptrain), and runs them: train
# trains fmnist-mlp for 2 epochs on Fashion-MNIST, predict classifies PNGs
# made from its test images.
#   test_examples.sh BUILD_DIR CMAKE
set -euo pipefail
BUILD=$1
CMAKE=${2:-cmake}
FMNIST=/usr/share/datasets/fashion-mnist
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LSAN_OPTIONS=${LSAN_OPTIONS:-}${LSAN_OPTIONS:+:}suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lsan.supp

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
skip() { echo "SKIPPED: $*"; exit 77; }

[[ -f $FMNIST/t10k-images-idx3-ubyte.gz ]] || skip "$FMNIST not found (apt-get install dataset-fashion-mnist)"
for tool in cc pkg-config readelf python3 "$CMAKE"; do
  command -v "$tool" >/dev/null || skip "$tool not found"
done
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
[[ $(cache PT_FUZZ) != ON ]] || skip "a PT_FUZZ build's library needs the fuzzer's runtime"
# A sanitizer build's library needs its programs built with the sanitizers too.
SAN=()
[[ $(cache PT_SANITIZE) != ON ]] || SAN=(-fsanitize=address,undefined)

# ---- Install --------------------------------------------------------------
PREFIX=$TMP/prefix
"$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 ||
  fail "cmake --install $BUILD --prefix $PREFIX: $(tail -n 20 "$TMP/install.log")"
lib=$(find "$PREFIX" -name libptrain.so.0.3 | head -n 1)
[[ -n $lib ]] || fail "no libptrain.so.0.3 under $PREFIX: $(cat "$TMP/install.log")"
LIBDIR=$(dirname "$lib")
[[ -f $(readlink -f "$lib") ]] || fail "$lib is a broken link"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libptrain.so.0.3 ]] || fail "$lib: soname '$soname', expected libptrain.so.0.3"
for f in bin/ptrain include/ptrain.h share/man/man1/ptrain.1 share/doc/ptrain/examples/train.c \
         share/doc/ptrain/examples/predict.c; do
  [[ -f $PREFIX/$f ]] || fail "$f not installed"
done
for f in libptrain.so libptrain.a pkgconfig/ptrain.pc cmake/ptrain/ptrainConfig.cmake \
         cmake/ptrain/ptrainConfigVersion.cmake cmake/ptrain/ptrainTargets.cmake; do
  [[ -e $LIBDIR/$f ]] || fail "${LIBDIR#"$PREFIX"/}/$f not installed"
done
version=$("$PREFIX/bin/ptrain" --version) || fail "installed ptrain --version exited $?"
[[ $version == "$("$BUILD/ptrain" --version)" ]] || fail "installed ptrain --version says '$version'"
grep -q "^prefix=$PREFIX\$" "$LIBDIR/pkgconfig/ptrain.pc" || fail "ptrain.pc: prefix is not $PREFIX: $(cat "$LIBDIR/pkgconfig/ptrain.pc")"
pass "installed into $PREFIX: $version, $soname, the man page, ptrain.pc, the CMake package"

# ---- Images for predict: PNGs of Fashion-MNIST test images 0-2 ------------
python3 - "$FMNIST" "$TMP" <<'PY'
import gzip, struct, sys, zlib
src, out = sys.argv[1], sys.argv[2]
with gzip.open(src + "/t10k-images-idx3-ubyte.gz") as f:
    data = f.read()
_, n, h, w = struct.unpack(">IIII", data[:16])
def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
for i in range(3):
    px = data[16 + i * h * w:16 + (i + 1) * h * w]
    rows = b"".join(b"\0" + px[r * w:(r + 1) * w] for r in range(h))  # filter 0 per row
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    with open("%s/image%d.png" % (out, i), "wb") as f:
        f.write(png)
PY
IMAGES=("$TMP/image0.png" "$TMP/image1.png" "$TMP/image2.png")
CLASSES='T-shirt/top|Trouser|Pullover|Dress|Coat|Sandal|Shirt|Sneaker|Bag|Ankle boot'
EXAMPLES=$PREFIX/share/doc/ptrain/examples

# run_examples DIR LABEL: runs DIR/train then DIR/predict in DIR.
run_examples() {
  local dir=$1 label=$2
  (cd "$dir" && ./train) >"$dir/train.out" 2>&1 || fail "$label: train exited $?: $(cat "$dir/train.out")"
  grep -q "^epoch 2: " "$dir/train.out" || fail "$label: train printed no epoch 2 line: $(cat "$dir/train.out")"
  local acc
  acc=$(sed -n 's/^test accuracy \([0-9.]*\) after.*/\1/p' "$dir/train.out")
  [[ -n $acc ]] && awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || fail "$label: test accuracy '$acc' (expected above 0.5): $(cat "$dir/train.out")"
  [[ -s $dir/fmnist-mlp.safetensors ]] || fail "$label: train saved no fmnist-mlp.safetensors"
  (cd "$dir" && ./predict fmnist-mlp.safetensors "${IMAGES[@]}") >"$dir/predict.out" 2>&1 ||
    fail "$label: predict exited $?: $(cat "$dir/predict.out")"
  local img
  for img in "${IMAGES[@]}"; do
    grep -Eq "^$img: ($CLASSES) \([0-9.]+%\)" "$dir/predict.out" || fail "$label: predict printed no class for $img: $(cat "$dir/predict.out")"
  done
  pass "$label: train (test accuracy $acc), predict: $(sed 's|.*/||' "$dir/predict.out" | tr '\n' ' ')"
}

# The program's predict command agrees with the library's on the same weights.
check_cli_agrees() {
  local dir=$1 want got
  "$PREFIX/bin/ptrain" predict --checkpoint "$dir/fmnist-mlp.safetensors" --top 1 "${IMAGES[@]}" >"$dir/cli.out" 2>&1 ||
    fail "ptrain predict exited $?: $(cat "$dir/cli.out")"
  sed -E 's/ [0-9.]+%$//' "$dir/cli.out" >"$dir/cli.classes"
  for img in "${IMAGES[@]}"; do
    want=$(sed -n "s|^$img: \\(.*\\) ([0-9.]*%).*|\\1|p" "$dir/predict.out")
    [[ -n $want ]] || fail "no class for $img in: $(cat "$dir/predict.out")"
    grep -qxF "$img: $want" "$dir/cli.classes" || fail "ptrain predict and the example disagree on $img (example: '$want'): $(cat "$dir/cli.out")"
  done
  pass "the installed ptrain predict gives the example's classes"
}

# ---- pkg-config -----------------------------------------------------------
mkdir "$TMP/pc"
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
flags=$(pkg-config --cflags --libs ptrain 2>&1) || fail "pkg-config --cflags --libs ptrain: $flags"
read -ra PC <<<"$flags"
for ex in train predict; do
  cc -std=c11 -Wall -Wextra -Werror "${SAN[@]}" -o "$TMP/pc/$ex" "$EXAMPLES/$ex.c" "${PC[@]}" -Wl,-rpath,"$LIBDIR" \
    >"$TMP/cc.log" 2>&1 || fail "cc $ex.c \$(pkg-config --cflags --libs ptrain): $(cat "$TMP/cc.log")"
done
readelf -d "$TMP/pc/train" | grep -q 'NEEDED.*\[libptrain\.so\.0\.3\]' || fail "train (pkg-config) does not link libptrain.so.0.3"
run_examples "$TMP/pc" "pkg-config"
check_cli_agrees "$TMP/pc"

# ---- CMake: find_package(ptrain) -------------------------------------------
mkdir "$TMP/cmake"
cat >"$TMP/cmake/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.22)
project(ptrain_examples C)
find_package(ptrain 0.1 REQUIRED)
foreach(ex train predict)
  add_executable(\${ex} "$EXAMPLES/\${ex}.c")
  target_link_libraries(\${ex} PRIVATE ptrain::ptrain)
  add_executable(\${ex}_static "$EXAMPLES/\${ex}.c")
  target_link_libraries(\${ex}_static PRIVATE ptrain::ptrain_static)
endforeach()
EOF
"$CMAKE" -S "$TMP/cmake" -B "$TMP/cmake/build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror ${SAN[*]}" -DCMAKE_EXE_LINKER_FLAGS="${SAN[*]}" >"$TMP/cmake.log" 2>&1 ||
  fail "cmake with find_package(ptrain): $(cat "$TMP/cmake.log")"
"$CMAKE" --build "$TMP/cmake/build" >"$TMP/cmake.log" 2>&1 || fail "building with find_package(ptrain): $(cat "$TMP/cmake.log")"
readelf -d "$TMP/cmake/build/train" | grep -q 'NEEDED.*\[libptrain\.so\.0\.3\]' || fail "train (ptrain::ptrain) does not link libptrain.so.0.3"
! readelf -d "$TMP/cmake/build/train_static" | grep -q 'NEEDED.*libptrain' || fail "train_static (ptrain::ptrain_static) links libptrain.so"
run_examples "$TMP/cmake/build" "find_package, ptrain::ptrain"
mkdir "$TMP/static"
cp "$TMP/cmake/build/train_static" "$TMP/static/train"
cp "$TMP/cmake/build/predict_static" "$TMP/static/predict"
run_examples "$TMP/static" "find_package, ptrain::ptrain_static"
