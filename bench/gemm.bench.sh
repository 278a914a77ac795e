#!/bin/sh
# MATMUL on the CPU executor beside OpenBLAS cblas_sgemm, same thread count, same run.
set -eu
BUILD=${BUILD:-build}
echo "MATMUL (CPU executor) vs OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0 2>/dev/null), $(nproc) threads"
"$BUILD/gemm_bench" "$(nproc)"
