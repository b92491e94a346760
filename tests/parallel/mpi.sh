# Shared by the ddp tests: how to run mpirun here, or skip when this machine
# or this build cannot.

# mpi_usable: true when mpirun runs ptrain's ranks here; otherwise false,
# printing why. For a test whose MPI part is optional; need_mpi skips the
# whole test instead.
mpi_usable() {
  command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin)"; return 1; }
  # The whole of info's output first: grep -q ending a pipe early can kill
  # its writer, and pipefail would read that as a build without MPI.
  grep -q "MPI: .*ddp available" <<<"$("$PTRAIN" info)" ||
    { echo "this ptrain was built without MPI (apt-get install libopenmpi-dev, rebuild)"; return 1; }
}

need_mpi() {
  local why
  why=$(mpi_usable) || { echo "SKIPPED: $why"; exit 77; }
  # Test machines and CI containers often run as root, which mpirun refuses
  # unless told; ranks oversubscribe the 2 cores, and the single-copy
  # mechanism needs ptrace rights that containers withhold.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  # Leaks inside Open MPI are not ours to fix; keep sanitizer builds quiet about them.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0
}

# descends PID ANCESTOR: whether ANCESTOR is PID's parent, grandparent, ...
descends() {
  local p=$1 parent
  while [[ $p -gt 1 ]]; do
    parent=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null) || return 1
    [[ -n $parent ]] || return 1
    [[ $parent == "$2" ]] && return 0
    p=$parent
  done
  return 1
}

# rank_pid RANK JOB: the pid of the ptrain process that the mpirun below the
# process JOB started as RANK. Only this test's job: ctest runs other ddp
# tests at the same time, whose ranks have the same numbers.
rank_pid() {
  local p
  for p in $(pgrep -x ptrain); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && descends "$p" "$2"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# wait_for PATTERN FILE SECONDS: until FILE has a line matching PATTERN.
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -Eq -- "$1" "$2" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
