#!/bin/sh
# compare must never change the training trajectory: a session that compares under
# every normalization between its steps (and once before the first step, on the next
# window) reaches the same losses, gradient norms and test loss as a session that only
# steps. A session that switches to a wrong mode must drift from them.
set -eu

fail() { echo "FAIL: $*"; for f in a.txt b.txt c.txt; do [ -f $f ] && { echo "--- $f"; cat $f; }; done; exit 1; }

printf 'compare\ncompare mean_of_means\nstep\ncompare\ncompare mean_of_means\ncompare microbatch_mean\ncompare double_accumulation\nstep\ncompare\nstep\neval\n' \
	| "$DDPTOK" "$CONF/tiny.ini" inspect > a.txt 2>&1 || fail "session a exited with $?"
printf 'step 3\neval\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > b.txt 2>&1 || fail "session b exited with $?"
printf 'mode double_accumulation\nstep 3\neval\n' | "$DDPTOK" "$CONF/tiny.ini" inspect > c.txt 2>&1 \
	|| fail "session c exited with $?"

# the compare before any step looked at the next window without consuming it
grep -q 'compare: window 1 (the next one; nothing stepped yet)' a.txt || fail "first compare"
[ "$(grep -c 'compare: mode global_token: 0 of ' a.txt)" = 3 ] || fail "global_token compares"

steps() { grep -o 'step [0-9]*: window .*' "$1"; }
evals() { grep -o 'eval: .*' "$1"; }
[ "$(steps a.txt | wc -l)" = 3 ] || fail "session a did not run 3 steps"
[ "$(steps a.txt)" = "$(steps b.txt)" ] || fail "compare changed the trajectory (steps differ)"
[ -n "$(evals a.txt)" ] && [ "$(evals a.txt)" = "$(evals b.txt)" ] \
	|| fail "compare changed the parameters (eval differs)"

# the first window of c is the same (the same parameters, the same window: same loss)
# but its update differs, so later steps and the test loss drift
l1() { grep -o 'step 1: window 1, loss [0-9.]*' "$1"; }
[ "$(l1 b.txt)" = "$(l1 c.txt)" ] || fail "step 1 loss should not depend on the mode"
[ "$(grep -o 'step 3: window 3, loss [0-9.]*' b.txt)" != "$(grep -o 'step 3: window 3, loss [0-9.]*' c.txt)" ] \
	|| fail "a wrong mode did not change the trajectory"
[ "$(evals b.txt)" != "$(evals c.txt)" ] || fail "a wrong mode did not change the test loss"
echo ok
