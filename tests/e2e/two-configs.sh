# two-configs: two configurations run one after the other in one directory, each under its
# own name (outputs/NAME, artifacts/NAME): both pass, and neither reads, replaces or
# resumes the other's corpus, runs, runs/latest or reports. An earlier version's shared
# layout moves into the configuration it belongs to, with a message, and is left alone by
# another configuration.
set -eu
. "$E2E/json.sh"
fail() { echo "FAIL: $*"; exit 1; }
cp -r "$CONF" configs
gsmall="--set model.layers=1 --set model.width=16 --set model.heads=2 --set data.train=32
	--set train.updates=2 --set train.stop_at=1 --set devices.world=1"
digest() { find outputs/"$1" artifacts/"$1" -type f | sort | xargs sha256sum; }

timeout 300 "$DDPTOK" configs/minimum.ini --set devices.backend=cpu > min1.txt 2>&1 ||
	{ cat min1.txt; fail "minimum.ini's protocol"; }
jcheck outputs/minimum/report.json 'd["evaluated_checkpoint"].startswith("artifacts/minimum/")'
before=$(digest minimum)
latest=$(readlink artifacts/minimum/runs/latest 2>/dev/null || echo none)
# shellcheck disable=SC2086 # the word splitting of $gsmall is wanted
timeout 300 "$DDPTOK" configs/gpt-tiny.ini train $gsmall > gpt.txt 2>&1 ||
	{ cat gpt.txt; fail "gpt-tiny.ini's train after minimum.ini's protocol"; }
grep -q "other settings\\|rebuilding\\|mismatch" gpt.txt && fail "gpt-tiny.ini met minimum.ini's corpus: $(cat gpt.txt)"
[ -d artifacts/gpt-tiny/runs/latest/step-0001 ] && [ -f outputs/gpt-tiny/corpus/corpus.bin ] ||
	fail "gpt-tiny.ini did not write under its name: $(find outputs artifacts -maxdepth 3)"
[ "$(digest minimum)" = "$before" ] || fail "gpt-tiny.ini changed minimum.ini's files"
[ "$(readlink artifacts/minimum/runs/latest 2>/dev/null || echo none)" = "$latest" ] ||
	fail "gpt-tiny.ini moved minimum.ini's runs/latest"
# each resumes its own latest run: minimum.ini's run has none, gpt-tiny.ini's continues
gbefore=$(digest gpt-tiny)
timeout 300 "$DDPTOK" configs/minimum.ini --set devices.backend=cpu > min2.txt 2>&1 ||
	{ cat min2.txt; fail "minimum.ini's protocol after gpt-tiny.ini's train"; }
[ "$(digest gpt-tiny)" = "$gbefore" ] || fail "minimum.ini changed gpt-tiny.ini's files"
# shellcheck disable=SC2086
timeout 300 "$DDPTOK" configs/gpt-tiny.ini train --resume latest $gsmall > gres.txt 2>&1 ||
	{ cat gres.txt; fail "gpt-tiny.ini's resume"; }
grep -q "artifacts/gpt-tiny/runs/.*step-0001" gres.txt || fail "resumed what: $(cat gres.txt)"

# an earlier version's layout: every configuration in outputs/ and artifacts/ themselves
mkdir old && cd old
timeout 300 "$DDPTOK" ../configs/tiny.ini train --set run.outputs=outputs \
	--set run.artifacts=artifacts > old.txt 2>&1 || { cat old.txt; fail "old layout"; }
run=$(readlink artifacts/runs/latest)
# another configuration leaves it where it is
# shellcheck disable=SC2086
timeout 300 "$DDPTOK" ../configs/gpt-tiny.ini train $gsmall > g.txt 2>&1 || { cat g.txt; fail "gpt"; }
grep -q "^layout:" g.txt && fail "gpt-tiny.ini moved tiny.ini's old layout: $(cat g.txt)"
[ -d outputs/corpus ] && [ -d artifacts/runs/"$run" ] || fail "the old layout was touched"
# its own configuration moves it, says so, and resumes its latest run from there
timeout 300 "$DDPTOK" ../configs/tiny.ini train --resume latest > t.txt 2>&1 || { cat t.txt; fail "tiny"; }
grep -q "^layout: moved corpus, runs from outputs and artifacts into outputs/tiny and artifacts/tiny" \
	t.txt || fail "no message of the move: $(cat t.txt)"
[ ! -e outputs/corpus ] && [ ! -e artifacts/runs ] && [ -f outputs/tiny/corpus/corpus.bin ] ||
	fail "not moved: $(find outputs artifacts -maxdepth 2)"
grep -q "artifacts/tiny/runs/$run" t.txt || fail "did not resume the moved run: $(cat t.txt)"
echo "two-configs: ok"
