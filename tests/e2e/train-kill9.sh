# kill -9 at random moments of a run that checkpoints after every window (so most kills
# land in or near a checkpoint write), resumed (`--resume latest`) trial after trial in its
# run directory, which keeps its 4 newest checkpoints (so kills also land while older ones
# are removed, the metrics are trimmed and the `latest` link is replaced); a new run starts
# once one is complete. Afterwards `checkpoints` must accept no partial checkpoint and
# report no corrupt one, and every checkpoint it accepts must resume to the continuous
# run's final parameters.
set -eu
fail() { echo "FAIL: $*"; exit 1; }

S="--set devices.backend=cpu --set data.vocab=64 --set model.embed=16 --set model.hidden=256
   --set model.context=4 --set data.train=128 --set data.max_len=32 --set train.updates=12
   --set train.checkpoint_every=1 --set train.keep=4"
R="--set run.outputs=ref-out --set run.artifacts=ref-art"

# the reference: one uninterrupted run (its own directories)
# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" train --continuous $S $R > ref.out
ref=ref-art/runs/latest/step-0012
[ -f "$ref/params.npy" ] || fail "no reference checkpoint"
# how long a whole run takes, in ms: kills are spread over that span
t0=$(date +%s%N)
# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" train --continuous $S --set run.outputs=probe-out \
	--set run.artifacts=probe-art > /dev/null
span=$((($(date +%s%N) - t0) / 1000000 + 20))

start=$(date +%s)
trials=0
kills=0
while [ $(($(date +%s) - start)) -lt 25 ] && [ "$trials" -lt 60 ]; do
	trials=$((trials + 1))
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	ms=$((r % span))
	how=--continuous
	# latest names a run from its start: one killed before its first checkpoint has
	# nothing to resume, and a new run starts
	if ls -d artifacts/tiny/runs/latest/step-* > /dev/null 2>&1 &&
		[ ! -e artifacts/tiny/runs/latest/step-0012 ]; then
		how="--resume latest"
	fi
	# shellcheck disable=SC2086
	"$DDPTOK" "$CONF/tiny.ini" train $how $S > /dev/null 2>&1 &
	pid=$!
	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
	if kill -9 "$pid" 2> /dev/null; then
		kills=$((kills + 1))
	fi
	wait "$pid" 2> /dev/null || true
	# nothing published may be corrupt, whatever the moment of the kill
	# shellcheck disable=SC2086
	"$DDPTOK" "$CONF/tiny.ini" checkpoints $S > ck.out 2> ck.err ||
		{ cat ck.out ck.err; fail "checkpoints after trial $trials (killed at ${ms} ms)"; }
	if grep -v '^checkpoints' ck.out | grep 'step-' | grep -v ' ok$' |
		grep -v 'partial write' | grep -v 'old copy being replaced' | grep -q .; then
		cat ck.out
		fail "an entry is neither ok nor a reported partial write"
	fi
	if grep '\.step-.*tmp' ck.out | grep -q ' ok$'; then
		fail "a partial write was accepted"
	fi
done
[ "$kills" -gt 0 ] || fail "no run was killed in $trials trials"

# every accepted checkpoint resumes to the reference
accepted=$(grep ' ok$' ck.out | awk '{print $1}')
[ -n "$accepted" ] || fail "no checkpoint survived $trials trials"
n=0
for c in $accepted; do
	n=$((n + 1))
	case "$c" in runs/*/step-0012) cmp "artifacts/tiny/$c/params.npy" "$ref/params.npy" ||
		fail "$c differs from the reference"; continue ;; esac
	# shellcheck disable=SC2086
	"$DDPTOK" "$CONF/tiny.ini" train --resume "artifacts/tiny/$c" $S \
		--set run.artifacts=res-art --set run.outputs=res-out > /dev/null ||
		fail "resume from $c"
	cmp res-art/runs/latest/step-0012/params.npy "$ref/params.npy" ||
		fail "resume from $c: final params differ from the continuous run's"
	cmp res-art/runs/latest/step-0012/momentum.npy "$ref/momentum.npy" ||
		fail "resume from $c: final momentum differs"
done
partial=$(grep -c 'partial write' ck.out || true)
# clean removes the leftovers as well
# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" clean --scope checkpoints $S > clean.out
[ ! -e artifacts/tiny/runs ] || { cat clean.out; fail "clean left artifacts/tiny/runs"; }
echo "ok: $trials trials, $kills killed, $n accepted checkpoints resumed bit for bit, $partial partial writes reported"
