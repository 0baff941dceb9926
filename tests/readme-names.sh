#!/bin/sh
# The README names source files and functions so that a reader can find them: every path
# under src/, runtime/ or gpu/ it names must exist (a * in it must match a file), and
# every function it writes as `name()` must be defined in those directories.
# Usage: readme-names.sh README ROOT   (exit 0: all found; 1: a name is missing)
set -eu
readme=$1
root=$2
bad=0
paths=$(grep -o '\(^\|[^A-Za-z0-9_./-]\)\(src\|runtime\|gpu\)/[A-Za-z0-9_./*-]*' "$readme" |
	sed 's/^[^srg]//; s/[.,]*$//' | sort -u)
[ -n "$paths" ] || { echo "$readme names no path under src/, runtime/ or gpu/"; exit 2; }
for p in $paths; do
	# a glob such as src/cmd_*.c exists when it matches one file
	found=0
	for f in "$root"/$p; do
		[ -e "$f" ] && found=1
	done
	if [ "$found" -eq 0 ]; then
		echo "README names $p, which does not exist"
		bad=1
	fi
done
funcs=$(grep -o '`[A-Za-z_][A-Za-z0-9_]*()`' "$readme" | tr -d '`()' | sort -u)
for f in $funcs; do
	# a definition or declaration: a line that starts at column 0 and holds name(
	if ! grep -q "^[A-Za-z].*[^A-Za-z0-9_]$f(" "$root"/src/*.[ch] "$root"/runtime/*.[ch] \
	     "$root"/gpu/*.[ch] "$root"/gpu/*.cu; then
		echo "README names the function $f(), defined nowhere in src/, runtime/ or gpu/"
		bad=1
	fi
done
[ "$bad" -eq 0 ] && echo "README: $(echo $paths | wc -w) paths and $(echo $funcs | wc -w) functions, all found"
exit "$bad"
