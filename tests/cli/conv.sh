#!/bin/sh
# CONV, MAXPOOL, AVGPOOL and BATCHNORM: a numpy oracle, bit identity across
# the executors (cpu levels x threads, vulkan, the CUDA emulation), batch
# invariance, the empty batch and the error messages (tests/cli/conv.py).
# Prints one line per check and "N passed, N failed" at the end.
set -u
PY=${PYTHON:-/usr/bin/python3}
BIB=${BIB:-build/bib} BUILD=${BUILD:-build} exec "$PY" "$(dirname "$0")/conv.py"
