// norm.comp: LAYERNORM and RMSNORM along rows, one workgroup of 64 per row.
// layernorm: mean = tree(x) / n; var = tree((x - mean)^2) / n (no fma);
//   den = sqrt(var + eps); y = canon(((x - mean) / den) * gamma + beta).
// rmsnorm: ms = tree(x^2) / n; den = sqrt(ms + eps); y = canon((x / den) * gamma).
// Specialization constant 1: 0 layernorm | 1 rmsnorm | 2 layernorm with gamma
// and beta as the rows of in1 [2,n] (LAYERNORM_EPS).
// Push: n0 = rows, n1 = row length, u1 = eps bits. in1 = gamma, in2 = beta.
#version 450
#include "common.glsl"
#include "tree.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;
void main() {
    uint l = gl_LocalInvocationID.x, n = pc.n1;
    precise float eps = uintBitsToFloat(pc.u1);
    precise float nf = float(n);
    for (uint row = gl_WorkGroupID.x; row < pc.n0; row += gl_NumWorkGroups.x) {
        uint xb = pc.off_in0 + row * n, yb = pc.off_out + row * n;
        if (OP != 1u) {
            precise float part = 0.0;
            for (uint i = l; i < n; i += 64u)
                part = part + in0_f[xb + i];
            precise float mean = bib_div(bib_tree_sum(part), nf);
            precise float part2 = 0.0;
            for (uint i = l; i < n; i += 64u) {
                precise float d = in0_f[xb + i] - mean;
                precise float dd = d * d;
                part2 = part2 + dd;
            }
            precise float var = bib_div(bib_tree_sum(part2), nf);
            precise float ve = var + eps;
            precise float den = bib_sqrt(ve);
            for (uint i = l; i < n; i += 64u) {
                precise float d = in0_f[xb + i] - mean;
                precise float q = bib_div(d, den);
                precise float g = q * in1_f[pc.off_in1 + i];
                precise float b = OP == 2u ? in1_f[pc.off_in1 + n + i] : in2_f[pc.off_in2 + i];
                precise float y = g + b;
                out_f[yb + i] = bib_canon(y);
            }
        } else {
            precise float part = 0.0;
            for (uint i = l; i < n; i += 64u) {
                precise float x = in0_f[xb + i];
                precise float xx = x * x;
                part = part + xx;
            }
            precise float ms = bib_div(bib_tree_sum(part), nf);
            precise float me = ms + eps;
            precise float den = bib_sqrt(me);
            for (uint i = l; i < n; i += 64u) {
                precise float q = bib_div(in0_f[xb + i], den);
                precise float y = q * in1_f[pc.off_in1 + i];
                out_f[yb + i] = bib_canon(y);
            }
        }
    }
}
