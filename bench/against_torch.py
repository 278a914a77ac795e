"""What bench/cnn.py and bench/onnx_ops.py share: their arguments, and rounds
that alternate `bib bench` of an imported module with a torch call on the
same thread count."""
import argparse
import json
import subprocess
import time


def arguments(doc, repetitions):
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--bib", default="build/bib")
    ap.add_argument("--importer", default="tools/bib-onnx")
    ap.add_argument("--repetitions", type=int, default=repetitions)
    return ap.parse_args()


def torch_median_ms(fn, reps):
    """The median of reps calls of fn, after 3 to warm up."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3


def best_of_rounds(torch, args, bib_path, x_path, threads, fn, options=()):
    """(bib ms, torch ms) on threads: three rounds alternating `bib bench`
    (median of args.repetitions runs on the CPU executor) and fn (the median
    of as many calls), each one's best round. x_path: the .npy of input x,
    or a list of NAME=PATH for a module of several inputs; options: more of
    `bib bench`'s (--max-memory)."""
    torch.set_num_threads(threads)
    bib_ms, torch_ms = [], []
    specs = ["x=" + x_path] if isinstance(x_path, str) else list(x_path)
    inputs = [a for spec in specs for a in ("--input", spec)]
    for _ in range(3):
        r = subprocess.run([args.bib, "bench", bib_path] + inputs +
                           ["--backend", "cpu", "--threads", str(threads), "--repetitions", str(args.repetitions),
                            "--warmup", "2", "--format", "json"] + list(options),
                           check=True, timeout=600, capture_output=True, text=True)
        bib_ms.append(json.loads(r.stdout)["median_ms"])
        torch_ms.append(torch_median_ms(fn, args.repetitions))
    return min(bib_ms), min(torch_ms)
