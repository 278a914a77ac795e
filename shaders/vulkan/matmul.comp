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
//
// Where fma() flushes denormals (BIB_FMA_MODE 2, NVIDIA's driver; 3 tests it
// over a simulated flushing fma), the plain fused fma() is exact for a whole
// tile as long as every non-zero A and B value it meets has |x| >= 2^-40:
// a product of two such floats is a multiple of ulp(a) * ulp(b) >= 2^-126,
// so, from the chain's +0, every exact sum is a multiple of 2^-126 too,
// never a denormal, and each rounded result is again such a multiple (below
// 2^-102 it is exact, above its ulp is at least 2^-125). No operand or
// result is then denormal and nothing is flushed. The slice loads flag any
// other value (denormals included) in shared memory, and from that slice
// on the tile takes bib_fma, which checks every step; the flag is never
// cleared within a tile, since an exact chain that went through the
// checked path may hold a denormal the fast path would flush.
//
// Specialization constant 8 splits that in two dispatches (the host's
// choice for blocks of more than 16 accumulators, which would otherwise
// carry as many inlined emulations beside the fast step): PASS 1 runs
// the fast path alone, and a tile that meets such a value stops, writes
// nothing and marks its word of the scratch binding 1 (0 when it
// finished); PASS 2 computes just the marked tiles, every step checked.
// PASS 0 is the single dispatch.
#version 450
#include "common.glsl"
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(local_size_x_id = 6) in;
layout(constant_id = 7) const uint ACT = 0;
layout(constant_id = 8) const uint PASS = 0;

const uint TX = BN / TN; // threads along N
const uint TY = BM / TM; // threads along M
const uint NT = TX * TY;

// A is stored k-major with its rows padded by 4 so that the transposing
// stores of a slice hit distinct banks.
const uint AP = BM + 4u;
shared float As[BK * AP]; // As[k * AP + m]
shared float Bs[BK * BN]; // Bs[k * BN + n]
shared uint tiny_met;      // modes 2 and 3: this tile met a value the fast path cannot take

// Non-zero with |x| < 2^-40 (0x2b800000): denormals, and values whose
// products could fall into the denormal range.
bool bib_mm_tiny(float x) {
    return (floatBitsToUint(x) & 0x7fffffffu) - 1u < 0x2b7fffffu;
}

// The fast path's step: fma() as the device computes it (simulated where
// BIB_FMA_MODE is 3), exact under the rule above.
float bib_mm_fast_fma(float a, float b, float c) {
#if BIB_HAVE_F64
    if (BIB_FMA_MODE == 3)
        return bib_flush(bib_fma_emulated(bib_flush(a), bib_flush(b), bib_flush(c)));
#endif
    precise float r = fma(a, b, c);
    return r;
}

// One slice of the chain, each step through STEP: the fast path's fma()
// or bib_fma's checked one, each loop compiled with its own step alone.
#define BIB_MM_SLICE(STEP)                                                                     \
    for (uint kk = 0u; kk < kend; ++kk) {                                                      \
        [[unroll]] for (uint i = 0u; i < TM; ++i)                                              \
            ra[i] = As[kk * AP + ty + i * TY];                                                 \
        [[unroll]] for (uint j = 0u; j < TN; ++j)                                              \
            rb[j] = Bs[kk * BN + tx + j * TX];                                                 \
        [[unroll]] for (uint i = 0u; i < TM; ++i)                                              \
            [[unroll]] for (uint j = 0u; j < TN; ++j)                                          \
                acc[i * TN + j] = STEP(ra[i], rb[j], acc[i * TN + j]);                         \
    }

void main() {
    uint M = pc.n0, N = pc.n1, K = pc.n2;
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % TX, ty = tid / TX;

    // The tile loops depend on the workgroup only, so every barrier() below
    // stays in uniform control flow.
    for (uint m0 = gl_WorkGroupID.y * BM; m0 < M; m0 += gl_NumWorkGroups.y * BM) {
        for (uint n0 = gl_WorkGroupID.x * BN; n0 < N; n0 += gl_NumWorkGroups.x * BN) {
            // The mark is one word that every invocation reads alike.
            uint tile = (m0 / BM) * ((N + BN - 1u) / BN) + n0 / BN;
            if (PASS == 2u && scratch_f[pc.off_scratch + tile] == 0.0)
                continue;
            precise float acc[TM * TN];
            [[unroll]] for (uint i = 0u; i < TM * TN; ++i)
                acc[i] = 0.0;
            precise float ra[TM];
            precise float rb[TN];
            const bool fast_path = BIB_FMA_MODE >= 2 && PASS != 2u;
            bool stopped = false;
            if (fast_path) {
                if (tid == 0u)
                    tiny_met = 0u;
                barrier();
            }

            for (uint k0 = 0u; k0 < K; k0 += BK) {
                // A slice: BM rows x BK columns, read along k (contiguous in A).
                for (uint l = tid; l < BM * BK; l += NT) {
                    uint kk = l % BK, r = l / BK;
                    uint gm = m0 + r, gk = k0 + kk;
                    float v = (gm < M && gk < K) ? in0_f[pc.off_in0 + gm * K + gk] : 0.0;
                    As[kk * AP + r] = v;
                    if (fast_path && bib_mm_tiny(v))
                        atomicOr(tiny_met, 1u);
                }
                // B slice: BK rows x BN columns, read along n (contiguous in B).
                for (uint l = tid; l < BK * BN; l += NT) {
                    uint c = l % BN, kk = l / BN;
                    uint gn = n0 + c, gk = k0 + kk;
                    float v = (gn < N && gk < K) ? in1_f[pc.off_in1 + gk * N + gn] : 0.0;
                    Bs[kk * BN + c] = v;
                    if (fast_path && bib_mm_tiny(v))
                        atomicOr(tiny_met, 1u);
                }
                barrier();
                // Only real k steps: a padded step would still be exact (fma(0,0,acc)
                // == acc, acc is never -0), but skipping it is cheaper and obvious.
                uint kend = min(BK, K - k0);
                // Uniform: every invocation reads the flag between the same two barriers.
                if (PASS == 1u && tiny_met != 0u) {
                    stopped = true;
                    barrier(); // each has read the flag before the next tile clears it
                    break;
                }
                if (PASS == 1u || (fast_path && tiny_met == 0u)) {
                    BIB_MM_SLICE(bib_mm_fast_fma)
                } else {
                    BIB_MM_SLICE(bib_fma)
                }
                barrier();
            }
            if (PASS == 1u) {
                if (tid == 0u)
                    scratch_f[pc.off_scratch + tile] = stopped ? 1.0 : 0.0;
                if (stopped)
                    continue;
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
