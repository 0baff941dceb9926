# A rank that hangs (parked for good, or slow) cannot hang the run: train, parity and the
# protocol end with the device code within devices.timeout plus a small margin, naming
# the late rank, its window and its operation, and write no checkpoint, summary or report.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T=1
# the run must end within T + MARGIN s (generous: a loaded machine); a guard kills a hang
MARGIN=4

# runs ddptok-run ARGS with the timeout T; sets rc and ms (its wall time in ms)
hung() {
	start=$(date +%s%N)
	set +e
	timeout 60 "$DDPTOK" "$CONF/tiny.ini" "$@" --set devices.timeout=$T > out.txt 2> err.txt
	rc=$?
	set -e
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	[ "$rc" -eq 6 ] || { cat out.txt err.txt; fail "$* exited $rc, not 6"; }
	[ "$ms" -ge $((T * 1000 - 100)) ] || fail "$* ended after $ms ms, before the timeout"
	[ "$ms" -lt $(( (T + MARGIN) * 1000 )) ] || fail "$* ended after $ms ms"
	echo "$* : $ms ms"
}

# parked for good inside window 2: the window fails, nothing of it is written
hung train --inject-hang 1:2
grep -q "window 2: rank 1 did not arrive within $T s (devices.timeout): last in forward/backward of microbatch 1, for .*; its thread is left behind" err.txt ||
	fail "parked rank: $(cat err.txt)"
[ "$(ls -d artifacts/tiny/runs/2*/ | wc -l)" -eq 1 ] || fail "runs: $(ls artifacts/tiny/runs)"
run=$(ls -d artifacts/tiny/runs/2*/)
# named from the run's start, `latest` goes back to what it was (no run) with no checkpoint
[ ! -e artifacts/tiny/runs/latest ] || fail "latest names a run without a checkpoint"
[ "$(wc -l < "$run/metrics.jsonl")" -eq 1 ] || fail "metrics of window 2 written"
[ ! -e "$run/train.json" ] || fail "a summary of a failed run was written"
[ -z "$(ls -d "$run"/*step-* 2>/dev/null)" ] || fail "checkpoint written: $(ls -a "$run")"

# slow (six timeouts) rather than parked: named as late; the run ends long before it would
rm -rf outputs artifacts
hung train --inject-hang 0:1:6
grep -q "window 1: rank 0 did not arrive within $T s" err.txt || fail "slow rank: $(cat err.txt)"
[ "$ms" -lt 5000 ] || fail "the slow rank was waited for ($ms ms)"

# one rank alone (no peer waits at a barrier): its overdue operation tells
hung train --inject-hang 0:1 --set devices.world=1
grep -q "window 1: rank 0 did not arrive" err.txt || fail "single rank: $(cat err.txt)"

# parity and the protocol (whose parity step is its first window)
rm -rf outputs artifacts
hung parity --inject-hang 1:1
grep -q "window 1: rank 1 did not arrive within $T s" err.txt || fail "parity: $(cat err.txt)"
[ ! -e outputs/tiny/parity.json ] || fail "parity.json written"
hung protocol --inject-hang 1:1:6
grep -q "parity: window 1: rank 1 did not arrive within $T s" err.txt || fail "protocol: $(cat err.txt)"
[ ! -e outputs/tiny/report.md ] && [ ! -e outputs/tiny/report.json ] || fail "a report was written"

# the watchdog never fires on a healthy run with the same short timeout
"$DDPTOK" "$CONF/tiny.ini" train --continuous --set devices.timeout=$T > ok.txt ||
	fail "a healthy run failed: $(cat ok.txt)"
echo ok
