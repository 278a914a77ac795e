// binary.comp: elementwise add, sub, mul, div, pow, min, max with broadcasting
// of in1.
// Specialization constants: 1 = bib_binary_t, 2 = in1's form: 0 same shape
// | 1 a row [n1] | 2 one element. Push: n0 = element count, n1 = row length.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const uint FORM = 0;
void main() {
    for (uint i = gl_GlobalInvocationID.x; i < pc.n0; i += gl_NumWorkGroups.x * 256u) {
        uint j = FORM == 0u ? i : (FORM == 1u ? i % pc.n1 : 0u);
        precise float a = in0_f[pc.off_in0 + i];
        precise float b = in1_f[pc.off_in1 + j];
        precise float r;
        if (OP == 0u)
            r = a + b;
        else if (OP == 1u)
            r = a - b;
        else if (OP == 2u)
            r = a * b;
        else if (OP == 3u)
            r = bib_div(a, b);
        else if (OP == 4u)
            r = bib_pow(a, b);
        else if (OP == 5u)
            r = bib_min2(a, b);
        else
            r = bib_max2(a, b);
        out_f[pc.off_out + i] = bib_canon(r);
    }
}
