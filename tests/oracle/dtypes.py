#!/usr/bin/python3
"""tests/oracle/dtypes.py: CAST, the comparisons, WHERE, the logic opcodes and
TADD/TSUB/TMUL/TDIV/TMIN/TMAX/TABS/TNEG on i32 against NumPy, bit for bit, on
every executor.

One program (written below) runs every dtype opcode on inputs given with
`bib run --input` and writes each result with `--output`. The inputs mix
uniform values with the cases the rules pin down: NaN (payloads and sign),
+-Inf, -0, denormals, f32 values next to the i32 limits (2^31 - 128, 2^31,
-2^31, -2^31 - 256, 2^24 +- 1 and their ties), INT32_MIN, INT32_MAX,
INT32_MIN / -1. Every opcode is exact (integer arithmetic, comparisons,
selects, exactly defined conversions), so the reference is NumPy's result
itself and the check is equality of the bytes.

Checks, per executor run:
  - the CPU executor (each SIMD level this CPU has, 1 and 2 threads): every
    output equals the NumPy reference;
  - Vulkan (lavapipe here) and the CUDA kernels under the CPU emulation
    (build/tests/libcuda_emu.so, when built): every output file is
    byte-identical to the CPU's (SKIP, with the reason, when absent);
  - batch invariance: the first rows of a run over fewer rows are the same
    bytes as those rows of the full run.

Prints one line per check and `N passed, N failed` last; exits 1 on failure.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
BIB = os.environ.get("BIB", os.path.join(BUILD, "bib"))
if not os.path.isabs(BIB):
    BIB = os.path.join(ROOT, BIB)
EMU = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD),
                   "tests", "libcuda_emu.so")

passed = 0
failed = 0


def report(ok, text):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + text)
    else:
        failed += 1
        print("FAIL " + text)


PROGRAM = """
.input  x   t0 f32[n, m]
.input  y   t1 f32[n, m]
.input  yr  t2 f32[m]
.input  y1  t3 f32[1]
.input  i   t4 i32[n, m]
.input  j   t5 i32[n, m]
.input  jr  t6 i32[m]
.input  d   t7 i32[n, m]
.input  dr  t8 i32[m]
.input  d1  t9 i32[1]
.input  yc  t43 f32[n, 1]
.input  jc  t44 i32[n, 1]
.input  dc  t45 i32[n, 1]
.output cast_fi   t10 i32[n, m]
.output cast_if   t11 f32[n, m]
.output cast_ff   t12 f32[n, m]
.output cast_ii   t13 i32[n, m]
.output eq_f  t14 i32[n, m]
.output lt_f  t15 i32[n, m]
.output le_f  t16 i32[n, m]
.output gt_f  t17 i32[n, m]
.output ge_f  t18 i32[n, m]
.output lt_fr t19 i32[n, m]
.output ge_f1 t20 i32[n, m]
.output eq_i  t21 i32[n, m]
.output lt_i  t22 i32[n, m]
.output le_ir t23 i32[n, m]
.output gt_i  t24 i32[n, m]
.output ge_i  t25 i32[n, m]
.output where_f  t26 f32[n, m]
.output where_fr t27 f32[n, m]
.output where_i  t28 i32[n, m]
.output not_i t29 i32[n, m]
.output and_i t30 i32[n, m]
.output or_ir t31 i32[n, m]
.output xor_i t32 i32[n, m]
.output add_i t33 i32[n, m]
.output sub_ir t34 i32[n, m]
.output mul_i t35 i32[n, m]
.output div_i t36 i32[n, m]
.output div_ir t37 i32[n, m]
.output div_i1 t38 i32[n, m]
.output min_i t39 i32[n, m]
.output max_ir t40 i32[n, m]
.output abs_i t41 i32[n, m]
.output neg_i t42 i32[n, m]
.output lt_fc t46 i32[n, m]
.output where_c t47 f32[n, m]
.output div_ic t48 i32[n, m]
.output xor_ic t49 i32[n, m]

.func main regs=1
    CAST cast_fi, x, i32
    CAST cast_if, i, f32
    CAST cast_ff, x, f32
    CAST cast_ii, i, i32
    TEQ eq_f, x, y
    TLT lt_f, x, y
    TLE le_f, x, y
    TGT gt_f, x, y
    TGE ge_f, x, y
    TLT lt_fr, x, yr
    TGE ge_f1, x, y1
    TEQ eq_i, i, j
    TLT lt_i, i, j
    TLE le_ir, i, jr
    TGT gt_i, i, j
    TGE ge_i, i, j
    WHERE where_f, lt_f, x, y
    WHERE where_fr, eq_i, yr, y1
    WHERE where_i, j, i, jr
    TNOT not_i, j
    TAND and_i, i, j
    TOR or_ir, i, jr
    TXOR xor_i, i, j
    TADD add_i, i, j
    TSUB sub_ir, i, jr
    TMUL mul_i, i, j
    TDIV div_i, i, d
    TDIV div_ir, i, dr
    TDIV div_i1, i, d1
    TMIN min_i, i, j
    TMAX max_ir, i, jr
    TABS abs_i, i
    TNEG neg_i, i
    TLT lt_fc, yc, x
    WHERE where_c, jc, x, yr
    TDIV div_ic, i, dc
    TXOR xor_ic, jc, i
    LDI r0, 0
    HALT r0
.end
"""

F32_SPECIAL = [0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA00000, 0x7F800000, 0xFF800000,
               0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x3F000000, 0xBF000000,
               0x3FC00000, 0xBFC00000, 0x40200000, 0x7F7FFFFF, 0xFF7FFFFF]
F32_NEAR_LIMITS = [2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 4294967296.0,
                   -2147483520.0, 16777215.0, 16777216.0, 16777218.0, -16777216.0, 1e10, -1e10,
                   0.999999940395, -0.999999940395, 8388607.5, -8388607.5]
I32_SPECIAL = [-2 ** 31, 2 ** 31 - 1, 0, 1, -1, 2 ** 24, 2 ** 24 + 1, 2 ** 24 + 2, 2 ** 24 + 3,
               -(2 ** 24 + 1), -(2 ** 24 + 3), 2 ** 25 + 2, 2 ** 25 + 6, 2 ** 31 - 64,
               2 ** 31 - 65, -(2 ** 31) + 64, -(2 ** 31) + 65, 33554435, 1 << 30]


def make_inputs(rng, n, m):
    size = n * m
    x = rng.uniform(-3e9, 3e9, size).astype(np.float32)
    small = rng.integers(0, size, size // 3)
    x[small] = rng.uniform(-8, 8, small.size).astype(np.float32)
    bits = rng.integers(0, 2 ** 32, size // 10, dtype=np.uint64).astype(np.uint32)
    x[rng.integers(0, size, bits.size)] = bits.view(np.float32)
    special = np.array(F32_SPECIAL, dtype=np.uint32).view(np.float32)
    near = np.array(F32_NEAR_LIMITS, dtype=np.float32)
    for v in (special, near):
        x[rng.integers(0, size, 300)] = v[rng.integers(0, v.size, 300)]
    x[:special.size] = special
    x[special.size:special.size + near.size] = near
    # y: often equal to x (or its negated zero), else another value
    y = x.copy()
    pick = rng.random(size) < 0.5
    y[pick] = rng.uniform(-3e9, 3e9, pick.sum()).astype(np.float32)
    zeros = (x.view(np.uint32) & 0x7FFFFFFF) == 0
    y[zeros] = np.float32(0) * np.where(rng.random(zeros.sum()) < 0.5, 1, -1).astype(np.float32)
    y[rng.integers(0, size, 200)] = special[rng.integers(0, special.size, 200)]
    i = rng.integers(-2 ** 31, 2 ** 31, size, dtype=np.int64).astype(np.int32)
    i[rng.integers(0, size, size // 4)] = rng.integers(-40, 40, size // 4)
    spec_i = np.array(I32_SPECIAL, dtype=np.int64).astype(np.int32)
    i[rng.integers(0, size, 300)] = spec_i[rng.integers(0, spec_i.size, 300)]
    i[:spec_i.size] = spec_i
    j = i.copy()
    pick = rng.random(size) < 0.5
    j[pick] = rng.integers(-3, 4, pick.sum())
    j[rng.integers(0, size, 100)] = -2 ** 31
    d = rng.integers(-2 ** 31, 2 ** 31, size, dtype=np.int64).astype(np.int32)
    d[rng.integers(0, size, size // 3)] = rng.integers(-9, 10, size // 3)
    d[rng.integers(0, size, 100)] = -1  # INT32_MIN / -1 where i is INT32_MIN
    d[0] = -1  # i[0] is INT32_MIN
    d[d == 0] = 7
    return {
        "x": x.reshape(n, m), "y": y.reshape(n, m), "yr": y[:m].copy(), "y1": y[7:8].copy(),
        "i": i.reshape(n, m), "j": j.reshape(n, m), "jr": j[:m].copy(),
        "d": d.reshape(n, m), "dr": d[:m].copy(), "d1": np.array([-3], dtype=np.int32),
        # columns: broadcast against [n, m] by numpy's rule (the VM expands them)
        "yc": y[m:m + n].reshape(n, 1).copy(), "jc": j[:n].reshape(n, 1).copy(),
        "dc": d[m:m + n].reshape(n, 1).copy(),
    }


def wrap32(v):
    return ((v.astype(np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)


def div_trunc(a, b):
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    q = np.abs(a) // np.abs(b)
    return wrap32(np.where((a < 0) != (b < 0), -q, q))


def cast_f2i(x):
    x64 = x.astype(np.float64)
    t = np.trunc(np.nan_to_num(x64, nan=0.0, posinf=2.0 ** 40, neginf=-2.0 ** 40))
    return np.clip(t, -2 ** 31, 2 ** 31 - 1).astype(np.int64).astype(np.int32)


def reference(a):
    x, y, yr, y1 = a["x"], a["y"], a["yr"], a["y1"]
    i, j, jr, d, dr, d1 = a["i"], a["j"], a["jr"], a["d"], a["dr"], a["d1"]
    b = lambda v: v.astype(np.int32)  # noqa: E731
    eq_i = b(i == j)
    lt_f = b(x < y)
    with np.errstate(invalid="ignore"):
        return {
            "cast_fi": cast_f2i(x), "cast_if": i.astype(np.float32), "cast_ff": x, "cast_ii": i,
            "eq_f": b(x == y), "lt_f": lt_f, "le_f": b(x <= y), "gt_f": b(x > y),
            "ge_f": b(x >= y), "lt_fr": b(x < yr), "ge_f1": b(x >= y1),
            "eq_i": eq_i, "lt_i": b(i < j), "le_ir": b(i <= jr), "gt_i": b(i > j),
            "ge_i": b(i >= j),
            "where_f": np.where(lt_f != 0, x.view(np.uint32), y.view(np.uint32)).view(np.float32),
            "where_fr": np.where(eq_i != 0, np.broadcast_to(yr.view(np.uint32), x.shape),
                                 y1.view(np.uint32)).view(np.float32),
            "where_i": np.where(j != 0, i, jr),
            "not_i": b(j == 0), "and_i": b((i != 0) & (j != 0)), "or_ir": b((i != 0) | (jr != 0)),
            "xor_i": b((i != 0) ^ (j != 0)),
            "add_i": wrap32(i.astype(np.int64) + j), "sub_ir": wrap32(i.astype(np.int64) - jr),
            "mul_i": wrap32(i.astype(np.int64) * j), "div_i": div_trunc(i, d),
            "div_ir": div_trunc(i, dr), "div_i1": div_trunc(i, d1),
            "min_i": np.minimum(i, j), "max_ir": np.maximum(i, jr),
            "abs_i": wrap32(np.abs(i.astype(np.int64))), "neg_i": wrap32(-i.astype(np.int64)),
            "lt_fc": b(a["yc"] < x),
            "where_c": np.where(a["jc"] != 0, x.view(np.uint32),
                                np.broadcast_to(yr.view(np.uint32), x.shape)).view(np.float32),
            "div_ic": div_trunc(i, np.broadcast_to(a["dc"], i.shape)),
            "xor_ic": b((a["jc"] != 0) ^ (i != 0)),
        }


def run(prog, inputs, outputs, tmp, tag, backend="cpu", env=None, threads=None):
    args = [BIB, "run", prog, "--backend=" + backend]
    if backend != "cpu":
        args.append("--strict-device")
    if threads:
        args += ["--threads", str(threads)]
    for name, value in inputs.items():
        path = os.path.join(tmp, f"{name}.npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    paths = {}
    for name in outputs:
        paths[name] = os.path.join(tmp, f"{name}.{tag}.npy")
        args += ["--output", f"{name}={paths[name]}"]
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(args, capture_output=True, text=True, env=full_env)
    return p.returncode, (p.stderr + p.stdout).strip(), paths


def same_bytes(p, q):
    with open(p, "rb") as f, open(q, "rb") as g:
        return f.read() == g.read()


def cpu_levels():
    out = subprocess.run([BIB, "info"], capture_output=True, text=True).stdout
    best = "scalar"
    for line in out.splitlines():
        if line.strip().startswith("kernels:"):
            best = line.split()[1]
    order = ["scalar", "avx2", "avx512"]
    return order[:order.index(best) + 1] if best in order else ["scalar"]


def main():
    rng = np.random.default_rng(14)
    n, m = 300, 257  # 77100 elements: more than one chunk for 2 threads
    inputs = make_inputs(rng, n, m)
    ref = reference(inputs)
    names = list(ref)
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "dtypes.basm")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        base = None
        for level in cpu_levels():
            for threads in (1, 2):
                tag = f"cpu-{level}-{threads}"
                rc, err, paths = run(prog, inputs, names, tmp, tag,
                                     env={"BIB_CPU_LEVEL": level}, threads=threads)
                if rc != 0:
                    report(False, f"{tag}: bib run failed: {err}")
                    continue
                bad = []
                for name in names:
                    got = np.load(paths[name])
                    want = ref[name]
                    if got.dtype != want.dtype or got.shape != want.shape or \
                            got.tobytes() != np.ascontiguousarray(want).tobytes():
                        diff = np.flatnonzero(got.view(np.uint32).ravel() !=
                                              np.ascontiguousarray(want).view(np.uint32).ravel())
                        at = diff[0] if diff.size else -1
                        bad.append(f"{name} (first difference at {at}: got "
                                   f"{got.ravel()[at] if at >= 0 else '?'}, want "
                                   f"{want.ravel()[at] if at >= 0 else '?'})")
                report(not bad, f"{tag}: {len(names)} outputs equal NumPy's bit for bit"
                       + (": " + "; ".join(bad[:4]) if bad else ""))
                if base is None and not bad:
                    base = paths
        if base is None:
            report(False, "no CPU run to compare the other executors with")
            return
        devices = [("vulkan", "vulkan", {})]
        if os.path.exists(EMU):
            devices.append(("cuda-emulated", "cuda", {"BIB_CUDA_LIBRARY": EMU,
                                                      "XDG_CACHE_HOME": tmp}))
        else:
            print(f"SKIP cuda-emulated: no {EMU} (built with test_cuda when nvcc exists)")
        for tag, backend, env in devices:
            rc, err, paths = run(prog, inputs, names, tmp, tag, backend=backend, env=env)
            if rc != 0 and backend == "vulkan" and "not available" in err:
                print(f"SKIP {tag}: {err}")
                continue
            if rc != 0:
                report(False, f"{tag}: bib run failed: {err}")
                continue
            bad = [name for name in names if not same_bytes(paths[name], base[name])]
            report(not bad, f"{tag}: {len(names)} output files byte-identical to the CPU's"
                   + (": differ: " + ", ".join(bad) if bad else ""))
        # Batch invariance: the first 5 rows alone give those rows' bytes.
        few = {k: (v[:5] if v.ndim == 2 else v) for k, v in inputs.items()}  # columns too
        rc, err, paths = run(prog, few, names, tmp, "cpu-5rows")
        bad = [name for name in names
               if rc != 0 or np.load(paths[name]).tobytes() != np.load(base[name])[:5].tobytes()]
        report(rc == 0 and not bad, "5 rows alone give the full run's first 5 rows"
               + (f": {err}" if rc else "") + (": differ: " + ", ".join(bad) if bad else ""))


if __name__ == "__main__":
    main()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
