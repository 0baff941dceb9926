#!/bin/sh
# inspect: save writes a checkpoint with the trainer's writer that is byte-identical to
# the trainer's own checkpoint of the same step, from a fresh session and from one that
# resumed an earlier save (whose histories and last loss it carries on); inspect --resume
# continues from it exactly as the uninterrupted session does; the losses inspect reports
# are the ones the trainer records; saving is refused (the session going on) when there is
# nothing to save or when the session mixed normalizations, a resumed checkpoint's
# included; a damaged checkpoint is refused at --resume with status 5.
set -eu

fail() { echo "FAIL: $*"; for f in *.txt; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

# the trainer's stop run: steps 0 -> 3 (a planned stop at 3: tiny.ini with stop_at = 3,
# which every session below shares, so that the checkpoints' config.ini agree)
sed 's/^updates = 6$/updates = 6\nstop_at = 3/' "$CONF/tiny.ini" > tiny.ini
grep -q '^stop_at = 3$' tiny.ini || fail "no stop_at in tiny.ini"
CONF=.
"$DDPTOK" "$CONF/tiny.ini" train > train.txt 2>&1 || fail "train exited with $?"
run=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)
[ -f "$run/step-0003/MANIFEST.json" ] || fail "train wrote no step-0003"

# a session that saves at step 2 and at step 3, then goes on to step 5 (its refused save
# at step 0 fails the script at its end: status 2)
rc=0
printf 'save\nstep 2\nsave\nstep\nsave\nstep 2\neval\n' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect > a.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "session a exited with $rc, expected 2"
grep -q 'error: save: no step taken yet' a.txt || fail "save at step 0 was not refused"
grep -q 'save: checkpoint artifacts/tiny/inspect/step-0002: step 2, 2 updates, normalization global_token' a.txt \
	|| fail "no checkpoint at step 2"
grep -q 'save: checkpoint artifacts/tiny/inspect/step-0003: step 3, 3 updates' a.txt || fail "no checkpoint at step 3"
grep -q 'step 5: window 5, ' a.txt || fail "session a did not reach step 5"

# the same step through inspect and through train: byte-identical checkpoint files
for f in params.npy momentum.npy state.json rank-0.json rank-1.json config.ini data.lock MANIFEST.json; do
	cmp -s "$run/step-0003/$f" "artifacts/tiny/inspect/step-0003/$f" \
		|| fail "$f differs between train's and inspect's checkpoint of step 3"
done

# the losses inspect printed are those the trainer recorded (6 decimals)
for s in 1 2 3; do
	tl=$(grep "\"step\": *$s," "$run/metrics.jsonl" | sed -n 's/.*"loss": *\([-0-9.eE+]*\).*/\1/p')
	[ -n "$tl" ] || fail "no loss for step $s in metrics.jsonl"
	want=$(awk -v x="$tl" 'BEGIN { printf "%.6f", x }')
	grep -q "step $s: window $s, loss $want " a.txt || fail "step $s: inspect's loss is not the trainer's $want"
done

# resuming at step 2 continues exactly like the uninterrupted session
printf 'step 3\neval\n' | "$DDPTOK" "$CONF/tiny.ini" inspect --resume artifacts/tiny/inspect/step-0002 \
	> b.txt 2>&1 || fail "session b exited with $?"
grep -q 'inspect: resumed from artifacts/tiny/inspect/step-0002 at step 2 (2 updates done)' b.txt \
	|| fail "resume banner"
grep -q 'step 2:' b.txt && fail "the resumed session repeated step 2"
steps() { grep -o 'step [345]: window .*' "$1"; }
[ "$(steps b.txt | wc -l)" = 3 ] || fail "session b did not run steps 3..5"
[ "$(steps a.txt)" = "$(steps b.txt)" ] || fail "the resumed session differs from the continuous one"
[ "$(grep -o 'eval: .*' a.txt)" = "$(grep -o 'eval: .*' b.txt)" ] || fail "eval differs after resume"

# a session resumed at step 2 saves step 3 byte-identical to train's step 3 too
rm -rf artifacts/tiny/inspect/step-0003
printf 'step\nsave\n' | "$DDPTOK" "$CONF/tiny.ini" inspect --resume artifacts/tiny/inspect/step-0002 \
	> f.txt 2>&1 || fail "session f exited with $?"
grep -q 'save: checkpoint artifacts/tiny/inspect/step-0003: step 3, 3 updates' f.txt \
	|| fail "the resumed session saved no step 3"
for f in params.npy momentum.npy state.json rank-0.json rank-1.json config.ini data.lock MANIFEST.json; do
	cmp -s "$run/step-0003/$f" "artifacts/tiny/inspect/step-0003/$f" \
		|| fail "$f differs between train's step 3 and the resumed session's"
done

# a resumed session that switches away from its checkpoint's normalization cannot be saved
# (a refused save fails the scripted session: exit status 2, usage)
rc=0
printf 'mode mean_of_means\nstep\nsave\n' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect --resume artifacts/tiny/inspect/step-0002 > g.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "session g exited with $rc, expected 2"
grep -q 'error: save: unavailable in this session: its windows used several normalizations (those of checkpoint artifacts/tiny/inspect/step-0002 used global_token)' g.txt \
	|| fail "a resumed session with another normalization was saved"

# a session that mixes normalizations cannot be saved; one that keeps a wrong mode can
rc=0
printf 'step\nmode mean_of_means\nstep\nsave\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > c.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "session c exited with $rc, expected 2"
grep -q 'error: save: unavailable in this session: its windows used several normalizations' c.txt \
	|| fail "a mixed session was saved"
printf 'mode mean_of_means\nstep 2\nsave\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > d.txt 2>&1 \
	|| fail "session d exited with $?"
grep -q 'save: checkpoint artifacts/tiny/inspect/step-0002: step 2, 2 updates, normalization mean_of_means' d.txt \
	|| fail "a mean_of_means session was not saved"
grep -q 'train --resume artifacts/tiny/inspect/step-0002 --set train.normalization=mean_of_means' d.txt \
	|| fail "no hint on the normalization a train resume needs"
# its config.ini records the mode it was trained with, as state.json does: both resumes work
grep -q '^normalization = mean_of_means' artifacts/tiny/inspect/step-0002/config.ini \
	|| fail "config.ini of a mean_of_means checkpoint does not say so"
printf 'step\n' | "$DDPTOK" "$CONF/tiny.ini" inspect --resume artifacts/tiny/inspect/step-0002 > d2.txt 2>&1 \
	|| fail "inspect --resume of a mean_of_means checkpoint exited with $?"
grep -q 'step 3: .*\[mode mean_of_means\]' d2.txt || fail "the resumed session left the checkpoint's mode"
"$DDPTOK" "$CONF/tiny.ini" train --resume artifacts/tiny/inspect/step-0002 \
	--set train.normalization=mean_of_means > d3.txt 2>&1 \
	|| { cat d3.txt; fail "train --resume with the hinted --set exited with $?"; }

# a damaged checkpoint is refused before the session starts
cp -r "$run"/step-0003 broken
printf 'garbage' >> broken/params.npy
set +e
printf 'step\n' | "$DDPTOK" "$CONF/tiny.ini" inspect --resume broken > e.txt 2> e-err.txt
rc=$?
set -e
[ $rc -eq 5 ] || fail "a damaged checkpoint gave status $rc, expected 5"
grep -q 'step 4' e.txt && fail "a session ran on a damaged checkpoint"
echo ok
