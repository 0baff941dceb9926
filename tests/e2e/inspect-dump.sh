#!/bin/sh
# inspect: dump writes the last window's tensors as .npy with a layout JSON; the end of
# input ends the session with status 0; input that cannot be read is an i/o error (4);
# dump before any step, into an impossible directory, or save/grad with bad arguments
# are reported without ending the session.
set -eu

fail() { echo "FAIL: $*"; [ -f out.txt ] && { echo "--- output"; cat out.txt; }; exit 1; }

touch afile
printf 'dump early\nstep 2\ndump afile/sub\ndump d\ngrad b2 extra\n' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect > out.txt 2>&1 || fail "exited with $? at end of input"
grep -q 'error: dump: no window has been stepped yet' out.txt || fail "dump before step"
[ ! -e early ] || fail "dump before step created a directory"
grep -q 'error: dump: cannot create directory afile/sub' out.txt || fail "dump into a file's subdirectory not reported"
grep -q 'error: grad: one parameter name at most' out.txt || fail "grad with two names"
grep -q 'dump: wrote reduced.npy, rank0..1-local.npy, params-before.npy, params.npy and layout.json to d (step 2, ' out.txt \
	|| fail "dump message"
for f in reduced.npy rank0-local.npy rank1-local.npy params-before.npy params.npy layout.json; do
	[ -s "d/$f" ] || fail "d/$f missing"
done
n=$(sed -n 's/.*, \([0-9]*\) parameters, .*/\1/p' out.txt | head -n 1)
[ -n "$n" ] || fail "no parameter count in the banner"
# every .npy: magic, and a data part of exactly n float32 values after the 64-aligned header
for f in d/*.npy; do
	[ "$(head -c 6 "$f" | tail -c 5)" = "NUMPY" ] || fail "$f: not an .npy file"
	size=$(wc -c < "$f")
	hdr=$(( size - 4 * n ))
	[ $hdr -gt 0 ] && [ $(( hdr % 64 )) -eq 0 ] || fail "$f: $size bytes do not hold $n float32 values"
	grep -q "'shape': ($n,)" "$f" || fail "$f: shape is not ($n,)"
done
cmp -s d/params-before.npy d/params.npy && fail "params.npy should hold the parameters after the update"
cmp -s d/rank0-local.npy d/rank1-local.npy && fail "the two ranks' local gradients are identical"
grep -q '"step": 2' d/layout.json || fail "layout.json step"
grep -q '"normalization": "global_token"' d/layout.json || fail "layout.json normalization"
for t in embed w1 b1 w2 b2; do
	grep -q "\"name\": \"$t\"" d/layout.json || fail "layout.json lacks tensor $t"
done
if command -v python3 > /dev/null; then
	python3 - "$n" <<'PY' || fail "layout.json content"
import json, sys
n = int(sys.argv[1])
j = json.load(open("d/layout.json"))
t = j["tensors"]
assert sum(x["count"] for x in t) == n, "counts do not cover the vector"
off = 0
for x in t:
    assert x["offset"] == off, x
    prod = 1
    for d in x["shape"]:
        prod *= d
    assert prod == x["count"], x
    off += x["count"]
assert j["n_params"] == n
assert j["window"]["N"] == sum(r["tokens"] for r in j["window"]["ranks"])
PY
fi

# unreadable standard input (a directory): exit status 4 (i/o), with the reason
set +e
"$DDPTOK" "$CONF/tiny.ini" inspect < . > out2.txt 2> err2.txt
rc=$?
set -e
[ $rc -eq 4 ] || { cat out2.txt err2.txt; fail "unreadable stdin gave status $rc, expected 4"; }
grep -q 'cannot read standard input' err2.txt || fail "unreadable stdin: no reason given"
echo ok
