# train.shard_optimizer = true: the same run in every bit, and checkpoints any run takes.
# env prints each rank's slice of the optimizer's state (half of it at W = 2). Training
# AdamW with weight decay and clipping, and SGD, writes the checkpoints (parameters, both
# moments or the momentum) and metrics of the unsharded run byte for byte. A checkpoint
# of a sharded run resumes unsharded and the reverse, ending where the continuous run
# ends; in exact mode a sharded checkpoint of W = 2 resumes sharded on W = 4 (elastic)
# and ends where the unsharded W = 2 run ends. The comparisons can fail: a run with
# another train.clip writes other bits.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
S="--set devices.backend=cpu"
ADAMW="--set train.optimizer=adamw --set train.lr=0.02 --set train.weight_decay=0.1"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
ckpt() { echo "$1/runs/$(readlink "$1/runs/latest")/step-$2"; }
same() { # same DIR1 DIR2 FILES...: the checkpoints hold the same bytes
	a=$1 b=$2
	shift 2
	for f in "$@"; do
		cmp "$a/$f" "$b/$f" || fail "$f of $a differs from $b's"
	done
}
# what the metrics lines say of the math (not the timings)
metrics() { grep -o '"\(step\|loss\|grad_norm\|lr\|clip_factor\|rank_loss_sum\)":[^,]*' \
	"$1/runs/$(readlink "$1/runs/latest")/metrics.jsonl"; }
MOMENTS="params.npy exp_avg.npy exp_avg_sq.npy"

# env: each rank's slice of AdamW's moments, half of the whole at W = 2
# shellcheck disable=SC2086
"$DDPTOK" "$CONF/gpt-tiny.ini" env $S --set train.optimizer=adamw \
	--set train.shard_optimizer=true > env.out
line=$(grep "^memory per rank: AdamW's moments .* MiB, the rank's slice of .* MiB sharded over 2 ranks (train.shard_optimizer)$" env.out) ||
	fail "env: $(cat env.out)"
echo "$line" | awk '{ slice = $6; whole = $12; d = slice * 2 - whole; if (d < -0.15 || d > 0.15) exit 1 }' ||
	fail "the slice is not half of the state: $line"

# the same bits: AdamW with clipping (and another clip, which must differ), SGD
for opt in "$ADAMW --set train.clip=0.05" "--set train.clip=0.05"; do
	files=$MOMENTS
	case "$opt" in *adamw*) ;; *) files="params.npy momentum.npy" ;; esac
	# shellcheck disable=SC2086
	run train --continuous $opt --set train.checkpoint_every=3 --set run.artifacts=whole \
		> whole.out || fail "unsharded: $(cat whole.out)"
	# shellcheck disable=SC2086
	run train --continuous $opt --set train.checkpoint_every=3 --set run.artifacts=sharded \
		--set train.shard_optimizer=true > sharded.out || fail "sharded: $(cat sharded.out)"
	for step in 0003 0006; do
		# shellcheck disable=SC2086
		same "$(ckpt whole $step)" "$(ckpt sharded $step)" $files
	done
	[ "$(metrics whole)" = "$(metrics sharded)" ] || fail "the metrics differ"
	grep -q '"clip_factor": *0\.' "$(ckpt whole 0006)/../metrics.jsonl" ||
		fail "nothing was clipped: the comparison would miss clipping"
	# a control: another clip changes the bits, which the comparison sees
	# shellcheck disable=SC2086
	run train --continuous $opt --set train.clip=0.04 --set run.artifacts=other \
		--set train.shard_optimizer=true > /dev/null
	if cmp -s "$(ckpt whole 0006)/params.npy" "$(ckpt other 0006)/params.npy"; then
		fail "another clip gave the same parameters: the comparison sees nothing"
	fi
	rm -rf whole sharded other
done

# resume: sharded -> unsharded and unsharded -> sharded end where the continuous run ends
# shellcheck disable=SC2086
run train --continuous $ADAMW --set run.artifacts=c > /dev/null
for first in true false; do
	then=true
	[ "$first" = true ] && then=false
	# shellcheck disable=SC2086
	run train $ADAMW --set train.stop_at=3 --set train.shard_optimizer=$first \
		--set run.artifacts=r-$first > /dev/null
	# shellcheck disable=SC2086
	run train --resume latest $ADAMW --set train.shard_optimizer=$then \
		--set run.artifacts=r-$first > resume.out || fail "resume: $(cat resume.out)"
	# shellcheck disable=SC2086
	same "$(ckpt r-$first 0006)" "$(ckpt c 0006)" $MOMENTS
done

# exact mode, elastic: sharded W = 2 stops at 3, resumes sharded on W = 4
EXACT="$ADAMW --set train.clip=0.05 --set train.shards=4"
# shellcheck disable=SC2086
run train --continuous $EXACT --set devices.world=2 --set run.artifacts=x-c > /dev/null
# shellcheck disable=SC2086
run train $EXACT --set devices.world=2 --set train.stop_at=3 --set train.shard_optimizer=true \
	--set run.artifacts=x > /dev/null
# shellcheck disable=SC2086
run train --resume latest $EXACT --set devices.world=4 --set train.accumulation=1 \
	--set train.shard_optimizer=true --set run.artifacts=x > x.out || fail "elastic resume: $(cat x.out)"
# shellcheck disable=SC2086
same "$(ckpt x 0006)" "$(ckpt x-c 0006)" $MOMENTS
echo "ok"
