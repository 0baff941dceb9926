#!/bin/sh
# inspect driven through stdin on tiny.ini (W = 2, length-band plan, accumulation 2):
# window shows N as the sum of the per-rank tokens and does not consume the window, step
# reports loss/N/grad norm, grad and compare work, compare under global_token passes
# while mean_of_means (token counts are unequal between the ranks) fails, for the whole
# window and for each rank's contribution (compare --rank R), in the default mode and in
# exact mode; mistakes in commands are reported and the session goes on to its end, where
# a script that met a mistake exits with the first one's status (2, usage) and one that
# met none with 0.
set -eu

fail() { echo "FAIL: $*"; echo "--- output:"; cat out.txt; echo "--- stderr:"; cat err.txt; exit 1; }

rc=0
printf 'window\nstep 2\ngrad\ngrad w1 --rank 1\ncompare\ncompare mean_of_means\ncompare --rank 0\ncompare --rank 1\ncompare mean_of_means --rank 0\ncompare --rank 1 mean_of_means\nmode mean_of_means\nwindow\nstep\nbogus\nstep x\nstep 0\ngrad nosuch\ngrad --rank 2\ngrad w1[9999999:]\ngrad w1[5:3]\ncompare nosuch\ncompare --rank 2\nmode nosuch\nhelp\nhelp compare\neval\nquit\nstep\n' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect > out.txt 2> err.txt || rc=$?
[ "$rc" -eq 2 ] || fail "inspect exited with $rc, expected 2 (a script with mistakes)"
grep -q "ddptok-run: usage error: inspect: 10 commands of the script failed; the first, on line 14: unknown command 'bogus'" err.txt ||
	fail "the end of the script does not count its mistakes or name the first"

has() { grep -q -- "$1" out.txt || fail "missing: $1"; }

# what the shared code prints for inspect says inspect (the corpus it prepared), not train
has "^inspect: corpus prepared in outputs/tiny/corpus"
! grep -q "^train:" out.txt || fail "inspect's messages say train"

# window: N equals the sum of the per-rank tokens, and of the per-microbatch tokens
n=$(sed -n 's/.*window: N = \([0-9]*\) .*/\1/p' out.txt | head -n 1)
[ -n "$n" ] || fail "window printed no N"
sum=$(sed -n '1,/window: N = /p' out.txt | sed -n 's/.*window: rank [0-9]*: \([0-9]*\) supervised tokens$/\1/p' \
	| awk '{ s += $1 } END { print s + 0 }')
[ "$n" = "$sum" ] || fail "window: N = $n but the ranks sum to $sum"
msum=$(sed -n '1,/window: N = /p' out.txt | sed -n 's/.*window: rank [0-9]* microbatch [0-9]*: .*, \([0-9]*\) supervised tokens, c = .*/\1/p' \
	| awk '{ s += $1 } END { print s + 0 }')
[ "$n" = "$msum" ] || fail "window: N = $n but the microbatches sum to $msum"
nranks=$(sed -n '1,/window: N = /p' out.txt | grep -c 'window: rank [0-9]*: [0-9]* supervised tokens$')
[ "$nranks" = 2 ] || fail "window: expected 2 ranks, got $nranks"
# the per-rank counts are unequal on this window (that is what makes mean_of_means wrong)
uniq=$(sed -n '1,/window: N = /p' out.txt | sed -n 's/.*window: rank [0-9]*: \([0-9]*\) supervised tokens$/\1/p' | sort -u | wc -l)
[ "$uniq" = 2 ] || fail "window: the two ranks hold the same number of tokens"
has 'window: factor under global_token: c = k / N, with k = 2 because reduce = avg'
has 'every token weighs 1 / N'

# window did not consume it: step 1 runs the window it showed, with the same N
grep -q "step 1: window 1, loss [0-9.]* (global token mean), N = $n, grad norm " out.txt \
	|| fail "step 1 is not the window shown (N = $n)"
has 'step 2: window 2, loss '
has 'step 3: window 3, loss .* \[mode mean_of_means\]'

# grad: reduced and local
has 'grad: reduced gradient of window 2 (step 2, mode global_token, reduce avg)'
for t in embed w1 b1 w2 b2; do
	grep -q "grad:   $t " out.txt || fail "grad: no line for $t"
done
has 'grad:   total: '
has 'grad: local gradient of rank 1 before the reduce, window 2'

# compare: the correct normalization passes, the negative control is caught
has 'compare: mode global_token: 0 of [0-9]* components outside tolerance'
grep -q 'compare: mode mean_of_means: [1-9][0-9]* of [0-9]* components outside tolerance (atol [^)]*): FAIL' out.txt \
	|| fail "compare mean_of_means found no component outside tolerance"
has 'compare: the 5 worst components'
has 'compare: max abs error [0-9.e+-]*, max rel error [0-9.e+-]* (relative errors are largest where the reference is near 0; the verdict below uses atol + rtol |ref|)'
grep -q 'compare:   \(embed\|w1\|b1\|w2\|b2\)\[[0-9]*\(, [0-9]*\)*\] .*  outside$' out.txt \
	|| fail "compare: worst components lack name[row, col] or the outside mark"

# compare --rank R: each rank's contribution matches its share of the reference under
# global_token, and neither does under mean_of_means (the ranks hold unequal counts); the
# ranks' shares of the reference loss add up to the window's loss. $1: how the heading
# says the contribution is divided; $2: which session.
ranks_match_shares() {
	for r in 0 1; do
		grep -q "compare: rank $r's contribution under mode global_token (its local gradient / $1) against its share" out.txt ||
			fail "$2: compare --rank $r: no heading"
		has "compare: mode global_token, rank $r: 0 of [0-9]* components outside tolerance (atol [^)]*): pass"
		grep -q "compare: mode mean_of_means, rank $r: [1-9][0-9]* of [0-9]* components outside tolerance (atol [^)]*): FAIL" out.txt ||
			fail "$2: compare mean_of_means --rank $r found no component outside tolerance"
	done
	python3 - <<'PY' || fail "$2: the ranks' shares of the reference loss do not add up"
import re
t = open("out.txt").read()
total = float(re.search(r"compare: loss [0-9.]+ \(global token mean; reference ([0-9.]+)\)", t).group(1))
shares = [float(x) for x in re.findall(r"compare: rank \d's share of the reference loss: ([0-9.]+)", t)[:2]]
assert len(shares) == 2 and abs(sum(shares) - total) < 2e-6, (shares, total)
PY
}
ranks_match_shares 'W, as reduce avg divides' 'tiny.ini'

# mode switch shows in window's factor formula
has 'mode: mean_of_means for the next windows (was global_token)'
has 'window: factor under mean_of_means: c = k / (W \* N_rank)'
has 'this mode weighs tokens unequally on this window'

# errors keep the session alive
has "error: unknown command 'bogus'"
has "error: step: 'x' is not a number of windows"
has "error: step: '0' is not a number of windows"
has "error: grad: unknown parameter 'nosuch'"
has 'error: grad: rank 2 is out of range (W = 2: ranks 0..1)'
has "error: grad: '9999999:' is not within the tensor's components 0\.\.[1-9][0-9]*$"
has "error: grad: '5:3' is an empty range (i:j runs from i to j - 1)"
has "error: compare: unknown normalization 'nosuch'"
has 'error: compare: rank 2 is out of range (W = 2: ranks 0..1)'
has "error: mode: unknown normalization 'nosuch'"

# help, eval
has 'commands (help CMD for details):'
has 'compare \[MODE\] \[--rank R\]: reduced gradient (or rank R.s part) under MODE vs the reference'
grep -q 'eval: test split after 3 updates: loss [0-9.]* (global token mean over [1-9][0-9]* supervised tokens of 32 sequences), accuracy 0\.[0-9]* ([0-9]* / [0-9]* tokens)' out.txt \
	|| fail "eval line"

# quit ended the session: the step after it never ran
if grep -q 'step 4:' out.txt; then fail "a command after quit ran"; fi

# a script without a mistake ends with status 0
printf 'step\ngrad w1 3\ncompare --rank 1\nquit\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > ok.txt 2>&1 ||
	fail "a script without mistakes exited with $?: $(cat ok.txt)"

# a line holding a NUL byte is refused on its own: the next line still runs (and the
# script fails at its end)
rc=0
printf 'window\n\000x\nhelp\nquit\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > nul.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "session with a NUL byte exited with $rc, expected 2"
grep -q 'error: line holds a NUL byte, ignored' nul.txt || fail "NUL byte not reported"
grep -q 'commands (help CMD for details):' nul.txt || fail "the line after a NUL byte was lost"

# the line limit and its message agree: a line of 4,095 characters runs, one of 4,096 is
# refused naming 4,095 (the newline is not counted)
rc=0
python3 -c 'import sys; sys.stdout.write("mode global_token" + " " * 4078 + "\nmode mean_of_means" + " " * 4078 + "\nquit\n")' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect > long.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "session with a long line exited with $rc, expected 2"
grep -q 'mode: global_token for the next windows' long.txt || fail "a line of 4,095 characters did not run: $(cat long.txt)"
grep -q 'error: line longer than 4095 characters, ignored' long.txt || fail "a line of 4,096 characters is not refused as longer than 4,095: $(cat long.txt)"
if grep -q 'mode: mean_of_means' long.txt; then fail "a line of 4,096 characters ran"; fi
# a misspelled command is answered with the nearest one
rc=0
printf 'stpe\nhelp stpe\nquit\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > out.txt 2> err.txt || rc=$?
[ "$rc" -eq 2 ] || fail "a misspelled command: exit $rc"
has "error: unknown command 'stpe' (did you mean 'step'?)"
has "error: help: unknown command 'stpe' (did you mean 'step'?)"

# the same in exact mode (exact.ini: W = 2, K = 4, reduce avg): a rank's contribution is
# its subtree of K / W shards divided by K, and its share of the reference is the tree of
# those shards alone (not all K)
printf 'step\ncompare\ncompare --rank 0\ncompare --rank 1\ncompare mean_of_means --rank 0\ncompare mean_of_means --rank 1\nquit\n' \
	| "$DDPTOK" "$CONF/exact.ini" inspect > out.txt 2> err.txt || fail "the exact-mode session exited with $?"
has 'compare: mode global_token: 0 of [0-9]* components outside tolerance'
ranks_match_shares "K, as exact mode's tree divides" 'exact.ini'
echo ok
