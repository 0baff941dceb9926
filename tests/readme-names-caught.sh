#!/bin/sh
# readme-names.sh must fail when the README names a file or a function that does not
# exist: it runs on copies of the README with one wrong path and one wrong function.
set -eu
check=$1
readme=$2
root=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$check" "$readme" "$root" > /dev/null || { echo "the README as it is is refused"; exit 1; }
cp "$readme" "$tmp/README.md"
printf 'The sampler lives in `src/sampler_missing.c`.\n' >> "$tmp/README.md"
if sh "$check" "$tmp/README.md" "$root"; then echo "a wrong path was not caught"; exit 1; fi
cp "$readme" "$tmp/README.md"
printf 'Each window goes through `engine_window_missing()`.\n' >> "$tmp/README.md"
if sh "$check" "$tmp/README.md" "$root"; then echo "a wrong function was not caught"; exit 1; fi
echo "both wrong names caught"
