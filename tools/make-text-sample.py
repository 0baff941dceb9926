#!/usr/bin/env python3
"""Writes tests/data/text/qa.jsonl: prompt/completion pairs whose completions differ
wildly in length (a number spelled out, a count from 1 to k, a word repeated), for the
text source's completion-only training: only the completion is supervised.

    python3 tools/make-text-sample.py > tests/data/text/qa.jsonl
"""
import json
import random

ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen " \
       "fourteen fifteen sixteen seventeen eighteen nineteen".split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def spell(n):
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("-" + ONES[n % 10] if n % 10 else "")
    rest = n % 100
    return ONES[n // 100] + " hundred" + (" and " + spell(rest) if rest else "")


def pair(rng):
    kind = rng.randrange(4)
    if kind == 0:
        n = rng.randrange(1000)
        return f"Spell {n} in words.\nAnswer:", " " + spell(n) + "."
    if kind == 1:
        k = rng.randrange(1, 40)
        return f"Count from 1 to {k}.\nAnswer:", " " + " ".join(str(i) for i in range(1, k + 1))
    if kind == 2:
        a, b = rng.randrange(100), rng.randrange(100)
        return f"What is {a} plus {b}?\nAnswer:", f" {a + b}"
    word = rng.choice(["ship", "river", "lamp", "garden", "stone"])
    k = rng.randrange(1, 12)
    return f"Say '{word}' {k} times.\nAnswer:", " " + " ".join([word] * k)


def main():
    rng = random.Random(31)
    for _ in range(240):
        prompt, completion = pair(rng)
        print(json.dumps({"prompt": prompt, "completion": completion}))


main()
