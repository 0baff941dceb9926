# On a GPU: a run stopped and resumed ends bit-identical to a continuous run, and an
# injected failure on one rank ends the run (exit 6, naming the rank) instead of hanging.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
if [ "$GPUS" -ge 2 ]; then DEV="--set devices.ids=0,1"; else DEV="--set devices.ids=0,0 --set devices.collective=host"; fi
set -x
"$DDPTOK" "$CONF/tiny.ini" train $MID --set devices.backend=cuda $DEV > stop.txt
"$DDPTOK" "$CONF/tiny.ini" train --continuous $MID --set devices.backend=cuda $DEV > cont.txt
"$DDPTOK" "$CONF/tiny.ini" train --resume artifacts/checkpoints/step-0003 $MID --set devices.backend=cuda $DEV > res.txt
cmp artifacts/checkpoints/step-0006/params.npy artifacts/continuous/step-0006/params.npy
cmp artifacts/checkpoints/step-0006/momentum.npy artifacts/continuous/step-0006/momentum.npy
set +e
# devices.timeout far beyond the 120 s allowed: only the abort can release the peers in time
timeout 120 "$DDPTOK" "$CONF/tiny.ini" train $MID --set devices.backend=cuda $DEV \
	--set devices.timeout=900 --set run.outputs=inj --set run.artifacts=inj-art \
	--inject-failure 1:1 > inj.txt 2> inj.err
rc=$?
set -e
cat inj.err
[ "$rc" -eq 6 ] && grep -q "rank 1" inj.err
