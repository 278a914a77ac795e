// loops.comp: start-up probe of how many loop iterations one invocation may
// run. Some drivers stop every loop of an invocation once a budget of
// iterations shared by all its loops is spent (lavapipe: 65535), leaving
// the rest of the work undone without an error.
// One invocation runs a loop of n0 iterations, then a loop of n1 iterations
// around one of n2; out_u[0] and out_u[1] receive how many iterations of the
// first loop and of the inner loop ran, out_u[2] a hash of every iteration,
// so that no compiler can count instead of looping. Specialization constant
// 1 = 1: each iteration of the first loop also divides through bib_div,
// whose own loop of 27 steps counts against the budget unless the driver
// unrolls it (the kernels call bib_div and bib_sqrt once an element).
// Push: n0, n1, n2 as above; u0, u1 the division's operands' bits.
#version 450
#include "common.glsl"
layout(local_size_x = 1) in;
layout(constant_id = 1) const uint DIV = 0;
void main() {
    uint single = 0u, nested = 0u, h = 0x811c9dc5u;
    precise float f = uintBitsToFloat(pc.u0);
    for (uint i = 0u; i < pc.n0; ++i) {
        h = (h ^ i) * 0x01000193u;
        if (DIV == 1u) {
            f = bib_div(f, uintBitsToFloat(pc.u1));
            h ^= floatBitsToUint(f);
        }
        single++;
    }
    for (uint i = 0u; i < pc.n1; ++i) {
        for (uint j = 0u; j < pc.n2; ++j) {
            h = (h ^ j) * 0x01000193u;
            nested++;
        }
    }
    out_u[pc.off_out] = single;
    out_u[pc.off_out + 1u] = nested;
    out_u[pc.off_out + 2u] = h;
}
