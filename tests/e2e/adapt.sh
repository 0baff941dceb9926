# The adaptations of the objective and of the batching, end to end.
# Token batching (train.batching = tokens) on the length-band plan with W = 2 and 3: the
# ranks run different numbers of microbatches, and the whole protocol still holds
# (parity with every control caught, the empty-window checks, a bit-identical resume);
# conf/adapt-tokens.ini's parity at its own size; exact mode refuses token batching.
set -eu
. "$E2E/json.sh"
for w in 2 3; do
	"$DDPTOK" "$CONF/tiny.ini" --set devices.world=$w --set train.batching=tokens \
		--set train.micro_tokens=12 --set run.outputs=o$w --set run.artifacts=a$w \
		> tok$w.txt 2>&1 || { cat tok$w.txt; echo "FAIL: token batching, W = $w"; exit 1; }
	r=o$w/report.json
	jcheck $r 'd["ok"] is True and d["resume"]["bit_identical"] is True'
	jcheck $r 'all(m["required"] and not m["pass"] for m in d["parity"]["modes"]
		if m["negative_control"])'
	jcheck $r 'd["empty_window"]["declined_by_all_ranks"] and
		d["empty_window"]["local_empty_rank_matches"]'
	# the last rank (longest band) runs more microbatches than rank 0
	jcheck o$w/parity.json 'len(d["window"]["ranks"][-1]["microbatches"]) >
		len(d["window"]["ranks"][0]["microbatches"])'
	grep -q "^parity:   rank 0: .* microbatch" tok$w.txt
done
for w in 2 3; do
	"$DDPTOK" "$CONF/adapt-tokens.ini" parity --set devices.backend=cpu --set devices.world=$w \
		--set run.outputs=p$w > p$w.txt 2>&1 || { cat p$w.txt; echo "FAIL: adapt-tokens, W = $w"; exit 1; }
done
# the l2 term under sum on 3 ranks: the protocol holds, its control is caught
"$DDPTOK" "$CONF/tiny.ini" --set devices.world=3 --set devices.reduce=sum --set train.l2=0.01 \
	--set run.outputs=ol --set run.artifacts=al > l2.txt 2>&1 || { cat l2.txt; echo "FAIL: l2"; exit 1; }
jcheck ol/report.json 'd["ok"] is True and d["resume"]["bit_identical"] is True'
jcheck ol/report.json 'mode("l2_every_rank")["required"] and not mode("l2_every_rank")["pass"]'
grep -q '"loss_l2"' ol/train-stop.jsonl
# without the term its control does not exist
jcheck o2/parity.json 'all(m["normalization"] != "l2_every_rank" for m in d["modes"])'
jcheck o2/parity.json 'all(m["normalization"] != "z_loss_local" for m in d["modes"])'
# the z-loss on 2 and 3 ranks: the protocol holds, its control is caught, the report
# gives its share; in exact mode the 1-device reference is matched bit for bit
for w in 2 3; do
	"$DDPTOK" "$CONF/tiny.ini" --set devices.world=$w --set train.z_loss=0.01 \
		--set run.outputs=oz$w --set run.artifacts=az$w > z$w.txt 2>&1 ||
		{ cat z$w.txt; echo "FAIL: z-loss, W = $w"; exit 1; }
	jcheck oz$w/report.json 'd["ok"] is True and d["resume"]["bit_identical"] is True'
	jcheck oz$w/report.json 'mode("z_loss_local")["required"] and not mode("z_loss_local")["pass"]'
	grep -q "^- z-loss: c = 0.01, .* Control z_loss_local: fail (caught)" oz$w/report.md
done
"$DDPTOK" "$CONF/exact.ini" parity --set train.z_loss=0.01 --set run.outputs=ze > ze.txt 2>&1 ||
	{ cat ze.txt; echo "FAIL: z-loss in exact mode"; exit 1; }
jcheck ze/parity.json 'd["bitwise"]["differ"] == 0 and not d["bitwise"]["loss_differs"]'
# class weights on 2 and 3 ranks: the protocol holds, weights_by_count is caught,
# check-loss prints the weighted example; the sequence unit and exact mode refuse them
cw="$CONF/../tests/data/class-weights-16.npy"
for w in 2 3; do
	"$DDPTOK" "$CONF/tiny.ini" --set devices.world=$w --set train.class_weights="$cw" \
		--set run.outputs=ow$w --set run.artifacts=aw$w > cw$w.txt 2>&1 ||
		{ cat cw$w.txt; echo "FAIL: class weights, W = $w"; exit 1; }
	jcheck ow$w/report.json 'd["ok"] is True and d["resume"]["bit_identical"] is True'
	jcheck ow$w/report.json 'mode("weights_by_count")["required"] and
		not mode("weights_by_count")["pass"]'
	jcheck ow$w/check-loss.json 'abs(d["weighted"]["weighted_mean"] - 13 / 7) < 1e-15 and
		d["weighted"]["divided_by_token_count"] == 1.625'
	grep -q "^- Class weights .* Control weights_by_count (divided by N): fail (caught)" \
		ow$w/report.md
done
grep -q "weighted mean 1.857142857 (expected 78/42" cw2.txt
jcheck o2/check-loss.json '"weighted" not in d'
for refused in "$CONF/tiny.ini --set train.unit=sequence" "$CONF/exact.ini"; do
	if "$DDPTOK" $refused parity --set train.class_weights="$cw" > cwr.txt 2>&1; then
		echo "FAIL: accepted class weights: $refused"; exit 1
	fi
	grep -q "class_weights" cwr.txt
done
if "$DDPTOK" "$CONF/exact.ini" parity --set train.batching=tokens > exact.txt 2>&1; then
	echo "FAIL: exact mode accepted token batching"; exit 1
fi
grep -q "batching = tokens.*exact mode" exact.txt
# inspect divides by N, which is not the weighted objective's divisor: it refuses the weights
if "$DDPTOK" "$CONF/tiny.ini" inspect --set train.class_weights="$cw" < /dev/null > insp.txt 2>&1
then
	echo "FAIL: inspect took class weights"; exit 1
fi
grep -q "weight sum of train.class_weights" insp.txt
echo "token batching, l2, z-loss, class weights: parity, controls, resume hold on W = 2 and 3"
