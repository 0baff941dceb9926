# The configuration reference in README.md is the output of `ddptok-run --keys`, which
# prints the key table of the code: fail when they drift apart.
set -eu
readme="$CONF/../README.md"
sed -n '/<!-- keys:begin -->/,/<!-- keys:end -->/p' "$readme" | sed '1d;$d' > readme-table.md
"$DDPTOK" --keys > code-table.md
if ! diff -u code-table.md readme-table.md; then
	echo "FAIL: README.md's configuration table differs from 'ddptok-run --keys' (regenerate it)"
	exit 1
fi
[ "$(wc -l < code-table.md)" -gt 30 ]
