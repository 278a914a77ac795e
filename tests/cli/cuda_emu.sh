#!/bin/sh
# The CUDA kernels, EMULATED ON THE CPU, against the CPU executor's bits.
#
# build/tests/libcuda_emu.so (backends/cuda/cuda.mk, made with test_cuda when
# nvcc exists) is the mock CUDA driver with a kernel emulator: it runs g++
# builds of the very sources shaders/cuda/*.cu, each CUDA thread a fiber,
# with real block barriers, warp shuffles, the sm_80 cp.async path (checked
# alignment, copies landing as late or as early as the hardware may let
# them) and poisoned shared memory (backends/cuda/testing/cu_emu_sched.cpp).
# Through BIB_CUDA_LIBRARY, set here and nowhere else (test_cuda and
# cli:tensor assert that this machine has no CUDA device, and they stay
# right), the CUDA executor then runs:
#   (a) test_cuda's conformance suite (executor_cts.h, suite cuda): every
#       kernel, bit for bit against the CPU executor;
#   (b) the hex cases of tests/hex/tensor and tests/hex/gpu on --backend=cuda
#       with --strict-device, against their golden hashes.
# This checks the kernel SOURCES' arithmetic, order and synchronisation; it
# is not a GPU run and proves nothing about SASS, the driver or memory
# ordering on real hardware (make gpu-check does that on a GPU).
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

echo "NOTE: an EMULATION of the CUDA kernel sources on the CPU (libcuda_emu.so), not a GPU run"
EMU="$BUILD/tests/libcuda_emu.so"
case $EMU in /*) ;; *) EMU="$(pwd)/$EMU" ;; esac
if [ ! -f "$EMU" ] || [ ! -x "$BUILD/tests/test_cuda" ]; then
    echo "SKIP: CUDA kernel emulation: no $EMU (built with build/tests/test_cuda when nvcc exists)"
    echo "$pass passed, $fail failed"
    exit 0
fi
# The executor's --backend=auto measurements are cached per device; the
# emulator is no device to remember.
export XDG_CACHE_HOME="$T/cache"

# (a) The conformance suite. The user_kernel_* tests launch user PTX (probe
# kernels), which the emulator cannot run: it runs only the g++ builds of
# shaders/cuda. The plain mock suite (cuda_mock, in `make test`'s
# unit:test_cuda) covers their host side.
start=$(date +%s)
BIB_CUDA_LIBRARY="$EMU" "$BUILD/tests/test_cuda" --filter 'cuda/!(user_kernel_*)' --jobs 2 \
    >"$T/cts" 2>&1
rc=$?
tested=$(sed -n 's/.*Synthesis: Tested: \([0-9]*\) | Passing: \([0-9]*\) .*/\1 \2/p' "$T/cts")
set -- $tested
if [ $rc -eq 0 ] && [ $# -eq 2 ] && [ "$1" -ge 30 ] && [ "$1" = "$2" ] &&
    grep -q "kernel emulator" "$T/cts" && ! grep -q "^SKIP" "$T/cts"; then
    ok "conformance suite cuda/* ($1 tests, user PTX excluded) on the emulated kernels: bits equal the CPU's ($(($(date +%s) - start)) s)"
else
    grep -v "^\[----\]   *$" "$T/cts" | tail -40
    bad "conformance suite cuda/* on the emulated kernels (exit $rc)"
fi

# (b) The hex cases, GPU_* opcodes required to run on the (emulated) device.
start=$(date +%s)
BIB_CUDA_LIBRARY="$EMU" "$BIB" test --backend=cuda --strict-device tests/hex/tensor tests/hex/gpu \
    >"$T/hex" 2>"$T/hexerr"
rc=$?
summary=$(tail -1 "$T/hex")
case $summary in
"0 passed"*) n=0 ;;
*" passed, 0 failed") n=1 ;;
*) n=0 ;;
esac
if [ $rc -eq 0 ] && [ $n -eq 1 ]; then
    ok "hex cases tests/hex/tensor tests/hex/gpu on the emulated kernels: $summary ($(($(date +%s) - start)) s)"
else
    grep FAIL "$T/hex" | head -20
    head -20 "$T/hexerr"
    bad "hex cases on the emulated kernels (exit $rc): $summary"
fi

finish
