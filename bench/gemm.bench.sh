#!/bin/sh
# MATMUL on the CPU executor beside oneDNN's dnnl_sgemm and OpenBLAS's
# cblas_sgemm, same thread count, same process, on 1 thread and on all CPUs.
# OpenBLAS runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset in its own
# command only: set, they may pin it to another CPU's kernels (the header
# names the kernel it ran). Tests and CI keep the environment as it is.
set -eu
BUILD=${BUILD:-build}
threads=$(nproc)
for t in 1 "$threads"; do
    echo "MATMUL (CPU executor) vs oneDNN $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null), $t thread(s)"
    "$BUILD/gemm_bench" dnnl "$t"
    echo
    echo "MATMUL (CPU executor) vs OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0 2>/dev/null), $t thread(s), unpinned"
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD/gemm_bench" openblas "$t" 9 256,512,1024,2048,4096
    echo
    [ "$threads" -gt 1 ] || break
done
