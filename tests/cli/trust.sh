#!/bin/sh
# CLI tests for running modules BIB did not write (spec/security.md):
# - the load policy: --deny=device-code refuses, at load (exit 65), a module
#   that carries a Vulkan shader or a CUDA kernel, naming the section and the
#   program; --allow-host refuses a module importing a host function outside
#   its list, naming the import; modules within the policy run as before;
# - --device-timeout: a user shader that loops far past a 200 ms timeout
#   traps on lavapipe (exit 70) naming the instruction that waited, and the
#   process exits within a few seconds instead of waiting for the shader
#   (SKIP without a Vulkan device); on the mock CUDA driver, a stream that
#   never finishes traps the same way;
# - bad values of the new options are usage errors (exit 64).
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

# expect NAME RC PATTERN command...: the command exits RC and its stderr
# matches the grep pattern.
expect() {
    name=$1 want=$2 pattern=$3
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq "$want" ] && grep -q -- "$pattern" "$T/err"; then
        ok "$name"
    else
        bad "$name: exit $rc (want $want): $(cat "$T/err")"
    fi
}

# ---- the load policy ----------------------------------------------------------

expect "--deny=device-code refuses a .basm with a Vulkan shader at its line, before compiling it" 65 \
    "vk_custom.basm:11:1: error: shader 'saxpy' is user device code, which the load policy denies (--deny=device-code); nothing it names was read or compiled" \
    $BIB run --deny=device-code examples/vk_custom.basm
expect "--deny=device-code refuses a .basm with a CUDA kernel at its line" 65 \
    "gpu_custom.basm:14:1: error: kernel 'saxpy' is user device code, which the load policy denies (--deny=device-code); nothing it names was read or compiled" \
    $BIB run --deny=device-code examples/gpu_custom.basm

# Assembling source reads the files .shader and .kernel name and runs nvcc
# on a .cu: under the policy none of that happens.
cat >"$T/files.basm" <<'BASM'
.tensors 1
.shader s file "missing.comp"
.kernel k cu "missing.cu" params=t
.func main regs=4
    HALT r0
.end
BASM
$BIB run "$T/files.basm" >"$T/out" 2>"$T/err"
if grep -q "missing.comp" "$T/err" && grep -q "missing.cu\|nvcc" "$T/err"; then
    ok "without the policy, the assembler goes for the files the directives name"
else
    bad "files.basm without the policy: $(cat "$T/err")"
fi
expect "under --deny=device-code the assembler reads no file a directive names" 65 \
    "files.basm:2:1: error: shader 's' is user device code" \
    $BIB run --deny=device-code "$T/files.basm"
if grep -q "cannot\|nvcc\|No such file" "$T/err"; then
    bad "under the policy a directive's file was still read: $(cat "$T/err")"
elif grep -q "files.basm:3:1: error: kernel 'k' is user device code" "$T/err"; then
    ok "both directives are named, and no file was opened"
else
    bad "files.basm under the policy: $(cat "$T/err")"
fi
$BIB asm examples/gpu_custom.basm -o "$T/gpu.bib" 2>"$T/err"
expect "the policy holds for a .bib module too, before anything runs" 65 \
    "gpu.bib: section 18 (kernels): kernel 'saxpy'" \
    $BIB run --deny=device-code --trace "$T/gpu.bib"
if [ -s "$T/out" ] || grep -q "^\[" "$T/err"; then
    bad "a refused module executed instructions: $(head -3 "$T/err")"
else
    ok "a refused module executes nothing"
fi

if [ "$($BIB run --deny=device-code examples/fib.basm 2>&1)" = "2178309" ]; then
    ok "--deny=device-code runs a module without device code"
else
    bad "--deny=device-code on fib: $($BIB run --deny=device-code examples/fib.basm 2>&1)"
fi

expect "--allow-host refuses an import outside the list, naming it and the list" 65 \
    "fib.basm: section 4 (symbols): import 'print_i64' is not an allowed host function (allowed: print_str, print_f64)" \
    $BIB run --allow-host=print_str,print_f64 examples/fib.basm
expect "--allow-host= (empty) allows no host function" 65 \
    "hello.basm: section 4 (symbols): import 'print_str' is not an allowed host function (allowed: none)" \
    $BIB run --allow-host= examples/hello.basm
if [ "$($BIB run --allow-host=print_str,print_i64 examples/fib.basm 2>&1)" = "2178309" ]; then
    ok "--allow-host runs a module whose imports are all listed"
else
    bad "--allow-host=print_str,print_i64 on fib: $($BIB run --allow-host=print_str,print_i64 examples/fib.basm 2>&1)"
fi

expect "--deny takes only known names" 64 "bib: --deny takes device-code, not 'files'" \
    $BIB run --deny=files examples/fib.basm
expect "--allow-host refuses an empty name in its list" 64 \
    "bib: --allow-host takes host function names separated by commas, not 'print_i64,,x'" \
    $BIB run --allow-host=print_i64,,x examples/fib.basm
expect "--device-timeout needs a unit" 64 \
    "bib: --device-timeout takes a duration such as 200ms or 5s, not '200'" \
    $BIB run --device-timeout 200 examples/fib.basm
expect "--device-timeout refuses zero" 64 \
    "bib: --device-timeout takes a duration such as 200ms or 5s, not '0s'" \
    $BIB run --device-timeout 0s examples/fib.basm

# ---- --device-timeout on Vulkan (lavapipe here) ----------------------------------

# 65535 x 65535 workgroups of 64 invocations, each looping n times (n = 2^32
# - 1; lavapipe stops a loop after 65535 iterations): hours of work. Every
# iteration stores to a volatile buffer, so no compiler can remove it.
cat >"$T/spin.basm" <<'BASM'
.tensors 1
.shader spin glsl
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) coherent volatile buffer V { uint v[]; };
layout(push_constant) uniform Push { uint n; };
void main() {
    for (uint i = 0u; i < n; i++)
        v[1] = v[1] + 1u;
}
.endshader
.func main regs=8
    LDI      r0, 4
    ALLOC    t0, i32, r0, 1
    VK_INIT  -1
    LDI      r1, 65535
    LDI      r2, 65535
    LDI      r3, 1
    LDI      r4, 0
    LDI      r5, -1
    VK_COMPUTE spin, r1, r4, 1
    VK_SUBMIT
    VK_SYNC
    HALT     r0
.end
BASM
start=$(date +%s)
timeout 60 $BIB run --device-timeout 200ms "$T/spin.basm" >"$T/out" 2>"$T/err"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && grep -q "no device for user device code" "$T/err"; then
    echo "SKIP: --device-timeout on vulkan: $(cat "$T/err")"
elif [ $rc -eq 70 ] &&
    grep -q "^bib: trap at pc 10 (VK_SYNC) line 23: vulkan: device work ran past the device timeout (200 ms); the executor is unusable from now on$" "$T/err"; then
    ok "a shader looping past --device-timeout 200ms traps at the VK_SYNC that waited (exit 70)"
    if [ "$took" -le 10 ]; then
        ok "the process exits in ${took}s without waiting for the shader"
    else
        bad "the process took ${took}s to exit after the timeout"
    fi
else
    bad "spin shader under --device-timeout: exit $rc after ${took}s: $(cat "$T/err")"
fi

# A run that ends with the work still in flight (VK_SUBMIT, no VK_SYNC)
# leaves it to the VM's end, which waits no longer than the limit either.
grep -v "VK_SYNC" "$T/spin.basm" >"$T/inflight.basm"
start=$(date +%s)
timeout 60 $BIB run --device-timeout 200ms "$T/inflight.basm" >"$T/out" 2>"$T/err"
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 4 ] && grep -q "no device for user device code" "$T/err"; then
    echo "SKIP: --device-timeout on vulkan, work in flight at exit: no Vulkan device"
elif [ $rc -eq 4 ] && [ "$took" -le 10 ]; then
    ok "work still in flight when the run ends is abandoned after the limit (exit in ${took}s)"
else
    bad "work in flight at exit: exit $rc after ${took}s: $(cat "$T/err")"
fi

# The same shader over one workgroup finishes well inside the limit.
sed -e 's/LDI      r1, 65535/LDI      r1, 1/' -e 's/LDI      r2, 65535/LDI      r2, 1/' \
    -e 's/LDI      r5, -1/LDI      r5, 1000/' "$T/spin.basm" >"$T/quick.basm"
timeout 60 $BIB run --device-timeout 5s "$T/quick.basm" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "no device for user device code" "$T/err"; then
    echo "SKIP: --device-timeout on vulkan, work within the limit: no Vulkan device"
elif [ $rc -eq 4 ]; then
    ok "device work that finishes within --device-timeout runs as before"
else
    bad "quick shader under --device-timeout 5s: exit $rc: $(cat "$T/err")"
fi

# ---- --device-timeout on the mock CUDA driver --------------------------------------

MOCK="$BUILD/tests/libcuda_mock.so"
case $MOCK in /*) ;; *) MOCK="$(pwd)/$MOCK" ;; esac
if [ ! -f "$MOCK" ]; then
    echo "SKIP: --device-timeout on cuda: no $MOCK (built with build/tests/test_cuda when nvcc exists)"
else
    start=$(date +%s)
    BIB_CUDA_LIBRARY="$MOCK" BIB_MOCK_CUDA_STREAM_BUSY=1 timeout 60 \
        $BIB run --device-timeout 100ms examples/gpu_custom.basm >"$T/out" 2>"$T/err"
    rc=$?
    took=$(($(date +%s) - start))
    if [ $rc -eq 70 ] &&
        grep -q "^bib: trap at pc [0-9]* (TGET r[0-9]*, t1, r[0-9]*) line [0-9]*: reading t1 back from the cuda executor: cuda: device work ran past the device timeout (100 ms); the executor is unusable from now on$" "$T/err" &&
        [ "$took" -le 10 ]; then
        ok "on the mock driver, a stream that never finishes traps at the first wait (exit 70)"
    else
        bad "cuda stream that never finishes: exit $rc after ${took}s: $(cat "$T/err")"
    fi
    # --profile waits after every device instruction: the timeout is that
    # instruction's trap, not a later one's.
    BIB_CUDA_LIBRARY="$MOCK" BIB_MOCK_CUDA_STREAM_BUSY=1 timeout 60 \
        $BIB run --profile --device-timeout 100ms examples/gpu_custom.basm >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 70 ] &&
        grep -q "^bib: trap at pc [0-9]* (GPU_LAUNCH saxpy, r1, r7, 4) line [0-9]*: cuda: device work ran past the device timeout (100 ms); the executor is unusable from now on$" "$T/err"; then
        ok "under --profile the timeout traps at the GPU_LAUNCH whose work the profiler waited for"
    else
        bad "--profile with a stream that never finishes: exit $rc: $(cat "$T/err")"
    fi
fi

finish
