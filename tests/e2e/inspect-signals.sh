#!/bin/sh
# Signals in an inspect session: SIGINT during a long `step` stops it at the next window
# boundary and the session goes on with the next command; SIGTERM during a step ends the
# session at the boundary, cleanly (exit 8, the interruption named).
set -eu
fail() { echo "FAIL: $*"; echo "--- output:"; cat out.txt; echo "--- stderr:"; cat err.txt; exit 1; }

# $1: the signal; runs `step 1000000`, sends $1 once two windows are done, then (after
# SIGINT, which keeps the session) feeds `step` and `quit`; the exit status in $rc
session() {
	rm -f in.fifo out.txt err.txt
	mkfifo in.fifo
	"$DDPTOK" "$CONF/tiny.ini" inspect < in.fifo > out.txt 2> err.txt &
	pid=$!
	exec 3> in.fifo
	echo 'step 1000000' >&3
	i=0
	while ! grep -q '^step 2:' out.txt; do
		i=$((i + 1))
		[ "$i" -lt 1200 ] || { kill -KILL "$pid"; fail "the step did not start"; }
		sleep 0.05
	done
	kill -"$1" "$pid"
	if [ "$1" = INT ]; then
		printf 'step\nquit\n' >&3
	fi
	exec 3>&-
	rc=0
	wait "$pid" || rc=$?
}

session INT
[ "$rc" -eq 0 ] || fail "exit $rc after SIGINT during a step, expected 0 (the session goes on)"
n=$(sed -n 's/^step: interrupted by SIGINT after \([0-9]*\) of 1000000 windows (step \([0-9]*\))$/\2/p' out.txt)
[ -n "$n" ] || fail "no interruption line"
grep -q "^\(ddptok> \)\{0,1\}step $((n + 1)): window $((n + 1))," out.txt || fail "the next command did not run after the interruption"
if grep -q "step $((n + 2)):" out.txt; then fail "the interrupted step went on"; fi

session TERM
[ "$rc" -eq 8 ] || fail "exit $rc after SIGTERM during a step, expected 8"
grep -q '^step: interrupted by SIGTERM after' out.txt || fail "no interruption line"
grep -q 'inspect: interrupted by SIGTERM; the session ends' err.txt || fail "no message for the end"
echo ok
