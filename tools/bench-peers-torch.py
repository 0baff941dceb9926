#!/usr/bin/env python3
"""PyTorch DDP side of tools/bench-peers.sh: a GPT-2 of the given shape (pre-LayerNorm
blocks, causal attention, tanh GELU, tied output layer, as llm.c and ddptok build it) trained
with AdamW on random ids, 2 processes of 1 thread each (gloo), 2 sequences of 64 tokens per
process and step. Prints one line: tokens per second of the whole (4 x 64 per step, over
the timed steps) and the peak resident memory of both processes together, in MiB.

    bench-peers-torch.py LAYERS HEADS WIDTH VOCAB STEPS WARM
"""
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

WORLD, BATCH, T = 2, 2, 64


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.fcproj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        # a plain attribute: gloo cannot broadcast a bool buffer, and every rank builds it
        self.mask = torch.tril(torch.ones(T, T, dtype=torch.bool))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, heads, width, vocab):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(T, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(width)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def rank_main(rank, args, out):
    layers, heads, width, vocab, steps, warm = args
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29513")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(GPT(layers, heads, width, vocab))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    gen = torch.Generator().manual_seed(rank)
    timed = 0.0
    for step in range(warm + steps):
        ids = torch.randint(vocab, (BATCH, T + 1), generator=gen)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(ids[:, :-1], ids[:, 1:]).backward()
        opt.step()
        if step >= warm:
            timed += time.perf_counter() - start
    # the slowest rank's time, the ranks' peak memory together
    t = torch.tensor([timed])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    dist.all_reduce(rss, op=dist.ReduceOp.SUM)
    if rank == 0:
        out.put("%.0f %.0f" % (WORLD * BATCH * T * steps / t.item(), rss.item()))
    dist.destroy_process_group()


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    args = [int(a) for a in sys.argv[1:]]
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=rank_main, args=(r, args, out)) for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        sys.exit("bench-peers-torch: a rank failed")
    print(out.get())


if __name__ == "__main__":
    main()
