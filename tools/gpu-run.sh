#!/bin/sh
# Everything owed to a GPU machine, in one command: unpack the Vulkan loader
# (.gl, from ../shared/gpu/prepare-gl.sh) and the dependency kit (.kit, from
# `sh tools/gpu-kit.sh fetch`), then `make gpu-check` (build, test_cuda,
# test_vulkan, the whole `make test`, ASan and UBSan over the suites with the
# real driver, compute-sanitizer memcheck and racecheck, the fuzz corpus
# replayed on every executor, gpu_bench and the torch peer), then `bib bench`
# and `bib info`. Every log goes into one archive, $OUT/gpu-logs.tar.gz, and
# the summary to standard output.
#
#   sh tools/gpu-run.sh            (the device run carries .gl and .kit, and
#                                   build/fuzz/corpus/run for replay_diff)
#
# GPU_STEPS (see backends/cuda/cuda.mk, plus bib_bench for the last part)
# splits the work across calls of limited length, e.g.
#   GPU_STEPS="device build test_cuda test_vulkan make_test" sh tools/gpu-run.sh
#   GPU_STEPS="memcheck racecheck cuda_bench vulkan_bench torch_peer bib_bench" sh tools/gpu-run.sh
#   GPU_STEPS="sanitize replay_diff" sh tools/gpu-run.sh
# Exits non-zero when any step failed.
set -u
cd "$(dirname "$0")/.."
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

jobs=$(nproc)
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
make KIT="$kit" PYTHON=python3 WARN="$warn" gpu-check OUT="$logs"
rc=$?
case " ${GPU_STEPS:-bib_bench} " in
*" bib_bench "*)
    {
        build/bib info
        echo
        timeout 300 build/bib bench
    } >"$logs/bib-bench.log" 2>&1 || rc=1
    cat "$logs/bib-bench.log"
    ;;
esac
tar -czf "$OUT/gpu-logs.tar.gz" -C "$logs" .
echo "gpu-run: logs in $OUT/gpu-logs.tar.gz; exit $rc"
exit $rc
