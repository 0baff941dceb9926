# The single commands: check-loss values, reference reproducible bit for bit, parity with
# its dump, the exercise, env, bench.
set -eu
"$DDPTOK" "$CONF/tiny.ini" check-loss > cl.txt
grep -q "mean of means 2 (expected 2), global token mean 2.5 (expected 2.5)" cl.txt
"$DDPTOK" "$CONF/tiny.ini" reference > /dev/null
cp outputs/reference/reference.npy first.npy
"$DDPTOK" "$CONF/tiny.ini" reference > /dev/null
cmp first.npy outputs/reference/reference.npy
grep -q '"components"' outputs/reference/reference.json
"$DDPTOK" "$CONF/tiny.ini" parity --dump dump > parity.txt
for f in params.npy reference.npy layout.json rank0-micro0-inputs.npy rank1-micro1-targets.npy \
	rank0-local-global_token.npy rank1-local-mean_of_means.npy reduced-global_token.npy \
	reduced-double_accumulation.npy; do
	[ -s "dump/$f" ] || { echo "FAIL: dump/$f missing"; exit 1; }
done
# with every rank holding the same windows counts parity is still run for W = 3, sum
"$DDPTOK" "$CONF/tiny.ini" parity --set devices.world=3 --set devices.reduce=sum > p3.txt
grep -q "global_token .* pass (expected)" p3.txt
# a balanced window whose ranks hold 1600 and 1601 tokens: mean_of_means' factors differ
# from global_token's by 3e-4 (< 0.1%), too little to require that a comparison see
# it; parity must say so and still succeed
"$DDPTOK" "$CONF/minimum.ini" parity --set devices.backend=cpu --set run.seed=10 \
	--set train.plan=balanced --set train.accumulation=3 --set run.outputs=near > near.txt ||
	{ cat near.txt; echo "FAIL: parity on a near-balanced window"; exit 1; }
grep -q "rank 0: 1600 supervised" near.txt && grep -q "rank 1: 1601 supervised" near.txt
grep -q "mean_of_means .* not required" near.txt
grep -q "microbatch_mean .* fail (caught)" near.txt
# a tolerance too loose to see the controls must fail parity: whether a control is
# required comes from its factors, not from what its gradient shows
set +e
"$DDPTOK" "$CONF/minimum.ini" parity --set devices.backend=cpu --set parity.atol=0.01 \
	--set run.outputs=loose > loose.txt 2> loose.err
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat loose.txt loose.err; echo "FAIL: loose tolerance gave exit $rc"; exit 1; }
grep -q "mean_of_means .* NOT caught" loose.txt
# a loose rtol the same way: the margin that makes a control optional does not grow with it
set +e
"$DDPTOK" "$CONF/minimum.ini" parity --set devices.backend=cpu --set parity.rtol=1 \
	--set run.outputs=loose-rtol > loose-rtol.txt 2> loose-rtol.err
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat loose-rtol.txt loose-rtol.err; echo "FAIL: loose rtol gave exit $rc"; exit 1; }
grep -q "double_accumulation .* NOT caught" loose-rtol.txt
# accumulation 1: double_accumulation coincides with global_token and is reported so
"$DDPTOK" "$CONF/tiny.ini" parity --set train.accumulation=1 > p1.txt
grep -q "double_accumulation .* same as global_token on this window" p1.txt
"$DDPTOK" "$CONF/tiny.ini" exercise > ex.txt
grep -q "rank1 = 9" ex.txt
"$DDPTOK" "$CONF/tiny.ini" env > env.txt
grep -q "backend" env.txt
"$DDPTOK" "$CONF/tiny.ini" bench --windows 3 > bench.txt
grep -q "tokens/s" bench.txt
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
