# A run that diverges: SGD with weight decay 1 at learning rate 10 multiplies the
# parameters by about -9 each update, until the loss overflows to NaN at some window K.
# The run must stop at K with exit status 12, name the window and the newest good
# checkpoint, write K's metrics line with null values and "nonfinite": true, and leave
# the run directory as it was at the last good checkpoint (which runs/latest still
# names, and which resumes: to the same window K again, or to a step before it).
set -eu
fail() { echo "FAIL: $*"; exit 1; }
. "$E2E/json.sh"
T="$CONF/tiny.ini"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
DIVERGE="--set train.lr=10 --set train.weight_decay=1 --set train.momentum=0 --set train.updates=200 --set train.checkpoint_every=10"

run train --set train.stop_at=3 > stop.out || fail "the first run: $(cat stop.out)"
LATEST=$(readlink artifacts/tiny/runs/latest)
R=artifacts/tiny/runs/$LATEST
set +e
# shellcheck disable=SC2086
run train --resume latest $DIVERGE > diverge.out 2> diverge.err
rc=$?
set -e
[ "$rc" -eq 12 ] || fail "a diverging run exited $rc, expected 12: $(cat diverge.out diverge.err)"
M="$R/metrics.jsonl"
K=$(python3 - "$M" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
flagged = [r for r in rows if r.get("nonfinite")]
assert len(flagged) == 1 and flagged[0] is rows[-1], "one flagged line, the last"
last = rows[-1]
assert last["loss"] is None and last["grad_norm"] is None, last
assert all(r["loss"] is not None for r in rows[:-1]), "an earlier line has no loss"
assert [r["step"] for r in rows] == list(range(1, len(rows) + 1)), "steps"
print(last["step"])
PY
) || fail "metrics: $(tail -n 2 "$M")"
[ "$K" -gt 10 ] || fail "diverged at step $K, before any periodic checkpoint"
GOOD=$(( (K - 1) / 10 * 10 ))
GOOD_DIR=$(printf '%s/step-%04d' "$R" "$GOOD")
grep -q "non-finite: window $K (update $K) went non-finite: loss .*nan" diverge.err ||
	fail "the message does not name window $K: $(cat diverge.err)"
grep -q "the run stops at step $K without checkpointing it (newest checkpoint: $GOOD_DIR, step $GOOD, still runs/latest" \
	diverge.err || fail "the newest checkpoint is not named: $(cat diverge.err)"
[ "$(readlink artifacts/tiny/runs/latest)" = "$LATEST" ] || fail "runs/latest moved"
[ -f "$GOOD_DIR/MANIFEST.json" ] || fail "no checkpoint $GOOD_DIR"
# nothing past the last good checkpoint, nothing half-written
[ "$(ls -d "$R"/step-* | tail -n 1)" = "$GOOD_DIR" ] || fail "a checkpoint past $GOOD: $(ls "$R")"
if ls -a "$R" | grep -q tmp; then fail "a temporary was left: $(ls -a "$R")"; fi
run checkpoints > ckpts.out || fail "checkpoints: $(cat ckpts.out)"

# resumable: to the same window K again (the run is deterministic) ...
set +e
# shellcheck disable=SC2086
run train --resume latest $DIVERGE > again.out 2> again.err
rc=$?
set -e
[ "$rc" -eq 12 ] || fail "the resumed diverging run exited $rc: $(cat again.out again.err)"
grep -q "window $K (update $K) went non-finite" again.err ||
	fail "the resumed run did not stop at window $K: $(cat again.err)"
# ... and to a step before it, which is then published
# shellcheck disable=SC2086
run train --resume latest $DIVERGE --set train.updates=$((GOOD + 1)) > before.out 2>&1 ||
	fail "resume to step $((GOOD + 1)): $(cat before.out)"
[ -f "$(printf '%s/step-%04d' "$R" $((GOOD + 1)))/MANIFEST.json" ] || fail "no step $((GOOD + 1))"

# a new run that diverges before its first checkpoint: the last good checkpoint stays
# latest (the new run's directory, holding its metrics, stays too)
set +e
# shellcheck disable=SC2086
run train $DIVERGE --set train.checkpoint_every=1000 > new.out 2> new.err
rc=$?
set -e
[ "$rc" -eq 12 ] || fail "a new diverging run exited $rc: $(cat new.out new.err)"
[ "$(readlink artifacts/tiny/runs/latest)" = "$LATEST" ] ||
	fail "a new run that diverged before its first checkpoint left latest naming $(readlink artifacts/tiny/runs/latest)"
run evaluate > ev.out 2>&1 || fail "evaluate after a new run diverged: $(cat ev.out)"
grep -q "evaluate: run $LATEST, step $((GOOD + 1))" ev.out || fail "evaluate: $(cat ev.out)"
echo "ok: diverged at window $K, checkpoint step $GOOD kept"
