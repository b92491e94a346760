# --parallel ddp across two hosts: two network namespaces on this machine,
# joined by a veth pair, stand in for two machines. mpirun starts in the first
# with a hostfile naming both addresses; its launch agent, which would be ssh
# between real machines, enters the second namespace instead, with a clean
# environment as ssh would give. Between the hosts MPI talks TCP over the
# veth only. Each rank records its hostname and the addresses it sees, so the
# test knows the ranks really ran on different "hosts". For 4 steps, 2 hosts
# x 1 rank x 64 must end with the weights of 2 ranks x 64 on one host and of
# 1 process x 128, and 2 hosts x 2 ranks x 32 (shared memory within a host)
# with those of 1 x 128, within 1e-5 relative.
# Needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN) for `ip netns`; skipped
# where namespaces cannot be made.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
need_fmnist
need_mpi

skip() { echo "SKIPPED: $*"; exit 77; }
oneline() { tr -s '\n' ' ' <"$1" | sed 's/ *$//'; }
command -v ip >/dev/null || skip "no 'ip' command (apt-get install iproute2)"
command -v timeout >/dev/null || skip "no 'timeout' command (coreutils)"
PTRAIN=$(realpath "$PTRAIN")
ST_CLOSE=$(realpath "$ST_CLOSE")

# The addresses live only inside the two namespaces, so a fixed subnet cannot
# clash with this machine's networks or with another run of this test; the
# namespace names carry the process id so that concurrent runs do not collide.
NET=10.213.77
HOST_A=$NET.1 HOST_B=$NET.2
NS_A=ptrain-$$-a NS_B=ptrain-$$-b
made=()

cleanup() {
  local ns pid
  for ns in "${made[@]}"; do
    # A rank or orted left behind by a failure would keep the namespace
    # alive after `ip netns del`; end the ones inside it (ours, by pid).
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || echo "warning: could not delete network namespace $ns" >&2
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

for ns in "$NS_A" "$NS_B"; do
  ip netns add "$ns" 2>"$TMP/err" ||
    skip "cannot create a network namespace (ip netns add: $(oneline "$TMP/err")); needs root or CAP_SYS_ADMIN+CAP_NET_ADMIN"
  made+=("$ns")
done
ip netns exec "$NS_A" true 2>"$TMP/err" ||
  skip "cannot enter a network namespace (ip netns exec: $(oneline "$TMP/err"))"
# The veth ends are created directly inside the namespaces: nothing appears
# in this machine's own namespace, and deleting the namespaces deletes them.
ip link add veth-a netns "$NS_A" type veth peer name veth-b netns "$NS_B" 2>"$TMP/err" ||
  skip "cannot create a veth pair (ip link add type veth: $(oneline "$TMP/err"))"
ip -n "$NS_A" addr add "$HOST_A/24" dev veth-a
ip -n "$NS_B" addr add "$HOST_B/24" dev veth-b
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set veth-a up
ip -n "$NS_B" link set veth-b up

# Both namespaces share this machine's hostname, /tmp and /dev/shm, and Open
# MPI names its session directories and shared-memory segments after the
# hostname: two "hosts" called alike collide there (a segfault with vader, a
# hang with two ranks per host). Each gets a hostname of its own, in a UTS
# namespace, as real machines would have.
command -v unshare >/dev/null || skip "no 'unshare' command (util-linux)"
ip netns exec "$NS_A" unshare --uts hostname ptrain-test-a 2>"$TMP/err" ||
  skip "cannot give a namespace its own hostname (unshare --uts: $(oneline "$TMP/err"))"

# The launch agent: Open MPI calls it as `agent [options] HOST COMMAND...`,
# like ssh, with the remote command as words for a shell. It maps the host
# to its namespace and runs the command there with only PATH and HOME, so
# anything the far side needs must come through mpirun (-mca, -x).
cat >"$TMP/agent" <<EOF
#!/bin/bash
echo "agent: \$*" >>"$TMP/agent.log"
while [[ \${1:-} == -* ]]; do shift; done
case \${1:-} in
  $HOST_A) ns=$NS_A name=ptrain-test-a ;;
  $HOST_B) ns=$NS_B name=ptrain-test-b ;;
  *) echo "agent: unknown host '\${1:-}'" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts env -i PATH="\$PATH" HOME="\$HOME" sh -c "hostname \$name && \$*"
EOF
chmod +x "$TMP/agent"

# mpirun runs on host A; between the hosts, TCP over the veth and nothing
# else. The OMPI_MCA_* settings from need_mpi reach the far side on orted's
# command line; other variables only with -x (ASAN_OPTIONS matters to a
# sanitizer build; the root-allowed pair is read by mpirun alone).
mpirun_a=(timeout -k 10 120 ip netns exec "$NS_A" unshare --uts sh -c 'hostname ptrain-test-a && exec "$@"' sh
  mpirun --mca plm_rsh_agent "$TMP/agent" --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24"
  -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x ASAN_OPTIONS)
common=(--model fmnist-mlp --no-shuffle --no-dropout --max-steps 4 --threads 1 --save-model --log-interval 1000)
# Each rank writes down its hostname and the IPv4 addresses it sees, then
# becomes ptrain.
where='{ hostname; '"$(command -v ip)"' -o -4 addr show; } >"$0.$OMPI_COMM_WORLD_RANK" && exec "$@"'

# two_hosts NAME SLOTS BTL BATCH HOST...: SLOTS ranks on each host train
# into $TMP/NAME; rank 0, 1, ... must have run on the HOSTs given, in order.
two_hosts() {
  local name=$1 slots=$2 btl=$3 batch=$4
  shift 4
  local np=$((2 * slots)) r=0 want other host start=$SECONDS map=()
  ((slots > 1)) || map=(--map-by node)
  printf '%s slots=%d\n' "$HOST_A" "$slots" "$HOST_B" "$slots" >"$TMP/hosts"
  rm -f "$TMP"/where.* "$TMP/agent.log"
  "${mpirun_a[@]}" -np $np --hostfile "$TMP/hosts" "${map[@]}" --mca btl "$btl" \
    sh -c "$where" "$TMP/where" "$PTRAIN" train "${common[@]}" --batch-size "$batch" --parallel ddp \
    --checkpoint-dir "$TMP/$name" >"$TMP/log" 2>"$TMP/err" ||
    fail "$name: mpirun across two namespaces exited $? (124: timed out): $(cat "$TMP/err")
launch agent calls: $(cat "$TMP/agent.log" 2>/dev/null)"
  for want in "$@"; do
    if [[ $want == "$HOST_A" ]]; then other=$HOST_B host=ptrain-test-a; else other=$HOST_A host=ptrain-test-b; fi
    [[ -s $TMP/where.$r ]] || fail "$name: rank $r did not record where it ran: $(cat "$TMP/err")"
    if [[ $(head -n 1 "$TMP/where.$r") != "$host" ]] || ! grep -q " $want/24 " "$TMP/where.$r" ||
      grep -q " $other/24 " "$TMP/where.$r"; then
      fail "$name: rank $r is not on $want alone: it saw $(cat "$TMP/where.$r")"
    fi
    r=$((r + 1))
  done
  grep -q "agent: $HOST_B " "$TMP/agent.log" || fail "$name: mpirun did not go through the launch agent to $HOST_B"
  grep -q "data parallel: $np ranks (MPI)" "$TMP/log" || fail "$name: the log does not say it is ddp: $(cat "$TMP/log")"
  [[ $(grep -c "^epoch 1/1" "$TMP/log") == 1 ]] || fail "$name: more than rank 0 printed: $(cat "$TMP/log")"
  pass "$name: $np ranks, $slots per host, btl $btl, ranks on $*, $((SECONDS - start)) s"
}

# One rank per host, TCP only; then two per host, shared memory within each.
two_hosts 2x1 1 tcp,self 64 "$HOST_A" "$HOST_B"
two_hosts 2x2 2 tcp,vader,self 32 "$HOST_A" "$HOST_A" "$HOST_B" "$HOST_B"

timeout -k 10 120 mpirun -np 2 "$PTRAIN" train "${common[@]}" --batch-size 64 --parallel ddp \
  --checkpoint-dir "$TMP/one-host" >/dev/null 2>"$TMP/err" || fail "mpirun -np 2 on one host exited $?: $(cat "$TMP/err")"
timeout -k 10 120 "$PTRAIN" train "${common[@]}" --batch-size 128 --checkpoint-dir "$TMP/single" >/dev/null 2>"$TMP/err" ||
  fail "one process at batch 128 exited $?: $(cat "$TMP/err")"

check_close "2 hosts x 1 rank x 64 = 2 ranks x 64 on one host" "$TMP/one-host" "$TMP/2x1"
check_close "2 hosts x 1 rank x 64 = 1 x 128" "$TMP/single" "$TMP/2x1"
check_close "2 hosts x 2 ranks x 32 = 1 x 128" "$TMP/single" "$TMP/2x2"
