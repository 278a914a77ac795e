#!/bin/sh
# A transformer encoder layer exported from PyTorch and imported by
# tools/bib-onnx, against the same layer written by hand in BIB assembly
# (bench/encoder_layer.basm), both timed with `bib bench` on the CPU executor
# in the same run. Before timing, each program's output is checked against
# torch's (tests/models/check.py's metric, 1e-4). Prints the median ms of
# each (best of 3 alternating rounds of bib bench) and imported / hand, the
# same for the fastest single run, and each program's opcodes, the most
# time-consuming first, with their counts.
# Usage: BIB=build/bib sh bench/encoder_layer.bench.sh [repetitions]
# Sizes: d_model 64, 4 heads, feed-forward 128; batch x sequence 1 x 10 (the
# size tests/models runs) and 8 x 128.
set -eu
BUILD=${BUILD:-build}
BIB=${BIB:-$BUILD/bib}
PY=${PYTHON:-/usr/bin/python3}
IMPORTER=${BIB_ONNX:-tools/bib-onnx}
R=${1:-20}
echo "transformer encoder layer: imported by bib-onnx vs written by hand (bib bench, cpu)"
if [ ! -f "$IMPORTER" ]; then
    echo "SKIP: encoder layer: $IMPORTER is not in the tree yet"
    exit 0
fi
for op in PERMUTE LINEAR_GELU_ERF; do
    if ! grep -q "^KOP($op," isa/opcodes.def && ! grep -q "^TOP($op," isa/opcodes.def; then
        echo "SKIP: encoder layer: bench/encoder_layer.basm needs $op, not in isa/opcodes.def yet"
        exit 0
    fi
done
T=$(mktemp -d "${TMPDIR:-/tmp}/bib-encoder.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
timeout 120 "$BIB" asm bench/encoder_layer.basm -o "$T/hand.bib"

# median_ms FILE.json: the median of one bib bench report
median_ms() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['median_ms'])" "$1"; }

bench_size() { # batch seq
    d="$T/$1x$2"
    timeout 300 "$PY" bench/encoder_layer.py "$d" --batch "$1" --seq "$2"
    timeout 300 "$PY" "$IMPORTER" "$d/encoder.onnx" -o "$d/imported.bib"
    hand_in="--input x=$d/encoder.x.npy"
    for w in g1 be1 wq bq wk bk wv bv wo bo g2 be2 w1 b1 w2 b2; do
        hand_in="$hand_in --input $w=$d/$w.npy"
    done
    timeout 300 "$BIB" run "$d/imported.bib" --input "x=$d/encoder.x.npy" --output "y=$d/y.imported.npy"
    # shellcheck disable=SC2086
    timeout 300 "$BIB" run "$T/hand.bib" $hand_in --output "y=$d/y.hand.npy"
    timeout 60 "$PY" - "$d" <<'PYEOF'
import sys
import numpy as np
d = sys.argv[1]
t = np.load(d + "/encoder.y.npy").astype(np.float64)
floor = 0.01 * np.abs(t).max()
for name in ("imported", "hand"):
    b = np.load("%s/y.%s.npy" % (d, name)).astype(np.float64)
    err = (np.abs(b - t) / np.maximum(np.abs(t), floor)).max()
    print("  %-8s relative error against torch %.3g" % (name, err))
    if not err <= 1e-4:
        sys.exit("encoder layer: the %s program does not match torch (%.3g > 1e-4)" % (name, err))
same = open(d + "/y.imported.npy", "rb").read() == open(d + "/y.hand.npy", "rb").read()
print("  imported and hand outputs: %s" % ("the same bytes" if same else "different bytes"))
PYEOF
    for round in 1 2 3; do
        timeout 300 "$BIB" bench "$d/imported.bib" --input "x=$d/encoder.x.npy" --backend=cpu \
            --repetitions "$R" --warmup 3 --format json -o "$d/imported.$round.json"
        # shellcheck disable=SC2086
        timeout 300 "$BIB" bench "$T/hand.bib" $hand_in --backend=cpu \
            --repetitions "$R" --warmup 3 --format json -o "$d/hand.$round.json"
    done
    timeout 60 "$PY" - "$d" "$1" "$2" <<'PYEOF'
import json, sys
d, b, s = sys.argv[1:]
best = {}
fastest = {}
for name in ("imported", "hand"):
    reports = [json.load(open("%s/%s.%d.json" % (d, name, r))) for r in (1, 2, 3)]
    best[name] = min(r["median_ms"] for r in reports)
    fastest[name] = min(r["min_ms"] for r in reports)
    ops = {}
    for row in reports[0]["profile"]:
        ops[row["op"]] = (row["count"], row["total_ms"])
    listed = ", ".join("%s %d" % (op, c) for op, (c, ms) in sorted(ops.items(), key=lambda kv: -kv[1][1]))
    print("  %-8s %d instructions: %s" % (name, sum(c for c, _ in ops.values()), listed))
print("  batch %s x seq %s: imported %.3f ms, hand %.3f ms (median of %d runs, best of 3 rounds): "
      "imported / hand = %.2fx%s" % (b, s, best["imported"], best["hand"], reports[0]["repetitions"],
                                    best["imported"] / best["hand"],
                                    "" if best["imported"] <= 1.2 * best["hand"] else "  (over 1.2x)"))
print("  batch %s x seq %s: fastest run: imported %.3f ms, hand %.3f ms: %.2fx"
      % (b, s, fastest["imported"], fastest["hand"], fastest["imported"] / fastest["hand"]))
PYEOF
}
bench_size 1 10
bench_size 8 128
