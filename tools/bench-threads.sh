#!/bin/sh
# bench-threads: how the CPU backend scales with the threads of each rank.
#
#   tools/bench-threads.sh CONFIG [DDPTOK_RUN] [WINDOWS]
#
# Runs `ddptok-run CONFIG bench` on the cpu backend with devices.world = 2 and
# devices.threads = 1, 2 and 4, and prints each run's training throughput (supervised
# tokens per second, from outputs/bench.json) and its ratio to the one-thread run. The
# results of a window do not depend on the thread count (docs/threads.md), only the time.
# Extra --set options can be given in DDPTOK_SET, e.g. DDPTOK_SET="--set model.hidden=1024".
set -eu
config=${1:?usage: bench-threads.sh CONFIG [DDPTOK_RUN] [WINDOWS]}
run=${2:-./ddptok-run}
windows=${3:-20}
# where bench writes bench.json: [run] outputs of the configuration (default
# outputs/{config}), {config} standing for the file's name without .ini
outputs=$(sed -n 's/^outputs *= *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$config" | head -n 1)
name=$(basename "$config" .ini)
outputs=$(printf '%s\n' "${outputs:-outputs/{config\}}" | sed "s|{config}|$name|g")
base=""
printf '%-8s %14s %8s\n' threads tokens/s speedup
for t in 1 2 4; do
	# shellcheck disable=SC2086
	"$run" "$config" bench --windows "$windows" --set devices.backend=cpu \
		--set devices.world=2 --set devices.threads="$t" ${DDPTOK_SET:-} >/dev/null
	rate=$(python3 -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))["tokens_per_s"])' \
		"$outputs/bench.json")
	base=${base:-$rate}
	printf '%-8s %14s %8s\n' "$t" "$rate" "$(python3 -c "print('%.2fx' % ($rate / $base))")"
done
