#!/bin/sh
# The Python package (bindings/python): its unittest suite under
# /usr/bin/python3 against the shared library in $BUILD.
set -u
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
if [ -n "${BIB_TEST_SANITIZED:-}" ]; then
    echo "SKIP: python: the sanitized libbib.so needs the ASan runtime preloaded into python3; the plain run tests the package"
    exit 0
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: python: numpy is missing for $PY (make deps installs python3-numpy)"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# The package is copied so that no __pycache__ lands in the source tree.
cp -r bindings/python "$T/python"
BIB_SOURCE="$(pwd)" BIB_LIBRARY="$(cd "$BUILD" && pwd)/libbib.so.0" PYTHONPATH="$T/python" PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -m unittest discover -s "$T/python/tests" -v 2>&1
