#!/usr/bin/env bash
# gpu-check: build ddptok with the CUDA backend and check it on this GPU machine.
#
#   tools/gpu-check.sh [--builddir DIR] [--windows N] [--emulated]
#
# --emulated runs every step on the emulated device instead (emu/: meson -Dgpu_emulator=true,
# DDPTOK_EMULATED_GPUS GPUs, 4 unless set; default DIR build-gpu-emu), on any machine:
# it proves the backend's use of CUDA, cuBLAS and NCCL and its kernels' logic, not speed.
#
# Run from anywhere; it works in the repository it belongs to. Steps, each reported
# PASS, FAIL or SKIP in the summary table at the end:
#   configure   meson setup DIR -Dcuda=enabled (reconfigured when DIR exists)
#   build       ninja -C DIR (CUDA warnings are errors)
#   env check   ddptok-run configs/minimum.ini env --check on every GPU (W = the number
#               of GPUs, up to 8, NCCL): context, kernel, GEMM, allreduce against the CPU
#   gpu tests   meson test --suite gpu: every CUDA op against the host backend bit for
#               bit, NCCL allreduce and abort, env --check, parity and resume on the GPUs
#               (a skip = no usable GPU: FAIL)
#   proto W=1   the whole protocol on GPU 0 alone (NCCL over one rank)
#   proto W=2   the whole protocol with two ranks sharing GPU 0 (host collective)
#   proto W=N   the whole protocol on every GPU (N = the number of GPUs, up to 8, NCCL;
#               SKIP with one GPU)
#   proto gpt   the whole protocol on the GPT (configs/gpt-tiny.ini, W = 2): on GPUs 0
#               and 1 over NCCL, or with both ranks on GPU 0 (host collective) on a
#               one-GPU machine
#   bench       ddptok-run configs/minimum.ini bench on the cpu and on the cuda backend,
#               tokens/s side by side
# Every ddptok-run step forces devices.backend=cuda, so nothing passes on the CPU by
# falling back. Logs and outputs go to DIR/gpu-check/. Exit status 0 only if every step
# passed.
set -uo pipefail

builddir=
windows=20
emulated=0
while [ $# -gt 0 ]; do
	case "$1" in
	--builddir) builddir=$2; shift 2 ;;
	--builddir=*) builddir=${1#*=}; shift ;;
	--windows) windows=$2; shift 2 ;;
	--windows=*) windows=${1#*=}; shift ;;
	--emulated) emulated=1; shift ;;
	-h|--help) sed -n '2,33p' "$0"; exit 0 ;;
	*) echo "gpu-check: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
backend_opts=(-Dcuda=enabled)
if [ "$emulated" -eq 1 ]; then
	builddir=${builddir:-build-gpu-emu}
	backend_opts=(-Dgpu_emulator=true -Dcuda=disabled)
	export DDPTOK_EMULATED_GPUS=${DDPTOK_EMULATED_GPUS:-4}
	echo "gpu-check: on the EMULATED device ($DDPTOK_EMULATED_GPUS emulated GPUs, no real one)"
fi
builddir=${builddir:-build-gpu}
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
	printf '== %-11s %s %s\n' "$1" "$2" "$3"
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
		printf '  %-11s %-4s  %s\n' "${steps[$i]}" "${results[$i]}" "${notes[$i]}"
		[ "${results[$i]}" = FAIL ] && status=1
	done
	if [ -n "${cpu_tps:-}" ] || [ -n "${cuda_tps:-}" ]; then
		printf '  tokens/s    cpu %-12s cuda %-12s (minimum.ini, %s windows)\n' \
			"${cpu_tps:-n/a}" "${cuda_tps:-n/a}" "$windows"
	fi
	echo "  logs: $logs"
	[ "$status" -eq 0 ] && echo "gpu-check: PASS" || echo "gpu-check: FAIL"
	exit "$status"
}

mkdir -p "$logs" 2>/dev/null || { echo "gpu-check: cannot create $logs" >&2; exit 2; }

# 1. configure
if [ -f "$builddir/build.ninja" ]; then
	cfg=(meson configure "$builddir" "${backend_opts[@]}")
else
	cfg=(meson setup "$builddir" "${backend_opts[@]}")
fi
if run_step configure "$logs/configure.log" "${cfg[@]}"; then
	record configure PASS "$(grep -m1 -o 'CUDA backend: .*' "$logs/configure.log")"
else
	record configure FAIL "meson could not set up the CUDA build (nvcc, cuBLAS, NCCL?)"
	reason="configure failed"
	skip_rest build "env check" "gpu tests" "proto W=1" "proto W=2" "proto W=N" "proto gpt" \
		bench
	summary
fi

# 2. build
if run_step build "$logs/build.log" ninja -C "$builddir"; then
	record build PASS ""
else
	record build FAIL "see $logs/build.log"
	reason="build failed"
	skip_rest "env check" "gpu tests" "proto W=1" "proto W=2" "proto W=N" "proto gpt" bench
	summary
fi

run="$builddir/ddptok-run"
[ -x "$run" ] || run="$builddir/src/ddptok-run"

# how many GPUs the program sees: the "GPUs" line of `ddptok-run CONFIG env`
gpus=0
if (cd "$builddir" && "$run" configs/minimum.ini env) >"$logs/env.log" 2>&1; then
	gpus=$(sed -n 's/^GPUs *\([0-9][0-9]*\)$/\1/p' "$logs/env.log" | head -n 1)
	gpus=${gpus:-0}
fi
echo "== environment ($gpus GPU(s)):"
cat "$logs/env.log"
all=$gpus
[ "$all" -le 8 ] || all=8

# 3. env --check on every GPU
if [ "$gpus" -lt 1 ]; then
	record "env check" FAIL "no GPU visible to ddptok-run: $(sed -n 's/^GPUs *none: //p' "$logs/env.log")"
elif (cd "$builddir" && run_step "env check" "$logs/env-check.log" "$run" configs/minimum.ini \
	env --check --set devices.backend=cuda --set devices.world="$all"); then
	record "env check" PASS "W = $all: every rank passed"
else
	record "env check" FAIL "exit status != 0, see $logs/env-check.log"
fi

# 4. unit and end-to-end tests of the GPU side
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

# 5. the whole protocol on the cuda backend, each in a directory of its own
protocol() { # step-name dir-name note config devices-settings...
	local name=$1 dir=$2 note=$3 config=$4
	shift 4
	rm -rf "$logs/$dir"
	if [ "$gpus" -lt 1 ]; then
		record "$name" FAIL "no GPU visible to ddptok-run (see $logs/env.log)"
	elif (cd "$builddir" && run_step "$name" "$logs/$dir.log" "$run" "$config" \
		--set devices.backend=cuda --set run.outputs="$logs/$dir/outputs" \
		--set run.artifacts="$logs/$dir/artifacts" "$@"); then
		record "$name" PASS "$note"
	else
		record "$name" FAIL "exit status != 0, see $logs/$dir.log ($note)"
	fi
}
mini=configs/minimum.ini
protocol "proto W=1" protocol-w1 "GPU 0, NCCL" $mini --set devices.world=1
protocol "proto W=2" protocol-shared "ranks 0,1 on GPU 0, host collective" $mini \
	--set devices.ids=0,0 --set devices.collective=host
if [ "$gpus" -ne 1 ]; then # none: protocol() says so
	protocol "proto W=N" protocol-all "W = $all on GPUs 0..$((all - 1)), NCCL" $mini \
		--set devices.world="$all"
else
	record "proto W=N" SKIP "one GPU: W = 1 and W = 2 cover it"
fi
# the GPT (its attention, LayerNorm and GELU kernels) through the whole protocol, W = 2
if [ "$gpus" -eq 1 ]; then
	protocol "proto gpt" protocol-gpt "gpt-tiny, ranks 0,1 on GPU 0, host collective" \
		configs/gpt-tiny.ini --set devices.ids=0,0 --set devices.collective=host
else
	protocol "proto gpt" protocol-gpt "gpt-tiny, W = 2 on GPUs 0,1, NCCL" \
		configs/gpt-tiny.ini --set devices.world=2
fi

# 6. throughput, cpu then cuda
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
