# env informs (exit 0 whatever the configuration asks), env --check tries the device plan
# and exits 10 naming the failure; a run that names GPUs never falls back to the CPU.
# GPUs are hidden (CUDA_VISIBLE_DEVICES=-1) where a test needs none to be usable, so the
# script means the same in a CUDA build on a GPU machine.
set -eu
"$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cpu --set devices.world=3 > ok.txt
grep -q "^check rank 2 (cpu): device ok, bias_tanh bit-exact" ok.txt
grep -q "allreduce sum and avg exact over host" ok.txt
grep -q "^env --check: every rank passed" ok.txt

# the check can fail: rank 1's received sum made wrong by one
set +e
"$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cpu --inject-failure 1:1 > bad.txt 2> bad.err
rc=$?
set -e
cat bad.err
[ "$rc" -eq 10 ]
grep -q "rank 1: allreduce sum over the host collective: element 0" bad.err
! grep -q "every rank passed" bad.txt

# a plan that cannot run: env says so and exits 0, env --check exits 10 with the reason
CUDA_VISIBLE_DEVICES=-1 "$DDPTOK" "$CONF/tiny.ini" env --set devices.ids=0,0 > plan.txt
grep -q "does not run here: devices.ids names GPUs but no GPU is usable" plan.txt
set +e
CUDA_VISIBLE_DEVICES=-1 "$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cuda \
	> /dev/null 2> cuda.err
rc=$?
set -e
[ "$rc" -eq 10 ]
grep -q "env --check: the device plan cannot run here: devices.backend = cuda" cuda.err

# GPUs named but none usable: refused with the reason (exit 6), no silent CPU run
set +e
CUDA_VISIBLE_DEVICES=-1 "$DDPTOK" "$CONF/tiny.ini" parity --set devices.ids=0,0 > p.txt 2> p.err
rc=$?
set -e
cat p.err
[ "$rc" -eq 6 ]
grep -q "devices.ids names GPUs but no GPU is usable" p.err
! find . -name "parity*.json" | grep -q .

# --inject-failure belongs to env --check only
set +e
"$DDPTOK" "$CONF/tiny.ini" env --inject-failure 1:1 > /dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ]
