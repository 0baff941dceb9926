# On a GPU: parity (global_token passes, every negative control caught) with W = 1 over
# NCCL, W = 2 sharing one GPU over the host collective, W = 2 over NCCL when two GPUs
# exist and W = every GPU (sum and avg) when there are more; and the CUDA reference
# gradient against the CPU backend's on the same window.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
set -x
"$DDPTOK" "$CONF/tiny.ini" parity $MID --set devices.backend=cuda --set devices.world=1 \
	--set devices.collective=nccl > w1.txt
grep -q "global_token .* pass (expected)" w1.txt
"$DDPTOK" "$CONF/tiny.ini" parity $MID --set devices.backend=cuda --set devices.ids=0,0 \
	--set devices.collective=host > shared.txt
grep -q "global_token .* pass (expected)" shared.txt
[ "$(grep -c 'fail (caught)' shared.txt)" -eq 3 ]
if [ "$GPUS" -ge 2 ]; then
	"$DDPTOK" "$CONF/tiny.ini" parity $MID --set devices.backend=cuda --set devices.ids=0,1 \
		--set devices.collective=nccl > nccl2.txt
	grep -q "global_token .* pass (expected)" nccl2.txt
	[ "$(grep -c 'fail (caught)' nccl2.txt)" -eq 3 ]
fi
if [ "$GPUS" -ge 3 ]; then # every GPU (up to 8), reduce sum and avg: W need not be a power of two
	W=$GPUS
	[ "$W" -le 8 ] || W=8
	for reduce in sum avg; do
		"$DDPTOK" "$CONF/tiny.ini" parity $MID --set devices.backend=cuda --set devices.world=$W \
			--set devices.reduce=$reduce > all-$reduce.txt
		grep -q "global_token .* pass (expected)" all-$reduce.txt
	done
fi
# CPU vs GPU: the reference gradient of the same window, within atol 1e-6 + rtol 1e-4
"$DDPTOK" "$CONF/tiny.ini" reference $MID --set devices.backend=cpu --set run.outputs=cpu > /dev/null
"$DDPTOK" "$CONF/tiny.ini" reference $MID --set devices.backend=cuda --set run.outputs=gpu > /dev/null
PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
$PY - <<'EOF2'
import json, numpy as np
c = np.load("cpu/reference/reference.npy"); g = np.load("gpu/reference/reference.npy")
lc = json.load(open("cpu/reference/reference.json"))["loss"]
lg = json.load(open("gpu/reference/reference.json"))["loss"]
bad = np.abs(g - c) > 1e-6 + 1e-4 * np.abs(c)
print("cpu vs gpu: loss %.9f vs %.9f, max abs %.3e, outside %d of %d"
      % (lc, lg, np.abs(g - c).max(), bad.sum(), c.size))
assert abs(lc - lg) <= 1e-5 * abs(lc) and not bad.any()
EOF2
