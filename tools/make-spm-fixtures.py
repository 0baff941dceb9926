#!/usr/bin/python3
"""Writes tests/data/tokenizer/spm-{bpe,unigram}-cases.jsonl: the texts of
gpt2-cases.jsonl (whitespace, contractions, numbers, code, many scripts, emoji, Unicode
spaces) and the ids SentencePiece's own library (Debian python3-sentencepiece) gives them
with each shipped model, one JSON object a line: {"text", "ids", "decoded"} (decoded: the
library's decoding of those ids).

The models were made with the library's trainer (Debian sentencepiece's spm_train) on the
shipped tests/data/text/genesis.txt:

    for t in bpe unigram; do
      spm_train --input=tests/data/text/genesis.txt --model_prefix=tests/data/tokenizer/spm-$t \\
        --vocab_size=500 --model_type=$t --byte_fallback=true \\
        --normalization_rule_name=identity --remove_extra_whitespaces=false \\
        --character_coverage=1.0 --minloglevel=2
      rm tests/data/tokenizer/spm-$t.vocab
    done
    /usr/bin/python3 tools/make-spm-fixtures.py
"""
import json
import os

import sentencepiece

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer")
with open(os.path.join(here, "gpt2-cases.jsonl"), encoding="utf-8") as f:
    texts = [json.loads(line)["text"] for line in f if line.strip()]
for kind in ("bpe", "unigram"):
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(here, f"spm-{kind}.model"))
    with open(os.path.join(here, f"spm-{kind}-cases.jsonl"), "w", encoding="utf-8") as out:
        for t in dict.fromkeys(texts):  # each text once, in order
            ids = sp.encode(t)
            out.write(json.dumps({"text": t, "ids": ids, "decoded": sp.decode(ids)}) + "\n")
