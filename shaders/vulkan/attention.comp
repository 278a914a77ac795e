// attention.comp: ATTENTION, one workgroup of 64 per (query i, head h):
//   valid keys j < V(i) (all T, or causal: i + T - S + 1 clipped to [0, T]);
//   s_j = canon(canon(chain_d fma(q[i,h,d], k[j,h,d], acc from +0)) * scale);
//   p = softmax(s) exactly as softmax.comp (max, exp, the tree, canon(e / sum));
//   o[d] = canon(chain_j fma(p_j, v[j,h,d], acc from +0)).
// The probabilities go through scratch (binding 4), row (h*S + i)*T.
// Push: n0 = S, n1 = H, n2 = D, n3 = T, u0 = causal, u1 = scale bits.
// Grid: (min(S, 65535), H).
#version 450
#include "common.glsl"
#include "tree.glsl"
layout(local_size_x = 64) in;
void main() {
    uint l = gl_LocalInvocationID.x;
    uint S = pc.n0, H = pc.n1, D = pc.n2, T = pc.n3, h = gl_WorkGroupID.y;
    uint stride = H * D;
    precise float scale = uintBitsToFloat(pc.u1);
    for (uint i = gl_WorkGroupID.x; i < S; i += gl_NumWorkGroups.x) {
        uint nv = T;
        if (pc.u0 != 0u) {
            int lim = int(i) + int(T) - int(S) + 1;
            nv = lim <= 0 ? 0u : min(uint(lim), T);
        }
        uint qb = pc.off_in0 + i * stride + h * D;
        uint sb = pc.off_scratch + (h * S + i) * T;
        int best = bib_order_key(uintBitsToFloat(0xff800000u));
        bool nan = false;
        for (uint j = l; j < nv; j += 64u) {
            uint kb = pc.off_in1 + j * stride + h * D;
            precise float acc = 0.0;
            for (uint d = 0u; d < D; ++d)
                acc = bib_fma(in0_f[qb + d], in1_f[kb + d], acc);
            precise float sc = bib_canon(acc) * scale;
            sc = bib_canon(sc);
            scratch_f[sb + j] = sc;
            if (bib_isnan(sc))
                nan = true;
            else
                best = max(best, bib_order_key(sc));
        }
        precise float m = bib_tree_max(best, nan);
        precise float part = 0.0;
        for (uint j = l; j < nv; j += 64u) {
            precise float dlt = scratch_f[sb + j] - m;
            precise float e = bib_exp(dlt);
            scratch_f[sb + j] = e;
            part = part + e;
        }
        precise float sum = bib_tree_sum(part);
        for (uint j = l; j < nv; j += 64u)
            scratch_f[sb + j] = bib_canon(bib_div(scratch_f[sb + j], sum));
        memoryBarrierBuffer();
        barrier();
        for (uint d = l; d < D; d += 64u) {
            precise float o = 0.0;
            for (uint j = 0u; j < nv; ++j)
                o = bib_fma(scratch_f[sb + j], in2_f[pc.off_in2 + j * stride + h * D + d], o);
            out_f[pc.off_out + i * stride + h * D + d] = bib_canon(o);
        }
        barrier();
    }
}
