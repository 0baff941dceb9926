# On a GPU, exact mode (8 shards): parity's bitwise line at 0 with W = 1 over NCCL's tree
# allreduce, W = 2 sharing one GPU over the host collective, and W = 2, 4 over NCCL when
# that many GPUs exist; a run stopped on 2 devices and resumed on 1 ends bit-identical
# to a continuous run on 1, and so do runs on 2 devices with the optimizer state sharded
# (host collective, NCCL); a checkpoint of the CPU backend is refused by the GPU.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
EX="$MID --set train.shards=8 --set devices.backend=cuda"
# tiny.ini states train.accumulation: in exact mode it must be shards / world
on() { echo "--set devices.world=$1 --set train.accumulation=$((8 / $1))"; }
bitwise_zero() { grep -q "bitwise: 0 of .* components differ from the 1-device reference" "$1"; }
set -x
"$DDPTOK" "$CONF/tiny.ini" parity $EX $(on 1) --set devices.collective=nccl > w1.txt
bitwise_zero w1.txt
"$DDPTOK" "$CONF/tiny.ini" parity $EX $(on 2) --set devices.ids=0,0 --set devices.collective=host > shared.txt
bitwise_zero shared.txt
[ "$(grep -c 'fail (caught)' shared.txt)" -eq 3 ]
for W in 2 4; do
	if [ "$GPUS" -ge $W ]; then
		ids=$(seq -s, 0 $((W - 1)))
		"$DDPTOK" "$CONF/tiny.ini" parity $EX $(on $W) --set devices.ids=$ids \
			--set devices.collective=nccl > nccl$W.txt
		bitwise_zero nccl$W.txt
	fi
done
# elastic: stopped on 2 devices sharing one GPU, resumed on 1
"$DDPTOK" "$CONF/tiny.ini" train --continuous $EX $(on 1) > cont.txt
cont=artifacts/tiny/runs/$(readlink artifacts/tiny/runs/latest)
"$DDPTOK" "$CONF/tiny.ini" train $EX --set train.stop_at=3 $(on 2) --set devices.ids=0,0 \
	--set devices.collective=host > stop.txt
"$DDPTOK" "$CONF/tiny.ini" train --resume latest $EX $(on 1) > res.txt
cmp artifacts/tiny/runs/latest/step-0006/params.npy "$cont/step-0006/params.npy"
cmp artifacts/tiny/runs/latest/step-0006/momentum.npy "$cont/step-0006/momentum.npy"
# the optimizer state sharded: W = 2 sharing one GPU over the host collective, and over
# NCCL when two GPUs exist, end on the continuous 1-device run's bits
for how in "--set devices.ids=0,0 --set devices.collective=host" \
	"--set devices.ids=0,1 --set devices.collective=nccl"; do
	case "$how" in *nccl*) [ "$GPUS" -ge 2 ] || continue ;; esac
	rm -rf z-art
	"$DDPTOK" "$CONF/tiny.ini" train --continuous $EX $(on 2) $how \
		--set train.shard_optimizer=true --set run.artifacts=z-art > z.txt
	cmp z-art/runs/latest/step-0006/params.npy "$cont/step-0006/params.npy"
	cmp z-art/runs/latest/step-0006/momentum.npy "$cont/step-0006/momentum.npy"
done
# a CPU checkpoint: bitwise continuation on the GPU is not possible, and it says so
"$DDPTOK" "$CONF/tiny.ini" train $MID --set train.shards=8 --set train.stop_at=3 $(on 2) \
	--set devices.backend=cpu --set run.artifacts=cpu-art > cpu.txt
set +e
"$DDPTOK" "$CONF/tiny.ini" train --resume latest $EX $(on 1) \
	--set run.artifacts=cpu-art > cross.txt 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "bitwise continuation is not possible" cross.txt
