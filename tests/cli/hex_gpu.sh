#!/bin/sh
# The hex-program tensor cases on the Vulkan executor, with the same golden
# hashes as on the CPU, under the Khronos validation layer (which must stay
# silent). Prints SKIP with the reason when this machine has no Vulkan device.
set -u
BIB=${BIB:-build/bib}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '.tensor a t0 f32[1] = 1\n.func main regs=1\n    RELU t1, a\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/probe.basm"
if ! "$BIB" run --backend=vulkan "$T/probe.basm" >/dev/null 2>"$T/why"; then
    echo "SKIP: Vulkan hex suite: $(sed 's/^bib: //' "$T/why" | head -1)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
pass=0
fail=0
"$BIB" test --backend=vulkan --validation tests/hex/tensor tests/hex/gpu tests/hex/vk >"$T/out" 2>"$T/err"
rc=$?
tail -1 "$T/out"
if [ $rc -eq 0 ]; then pass=$((pass + 1)); echo "ok   every tensor, GPU_* and VK_* case passes on vulkan"; else
    fail=$((fail + 1)); grep FAIL "$T/out" | head -20; echo "FAIL the hex cases on vulkan"; fi
if grep -q "vulkan validation" "$T/err"; then
    fail=$((fail + 1))
    echo "FAIL the validation layer spoke:"
    grep "vulkan validation" "$T/err" | cut -c1-300 | head -5
else
    pass=$((pass + 1))
    echo "ok   the validation layer stayed silent"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
