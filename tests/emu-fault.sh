#!/bin/sh
# Runs test-gpu-emu's backend case built with one planted fault (tests/meson.build) and
# requires a loud failure: a non-zero exit and output matching PATTERN (what must catch
# the fault). usage: emu-fault.sh EXE PATTERN
exe=$1
pattern=$2
out=$(CK_RUN_CASE=backend "$exe" 2>&1)
rc=$?
echo "$out"
if [ "$rc" -eq 0 ]; then
	echo "FAIL: the planted fault went unnoticed (exit 0)"
	exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq "$pattern"; then
	echo "FAIL: exit $rc, but nothing matches /$pattern/"
	exit 1
fi
echo "caught: /$pattern/ (exit $rc)"
