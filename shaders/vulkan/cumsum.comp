// cumsum.comp: CUMSUM, one invocation per row: a row's adds are one chain,
// each waiting on the one before, in the order the CPU executor runs them.
// Push: n0 = rows, n1 = row length. Specialization constant 1: bit 0
// exclusive (the sum before each element's add, +0 first), bit 1 reverse
// (from the last element back), bit 2 i32 (wrapping adds). The invocation
// reads each position before it writes it, so out may be in0's storage.
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;

void main() {
    uint n = pc.n1;
    bool exclusive = (OP & 1u) != 0u, reverse = (OP & 2u) != 0u, i32 = (OP & 4u) != 0u;
    for (uint row = gl_GlobalInvocationID.x; row < pc.n0; row += gl_NumWorkGroups.x * 64u) {
        precise float s = 0.0;
        uint si = 0u;
        for (uint j = 0u; j < n; ++j) {
            uint p = row * n + (reverse ? n - 1u - j : j);
            if (i32) {
                uint v = in0_u[pc.off_in0 + p], before = si;
                si = j == 0u ? v : before + v;
                out_u[pc.off_out + p] = exclusive ? (j == 0u ? 0u : before) : si;
            } else {
                precise float v = in0_f[pc.off_in0 + p];
                precise float before = s;
                s = j == 0u ? v : before + v;
                out_f[pc.off_out + p] = bib_canon(exclusive ? (j == 0u ? 0.0 : before) : s);
            }
        }
    }
}
