// strided.comp: STRIDED, a copy of raw 32-bit words. Output element e, at
// index (i0..i5) of the output padded to rank 6 in front (n0..n5), is
// in0[s0 + sum i_k s[1+k]], or where i_{s14} >= s15 in1[s7 + sum i_k s[8+k]].
// u0 = element count. The host checked that every index lies inside its view
// and fits an int (vk_kernels.c). Grid-stride loop: any grid, same result.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
void main() {
    uint d[6] = uint[6](pc.n0, pc.n1, pc.n2, pc.n3, pc.n4, pc.n5);
    uint step = gl_NumWorkGroups.x * 256u;
    for (uint e = gl_GlobalInvocationID.x; e < pc.u0; e += step) {
        int i[6];
        uint rem = e;
        [[unroll]] for (int k = 5; k >= 0; k--) {
            i[k] = int(rem % d[k]);
            rem /= d[k];
        }
        bool second = i[pc.s[14]] >= pc.s[15];
        int base = second ? 7 : 0;
        int at = pc.s[base];
        [[unroll]] for (int k = 0; k < 6; k++)
            at += i[k] * pc.s[base + 1 + k];
        if (second)
            out_u[pc.off_out + e] = in1_u[pc.off_in1 + uint(at)];
        else
            out_u[pc.off_out + e] = in0_u[pc.off_in0 + uint(at)];
    }
}
