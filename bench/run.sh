#!/bin/sh
# `make bench`: every benchmark, each beside its peer measured in the same run.
# Figures worth keeping go to bench/RESULTS.md with the machine they ran on.
set -u
status=0
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
sh bench/interp.sh || status=1
for b in bench/*.bench.sh; do
    [ -f "$b" ] || continue
    echo
    sh "$b" || status=1
done
exit $status
