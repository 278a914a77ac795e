// softmax.comp: softmax along rows, one workgroup of 64 per row:
// m = max (NaN -> NaN, -0 < +0); y = exp(x - m); s = the tree sum of y;
// y = canon(y / s). Specialization constant 1 = 1: log-softmax instead,
// s = the tree sum of exp(x - m) (not stored), y = canon((x - m) - log(s)).
// Push: n0 = rows, n1 = row length. In place is allowed: every element is
// read and written by the same invocation.
#version 450
#include "common.glsl"
#include "tree.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;
void main() {
    uint l = gl_LocalInvocationID.x, n = pc.n1;
    for (uint row = gl_WorkGroupID.x; row < pc.n0; row += gl_NumWorkGroups.x) {
        uint xb = pc.off_in0 + row * n, yb = pc.off_out + row * n;
        int best = bib_order_key(uintBitsToFloat(0xff800000u));
        bool nan = false;
        for (uint i = l; i < n; i += 64u) {
            float x = in0_f[xb + i];
            if (bib_isnan(x))
                nan = true;
            else
                best = max(best, bib_order_key(x));
        }
        precise float m = bib_tree_max(best, nan);
        if (OP == 1u) {
            precise float lpart = 0.0;
            for (uint i = l; i < n; i += 64u) {
                precise float d = in0_f[xb + i] - m;
                precise float e = bib_exp(d);
                lpart = lpart + e;
            }
            precise float ls = bib_log(bib_tree_sum(lpart));
            for (uint i = l; i < n; i += 64u) {
                precise float d = in0_f[xb + i] - m;
                precise float y = d - ls;
                out_f[yb + i] = bib_canon(y);
            }
            continue;
        }
        precise float part = 0.0;
        for (uint i = l; i < n; i += 64u) {
            precise float d = in0_f[xb + i] - m;
            precise float e = bib_exp(d);
            out_f[yb + i] = e;
            part = part + e;
        }
        precise float s = bib_tree_sum(part);
        for (uint i = l; i < n; i += 64u)
            out_f[yb + i] = bib_canon(bib_div(out_f[yb + i], s));
    }
}
