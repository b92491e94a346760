# A file-size limit (ulimit -f, or a batch system's) reached while a
# checkpoint is written: the write fails (EFBIG) and the run ends as on a
# full disk, with a message naming the file and the limit, exit 1, and no
# temporary file left; not killed by SIGXFSZ (exit 153) without a word.
# Unlike the other tests' limits, SIGXFSZ is left at its default here: the
# program itself must ignore it.
source "$(dirname "$0")/lib.sh"
need_fmnist

trap - XFSZ
ck=$TMP/ckU
rc=0
# 1000 KiB: the weights of fmnist-mlp (0.6 MB) fit, Adam's state (1.3 MB) does not.
(ulimit -f 1000; exec "$PTRAIN" train --model fmnist-mlp --threads 1 --max-steps 20 --save-model --checkpoint-every 5 \
  --checkpoint-dir "$ck") >"$TMP/out" 2>"$TMP/err" || rc=$?
[[ $rc == 1 ]] || fail "a file-size limit: exit $rc, expected 1: $(cat "$TMP/err")"
grep -Eq "$ck/\.partial-step-000000000005\.[0-9]+@[^/]+/state\.safetensors: the checkpoint is larger than this process may write \(its file-size limit, ulimit -f, is 1000 KiB\): it needs about [0-9.]+ MiB; $ck holds no earlier checkpoint" \
  "$TMP/err" || fail "the file-size limit's message: $(cat "$TMP/err")"
grep -qi "no space left" "$TMP/err" && fail "a file-size limit called a full disk: $(cat "$TMP/err")"
left=$(cd "$ck" && ls -A | grep -v '^\.lock$' || true)
[[ -z $left ]] || fail "left in the checkpoint directory: $left"
pass "a file-size limit at a save: exit 1 naming the file and the limit, no temporary file"
