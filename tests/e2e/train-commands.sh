# train / evaluate / checkpoints / clean through the binary: the three runs and their
# files (each run in its own run directory), refusals with their exit codes, corrupt checkpoints reported wherever they lie
# under the artifacts directory, a step directory in the way of a new checkpoint kept
# aside, and clean removing exactly what it lists: only names the program writes, never
# a user's file, nothing outside the configured directories.
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

# the three runs of the protocol, by hand: a planned stop, a continuous run, the resume
run train --set train.stop_at=3 > stop.out
R1=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)
M="$R1/metrics.jsonl"
[ -f "$R1/step-0003/MANIFEST.json" ] || fail "no checkpoint at stop_at: $(cat stop.out)"
grep -q "planned stop at step 3 of 6 .*train --resume latest.*train --continuous" stop.out ||
	fail "the planned stop is not explained: $(cat stop.out)"
[ "$(wc -l < "$M")" -eq 3 ] || fail "metrics lines"
grep -q '"grad_norm"' "$M" || fail "no gradient norm in the metrics"
grep -q '"rank_tokens"' "$M" || fail "no per-rank tokens in the metrics"
# every line: the learning rate, a UTC time stamp and the seconds since the run opened
python3 - "$M" <<'PY' || fail "metrics lines lack lr / time / elapsed: $(cat "$M")"
import datetime, json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
last = 0.0
for j in lines:
    assert j["lr"] == 0.2, j
    t = datetime.datetime.strptime(j["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert abs((datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - t).total_seconds()) < 600, j["time"]
    assert j["elapsed"] >= last, j
    last = j["elapsed"]
PY
grep -q "train: steps 0 -> 3" stop.out || fail "summary line: $(cat stop.out)"
# the banner says what kind of run, to which step, and the optimizer's own settings
grep -q "^train: new run to its planned stop, step 3 (W = 2, .*lr 0.2, sgd momentum 0.9, " stop.out ||
	fail "the banner of a planned stop: $(cat stop.out)"
run train --set train.updates=1 --set train.optimizer=adamw --set train.beta2=0.99 \
	--set train.lr=0.01 --set run.artifacts=adamw-art > adamw.out
grep -q "^train: new run to step 1 (.*lr 0.01, adamw beta1 0.9, beta2 0.99, " adamw.out ||
	fail "the banner of an adamw run: $(cat adamw.out)"
# piped: no carriage-return progress line
if grep -q "$(printf '\r')" stop.out; then fail "progress line written to a pipe"; fi
# on a terminal: a progress line with the time elapsed and the time left
if command -v script > /dev/null; then
	script -qec "'$DDPTOK' '$T' train --set devices.backend=cpu --set run.outputs=tty-out --set run.artifacts=tty-art" \
		/dev/null > tty.out || fail "train on a terminal: $(cat tty.out)"
	grep -q "$(printf '\r')train: step 6/6  loss [0-9.]*  lr 0.2  [0-9]* tokens/s  elapsed [0-9]*s  ETA 0s" tty.out ||
		fail "no progress line with elapsed time and ETA: $(cat -A tty.out)"
	rm -rf tty-out tty-art
fi
run train --continuous > cont.out
R2=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)
[ "$R2" != "$R1" ] || fail "the continuous run reused the run directory $R1"
run train --resume "$R1/step-0003" > resume.out
grep -q "run directory $R1 (this run continued)" resume.out || fail "resume: $(cat resume.out)"
cmp "$R1/step-0006/params.npy" "$R2/step-0006/params.npy" ||
	fail "resumed params differ from continuous"
[ "$(wc -l < "$M")" -eq 6 ] || fail "the resumed run's metrics were not appended"
for f in rank-0.json rank-1.json state.json; do
	grep -q . "$R1/step-0006/$f" || fail "$f missing"
done
grep -q '"history"' "$R1/step-0006/rank-1.json" || fail "no rank history"
grep -q '"rng": null' "$R1/step-0006/rank-0.json" || fail "rank rng"
expect_rc 2 train --continuous --resume "$R1/step-0003"
# the protocol's directories, laid out from these runs for the commands below (a
# checkpoint is valid in any directory); without runs, evaluate takes their newest
mkdir artifacts/tiny/checkpoints artifacts/tiny/continuous
cp -r "$R1/step-0003" "$R1/step-0006" artifacts/tiny/checkpoints/
cp -r "$R2/step-0006" artifacts/tiny/continuous/
rm -r artifacts/tiny/runs

# evaluate: the newest checkpoint by default, or the one named
run evaluate > ev.out
grep -q "step-0006" outputs/tiny/evaluate.json || fail "evaluate did not take the newest checkpoint"
grep -q '"constant_guess_accuracy"' outputs/tiny/evaluate.json || fail "no constant guess"
grep -q '"validation"' outputs/tiny/evaluate.json || fail "no validation split"
run evaluate --checkpoint artifacts/tiny/checkpoints/step-0003 > ev3.out
grep -q "step-0003" outputs/tiny/evaluate.json || fail "evaluate --checkpoint ignored"
expect_rc 5 evaluate --checkpoint artifacts/tiny/checkpoints/step-0099
# a resume never rebuilds the corpus: other [data] settings are refused, naming the key
expect_rc 5 train --resume artifacts/tiny/checkpoints/step-0003 --set data.branching=3
grep -q "data.branching: 4 (corpus) != 3 (configuration)" cmd.err || fail "corpus refusal: $(cat cmd.err)"
# evaluation needs the checkpoint's model shape and data, not its optimizer settings
run evaluate --checkpoint artifacts/tiny/checkpoints/step-0003 --set train.lr=0.05 > evlr.out \
	|| fail "evaluate refused a checkpoint trained with another learning rate"
expect_rc 5 evaluate --checkpoint artifacts/tiny/checkpoints/step-0003 --set model.hidden=64
grep -q "another shape (this configuration != checkpoint): model.hidden: 64 != 8" cmd.err ||
	fail "shape refusal: $(cat cmd.err)"

# refusals through the command line, each with its exit code and message
expect_rc 5 train --resume artifacts/tiny/checkpoints/step-0003 --set model.hidden=9
grep -q "model.hidden: 9 != 8" cmd.err || fail "math key refusal: $(cat cmd.err)"
run train --resume artifacts/tiny/checkpoints/step-0003 --set devices.timeout=33 > nm.out ||
	fail "a non-math key change was refused"
# a checkpoint outside any run: its resume is a new run
grep -q "run directory artifacts/tiny/runs/[0-9-]* (a new run)" nm.out || fail "no new run: $(cat nm.out)"
rm -r artifacts/tiny/runs
cp -r artifacts/tiny/checkpoints/step-0003 artifacts/tiny/checkpoints/step-0004
expect_rc 5 train --resume artifacts/tiny/checkpoints/step-0004
grep -q "manifest is for step 3" cmd.err || fail "renamed checkpoint: $(cat cmd.err)"
rm -r artifacts/tiny/checkpoints/step-0004

# checkpoints: all valid, then one corrupt byte is reported and fails the command
run checkpoints > ck.out
grep -q "continuous/step-0006 .* ok" ck.out || fail "checkpoints table: $(cat ck.out)"
grep -q "3 valid" ck.out || fail "checkpoints count: $(cat ck.out)"
cp -r artifacts/tiny/checkpoints/step-0003 keep-0003
printf 'X' | dd of=artifacts/tiny/checkpoints/step-0003/state.json bs=1 seek=10 conv=notrunc 2> /dev/null
expect_rc 1 checkpoints
grep -q "step-0003 .* digest mismatch" cmd.out || fail "corruption not reported: $(cat cmd.out)"
expect_rc 5 train --resume artifacts/tiny/checkpoints/step-0003
grep -q "digest mismatch for state.json" cmd.err || fail "corrupt resume: $(cat cmd.err)"
rm -r artifacts/tiny/checkpoints/step-0003
mv keep-0003 artifacts/tiny/checkpoints/step-0003
# evaluate passes over a newest checkpoint that fails verification, and says so
cp -r artifacts/tiny/checkpoints/step-0006 keep-0006
printf 'X' | dd of=artifacts/tiny/checkpoints/step-0006/state.json bs=1 seek=10 conv=notrunc 2> /dev/null
run evaluate > evskip.out || fail "evaluate with a corrupt newest checkpoint: $(cat evskip.out)"
grep -q "1 newer checkpoint under artifacts/tiny/checkpoints failed verification and was skipped" \
	evskip.out || fail "skipped checkpoint not reported: $(cat evskip.out)"
grep -q '"checkpoint": "artifacts/tiny/continuous/step-0006"' outputs/tiny/evaluate.json ||
	fail "evaluate did not take the newest valid checkpoint: $(cat outputs/tiny/evaluate.json)"
rm -r artifacts/tiny/checkpoints/step-0006
mv keep-0006 artifacts/tiny/checkpoints/step-0006
# (a pid beyond any pid_max: no process runs under it)
mkdir artifacts/tiny/checkpoints/.step-0007.tmp.999999999
run checkpoints > ck.out || fail "a partial write alone must not fail checkpoints"
grep -q "partial write (pid 999999999)" ck.out || fail "partial not reported: $(cat ck.out)"
grep -q "1 partial .*clean --scope partial" ck.out || fail "summary: $(cat ck.out)"

# a directory of checkpoints: its newest valid one, named; here it finished the run: said,
# exit 0, nothing written
expect_rc 0 train --resume artifacts/tiny/checkpoints
grep -q "artifacts/tiny/checkpoints/step-0006 is already at updates = 6; raise train.updates to continue" cmd.out ||
	fail "resume from a root: $(cat cmd.out)"
[ ! -e artifacts/tiny/runs ] || fail "a finished run's resume created a run directory"
expect_rc 5 train --resume artifacts/tiny/nothing

# inspect's saved checkpoints and a user's copy elsewhere under artifacts are verified too
printf 'step 2\nsave\nquit\n' | "$DDPTOK" "$T" inspect --set devices.backend=cpu > insp.out 2>&1 ||
	fail "inspect save: $(cat insp.out)"
[ -f artifacts/tiny/inspect/step-0002/MANIFEST.json ] || fail "inspect saved nothing: $(cat insp.out)"
mkdir -p artifacts/tiny/mine/old
cp -r artifacts/tiny/checkpoints/step-0003 artifacts/tiny/mine/old/
run checkpoints > ck.out
grep -q "^  inspect/step-0002 .* ok$" ck.out || fail "inspect checkpoint not verified: $(cat ck.out)"
grep -q "^  mine/old/step-0003 .* ok$" ck.out || fail "user's copy not verified: $(cat ck.out)"
cp -r artifacts/tiny/inspect/step-0002 keep-i2
printf 'X' >> artifacts/tiny/inspect/step-0002/params.npy
expect_rc 1 checkpoints
grep -q "inspect/step-0002 .* size mismatch" cmd.out || fail "inspect corruption: $(cat cmd.out)"
grep -q "inspect/step-0002" cmd.err || fail "the error does not name it: $(cat cmd.err)"
rm -r artifacts/tiny/inspect/step-0002
mv keep-i2 artifacts/tiny/inspect/step-0002
printf 'X' >> artifacts/tiny/mine/old/step-0003/params.npy
expect_rc 1 checkpoints
grep -q "mine/old/step-0003 .* size mismatch" cmd.out || fail "copy corruption: $(cat cmd.out)"
rm -r artifacts/tiny/mine/old/step-0003
cp -r artifacts/tiny/checkpoints/step-0003 artifacts/tiny/mine/old/

# a step directory in the way of a new checkpoint that is not a valid one (here an
# incomplete one holding a user's file) is kept aside and reported, never deleted
run train --set train.stop_at=3 > /dev/null
R3=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)
mkdir "$R3/step-0006"
echo mine > "$R3/step-0006/notes.txt"
run train --resume latest > kept.out
cmp "$R3/step-0006/params.npy" artifacts/tiny/continuous/step-0006/params.npy ||
	fail "the rewritten checkpoint differs"
kept=$(ls -d "$R3"/step-0006.kept.*)
[ "$(cat "$kept/notes.txt")" = mine ] || fail "the user's file was not kept: $(ls -a "$R3")"
run checkpoints > ck.out || fail "a kept-aside directory must not fail checkpoints: $(cat ck.out)"
grep -q "step-0006.kept.[0-9]* .* kept aside" ck.out || fail "kept aside not listed: $(cat ck.out)"
grep -q "7 valid, 0 corrupt or unusable, 1 partial .*, 1 kept aside" ck.out ||
	fail "summary: $(cat ck.out)"

# clean --scope partial: the leftovers of interrupted writes only
mkdir artifacts/tiny/checkpoints/.step-0005.old.999999999
run clean --scope partial > part.out
[ ! -e artifacts/tiny/checkpoints/.step-0007.tmp.999999999 ] && [ ! -e artifacts/tiny/checkpoints/.step-0005.old.999999999 ] ||
	fail "partial leftovers remain: $(cat part.out)"
[ -d artifacts/tiny/checkpoints/step-0003 ] && [ -d artifacts/tiny/checkpoints/step-0006 ] &&
	[ -d artifacts/tiny/continuous/step-0006 ] && [ -d artifacts/tiny/inspect/step-0002 ] &&
	[ -d "$R3/step-0006" ] &&
	[ -f "$kept/notes.txt" ] || fail "clean --scope partial removed more: $(cat part.out)"
grep -q "^clean: scope partial: removed 2 entries" part.out || fail "partial clean: $(cat part.out)"
grep -q "^clean: left $kept (kept aside" part.out || fail "kept dir not reported: $(cat part.out)"

# clean: dry runs list and keep, real runs remove exactly that, outside files untouched,
# and in the outputs directory only what the program writes there
echo keep > outside.txt
echo keep > artifacts/tiny/notes.txt
echo keep > outputs/tiny/my-notes.txt
mkdir outputs/tiny/mine
echo keep > outputs/tiny/mine/report.json
run clean --dry-run > dry.out
grep -q "would remove outputs/tiny/corpus/" dry.out || fail "dry run list: $(cat dry.out)"
grep -q "would remove outputs/tiny/evaluate.json" dry.out || fail "dry run list: $(cat dry.out)"
grep -q "^clean: left outputs/tiny/my-notes.txt (not written by the program)" dry.out ||
	fail "the user's file is not reported as left: $(cat dry.out)"
if grep -q "remove outputs/tiny/my-notes.txt\|remove outputs/tiny/mine" dry.out; then
	fail "a user's file is listed for removal: $(cat dry.out)"
fi
[ -f outputs/tiny/evaluate.json ] && [ -d outputs/tiny/corpus ] || fail "the dry run removed files"
if grep -q "artifacts" dry.out; then fail "generated scope touches artifacts"; fi
run clean --scope checkpoints --dry-run > dryck.out
grep -q "would remove artifacts/tiny/checkpoints/" dryck.out || fail "checkpoint dry run"
[ -d artifacts/tiny/checkpoints/step-0003 ] || fail "the dry run removed checkpoints"
run clean --scope all --dry-run > dryall.out
grep -q "would remove artifacts/tiny/inspect/" dryall.out || fail "scope all omits inspect/: $(cat dryall.out)"
if grep -q "remove artifacts/tiny/mine" dryall.out; then fail "scope all lists a user's copy"; fi
run clean > gen.out
[ "$(ls outputs/tiny | tr '\n' ' ')" = "mine my-notes.txt " ] || fail "outputs after clean: $(ls outputs/tiny)"
[ "$(cat outputs/tiny/my-notes.txt outputs/tiny/mine/report.json)" = "keep
keep" ] || fail "clean touched a user's file in outputs"
[ -d artifacts/tiny/checkpoints/step-0003 ] || fail "scope generated removed checkpoints"
sed 's/would remove/removed/; s/; nothing was removed (dry run)//' dry.out | diff - gen.out ||
	fail "the real run did not remove exactly what the dry run listed"
# a file of the user's inside a directory the program writes: that directory stays with it
run prepare > /dev/null
echo keep > outputs/tiny/corpus/mine.txt
run clean > gen2.out
[ "$(ls outputs/tiny/corpus)" = mine.txt ] || fail "corpus/ after clean: $(ls outputs/tiny/corpus)"
grep -q "removed outputs/tiny/corpus/corpus.bin" gen2.out || fail "corpus files: $(cat gen2.out)"
# a temporary whose writer still runs (this shell's pid) is left, a dead one's goes
echo x > "outputs/tiny/report.json.tmp.$$"
echo x > outputs/tiny/report.md.tmp.999999999
run clean > gen3.out
[ -f "outputs/tiny/report.json.tmp.$$" ] || fail "clean removed a live temporary: $(cat gen3.out)"
[ ! -e outputs/tiny/report.md.tmp.999999999 ] || fail "clean left a dead temporary: $(cat gen3.out)"
grep -q "left outputs/tiny/report.json.tmp.$$ (process $$ is running" gen3.out ||
	fail "live temporary not reported: $(cat gen3.out)"
rm "outputs/tiny/report.json.tmp.$$"
# outputs pointed at a directory of other things: nothing of it goes
mkdir foreign foreign/sub
for f in a.json report.txt parity.jsonx sub/evaluate.json; do echo keep > "foreign/$f"; done
run clean --set run.outputs=foreign > foreign.out
grep -q "removed 0 entries" foreign.out || fail "clean of a foreign directory: $(cat foreign.out)"
[ "$(find foreign -type f | wc -l)" -eq 4 ] || fail "clean removed a foreign file"
# a step directory that is not only what the store wrote, a leftover whose writer runs:
# scope checkpoints leaves them too (as it leaves the kept-aside directory)
mkdir artifacts/tiny/checkpoints/step-0009 && echo keep > artifacts/tiny/checkpoints/step-0009/data.txt
mkdir artifacts/tiny/checkpoints/.step-0008.tmp.$$
cp -r artifacts/tiny/continuous/step-0006 artifacts/tiny/continuous/step-0007
echo keep > artifacts/tiny/continuous/step-0007/mine.txt
run clean --scope checkpoints > ck-clean.out
[ ! -e artifacts/tiny/inspect ] && [ ! -e artifacts/tiny/checkpoints/step-0003 ] ||
	fail "checkpoints remain: $(cat ck-clean.out)"
[ "$(cat "$kept/notes.txt")" = mine ] || fail "scope checkpoints removed a kept-aside directory"
[ "$(cat artifacts/tiny/checkpoints/step-0009/data.txt)" = keep ] ||
	fail "scope checkpoints removed a directory the program did not write"
[ -d artifacts/tiny/checkpoints/.step-0008.tmp.$$ ] || fail "scope checkpoints removed a live partial write"
[ "$(cat artifacts/tiny/continuous/step-0007/mine.txt)" = keep ] ||
	fail "scope checkpoints removed a checkpoint holding a user's file"
[ ! -e artifacts/tiny/continuous/step-0006 ] || fail "scope checkpoints left a valid checkpoint"
grep -q "^clean: left artifacts/tiny/checkpoints/.step-0008.tmp.$$ (process $$ is running" ck-clean.out ||
	fail "live partial write not reported: $(cat ck-clean.out)"
rmdir artifacts/tiny/checkpoints/.step-0008.tmp.$$
[ -d artifacts/tiny/mine/old/step-0003 ] || fail "clean removed a user's copy of a checkpoint"
# a run directory: its checkpoints, metrics and summary go, the kept-aside directory stays
[ ! -e "$R3/step-0003" ] && [ ! -e "$R3/metrics.jsonl" ] && [ ! -e "$R3/train.json" ] &&
	[ ! -e artifacts/tiny/runs/latest ] || fail "a run remains: $(ls -a "$R3")"
[ "$(cat "$kept/notes.txt")" = mine ] || fail "scope checkpoints removed a run's kept-aside directory"
[ "$(cat outside.txt)" = keep ] && [ "$(cat artifacts/tiny/notes.txt)" = keep ] ||
	fail "clean touched a file outside its scope"
expect_rc 2 clean --scope everything
for bad in . / .. ./ "" "${HOME:-/}" "$(pwd)"; do
	expect_rc 3 clean --set "run.outputs=$bad"
	grep -q "refusing\|must not be empty" cmd.err ||
		fail "outputs = '$bad' not refused: $(cat cmd.err)"
	expect_rc 3 clean --scope checkpoints --set "run.artifacts=$bad"
done
[ "$(cat outside.txt)" = keep ] || fail "outside file touched"

# stop_at < updates is a rule of the protocol only: it refuses stop_at = 3 >= updates = 2
# before doing anything; train then has no planned stop and trains to updates
S="--set train.updates=2 --set train.stop_at=3 --set run.outputs=short-out --set run.artifacts=short-art"
# shellcheck disable=SC2086
expect_rc 3 protocol $S
grep -q "stop_at .* must be less than .*updates" cmd.err || fail "protocol: $(cat cmd.err)"
[ ! -e short-out ] && [ ! -e short-art ] || fail "a refused protocol created directories"
# shellcheck disable=SC2086
run train $S > short.out || fail "train refused updates < stop_at: $(cat short.out)"
[ -f short-art/runs/latest/step-0002/MANIFEST.json ] || fail "train wrote no step-0002"
# without a stop_at the protocol needs updates >= 2 (it stops halfway), and says so
expect_rc 3 protocol --set train.updates=1 --set run.outputs=short-out2
grep -q "the protocol stops its first run halfway.*updates >= 2" cmd.err || fail "protocol: $(cat cmd.err)"
echo "ok"
