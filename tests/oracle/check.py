#!/usr/bin/python3
"""tests/oracle/check.py: BIB's CPU kernels against a float64 numpy reference.

Usage: /usr/bin/python3 tests/oracle/check.py DRIVER [--seed N] [--n N]
DRIVER is the built tests/oracle/oracle_driver. For each op it writes random
float32 inputs to .npy, runs the driver, computes the float64 result of the
mathematical function (numpy), and measures the error in float32 ULPs of the
reference (np.spacing at the float32-rounded reference; denormal spacing is
2^-149). It fails when an op exceeds the bound spec/numerics.md states, and
prints the measured maxima so the spec's table can be refreshed.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from scipy import special

# Bounds in ULP, as stated in spec/numerics.md ("Accuracy"). softmax adds the
# conditioning of x - max (+ |x - max| ULP); gelu's bound is per unit of
# (1 + |z|); layernorm's ULP is taken at the largest term (see below).
BOUNDS = {
    "exp": 2, "tanh": 2, "sigmoid": 3, "gelu": 4, "div": 0.5,
    "softmax": 8, "layernorm": 64, "rmsnorm": 4, "mean": 4, "max": 0,
    "erf": 1.1, "log": 0.55, "pow": 1.5, "gelu_erf": 6, "sqrt": 0.5, "rsqrt": 1.5, "recip": 0.5,
    "logsoftmax": 4, "floor": 0, "ceil": 0, "round": 0, "sin": 1, "cos": 1,
}


def ulp_err(got, ref, scale=None):
    """|got - ref| in float32 ULPs at |ref| (or at `scale`, for results that
    cancel); a reference that rounds to +-Inf in float32 must be met exactly."""
    got = got.astype(np.float64)
    at = np.abs(ref) if scale is None else scale
    sp = np.spacing(np.minimum(at, np.finfo(np.float32).max).astype(np.float32))
    sp = np.maximum(sp.astype(np.float64), 2.0 ** -149)
    ref32 = ref.astype(np.float32)
    overflow = np.isinf(ref32)
    err = np.abs(got - ref) / sp
    return np.where(overflow, np.where(got == ref32, 0.0, np.inf), err)


def run(driver, op, arrays, tmp):
    paths = []
    for i, a in enumerate(arrays):
        p = os.path.join(tmp, f"in{i}.npy")
        np.save(p, np.ascontiguousarray(a, dtype="<f4"))
        paths.append(p)
    out = os.path.join(tmp, "out.npy")
    subprocess.run([driver, op, out] + paths, check=True)
    return np.load(out)


def gelu_z(x):
    """2 * 0.7978845608 * (x + 0.044715 x^3) in float64; 0.5 x (1 + tanh(z/2)) ==
    x * sigmoid(z), the form that keeps the left tail accurate in float64 too."""
    return 2 * np.float64(np.float32(0.7978845608)) * (x + np.float64(np.float32(0.044715)) * x ** 3)


def gelu64(x):
    return x / (1 + np.exp(-gelu_z(x)))


def main():
    default = os.path.join(os.environ.get("BUILD", "build"), "oracle_driver")
    driver = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else default
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 1 << 20
    rng = np.random.default_rng(seed)
    results = {}
    with tempfile.TemporaryDirectory() as tmp, np.errstate(all="ignore"):
        # elementwise: dense uniform ranges plus random bit patterns
        bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        finite = bits[np.isfinite(bits)]
        xe = np.concatenate([rng.uniform(-104, 89, n).astype(np.float32),
                             finite[(finite > -104) & (finite < 89)]])
        y = run(driver, "exp", [xe], tmp)
        results["exp"] = ulp_err(y, np.exp(xe.astype(np.float64))).max()
        xt = np.concatenate([rng.uniform(-10, 10, n).astype(np.float32),
                             finite[np.abs(finite) < 20]])
        y = run(driver, "tanh", [xt], tmp)
        results["tanh"] = ulp_err(y, np.tanh(xt.astype(np.float64))).max()
        xs = np.concatenate([rng.uniform(-100, 30, n).astype(np.float32),
                             finite[(finite > -87) & (finite < 100)]])
        y = run(driver, "sigmoid", [xs], tmp)
        results["sigmoid"] = ulp_err(y, 1 / (1 + np.exp(-xs.astype(np.float64)))).max()
        xg = rng.uniform(-10, 10, n).astype(np.float32)
        y = run(driver, "gelu", [xg], tmp)
        ref = gelu64(xg.astype(np.float64))
        x64 = xg.astype(np.float64)
        results["gelu"] = (ulp_err(y, ref) / (1 + np.abs(gelu_z(x64)))).max()
        a = rng.uniform(-1e3, 1e3, n).astype(np.float32)
        b = rng.uniform(-1e3, 1e3, n).astype(np.float32)
        y = run(driver, "div", [a.reshape(1, -1), b.reshape(1, -1)], tmp).ravel()
        results["div"] = ulp_err(y, a.astype(np.float64) / b).max()
        # the math opcodes: a dense sweep of bit patterns (every binade,
        # denormals included) plus uniform ranges
        sweep = np.arange(0, 2 ** 31, 509, dtype=np.uint32).view(np.float32)
        sweep = sweep[np.isfinite(sweep)]
        xs = np.concatenate([sweep, -sweep, rng.uniform(-6, 6, n).astype(np.float32)])
        y = run(driver, "erf", [xs], tmp)
        results["erf"] = ulp_err(y, special.erf(xs.astype(np.float64))).max()
        xl = np.concatenate([sweep[sweep > 0], rng.uniform(0.5, 2, n).astype(np.float32)])
        y = run(driver, "log", [xl], tmp)
        results["log"] = ulp_err(y, np.log(xl.astype(np.float64))).max()
        y = run(driver, "sqrt", [xl], tmp)
        results["sqrt"] = ulp_err(y, np.sqrt(xl.astype(np.float64))).max()
        # 1/sqrt(x) rounds twice: within 1 ULP, not correctly rounded
        y = run(driver, "rsqrt", [xl], tmp)
        results["rsqrt"] = ulp_err(y, 1 / np.sqrt(xl.astype(np.float64))).max()
        xr = xl[(xl > 2.0 ** -126) & (xl < 2.0 ** 126)]
        y = run(driver, "recip", [xr], tmp)
        results["recip"] = ulp_err(y, 1 / xr.astype(np.float64)).max()
        # floor, ceil and round (halves to even, as np.round) are exact: the
        # same bits as numpy's, -0 included, over the bit patterns, the
        # halves and their neighbours
        halves = (np.arange(-4096, 4096) / 2).astype(np.float32)
        xi = np.concatenate([finite, halves, np.nextafter(halves, np.float32(np.inf)),
                             np.nextafter(halves, np.float32(-np.inf))])
        for name, fn in (("floor", np.floor), ("ceil", np.ceil), ("round", np.round)):
            y = run(driver, name, [xi], tmp)
            results[name] = float(np.count_nonzero(y.view(np.uint32) != fn(xi).view(np.uint32)))
        # sin and cos: every finite bit pattern (huge arguments too: the
        # reduction is exact) and a dense [-10, 10]
        xs = np.concatenate([finite, rng.uniform(-10, 10, n).astype(np.float32)])
        for name, fn in (("sin", np.sin), ("cos", np.cos)):
            y = run(driver, name, [xs], tmp)
            results[name] = ulp_err(y, fn(xs.astype(np.float64))).max()
        # gelu_erf: where 1 + erf(x / sqrt 2) is a normal float (x > -13)
        xg2 = np.concatenate([xs[(xs > -13) & (np.abs(xs) < 1e30)],
                              rng.uniform(-13, 8, n).astype(np.float32)])
        y = run(driver, "gelu_erf", [xg2], tmp)
        x64 = xg2.astype(np.float64)
        results["gelu_erf"] = ulp_err(y, 0.5 * x64 * special.erfc(-x64 / np.sqrt(2))).max()
        # pow: positive bases over every binade, exponents that keep the
        # result a normal float (|y ln x| up to 87)
        pb = np.concatenate([sweep[sweep > 0], rng.uniform(0, 4, n).astype(np.float32)])
        pe = rng.uniform(-1, 1, pb.size) * 87 / np.maximum(np.abs(np.log(pb.astype(np.float64))), 1e-3)
        pe = np.clip(pe, -1e4, 1e4).astype(np.float32)
        ref = np.power(pb.astype(np.float64), pe.astype(np.float64))
        keep = (ref > 2.0 ** -126) & (ref < 3.4e38)
        y = run(driver, "pow", [pb[keep].reshape(1, -1), pe[keep].reshape(1, -1)], tmp).ravel()
        results["pow"] = ulp_err(y, ref[keep]).max()
        # rows
        for cols in (7, 64, 1000, 4097):
            rows = max(1, (1 << 18) // cols)
            x = (rng.standard_normal((rows, cols)) * 8).astype(np.float32)
            x64 = x.astype(np.float64)
            y = run(driver, "softmax", [x], tmp)
            e = np.exp(x64 - x64.max(1, keepdims=True))
            ref = e / e.sum(1, keepdims=True)
            cond = np.abs(x64 - x64.max(1, keepdims=True))
            results["softmax"] = max(results.get("softmax", 0), (ulp_err(y, ref) - cond).max())
            # log-softmax: (x - m) - log(s), measured at the larger of the
            # two terms (they may cancel) and 1: s is rounded to binary32
            # before its log, so log(s) carries an absolute error of up to
            # about 2^-24 (the maximum's output -log(s) is near 0 when the
            # other terms are tiny; PyTorch's float log_softmax does the same)
            y = run(driver, "logsoftmax", [x], tmp)
            d = x64 - x64.max(1, keepdims=True)
            ls = np.log(np.exp(d).sum(1, keepdims=True))
            scale = np.maximum(np.maximum(np.abs(d), ls), 1.0)
            results["logsoftmax"] = max(results.get("logsoftmax", 0),
                                        ulp_err(y, d - ls, scale).max())
            g = rng.uniform(0.5, 1.5, cols).astype(np.float32)
            bt = rng.uniform(-1, 1, cols).astype(np.float32)
            y = run(driver, "layernorm", [x, g, bt], tmp)
            mu = x64.mean(1, keepdims=True)
            var = ((x64 - mu) ** 2).mean(1, keepdims=True)
            t = (x64 - mu) / np.sqrt(var + np.float64(np.float32(1e-5))) * g
            ref = t + bt
            # x - mean and the final add may cancel: measure at the largest
            # magnitude that enters them
            sd = np.sqrt(var + np.float64(np.float32(1e-5)))
            scale = np.maximum(np.maximum(np.abs(t), np.abs(bt)), np.abs(mu) / sd * g)
            results["layernorm"] = max(results.get("layernorm", 0),
                                       ulp_err(y, ref, scale).max())
            y = run(driver, "rmsnorm", [x, g], tmp)
            ref = x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) +
                                np.float64(np.float32(1e-6))) * g
            results["rmsnorm"] = max(results.get("rmsnorm", 0), ulp_err(y, ref).max())
            xp = np.abs(x)  # positive rows: a ULP bound on a sum needs no cancellation
            y = run(driver, "mean", [xp], tmp).ravel()
            results["mean"] = max(results.get("mean", 0),
                                  ulp_err(y, xp.astype(np.float64).mean(1)).max())
            y = run(driver, "max", [x], tmp).ravel()
            results["max"] = max(results.get("max", 0), ulp_err(y, x64.max(1)).max())
    failed = False
    for op, err in results.items():
        ok = err <= BOUNDS[op]
        failed |= not ok
        print(f"oracle: {op:10s} max error {err:8.3f} ULP (bound {BOUNDS[op]}) "
              f"{'ok' if ok else 'EXCEEDS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
