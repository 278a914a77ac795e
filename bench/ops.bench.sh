#!/bin/sh
# Softmax, norms and elementwise kernels of the CPU executor in GB/s beside
# memcpy of the same bytes on the executor's thread count and on one, same
# run; the ratio column is the kernel over that many threads' memcpy (issue
# 18's target for softmax, layernorm and rmsnorm: at least 0.9). Three shapes:
# wide rows, 64 MB a tensor, and narrow rows of 64: 16 MB (which fits a
# 32 MB L3 with its output) and 64 MB.
set -eu
BUILD=${BUILD:-build}
timeout 600 "$BUILD/ops_bench" 4096 4096 15
echo
timeout 600 "$BUILD/ops_bench" 65536 64 15
echo
timeout 600 "$BUILD/ops_bench" 262144 64 15
