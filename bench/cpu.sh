#!/usr/bin/env bash
# cpu.sh - CPU training throughput: ptrain against PyTorch, side by side.
#
# For each round (ROUNDS, default 3), each thread count (1 and 2) and each
# model preset (mnist-cnn tutorial-cnn fmnist-mlp), runs one after another:
#   ptrain        ./build/ptrain bench --model M --threads T --steps N --warmup W --json
#   torch old     /usr/bin/python3 bench/pytorch_bench.py ...  (Debian's PyTorch 1.13)
#   torch new     /opt/torch-latest/bin/python bench/pytorch_bench.py ...  (PyPI's newest)
# and, once per thread count per round, ./build/ptrain bench --sgemm --threads T
# --json (the SGEMM ceiling the GFLOP/s are compared with). Every framework
# trains the preset's model (train mode, dropout on) with the preset's
# optimizer and batch size on Fashion-MNIST batches staged in memory before
# timing: W warm-up steps, then N timed steps (per model unless STEPS is set).
#
# The runs are interleaved (ptrain, old, new; then old, new, ptrain; then
# new, ptrain, old; ...) so that a noisy neighbour hits all three alike and
# none always runs first, and repeated ROUNDS times so the noise
# shows; the table gives the median and the best over the rounds. Before each
# run the script waits (up to IDLE_WAIT seconds) for the machine to be at least
# IDLE_MIN% idle over one second, and records the idle share it saw; after it,
# it compares the CPU time all processes used (/proc/stat) with the run's own
# (its children's rusage): if other processes used more than OTHER_MAX of a
# core on average, the run is marked "contended" and made again (at most
# RETRIES times), and the table leaves it out.
#
# Writes every JSON line to bench/results/cpu-<date>.jsonl (a first "meta"
# line, then each run's line as the benchmark printed it plus "round",
# "idle_pct", "other_cores" and "contended"), then prints the tables (bench/cpu_table.py FILE prints them
# again from a results file).
#
# Usage (from anywhere; paths are relative to the repository root):
#   bench/cpu.sh
#   ROUNDS=5 MODELS="tutorial-cnn" bench/cpu.sh
# Environment:
#   MODELS       presets (default: mnist-cnn tutorial-cnn fmnist-mlp)
#   THREADS      thread counts (default: 1 2)
#   ROUNDS       rounds (default 3)
#   STEPS        timed steps per run, for every model (default: per model,
#                so that ptrain's runs last about a second or more:
#                mnist-cnn 40, tutorial-cnn 100, fmnist-mlp 2000, others 50)
#   WARMUP       warm-up steps per run (default 5)
#   MIN_SECONDS  each run, ptrain's and PyTorch's, repeats its N steps until
#                it has run at least this long (default 5; TORCH_SECONDS, its
#                old name, is read too): shorter blocks caught PyTorch's
#                start-up and scheduler noise, and runs of equal length meet
#                a noisy host's neighbours alike (ptrain's 2,000 steps of
#                fmnist-mlp took 1.3 s against PyTorch's 5). PyTorch also
#                flushes denormal floats to zero, as ptrain does by default,
#                so the long runs on 10 staged batches do not slow it alone.
#   LEVEL        hold both sides to one instruction-set level: avx2 sets
#                PTRAIN_CPU=avx2 for ptrain and ATEN_CPU_CAPABILITY=avx2,
#                ONEDNN_MAX_CPU_ISA=AVX2 and MKL_ENABLE_INSTRUCTIONS=AVX2 for
#                PyTorch (how an AVX-512 machine checks the AVX2 figures);
#                generic likewise with default/SSE4_1. Default: each at its best.
#   PTRAIN       the ptrain binary (default build/ptrain; the script runs a
#                copy taken at the start, so a rebuild mid-run cannot mix builds)
#   PY_OLD       Python with Debian's PyTorch (default /usr/bin/python3)
#   PY_NEW       Python with the newest PyTorch (default /opt/torch-latest/bin/python)
#   IDLE_MIN     idle percentage to wait for before each run (default 90; 0: don't wait)
#   IDLE_WAIT    most seconds to wait for it (default 120)
#   OTHER_MAX    cores' worth of other processes' CPU use that marks a run
#                contended (default 0.10)
#   RETRIES      times a contended run is made again (default 3)
#   HOST_MIN     a virtual machine's neighbours on the same physical cores
#                slow it without showing in /proc/stat (steal time stays
#                near 0; SGEMM at 1 thread measured 77-95 GFLOP/s on one
#                idle EPYC guest within minutes). So each run is framed by
#                a 0.2 s SGEMM probe (1024^3, at the run's thread count),
#                and where either probe ran below HOST_MIN times the best
#                probe at that thread count so far (3 probes at the start
#                set it), the run is marked contended ("host_contended")
#                and made again like one disturbed by other processes.
#                Default 0.93; 0: no probes.
#   RESULTS      the results file (default bench/results/cpu-<date>.jsonl)
# Nothing here touches the network. Run nothing else heavy meanwhile.

set -euo pipefail

cd "$(dirname "$0")/.."

MODELS=${MODELS:-"mnist-cnn tutorial-cnn fmnist-mlp"}
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-}
# Timed steps for a model. fmnist-mlp's 50 steps took 30 ms for ptrain and
# 80 ms for PyTorch, short enough that one scheduler hiccup moved a median by
# 20%. Thousands of steps on the 10 staged batches drive its values into
# denormal floats, which both sides now flush (docs/benchmarks.md).
steps_for() {
  if [[ -n $STEPS ]]; then
    echo "$STEPS"
    return
  fi
  case $1 in
    mnist-cnn) echo 40 ;;
    tutorial-cnn) echo 100 ;;
    fmnist-mlp) echo 2000 ;;
    *) echo 50 ;;
  esac
}
steps_meta=$(for m in $MODELS; do printf '%s=%s ' "$m" "$(steps_for "$m")"; done)
steps_meta=${steps_meta% }
WARMUP=${WARMUP:-5}
MIN_SECONDS=${MIN_SECONDS:-${TORCH_SECONDS:-5}}
LEVEL=${LEVEL:-}
case $LEVEL in
  "") ;;
  avx2) export PTRAIN_CPU=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ;;
  avx512) export PTRAIN_CPU=avx512 ;;
  generic) export PTRAIN_CPU=generic ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 ;;
  *) echo "cpu.sh: LEVEL=$LEVEL: expected avx2, avx512 or generic" >&2; exit 1 ;;
esac
PTRAIN=${PTRAIN:-build/ptrain}
PY_OLD=${PY_OLD:-/usr/bin/python3}
PY_NEW=${PY_NEW:-/opt/torch-latest/bin/python}
IDLE_MIN=${IDLE_MIN:-90}
IDLE_WAIT=${IDLE_WAIT:-120}
mkdir -p bench/results
RESULTS=${RESULTS:-bench/results/cpu-$(date +%Y%m%d-%H%M%S).jsonl}

die() { echo "cpu.sh: $*" >&2; exit 1; }
[[ -x $PTRAIN ]] || die "no ptrain binary at $PTRAIN (build it first: make)"
"$PTRAIN" bench --help >/dev/null 2>&1 || die "$PTRAIN has no 'bench' command: rebuild it"
for py in "$PY_OLD" "$PY_NEW"; do
  "$py" -c 'import torch' 2>/dev/null || die "$py cannot import torch"
done

# Run a snapshot of the binary: the build directory may be rebuilt meanwhile.
TMP=$(mktemp -d /tmp/ptrain-cpu-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp "$PTRAIN" "$TMP/ptrain"
BIN=$TMP/ptrain

torch_old=$("$PY_OLD" -c 'import torch; print(torch.__version__)')
torch_new=$("$PY_NEW" -c 'import torch; print(torch.__version__)')
ptrain_version=$("$BIN" --version | head -n 1)
cpu_model=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
cpu_level=$("$BIN" bench --model fmnist-mlp --steps 1 --warmup 0 --json | jq -r .cpu_level)
torch_caps=$(for py in "$PY_OLD" "$PY_NEW"; do "$py" -c 'import torch; print(torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "?")' 2>/dev/null || echo '?'; done | paste -sd/)
git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git_dirty=$([[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]] && echo true || echo false)

jq -cn --arg date "$(date -Iseconds)" --arg cpu "$cpu_model" --argjson cores "$(nproc)" \
  --arg ptrain "$ptrain_version" --arg git "$git_rev" --argjson dirty "$git_dirty" \
  --arg torch_old "$torch_old" --arg py_old "$PY_OLD" --arg torch_new "$torch_new" --arg py_new "$PY_NEW" \
  --argjson rounds "$ROUNDS" --arg steps "$steps_meta" --argjson warmup "$WARMUP" \
  --arg level "$cpu_level" --arg torch_caps "$torch_caps" --argjson min_seconds "$MIN_SECONDS" \
  '{meta: true, date: $date, cpu: $cpu, cores: $cores, ptrain: $ptrain, git: $git, git_dirty: $dirty,
    torch_old: $torch_old, python_old: $py_old, torch_new: $torch_new, python_new: $py_new,
    rounds: $rounds, steps: $steps, warmup: $warmup, cpu_level: $level, torch_cpu_capability: $torch_caps,
    min_seconds: $min_seconds}' > "$RESULTS"

echo "ptrain: $ptrain_version (git $git_rev$([[ $git_dirty == true ]] && echo ', uncommitted changes'))"
echo "PyTorch $torch_old ($PY_OLD) and $torch_new ($PY_NEW)"
echo "CPU: $cpu_model, $(nproc) cores; ptrain kernels $cpu_level, PyTorch CPU capability $torch_caps"
echo "$ROUNDS rounds of $WARMUP warm-up + timed steps ($steps_meta)"
echo "results: $RESULTS"
echo

source bench/lib.sh

failures=0
# run ROUND LABEL COMMAND...: runs one benchmark and appends its JSON line.
# A run during which other processes used more than OTHER_MAX of a core (on
# average) is marked "contended" and, up to RETRIES times, run again once the
# machine is quiet; bench/cpu_table.py leaves contended runs out unless the
# retries ran out ("kept": true).
OTHER_MAX=${OTHER_MAX:-0.10}
RETRIES=${RETRIES:-3}
HOST_MIN=${HOST_MIN:-0.93}
declare -A host_best=()
# probe T: sets probed to the SGEMM GFLOP/s at T threads (1024^3, about
# 0.2 s at 1 thread) and keeps the best per thread count, the host's quiet
# rate as far as known. (Called in this shell, not in $(...), so that
# host_best keeps what it learns.)
probe() {
  probed=$("$BIN" bench --sgemm --size 1024 --threads "$1" --json | jq -r .sgemm_gflops)
  if [[ -z ${host_best[$1]:-} ]] || awk -v g="$probed" -v b="${host_best[$1]}" 'BEGIN { exit !(g > b) }'; then
    host_best[$1]=$probed
  fi
}
probing=false
awk -v m="$HOST_MIN" 'BEGIN { exit !(m > 0) }' && probing=true
if [[ $probing == true ]]; then
  for t in $THREADS; do
    for _ in 1 2 3; do probe "$t"; done
    echo "host probe (SGEMM 1024^3) at $t thread(s): best of 3 ${host_best[$t]} GFLOP/s"
  done
  echo
fi
# run ROUND THREADS LABEL COMMAND...
run() {
  local round=$1 threads=$2 label=$3 idle out attempt b0 c0 w0 other contended kept pb=0 pa=0 host=false why
  shift 3
  for ((attempt = 1; ; attempt++)); do
    mark_start
    idle=$idle_seen
    if [[ $probing == true ]]; then
      probe "$threads"
      pb=$probed
    fi
    if ! out=$("$@" 2>"$TMP/stderr"); then
      echo "cpu.sh: round $round: $label failed: $*" >&2
      sed 's/^/  /' "$TMP/stderr" >&2
      jq -cn --arg what "$label" --arg cmd "$*" --argjson round "$round" \
        '{error: true, "label": $what, command: $cmd, round: $round}' >> "$RESULTS"
      failures=$((failures + 1))
      return 0
    fi
    if [[ $probing == true ]]; then
      probe "$threads"
      pa=$probed
      host=$(awk -v a="$pb" -v b="$pa" -v best="${host_best[$threads]}" -v m="$HOST_MIN" \
        'BEGIN { print (a < m * best || b < m * best) ? "true" : "false" }')
    fi
    mark_end # other: cores' worth of CPU that something else used meanwhile
    contended=$(awk -v o="$other" -v m="$OTHER_MAX" 'BEGIN { print (o > m) ? "true" : "false" }')
    [[ $host == true ]] && contended=true
    kept=false
    [[ $contended == true && $attempt -gt $RETRIES ]] && kept=true
    out=$(printf '%s\n' "$out" | grep '^{' | tail -n 1 || true)
    if ! printf '%s' "$out" | jq -e . >/dev/null 2>&1; then
      echo "cpu.sh: round $round: $label printed no JSON line" >&2
      failures=$((failures + 1))
      return 0
    fi
    printf '%s\n' "$out" | jq -c --argjson round "$round" --argjson idle "$idle" --argjson other "$other" \
      --argjson contended "$contended" --argjson kept "$kept" --argjson host "$host" \
      --argjson pb "$pb" --argjson pa "$pa" --argjson best "${host_best[$threads]:-0}" \
      '. + {round: $round, idle_pct: $idle, other_cores: $other, contended: $contended}
         + (if $best > 0 then {host_probe: [$pb, $pa], host_best: $best, host_contended: $host} else {} end)
         + (if $kept then {kept: true} else {} end)' >> "$RESULTS"
    why="other processes used $other cores"
    [[ $host == true ]] && why="host probe $pb/$pa GFLOP/s against a best of ${host_best[$threads]}"
    printf '  %-36s %s%s\n' "$label" \
      "$(printf '%s' "$out" | jq -r 'if .sgemm_gflops then "\(.sgemm_gflops) GFLOP/s" else "\(.images_per_s) img/s, \(.step_ms) ms/step" end')" \
      "$([[ $contended == true ]] && echo "  [contended: $why$([[ $kept == true ]] && echo '; kept' || echo '; again')]")"
    [[ $contended == false || $kept == true ]] && return 0
    # a neighbour on the host stays for minutes at a time
    if [[ $host == true ]]; then sleep 20; else sleep 5; fi
  done
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS"
  for t in $THREADS; do
    run "$r" "$t" "sgemm T=$t" "$BIN" bench --sgemm --threads "$t" --json
    for m in $MODELS; do
      n=$(steps_for "$m")
      # each round starts with another of the three, so that none always
      # runs right after the same one (or first, on a cooler machine)
      for ((k = 0; k < 3; k++)); do
        case $(((r - 1 + k) % 3)) in
          0) run "$r" "$t" "$m T=$t ptrain" "$BIN" bench --model "$m" --threads "$t" --steps "$n" --warmup "$WARMUP" \
            --min-seconds "$MIN_SECONDS" --json ;;
          1) run "$r" "$t" "$m T=$t torch $torch_old" \
            "$PY_OLD" bench/pytorch_bench.py --model "$m" --threads "$t" --steps "$n" --warmup "$WARMUP" \
            --min-seconds "$MIN_SECONDS" --flush-denormal ;;
          2) run "$r" "$t" "$m T=$t torch $torch_new" \
            "$PY_NEW" bench/pytorch_bench.py --model "$m" --threads "$t" --steps "$n" --warmup "$WARMUP" \
            --min-seconds "$MIN_SECONDS" --flush-denormal ;;
        esac
      done
    done
  done
done
echo

"$PY_OLD" bench/cpu_table.py "$RESULTS"
if ((failures)); then
  echo "cpu.sh: $failures run(s) failed; see above" >&2
  exit 1
fi
