# The whole protocol on the tiny configuration: every step, the report, exit 0; then the
# same with a wrong normalization configured must still pass parity (parity always checks
# every mode) while a broken tolerance makes the correct mode fail and the exit non-zero.
set -eu
. "$E2E/json.sh"
"$DDPTOK" "$CONF/tiny.ini" > protocol.txt 2>&1 || { cat protocol.txt; echo "FAIL: protocol exited non-zero"; exit 1; }
for f in corpus/corpus.bin corpus/data.lock check-loss.json reference/reference.npy \
	reference/reference.json parity.json parity/reference.npy parity/reduced-global_token.npy \
	exercise.json train-stop.jsonl train-continuous.jsonl train-resume.jsonl train-stop.json \
	train-continuous.json train-resume.json evaluate.json report.md report.json; do
	[ -s "outputs/tiny/$f" ] || { echo "FAIL: outputs/tiny/$f missing"; exit 1; }
done
r=outputs/tiny/report.json
jcheck $r 'd["ok"] is True and d["failed_checks"] == 0'
jcheck $r 'd["resume"]["bit_identical"] is True and d["resume"]["params_differing"] == 0'
jcheck $r 'mode("global_token")["verdict"] == "pass (expected)" and mode("global_token")["pass"]'
# every negative control required and caught (none passed)
jcheck $r 'all(m["required"] and not m["pass"] and m["verdict"] == "fail (caught)"
	for m in d["parity"]["modes"] if m["negative_control"])'
jcheck $r 'len(d["parity"]["modes"]) == 4 and d["parity"]["ok"]'
jcheck $r 'd["empty_window"]["declined_by_all_ranks"] and d["empty_window"]["local_empty_rank_matches"]'
jcheck $r '[c["tokens"] for c in d["exercise"]["cases"]] == [[3, 3], [3, 9]]'
jcheck $r 'd["check_loss"]["mean_of_means"] == 2 and d["check_loss"]["global_mean"] == 2.5'
# on the cpu backend the GEMM the bitwise checks held under, named in both reports
jcheck $r '(d["backend"] == "cpu") == (d["gemm"] in ("onednn", "openblas"))'
gemm=$(python3 -c 'import json; print(json.load(open("outputs/tiny/report.json"))["gemm"] or "")')
[ -z "$gemm" ] || grep -q "backend cpu, GEMM $gemm\.$" outputs/tiny/report.md ||
	{ echo "FAIL: report.md names no GEMM"; exit 1; }
# one engine for every step on the two devices, the exercise's two ranks included: made by
# the reference, reset and handed out again to the 8 later steps and exercise cases
jcheck $r 'd["engines"] == {"created": 1, "reused": 8, "replaced": 0}'
grep -q "^engines: 1 created, 8 reuses after a reset" protocol.txt
jcheck $r 'd["test"]["step"] == 6 and d["evaluated_checkpoint"] == "artifacts/tiny/checkpoints/step-0006"'
jcheck $r '[s["name"] for s in d["steps"]][-1] == "figure" and
	all(s["result"] in ("ok", "skipped") for s in d["steps"])'
# the figure: a list of the files drawn (none when the step was skipped, with its reason)
jcheck $r 'isinstance(d["figure"], list) and (d["figure"] == ["outputs/tiny/figure.png",
	"outputs/tiny/figure.svg"] or (d["figure"] == [] and "reason" in d["steps"][-1]))'
for f in $(jget $r '" ".join(d["figure"])'); do [ -s "$f" ] || { echo "FAIL: $f missing"; exit 1; }; done
# the training summaries the protocol wrote are those of its runs
jcheck outputs/tiny/train-resume.json 'd["run"] == "resume" and d["start_step"] == 3 and d["step"] == 6'
jcheck outputs/tiny/train-continuous.json 'd["checkpoint"] == "artifacts/tiny/continuous/step-0006"'
# numbers in their shortest form: the tolerance is 1e-6, not 9.9999999999999995e-7
grep -q '"atol": 1e-6,' outputs/tiny/parity.json || { grep atol outputs/tiny/parity.json; echo "FAIL: atol spelled"; exit 1; }
[ -d artifacts/tiny/checkpoints/step-0003 ] && [ -d artifacts/tiny/checkpoints/step-0006 ] && [ -d artifacts/tiny/continuous/step-0006 ]
# every name the protocol wrote is in the table of outputs that clean works from
"$DDPTOK" "$CONF/tiny.ini" clean --scope all --dry-run > clean.txt
if grep "^clean: left" clean.txt; then echo "FAIL: clean does not know what the protocol wrote"; exit 1; fi
grep -q "would remove outputs/tiny/report.json" clean.txt
# the final checkpoints of the resumed and the continuous run hold the same parameters
cmp artifacts/tiny/checkpoints/step-0006/params.npy artifacts/tiny/continuous/step-0006/params.npy
cmp artifacts/tiny/checkpoints/step-0006/momentum.npy artifacts/tiny/continuous/step-0006/momentum.npy
# the same on conf/minimum.ini (its model and batches; fewer updates): one engine
"$DDPTOK" "$CONF/minimum.ini" --set devices.backend=cpu --set train.updates=4 \
	--set train.stop_at=2 --set run.outputs=outm --set run.artifacts=artm > minimum.txt 2>&1 ||
	{ cat minimum.txt; echo "FAIL: protocol on minimum.ini exited non-zero"; exit 1; }
jcheck outm/report.json 'd["ok"] and d["engines"] == {"created": 1, "reused": 8, "replaced": 0}'
# a tolerance of zero cannot be met by a different reduction order: parity must now fail,
# and the protocol must say so through its exit status (1: a check failed)
set +e
"$DDPTOK" "$CONF/tiny.ini" --set parity.rtol=0 --set parity.atol=0 --set run.outputs=out2 \
	--set run.artifacts=art2 > strict.txt 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ]; then cat strict.txt; echo "FAIL: strict tolerances gave exit $rc, expected 1"; exit 1; fi
jcheck out2/report.json 'mode("global_token")["verdict"] == "FAIL (must pass)" and not d["parity"]["ok"]'
jcheck out2/report.json 'd["ok"] is False and d["failed_checks"] == 1'
jcheck out2/parity.json 'd["ok"] is False and not mode("global_token")["pass"]'
# the resume check must be able to fail: one flipped bit in the resumed state (the smallest
# change there is) ends the protocol with exit 1 and a report that says MISMATCH
set +e
"$DDPTOK" "$CONF/tiny.ini" --inject-drift --set run.outputs=out3 --set run.artifacts=art3 \
	> drift.txt 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ]; then cat drift.txt; echo "FAIL: a drifted resume gave exit $rc, expected 1"; exit 1; fi
jcheck out3/report.json 'd["resume"]["bit_identical"] is False and d["resume"]["params_differing"] >= 1'
jcheck out3/report.json 'd["ok"] is False and d["failed_checks"] == 1'
grep -q "MISMATCH" out3/report.md
