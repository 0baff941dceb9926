#!/bin/sh
# core-includes.sh must fail when a core file includes a CLI header: it runs on a copy of
# src/ where train.c (core) includes app.h (CLI), and on one where a core header includes
# cli_signals.h.
set -eu
check=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/src"
sh "$check" "$tmp/src" > /dev/null || { echo "the clean tree is refused"; exit 1; }
printf '#include "app.h"\n' >> "$tmp/src/train.c"
if sh "$check" "$tmp/src"; then echo "train.c including app.h was not caught"; exit 1; fi
cp "$src/train.c" "$tmp/src/train.c"
printf '#  include <cli_signals.h>\n' >> "$tmp/src/engine.h"
if sh "$check" "$tmp/src"; then echo "engine.h including cli_signals.h was not caught"; exit 1; fi
echo "both inclusions caught"
