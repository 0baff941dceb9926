# The protocol run again in the same directory, on tiny.ini.
#
# A second run with fewer updates must evaluate its own final checkpoint (step 4), not the
# step-0006 left by the first run; a third run that also changes a math key (train.lr) must
# still pass, since the old checkpoint is never loaded. A run that stops at a step must not
# leave the previous run's report claiming PASS. And when no python3 can draw the figure, the
# message comes once and the report calls the figure step skipped, not ok.
set -u
. "$E2E/json.sh"
fail() { echo "FAIL: $*"; exit 1; }
evaluated() { # evaluated STEP: report.json names the resumed run's checkpoint of that step
	jcheck outputs/tiny/report.json "d['test']['step'] == $1 and
		d['evaluated_checkpoint'] == 'artifacts/tiny/checkpoints/step-000$1'"
}

run() { # run LOG ARGS...: the protocol on tiny.ini; its exit status
	log=$1
	shift
	"$DDPTOK" "$CONF/tiny.ini" "$@" >"$log" 2>&1
}

run first.txt || { tail -n 20 first.txt; fail "the first protocol run failed"; }
evaluated 6 || fail "first run: report.json does not name step-0006"
jcheck outputs/tiny/report.json 'd["backend"] in ("cpu", "cuda")' || fail "report.json does not name the backend"

run second.txt --set train.updates=4 --set train.stop_at=2 ||
	{ tail -n 20 second.txt; fail "the second protocol run (4 updates) failed"; }
[ -d artifacts/tiny/checkpoints/step-0006 ] || fail "the first run's step-0006 is gone: the test proves nothing"
evaluated 4 || fail "second run: report.json does not name its own step-0004"
jcheck outputs/tiny/evaluate.json 'd["step"] == 4' || fail "second run: evaluate.json is not of step 4"
# one line per training run
grep -q "^train (stop): step 0 -> 2 .*checkpoint artifacts/tiny/checkpoints/step-0002" second.txt ||
	fail "no progress line for the stopped run"
grep -q "^train (continuous): step 0 -> 4 .*last loss .*checkpoint artifacts/tiny/continuous/step-0004" \
	second.txt || fail "no progress line for the continuous run"
grep -q "^train (resume): step 2 -> 4 .*checkpoint artifacts/tiny/checkpoints/step-0004" second.txt ||
	fail "no progress line for the resumed run"

# another learning rate: step-0006 (lr 0.2) would be refused if it were evaluated
run third.txt --set train.updates=4 --set train.stop_at=2 --set train.lr=0.1 ||
	{ tail -n 20 third.txt; fail "the third protocol run (another lr) failed"; }
jcheck outputs/tiny/report.json 'd["ok"] is True' || fail "third run: no PASS"
evaluated 4 || fail "third run: report.json does not name step-0004"

# a run that stops at a step (its metrics file cannot be created) leaves no old report
rm -f outputs/tiny/train-stop.jsonl
mkdir outputs/tiny/train-stop.jsonl
run fourth.txt && fail "the protocol passed although train-stop.jsonl cannot be written"
for f in report.md report.json; do
	[ ! -e "outputs/tiny/$f" ] || fail "an aborted run left outputs/tiny/$f from the previous run"
done
rmdir outputs/tiny/train-stop.jsonl

# no python3 with matplotlib: a copy of the program next to a plot.py that says so, and a
# python3 on PATH that is the system's interpreter under another name
if [ -x /usr/bin/python3 ]; then
	mkdir -p alone/tools pybin
	cp "$DDPTOK" alone/ddptok-run
	cat >alone/tools/plot.py <<'EOF'
import sys
print("plot.py: cannot draw the figure: matplotlib is not available", file=sys.stderr)
sys.exit(3)
EOF
	ln -s /usr/bin/python3 pybin/python3
	PATH="$PWD/pybin:$PATH" alone/ddptok-run "$CONF/tiny.ini" >fig.txt 2>&1 ||
		{ tail -n 20 fig.txt; fail "the protocol without matplotlib failed"; }
	n=$(grep -c "cannot draw the figure" fig.txt)
	[ "$n" -eq 1 ] || { cat fig.txt; fail "the figure message came $n times"; }
	jcheck outputs/tiny/report.json '[(s["result"], "matplotlib" in s["reason"]) for s in d["steps"]
		if s["name"] == "figure"] == [("skipped", True)] and d["figure"] == []' ||
		fail "report.json: figure not skipped"
	[ ! -e outputs/tiny/figure.png ] || fail "an old figure.png is still there"
fi
echo "protocol-rerun: ok"
