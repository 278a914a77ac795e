#!/bin/sh
# ATTENTION (8 heads, S = T = 512, head 64) and the FFN block (256 x 512 ->
# 2048 -> 512) of the CPU executor beside MATMUL at the same inner sizes,
# same run; the ratio column is the workload's GFLOP/s over MATMUL's (issue
# 18's target: at least 0.7). On the executor's threads (wall clock), then
# on one thread timed by the process's CPU time, which other work on a
# shared machine does not inflate.
set -eu
BUILD=${BUILD:-build}
timeout 600 "$BUILD/fused_bench" 15
echo
BIB_THREADS=1 BENCH_CLOCK=cpu timeout 600 "$BUILD/fused_bench" 15
