#!/usr/bin/python3
"""tools/math-fit.py: where the polynomial coefficients of log, erf, erfc, sin
and cos (backends/cpu/bmath.h, spec/numerics.md sections 5a and 5c) came from.

Each is a weighted least-squares fit on Chebyshev nodes, reweighted towards
the largest errors (a near-minimax fit), in float64, then rounded to
binary32. Prints the coefficients (lowest degree first) as hex floats and the
fit's maximum error before rounding. The contract is the rounded constants in
bmath.h, not this script: rerunning it with another numpy may differ in the
last bits.
"""
import numpy as np
from scipy.special import erf, erfcx


def fit(f, lo, hi, deg, rel=None, n=4000, iters=30):
    t = np.cos(np.pi * (np.arange(n) + 0.5) / n) * (hi - lo) / 2 + (hi + lo) / 2
    y = f(t)
    w = np.ones(n) if rel is None else 1 / np.abs(rel(t))
    v = np.vander(t, deg + 1, increasing=True)
    ww = w.copy()
    for _ in range(iters):
        c, *_ = np.linalg.lstsq(v * ww[:, None], y * ww, rcond=None)
        e = np.abs(v @ c - y) * w
        ww = ww * np.sqrt(e / e.max() + 1e-3)
        ww /= ww.max()
    return c, (np.abs(v @ c - y) * w).max()


def show(name, c, err):
    print(f"{name}: max error {err:.3g}")
    for i, v in enumerate(c):
        print(f"  {name}{i} = {float.hex(float(np.float32(v)))}")


def main():
    # log: 2 atanh(s) = 2s + s z P(z), z = s^2 <= ((sqrt 2 - 1)/(sqrt 2 + 1))^2
    p = lambda z: sum(2 * z ** k / (2 * k + 3) for k in range(30))
    show("LOG_P", *fit(p, 0, 0.0295, 4, rel=p))
    # erf(x) = x + x E(x^2) for |x| < 1
    e = lambda s: erf(np.sqrt(s)) / np.sqrt(s) - 1
    show("ERF_E", *fit(e, 1e-12, 1.0, 6, rel=lambda s: 1 + e(s)))
    # (1 + 2a) exp(a^2) erfc(a) = F(q), q = (a - 2) / (a + 2), a in [0, 10.5]
    a = lambda q: 2 * (1 + q) / (1 - q)
    f = lambda q: (1 + 2 * a(q)) * erfcx(a(q))
    show("ERFC_F", *fit(f, -1, 0.68, 11))
    # sin(r) = r + r^3 S(z) and cos(r) = 1 - z/2 + z^2 C(z), z = r^2 <= (pi/4)^2,
    # each weighted by the relative error of the function
    z_max = (np.pi / 4) ** 2 * 1.0001
    s = lambda z: (np.sin(np.sqrt(z)) - np.sqrt(z)) / np.sqrt(z) ** 3
    show("SIN_S", *fit(s, 1e-8, z_max, 2, rel=lambda z: np.sin(np.sqrt(z)) / np.sqrt(z) ** 3))
    c = lambda z: (np.cos(np.sqrt(z)) - 1 + z / 2) / z ** 2
    show("COS_C", *fit(c, 1e-8, z_max, 2, rel=lambda z: np.cos(np.sqrt(z)) / z ** 2))


if __name__ == "__main__":
    main()
