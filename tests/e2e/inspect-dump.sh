#!/bin/sh
# inspect: dump writes the last window's tensors as .npy with a layout JSON, and grad's
# chosen components are the values in reduced.npy and rankR-local.npy; the end of input
# ends the session; input that cannot be read is an i/o error (4); dump before any step,
# into an impossible directory, or save/grad with bad arguments are reported without
# ending the session (a script that met them exits with status 2 at its end).
set -eu

fail() { echo "FAIL: $*"; [ -f out.txt ] && { echo "--- output"; cat out.txt; }; exit 1; }

touch afile
rc=0
printf 'dump early\nstep 2\ndump afile/sub\ndump d\ngrad b2 extra\ngrad w1[3:11]\ngrad b2 5\ngrad embed[:3] --rank 1\n' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect > out.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "exited with $rc at end of input, expected 2 (a script with errors)"
grep -q "3 commands of the script failed; the first, on line 1: dump: no window has been stepped yet" out.txt ||
	fail "the end of the script does not name its first error"
grep -q 'error: dump: no window has been stepped yet' out.txt || fail "dump before step"
[ ! -e early ] || fail "dump before step created a directory"
grep -q 'error: dump: cannot create directory afile/sub' out.txt || fail "dump into a file's subdirectory not reported"
grep -q "error: grad: 'extra' is not an index or a range i:j" out.txt || fail "grad with a bad index"
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
t = j["layout"]
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
	# grad PARAM[i:j] / PARAM i / --rank R print exactly the values dump wrote
	python3 - <<'PY' || fail "grad's components are not the dumped values"
import json, re, struct
def npy(path):
    b = open(path, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    data = b[10 + hl:]
    return struct.unpack("<%df" % (len(data) // 4), data)
red, loc1 = npy("d/reduced.npy"), npy("d/rank1-local.npy")
t = {x["name"]: x for x in json.load(open("d/layout.json"))["layout"]}
blocks, cur = [], None
for line in open("out.txt"):
    m = re.search(r"grad:   (\w+)\[(\d+):(\d+)\] of ", line)
    if m:
        cur = []
        blocks.append((m.group(1), int(m.group(2)), int(m.group(3)), cur))
        continue
    m = re.search(r"grad:   (\w+)\[[0-9, ]+\] +(\d+) +(\d+)  ([-+]\S+)$", line)
    if m and cur is not None:
        cur.append((m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4))))
want = [("w1", 3, 11, red), ("b2", 5, 6, red), ("embed", 0, 3, loc1)]
assert len(blocks) == 3, blocks
for (name, lo, hi, rows), (wn, wlo, whi, vec) in zip(blocks, want):
    assert (name, lo, hi) == (wn, wlo, whi), (name, lo, hi)
    assert [r[1] for r in rows] == list(range(lo, hi)), rows
    for tn, i, flat, v in rows:
        assert tn == name and flat == t[name]["offset"] + i, (tn, i, flat)
        assert struct.pack("<f", v) == struct.pack("<f", vec[flat]), (name, i, v, vec[flat])
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
