// matmul.comp: out[M,N] = in0[M,K] . in1[K,N] (+ in2[N]) then act.
// Each output is one fma chain over k ascending from +0 (spec/numerics.md),
// so tiling over M and N and staging K in shared-memory slices changes no
// bit: the accumulator stays in a register across slices. Each thread owns a
// TM x TN register block, strided across the tile so shared reads do not
// conflict. Push: n0 = M, n1 = N, n2 = K, u1 = has bias. Specialization
// constant 7 = bib_act_t, so only that activation's code is compiled in.
// Grid: (min(ceil(N/BN), 65535), min(ceil(M/BM), 65535)); a workgroup
// strides over the tiles beyond the grid, since 65535 workgroups along each
// axis is all Vulkan guarantees (NVIDIA's y and z limits are exactly that).
// Workgroup size (BM/TM)*(BN/TN) is set by the host through local_size_x_id 6.
#version 450
#include "common.glsl"
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(local_size_x_id = 6) in;
layout(constant_id = 7) const uint ACT = 0;

const uint TX = BN / TN; // threads along N
const uint TY = BM / TM; // threads along M
const uint NT = TX * TY;

// A is stored k-major with its rows padded by 4 so that the transposing
// stores of a slice hit distinct banks.
const uint AP = BM + 4u;
shared float As[BK * AP]; // As[k * AP + m]
shared float Bs[BK * BN]; // Bs[k * BN + n]

void main() {
    uint M = pc.n0, N = pc.n1, K = pc.n2;
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % TX, ty = tid / TX;

    // The tile loops depend on the workgroup only, so every barrier() below
    // stays in uniform control flow.
    for (uint m0 = gl_WorkGroupID.y * BM; m0 < M; m0 += gl_NumWorkGroups.y * BM) {
        for (uint n0 = gl_WorkGroupID.x * BN; n0 < N; n0 += gl_NumWorkGroups.x * BN) {
            precise float acc[TM * TN];
            [[unroll]] for (uint i = 0u; i < TM * TN; ++i)
                acc[i] = 0.0;
            precise float ra[TM];
            precise float rb[TN];

            for (uint k0 = 0u; k0 < K; k0 += BK) {
                // A slice: BM rows x BK columns, read along k (contiguous in A).
                for (uint l = tid; l < BM * BK; l += NT) {
                    uint kk = l % BK, r = l / BK;
                    uint gm = m0 + r, gk = k0 + kk;
                    As[kk * AP + r] = (gm < M && gk < K) ? in0_f[pc.off_in0 + gm * K + gk] : 0.0;
                }
                // B slice: BK rows x BN columns, read along n (contiguous in B).
                for (uint l = tid; l < BK * BN; l += NT) {
                    uint c = l % BN, kk = l / BN;
                    uint gn = n0 + c, gk = k0 + kk;
                    Bs[kk * BN + c] = (gn < N && gk < K) ? in1_f[pc.off_in1 + gk * N + gn] : 0.0;
                }
                barrier();
                // Only real k steps: a padded step would still be exact (fma(0,0,acc)
                // == acc, acc is never -0), but skipping it is cheaper and obvious.
                uint kend = min(BK, K - k0);
                for (uint kk = 0u; kk < kend; ++kk) {
                    [[unroll]] for (uint i = 0u; i < TM; ++i)
                        ra[i] = As[kk * AP + ty + i * TY];
                    [[unroll]] for (uint j = 0u; j < TN; ++j)
                        rb[j] = Bs[kk * BN + tx + j * TX];
                    [[unroll]] for (uint i = 0u; i < TM; ++i)
                        [[unroll]] for (uint j = 0u; j < TN; ++j)
                            acc[i * TN + j] = bib_fma(ra[i], rb[j], acc[i * TN + j]);
                }
                barrier();
            }

            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                uint gm = m0 + ty + i * TY;
                if (gm >= M)
                    continue;
                [[unroll]] for (uint j = 0u; j < TN; ++j) {
                    uint gn = n0 + tx + j * TX;
                    if (gn >= N)
                        continue;
                    precise float v = acc[i * TN + j];
                    if (pc.u1 != 0u)
                        v = v + in2_f[pc.off_in2 + gn];
                    v = bib_canon(v);
                    if (ACT == 1u)
                        v = bib_relu(v);
                    else if (ACT == 2u)
                        v = bib_gelu(v);
                    else if (ACT == 3u)
                        v = bib_gelu_erf(v);
                    out_f[pc.off_out + gm * N + gn] = v;
                }
            }
        }
    }
}
