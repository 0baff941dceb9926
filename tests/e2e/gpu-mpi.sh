# GPUs across processes (mpirun on one machine, one rank per process): processes that
# would take different devices are refused (one GPU is enough for that); with two GPUs,
# NCCL spans the two processes (process 0 makes the clique's id, MPI carries it): parity
# passes with its negative controls caught as in one process, and in exact mode training
# and parity give the bits of one process with W = 2 over NCCL.
# Skips (77) without a GPU, without mpirun, in a build without MPI, and (after the first
# check) with fewer than two GPUs.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
command -v mpirun > /dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
T="$CONF/tiny.ini"
"$DDPTOK" "$T" env | grep -q "^mpi: built" || { echo "SKIP: built without MPI"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
# Open MPI refuses to run as root unless told twice; only this test's processes are told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=false # one machine
mpi() { timeout 300 mpirun --oversubscribe -np 2 "$DDPTOK" "$T" "$@"; }

# process 0 on the GPU (both ranks' ids 0,0: the host collective), process 1 on the CPU
set +e
# shellcheck disable=SC2086
timeout 300 mpirun --oversubscribe -np 1 "$DDPTOK" "$T" train $MID --set devices.backend=cuda \
	--set devices.ids=0,0 --set run.artifacts=d : -np 1 "$DDPTOK" "$T" train $MID \
	--set devices.backend=cpu --set run.artifacts=d > d.out 2> d.err
rc=$?
set -e
[ "$rc" -eq 3 ] || { cat d.err; fail "differing devices: exit $rc, expected 3"; }
grep -q "the processes would run on different devices: process 0 (.*) runs cuda" d.err ||
	fail "differing devices not named: $(cat d.err)"
[ -z "$(ls -d d/runs/*/step-* 2> /dev/null)" ] || fail "a checkpoint was written with differing devices"

if [ "$GPUS" -lt 2 ]; then
	echo "SKIP: NCCL across processes needs two GPUs ($GPUS visible)"
	exit 77
fi
C="$MID --set devices.backend=cuda --set devices.collective=nccl --set devices.world=2"
C="$C --set devices.timeout=120"
EX="--set train.shards=8 --set train.accumulation=4"

# default mode: parity passes over NCCL across the processes, every control caught
# shellcheck disable=SC2086
"$DDPTOK" "$T" parity $C --set run.outputs=one > one.out
# shellcheck disable=SC2086
mpi parity $C --set run.outputs=two > two.out || { cat two.out; fail "parity P = 2"; }
# process 1 writes its lines to its own log
both() { cat two.out two/process-1/log.txt; }
[ "$(both | grep -c 'collective nccl')" -eq 2 ] || fail "not over NCCL: $(both)"
caught=$(grep -c 'fail (caught)' one.out)
[ "$caught" -gt 0 ] || fail "no negative control caught in one process: $(cat one.out)"
[ "$(both | grep -c 'fail (caught)')" -eq $((2 * caught)) ] || fail "negative controls: $(both)"

# exact mode: parity's bitwise line at 0, and the very bits of one process with W = 2
# shellcheck disable=SC2086
"$DDPTOK" "$T" parity $C $EX --set run.outputs=one-ex > one-ex.out
# shellcheck disable=SC2086
mpi parity $C $EX --set run.outputs=two-ex > two-ex.out || { cat two-ex.out; fail "exact"; }
[ "$(cat two-ex.out two-ex/process-1/log.txt | grep -c 'bitwise: 0 of .* components differ')" \
	-eq 2 ] || fail "exact parity P = 2: $(cat two-ex.out two-ex/process-1/log.txt)"
cmp one-ex/parity.json two-ex/parity.json || fail "exact parity.json differs from P = 1's"
# shellcheck disable=SC2086
"$DDPTOK" "$T" train --continuous $C $EX --set run.artifacts=p1 > p1.out
# shellcheck disable=SC2086
mpi train --continuous $C $EX --set run.artifacts=p2 > p2.out || { cat p2.out; fail "train"; }
for f in params.npy momentum.npy; do
	cmp p1/runs/latest/step-0006/$f p2/runs/latest/step-0006/$f ||
		fail "exact mode: $f of P = 2 differs from one process's"
done
echo "gpu-mpi: ok"
