#!/usr/bin/python3
"""TopK imported from ONNX, against torch.topk on the same CPU.

    topk.py WORKDIR [--bib build/bib] [--importer tools/bib-onnx] [--repetitions N]

torch.topk at the sizes models use it (a classifier's top 5 of 1,000 for a
batch, a sampler's top 50 of a 128k vocabulary, top 40 of 32k, half of each
row, a whole sort) is exported by torch.onnx, imported by bib-onnx (TOPK_DESC)
and run by `bib bench` on the CPU executor. Before timing, BIB's indices are
checked against numpy's stable argsort (the order TOPK promises: ties by the
lower index; torch leaves the order of ties free) and its values against
torch's. Then, on 1 thread and on all CPUs, three rounds alternate BIB
(`bib bench`, median of N runs) and torch (median of N calls, same thread
count); the table shows each one's best round and BIB / torch (below 1: BIB
is faster).
"""
import os
import subprocess
import sys

import numpy as np
import torch

import against_torch

CASES = ((256, 1000, 5), (8, 128000, 50), (64, 32000, 40), (256, 1000, 500), (16, 4096, 4096))


class TopK(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return torch.topk(x, self.k, dim=-1)


def main():
    args = against_torch.arguments(__doc__, 20)
    d = args.workdir
    threads = sorted({1, os.cpu_count() or 1})
    print("TopK imported from ONNX: bib (cpu) vs torch.topk %s, median of %d runs, best of 3 "
          "alternating rounds" % (torch.__version__, args.repetitions))
    print("%-22s %7s %10s %10s %10s" % ("x, k", "threads", "bib ms", "torch ms", "bib/torch"))
    for rows, n, k in CASES:
        name = "%dx%d-k%d" % (rows, n, k)
        x = torch.randn(rows, n, generator=torch.Generator().manual_seed(rows + n + k))
        onnx_path, bib_path, x_path, v_path, i_path = ("%s/%s.%s" % (d, name, ext)
                                                       for ext in ("onnx", "bib", "x.npy", "v.npy", "i.npy"))
        torch.onnx.export(TopK(k), x, onnx_path, input_names=["x"], output_names=["v", "i"],
                          opset_version=17)
        np.save(x_path, x.numpy())
        subprocess.run([sys.executable, args.importer, onnx_path, "-o", bib_path], check=True, timeout=300)
        subprocess.run([args.bib, "run", bib_path, "--input", "x=" + x_path, "--output", "v=" + v_path,
                        "--output", "i=" + i_path], check=True, timeout=600)
        want_i = np.argsort(-x.numpy(), axis=1, kind="stable")[:, :k]
        if not np.array_equal(np.load(i_path), want_i):
            sys.exit("topk: %s: bib's indices are not numpy's stable order" % name)
        if np.load(v_path).tobytes() != torch.topk(x, k, dim=-1)[0].numpy().tobytes():
            sys.exit("topk: %s: bib's values differ from torch's" % name)
        for t in threads:
            b, p = against_torch.best_of_rounds(torch, args, bib_path, x_path, t,
                                                lambda: torch.topk(x, k, dim=-1))
            print("%-22s %7d %10.3f %10.3f %9.2fx" % ("[%d,%d] k=%d" % (rows, n, k), t, b, p, b / p))


if __name__ == "__main__":
    main()
