# The prepared corpus when a file is gone or edited: corpus.bin is the authority (it holds
# its own data lock), data.lock its description. A resume or evaluate draws a deleted
# synthetic corpus.bin again (the checkpoint's lock then matches; evaluate, a reader that
# may run beside a writer, in memory only) but refuses to rebuild one of your own files; a
# deleted or edited data.lock (read whole), or one left from the previous corpus by a
# rebuild cut between its two renames, is written again by the next writing command that
# loads the corpus (evaluate only names it).
set -eu
fail() { echo "FAIL: $*"; exit 1; }
run() { "$DDPTOK" "$CONF/tiny.ini" "$@"; }

run train --set train.stop_at=3 > train.txt 2>&1 || { cat train.txt; fail "train"; }
cp outputs/tiny/corpus/data.lock good.lock
ck=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)/step-0003
[ -d "$ck" ] || fail "no checkpoint at the planned stop: $(cat train.txt)"

# a deleted synthetic corpus.bin: drawn again, the same (same data.lock), the checkpoint used
rm outputs/tiny/corpus/corpus.bin
run evaluate --checkpoint "$ck" > ev.txt 2>&1 || { cat ev.txt; fail "evaluate after corpus.bin deleted"; }
grep -q "corpus.bin is missing: drawing the synthetic corpus again from \[data\] and run.seed (in memory only)" ev.txt ||
	fail "no message: $(cat ev.txt)"
[ ! -e outputs/tiny/corpus/corpus.bin ] || fail "evaluate wrote corpus.bin"
run train --resume "$ck" > res.txt 2>&1 || { cat res.txt; fail "resume after corpus.bin deleted"; }
grep -q "corpus.bin is missing: drawing the synthetic corpus again from \[data\] and run.seed$" res.txt ||
	fail "no message: $(cat res.txt)"
cmp -s good.lock outputs/tiny/corpus/data.lock || fail "the corpus drawn again differs"

# a deleted data.lock: evaluate names it and writes nothing; a resume writes it again
rm outputs/tiny/corpus/data.lock
run evaluate --checkpoint "$ck" > ev.txt 2>&1 || { cat ev.txt; fail "evaluate after data.lock deleted"; }
grep -q "data.lock: it is missing; corpus.bin is used" ev.txt || fail "$(cat ev.txt)"
[ ! -e outputs/tiny/corpus/data.lock ] || fail "evaluate wrote data.lock"
run train --resume "$ck" > res.txt 2>&1 || { cat res.txt; fail "resume after data.lock deleted"; }
grep -q "data.lock: it is missing; written again from corpus.bin" res.txt || fail "$(cat res.txt)"
cmp -s good.lock outputs/tiny/corpus/data.lock || fail "data.lock not restored"
# an edited one (a count under splits): written again, named
sed 's/"supervised": \([0-9]\)/"supervised": 9\1/' good.lock > outputs/tiny/corpus/data.lock
run train --resume "$ck" > res.txt 2>&1 || { cat res.txt; fail "resume after data.lock edited"; }
grep -q "data.lock: its splits.train differs; written again" res.txt || fail "$(cat res.txt)"
cmp -s good.lock outputs/tiny/corpus/data.lock || fail "data.lock not restored after an edit"

# a rebuild cut between its renames: the new corpus.bin beside the old corpus's data.lock
run prepare --set data.train=40 > /dev/null 2>&1
cp outputs/tiny/corpus/data.lock other.lock
run prepare > /dev/null 2>&1
cp other.lock outputs/tiny/corpus/data.lock
run train --resume "$ck" > res.txt 2>&1 || { cat res.txt; fail "resume after a cut rebuild"; }
grep -q "data.lock: its lock differs; written again" res.txt || fail "$(cat res.txt)"
cmp -s good.lock outputs/tiny/corpus/data.lock || fail "data.lock not repaired after a cut rebuild"

# your own files: a deleted corpus.bin is not rebuilt by evaluate (exit 5, named)
own() { "$DDPTOK" "$CONF/own-data.ini" --set data.path="$CONF/../tests/data/npy" \
	--set run.outputs=own-out --set run.artifacts=own-art "$@"; }
own train --set train.stop_at=2 > own.txt 2>&1 || { cat own.txt; fail "own train"; }
rm own-out/corpus/corpus.bin
rc=0
own evaluate > own-ev.txt 2>&1 || rc=$?
[ "$rc" -eq 5 ] || fail "evaluate rebuilt a corpus of own files (exit $rc): $(cat own-ev.txt)"
grep -q "own-out/corpus/corpus.bin is missing: a resume or evaluate does not rebuild a corpus of your own files" own-ev.txt ||
	fail "$(cat own-ev.txt)"
[ ! -e own-out/corpus/corpus.bin ] || fail "corpus.bin written by a refused evaluate"
echo ok
