#!/usr/bin/python3
"""Convolutional networks imported from ONNX, against torch on the same CPU.

    cnn.py WORKDIR [--bib build/bib] [--importer tools/bib-onnx] [--repetitions N]

ResNet-18 and MobileNetV2 (the published architectures at 224 x 224, written
out here since torchvision is not a dependency; seeded random weights and
batch-norm statistics, eval mode) are exported by torch.onnx, imported by
bib-onnx and run by `bib bench` on the CPU executor. Before timing, BIB's
output is checked against torch's (relative error at most 1e-4) and the
bytes are compared across the CPU levels this machine has (scalar, avx2,
avx512): they must be the same. Then, on 1 thread and on all CPUs, three
rounds alternate BIB (`bib bench`, median of N runs) and torch (median of N
calls under torch.no_grad, same thread count); the table shows each one's
best round and BIB / torch (below 1: BIB is faster).
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

import against_torch


def bn(c):
    return nn.BatchNorm2d(c)


class Basic(nn.Module):
    def __init__(self, i, o, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(i, o, 3, stride, 1, bias=False), bn(o)
        self.c2, self.b2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), bn(o)
        self.down = None
        if stride != 1 or i != o:
            self.down = nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), bn(o))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), bn(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, i = [], 64
        for o, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                          (512, 1)]:
            blocks.append(Basic(i, o, stride))
            i = o
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.fc(torch.flatten(x, 1))


class InvertedResidual(nn.Module):
    def __init__(self, i, o, stride, expand):
        super().__init__()
        h = i * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(i, h, 1, bias=False), bn(h), nn.ReLU6()]
        layers += [nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), bn(h), nn.ReLU6(),
                   nn.Conv2d(h, o, 1, bias=False), bn(o)]
        self.f = nn.Sequential(*layers)
        self.residual = stride == 1 and i == o

    def forward(self, x):
        return x + self.f(x) if self.residual else self.f(x)


class MobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        layers, i = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), bn(32), nn.ReLU6()], 32
        for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
            for k in range(n):
                layers.append(InvertedResidual(i, c, s if k == 0 else 1, t))
                i = c
        layers += [nn.Conv2d(i, 1280, 1, bias=False), bn(1280), nn.ReLU6()]
        self.f = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.f(x), 1), 1))


def build(name):
    torch.manual_seed(0)
    m = {"resnet18": ResNet18, "mobilenetv2": MobileNetV2}[name]()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.1, 0.1)
    return m.eval()


def cpu_levels():
    flags = open("/proc/cpuinfo").read()
    levels = ["scalar"]
    if " avx2" in flags and " fma" in flags:
        levels.append("avx2")
    if " avx512f" in flags and " avx512bw" in flags and " avx512dq" in flags and " avx512vl" in flags:
        levels.append("avx512")
    return levels


def main():
    args = against_torch.arguments(__doc__, 10)
    d = args.workdir
    threads = sorted({1, os.cpu_count() or 1})
    print("convolutional networks imported from ONNX: bib (cpu) vs torch %s, f32[1, 3, 224, 224], "
          "median of %d runs, best of 3 alternating rounds" % (torch.__version__, args.repetitions))
    print("%-12s %7s %10s %10s %10s" % ("model", "threads", "bib ms", "torch ms", "bib/torch"))
    for name in ("resnet18", "mobilenetv2"):
        m = build(name)
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
        onnx_path, bib_path, x_path = ("%s/%s.%s" % (d, name, ext) for ext in ("onnx", "bib", "x.npy"))
        torch.onnx.export(m, x, onnx_path, input_names=["x"], output_names=["y"], opset_version=17)
        np.save(x_path, x.numpy())
        subprocess.run([sys.executable, args.importer, onnx_path, "-o", bib_path], check=True, timeout=300)
        with torch.no_grad():
            want = m(x).numpy().astype(np.float64)
        outs = {}
        for level in cpu_levels():
            y_path = "%s/%s.y.%s.npy" % (d, name, level)
            env = dict(os.environ, BIB_CPU_LEVEL=level)
            subprocess.run([args.bib, "run", bib_path, "--input", "x=" + x_path, "--output", "y=" + y_path],
                           check=True, timeout=600, env=env)
            outs[level] = open(y_path, "rb").read()
        got = np.load(y_path).astype(np.float64)
        err = np.abs(got - want).max() / np.abs(want).max()
        if not err <= 1e-4:
            sys.exit("cnn: %s: bib's output differs from torch's (relative error %.3g)" % (name, err))
        if len(set(outs.values())) != 1:
            sys.exit("cnn: %s: the CPU levels %s give different bytes" % (name, ", ".join(outs)))
        print("  %s: relative error against torch %.2g; %s: the same bytes" % (name, err, ", ".join(outs)))
        for t in threads:
            with torch.no_grad():
                b, p = against_torch.best_of_rounds(torch, args, bib_path, x_path, t, lambda: m(x))
            print("%-12s %7d %10.2f %10.2f %9.2fx" % (name, t, b, p, b / p))


if __name__ == "__main__":
    main()
