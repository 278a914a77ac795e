#!/bin/sh
# ResNet-18 and MobileNetV2 exported from torch, imported by tools/bib-onnx
# and run on the CPU executor, against torch on the same threads in the same
# run (bench/cnn.py says how). Checks each output against torch's and the
# bytes across CPU levels before timing.
# Usage: BIB=build/bib sh bench/cnn.bench.sh [repetitions]
set -eu
BUILD=${BUILD:-build}
BIB=${BIB:-$BUILD/bib}
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
    echo "SKIP: cnn: $PY lacks torch or onnx (python3-torch, python3-onnx)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/bib-cnn.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
timeout 1200 "$PY" bench/cnn.py "$T" --bib "$BIB" --repetitions "${1:-10}"
