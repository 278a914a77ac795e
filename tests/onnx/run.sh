#!/bin/sh
# Runs one Python script of tests/onnx (the importer's unit tests, or the
# node-test runner) under /usr/bin/python3 against the library in $BUILD.
set -u
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP: $1: the sanitized libbib.so needs the ASan runtime preloaded into python3; the plain run tests the importer"
    exit 0
fi
if ! "$PY" -c 'import numpy, onnx' 2>/dev/null; then
    echo "SKIP: $1: numpy or onnx is missing for $PY (Debian's python3-numpy and python3-onnx; make deps installs them)"
    exit 0
fi
BIB_LIBRARY="$(cd "$BUILD" && pwd)/libbib.so.0" PYTHONDONTWRITEBYTECODE=1 exec "$PY" "$1"
