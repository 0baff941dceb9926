# The whole protocol on the shipped sample of your-own-data files (tests/data), in each of
# the four formats; prepare's summary; a changed file refused at resume; bad input refused
# with exit 5, the file named and nothing written; windows drawn in epochs on the balanced
# plan unless told otherwise, data of one length trained on W = 2, the synthetic source's
# keys refused.
set -eu
DATA="$CONF/../tests/data"
run_format() { # NAME SOURCE PATH [more --set]
	name=$1 source=$2 path=$3
	shift 3
	"$DDPTOK" "$CONF/own-data.ini" --set data.source="$source" --set data.path="$path" \
		--set run.outputs="out-$name" --set run.artifacts="art-$name" "$@" > "$name.txt" 2>&1 ||
		{ cat "$name.txt"; echo "FAIL: protocol on $name exited non-zero"; exit 1; }
	grep -q "protocol: every check passed" "$name.txt"
	grep -q "bit-identical" "$name.txt"
	grep -q "prepare: read 320 documents from $path ($source)" "$name.txt"
}
run_format npy npy "$DATA/npy"
run_format jsonl jsonl "$DATA/sample.jsonl"
run_format megatron megatron "$DATA/megatron/sample"
run_format llmc llmc "$DATA/llmc/sample.bin" --set data.eot=0
# the token unit's controls are caught on every format (the balanced plan, the default for
# file data, evens the ranks' token counts only as far as the sequences allow)
for name in npy jsonl megatron llmc; do
	[ "$(grep -c 'fail (caught)' "$name.txt")" -ge 2 ] ||
		{ cat "$name.txt"; echo "FAIL: $name: negative controls not caught"; exit 1; }
done
# the sequence unit: the protocol holds, the report names the unit; with as many sequences
# on every rank the rank-local sequence mean is the global one (reported as such), and the
# double division by the accumulation is still caught
run_format npy-seq npy "$DATA/npy" --set train.unit=sequence
grep -q "unit sequence, N = [0-9]*, S = [0-9]*" npy-seq.txt
grep -q "weighting unit sequence" out-npy-seq/report.md
grep -q '"unit": "sequence"' out-npy-seq/parity.json
grep -q "mean_of_means .* pass: same as global_token on this window" npy-seq.txt
grep -q "double_accumulation .* fail (caught)" npy-seq.txt
# the masks are counted: the sample masks its prompts
grep -q "of them masked" npy.txt
grep -q "sequence lengths 6-" npy.txt
# npy and jsonl hold the same sequences, masks and splits: the same corpus and figures
[ "$(grep '^prepare: .*supervised tokens' npy.txt)" = "$(grep '^prepare: .*supervised tokens' jsonl.txt)" ]
grep -q '"source": "npy"' out-npy/corpus/data.lock
grep -q '"files_sha256": "[0-9a-f]\{64\}"' out-npy/corpus/data.lock
# the synthetic corpus in the sequence unit too
"$DDPTOK" "$CONF/tiny.ini" --set train.unit=sequence --set run.outputs=out-syn-seq \
	--set run.artifacts=art-syn-seq > syn-seq.txt 2>&1 ||
	{ cat syn-seq.txt; echo "FAIL: the synthetic protocol in the sequence unit failed"; exit 1; }
grep -q "protocol: every check passed" syn-seq.txt
# what supports the token unit only says so (exit 3)
set +e
"$DDPTOK" "$CONF/tiny.ini" --set train.unit=sequence --set train.shards=4 prepare > exact.txt 2>&1
rc_exact=$?
"$DDPTOK" "$CONF/tiny.ini" --set train.unit=sequence inspect < /dev/null > inspect.txt 2>&1
rc_inspect=$?
set -e
[ "$rc_exact" -eq 3 ] && grep -q "exact mode" exact.txt || { cat exact.txt; echo "FAIL: exact mode took the sequence unit"; exit 1; }
[ "$rc_inspect" -eq 3 ] && grep -q "token unit only" inspect.txt || { cat inspect.txt; echo "FAIL: inspect took the sequence unit"; exit 1; }

# a real tokenizer's vocabulary: env reports what one rank holds
"$DDPTOK" "$CONF/own-data.ini" --set data.path="$DATA/npy" --set model.vocab=50257 env > env.txt
grep -q "memory per rank: .* (3 x [0-9]* floats, vocabulary 50261) + workspace .* (logits" env.txt ||
	{ cat env.txt; echo "FAIL: env does not report the memory per rank"; exit 1; }

# one id space, the files' own (the corpus shifts them by its 4 reserved ids): evaluate.json,
# the terminal and report.md name the constant guess by the same id
python3 - out-npy/evaluate.json out-npy/report.md npy.txt <<'PY' || { echo "FAIL: the constant guess is not named by the files' id"; exit 1; }
import json, sys
named = json.load(open(sys.argv[1]))["constant_guess_id"]
assert "predicts id %d, the most" % named in open(sys.argv[2]).read(), named
assert "predicts id %d (the data's numbering)" % named in open(sys.argv[3]).read(), named
PY

# a changed file: the resume is refused (exit 5), a fresh run prepares the corpus again
cp -r "$DATA/npy" mine
"$DDPTOK" "$CONF/own-data.ini" --set data.path=mine train --set train.stop_at=10 > stop.txt 2>&1
[ -d artifacts/own-data/runs/latest/step-0010 ]
python3 - <<'PY'
b = bytearray(open("mine/tokens.npy", "rb").read())
b[-2] = b[-2] % 90 + 2   # another id, still inside the vocabulary
b[-1] = 0
open("mine/tokens.npy", "wb").write(bytes(b))
PY
set +e
"$DDPTOK" "$CONF/own-data.ini" --set data.path=mine train --resume latest > resume.txt 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] || { cat resume.txt; echo "FAIL: resume on a changed file gave exit $rc"; exit 1; }
grep -q "the files changed since the corpus was prepared" resume.txt

# bad input: exit 5, the file and the position named, no corpus written
refused() { # EXPECTED-TEXT SOURCE PATH
	set +e
	"$DDPTOK" "$CONF/own-data.ini" --set data.source="$2" --set data.path="$3" \
		--set run.outputs=bad prepare > bad.txt 2>&1
	rc=$?
	set -e
	[ "$rc" -eq 5 ] || { cat bad.txt; echo "FAIL: $3 gave exit $rc, expected 5"; exit 1; }
	grep -q "$1" bad.txt || { cat bad.txt; echo "FAIL: no '$1' in the message"; exit 1; }
	[ ! -e bad/corpus/corpus.bin ] || { echo "FAIL: a corpus was written for $3"; exit 1; }
}
mkdir trunc && cp "$DATA"/npy/*.npy trunc/ && head -c 300 "$DATA/npy/tokens.npy" > trunc/tokens.npy
refused "trunc/tokens.npy: truncated" npy trunc
printf '{"tokens": [5, 6, 7, 8]}\n{"tokens": [5, "x"]}\n' > bad.jsonl
refused "bad.jsonl:2: tokens\[1\] is not an integer" jsonl bad.jsonl
printf '{"tokens": [5, 6, 7, 8, 9]}\n' > one.jsonl
refused "one.jsonl: no train sequence" jsonl one.jsonl
head -c 1000 "$DATA/llmc/sample.bin" > short.bin
refused "short.bin: truncated header" llmc short.bin
set +e
"$DDPTOK" "$CONF/own-data.ini" --set data.path="$DATA/npy" --set model.vocab=50 --set run.outputs=bad prepare > vocab.txt 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] && grep -q "tokens.npy: token [0-9]*: id [0-9]* outside the vocabulary \[0, 50)" vocab.txt ||
	{ cat vocab.txt; echo "FAIL: an id outside model.vocab was not refused"; exit 1; }
# a window the plan cannot fill
set +e
"$DDPTOK" "$CONF/own-data.ini" --set data.path="$DATA/npy" --set train.batch_size=200 --set run.outputs=bad prepare > plan.txt 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { cat plan.txt; echo "FAIL: an unfillable window was accepted"; exit 1; }

# how windows are drawn from file data: the protocol above ran in epochs on the balanced
# plan, chosen because the keys were left out, and resumed mid-epoch bit for bit (299
# training sequences, 16 per window: the stop at 10 is inside the first epoch, the run
# crosses into the second at window 19)
grep -q "^sampler: train.plan = balanced, train.sampling = epochs (the default for file data): each of the 299 training sequences once per epoch, 16 per window" npy.txt ||
	{ cat npy.txt; echo "FAIL: the file-data defaults were not announced"; exit 1; }
grep -q "plan balanced (windows drawn in epochs)" out-npy/report.md
# documents of one length (fixed-length chunks) train on W = 2 by default, and the
# checkpoint records the plan and sampling that ran
python3 -c 'import json
for i in range(48): print(json.dumps({"tokens": [(i * 7 + k) % 90 + 1 for k in range(16)]}))' > uniform.jsonl
"$DDPTOK" "$CONF/own-data.ini" --set data.source=jsonl --set data.path=uniform.jsonl \
	--set run.outputs=uni-out --set run.artifacts=uni-art train > uniform.txt 2>&1 ||
	{ cat uniform.txt; echo "FAIL: uniform-length own data does not train by default"; exit 1; }
grep -q "train.sampling = epochs (the default for file data): each of the 38 training" uniform.txt
grep -q '^plan = balanced$' uni-art/runs/latest/step-0020/config.ini
grep -q '^sampling = epochs$' uni-art/runs/latest/step-0020/config.ini
# the length bands, chosen on file data, say how much more often they draw the smaller
# band (and draw independently: no epochs were asked for)
"$DDPTOK" "$CONF/own-data.ini" --set data.path="$DATA/npy" --set train.plan=length_bands \
	--set run.outputs=lb-out --set run.artifacts=lb-art train > lb.txt 2>&1 ||
	{ cat lb.txt; echo "FAIL: the length bands on own data"; exit 1; }
grep -q "^sampler: train.plan = length_bands draws 8 sequences per window from each of 2 length bands, which hold [0-9]* to [0-9]* training sequences: a sequence of the smallest band is drawn [0-9.]* times as often" lb.txt ||
	{ cat lb.txt; echo "FAIL: the length bands' reweighting was not announced"; exit 1; }
grep -q '^sampling = independent$' lb-art/runs/latest/step-0020/config.ini
# a checkpoint's config.ini, which holds every key (the synthetic source's at their
# defaults), serves as the configuration again
"$DDPTOK" lb-art/runs/latest/step-0020/config.ini evaluate > lb-ev.txt 2>&1 ||
	{ cat lb-ev.txt; echo "FAIL: a checkpoint's config.ini is refused as a configuration"; exit 1; }
grep -q "evaluate: run .*, step 20" lb-ev.txt ||
	{ cat lb-ev.txt; echo "FAIL: evaluate with a checkpoint's config.ini"; exit 1; }
# refused before anything is written (exit 3): a key only the synthetic source reads, and
# epochs with the length bands
config_refused() { # EXPECTED-TEXT --set...
	want=$1
	shift
	set +e
	"$DDPTOK" "$CONF/own-data.ini" --set data.path="$DATA/npy" --set run.outputs=ref-out \
		--set run.artifacts=ref-art "$@" train > ref.txt 2>&1
	rc=$?
	set -e
	[ "$rc" -eq 3 ] && grep -qF "$want" ref.txt ||
		{ cat ref.txt; echo "FAIL: $*: exit $rc, expected 3 and '$want'"; exit 1; }
	[ ! -e ref-out ] && [ ! -e ref-art ] || { echo "FAIL: $* wrote outputs"; exit 1; }
}
config_refused "own-data.ini: [data] train = 500 (from --set): only the synthetic source reads it" \
	--set data.train=500
config_refused "own-data.ini: [data] test = 50 (from --set): only the synthetic source reads it" \
	--set data.test=50
config_refused "[train] sampling = epochs draws every training sequence once per epoch, [train] plan = length_bands" \
	--set train.plan=length_bands --set train.sampling=epochs
# a relative data.path in a configuration file is relative to that file's directory: the
# shipped own-data.ini finds its sample from here; a copy elsewhere says what it tried
"$DDPTOK" "$CONF/own-data.ini" prepare --set run.outputs=shipped > shipped.txt ||
	{ cat shipped.txt; echo "FAIL: conf/own-data.ini does not find its sample"; exit 1; }
mkdir -p cfg
cp "$CONF/own-data.ini" cfg/
set +e
"$DDPTOK" cfg/own-data.ini prepare --set run.outputs=moved > moved.txt 2>&1
rc_moved=$?
set -e
[ "$rc_moved" -eq 5 ] && grep -qF "../tests/data/npy: not a directory" moved.txt &&
	grep -qF "relative to the configuration file's directory; tried $PWD/cfg/../tests/data/npy)" \
		moved.txt || { cat moved.txt; echo "FAIL: a moved configuration's data path"; exit 1; }
ln -s "$CONF/../tests" tests
(cd / && "$DDPTOK" "$OLDPWD/cfg/own-data.ini" prepare --set run.outputs="$OLDPWD/moved") \
	> moved.txt || { cat moved.txt; echo "FAIL: the path from the configuration's directory"; exit 1; }
grep -q "prepare: read 320 documents from $PWD/cfg/../tests/data/npy (npy)" moved.txt ||
	{ cat moved.txt; echo "FAIL: prepare does not name the path it read"; exit 1; }
exit 0
