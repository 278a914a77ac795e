#!/bin/sh
# One MATMUL configuration after another on a GPU executor, each at each size:
#   sh tools/gpu-tiles.sh GPU_BENCH EXECUTOR ENV "CONFIGS" "SIZES"
# e.g. `make gpu-check`'s cuda_tiles step:
#   sh tools/gpu-tiles.sh build/gpu_bench cuda BIB_CUDA_MATMUL_TILES "128 bk8 m256 k16s3 k32 m256k16" "2048 4096"
# Prints gpu_bench's MATMUL line (rate and sampled bits) for each; exits 1
# when a run fails, after the others. A device that is the CPU (lavapipe)
# prints SKIP: timing it says nothing.
set -u
bench=$1 ex=$2 env=$3 configs=$4 sizes=$5
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$bench" "$ex" 16 16 >"$out" 2>&1
if grep -q '^SKIP' "$out"; then
    cat "$out"
    exit 0
fi
if grep -q '(CPU, ' "$out"; then
    echo "SKIP: $ex tiles: the device is the CPU"
    exit 0
fi
rc=0
for c in $configs; do
    for n in $sizes; do
        if ! env "$env=$c" "$bench" "$ex" "$n" "$n" >"$out" 2>&1; then
            rc=1
            echo "$c: gpu_bench $ex $n failed:"
            cat "$out"
            continue
        fi
        printf '%-5s %s\n' "$c" "$(grep '^matmul' "$out")"
    done
done
exit $rc
