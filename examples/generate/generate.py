#!/usr/bin/python3
"""Generate text with the imported model, one token at a time through its cache.

    generate.py OUTDIR

Loads OUTDIR/generate.bib (train.py's model imported by bib-onnx) and
continues a prompt greedily for TOKENS characters: the prompt runs once with
an empty cache (P = 0), then each step feeds the last character (S = 1)
with the cache the previous step returned. It does so on the CPU and on
Vulkan, and with torch from the same weights, and checks that BIB's
characters equal torch's and that both executors wrote the same logits,
byte for byte, at every step. Prints the text. Exits 1 when a character or
a byte differs.
"""
import hashlib
import os
import sys

import numpy as np
import torch

import bib
import train

PROMPT = "One program gives"
TOKENS = 100  # with the prompt, within the context of 128 positions


def bib_generate(module, vocab, backend):
    """(text, hash of every step's logits) from BIB on backend."""
    ids = np.array([[vocab.index(c) for c in PROMPT]], np.int32)
    past = [np.zeros((1, train.HEADS, 0, train.WIDTH // train.HEADS), np.float32)
            for _ in range(2 * train.LAYERS)]
    text, digest = PROMPT, hashlib.sha256()
    for _ in range(TOKENS):
        feed = {"ids": ids}
        feed.update(("past%d" % i, p) for i, p in enumerate(past))
        r = module.run(feed, backend=backend, strict_device=True)
        logits = r["logits"][0, -1]
        digest.update(logits.tobytes())
        nxt = int(np.argmax(logits))
        text += vocab[nxt]
        ids = np.array([[nxt]], np.int32)
        past = [r["present%d" % i] for i in range(2 * train.LAYERS)]
    return text, digest.hexdigest()


def torch_generate(model, vocab):
    ids = torch.tensor([[vocab.index(c) for c in PROMPT]])
    past = model.cache()
    text = PROMPT
    with torch.no_grad():
        for _ in range(TOKENS):
            out = model(ids, *past)
            nxt = int(torch.argmax(out[0][0, -1]))
            text += vocab[nxt]
            ids = torch.tensor([[nxt]])
            past = list(out[1:])
    return text


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: generate.py OUTDIR")
    out = sys.argv[1]
    with open(os.path.join(out, "vocab.txt")) as f:
        vocab = f.read()
    torch.set_num_threads(1)
    model = train.generator(len(vocab))
    model.load_state_dict(torch.load(os.path.join(out, "weights.pt")))
    model.eval()
    want = torch_generate(model, vocab)
    module = bib.load(os.path.join(out, "generate.bib"))
    status, runs = 0, {}
    for backend in ("cpu", "vulkan"):
        try:
            runs[backend] = bib_generate(module, vocab, backend)
        except bib.Unavailable as e:
            print("SKIP: generate on %s: %s" % (backend, e))
    text, digest = runs["cpu"]
    print("bib:   %s" % text)
    if text == want:
        print("ok   generate: bib's %d characters equal torch's" % TOKENS)
    else:
        at = next(i for i, (a, b) in enumerate(zip(text, want)) if a != b)
        print("torch: %s" % want)
        print("FAIL generate: bib's text differs from torch's at character %d" % (at - len(PROMPT)))
        status = 1
    if "vulkan" in runs:
        if runs["vulkan"] == (text, digest):
            print("ok   generate: the same logits, byte for byte, on cpu and vulkan at all %d steps" % TOKENS)
        else:
            print("FAIL generate: cpu and vulkan differ (text %s, logits %s)"
                  % ("same" if runs["vulkan"][0] == text else "differs",
                     "same" if runs["vulkan"][1] == digest else "differ"))
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
