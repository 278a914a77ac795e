// probe.comp: start-up probe of the device's float arithmetic.
// For case i, in0 holds (x, y, z); out receives fma(x, y, z) through the
// path chosen by BIB_FMA_MODE, then x * y, then x + y, each one operation.
// The host compares them with its own IEEE results to decide whether fma()
// is fused, whether denormals survive and whether rounding is to nearest-even.
// Push: n0 = number of cases.
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.n0)
        return;
    precise float x = in0_f[pc.off_in0 + 3u * i];
    precise float y = in0_f[pc.off_in0 + 3u * i + 1u];
    precise float z = in0_f[pc.off_in0 + 3u * i + 2u];
    precise float f = bib_fma(x, y, z);
    precise float p = x * y;
    precise float s = x + y;
    out_f[pc.off_out + 3u * i] = f;
    out_f[pc.off_out + 3u * i + 1u] = p;
    out_f[pc.off_out + 3u * i + 2u] = s;
}
