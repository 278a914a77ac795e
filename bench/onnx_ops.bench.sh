#!/bin/sh
# Models exported by torch.onnx, imported by tools/bib-onnx and run on the
# CPU executor, against torch on the same threads in the same run:
# torch.topk and torch.cumsum (bench/onnx_ops.py), and a GPT-2-small-shaped
# decoder with a key/value cache, its prompt and its next token
# (bench/decoder.py). Each script says how and what it checks before timing.
# Usage: BIB=build/bib sh bench/onnx_ops.bench.sh [repetitions]
set -eu
BUILD=${BUILD:-build}
BIB=${BIB:-$BUILD/bib}
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
    echo "SKIP: onnx_ops: $PY lacks torch or onnx (python3-torch, python3-onnx)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/bib-onnx-ops.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
timeout 1200 "$PY" bench/onnx_ops.py "$T" --bib "$BIB" --repetitions "${1:-20}"
echo
timeout 1800 "$PY" bench/decoder.py "$T" --bib "$BIB" --repetitions "${1:-10}"
