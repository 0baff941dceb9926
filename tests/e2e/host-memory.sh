# A training process holds its ranks' memory and one small host buffer: the first
# parameters are made and uploaded, every checkpoint is scanned and written, and a resumed
# checkpoint is verified and loaded, a piece at a time, never through a host copy of the
# model. A GPT whose parameters dominate its memory (32 M floats, 123 MiB a vector) trains
# an AdamW update at W = 2 with its optimizer sharded and writes its checkpoint, then a
# resume from it trains the second; what the peak resident memory of each adds to that of
# the same run on a small model must stay under what env's "in all" figure adds, plus
# 96 MiB, less than one vector: a copy of the first parameters, a checkpoint's snapshot of
# the parameters and both moments, or a resume that reads them whole, exceeds it. (The
# difference leaves out what does not grow with the model: the program and its libraries,
# CUDA's among them in a CUDA build.) Under a sanitizer, which replaces the allocator and
# keeps freed memory, the figures say nothing about the program: skipped. The checkpoint
# holds every vector whole.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
if ldd "$DDPTOK" 2>/dev/null | grep -q 'lib[atm]san'; then
	echo "SKIP: a sanitizer build measures the sanitizer's allocator"
	exit 77
fi
C="$CONF/gpt-tiny.ini"
S="--set devices.backend=cpu --set model.layers=1 --set model.width=768 --set model.heads=4
--set model.context=64 --set data.vocab=32768 --set data.max_len=64 --set data.train=64
--set data.validation=8 --set data.test=8 --set train.accumulation=1 --set train.batch_size=2
--set train.optimizer=adamw --set train.shard_optimizer=true --set run.artifacts=art"
# env's "in all" figure, in MiB, for the settings given
env_all() {
	"$DDPTOK" "$C" env "$@" --set train.updates=2 > env.out
	grep -q "^memory per process: host buffer [0-9.]* MiB (the first parameters and the checkpoints' parameters and AdamW's moments pass through it a piece at a time); with the cpu backend's 2 ranks .* MiB in all$" env.out ||
		fail "env: $(cat env.out)"
	sed -n 's/^memory per process: .* \([0-9.]*\) MiB in all$/\1/p' env.out
}
# the peak resident memory of a training process, in MiB; without MALLOC_PERTURB_
# (meson test sets it), which writes every byte malloc hands out, so memory the run
# reserves and never touches would count
peak_of() {
	env -u MALLOC_PERTURB_ python3 -c '
import resource, subprocess, sys
with open("train.out", "w") as out:
    rc = subprocess.run(sys.argv[1:], stdout=out, stderr=subprocess.STDOUT).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if rc == 0 else -rc)
' "$DDPTOK" "$C" train "$@" --set train.updates=2
}
# what a peak adds to the small model's must stay under what env's figure adds + 96 MiB
within() {
	awk -v p="$2" -v p0="$3" -v a="$all" -v a0="$all0" 'BEGIN { exit !(p - p0 < a - a0 + 96) }' ||
		fail "peak resident memory of $1 $2 MiB ($3 MiB on the small model) grew more than env's $all MiB ($all0 MiB) + 96 MiB: a host copy of the model"
}
# the small model: the same run at width 64 over 512 ids, in its own directories
small="--set model.width=64 --set data.vocab=512 --set run.artifacts=small-art
--set run.outputs=small-out"
# shellcheck disable=SC2086
all0=$(env_all $S $small)
# shellcheck disable=SC2086
peak0=$(peak_of $S $small --set train.stop_at=1)
[ "$peak0" -gt 0 ] || fail "train (small): $(cat train.out)"
# shellcheck disable=SC2086
resumed0=$(peak_of $S $small --resume latest)
[ "$resumed0" -gt 0 ] || fail "resume (small): $(cat train.out)"
# shellcheck disable=SC2086
all=$(env_all $S)
grep -q "^memory per process: host buffer 16.0 MiB " env.out || fail "env: $(cat env.out)"
# shellcheck disable=SC2086
peak=$(peak_of $S --set train.stop_at=1)
[ "$peak" -gt 0 ] || fail "train: $(cat train.out)"
within train "$peak" "$peak0"
echo "peak $peak MiB ($peak0 small), env's figure $all MiB ($all0 small)"

# the checkpoint: the header and every float of each vector (32 M of them), verified and
# resumed
ck="art/runs/$(readlink art/runs/latest)/step-0001"
n=$(sed -n 's/^.*"n_params": \([0-9]*\).*$/\1/p' "$ck/state.json")
for f in params.npy exp_avg.npy exp_avg_sq.npy; do
	size=$(wc -c < "$ck/$f")
	[ "$size" -gt "$((4 * n))" ] && [ "$size" -le "$((4 * n + 256))" ] ||
		fail "$f holds $size bytes for $n floats"
done
"$DDPTOK" "$C" checkpoints $S > checkpoints.out || fail "checkpoints: $(cat checkpoints.out)"
# shellcheck disable=SC2086
resumed=$(peak_of $S --resume latest)
[ "$resumed" -gt 0 ] || fail "resume: $(cat train.out)"
grep -q "step 2/2" train.out || fail "resume: $(cat train.out)"
within "the resume" "$resumed" "$resumed0"
echo "resumed: peak $resumed MiB ($resumed0 small)"
