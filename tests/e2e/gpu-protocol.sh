# The whole protocol on the cuda backend, shortened (fewer sequences and updates) so that
# it runs on the emulated device in CI: configs/minimum.ini with W = 1, 2 and 4,
# configs/exact.ini with W = 1, 2 and 4 (exact mode: the parity's bitwise line at 0 over
# NCCL's replacement of the tree), configs/gpt-tiny.ini with W = 2, and, where mpirun
# exists, two processes of two devices each. Each W needs that many GPUs (skipped
# otherwise); skips (77) without a GPU.
set -eu
. "$(dirname "$0")/gpu-lib.sh"
SHORT="--set data.train=96 --set data.validation=16 --set data.test=32 --set data.max_len=48"
SHORT="$SHORT --set train.updates=10 --set train.stop_at=5"
fail() { echo "FAIL: $*"; exit 1; }
# proto NAME CONFIG SETTINGS...: the protocol, every check passed
proto() {
	name=$1
	shift
	# shellcheck disable=SC2086
	"$DDPTOK" "$@" $SHORT --set devices.backend=cuda --set run.outputs="$name/o" \
		--set run.artifacts="$name/a" > "$name.log" 2>&1 || { tail -30 "$name.log"; fail "$name"; }
	grep -q "^protocol: every check passed" "$name.log" || fail "$name: $(tail -5 "$name.log")"
	echo "$name: every check passed"
}
for W in 1 2 4; do
	[ "$GPUS" -ge "$W" ] || continue
	# four length bands of the shortened corpus would leave the shortest empty
	plan=length_bands
	[ "$W" -lt 4 ] || plan=balanced
	proto "minimum-w$W" "$CONF/minimum.ini" --set devices.world="$W" --set train.plan=$plan
	proto "exact-w$W" "$CONF/exact.ini" --set devices.world="$W"
	grep -q "bitwise: 0 of .* components differ" "exact-w$W.log" ||
		fail "exact W = $W: not bitwise: $(grep bitwise "exact-w$W.log")"
done
if [ "$GPUS" -ge 2 ]; then
	proto gpt-w2 "$CONF/gpt-tiny.ini" --set devices.world=2 --set data.max_len=128
fi
# two processes of two devices each: process p's ranks on GPUs 2p, 2p + 1, one clique
command -v mpirun > /dev/null 2>&1 || { echo "no mpirun: the run over processes is left out"; exit 0; }
"$DDPTOK" "$CONF/tiny.ini" env | grep -q "^mpi: built" || exit 0
[ "$GPUS" -ge 4 ] || exit 0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false
# shellcheck disable=SC2086
timeout 300 mpirun --oversubscribe -np 2 "$DDPTOK" "$CONF/minimum.ini" train $SHORT \
	--set devices.backend=cuda --set devices.world=4 --set devices.collective=nccl \
	--set train.plan=balanced \
	--set run.outputs=mpi/o --set run.artifacts=mpi/a > mpi.log 2>&1 ||
	{ tail -30 mpi.log; fail "2 processes x 2 devices"; }
grep -q "collective nccl" mpi.log || fail "2 x 2 not over NCCL: $(head -5 mpi.log)"
echo "2 processes x 2 devices: trained over NCCL"
