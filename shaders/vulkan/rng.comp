// rng.comp: RNG, uniform [0, 1) from Philox4x32-10 (spec/numerics.md):
// element e takes word e % 4 of the block for counter (e / 4, stream) and
// key seed; value = float(word >> 8) * 2^-24 (both steps exact).
// Push: n0 = element count, u0/u1 = seed low/high, u2/u3 = stream low/high.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
void main() {
    uint blocks = (pc.n0 + 3u) / 4u;
    for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * 256u) {
        uint c0 = b, c1 = 0u, c2 = pc.u2, c3 = pc.u3;
        uint k0 = pc.u0, k1 = pc.u1;
        for (int round = 0; round < 10; ++round) {
            uint hi0, lo0, hi1, lo1;
            umulExtended(0xD2511F53u, c0, hi0, lo0);
            umulExtended(0xCD9E8D57u, c2, hi1, lo1);
            uint n0 = hi1 ^ c1 ^ k0;
            uint n2 = hi0 ^ c3 ^ k1;
            c0 = n0;
            c1 = lo1;
            c2 = n2;
            c3 = lo0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint w[4] = uint[4](c0, c1, c2, c3);
        for (uint j = 0u; j < 4u; ++j) {
            uint e = 4u * b + j;
            if (e < pc.n0) {
                precise float v = float(w[j] >> 8) * uintBitsToFloat(0x33800000u);
                out_f[pc.off_out + e] = v;
            }
        }
    }
}
