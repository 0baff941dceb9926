# Every configuration key and shipped file is documented: the README sends the reader to
# docs/configuration.md, whose key table must be what `ddptok-run --keys` prints (the key
# table of the code). Fails when the README loses the link or the two tables drift apart;
# the comparison is also run on a copy of the page with one key left out, which it must
# refuse, so that the check is seen to fail.
set -eu
root="$CONF/.."
readme="$root/README.md"
page="$root/docs/configuration.md"

grep -q '](docs/configuration.md\(#[a-z0-9-]*\)\?)' "$readme" || {
	echo "FAIL: README.md does not link docs/configuration.md"; exit 1; }

"$DDPTOK" --keys > code-table.md
[ "$(wc -l < code-table.md)" -gt 30 ]

# the table between the page's keys markers, compared with the code's
same_table() { # page
	sed -n '/<!-- keys:begin -->/,/<!-- keys:end -->/p' "$1" | sed '1d;$d' > page-table.md
	diff -u code-table.md page-table.md
}
if ! same_table "$page"; then
	echo "FAIL: docs/configuration.md's key table differs from 'ddptok-run --keys' (regenerate it)"
	exit 1
fi

# one key row (the train.lr one) left out of a copy: the comparison must see it
grep -q '^| `train.lr` |' "$page"
grep -v '^| `train.lr` |' "$page" > page-without-a-key.md
if same_table page-without-a-key.md > /dev/null; then
	echo "FAIL: a key missing from the page was not caught"
	exit 1
fi
# every shipped configuration has a row in the page's table of shipped files
for f in "$root"/conf/*.ini; do
	grep -q "^| \`$(basename "$f")\` |" "$page" || {
		echo "FAIL: docs/configuration.md's table of shipped files lacks $(basename "$f")"; exit 1; }
done
echo "docs/configuration.md documents all $(($(wc -l < code-table.md) - 2)) keys"
