#!/usr/bin/python3
"""Time per run of a VM whose inputs are kept: bib_vm_run again without
giving them anew, what a host that runs one model many times pays per run
beyond its kernels (spec/cli.md, Files: the run shares its inputs and
constants instead of copying them).

Usage: bench/kept_run.py [--runs N] [MODULE NAME=FILE.npy ...]
Without a module: a program that takes two f32[4096,4096] inputs (64 MB
each) and halts. BIB_LIBRARY picks the libbib to measure (the binding's
default: this tree's build/). Prints the best and the mean of N runs."""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import bib  # noqa: E402

TWO_INPUTS = """.input a t0 f32[?, ?]
.input b t1 f32[?, ?]
.func main regs=1
    LDI r0, 0
    HALT r0
.end
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("module", nargs="?")
    ap.add_argument("inputs", nargs="*", help="NAME=FILE.npy")
    args = ap.parse_args()
    vm = bib.Vm(max_memory=4 << 30)
    if args.module:
        vm.load_file(args.module)
        for spec in args.inputs:
            name, path = spec.split("=", 1)
            vm.set_input(name, np.load(path))
        what = args.module
    else:
        vm.load(bib.assemble(TWO_INPUTS))
        x = np.arange(4096 * 4096, dtype=np.float32).reshape(4096, 4096)
        vm.set_input("a", x)
        vm.set_input("b", x)
        what = "two f32[4096,4096] inputs, HALT"
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        vm.run()
        times.append(time.perf_counter() - t0)
    print("%s: best %.3f ms, mean %.3f ms per run over %d runs (%s)"
          % (what, min(times) * 1e3, sum(times) / len(times) * 1e3, args.runs, bib.library_path()))


if __name__ == "__main__":
    main()
