# The figure: the real protocol on tiny.ini, then tools/plot.py on what it wrote.
#
# Checks that plot.py writes figure.png (a real PNG of a plausible size) and figure.svg and
# prints their paths; that a missing input is refused with exit 2 and a message naming the
# file; that a python3 without numpy/matplotlib gives exit 3 and writes nothing, unless it
# can hand over to the system's python3 that has them.
# Skipped (77) when no python3 with numpy and matplotlib is found.
set -u

plot="$CONF/../tools/plot.py"
fail() { echo "FAIL: $*"; exit 1; }

PY=""
for p in python3 /usr/bin/python3; do
	if "$p" -c 'import numpy, matplotlib' >/dev/null 2>&1; then
		PY=$p
		break
	fi
done
if [ -z "$PY" ]; then
	echo "SKIP: no python3 with numpy and matplotlib"
	exit 77
fi
[ -f "$plot" ] || fail "$plot not found"

if ! "$DDPTOK" "$CONF/tiny.ini" >protocol.log 2>&1; then
	tail -n 30 protocol.log
	fail "the protocol on tiny.ini failed"
fi
for f in train-stop.jsonl train-continuous.jsonl train-resume.jsonl parity.json \
	parity/reference.npy parity/reduced-global_token.npy; do
	[ -s "outputs/tiny/$f" ] || fail "the protocol did not write outputs/tiny/$f"
done

# the protocol may have drawn the figure itself: draw it again from scratch
rm -f outputs/tiny/figure.png outputs/tiny/figure.svg
"$PY" "$plot" outputs/tiny >plot.out 2>plot.err
rc=$?
[ "$rc" -eq 0 ] || { cat plot.err; fail "plot.py exited $rc"; }
for f in figure.png figure.svg; do
	[ -s "outputs/tiny/$f" ] || fail "outputs/tiny/$f missing or empty"
	grep -qx "outputs/tiny/$f" plot.out || fail "plot.py did not print outputs/tiny/$f"
done
magic=$(head -c 8 outputs/tiny/figure.png | od -An -tx1 | tr -d ' \n')
[ "$magic" = "89504e470d0a1a0a" ] || fail "figure.png is not a PNG (starts with $magic)"
# PNG IHDR: width and height, big-endian, at bytes 16..23; a three-panel figure is wide
size=$(od -An -tu1 -j16 -N8 outputs/tiny/figure.png | tr -s ' \n' ' ')
set -- $size
w=$(( ($1 << 24) + ($2 << 16) + ($3 << 8) + $4 ))
h=$(( ($5 << 24) + ($6 << 16) + ($7 << 8) + $8 ))
[ "$w" -ge 1200 ] && [ "$h" -ge 400 ] && [ "$w" -gt "$h" ] ||
	fail "figure.png is ${w}x${h}, expected a wide three-panel figure"
[ "$(stat -c %s outputs/tiny/figure.png)" -gt 20000 ] || fail "figure.png is suspiciously small"
grep -q "<svg" outputs/tiny/figure.svg || fail "figure.svg holds no <svg> element"
svg_size=$(stat -c %s outputs/tiny/figure.svg)

# a missing input: exit 2 and the message names the file
mkdir -p partial/parity
cp outputs/tiny/*.jsonl outputs/tiny/parity.json partial/
cp outputs/tiny/parity/*.npy partial/parity/
rm partial/parity/reduced-mean_of_means.npy
"$PY" "$plot" partial >/dev/null 2>missing.err
rc=$?
[ "$rc" -eq 2 ] || fail "plot.py with a missing .npy exited $rc, expected 2"
grep -q "reduced-mean_of_means.npy" missing.err || fail "message does not name the file: $(cat missing.err)"
[ ! -e partial/figure.png ] || fail "plot.py wrote a figure from incomplete inputs"
rm partial/train-resume.jsonl
"$PY" "$plot" partial >/dev/null 2>missing.err
rc=$?
[ "$rc" -eq 2 ] || fail "plot.py without train-resume.jsonl exited $rc, expected 2"
grep -q "train-resume.jsonl" missing.err || fail "message does not name the file: $(cat missing.err)"
"$PY" "$plot" no-such-dir >/dev/null 2>missing.err
[ $? -eq 2 ] || fail "plot.py on a missing directory did not exit 2"

# the curves of training runs from their metrics files alone
"$PY" "$plot" outputs/tiny/train-continuous.jsonl outputs/tiny/train-stop.jsonl -o curves.png >curves.out \
	2>curves.err || { cat curves.err; fail "plot.py on two metrics files failed"; }
grep -qx "curves.png" curves.out || fail "plot.py did not print curves.png: $(cat curves.out)"
[ "$(head -c 8 curves.png | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ||
	fail "curves.png is not a PNG"
cp outputs/tiny/train-stop.jsonl run.jsonl
"$PY" "$plot" run.jsonl >/dev/null 2>&1 && [ -s run.png ] || fail "no run.png beside run.jsonl"
printf '{"step": 1}\n' > broken.jsonl
"$PY" "$plot" broken.jsonl >/dev/null 2>broken.err
[ $? -eq 2 ] && grep -q 'broken.jsonl:1' broken.err || fail "a broken metrics line: $(cat broken.err)"
"$PY" "$plot" absent.jsonl >/dev/null 2>missing.err
[ $? -eq 2 ] && grep -q absent.jsonl missing.err || fail "a missing metrics file was not named"

# without site packages (-S) and the environment (-E) numpy/matplotlib are not importable
# (unless they sit in the standard library's own directory: then this check is moot)
if ! "$PY" -S -E -c 'import numpy' >/dev/null 2>&1; then
	rm -f outputs/tiny/figure.png outputs/tiny/figure.svg
	DDPTOK_PLOT_NO_FALLBACK=1 "$PY" -S -E "$plot" outputs/tiny >/dev/null 2>nompl.err
	rc=$?
	[ "$rc" -eq 3 ] || fail "plot.py without numpy/matplotlib exited $rc, expected 3"
	grep -q "matplotlib" nompl.err || fail "no message about matplotlib: $(cat nompl.err)"
	[ ! -e outputs/tiny/figure.png ] || fail "plot.py wrote a figure without matplotlib"
fi
# a python3 on PATH without numpy while the system's has it: plot.py runs itself again with
# the system's interpreter
if [ "$PY" = /usr/bin/python3 ] && command -v python3 >/dev/null 2>&1 &&
	! python3 -c 'import numpy' >/dev/null 2>&1; then
	rm -f outputs/tiny/figure.png outputs/tiny/figure.svg
	python3 "$plot" outputs/tiny >/dev/null 2>fallback.err
	rc=$?
	[ "$rc" -eq 0 ] || { cat fallback.err; fail "plot.py under $(command -v python3) exited $rc"; }
	[ -s outputs/tiny/figure.png ] || fail "the fallback to /usr/bin/python3 wrote no figure"
fi
echo "plot: ok (${w}x${h} PNG, $svg_size bytes of SVG)"
