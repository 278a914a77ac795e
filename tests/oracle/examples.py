#!/usr/bin/python3
"""tests/oracle/examples.py: examples/matmul.basm, mlp.basm and attention.basm
against float64 NumPy references, on random inputs of several sizes (1, 7, 33,
non-square), run through `bib run --input/--output` on every executor.

Checks, per case:
  - the CPU executor's output is within the error bound of the float64
    reference (bounds below);
  - the Vulkan executor's output file is byte-identical to the CPU's (skipped,
    with a SKIP line and the reason, when there is no Vulkan device).

Bounds. MATMUL: every element is one fp32 chain of fma over k, so
|C - C_ref| <= gamma_K * (|A| |B|) elementwise, gamma_K = K u / (1 - K u),
u = 2^-24 (the classical bound for any order of a K-term dot product). The
figure reported is the largest |C - C_ref| / (|A| |B|), in units of u.
MLP and ATTENTION end in a softmax or a convex combination, so errors are
measured as |y - y_ref| / (|y_ref| + 1) with bound 1e-5 (about 170 u), a
margin over the few ulps each exp, sum and division contributes.

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
MIXED_BOUND = 1e-5

passed = 0
failed = 0
worst = {}


def report(ok, text):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + text)
    else:
        failed += 1
        print("FAIL " + text)


def run(example, backend, inputs, outputs, tmp):
    args = [BIB, "run", os.path.join(ROOT, "examples", example), "--backend=" + backend]
    for name, value in inputs.items():
        path = os.path.join(tmp, name + ".npy")
        np.save(path, np.ascontiguousarray(value, dtype="<f4"))
        args += ["--input", f"{name}={path}"]
    paths = {}
    for name in outputs:
        paths[name] = os.path.join(tmp, f"{name}.{backend}.npy")
        args += ["--output", f"{name}={paths[name]}"]
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stderr.strip(), paths


def vulkan_reason():
    """None when Vulkan runs here, else why not."""
    with tempfile.TemporaryDirectory() as tmp:
        a = np.ones((1, 1), np.float32)
        rc, err, _ = run("matmul.basm", "vulkan", {"A": a, "B": a}, ["C"], tmp)
        return None if rc == 0 else (err or f"exit {rc}")


def check(example, label, inputs, output, reference, bound_kind, vulkan):
    with tempfile.TemporaryDirectory() as tmp:
        rc, err, paths = run(example, "cpu", inputs, [output], tmp)
        if rc != 0:
            report(False, f"{label}: cpu run failed (exit {rc}): {err}")
            return
        got = np.load(paths[output])
        ref, scale = reference(inputs)
        if got.shape != ref.shape:
            report(False, f"{label}: shape {got.shape}, want {ref.shape}")
            return
        diff = np.abs(got.astype(np.float64) - ref)
        if bound_kind == "gamma":
            k = scale[1]
            gamma = k * U / (1 - k * U)
            denom = np.where(scale[0] > 0, scale[0], 1.0)
            err_u = float((diff / denom).max() / U) if diff.size else 0.0
            ok = bool(np.all(diff <= gamma * scale[0]))
            key = example
            worst[key] = max(worst.get(key, 0.0), err_u)
            report(ok, f"{label}: max |C-ref|/(|A||B|) = {err_u:.3f} u (bound gamma_K = {k:.0f} u)")
        else:
            rel = float((diff / (np.abs(ref) + 1)).max()) if diff.size else 0.0
            worst[example] = max(worst.get(example, 0.0), rel)
            report(rel <= MIXED_BOUND, f"{label}: max |y-ref|/(|ref|+1) = {rel:.3e} (bound {MIXED_BOUND:g})")
        if vulkan is None:
            rc, err, vpaths = run(example, "vulkan", inputs, [output], tmp)
            if rc != 0:
                report(False, f"{label}: vulkan run failed (exit {rc}): {err}")
                return
            with open(paths[output], "rb") as f1, open(vpaths[output], "rb") as f2:
                same = f1.read() == f2.read()
            report(same, f"{label}: vulkan output is byte-identical to cpu")


def matmul_ref(inp):
    a = inp["A"].astype(np.float64)
    b = inp["B"].astype(np.float64)
    return a @ b, (np.abs(a) @ np.abs(b), a.shape[1])


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def mlp_ref(inp):
    x, w1, b1, w2, b2 = (inp[k].astype(np.float64) for k in ("x", "W1", "b1", "W2", "b2"))
    h = np.maximum(x @ w1 + b1, 0)
    return softmax(h @ w2 + b2), None


HEADS = 4


def attention_ref(inp):
    q, k, v = (inp[n].astype(np.float64) for n in ("q", "k", "v"))
    s, w = q.shape
    t = k.shape[0]
    d = w // HEADS
    qh, kh, vh = q.reshape(s, HEADS, d), k.reshape(t, HEADS, d), v.reshape(t, HEADS, d)
    out = np.zeros((s, HEADS, d))
    for h in range(HEADS):
        scores = qh[:, h, :] @ kh[:, h, :].T / np.sqrt(d)
        for i in range(s):
            n = i + (t - s) + 1
            p = softmax(scores[i, :n])
            out[i, h, :] = p @ vh[:n, h, :]
    return out.reshape(s, w), None


def main():
    if not os.access(BIB, os.X_OK):
        print(f"FAIL {BIB} is not built")
        print("0 passed, 1 failed")
        return 1
    rng = np.random.default_rng(20240611)
    reason = vulkan_reason()
    if reason is not None:
        print(f"SKIP: vulkan comparisons: {reason}")

    for m, k, n in [(1, 1, 1), (7, 7, 7), (33, 33, 33), (7, 33, 1), (1, 200, 7), (33, 5, 64),
                    (100, 257, 31)]:
        inputs = {"A": rng.standard_normal((m, k)).astype(np.float32),
                  "B": rng.standard_normal((k, n)).astype(np.float32)}
        check("matmul.basm", f"matmul [{m},{k}].[{k},{n}]", inputs, "C", matmul_ref, "gamma", reason)

    for n, d, h, o in [(1, 1, 1, 1), (7, 33, 7, 5), (33, 96, 64, 10), (1, 7, 33, 2), (64, 17, 128, 33)]:
        inputs = {"x": rng.standard_normal((n, d)),
                  "W1": rng.standard_normal((d, h)) / np.sqrt(d),
                  "b1": rng.standard_normal(h) * 0.1,
                  "W2": rng.standard_normal((h, o)) / np.sqrt(h),
                  "b2": rng.standard_normal(o) * 0.1}
        inputs = {key: val.astype(np.float32) for key, val in inputs.items()}
        check("mlp.basm", f"mlp n={n} d={d} h={h} o={o}", inputs, "y", mlp_ref, "mixed", reason)

    for s, t, w in [(1, 1, 4), (7, 7, 28), (33, 33, 132), (5, 12, 16), (1, 33, 64), (40, 40, 256)]:
        inputs = {"q": rng.standard_normal((s, w)).astype(np.float32),
                  "k": rng.standard_normal((t, w)).astype(np.float32),
                  "v": rng.standard_normal((t, w)).astype(np.float32)}
        check("attention.basm", f"attention s={s} t={t} w={w} (4 heads)", inputs, "o",
              attention_ref, "mixed", reason)

    print("max errors: " + ", ".join(
        f"{k}: {v:.3f} u" if k == "matmul.basm" else f"{k}: {v:.3e}" for k, v in sorted(worst.items())))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
