#!/bin/bash
# The convolutions' transpositions prefetch ahead in 16 planes at once
# (pt_prefetch16_planes), more streams than the hardware prefetcher
# follows. GCC once deleted every call to that helper as dead code (a
# prefetch has no side effects in its model) and no binary held a prefetch
# for a day, with nothing failing but the speed. This checks the objects:
# each level's conv_direct.c and conv_winograd.c must hold prefetches.
# usage: test_prefetch.sh OBJDUMP OBJECT...   (every level's kernel objects)
set -euo pipefail
objdump=$1
shift
[ -x "$objdump" ] || command -v "$objdump" >/dev/null || { echo "SKIP: no objdump ($objdump)"; exit 77; }
status=0 checked=0
for obj in "$@"; do
  case $obj in */conv_direct.c.o | */conv_winograd.c.o) ;; *) continue ;; esac
  level=$(echo "$obj" | sed -n 's|.*/pt_ops_\([a-z0-9]*\)\.dir/.*|\1|p')
  n=$("$objdump" -d "$obj" | grep -c -E $'\t(prefetch[a-z0-9]*|prfm)[ \t]' || true)
  checked=$((checked + 1))
  if [ "$n" -eq 0 ]; then
    echo "FAIL: ${level:-?} level: $(basename "$obj" .o) holds no prefetch instruction"
    status=1
  else
    echo "ok: ${level:-?} level: $(basename "$obj" .o): $n prefetches"
  fi
done
[ $checked -gt 0 ] || { echo "FAIL: no conv_direct.c.o or conv_winograd.c.o among the objects given"; exit 1; }
exit $status
