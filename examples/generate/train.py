#!/usr/bin/python3
"""Train a small character-level GPT with torch, and export it with its key/value cache.

    train.py OUTDIR

The model (gpt.py: width 64, 4 heads, 2 blocks, a context of 128) reads
characters and predicts the next one. Its forward takes the new ids [B, S]
and each layer's past keys and values [B, 4, P, 16], and returns the logits
[B, S, V] and the grown cache [B, 4, P + S, 16], so one exported graph
serves the prompt (P = 0) and every next token (S = 1).

It trains on the text below (written for this example) until it can
recite it, then writes OUTDIR/generate.onnx (exported with B, S and P
dynamic, the cache's length named "P + S"), OUTDIR/weights.pt (for torch's
side of generate.py) and OUTDIR/vocab.txt (the characters, in token order).
Seeds are fixed and torch runs on one thread, so every run trains the same
weights; it takes a few seconds of CPU.
"""
import os
import sys

import torch
from torch import nn

import gpt

TEXT = (
    "One program gives the same bits on every run, on every executor and on every machine. "
    "The interpreter checks the whole module before it runs, then runs it in a lean loop. "
    "A tensor remembers where its valid copy lives and moves only when it must. "
    "Each reduction adds in one fixed order, so a row never depends on the batch it came in. "
)
WIDTH, HEADS, LAYERS, CONTEXT = 64, 4, 2, 128
STEPS, BATCH, LENGTH = 500, 8, CONTEXT


def generator(vocab):
    return gpt.GPT(vocab, WIDTH, HEADS, LAYERS, CONTEXT)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: train.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    vocab = sorted(set(TEXT))
    data = torch.tensor([vocab.index(c) for c in TEXT * 4])
    model = generator(len(vocab))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    for step in range(STEPS):
        starts = torch.randint(0, len(data) - LENGTH - 1, (BATCH,), generator=g)
        x = torch.stack([data[i:i + LENGTH] for i in starts])
        y = torch.stack([data[i + 1:i + LENGTH + 1] for i in starts])
        loss = nn.functional.cross_entropy(model(x, *model.cache(BATCH))[0].reshape(-1, len(vocab)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("torch: loss %.4f after %d steps on %d characters of text" % (loss.item(), STEPS, len(TEXT)))
    model.eval()
    model.export(os.path.join(out, "generate.onnx"))
    torch.save(model.state_dict(), os.path.join(out, "weights.pt"))
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("".join(vocab))


if __name__ == "__main__":
    main()
