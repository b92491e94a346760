# Shared by the data-parallel tests: the end-to-end helpers of tests/cli,
# and a comparison of two runs' checkpoints. Scripts get the ptrain binary
# as $1 and the st_close tool as $2.
source "$(dirname "${BASH_SOURCE[0]}")/../cli/lib.sh"
ST_CLOSE=$2

# check_close NAME REFERENCE_DIR CANDIDATE_DIR: the two model.safetensors
# agree within 1e-5 relative (st_close.c says how that is measured).
check_close() {
  "$ST_CLOSE" "$2/model.safetensors" "$3/model.safetensors" 1e-5 >"$TMP/close" 2>&1 ||
    fail "$1: $(cat "$TMP/close")"
  pass "$1: $(cat "$TMP/close")"
}
