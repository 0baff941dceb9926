# Exact mode on conf/exact.ini (2 devices, 4 shards, the seed's corpus): the whole
# protocol passes with parity's bitwise line at 0 components and the elastic step (the
# stopped run resumed on 4 and on 1 devices) bit-identical to the continuous run; the
# negative controls are still caught. The bitwise check can fail: one rank adding two of
# its shards in each other's place ends parity with exit 1. Configurations exact mode
# cannot run are refused with the valid device counts named.
set -eu
. "$E2E/json.sh"
"$DDPTOK" "$CONF/exact.ini" > protocol.txt 2>&1 || { cat protocol.txt; echo "FAIL: protocol exited non-zero"; exit 1; }
r=outputs/exact/report.json
jcheck $r 'd["ok"] is True and d["failed_checks"] == 0'
jcheck $r 'd["parity"]["bitwise"] == {"shards": 4, "shard_order": "length", "components": 201344,
	"differ": 0, "loss_differs": False}'
jcheck $r 'mode("global_token")["max_abs_err"] == 0'
jcheck $r 'all(m["verdict"] == "fail (caught)" for m in d["parity"]["modes"] if m["negative_control"])'
jcheck $r '[(x["world"], x["bit_identical"], x["params_differing"]) for x in d["elastic"]["runs"]]
	== [(4, True, 0), (1, True, 0)] and d["elastic"]["ok"]'
jcheck $r 'd["resume"]["bit_identical"] is True'
# three engines: the 2 devices' (the exercise's too), and the elastic step's 4 and 1
jcheck $r 'd["engines"] == {"created": 3, "reused": 8, "replaced": 0}'
grep -q "parity: bitwise: 0 of 201344 components differ from the 1-device reference" protocol.txt
grep -q "elastic: W = 2 -> 4, step 100: 0 of 201344 parameters differ" protocol.txt
# the check can fail: rank 1 swaps two of its 4 shards in the tree
set +e
"$DDPTOK" "$CONF/exact.ini" parity --set train.shards=8 --inject-shard-swap 1 \
	--set run.outputs=swap > swap.txt 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ]; then cat swap.txt; echo "FAIL: a swapped shard gave exit $rc, expected 1"; exit 1; fi
jcheck swap/parity.json 'd["bitwise"]["differ"] > 0 and not d["ok"] and mode("global_token")["pass"]'
grep -q "in every bit" swap.txt
# refusals, each naming what is valid
refused() { # refused EXPECTED_TEXT --set ...
	want=$1
	shift
	set +e
	"$DDPTOK" "$CONF/exact.ini" parity "$@" > refused.txt 2>&1
	rc=$?
	set -e
	[ "$rc" -ne 0 ] && grep -qF "$want" refused.txt || { cat refused.txt; echo "FAIL: not refused: $*"; exit 1; }
}
refused "[train] shards = 6 (from --set): must be a power of two" --set train.shards=6
refused "valid devices.world: 1, 2, 4" --set devices.world=8
refused "valid devices.world: 1, 2, 4" --set devices.world=3
refused "gives each rank 2 shards as its microbatches" --set train.accumulation=3
refused "at least 4 shards per rank" --inject-shard-swap 1
