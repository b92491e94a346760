# Shared by the benchmarks. cpu.sh and time_to_acc.sh compare runs one by
# one: they wait for the machine to be quiet before a run and measure
# afterwards how much CPU other processes took during it, so a disturbed
# run can be flagged or repeated. The caller sets TMP (a scratch
# directory), IDLE_MIN, IDLE_WAIT; messages start with the script's name.
# parallel.sh and pipeline.sh read training seconds from --metrics files.
CLK_TCK=$(getconf CLK_TCK)

# The idle percentage of all CPUs over the next second.
idle_pct() {
  local a b i total=0
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 1
  read -r -a b < <(grep '^cpu ' /proc/stat)
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  echo $((total > 0 ? 100 * (b[4] - a[4] + b[5] - a[5]) / total : 100))
}

# Waits (up to IDLE_WAIT s) for the machine to be IDLE_MIN% idle; sets
# idle_seen to the idle percentage last seen (-1 when IDLE_MIN is 0).
wait_idle() {
  local waited=0
  idle_seen=-1
  ((IDLE_MIN > 0)) || return 0
  idle_seen=$(idle_pct)
  while ((idle_seen < IDLE_MIN && waited < IDLE_WAIT)); do
    sleep 4
    waited=$((waited + 5))
    idle_seen=$(idle_pct)
  done
  ((idle_seen >= IDLE_MIN)) ||
    echo "${0##*/}: warning: machine only ${idle_seen}% idle after ${IDLE_WAIT} s of waiting; measuring anyway" >&2
}

# Busy jiffies of all CPUs since boot.
busy_jiffies() {
  local a i busy=0
  read -r -a a < <(grep '^cpu ' /proc/stat)
  for i in 1 2 3 6 7 8; do busy=$((busy + a[i])); done
  echo "$busy"
}

# Sets cpu_now to the CPU seconds of this shell's finished children (bash's
# `times`; read in this shell, not in a $(...) subshell, whose children
# would be its own).
children_cpu() {
  times >"$TMP/times"
  cpu_now=$(tail -n 1 "$TMP/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); s += p[1] * 60 + p[2] } printf "%.3f", s }')
}

# mark_start waits for a quiet machine and notes the clocks (c0, b0, w0);
# mark_end sets `other` to the cores' worth of CPU that something other
# than this shell's children used since: all CPU time from /proc/stat less
# the run's own.
mark_start() {
  wait_idle
  children_cpu
  c0=$cpu_now b0=$(busy_jiffies) w0=$(date +%s.%N)
}
mark_end() {
  local w1 b1
  w1=$(date +%s.%N) b1=$(busy_jiffies)
  children_cpu
  other=$(awk -v b="$((b1 - b0))" -v hz="$CLK_TCK" -v c0="$c0" -v c1="$cpu_now" -v w0="$w0" -v w1="$w1" \
    'BEGIN { o = (b / hz - (c1 - c0)) / (w1 - w0); printf "%.3f", o < 0 ? 0 : o }')
}

# The training seconds of the last epoch line of a --metrics file.
seconds_of() { sed -n 's/.*"seconds":\([0-9.e+-]*\).*/\1/p' "$1" | tail -n 1; }
