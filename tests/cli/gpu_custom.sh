#!/bin/sh
# CLI tests for a user CUDA kernel (GPU_LAUNCH, spec/device-code.md):
# examples/gpu_custom.basm carries kernels/saxpy.ptx (the PTX of
# kernels/saxpy.cu). It assembles and verifies; its disassembly re-assembles
# to the same bytes; on a CUDA device it prints the checked sum, and without
# one it traps (exit 70) saying there is no device and why, with a SKIP line
# for the device check. The mock driver (build/tests/libcuda_mock.so, made
# with test_cuda) then runs the same module through the VM and the CUDA
# executor without a GPU, and shows the trap messages for bad PTX and a
# missing entry. With nvcc, `.kernel ... cu` compiles the .cu instead.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

if $BIB asm examples/gpu_custom.basm -o "$T/a.bib" 2>"$T/err"; then
    ok "gpu_custom assembles and verifies"
else
    bad "gpu_custom asm: $(cat "$T/err")"
fi

if $BIB dis "$T/a.bib" >"$T/a.basm" 2>"$T/err" &&
    grep -q "^.kernel saxpy .*params=ttfi" "$T/a.basm" &&
    $BIB asm "$T/a.basm" -o "$T/b.bib" 2>>"$T/err" && cmp -s "$T/a.bib" "$T/b.bib"; then
    ok "disassembly of gpu_custom re-assembles byte-identical"
else
    bad "gpu_custom round trip: $(cat "$T/err")"
fi

# The real device, when there is one.
env -u BIB_CUDA_LIBRARY $BIB run examples/gpu_custom.basm >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 70 ] &&
    grep -q "trap at pc [0-9]* (GPU_LAUNCH saxpy, r1, r7, 4) line [0-9]*: no device for user device code: executor 'cuda' is not available: ." "$T/err"; then
    ok "without a CUDA device GPU_LAUNCH traps (exit 70) and says why"
    echo "SKIP: gpu_custom on a CUDA device: $(sed 's/.*is not available: //' "$T/err")"
elif [ $rc -eq 70 ] && grep -q "this build has no cuda executor" "$T/err"; then
    ok "in a build without the CUDA executor GPU_LAUNCH traps (exit 70) and says why"
    echo "SKIP: gpu_custom on a CUDA device: this build has no CUDA executor (no nvcc)"
elif [ $rc -ne 0 ]; then
    bad "gpu_custom runs: exit $rc: $(cat "$T/err")"
elif [ "$(cat "$T/out")" != "1000000" ]; then
    bad "gpu_custom prints 1000000, got: $(cat "$T/out")"
else
    ok "gpu_custom runs saxpy.ptx on the CUDA device and agrees with the CPU"
fi

# The same module through the VM and the CUDA executor on the mock driver.
MOCK="$BUILD/tests/libcuda_mock.so"
case $MOCK in /*) ;; *) MOCK="$(pwd)/$MOCK" ;; esac
if [ ! -f "$MOCK" ]; then
    echo "SKIP: mock driver checks: no $MOCK (built with build/tests/test_cuda when nvcc exists)"
else
    if BIB_CUDA_LIBRARY="$MOCK" $BIB run examples/gpu_custom.basm >"$T/out" 2>"$T/err" &&
        [ "$(cat "$T/out")" = "1000000" ]; then
        ok "on the mock driver: tensors go to the device, the parameters arrive, y comes back"
    else
        bad "gpu_custom on the mock driver: $(cat "$T/out") $(cat "$T/err")"
    fi

    cat >"$T/bad.basm" <<'BASM'
.tensors 1
.kernel broken ptx-text params=t entry=k
.version 7.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 p)
{
    bogus.u32 %r1;
    ret;
}
.endkernel
.kernel lost ptx-text params=t entry=nowhere
.version 7.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 p) { ret; }
.endkernel
.func main regs=8
    LDI r0, 1
    ALLOC t0, f32, r0, 1
    LDI r1, 1
    LDI r2, 1
    LDI r3, 1
    LDI r4, 1
    LDI r5, 1
    LDI r6, 1
    LDI r7, 0
    GPU_LAUNCH broken, r1, r7, 1
    HALT r0
.end
BASM
    BIB_CUDA_LIBRARY="$MOCK" $BIB run "$T/bad.basm" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 70 ] && grep -q "kernel 'broken' could not be built: the driver rejected its PTX (cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX): ptxas application ptx input, line 6; error : Unknown instruction 'bogus'" "$T/err"; then
        ok "on the mock driver: PTX the driver rejects traps with its JIT log"
    else
        bad "bad PTX: exit $rc: $(cat "$T/err")"
    fi
    sed 's/GPU_LAUNCH broken/GPU_LAUNCH lost/' "$T/bad.basm" >"$T/lost.basm"
    BIB_CUDA_LIBRARY="$MOCK" $BIB run "$T/lost.basm" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 70 ] && grep -q "kernel 'lost' could not be built: no entry 'nowhere' in its PTX" "$T/err"; then
        ok "on the mock driver: a missing entry traps and names it"
    else
        bad "missing entry: exit $rc: $(cat "$T/err")"
    fi
    sed 's/LDI r4, 1/LDI r4, 2048/' "$T/lost.basm" | sed 's/GPU_LAUNCH lost/GPU_LAUNCH broken/' |
        sed 's/bogus.u32 %r1;//' >"$T/big.basm"
    BIB_CUDA_LIBRARY="$MOCK" $BIB run "$T/big.basm" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 70 ] && grep -q "kernel 'broken': cuLaunchKernel(kernel 'k', grid 1x1x1, block 2048x1x1): CUDA_ERROR_INVALID_VALUE" "$T/err"; then
        ok "on the mock driver: a launch the driver refuses traps with the grid, block and error"
    else
        bad "launch error: exit $rc: $(cat "$T/err")"
    fi
fi

# The CUDA C source, compiled by nvcc at assembly time (the assembler looks on
# PATH, then in $CUDA_HOME/bin and /usr/local/cuda/bin).
if command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/nonexistent}/bin/nvcc" ] ||
    [ -x /usr/local/cuda/bin/nvcc ]; then
    mkdir -p "$T/src/kernels"
    cp examples/kernels/saxpy.cu "$T/src/kernels/"
    sed 's|^.kernel saxpy ptx "kernels/saxpy.ptx"|.kernel saxpy cu "kernels/saxpy.cu"|' \
        examples/gpu_custom.basm >"$T/src/cu.basm"
    if $BIB asm "$T/src/cu.basm" -o "$T/cu.bib" 2>"$T/err" &&
        $BIB dis "$T/cu.bib" | grep -q "\.entry saxpy("; then
        ok ".kernel saxpy cu \"kernels/saxpy.cu\" compiles the kernel source with nvcc"
    else
        bad ".kernel cu: $(cat "$T/err")"
    fi
else
    echo "SKIP: .kernel cu: no nvcc (on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin)"
fi

finish
