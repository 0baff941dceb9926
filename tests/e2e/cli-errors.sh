# Bad input gets a clear message and its documented exit code, and nothing half-written.
set -u
fail=0
expect() { # code, grep pattern for stderr, command...
	want=$1; pat=$2; shift 2
	"$@" >out.txt 2>err.txt
	got=$?
	if [ "$got" -ne "$want" ]; then
		echo "FAIL: '$*' exited $got, expected $want"; cat err.txt; fail=1; return
	fi
	if ! grep -q -- "$pat" err.txt; then
		echo "FAIL: '$*' stderr lacks '$pat':"; cat err.txt; fail=1
	fi
}
cp "$CONF/tiny.ini" ok.ini
# usage errors: 2
expect 2 "usage" "$DDPTOK"
expect 2 "unknown command 'frobnicate'" "$DDPTOK" ok.ini frobnicate
expect 2 "unknown command 'trian' (did you mean 'train'?)" "$DDPTOK" ok.ini trian
expect 2 "unknown command 'train.updates=2' (a key is set with --set train.updates=2)" "$DDPTOK" ok.ini --set train.lr=1 train.updates=2
expect 2 "unknown command 'evalute' (did you mean 'evaluate'?)" "$DDPTOK" help evalute
# help of an unknown command: the error and the list of commands, not the whole help
expect 2 "^  train  " "$DDPTOK" help trian
grep -q "^options:" err.txt out.txt && { echo "FAIL: help trian printed the whole help"; fail=1; }
# the words swapped: the configuration comes first
expect 2 "'train' is a command; the configuration comes first: ddptok-run ok.ini train" "$DDPTOK" train ok.ini
expect 2 "'evaluate' is a command; the configuration comes first: ddptok-run CONFIG evaluate" "$DDPTOK" evaluate
# an option where a value was due is not taken as the value (a file named --set)
expect 2 "option --llmc needs a value, and '--set' is an option (give --llmc FILE)" "$DDPTOK" ok.ini export --llmc --set run.outputs=x out.bin
expect 2 "option --set needs a value, and '--windows' is an option" "$DDPTOK" ok.ini bench --set --windows 2
[ -e ./--set ] && { echo "FAIL: a file named --set was written"; fail=1; }
# options anywhere: before CONFIG, between CONFIG and COMMAND, after COMMAND
"$DDPTOK" --set run.outputs=anywhere ok.ini --set devices.world=1 env --set train.lr=0.5 > env.txt 2>&1 ||
	{ cat env.txt; echo "FAIL: options around CONFIG and COMMAND were refused"; fail=1; }
expect 2 "unknown option '--frobnicate' (see --help)" "$DDPTOK" ok.ini prepare --frobnicate
expect 2 "unknown option '--contiuous' (did you mean '--continuous'?)" "$DDPTOK" ok.ini train --contiuous
expect 2 "unknown option '--resme=x' (did you mean '--resume'?)" "$DDPTOK" ok.ini train --resme=x
expect 2 "option --continuous does not apply to 'prepare'" "$DDPTOK" ok.ini prepare --continuous
expect 2 "option --inject-failure does not apply to 'evaluate'" "$DDPTOK" ok.ini evaluate --inject-failure 0:1
expect 2 "inject-drift applies to a resumed run" "$DDPTOK" ok.ini train --inject-drift
expect 2 "needs a value" "$DDPTOK" ok.ini prepare --set
expect 2 "RANK:WINDOW" "$DDPTOK" ok.ini train --inject-failure x
expect 2 "RANK:WINDOW" "$DDPTOK" ok.ini train --inject-failure 1:99999999999999999999
expect 2 "rank 5 does not exist" "$DDPTOK" ok.ini train --inject-failure 5:1
expect 2 "window from 1" "$DDPTOK" ok.ini train --inject-failure 1:0
expect 3 "ok.ini (value from --set): \[devices\] ids = 0,0,0 names 3 devices" "$DDPTOK" ok.ini env --set devices.ids=0,0,0
# a corpus the sampler cannot plan windows from is refused by prepare already, naming the file
expect 3 "ok.ini: train.batch_size = 2 x train.accumulation = 2" "$DDPTOK" ok.ini prepare --set data.train=5 --set run.outputs=small
[ -e small/corpus/corpus.bin ] && { echo "FAIL: prepare wrote a corpus it refuses"; fail=1; }
# keys of the model that disagree are refused before train writes a corpus or a run
for kv in model.heads=3 model.context=100; do
	expect 3 "gpt-tiny.ini (with --set values): \(model.heads = 3 does not divide model.width = 256\|\[model\] context = 100 is shorter than \[data\] max_len = 128\)" \
		"$DDPTOK" "$CONF/gpt-tiny.ini" train --set "$kv" --set run.outputs=gpt-out --set run.artifacts=gpt-art
	[ -e gpt-out ] || [ -e gpt-art ] && { echo "FAIL: train --set $kv wrote before refusing it"; fail=1; }
done
# written in the file itself, the refusal names the file alone
sed 's/^heads = 4$/heads = 3/' "$CONF/gpt-tiny.ini" > bad-heads.ini
expect 3 "bad-heads.ini: model.heads = 3 does not divide model.width = 256" "$DDPTOK" bad-heads.ini env
# model.init in a form no model reads, or for a model it cannot hold, is refused at load
expect 3 "gpt-tiny.ini (with --set values): \[model\] init = 'foo': expected llmc:FILE" \
	"$DDPTOK" "$CONF/gpt-tiny.ini" train --set model.init=foo --set run.outputs=gpt-out --set run.artifacts=gpt-art
expect 3 "ok.ini (with --set values): \[model\] init = llmc:x.bin: an llm.c model file holds a gpt, and model.kind = window_mlp" \
	"$DDPTOK" ok.ini train --set model.init=llmc:x.bin --set run.outputs=gpt-out --set run.artifacts=gpt-art
[ -e gpt-out ] || [ -e gpt-art ] && { echo "FAIL: train with a bad model.init wrote before refusing it"; fail=1; }
# a new run that fails before its first checkpoint leaves no empty run directory
expect 4 "llm.c model file missing.bin: No such file" "$DDPTOK" "$CONF/gpt-tiny.ini" train \
	--set model.init=llmc:missing.bin --set model.width=32 --set run.outputs=gpt-out --set run.artifacts=gpt-art
[ -e gpt-art ] && { echo "FAIL: the failed run left $(ls -R gpt-art)"; fail=1; }
# (an overflow used to be taken as LONG_MAX windows: bounded so that it cannot hang)
expect 2 "positive integer" timeout 60 "$DDPTOK" ok.ini bench --windows 99999999999999999999
expect 2 "positive integer" "$DDPTOK" ok.ini bench --windows +3
expect 2 "needs a value" "$DDPTOK" ok.ini bench --windows
# an unknown short option is named as such, not by a neighbouring argument
expect 2 "unknown option '-x'" "$DDPTOK" ok.ini prepare -xy
expect 2 "unknown option '-x'" "$DDPTOK" -xy ok.ini prepare
# after "--" everything is positional: CONFIG then COMMAND (and an option name is not one)
expect 2 "unknown command '--set'" "$DDPTOK" ok.ini -- --set
# configuration errors: 3, naming file, section and key
expect 3 "missing.ini" "$DDPTOK" missing.ini prepare
printf '[train]\nlerning_rate = 0.1\n' > unknown-key.ini
expect 3 "lerning_rate" "$DDPTOK" unknown-key.ini prepare
printf '[trian]\nlr = 0.1\n' > unknown-section.ini
expect 3 "\[trian\]: unknown section (did you mean 'train'?)" "$DDPTOK" unknown-section.ini prepare
# two neighbouring letters swapped are one edit away too
printf '[modle]\nhidden = 8\n' > swapped-section.ini
expect 3 "\[modle\]: unknown section (did you mean 'model'?)" "$DDPTOK" swapped-section.ini prepare
expect 3 "\[modle\]: unknown section (did you mean 'model'?)" "$DDPTOK" ok.ini prepare --set modle.hidden=8
printf '[data]\nvocbab = 8\n' > near-key.ini
expect 3 "\[data\] vocbab: unknown key (did you mean 'vocab'?)" "$DDPTOK" near-key.ini prepare
# a key set twice (here through a repeated section) is refused, naming both lines
printf '[data]\ntrain = 70\n[model]\nhidden = 8\n[ DATA ]\nTrain = 7\n' > twice.ini
expect 3 "twice.ini:6: \[data\] train is set a second time (first at line 2)" "$DDPTOK" twice.ini prepare
printf '[train]\nupdates = 010\n' > octal.ini
expect 3 "updates" "$DDPTOK" octal.ini prepare
printf '[train]\nupdates = 3abc\n' > garbage.ini
expect 3 "updates" "$DDPTOK" garbage.ini prepare
printf '[train]\nlr = 0.1x\n' > badfloat.ini
expect 3 "lr" "$DDPTOK" badfloat.ini prepare
printf '[devices]\nworld = 9\n' > range.ini
expect 3 "world" "$DDPTOK" range.ini prepare
printf '[train]\nnormalization = whatever\n' > enum.ini
expect 3 "normalization" "$DDPTOK" enum.ini prepare
# (stop_at < updates is the protocol's rule: train without it trains to updates)
expect 3 "stop_at" "$DDPTOK" ok.ini protocol --set train.stop_at=99
expect 3 "nope" "$DDPTOK" ok.ini prepare --set model.nope=1
expect 3 "--set" "$DDPTOK" ok.ini prepare --set noequals
mkdir unreadable.ini
expect 3 "unreadable.ini" "$DDPTOK" unreadable.ini prepare
# i/o errors: 4 (outputs under a regular file cannot be created)
touch blocker
expect 4 "blocker" "$DDPTOK" ok.ini prepare --set run.outputs=blocker/out
# nothing was written by any failed run
if [ -e outputs ]; then echo "FAIL: a failed run left outputs/"; ls -R outputs; fail=1; fi
# "--" before CONFIG and COMMAND, options before CONFIG
"$DDPTOK" --set run.log_level=quiet -- ok.ini check-loss > /dev/null ||
	{ echo "FAIL: -- CONFIG COMMAND"; fail=1; }
rm -rf outputs
# out of memory: 11, whatever was being allocated (here the corpus, ~1.6 GB of tokens), under
# an address-space limit 300 MB above what the program needs to start: the CUDA libraries of a
# CUDA build alone map about a gigabyte. One BLAS thread, because a BLAS thread pool that
# cannot get its memory spins instead of failing; every run under the limit has a timeout.
# Not under AddressSanitizer or ThreadSanitizer, which reserve far more address space than
# that (ThreadSanitizer's shadow memory alone: terabytes).
if ! ldd "$DDPTOK" 2>/dev/null | grep -q 'lib[at]san'; then
	start_kb=250000
	while [ "$start_kb" -lt 8000000 ] && ! (ulimit -v "$start_kb" &&
		OPENBLAS_NUM_THREADS=1 timeout 10 "$DDPTOK" --version) >/dev/null 2>&1
	do
		start_kb=$((start_kb + 250000))
	done
	(ulimit -v $((start_kb + 300000)) && OPENBLAS_NUM_THREADS=1 timeout 60 "$DDPTOK" ok.ini \
		prepare --set run.outputs=oom --set data.train=100000 --set data.min_len=4000 \
		--set data.max_len=4096 >out.txt 2>err.txt)
	got=$?
	if [ "$got" -ne 11 ] || ! grep -q "ddptok-run: out of memory: corpus: out of memory" err.txt
	then
		echo "FAIL: an allocation that fails (limit $((start_kb + 300000)) KB) exited $got:"
		cat err.txt; fail=1
	fi
	rm -rf oom
fi
# --help and --version succeed
"$DDPTOK" --help | grep -q "usage: ddptok-run" || { echo "FAIL: --help"; fail=1; }
# help: the global help, or one command's (usage, its options and no other's, an example);
# no configuration is read
help_has() { # what, pattern, command...
	what=$1; pat=$2; shift 2
	"$@" > help.txt 2>&1 || { echo "FAIL: $what exited $?"; cat help.txt; fail=1; return; }
	grep -q -- "$pat" help.txt || { echo "FAIL: $what lacks '$pat':"; cat help.txt; fail=1; }
}
help_has "help" "^commands:" "$DDPTOK" help
help_has "help" "ddptok-run help COMMAND" "$DDPTOK" help
help_has "help train" "^usage: ddptok-run CONFIG train " "$DDPTOK" help train
help_has "help train" "--resume DIR" "$DDPTOK" help train
help_has "help train" "^example:" "$DDPTOK" help train
grep -q -- "--dump" help.txt && { echo "FAIL: help train lists parity's --dump"; fail=1; }
grep -q "^commands:" help.txt && { echo "FAIL: help train prints the global help"; fail=1; }
help_has "CONFIG train --help" "^usage: ddptok-run CONFIG train " "$DDPTOK" ok.ini train --help
help_has "CONFIG train --help" "--continuous" "$DDPTOK" ok.ini train --help
help_has "missing CONFIG train --help" "^usage: ddptok-run CONFIG train " "$DDPTOK" missing.ini train --help
help_has "train --help" "^usage: ddptok-run CONFIG train " "$DDPTOK" train --help
help_has "CONFIG help train" "^usage: ddptok-run CONFIG train " "$DDPTOK" ok.ini help train
help_has "CONFIG help" "^commands:" "$DDPTOK" ok.ini help
help_has "help help" "^commands:" "$DDPTOK" help help
help_has "help clean" "--scope S" "$DDPTOK" help clean
help_has "help clean" "clean --scope" "$DDPTOK" help clean
help_has "CONFIG --help" "^commands:" "$DDPTOK" ok.ini --help
for c in protocol prepare check-loss reference parity exercise train evaluate checkpoints clean \
	 inspect bench env; do
	help_has "help $c" "^usage: ddptok-run CONFIG $c" "$DDPTOK" help "$c"
	help_has "help $c" "^  ddptok-run configs/minimum.ini $c" "$DDPTOK" help "$c"
done
[ -e outputs ] && { echo "FAIL: help wrote outputs/"; fail=1; }
"$DDPTOK" --version | grep -q "ddptok-run" || { echo "FAIL: --version"; fail=1; }
exit $fail
