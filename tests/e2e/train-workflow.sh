# A newcomer's training workflow, one command line each: train to the end; resume the
# latest run; resume a finished run (said, exit 0, nothing rewritten); continue past
# updates (the same bits as a longer run from the start); lower the learning rate on
# resume (printed, recorded, the run no longer claims its original trajectory); keep the
# newest K checkpoints; two runs in two run directories whose metrics both survive;
# evaluate naming the run and step it took.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
latest() { echo "artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)"; }

# train to the end: tiny.ini plans no stop, so train runs all its 6 updates
run train > first.out || fail "train: $(cat first.out)"
A=$(latest)
[ -f "$A/step-0006/MANIFEST.json" ] || fail "train did not reach updates: $(cat first.out)"
[ "$(wc -l < "$A/metrics.jsonl")" -eq 6 ] || fail "metrics of the first run"
grep -q '"run_dir"' "$A/train.json" || fail "no summary in the run directory"
if grep -q "planned stop" first.out; then fail "a stop announced without stop_at"; fi

# a second run: its own directory; the first run's metrics survive it
cp "$A/metrics.jsonl" first-metrics.jsonl
run train --set train.stop_at=2 > second.out || fail "second train: $(cat second.out)"
B=$(latest)
[ "$B" != "$A" ] || fail "the second run wrote into the first one's directory"
cmp first-metrics.jsonl "$A/metrics.jsonl" || fail "the second run touched the first's metrics"
[ "$(wc -l < "$B/metrics.jsonl")" -eq 2 ] || fail "metrics of the second run"
grep -q "planned stop at step 2 of 6 .*--resume latest.*--continuous" second.out ||
	fail "the planned stop does not name --resume / --continuous: $(cat second.out)"

# --resume latest: the second run, continued in its directory, its metrics appended
run train --resume latest > latest.out || fail "resume latest: $(cat latest.out)"
grep -q "resuming from $B/step-0002 (step 2), the newest valid checkpoint of the latest run" \
	latest.out || fail "the checkpoint taken is not named: $(cat latest.out)"
[ -f "$B/step-0006/MANIFEST.json" ] || fail "the resumed run wrote no step-0006"
[ "$(wc -l < "$B/metrics.jsonl")" -eq 6 ] || fail "metrics not appended: $(wc -l < "$B/metrics.jsonl")"
cmp "$A/step-0006/params.npy" "$B/step-0006/params.npy" || fail "stop + resume != one run"
[ "$(latest)" = "$B" ] || fail "latest does not name the resumed run"

# resuming a finished run: said, exit 0, nothing rewritten
ls -l --time-style=full-iso "$B/step-0006" "$B" > before.txt
sum_before=$(cat "$B"/step-0006/* "$B/metrics.jsonl" "$B/train.json" | cksum)
sleep 1
run train --resume latest > done.out || fail "resume of a finished run failed: $(cat done.out)"
grep -q "$B/step-0006 is already at updates = 6; raise train.updates to continue" done.out ||
	fail "finished run: $(cat done.out)"
ls -l --time-style=full-iso "$B/step-0006" "$B" > after.txt
cmp before.txt after.txt || fail "a finished run was rewritten: $(diff before.txt after.txt)"
[ "$(cat "$B"/step-0006/* "$B/metrics.jsonl" "$B/train.json" | cksum)" = "$sum_before" ] ||
	fail "a finished run's files changed"

# continuing past updates follows the same trajectory as a longer run from the start
run train --resume latest --set train.updates=9 > more.out || fail "continue: $(cat more.out)"
run train --set train.updates=9 > long.out || fail "long run: $(cat long.out)"
L=$(latest)
cmp "$B/step-0009/params.npy" "$L/step-0009/params.npy" ||
	fail "continuing past updates differs from a longer run"
cmp "$B/step-0009/momentum.npy" "$L/step-0009/momentum.npy" || fail "momentum differs"
# the run resumed is the one continued: latest names it again
run train --resume "$B" --set train.updates=12 --set train.lr=0.1 > lr.out ||
	fail "a lower learning rate on resume was refused: $(cat lr.out)"
grep -q "train.lr: 0.2 -> 0.1 from step 9" lr.out || fail "the change is not printed: $(cat lr.out)"
grep -q "no longer follows the trajectory of its original settings" lr.out ||
	fail "the run still claims its original trajectory: $(cat lr.out)"
python3 - "$B/step-0012/state.json" "$B/train.json" "$L/step-0009/state.json" <<'PY' ||
import json, sys
st = json.load(open(sys.argv[1]))
assert st["changes"] == [{"step": 9, "key": "train.lr", "from": "0.2", "to": "0.1"}], st.get("changes")
summary = json.load(open(sys.argv[2]))
assert summary["original_settings"] is False and summary["changes"][0]["key"] == "train.lr", summary
assert "changes" not in json.load(open(sys.argv[3])), "a run without a change records some"
PY
	fail "the change is not recorded in the checkpoint's history"
lr=$(tail -1 "$B/metrics.jsonl" | sed -n 's/.*"lr": *\([0-9.e+-]*\).*/\1/p')
[ "$lr" = "0.10000000000000001" ] || [ "$lr" = "0.1" ] || fail "the metrics' lr is $lr"
# the history goes on with the run: a later resume keeps it and adds its own change
run train --resume latest --set train.updates=13 --set train.lr=0.1 --set train.momentum=0.8 \
	> mom.out || fail "momentum change: $(cat mom.out)"
python3 - "$B/step-0013/state.json" <<'PY' || fail "history not carried forward"
import json, sys
ch = json.load(open(sys.argv[1]))["changes"]
assert [(c["step"], c["key"]) for c in ch] == [(9, "train.lr"), (12, "train.momentum")], ch
PY
# data and model settings stay refused
set +e
run train --resume latest --set train.updates=14 --set model.hidden=9 > ref.out 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] || fail "a model change on resume exited $rc: $(cat ref.out)"

# keep = 2: the two newest checkpoints of the run stay
run train --set train.checkpoint_every=1 --set train.keep=2 > keep.out || fail "keep: $(cat keep.out)"
K=$(latest)
[ "$(ls -d "$K"/step-* | tr '\n' ' ')" = "$K/step-0005 $K/step-0006 " ] ||
	fail "keep = 2 left: $(ls "$K")"

# evaluate: the latest run's newest checkpoint by default, named with its run and step
run evaluate > ev.out || fail "evaluate: $(cat ev.out)"
grep -q "evaluate: run $(basename "$K"), step 6 (checkpoint $K/step-0006)" ev.out ||
	fail "evaluate does not name the run and step: $(cat ev.out)"
grep -q "\"run\": \"$(basename "$K")\"" outputs/tiny/evaluate.json || fail "evaluate.json lacks the run"
run evaluate --checkpoint "$B" > evb.out || fail "evaluate of a run: $(cat evb.out)"
grep -q "evaluate: run $(basename "$B"), step 13 " evb.out || fail "evaluate DIR: $(cat evb.out)"

# the checkpoints command lists the runs' checkpoints; clean removes them and the link
run checkpoints > ck.out || fail "checkpoints: $(cat ck.out)"
grep -q "runs/$(basename "$K")/step-0006 .* ok" ck.out || fail "runs not listed: $(cat ck.out)"
run clean --scope checkpoints > clean.out || fail "clean: $(cat clean.out)"
[ ! -e artifacts/tiny/runs ] || fail "clean left run directories: $(cat clean.out)"
# --inject-drift reaches a resumed train: stopped at 2 and resumed, a run ends with the
# one run's parameters, and with other ones when the resumed state carries the drift
run train > ref.out || fail "train for drift: $(cat ref.out)"
cp "$(latest)/step-0006/params.npy" ref.npy
for drift in "" --inject-drift; do
	run train --set train.stop_at=2 > drift0.out || fail "train for drift: $(cat drift0.out)"
	# shellcheck disable=SC2086
	run train --resume latest $drift > drift.out || fail "resume $drift: $(cat drift.out)"
	[ -f "$(latest)/step-0006/params.npy" ] || fail "no step-0006 after resume $drift"
	if cmp -s ref.npy "$(latest)/step-0006/params.npy"; then same=1; else same=0; fi
	[ "$same" -eq "$([ -z "$drift" ] && echo 1 || echo 0)" ] ||
		fail "resume ${drift:-without drift}: same parameters as one run = $same"
done
echo "ok"
