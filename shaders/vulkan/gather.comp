// gather.comp: out[r][c] = in0[idx[r]][c] as raw 32-bit words. The host has
// checked every index against the table before recording this dispatch.
// Push: n0 = index count, n1 = row width, n2 = table rows; in1 = i32 indices.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
void main() {
    uint total = pc.n0 * pc.n1;
    for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * 256u) {
        uint r = e / pc.n1, c = e % pc.n1;
        uint idx = min(in1_u[pc.off_in1 + r], pc.n2 - 1u);
        out_u[pc.off_out + e] = in0_u[pc.off_in0 + idx * pc.n1 + c];
    }
}
