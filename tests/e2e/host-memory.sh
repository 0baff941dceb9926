# A training process holds its ranks' memory and one small host buffer: the first
# parameters are made and uploaded, and every checkpoint is scanned and written, a piece
# at a time, never through a host copy of the model. A GPT whose parameters dominate its
# memory (32 M floats, 123 MiB a vector) trains two AdamW updates at W = 2 with its
# optimizer sharded and writes its final checkpoint; its peak resident memory must stay
# under env's "in all" figure plus 96 MiB, less than one vector: a copy of the first
# parameters, or a checkpoint's snapshot of the parameters and both moments, exceeds it.
# The checkpoint holds every vector whole and resumes (train --resume).
set -eu
fail() { echo "FAIL: $*"; exit 1; }
C="$CONF/gpt-tiny.ini"
S="--set devices.backend=cpu --set model.layers=1 --set model.width=768 --set model.heads=4
--set model.context=64 --set data.vocab=32768 --set data.max_len=64 --set data.train=64
--set data.validation=8 --set data.test=8 --set train.accumulation=1 --set train.batch_size=2
--set train.optimizer=adamw --set train.shard_optimizer=true --set run.artifacts=art"
# shellcheck disable=SC2086
"$DDPTOK" "$C" env $S --set train.updates=2 > env.out
grep -q "^memory per process: host buffer 16.0 MiB (the first parameters and the checkpoints' parameters and AdamW's moments pass through it a piece at a time); with the cpu backend's 2 ranks .* MiB in all$" env.out ||
	fail "env: $(cat env.out)"
all=$(sed -n 's/^memory per process: .* \([0-9.]*\) MiB in all$/\1/p' env.out)

# the peak resident memory of the training process, in MiB; without MALLOC_PERTURB_
# (meson test sets it), which writes every byte malloc hands out, so memory the run
# reserves and never touches would count
# shellcheck disable=SC2086
peak=$(env -u MALLOC_PERTURB_ python3 -c '
import resource, subprocess, sys
with open("train.out", "w") as out:
    rc = subprocess.run(sys.argv[1:], stdout=out, stderr=subprocess.STDOUT).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if rc == 0 else -rc)
' "$DDPTOK" "$C" train $S --set train.updates=2 --set train.stop_at=1)
[ "$peak" -gt 0 ] || fail "train: $(cat train.out)"
awk -v peak="$peak" -v all="$all" 'BEGIN { exit !(peak < all + 96) }' ||
	fail "peak resident memory $peak MiB, more than env's $all MiB + 96 MiB: a host copy of the model"
echo "peak $peak MiB, env's figure $all MiB"

# the checkpoint: the header and every float of each vector (32 M of them), and it resumes
ck="art/runs/$(readlink art/runs/latest)/step-0001"
n=$(sed -n 's/^.*"n_params": \([0-9]*\).*$/\1/p' "$ck/state.json")
for f in params.npy exp_avg.npy exp_avg_sq.npy; do
	size=$(wc -c < "$ck/$f")
	[ "$size" -gt "$((4 * n))" ] && [ "$size" -le "$((4 * n + 256))" ] ||
		fail "$f holds $size bytes for $n floats"
done
"$DDPTOK" "$C" checkpoints $S > checkpoints.out || fail "checkpoints: $(cat checkpoints.out)"
# shellcheck disable=SC2086
"$DDPTOK" "$C" train $S --set train.updates=2 --resume latest > resume.out ||
	fail "resume: $(cat resume.out)"
grep -q "step 2/2" resume.out || fail "resume: $(cat resume.out)"
