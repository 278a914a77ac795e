// divsqrt.comp: the exact division and square root of common.glsl over
// arrays, so tests can compare them with IEEE '/' and sqrtf exhaustively.
// out[2i] = in0[i] / in1[i], out[2i+1] = sqrt(in0[i]). Push: n0 = count.
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
void main() {
    for (uint i = gl_GlobalInvocationID.x; i < pc.n0; i += gl_NumWorkGroups.x * 64u) {
        precise float a = in0_f[pc.off_in0 + i];
        precise float b = in1_f[pc.off_in1 + i];
        precise float q = bib_div(a, b);
        precise float r = bib_sqrt(a);
        out_f[pc.off_out + 2u * i] = q;
        out_f[pc.off_out + 2u * i + 1u] = r;
    }
}
