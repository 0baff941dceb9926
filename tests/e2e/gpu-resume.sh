# On a GPU: a run stopped and resumed ends bit-identical to a continuous run, with reduce
# avg and sum (NCCL's sums must repeat: NVLink SHARP is off), on W = the number of GPUs
# over NCCL (up to 8), or W = 2 sharing one GPU over the host collective; and an injected
# failure on one rank ends the run (exit 6, naming the rank) instead of hanging.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
W=$GPUS
[ "$W" -le 8 ] || W=8
if [ "$W" -ge 2 ]; then DEV="--set devices.world=$W"; else DEV="--set devices.ids=0,0 --set devices.collective=host"; fi
set -x
for reduce in avg sum; do
	R="--set devices.reduce=$reduce --set run.outputs=out-$reduce --set run.artifacts=art-$reduce"
	"$DDPTOK" "$CONF/tiny.ini" train --continuous $MID --set devices.backend=cuda $DEV $R > cont-$reduce.txt
	cont=art-$reduce/runs/$(readlink art-$reduce/runs/latest)
	"$DDPTOK" "$CONF/tiny.ini" train $MID --set train.stop_at=3 --set devices.backend=cuda $DEV $R > stop-$reduce.txt
	"$DDPTOK" "$CONF/tiny.ini" train --resume latest $MID \
		--set devices.backend=cuda $DEV $R > res-$reduce.txt
	cmp art-$reduce/runs/latest/step-0006/params.npy "$cont/step-0006/params.npy"
	cmp art-$reduce/runs/latest/step-0006/momentum.npy "$cont/step-0006/momentum.npy"
	grep -q '"backend":"cuda"' "$cont/metrics.jsonl"
done
set +e
# devices.timeout far beyond the 120 s allowed: only the abort can release the peers in time
timeout 120 "$DDPTOK" "$CONF/tiny.ini" train $MID --set devices.backend=cuda $DEV \
	--set devices.timeout=900 --set run.outputs=inj --set run.artifacts=inj-art \
	--inject-failure 1:1 > inj.txt 2> inj.err
rc=$?
set -e
cat inj.err
[ "$rc" -eq 6 ] && grep -q "rank 1" inj.err
