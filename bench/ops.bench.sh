#!/bin/sh
# Softmax, norms and elementwise kernels of the CPU executor in GB/s beside memcpy, same run.
set -eu
BUILD=${BUILD:-build}
"$BUILD/ops_bench" 4096 4096 9
