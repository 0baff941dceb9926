# Text in, text out: tokenize and --decode with GPT-2's files (the ids tiktoken gives, the
# text back byte for byte, foreign ids refused); invalid UTF-8 refused naming the byte, or
# replaced; the text source on a .txt file cut at a delimiter and on a prompt/completion
# jsonl, whose protocol passes with the prompts masked (in exact mode too, bit for bit); the
# data lock follows the tokenizer; tokenizer-train makes a SentencePiece model that tokenize
# then uses; a gpt trained on text samples text after a text prompt and evaluates in bits
# per byte.
set -eu
DATA="$CONF/../tests/data"
cat > gpt2.ini <<INI
[tokenizer]
kind = gpt2
vocab = $DATA/gpt2/vocab.json
merges = $DATA/gpt2/merges.txt
INI
printf "Hello  world, it's 2026!\n\tdef f(x): return x**2  # ok\n" > hello.txt
"$DDPTOK" gpt2.ini tokenize hello.txt > hello.ids
# tiktoken's gpt2 ids for this text (encode_ordinary, npm tiktoken 1.0.22)
[ "$(cat hello.ids)" = "15496 220 995 11 340 338 1160 2075 0 198 197 4299 277 7 87 2599 1441 2124 1174 17 220 1303 12876 198" ] ||
	{ cat hello.ids; echo "FAIL: gpt2 ids differ from tiktoken's"; exit 1; }
"$DDPTOK" gpt2.ini tokenize --decode hello.ids > hello.back
cmp hello.txt hello.back
# ids that are not the tokenizer's are refused (exit 5), naming them
decode_refused() { # IDS MESSAGE
	rc=0
	echo "$1" | "$DDPTOK" gpt2.ini tokenize --decode - > dec.out 2>&1 || rc=$?
	[ "$rc" -eq 5 ] && grep -q "$2" dec.out || { cat dec.out; echo "FAIL: --decode '$1': exit $rc"; exit 1; }
}
decode_refused "5 x" "'x' is not an id"
decode_refused "-1" "'-1' is not an id"
decode_refused "7 50257" "id 50257 at 1 is not in the gpt2 tokenizer's 50257 ids"
# the bytes tokenizer needs no file: one id per byte
printf 'h\303\251' | "$DDPTOK" gpt2.ini --set tokenizer.kind=bytes tokenize - > bytes.ids
[ "$(cat bytes.ids)" = "104 195 169" ]

# invalid UTF-8: refused, naming the file and the byte (exit 5), or replaced
printf 'abc\355\240\200z' > bad.txt
set +e
"$DDPTOK" gpt2.ini tokenize bad.txt > bad.out 2>&1
rc=$?
set -e
[ "$rc" -eq 5 ] && grep -q "bad.txt: byte 3: not UTF-8" bad.out ||
	{ cat bad.out; echo "FAIL: invalid UTF-8 not refused"; exit 1; }
"$DDPTOK" gpt2.ini --set data.invalid_utf8=replace tokenize bad.txt > replaced.ids
"$DDPTOK" gpt2.ini tokenize --decode replaced.ids > replaced.txt
printf 'abc\357\277\275\357\277\275\357\277\275z' | cmp - replaced.txt

# the text source: a .txt file of documents separated by blank lines
for i in 1 2 3 4 5 6; do printf 'document %s, long enough to keep\n\n' "$i"; done > docs.txt
cat > text.ini <<INI
[run]
outputs = out-txt
artifacts = art-txt
[data]
source = text
path = docs.txt
delimiter = \n\n
min_len = 4
max_len = 64
split = 1,1,1
[train]
accumulation = 1
batch_size = 1
INI
"$DDPTOK" text.ini prepare > txt.txt
grep -q "prepare: read 6 documents from docs.txt (text)" txt.txt
lock_bytes=$(grep "data lock" txt.txt)
"$DDPTOK" text.ini --set tokenizer.kind=gpt2 --set tokenizer.vocab="$DATA/gpt2/vocab.json" \
	--set tokenizer.merges="$DATA/gpt2/merges.txt" --set run.outputs=out-txt2 prepare > txt2.txt
[ "$(grep "data lock" txt2.txt)" != "$lock_bytes" ] ||
	{ echo "FAIL: the data lock does not follow the tokenizer"; exit 1; }

# prompt/completion pairs: the prompts are context, never targets; the protocol passes
"$DDPTOK" "$CONF/own-data.ini" --set data.source=text --set data.path="$DATA/text/qa.jsonl" \
	--set run.outputs=out-qa --set run.artifacts=art-qa > qa.txt 2>&1 ||
	{ cat qa.txt; echo "FAIL: the protocol on a prompt/completion jsonl failed"; exit 1; }
grep -q "prepare: read 240 documents" qa.txt
grep -q "protocol: every check passed" qa.txt
masked=$(sed -n 's/.* tokens, \([0-9.]*\)% of them masked.*/\1/p' qa.txt)
[ "${masked%%.*}" -ge 20 ] || { echo "FAIL: prompts not masked ($masked%)"; exit 1; }

# exact mode on the same pairs: the same bits on one device and on W, resumed and elastic
"$DDPTOK" "$CONF/own-data.ini" --set data.source=text --set data.path="$DATA/text/qa.jsonl" \
	--set train.shards=8 --set train.batch_size=2 --set train.accumulation=4 \
	--set run.outputs=out-qx --set run.artifacts=art-qx > qx.txt 2>&1 ||
	{ cat qx.txt; echo "FAIL: exact mode on a prompt/completion jsonl failed"; exit 1; }
grep -q "parity: bitwise: 0 of [0-9]* components differ" qx.txt
[ "$(grep -c "elastic: W = .* bit-identical" qx.txt)" -eq 2 ]

# tokenizer-train: a SentencePiece BPE model of the text, then used by tokenize
"$DDPTOK" text.ini --set data.path="$DATA/text/genesis.txt" --set tokenizer.kind=sentencepiece \
	--set tokenizer.file=gen.model --set tokenizer.train_vocab=400 tokenizer-train > train.txt
grep -q "wrote gen.model" train.txt
[ -s gen.model ] && [ -s gen.vocab ] && ! ls gen.tmp-* 2>/dev/null
"$DDPTOK" text.ini --set tokenizer.kind=sentencepiece --set tokenizer.file=gen.model \
	tokenize hello.txt > spm.ids
"$DDPTOK" text.ini --set tokenizer.kind=sentencepiece --set tokenizer.file=gen.model \
	tokenize --decode spm.ids > spm.back
cmp hello.txt spm.back
# sample from a gpt trained on text: the prompt as text, the output decoded after it;
# --ids keeps ids in and out
tiny="--set data.path=$DATA/text/genesis.txt --set model.kind=gpt --set model.layers=1
	--set model.width=16 --set model.heads=2 --set model.context=64 --set data.max_len=64
	--set train.updates=2 --set run.outputs=out-gpt --set run.artifacts=art-gpt"
# shellcheck disable=SC2086 # the word splitting of $tiny is wanted
"$DDPTOK" text.ini $tiny train > gpt-train.txt
# a resume whose text would be tokenized otherwise is refused (exit 5), saying so
rc=0
# shellcheck disable=SC2086
"$DDPTOK" text.ini $tiny train --resume latest --set train.updates=3 \
	--set data.delimiter='\n' > resume.txt 2>&1 || rc=$?
[ "$rc" -eq 5 ] && grep -q "or how they are tokenized" resume.txt ||
	{ cat resume.txt; echo "FAIL: a resume on otherwise tokenized text: exit $rc"; exit 1; }
# shellcheck disable=SC2086
"$DDPTOK" text.ini $tiny sample --prompt "And God said" --tokens 20 --temperature 0 > s1.txt
grep -q "prompt of 12 tokens" s1.txt
grep -q "^And God said" s1.txt || { cat s1.txt; echo "FAIL: no text after the prompt"; exit 1; }
. "$E2E/json.sh"
jcheck out-gpt/sample.json 'd["prompt"][:3] == [65, 110, 100] and isinstance(d["text"], str)'
# a prompt longer than model.context (64 here) keeps its last 64 tokens, and says so
python3 -c 'print("In the beginning God created the heaven and the earth. " * 3)' > long.txt
# shellcheck disable=SC2086
"$DDPTOK" text.ini $tiny sample --prompt-file long.txt --tokens 4 --temperature 0 > s3.txt 2> s3.err ||
	{ cat s3.txt s3.err; echo "FAIL: a prompt longer than the context"; exit 1; }
grep -q "is 166 tokens, more than model.context = 64: its last 64 are the prompt" s3.err ||
	{ cat s3.err; echo "FAIL: the long prompt's cut is not said"; exit 1; }
grep -q "prompt of 64 tokens" s3.txt || { cat s3.txt; echo "FAIL: the prompt kept"; exit 1; }
# shellcheck disable=SC2086
"$DDPTOK" text.ini $tiny sample --ids --prompt "65 110 100" --tokens 5 --temperature 0 > s2.txt
grep -q "^sample: [0-9]* [0-9]* [0-9]* [0-9]* [0-9]*$" s2.txt
# evaluate: bits per byte beside the loss, over the bytes the targets stand for (with the
# bytes tokenizer, one a target but for the end-of-text ids)
# shellcheck disable=SC2086
"$DDPTOK" text.ini $tiny evaluate > eval.txt
grep -q "evaluate: bits per byte: test [0-9.]*, validation [0-9.]*" eval.txt
jcheck out-gpt/evaluate.json 'all(abs(s["bits_per_byte"] - s["loss_sum"] / __import__("math").log(2) / s["bytes"]) < 1e-9 * s["bits_per_byte"] and 0.95 * s["tokens"] < s["bytes"] < s["tokens"] for s in (d["test"], d["validation"]))'
echo "text: ok"
