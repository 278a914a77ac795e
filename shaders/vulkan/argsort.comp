// argsort.comp: ARGSORT along rows, one workgroup of 64 per row. Push: n0 =
// rows, n1 = row length, u1 = k; out is i32 [rows, k], the first k of each
// row's order (k = n1 for ARGSORT, c for TOPK). Specialization
// constant 1: 0 largest first (ARGMAX's order) | 1 smallest first
// (ARGMIN's). Each element's key is unsigned and ascending in the order the
// row comes out: NaN 0, else the order key's bits (flipped for largest
// first), so -0 and +0 stay apart. An element's place is the count of the
// elements before it (a smaller key, or the same key at a lower index), and
// its index goes there when that is below k: exact, the order of the CPU
// executor's stable sort.
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;

uint sort_key(float x) {
    if (bib_isnan(x))
        return 0u;
    uint u = uint(bib_order_key(x)) ^ 0x80000000u;
    return OP == 0u ? ~u : u;
}

void main() {
    uint l = gl_LocalInvocationID.x, n = pc.n1, k = pc.u1;
    for (uint row = gl_WorkGroupID.x; row < pc.n0; row += gl_NumWorkGroups.x) {
        uint xb = pc.off_in0 + row * n;
        for (uint j = l; j < n; j += 64u) {
            uint kj = sort_key(in0_f[xb + j]), place = 0u;
            for (uint i = 0u; i < n; ++i) {
                uint ki = sort_key(in0_f[xb + i]);
                place += (ki < kj || (ki == kj && i < j)) ? 1u : 0u;
            }
            if (place < k)
                out_u[pc.off_out + row * k + place] = j;
        }
    }
}
