# Progress off a terminal and validation while training: a piped run prints whole progress
# lines (about 20 per run, every run.log_every steps, every step at log_level = debug, none
# when quiet); train.eval_every adds the validation loss to the metrics and the progress
# line without changing a bit of the training, continuous or stopped and resumed.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
S="--set devices.backend=cpu --set train.updates=40"
lines() { grep -c '^train: step [0-9]*/40 ' "$1" || true; }
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set run.artifacts=plain > plain.out
n=$(lines plain.out)
[ "$n" -ge 15 ] && [ "$n" -le 25 ] || fail "auto: $n progress lines: $(cat plain.out)"
grep -q '^train: step 1/40  loss [0-9.]*  lr 0.2  [0-9]* tokens/s  elapsed [0-9]*s  ETA [0-9]*s$' \
	plain.out || fail "first line: $(cat plain.out)"
grep -q '^train: step 40/40 ' plain.out || fail "no last line: $(cat plain.out)"
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set run.log_every=10 --set run.artifacts=x > every.out
[ "$(lines every.out)" -eq 5 ] || fail "log_every = 10: $(cat every.out)"
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set run.log_level=debug --set run.artifacts=x > debug.out
[ "$(lines debug.out)" -eq 40 ] || fail "debug: $(lines debug.out) lines"
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set run.log_level=quiet --set run.artifacts=x > quiet.out
[ ! -s quiet.out ] || fail "quiet printed: $(cat quiet.out)"

# the line gives the rate the step's update took: a quarter of lr after 1 of 4 warmup steps
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set train.warmup=4 --set run.log_level=debug --set run.artifacts=x \
	> warm.out
grep -q '^train: step 1/40  loss [0-9.]*  lr 0.05  ' warm.out || fail "warmup lr: $(head -3 warm.out)"

# validation every 5 steps: the same parameters and momentum as without it
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set train.eval_every=5 --set run.artifacts=val \
	--set run.outputs=val > val.out
for f in params.npy momentum.npy; do
	cmp plain/runs/latest/step-0040/$f val/runs/latest/step-0040/$f ||
		fail "eval_every changed $f"
done
grep -q '^train: step 40/40  loss [0-9.]*  val [0-9.]*  lr ' val.out || fail "$(cat val.out)"
python3 - val/runs/latest/metrics.jsonl <<'PY' || fail "val_loss in the metrics"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [r["step"] for r in rows if "val_loss" in r]
assert got == [5, 10, 15, 20, 25, 30, 35, 40], got
assert all(math.isfinite(r["val_loss"]) and 0 <= r["val_accuracy"] <= 1 for r in rows
           if "val_loss" in r)
PY
# stopped at 15 and resumed, both validating: the continuous bits
# shellcheck disable=SC2086
"$DDPTOK" "$T" train $S --set train.stop_at=15 --set train.eval_every=5 \
	--set run.artifacts=res > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --resume latest $S --set train.eval_every=5 --set run.artifacts=res \
	> /dev/null
for f in params.npy momentum.npy; do
	cmp plain/runs/latest/step-0040/$f res/runs/latest/step-0040/$f ||
		fail "a resumed run with eval_every differs in $f"
done
echo "progress: ok"
