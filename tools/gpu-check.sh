#!/usr/bin/env bash
# gpu-check: build ddptok with the CUDA backend and check it on this GPU machine.
#
#   tools/gpu-check.sh [--builddir DIR] [--windows N]
#
# Run from anywhere; it works in the repository it belongs to. Steps, each reported
# PASS, FAIL or SKIP in the summary at the end:
#   configure   meson setup DIR -Dcuda=enabled (reconfigured when DIR exists)
#   build       ninja -C DIR
#   gpu tests   meson test --suite gpu: every CUDA op against the host backend, NCCL
#               allreduce and abort over all visible GPUs (a skip = no usable GPU: FAIL)
#   protocol    ddptok-run configs/minimum.ini --set devices.backend=cuda, the whole
#               protocol (with a single GPU both ranks share it over the host collective)
#   bench       ddptok-run configs/minimum.ini bench on the cpu and on the cuda backend,
#               tokens/s side by side
# Logs and outputs go to DIR/gpu-check/. Exit status 0 only if every step passed.
set -uo pipefail

builddir=build-gpu
windows=20
while [ $# -gt 0 ]; do
	case "$1" in
	--builddir) builddir=$2; shift 2 ;;
	--builddir=*) builddir=${1#*=}; shift ;;
	--windows) windows=$2; shift 2 ;;
	--windows=*) windows=${1#*=}; shift ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "gpu-check: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
logs="$builddir/gpu-check"

# the CUDA toolkit's usual location, when it is not on PATH yet
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	export PATH="/usr/local/cuda/bin:$PATH"
fi

steps=()
results=()
notes=()
record() { # step result note
	steps+=("$1")
	results+=("$2")
	notes+=("$3")
	printf '== %-10s %s %s\n' "$1" "$2" "$3"
}

# run_step NAME LOG CMD...: runs CMD with its output in LOG; 0 when it succeeded
run_step() {
	local name=$1 log=$2
	shift 2
	echo "== $name: $*"
	if "$@" >"$log" 2>&1; then
		return 0
	fi
	echo "-- last lines of $log:"
	tail -n 25 "$log"
	return 1
}

skip_rest() { # reason: every step not yet run is SKIP
	local s
	for s in "$@"; do
		record "$s" SKIP "$reason"
	done
}

summary() {
	local i status=0
	echo
	echo "gpu-check summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n))"
	for i in "${!steps[@]}"; do
		printf '  %-10s %-4s  %s\n' "${steps[$i]}" "${results[$i]}" "${notes[$i]}"
		[ "${results[$i]}" = PASS ] || status=1
	done
	if [ -n "${cpu_tps:-}" ] || [ -n "${cuda_tps:-}" ]; then
		printf '  tokens/s   cpu %-12s cuda %-12s (minimum.ini, %s windows)\n' \
			"${cpu_tps:-n/a}" "${cuda_tps:-n/a}" "$windows"
	fi
	echo "  logs: $logs"
	[ "$status" -eq 0 ] && echo "gpu-check: PASS" || echo "gpu-check: FAIL"
	exit "$status"
}

mkdir -p "$logs" 2>/dev/null || { echo "gpu-check: cannot create $logs" >&2; exit 2; }

# 1. configure
if [ -f "$builddir/build.ninja" ]; then
	cfg=(meson configure "$builddir" -Dcuda=enabled)
else
	cfg=(meson setup "$builddir" -Dcuda=enabled)
fi
if run_step configure "$logs/configure.log" "${cfg[@]}"; then
	record configure PASS "$(grep -m1 -o 'CUDA backend: .*' "$logs/configure.log")"
else
	record configure FAIL "meson could not set up the CUDA build (nvcc, cuBLAS, NCCL?)"
	reason="configure failed"
	skip_rest build "gpu tests" protocol bench
	summary
fi

# 2. build
if run_step build "$logs/build.log" ninja -C "$builddir"; then
	record build PASS ""
else
	record build FAIL "see $logs/build.log"
	reason="build failed"
	skip_rest "gpu tests" protocol bench
	summary
fi

run="$builddir/ddptok-run"
[ -x "$run" ] || run="$builddir/src/ddptok-run"

# 3. unit tests of the GPU side
if run_step "gpu tests" "$logs/gpu-tests.log" meson test -C "$builddir" --suite gpu \
	--print-errorlogs --verbose; then
	if grep -q '^Skipped: *[1-9]' "$logs/gpu-tests.log" ||
		grep -q 'no GPU, skipping' "$logs/gpu-tests.log"; then
		record "gpu tests" FAIL "skipped: $(grep -m1 -o 'no GPU, skipping.*' "$logs/gpu-tests.log")"
	else
		record "gpu tests" PASS "$(grep -m1 -o 'test-gpu: [0-9]* CUDA device.*' "$logs/gpu-tests.log")"
	fi
else
	record "gpu tests" FAIL "see $logs/gpu-tests.log"
fi

# how many GPUs the program sees: the "GPUs" line of `ddptok-run CONFIG env`
gpus=0
if (cd "$builddir" && "$run" configs/minimum.ini env) >"$logs/env.log" 2>&1; then
	gpus=$(sed -n 's/^GPUs *\([0-9][0-9]*\)$/\1/p' "$logs/env.log" | head -n 1)
	gpus=${gpus:-0}
fi
echo "== environment ($gpus GPU(s)):"
cat "$logs/env.log"

# 4. the whole protocol on the cuda backend, in a directory of its own
proto=(--set devices.backend=cuda --set run.outputs="$logs/protocol/outputs"
	--set run.artifacts="$logs/protocol/artifacts")
note=""
if [ "$gpus" -eq 1 ]; then
	proto+=(--set devices.ids=0,0 --set devices.collective=host)
	note="(1 GPU: both ranks on GPU 0, host collective)"
fi
rm -rf "$logs/protocol"
if [ "$gpus" -lt 1 ]; then
	record protocol FAIL "no GPU visible to ddptok-run (see $logs/env.log)"
elif (cd "$builddir" && run_step protocol "$logs/protocol.log" "$run" configs/minimum.ini "${proto[@]}"); then
	record protocol PASS "$note"
else
	record protocol FAIL "exit status != 0, see $logs/protocol.log $note"
fi

# 5. throughput, cpu then cuda
bench_tps() { # backend extra-args... -> prints tokens/s, returns the run's status
	local backend=$1
	shift
	local out="$logs/bench-$backend"
	rm -rf "$out"
	(cd "$builddir" && "$run" configs/minimum.ini bench --windows "$windows" \
		--set devices.backend="$backend" --set run.outputs="$out/outputs" \
		--set run.artifacts="$out/artifacts" "$@") >"$logs/bench-$backend.log" 2>&1 ||
		return 1
	sed -n 's/.*"tokens_per_s": *\([0-9.]*\).*/\1/p' "$out/outputs/bench.json" |
		awk '{ printf "%.0f\n", $1 }'
}
bench_ok=1
if ! cpu_tps=$(bench_tps cpu); then
	bench_ok=0
	cpu_tps=""
	echo "-- cpu bench failed:"
	tail -n 15 "$logs/bench-cpu.log"
fi
cuda_extra=()
[ "$gpus" -eq 1 ] && cuda_extra=(--set devices.ids=0,0 --set devices.collective=host)
if [ "$gpus" -lt 1 ]; then
	bench_ok=0
	echo "-- cuda bench not run: no GPU visible"
elif ! cuda_tps=$(bench_tps cuda ${cuda_extra[@]+"${cuda_extra[@]}"}); then
	bench_ok=0
	cuda_tps=""
	echo "-- cuda bench failed:"
	tail -n 15 "$logs/bench-cuda.log"
fi
if [ "$bench_ok" -eq 1 ]; then
	record bench PASS "cpu $cpu_tps tokens/s, cuda $cuda_tps tokens/s"
else
	record bench FAIL "see $logs/bench-cpu.log and $logs/bench-cuda.log"
fi

summary
