// shaders/cuda/common.cuh: what every BIB CUDA kernel file shares (included,
// never compiled alone).
//
// Owns the device port of backends/cpu/bmath.h: exp, tanh, sigmoid, gelu,
// relu, NaN canonicalisation, the order keys of MAX and ARGMAX, and THE
// reduction tree over one group of 64 threads. Each function is the CPU
// reference's sequence of correctly rounded operations, written with the
// explicit round-to-nearest intrinsics (__fadd_rn, __fmul_rn, __fmaf_rn,
// __fdiv_rn, __fsqrt_rn), which nvcc never contracts or splits whatever its
// --fmad setting; the build adds --fmad=false -ftz=false -prec-div=true
// -prec-sqrt=true so that no other float operation can drift either. The
// constants come from bmath.h itself, so there is one copy of them.
//
// Does not own the kernels (the other .cu files) or the parameter block
// (backends/cuda/cu_args.h).
#ifndef BIB_CU_COMMON_CUH
#define BIB_CU_COMMON_CUH

#include <stdint.h>

#include "backends/cpu/bmath.h"
#include "backends/cuda/cu_args.h"
#include "isa/kernels.h"

#if BIB_TREE_LANES != BIB_CU_ROW_THREADS
#error "the CUDA row groups must have THE tree's lane count"
#endif

// The launch's dynamic shared memory (its sharedMemBytes) as an array of T
// named NAME. The host emulator of these kernels (BIB_CU_EMULATE,
// backends/cuda/testing/cu_emu.h) has no extern __shared__ arrays and hands
// out the block's buffer instead; nvcc never sees that branch.
#if defined(BIB_CU_EMULATE)
#define BIB_CU_DYNAMIC_SHARED(T, NAME) T *const NAME = static_cast<T *>(bib_cu_emu_dynamic_shared())
#else
#define BIB_CU_DYNAMIC_SHARED(T, NAME) extern __shared__ T NAME[]
#endif

namespace bibcu {

__device__ __forceinline__ float *f32(uint64_t addr) {
    return reinterpret_cast<float *>(static_cast<uintptr_t>(addr));
}

__device__ __forceinline__ uint32_t *u32(uint64_t addr) {
    return reinterpret_cast<uint32_t *>(static_cast<uintptr_t>(addr));
}

__device__ __forceinline__ int32_t *i32(uint64_t addr) {
    return reinterpret_cast<int32_t *>(static_cast<uintptr_t>(addr));
}

__device__ __forceinline__ float qnan() {
    return __uint_as_float(BIB_F32_CANONICAL_NAN_BITS);
}

__device__ __forceinline__ bool isnan_(float x) {
    return x != x;
}

__device__ __forceinline__ float canon(float x) {
    return isnan_(x) ? qnan() : x;
}

__device__ __forceinline__ int32_t order_key(float x) {
    int32_t i = __float_as_int(x);
    return i ^ static_cast<int32_t>(static_cast<uint32_t>(i >> 31) & 0x7FFFFFFFu);
}

__device__ __forceinline__ float from_order_key(int32_t k) {
    int32_t i = k ^ static_cast<int32_t>(static_cast<uint32_t>(k >> 31) & 0x7FFFFFFFu);
    return __int_as_float(i);
}

__device__ __forceinline__ float pow2i(int32_t e) {
    return __uint_as_float(static_cast<uint32_t>(e + 127) << 23);
}

__device__ __forceinline__ float neg_inf() {
    return __uint_as_float(0xff800000u);
}

// bmath.h bib_exp, operation by operation.
__device__ __forceinline__ float exp_(float x) {
    if (isnan_(x))
        return qnan();
    if (x > BIB_EXP_HI)
        return __uint_as_float(0x7f800000u);
    if (x < BIB_EXP_LO)
        return 0.0f;
    float j = __fmaf_rn(x, BIB_EXP_LOG2E, BIB_EXP_SHIFT);
    float kf = __fsub_rn(j, BIB_EXP_SHIFT);
    float r = __fmaf_rn(-kf, BIB_EXP_LN2_HI, x);
    r = __fmaf_rn(-kf, BIB_EXP_LN2_LO, r);
    float p = BIB_EXP_C6;
    p = __fmaf_rn(p, r, BIB_EXP_C5);
    p = __fmaf_rn(p, r, BIB_EXP_C4);
    p = __fmaf_rn(p, r, BIB_EXP_C3);
    p = __fmaf_rn(p, r, BIB_EXP_C2);
    p = __fmaf_rn(p, r, 1.0f);
    p = __fmaf_rn(p, r, 1.0f);
    int32_t k = __float2int_rz(kf); // kf is an integer in [-151, 129]: exact
    int32_t k1 = k >> 1;            // arithmetic shift: floor(k / 2)
    int32_t k2 = k - k1;
    return __fmul_rn(__fmul_rn(p, pow2i(k1)), pow2i(k2));
}

// bmath.h bib_tanh.
__device__ __forceinline__ float tanh_(float x) {
    if (isnan_(x))
        return qnan();
    uint32_t sign = __float_as_uint(x) & 0x80000000u;
    float a = __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu);
    float y;
    if (a < BIB_TANH_SMALL) {
        float s = __fmul_rn(a, a);
        float q = BIB_TANH_Q4;
        q = __fmaf_rn(q, s, BIB_TANH_Q3);
        q = __fmaf_rn(q, s, BIB_TANH_Q2);
        q = __fmaf_rn(q, s, BIB_TANH_Q1);
        q = __fmaf_rn(q, s, BIB_TANH_Q0);
        float t = __fmul_rn(a, s);
        y = __fmaf_rn(t, q, a);
    } else {
        float e = exp_(__fadd_rn(a, a));
        y = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(e, 1.0f)));
    }
    return __uint_as_float(__float_as_uint(y) | sign);
}

// bmath.h bib_sigmoid.
__device__ __forceinline__ float sigmoid_(float x) {
    if (isnan_(x))
        return qnan();
    float a = __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu);
    float e = exp_(-a);
    float num = x >= 0.0f ? 1.0f : e;
    return __fdiv_rn(num, __fadd_rn(1.0f, e));
}

// bmath.h bib_gelu.
__device__ __forceinline__ float gelu_(float x) {
    if (isnan_(x))
        return qnan();
    if (x == neg_inf())
        return -0.0f;
    float x3 = __fmul_rn(__fmul_rn(x, x), x);
    float z = __fmul_rn(BIB_GELU_K, __fmaf_rn(BIB_GELU_C1, x3, x));
    return __fmul_rn(x, sigmoid_(z));
}

// bmath.h bib_relu.
__device__ __forceinline__ float relu_(float x) {
    if (isnan_(x))
        return qnan();
    return x > 0.0f ? x : 0.0f;
}

// The ops of bib_unary_t (isa/kernels.h, from the rows of isa/opcodes.def):
// a new unary opcode adds its case here.
static_assert(BIB_UNARY__COUNT == 5, "a unary opcode was added: give unary<OP> its case");
template <int OP> __device__ __forceinline__ float unary(float x) {
    if (OP == BIB_UNARY_RELU)
        return relu_(x);
    if (OP == BIB_UNARY_SIGMOID)
        return sigmoid_(x);
    if (OP == BIB_UNARY_TANH)
        return tanh_(x);
    if (OP == BIB_UNARY_GELU)
        return gelu_(x);
    return exp_(x);
}

// ---- one group of 64 threads per row: THE tree ---------------------------
//
// A row kernel runs with blockDim.x == 64, one row per block at a time. Lane
// l (threadIdx.x) owns the row's elements l, l+64, l+128, ... and
// accumulates them in ascending order from +0; these functions finish the
// reduction. Every lane of the block must call them (they synchronize).

struct tree_smem {
    float p[BIB_CU_ROW_THREADS];
    int32_t k[BIB_CU_ROW_THREADS];
    uint32_t i[BIB_CU_ROW_THREADS];
    uint32_t j[BIB_CU_ROW_THREADS];
};

// p[i] += p[i+32], p[i] += p[i+16], ..., p[i] += p[i+1]; every lane gets p[0].
// The steps below 32 run inside warp 0 through shuffles: at step s lane l
// adds lane l+s's value, which after the earlier steps is exactly p[l+s] of
// the reference (l+s < 2s), so the pairing and the bits are the tree's.
__device__ __forceinline__ float tree_sum(tree_smem &sm, float partial) {
    const uint32_t l = threadIdx.x;
    if (l >= 32)
        sm.p[l] = partial;
    __syncthreads();
    if (l < 32) {
        float v = __fadd_rn(partial, sm.p[l + 32]);
#pragma unroll
        for (int s = 16; s >= 1; s >>= 1)
            v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, s));
        if (l == 0)
            sm.p[0] = v;
    }
    __syncthreads();
    float r = sm.p[0];
    __syncthreads(); // the next reduction may overwrite sm
    return r;
}

// MAX over the lanes' best order keys (or NaN flags): the canonical NaN if
// any lane saw a NaN, else the greatest key's float (-Inf for an empty row).
// Maximum and "or" are order-free, so any combining order gives these bits.
__device__ __forceinline__ float tree_max(tree_smem &sm, int32_t key, bool nan) {
    const uint32_t l = threadIdx.x;
    int32_t k = key;
    uint32_t n = nan ? 1u : 0u;
#pragma unroll
    for (int s = 16; s >= 1; s >>= 1) {
        k = max(k, __shfl_down_sync(0xffffffffu, k, s));
        n |= __shfl_down_sync(0xffffffffu, n, s);
    }
    if ((l & 31) == 0) {
        sm.k[l >> 5] = k;
        sm.i[l >> 5] = n;
    }
    __syncthreads();
    float r = (sm.i[0] | sm.i[1]) ? qnan() : from_order_key(max(sm.k[0], sm.k[1]));
    __syncthreads();
    return r;
}

// PROD: tree_sum's pairing with * for +.
__device__ __forceinline__ float tree_prod(tree_smem &sm, float partial) {
    const uint32_t l = threadIdx.x;
    if (l >= 32)
        sm.p[l] = partial;
    __syncthreads();
    if (l < 32) {
        float v = __fmul_rn(partial, sm.p[l + 32]);
#pragma unroll
        for (int s = 16; s >= 1; s >>= 1)
            v = __fmul_rn(v, __shfl_down_sync(0xffffffffu, v, s));
        if (l == 0)
            sm.p[0] = v;
    }
    __syncthreads();
    float r = sm.p[0];
    __syncthreads();
    return r;
}

// MIN as tree_max with the least key (+Inf for an empty row).
__device__ __forceinline__ float tree_min(tree_smem &sm, int32_t key, bool nan) {
    const uint32_t l = threadIdx.x;
    int32_t k = key;
    uint32_t n = nan ? 1u : 0u;
#pragma unroll
    for (int s = 16; s >= 1; s >>= 1) {
        k = min(k, __shfl_down_sync(0xffffffffu, k, s));
        n |= __shfl_down_sync(0xffffffffu, n, s);
    }
    if ((l & 31) == 0) {
        sm.k[l >> 5] = k;
        sm.i[l >> 5] = n;
    }
    __syncthreads();
    float r = (sm.i[0] | sm.i[1]) ? qnan() : from_order_key(min(sm.k[0], sm.k[1]));
    __syncthreads();
    return r;
}

} // namespace bibcu

#endif
