/* backends/cpu/bmath.h: BIB's own transcendental functions and reductions.
 *
 * Scalar reference for spec/numerics.md. Every function here is an exact
 * sequence of correctly rounded binary32 operations (add, sub, mul, fma, div,
 * sqrt), comparisons and integer bit operations; never libm's exp or tanh,
 * never an approximate reciprocal. The SIMD kernels (ops_avx2.c,
 * ops_avx512.c) repeat the same sequences lane by lane and must give the same
 * bits; the constants below are shared with them. Compile with
 * -ffp-contract=off and without fast-math, or the sequences are not the ones
 * written here.
 *
 * This header owns no state: all functions are static inline.
 */
#ifndef BIB_CPU_BMATH_H
#define BIB_CPU_BMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BIB_F32_CANONICAL_NAN_BITS 0x7FC00000u

/* exp: k = round(x * LOG2E) through the 1.5 * 2^23 shift, r = x - k*ln2 in
 * two Cody-Waite parts (LN2_HI has 12 significant bits, so k*LN2_HI is exact
 * for |k| <= 2^12), p = Horner polynomial in r with fma, then 2^k applied as
 * two exact power-of-two factors so that neither 2^128 nor a denormal power
 * is ever formed and the only rounding is the last multiply. */
#define BIB_EXP_LOG2E 0x1.715476p+0f
#define BIB_EXP_SHIFT 0x1.8p+23f
#define BIB_EXP_LN2_HI 0x1.62ep-1f
#define BIB_EXP_LN2_LO 0x1.0bfbe8p-15f
#define BIB_EXP_C6 0x1.6a2436p-10f
#define BIB_EXP_C5 0x1.1239dep-7f
#define BIB_EXP_C4 0x1.5558f2p-5f
#define BIB_EXP_C3 0x1.555492p-3f
#define BIB_EXP_C2 0x1.fffffcp-2f
#define BIB_EXP_HI 0x1.64p+6f /* 89: above it exp is +Inf */
#define BIB_EXP_LO -0x1.ap+6f /* -104: below it exp is +0 */

/* tanh: |x| < 0.625 uses an odd polynomial (no cancellation near 0);
 * otherwise 1 - 2 / (exp(2|x|) + 1). The sign is copied from x last, so
 * tanh(-x) == -tanh(x) bit for bit and tanh(-0) == -0. */
#define BIB_TANH_SMALL 0x1.4p-1f
#define BIB_TANH_Q0 -0x1.555532p-2f
#define BIB_TANH_Q1 0x1.110726p-3f
#define BIB_TANH_Q2 -0x1.b83c54p-5f
#define BIB_TANH_Q3 0x1.52267ep-6f
#define BIB_TANH_Q4 -0x1.75e15p-8f

/* gelu, tanh form: 0.5*x*(1 + tanh(C0*(x + C1*x^3))) == x * sigmoid(2*C0*(...)).
 * BIB_GELU_K is 2 * 0.7978845608f (exactly twice the f32 of the published
 * constant); BIB_GELU_C1 is 0.044715f. */
#define BIB_GELU_K 0x1.988454p+0f
#define BIB_GELU_C1 0x1.6e4e26p-5f

/* Lanes of THE reduction tree (spec/numerics.md, "The reduction tree"). */
#define BIB_TREE_LANES 64

static inline uint32_t bib_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float bib_f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline float bib_f32_canonical_nan(void) {
    return bib_f32_from_bits(BIB_F32_CANONICAL_NAN_BITS);
}

/* Every arithmetic kernel stores through this: x86 makes 0xFFC00000 for 0/0
 * and propagates payloads, GPUs differ, so NaN bits are pinned on output. */
static inline float bib_f32_canon(float x) {
    return x != x ? bib_f32_canonical_nan() : x;
}

/* Maps a float to an int32 whose signed order is the order
 * -Inf < ... < -0 < +0 < ... < +Inf (NaNs are handled apart). It is its own
 * inverse. MAX and ARGMAX compare these keys, which makes max(-0,+0) = +0
 * and makes the maximum independent of the order of comparisons. */
static inline int32_t bib_f32_order_key(float x) {
    int32_t i = (int32_t)bib_f32_bits(x);
    return i ^ (int32_t)((uint32_t)(i >> 31) & 0x7FFFFFFFu);
}

static inline float bib_f32_from_order_key(int32_t k) {
    int32_t i = k ^ (int32_t)((uint32_t)(k >> 31) & 0x7FFFFFFFu);
    return bib_f32_from_bits((uint32_t)i);
}

/* 2^e for e in [-126, 127], built from bits. */
static inline float bib_f32_pow2i(int32_t e) {
    return bib_f32_from_bits((uint32_t)(e + 127) << 23);
}

static inline float bib_exp(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    if (x > BIB_EXP_HI)
        return INFINITY;
    if (x < BIB_EXP_LO)
        return 0.0f;
    float j = fmaf(x, BIB_EXP_LOG2E, BIB_EXP_SHIFT);
    float kf = j - BIB_EXP_SHIFT;
    float r = fmaf(-kf, BIB_EXP_LN2_HI, x);
    r = fmaf(-kf, BIB_EXP_LN2_LO, r);
    float p = BIB_EXP_C6;
    p = fmaf(p, r, BIB_EXP_C5);
    p = fmaf(p, r, BIB_EXP_C4);
    p = fmaf(p, r, BIB_EXP_C3);
    p = fmaf(p, r, BIB_EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t k = (int32_t)kf;
    int32_t k1 = k >> 1; /* arithmetic shift: floor(k / 2) */
    int32_t k2 = k - k1;
    return (p * bib_f32_pow2i(k1)) * bib_f32_pow2i(k2);
}

static inline float bib_tanh(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    uint32_t sign = bib_f32_bits(x) & 0x80000000u;
    float a = bib_f32_from_bits(bib_f32_bits(x) & 0x7FFFFFFFu);
    float y;
    if (a < BIB_TANH_SMALL) {
        float s = a * a;
        float q = BIB_TANH_Q4;
        q = fmaf(q, s, BIB_TANH_Q3);
        q = fmaf(q, s, BIB_TANH_Q2);
        q = fmaf(q, s, BIB_TANH_Q1);
        q = fmaf(q, s, BIB_TANH_Q0);
        float t = a * s;
        y = fmaf(t, q, a);
    } else {
        float e = bib_exp(a + a);
        y = 1.0f - 2.0f / (e + 1.0f);
    }
    return bib_f32_from_bits(bib_f32_bits(y) | sign);
}

/* sigmoid from e = exp(-|x|) so that neither side loses precision:
 * x >= 0 (and -0): 1 / (1 + e); x < 0: e / (1 + e). */
static inline float bib_sigmoid(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    float a = bib_f32_from_bits(bib_f32_bits(x) & 0x7FFFFFFFu);
    float e = bib_exp(-a);
    float num = x >= 0.0f ? 1.0f : e;
    return num / (1.0f + e);
}

static inline float bib_gelu(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    if (x == -INFINITY)
        return -0.0f;
    float x3 = (x * x) * x;
    float z = BIB_GELU_K * fmaf(BIB_GELU_C1, x3, x);
    return x * bib_sigmoid(z);
}

/* relu: x > 0 ? x : +0, and NaN stays NaN (canonical). relu(-0) = +0. */
static inline float bib_relu(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    return x > 0.0f ? x : 0.0f;
}

/* THE reduction tree. Lane l accumulates x[l], x[l+64], x[l+128], ... in
 * ascending order starting from +0 (a lane never holds -0, so the +0 padding
 * a SIMD tail or a masked entry adds leaves it unchanged); then
 * p[i] += p[i+32], p[i] += p[i+16], ..., p[i] += p[i+1]; the sum is p[0]. */
static inline float bib_tree_finish(float p[BIB_TREE_LANES]) {
    for (int s = BIB_TREE_LANES / 2; s >= 1; s >>= 1)
        for (int i = 0; i < s; i++)
            p[i] = p[i] + p[i + s];
    return p[0];
}

static inline float bib_tree_sum(const float *x, size_t n) {
    float p[BIB_TREE_LANES] = {0};
    for (size_t i = 0; i < n; i++)
        p[i % BIB_TREE_LANES] = p[i % BIB_TREE_LANES] + x[i];
    return bib_tree_finish(p);
}

/* The tree over (x[i] - mean)^2, each term rounded after the subtract and
 * after the multiply (no fma). */
static inline float bib_tree_sum_sqdev(const float *x, float mean, size_t n) {
    float p[BIB_TREE_LANES] = {0};
    for (size_t i = 0; i < n; i++) {
        float d = x[i] - mean;
        p[i % BIB_TREE_LANES] = p[i % BIB_TREE_LANES] + d * d;
    }
    return bib_tree_finish(p);
}

/* The tree over x[i]^2 (rmsnorm). */
static inline float bib_tree_sum_sq(const float *x, size_t n) {
    float p[BIB_TREE_LANES] = {0};
    for (size_t i = 0; i < n; i++)
        p[i % BIB_TREE_LANES] = p[i % BIB_TREE_LANES] + x[i] * x[i];
    return bib_tree_finish(p);
}

/* PROD: THE tree with * for +: lane l multiplies x[l], x[l+64], ... in
 * ascending order starting from 1; then p[i] *= p[i+32], ..., p[i] *= p[i+1]. */
static inline float bib_tree_prod(const float *x, size_t n) {
    float p[BIB_TREE_LANES];
    for (int i = 0; i < BIB_TREE_LANES; i++)
        p[i] = 1.0f;
    for (size_t i = 0; i < n; i++)
        p[i % BIB_TREE_LANES] = p[i % BIB_TREE_LANES] * x[i];
    for (int s = BIB_TREE_LANES / 2; s >= 1; s >>= 1)
        for (int i = 0; i < s; i++)
            p[i] = p[i] * p[i + s];
    return p[0];
}

/* MIN: canonical NaN if any element is NaN; otherwise the least element in
 * the order where -0 < +0; +Inf for n == 0. */
static inline float bib_min(const float *x, size_t n) {
    int32_t best = bib_f32_order_key(INFINITY);
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            return bib_f32_canonical_nan();
        int32_t k = bib_f32_order_key(x[i]);
        best = k < best ? k : best;
    }
    return bib_f32_from_order_key(best);
}

/* MAX: canonical NaN if any element is NaN; otherwise the greatest element in
 * the order where -0 < +0; -Inf for n == 0. */
static inline float bib_max(const float *x, size_t n) {
    int32_t best = bib_f32_order_key(-INFINITY);
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            return bib_f32_canonical_nan();
        int32_t k = bib_f32_order_key(x[i]);
        best = k > best ? k : best;
    }
    return bib_f32_from_order_key(best);
}

#endif
