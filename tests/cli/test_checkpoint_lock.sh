# One run at a time in a checkpoint directory: a second run sharing it stops
# before training with an error naming the directory and the process that
# holds it; the lock goes with its holder (kill -9 included), so the next
# run takes the directory; a finished run leaves no lock file; and a save
# removes the partial saves of processes gone, never those of a live one
# (another host's only when older than any save takes).
# Where the filesystem has no locks the run warns and goes on.
source "$(dirname "$0")/lib.sh"
need_fmnist

dir=$TMP/shared
first=
live=
trap '[[ -n $first ]] && kill -9 "$first" 2>/dev/null; [[ -n $live ]] && kill "$live" 2>/dev/null; rm -rf "$TMP"' EXIT
run() { "$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$dir" "$@"; }

# the program itself in the background, not the function: $! is then its PID
"$PTRAIN" train --model fmnist-mlp --threads 1 --checkpoint-dir "$dir" --epochs 1000 --save-model --quiet \
  >"$TMP/first.out" 2>&1 &
first=$!
for _ in $(seq 1 600); do
  [[ -s $dir/.ptrain.lock ]] && break
  kill -0 "$first" 2>/dev/null || fail "the first run ended: $(cat "$TMP/first.out")"
  sleep 0.1
done
[[ -s $dir/.ptrain.lock ]] || fail "the first run did not lock $dir within a minute"
expect_exit 1 "checkpoint directory $dir is in use by another run: process $first on .* holds its lock \($dir/.ptrain.lock\); give each run its own --checkpoint-dir" -- \
  run --max-steps 5 --save-model
grep -q "epoch\|step" "$TMP/out" && fail "the second run trained before refusing: $(cat "$TMP/out")"
kill -0 "$first" 2>/dev/null || fail "the first run did not survive the second: $(cat "$TMP/first.out")"
pass "a second run in the same --checkpoint-dir: refused before training, naming the directory and PID $first"

kill -9 "$first"
wait "$first" 2>/dev/null || true
first=
# What it saved before the kill goes: an epoch of fmnist-mlp takes about a
# second, and a step-600 of its would be the newest generation, leaving the
# --resume runs below nothing to train and no save to look at partial ones.
rm -rf "$dir"/step-* "$dir/model.safetensors"
[[ -e $dir/.ptrain.lock ]] || fail "premise: kill -9 leaves the lock file"
run --max-steps 5 --save-model --quiet >"$TMP/third.out" 2>&1 || fail "after the holder was killed: $(cat "$TMP/third.out")"
[[ -d $dir/step-000000000005 ]] || fail "the run after the kill did not save: $(ls -A "$dir")"
[[ ! -e $dir/.ptrain.lock ]] || fail "a finished run left its lock file"
pass "the lock of a killed run is no lock; a finished run leaves none"

# Partial saves: of a live process kept, of a process gone removed.
sleep 600 &
live=$!
bash -c 'exit 0' &
dead=$!
wait "$dead"
mkdir "$dir/.partial-step-000000000001.$live" "$dir/.partial-step-000000000002.$dead"
mkdir "$dir/.partial-step-000000000003.$dead@elsewhere.example" "$dir/.partial-step-000000000004.$dead@elsewhere.example"
touch -d '1 day ago' "$dir/.partial-step-000000000004.$dead@elsewhere.example"
touch "$dir/.partial-step-000000000001.$live/model.safetensors" "$dir/.partial-step-000000000002.$dead/model.safetensors"
run --resume --max-steps 10 --save-model --quiet >"$TMP/partial.out" 2>&1 || fail "the save beside partial ones: $(cat "$TMP/partial.out")"
[[ -f $dir/.partial-step-000000000001.$live/model.safetensors ]] || fail "a live process's partial save was removed"
[[ ! -e $dir/.partial-step-000000000002.$dead ]] || fail "a dead process's partial save was kept"
# Another host's saves (a directory shared over NFS): its PIDs mean nothing
# here, so a recent one stays and only one older than any save goes.
[[ -d "$dir/.partial-step-000000000003.$dead@elsewhere.example" ]] || fail "another host's recent partial save was removed"
[[ ! -e "$dir/.partial-step-000000000004.$dead@elsewhere.example" ]] || fail "another host's day-old partial save was kept"
kill "$live"
live=
pass "a save removes the partial saves of processes gone and old ones of other hosts, not of a live one"

# No locks on this filesystem (PTRAIN_TEST_NO_LOCKS, a test hook: flock fails with ENOLCK, as on NFS
# mounted without locks): a warning, and the run goes on.
PTRAIN_TEST_NO_LOCKS=1 run --resume --max-steps 15 --save-model >"$TMP/nolock.out" 2>&1 || fail "without locks: $(cat "$TMP/nolock.out")"
grep -q "^warning: $dir cannot be locked (flock: No locks available; an NFS mount without locks?): nothing keeps a second run" \
  "$TMP/nolock.out" || fail "no warning without locks: $(cat "$TMP/nolock.out")"
[[ -d $dir/step-000000000015 && ! -e $dir/.ptrain.lock ]] || fail "without locks: $(ls -A "$dir")"
pass "a filesystem without locks: a warning, and the run saves as before"
