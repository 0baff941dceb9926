# The whole protocol on the tiny configuration: every step, the report, exit 0; then the
# same with a wrong normalization configured must still pass parity (parity always checks
# every mode) while a broken tolerance makes the correct mode fail and the exit non-zero.
set -eu
"$DDPTOK" "$CONF/tiny.ini" > protocol.txt 2>&1 || { cat protocol.txt; echo "FAIL: protocol exited non-zero"; exit 1; }
for f in corpus/corpus.bin corpus/data.lock check-loss.json reference/reference.npy \
	reference/reference.json parity.json parity/reference.npy parity/reduced-global_token.npy \
	exercise.json train-stop.jsonl train-continuous.jsonl train-resume.jsonl evaluate.json \
	report.md report.json; do
	[ -s "outputs/$f" ] || { echo "FAIL: outputs/$f missing"; exit 1; }
done
grep -q "protocol: every check passed" protocol.txt
grep -q "bit-identical" outputs/report.md
grep -q '"bit_identical": true' outputs/report.json
grep -q "global_token .* pass (expected)" protocol.txt
[ "$(grep -c 'fail (caught)' protocol.txt)" -eq 3 ] || { echo "FAIL: not every negative control was caught"; cat protocol.txt; exit 1; }
grep -q "declined by all 2 ranks" protocol.txt
[ -d artifacts/checkpoints/step-0003 ] && [ -d artifacts/checkpoints/step-0006 ] && [ -d artifacts/continuous/step-0006 ]
# the final checkpoints of the resumed and the continuous run hold the same parameters
cmp artifacts/checkpoints/step-0006/params.npy artifacts/continuous/step-0006/params.npy
cmp artifacts/checkpoints/step-0006/momentum.npy artifacts/continuous/step-0006/momentum.npy
# a tolerance of zero cannot be met by a different reduction order: parity must now fail,
# and the protocol must say so through its exit status (1: a check failed)
set +e
"$DDPTOK" "$CONF/tiny.ini" --set parity.rtol=0 --set parity.atol=0 --set run.outputs=out2 \
	--set run.artifacts=art2 > strict.txt 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ]; then cat strict.txt; echo "FAIL: strict tolerances gave exit $rc, expected 1"; exit 1; fi
grep -q "FAIL (must pass)" strict.txt
grep -q "Overall: \*\*FAIL\*\*" out2/report.md
# the resume check must be able to fail: one flipped bit in the resumed state (the smallest
# change there is) ends the protocol with exit 1 and a report that says MISMATCH
set +e
"$DDPTOK" "$CONF/tiny.ini" --inject-drift --set run.outputs=out3 --set run.artifacts=art3 \
	> drift.txt 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ]; then cat drift.txt; echo "FAIL: a drifted resume gave exit $rc, expected 1"; exit 1; fi
grep -q "parameters differ in any bit, momentum differs -> MISMATCH" drift.txt
grep -q '"bit_identical": false' out3/report.json
grep -q "Overall: \*\*FAIL\*\*" out3/report.md
