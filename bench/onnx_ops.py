#!/usr/bin/python3
"""TopK and CumSum imported from ONNX, against torch on the same CPU.

    onnx_ops.py WORKDIR [--bib build/bib] [--importer tools/bib-onnx] [--repetitions N]

torch.topk and torch.cumsum at the sizes models use them (a classifier's top
5 of 1,000 for a batch, a sampler's top 50 of a 128k vocabulary, top 40 of
32k, half of each row, a whole sort; running sums along rows, down columns
and along one long row) are exported by torch.onnx, imported by bib-onnx
(TOPK_DESC, CUMSUM) and run by `bib bench` on the CPU executor. Before
timing, each output is checked: TopK's indices against numpy's stable
argsort (the order TOPK promises: ties by the lower index; torch leaves the
order of ties free) and its values against torch's; CumSum's bytes against
numpy.cumsum's (one float32 add after another, as CUMSUM promises; torch
adds in double). Then, on 1 thread and on all CPUs, three rounds alternate
BIB (`bib bench`, median of N runs) and torch (median of N calls, same
thread count); the table shows each one's best round and BIB / torch (below
1: BIB is faster).
"""
import os
import subprocess
import sys

import numpy as np
import torch

import against_torch


class TopK(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return torch.topk(x, self.k, dim=-1)


class CumSum(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, self.dim)


def topk_ok(x, k):
    def ok(out):
        want_i = np.argsort(-x.numpy(), axis=1, kind="stable")[:, :k]
        if not np.array_equal(out[1], want_i):
            return "bib's indices are not numpy's stable order"
        if out[0].tobytes() != torch.topk(x, k, dim=-1)[0].numpy().tobytes():
            return "bib's values differ from torch's"
        return None
    return ok


def cumsum_ok(x, dim):
    def ok(out):
        if out[0].tobytes() != np.cumsum(x.numpy(), dim).tobytes():
            return "bib's running sums are not numpy.cumsum's bytes"
        return None
    return ok


def cases():
    for rows, n, k in ((256, 1000, 5), (8, 128000, 50), (64, 32000, 40), (256, 1000, 500), (16, 4096, 4096)):
        x = torch.randn(rows, n, generator=torch.Generator().manual_seed(rows + n + k))
        yield ("topk [%d,%d] k=%d" % (rows, n, k), TopK(k), x, 2, topk_ok(x, k),
               lambda x=x, k=k: torch.topk(x, k, dim=-1))
    for rows, n, dim in ((256, 1024, 1), (1024, 256, 0), (1, 1 << 20, 1)):
        x = torch.randn(rows, n, generator=torch.Generator().manual_seed(rows + n))
        yield ("cumsum [%d,%d] dim=%d" % (rows, n, dim), CumSum(dim), x, 1, cumsum_ok(x, dim),
               lambda x=x, dim=dim: torch.cumsum(x, dim))


def main():
    args = against_torch.arguments(__doc__, 20)
    d = args.workdir
    threads = sorted({1, os.cpu_count() or 1})
    print("TopK and CumSum imported from ONNX: bib (cpu) vs torch %s, median of %d runs, best of 3 "
          "alternating rounds" % (torch.__version__, args.repetitions))
    print("%-28s %7s %10s %10s %10s" % ("case", "threads", "bib ms", "torch ms", "bib/torch"))
    for case_no, (name, module, x, outputs, ok, peer) in enumerate(cases()):
        base = "%s/case%d" % (d, case_no)
        onnx_path, bib_path, x_path = base + ".onnx", base + ".bib", base + ".x.npy"
        names = ["y%d" % i for i in range(outputs)]
        torch.onnx.export(module, x, onnx_path, input_names=["x"], output_names=names, opset_version=17)
        np.save(x_path, x.numpy())
        subprocess.run([sys.executable, args.importer, onnx_path, "-o", bib_path], check=True, timeout=300)
        run = [args.bib, "run", bib_path, "--input", "x=" + x_path]
        for n in names:
            run += ["--output", "%s=%s.%s.npy" % (n, base, n)]
        subprocess.run(run, check=True, timeout=600)
        why = ok([np.load("%s.%s.npy" % (base, n)) for n in names])
        if why:
            sys.exit("onnx_ops: %s: %s" % (name, why))
        for t in threads:
            b, p = against_torch.best_of_rounds(torch, args, bib_path, x_path, t, peer)
            print("%-28s %7d %10.3f %10.3f %9.2fx" % (name, t, b, p, b / p), flush=True)


if __name__ == "__main__":
    main()
