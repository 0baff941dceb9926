#!/bin/sh
# Asks the compiler's vectorizer report whether every loop of a source file marked
# "vectorized: NAME" (in a comment on the loop's line) was vectorized when compiled
# with the given flags; names the loops that were not. A negative control runs first:
# with the vectorizer switched off, every marked loop must be reported missing, so a
# report format this script no longer reads fails the test instead of passing it.
# usage: vectorized-loops.sh SOURCE -- COMPILER [FLAGS...]   (GCC's report format)
set -u
src=$1
shift 2
tags=$(grep -n 'vectorized: [a-z_0-9]*' "$src" | sed 's/^\([0-9]*\):.*vectorized: \([a-z_0-9]*\).*/\1 \2/')
if [ -z "$tags" ]; then
	echo "no loop of $src is marked 'vectorized: NAME'"
	exit 1
fi
base=$(basename "$src")

# prints the names of the marked loops the report does not list as vectorized
missing() {
	report=$("$@" -fopt-info-vec-optimized -c "$src" -o /dev/null 2>&1) || {
		echo "compile failed: $report" >&2
		echo "(compile failed)"
		return
	}
	echo "$tags" | while read -r line name; do
		echo "$report" | grep -q "$base:$line:[0-9]*: optimized: loop vectorized" ||
			echo "$name"
	done
}

control=$(missing "$@" -fno-tree-vectorize)
want=$(echo "$tags" | awk '{print $2}')
if [ "$control" != "$want" ]; then
	echo "negative control: with -fno-tree-vectorize the report should miss every marked loop"
	echo "missing: $control"
	exit 1
fi
left=$(missing "$@")
if [ -n "$left" ]; then
	echo "not vectorized with $*:"
	echo "$left" | sed "/^$/d"
	exit 1
fi
echo "vectorized:" $want
