// shaders/cuda/rows.cu: the row kernels: SOFTMAX, REDUCE (sum, max, mean, min, prod),
// ARGMAX, LAYERNORM, RMSNORM, each along the last axis with one block of 64
// threads per row (THE tree of spec/numerics.md; common.cuh). Blocks walk
// rows with a stride of gridDim.x; the loop condition depends on blockIdx
// only, so every thread of a block reaches every barrier.
//
// Parameters (bib_cu_args_t): in0 = x, out = y, n[0] = rows, n[1] = row
// length; LAYERNORM in1 = gamma, in2 = beta; RMSNORM in1 = gamma; u[0] =
// eps bits. A row kernel may run in place (out == in0): every element is
// read and written by the one lane that owns it.
#include "shaders/cuda/common.cuh"

using namespace bibcu;

namespace {

constexpr uint32_t L = BIB_CU_ROW_THREADS;

// softmax: m = max (NaN -> NaN, -0 < +0); y = exp(x - m); s = tree(y);
// y = canon(y / s). VPT > 0 keeps the lane's VPT elements in registers
// (rows of at most 64 * VPT); VPT == 0 streams any length from memory.
// LOG: log-softmax, s = tree(exp(x - m)) (not stored), y = canon((x - m) - log(s)).
template <int VPT, bool LOG>
__device__ __forceinline__ void softmax_row(const float *x, float *y, uint32_t n, tree_smem &sm) {
    const uint32_t l = threadIdx.x;
    int32_t best = order_key(neg_inf());
    bool nan = false;
    if (VPT > 0) {
        float v[VPT > 0 ? VPT : 1];
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            uint32_t i = l + L * q;
            v[q] = i < n ? x[i] : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            if (l + L * q < n) {
                if (isnan_(v[q]))
                    nan = true;
                else
                    best = max(best, order_key(v[q]));
            }
        }
        float m = tree_max(sm, best, nan);
        float part = 0.0f;
        if (LOG) {
#pragma unroll
            for (int q = 0; q < VPT; q++)
                if (l + L * q < n)
                    part = __fadd_rn(part, exp_(__fsub_rn(v[q], m)));
            float ls = log_(tree_sum(sm, part));
#pragma unroll
            for (int q = 0; q < VPT; q++) {
                uint32_t i = l + L * q;
                if (i < n)
                    y[i] = canon(__fsub_rn(__fsub_rn(v[q], m), ls));
            }
        } else {
#pragma unroll
            for (int q = 0; q < VPT; q++) {
                if (l + L * q < n) {
                    v[q] = exp_(__fsub_rn(v[q], m));
                    part = __fadd_rn(part, v[q]);
                }
            }
            float s = tree_sum(sm, part);
#pragma unroll
            for (int q = 0; q < VPT; q++) {
                uint32_t i = l + L * q;
                if (i < n)
                    y[i] = canon(__fdiv_rn(v[q], s));
            }
        }
    } else {
        for (uint32_t i = l; i < n; i += L) {
            float xi = x[i];
            if (isnan_(xi))
                nan = true;
            else
                best = max(best, order_key(xi));
        }
        float m = tree_max(sm, best, nan);
        float part = 0.0f;
        if (LOG) {
            for (uint32_t i = l; i < n; i += L)
                part = __fadd_rn(part, exp_(__fsub_rn(x[i], m)));
            float ls = log_(tree_sum(sm, part));
            for (uint32_t i = l; i < n; i += L)
                y[i] = canon(__fsub_rn(__fsub_rn(x[i], m), ls));
        } else {
            for (uint32_t i = l; i < n; i += L) {
                float e = exp_(__fsub_rn(x[i], m));
                y[i] = e;
                part = __fadd_rn(part, e);
            }
            float s = tree_sum(sm, part);
            for (uint32_t i = l; i < n; i += L)
                y[i] = canon(__fdiv_rn(y[i], s));
        }
    }
}

template <int VPT, bool LOG> __device__ __forceinline__ void softmax_rows(const bib_cu_args_t &a) {
    __shared__ tree_smem sm;
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const float *x = f32(a.in0);
    float *y = f32(a.out);
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x)
        softmax_row<VPT, LOG>(x + row * n, y + row * n, n, sm);
}

enum { REDUCE_SUM, REDUCE_MAX, REDUCE_MEAN, REDUCE_MIN, REDUCE_PROD };

template <int OP> __device__ __forceinline__ void reduce_rows(const bib_cu_args_t &a) {
    __shared__ tree_smem sm;
    const uint32_t l = threadIdx.x;
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const float *x = f32(a.in0);
    float *y = f32(a.out);
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *xr = x + row * n;
        if (OP == REDUCE_PROD) {
            float part = 1.0f;
            for (uint32_t i = l; i < n; i += L)
                part = __fmul_rn(part, xr[i]);
            float s = tree_prod(sm, part);
            if (l == 0)
                y[row] = canon(s);
        } else if (OP == REDUCE_MIN) {
            int32_t best = order_key(__int_as_float(0x7f800000));
            bool nan = false;
            for (uint32_t i = l; i < n; i += L) {
                float xi = xr[i];
                if (isnan_(xi))
                    nan = true;
                else
                    best = min(best, order_key(xi));
            }
            float m = tree_min(sm, best, nan);
            if (l == 0)
                y[row] = m;
        } else if (OP == REDUCE_MAX) {
            int32_t best = order_key(neg_inf());
            bool nan = false;
            for (uint32_t i = l; i < n; i += L) {
                float xi = xr[i];
                if (isnan_(xi))
                    nan = true;
                else
                    best = max(best, order_key(xi));
            }
            float m = tree_max(sm, best, nan);
            if (l == 0)
                y[row] = m;
        } else {
            float part = 0.0f;
            for (uint32_t i = l; i < n; i += L)
                part = __fadd_rn(part, xr[i]);
            float s = tree_sum(sm, part);
            if (OP == REDUCE_MEAN)
                s = __fdiv_rn(s, static_cast<float>(n));
            if (l == 0)
                y[row] = canon(s);
        }
    }
}

// ARGMAX (out is i32): the index of the first NaN if the row has one, else
// of the first maximum (u[0] = 1: minimum) in the order -0 < +0; 0 for an
// empty row.
__device__ __forceinline__ void argmax_rows(const bib_cu_args_t &a) {
    __shared__ int32_t keys[L];
    __shared__ uint32_t at_s[L], nan_s[L];
    const uint32_t none = 0xffffffffu;
    const uint32_t l = threadIdx.x;
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const float *x = f32(a.in0);
    int32_t *y = i32(a.out);
    // u[0] = 1: ARGMIN, the first maximum of the keys' complements.
    const int32_t flip = a.u[0] ? -1 : 0;
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *xr = x + row * n;
        int32_t best = order_key(neg_inf());
        uint32_t at = none, first_nan = none;
        // A lane's elements ascend, so its first NaN ends its scan.
        for (uint32_t i = l; i < n; i += L) {
            float xi = xr[i];
            if (isnan_(xi)) {
                first_nan = i;
                break;
            }
            int32_t k = order_key(xi) ^ flip;
            if (at == none || k > best) {
                best = k;
                at = i;
            }
        }
        keys[l] = best;
        at_s[l] = at;
        nan_s[l] = first_nan;
        __syncthreads();
        if (l == 0) {
            uint32_t nn = none, bi = none;
            int32_t bk = order_key(neg_inf());
            for (uint32_t j = 0; j < L; j++) {
                nn = min(nn, nan_s[j]);
                uint32_t ij = at_s[j];
                if (ij == none)
                    continue;
                int32_t kj = keys[j];
                if (bi == none || kj > bk || (kj == bk && ij < bi)) {
                    bk = kj;
                    bi = ij;
                }
            }
            y[row] = static_cast<int32_t>(nn != none ? nn : (bi == none ? 0u : bi));
        }
        __syncthreads();
    }
}

// ARGSORT (out is i32 [rows, u[1]], the first u[1] of each row's order;
// ARGSORT's u[1] is the row length, TOPK's its c): each element's unsigned key
// ascends in the order the row comes out (NaN 0, else the order key's bits,
// flipped for largest first: u[0] = 0); its place is the count of the
// elements before it (a smaller key, or the same at a lower index), and its
// index goes there when that is below u[1]: the CPU executor's stable sort,
// exactly.
__device__ __forceinline__ uint32_t sort_key(float x, bool largest) {
    if (isnan_(x))
        return 0u;
    uint32_t u = static_cast<uint32_t>(order_key(x)) ^ 0x80000000u;
    return largest ? ~u : u;
}

__device__ __forceinline__ void argsort_rows(const bib_cu_args_t &a) {
    const uint32_t l = threadIdx.x;
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const bool largest = a.u[0] == 0;
    const uint32_t k = a.u[1]; // the first k of each row's order: out is [rows, k]
    const float *x = f32(a.in0);
    int32_t *y = i32(a.out);
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *xr = x + row * n;
        for (uint32_t j = l; j < n; j += L) {
            uint32_t kj = sort_key(xr[j], largest), place = 0;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t ki = sort_key(xr[i], largest);
                place += (ki < kj || (ki == kj && i < j)) ? 1u : 0u;
            }
            if (place < k)
                y[row * k + place] = static_cast<int32_t>(j);
        }
    }
}

// CUMSUM: one thread per row (a row's adds are one chain), in the order the
// CPU executor runs them. u[0]: bit 0 exclusive (the sum before each
// element's add, +0 first), bit 1 reverse (from the last element back), bit 2
// i32 (wrapping adds). Each position is read before it is written.
__device__ __forceinline__ void cumsum_rows(const bib_cu_args_t &a) {
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const bool exclusive = a.u[0] & 1u, reverse = a.u[0] & 2u, is_i32 = a.u[0] & 4u;
    for (uint64_t row = static_cast<uint64_t>(blockIdx.x) * L + threadIdx.x; row < rows;
         row += static_cast<uint64_t>(gridDim.x) * L) {
        float s = 0.0f;
        uint32_t si = 0u;
        for (uint32_t j = 0; j < n; j++) {
            const uint64_t p = row * n + (reverse ? n - 1u - j : j);
            if (is_i32) {
                const uint32_t v = u32(a.in0)[p], before = si;
                si = j == 0 ? v : before + v;
                u32(a.out)[p] = exclusive ? (j == 0 ? 0u : before) : si;
            } else {
                const float v = f32(a.in0)[p], before = s;
                s = j == 0 ? v : __fadd_rn(before, v);
                f32(a.out)[p] = canon(exclusive ? (j == 0 ? 0.0f : before) : s);
            }
        }
    }
}

// layernorm: mean = tree(x) / n; var = tree((x - mean)^2) / n, each term
// rounded after the subtract and after the multiply; den = sqrt(var + eps);
// y = canon(((x - mean) / den) * gamma + beta), a multiply then an add.
__device__ __forceinline__ void layernorm_rows(const bib_cu_args_t &a) {
    __shared__ tree_smem sm;
    const uint32_t l = threadIdx.x;
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const float nf = static_cast<float>(n);
    const float eps = __uint_as_float(a.u[0]);
    const float *x = f32(a.in0), *gamma = f32(a.in1), *beta = f32(a.in2);
    float *y = f32(a.out);
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *xr = x + row * n;
        float *yr = y + row * n;
        float part = 0.0f;
        for (uint32_t i = l; i < n; i += L)
            part = __fadd_rn(part, xr[i]);
        const float mean = __fdiv_rn(tree_sum(sm, part), nf);
        float part2 = 0.0f;
        for (uint32_t i = l; i < n; i += L) {
            float d = __fsub_rn(xr[i], mean);
            part2 = __fadd_rn(part2, __fmul_rn(d, d));
        }
        const float var = __fdiv_rn(tree_sum(sm, part2), nf);
        const float den = __fsqrt_rn(__fadd_rn(var, eps));
        for (uint32_t i = l; i < n; i += L) {
            float q = __fdiv_rn(__fsub_rn(xr[i], mean), den);
            yr[i] = canon(__fadd_rn(__fmul_rn(q, gamma[i]), beta[i]));
        }
    }
}

// rmsnorm: ms = tree(x * x) / n; den = sqrt(ms + eps); y = canon((x / den) * gamma).
__device__ __forceinline__ void rmsnorm_rows(const bib_cu_args_t &a) {
    __shared__ tree_smem sm;
    const uint32_t l = threadIdx.x;
    const uint64_t rows = a.n[0];
    const uint32_t n = static_cast<uint32_t>(a.n[1]);
    const float nf = static_cast<float>(n);
    const float eps = __uint_as_float(a.u[0]);
    const float *x = f32(a.in0), *gamma = f32(a.in1);
    float *y = f32(a.out);
    for (uint64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *xr = x + row * n;
        float *yr = y + row * n;
        float part = 0.0f;
        for (uint32_t i = l; i < n; i += L)
            part = __fadd_rn(part, __fmul_rn(xr[i], xr[i]));
        const float ms = __fdiv_rn(tree_sum(sm, part), nf);
        const float den = __fsqrt_rn(__fadd_rn(ms, eps));
        for (uint32_t i = l; i < n; i += L)
            yr[i] = canon(__fmul_rn(__fdiv_rn(xr[i], den), gamma[i]));
    }
}

} // namespace

#define BIB_ROW_KERNEL(name, body)                                                                 \
    extern "C" __global__ void __launch_bounds__(BIB_CU_ROW_THREADS) name(const bib_cu_args_t a) { \
        body;                                                                                      \
    }

BIB_ROW_KERNEL(bib_softmax_s, (softmax_rows<0, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r1, (softmax_rows<1, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r2, (softmax_rows<2, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r4, (softmax_rows<4, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r8, (softmax_rows<8, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r16, (softmax_rows<16, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r32, (softmax_rows<32, false>(a)))
BIB_ROW_KERNEL(bib_softmax_r64, (softmax_rows<64, false>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_s, (softmax_rows<0, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r1, (softmax_rows<1, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r2, (softmax_rows<2, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r4, (softmax_rows<4, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r8, (softmax_rows<8, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r16, (softmax_rows<16, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r32, (softmax_rows<32, true>(a)))
BIB_ROW_KERNEL(bib_logsoftmax_r64, (softmax_rows<64, true>(a)))
BIB_ROW_KERNEL(bib_reduce_sum, reduce_rows<REDUCE_SUM>(a))
BIB_ROW_KERNEL(bib_reduce_max, reduce_rows<REDUCE_MAX>(a))
BIB_ROW_KERNEL(bib_reduce_mean, reduce_rows<REDUCE_MEAN>(a))
BIB_ROW_KERNEL(bib_reduce_min, reduce_rows<REDUCE_MIN>(a))
BIB_ROW_KERNEL(bib_reduce_prod, reduce_rows<REDUCE_PROD>(a))
BIB_ROW_KERNEL(bib_argmax, argmax_rows(a))
BIB_ROW_KERNEL(bib_argsort, argsort_rows(a))
BIB_ROW_KERNEL(bib_cumsum, cumsum_rows(a))
BIB_ROW_KERNEL(bib_layernorm, layernorm_rows(a))
BIB_ROW_KERNEL(bib_rmsnorm, rmsnorm_rows(a))
