#!/bin/sh
# examples/generate/run.sh [OUTDIR]: text generation through a key/value
# cache, end to end (`make generate`).
#
# Trains a small character-level GPT with torch (train.py: fixed seeds, a
# few seconds), exports it to ONNX with its cache as inputs and outputs,
# imports it with tools/bib-onnx, and continues a prompt one character at a
# time through the cache on the CPU and on Vulkan (generate.py), checking
# that BIB's text equals torch's and that both executors wrote the same
# logits at every step. Files go to OUTDIR (default build/generate). Exits 1
# when a character or a byte differs.
set -eu
BIB=${BIB:-build/bib}
PY=${PYTHON:-/usr/bin/python3}
IMPORTER=${BIB_ONNX:-tools/bib-onnx}
OUT=${1:-build/generate}
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP: generate: the sanitized libbib.so needs the ASan runtime preloaded into python3; the plain run tests it"
    exit 0
fi
if ! "$PY" -c 'import torch, onnx' 2>/dev/null; then
    echo "SKIP: generate: $PY lacks torch or onnx (python3-torch, python3-onnx; make deps installs them)"
    exit 0
fi
[ -n "${BIB_LIBRARY:-}" ] || BIB_LIBRARY="$(cd "$(dirname "$BIB")" && pwd)/libbib.so.0"
PYTHONPATH="$(pwd)/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
export BIB_LIBRARY PYTHONPATH PYTHONDONTWRITEBYTECODE=1
say() { printf '$ %s\n' "$*"; }
run() { say "$*"; timeout 300 "$@"; }

run "$PY" examples/generate/train.py "$OUT"
run "$PY" "$IMPORTER" "$OUT/generate.onnx" -o "$OUT/generate.bib"
run "$PY" examples/generate/generate.py "$OUT"
