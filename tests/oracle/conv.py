#!/usr/bin/python3
"""tests/oracle/conv.py: CONV, MAXPOOL, AVGPOOL and BATCHNORM against a direct
numpy oracle (float64, with an error bound), and bit identity across the
executors: the CPU at every SIMD level this machine has with 1 and 2 threads,
Vulkan (lavapipe here) and the CUDA kernels under the CPU emulation when
build/tests/libcuda_emu.so exists. Also batch invariance (one image's bytes
whatever the batch), the empty batch, a small CNN end to end and the error
messages. Prints one line per check and "N passed, N failed" last; exits 1 on
failure.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
BIB = os.environ.get("BIB", os.path.join(BUILD, "bib"))
T = tempfile.mkdtemp()
atexit.register(shutil.rmtree, T, True)
passed = failed = 0


def ok(name):
    global passed
    passed += 1
    print("ok   " + name)


def bad(name):
    global failed
    failed += 1
    print("FAIL " + name)


def levels():
    out = subprocess.run([BIB, "info"], capture_output=True, text=True).stdout
    have = ["scalar"]
    for lv in ("avx2", "avx512"):
        if lv in out.split("features:")[1].split("\n")[0].split() or (
            lv == "avx512" and "avx512f" in out
        ):
            have.append(lv)
    return have


LEVELS = levels()
EMU = os.path.abspath(os.path.join(BUILD, "tests", "libcuda_emu.so"))


def executors():
    """(label, extra args, extra env) for every executor of the identity check."""
    runs = []
    for lv in LEVELS:
        for th in (1, 2):
            runs.append(("cpu/%s/%d" % (lv, th), ["--backend=cpu", "--threads=%d" % th],
                         {"BIB_CPU_LEVEL": lv}))
    runs.append(("vulkan", ["--backend=vulkan", "--strict-device"], {}))
    if os.path.exists(EMU):
        runs.append(("cuda-emu", ["--backend=cuda", "--strict-device"],
                     {"BIB_CUDA_LIBRARY": EMU, "XDG_CACHE_HOME": T}))
    else:
        SKIPPED.add("cuda-emu: no %s (built with build/tests/test_cuda when nvcc exists)" % EMU)
    return runs


SKIPPED = set()
RUNS = executors()


def window_out(n, k, s, d, lo, hi, ceil=False):
    span = n + lo + hi - (d * (k - 1) + 1)
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + lo:
        out -= 1
    return out


# ---- the oracle ----------------------------------------------------------------


def conv_ref(x, w, g, s, d, p):
    """Direct convolution in float64 with zero padding; also sum |w||x|."""
    x2 = x.reshape(x.shape[0], x.shape[1], -1, x.shape[-1]) if x.ndim == 3 else x
    w2 = w.reshape(w.shape[0], w.shape[1], 1, w.shape[-1]) if w.ndim == 3 else w
    n, c, h, wd = x2.shape
    o, cg, kh, kw = w2.shape
    pt, pl, pb, pr = p
    oh = window_out(h, kh, s[0], d[0], pt, pb)
    ow = window_out(wd, kw, s[1], d[1], pl, pr)
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x2
    y = np.zeros((n, o, oh, ow))
    a = np.zeros((n, o, oh, ow))
    og = o // g
    for gi in range(g):
        for i in range(kh):
            for j in range(kw):
                win = xp[:, gi * cg:(gi + 1) * cg,
                         i * d[0]: i * d[0] + s[0] * (oh - 1) + 1: s[0],
                         j * d[1]: j * d[1] + s[1] * (ow - 1) + 1: s[1]]
                ws = w2[gi * og:(gi + 1) * og, :, i, j].astype(np.float64)
                y[:, gi * og:(gi + 1) * og] += np.einsum("ncij,oc->noij", win, ws)
                a[:, gi * og:(gi + 1) * og] += np.einsum("ncij,oc->noij", abs(win), abs(ws))
    if x.ndim == 3:
        y, a = y[:, :, 0, :], a[:, :, 0, :]
    return y, a, cg * kh * kw


def pool_ref(x, avg, k, s, d, p, ceil, include_pad):
    x2 = x.reshape(x.shape[0], x.shape[1], 1, x.shape[-1]) if x.ndim == 3 else x
    n, c, h, wd = x2.shape
    pt, pl, pb, pr = p
    oh = window_out(h, k[0], s[0], d[0], pt, pb, ceil)
    ow = window_out(wd, k[1], s[1], d[1], pl, pr, ceil)
    eh = (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1
    ew = (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1
    big_h, big_w = max(eh, h + pt + pb), max(ew, wd + pl + pr)
    val = np.full((n, c, big_h, big_w), 0.0 if avg else -np.inf)
    val[:, :, pt:pt + h, pl:pl + wd] = x2
    cnt = np.zeros((big_h, big_w))
    if include_pad:
        cnt[: h + pt + pb, : wd + pl + pr] = 1
    else:
        cnt[pt:pt + h, pl:pl + wd] = 1
    y = np.full((n, c, oh, ow), -np.inf)
    sums = np.zeros((n, c, oh, ow))
    counts = np.zeros((oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            sl = (slice(i * d[0], i * d[0] + s[0] * (oh - 1) + 1, s[0]),
                  slice(j * d[1], j * d[1] + s[1] * (ow - 1) + 1, s[1]))
            win = val[(slice(None), slice(None)) + sl]
            if avg:
                sums += win
                counts += cnt[sl]
            else:
                y = np.maximum(y, win)
    if avg:
        y = sums / counts
    if x.ndim == 3:
        y = y[:, :, 0, :]
    return y


# ---- running bib ------------------------------------------------------------------


def shape_text(shape, sym):
    return "[" + ", ".join(sym[i] if sym and sym[i] else str(v) for i, v in enumerate(shape)) + "]"


def program(op, inputs, out_shape, block):
    if op == "BATCHNORM_RELU":
        return program("BATCHNORM", inputs, out_shape, block).replace("BATCHNORM y,",
                                                                       "BATCHNORM_RELU y,")
    """inputs: list of (name, array, symbols or None); block: the 12 words or an eps."""
    lines = []
    for i, (name, arr, sym) in enumerate(inputs):
        lines.append(".input %s t%d f32%s" % (name, i, shape_text(arr.shape, sym)))
    out_sym = ["n"] + [None] * (len(out_shape) - 1)
    lines.append(".output y t9 f32%s" % shape_text(out_shape, out_sym))
    lines.append(".func main regs=12")
    if op == "BATCHNORM":
        lines.append("    LDI64 r0, 0x%x" % block)
        lines.append("    BATCHNORM y, t0, t1, r0")
    else:
        for i, v in enumerate(block):
            lines.append("    LDI r%d, %d" % (i, v))
        args = ", ".join("t%d" % i for i in range(len(inputs)))
        lines.append("    %s y, %s, r0" % (op, args))
    lines += ["    LDI r0, 0", "    HALT r0", ".end", ""]
    return "\n".join(lines)


def run(src, inputs, runs=None, tag="case"):
    """Runs src on every executor; returns {label: bytes of y.npy} (or an error string)."""
    path = os.path.join(T, tag + ".basm")
    with open(path, "w") as f:
        f.write(src)
    args = []
    for name, arr, _ in inputs:
        p = os.path.join(T, "%s.%s.npy" % (tag, name))
        np.save(p, arr.astype("<f4"))
        args.append("--input=%s=%s" % (name, p))
    res = {}
    for label, extra, env in runs or RUNS:
        out = os.path.join(T, "%s.y.npy" % tag)
        if os.path.exists(out):
            os.remove(out)
        e = dict(os.environ)
        e.update(env)
        r = subprocess.run([BIB, "run", path] + extra + args + ["--output=y=" + out],
                           capture_output=True, text=True, env=e)
        if r.returncode == 69:
            SKIPPED.add("%s: %s" % (label, r.stderr.strip()))
            continue
        if r.returncode != 0:
            res[label] = "exit %d: %s" % (r.returncode, r.stderr.strip())
            continue
        with open(out, "rb") as f:
            res[label] = f.read()
    return res


def load(b):
    p = os.path.join(T, "load.npy")
    with open(p, "wb") as f:
        f.write(b)
    return np.load(p)


def identical(name, res):
    """Every executor gave the same bytes; returns the array (or None)."""
    errs = {k: v for k, v in res.items() if isinstance(v, str)}
    if errs:
        bad("%s: %s" % (name, "; ".join("%s %s" % kv for kv in errs.items())))
        return None
    vals = list(res.values())
    diff = [k for k, v in res.items() if v != vals[0]]
    if diff:
        bad("%s: bytes differ from %s on %s" % (name, list(res)[0], ", ".join(diff)))
        return None
    ok("%s: bit-identical on %s" % (name, " ".join(res)))
    return load(vals[0])


def close(name, y, ref, bound):
    if y is None:
        return
    if y.shape != ref.shape:
        bad("%s: shape %s, numpy %s" % (name, y.shape, ref.shape))
        return
    err = np.abs(y.astype(np.float64) - ref)
    same_inf = np.isinf(ref) & (y == ref)
    worst = np.where(same_inf, 0, err - bound).max(initial=-1.0)
    if worst <= 0:
        ok("%s: within the bound of numpy's float64 result" % name)
    else:
        i = np.unravel_index(np.argmax(np.where(same_inf, 0, err - bound)), err.shape)
        bad("%s: at %s got %r, numpy %r (bound %g)" % (name, i, y[i], ref[i], bound[i]))


rng = np.random.default_rng(14)
U = 2.0 ** -24


def conv_case(name, x_shape, w_shape, g=1, s=(1, 1), d=(1, 1), p=(0, 0, 0, 0)):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    ref, absref, taps = conv_ref(x.astype(np.float64), w.astype(np.float64), g, s, d, p)
    block = [g, s[0], s[1], d[0], d[1], p[0], p[1], p[2], p[3], 0, 0, 0]
    sym = ["n", "c"] + [None] * (len(x_shape) - 2)
    inputs = [("x", x, sym), ("w", w, None)]
    y = identical("CONV " + name, run(program("CONV", inputs, ref.shape, block), inputs))
    close("CONV " + name, y, ref, (taps + 2) * U * absref + 1e-37)
    return x, w, block


def pool_case(name, op, x_shape, k, s=(1, 1), d=(1, 1), p=(0, 0, 0, 0), ceil=0, inc=0):
    x = rng.standard_normal(x_shape).astype(np.float32)
    avg = op == "AVGPOOL"
    ref = pool_ref(x.astype(np.float64), avg, k, s, d, p, ceil, inc)
    block = [k[0], k[1], s[0], s[1], d[0], d[1], p[0], p[1], p[2], p[3], ceil, inc]
    sym = ["n"] + [None] * (len(x_shape) - 1)
    inputs = [("x", x, sym)]
    y = identical(op + " " + name, run(program(op, inputs, ref.shape, block), inputs))
    # MAX is exact; the average is a chain of adds then one divide.
    taps = k[0] * k[1]
    bound = (taps + 2) * U * np.abs(ref) * 4 + (taps + 2) * U * 8 if avg else np.zeros(ref.shape)
    close(op + " " + name, y, ref, bound)


# ---- 2-D and 1-D convolutions -------------------------------------------------------
conv_case("2-D 3x3", (2, 3, 7, 9), (4, 3, 3, 3))
conv_case("2-D pads 1 stride 1", (1, 3, 8, 8), (5, 3, 3, 3), p=(1, 1, 1, 1))
conv_case("2-D asymmetric pads", (2, 2, 6, 7), (3, 2, 3, 2), p=(2, 0, 1, 3))
conv_case("2-D strides 2,3", (2, 3, 11, 13), (4, 3, 3, 3), s=(2, 3), p=(1, 1, 1, 1))
conv_case("2-D stride > kernel", (1, 2, 12, 12), (3, 2, 2, 2), s=(5, 4))
conv_case("2-D dilation 2,3", (1, 2, 13, 14), (3, 2, 3, 3), d=(2, 3), p=(2, 1, 0, 3))
conv_case("2-D groups 2", (2, 4, 6, 6), (6, 2, 3, 3), g=2, p=(1, 1, 1, 1))
conv_case("2-D depthwise", (2, 5, 9, 9), (5, 1, 3, 3), g=5, p=(1, 1, 1, 1), s=(2, 2))
conv_case("2-D depthwise multiplier 2", (1, 3, 6, 6), (6, 1, 3, 3), g=3)
conv_case("2-D 1x1", (3, 16, 5, 5), (8, 16, 1, 1))
conv_case("2-D long rows (vector body)", (1, 3, 4, 301), (4, 3, 3, 5), p=(1, 2, 1, 2))
conv_case("2-D many channels", (1, 64, 6, 6), (8, 64, 3, 3), p=(1, 1, 1, 1))
conv_case("1-D", (2, 3, 17), (4, 3, 5))
conv_case("1-D pads, stride, dilation", (2, 4, 20), (6, 4, 3), s=(1, 3), d=(1, 2),
          p=(0, 4, 0, 1))
conv_case("1-D depthwise", (1, 6, 10), (6, 1, 4), g=6, p=(0, 2, 0, 1))

# ---- pools --------------------------------------------------------------------------
for op in ("MAXPOOL", "AVGPOOL"):
    pool_case("2x2 stride 2", op, (2, 3, 8, 8), (2, 2), (2, 2))
    pool_case("3x3 stride 2 pads 1", op, (1, 2, 9, 10), (3, 3), (2, 2), p=(1, 1, 1, 1))
    pool_case("ceil_mode", op, (1, 2, 10, 11), (3, 3), (2, 2), ceil=1)
    pool_case("ceil_mode with pads", op, (1, 2, 7, 8), (3, 2), (2, 3), p=(1, 0, 1, 1), ceil=1)
    pool_case("asymmetric pads", op, (2, 2, 6, 7), (3, 3), (1, 2), p=(0, 2, 1, 0))
    pool_case("dilation 2", op, (1, 2, 11, 12), (3, 2), (1, 2), d=(2, 3), p=(1, 1, 1, 1))
    pool_case("stride > kernel", op, (1, 1, 13, 13), (2, 2), (5, 4))
    pool_case("1-D", op, (2, 3, 15), (1, 4), (1, 2), p=(0, 1, 0, 2))
    pool_case("1-D ceil_mode", op, (1, 2, 10), (1, 3), (1, 2), ceil=1)
pool_case("count_include_pad", "AVGPOOL", (1, 2, 7, 7), (3, 3), (2, 2), p=(1, 1, 1, 1), inc=1)
pool_case("count_include_pad asymmetric, ceil_mode", "AVGPOOL", (1, 2, 8, 9), (3, 3), (2, 2),
          p=(1, 0, 2, 1), ceil=1, inc=1)
pool_case("1-D count_include_pad", "AVGPOOL", (1, 2, 9), (1, 3), (1, 2), p=(0, 1, 0, 1), inc=1)

# ---- MAXPOOL: padding never wins, NaN propagates, -0 below +0 ---------------------------
x = np.array([[[[-5.0, -3.0, np.nan, 1.0], [-0.0, 0.0, -7.0, -8.0]]]], np.float32)
inputs = [("x", x, ["n", None, None, None])]
res = run(program("MAXPOOL", inputs, (1, 1, 1, 4), [2, 2, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0]), inputs)
y = identical("MAXPOOL special values", res)
if y is not None:
    bits = y.view(np.uint32).ravel().tolist()
    # Windows over columns -1..0 (the pad, -5, -0), 0..1, 1..2 and 2..3.
    want = [0x80000000, 0x00000000, 0x7FC00000, 0x7FC00000]
    if bits == want:
        ok("MAXPOOL: padding never wins (-0 stays -0), max(-0,+0) = +0, NaN canonical")
    else:
        bad("MAXPOOL special values: got %s, want %s" % ([hex(b) for b in bits],
                                                         [hex(b) for b in want]))

# ---- CONV: a padding tap is a +0 input (ONNX / PyTorch zero padding) ---------------------
x = np.array([[[1.0, 2.0]]], np.float32)
w = np.array([[[np.inf, 1.0]]], np.float32)
inputs = [("x", x, ["n", None, None]), ("w", w, None)]
res = run(program("CONV", inputs, (1, 1, 3), [1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0]), inputs)
y = identical("CONV special values", res)
if y is not None:
    bits = y.view(np.uint32).ravel().tolist()
    # Taps (pad, 1): Inf * +0 is NaN; (1, 2): Inf; (2, pad): Inf * 2 then fma(1, +0, Inf).
    want = [0x7FC00000, 0x7F800000, 0x7F800000]
    if bits == want:
        ok("CONV: an Inf weight on a padding tap gives NaN (canonical), as zero padding does")
    else:
        bad("CONV special values: got %s, want %s" % ([hex(b) for b in bits],
                                                      [hex(b) for b in want]))

# ---- AVGPOOL: the divide is correctly rounded -------------------------------------------
x = np.array([[[1.0, 1.0, 0.0, 0.1, 0.2, 0.4]]], np.float32)
inputs = [("x", x, ["n", None, None])]
res = run(program("AVGPOOL", inputs, (1, 1, 2), [1, 3, 1, 3, 1, 1, 0, 0, 0, 0, 0, 0]), inputs)
y = identical("AVGPOOL rounding", res)
if y is not None:
    s1 = np.float32(np.float32(np.float32(1.0) + np.float32(1.0)) + np.float32(0.0))
    s2 = np.float32(np.float32(np.float32(0.1) + np.float32(0.2)) + np.float32(0.4))
    want = np.array([s1 / np.float32(3), s2 / np.float32(3)], np.float32)
    if y.ravel().tobytes() == want.tobytes():
        ok("AVGPOOL: ((x0 + x1) + x2) / 3 with each step rounded to f32")
    else:
        bad("AVGPOOL rounding: got %r, want %r" % (y.ravel(), want))

# ---- BATCHNORM ----------------------------------------------------------------------
for shape in ((2, 3, 4, 5), (3, 4), (2, 5, 7), (1, 3, 2, 2, 2)):
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    st = np.stack([rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c),
                   rng.uniform(0.1, 2.0, c)]).astype(np.float32)
    eps = 1e-5
    bshape = (1, c) + (1,) * (len(shape) - 2)
    s64 = st.astype(np.float64)
    ref = (x - s64[2].reshape(bshape)) / np.sqrt(s64[3].reshape(bshape) + eps) * s64[0].reshape(
        bshape) + s64[1].reshape(bshape)
    inputs = [("x", x, ["n"] + [None] * (len(shape) - 1)), ("stats", st, None)]
    eps_bits = int(np.array(eps, np.float64).view(np.uint64))
    res = run(program("BATCHNORM", inputs, shape, eps_bits), inputs)
    name = "BATCHNORM %s" % (shape,)
    y = identical(name, res)
    # Each of sub, sqrt, add, div, mul, add rounds once: a few ulps of the terms.
    mag = (np.abs(x) + np.abs(s64[2].reshape(bshape))) / np.sqrt(
        s64[3].reshape(bshape) + eps) * np.abs(s64[0].reshape(bshape))
    close(name, y, ref, 8 * U * (mag + np.abs(ref)) + 1e-37)
    if y is not None and shape == (2, 3, 4, 5):
        xs, ms = x.astype(np.float32), st
        den = np.sqrt(ms[3] + np.float32(eps)).astype(np.float32).reshape(bshape)
        exact = (((xs - ms[2].reshape(bshape)) / den) * ms[0].reshape(bshape)
                 + ms[1].reshape(bshape)).astype(np.float32)
        if y.tobytes() == exact.tobytes():
            ok("BATCHNORM: the bits of ((x - mean) / sqrt(var + eps)) * scale + bias in f32")
        else:
            bad("BATCHNORM: differs from the f32 sequence of the spec")
        yr = identical("BATCHNORM_RELU %s" % (shape,),
                       run(program("BATCHNORM_RELU", inputs, shape, eps_bits), inputs))
        if yr is not None:
            want = np.where(y > 0, y, np.float32(0)).astype(np.float32)
            if yr.tobytes() == want.tobytes():
                ok("BATCHNORM_RELU: the bits of relu(BATCHNORM) (negatives and -0 to +0)")
            else:
                bad("BATCHNORM_RELU: differs from relu of BATCHNORM's bits")

# ---- batch invariance ---------------------------------------------------------------
x, w, block = conv_case("batch of 7", (7, 3, 10, 10), (4, 3, 3, 3), p=(1, 1, 1, 1), s=(1, 1))
ref, _, _ = conv_ref(x.astype(np.float64), w.astype(np.float64), 1, (1, 1), (1, 1),
                     (1, 1, 1, 1))
full = run(program("CONV", [("x", x, ["n", "c", None, None]), ("w", w, None)], ref.shape, block),
           [("x", x, ["n", "c", None, None]), ("w", w, None)], RUNS[:1], "full")
full = load(full[RUNS[0][0]])
good = True
for lo, hi in ((0, 1), (3, 4), (2, 5), (6, 7), (0, 6)):
    part = x[lo:hi]
    inputs = [("x", part, ["n", "c", None, None]), ("w", w, None)]
    res = run(program("CONV", inputs, (hi - lo,) + ref.shape[1:], block), inputs, tag="part")
    for label, b in res.items():
        if isinstance(b, str) or load(b).tobytes() != full[lo:hi].tobytes():
            bad("CONV batch invariance: images %d..%d on %s differ from the batch of 7"
                % (lo, hi - 1, label))
            good = False
if good:
    ok("CONV batch invariance: each image's bytes equal in batches of 1, 3, 6 and 7, "
       "on every executor")
pinputs = [("x", x, ["n", None, None, None])]
pb = [3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
pref = pool_ref(x.astype(np.float64), True, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, 1)
pfull = load(run(program("AVGPOOL", pinputs, pref.shape, pb), pinputs, RUNS[:1], "pf")[RUNS[0][0]])
pin1 = [("x", x[4:5], ["n", None, None, None])]
one = run(program("AVGPOOL", pin1, (1,) + pref.shape[1:], pb), pin1, tag="p1")
if all(not isinstance(b, str) and load(b).tobytes() == pfull[4:5].tobytes()
       for b in one.values()):
    ok("AVGPOOL batch invariance: image 4 alone equals its row of the batch of 7")
else:
    bad("AVGPOOL batch invariance")

# ---- the empty batch ----------------------------------------------------------------
x = np.zeros((0, 3, 5, 5), np.float32)
w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
inputs = [("x", x, ["n", "c", None, None]), ("w", w, None)]
res = run(program("CONV", inputs, (0, 2, 3, 3), [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]), inputs)
y = identical("CONV empty batch", res)
if y is not None and y.shape == (0, 2, 3, 3):
    ok("CONV empty batch: f32[0,2,3,3]")
elif y is not None:
    bad("CONV empty batch: shape %s" % (y.shape,))
inputs = [("x", x, ["n", None, None, None])]
res = run(program("MAXPOOL", inputs, (0, 3, 2, 2), [2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0]), inputs)
y = identical("MAXPOOL empty batch", res)

# ---- errors: one clear line ---------------------------------------------------------


def expect_error(name, op, inputs, out_shape, block, pattern):
    res = run(program(op, inputs, out_shape, block), inputs, RUNS[:1], "err")
    msg = list(res.values())[0]
    if isinstance(msg, str) and all(p in msg for p in pattern) and msg.count("\n") == 0:
        ok("error: " + name)
    else:
        bad("error %s: got %r, want %r" % (name, msg if isinstance(msg, str) else "success",
                                            pattern))


x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
ok_block = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
inp = [("x", x, None), ("w", w, None)]
expect_error("channel mismatch", "CONV", inp, (1, 4, 3, 3), ok_block,
             ["CONV channel mismatch", "[1,3,5,5]", "[4,2,3,3]", "groups 1", "pc 12"])
w = rng.standard_normal((4, 3, 7, 3)).astype(np.float32)
inp = [("x", x, None), ("w", w, None)]
expect_error("kernel larger than the padded input", "CONV", inp, (1, 4, 1, 3),
             [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
             ["CONV kernel larger than the padded input", "[1,3,5,5]", "[4,3,7,3]"])
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
inp = [("x", x, None), ("w", w, None)]
expect_error("zero stride", "CONV", inp, (1, 4, 3, 3), [1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
             ["CONV parameter stride h (r1 = 0) must be 1 to 2147483647"])
expect_error("zero groups", "CONV", inp, (1, 4, 3, 3), [0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
             ["CONV parameter groups (r0 = 0) must be 1 to 2147483647"])
expect_error("negative pad", "CONV", inp, (1, 4, 3, 3), [1, 1, 1, 1, 1, 0, -1, 0, 0, 0, 0, 0],
             ["CONV parameter pad left (r6 = -1) must be 0 to 2147483647"])
expect_error("reserved word", "CONV", inp, (1, 4, 3, 3), [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 7, 0],
             ["CONV parameter word 10 (r10 = 7) must be 0 (reserved)"])
w3 = rng.standard_normal((4, 3, 3)).astype(np.float32)
expect_error("rank mismatch", "CONV", [("x", x, None), ("w", w3, None)], (1, 4, 3, 3), ok_block,
             ["CONV needs x [N,C,L] with w [O,C/g,K]", "[4,3,3]"])
x1 = rng.standard_normal((1, 3, 9)).astype(np.float32)
expect_error("1-D with a stride h", "CONV", [("x", x1, None), ("w", w3, None)], (1, 4, 7),
             [1, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
             ["CONV parameter stride h (r1 = 2) must be 1 for a 1-D convolution"])
w = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
expect_error("outputs not a multiple of groups", "CONV", [("x", x, None), ("w", w, None)],
             (1, 5, 3, 3), [3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
             ["CONV channel mismatch", "groups 3"])
pinp = [("x", x, None)]
expect_error("pool zero stride", "MAXPOOL", pinp, (1, 3, 2, 2),
             [2, 2, 2, 0, 1, 1, 0, 0, 0, 0, 0, 0],
             ["MAXPOOL parameter stride w (r3 = 0) must be 1 to 2147483647"])
expect_error("pool kernel larger than the padded input", "AVGPOOL", pinp, (1, 3, 1, 1),
             [6, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
             ["AVGPOOL kernel larger than the padded input", "[1,3,5,5]", "kernel 6,2"])
expect_error("MAXPOOL count_include_pad", "MAXPOOL", pinp, (1, 3, 4, 4),
             [2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1],
             ["MAXPOOL parameter count_include_pad (r11 = 1) must be 0 (reserved for MAXPOOL)"])
expect_error("ceil_mode 2", "AVGPOOL", pinp, (1, 3, 4, 4), [2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 2, 0],
             ["AVGPOOL parameter ceil_mode (r10 = 2) must be 0 or 1"])
st = np.zeros((4, 2), np.float32)
expect_error("BATCHNORM channel mismatch", "BATCHNORM", [("x", x, None), ("stats", st, None)],
             (1, 3, 5, 5), 0, ["BATCHNORM statistics", "are [4,2]", "must be [4,3]"])

# ---- the GPU executors run these kernels themselves (no fallback to the CPU) ---------------
x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
stt = np.stack([np.ones(2), np.zeros(2), np.zeros(2), np.ones(2)]).astype(np.float32)
# One block for all: CONV reads groups 1, strides 1, dilations 1, pad top 1;
# the pools kernel 1x1, strides 1, dilations 1, no pads.
src = """.input x t0 f32[1, 2, 6, 6]
.input w t1 f32[2, 2, 3, 3]
.input s t2 f32[4, 2]
.func main regs=12
""" + "".join("    LDI r%d, %d\n" % (i, v) for i, v in enumerate([1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0])) + """\
    CONV t3, t0, t1, r0
    MAXPOOL t4, t3, r0
    AVGPOOL t5, t3, r0
    BATCHNORM t6, t3, t2, r0
    BATCHNORM_RELU t7, t3, t2, r0
    LDI r0, 0
    HALT r0
.end
"""
path = os.path.join(T, "placed.basm")
with open(path, "w") as f:
    f.write(src)
args = []
for name, arr in (("x", x), ("w", w), ("s", stt)):
    np.save(os.path.join(T, name + ".p.npy"), arr)
    args.append("--input=%s=%s" % (name, os.path.join(T, name + ".p.npy")))
for label, extra, env in RUNS:
    if not label.startswith(("vulkan", "cuda")):
        continue
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run([BIB, "run", path, "--profile"] + extra + args, capture_output=True,
                       text=True, env=e)
    if r.returncode == 69:
        continue
    rows = {ln.split()[0]: ln.split()[1] for ln in r.stderr.splitlines() if len(ln.split()) > 1}
    want = label.split("-")[0]
    missing = [op for op in ("CONV", "MAXPOOL", "AVGPOOL", "BATCHNORM", "BATCHNORM_RELU")
               if rows.get(op) != want]
    if r.returncode == 0 and not missing:
        ok("%s runs CONV, MAXPOOL, AVGPOOL, BATCHNORM and BATCHNORM_RELU itself (--profile)"
           % label)
    else:
        bad("%s: exit %d, not run there: %s; %s" % (label, r.returncode, missing, r.stderr))

# ---- examples/cnn.basm: Conv2d -> bias -> ReLU -> MaxPool2d -> Linear -------------------
with open(os.path.join(ROOT, "examples", "cnn.basm")) as f:
    CNN = f.read()
x = rng.standard_normal((6, 1, 12, 12)).astype(np.float32)
w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
cb = rng.standard_normal(4).astype(np.float32)
bn = np.stack([np.ones(4), cb, np.zeros(4), np.ones(4)]).astype(np.float32)
W = (rng.standard_normal((144, 10)) * 0.1).astype(np.float32)
b = rng.standard_normal(10).astype(np.float32)
h, _, _ = conv_ref(x.astype(np.float64), w.astype(np.float64), 1, (1, 1), (1, 1), (1, 1, 1, 1))
h = np.maximum(h + cb.reshape(1, 4, 1, 1), 0)
h = pool_ref(h, False, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 0, 0)
ref = h.reshape(6, 144) @ W.astype(np.float64) + b


def cnn(xs, tag):
    inputs = [("x", xs, ["n", None, None, None]), ("w", w, None), ("bn", bn, None),
              ("W", W, None), ("b", b, None)]
    return run(CNN, inputs, tag=tag)


y = identical("CNN (Conv2d, bias, ReLU, MaxPool2d, Linear)", cnn(x, "cnn"))
if y is not None:
    if y.shape == (6, 10) and np.allclose(y, ref, rtol=1e-5, atol=1e-5):
        ok("CNN: matches numpy's float64 forward pass (max error %.2g)" % abs(y - ref).max())
    else:
        bad("CNN: differs from numpy: %s" % (abs(y - ref).max() if y.shape == ref.shape else
                                            y.shape))
    one = cnn(x[2:3], "cnn1")
    three = cnn(x[3:6], "cnn3")
    if all(not isinstance(v, str) and load(v).tobytes() == y[2:3].tobytes()
           for v in one.values()) and all(
            not isinstance(v, str) and load(v).tobytes() == y[3:6].tobytes()
            for v in three.values()):
        ok("CNN batch invariance: images alone and in threes give the bytes of the batch of 6")
    else:
        bad("CNN batch invariance: an image's bytes change with the batch")

# ---- PyTorch's definitions (when torch is installed): the output sizes, ceil_mode, --------
# ---- count_include_pad's divisor, groups and dilation ----------------------------------------
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
    SKIPPED.add("PyTorch cross-check: torch is not installed")
if torch is not None:
    def torch_case(name, op, x, block, ref_fn, w=None):
        inputs = [("x", x, None)] + ([("w", w, None)] if w is not None else [])
        with torch.no_grad():
            ref = ref_fn(torch.from_numpy(x)).numpy()
        res = run(program(op, inputs, ref.shape, block), inputs, RUNS[:1], "torch")
        got = list(res.values())[0]
        if isinstance(got, str):
            bad("PyTorch %s: %s" % (name, got))
            return
        y = load(got)
        if y.shape == ref.shape and np.allclose(y, ref, rtol=1e-5, atol=1e-5):
            ok("PyTorch %s: same shape %s and values" % (name, ref.shape))
        else:
            bad("PyTorch %s: shape %s vs %s, max diff %s" % (
                name, y.shape, ref.shape, abs(y - ref).max() if y.shape == ref.shape else "-"))

    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
    for k, s_, p_, ceil, inc in (((3, 3), (2, 2), 1, 1, 1), ((3, 2), (2, 3), 1, 1, 0),
                                 ((2, 2), (2, 2), 1, 1, 1), ((3, 3), (3, 3), 1, 0, 1),
                                 ((4, 4), (3, 3), 2, 1, 1)):
        blk = [k[0], k[1], s_[0], s_[1], 1, 1, p_, p_, p_, p_, ceil, inc]
        torch_case("AvgPool2d k%s s%s p%d ceil %d include_pad %d" % (k, s_, p_, ceil, inc),
                   "AVGPOOL", x, blk,
                   lambda t, k=k, s_=s_, p_=p_, ceil=ceil, inc=inc: F.avg_pool2d(
                       t, k, s_, p_, ceil_mode=bool(ceil), count_include_pad=bool(inc)))
    for k, s_, p_, d, ceil in (((3, 3), (2, 2), 1, 1, 1), ((2, 3), (2, 2), 1, 2, 1),
                               ((3, 3), (1, 2), 0, 2, 0)):
        blk = [k[0], k[1], s_[0], s_[1], d, d, p_, p_, p_, p_, ceil, 0]
        torch_case("MaxPool2d k%s s%s p%d d%d ceil %d" % (k, s_, p_, d, ceil), "MAXPOOL", x, blk,
                   lambda t, k=k, s_=s_, p_=p_, d=d, ceil=ceil: F.max_pool2d(
                       t, k, s_, p_, d, ceil_mode=bool(ceil)))
    x4 = rng.standard_normal((2, 4, 9, 10)).astype(np.float32)
    for g, st_, p_, d in ((1, (1, 1), 1, 1), (2, (2, 1), 2, 2), (4, (1, 3), 1, 1)):
        w = rng.standard_normal((8, 4 // g, 3, 3)).astype(np.float32)
        blk = [g, st_[0], st_[1], d, d, p_, p_, p_, p_, 0, 0, 0]
        torch_case("Conv2d groups %d stride %s pad %d dilation %d" % (g, st_, p_, d), "CONV", x4,
                   blk, lambda t, w=w, g=g, st_=st_, p_=p_, d=d: F.conv2d(
                       t, torch.from_numpy(w), None, st_, p_, d, g), w)
    x1 = rng.standard_normal((2, 4, 17)).astype(np.float32)
    w1 = rng.standard_normal((6, 2, 4)).astype(np.float32)
    torch_case("Conv1d groups 2 stride 2 pad 3 dilation 2", "CONV", x1,
               [2, 1, 2, 1, 2, 0, 3, 0, 3, 0, 0, 0],
               lambda t: F.conv1d(t, torch.from_numpy(w1), None, 2, 3, 2, 2), w1)
    torch_case("AvgPool1d k3 s2 p1 ceil include_pad", "AVGPOOL", x1,
               [1, 3, 1, 2, 1, 1, 0, 1, 0, 1, 1, 1],
               lambda t: F.avg_pool1d(t, 3, 2, 1, ceil_mode=True, count_include_pad=True))

# ---- the verifier: the parameter block must fit the frame ---------------------------------
src = """.input x t0 f32[1, 3, 5, 5]
.output y t9 f32[1, 3, 4, 4]
.func main regs=12
    MAXPOOL y, t0, r1
    LDI r0, 0
    HALT r0
.end
"""
path = os.path.join(T, "verify.basm")
with open(path, "w") as f:
    f.write(src)
r = subprocess.run([BIB, "run", path, "--input=x=" + os.path.join(T, "err.x.npy")],
                   capture_output=True, text=True)
if r.returncode != 0 and "parameter block r1..r12" in r.stderr and "12 registers" in r.stderr:
    ok("verifier: a parameter block past the frame is refused")
else:
    bad("verifier: exit %d, %r" % (r.returncode, r.stderr))

for s in sorted(SKIPPED):
    print("SKIP: " + s)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
