#!/bin/sh
# call-cycles.py must pass a tree whose files and folders call one another one way only,
# and refuse a cycle of files, a cycle of folders and a call up the given layer order,
# naming them: on a small tree of objects compiled here, then on the program's own objects
# with one planted object in src/data/ that calls the trainer (data/ -> train/ while
# train/ calls data/).
# Usage: call-cycles-caught.sh CHECK BUILD_DIR SOURCE_ROOT
set -eu
check=$1
build=$2
root=$(cd "$3" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}

# compile SRC (relative to $tmp/small) into an object and list it in the tree's
# compile_commands.json
entries=""
add() {
	mkdir -p "$tmp/small/obj"
	obj="obj/$(echo "$1" | tr / _).o"
	"$cc" -c -o "$tmp/small/$obj" "$tmp/small/$1"
	entries="$entries${entries:+,}{\"directory\": \"$tmp/small\", \"file\": \"$1\", \"output\": \"$obj\"}"
	printf '[%s]\n' "$entries" > "$tmp/small/compile_commands.json"
}
write() { mkdir -p "$(dirname "$tmp/small/$1")"; printf '%s\n' "$2" > "$tmp/small/$1"; }

# one way: a/one.c -> b/two.c
write src/a/one.c 'int two(void); int one(void) { return two(); }'
write src/b/two.c 'int two(void) { return 2; }'
add src/a/one.c
add src/b/two.c
python3 "$check" "$tmp/small" --root "$tmp/small" > "$tmp/out" ||
	{ echo "a tree without a cycle is refused:"; cat "$tmp/out"; exit 1; }

# a cycle of files: two.c calls one()
write src/b/two.c 'int one(void); int two(void) { return 2; } int back(void) { return one(); }'
add src/b/two.c
if python3 "$check" "$tmp/small" --root "$tmp/small" > "$tmp/out"; then
	echo "a cycle of two files was not caught"; exit 1
fi
grep -q 'file cycle: src/a/one.c -> src/b/two.c -> src/a/one.c' "$tmp/out" ||
	{ echo "the file cycle is not named:"; cat "$tmp/out"; exit 1; }

# a cycle of folders without a cycle of files: a/one -> b/two, b/three -> a/four
write src/b/two.c 'int two(void) { return 2; }'
write src/b/three.c 'int four(void); int three(void) { return four(); }'
write src/a/four.c 'int four(void) { return 4; }'
add src/b/two.c
add src/b/three.c
add src/a/four.c
if python3 "$check" "$tmp/small" --root "$tmp/small" > "$tmp/out"; then
	echo "a cycle of two folders was not caught"; exit 1
fi
grep -q 'folder cycle: src/a -> src/b -> src/a' "$tmp/out" ||
	{ echo "the folder cycle is not named:"; cat "$tmp/out"; exit 1; }
grep -q 'file cycle' "$tmp/out" && { echo "a file cycle was reported where none is:"; cat "$tmp/out"; exit 1; }

# a call to a layer above: a/one -> b/two alone is fine with b below a, refused with b above
rm "$tmp/small/obj/src_b_three.c.o" "$tmp/small/obj/src_a_four.c.o"
entries=""
add src/a/one.c
add src/b/two.c
python3 "$check" "$tmp/small" --root "$tmp/small" --order src/b,src/a > "$tmp/out" ||
	{ echo "a call down the layers is refused:"; cat "$tmp/out"; exit 1; }
if python3 "$check" "$tmp/small" --root "$tmp/small" --order src/a,src/b > "$tmp/out"; then
	echo "a call up the layers was not caught"; exit 1
fi
grep -q 'src/a calls src/b, a layer above it: two (one.c)' "$tmp/out" ||
	{ echo "the upward call is not named:"; cat "$tmp/out"; exit 1; }

# the program's objects, as built, hold no cycle ...
python3 "$check" "$build" --root "$root" > "$tmp/out" ||
	{ echo "the program's own objects are refused:"; cat "$tmp/out"; exit 1; }
# ... and with a planted object in src/data/ calling the trainer, the check fails
mkdir -p "$tmp/planted"
printf 'struct trainer; int trainer_step(struct trainer *t); int planted(void) { return trainer_step(0); }\n' \
	> "$tmp/planted/planted.c"
"$cc" -c -o "$tmp/planted/planted.o" "$tmp/planted/planted.c"
python3 - "$build/compile_commands.json" "$tmp/planted/compile_commands.json" "$root" "$tmp/planted" <<'PY'
import json, sys
entries = json.load(open(sys.argv[1]))
entries.append({"directory": sys.argv[4], "file": sys.argv[3] + "/src/data/planted.c",
                "output": "planted.o"})
json.dump(entries, open(sys.argv[2], "w"))
PY
if python3 "$check" "$tmp/planted" --root "$root" > "$tmp/out"; then
	echo "data/ calling train/ was not caught"; exit 1
fi
grep -q 'folder cycle: .*src/data -> src/train' "$tmp/out" ||
	{ echo "the cycle through src/data -> src/train is not named:"; cat "$tmp/out"; exit 1; }
grep -q 'trainer_step (planted.c)' "$tmp/out" ||
	{ echo "the planted call is not named:"; cat "$tmp/out"; exit 1; }
echo "the file cycle, the folder cycle and the planted call of data/ into train/ were caught"
