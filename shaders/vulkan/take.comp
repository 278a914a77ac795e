// take.comp: TAKE (GATHER_AXIS, GATHER_ELEMENTS), raw 32-bit words. Output
// element e, at index (i0..i5) of the output padded to rank 6 in front
// (n0..n5), is in0[sum i_k s[k] + j * s[12]] with j = in1[sum i_k s[6+k]]
// (i32), plus s[13] when negative. u0 = element count. The VM checked every
// index against -s13..s13-1; the clamp only keeps a bad direct call inside
// the buffer. Grid-stride loop: any grid, same result.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
void main() {
    uint d[6] = uint[6](pc.n0, pc.n1, pc.n2, pc.n3, pc.n4, pc.n5);
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint e = gl_GlobalInvocationID.x; e < pc.u0; e += step) {
        uint rem = e;
        int at0 = 0, at1 = 0;
        [[unroll]] for (int k = 5; k >= 0; k--) {
            int i = int(rem % d[k]);
            rem /= d[k];
            at0 += i * pc.s[k];
            at1 += i * pc.s[6 + k];
        }
        int j = int(in1_u[pc.off_in1 + uint(at1)]);
        if (j < 0)
            j += pc.s[13];
        j = clamp(j, 0, pc.s[13] - 1);
        out_u[pc.off_out + e] = in0_u[pc.off_in0 + uint(at0 + j * pc.s[12])];
    }
}
