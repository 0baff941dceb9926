# sample: ids generated from a trained gpt checkpoint. Greedy sampling (temperature 0)
# gives the same ids on every run and whatever the seed; a draw with temperature > 0
# gives the same ids for the same seed and other ids for another seed; the ids printed
# are written to sample.json; bad options, a prompt id outside the model and a request
# past model.context are refused.
set -eu
. "$E2E/json.sh"
G="$CONF/gpt-tiny.ini"
small="--set model.layers=2 --set model.width=32 --set data.train=32 --set train.updates=2
	--set devices.world=1"
ids() { # the generated ids of a sample run (its last line)
	# shellcheck disable=SC2086 # the word splitting of $small is wanted
	"$DDPTOK" "$G" sample $small "$@" | sed -n 's/^sample: \([0-9][0-9 ]*\)$/\1/p'
}
# shellcheck disable=SC2086
"$DDPTOK" "$G" train --continuous $small > /dev/null
g1=$(ids --prompt "5 6 7" --tokens 12 --temperature 0 --seed 1)
g2=$(ids --prompt "5 6 7" --tokens 12 --temperature 0 --seed 2)
[ -n "$g1" ] && [ "$(echo "$g1" | wc -w)" = 12 ] || { echo "FAIL: greedy gave '$g1'"; exit 1; }
[ "$g1" = "$g2" ] || { echo "FAIL: greedy differs: '$g1' / '$g2'"; exit 1; }
jcheck outputs/gpt-tiny/sample.json '" ".join(map(str, d["tokens"])) == "'"$g1"'" and d["prompt"] == [5, 6, 7]'
a1=$(ids --prompt "5 6 7" --tokens 12 --temperature 1 --seed 1)
a2=$(ids --prompt "5 6 7" --tokens 12 --temperature 1 --seed 1)
b1=$(ids --prompt "5 6 7" --tokens 12 --temperature 1 --seed 2)
[ "$a1" = "$a2" ] || { echo "FAIL: same seed, other ids: '$a1' / '$a2'"; exit 1; }
[ "$a1" != "$b1" ] || { echo "FAIL: seeds 1 and 2 gave the same ids '$a1'"; exit 1; }
[ "$a1" != "$g1" ] || { echo "FAIL: temperature 1 gave the greedy ids"; exit 1; }
# top-k 1 is greedy; a prompt from a file is the same prompt
[ "$(ids --prompt "5 6 7" --tokens 12 --top-k 1 --seed 9)" = "$g1" ]
printf '5\n6 7\n' > prompt.txt
[ "$(ids --prompt-file prompt.txt --tokens 12 --temperature 0)" = "$g1" ]
# refusals
# shellcheck disable=SC2086
for bad in "--temperature -1" "--tokens x" "--prompt 1" "--prompt 512" "--top-p 0" \
	"--repetition-penalty 0" "--stop-id 3"; do
	rc=0
	"$DDPTOK" "$G" sample $small $bad > /dev/null 2> err.txt || rc=$?
	[ "$rc" = 2 ] || [ "$rc" = 3 ] || { cat err.txt; echo "FAIL: sample $bad: exit $rc"; exit 1; }
	grep -q "sample: " err.txt || { cat err.txt; exit 1; }
done
# past model.context (128) the window slides instead of refusing; the cache of keys and
# values gives the ids the whole window run for each token gives (greedy), and says its speed
long_ids() { ids --prompt 5 --tokens 300 --temperature 0 "$@"; }
c=$(long_ids)
[ "$(echo "$c" | wc -w)" = 300 ] || { echo "FAIL: 300 tokens past the context gave '$c'"; exit 1; }
[ "$c" = "$(long_ids --no-cache)" ] || { echo "FAIL: the cache changed the greedy ids"; exit 1; }
# shellcheck disable=SC2086
"$DDPTOK" "$G" sample $small --prompt 5 --tokens 300 > speed.txt
grep -q "^sample: generated 300 tokens in [0-9.]* s ([0-9.]* tokens/s, cache of keys and values); the window slid past model.context$" speed.txt ||
	{ cat speed.txt; echo "FAIL: no speed line"; exit 1; }
# --stop-id: the text ends before the first greedy id that is it
first=$(echo "$g1" | cut -d' ' -f3)
# shellcheck disable=SC2086
"$DDPTOK" "$G" sample $small --prompt "5 6 7" --tokens 12 --temperature 0 --stop-id "$first" > stop.txt
grep -q "ended at the end-of-text id" stop.txt || { cat stop.txt; echo "FAIL: --stop-id"; exit 1; }
# the message names the whole word and the range in whole numbers
refused() { # refused PATTERN OPTION VALUE
	rc=0
	# shellcheck disable=SC2086
	"$DDPTOK" "$G" sample $small "$2" "$3" > /dev/null 2> err.txt || rc=$?
	[ "$rc" = 2 ] && grep -q -- "$1" err.txt || { cat err.txt; echo "FAIL: sample $2 '$3'"; exit 1; }
}
refused "'5,6' is not an id of the model (user ids 4 .. 511)" --prompt "5,6"
refused "'6x' is not an id" --prompt "5 6x 7"
refused "expected a number in 0 .. 1048576$" --tokens -1
refused "expected a number in 0 .. 1000000$" --temperature 2e6
# a long generation prints every id, whole, on its one line (longer than 4 KiB)
long="--set model.layers=1 --set model.width=16 --set model.heads=1 --set model.context=1100
	--set data.train=32 --set train.updates=1 --set devices.world=1 --set run.outputs=long-out
	--set run.artifacts=long-art"
# shellcheck disable=SC2086
"$DDPTOK" "$G" train --continuous $long > /dev/null
# shellcheck disable=SC2086
"$DDPTOK" "$G" sample $long --prompt 5 --tokens 1099 > long.txt
line=$(sed -n 's/^sample: \([0-9][0-9 ]*\)$/\1/p' long.txt)
[ "${#line}" -gt 4096 ] || { echo "FAIL: the long sample's line is ${#line} characters"; exit 1; }
jcheck long-out/sample.json '" ".join(map(str, d["tokens"])) == "'"$line"'"'
echo "sample: ok"
