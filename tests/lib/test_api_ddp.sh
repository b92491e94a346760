# parallel "ddp" through the library, under mpirun: a rank whose settings
# fail its checks alone reaches the other rank, which gets that rank's
# reason, instead of leaving it in MPI_Init for ever (its checks once came
# before MPI started); and a run whose ranks agree trains on both.
# Arguments: the ddp_start program, the ptrain binary (for mpi.sh).
set -euo pipefail
PROG=$1
PTRAIN=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../parallel/mpi.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
need_mpi

rc=0
timeout -k 5 90 mpirun -np 2 "$PROG" badlr "$TMP/ck-bad" >"$TMP/bad.out" 2>&1 || rc=$?
[[ $rc != 124 && $rc != 137 ]] || fail "a rank's bad lr: the job hung: $(cat "$TMP/bad.out")"
grep -q "^rank 1: status [1-9].*--lr 5000: expected a number in \[0, 1000\]" "$TMP/bad.out" ||
  fail "rank 1's own reason: $(cat "$TMP/bad.out")"
grep -q "^rank 0: status [1-9].*rank 1 of 2: .*--lr 5000" "$TMP/bad.out" ||
  fail "rank 0 did not get rank 1's reason: $(cat "$TMP/bad.out")"
echo "ok: a bad lr on rank 1 alone: both ranks return its reason (exit $rc)"

timeout -k 5 90 mpirun -np 2 "$PROG" ok "$TMP/ck-ok" >"$TMP/ok.out" 2>&1 ||
  fail "ddp through the library: $(cat "$TMP/ok.out")"
[[ $(grep -c "^rank [01]: status 0: trained" "$TMP/ok.out") == 2 ]] ||
  fail "ddp through the library: $(cat "$TMP/ok.out")"
echo "ok: ddp through the library trains on both ranks"
