#!/bin/sh
# include-cycles.sh: the layering rules of src/, checked on its #include lines.
#
# The program's layers only hold if the dependencies between its modules point one way.
# A module is a .c file (or a .cc) and its .h (src/engine/engine.c and src/engine/engine.h are the
# module engine/engine); "a.c includes b.h" (or a.h does) is an edge a -> b. This script
# builds that graph over SRC_DIR (default: src/ beside this script's folder), recursively,
# and fails on
#   - a cycle: each one found is printed as a chain of modules;
#   - a file outside SRC_DIR/cli/ that includes a header of SRC_DIR/cli/ (the command
#     line sits on top: nothing below it may know it);
#   - a header without a .c of its name: one header per .c file, declaring what that file
#     defines (a header that declared several files' functions would stand for one module
#     in the graph while they are several, and hide their cycles).
# Headers that are not in SRC_DIR (the runtime's, the system's) are outside the graph.
# Usage: include-cycles.sh [SRC_DIR]; exit 0 when the rules hold, 1 otherwise.
set -eu
src=${1:-$(dirname "$0")/../src}
[ -d "$src" ] || { echo "include-cycles: no directory $src" >&2; exit 2; }
cd "$src"

# One line per #include "..." of every source file: "<file> <included name>".
files=$(mktemp)
trap 'rm -f "$files"' EXIT
find . -type f \( -name '*.c' -o -name '*.cc' -o -name '*.h' \) | sed 's|^\./||' | sort > "$files"
while IFS= read -r f; do
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
		while IFS= read -r inc; do printf '%s %s\n' "$f" "$inc"; done
done < "$files" | awk -v files="$files" '
function module(path) { sub(/\.(c|cc|h)$/, "", path); return path }
function dir_of(path) { return path ~ /\// ? substr(path, 1, match(path, /\/[^\/]*$/) - 1) : "." }
BEGIN {
	# a header is found by its name: beside the including file first, else the one
	# of that name anywhere in the tree (each folder is an include directory)
	while ((getline line < files) > 0) {
		exists[line] = 1
		listed[++nlisted] = line
		if (line ~ /\.cc?$/) # a C source, or the C++ one behind a C header
			has_c[module(line)] = 1
		base = line; sub(/.*\//, "", base)
		# two headers of one name: the include is ambiguous and left out of the graph
		both = (base in by_name) ? by_name[base] " " line : line
		by_name[base] = both
	}
}
{
	file = $1; inc = $2
	d = dir_of(file)
	target = ""
	if ((d == "." ? inc : d "/" inc) in exists)
		target = d == "." ? inc : d "/" inc
	else if (inc in by_name)
		target = by_name[inc]
	if (target == "" || target ~ / /)
		next
	if (target ~ /^cli\// && file !~ /^cli\//) {
		printf "include-cycles: %s includes %s: nothing outside cli/ may include the " \
		       "command line\n", file, target
		bad = 1
	}
	from = module(file); to = module(target)
	if (from == to || ((from, to) in edge))
		next
	edge[from, to] = 1
	nout[from]++
	out[from, nout[from]] = to
	node[from] = 1; node[to] = 1
}
# Depth-first search; a grey module met again closes a cycle, printed from the stack.
function visit(v,    i, w, k, chain) {
	colour[v] = 1
	stack[++depth] = v
	for (i = 1; i <= nout[v]; i++) {
		w = out[v, i]
		if (colour[w] == 1) {
			chain = w
			for (k = depth; k >= 1 && stack[k] != w; k--)
				;
			for (k = k + 1; k <= depth; k++)
				chain = chain " -> " stack[k]
			printf "include-cycles: cycle: %s -> %s\n", chain, w
			bad = 1
		} else if (colour[w] == 0)
			visit(w)
	}
	depth--
	colour[v] = 2
}
END {
	for (i = 1; i <= nlisted; i++)
		if ((f = listed[i]) ~ /\.h$/ && !(substr(f, 1, length(f) - 2) in has_c)) {
			printf "include-cycles: %s has no .c of its own: one header per .c file\n", f
			bad = 1
		}
	n = 0
	for (v in node) sorted[++n] = v
	# a fixed order, so that the same tree prints the same cycles
	for (i = 2; i <= n; i++) {
		v = sorted[i]
		for (j = i - 1; j >= 1 && sorted[j] > v; j--)
			sorted[j + 1] = sorted[j]
		sorted[j + 1] = v
	}
	for (i = 1; i <= n; i++)
		if (colour[sorted[i]] == 0)
			visit(sorted[i])
	if (bad)
		exit 1
	printf "include-cycles: %d modules, %d includes between them, no cycle\n", n, nedges()
}
function nedges(    k, c) { c = 0; for (k in edge) c++; return c }
'
