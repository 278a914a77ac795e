#!/usr/bin/python3
"""tests/oracle/axes.py: the data-movement and axis opcodes against numpy.

For inputs of rank 0 to 6, with empty axes among them, one generated .basm
program per case runs PERMUTE, EXPAND, SLICE (negative starts, ends and
steps, out-of-range bounds), CONCAT, REDUCE_SUM/MEAN/MAX/MIN/PROD (random
axis bitmasks, keepdims both ways), SOFTMAX_AXIS, ARGMAX_AXIS and ARGMIN_AXIS (negative
axes), GATHER_AXIS and GATHER_ELEMENTS (negative indices), and TADD/TMUL/TDIV
under numpy broadcasting, through `bib run
--input/--output`. Checks, per case:
  - the CPU executor's bytes equal numpy's (moves, MAX, MIN, ARGMAX, ARGMIN and the
    broadcast arithmetic, which are exact in float32), or an emulation in
    float32 numpy of spec/numerics.md's fixed tree over the reduced elements
    in row-major order of the reduced axes (SUM, MEAN, PROD), or the bits of
    BIB's own last-axis SOFTMAX on numpy.moveaxis(x, c, -1) (SOFTMAX_AXIS;
    also within 1e-5 of a float64 softmax);
  - every other configuration gives the same bytes: the CPU at the scalar,
    avx2 and avx512 levels (where the machine has them) with 1 and 2
    threads, and Vulkan (lavapipe here; SKIP with the reason when absent);
  - batch invariance: a row's bytes do not depend on how many rows came
    with it (batches of 1, 2, 5 and 13).

Prints one line per check and `N passed, N failed` last; exits 1 on failure.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIB = os.environ.get("BIB", os.path.join(ROOT, os.environ.get("BUILD", "build"), "bib"))
LANES = 64

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


def tree(x, op, start):
    """spec/numerics.md's tree over the last axis of x (float32): lane l
    folds x[l], x[l+64], ... from `start`, then p[i] op= p[i+s] for s = 32..1."""
    x = np.asarray(x, np.float32)
    rows, n = x.shape
    p = np.full((rows, LANES), start, np.float32)
    for j in range(0, n, LANES):
        chunk = x[:, j:j + LANES]
        p[:, :chunk.shape[1]] = op(p[:, :chunk.shape[1]], chunk)
    s = LANES // 2
    while s >= 1:
        p[:, :s] = op(p[:, :s], p[:, s:2 * s])
        s //= 2
    return p[:, 0]


def reduce_ref(x, axes, keep, kind):
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes)) if x.ndim else x
    outer = [x.shape[i] for i in kept]
    n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    rows = moved.reshape(int(np.prod(outer, dtype=np.int64)), n)
    with np.errstate(all="ignore"):
        if kind == "SUM":
            r = tree(rows, np.add, 0.0)
        elif kind == "MEAN":
            r = tree(rows, np.add, 0.0) / np.float32(n)
        elif kind == "PROD":
            r = tree(rows, np.multiply, 1.0)
        elif kind == "MAX":
            r = rows.max(axis=1) if n else np.full(rows.shape[0], -np.inf, np.float32)
        else:
            r = rows.min(axis=1) if n else np.full(rows.shape[0], np.inf, np.float32)
    r = r.astype(np.float32)
    shape = [1 if (i in axes) else x.shape[i] for i in range(x.ndim)] if keep else outer
    return r.reshape(shape)


def slice_ref(x, triples):
    return x[tuple(slice(s, e, st) for s, e, st in triples)]


def same_bits(a, b):
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == np.float32:
        a = np.where(np.isnan(a), np.float32("nan"), a)  # canonical NaN
        b = np.where(np.isnan(b), np.float32("nan"), b)
    return a.tobytes() == b.tobytes()


class Program:
    def __init__(self):
        self.inputs = {}  # name -> array
        self.outputs = []  # (name, reference or None, check kind)
        self.body = []
        self.reg = 0
        self.treg = 0

    def tensor_input(self, name, value):
        t = self.treg
        self.treg += 1
        self.inputs[name] = (t, value)
        return name

    def out(self, name):
        t = self.treg
        self.treg += 1
        self.outputs.append((name, t))
        return name

    def regs(self, values):
        first = self.reg
        for v in values:
            self.body.append(f"    LDI r{self.reg}, {int(v)}")
            self.reg += 1
        return first

    def text(self):
        lines = []
        for name, (t, value) in self.inputs.items():
            dims = ",".join("?" for _ in value.shape)
            dt = "i32" if value.dtype == np.int32 else "f32"
            lines.append(f".input {name} t{t} {dt}[{dims}]")
        for name, t in self.outputs:
            lines.append(f".output {name} t{t}")
        lines.append(f".func main regs={self.reg + 1}")
        lines += self.body
        lines += [f"    LDI r{self.reg}, 0", f"    HALT r{self.reg}", ".end", ""]
        return "\n".join(lines)


def run(prog, config, tmp):
    path = os.path.join(tmp, "case.basm")
    with open(path, "w") as f:
        f.write(prog.text())
    backend, level, threads = config
    args = [BIB, "run", path, "--backend=" + backend]
    env = dict(os.environ)
    if backend == "cpu":
        args.append(f"--threads={threads}")
        env["BIB_CPU_LEVEL"] = level
    for name, (t, value) in prog.inputs.items():
        p = os.path.join(tmp, name + ".npy")
        np.save(p, value)
        args += ["--input", f"{name}={p}"]
    paths = {}
    for name, t in prog.outputs:
        paths[name] = os.path.join(tmp, f"{name}.{backend}{level}{threads}.npy")
        args += ["--output", f"{name}={paths[name]}"]
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return None, p.stderr.strip() or f"exit {p.returncode}"
    return {n: np.load(paths[n]) for n in paths}, None


def configs():
    """The executor configurations this machine has, and why others are absent."""
    have, missing = [("cpu", "scalar", 1)], []
    for level in ("avx2", "avx512"):
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program()
            prog.out("Y")
            prog.body.append("    LDI r0, 1")
            prog.body.append("    ALLOC Y, f32, r0, 1")
            prog.reg = 1
            got, err = run(prog, ("cpu", level, 1), tmp)
        if got is None:
            missing.append(f"cpu {level}: {err}")
        else:
            have += [("cpu", level, 1), ("cpu", level, 2)]
    have.append(("cpu", "scalar", 2))
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program()
        x = prog.tensor_input("X", np.ones((2, 2), np.float32))
        prog.out("Y")
        prog.body.append("    TADD Y, X, X")
        got, err = run(prog, ("vulkan", "", 0), tmp)
    if got is None:
        missing.append(f"vulkan: {err}")
    else:
        have.append(("vulkan", "", 0))
    return have, missing


def values(rng, shape, positive=False):
    """float32 values without zeros (so MAX/MIN and signs are unambiguous)."""
    x = rng.uniform(0.5, 2.0, size=shape).astype(np.float32)
    if not positive:
        x *= rng.choice(np.array([-1, 1], np.float32), size=shape)
    return x


def broadcast_partner(rng, shape):
    """A random shape that broadcasts with `shape` (fewer axes, ones, or more)."""
    out = [d if rng.random() < 0.5 else 1 for d in shape]
    drop = rng.integers(0, len(out) + 1) if out else 0
    out = out[drop:]
    if len(shape) < 6 and rng.random() < 0.3:
        out = [int(rng.integers(1, 3))] + out
    return tuple(out)


def build_case(rng, shape):
    """One program over an input of `shape`, and each output's reference."""
    prog = Program()
    refs = {}
    rank = len(shape)
    x = values(rng, shape)
    prog.tensor_input("X", x)
    # PERMUTE, entries negative at random.
    perm = list(rng.permutation(rank))
    entries = [p - rank if rng.random() < 0.5 else p for p in perm]
    first = prog.regs(entries)
    prog.body.append(f"    PERMUTE {prog.out('P')}, X, r{first}, {rank}")
    refs["P"] = np.transpose(x, perm) if rank else x
    # EXPAND to a shape with a new front axis and every 1 widened.
    target = [int(rng.integers(1, 4))] if rank < 6 else []
    target += [d if d != 1 else int(rng.integers(1, 4)) for d in shape]
    first = prog.regs(target)
    prog.body.append(f"    EXPAND {prog.out('E')}, X, r{first}, {len(target)}")
    refs["E"] = np.broadcast_to(x, tuple(target))
    # SLICE: random starts, ends, steps; some out of range, some negative.
    triples = []
    for d in shape:
        step = int(rng.choice([1, 1, 2, 3, -1, -2, 2147483647, -2147483648]))
        pick = lambda: int(rng.choice([0, 1, -1, d, -d - 3, d + 5, 2147483647, -2147483648,
                                       int(rng.integers(-d - 1, d + 2))]))
        triples.append((pick(), pick(), step))
    first = prog.regs([v for t in triples for v in t])
    prog.body.append(f"    SLICE {prog.out('S')}, X, r{first}, {rank}")
    refs["S"] = slice_ref(x, triples)
    if rank >= 1:
        # CONCAT with a second input that differs on one axis.
        axis = int(rng.integers(0, rank))
        other = list(shape)
        other[axis] = int(rng.integers(0, 4))
        y = values(rng, tuple(other))
        prog.tensor_input("C2", y)
        imm = axis - rank if rng.random() < 0.5 else axis
        prog.body.append(f"    CONCAT {prog.out('C')}, X, C2, {imm}")
        refs["C"] = np.concatenate([x, y], axis=axis)
    if rank >= 1:
        # GATHER_AXIS (numpy.take) and GATHER_ELEMENTS, negative indices too.
        axis = int(rng.integers(0, rank))
        n = shape[axis]
        imm = axis - rank if rng.random() < 0.5 else axis
        irank = int(rng.integers(0, min(2, 7 - rank) + 1))
        ishape = tuple(int(rng.integers(1, 4)) for _ in range(irank)) if n else (0,) * max(irank, 1)
        if len(ishape) + rank - 1 > 6:
            ishape = ishape[:6 - rank + 1]
        idx = rng.integers(-n, n, size=ishape).astype(np.int32) if n else np.zeros(ishape, np.int32)
        prog.tensor_input("I", idx)
        prog.body.append(f"    GATHER_AXIS {prog.out('GA')}, X, I, {imm}")
        refs["GA"] = np.take(x, idx.astype(np.int64), axis=axis)
        eshape = [int(rng.integers(0, d + 1)) for d in shape]
        eshape[axis] = int(rng.integers(1, 4)) if n else 0
        eidx = rng.integers(-n, n, size=eshape).astype(np.int32) if n else np.zeros(eshape, np.int32)
        prog.tensor_input("J", eidx)
        prog.body.append(f"    GATHER_ELEMENTS {prog.out('GE')}, X, J, {imm}")
        coords = list(np.indices(eidx.shape, sparse=False))
        coords[axis] = np.where(eidx < 0, eidx + n, eidx)
        refs["GE"] = x[tuple(coords)] if eidx.size else np.zeros(eidx.shape, np.float32)
    # The reductions, each with its own random axes and keepdims.
    for kind in ("SUM", "MEAN", "MAX", "MIN", "PROD"):
        mask = int(rng.integers(0, 1 << rank)) if rank else 0
        keep = int(rng.integers(0, 2))
        axes = tuple(i for i in range(rank) if mask >> i & 1) if mask else tuple(range(rank))
        xin = "X"
        if kind == "PROD":
            # Near 1, so products of many elements stay finite and normal.
            xp = rng.uniform(0.9, 1.1, size=shape).astype(np.float32)
            xin = prog.tensor_input("XP", xp)
        prog.body.append(f"    REDUCE_{kind} {prog.out('R' + kind)}, {xin}, {mask}, {keep}")
        refs["R" + kind] = reduce_ref(xp if kind == "PROD" else x, axes, keep, kind)
    if rank >= 1:
        axis = int(rng.integers(0, rank))
        imm = axis - rank if rng.random() < 0.5 else axis
        prog.body.append(f"    SOFTMAX_AXIS {prog.out('SM')}, X, {imm}")
        prog.tensor_input("XM", np.ascontiguousarray(np.moveaxis(x, axis, -1)))
        prog.body.append(f"    SOFTMAX {prog.out('SMREF')}, XM")
        refs["SM"] = ("softmax", axis)
        if shape[axis] > 0:
            keep = int(rng.integers(0, 2))
            prog.body.append(f"    ARGMAX_AXIS {prog.out('AM')}, X, {imm}, {keep}")
            refs["AM"] = np.argmax(x, axis=axis, keepdims=bool(keep)).astype(np.int32)
            prog.body.append(f"    ARGMIN_AXIS {prog.out('AN')}, X, {imm}, {1 - keep}")
            refs["AN"] = np.argmin(x, axis=axis, keepdims=not keep).astype(np.int32)
    # Broadcasting arithmetic, operands both ways round.
    other = broadcast_partner(rng, shape)
    z = values(rng, other)
    prog.tensor_input("Z", z)
    with np.errstate(all="ignore"):
        prog.body.append(f"    TADD {prog.out('BA')}, X, Z")
        refs["BA"] = x + z
        prog.body.append(f"    TMUL {prog.out('BM')}, Z, X")
        refs["BM"] = z * x
        prog.body.append(f"    TDIV {prog.out('BD')}, Z, X")
        refs["BD"] = z / x
    return prog, refs


def check_case(label, prog, refs, have):
    with tempfile.TemporaryDirectory() as tmp:
        base, err = run(prog, have[0], tmp)
        if base is None:
            report(False, f"{label}: cpu run failed: {err}")
            return
        for name, ref in refs.items():
            got = base[name]
            if isinstance(ref, tuple):
                axis = ref[1]
                want = np.moveaxis(base["SMREF"], -1, axis)
                x64 = prog.inputs["X"][1].astype(np.float64)
                e = np.exp(x64 - x64.max(axis=axis, keepdims=True)) if x64.size else x64
                f64 = e / e.sum(axis=axis, keepdims=True) if x64.size else x64
                close = got.shape == f64.shape and (
                    got.size == 0 or np.max(np.abs(got - f64) / (np.abs(f64) + 1e-30)) < 1e-5)
                report(same_bits(got, want) and close,
                       f"{label}: SOFTMAX_AXIS {axis} equals SOFTMAX on the moved axis, "
                       f"within 1e-5 of float64")
            else:
                report(same_bits(got, np.asarray(ref)),
                       f"{label}: {name} {got.shape} equals numpy's {np.asarray(ref).shape}")
        for config in have[1:]:
            other, err = run(prog, config, tmp)
            what = " ".join(str(c) for c in config if c != "")
            if other is None:
                report(False, f"{label}: {what} failed: {err}")
                continue
            same = all(same_bits(base[n], other[n]) for n in base)
            report(same, f"{label}: {what} gives the cpu's bytes for every output")


def batch_invariance(have):
    """Each row's bytes are the same whatever the batch: x[:b] for b in 1, 2,
    5 and 13 against the first b rows of the full run, every executor."""
    rng = np.random.default_rng(8)
    full = values(rng, (13, 3, 70))
    bias = values(rng, (3, 1))
    results = {}
    for b in (13, 1, 2, 5):
        prog = Program()
        prog.tensor_input("X", np.ascontiguousarray(full[:b]))
        prog.tensor_input("B", bias)
        prog.body.append(f"    REDUCE_SUM {prog.out('RS')}, X, 6, 0")
        prog.body.append(f"    REDUCE_PROD {prog.out('RP')}, X, 2, 1")
        prog.body.append(f"    SOFTMAX_AXIS {prog.out('SM')}, X, 1")
        prog.body.append(f"    ARGMIN_AXIS {prog.out('AN')}, X, -2, 0")
        prog.body.append(f"    TADD {prog.out('BA')}, X, B")
        first = prog.regs([2, 0, 1])
        prog.body.append(f"    PERMUTE {prog.out('P')}, X, r{first}, 3")
        for config in have:
            with tempfile.TemporaryDirectory() as tmp:
                got, err = run(prog, config, tmp)
            what = " ".join(str(c) for c in config if c != "")
            if got is None:
                report(False, f"batch {b} on {what}: {err}")
                continue
            if b == 13:
                results[what] = got
                continue
            ref = results[what]
            same = all(same_bits(got[n], ref[n][:b]) for n in ("RS", "RP", "SM", "AN", "BA"))
            same = same and same_bits(got["P"], ref["P"][:, :b])
            report(same, f"batch {b} on {what}: every row's bytes equal the batch of 13's")


SHAPES = [
    (), (5,), (0,), (3, 4), (4, 0), (1, 7), (2, 3, 4), (3, 1, 5), (0, 2, 3),
    (2, 3, 2, 3), (2, 1, 3, 0), (2, 2, 1, 3, 2), (3, 2, 2, 1, 2, 2), (1, 2, 0, 2, 1, 2),
    (2, 150), (130, 3), (6,), (4, 5),
]


def main():
    have, missing = configs()
    for m in missing:
        print(f"SKIP {m}")
    rng = np.random.default_rng(14)
    for shape in SHAPES:
        prog, refs = build_case(rng, shape)
        check_case(f"x{list(shape)}", prog, refs, have)
    batch_invariance(have)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
