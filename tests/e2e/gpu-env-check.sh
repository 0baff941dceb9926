# On a GPU: env --check passes with one GPU (W = 1, NCCL), two ranks sharing GPU 0 (host
# collective) and every GPU (W = the number of GPUs up to 8, NCCL); its injected failure
# exits 10 naming the rank and the NCCL collective.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
W=$GPUS
[ "$W" -le 8 ] || W=8
set -x
"$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cuda --set devices.world=1 > w1.txt
grep -q "^check rank 0 (GPU 0): device ok, bias_tanh bit-exact" w1.txt
grep -q "allreduce sum and avg exact over nccl" w1.txt
"$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cuda --set devices.ids=0,0 > shared.txt
grep -q "^check rank 1 (GPU 0):.*exact over host" shared.txt
"$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cuda --set devices.world=$W > all.txt
grep -q "^env --check: every rank passed" all.txt
[ "$(grep -c '^check rank' all.txt)" -eq "$W" ]
set +e
"$DDPTOK" "$CONF/tiny.ini" env --check --set devices.backend=cuda --set devices.world=1 \
	--inject-failure 0:1 > bad.txt 2> bad.err
rc=$?
set -e
cat bad.err
[ "$rc" -eq 10 ] && grep -q "rank 0: allreduce sum over the nccl collective" bad.err
