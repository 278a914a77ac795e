#!/bin/sh
# torch.topk exported by torch.onnx, imported by tools/bib-onnx and run on
# the CPU executor, against torch.topk on the same threads in the same run
# (bench/topk.py says how). Checks the indices against numpy's stable order
# and the values against torch's before timing.
# Usage: BIB=build/bib sh bench/topk.bench.sh [repetitions]
set -eu
BUILD=${BUILD:-build}
BIB=${BIB:-$BUILD/bib}
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
    echo "SKIP: topk: $PY lacks torch or onnx (python3-torch, python3-onnx)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/bib-topk.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
timeout 1200 "$PY" bench/topk.py "$T" --bib "$BIB" --repetitions "${1:-20}"
