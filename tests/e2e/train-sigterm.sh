# SIGTERM during training: the run finishes its window, checkpoints, exits 8 naming the
# checkpoint; resuming from it ends with parameters byte-identical to a continuous run's.
# A second SIGTERM while the first is being honoured kills the process at once.
set -eu
fail() { echo "FAIL: $*"; exit 1; }

# long enough (about a thousand small windows) to be interrupted in the middle
S="--set devices.backend=cpu --set data.vocab=64 --set model.embed=16 --set model.hidden=256
   --set model.context=4 --set data.train=128 --set data.max_len=32 --set train.updates=1500
   --set train.stop_at=1400"
# SIGTERM to $1, then its exit status in $rc
term_and_wait() {
	kill -TERM "$1"
	set +e
	wait "$1"
	rc=$?
	set -e
}
# wait until the metrics file of a run under the artifacts directory $1 holds a line
# (training has started), at most 60 s; the file in $M
wait_line() {
	i=0
	M=
	while [ ! -s "$M" ]; do
		i=$((i + 1))
		[ "$i" -lt 1200 ] || fail "no metrics line under $1"
		sleep 0.05
		M=$(ls "$1"/runs/*/metrics.jsonl 2> /dev/null | head -1)
	done
}

# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" train $S > stop.out 2> stop.err &
pid=$!
wait_line artifacts/tiny
term_and_wait "$pid"
[ "$rc" -eq 8 ] || { cat stop.out stop.err; fail "exit $rc after SIGTERM, expected 8"; }
grep -q "interrupted by SIGTERM" stop.err || fail "no interruption message: $(cat stop.err)"
grep -q "^ddptok-run: interrupted by SIGTERM" stop.err || fail "wording: $(cat stop.err)"
ck=$(sed -n 's/.*continue with --resume \(.*\))$/\1/p' stop.err)
[ -n "$ck" ] && [ -d "$ck" ] || fail "the message names no checkpoint: $(cat stop.err)"
step=$(basename "$ck" | sed 's/^step-0*//')
lines=$(wc -l < "$M")
[ "$step" -eq "$lines" ] || fail "checkpoint at step $step but $lines windows were logged"
[ "$step" -lt 1400 ] || fail "the run was not interrupted early (step $step)"
"$DDPTOK" "$CONF/tiny.ini" checkpoints $S > ck.out || { cat ck.out; fail "checkpoints"; }

# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" train --resume "$ck" $S > resume.out
run=$(dirname "$ck")
# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" train --continuous $S > cont.out
cont=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)
[ "$cont" != "$run" ] || fail "the continuous run reused $run"
for f in params.npy momentum.npy state.json rank-0.json rank-1.json; do
	cmp "$run/step-1500/$f" "$cont/step-1500/$f" ||
		fail "$f of the resumed run differs from the continuous run's"
done
# the resume went on in the interrupted run: its metrics hold every step once
[ "$(wc -l < "$M")" -eq 1500 ] || fail "resume metrics: $(wc -l < "$M") lines"
[ "$(sed -n 's/^{"step": *\([0-9]*\),.*/\1/p' "$M" | uniq | wc -l)" -eq 1500 ] ||
	fail "the run's metrics repeat or skip steps"

# a second signal: windows of about half a second, TERM twice 50 ms apart
S2="--set devices.backend=cpu --set data.vocab=512 --set model.embed=64 --set model.hidden=2048
    --set model.context=8 --set data.train=256 --set data.max_len=128 --set train.batch_size=16
    --set train.updates=6 --set train.stop_at=5 --set run.outputs=o2 --set run.artifacts=a2"
# shellcheck disable=SC2086
"$DDPTOK" "$CONF/tiny.ini" train $S2 > two.out 2> two.err &
pid=$!
wait_line a2
kill -TERM "$pid"
sleep 0.05
kill -TERM "$pid" 2> /dev/null || true
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" -eq 143 ] || { cat two.out two.err; fail "exit $rc after two signals, expected 143"; }
[ -z "$(ls -d a2/runs/*/step-* 2> /dev/null)" ] ||
	fail "a checkpoint was written although the second signal killed the run"
echo "ok: interrupted at step $step, resumed bit for bit; a second signal kills"

# the protocol holds the signals for its whole run: a SIGTERM during a step that is not a
# training run (here, after "== prepare" is printed) stops it once that step is done, with
# exit 8 and no report; nothing runs on to the next steps
"$DDPTOK" "$CONF/minimum.ini" --set devices.backend=cpu --set run.outputs=o3 \
	--set run.artifacts=a3 > proto.out 2> proto.err &
pid=$!
i=0
until grep -q "^== prepare" proto.out 2> /dev/null; do
	i=$((i + 1))
	[ "$i" -lt 1200 ] || fail "the protocol never started"
	sleep 0.05
done
term_and_wait "$pid"
[ "$rc" -eq 8 ] || { cat proto.out proto.err; fail "protocol exit $rc after SIGTERM, expected 8"; }
grep -q "interrupted by SIGTERM" proto.err || fail "no interruption message: $(cat proto.err)"
[ ! -e o3/report.md ] || fail "an interrupted protocol wrote a report"
if grep -q "^== evaluate" proto.out; then fail "the protocol ran on after the signal"; fi
echo "ok: the protocol stops on SIGTERM between its steps"

# a SIGTERM that arrives before any work (here: already pending, under a mask the launcher
# left blocked) stops train as a later one does, before its first window with exit 8,
# instead of waiting blocked until the run is over; the run before it stays latest
"$DDPTOK" "$CONF/tiny.ini" train --set devices.backend=cpu --set train.stop_at=1 \
	--set run.outputs=o4 --set run.artifacts=a4 > before.out 2>&1 || fail "$(cat before.out)"
before=$(readlink a4/runs/latest)
rc=0
python3 -c '
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
os.kill(os.getpid(), signal.SIGTERM)
os.execv(sys.argv[1], sys.argv[1:])' "$DDPTOK" "$CONF/tiny.ini" train --set devices.backend=cpu \
	--set run.outputs=o4 --set run.artifacts=a4 > early.out 2> early.err || rc=$?
[ "$rc" -eq 8 ] || { cat early.out early.err; fail "exit $rc for a SIGTERM pending at the start, expected 8"; }
grep -q "interrupted by SIGTERM before the first step" early.err || fail "no interruption message: $(cat early.err)"
[ "$(readlink a4/runs/latest)" = "$before" ] ||
	fail "a new run interrupted before its first checkpoint left latest naming $(readlink a4/runs/latest)"
"$DDPTOK" "$CONF/tiny.ini" evaluate --set devices.backend=cpu --set run.outputs=o4 \
	--set run.artifacts=a4 > ev4.out 2>&1 || fail "evaluate: $(cat ev4.out)"
grep -q "evaluate: run $before, step 1" ev4.out || fail "evaluate: $(cat ev4.out)"
echo "ok: a SIGTERM pending at the start stops train before its first window"
