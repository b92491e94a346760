#!/bin/bash
# at_level.sh LEVEL PTRAIN SCRIPT ARGS...: runs a script test with the
# kernels at LEVEL (PTRAIN_CPU), or exits 77 (skipped), saying why, where
# this CPU or build lacks the level.
level=$1 ptrain=$2
shift
if ! why=$(PTRAIN_CPU=$level "$ptrain" info 2>&1 >/dev/null); then
  echo "SKIPPED: ${why#ptrain: }"
  exit 77
fi
export PTRAIN_CPU=$level
script=$2
shift 2
exec bash "$script" "$ptrain" "$@"
