# ptrain jobscript: the Slurm script and the HTCondor files it prints, run
# against stand-in srun and ptrain programs (no scheduler needed), and every
# usage error.
source "$(dirname "$0")/lib.sh"

SELF=$(readlink -f "$PTRAIN")
has() { grep -qxF -- "$2" "$1" || fail "$1 lacks the line '$2':"$'\n'"$(cat "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2':"$'\n'"$(cat "$1")"; }

# A stand-in for srun, mpirun and ptrain: writes its argv, NUL-separated, to $ARGV_OUT.
mkdir -p "$TMP/bin"
cat >"$TMP/bin/argv" <<'EOF'
#!/bin/bash
printf '%s\0' "$(basename "$0")" "$@" >>"$ARGV_OUT"
EOF
chmod +x "$TMP/bin/argv"
ln -s argv "$TMP/bin/srun"
ln -s argv "$TMP/bin/mpirun"
# expect_argv FILE WORDS...: FILE holds exactly these words.
expect_argv() {
  local file=$1; shift
  printf '%s\0' "$@" >"$TMP/want"
  cmp -s "$TMP/want" "$file" ||
    fail "argv: got [$(tr '\0' '|' <"$file")], expected [$(tr '\0' '|' <"$TMP/want")]"
}

# ---- Slurm, one task: plain srun, threads from SLURM_CPUS_PER_TASK ----
"$PTRAIN" jobscript slurm -- --model fmnist-mlp --epochs 2 >"$TMP/one.sh" || fail "jobscript slurm"
[[ $(head -n 1 "$TMP/one.sh") == "#!/bin/bash" ]] || fail "first line: $(head -n 1 "$TMP/one.sh")"
for l in "#SBATCH --job-name=ptrain" "#SBATCH --nodes=1" "#SBATCH --ntasks-per-node=1" \
  "#SBATCH --output=ptrain-%j.out" "set -euo pipefail" \
  "#SBATCH --signal=USR1@120" "#SBATCH --requeue" "#SBATCH --open-mode=append" \
  "srun --cpus-per-task=\"\$cpus\" $SELF train --threads \"\$threads\" --save-model --model fmnist-mlp --epochs 2 \"\$@\" || rc=\$?"; do
  has "$TMP/one.sh" "$l"
done
for l in "--gpus-per-node" "#SBATCH --cpus-per-task=" "--time" "--partition" "--mpi" "--parallel"; do lacks "$TMP/one.sh" "$l"; done
# sbatch reads directives only above the first command.
awk '/^#SBATCH/ && seen { exit 1 } !/^#/ && !/^$/ { seen = 1 }' "$TMP/one.sh" || fail "#SBATCH after a command"
bash -n "$TMP/one.sh" || fail "one.sh is not valid bash"
pass "slurm, one task"

ARGV_OUT=$TMP/one.argv SLURM_CPUS_PER_TASK=3 SLURM_JOB_ID=41 PATH="$TMP/bin:$PATH" bash "$TMP/one.sh" \
  >"$TMP/one.log" || fail "running one.sh: $(cat "$TMP/one.log")"
expect_argv "$TMP/one.argv" srun --cpus-per-task=3 "$SELF" train --threads 3 --save-model --model fmnist-mlp --epochs 2 \
  --checkpoint-dir checkpoints/job-41
# Without --cpus-per-task Slurm gives one CPU per task and sets no variable.
ARGV_OUT=$TMP/one1.argv SLURM_JOB_ID=42 PATH="$TMP/bin:$PATH" bash "$TMP/one.sh" >/dev/null || fail "running one.sh"
expect_argv "$TMP/one1.argv" srun --cpus-per-task=1 "$SELF" train --threads 1 --save-model --model fmnist-mlp --epochs 2 \
  --checkpoint-dir checkpoints/job-42
pass "slurm script runs srun with --threads from SLURM_CPUS_PER_TASK, checkpoints under the job's ID"

# Another job in the same directory (another batch size, as the tutorials'
# exercises have it) starts afresh: it once resumed the first job's
# checkpoint and trained nothing, or was refused.
mkdir -p "$TMP/again/checkpoints/job-41/step-000000000010"
(cd "$TMP/again" && ARGV_OUT=$TMP/again.argv SLURM_JOB_ID=43 PATH="$TMP/bin:$PATH" bash "$TMP/one.sh" \
  >"$TMP/again.log") || fail "a second job: $(cat "$TMP/again.log")"
expect_argv "$TMP/again.argv" srun --cpus-per-task=1 "$SELF" train --threads 1 --save-model --model fmnist-mlp --epochs 2 \
  --checkpoint-dir checkpoints/job-43
! grep -q resuming "$TMP/again.log" || fail "a second job resumed the first's: $(cat "$TMP/again.log")"
pass "slurm script: a new job does not resume another job's checkpoint"

# The requeue path: the job's checkpoint there gives --resume; exit 85
# requeues the job (scontrol, a stand-in here) and ends the script with 0.
mkdir -p "$TMP/rq/checkpoints/job-77/step-000000000010"
rm "$TMP/bin/srun"
cat >"$TMP/bin/srun" <<'EOF2'
#!/bin/bash
printf '%s\0' "$@" >"$ARGV_OUT"
exit 85
EOF2
printf '#!/bin/bash\necho "$@" >"$SCONTROL_OUT"\n' >"$TMP/bin/scontrol"
chmod +x "$TMP/bin/srun" "$TMP/bin/scontrol"
(cd "$TMP/rq" && ARGV_OUT=$TMP/rq.argv SCONTROL_OUT=$TMP/rq.scontrol SLURM_JOB_ID=77 PATH="$TMP/bin:$PATH" \
  bash "$TMP/one.sh" >"$TMP/rq.log") || fail "the script did not end 0 after requeueing: $(cat "$TMP/rq.log")"
expect_argv "$TMP/rq.argv" --cpus-per-task=1 "$SELF" train --threads 1 --save-model --model fmnist-mlp --epochs 2 \
  --checkpoint-dir checkpoints/job-77 --resume
[[ $(cat "$TMP/rq.scontrol") == "requeue 77" ]] || fail "scontrol got: $(cat "$TMP/rq.scontrol")"
grep -q "resuming from the newest checkpoint in checkpoints/job-77/" "$TMP/rq.log" ||
  fail "no resume line: $(cat "$TMP/rq.log")"
pass "slurm script: --resume where a checkpoint is, and exit 85 requeues the job"
rm "$TMP/bin/srun" "$TMP/bin/scontrol"
ln -s argv "$TMP/bin/srun"

# ---- Slurm, many tasks: one per GPU, srun --mpi=pmix, --parallel ddp ----
"$PTRAIN" jobscript slurm --nodes 2 --gpus-per-node 4 --cpus-per-task 8 --time 1-02:30:00 --partition gpu \
  --output 'logs/%x-%j.out' --job-name mnist -- --model mnist-cnn >"$TMP/many.sh" || fail "jobscript slurm many"
for l in "#SBATCH --job-name=mnist" "#SBATCH --nodes=2" "#SBATCH --ntasks-per-node=4" "#SBATCH --cpus-per-task=8" \
  "#SBATCH --gpus-per-node=4" "#SBATCH --time=1-02:30:00" "#SBATCH --partition=gpu" \
  "#SBATCH --output=logs/%x-%j.out" \
  "srun --cpus-per-task=\"\$cpus\" --kill-on-bad-exit=0 --wait=60 --mpi=pmix $SELF train --parallel ddp --device cuda --threads \"\$threads\" --save-model --model mnist-cnn \"\$@\" || rc=\$?"; do
  has "$TMP/many.sh" "$l"
done
bash -n "$TMP/many.sh" || fail "many.sh is not valid bash"
"$PTRAIN" jobscript slurm --ntasks-per-node 2 --mpi default -- >"$TMP/def.sh" || fail "--mpi default"
has "$TMP/def.sh" "srun --cpus-per-task=\"\$cpus\" --kill-on-bad-exit=0 --wait=60 $SELF train --parallel ddp --threads \"\$threads\" --save-model \"\$@\" || rc=\$?"
"$PTRAIN" jobscript slurm --nodes 3 --mpi pmi2 -- >"$TMP/pmi2.sh" || fail "--mpi pmi2"
has "$TMP/pmi2.sh" "#SBATCH --ntasks-per-node=1"
has "$TMP/pmi2.sh" "srun --cpus-per-task=\"\$cpus\" --kill-on-bad-exit=0 --wait=60 --mpi=pmi2 $SELF train --parallel ddp --threads \"\$threads\" --save-model \"\$@\" || rc=\$?"
# A --threads of the user's wins over the one the script would add.
"$PTRAIN" jobscript slurm --ptrain /opt/ptrain/bin/ptrain -- --threads 2 >"$TMP/thr.sh" || fail "--threads"
has "$TMP/thr.sh" "srun --cpus-per-task=\"\$cpus\" /opt/ptrain/bin/ptrain train --save-model --threads 2 \"\$@\" || rc=\$?"
pass "slurm, many tasks"

# GPUs asked for are GPUs trained on: --device cuda unless the user chose a
# GPU; a CPU device with GPUs asked for is refused (the GPUs would idle).
"$PTRAIN" jobscript slurm --gpus-per-node 1 -- --model mnist-cnn >"$TMP/g1.sh" || fail "jobscript slurm, one GPU"
has "$TMP/g1.sh" "srun --cpus-per-task=\"\$cpus\" $SELF train --device cuda --threads \"\$threads\" --save-model --model mnist-cnn \"\$@\" || rc=\$?"
"$PTRAIN" jobscript slurm --gpus-per-node 2 --ntasks-per-node 2 -- --device=cuda:1 >"$TMP/g2.sh" ||
  fail "jobscript slurm, --device of the user's"
has "$TMP/g2.sh" "srun --cpus-per-task=\"\$cpus\" --kill-on-bad-exit=0 --wait=60 --mpi=pmix $SELF train --parallel ddp --threads \"\$threads\" --save-model --device=cuda:1 \"\$@\" || rc=\$?"
for d in "--device cpu" "--device=cpu:0" "--parallel dp --devices cpu:0,cpu:1"; do
  # shellcheck disable=SC2086
  expect_exit 2 "jobscript slurm: --device(s)? cpu.* after '--' but --gpus-per-node 2 asks for GPUs: the job would hold them and train on the CPU" -- \
    "$PTRAIN" jobscript slurm --gpus-per-node 2 --ntasks-per-node 1 -- $d
done
expect_exit 2 "jobscript htcondor: --device cpu after '--' but --gpus 1 asks for GPUs" -- \
  "$PTRAIN" jobscript htcondor --gpus 1 -- --device cpu
pass "GPUs asked for: --device cuda, or the user's GPU; a CPU device refused"

# The finished job keeps its final weights: the script passes --save-model
# (once, where the user gave it too), unless told not to.
"$PTRAIN" jobscript slurm -- --save-model --epochs 2 >"$TMP/sm.sh" || fail "--save-model given"
has "$TMP/sm.sh" "srun --cpus-per-task=\"\$cpus\" $SELF train --threads \"\$threads\" --save-model --epochs 2 \"\$@\" || rc=\$?"
"$PTRAIN" jobscript slurm --no-save-model -- --epochs 2 >"$TMP/nsm.sh" || fail "--no-save-model"
has "$TMP/nsm.sh" "srun --cpus-per-task=\"\$cpus\" $SELF train --threads \"\$threads\" --epochs 2 \"\$@\" || rc=\$?"
expect_exit 2 "--no-save-model and --save-model after '--' contradict each other" -- \
  "$PTRAIN" jobscript slurm --no-save-model -- --save-model
pass "slurm: --save-model added once, left out with --no-save-model, and the two together refused"

# ---- Quoting: awkward arguments reach ptrain train unchanged ----
# (as values of train's own flags: train refuses stray words, and so does jobscript)
args=(--model-file "my models/cnn v2.txt" --metrics "it's \"quoted\".jsonl")
for v in '$HOME' '`id`' '*' '~' '#x' $'two\nlines' $'tab\there' 'back\slash' 'a;b|c&d' "!bang" 'é ü' $'\x01ctl'; do
  args+=(--trace "$v")
done
"$PTRAIN" jobscript slurm --ptrain "$TMP/bin/my ptrain's" -- "${args[@]}" >"$TMP/q.sh" || fail "jobscript quoting"
bash -n "$TMP/q.sh" || fail "q.sh is not valid bash"
ARGV_OUT=$TMP/q.argv SLURM_CPUS_PER_TASK=2 SLURM_JOB_ID=5 PATH="$TMP/bin:$PATH" bash "$TMP/q.sh" >/dev/null ||
  fail "running q.sh"
expect_argv "$TMP/q.argv" srun --cpus-per-task=2 "$TMP/bin/my ptrain's" train --threads 2 --save-model "${args[@]}" \
  --checkpoint-dir checkpoints/job-5
# The srun line stays one line, and so does the comment that repeats the command.
[[ $(grep -c '^srun ' "$TMP/q.sh") == 1 ]] || fail "srun line split"
grep -q "^# written by: ptrain jobscript slurm " "$TMP/q.sh" || fail "no origin comment"
pass "awkward arguments survive the quoting"

# ---- Slurm: --gres, --error, --sbatch ----
# --gres for clusters whose GPUs are a generic resource (the tutorial's
# "#SBATCH --gres=gpu:2"): the same tasks and devices as --gpus-per-node.
"$PTRAIN" jobscript slurm --gres gpu:2 --error 'err-%j.txt' --sbatch --account=proj --sbatch=--qos=high \
  --sbatch -Cgpu80 -- --model mnist-cnn >"$TMP/gres.sh" || fail "jobscript slurm --gres"
for l in "#SBATCH --gres=gpu:2" "#SBATCH --ntasks-per-node=2" "#SBATCH --error=err-%j.txt" \
  "#SBATCH --account=proj" "#SBATCH --qos=high" "#SBATCH -Cgpu80"; do
  has "$TMP/gres.sh" "$l"
done
lacks "$TMP/gres.sh" "--gpus-per-node"
grep -q "^srun --cpus-per-task=\"\$cpus\" --kill-on-bad-exit=0 --wait=60 --mpi=pmix .* train --parallel ddp --device cuda " "$TMP/gres.sh" ||
  fail "--gres gpu:2: $(grep ^srun "$TMP/gres.sh")"
awk '/^#SBATCH/ && seen { exit 1 } !/^#/ && !/^$/ { seen = 1 }' "$TMP/gres.sh" || fail "#SBATCH after a command"
"$PTRAIN" jobscript slurm --gres gpu:h100:1 -- --parallel pipeline >"$TMP/gres1.sh" || fail "--gres gpu:h100:1"
has "$TMP/gres1.sh" "#SBATCH --gres=gpu:h100:1"
grep -q " train --devices cuda:0,cuda:0 " "$TMP/gres1.sh" || fail "--gres gpu:h100:1 pipeline: $(grep ^srun "$TMP/gres1.sh")"
for bad in gpu gpu:0 gpu::2 gpu:a:b:2 mem:2 gpu:2x gpu:2000 gpu:2:3; do
  expect_exit 2 "--gres: expected gpu:G or gpu:TYPE:G with G from 1 to 1024, got '$bad'" -- \
    "$PTRAIN" jobscript slurm --gres "$bad" -- --epochs 1
done
expect_exit 2 "--gres and --gpus-per-node both ask for GPUs" -- \
  "$PTRAIN" jobscript slurm --gres gpu:2 --gpus-per-node 2 -- --epochs 1
expect_exit 2 "--device cpu after '--' but --gres gpu:1 asks for GPUs: .*leave out --gres," -- \
  "$PTRAIN" jobscript slurm --gres gpu:1 -- --device cpu
expect_exit 2 "--sbatch --time=01:00:00: the script writes it itself; give it with --time" -- \
  "$PTRAIN" jobscript slurm --sbatch --time=01:00:00 -- --epochs 1
expect_exit 2 "--sbatch -t10: -t is --time: the script writes it itself" -- "$PTRAIN" jobscript slurm --sbatch -t10 -- --epochs 1
expect_exit 2 "--sbatch --ntasks=4: the script writes --ntasks-per-node; give --nodes and --ntasks-per-node" -- \
  "$PTRAIN" jobscript slurm --sbatch --ntasks=4 -- --epochs 1
expect_exit 2 "--sbatch --signal=USR1@60: the script writes it itself, for ptrain's checkpoint and requeue" -- \
  "$PTRAIN" jobscript slurm --sbatch --signal=USR1@60 -- --epochs 1
# sbatch's own readings: an abbreviated long option, flags bundled in front
# of a short one, GPU requests of other names.
expect_exit 2 "--sbatch --partit=gpu: sbatch reads --partit as --partition: the script writes it itself" -- \
  "$PTRAIN" jobscript slurm --sbatch --partit=gpu -- --epochs 1
expect_exit 2 "--sbatch --requ: sbatch reads --requ as --requeue" -- "$PTRAIN" jobscript slurm --sbatch --requ -- --epochs 1
expect_exit 2 "--sbatch -vN2: -N is --nodes" -- "$PTRAIN" jobscript slurm --sbatch -vN2 -- --epochs 1
expect_exit 2 "--sbatch -Qt01:00:00: -t is --time" -- "$PTRAIN" jobscript slurm --sbatch -Qt01:00:00 -- --epochs 1
expect_exit 2 "--sbatch --gpus=2: GPUs are asked for with --gpus-per-node or --gres" -- \
  "$PTRAIN" jobscript slurm --sbatch --gpus=2 -- --epochs 1
expect_exit 2 "--sbatch --gpus-per-task=1: GPUs are asked for with --gpus-per-node or --gres" -- \
  "$PTRAIN" jobscript slurm --sbatch --gpus-per-task=1 -- --epochs 1
expect_exit 2 "--sbatch '---x': expected one sbatch option" -- "$PTRAIN" jobscript slurm --sbatch ---x -- --epochs 1
expect_exit 2 "--sbatch 'account=proj': expected one sbatch option" -- \
  "$PTRAIN" jobscript slurm --sbatch account=proj -- --epochs 1
expect_exit 2 "--sbatch: expected letters, digits and .* got '--account proj'" -- \
  "$PTRAIN" jobscript slurm --sbatch '--account proj' -- --epochs 1
expect_exit 2 "--error: expected letters, digits" -- "$PTRAIN" jobscript slurm --error 'a b' -- --epochs 1
pass "slurm --gres, --error and --sbatch"

# ---- HTCondor: submit file and wrapper on stdout ----
"$PTRAIN" jobscript htcondor --cpus 4 --memory 4GB --gpus 1 --name mnist --transfer-input data/mnist,extra.txt \
  --ptrain "$TMP/bin/argv" -- --model mnist-cnn --data-dir mnist >"$TMP/condor.out" || fail "jobscript htcondor"
[[ $(grep -c '^# ---- file: ' "$TMP/condor.out") == 2 ]] || fail "expected two file markers"
awk '/^# ---- file: ptrain.sub ----$/ { f = 1; next } /^# ---- file: / { f = 0 } f' "$TMP/condor.out" >"$TMP/sub"
awk '/^# ---- file: ptrain.sh ----$/ { f = 1; next } /^# ---- file: / { f = 0 } f' "$TMP/condor.out" >"$TMP/wrap.sh"
kv() { sed -n "s/^$2 *= *//p" "$1"; }
for k in "universe=vanilla" "executable=ptrain.sh" "batch_name=mnist" 'log=mnist-$(Cluster).log' \
  'output=mnist-$(Cluster).$(Process).out' 'error=mnist-$(Cluster).$(Process).err' "request_cpus=4" \
  "request_memory=4GB" "request_gpus=1" "should_transfer_files=YES" "transfer_input_files=data/mnist,extra.txt" \
  'transfer_output_files=checkpoints-$(Cluster).$(Process)' "when_to_transfer_output=ON_EXIT_OR_EVICT" \
  "checkpoint_exit_code=85" 'transfer_checkpoint_files=checkpoints-$(Cluster).$(Process)' \
  'arguments=checkpoints-$(Cluster).$(Process)'; do
  [[ $(kv "$TMP/sub" "${k%%=*}") == "${k#*=}" ]] || fail "ptrain.sub: ${k%%=*} is '$(kv "$TMP/sub" "${k%%=*}")', expected '${k#*=}'"
done
[[ $(grep -v '^#' "$TMP/sub" | tail -n 1) == queue ]] || fail "ptrain.sub does not end with queue"
"$PTRAIN" jobscript htcondor -- >"$TMP/c0.out" || fail "jobscript htcondor, defaults"
grep -q '^request_memory *= 2GB$' "$TMP/c0.out" || fail "default request_memory"
# A model that holds more asks for it (cifar-convnet: 2.2 GB of weights,
# gradients and Adam's state, and an evaluation batch of 1000 on top; the
# default 2GB once had HTCondor kill it); a --memory below is said; data
# that will not be in the sandbox is said.
"$PTRAIN" jobscript htcondor -- --model cifar-convnet --data-dir /shared/cifar10 >"$TMP/cm.out" 2>"$TMP/cm.err" ||
  fail "htcondor cifar-convnet: $(cat "$TMP/cm.err")"
grep -Eq '^request_memory *= ([5-9]|1[0-9])GB$' "$TMP/cm.out" || fail "cifar-convnet's request_memory: $(grep request_memory "$TMP/cm.out")"
[[ ! -s $TMP/cm.err ]] || fail "htcondor cifar-convnet with shared data said: $(cat "$TMP/cm.err")"
"$PTRAIN" jobscript htcondor --memory 2GB -- --model cifar-convnet >/dev/null 2>"$TMP/cm2.err" || fail "--memory 2GB"
grep -q "note: --memory 2GB is less than cifar-convnet is estimated to hold" "$TMP/cm2.err" ||
  fail "no note of too little memory: $(cat "$TMP/cm2.err")"
grep -q "note: the job reads cifar10 from data/cifar10 in its sandbox, and --transfer-input brings no 'data' there" \
  "$TMP/cm2.err" || fail "no note of data left behind: $(cat "$TMP/cm2.err")"
"$PTRAIN" jobscript htcondor --transfer-input /data/cifar-10-batches-bin -- --model cifar-convnet \
  --data-dir cifar-10-batches-bin >/dev/null 2>"$TMP/cm3.err" || fail "cifar-convnet, data transferred"
[[ ! -s $TMP/cm3.err ]] || fail "data transferred, yet: $(cat "$TMP/cm3.err")"
pass "htcondor: request_memory sized by the model, a smaller --memory and data not transferred said"
# request_disk: the checkpoints kept and the one being written (weights
# and Adam's two moments, 1.6 GB each for cifar-convnet), the final weights
# and the data; at least 1GB; a --disk below the estimate is said.
grep -q '^request_disk *= 1GB$' "$TMP/c0.out" || fail "default request_disk: $(grep request_disk "$TMP/c0.out")"
grep -Eq '^request_disk *= [5-7]GB$' "$TMP/cm.out" || fail "cifar-convnet's request_disk: $(grep request_disk "$TMP/cm.out")"
"$PTRAIN" jobscript htcondor -- --model cifar-convnet --data-dir /shared/cifar10 --keep-checkpoints 5 >"$TMP/cm5.out" ||
  fail "--keep-checkpoints 5"
(($(sed -n 's/^request_disk *= \([0-9]*\)GB$/\1/p' "$TMP/cm5.out") > $(sed -n 's/^request_disk *= \([0-9]*\)GB$/\1/p' "$TMP/cm.out"))) ||
  fail "more checkpoints kept, no more disk: $(grep request_disk "$TMP/cm5.out")"
"$PTRAIN" jobscript htcondor --disk 20GB -- --model cifar-convnet --data-dir /shared/cifar10 >"$TMP/cd.out" 2>"$TMP/cd.err" ||
  fail "--disk 20GB"
grep -q '^request_disk *= 20GB$' "$TMP/cd.out" && [[ ! -s $TMP/cd.err ]] || fail "--disk 20GB: $(cat "$TMP/cd.err")"
# A bare number is MB, as for --memory; HTCondor reads a bare request_disk
# as KB, so the file says MB.
"$PTRAIN" jobscript htcondor --disk 8192 --memory 4096 -- --model fmnist-mlp >"$TMP/cd2.out" || fail "--disk 8192"
grep -q '^request_disk *= 8192MB$' "$TMP/cd2.out" && grep -q '^request_memory *= 4096MB$' "$TMP/cd2.out" ||
  fail "bare sizes: $(grep request_ "$TMP/cd2.out")"
# The optimizer's state counts: plain SGD checkpoints a third of Adam's;
# ddp ranks each hold the model.
"$PTRAIN" jobscript htcondor -- --model cifar-convnet --data-dir /shared/cifar10 --optimizer sgd >"$TMP/csgd.out" ||
  fail "cifar-convnet with sgd"
grep -Eq '^request_disk *= [23]GB$' "$TMP/csgd.out" || fail "cifar-convnet sgd's request_disk: $(grep request_disk "$TMP/csgd.out")"
"$PTRAIN" jobscript htcondor --gpus 2 -- --model cifar-convnet --data-dir /shared/cifar10 >"$TMP/c2g.out" ||
  fail "cifar-convnet, 2 GPUs"
(($(sed -n 's/^request_memory *= \([0-9]*\)GB$/\1/p' "$TMP/c2g.out") > $(sed -n 's/^request_memory *= \([0-9]*\)GB$/\1/p' "$TMP/cm.out"))) ||
  fail "two ddp ranks, no more memory: $(grep request_memory "$TMP/c2g.out")"
"$PTRAIN" jobscript htcondor --disk 1GB -- --model cifar-convnet --data-dir /shared/cifar10 >/dev/null 2>"$TMP/cd.err" ||
  fail "--disk 1GB"
grep -q "note: --disk 1GB is less than cifar-convnet is estimated to write" "$TMP/cd.err" ||
  fail "no note of too little disk: $(cat "$TMP/cd.err")"
pass "htcondor: request_disk sized by the checkpoints, a smaller --disk said"

# --submit: more lines for the submit file, before queue; the commands the
# file sets itself are refused, with the flag that sets them.
"$PTRAIN" jobscript htcondor --submit 'requirements = (OpSysMajorVer == 12)' --submit='+ProjectName = "ml"' -- \
  --epochs 1 >"$TMP/cs.out" || fail "--submit"
awk '/^# ---- file: ptrain.sub ----$/ { f = 1; next } /^# ---- file: / { f = 0 } f' "$TMP/cs.out" | grep -v '^#' |
  tail -n 3 >"$TMP/cs.tail"
printf '%s\n' 'requirements = (OpSysMajorVer == 12)' '+ProjectName = "ml"' queue | cmp -s - "$TMP/cs.tail" ||
  fail "--submit lines: $(cat "$TMP/cs.tail")"
expect_exit 2 "--submit 'request_disk = 3GB': the submit file sets it itself; give it with --disk" -- \
  "$PTRAIN" jobscript htcondor --submit 'request_disk = 3GB' -- --epochs 1
expect_exit 2 "--submit 'Executable=x': the submit file runs the wrapper" -- \
  "$PTRAIN" jobscript htcondor --submit 'Executable=x' -- --epochs 1
expect_exit 2 "--submit 'when_to_transfer_output = ON_EXIT': the submit file sets it itself, for ptrain's checkpoints" -- \
  "$PTRAIN" jobscript htcondor --submit 'when_to_transfer_output = ON_EXIT' -- --epochs 1
# The job attributes behind the commands, set directly or by name.
for line in 'RequestMemory = 1' 'MY.RequestDisk = 1' '+RequestCpus = 8' 'my.checkpointexitcode = 0' \
  'stdout = x' 'stderr = x' 'TransferInputFiles = x' 'TransferOutputFiles = x' 'transfer_output_remaps = "a=b"' \
  'checkpoint_destination = x' 'arguments2 = x'; do
  expect_exit 2 "--submit '[^']*': the submit file (sets it itself|runs the wrapper)" -- \
    "$PTRAIN" jobscript htcondor --submit "$line" -- --epochs 1
done
# Would move what is sent with the job away from the names the wrapper reads.
expect_exit 2 "--submit 'preserve_relative_paths = true': the wrapper finds the files sent with the job under their last names" \
  -- "$PTRAIN" jobscript htcondor --submit 'preserve_relative_paths = true' -- --epochs 1
expect_exit 2 "a backslash at the end continues the line onto the next" -- \
  "$PTRAIN" jobscript htcondor --submit 'requirements = a \' -- --epochs 1
"$PTRAIN" jobscript htcondor --submit $'requirements\t=\t(Memory > 1)' -- --epochs 1 >/dev/null || fail "a tab in --submit"
expect_exit 2 "--submit 'requirements': expected KEY = VALUE" -- \
  "$PTRAIN" jobscript htcondor --submit requirements -- --epochs 1
expect_exit 2 "--submit 'a = ': expected KEY = VALUE" -- "$PTRAIN" jobscript htcondor --submit 'a = ' -- --epochs 1
expect_exit 2 "--submit: expected one line of printable ASCII \\(tabs allowed\\), got byte 0x0a at 6" -- \
  "$PTRAIN" jobscript htcondor --submit $'a = 1\nqueue 100' -- --epochs 1
expect_exit 2 "--disk: expected a size such as 8GB" -- "$PTRAIN" jobscript htcondor --disk lots -- --epochs 1
expect_exit 2 "--submit: given more than 16 times" -- "$PTRAIN" jobscript htcondor \
  $(for i in $(seq 17); do printf -- '--submit a%d=1 ' "$i"; done) -- --epochs 1
expect_exit 2 "--submit applies to htcondor, not slurm" -- "$PTRAIN" jobscript slurm --submit a=1 -- --epochs 1
pass "htcondor --submit"
grep -q '^request_cpus *= 1$' "$TMP/c0.out" || fail "default request_cpus"
! grep -q 'request_gpus\|transfer_input_files' "$TMP/c0.out" || fail "request_gpus or transfer_input_files by default"
pass "htcondor submit file"

# The wrapper, run in a sandbox as HTCondor would, with the submit file's
# arguments for job 7.0: first start, then a restart after eviction with the
# checkpoint HTCondor brought back.
[[ $(head -n 1 "$TMP/wrap.sh") == "#!/bin/bash" ]] || fail "wrapper's first line"
bash -n "$TMP/wrap.sh" || fail "wrapper is not valid bash"
mkdir "$TMP/sandbox"
(cd "$TMP/sandbox" && ARGV_OUT=$TMP/w1.argv bash "$TMP/wrap.sh" checkpoints-7.0 >"$TMP/w1.log") ||
  fail "wrapper, first start"
[[ -d $TMP/sandbox/checkpoints-7.0 ]] || fail "the wrapper did not create checkpoints-7.0/"
expect_argv "$TMP/w1.argv" argv train --device cuda --threads 4 --save-model --exit-after-checkpoint \
  --checkpoint-interval 1800 --checkpoint-dir checkpoints-7.0 --model mnist-cnn --data-dir mnist
mkdir "$TMP/sandbox/checkpoints-7.0/step-000000000010"
(cd "$TMP/sandbox" && ARGV_OUT=$TMP/w2.argv bash "$TMP/wrap.sh" checkpoints-7.0 >"$TMP/w2.log") || fail "wrapper, restart"
expect_argv "$TMP/w2.argv" argv train --device cuda --threads 4 --save-model --exit-after-checkpoint \
  --checkpoint-interval 1800 --checkpoint-dir checkpoints-7.0 --resume --model mnist-cnn --data-dir mnist
grep -q "resuming from the checkpoint in checkpoints-7.0/" "$TMP/w2.log" || fail "the wrapper did not say it resumes"
# Another job from the same submit directory (HTCondor brings every job's
# checkpoints back there) starts afresh in a directory of its own.
(cd "$TMP/sandbox" && ARGV_OUT=$TMP/w2b.argv bash "$TMP/wrap.sh" checkpoints-8.0 >"$TMP/w2b.log") || fail "wrapper, job 8.0"
expect_argv "$TMP/w2b.argv" argv train --device cuda --threads 4 --save-model --exit-after-checkpoint \
  --checkpoint-interval 1800 --checkpoint-dir checkpoints-8.0 --model mnist-cnn --data-dir mnist
# Run by hand, without the submit file's argument: checkpoints/, and the
# pair of files of earlier versions counts as a checkpoint.
mkdir "$TMP/sandbox/checkpoints"
: >"$TMP/sandbox/checkpoints/model.safetensors"
: >"$TMP/sandbox/checkpoints/state.safetensors"
(cd "$TMP/sandbox" && ARGV_OUT=$TMP/w2c.argv bash "$TMP/wrap.sh" >"$TMP/w2c.log") || fail "wrapper, by hand"
expect_argv "$TMP/w2c.argv" argv train --device cuda --threads 4 --save-model --exit-after-checkpoint \
  --checkpoint-interval 1800 --checkpoint-dir checkpoints --resume --model mnist-cnn --data-dir mnist
pass "htcondor wrapper: each job's checkpoints under its ID, resumed from when they are there"

# More than one GPU: one process per GPU under mpirun, the cores shared out.
"$PTRAIN" jobscript htcondor --gpus 2 --cpus 8 --ptrain "$TMP/bin/argv" -- --model mnist-cnn >"$TMP/c2.out" ||
  fail "jobscript htcondor --gpus 2"
awk '/^# ---- file: ptrain.sh ----$/ { f = 1; next } f' "$TMP/c2.out" >"$TMP/wrap2.sh"
mkdir "$TMP/sandbox2"
(cd "$TMP/sandbox2" && ARGV_OUT=$TMP/w3.argv PATH="$TMP/bin:$PATH" bash "$TMP/wrap2.sh" >/dev/null) || fail "wrapper, 2 GPUs"
expect_argv "$TMP/w3.argv" mpirun -np 2 --bind-to none "$TMP/bin/argv" train --parallel ddp --device cuda --threads 4 --save-model \
  --exit-after-checkpoint --checkpoint-interval 1800 --checkpoint-dir checkpoints --model mnist-cnn
pass "htcondor, two GPUs"

# An eviction's SIGTERM under Open MPI's mpirun: mpirun signalled itself
# ends 1, so the wrapper passes it on as SIGUSR1, which mpirun forwards to
# the ranks; they checkpoint and exit 85, and the job ends 85. The ranks
# are stand-ins that do what ptrain does on SIGUSR1.
if command -v mpirun >/dev/null; then
  cat >"$TMP/bin/rank85" <<'EOF'
#!/bin/bash
trap 'kill "$sleeper"; exit 85' USR1
sleep 60 &
sleeper=$!
: >"$READY.$OMPI_COMM_WORLD_RANK"
wait
EOF
  chmod +x "$TMP/bin/rank85"
  "$PTRAIN" jobscript htcondor --gpus 2 --cpus 2 --ptrain "$TMP/bin/rank85" -- >"$TMP/c3.out" || fail "jobscript htcondor --gpus 2"
  awk '/^# ---- file: ptrain.sh ----$/ { f = 1; next } f' "$TMP/c3.out" >"$TMP/wrap3.sh"
  mkdir "$TMP/sandbox3"
  (cd "$TMP/sandbox3" && READY=$TMP/ready OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_rmaps_base_oversubscribe=1 exec bash "$TMP/wrap3.sh" >"$TMP/w4.log" 2>&1) &
  job=$!
  for _ in $(seq 1 600); do
    [[ -e $TMP/ready.0 && -e $TMP/ready.1 ]] && break
    kill -0 "$job" 2>/dev/null || fail "the 2-GPU wrapper ended before its ranks started: $(cat "$TMP/w4.log")"
    sleep 0.1
  done
  [[ -e $TMP/ready.0 && -e $TMP/ready.1 ]] || fail "the ranks did not start within a minute: $(cat "$TMP/w4.log")"
  kill -TERM "$job"
  status=0
  wait "$job" || status=$?
  [[ $status == 85 ]] || fail "an evicted 2-GPU job ended $status, expected the ranks' 85: $(cat "$TMP/w4.log")"
  pass "htcondor, two GPUs: an eviction's SIGTERM reaches the ranks, and the job ends with their 85"
fi

# The same with the real ptrain: a job evicted after 10 steps and restarted
# with its checkpoint ends with the weights of a job that ran straight on.
if [[ -f $FMNIST/train-images-idx3-ubyte.gz ]]; then
  wrapper() { # wrapper FILE MAX-STEPS
    "$PTRAIN" jobscript htcondor --cpus 2 -- --model fmnist-mlp --max-steps "$2" --data-dir "$FMNIST" |
      awk '/^# ---- file: ptrain.sh ----$/ { f = 1; next } f' >"$1"
  }
  wrapper "$TMP/w10.sh" 10
  wrapper "$TMP/w20.sh" 20
  mkdir "$TMP/evicted" "$TMP/straight"
  (cd "$TMP/evicted" && bash "$TMP/w10.sh" && bash "$TMP/w20.sh") >"$TMP/evicted.log" 2>&1 ||
    fail "wrapper with ptrain, evicted: $(cat "$TMP/evicted.log")"
  (cd "$TMP/straight" && bash "$TMP/w20.sh") >"$TMP/straight.log" 2>&1 ||
    fail "wrapper with ptrain, straight: $(cat "$TMP/straight.log")"
  grep -q "resuming from checkpoints/step-0*10 at .*(step 10)" "$TMP/evicted.log" ||
    fail "the restarted wrapper did not resume: $(cat "$TMP/evicted.log")"
  cmp -s "$TMP/evicted/checkpoints/model.safetensors" "$TMP/straight/checkpoints/model.safetensors" ||
    fail "evicted and resumed, the weights differ from a straight run's"
  pass "htcondor wrapper with ptrain: evicted and resumed = straight"

  # More steps for a finished job (5.0, its checkpoints brought back to the
  # submit directory), in a new job (6.0) that --resume-from sends them
  # with: it continues from them, and its weights are the straight run's.
  # A restart of job 6.0 keeps to its own checkpoints.
  "$PTRAIN" jobscript htcondor --cpus 2 --resume-from checkpoints-5.0/ -- --model fmnist-mlp --max-steps 20 \
    --data-dir "$FMNIST" >"$TMP/more.out" || fail "jobscript htcondor --resume-from"
  grep -q '^transfer_input_files *= checkpoints-5.0$' "$TMP/more.out" ||
    fail "--resume-from: transfer_input_files is $(grep transfer_input "$TMP/more.out")"
  awk '/^# ---- file: ptrain.sh ----$/ { f = 1; next } f' "$TMP/more.out" >"$TMP/more.sh"
  mkdir "$TMP/job5" "$TMP/job6"
  (cd "$TMP/job5" && bash "$TMP/w10.sh" checkpoints-5.0) >"$TMP/job5.log" 2>&1 || fail "job 5.0: $(cat "$TMP/job5.log")"
  cp -a "$TMP/job5/checkpoints-5.0" "$TMP/job6/"
  (cd "$TMP/job6" && bash "$TMP/more.sh" checkpoints-6.0) >"$TMP/job6.log" 2>&1 || fail "job 6.0: $(cat "$TMP/job6.log")"
  grep -q "resuming from checkpoints-6.0/step-0*10 at .*(step 10)" "$TMP/job6.log" ||
    fail "job 6.0 did not continue job 5.0's run: $(cat "$TMP/job6.log")"
  cmp -s "$TMP/job6/checkpoints-6.0/model.safetensors" "$TMP/straight/checkpoints/model.safetensors" ||
    fail "continued with --resume-from, the weights differ from a straight run's"
  mkdir "$TMP/job6b/" && cp -a "$TMP/job5/checkpoints-5.0" "$TMP/job6/checkpoints-6.0" "$TMP/job6b/"
  (cd "$TMP/job6b" && bash "$TMP/more.sh" checkpoints-6.0) >"$TMP/job6b.log" 2>&1 || fail "job 6.0 again: $(cat "$TMP/job6b.log")"
  grep -q "resuming from checkpoints-6.0/step-0*20 at .*(step 20)" "$TMP/job6b.log" ||
    fail "job 6.0 restarted did not keep to its own checkpoints: $(cat "$TMP/job6b.log")"
  # Run by hand beside job 5.0's checkpoints (no argument: checkpoints/),
  # the wrapper copies them and leaves them, and what is in its own
  # directory, as they were.
  mkdir -p "$TMP/byhand/checkpoints" && cp -a "$TMP/job5/checkpoints-5.0" "$TMP/byhand/"
  echo keep >"$TMP/byhand/checkpoints/notes.txt"
  (cd "$TMP/byhand" && bash "$TMP/more.sh") >"$TMP/byhand.log" 2>&1 || fail "by hand: $(cat "$TMP/byhand.log")"
  [[ -f $TMP/byhand/checkpoints/notes.txt ]] || fail "by hand, the wrapper removed a file of checkpoints/"
  diff -r "$TMP/job5/checkpoints-5.0" "$TMP/byhand/checkpoints-5.0" >/dev/null ||
    fail "by hand, the wrapper changed the earlier job's checkpoints"
  cmp -s "$TMP/byhand/checkpoints/model.safetensors" "$TMP/straight/checkpoints/model.safetensors" ||
    fail "by hand with --resume-from, the weights differ from a straight run's"
  mkdir -p "$TMP/job7/checkpoints-5.0"
  rc=0
  (cd "$TMP/job7" && bash "$TMP/more.sh" checkpoints-7.0) >"$TMP/job7.log" 2>&1 || rc=$?
  [[ $rc == 1 ]] && grep -q "checkpoints-5.0 (--resume-from) holds no checkpoint to continue from" "$TMP/job7.log" ||
    fail "--resume-from a directory with no checkpoint: exit $rc, $(cat "$TMP/job7.log")"
  pass "htcondor --resume-from: a new job continues a finished one's run = straight; nothing to continue from said"

  # Self-checkpointing as HTCondor runs it: the job exits 85 after each
  # checkpoint (--checkpoint-every 30 here, given with the train arguments,
  # instead of the interval); HTCondor copies job 5.0's checkpoints to the submit
  # node and starts the wrapper again, here in a fresh sandbox each time, as
  # after an eviction to another machine. Three exits, then the end, with
  # the weights of a run never stopped.
  "$PTRAIN" jobscript htcondor --cpus 2 -- --model fmnist-mlp --max-steps 100 --checkpoint-every 30 \
    --data-dir "$FMNIST" | awk '/^# ---- file: ptrain.sh ----$/ { f = 1; next } f' >"$TMP/self.sh"
  grep -q -- "--exit-after-checkpoint \"\$@\"" "$TMP/self.sh" || fail "the wrapper sets an interval beside --checkpoint-every"
  mkdir -p "$TMP/spool"
  exits=0
  for run in 1 2 3 4 5; do
    rm -rf "$TMP/self$run" && mkdir "$TMP/self$run"
    cp -a "$TMP/spool/." "$TMP/self$run/"
    rc=0
    (cd "$TMP/self$run" && bash "$TMP/self.sh" checkpoints-5.0) >>"$TMP/self.log" 2>&1 || rc=$?
    [[ $rc == 0 || $rc == 85 ]] || fail "self-checkpointing run $run: exit $rc: $(cat "$TMP/self.log")"
    rm -rf "$TMP/spool" && mkdir "$TMP/spool" && cp -a "$TMP/self$run/checkpoints-5.0" "$TMP/spool/"
    [[ $rc == 0 ]] && break
    exits=$((exits + 1))
  done
  [[ $rc == 0 && $exits == 3 ]] || fail "self-checkpointing: $exits exits with 85, last exit $rc: $(cat "$TMP/self.log")"
  for step in 30 60 90; do
    grep -q "checkpointed after step $step in checkpoints-5.0/ (--exit-after-checkpoint; exit status 85" "$TMP/self.log" ||
      fail "no exit after step $step: $(cat "$TMP/self.log")"
  done
  "$PTRAIN" train --model fmnist-mlp --threads 2 --max-steps 100 --data-dir "$FMNIST" --save-model \
    --checkpoint-dir "$TMP/self-straight" --quiet >/dev/null 2>&1 || fail "the straight run"
  cmp -s "$TMP/spool/checkpoints-5.0/model.safetensors" "$TMP/self-straight/model.safetensors" ||
    fail "self-checkpointed through 3 restarts, the weights differ from a straight run's"
  pass "htcondor self-checkpointing: 3 exits with 85, restarted from the copy, = straight"

  # The Slurm script with the real ptrain (srun a stand-in that runs its
  # command): the finished job keeps its final weights, the user having
  # asked for no checkpoints at all.
  mkdir "$TMP/run-srun"
  printf '#!/bin/bash\nwhile [[ $1 == -* ]]; do shift; done # its own options\nexec "$@"\n' >"$TMP/run-srun/srun"
  chmod +x "$TMP/run-srun/srun"
  "$PTRAIN" jobscript slurm -- --model fmnist-mlp --max-steps 20 --data-dir "$FMNIST" >"$TMP/final.sh" ||
    fail "jobscript slurm with the real ptrain"
  mkdir "$TMP/final"
  (cd "$TMP/final" && PATH="$TMP/run-srun:$PATH" SLURM_JOB_ID=42 bash "$TMP/final.sh") >"$TMP/final.log" 2>&1 ||
    fail "the slurm script with the real ptrain: $(cat "$TMP/final.log")"
  [[ -d $TMP/final/checkpoints/job-42/step-$(printf %012d 20) && -f $TMP/final/checkpoints/job-42/model.safetensors ]] ||
    fail "the finished job kept no final weights: $(ls -R "$TMP/final")"
  grep -q "^trained weights: checkpoints/job-42/model.safetensors" "$TMP/final.log" ||
    fail "the script did not say where the weights are: $(cat "$TMP/final.log")"
  pass "slurm script with ptrain: the finished job keeps the weights of its last step"
fi

# ---- HTCondor --write: the same two files, never silently replaced ----
"$PTRAIN" jobscript htcondor --cpus 4 --memory 4GB --gpus 1 --name mnist --transfer-input data/mnist,extra.txt \
  --ptrain "$TMP/bin/argv" --write "$TMP/job" -- --model mnist-cnn --data-dir mnist >"$TMP/write.out" ||
  fail "jobscript --write"
grep -q "condor_submit ptrain.sub" "$TMP/write.out" || fail "--write does not say how to submit"
# Equal but for the comment with the command line, which names --write.
same() { diff <(grep -v '^# written by:' "$1") <(grep -v '^# written by:' "$2") >/dev/null; }
same "$TMP/job/ptrain.sub" "$TMP/sub" || fail "--write: ptrain.sub differs from the printed one"
same "$TMP/job/ptrain.sh" "$TMP/wrap.sh" || fail "--write: ptrain.sh differs from the printed one"
[[ -x $TMP/job/ptrain.sh ]] || fail "--write: ptrain.sh is not executable"
echo edited >>"$TMP/job/ptrain.sub"
expect_exit 1 "ptrain.sub exists \(give --force" -- "$PTRAIN" jobscript htcondor --write "$TMP/job" -- --epochs 3
grep -q edited "$TMP/job/ptrain.sub" || fail "a refused --write changed ptrain.sub"
"$PTRAIN" jobscript htcondor --write "$TMP/job" --force -- --epochs 3 >/dev/null || fail "--write --force"
! grep -q edited "$TMP/job/ptrain.sub" || fail "--force did not replace ptrain.sub"
grep -q -- "--epochs 3$" "$TMP/job/ptrain.sh" || fail "--force did not replace ptrain.sh"
expect_exit 1 "nowhere" -- "$PTRAIN" jobscript htcondor --write "$TMP/nowhere/deeper" -- --epochs 3
pass "htcondor --write"

# ---- Help and usage errors ----
"$PTRAIN" jobscript --help >"$TMP/help" || fail "jobscript --help exited non-zero"
grep -q "^usage: ptrain jobscript slurm|htcondor" "$TMP/help" || fail "jobscript --help: no usage line"
for f in --nodes --gpus-per-node --gres --ntasks-per-node --cpus-per-task --time --partition --output --error \
  --job-name --mpi --sbatch --ptrain --gpus --cpus --memory --disk --name --transfer-input --submit --write --force; do
  grep -q -- "^  $f" "$TMP/help" || fail "jobscript --help does not document $f"
done
"$PTRAIN" jobscript slurm --help | grep "^usage: ptrain jobscript" >/dev/null || fail "jobscript slurm --help"
"$PTRAIN" --help | grep "^  jobscript" >/dev/null || fail "ptrain --help does not list jobscript"
pass "help"

J=("$PTRAIN" jobscript)
expect_exit 2 "jobscript: missing scheduler \(expected slurm or htcondor" -- "${J[@]}"
expect_exit 2 "jobscript: unknown scheduler 'pbs' \(expected slurm or htcondor" -- "${J[@]}" pbs -- --epochs 1
expect_exit 2 "jobscript slurm: missing '--' and the training arguments" -- "${J[@]}" slurm --nodes 2
expect_exit 2 "jobscript htcondor: missing '--'" -- "${J[@]}" htcondor
for t in 10 10:00 25:00 1:2:3 00:60:00 00:00:60 1-24:00:00 1-123:00:00 00:00:00 0-00:00:00 -01:00:00 abc 01:00:00x; do
  expect_exit 2 "--time: expected HH:MM:SS or D-HH:MM:SS, more than zero, got '$t'" -- "${J[@]}" slurm --time "$t" --
done
for t in 00:04:00 72:00:00 7-00:00:00 1-23:59:59 1-2:00:00 1:30:00; do
  grep -qx "#SBATCH --time=$t" <<<"$("${J[@]}" slurm --time "$t" --)" || fail "--time $t refused"
done
grep -qx "#SBATCH --time=00:00:02" <<<"$("${J[@]}" slurm --time 00:00:02 --signal-lead 1 --)" || fail "--time 00:00:02 refused"
# Slurm's minute of slack before the lead: said where it leaves a run little time.
"${J[@]}" slurm --time 00:01:00 --signal-lead 30 -- >/dev/null 2>"$TMP/lead.err" || fail "--time 00:01:00 --signal-lead 30"
grep -q "note: Slurm may signal up to a minute before --signal-lead 30, so as soon as a run of --time 00:01:00 starts" \
  "$TMP/lead.err" || fail "no note of Slurm's slack: $(cat "$TMP/lead.err")"
"${J[@]}" slurm --time 00:04:00 -- >/dev/null 2>"$TMP/lead2.err" || fail "--time 00:04:00"
grep -q "so as early as 60 s into a run of --time 00:04:00" "$TMP/lead2.err" || fail "no note: $(cat "$TMP/lead2.err")"
"${J[@]}" slurm --time 02:00:00 -- >/dev/null 2>"$TMP/lead3.err" || fail "--time 02:00:00"
[[ ! -s $TMP/lead3.err ]] || fail "a note for a long job: $(cat "$TMP/lead3.err")"
# A signal lead near the time limit: Slurm would signal ptrain as it starts
# and the job would requeue without end.
expect_exit 2 "--signal-lead 600: expected at most half the time limit, --time 00:01:00 \(60 s\), so at most 30 s" -- \
  "${J[@]}" slurm --signal-lead 600 --time 00:01:00 --
expect_exit 2 "--signal-lead 120 \(the default\): expected at most half the time limit, --time 00:03:59 \(239 s\)" -- \
  "${J[@]}" slurm --time 00:03:59 --
grep -qx "#SBATCH --signal=USR1@30" <<<"$("${J[@]}" slurm --time 00:01:00 --signal-lead 30 --)" || fail "--signal-lead 30 refused"
expect_exit 2 "--nodes: expected an integer in \[1, 100000\], got '-1'" -- "${J[@]}" slurm --nodes -1 --
expect_exit 2 "--nodes: expected an integer in \[1, 100000\], got '0'" -- "${J[@]}" slurm --nodes 0 --
expect_exit 2 "--gpus-per-node: expected an integer in \[0, 1024\], got '-2'" -- "${J[@]}" slurm --gpus-per-node -2 --
expect_exit 2 "--ntasks-per-node: expected an integer .*got 'x'" -- "${J[@]}" slurm --ntasks-per-node x --
expect_exit 2 "--cpus-per-task: expected an integer .*got '0'" -- "${J[@]}" slurm --cpus-per-task 0 --
expect_exit 2 "--gpus: expected an integer in \[0, 64\], got '-1'" -- "${J[@]}" htcondor --gpus -1 --
expect_exit 2 "--cpus: expected an integer .*got '0'" -- "${J[@]}" htcondor --cpus 0 --
expect_exit 2 "jobscript slurm: --gpus applies to htcondor, not slurm" -- "${J[@]}" slurm --gpus 2 --
expect_exit 2 "jobscript htcondor: --gpus-per-node applies to slurm, not htcondor" -- "${J[@]}" htcondor --gpus-per-node 2 --
expect_exit 2 "jobscript htcondor: --nodes applies to slurm, not htcondor" -- "${J[@]}" htcondor --nodes=2 --
expect_exit 2 "jobscript slurm: unknown flag '--bogus'" -- "${J[@]}" slurm --bogus --
expect_exit 2 "jobscript slurm: unexpected argument 'extra'" -- "${J[@]}" slurm extra --
expect_exit 2 "--time: missing value" -- "${J[@]}" slurm --time
expect_exit 2 "--partition: expected letters, digits and _@%\+=:,./- only, got 'a b'" -- "${J[@]}" slurm --partition "a b" --
expect_exit 2 "--output: expected letters, digits .*got 'x\\\$y'" -- "${J[@]}" slurm --output 'x$y' --
expect_exit 2 "--job-name: expected letters" -- "${J[@]}" slurm --job-name $'a\nb' --
expect_exit 2 "--mpi: expected letters" -- "${J[@]}" slurm --mpi 'pmix x' --
expect_exit 2 "--name: expected letters" -- "${J[@]}" htcondor --name 'a"b' --
expect_exit 2 "--transfer-input: expected letters" -- "${J[@]}" htcondor --transfer-input 'a, b' --
for list in a,,b ,a a,; do
  expect_exit 2 "--transfer-input '$list': an empty entry" -- "${J[@]}" htcondor --transfer-input "$list" --
done
expect_exit 2 "--memory: expected a size such as 4GB, 512MB or 2048 \(MB\), up to 1 PiB, got '4XB'" -- "${J[@]}" htcondor --memory 4XB --
expect_exit 2 "--memory: expected a size .*got '0'" -- "${J[@]}" htcondor --memory 0 --
expect_exit 2 "--memory: expected a size .*got '99999999999GB'" -- "${J[@]}" htcondor --memory 99999999999GB --
expect_exit 2 "--memory: expected a size .*got '-1GB'" -- "${J[@]}" htcondor --memory -1GB --
expect_exit 2 "--force: expected together with --write DIR" -- "${J[@]}" htcondor --force --
expect_exit 2 "--force: expected together with --write FILE" -- "${J[@]}" slurm --force --
expect_exit 2 "--parallel after '--': with 2 tasks the script passes --parallel ddp itself; dp, model and pipeline run in one task" -- \
  "${J[@]}" slurm --ntasks-per-node 2 -- --parallel dp
expect_exit 2 "--parallel after '--': with --gpus 2 the wrapper passes --parallel ddp" -- \
  "${J[@]}" htcondor --gpus 2 -- --parallel=ddp

# dp, model and pipeline on GPUs run in one process with the job's GPUs
# listed (the tutorials' DataParallel and model-parallel steps): the script
# once passed --device cuda, which train refuses with them, and HTCondor's
# refused --parallel outright.
"${J[@]}" slurm --gpus-per-node 2 -- --model mnist-cnn --parallel dp >"$TMP/dp-gpus.sh" || fail "slurm, dp on 2 GPUs"
has "$TMP/dp-gpus.sh" "#SBATCH --ntasks-per-node=1"
has "$TMP/dp-gpus.sh" "srun --cpus-per-task=\"\$cpus\" $SELF train --devices cuda:0,cuda:1 --threads \"\$threads\" --save-model --model mnist-cnn --parallel dp \"\$@\" || rc=\$?"
"${J[@]}" slurm --gpus-per-node 1 -- --parallel=pipeline >"$TMP/pp-gpu.sh" || fail "slurm, pipeline on 1 GPU"
has "$TMP/pp-gpu.sh" "srun --cpus-per-task=\"\$cpus\" $SELF train --devices cuda:0,cuda:0 --threads \"\$threads\" --save-model --parallel=pipeline \"\$@\" || rc=\$?"
expect_exit 2 "--parallel dp after '--' with --gpus-per-node 1: one GPU has no replicas" -- \
  "${J[@]}" slurm --gpus-per-node 1 -- --parallel dp
"${J[@]}" htcondor --gpus 2 -- --model fmnist-mlp --parallel model >"$TMP/mp-condor" || fail "htcondor, model on 2 GPUs"
grep -qF "exec $SELF train --devices cuda:0,cuda:1 --threads 1 --save-model --exit-after-checkpoint" "$TMP/mp-condor" ||
  fail "htcondor, model on 2 GPUs: $(cat "$TMP/mp-condor")"
! grep -q "mpirun" "$TMP/mp-condor" || fail "htcondor, model on 2 GPUs: mpirun in $(cat "$TMP/mp-condor")"
# The workers of one process share its CPUs: --threads is each one's.
"${J[@]}" slurm --cpus-per-task 4 -- --model fmnist-mlp --parallel dp --workers 2 >"$TMP/dp-cpus.sh" || fail "slurm dp"
ARGV_OUT=$TMP/dp-cpus.argv SLURM_CPUS_PER_TASK=4 SLURM_JOB_ID=51 PATH="$TMP/bin:$PATH" bash "$TMP/dp-cpus.sh" >/dev/null ||
  fail "running dp-cpus.sh"
expect_argv "$TMP/dp-cpus.argv" srun --cpus-per-task=4 "$SELF" train --threads 2 --save-model --model fmnist-mlp \
  --parallel dp --workers 2 --checkpoint-dir checkpoints/job-51
"${J[@]}" htcondor --cpus 8 -- --model fmnist-mlp --parallel pipeline --devices cpu:0,cpu:1,cpu:2,cpu:3 \
  >"$TMP/pp-cpus" || fail "htcondor pipeline"
grep -qF "exec $SELF train --threads 2 --save-model" "$TMP/pp-cpus" || fail "htcondor, 4 stages on 8 CPUs: $(cat "$TMP/pp-cpus")"
pass "dp replicas and stages share the task's CPUs (threads each = CPUs / workers); srun gets --cpus-per-task"
# A checkpoint directory whose name holds glob characters is found as it is.
"${J[@]}" slurm -- --model fmnist-mlp --checkpoint-dir 'ck[1]' >"$TMP/glob.sh" || fail "slurm, ck[1]"
mkdir -p "$TMP/globrun/ck1/step-000000000005"
(cd "$TMP/globrun" && ARGV_OUT=$TMP/glob1.argv SLURM_JOB_ID=61 PATH="$TMP/bin:$PATH" bash "$TMP/glob.sh" >/dev/null) ||
  fail "running glob.sh"
expect_argv "$TMP/glob1.argv" srun --cpus-per-task=1 "$SELF" train --threads 1 --save-model --model fmnist-mlp \
  --checkpoint-dir 'ck[1]'
mkdir -p "$TMP/globrun/ck[1]/step-000000000005"
(cd "$TMP/globrun" && ARGV_OUT=$TMP/glob2.argv SLURM_JOB_ID=61 PATH="$TMP/bin:$PATH" bash "$TMP/glob.sh" >/dev/null) ||
  fail "running glob.sh"
expect_argv "$TMP/glob2.argv" srun --cpus-per-task=1 "$SELF" train --threads 1 --save-model --model fmnist-mlp \
  --checkpoint-dir 'ck[1]' --resume
pass "a --checkpoint-dir named with glob characters: its own checkpoint resumes, another's does not"
# Directives and submit commands that would undo the script's own.
expect_exit 2 "--sbatch --tasks-per-node=2: sbatch reads it as --ntasks-per-node" -- \
  "${J[@]}" slurm --sbatch --tasks-per-node=2 -- --model fmnist-mlp
expect_exit 2 "--sbatch --cpus-per-gpu=4: the script gives each task its CPUs" -- \
  "${J[@]}" slurm --sbatch --cpus-per-gpu=4 -- --model fmnist-mlp
expect_exit 2 "--submit 'kill_sig = SIGKILL': ptrain checkpoints on the SIGTERM" -- \
  "${J[@]}" htcondor --submit 'kill_sig = SIGKILL' -- --model fmnist-mlp
expect_exit 2 "--submit 'initial_dir = /x': the submit file runs the wrapper" -- \
  "${J[@]}" htcondor --submit 'initial_dir = /x' -- --model fmnist-mlp
pass "--sbatch and --submit lines that would undo the script's are refused"
# GPUs asked for and left idle are said.
"${J[@]}" slurm --gpus-per-node 4 --ntasks-per-node 2 -- --model fmnist-mlp 2>"$TMP/idle.err" >/dev/null ||
  fail "slurm, 4 GPUs 2 tasks"
grep -q "note: --gpus-per-node 4 asks for 4 GPUs a node, and the run trains on 2: 2 sit idle" "$TMP/idle.err" ||
  fail "idle GPUs: $(cat "$TMP/idle.err")"
"${J[@]}" htcondor --gpus 2 -- --model fmnist-mlp --device cuda:1 2>"$TMP/idle2.err" >/dev/null || fail "htcondor cuda:1"
grep -q "note: --device cuda:1 after '--' puts every one of the 2 ranks of a node on that GPU" "$TMP/idle2.err" ||
  fail "pinned GPU: $(cat "$TMP/idle2.err")"
"${J[@]}" slurm --gpus-per-node 2 --ntasks-per-node 2 -- --model fmnist-mlp 2>"$TMP/idle3.err" >/dev/null || fail "2x2"
[[ ! -s $TMP/idle3.err ]] || fail "a rank per GPU was said to leave some idle: $(cat "$TMP/idle3.err")"
pass "GPUs the job holds and the run leaves idle are said"
"${J[@]}" htcondor --gpus 2 -- --parallel model --devices cuda:1,cuda:0 >"$TMP/mp-own" || fail "htcondor, own devices"
grep -qF -- "--parallel model --devices cuda:1,cuda:0" "$TMP/mp-own" || fail "htcondor, own devices: $(cat "$TMP/mp-own")"
! grep -q "train --devices" "$TMP/mp-own" || fail "htcondor: devices added beside the user's: $(cat "$TMP/mp-own")"
pass "dp, model and pipeline on GPUs: one process, the GPUs listed; dp on one GPU refused"
expect_exit 2 "--resume after '--': the wrapper adds it" -- "${J[@]}" htcondor -- --resume
for bad in a,b .. ./ / -ck; do
  expect_exit 2 "--resume-from '$bad': expected one directory, as checkpoints-77.0" -- \
    "${J[@]}" htcondor --resume-from="$bad" -- --epochs 2
done
expect_exit 2 "--resume-from: expected letters, digits" -- "${J[@]}" htcondor --resume-from 'a b' -- --epochs 2
# A checkpoint directory sent as plain input would be left unread.
for ck in checkpoints old/checkpoints-77.0/; do
  expect_exit 2 "--transfer-input '$ck': a job's checkpoints are continued with --resume-from $ck" -- \
    "${J[@]}" htcondor --transfer-input "data,$ck" -- --epochs 2
done
# Two things sent under one sandbox name (a directory with a trailing
# slash sends what it holds, so its own name does not count).
expect_exit 2 "--resume-from 'x/fashion-mnist': another file sent with the job arrives in the sandbox as 'fashion-mnist' too" \
  -- "${J[@]}" htcondor --transfer-input /data/fashion-mnist --resume-from x/fashion-mnist -- --epochs 2
expect_exit 2 "--transfer-input 'b/x': another file sent with the job arrives in the sandbox as 'x' too" \
  -- "${J[@]}" htcondor --transfer-input a/x/,c/x,b/x -- --epochs 2
"${J[@]}" htcondor --transfer-input a/x/,b/x -- --epochs 2 >/dev/null || fail "a directory's contents and another x"
"${J[@]}" htcondor --resume-from ck -- --model cifar-convnet --data-dir /shared/cifar10 >"$TMP/rf.out" ||
  fail "htcondor --resume-from ck"
# cifar-convnet with Adam: 6GB alone; the 2 checkpoints sent along (1.6 GB
# each) and their final weights (0.56 GB) more.
grep -q '^request_disk *= 10GB$' "$TMP/rf.out" || fail "--resume-from: $(grep request_disk "$TMP/rf.out")"
expect_exit 2 "--checkpoint-dir after '--': the job keeps checkpoints in 'checkpoints-"'\$\(Cluster\)\.\$\(Process\)'"'" -- \
  "${J[@]}" htcondor -- --checkpoint-dir=ck
# TRAIN_ARGS that ptrain train would refuse: refused here, with train's
# message, before a job waits in the queue to fail (or requeues without end).
for s in slurm htcondor; do
  expect_exit 2 "ptrain train: --epochs: expected an integer in \[1, 100000\], got '0'" -- "${J[@]}" $s -- --epochs 0
  grep -q "jobscript $s: the arguments after '--' are ptrain train's, and it refuses them" "$TMP/err" ||
    fail "no jobscript line: $(cat "$TMP/err")"
  [[ ! -s $TMP/out ]] || fail "a refused script was printed: $(cat "$TMP/out")"
  expect_exit 2 "ptrain train: unknown flag '--bogus-flag'" -- "${J[@]}" $s -- --bogus-flag
  expect_exit 2 "ptrain train: unexpected argument 'stray'" -- "${J[@]}" $s -- --epochs 2 stray
  expect_exit 2 "ptrain train: --model and --model-file: give one" -- "${J[@]}" $s -- --model a --model-file b
  expect_exit 2 "jobscript $s: --help after '--'" -- "${J[@]}" $s -- --help
done
expect_exit 2 "ptrain train: --lr: expected a number" -- "${J[@]}" slurm --nodes 2 -- --lr=fast
expect_exit 2 "jobscript slurm: --parallel ddp after '--': one task has no other ranks" -- "${J[@]}" slurm -- --parallel ddp
expect_exit 2 "jobscript htcondor: --parallel ddp after '--': one process" -- "${J[@]}" htcondor -- --parallel ddp
# The wrapper's own flags are checked with the user's: an interval of theirs is fine.
"${J[@]}" htcondor -- --checkpoint-every 30 >/dev/null || fail "htcondor with --checkpoint-every refused"
# After "--" everything is ptrain train's, even this command's own flags.
expect_exit 2 "ptrain train: unknown flag '--nodes'" -- "${J[@]}" slurm -- --nodes 5
pass "TRAIN_ARGS checked as ptrain train checks them"

# ---- Slurm --write FILE: whole or not at all, never silently replaced ----
"${J[@]}" slurm --write "$TMP/job.sh" -- --epochs 2 >"$TMP/w.out" || fail "slurm --write"
grep -q "wrote $TMP/job.sh; submit with: sbatch $TMP/job.sh" "$TMP/w.out" || fail "slurm --write: $(cat "$TMP/w.out")"
"${J[@]}" slurm -- --epochs 2 | diff <(grep -v '^# written by:' "$TMP/job.sh") <(grep -v '^# written by:' -) >/dev/null ||
  fail "--write: the script differs from the printed one"
echo edited >>"$TMP/job.sh"
expect_exit 1 "job.sh exists \(give --force" -- "${J[@]}" slurm --write "$TMP/job.sh" -- --epochs 3
grep -q edited "$TMP/job.sh" || fail "a refused --write changed job.sh"
"${J[@]}" slurm --write "$TMP/job.sh" --force -- --epochs 3 >/dev/null || fail "slurm --write --force"
grep -q -- "--epochs 3 \"\$@\"" "$TMP/job.sh" && ! grep -q edited "$TMP/job.sh" || fail "--force did not replace job.sh"
pass "slurm --write FILE, --force"

# ---- A full disk: an error, and no script cut short ----
# A file size limit stands in for the full disk (no root needed): writes
# past 1 KiB fail (EFBIG) part-way through the script. What was on standard
# output's file before stays as it was; --write leaves no file at all.
mkdir "$TMP/fill"
cut_short() { (trap '' XFSZ; ulimit -f 1; "$@"); }
for s in slurm htcondor; do
  printf 'before\n' >"$TMP/fill/out.sh"
  rc=0
  cut_short "${J[@]}" $s -- --epochs 2 >>"$TMP/fill/out.sh" 2>"$TMP/err" || rc=$?
  [[ $rc == 1 ]] && grep -q "jobscript: error: writing the script to standard output" "$TMP/err" ||
    fail "jobscript $s to a full file exited $rc: $(cat "$TMP/err")"
  [[ $(cat "$TMP/fill/out.sh") == before ]] || fail "jobscript $s cut short left: $(head -c 300 "$TMP/fill/out.sh")"
done
rc=0
cut_short "${J[@]}" slurm --write "$TMP/fill/job.sh" -- --epochs 2 2>"$TMP/err" || rc=$?
[[ $rc == 1 ]] && grep -q "jobscript: error: .*fill/job.sh: write to .* failed: File too large" "$TMP/err" ||
  fail "slurm --write to a full disk exited $rc: $(cat "$TMP/err")"
# ENOSPC itself, injected (a test hook of the atomic writes)
rc=0
PTRAIN_TEST_ENOSPC_AFTER=100 "${J[@]}" htcondor --write "$TMP/fill/job" -- --epochs 2 2>"$TMP/err" || rc=$?
[[ $rc == 1 ]] && grep -q "ptrain.sub: write to .* failed: No space left on device" "$TMP/err" ||
  fail "htcondor --write to a full disk exited $rc: $(cat "$TMP/err")"
# The directory it made is gone too (it once stayed, empty).
[[ $(ls -A "$TMP/fill") == out.sh ]] || fail "a full disk left files: $(ls -lAR "$TMP/fill")"
if [[ -w /dev/full ]]; then
  for s in slurm htcondor; do
    rc=0
    "${J[@]}" $s -- --epochs 2 >/dev/full 2>"$TMP/err" || rc=$?
    [[ $rc == 1 ]] && grep -q "jobscript: error: writing the script" "$TMP/err" ||
      fail "jobscript $s >/dev/full exited $rc: $(cat "$TMP/err")"
  done
fi
pass "jobscript to a full disk: exit 1, no partial script"
