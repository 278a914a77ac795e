// shaders/cuda/attention.cu: ATTENTION, one block of 64 threads per
// (query i, head h), exactly the CPU executor's sequence (ops.c
// task_attention):
//   valid keys j < V(i): all T, or causal: i + T - S + 1 clipped to [0, T];
//   s_j = canon(canon(chain over d of fma(q[i,h,d], k[j,h,d], acc) from +0) * scale)
//     (the GEMM's canonicalised output, then SCALE);
//   p = softmax(s) over the valid keys: max, exp(s - m), THE tree, canon(e / sum);
//   o[d] = canon(chain over j < V(i) of fma(p_j, v[j,h,d], acc) from +0).
// A masked key is never computed, exp'd or summed. Lane l owns keys l,
// l+64, ... for the scores and output columns l, l+64, ... for o.
//
// The probabilities of the row live in dynamic shared memory when the
// launch gives T * 4 bytes of it (T <= BIB_CU_ATTN_SMEM_KEYS), otherwise in
// global scratch, one row of T per block: (h * gridDim.x + blockIdx.x) * T,
// reused for each query the block walks to. Parameters: in0 = q[S,H,D],
// in1 = k[T,H,D], in2 = v[T,H,D], out[S,H,D], scratch; n[0] = S, n[1] = H,
// n[2] = D, n[3] = T; u[0] = causal, u[1] = scale bits, u[2] = 1 when the
// probabilities are in shared memory. Grid (up to S, H).
#include "shaders/cuda/common.cuh"

using namespace bibcu;

extern "C" __global__ void __launch_bounds__(BIB_CU_ROW_THREADS)
    bib_attention(const bib_cu_args_t a) {
    BIB_CU_DYNAMIC_SHARED(float, probs_smem);
    __shared__ tree_smem sm;
    const uint32_t l = threadIdx.x;
    const uint64_t S = a.n[0], H = a.n[1], D = a.n[2], T = a.n[3];
    const uint64_t h = blockIdx.y, stride = H * D;
    const float scale = __uint_as_float(a.u[1]);
    const float *q = f32(a.in0), *k = f32(a.in1), *v = f32(a.in2);
    float *o = f32(a.out);
    for (uint64_t i = blockIdx.x; i < S; i += gridDim.x) {
        uint64_t nv = T;
        if (a.u[0] != 0) {
            int64_t lim =
                static_cast<int64_t>(i) + static_cast<int64_t>(T) - static_cast<int64_t>(S) + 1;
            nv = lim <= 0 ? 0 : static_cast<uint64_t>(lim) < T ? static_cast<uint64_t>(lim) : T;
        }
        float *p = a.u[2] ? probs_smem : f32(a.scratch) + (h * gridDim.x + blockIdx.x) * T;
        const float *qi = q + i * stride + h * D;
        int32_t best = order_key(neg_inf());
        bool nan = false;
        for (uint64_t j = l; j < nv; j += BIB_CU_ROW_THREADS) {
            const float *kj = k + j * stride + h * D;
            float acc = 0.0f;
            for (uint64_t d = 0; d < D; d++)
                acc = __fmaf_rn(qi[d], kj[d], acc);
            float s = canon(__fmul_rn(canon(acc), scale));
            p[j] = s;
            if (isnan_(s))
                nan = true;
            else
                best = max(best, order_key(s));
        }
        const float m = tree_max(sm, best, nan);
        float part = 0.0f;
        for (uint64_t j = l; j < nv; j += BIB_CU_ROW_THREADS) {
            float e = exp_(__fsub_rn(p[j], m));
            p[j] = e;
            part = __fadd_rn(part, e);
        }
        const float sum = tree_sum(sm, part);
        for (uint64_t j = l; j < nv; j += BIB_CU_ROW_THREADS)
            p[j] = canon(__fdiv_rn(p[j], sum));
        // Every lane reads every p_j next: the writes above must be seen.
        __syncthreads();
        for (uint64_t d = l; d < D; d += BIB_CU_ROW_THREADS) {
            float acc = 0.0f;
            const float *vd = v + h * D + d;
            for (uint64_t j = 0; j < nv; j++)
                acc = __fmaf_rn(p[j], vd[j * stride], acc);
            o[i * stride + h * D + d] = canon(acc);
        }
        // The next query overwrites p.
        __syncthreads();
    }
}
