// unary.comp: elementwise unary kernels and SCALE.
// Specialization constant 1: the op, bib_unary_t (relu, sigmoid, tanh,
// gelu, exp) or 100 for SCALE, so each pipeline holds one op's code only.
// Push: n0 = element count; u1 = SCALE's factor bits.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 1) const uint OP = 0;
void main() {
    precise float s = uintBitsToFloat(pc.u1);
    for (uint i = gl_GlobalInvocationID.x; i < pc.n0; i += gl_NumWorkGroups.x * 256u) {
        precise float x = in0_f[pc.off_in0 + i];
        precise float r;
        if (OP == 100u) {
            r = x * s;
            r = bib_canon(r);
        } else {
            r = bib_unary(OP, x);
        }
        out_f[pc.off_out + i] = r;
    }
}
