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

// A grid-stride loop over 64-bit indices: this thread's first, and the step
// (so any grid walks every index once, and gives the same result).
__device__ __forceinline__ uint64_t first_index() {
    return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ uint64_t grid_stride() {
    return static_cast<uint64_t>(gridDim.x) * blockDim.x;
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

// bmath.h bib_exp_hl: exp of hi + lo.
__device__ __forceinline__ float exp_hl_(float hi, float lo) {
    if (isnan_(hi))
        return qnan();
    if (hi > BIB_EXP_HI)
        return __uint_as_float(0x7f800000u);
    if (hi < BIB_EXP_LO)
        return 0.0f;
    float j = __fmaf_rn(hi, BIB_EXP_LOG2E, BIB_EXP_SHIFT);
    float kf = __fsub_rn(j, BIB_EXP_SHIFT);
    float r = __fmaf_rn(-kf, BIB_EXP_LN2_HI, hi);
    r = __fmaf_rn(-kf, BIB_EXP_LN2_LO, r);
    r = __fadd_rn(r, lo);
    float p = BIB_EXP_C6;
    p = __fmaf_rn(p, r, BIB_EXP_C5);
    p = __fmaf_rn(p, r, BIB_EXP_C4);
    p = __fmaf_rn(p, r, BIB_EXP_C3);
    p = __fmaf_rn(p, r, BIB_EXP_C2);
    p = __fmaf_rn(p, r, 1.0f);
    p = __fmaf_rn(p, r, 1.0f);
    int32_t k = __float2int_rz(kf);
    int32_t k1 = k >> 1;
    int32_t k2 = k - k1;
    return __fmul_rn(__fmul_rn(p, pow2i(k1)), pow2i(k2));
}

// bmath.h bib_log_hl.
__device__ __forceinline__ void log_hl_(float x, float &hi, float &lo) {
    int32_t k = 0;
    if (x < 0x1p-126f) {
        x = __fmul_rn(x, 0x1p25f);
        k = -25;
    }
    uint32_t u = __float_as_uint(x);
    uint32_t v = u - BIB_LOG_SQRTHALF_BITS;
    int32_t e = static_cast<int32_t>(v) >> 23;
    k += e;
    float m = __uint_as_float(u - (static_cast<uint32_t>(e) << 23));
    float f = __fsub_rn(m, 1.0f);
    float d = __fadd_rn(2.0f, f);
    float dl = __fsub_rn(f, __fsub_rn(d, 2.0f));
    float sh = __fdiv_rn(f, d);
    float r = __fmaf_rn(-sh, d, f);
    r = __fmaf_rn(-sh, dl, r);
    float sl = __fdiv_rn(r, d);
    float z = __fmul_rn(sh, sh);
    float ze = __fmaf_rn(sh, sh, -z);
    float rz = BIB_LOG_P4;
    rz = __fmaf_rn(rz, z, BIB_LOG_P3);
    rz = __fmaf_rn(rz, z, BIB_LOG_P2);
    rz = __fmaf_rn(rz, z, BIB_LOG_P1);
    float c = __fmul_rn(sh, z);
    float ce = __fmaf_rn(sh, z, -c);
    float th = __fmul_rn(BIB_LOG_P0, c);
    float the = __fmaf_rn(BIB_LOG_P0, c, -th);
    float cube_lo = __fadd_rn(__fadd_rn(ce, __fmul_rn(sh, ze)), __fmul_rn(3.0f, __fmul_rn(z, sl)));
    float tl = __fadd_rn(__fadd_rn(__fadd_rn(the, __fmul_rn(BIB_LOG_P0, cube_lo)),
                                   __fmul_rn(BIB_LOG_P0_LO, c)),
                         __fmul_rn(c, __fmul_rn(z, rz)));
    float kf = static_cast<float>(k); // |k| <= 150: exact
    float kh = __fmul_rn(kf, BIB_EXP_LN2_HI);
    float kl = __fmul_rn(kf, BIB_EXP_LN2_LO);
    float kle = __fmaf_rn(kf, BIB_EXP_LN2_LO, -kl);
    float s2 = __fadd_rn(sh, sh);
    float h1 = __fadd_rn(kh, s2);
    float l1 = __fsub_rn(s2, __fsub_rn(h1, kh));
    float h = __fadd_rn(h1, th);
    float l2 = __fsub_rn(th, __fsub_rn(h, h1));
    float small = __fadd_rn(__fadd_rn(l1, l2),
                            __fadd_rn(__fadd_rn(__fadd_rn(sl, sl), tl), __fadd_rn(kl, kle)));
    hi = __fadd_rn(h, small);
    lo = __fsub_rn(small, __fsub_rn(hi, h));
}

// bmath.h bib_log.
__device__ __forceinline__ float log_(float x) {
    if (isnan_(x) || x < 0.0f)
        return qnan();
    if (x == 0.0f)
        return neg_inf();
    if (x == __uint_as_float(0x7f800000u))
        return x;
    float hi, lo;
    log_hl_(x, hi, lo);
    return __fadd_rn(hi, lo);
}

// bmath.h bib_erfc_sq.
__device__ __forceinline__ float erfc_sq_(float a, float sq, float sqe) {
    if (a > BIB_ERFC_MAX)
        return 0.0f;
    float q = __fdiv_rn(__fsub_rn(a, 2.0f), __fadd_rn(a, 2.0f));
    float p = BIB_ERFC_F11;
    p = __fmaf_rn(p, q, BIB_ERFC_F10);
    p = __fmaf_rn(p, q, BIB_ERFC_F9);
    p = __fmaf_rn(p, q, BIB_ERFC_F8);
    p = __fmaf_rn(p, q, BIB_ERFC_F7);
    p = __fmaf_rn(p, q, BIB_ERFC_F6);
    p = __fmaf_rn(p, q, BIB_ERFC_F5);
    p = __fmaf_rn(p, q, BIB_ERFC_F4);
    p = __fmaf_rn(p, q, BIB_ERFC_F3);
    p = __fmaf_rn(p, q, BIB_ERFC_F2);
    p = __fmaf_rn(p, q, BIB_ERFC_F1);
    p = __fmaf_rn(p, q, BIB_ERFC_F0);
    float r = __fdiv_rn(p, __fadd_rn(__fadd_rn(a, a), 1.0f));
    float v = __fmul_rn(r, exp_(-sq));
    return __fmaf_rn(-v, sqe, v);
}

// bmath.h bib_erf_small.
__device__ __forceinline__ float erf_small_(float x) {
    float s = __fmul_rn(x, x);
    float p = BIB_ERF_E6;
    p = __fmaf_rn(p, s, BIB_ERF_E5);
    p = __fmaf_rn(p, s, BIB_ERF_E4);
    p = __fmaf_rn(p, s, BIB_ERF_E3);
    p = __fmaf_rn(p, s, BIB_ERF_E2);
    p = __fmaf_rn(p, s, BIB_ERF_E1);
    p = __fmaf_rn(p, s, BIB_ERF_E0);
    return __fmaf_rn(x, p, x);
}

// bmath.h bib_erf.
__device__ __forceinline__ float erf_(float x) {
    if (isnan_(x))
        return qnan();
    uint32_t sign = __float_as_uint(x) & 0x80000000u;
    float a = __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu);
    if (a < 1.0f)
        return erf_small_(x);
    float s = __fmul_rn(a, a);
    float y = __fsub_rn(1.0f, erfc_sq_(a, s, __fmaf_rn(a, a, -s)));
    return __uint_as_float(__float_as_uint(y) | sign);
}

// bmath.h bib_gelu_erf.
__device__ __forceinline__ float gelu_erf_(float x) {
    if (isnan_(x))
        return qnan();
    if (x == neg_inf())
        return -0.0f;
    float u = __fmul_rn(x, BIB_INV_SQRT2);
    float h;
    if (u >= -0.5f && u < 1.0f) {
        h = __fadd_rn(1.0f, erf_small_(u));
    } else {
        float a = __uint_as_float(__float_as_uint(u) & 0x7FFFFFFFu);
        float x2 = __fmul_rn(x, x);
        float sq = __fmul_rn(0.5f, x2), sqe = __fmul_rn(0.5f, __fmaf_rn(x, x, -x2));
        float c = erfc_sq_(a, sq, sqe);
        h = u < 0.0f ? c : __fsub_rn(2.0f, c);
    }
    return __fmul_rn(x, __fmul_rn(0.5f, h));
}

// bmath.h bib_f32_integer_kind.
__device__ __forceinline__ int integer_kind_(float y) {
    uint32_t u = __float_as_uint(y) & 0x7FFFFFFFu;
    if (u == 0)
        return 2;
    int32_t e = static_cast<int32_t>(u >> 23) - 127;
    if (e < 0 || u >= 0x7F800000u)
        return 0;
    if (e > 23)
        return 2;
    uint32_t frac = 0x7FFFFFu >> e;
    if ((u & frac) != 0)
        return 0;
    return (u >> (23 - e)) & 1u ? 1 : 2;
}

// bmath.h bib_pow.
__device__ __forceinline__ float pow_(float x, float y) {
    const float inf = __uint_as_float(0x7f800000u);
    if (y == 0.0f || x == 1.0f)
        return 1.0f;
    if (isnan_(x) || isnan_(y))
        return qnan();
    if (y == 1.0f)
        return x;
    if (y == 2.0f)
        return __fmul_rn(x, x);
    if (y == -1.0f)
        return __fdiv_rn(1.0f, x);
    if (y == 0.5f && x == neg_inf())
        return inf;
    if (y == 0.5f) // +0 for -0 (sqrt keeps the sign); NaN for x < 0
        return x == 0.0f ? 0.0f : canon(__fsqrt_rn(x));
    float ax = __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu);
    uint32_t xsign = __float_as_uint(x) & 0x80000000u;
    if (y == inf || y == neg_inf()) {
        if (ax == 1.0f)
            return 1.0f;
        return (ax < 1.0f) == (y > 0.0f) ? 0.0f : inf;
    }
    int kind = integer_kind_(y);
    uint32_t rsign = kind == 1 ? xsign : 0u;
    if (ax == 0.0f || ax == inf) {
        float mag = (ax == 0.0f) == (y < 0.0f) ? inf : 0.0f;
        return __uint_as_float(__float_as_uint(mag) | rsign);
    }
    if (xsign && kind == 0)
        return qnan();
    float lh, ll;
    log_hl_(ax, lh, ll);
    float zh = __fmul_rn(y, lh);
    float ze = __fmaf_rn(y, lh, -zh);
    float zl = __fmaf_rn(y, ll, ze);
    float r = exp_hl_(zh, zl);
    return __uint_as_float(__float_as_uint(r) | rsign);
}

// bmath.h bib_min2 and bib_max2.
__device__ __forceinline__ float min2_(float a, float b) {
    if (isnan_(a) || isnan_(b))
        return qnan();
    return order_key(b) < order_key(a) ? b : a;
}

__device__ __forceinline__ float max2_(float a, float b) {
    if (isnan_(a) || isnan_(b))
        return qnan();
    return order_key(b) > order_key(a) ? b : a;
}

// bmath.h bib_round_integral: FLOOR (dir 0), CEIL (1), ROUND (2, halves to
// even), from the bits alone.
__device__ __forceinline__ float round_integral_(float x, int dir) {
    uint32_t u = __float_as_uint(x);
    uint32_t e = (u >> 23) & 0xFFu;
    uint32_t sign = u & 0x80000000u;
    if (e == 0xFFu)
        return (u & 0x7FFFFFu) != 0u ? qnan() : x;
    if (e >= 150u || (u & 0x7FFFFFFFu) == 0u)
        return x;
    bool up;
    if (e < 127u) {
        up = dir == 2 ? (u & 0x7FFFFFFFu) > 0x3F000000u : (sign != 0u) == (dir == 0);
        return __uint_as_float(sign | (up ? 0x3F800000u : 0u));
    }
    uint32_t unit = 1u << (150u - e);
    uint32_t frac = u & (unit - 1u);
    uint32_t t = u & ~(unit - 1u);
    if (frac == 0u)
        return x;
    if (dir == 2)
        up = frac > (unit >> 1) || (frac == (unit >> 1) && (t & unit) != 0u);
    else
        up = (sign != 0u) == (dir == 0);
    return __uint_as_float(up ? t + unit : t);
}

// bmath.h bib_rem_pio2: |x| = (q + f) pi/2, q mod 4 returned, r = f pi/2 as
// hi + lo; the same integer steps, then the same float operations.
static __constant__ uint32_t two_over_pi_[11] = {BIB_TWO_OVER_PI_WORDS};

__device__ __forceinline__ int rem_pio2_(uint32_t ax, float &hi, float &lo) {
    uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t k = (ax >> 23) - 120u;
    uint32_t o = k >> 5, sh = k & 31u, w[3];
    for (int j = 0; j < 3; j++)
        w[j] = sh ? (two_over_pi_[o + j] << sh) | (two_over_pi_[o + j + 1] >> (32u - sh))
                  : two_over_pi_[o + j];
    uint64_t p2 = (uint64_t)m * w[2], p1 = (uint64_t)m * w[1], p0 = (uint64_t)m * w[0];
    uint32_t f0 = (uint32_t)p2;
    uint64_t t = p1 + (p2 >> 32);
    uint32_t f1 = (uint32_t)t;
    uint32_t f2 = (uint32_t)(p0 + (t >> 32));
    int q = (int)(f2 >> 30);
    f2 &= 0x3FFFFFFFu;
    bool neg = (f2 >> 29) != 0u;
    if (neg) {
        q++;
        f0 = ~f0 + 1u;
        uint32_t c = f0 == 0u;
        f1 = ~f1 + c;
        c = c && f1 == 0u;
        f2 = (~f2 + c) & 0x3FFFFFFFu;
    }
    uint32_t lz = 0u;
    f2 = (f2 << 2) | (f1 >> 30);
    f1 = (f1 << 2) | (f0 >> 30);
    f0 <<= 2;
    if (f2 == 0u) {
        f2 = f1, f1 = f0, f0 = 0u, lz += 32u;
    }
    if (f2 == 0u) {
        f2 = f1, f1 = 0u, lz += 32u;
    }
    uint32_t s = (uint32_t)__clz(f2);
    if (s != 0u) {
        f2 = (f2 << s) | (f1 >> (32u - s));
        f1 = f1 << s;
    }
    lz += s;
    float fh = __fmul_rn(__uint2float_rn(f2 >> 8), __uint_as_float((127u - 24u - lz) << 23));
    float fl = __fmul_rn(__uint2float_rn(((f2 & 0xFFu) << 16) | (f1 >> 16)),
                         __uint_as_float((127u - 48u - lz) << 23));
    if (neg)
        fh = -fh, fl = -fl;
    float rh = __fmul_rn(fh, BIB_PIO2_HI);
    float rl = __fmaf_rn(fh, BIB_PIO2_LO, __fmaf_rn(fl, BIB_PIO2_HI, __fmaf_rn(fh, BIB_PIO2_HI, -rh)));
    float r = __fadd_rn(rh, rl);
    hi = r;
    lo = __fsub_rn(rl, __fsub_rn(r, rh));
    return q & 3;
}

// bmath.h bib_sin_kernel, bib_cos_kernel, bib_sincos.
__device__ __forceinline__ float sin_kernel_(float r, float c) {
    float z = __fmul_rn(r, r);
    float p = __fmaf_rn(__fmaf_rn(z, BIB_SIN_S2, BIB_SIN_S1), z, BIB_SIN_S0);
    return __fadd_rn(r, __fmaf_rn(__fmul_rn(z, r), p, c));
}

__device__ __forceinline__ float cos_kernel_(float r, float c) {
    float z = __fmul_rn(r, r);
    float p = __fmaf_rn(__fmaf_rn(z, BIB_COS_C2, BIB_COS_C1), z, BIB_COS_C0);
    float hz = __fmul_rn(0.5f, z);
    float w = __fsub_rn(1.0f, hz);
    float corr = __fadd_rn(__fsub_rn(__fsub_rn(1.0f, w), hz),
                           __fmaf_rn(__fmul_rn(z, z), p, -__fmul_rn(r, c)));
    return __fadd_rn(w, corr);
}

__device__ __forceinline__ float sincos_(float x, int want_cos) {
    uint32_t u = __float_as_uint(x), ax = u & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u)
        return qnan();
    if (ax < 0x39800000u)
        return want_cos ? 1.0f : x;
    float r = __uint_as_float(ax), c = 0.0f;
    int q = ax < 0x3F490FDBu ? 0 : rem_pio2_(ax, r, c);
    int n = (q + want_cos) & 3;
    float y = (n & 1) ? cos_kernel_(r, c) : sin_kernel_(r, c);
    uint32_t sign = (n & 2) ? 0x80000000u : 0u;
    if (!want_cos)
        sign ^= u & 0x80000000u;
    return __uint_as_float(__float_as_uint(y) ^ sign);
}

// The ops of bib_unary_t (isa/kernels.h, from the rows of isa/opcodes.def):
// a new unary opcode adds its case here.
static_assert(BIB_UNARY__COUNT == 18, "a unary opcode was added: give unary<OP> its case");
template <int OP> __device__ __forceinline__ float unary(float x) {
    if (OP == BIB_UNARY_RELU)
        return relu_(x);
    if (OP == BIB_UNARY_SIGMOID)
        return sigmoid_(x);
    if (OP == BIB_UNARY_TANH)
        return tanh_(x);
    if (OP == BIB_UNARY_GELU)
        return gelu_(x);
    if (OP == BIB_UNARY_ERF)
        return erf_(x);
    if (OP == BIB_UNARY_LOG)
        return log_(x);
    if (OP == BIB_UNARY_SQRT)
        return canon(__fsqrt_rn(x));
    if (OP == BIB_UNARY_RSQRT)
        return canon(__fdiv_rn(1.0f, __fsqrt_rn(x)));
    if (OP == BIB_UNARY_RECIP)
        return canon(__fdiv_rn(1.0f, x));
    if (OP == BIB_UNARY_ABS)
        return isnan_(x) ? qnan() : __uint_as_float(__float_as_uint(x) & 0x7FFFFFFFu);
    if (OP == BIB_UNARY_NEG)
        return isnan_(x) ? qnan() : __uint_as_float(__float_as_uint(x) ^ 0x80000000u);
    if (OP == BIB_UNARY_GELU_ERF)
        return gelu_erf_(x);
    if (OP == BIB_UNARY_FLOOR)
        return round_integral_(x, 0);
    if (OP == BIB_UNARY_CEIL)
        return round_integral_(x, 1);
    if (OP == BIB_UNARY_ROUND)
        return round_integral_(x, 2);
    if (OP == BIB_UNARY_SIN)
        return sincos_(x, 0);
    if (OP == BIB_UNARY_COS)
        return sincos_(x, 1);
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
