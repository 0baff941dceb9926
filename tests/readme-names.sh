#!/bin/sh
# The README and the pages of docs/ name source files, functions and each other so that a
# reader can find them. Every path under src/, runtime/, gpu/, tools/ or conf/ they name
# must exist (a * in it must match a file); every function written as `name()` must be
# defined in src/, runtime/ or gpu/; every link must be relative and lead to a file that
# exists and, with #anchor, to a heading of that file.
# Usage: readme-names.sh ROOT [DOC...]   (default DOCs: ROOT/README.md ROOT/docs/*.md)
# Exit 0: all found; 1: something is missing; 2: nothing to check.
set -eu
root=$1
shift
[ $# -gt 0 ] || set -- "$root"/README.md "$root"/docs/*.md
bad=0
say() { echo "$*"; bad=1; }

# The slugs of a Markdown file's headings, as GitHub makes anchors of them: lower case,
# punctuation dropped (hyphens and underscores kept), each space a hyphen. Headings inside
# fenced code blocks are not headings.
anchors() {
	awk '/^```/ { code = !code; next }
	     !code && /^#+ / {
		h = tolower($0); sub(/^#+ +/, "", h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
		print h
	     }' "$1"
}

# Paths and functions, over every document.
paths=$(cat "$@" | grep -o '\(^\|[^A-Za-z0-9_./<-]\)\(src\|runtime\|gpu\|tools\|conf\)/[A-Za-z0-9_./*-]*' |
	sed 's/^[^srgtc]//; s/[.,]*$//' | sort -u)
[ -n "$paths" ] || { echo "the documents name no path under src/, runtime/, gpu/, tools/ or conf/"; exit 2; }
for p in $paths; do
	found=0
	for f in "$root"/$p; do # a glob such as src/cli/cmd_*.c exists when it matches a file
		[ -e "$f" ] && found=1
	done
	[ "$found" -eq 1 ] || say "the documents name $p, which does not exist"
done
funcs=$(cat "$@" | grep -o '`[A-Za-z_][A-Za-z0-9_]*()`' | tr -d '`()' | sort -u)
for f in $funcs; do
	# a definition or declaration: a line that starts at column 0 and holds name(
	grep -rq --include='*.[ch]' --include='*.cu' "^[A-Za-z].*[^A-Za-z0-9_]$f(" \
		"$root"/src "$root"/runtime "$root"/gpu ||
		say "the documents name the function $f(), defined nowhere in src/, runtime/ or gpu/"
done

# Links, document by document: relative to the document's own directory.
nlinks=0
for doc in "$@"; do
	dir=$(dirname "$doc")
	for link in $(grep -o '](\([^) ]*\))' "$doc" | sed 's/^](//; s/)$//'); do
		nlinks=$((nlinks + 1))
		case "$link" in
		http://* | https://* | mailto:*) continue ;;
		/* | *://*) say "$doc: the link $link is not relative"; continue ;;
		esac
		file=${link%%#*}
		target=$doc
		[ -z "$file" ] || target="$dir/$file"
		if [ ! -e "$target" ]; then
			say "$doc: the link $link leads to no file"
			continue
		fi
		case "$link" in
		*'#'*)
			anchor=${link#*#}
			anchors "$target" | grep -qx -- "$anchor" ||
				say "$doc: the link $link names no heading of $target"
			;;
		esac
	done
done

[ "$bad" -eq 0 ] && echo "$# documents: $(echo $paths | wc -w) paths, $(echo $funcs | wc -w) functions" \
	"and $nlinks links, all found"
exit "$bad"
