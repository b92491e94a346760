#!/bin/bash
# libptrain.so exports the functions include/ptrain.h declares with PT_API,
# and nothing else: every other symbol is the library's own business, and
# an exported one would become part of the ABI by accident.
# libptrain.a cannot hide its internal symbols, but defines none under
# another library's names: a program linking it with libcublas must get
# cuBLAS's functions, not ptrain's lazy wrappers of them.
# usage: test_exports.sh LIBPTRAIN.so include/ptrain.h [LIBPTRAIN.a]
set -euo pipefail
lib=$1 header=$2 static=${3:-}
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }
declared=$(grep -v '^#' "$header" | tr '\n' ' ' | grep -oE 'PT_API [^;{]*\(' | sed -E 's/\($//; s/.*[ *]//' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
[ -n "$declared" ] || { echo "FAIL: found no PT_API declaration in $header"; exit 1; }
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
status=0
if [ -n "$extra" ]; then
  echo "FAIL: $lib exports symbols that $header does not declare with PT_API:"
  echo "$extra" | sed 's/^/  /'
  status=1
fi
if [ -n "$missing" ]; then
  echo "FAIL: $header declares these with PT_API but $lib does not export them:"
  echo "$missing" | sed 's/^/  /'
  status=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" != libptrain.so.0.3 ]; then
  echo "FAIL: $lib's soname is '$soname', expected libptrain.so.0.3"
  status=1
fi
if [ -n "$static" ]; then
  foreign=$(nm -g --defined-only "$static" 2>/dev/null | awk 'NF == 3 {print $3}' |
    grep -E '^(cublas|cudnn|nccl|cuda[A-Z]|MPI_|cblas_|inflate|deflate|png_|jpeg_|cJSON_)' | sort -u || true)
  if [ -n "$foreign" ]; then
    echo "FAIL: $static defines symbols under other libraries' names:"
    echo "$foreign" | sed 's/^/  /'
    status=1
  fi
fi
[ $status = 0 ] && echo "ok: $(echo "$exported" | wc -l) symbols exported, all of them the API's; soname $soname"
exit $status
