# Crashes at the wrong moment, reproduced by leaving what a kill -9 leaves: runs/latest lost
# between its temporary and the rename, stale, or a plain directory (`latest` is then the
# run with the newest valid checkpoint); stale temporaries, which clean lists and removes;
# more checkpoints than train.keep, removed at the next start; a closed output (`train |
# tee` ended by Ctrl-C), which stops the run with its checkpoint, its summary and exit 8.
# Also: runs/latest names a run from its start, resuming such a run before its first
# checkpoint says so, a failed new run gives `latest` back, and --resume of a directory
# without checkpoints says there is none and what the directory holds.
set -eu
fail() { echo "FAIL: $*"; exit 1; }
T="$CONF/tiny.ini"
run() { "$DDPTOK" "$T" "$@" --set devices.backend=cpu; }
latest() { echo "artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)"; }
gone=$(sh -c 'echo $$') # the id of a process that has ended: a crashed writer's

# --- runs/latest lost between its temporary and the rename --------------------------------
run train --set train.stop_at=3 --set train.checkpoint_every=1 > a.out || fail "train: $(cat a.out)"
A=$(latest)
mv artifacts/tiny/runs/latest "artifacts/tiny/runs/latest.tmp.$gone"
echo '{}' > "$A/train.json.tmp.$gone"
echo '{}' > "$A/train.json.tmp.$$" # a live writer's: left
run clean --scope partial --dry-run > dry.out || fail "clean --dry-run: $(cat dry.out)"
grep -q "^clean: would remove artifacts/tiny/runs/latest.tmp.$gone " dry.out &&
	grep -q "^clean: would remove $A/train.json.tmp.$gone " dry.out ||
	fail "the stale temporaries are not listed: $(cat dry.out)"
grep -q "^clean: left $A/train.json.tmp.$$ (process $$ is running" dry.out ||
	fail "a live temporary is not left: $(cat dry.out)"
[ -L "artifacts/tiny/runs/latest.tmp.$gone" ] || fail "the dry run removed the temporary"
run train --resume latest --set train.checkpoint_every=1 > rec.out 2>&1 ||
	fail "resume latest without the link: $(cat rec.out)"
grep -q "latest: artifacts/tiny/runs/latest is missing: taking the run with the newest valid checkpoint, $A$" \
	rec.out || fail "the recovery is not said: $(cat rec.out)"
grep -q "resuming from $A/step-0003 (step 3)" rec.out || fail "not the newest run: $(cat rec.out)"
[ "$(latest)" = "$A" ] && [ -d "$A/step-0006" ] || fail "latest not restored to $A"
run clean --scope partial > partial.out || fail "clean: $(cat partial.out)"
[ ! -e "artifacts/tiny/runs/latest.tmp.$gone" ] && [ ! -e "$A/train.json.tmp.$gone" ] ||
	fail "clean left a stale temporary: $(cat partial.out)"
[ -f "$A/train.json.tmp.$$" ] && [ -d "$A/step-0006" ] && [ -L artifacts/tiny/runs/latest ] ||
	fail "clean --scope partial removed more than the stale temporaries"
rm "$A/train.json.tmp.$$"

# --- a stale link, and a directory in the link's place --------------------------------------
rm artifacts/tiny/runs/latest
ln -s 20000101-000000 artifacts/tiny/runs/latest
run evaluate > ev.out 2>&1 || fail "evaluate with a stale latest: $(cat ev.out)"
grep -q "names run 20000101-000000, which is gone: taking .* $A$" ev.out &&
	grep -q "evaluate: run $(basename "$A"), step 6" ev.out || fail "evaluate: $(cat ev.out)"
rm artifacts/tiny/runs/latest
cp -r "$A" artifacts/tiny/runs/latest # a copy that turned the link into a directory
run train --resume latest --set train.updates=7 > dir.out 2>&1 || fail "resume: $(cat dir.out)"
grep -q "latest is not the link this program writes: taking .* $A$" dir.out &&
	grep -q "artifacts/tiny/runs/latest is a directory, not the link this program writes: left" dir.out ||
	fail "the directory in latest's place is not said: $(cat dir.out)"
[ -d "$A/step-0007" ] && [ ! -e artifacts/tiny/runs/latest/step-0007 ] ||
	fail "the resume did not continue $A"
rm -r artifacts/tiny/runs/latest
ln -s "$(basename "$A")" artifacts/tiny/runs/latest

# --- more checkpoints than train.keep: a crash after publishing, before pruning ------------
K="--set train.keep=2 --set train.checkpoint_every=1"
# shellcheck disable=SC2086
run train $K --set train.stop_at=2 > k1.out || fail "train keep: $(cat k1.out)"
B=$(latest)
cp -r "$B/step-0001" saved-step-0001
# shellcheck disable=SC2086
run train --resume latest $K > k2.out || fail "resume keep: $(cat k2.out)"
[ "$(ls -d "$B"/step-* | wc -l)" -eq 2 ] || fail "keep = 2: $(ls "$B")"
cp -r saved-step-0001 "$B/step-0001" # what the crash left: one checkpoint too many
run train --set train.stop_at=1 > k3.out || fail "the next start: $(cat k3.out)"
[ ! -e "$B/step-0001" ] && [ -d "$B/step-0005" ] && [ -d "$B/step-0006" ] ||
	fail "the next start did not prune $B: $(ls "$B")"
grep -q "run $B held more checkpoints than its train.keep = 2 .*removed 1" k3.out ||
	fail "the pruning is not said: $(cat k3.out)"

# --- runs/latest from the run's start; a failed new run gives it back ----------------------
C=$(latest)
L="--set data.vocab=64 --set model.embed=16 --set model.hidden=256 --set model.context=4
   --set data.train=128 --set data.max_len=32 --set train.updates=1500"
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --set devices.backend=cpu $L > long.out 2>&1 &
pid=$!
i=0
until [ "$(latest)" != "$C" ] && [ -s "$(latest)/metrics.jsonl" ]; do
	i=$((i + 1))
	[ "$i" -lt 600 ] || { kill -9 "$pid"; fail "latest does not name the new run"; }
	sleep 0.05
done
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
D=$(latest)
[ -z "$(ls -d "$D"/step-* 2> /dev/null)" ] || fail "the long run checkpointed already"
set +e
# shellcheck disable=SC2086
run train --resume latest $L > none.out 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] || fail "resume of a run without checkpoints: exit $rc: $(cat none.out)"
grep -q "latest: run $D has no checkpoint yet (no checkpoint in $D); the newest run that has one is $C: name it (--resume or --checkpoint $C), or start a new run with \`train\`" \
	none.out || fail "resume of a run without checkpoints: $(cat none.out)"
# a run that fails once its directory is made, whatever the build and its devices: its
# corpus directory cannot be made (a file in its place)
mkdir o-bad && echo x > o-bad/corpus
set +e
run train --set run.outputs=o-bad > bad.out 2>&1
rc=$?
set -e
[ "$rc" -eq 4 ] && grep -q "cannot create directory o-bad/corpus" bad.out ||
	fail "a run without its corpus: exit $rc: $(cat bad.out)"
[ "$(latest)" = "$D" ] || fail "a failed new run left latest naming $(latest), not $D"

# --- --resume of a directory without checkpoints -----------------------------------------------
set +e
run train --resume "$D" > dir-none.out 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] || fail "exit $rc: $(cat dir-none.out)"
grep -q "there is no checkpoint in $D (no step-NNNN directory; it holds metrics.jsonl)" \
	dir-none.out || fail "resume of a directory without checkpoints: $(cat dir-none.out)"
if grep -q MANIFEST dir-none.out; then fail "a manifest is blamed: $(cat dir-none.out)"; fi

# --- a closed output (`train | tee log`, Ctrl-C): a stop request, not a kill by SIGPIPE --------
mkfifo out.fifo
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --set devices.backend=cpu $L --set run.log_every=1 \
	--set run.artifacts=p-art --set run.outputs=p-out > out.fifo 2> pipe.err &
pid=$!
head -n 8 < out.fifo > pipe.out # the reader goes after a few lines
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" -eq 8 ] || fail "closed output: exit $rc, expected 8: $(cat pipe.err)"
grep -q "^ddptok-run: interrupted by a closed output (SIGPIPE) after step" pipe.err ||
	fail "closed output: $(cat pipe.err)"
ck=$(sed -n 's/.*continue with --resume \(.*\))$/\1/p' pipe.err)
[ -n "$ck" ] && [ -f "$ck/MANIFEST.json" ] || fail "no checkpoint named: $(cat pipe.err)"
grep -q '"step"' "$(dirname "$ck")/train.json" || fail "no train.json after a closed output"
run checkpoints --set run.artifacts=p-art --set run.outputs=p-out > pck.out ||
	fail "checkpoints: $(cat pck.out)"

# --- the start's pruning never takes the checkpoint resumed, and never stops the run --------
rm -f artifacts/tiny/runs/latest && ln -s "$(basename "$B")" artifacts/tiny/runs/latest
cp -r saved-step-0001 "$B/step-0001" # one checkpoint more than train.keep = 2 again
run train --resume "$B/step-0001" --set run.outputs=o-k > k4.out 2>&1 ||
	fail "resume of a checkpoint past keep: $(cat k4.out)"
[ -d "$B/step-0001" ] || fail "the start pruned the checkpoint it resumed: $(cat k4.out)"
grep -q "train: resumed run to step 6 .* from $B/step-0001" k4.out || fail "$(cat k4.out)"
rm -f artifacts/tiny/runs/latest && ln -s "$(basename "$B")" artifacts/tiny/runs/latest
# step-0001 made immovable: root passes permissions, not the immutable flag; where the file
# system has no such flag, write permission (for an ordinary user)
if chattr +i "$B/step-0001" 2> /dev/null || { [ "$(id -u)" -ne 0 ] && chmod a-w "$B"; }; then
	set +e
	run train --set train.stop_at=1 --set run.outputs=o-k > k5.out 2>&1
	rc=$?
	set -e
	chattr -i "$B/step-0001" 2> /dev/null || chmod u+w "$B"
	[ "$rc" -eq 0 ] || fail "a failed pruning stopped the run: exit $rc: $(cat k5.out)"
	grep -q "train: note: the latest run's older checkpoints were left in place (.*$B/step-0001" \
		k5.out || fail "the failed pruning is not noted: $(cat k5.out)"
	[ -d "$B/step-0001" ] || fail "step-0001 went"
else
	echo "note: no way to make $B/step-0001 immovable here: a failed pruning is not tried"
fi
echo "ok"
