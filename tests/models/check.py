#!/usr/bin/python3
"""Models exported from PyTorch, imported with tools/bib-onnx, run with `bib run`.

For each model of tests/models/export.py (an MLP, a transformer encoder layer,
a small CNN, a residual block, and two decoders with a key/value cache, GPT's
form and LLaMA's (rotary positions, RMSNorm, a gated MLP);
opset 17, and the MLP and the encoder at opset 13 too, where layer norm is
exported as its parts, and the residual block at opset 11):

  1. export it from torch (fixed seeds) with a dynamic batch axis, and keep
     torch's output for a batch of 7;
  2. import it: tools/bib-onnx NAME.onnx -o NAME.bib;
  3. run it with `bib run` on the CPU executor at every SIMD level this CPU
     has and at 1 and 2 threads, on Vulkan, with --backend=auto, and on the
     CUDA kernel sources under the CPU emulation when build/tests has it;
  4. check that every run wrote the same bytes, and that those match torch's
     output within the tolerance below;
  5. run row 3 of the batch alone (batch 1; every input's row 3, the
     decoder's cache too) on the CPU and on Vulkan, and check its bytes
     equal row 3 of the batch-7 output: a row's result does not depend on
     the batch it came in;
  6. run an empty batch (batch 0), which must give an empty output.

The tolerance (ERROR METRIC): with t torch's output and b BIB's,

    err = max_i |b_i - t_i| / max(|t_i|, 0.01 * max_j |t_j|)  <=  1e-4

that is, the relative error of every element, where an element smaller than
1% of the output's largest magnitude is measured against that 1% instead of
its own size (a relative error near a zero crossing says nothing about the
model). The normwise error max|b - t| / max|t| is printed beside it.

Before the ops a model needs exist, the model is a SKIP line naming what is
missing: tools/bib-onnx itself, an opcode of ONNX-PLAN's table absent from
isa/opcodes.def, or batched MATMUL, probed with a rank-3 program. Once they
all exist, any failure to import or to run is a FAIL.

Usage: check.py [--keep DIR]   (BIB, BUILD, PYTHON and BIB_ONNX, the importer, from the
environment)
Prints one line per check and "N passed, N failed"; exits 1 if any failed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import export  # noqa: E402  (tests/models/export.py)

BIB = os.environ.get("BIB", "build/bib")
BUILD = os.environ.get("BUILD", "build")
PY = os.environ.get("PYTHON", "/usr/bin/python3")
IMPORTER = os.environ.get("BIB_ONNX", os.path.join(ROOT, "tools", "bib-onnx"))
TOLERANCE = 1e-4
ROW = 3  # the row run alone at batch 1

# The opcodes (ONNX-PLAN.md's names) each model's lowering needs beyond
# what BIB had before the importer: LINEAR, RELU, TANH, SOFTMAX, RESHAPE...
NEEDS = {
    "mlp": [],
    "encoder": ["PERMUTE", "SLICE", "ERF", "batched MATMUL"],
    "cnn": ["CONV", "MAXPOOL"],
}

passed = 0
failed = 0


def ok(what):
    global passed
    passed += 1
    print("ok   " + what, flush=True)


def bad(what):
    global failed
    failed += 1
    print("FAIL " + what, flush=True)


def first_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "(no message)"


def importer_env():
    """The importer drives libbib through the Python package: the plain library
    of $BUILD, or under make sanitize (whose library needs the ASan runtime
    preloaded into python3) the one the package finds in the source tree."""
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    if not os.environ.get("BIB_TEST_SANITIZED"):
        env["BIB_LIBRARY"] = os.path.abspath(os.path.join(BUILD, "libbib.so.0"))
    return env


def run(cmd, env=None, timeout=300):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=timeout)


def opcodes_in_table():
    with open(os.path.join(ROOT, "isa", "opcodes.def")) as f:
        return set(re.findall(r"^G?[KT]OP\((\w+),", f.read(), re.M))


def probe_batched_matmul(tmp):
    """None when MATMUL takes [2,3,4] . [2,4,5], else bib's reason."""
    src = os.path.join(tmp, "probe_bmm.basm")
    with open(src, "w") as f:
        f.write(".input a t0 f32[2,3,4]\n.input b t1 f32[2,4,5]\n.output c t2\n"
                ".func main regs=1\n    MATMUL t2, t0, t1\n    LDI r0, 0\n    HALT r0\n.end\n")
    np.save(os.path.join(tmp, "pa.npy"), np.ones((2, 3, 4), np.float32))
    np.save(os.path.join(tmp, "pb.npy"), np.ones((2, 4, 5), np.float32))
    r = run([BIB, "run", src, "--backend=cpu", "--input", "a=" + os.path.join(tmp, "pa.npy"),
             "--input", "b=" + os.path.join(tmp, "pb.npy"), "--output="])
    return None if r.returncode == 0 else first_line(r.stderr)


def missing_for(name, table, tmp):
    """What model NAME needs that this tree lacks, as one line; None if nothing."""
    if not os.path.isfile(IMPORTER):
        return "tools/bib-onnx is not in the tree yet"
    absent = [n for n in NEEDS.get(name, []) if n != "batched MATMUL" and n not in table]
    gaps = ["%s (not in isa/opcodes.def yet)" % ", ".join(absent)] if absent else []
    if "batched MATMUL" in NEEDS.get(name, []):
        why = probe_batched_matmul(tmp)
        if why:
            gaps.append("batched MATMUL (a rank-3 MATMUL fails: %s)" % why)
    return "needs " + "; ".join(gaps) if gaps else None


def cpu_levels():
    r = run([BIB, "info", "--json"])
    best = json.loads(r.stdout)["cpu"]["kernel_level"] if r.returncode == 0 else "scalar"
    order = ["scalar", "avx2", "avx512"]
    return order[: order.index(best) + 1] if best in order else ["scalar"]


def executors(tmp):
    """(label, bib run options, environment) for every executor to compare."""
    out = []
    for level in cpu_levels():
        for threads in (1, 2):
            out.append(("cpu %s %dt" % (level, threads), ["--backend=cpu", "--threads=%d" % threads],
                        {"BIB_CPU_LEVEL": level}))
    out.append(("vulkan", ["--backend=vulkan", "--strict-device"], {}))
    out.append(("auto", ["--backend=auto"], {}))
    emu = os.path.abspath(os.path.join(BUILD, "tests", "libcuda_emu.so"))
    if os.path.isfile(emu):
        # --backend=auto's measurements are cached per device; the emulator is no device to remember.
        out.append(("cuda (emulated)", ["--backend=cuda"],
                    {"BIB_CUDA_LIBRARY": emu, "XDG_CACHE_HOME": os.path.join(tmp, "cache")}))
    else:
        print("SKIP: cuda (emulated): no %s (built with build/tests/test_cuda when nvcc exists)" % emu)
    return out


def bib_run(module, inputs, outputs, opts, env):
    """None on success, else the reason; exit 69 (no such executor) gives
    'unavailable: ...'. inputs: the .npy of each graph input, by name;
    outputs: where each graph output goes, by name."""
    given = [a for n, path in inputs.items() for a in ("--input", "%s=%s" % (n, path))]
    given += [a for n, path in outputs.items() for a in ("--output", "%s=%s" % (n, path))]
    r = run([BIB, "run", module] + given + opts, env)
    if r.returncode == 69:
        return "unavailable: " + first_line(r.stderr)
    if r.returncode != 0:
        return "exit %d: %s" % (r.returncode, first_line(r.stderr))
    return None


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def errors(b, t):
    floor = 0.01 * float(np.abs(t).max())
    rel = float((np.abs(b.astype(np.float64) - t) / np.maximum(np.abs(t), floor)).max())
    norm = float(np.abs(b.astype(np.float64) - t).max() / np.abs(t).max())
    return rel, norm


def check_model(name, opset, tmp, table, execs):
    label = "%s (opset %d)" % (name, opset)
    d = os.path.join(tmp, "%s-%d" % (name, opset))
    export.export_model(name, d, opset)
    onnx_path = os.path.join(d, name + ".onnx")
    module = os.path.join(d, name + ".bib")
    inputs = {n: os.path.join(d, "%s.%s.npy" % (name, n)) for n in export.input_names(name)}
    names = export.output_names(name)
    torch_out = {o: np.load(os.path.join(d, "%s.out.%s.npy" % (name, o))).astype(np.float64) for o in names}

    def paths(tag):
        return {o: os.path.join(d, "%s.%s.npy" % (tag, o)) for o in names}

    r = run([PY, IMPORTER, onnx_path, "-o", module] if os.path.isfile(IMPORTER) else ["false"],
            importer_env())
    if r.returncode != 0 or not os.path.isfile(module):
        gap = missing_for(name, table, tmp)
        if gap:
            print("SKIP: %s: %s" % (label, gap))
        else:
            bad("%s: bib-onnx failed (exit %d): %s" % (label, r.returncode, first_line(r.stderr)))
        return None
    ok("%s: bib-onnx imports it" % label)

    results = {}
    for ex_label, opts, env in execs:
        ys = paths("y.%s" % re.sub(r"\W+", "_", ex_label))
        why = bib_run(module, inputs, ys, opts, env)
        if why and why.startswith("unavailable"):
            print("SKIP: %s on %s: %s" % (label, ex_label, why))
            continue
        if why:
            gap = missing_for(name, table, tmp)
            if gap:
                print("SKIP: %s on %s: %s (%s)" % (label, ex_label, gap, why))
                return None
            bad("%s on %s: %s" % (label, ex_label, why))
            continue
        results[ex_label] = (ys, b"".join(read_bytes(ys[o]) for o in names))
    if not results:
        return None

    what = "" if len(names) == 1 else " (all %d outputs: %s)" % (len(names), ", ".join(names))
    ref_label, (ref_paths, ref_bytes) = next(iter(results.items()))
    same = [l for l, (_, b) in results.items() if b == ref_bytes]
    if len(same) == len(results):
        ok("%s: the same bytes on %d executors (%s)%s" % (label, len(results), ", ".join(results), what))
    else:
        differ = [l for l in results if l not in same]
        bad("%s: bytes differ from %s's on %s%s" % (label, ref_label, ", ".join(differ), what))

    rel = norm = 0.0
    for o in names:
        b, t = np.load(ref_paths[o]), torch_out[o]
        if b.shape != t.shape or b.dtype != np.float32:
            bad("%s: output %s is %s%s, torch's is float32%s" % (label, o, b.dtype, b.shape, t.shape))
            return None
        if not np.isfinite(b).all():
            rel = float("inf")
        r_o, n_o = errors(b, t)
        rel, norm = max(rel, r_o), max(norm, n_o)
    if rel <= TOLERANCE:
        ok("%s: matches torch, relative error %.3g (<= %g; normwise %.3g)%s" % (label, rel, TOLERANCE, norm, what))
    else:
        bad("%s: relative error %.3g against torch exceeds %g (normwise %.3g)%s"
            % (label, rel, TOLERANCE, norm, what))

    # One row alone: its bytes must equal the same row in the batch of 7.
    def rows(tag, pick):
        """Every input cut to x[pick] along the batch axis, as tag.INPUT.npy."""
        out = {}
        for n, path in inputs.items():
            out[n] = os.path.join(d, "%s.%s.npy" % (tag, n))
            np.save(out[n], np.load(path)[pick])
        return out

    x1 = rows("x1", slice(ROW, ROW + 1))
    for ex_label, opts, env in execs:
        if ex_label not in ("cpu %s 2t" % cpu_levels()[-1], "vulkan") or ex_label not in results:
            continue
        y1 = paths("y1")
        why = bib_run(module, x1, y1, opts, env)
        if why:
            bad("%s on %s, batch 1: %s" % (label, ex_label, why))
            continue
        alone = True
        for o in names:
            row, full = np.load(y1[o]), np.load(results[ex_label][0][o])
            alone &= row.shape == (1,) + full.shape[1:] and row.tobytes() == full[ROW:ROW + 1].tobytes()
        if alone:
            ok("%s on %s: row %d run alone (batch 1) has the bytes it has in the batch of 7%s"
               % (label, ex_label, ROW, what))
        else:
            bad("%s on %s: row %d alone (batch 1) differs from row %d of the batch of 7"
                % (label, ex_label, ROW, ROW))
    # An empty batch: zero rows in, zero rows out (spec/numerics.md, empty tensors).
    x0 = rows("x0", slice(0, 0))
    y0 = paths("y0")
    why = bib_run(module, x0, y0, ["--backend=cpu"], {})
    if why:
        bad("%s: batch 0: %s" % (label, why))
    else:
        got = [np.load(y0[o]) for o in names]
        want = [(0,) + torch_out[o].shape[1:] for o in names]
        if all(g.shape == w and g.dtype == np.float32 for g, w in zip(got, want)):
            ok("%s: batch 0 gives an empty float32%s%s" % (label, got[0].shape, what))
        else:
            bad("%s: batch 0 gives %s, want float32 %s"
                % (label, ", ".join("%s%s" % (g.dtype, g.shape) for g in got), ", ".join(map(str, want))))
    return rel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="write the models and outputs here and keep them")
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix="bib-models.")
    os.makedirs(tmp, exist_ok=True)
    try:
        table = opcodes_in_table()
        execs = executors(tmp)
        for name, opset in (("mlp", 17), ("mlp", 13), ("encoder", 17), ("encoder", 13), ("cnn", 17),
                            ("resnet", 17), ("resnet", 11), ("decoder", 17), ("rope", 17)):
            check_model(name, opset, tmp, table, execs)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
