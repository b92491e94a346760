#!/bin/bash
# The kernels start on 64-byte boundaries (-falign-functions=64 on every
# level's objects), so that a kernel's loops keep their place against the
# cache lines and the instruction fetch whatever code lands before it.
# Without it, adding one unrelated kernel moved the AVX2 convolutions by
# 6,688 bytes and tutorial-cnn ran 0.92x as fast at 1 thread on Zen 3,
# the same code. This checks the objects: every global function of every
# level sits at a multiple of 64 in a section aligned to 64 or more.
# usage: test_align.sh OBJDUMP OBJECT...   (every level's kernel objects)
set -euo pipefail
objdump=$1
shift
[ -x "$objdump" ] || command -v "$objdump" >/dev/null || { echo "SKIP: no objdump ($objdump)"; exit 77; }
status=0 checked=0
for obj in "$@"; do
  level=$(echo "$obj" | sed -n 's|.*/pt_ops_\([a-z0-9]*\)\.dir/.*|\1|p')
  # section name -> log2 of its alignment, from the lines "Idx Name Size ... 2**N"
  aligns=$("$objdump" -h "$obj" | awk '$NF ~ /^2\*\*[0-9]+$/ {sub(/^2\*\*/, "", $NF); print $2, $NF}')
  while read -r value section name; do
    checked=$((checked + 1))
    exp=$(echo "$aligns" | awk -v s="$section" '$1 == s {print $2}')
    if [ -z "$exp" ] || [ "$exp" -lt 6 ] || [ $((16#$value % 64)) -ne 0 ]; then
      echo "FAIL: ${level:-?} level: $(basename "$obj" .o): $name at 0x$value in $section (aligned 2**${exp:-?})"
      status=1
    fi
  done < <("$objdump" -t "$obj" | awk '$2 == "g" && $3 == "F" {print $1, $4, $NF}')
done
[ $checked -gt 0 ] || { echo "FAIL: no global function among the objects given"; exit 1; }
[ $status -ne 0 ] || echo "ok: $checked kernel functions on 64-byte boundaries in $# objects"
exit $status
