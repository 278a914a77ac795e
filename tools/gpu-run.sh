#!/bin/sh
# Everything owed to a GPU machine, in one command: unpack the Vulkan loader
# (.gl, from ../shared/gpu/prepare-gl.sh) and the dependency kit (.kit, from
# `sh tools/gpu-kit.sh fetch`), build, then the steps of `make gpu-check`
# (backends/cuda/cuda.mk) one at a time, most wanted first: test_cuda and
# test_vulkan on the real driver, the GPU CLI suites (hex cases, custom
# kernels, byte-identical examples, auto), gpu_bench beside the torch peer,
# `bib info` and `bib bench`, compute-sanitizer memcheck and racecheck, the
# whole `make test`, ASan and UBSan with the real driver, and the fuzz corpus
# replayed on every executor. Every log goes into one archive,
# $OUT/gpu-logs.tar.gz, remade after each step so that a call stopped at its
# limit still brings back what it finished; the summary goes to stdout.
#
#   sh tools/gpu-run.sh            (the device run carries .gl and .kit, and
#                                   build/fuzz/corpus/run for replay_diff)
#
# GPU_STEPS picks the steps and their order; NAME:SECONDS gives a step its
# own limit (else GPU_STEP_TIMEOUT, 300), so that a run fits one call:
#   GPU_STEPS="device build test_cuda:120 test_vulkan:90 gpu_cli:120" sh tools/gpu-run.sh
# Exits non-zero when any step failed.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
logs=/tmp/bib-gpu-logs
kit=/opt/bibkit
rm -rf "$logs"
mkdir -p "$logs"

for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig 2>/dev/null
sh tools/gpu-kit.sh unpack "$kit" || exit 1
# The NVIDIA Vulkan driver's manifest where the loader does not find it.
nv_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$nv_icd" ] && ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES="$nv_icd"
fi

# With the Vulkan validation layer loaded, `bib test --validation` on the
# H100 could not load NVIDIA's ICD ("libnvidia-tls.so: cannot allocate memory
# in static TLS block": the driver's initial-exec TLS came after the
# surplus was spent); a larger surplus for dlopen'ed libraries is the remedy.
export GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.rtld.optional_static_tls=16384}"
jobs=$(nproc)
ALL_STEPS="device build test_cuda test_vulkan gpu_cli cuda_bench vulkan_bench torch_peer bib_bench
cuda_tiles vulkan_tiles ncu_matmul memcheck racecheck make_test sanitize replay_diff"
# That machine's gcc may be newer than the one the code was last built with;
# a new warning must not cost the whole GPU run: build without -Werror then,
# and say so (the warnings are in build0.log, to be fixed here).
warn="-Wall -Wextra -Werror"
if ! make -j"$jobs" KIT="$kit" PYTHON=python3 all >"$logs/build0.log" 2>&1; then
    if grep -q '\[-Werror' "$logs/build0.log"; then
        warn="-Wall -Wextra"
        echo "gpu-run: this compiler warns where the usual one does not; building without -Werror:"
        grep -B2 '\[-Werror' "$logs/build0.log" | head -n 20
        make -j"$jobs" KIT="$kit" PYTHON=python3 WARN="$warn" all >>"$logs/build0.log" 2>&1
    fi
    tail -n 30 "$logs/build0.log"
fi
# One step at a time, in the order given (most wanted first), the archive
# remade after each: a call stopped at its time limit still brings back the
# logs of every step it finished.
rc=0
t0=$(date +%s)
for s in ${GPU_STEPS:-$ALL_STEPS}; do
    name=${s%%:*}
    limit=${GPU_STEP_TIMEOUT:-300}
    [ "$name" != "$s" ] && limit=${s#*:}
    make -j"$jobs" KIT="$kit" PYTHON=python3 PYTHON_GPU=python3 WARN="$warn" \
        GPU_STEP_TIMEOUT="$limit" GPU_STEPS="$name" OUT="$logs" gpu-check || rc=1
    echo "     ($name: $(($(date +%s) - t0)) s into the run)"
    [ -d "$logs/bib-bench" ] && cp "$logs/bib-bench/chart.png" "$OUT/" 2>/dev/null
    tar -czf "$OUT/gpu-logs.tar.gz.tmp" -C "$logs" . && mv "$OUT/gpu-logs.tar.gz.tmp" "$OUT/gpu-logs.tar.gz"
done
echo "gpu-run: logs in $OUT/gpu-logs.tar.gz; exit $rc"
exit $rc
