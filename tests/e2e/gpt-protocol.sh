# The whole protocol on the GPT (conf/gpt-tiny.ini, its blocks and width halved so that
# the test stays short on a loaded machine): every step passes, parity's correct
# normalization passes while every negative control is caught, the resumed training is
# bit-identical to the continuous one, and evaluation reports the gpt's accuracy.
set -eu
. "$E2E/json.sh"
"$DDPTOK" "$CONF/gpt-tiny.ini" --set model.layers=2 --set model.width=128 > protocol.txt 2>&1 || { cat protocol.txt; echo "FAIL: protocol exited non-zero"; exit 1; }
r=outputs/gpt-tiny/report.json
jcheck $r 'd["ok"] is True and d["failed_checks"] == 0'
jcheck $r 'd["resume"]["bit_identical"] is True and d["resume"]["params_differing"] == 0'
jcheck $r 'mode("global_token")["verdict"] == "pass (expected)" and mode("global_token")["pass"]'
jcheck $r 'all(m["required"] and not m["pass"] and m["verdict"] == "fail (caught)"
	for m in d["parity"]["modes"] if m["negative_control"])'
jcheck $r 'd["empty_window"]["declined_by_all_ranks"] and d["empty_window"]["local_empty_rank_matches"]'
# layout.json names the gpt's tensors in llm.c's order
jcheck outputs/gpt-tiny/parity/layout.json '[t["name"] for t in d["layout"]] == ["wte", "wpe", "ln1w",
	"ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
	"fcprojb", "lnfw", "lnfb"] and d["layout"][4]["shape"] == [768, 128]'
grep -q "^evaluate: test " protocol.txt
# clean knows every file the gpt's parity dump writes (positions and segments too); a
# model key that disagrees does not stop it, since it builds no model
"$DDPTOK" "$CONF/gpt-tiny.ini" clean --set model.heads=3 > clean.txt 2>&1 || { cat clean.txt; echo "FAIL: clean exited non-zero"; exit 1; }
if grep -q "^clean: left" clean.txt; then cat clean.txt; echo "FAIL: clean left files the program wrote"; exit 1; fi
[ ! -e outputs/gpt-tiny/parity ] || { ls outputs/gpt-tiny/parity; echo "FAIL: outputs/gpt-tiny/parity is still there"; exit 1; }
