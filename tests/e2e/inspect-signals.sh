#!/bin/sh
# Signals in an inspect session: SIGINT during a long `step` stops it at the next window
# boundary and the session goes on with the next command; SIGTERM during a step ends the
# session at the boundary, cleanly (exit 8, the interruption named). At the idle prompt,
# SIGINT drops the line being typed and the session goes on; a second SIGINT within a
# second, or SIGTERM, ends it (exit 8): with a script on stdin and on a terminal (a pty).
set -eu
fail() { echo "FAIL: $*"; echo "--- output:"; cat out.txt; echo "--- stderr:"; cat err.txt; exit 1; }

# Starts a session reading in.fifo (written through fd 3), writes $1 to it and waits until
# the output shows $2.
start() {
	rm -f in.fifo out.txt err.txt
	mkfifo in.fifo
	"$DDPTOK" "$CONF/tiny.ini" inspect < in.fifo > out.txt 2> err.txt &
	pid=$!
	exec 3> in.fifo
	printf "$1" >&3
	i=0
	while ! grep -q "$2" out.txt; do
		i=$((i + 1))
		[ "$i" -lt 1200 ] || { kill -KILL "$pid"; fail "never saw '$2'"; }
		sleep 0.05
	done
}

# Writes $1 (the session may have ended: a write to nobody fails instead of killing this
# shell), ends the input and waits; the exit status in $rc.
finish() {
	(trap '' PIPE; printf "$1" >&3) 2>/dev/null || true
	exec 3>&-
	rc=0
	wait "$pid" || rc=$?
}

# $1: the signal, sent once two windows of `step 1000000` are done; then (after SIGINT,
# which keeps the session) `step` and `quit`
session() {
	start 'step 1000000\n' '^step 2:'
	kill -"$1" "$pid"
	if [ "$1" = INT ]; then finish 'step\nquit\n'; else finish ''; fi
}

# the idle prompt, scripted: $1 runs once the prompt waits with the unfinished line
# "bogus" (no newline); then a newline, `help` and `quit` follow
at_prompt() {
	start bogus 'ddptok> '
	sleep 0.2
	eval "$1"
	finish '\nhelp\nquit\n'
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

at_prompt 'kill -INT $pid; sleep 0.3'
[ "$rc" -eq 0 ] || fail "exit $rc after SIGINT at the prompt, expected 0 (the line dropped, the session goes on)"
grep -q '^ddptok> ^C$' out.txt || fail "SIGINT at the prompt: no ^C line"
if grep -q 'unknown command' out.txt; then fail "the unfinished line was run after SIGINT"; fi
grep -q '^ *quit  ' out.txt || fail "the session did not go on after SIGINT"

at_prompt 'kill -INT $pid; sleep 0.2; kill -INT $pid; sleep 0.3'
[ "$rc" -eq 8 ] || fail "exit $rc after two SIGINTs within a second, expected 8"
grep -q 'inspect: SIGINT twice within a second; the session ends' err.txt || fail "no message for two SIGINTs"

at_prompt 'kill -TERM $pid; sleep 0.3'
[ "$rc" -eq 8 ] || fail "exit $rc after SIGTERM at the prompt, expected 8"
grep -q 'inspect: interrupted by SIGTERM; the session ends' err.txt || fail "no message for SIGTERM at the prompt"

# on a terminal (line editing when built with libedit): ^C typed after "bogus" clears the
# line, `help` then runs; two ^C within a second end the session with 8
python3 - "$DDPTOK" "$CONF/tiny.ini" > out.txt 2> err.txt <<'PY' || fail "on a terminal"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], sys.argv[2], "inspect"])
seen = b""
def until(text, limit=60):
    global seen
    end = time.time() + limit
    while text not in seen and time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    if text not in seen:
        sys.exit("never saw %r in %r" % (text, seen[-400:]))
until(b"ddptok> ")
os.write(fd, b"bogus")
until(b"bogus")
os.write(fd, b"\x03")
until(b"^C")
time.sleep(1.2)
os.write(fd, b"help\r")
until(b"leave (end of input")
until(b"ddptok> ", 10)
os.write(fd, b"\x03")
time.sleep(0.2)
os.write(fd, b"\x03")
_, status = os.waitpid(pid, 0)
if b"unknown command" in seen:
    sys.exit("the cleared line was run: %r" % seen[-400:])
code = os.waitstatus_to_exitcode(status)
if code != 8:
    sys.exit("exit %d after two ^C, expected 8: %r" % (code, seen[-400:]))
PY
echo ok
