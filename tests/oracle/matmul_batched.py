#!/usr/bin/python3
"""tests/oracle/matmul_batched.py: MATMUL and LINEAR on numpy.matmul's shapes
(batch axes broadcast, rank-1 operands), run through `bib run`.

Checks, per case:
  - the result's shape is numpy.matmul's;
  - every element is within the fma-chain bound of the float64 reference:
    |C - C_ref| <= gamma_K (|A| |B|) elementwise, gamma_K = K u / (1 - K u);
  - the bytes are the same on the CPU with 1 and 2 threads and on Vulkan
    (a SKIP line when there is no Vulkan device);
  - batch invariance: each batch index's matrix equals, byte for byte, the
    result of the same opcode on that index's operands alone.
Error cases: the messages for inner and batch dimensions that do not agree.
Prints one line per check and `N passed, N failed` last; exits 1 on failure.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIB = os.environ.get("BIB", os.path.join(ROOT, os.environ.get("BUILD", "build"), "bib"))
U = 2.0 ** -24

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok    " if ok else "FAIL  ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def shape_text(s):
    return "f32[" + ", ".join(str(d) for d in s) + "]"


def program(op, a, b, bias):
    lines = [".input a t0 " + shape_text(a.shape), ".input b t1 " + shape_text(b.shape)]
    if bias is not None:
        lines.append(".input bias t2 " + shape_text(bias.shape))
    lines.append(".output y t3")
    lines.append(".func main regs=1")
    lines.append("    %s t3, a, b%s" % (op, ", bias" if bias is not None else ""))
    lines += ["    LDI r0, 0", "    HALT r0", ".end", ""]
    return "\n".join(lines)


def run(tmp, op, a, b, bias=None, extra=()):
    src = os.path.join(tmp, "p.basm")
    with open(src, "w") as f:
        f.write(program(op, a, b, bias))
    args = [BIB, "run", src, "--input", "a=" + os.path.join(tmp, "a.npy"), "--input",
            "b=" + os.path.join(tmp, "b.npy"), "--output", "y=" + os.path.join(tmp, "y.npy")]
    np.save(os.path.join(tmp, "a.npy"), a)
    np.save(os.path.join(tmp, "b.npy"), b)
    if bias is not None:
        np.save(os.path.join(tmp, "bias.npy"), bias)
        args += ["--input", "bias=" + os.path.join(tmp, "bias.npy")]
    p = subprocess.run(args + list(extra), capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    with open(os.path.join(tmp, "y.npy"), "rb") as f:
        return f.read(), ""


def load(raw, tmp):
    path = os.path.join(tmp, "raw.npy")
    with open(path, "wb") as f:
        f.write(raw)
    return np.load(path)


def vulkan_ok():
    p = subprocess.run([BIB, "info"], capture_output=True, text=True)
    return "vulkan" in p.stdout and "not available" not in p.stdout.split("vulkan", 1)[1][:200]


def case(tmp, rng, op, ashape, bshape, with_bias=False):
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    n = bshape[-1] if len(bshape) >= 2 else 1
    bias = rng.standard_normal((n,)).astype(np.float32) if with_bias else None
    name = "%s %s . %s" % (op, list(ashape), list(bshape))
    raw, err = run(tmp, op, a, b, bias, ("--backend=cpu", "--threads=1"))
    if raw is None:
        check(False, name + ": " + err)
        return
    y = load(raw, tmp)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    mag = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    if bias is not None:
        ref = ref + bias
        mag = mag + np.abs(bias)
    if op == "LINEAR_RELU":
        ref = np.maximum(ref, 0.0)
    check(y.shape == ref.shape, "%s: shape %s (numpy %s)" % (name, y.shape, ref.shape))
    if y.shape != ref.shape:
        return
    k = ashape[-1]
    gamma = (k + 1) * U / (1 - (k + 1) * U)
    worst = float(np.max(np.abs(y - ref) / (gamma * mag + 1e-45), initial=0.0))
    check(worst <= 1.0, "%s: error %.3f of the fma-chain bound" % (name, worst))
    raw2, err = run(tmp, op, a, b, bias, ("--backend=cpu", "--threads=2"))
    check(raw2 == raw, name + ": same bytes with 2 threads" + (" (" + err + ")" if err else ""))
    if VULKAN:
        raw3, err = run(tmp, op, a, b, bias, ("--backend=vulkan",))
        check(raw3 == raw, name + ": same bytes on vulkan" + (" (" + err + ")" if err else ""))
    # Batch invariance: each batch index alone gives the same matrix.
    nb = max(len(ashape), len(bshape)) - 2
    if nb > 0 and y.size > 0:
        bat = y.shape[:nb]
        for idx in [tuple(0 for _ in bat), tuple(d - 1 for d in bat)]:
            ai = a[tuple(i if d > 1 else 0 for i, d in zip(idx[nb - (a.ndim - 2):], a.shape))] \
                if a.ndim > 2 else a
            bi = b[tuple(i if d > 1 else 0 for i, d in zip(idx[nb - (b.ndim - 2):], b.shape))] \
                if b.ndim > 2 else b
            r1, err = run(tmp, op, np.ascontiguousarray(ai), np.ascontiguousarray(bi), bias,
                          ("--backend=cpu",))
            same = r1 is not None and load(r1, tmp).tobytes() == y[idx].tobytes()
            check(same, "%s: batch index %s alone gives the same bytes" % (name, list(idx)))


def refused(tmp, ashape, bshape, want):
    a = np.ones(ashape, np.float32)
    b = np.ones(bshape, np.float32)
    raw, err = run(tmp, "MATMUL", a, b, None, ("--backend=cpu",))
    check(raw is None and want in err, "MATMUL %s . %s refused: %s" % (list(ashape), list(bshape), err))


VULKAN = vulkan_ok()


def main():
    rng = np.random.default_rng(7)
    if not VULKAN:
        print("SKIP: the Vulkan comparisons: no Vulkan device (bib info)")
    with tempfile.TemporaryDirectory() as tmp:
        for ashape, bshape in [
            ((3, 4), (4, 5)),
            ((2, 3, 4), (4, 5)),
            ((2, 3, 4), (2, 4, 5)),
            ((2, 1, 3, 4), (5, 4, 6)),
            ((1, 2, 1, 2, 3, 4), (2, 1, 4, 5)),
            ((3, 4, 7), (7,)),
            ((7,), (2, 7, 3)),
            ((7,), (7,)),
            ((5, 2, 33), (33, 17)),
            ((0, 3, 4), (4, 5)),
            ((2, 3, 0), (2, 0, 5)),
        ]:
            case(tmp, rng, "MATMUL", ashape, bshape)
        case(tmp, rng, "LINEAR", (2, 3, 4), (4, 5), with_bias=True)
        case(tmp, rng, "LINEAR_RELU", (4, 3, 8), (4, 8, 5), with_bias=True)
        refused(tmp, (2, 3, 4), (5, 6), "inner dimensions differ")
        refused(tmp, (2, 3, 4), (3, 4, 5), "batch dimensions do not broadcast")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
