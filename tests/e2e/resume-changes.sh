# What a resume changes and what it refuses, said before anything else: raising
# train.updates under a cosine schedule continues on the new horizon, printed with the
# learning rate before and after and recorded in the run's changes (under a constant
# schedule it is no change). A checkpoint of another model kind is refused as such, before
# its step or data are compared; sample and export read a checkpoint alone, whatever the
# configuration's data and model.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
latest() { echo "artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)"; }
# the rate docs/optimizers.md gives update $1 of a cosine schedule from $2 to $3 over $4
# updates (no warmup), as %g prints it
cosine() { awk -v t="$1" -v lr="$2" -v lo="$3" -v T="$4" 'BEGIN { q = t / T; if (q > 1) q = 1;
	printf "%g", lo + (lr - lo) * (1 + cos(atan2(0, -1) * q)) / 2 }'; }

# --- train.updates raised under a cosine schedule ---------------------------------------
COS="--set train.schedule=cosine --set train.lr=0.2 --set train.lr_min=0.01"
# shellcheck disable=SC2086
run train $COS > cos1.out || fail "train: $(cat cos1.out)"
A=$(latest)
# shellcheck disable=SC2086
run train --resume latest $COS --set train.updates=10 > cos2.out || fail "resume: $(cat cos2.out)"
grep -q "^train: train.updates: 6 -> 10 from step 6$" cos2.out ||
	fail "the horizon's change is not said: $(cat cos2.out)"
before=$(cosine 7 0.2 0.01 6)
after=$(cosine 7 0.2 0.01 10)
grep -q "^train: learning rate of update 7: $before with the checkpoint's settings -> $after with these" \
	cos2.out || fail "the rates before ($before) and after ($after) are not said: $(cat cos2.out)"
logged=$(sed -n 's/^{"step": *7,.*"lr": *\([0-9.e-]*\),.*/\1/p' "$A/metrics.jsonl")
[ "$(awk -v x="$logged" 'BEGIN { printf "%g", x }')" = "$after" ] ||
	fail "update 7 took $logged, not the new horizon's $after"
grep -q '"key": "train.updates"' "$A/train.json" &&
	grep -q '"original_settings": false' "$A/train.json" ||
	fail "the change is not in train.json: $(cat "$A/train.json")"
grep -q '"train.updates"' "$A/step-0010/state.json" ||
	fail "the change is not in the checkpoint's history"

# --- under a constant schedule the horizon is read by nothing: no change -------------------
run train --set run.artifacts=c-art --set run.outputs=c-out > c1.out || fail "$(cat c1.out)"
run train --resume latest --set run.artifacts=c-art --set run.outputs=c-out \
	--set train.updates=8 > c2.out || fail "constant resume: $(cat c2.out)"
if grep -q "train.updates:\|learning rate of update" c2.out; then
	fail "a constant schedule recorded a change: $(cat c2.out)"
fi
grep -q '"original_settings": true' c-art/runs/latest/train.json || fail "constant: train.json"

# --- a checkpoint of another model kind, named as such first ------------------------------
G="$CONF/gpt-tiny.ini"
for how in "train --resume $A --set train.updates=3" "train --resume $A" \
	"evaluate --checkpoint $A"; do
	set +e
	# shellcheck disable=SC2086
	"$DDPTOK" "$G" $how --set devices.backend=cpu > kind.out 2>&1
	rc=$?
	set -e
	[ "$rc" -eq 5 ] || fail "$how with gpt-tiny.ini: exit $rc: $(cat kind.out)"
	grep -q "checkpoint $A/step-0010 holds a model of kind window_mlp (model.kind of its config.ini), this configuration's model.kind is gpt" \
		kind.out || fail "$how with gpt-tiny.ini: $(cat kind.out)"
done
# ... and of another shape
set +e
run train --resume "$A" --set model.hidden=9 --set train.updates=3 > shape.out 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] && grep -q "holds a model of another shape .*model.hidden" shape.out ||
	fail "another shape: exit $rc: $(cat shape.out)"

# --- sample and export need the checkpoint only ----------------------------------------------
"$DDPTOK" "$G" train --set devices.backend=cpu --set train.updates=2 --set run.artifacts=g-art \
	--set run.outputs=g-out > g.out || fail "gpt train: $(cat g.out)"
GC=g-art/runs/$(readlink g-art/runs/latest)/step-0002
"$DDPTOK" "$G" export --llmc own.bin --checkpoint "$GC" --set devices.backend=cpu \
	--set run.outputs=g-out > own.out || fail "export: $(cat own.out)"
"$DDPTOK" "$G" sample --checkpoint "$GC" --seed 5 --set devices.backend=cpu \
	--set run.outputs=g-out > own-sample.out || fail "sample: $(cat own-sample.out)"
# with tiny.ini: another model kind, other data, an outputs directory without a corpus
run export --llmc other.bin --checkpoint "$GC" --set run.outputs=x-out > other.out 2>&1 ||
	fail "export with an unrelated configuration: $(cat other.out)"
cmp own.bin other.bin || fail "export with an unrelated configuration wrote other bytes"
run sample --checkpoint "$GC" --seed 5 --set run.outputs=x-out > other-sample.out 2>&1 ||
	fail "sample with an unrelated configuration: $(cat other-sample.out)"
[ "$(grep '^sample: [0-9]' own-sample.out)" = "$(grep '^sample: [0-9]' other-sample.out)" ] ||
	fail "sample with an unrelated configuration drew other ids"
[ ! -e x-out/corpus ] || fail "a corpus was prepared for a command that needs none"
echo "ok"
