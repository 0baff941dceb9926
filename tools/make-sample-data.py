#!/usr/bin/env python3
"""Writes the small sample of tokenized data shipped under tests/data, in each format the
program reads ([data] source = npy, jsonl, megatron, llmc):

    tests/data/npy/        tokens.npy, offsets.npy, loss_mask.npy, split.npy
    tests/data/sample.jsonl
    tests/data/megatron/sample.bin, sample.idx
    tests/data/llmc/sample.bin

All four hold the same sequences: ids 1..95 drawn from a small first-order Markov source
(so a model can learn them), lengths 6 to 90 (a few longer than the max_len of
conf/own-data.ini, to be cut), each opening with a prompt of 0 to 5 tokens that is not
supervised, and in one sequence out of eight a few more ignored positions in the middle.
npy and jsonl carry the masks and the splits (80% train, 8% validation, 12% test);
megatron and llmc have neither (every token a target, the split rule decides). In the
llm.c shard id 0 is the end-of-text token opening each document (data.eot = 0).

Deterministic (its own generator, no numpy needed): run it again and the files are the
same bytes.  Usage: tools/make-sample-data.py [OUTDIR]   (default: tests/data)
"""
import json
import os
import struct
import sys

SEQUENCES = 320
VOCAB = 96          # ids 0..95; 0 is only the llm.c end-of-text token
EOT = 0


class Lcg:
    """64-bit linear congruential generator (Knuth's MMIX constants), top bits used."""

    def __init__(self, seed):
        self.x = seed

    def below(self, n):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.x >> 33) % n


def draw_sequences():
    rng = Lcg(20240607)
    successors = [[1 + rng.below(VOCAB - 1) for _ in range(3)] for _ in range(VOCAB)]
    out = []
    for i in range(SEQUENCES):
        length = 6 + rng.below(60) if rng.below(10) else 70 + rng.below(21)
        prev, tokens = 1 + rng.below(VOCAB - 1), []
        for _ in range(length):
            prev = successors[prev][rng.below(3)] if rng.below(10) else 1 + rng.below(VOCAB - 1)
            tokens.append(prev)
        prompt = rng.below(6)
        mask = [0] * prompt + [1] * (length - prompt)
        if i % 8 == 3 and length > prompt + 6:
            at = prompt + 2 + rng.below(length - prompt - 4)
            mask[at:at + 2] = [0, 0]
        r = rng.below(100)
        split = 0 if r < 80 else 1 if r < 88 else 2
        out.append((tokens, mask, split))
    return out


def npy_bytes(descr, values, fmt):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, len(values))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii") +
            struct.pack("<%d%s" % (len(values), fmt), *values))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def write_npy(outdir, seqs):
    tokens = [t for s in seqs for t in s[0]]
    offsets = [0]
    for s in seqs:
        offsets.append(offsets[-1] + len(s[0]))
    write(os.path.join(outdir, "npy", "tokens.npy"), npy_bytes("<u2", tokens, "H"))
    write(os.path.join(outdir, "npy", "offsets.npy"), npy_bytes("<i8", offsets, "q"))
    write(os.path.join(outdir, "npy", "loss_mask.npy"),
          npy_bytes("|u1", [m for s in seqs for m in s[1]], "B"))
    write(os.path.join(outdir, "npy", "split.npy"), npy_bytes("|u1", [s[2] for s in seqs], "B"))


def write_jsonl(outdir, seqs):
    names = ["train", "validation", "test"]
    lines = [json.dumps({"tokens": t, "mask": m, "split": names[s]}, separators=(",", ":"))
             for t, m, s in seqs]
    write(os.path.join(outdir, "sample.jsonl"), ("\n".join(lines) + "\n").encode("ascii"))


def write_megatron(outdir, seqs):
    sizes = [len(s[0]) for s in seqs]
    pointers, at = [], 0
    for n in sizes:
        pointers.append(at)
        at += 2 * n
    n = len(seqs)
    idx = (b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8) +
           struct.pack("<Q", n) + struct.pack("<Q", n + 1) +
           struct.pack("<%di" % n, *sizes) + struct.pack("<%dq" % n, *pointers) +
           struct.pack("<%dq" % (n + 1), *range(n + 1)))
    tokens = [t for s in seqs for t in s[0]]
    write(os.path.join(outdir, "megatron", "sample.idx"), idx)
    write(os.path.join(outdir, "megatron", "sample.bin"), struct.pack("<%dH" % len(tokens), *tokens))


def write_llmc(outdir, seqs):
    stream = []
    for s in seqs:
        stream.append(EOT)
        stream.extend(s[0])
    header = [20240520, 1, len(stream)] + [0] * 253
    write(os.path.join(outdir, "llmc", "sample.bin"),
          struct.pack("<256i", *header) + struct.pack("<%dH" % len(stream), *stream))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data")
    seqs = draw_sequences()
    write_npy(outdir, seqs)
    write_jsonl(outdir, seqs)
    write_megatron(outdir, seqs)
    write_llmc(outdir, seqs)
    print("wrote %d sequences (%d tokens) in 4 formats under %s" %
          (len(seqs), sum(len(s[0]) for s in seqs), outdir))


if __name__ == "__main__":
    main()
