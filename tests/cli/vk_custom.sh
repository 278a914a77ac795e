#!/bin/sh
# CLI tests for user device code (spec/device-code.md): examples/vk_custom.basm
# runs its GLSL shader with VK_COMPUTE and prints the checked result, with the
# Khronos validation layer on and silent (a SKIP line with the reason when
# there is no Vulkan device); its disassembly re-assembles to the same bytes;
# shader files (GLSL and SPIR-V) are found relative to the .basm file; GLSL
# compile errors point at the .basm line.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

$BIB run --validation examples/vk_custom.basm >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "no device for user device code" "$T/err"; then
    echo "SKIP: vk_custom on vulkan: $(cat "$T/err")"
elif [ $rc -ne 0 ]; then
    bad "vk_custom runs: exit $rc: $(cat "$T/err")"
elif [ "$(cat "$T/out")" != "1000000" ]; then
    bad "vk_custom prints 1000000, got: $(cat "$T/out")"
elif grep -q "vulkan validation" "$T/err"; then
    bad "vk_custom: the validation layer spoke: $(cat "$T/err")"
else
    ok "vk_custom runs its shader on vulkan, agrees with the CPU, validation silent"
fi

if $BIB asm examples/vk_custom.basm -o "$T/a.bib" 2>"$T/err" &&
    $BIB dis "$T/a.bib" >"$T/a.basm" 2>>"$T/err" &&
    $BIB asm "$T/a.basm" -o "$T/b.bib" 2>>"$T/err" && cmp -s "$T/a.bib" "$T/b.bib"; then
    ok "disassembly of vk_custom re-assembles byte-identical"
else
    bad "vk_custom round trip: $(cat "$T/err")"
fi

mkdir -p "$T/src/shaders"
cat >"$T/src/shaders/fill.comp" <<'GLSL'
#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Out { uint v[]; };
layout(push_constant) uniform Push { uint value; };
void main() { v[gl_GlobalInvocationID.x] = value; }
GLSL
cat >"$T/src/file.basm" <<'BASM'
.tensors 1
.shader fill file "shaders/fill.comp"
.func main regs=8
    HALT r0
.end
BASM
if $BIB asm "$T/src/file.basm" -o "$T/file.bib" 2>"$T/err" &&
    $BIB dis "$T/file.bib" | grep -q "^.shader fill spirv-words bindings=1 push=4 entry=main"; then
    ok ".shader NAME file: path relative to the .basm file, bindings and push reflected"
else
    bad ".shader file: $(cat "$T/err")"
fi

if command -v glslc >/dev/null 2>&1; then
    glslc --target-env=vulkan1.1 -fshader-stage=compute -o "$T/src/shaders/fill.spv" \
        "$T/src/shaders/fill.comp"
    sed 's|file "shaders/fill.comp"|spirv "shaders/fill.spv"|' "$T/src/file.basm" >"$T/src/spv.basm"
    if $BIB asm "$T/src/spv.basm" -o "$T/spv.bib" 2>"$T/err"; then
        ok ".shader NAME spirv: ready SPIR-V from a file"
    else
        bad ".shader spirv: $(cat "$T/err")"
    fi
else
    echo "SKIP: .shader spirv: no glslc to make a SPIR-V file"
fi

cat >"$T/src/bad.basm" <<'BASM'
.tensors 1
.shader broken glsl
#version 450
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Out { uint v[]; };
void main() { v[0] = undefined_name; }
.endshader
.func main regs=4
    VK_COMPUTE broken, r1, t0, 1
    VK_COMPUTE broken, r1, t0, 1
    HALT r0
.end
BASM
$BIB asm "$T/src/bad.basm" -o "$T/bad.bib" 2>"$T/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "bad.basm:6:1: error: shader 'broken' line 4: .*undefined_name" "$T/err"; then
    ok "a GLSL compile error names the .basm line and the shader line"
else
    bad "GLSL error: exit $rc: $(cat "$T/err")"
fi
if [ "$(grep "error:" "$T/err" | grep -vc "error: shader 'broken' line")" -eq 0 ]; then
    ok "uses of a shader that failed to compile add no errors of their own"
else
    bad "cascading errors after a shader's compile error: $(cat "$T/err")"
fi

finish
