#!/bin/sh
# readme-names.sh must fail when a document names a file or a function that does not exist,
# or links somewhere that is not there: it runs on copies of README.md and docs/, each time
# with one wrong name or link added.
# Usage: readme-names-caught.sh CHECK ROOT
set -eu
check=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$check" "$root" > /dev/null || { echo "the documents as they are are refused"; exit 1; }

# copy README.md and docs/ afresh, append LINE to FILE (relative to the copy), and expect
# the check to refuse the copy
refused() { # what, file, line
	rm -rf "$tmp/copy"
	mkdir -p "$tmp/copy/docs"
	cp "$root/README.md" "$tmp/copy/"
	cp "$root"/docs/*.md "$tmp/copy/docs/"
	printf '%s\n' "$3" >> "$tmp/copy/$2"
	if sh "$check" "$root" "$tmp/copy/README.md" "$tmp/copy"/docs/*.md > "$tmp/out"; then
		echo "$1 was not caught"
		exit 1
	fi
	grep -q . "$tmp/out" || { echo "$1 was refused without a word"; exit 1; }
}
refused "a wrong path" README.md 'The sampler lives in `src/sampler_missing.c`.'
refused "a wrong path in docs/" docs/architecture.md 'See `src/engine/engine_missing.c`.'
refused "a wrong function" docs/architecture.md 'Each window goes through `engine_window_missing()`.'
refused "a link to a missing file" README.md 'See [the missing page](docs/missing.md).'
refused "a link to a missing heading" README.md 'See [exact mode](docs/exact-mode.md#no-such-heading).'
refused "a link to a missing heading of the page itself" docs/gpus.md 'See [above](#no-such-heading).'
refused "an absolute link" README.md 'See [exact mode](/docs/exact-mode.md).'
echo "wrong paths, functions and links caught"
