# The single commands: check-loss values, reference reproducible bit for bit, parity with
# its dump, the exercise, env, bench.
set -eu
. "$E2E/json.sh"
"$DDPTOK" "$CONF/tiny.ini" check-loss > cl.txt
jcheck outputs/tiny/check-loss.json 'd["ok"] and d["mean_of_means"] == 2 and d["global_mean"] == 2.5
	and d["mean_of_means_reduce_sum"] == 2 and d["global_mean_reduce_sum"] == 2.5'
"$DDPTOK" "$CONF/tiny.ini" reference > /dev/null
cp outputs/tiny/reference/reference.npy first.npy
"$DDPTOK" "$CONF/tiny.ini" reference > /dev/null
cmp first.npy outputs/tiny/reference/reference.npy
jcheck outputs/tiny/reference/reference.json 'd["components"] == sum(t["count"] for t in d["layout"])'
"$DDPTOK" "$CONF/tiny.ini" parity --dump dump > parity.txt
for f in params.npy reference.npy layout.json rank0-micro0-inputs.npy rank1-micro1-targets.npy \
	rank0-local-global_token.npy rank1-local-mean_of_means.npy reduced-global_token.npy \
	reduced-double_accumulation.npy; do
	[ -s "dump/$f" ] || { echo "FAIL: dump/$f missing"; exit 1; }
done
# with every rank holding the same windows counts parity is still run for W = 3, sum
"$DDPTOK" "$CONF/tiny.ini" parity --set devices.world=3 --set devices.reduce=sum > p3.txt
jcheck outputs/tiny/parity.json 'd["world"] == 3 and d["reduce"] == "sum" and d["ok"]
	and mode("global_token")["verdict"] == "pass (expected)"'
# a balanced window whose ranks hold 1880 and 1881 tokens: mean_of_means' factors differ
# from global_token's by 5e-4 (< 0.1%), too little to require that a comparison see
# it; parity must say so and still succeed
"$DDPTOK" "$CONF/minimum.ini" parity --set devices.backend=cpu --set run.seed=6 \
	--set train.plan=balanced --set train.accumulation=3 --set run.outputs=near > near.txt ||
	{ cat near.txt; echo "FAIL: parity on a near-balanced window"; exit 1; }
jcheck near/parity.json '[r["tokens"] for r in d["window"]["ranks"]] == [1880, 1881]'
jcheck near/parity.json 'not mode("mean_of_means")["required"] and mode("mean_of_means")["pass"]
	and mode("mean_of_means")["verdict"].endswith("not required")'
jcheck near/parity.json 'mode("microbatch_mean")["verdict"] == "fail (caught)" and d["ok"]'
# a tolerance too loose to see the controls must fail parity: whether a control is
# required comes from its factors, not from what its gradient shows
set +e
"$DDPTOK" "$CONF/minimum.ini" parity --set devices.backend=cpu --set parity.atol=0.01 \
	--set run.outputs=loose > loose.txt 2> loose.err
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat loose.txt loose.err; echo "FAIL: loose tolerance gave exit $rc"; exit 1; }
jcheck loose/parity.json 'mode("mean_of_means")["required"] and mode("mean_of_means")["pass"]
	and "NOT caught" in mode("mean_of_means")["verdict"] and not d["ok"]'
# a loose rtol the same way: the margin that makes a control optional does not grow with it
set +e
"$DDPTOK" "$CONF/minimum.ini" parity --set devices.backend=cpu --set parity.rtol=1 \
	--set run.outputs=loose-rtol > loose-rtol.txt 2> loose-rtol.err
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat loose-rtol.txt loose-rtol.err; echo "FAIL: loose rtol gave exit $rc"; exit 1; }
jcheck loose-rtol/parity.json 'mode("double_accumulation")["pass"] and not d["ok"]
	and "NOT caught" in mode("double_accumulation")["verdict"]'
# accumulation 1: double_accumulation coincides with global_token and is reported so
"$DDPTOK" "$CONF/tiny.ini" parity --set train.accumulation=1 > p1.txt
jcheck outputs/tiny/parity.json 'not mode("double_accumulation")["distinguishable"]
	and mode("double_accumulation")["verdict"] == "pass: same as global_token on this window"'
"$DDPTOK" "$CONF/tiny.ini" exercise > ex.txt
jcheck outputs/tiny/exercise.json '[c["tokens"] for c in d["cases"]] == [[3, 3], [3, 9]]
	and d["cases"][0]["grad_diff_max"] == 0 and d["cases"][1]["grad_diff_max"] > 0'
"$DDPTOK" "$CONF/tiny.ini" env > env.txt
grep -q "backend" env.txt
"$DDPTOK" "$CONF/tiny.ini" bench --windows 3 > bench.txt
grep -q "tokens/s" bench.txt
# the size sweep takes minutes: only with --sweep
! grep -q "bench: sweep" bench.txt || { echo "FAIL: bench ran the size sweep unasked"; exit 1; }
jcheck outputs/tiny/bench.json '"sweep" not in d and d["tokens"] > 0'
"$DDPTOK" "$CONF/tiny.ini" bench --windows 3 --sweep > bench.txt
# the size sweep: hidden 512, 1024, 2048 by vocab 128 and 4096
test "$(grep -c 'bench: sweep hidden' bench.txt)" = 6
jcheck outputs/tiny/bench.json '[(p["hidden"], p["vocab"]) for p in d["sweep"]] ==
	[(512, 128), (512, 4096), (1024, 128), (1024, 4096), (2048, 128), (2048, 4096)]
	and all(p["tokens"] > 0 and p["tokens_per_s"] > 0 for p in d["sweep"])'
# the gpt's sweep, on a small shape: width 256, 512, 768 (heads width / 64) by the configured
# vocabulary and 4096, each point's sgemm on its own largest GEMM
small="--windows 1 --set model.layers=1 --set model.context=32 --set data.min_len=8
	--set data.max_len=32 --set train.batch_size=1 --set train.accumulation=1
	--set devices.world=1"
"$DDPTOK" "$CONF/gpt-tiny.ini" bench --sweep $small --set data.vocab=64 --set run.outputs=gb > gb.txt
test "$(grep -c 'bench: sweep width' gb.txt)" = 6
jcheck gb/bench.json '[(p["width"], p["vocab"]) for p in d["sweep"]] ==
	[(256, 64), (256, 4096), (512, 64), (512, 4096), (768, 64), (768, 4096)]
	and all(p["tokens"] > 0 and p["tokens_per_s"] > 0 for p in d["sweep"])
	and [p["gemm"][1:] for p in d["sweep"]] == [[1024, 256], [4096, 256], [2048, 512],
		[4096, 512], [3072, 768], [4096, 768]]'
# a configured vocabulary that is the sweep's large one is run once per width; with two
# threads per rank the ratios are to W x 2 threads x sgemm, two sgemms at once beside them
"$DDPTOK" "$CONF/gpt-tiny.ini" bench --sweep $small --set data.vocab=4096 --set run.outputs=gb4 \
	--set devices.threads=2 > gb4.txt
jcheck gb4/bench.json '[(p["width"], p["vocab"]) for p in d["sweep"]] ==
	[(256, 4096), (512, 4096), (768, 4096)] and d["threads_per_rank"] == 2'
grep -q "training reaches [0-9]*% of W x 2 threads x sgemm" gb4.txt
grep -q "bench: 2 one-thread sgemms at once" gb4.txt
# an injected failure on one rank ends the run (no hang) with the device exit code,
# naming the rank and the window
set +e
# (devices.timeout far beyond the 60 s allowed: only the abort can release the peers in time)
timeout 60 "$DDPTOK" "$CONF/tiny.ini" train --inject-failure 1:2 --set devices.timeout=600 \
	> inj.txt 2> inj.err
rc=$?
set -e
[ "$rc" -eq 6 ] || { cat inj.err; echo "FAIL: injected failure exit $rc"; exit 1; }
grep -q "rank 1: injected failure at window 2" inj.err
