#!/bin/sh
# include-cycles.sh must hold a tree whose modules include one another one way only, and
# refuse a cycle, a header without its .c, or a command-line header included from below:
# it runs on a small tree made here, then on copies of src/ with one cycle and one include
# of cli/ added.
set -eu
check=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a clean tree: a.c -> b.h, cli/main.c -> a.h
mkdir -p "$tmp/small/cli"
printf '#include "b.h"\n' > "$tmp/small/a.c"
printf '#include "a.h"\n' > "$tmp/small/cli/main.c"
: > "$tmp/small/a.h"
: > "$tmp/small/b.h"
: > "$tmp/small/b.c"
sh "$check" "$tmp/small" > /dev/null || { echo "a tree without a cycle is refused"; exit 1; }
printf '#include "a.h"\n' > "$tmp/small/b.c"
if sh "$check" "$tmp/small" > "$tmp/out"; then echo "a cycle of two was not caught"; exit 1; fi
grep -q 'cycle: a -> b -> a' "$tmp/out" || { echo "the cycle is not named:"; cat "$tmp/out"; exit 1; }
printf '#include "b.h"\n' > "$tmp/small/b.c"
: > "$tmp/small/c.h"
if sh "$check" "$tmp/small" > "$tmp/out"; then echo "a header without its .c was not caught"; exit 1; fi
grep -q 'c.h has no .c' "$tmp/out" || { echo "c.h is not named:"; cat "$tmp/out"; exit 1; }
rm "$tmp/small/c.h"

# the program's sources with a cycle through the core: the sampler includes the trainer,
# which reaches the sampler through run.h
cp -R "$src" "$tmp/cycle"
printf '#include "trainer.h"\n' >> "$tmp/cycle/plan/sampler.c"
if sh "$check" "$tmp/cycle" > "$tmp/out"; then echo "sampler -> trainer was not caught"; exit 1; fi
grep -q 'cycle: .*plan/sampler -> train/trainer' "$tmp/out" ||
	{ echo "the cycle through sampler -> trainer is not named:"; cat "$tmp/out"; exit 1; }

# ... and with the core including a header of the command line
cp -R "$src" "$tmp/cli"
printf '#include "app.h"\n' >> "$tmp/cli/plan/norm.c"
if sh "$check" "$tmp/cli" > "$tmp/out"; then echo "plan/norm.c -> cli/app.h was not caught"; exit 1; fi
grep -q 'plan/norm.c includes cli/app.h' "$tmp/out" ||
	{ echo "the include of cli/app.h is not named:"; cat "$tmp/out"; exit 1; }
echo "the cycles, the header without its .c and the include of cli/ were caught"
