#!/bin/sh
# The hex-program cases on each GPU executor, with the same golden hashes as on
# the CPU: the tensor and GPU_* cases on cuda and vulkan, the VK_* cases on
# vulkan, whose Khronos validation layer must stay silent. An executor this
# machine lacks prints SKIP with the reason.
set -u
BIB=${BIB:-build/bib}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf '.tensor a t0 f32[1] = 1\n.func main regs=1\n    RELU t1, a\n    LDI r0, 0\n    HALT r0\n.end\n' >"$T/probe.basm"
pass=0
fail=0
skip=0
for ex in vulkan cuda; do
    if ! "$BIB" run --backend=$ex --strict-device "$T/probe.basm" >/dev/null 2>"$T/why"; then
        echo "SKIP: $ex hex cases: $(sed 's/^bib: //' "$T/why" | head -1)"
        skip=$((skip + 1))
        continue
    fi
    dirs="tests/hex/tensor tests/hex/gpu"
    flags=""
    if [ $ex = vulkan ]; then
        dirs="$dirs tests/hex/vk"
        flags=--validation
    fi
    # shellcheck disable=SC2086
    "$BIB" test --backend=$ex $flags $dirs >"$T/out" 2>"$T/err"
    rc=$?
    tail -1 "$T/out"
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1))
        echo "ok   every case in $dirs passes on $ex"
    else
        fail=$((fail + 1))
        grep FAIL "$T/out" | head -20
        echo "FAIL the hex cases on $ex"
    fi
    if [ $ex = vulkan ]; then
        if grep -q "vulkan validation" "$T/err"; then
            fail=$((fail + 1))
            echo "FAIL the validation layer spoke:"
            grep "vulkan validation" "$T/err" | cut -c1-300 | head -5
        else
            pass=$((pass + 1))
            echo "ok   the validation layer stayed silent"
        fi
    fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
