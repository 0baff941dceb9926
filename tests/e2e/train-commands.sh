# train / evaluate / checkpoints / clean through the binary: the three runs and their
# files, refusals with their exit codes, corrupt checkpoints reported, and clean removing
# exactly what it lists and nothing outside the configured directories.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
expect_rc() {
	want=$1
	shift
	set +e
	run "$@" > cmd.out 2> cmd.err
	got=$?
	set -e
	[ "$got" -eq "$want" ] || { cat cmd.out cmd.err; fail "'$*' exited $got, expected $want"; }
}

# the three runs of the protocol, by hand
run train > stop.out
[ -f artifacts/checkpoints/step-0003/MANIFEST.json ] || fail "no checkpoint at stop_at"
[ "$(wc -l < outputs/train-stop.jsonl)" -eq 3 ] || fail "train-stop.jsonl lines"
grep -q '"grad_norm"' outputs/train-stop.jsonl || fail "no gradient norm in the metrics"
grep -q '"rank_tokens"' outputs/train-stop.jsonl || fail "no per-rank tokens in the metrics"
grep -q "train: steps 0 -> 3" stop.out || fail "summary line: $(cat stop.out)"
# piped: no carriage-return progress line
if grep -q "$(printf '\r')" stop.out; then fail "progress line written to a pipe"; fi
run train --continuous > cont.out
run train --resume artifacts/checkpoints/step-0003 > resume.out
cmp artifacts/checkpoints/step-0006/params.npy artifacts/continuous/step-0006/params.npy ||
	fail "resumed params differ from continuous"
for f in rank-0.json rank-1.json state.json; do
	grep -q . "artifacts/checkpoints/step-0006/$f" || fail "$f missing"
done
grep -q '"history"' artifacts/checkpoints/step-0006/rank-1.json || fail "no rank history"
grep -q '"rng": null' artifacts/checkpoints/step-0006/rank-0.json || fail "rank rng"
expect_rc 2 train --continuous --resume artifacts/checkpoints/step-0003

# evaluate: the newest checkpoint by default, or the one named
run evaluate > ev.out
grep -q "step-0006" outputs/evaluate.json || fail "evaluate did not take the newest checkpoint"
grep -q '"constant_guess_accuracy"' outputs/evaluate.json || fail "no constant guess"
grep -q '"validation"' outputs/evaluate.json || fail "no validation split"
run evaluate --checkpoint artifacts/checkpoints/step-0003 > ev3.out
grep -q "step-0003" outputs/evaluate.json || fail "evaluate --checkpoint ignored"
expect_rc 5 evaluate --checkpoint artifacts/checkpoints/step-0099

# refusals through the command line, each with its exit code and message
expect_rc 5 train --resume artifacts/checkpoints/step-0003 --set model.hidden=9
grep -q "model.hidden: 9 != 8" cmd.err || fail "math key refusal: $(cat cmd.err)"
run train --resume artifacts/checkpoints/step-0003 --set devices.timeout=33 > /dev/null ||
	fail "a non-math key change was refused"
cp -r artifacts/checkpoints/step-0003 artifacts/checkpoints/step-0004
expect_rc 5 train --resume artifacts/checkpoints/step-0004
grep -q "manifest is for step 3" cmd.err || fail "renamed checkpoint: $(cat cmd.err)"
rm -r artifacts/checkpoints/step-0004

# checkpoints: all valid, then one corrupt byte is reported and fails the command
run checkpoints > ck.out
grep -q "continuous/step-0006 .* ok" ck.out || fail "checkpoints table: $(cat ck.out)"
grep -q "3 valid" ck.out || fail "checkpoints count: $(cat ck.out)"
cp -r artifacts/checkpoints/step-0003 keep-0003
printf 'X' | dd of=artifacts/checkpoints/step-0003/state.json bs=1 seek=10 conv=notrunc 2> /dev/null
expect_rc 1 checkpoints
grep -q "step-0003 .* digest mismatch" cmd.out || fail "corruption not reported: $(cat cmd.out)"
expect_rc 5 train --resume artifacts/checkpoints/step-0003
grep -q "digest mismatch for state.json" cmd.err || fail "corrupt resume: $(cat cmd.err)"
rm -r artifacts/checkpoints/step-0003
mv keep-0003 artifacts/checkpoints/step-0003
mkdir artifacts/checkpoints/.step-0007.tmp.99999
run checkpoints > ck.out || fail "a partial write alone must not fail checkpoints"
grep -q "partial write (pid 99999)" ck.out || fail "partial not reported: $(cat ck.out)"

# clean: dry runs list and keep, real runs remove exactly that, outside files untouched
echo keep > outside.txt
echo keep > artifacts/notes.txt
run clean --dry-run > dry.out
grep -q "would remove outputs/corpus/" dry.out || fail "dry run list: $(cat dry.out)"
grep -q "would remove outputs/evaluate.json" dry.out || fail "dry run list: $(cat dry.out)"
[ -f outputs/evaluate.json ] && [ -d outputs/corpus ] || fail "the dry run removed files"
if grep -q "artifacts" dry.out; then fail "generated scope touches artifacts"; fi
run clean --scope checkpoints --dry-run > dryck.out
grep -q "would remove artifacts/checkpoints/" dryck.out || fail "checkpoint dry run"
[ -d artifacts/checkpoints/step-0003 ] || fail "the dry run removed checkpoints"
run clean > gen.out
[ -z "$(ls outputs)" ] || fail "outputs not emptied: $(ls outputs)"
[ -d artifacts/checkpoints/step-0003 ] || fail "scope generated removed checkpoints"
sed 's/would remove/removed/; s/; nothing was removed (dry run)//' dry.out | diff - gen.out ||
	fail "the real run did not remove exactly what the dry run listed"
run clean --scope checkpoints > ck-clean.out
[ ! -e artifacts/checkpoints ] && [ ! -e artifacts/continuous ] || fail "checkpoints remain"
[ "$(cat outside.txt)" = keep ] && [ "$(cat artifacts/notes.txt)" = keep ] ||
	fail "clean touched a file outside its scope"
expect_rc 2 clean --scope everything
for bad in . / .. ./ "" "${HOME:-/}" "$(pwd)"; do
	expect_rc 3 clean --set "run.outputs=$bad"
	grep -q "refusing\|must not be empty" cmd.err ||
		fail "outputs = '$bad' not refused: $(cat cmd.err)"
	expect_rc 3 clean --scope checkpoints --set "run.artifacts=$bad"
done
[ "$(cat outside.txt)" = keep ] || fail "outside file touched"
echo "ok"
