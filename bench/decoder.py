#!/usr/bin/python3
"""A GPT-2-small-shaped decoder with a key/value cache, imported from ONNX,
against torch on the same CPU.

    decoder.py WORKDIR [--bib build/bib] [--importer tools/bib-onnx] [--repetitions N]

The model is examples/generate/gpt.py's at GPT-2 small's shape (12 layers,
12 heads, width 768, a vocabulary of 50,257, 1,024 learned positions, the
tanh GELU; random weights): token and position embeddings, pre-norm blocks
of causal self-attention over the cache and a GELU MLP, a final layer norm
and logits by the tied embedding. It takes the
token ids and each layer's past keys and values ([B, 12, P, 64]) and gives
the logits and the grown cache ([B, 12, P + S, 64]), exported once by
torch.onnx with B, S and P dynamic and imported once by bib-onnx. Two steps
of generation are timed from that one module: the prompt (S = 128, P = 0)
and the next token (S = 1, P = 128). Before timing, each step's outputs are
checked against torch's: the logits within 1e-4 of the largest, the last
layer's grown cache the past bit for bit and the new entries within 1e-4. Then, on 1
thread and on all CPUs, three rounds alternate BIB (`bib bench`, median of N
runs) and torch (median of N calls of the same module, same threads); the
table shows each one's best round and BIB / torch (below 1: BIB is faster).
"""
import os
import subprocess
import sys

import numpy as np
import torch

import against_torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "generate"))
import gpt  # noqa: E402  (examples/generate/gpt.py)

E, HEADS, LAYERS, VOCAB, POSITIONS = 768, 12, 12, 50257, 1024
MAX_MEMORY = "4G"  # 650 MB of weights, past bib's default cap of 256M


def decoder():
    return gpt.GPT(VOCAB, E, HEADS, LAYERS, POSITIONS, gelu="tanh")


def main():
    args = against_torch.arguments(__doc__, 10)
    d = args.workdir
    torch.manual_seed(0)
    model = decoder().eval()
    names = model.input_names()
    onnx_path, bib_path = os.path.join(d, "decoder.onnx"), os.path.join(d, "decoder.bib")
    model.export(onnx_path)
    subprocess.run([sys.executable, args.importer, onnx_path, "-o", bib_path], check=True, timeout=600)
    threads = sorted({1, os.cpu_count() or 1})
    print("GPT-2-small-shaped decoder with a key/value cache, imported from ONNX: bib (cpu) vs torch %s, "
          "median of %d runs, best of 3 alternating rounds" % (torch.__version__, args.repetitions))
    print("%-32s %7s %10s %10s %10s" % ("step", "threads", "bib ms", "torch ms", "bib/torch"))
    for label, s, p in (("prompt (S = 128, P = 0)", 128, 0), ("next token (S = 1, P = 128)", 1, 128)):
        g = torch.Generator().manual_seed(s + p)
        ids = torch.randint(0, VOCAB, (1, s), generator=g)
        past = tuple(torch.randn(1, HEADS, p, E // HEADS, generator=g) for _ in range(2 * LAYERS))
        specs = []
        for name, value in zip(names, (ids,) + past):
            path = os.path.join(d, "%s.%d.npy" % (name, s))
            np.save(path, value.numpy().astype(np.int32) if name == "ids" else value.numpy())
            specs.append("%s=%s" % (name, path))
        logits = os.path.join(d, "logits.npy")
        subprocess.run([args.bib, "run", bib_path, "--max-memory", MAX_MEMORY] +
                       [a for spec in specs for a in ("--input", spec)] +
                       ["--output", "logits=" + logits, "--output", "present23=" + logits + ".k.npy"],
                       check=True, timeout=600)
        with torch.no_grad():
            want = model(ids, *past)
        got = np.load(logits)
        scale = float(np.abs(want[0].numpy()).max())
        if got.shape != tuple(want[0].shape) or float(np.abs(got - want[0].numpy()).max()) > 1e-4 * scale:
            sys.exit("decoder: %s: bib's logits differ from torch's" % label)
        k = np.load(logits + ".k.npy")
        if k.shape != tuple(want[-1].shape) or not np.array_equal(k[:, :, :p], past[-1].numpy()) or \
                not np.allclose(k, want[-1].numpy(), rtol=1e-4, atol=1e-5):
            sys.exit("decoder: %s: bib's grown cache is not the past and torch's new keys" % label)

        def peer(ids=ids, past=past):
            with torch.no_grad():
                return model(ids, *past)

        for t in threads:
            b, q = against_torch.best_of_rounds(torch, args, bib_path, specs, t, peer,
                                                ("--max-memory", MAX_MEMORY))
            print("%-32s %7d %10.3f %10.3f %9.2fx" % (label, t, b, q, b / q), flush=True)


if __name__ == "__main__":
    main()
