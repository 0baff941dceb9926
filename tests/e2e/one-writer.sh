# One writer per directory: while a train runs, a second train (or any command writing the
# same outputs or artifacts) is refused at once naming the first; readers (checkpoints,
# evaluate, env) run; the lock goes with its process, also when it is killed.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
run() { "$DDPTOK" "$CONF/tiny.ini" "$@"; }

run train > first.txt                  # a checkpoint for the readers below
first=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest) # (latest moves to the run started next)
# a train held in its first window for 12 s (a slow rank; the watchdog is off): long enough
# for the commands below to run beside it on a loaded machine
"$DDPTOK" "$CONF/tiny.ini" train --continuous --inject-hang 0:1:12 --set devices.timeout=0 \
	> held.txt 2>&1 &
held=$!
for i in $(seq 100); do
	grep -q "pid $held on" outputs/tiny/.ddptok-run.lock 2>/dev/null && break
	sleep 0.1
done
grep -q "pid $held on .*: ddptok-run .*tiny.ini train --continuous" outputs/tiny/.ddptok-run.lock ||
	fail "lock file: $(cat outputs/tiny/.ddptok-run.lock 2>&1)"

# a second train is refused at once, naming the first
set +e
start=$(date +%s%N)
run train > second.txt 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
set -e
[ "$rc" -eq 4 ] || fail "second train exited $rc: $(cat second.txt)"
[ "$ms" -lt 2500 ] || fail "the second train waited ($ms ms)"
grep -q "directory outputs/tiny (\[run\] outputs) is being written by another ddptok-run (pid $held on .*train --continuous" second.txt ||
	fail "second train: $(cat second.txt)"
# the artifacts alone are locked too; and other writers are refused as well
set +e
run train --set run.outputs=other > third.txt 2>&1; rc3=$?
run clean --scope all > clean.txt 2>&1; rc4=$?
set -e
[ "$rc3" -eq 4 ] && grep -q "directory artifacts/tiny (\[run\] artifacts) is being written" third.txt ||
	fail "artifacts not locked ($rc3): $(cat third.txt)"
[ "$rc4" -eq 4 ] || fail "clean ran beside a train ($rc4): $(cat clean.txt)"
# readers are not refused
run checkpoints > ck.txt || fail "checkpoints beside a train: $(cat ck.txt)"
run evaluate --checkpoint "$first" > ev.txt ||
	fail "evaluate beside a train: $(cat ev.txt)"
run env > env.txt || fail "env beside a train"
run clean --scope all --dry-run > dry.txt || fail "a dry clean beside a train: $(cat dry.txt)"

wait "$held" || fail "the held train failed: $(cat held.txt)"
[ ! -e outputs/tiny/.ddptok-run.lock ] || fail "the lock file stayed after the run"
run checkpoints > ck2.txt || fail "checkpoints after the runs: $(cat ck2.txt)"

# killed while holding it (parked for good, no watchdog): the next writer gets it
"$DDPTOK" "$CONF/tiny.ini" train --inject-hang 1:1 --set devices.timeout=0 > parked.txt 2>&1 &
parked=$!
for i in $(seq 100); do
	grep -q "pid $parked on" outputs/tiny/.ddptok-run.lock 2>/dev/null && break
	sleep 0.1
done
kill -9 "$parked"
wait "$parked" 2>/dev/null || true
run train > after.txt 2>&1 || fail "the lock outlived its killed holder: $(cat after.txt)"
echo ok
