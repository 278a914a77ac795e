#!/bin/sh
# ALLREDUCE (sum, f32) on 2 ranks: BIB's rank-ordered fold beside MPI_Allreduce,
# 1 MB and 64 MB, same run (bench/allreduce_peer.c). Needs mpirun and mpicc.
set -eu
BUILD=${BUILD:-build}
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    echo "SKIP: allreduce: mpirun or mpicc missing (make deps installs openmpi-bin, libopenmpi-dev)"
    exit 0
fi
make -s "$BUILD/allreduce_peer"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 600 mpirun --oversubscribe -np 2 "$BUILD/allreduce_peer" 200 10
