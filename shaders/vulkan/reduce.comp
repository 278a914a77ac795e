// reduce.comp: REDUCE (sum, max, mean) and ARGMAX along rows, one workgroup
// of 64 per row. Push: n0 = rows, n1 = row length. Specialization
// constant 1: 0 sum | 1 max | 2 mean | 3 argmax (out is i32: the first NaN's index, else the first
// maximum's in the order -0 < +0; 0 for an empty row).
#version 450
#include "common.glsl"
#include "tree.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;
shared uint nan_at[64];
void main() {
    uint l = gl_LocalInvocationID.x, n = pc.n1, op = OP;
    for (uint row = gl_WorkGroupID.x; row < pc.n0; row += gl_NumWorkGroups.x) {
        uint xb = pc.off_in0 + row * n;
        if (op == 5u) {
            precise float part = 1.0;
            for (uint i = l; i < n; i += 64u)
                part = part * in0_f[xb + i];
            float s = bib_tree_prod(part);
            if (l == 0u)
                out_f[pc.off_out + row] = bib_canon(s);
        } else if (op == 4u) {
            int best = bib_order_key(uintBitsToFloat(0x7f800000u));
            bool nan = false;
            for (uint i = l; i < n; i += 64u) {
                float x = in0_f[xb + i];
                if (bib_isnan(x))
                    nan = true;
                else
                    best = min(best, bib_order_key(x));
            }
            float m = bib_tree_min(best, nan);
            if (l == 0u)
                out_f[pc.off_out + row] = m;
        } else if (op == 0u || op == 2u) {
            precise float part = 0.0;
            for (uint i = l; i < n; i += 64u)
                part = part + in0_f[xb + i];
            precise float s = bib_tree_sum(part);
            if (op == 2u)
                s = bib_div(s, float(n));
            if (l == 0u)
                out_f[pc.off_out + row] = bib_canon(s);
        } else {
            int best = bib_order_key(uintBitsToFloat(0xff800000u));
            uint at = 0xffffffffu, first_nan = 0xffffffffu;
            for (uint i = l; i < n; i += 64u) {
                float x = in0_f[xb + i];
                if (bib_isnan(x)) {
                    first_nan = min(first_nan, i);
                } else {
                    int k = op == 6u ? ~bib_order_key(x) : bib_order_key(x);
                    if (at == 0xffffffffu || k > best) {
                        best = k;
                        at = i;
                    }
                }
            }
            if (op == 1u) {
                float m = bib_tree_max(best, first_nan != 0xffffffffu);
                if (l == 0u)
                    out_f[pc.off_out + row] = m;
            } else {
                bib_tree_k[l] = best;
                bib_tree_i[l] = at;
                nan_at[l] = first_nan;
                barrier();
                if (l == 0u) {
                    uint nn = 0xffffffffu, bi = 0xffffffffu;
                    int bk = bib_order_key(uintBitsToFloat(0xff800000u));
                    for (uint j = 0u; j < 64u; ++j) {
                        nn = min(nn, nan_at[j]);
                        uint ij = bib_tree_i[j];
                        if (ij == 0xffffffffu)
                            continue;
                        int kj = bib_tree_k[j];
                        if (bi == 0xffffffffu || kj > bk || (kj == bk && ij < bi)) {
                            bk = kj;
                            bi = ij;
                        }
                    }
                    uint r = nn != 0xffffffffu ? nn : (bi == 0xffffffffu ? 0u : bi);
                    out_u[pc.off_out + row] = r;
                }
                barrier();
            }
        }
    }
}
