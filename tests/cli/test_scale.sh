# ptrain scale: every configuration of a sweep runs for real and is judged
# against one worker from its own measurements; configurations that cannot
# run are listed with the reason; --json writes every measurement; bad
# sweeps are usage errors naming the flag.
source "$(dirname "$0")/lib.sh"
need_fmnist

# Usage errors first: they need no data and no runs.
expect_exit 2 "--workers: expected a comma-separated list of integers in \[1, 1024\], got '1,x'" -- \
  "$PTRAIN" scale --workers 1,x
expect_exit 2 "--strategies: unknown strategy 'horovod'" -- "$PTRAIN" scale --strategies none,horovod
expect_exit 2 "--optimizers: unknown optimizer 'lamb'" -- "$PTRAIN" scale --optimizers sgd,lamb
expect_exit 2 "--batch: expected one of global|per-worker" -- "$PTRAIN" scale --batch both
expect_exit 2 "--workers: a trailing comma in '1,2,'" -- "$PTRAIN" scale --workers 1,2,
# scale's own --model, said as scale's (not as train refusing what follows '--', when nothing does)
expect_exit 2 "ptrain scale: unknown model 'nope' \(expected one of: mnist-cnn, .*; or --model-file FILE\)" -- \
  "$PTRAIN" scale --model nope
expect_exit 2 "--workers: an entry given twice in '2,2'" -- "$PTRAIN" scale --workers 2,2
expect_exit 2 "--strategies: a trailing comma in 'none,'" -- "$PTRAIN" scale --strategies none,
expect_exit 2 "--optimizers: an empty entry in 'sgd,,adam'" -- "$PTRAIN" scale --optimizers sgd,,adam
expect_exit 2 "--optimizers: an entry given twice in 'sgd,sgd'" -- "$PTRAIN" scale --optimizers sgd,sgd
# Outputs that cannot be written are found before the sweep runs.
expect_exit 1 "--json $TMP/nodir/x.jsonl: $TMP/nodir is not a directory" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1 --json "$TMP/nodir/x.jsonl"
expect_exit 1 "--json $TMP: a directory; expected a file" -- "$PTRAIN" scale --model fmnist-mlp --workers 1 --json "$TMP"
touch "$TMP/afile"
expect_exit 1 "--report $TMP/afile: not a directory; expected one" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1 --report "$TMP/afile"
grep -q "^strategy" "$TMP/out" && fail "the sweep ran before its --report was refused"
pass "usage errors name the flag and what was expected"

# fmnist-mlp, one worker and two with dp and a pipeline, global batch 100
# (each dp worker 50), one with a batch that does not split; ddp is left
# to the ddp tests' machines (MPI may be missing) but must be listed either
# way when asked for.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 1,2,3 --strategies none,dp,pipeline \
  --batch-sizes 100 --steps 20 --warmup 3 --json "$TMP/scale.jsonl" >"$TMP/scale.out" 2>"$TMP/scale.err" ||
  fail "scale: $(cat "$TMP/scale.out" "$TMP/scale.err")"
grep -q "^ptrain scale: fmnist-mlp on .* cores, .* kernels): 5 configurations" "$TMP/scale.out" ||
  fail "no header naming the model, CPU and 5 configurations: $(cat "$TMP/scale.out")"
grep -Eq "^none +1 +1 +100 \(100\) +model's +[0-9]+ +1.00x +100%" "$TMP/scale.out" ||
  fail "no baseline row: $(cat "$TMP/scale.out")"
grep -Eq "^dp +2 +1 +100 \(50\) +model's +[0-9]+ +[0-9.]+x" "$TMP/scale.out" || fail "no dp x 2 row: $(cat "$TMP/scale.out")"
grep -Eq "^pipeline +2 +1 +100 \(100\) .*%" "$TMP/scale.out" || fail "no pipeline x 2 row with a bubble: $(cat "$TMP/scale.out")"
grep -q "^- dp, 3 workers: not run: the global batch 100 does not split into 3 equal shares" "$TMP/scale.out" ||
  fail "dp x 3 not listed with its reason: $(cat "$TMP/scale.out")"
grep -Eq "^- dp, 2 workers: [0-9.]+x, .*(pays|no faster|slower|rough, not to be trusted)" "$TMP/scale.out" ||
  fail "no dp verdict: $(cat "$TMP/scale.out")"
grep -q "^recommendation for fmnist-mlp on this machine: " "$TMP/scale.out" || fail "no recommendation"
pass "a sweep: the baseline, dp and pipeline measured, dp x 3 listed with its reason, verdicts, a recommendation"

# More stages than the model has layers for: not run, with the reason (train
# would refuse it; it was run, and reported as failed).
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 4 --strategies pipeline --steps 2 --warmup 1 \
  >"$TMP/stages.out" 2>&1
grep -q "^- pipeline, 4 workers: not run: 4 stages, but the model has 3 layers a stage can hold" "$TMP/stages.out" ||
  fail "pipeline x 4 of a 3-layer model: $(cat "$TMP/stages.out")"
pass "a pipeline of more stages than layers: not run, with the reason"

# The JSON lines agree with the table and with themselves: the speed-up is
# the ratio of the measured rates, the efficiency the speed-up per worker,
# the verdict quotes the speed-up, and the recommendation is the fastest,
# unless a figure is rough (a few ms measured, or more speed-up than the
# workers can give): then it is said so, with the reason, and none is made.
python3 - "$TMP/scale.jsonl" "$TMP/scale.out" <<'PY' || fail "the JSON lines"
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0]["event"] == "machine" and lines[0]["model"] == "fmnist-mlp" and lines[0]["cores"] >= 1, lines[0]
cfg = [l for l in lines if l["event"] == "config"]
assert len(cfg) == 5, len(cfg)
base = cfg[0]
assert base["strategy"] == "none" and base["workers"] == 1 and base["ran"], base
for c in cfg:
    if not c["ran"]:
        assert c["why"] and (": not run: " + c["why"]) in c["verdict"], c
        continue
    for k in ("images_per_s", "ms_per_step", "forward_ms", "backward_ms", "optimizer_ms", "comm_ms", "data_ms", "peak_rss_mb"):
        assert c[k] is not None and c[k] >= 0, (k, c)
    assert c["images_per_s"] > 0 and c["peak_rss_mb"] > 1, c
    sp = c["images_per_s"] / base["images_per_s"]
    assert abs(c["speedup"] - sp) < 1e-9 * max(1, sp), (c["speedup"], sp)
    assert abs(c["efficiency"] - sp / c["workers"]) < 1e-9, c
    if c is not base:
        assert ("%.2fx" % c["speedup"]) in c["verdict"], c["verdict"]
        if c["efficiency"] > 1.10:
            assert c["rough"], c
    if c["rough"]:
        assert c["rough_why"] and "rough" in c["verdict"] and "pays" not in c["verdict"], c
    else:
        assert "rough_why" not in c, c
    if c["strategy"] == "pipeline":
        assert c["bubble"] is not None and 0 <= c["bubble"] < 1, c
    else:
        assert c["bubble"] is None, c
    # step time adds up: the phases are parts of the step
    parts = sum(c[k] for k in ("data_ms", "forward_ms", "backward_ms", "optimizer_ms", "comm_ms", "other_ms"))
    assert abs(parts - c["ms_per_step"]) < 0.10 * c["ms_per_step"] + 0.01, (parts, c["ms_per_step"])
ran = [c for c in cfg if c["ran"]]
rough = [c for c in ran if c["rough"]]
best = max(ran, key=lambda c: c["images_per_s"])
rec = [l for l in lines if l["event"] == "recommendation"][0]["text"]
if rough:
    assert rec.startswith("none to trust: %d of %d measurements are rough" % (len(rough), len(ran))), rec
elif best is base or best["speedup"] < 1.1:
    assert rec.startswith("stay on one worker"), rec
else:
    assert rec.startswith("use %s with %d workers" % (best["strategy"], best["workers"])), (rec, best)
assert rec in open(sys.argv[2]).read()
PY
pass "--json: every configuration, speed-ups and efficiencies from the rates, the recommendation the fastest"

# --report DIR: the chart as PNG and SVG, the markdown report embedding it, the JSON lines
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 1,2 --strategies none,dp --batch-sizes 100 \
  --steps 5 --warmup 2 --report "$TMP/report/" >"$TMP/rep.out" 2>&1 || fail "--report: $(cat "$TMP/rep.out")"
grep -qxF "report: $TMP/report/report.md (speedup.png, speedup.svg, scale.jsonl)" "$TMP/rep.out" ||
  fail "--report DIR/: the report's path: $(grep '^report:' "$TMP/rep.out")"
for f in report.md speedup.png speedup.svg scale.jsonl; do
  [[ -s $TMP/report/$f ]] || fail "--report: no $f"
done
head -c 8 "$TMP/report/speedup.png" | od -An -c | grep -q "P   N   G" || fail "speedup.png is not a PNG"
grep -q "<svg" "$TMP/report/speedup.svg" || fail "speedup.svg is not an SVG"
grep -q "^!\[speed-up against workers\](speedup.svg)" "$TMP/report/report.md" || fail "the report does not embed the chart"
grep -q "^\*\*Recommendation:\*\* " "$TMP/report/report.md" || fail "the report has no recommendation"
grep -q "^| dp | 2 | 1 | 100 | 50 |" "$TMP/report/report.md" || fail "the report's table: $(cat "$TMP/report/report.md")"
[[ $(grep -c '"event":"config"' "$TMP/report/scale.jsonl") == 2 ]] || fail "the report's scale.jsonl"
pass "--report: report.md embedding speedup.svg, the PNG, and scale.jsonl"

# --target-accuracy: a third run per configuration trains to the target;
# the table, the verdicts and the recommendation judge on that time, and the
# report adds the curves against time.
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 1,2 --strategies none,dp --batch-sizes 100 \
  --steps 5 --warmup 2 --target-accuracy 0.6 --target-epochs 2 --eval-every 50 --report "$TMP/target" \
  --json "$TMP/target.jsonl" >"$TMP/target.out" 2>&1 || fail "--target-accuracy: $(cat "$TMP/target.out")"
grep -Eq "^none +1 +1 +100 \(100\) .* [0-9]+\.[0-9]( +rough)?$" "$TMP/target.out" || fail "no seconds to target: $(cat "$TMP/target.out")"
grep -Eq "^- the baseline: one worker, 1 thread( \(rough: .*\))?; reaches 0.6 in [0-9.]* s" "$TMP/target.out" ||
  fail "the baseline's verdict has no time to accuracy: $(cat "$TMP/target.out")"
grep -Eq "^- dp, 2 workers: .*; reaches 0.6 in [0-9.]+ s \([0-9.]+x (sooner|later) than one worker\)" "$TMP/target.out" ||
  fail "dp's verdict has no time to accuracy: $(cat "$TMP/target.out")"
grep -Eq "it reaches 0.6 test accuracy (soonest, )?in" "$TMP/target.out" || fail "the recommendation is not on convergence"
[[ -s $TMP/target/curves.png && -s $TMP/target/curves.svg ]] || fail "no curves in the report"
grep -q "^!\[test loss and accuracy against time\](curves.svg)" "$TMP/target/report.md" || fail "the report does not embed the curves"
python3 - "$TMP/target.jsonl" <<'PY' || fail "the JSON lines with a target"
import json, sys
cfg = [json.loads(l) for l in open(sys.argv[1]) if '"config"' in l]
assert len(cfg) == 2 and all(c["ran"] for c in cfg), cfg
for c in cfg:
    assert c["target_seconds"] > 0 and c["evaluations"] >= 1, c
soonest = min(cfg, key=lambda c: c["target_seconds"])
rec = [json.loads(l) for l in open(sys.argv[1]) if '"recommendation"' in l][0]["text"]
# The soonest, unless one worker reached it within 1.1x of that.
one = [c for c in cfg if c["workers"] == 1][0]
if soonest["workers"] > 1 and one["target_seconds"] <= 1.1 * soonest["target_seconds"]:
    assert rec.startswith("stay on one worker") and ("in %.1f s" % one["target_seconds"]) in rec, (rec, cfg)
    assert ("was not 1.1x sooner (%.1f s)" % soonest["target_seconds"]) in rec, (rec, cfg)
else:
    assert ("soonest, in %.1f s" % soonest["target_seconds"]) in rec, (rec, soonest)
PY
pass "--target-accuracy: seconds to 0.6 per configuration, verdicts and recommendation on it, curves in the report"

# per-worker batches: each dp worker takes the whole batch, the global batch doubles
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 2 --strategies dp --batch per-worker \
  --batch-sizes 64 --steps 5 --warmup 2 >"$TMP/pw.out" 2>&1 || fail "per-worker: $(cat "$TMP/pw.out")"
grep -Eq "^dp +2 +1 +128 \(64\)" "$TMP/pw.out" || fail "per-worker batch: $(cat "$TMP/pw.out")"
pass "--batch per-worker: dp x 2 at 64 each is a global batch of 128"

# ddp: scale starts mpirun itself, one process per rank. (Open MPI's own
# leaks at exit are not ours: a sanitizer build's leak check stays off them.)
export ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0
if command -v mpirun >/dev/null && grep -q "MPI: .*ddp available" <<<"$("$PTRAIN" info)"; then
  "$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 2 --strategies ddp --steps 30 --warmup 3 \
    >"$TMP/ddp.out" 2>&1 || fail "ddp sweep: $(cat "$TMP/ddp.out")"
  grep -Eq "^ddp +2 +1 +100 \(50\) +model's +[0-9]+ +[0-9.]+x" "$TMP/ddp.out" || fail "no ddp x 2 row: $(cat "$TMP/ddp.out")"
  pass "ddp x 2 through mpirun, measured"
  # Past --time-limit mpirun is ended with its ranks: none left running,
  # and nothing left in TMPDIR (the ranks' SIGTERM checkpoint, written into
  # the sweep's temporary directory, was once left there).
  mkdir -p "$TMP/scale-tmp"
  TMPDIR=$TMP/scale-tmp "$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 2 --strategies ddp \
    --steps 100000 --warmup 2 --time-limit 3 -- --seed 424242 >"$TMP/ddp-limit.out" 2>&1 &&
    fail "a sweep past its time limit exited 0"
  grep -q "^- ddp, 2 workers: failed: a run of 100002 steps took more than 3 s (--time-limit)" "$TMP/ddp-limit.out" ||
    fail "ddp past --time-limit: $(cat "$TMP/ddp-limit.out")"
  # At once: ranks outliving a killed mpirun notice it only a second or two later.
  left=$(pgrep -af "ptrain train .*--seed 424242" || true)
  [[ -z $left ]] || { pkill -KILL -f "ptrain train .*--seed 424242"; fail "ranks left running after the time limit: $left"; }
  leftover=$(find "$TMP/scale-tmp" -mindepth 1 | head -5)
  [[ -z $leftover ]] || fail "ddp past --time-limit left files in TMPDIR: $leftover"
  pass "ddp past --time-limit: mpirun and its ranks ended, their files removed"
else
  "$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 2 --strategies ddp --steps 5 --warmup 2 \
    >"$TMP/ddp.out" 2>&1 || true
  grep -q "^- ddp, 2 workers: not run: ddp needs mpirun" "$TMP/ddp.out" || fail "ddp without MPI: $(cat "$TMP/ddp.out")"
  pass "ddp without MPI: listed as not run, with the reason"
fi

# --device cuda: without a GPU every configuration is listed with the reason;
# with one, a worker per GPU, and more workers than GPUs are not run.
expect_exit 2 "--device: expected cpu or cuda, got 'tpu'" -- "$PTRAIN" scale --device tpu
rc=0
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 1,2 --strategies none,dp --device cuda --steps 3 \
  --warmup 1 >"$TMP/gpu.out" 2>&1 || rc=$?
if grep -q "^- none, 1 worker: not run: no GPU: " "$TMP/gpu.out"; then
  [[ $rc == 1 ]] || fail "no GPU: exit $rc, expected 1"
  grep -q "^- dp, 2 workers: not run: no GPU: " "$TMP/gpu.out" || fail "no GPU, dp: $(cat "$TMP/gpu.out")"
  pass "--device cuda without a GPU: every configuration listed as not run, with the reason"
else
  grep -Eq "^none +1 +1 .* [0-9]+ +1.00x" "$TMP/gpu.out" || fail "--device cuda: $(cat "$TMP/gpu.out")"
  pass "--device cuda: measured on the GPU"
fi

# --jobscript htcondor: one job per configuration with its own request; the
# task script run as HTCondor would for each line of tasks.txt, then
# --collect; a missing result is reported, not guessed.
"$PTRAIN" scale --model fmnist-mlp --workers 1,2 --strategies none,dp --steps 5 --warmup 2 --jobscript htcondor \
  --submit 'requirements = (Memory > 1024)' --write "$TMP/condor" -- --data-dir "$FMNIST" >"$TMP/condor.out" ||
  fail "scale --jobscript htcondor: $(cat "$TMP/condor.out")"
grep -v '^#' "$TMP/condor/scale.sub" | tail -n 2 >"$TMP/sub.tail"
printf '%s\n' 'requirements = (Memory > 1024)' 'queue task, cpus, gpus, memory from tasks.txt' | cmp -s - "$TMP/sub.tail" ||
  fail "scale.sub: $(cat "$TMP/condor/scale.sub")"
grep -q "^request_cpus   = \$(cpus)$" "$TMP/condor/scale.sub" || fail "scale.sub: no per-job request_cpus"
grep -q "^request_memory = \$(memory)$" "$TMP/condor/scale.sub" || fail "scale.sub: no per-job request_memory"
# fmnist-mlp is small: each job asks for the 2GB floor.
[[ $(cat "$TMP/condor/tasks.txt") == $'0 1 0 2GB\n1 2 0 2GB' ]] || fail "tasks.txt: $(cat "$TMP/condor/tasks.txt")"
! grep -q -- "--submit\|requirements" "$TMP/condor/sweep.args" || fail "sweep.args holds the submission's flags"
"$PTRAIN" scale --collect "$TMP/condor" >"$TMP/c0.out" 2>&1 && fail "--collect with no results exited 0"
grep -q "failed: no result: .*task-0.jsonl is missing (the task did not finish)" "$TMP/c0.out" ||
  fail "--collect without results: $(cat "$TMP/c0.out")"
while read -r t cpus gpus memory; do
  (cd "$TMP/condor" && bash scale-task.sh "$t") >>"$TMP/condor-tasks.out" 2>&1 || fail "task $t: $(cat "$TMP/condor-tasks.out")"
done <"$TMP/condor/tasks.txt"
"$PTRAIN" scale --collect "$TMP/condor" --json "$TMP/collected.jsonl" >"$TMP/c1.out" 2>&1 ||
  fail "--collect: $(cat "$TMP/c1.out")"
grep -Eq "^dp +2 +1 +100 \(50\) +model's +[0-9]+ +[0-9.]+x" "$TMP/c1.out" || fail "--collect: $(cat "$TMP/c1.out")"
[[ $(grep -c '"ran":true' "$TMP/collected.jsonl") == 2 ]] || fail "--collect --json: $(cat "$TMP/collected.jsonl")"
# Judged on the tasks' machines, whose cores each result records.
grep -q "^recommendation for fmnist-mlp on the machines its tasks ran on: " "$TMP/c1.out" || fail "--collect: $(cat "$TMP/c1.out")"
grep -q '"cores":[1-9]' "$TMP/condor/results/task-1.jsonl" || fail "a task's result without its cores"
pass "--jobscript htcondor: per-job requests, tasks run, --collect reports them (and a missing one as such)"
# Without the one-worker result, the speed-ups are not numbers: "-" in the
# report as in the printed table, never "nan". A directory where a result
# should be is named as one.
cp -r "$TMP/condor" "$TMP/condor-nobase"
mv "$TMP/condor-nobase/results/task-0.jsonl" "$TMP/task-0.jsonl"
"$PTRAIN" scale --collect "$TMP/condor-nobase" --report "$TMP/nobase-report" >"$TMP/nobase.out" 2>&1
! grep -qi "nan" "$TMP/nobase-report/report.md" || fail "report without a baseline: $(cat "$TMP/nobase-report/report.md")"
grep -Eq "^\| dp \| 2 \| 1 \| 100 \| 50 \| the model's \| [0-9]+ \| - \| - \|" "$TMP/nobase-report/report.md" ||
  fail "report without a baseline: $(cat "$TMP/nobase-report/report.md")"
mkdir "$TMP/condor-nobase/results/task-0.jsonl"
expect_exit 1 "task-0.jsonl: a directory, where ptrain scale --task writes its result file" -- \
  "$PTRAIN" scale --collect "$TMP/condor-nobase"
pass "--collect without the baseline: '-' for what has no number; a directory for a result is named"
# A rough figure is marked as such in both tables, not only in its verdict.
cp -r "$TMP/condor" "$TMP/condor-rough"
python3 - "$TMP/condor-rough/results" <<'PY'
import json, sys
for task, rough in ((0, False), (1, True)):  # whatever this host's short runs gave
    path = "%s/task-%d.jsonl" % (sys.argv[1], task)
    lines = [json.loads(l) for l in open(path)]
    for l in lines:
        if l["event"] == "result":
            l["rough"] = rough
            l.pop("rough_why", None)
            if rough:
                l["rough_why"] = "its 5 measured steps took 3 ms (a test's)"
    open(path, "w").write("".join(json.dumps(l) + "\n" for l in lines))
PY
"$PTRAIN" scale --collect "$TMP/condor-rough" --report "$TMP/rough-report" >"$TMP/rough.out" 2>&1 ||
  fail "--collect of a rough result: $(cat "$TMP/rough.out")"
grep -Eq "^dp +2 +1 +100 \(50\) .* rough$" "$TMP/rough.out" || fail "a rough row unmarked: $(cat "$TMP/rough.out")"
grep -Eq "^none .* rough$" "$TMP/rough.out" && fail "the baseline marked rough: $(cat "$TMP/rough.out")"
grep -Eq "^\| dp \| 2 \| .* \| [0-9.]+x \(rough\) \|" "$TMP/rough-report/report.md" ||
  fail "a rough row unmarked in report.md: $(cat "$TMP/rough-report/report.md")"
pass "a rough configuration is marked in the printed table and in report.md"
# Results left by the tasks of another sweep (written again with another
# model or batch while they ran) are not reported as this one's.
for change in "s/^fmnist-mlp\$/mnist-cnn/" "1i --batch-sizes\\n64"; do
  rm -rf "$TMP/condor-other" && cp -r "$TMP/condor" "$TMP/condor-other"
  sed -i "$change" "$TMP/condor-other/sweep.args"
  ! cmp -s "$TMP/condor/sweep.args" "$TMP/condor-other/sweep.args" || fail "sed '$change' changed nothing in sweep.args"
  "$PTRAIN" scale --collect "$TMP/condor-other" >"$TMP/other.out" 2>&1 && fail "--collect of another sweep's results exited 0"
  grep -q "task-0.jsonl: the result of another sweep than this one" "$TMP/other.out" ||
    fail "--collect of another sweep's results ($change): $(cat "$TMP/other.out")"
done
pass "--collect refuses the results of another sweep (another model, another batch)"
# What would set or run the sweep again is refused with --collect, which
# reads the settings the sweep was written with; a submission's report is
# --collect's to make.
expect_exit 2 "--workers with --collect: the sweep's settings are those it was written with" -- \
  "$PTRAIN" scale --collect "$TMP/condor" --workers 1,2,4,8
expect_exit 2 "TRAIN_ARGS after '--' with --collect" -- "$PTRAIN" scale --collect "$TMP/condor" -- --lr 0.1
expect_exit 2 "--report with --jobscript: the sweep's report is made once its tasks have ended" -- \
  "$PTRAIN" scale --jobscript slurm --write "$TMP/never" --report "$TMP/never-report"
[[ ! -e $TMP/never ]] || fail "a refused submission wrote $TMP/never"

# A task whose run fails exits 1, its result saying why in full (the
# train's message and its advice at the end), and --collect shows it.
"$PTRAIN" scale --model fmnist-mlp --workers 1 --strategies none --steps 5 --warmup 2 --jobscript htcondor \
  --write "$TMP/condor-bad" -- --data-dir "$TMP/nowhere" >/dev/null || fail "scale --jobscript htcondor, bad data"
rc=0
(cd "$TMP/condor-bad" && bash scale-task.sh 0) >"$TMP/bad-task.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || fail "a task whose run failed exited $rc: $(cat "$TMP/bad-task.out")"
"$PTRAIN" scale --collect "$TMP/condor-bad" >"$TMP/bad-collect.out" 2>&1 && fail "--collect of a failed task exited 0"
grep -q "train-images-idx3-ubyte not found .*; run \`ptrain data fetch fashion-mnist --dir [^\`]*nowhere\` or \`apt-get install dataset-fashion-mnist\`" \
  "$TMP/bad-collect.out" || fail "--collect of a failed task: $(cat "$TMP/bad-collect.out")"
pass "a task whose run failed exits 1; --collect gives its reason whole"
# A --results that cannot take the result is said before the measurement.
mapfile -t sweep_args <"$TMP/condor-bad/sweep.args"
expect_exit 1 "--results $TMP/nowhere/results: expected a directory to write the task's result in" -- \
  "$PTRAIN" scale --task 0 --results "$TMP/nowhere/results" "${sweep_args[@]}"
[[ ! -s $TMP/out ]] || fail "a task with an unusable --results measured first: $(cat "$TMP/out")"
# A blank line after a result is no error; a rate that is not a positive
# number is.
echo >>"$TMP/condor-bad/results/task-0.jsonl"
"$PTRAIN" scale --collect "$TMP/condor-bad" >"$TMP/blank.out" 2>&1 || true
grep -q "not a result line" "$TMP/blank.out" && fail "a blank line after the result: $(cat "$TMP/blank.out")"
sed -i '1s/"ran":false/"ran":true/; 1s/"images_per_s":0/"images_per_s":1e400/' "$TMP/condor-bad/results/task-0.jsonl"
expect_exit 1 "task-0.jsonl: a result that ran, but whose images_per_s and ms_per_step are not both positive numbers" -- \
  "$PTRAIN" scale --collect "$TMP/condor-bad"

# request_memory grows with the model and the workers that share a job
# (cifar-convnet holds GBs each); --sbatch lines land in the job array;
# lines the submission writes itself are refused.
"$PTRAIN" scale --model cifar-convnet --workers 1,2 --strategies none,ddp --jobscript htcondor --write "$TMP/condor-c" \
  >/dev/null || fail "scale --jobscript htcondor, cifar-convnet"
read -r _ _ _ m1 < <(sed -n 1p "$TMP/condor-c/tasks.txt")
read -r _ _ _ m2 < <(sed -n 2p "$TMP/condor-c/tasks.txt")
((${m1%GB} >= 5 && ${m2%GB} > ${m1%GB})) || fail "cifar-convnet's request_memory: $(cat "$TMP/condor-c/tasks.txt")"
"$PTRAIN" scale --model fmnist-mlp --workers 1,2 --strategies none,dp --jobscript slurm --sbatch --partition=gpu \
  --sbatch=--time=00:30:00 --write "$TMP/slurm" -- --data-dir "$FMNIST" >/dev/null || fail "scale --jobscript slurm --sbatch"
for l in "#SBATCH --partition=gpu" "#SBATCH --time=00:30:00" "#SBATCH --array=0-1"; do
  grep -qxF -- "$l" "$TMP/slurm/scale.sbatch" || fail "scale.sbatch lacks '$l': $(cat "$TMP/slurm/scale.sbatch")"
done
awk '/^#SBATCH/ && seen { exit 1 } !/^#/ && !/^$/ { seen = 1 }' "$TMP/slurm/scale.sbatch" || fail "#SBATCH after a command"
! grep -q -- "--sbatch\|partition" "$TMP/slurm/sweep.args" || fail "sweep.args holds the submission's flags"
expect_exit 2 "scale: --sbatch --array=0-9: the submission sets it from the sweep's configurations" -- \
  "$PTRAIN" scale --jobscript slurm --write "$TMP/s2" --sbatch --array=0-9
expect_exit 2 "scale: --sbatch -D/tmp: -D is --chdir: each task reads sweep.args" -- \
  "$PTRAIN" scale --jobscript slurm --write "$TMP/s2" --sbatch -D/tmp
expect_exit 2 "scale: --sbatch --nodes=2: the submission sets it" -- \
  "$PTRAIN" scale --jobscript slurm --write "$TMP/s2" --sbatch --nodes=2
expect_exit 2 "scale: --submit 'request_memory = 1GB': the submission sets it" -- \
  "$PTRAIN" scale --jobscript htcondor --write "$TMP/s2" --submit 'request_memory = 1GB'
expect_exit 2 "scale: --submit 'Iwd = /x': each task reads sweep.args" -- \
  "$PTRAIN" scale --jobscript htcondor --write "$TMP/s2" --submit 'Iwd = /x'
expect_exit 2 "scale: --submit 'memory = 1GB': the submission sets it" -- \
  "$PTRAIN" scale --jobscript htcondor --write "$TMP/s2" --submit 'memory = 1GB'
# HTCondor's other names for the file's own commands.
for line in 'stdout = x' 'stderr = x' 'initial_dir = /x' 'arguments2 = x'; do
  expect_exit 2 "scale: --submit '$line': (the submission sets it|each task reads sweep.args)" -- \
    "$PTRAIN" scale --jobscript htcondor --write "$TMP/s2" --submit "$line"
done
expect_exit 2 "scale: --sbatch goes with --jobscript slurm" -- "$PTRAIN" scale --sbatch --partition=gpu
expect_exit 2 "scale: --submit goes with --jobscript htcondor" -- \
  "$PTRAIN" scale --jobscript slurm --write "$TMP/s2" --submit 'a = 1'
[[ ! -e $TMP/s2 ]] || fail "a refused submission made $TMP/s2"
"$PTRAIN" scale --model fmnist-mlp --workers 1,2 --strategies none,dp --jobscript slurm --write "$TMP/condor-c" --force \
  >/dev/null || fail "a slurm sweep over an htcondor one"
[[ -f $TMP/condor-c/scale.sbatch && ! -e $TMP/condor-c/scale.sub && ! -e $TMP/condor-c/tasks.txt ]] ||
  fail "the htcondor sweep's files stayed: $(ls "$TMP/condor-c")"
pass "--jobscript: request_memory from the model and workers; --sbatch and --submit lines, and the ones refused"

# A second submission into the same directory: refused, the first one's
# files as they were; with --force it replaces them, and the first one's
# results are gone, not reported as the new sweep's.
cp "$TMP/condor/sweep.args" "$TMP/sweep.args.before"
expect_exit 1 "$TMP/condor already holds a sweep \($TMP/condor/sweep.args\): give another --write DIR, or --force" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1,2 --strategies none,dp --jobscript htcondor --write "$TMP/condor" \
  -- --data-dir "$FMNIST" --optimizer sgd
cmp -s "$TMP/condor/sweep.args" "$TMP/sweep.args.before" || fail "the refused submission changed sweep.args"
# A directory with a file of a sweep's names but no sweep: the user's own.
mkdir -p "$TMP/own" && echo "#SBATCH --account=mine" >"$TMP/own/scale.sbatch"
expect_exit 1 "$TMP/own already holds $TMP/own/scale.sbatch, which the sweep would write over: give another --write DIR, or --force" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1,2 --jobscript slurm --write "$TMP/own"
[[ $(cat "$TMP/own/scale.sbatch") == "#SBATCH --account=mine" && ! -e $TMP/own/sweep.args ]] ||
  fail "a refused submission changed the user's directory: $(ls "$TMP/own")"
expect_exit 1 "argument 11 has a line break" -- "$PTRAIN" scale --model fmnist-mlp --workers 1,2 --strategies none,dp \
  --jobscript htcondor --write "$TMP/condor-nl" -- --seed 1 --data-dir $'/data/a\nb'
[[ ! -e $TMP/condor-nl/sweep.args ]] || fail "a refused submission left $(ls -R "$TMP/condor-nl")"
"$PTRAIN" scale --model fmnist-mlp --workers 1,2 --strategies none,dp --jobscript htcondor --write "$TMP/condor" --force \
  -- --data-dir "$FMNIST" --optimizer sgd >"$TMP/force.out" 2>&1 || fail "--force: $(cat "$TMP/force.out")"
grep -qx -- "--optimizer" "$TMP/condor/sweep.args" || fail "--force did not write the new sweep: $(cat "$TMP/condor/sweep.args")"
grep -q -- "--force" "$TMP/condor/sweep.args" && fail "--force went into sweep.args"
"$PTRAIN" scale --collect "$TMP/condor" >"$TMP/c2.out" 2>&1 && fail "--collect after --force reported old results"
grep -q "failed: no result: .*task-0.jsonl is missing" "$TMP/c2.out" || fail "--collect after --force: $(cat "$TMP/c2.out")"
pass "--jobscript into a directory with a sweep: refused without --force; with it, the old results are gone"

# A run that fails is reported with the child's error, and the sweep goes on.
"$PTRAIN" scale --model fmnist-mlp --data-dir "$TMP/nowhere" --workers 1 --steps 2 --warmup 1 >"$TMP/bad.out" 2>&1 &&
  fail "a sweep where nothing can run exited 0"
grep -q "^- none, 1 worker: failed: its run exited 1: .*nowhere" "$TMP/bad.out" || fail "the failed run's reason: $(cat "$TMP/bad.out")"
grep -q "no configuration ran" "$TMP/bad.out" || fail "no final error: $(cat "$TMP/bad.out")"
pass "a run that fails: its error in the verdict, exit 1 when nothing ran"

# TRAIN_ARGS that make a run write checkpoints: each run starts in a fresh
# directory (the second once refused to start over the first's).
"$PTRAIN" scale --model fmnist-mlp --data-dir "$FMNIST" --workers 1 --steps 5 --warmup 2 -- --save-model \
  --checkpoint-every 3 >"$TMP/ckpt.out" 2>&1 || fail "a sweep with --save-model: $(cat "$TMP/ckpt.out")"
grep -q "^- the baseline: one worker" "$TMP/ckpt.out" || fail "a sweep with --save-model: $(cat "$TMP/ckpt.out")"
pass "TRAIN_ARGS --save-model and --checkpoint-every: every run measured"

# Ctrl-C (SIGINT to the whole process group, the run included) and SIGTERM
# end the sweep: no configuration reported as failed, no recommendation,
# 128 + the signal, the run ended and TMPDIR emptied. A run stopped by
# Ctrl-C once exited 85, was reported as a failure, and the sweep went on
# to recommend the one worker that had no rate.
for sig in INT TERM; do
  mkdir -p "$TMP/stop-$sig"
  TMPDIR=$TMP/stop-$sig setsid "$PTRAIN" scale --model mnist-cnn --data-dir "$FMNIST" --workers 1,2 \
    --strategies none,dp --steps 100000 --warmup 2 -- --seed 434343 >"$TMP/stop-$sig.out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do pgrep -f "ptrain train .*--seed 434343" >/dev/null && break; sleep 0.05; done
  if [[ $sig == INT ]]; then kill -INT -- -"$pid"; else kill -TERM "$pid"; fi
  rc=0
  wait "$pid" || rc=$?
  want=$((128 + $(kill -l $sig)))
  [[ $rc == "$want" ]] || fail "SIG$sig to a sweep: exit $rc, expected $want: $(cat "$TMP/stop-$sig.out")"
  grep -q "stopped by .* with 0 of 2 configurations measured; no recommendation" "$TMP/stop-$sig.out" ||
    fail "SIG$sig to a sweep: $(cat "$TMP/stop-$sig.out")"
  ! grep -q "recommendation for\|dp  *2 x" "$TMP/stop-$sig.out" ||
    fail "SIG$sig: the sweep went on: $(cat "$TMP/stop-$sig.out")"
  left=$(pgrep -af "ptrain train .*--seed 434343" || true)
  [[ -z $left ]] || { pkill -KILL -f "ptrain train .*--seed 434343"; fail "SIG$sig: a run left running: $left"; }
  leftover=$(find "$TMP/stop-$sig" -mindepth 1 | head -5)
  [[ -z $leftover ]] || fail "SIG$sig: files left in TMPDIR: $leftover"
done
pass "SIGINT to the group and SIGTERM: the sweep stops, 130 and 143, nothing left running or behind"

# Every TRAIN_ARGS word reaches the runs, however many: the last one here
# names a file the run must fail to read (train's parser reads no files,
# so the sweep starts).
pad=()
for _ in $(seq 60); do pad+=(--seed 1); done
"$PTRAIN" scale --model fmnist-mlp --workers 1 --steps 2 --warmup 1 -- --data-dir "$FMNIST" "${pad[@]}" \
  --init-from "$TMP/none.safetensors" >"$TMP/long.out" 2>&1 &&
  fail "a sweep whose 123rd TRAIN_ARGS word is wrong exited 0: $(cat "$TMP/long.out")"
grep -q "^- none, 1 worker: failed: its run exited 1: .*none.safetensors" "$TMP/long.out" ||
  fail "the last of many TRAIN_ARGS did not reach the run: $(cat "$TMP/long.out")"
pass "123 TRAIN_ARGS words: all passed on, the last one's error reported"

# TRAIN_ARGS that train refuses, or that would override what the sweep sets
# for each run (a row labelled with a configuration it did not run), are
# refused before anything runs.
expect_exit 2 "the arguments after .--. are ptrain train.s, and it refuses them" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1 --steps 2 --warmup 1 -- --lr x
expect_exit 2 "--parallel after '--': the sweep sets it for every run; give scale's own --strategies" -- \
  "$PTRAIN" scale --model fmnist-mlp --strategies none,dp --workers 1,2 --steps 2 -- --parallel dp --workers 2
expect_exit 2 "--max-steps after '--': the sweep sets it for every run; give scale's own --steps and --warmup" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1 --steps 2 -- --max-steps=5
expect_exit 2 "--metrics after '--': the sweep sets it for every run [(]" -- \
  "$PTRAIN" scale --model fmnist-mlp --workers 1 --steps 2 -- --metrics "$TMP/m.jsonl"
