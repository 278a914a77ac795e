#!/bin/sh
# ALLREDUCE (sum, f32) on 2 ranks: BIB's rank-ordered fold beside MPI_Allreduce,
# 1 MB and 64 MB, same run (bench/allreduce_peer.c), under Open MPI and again
# under MPICH where it is installed. Needs mpirun and mpicc.
set -eu
BUILD=${BUILD:-build}
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    echo "SKIP: allreduce: mpirun or mpicc missing (make deps installs openmpi-bin, libopenmpi-dev)"
    exit 0
fi
make -s "$BUILD/allreduce_peer"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "Open MPI $(mpirun --version 2>/dev/null | sed -n '1s/.* //p')"
timeout 600 mpirun --oversubscribe -np 2 "$BUILD/allreduce_peer" 200 10
# The same under MPICH: bib speaks its ABI too (spec/scale-out.md).
if command -v mpicc.mpich >/dev/null 2>&1 && command -v mpiexec.mpich >/dev/null 2>&1; then
    make -s "$BUILD/allreduce_peer_mpich"
    echo
    echo "MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')"
    timeout 600 mpiexec.mpich -n 2 "$BUILD/allreduce_peer_mpich" 200 10
else
    echo "SKIP: allreduce under MPICH: mpicc.mpich or mpiexec.mpich missing (make bench installs libmpich-dev)"
fi
