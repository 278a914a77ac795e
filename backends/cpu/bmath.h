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
#include <stdbool.h>
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

/* ---- log, erf, pow (spec/numerics.md section 5a) --------------------------- */

/* log: x = 2^k * m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
 * s = f / (2 + f) carried as sh + sl, ln m = 2 atanh(s) = 2s + s z P(z) with
 * z = s^2, and k ln 2 in two parts; the pieces are summed as a pair (hi, lo)
 * that LOG rounds once and POW multiplies by y without losing the low bits.
 * LOG_P0..P4 minimize the relative error of P on [0, 0.0295]. */
#define BIB_LOG_P0 0x1.555556p-1f
#define BIB_LOG_P0_LO -0x1.555556p-26f /* 2/3 - P0, rounded */
#define BIB_LOG_P1 0x1.999998p-2f
#define BIB_LOG_P2 0x1.249326p-2f
#define BIB_LOG_P3 0x1.c679fep-3f
#define BIB_LOG_P4 0x1.8c9c66p-3f
#define BIB_LOG_SQRTHALF_BITS 0x3F3504F3u /* binary32(sqrt(1/2)) */

/* erfc for a >= 0: (1 + 2a) exp(a^2) erfc(a) = F(q) with q = (a - 2) / (a + 2),
 * F a degree-11 polynomial on q in [-1, 0.68] (a in [0, 10.5]); then
 * erfc(a) = F / (1 + 2a) * exp(-a^2), with a^2 = s + t exact (t from an fma)
 * and exp(-t) taken as 1 - t. Above ERFC_MAX erfc is below 2^-160: +0. */
#define BIB_ERFC_MAX 0x1.5p+3f
#define BIB_ERFC_F0 0x1.46e80ep+0f
#define BIB_ERFC_F1 -0x1.7bf5eap-4f
#define BIB_ERFC_F2 -0x1.5407cep-3f
#define BIB_ERFC_F3 0x1.4ff9fcp-3f
#define BIB_ERFC_F4 -0x1.bc274p-5f
#define BIB_ERFC_F5 -0x1.0726a2p-7f
#define BIB_ERFC_F6 0x1.1d66e2p-7f
#define BIB_ERFC_F7 0x1.484f16p-10f
#define BIB_ERFC_F8 -0x1.74efcp-10f
#define BIB_ERFC_F9 -0x1.a4832p-12f
#define BIB_ERFC_F10 0x1.67061cp-13f
#define BIB_ERFC_F11 0x1.514f42p-14f
/* erf for |x| < 1: x + x E(x^2), E minimizing the relative error of
 * erf(x) / x on [0, 1]. */
#define BIB_ERF_E0 0x1.06eba8p-3f
#define BIB_ERF_E1 -0x1.81273ep-2f
#define BIB_ERF_E2 0x1.ce2cf8p-4f
#define BIB_ERF_E3 -0x1.b7f90cp-6f
#define BIB_ERF_E4 0x1.5405b0p-8f
#define BIB_ERF_E5 -0x1.a3f6f0p-11f
#define BIB_ERF_E6 0x1.496a0ap-14f
#define BIB_INV_SQRT2 0x1.6a09e6p-1f /* binary32(1 / sqrt(2)) */

/* exp of hi + lo, |lo| <= ulp(hi): exp's sequence with lo added to the
 * reduced argument; bib_exp_hl(x, 0) == bib_exp(x). */
static inline float bib_exp_hl(float hi, float lo) {
    if (hi != hi)
        return bib_f32_canonical_nan();
    if (hi > BIB_EXP_HI)
        return INFINITY;
    if (hi < BIB_EXP_LO)
        return 0.0f;
    float j = fmaf(hi, BIB_EXP_LOG2E, BIB_EXP_SHIFT);
    float kf = j - BIB_EXP_SHIFT;
    float r = fmaf(-kf, BIB_EXP_LN2_HI, hi);
    r = fmaf(-kf, BIB_EXP_LN2_LO, r);
    r = r + lo;
    float p = BIB_EXP_C6;
    p = fmaf(p, r, BIB_EXP_C5);
    p = fmaf(p, r, BIB_EXP_C4);
    p = fmaf(p, r, BIB_EXP_C3);
    p = fmaf(p, r, BIB_EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t k = (int32_t)kf;
    int32_t k1 = k >> 1;
    int32_t k2 = k - k1;
    return (p * bib_f32_pow2i(k1)) * bib_f32_pow2i(k2);
}

/* ln x = *hi + *lo for x positive, finite, not zero (denormals included). */
static inline void bib_log_hl(float x, float *hi, float *lo) {
    int32_t k = 0;
    if (x < 0x1p-126f) { /* denormal: scale into the normal range, exactly */
        x = x * 0x1p25f;
        k = -25;
    }
    uint32_t u = bib_f32_bits(x);
    /* m = x / 2^e in [sqrt(1/2), sqrt(2)): move the bits of u - SQRTHALF's
       exponent field into k. */
    uint32_t v = u - BIB_LOG_SQRTHALF_BITS;
    int32_t e = (int32_t)v >> 23; /* arithmetic shift: floor */
    k += e;
    float m = bib_f32_from_bits(u - ((uint32_t)e << 23));
    float f = m - 1.0f;
    float d = 2.0f + f;
    float dl = f - (d - 2.0f); /* 2 + f == d + dl exactly */
    float sh = f / d;
    float r = fmaf(-sh, d, f); /* f - sh d, exact */
    r = fmaf(-sh, dl, r);
    float sl = r / d;
    /* t = 2 atanh(s) - 2s = s^3 P(s^2) as th + tl: s^3 ~ sh^3 + 3 sh^2 sl with
       sh^3 = sh (z + ze) = c + ce + sh ze exactly, and P = P0 + z R(z) where
       P0 = 2/3 is P0 + P0_LO. */
    float z = sh * sh;
    float ze = fmaf(sh, sh, -z); /* sh^2 == z + ze */
    float rz = BIB_LOG_P4;
    rz = fmaf(rz, z, BIB_LOG_P3);
    rz = fmaf(rz, z, BIB_LOG_P2);
    rz = fmaf(rz, z, BIB_LOG_P1);
    float c = sh * z;
    float ce = fmaf(sh, z, -c); /* sh z == c + ce */
    float th = BIB_LOG_P0 * c;
    float the = fmaf(BIB_LOG_P0, c, -th); /* P0 c == th + the */
    float cube_lo = (ce + sh * ze) + 3.0f * (z * sl);
    float tl = ((the + BIB_LOG_P0 * cube_lo) + BIB_LOG_P0_LO * c) + c * (z * rz);
    float kf = (float)k;
    float kh = kf * BIB_EXP_LN2_HI; /* exact: 8 + 12 bits */
    float kl = kf * BIB_EXP_LN2_LO;
    float kle = fmaf(kf, BIB_EXP_LN2_LO, -kl); /* kf LN2_LO == kl + kle */
    float s2 = sh + sh;
    float h1 = kh + s2;
    float l1 = s2 - (h1 - kh); /* |kh| >= |s2| or kh == 0: exact */
    float h = h1 + th;
    float l2 = th - (h - h1); /* |h1| >= |th|: exact */
    float small = (l1 + l2) + (((sl + sl) + tl) + (kl + kle));
    *hi = h + small;
    *lo = small - (*hi - h); /* |h| >= |small|: exact */
}

static inline float bib_log(float x) {
    if (x != x || x < 0.0f)
        return bib_f32_canonical_nan();
    if (x == 0.0f)
        return -INFINITY;
    if (x == INFINITY)
        return INFINITY;
    float hi, lo;
    bib_log_hl(x, &hi, &lo);
    return hi + lo;
}

/* erfc(a) for a >= 0 (a not NaN), given a^2 == sq + sqe exactly (erf
 * passes a * a and its fma remainder; gelu_erf passes x^2 / 2 the same way,
 * so that the rounding of x / sqrt 2 does not reach exp). */
static inline float bib_erfc_sq(float a, float sq, float sqe) {
    if (a > BIB_ERFC_MAX)
        return 0.0f;
    float q = (a - 2.0f) / (a + 2.0f);
    float p = BIB_ERFC_F11;
    p = fmaf(p, q, BIB_ERFC_F10);
    p = fmaf(p, q, BIB_ERFC_F9);
    p = fmaf(p, q, BIB_ERFC_F8);
    p = fmaf(p, q, BIB_ERFC_F7);
    p = fmaf(p, q, BIB_ERFC_F6);
    p = fmaf(p, q, BIB_ERFC_F5);
    p = fmaf(p, q, BIB_ERFC_F4);
    p = fmaf(p, q, BIB_ERFC_F3);
    p = fmaf(p, q, BIB_ERFC_F2);
    p = fmaf(p, q, BIB_ERFC_F1);
    p = fmaf(p, q, BIB_ERFC_F0);
    float r = p / ((a + a) + 1.0f);
    float v = r * bib_exp(-sq);
    return fmaf(-v, sqe, v); /* v exp(-sqe), |sqe| <= 2^-17 */
}

static inline float bib_erfc_nonneg(float a) {
    float s = a * a;
    return bib_erfc_sq(a, s, fmaf(a, a, -s));
}

/* erf(x) for |x| < 1. */
static inline float bib_erf_small(float x) {
    float s = x * x;
    float p = BIB_ERF_E6;
    p = fmaf(p, s, BIB_ERF_E5);
    p = fmaf(p, s, BIB_ERF_E4);
    p = fmaf(p, s, BIB_ERF_E3);
    p = fmaf(p, s, BIB_ERF_E2);
    p = fmaf(p, s, BIB_ERF_E1);
    p = fmaf(p, s, BIB_ERF_E0);
    return fmaf(x, p, x);
}

static inline float bib_erf(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    uint32_t sign = bib_f32_bits(x) & 0x80000000u;
    float a = bib_f32_from_bits(bib_f32_bits(x) & 0x7FFFFFFFu);
    if (a < 1.0f)
        return bib_erf_small(x);
    float y = 1.0f - bib_erfc_nonneg(a);
    return bib_f32_from_bits(bib_f32_bits(y) | sign);
}

/* gelu with erf (PyTorch's default): x * (1 + erf(u)) / 2, u = x / sqrt 2,
 * where 1 + erf(u) is taken as erfc(-u) for u < -1/2 (no cancellation in
 * the left tail), as 1 + erf(u) for -1/2 <= u < 1 and as 2 - erfc(u) above. */
static inline float bib_gelu_erf(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    if (x == -INFINITY)
        return -0.0f;
    float u = x * BIB_INV_SQRT2;
    float h;
    if (u >= -0.5f && u < 1.0f) {
        h = 1.0f + bib_erf_small(u);
    } else {
        float a = bib_f32_from_bits(bib_f32_bits(u) & 0x7FFFFFFFu);
        float x2 = x * x;
        float sq = 0.5f * x2, sqe = 0.5f * fmaf(x, x, -x2); /* u^2 as x^2 / 2 */
        float c = bib_erfc_sq(a, sq, sqe);
        h = u < 0.0f ? c : 2.0f - c;
    }
    return x * (0.5f * h);
}

/* 0: y is not an integer; 1: an odd integer; 2: an even integer. */
static inline int bib_f32_integer_kind(float y) {
    uint32_t u = bib_f32_bits(y) & 0x7FFFFFFFu;
    if (u == 0)
        return 2;
    int32_t e = (int32_t)(u >> 23) - 127;
    if (e < 0 || u >= 0x7F800000u)
        return 0;
    if (e > 23)
        return 2;
    uint32_t frac = 0x7FFFFFu >> e; /* the bits below the units */
    if ((u & frac) != 0)
        return 0;
    return (u >> (23 - e)) & 1u ? 1 : 2;
}

static inline float bib_pow(float x, float y) {
    if (y == 0.0f || x == 1.0f)
        return 1.0f;
    if (x != x || y != y)
        return bib_f32_canonical_nan();
    if (y == 1.0f)
        return x;
    if (y == 2.0f)
        return x * x;
    if (y == -1.0f)
        return 1.0f / x;
    if (y == 0.5f && x == -INFINITY)
        return INFINITY;
    if (y == 0.5f) /* +0 for -0 (sqrt keeps the sign); NaN for x < 0 */
        return x == 0.0f ? 0.0f : bib_f32_canon(sqrtf(x));
    float ax = bib_f32_from_bits(bib_f32_bits(x) & 0x7FFFFFFFu);
    uint32_t xsign = bib_f32_bits(x) & 0x80000000u;
    if (y == INFINITY || y == -INFINITY) {
        if (ax == 1.0f)
            return 1.0f;
        return (ax < 1.0f) == (y > 0.0f) ? 0.0f : INFINITY;
    }
    int kind = bib_f32_integer_kind(y);
    uint32_t rsign = kind == 1 ? xsign : 0u;
    if (ax == 0.0f || ax == INFINITY) {
        /* 0^y: +Inf for y < 0, +0 for y > 0; Inf^y the other way round;
           the sign of x for odd integers y. */
        float mag = (ax == 0.0f) == (y < 0.0f) ? INFINITY : 0.0f;
        return bib_f32_from_bits(bib_f32_bits(mag) | rsign);
    }
    if (xsign && kind == 0)
        return bib_f32_canonical_nan();
    float lh, ll;
    bib_log_hl(ax, &lh, &ll);
    float zh = y * lh;
    float ze = fmaf(y, lh, -zh); /* y lh == zh + ze */
    float zl = fmaf(y, ll, ze);
    float r = bib_exp_hl(zh, zl);
    return bib_f32_from_bits(bib_f32_bits(r) | rsign);
}

/* ---- sin and cos (spec/numerics.md section 5c) ----------------------------- */

/* 2/pi, bits 1..320 after the binary point, after one zero word: the bit of
 * weight 2^-i is bit 31 - ((i + 31) & 31) of word (i + 31) >> 5. */
#define BIB_TWO_OVER_PI_WORDS                                                                      \
    0x00000000u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u, 0xDB629599u, 0x3C439041u,     \
        0xFE5163ABu, 0xDEBBC561u, 0xB7246E3Au, 0x424DD2E0u
static const uint32_t bib_two_over_pi[11] = {BIB_TWO_OVER_PI_WORDS};

#define BIB_PIO2_HI 0x1.921fb6p+0f   /* pi/2 rounded to binary32 */
#define BIB_PIO2_LO -0x1.777a5cp-25f /* pi/2 - BIB_PIO2_HI, rounded */
#define BIB_SIN_S0 -0x1.555546p-3f
#define BIB_SIN_S1 0x1.11073ap-7f
#define BIB_SIN_S2 -0x1.9943aep-13f
#define BIB_COS_C0 0x1.55554ap-5f
#define BIB_COS_C1 -0x1.6c0c32p-10f
#define BIB_COS_C2 0x1.99eb6cp-16f

/* |x| = (q + f) pi/2 for x of bits ax (pi/4 <= |x| < Inf), f in [-1/2, 1/2],
 * q mod 4 returned; r = f pi/2 as hi + lo, |r| <= pi/4. Payne and Hanek's
 * reduction in integers: with |x| = m 2^E (m the 24-bit significand), the
 * bits of 2/pi of weight 2^-(E-1) .. 2^-(E+94) times m give the quadrant
 * (the two bits of weight 1 and 2: the earlier bits only add multiples of
 * 4) and 94 bits of the fraction; the later bits move the fraction by less
 * than 2^-70. Exact integer steps, then the fraction's leading 48 bits as
 * two floats times pi/2 in double-float arithmetic. */
static inline int bib_rem_pio2(uint32_t ax, float *hi, float *lo) {
    uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t k = (ax >> 23) - 120u; /* E + 30 = e - 120: the window's first bit */
    uint32_t o = k >> 5, sh = k & 31u, w[3];
    for (int j = 0; j < 3; j++)
        w[j] = sh ? (bib_two_over_pi[o + j] << sh) | (bib_two_over_pi[o + j + 1] >> (32u - sh))
                  : bib_two_over_pi[o + j];
    uint64_t p2 = (uint64_t)m * w[2], p1 = (uint64_t)m * w[1], p0 = (uint64_t)m * w[0];
    uint32_t f0 = (uint32_t)p2;
    uint64_t t = p1 + (p2 >> 32);
    uint32_t f1 = (uint32_t)t;
    uint32_t f2 = (uint32_t)(p0 + (t >> 32));
    int q = (int)(f2 >> 30);
    f2 &= 0x3FFFFFFFu;          /* f2:f1:f0 is the fraction, 94 bits */
    bool neg = (f2 >> 29) != 0; /* >= 1/2: nearer the next multiple */
    if (neg) {
        q++;
        f0 = ~f0 + 1u;
        uint32_t c = f0 == 0u;
        f1 = ~f1 + c;
        c = c && f1 == 0u;
        f2 = (~f2 + c) & 0x3FFFFFFFu;
    }
    /* Normalize: the leading one to bit 31 of f2 (the fraction is never 0). */
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
    uint32_t s = (uint32_t)__builtin_clz(f2);
    if (s != 0u) {
        f2 = (f2 << s) | (f1 >> (32u - s));
        f1 = f1 << s;
    }
    lz += s;
    float fh = (float)(f2 >> 8) * bib_f32_from_bits((127u - 24u - lz) << 23);
    float fl =
        (float)(((f2 & 0xFFu) << 16) | (f1 >> 16)) * bib_f32_from_bits((127u - 48u - lz) << 23);
    if (neg)
        fh = -fh, fl = -fl;
    float rh = fh * BIB_PIO2_HI;
    float rl = fmaf(fh, BIB_PIO2_LO, fmaf(fl, BIB_PIO2_HI, fmaf(fh, BIB_PIO2_HI, -rh)));
    float r = rh + rl;
    *hi = r;
    *lo = rl - (r - rh);
    return q & 3;
}

/* sin(r + c) and cos(r + c) for |r| <= pi/4, c a correction below r's ULP. */
static inline float bib_sin_kernel(float r, float c) {
    float z = r * r;
    float p = fmaf(fmaf(z, BIB_SIN_S2, BIB_SIN_S1), z, BIB_SIN_S0);
    return r + fmaf(z * r, p, c);
}

static inline float bib_cos_kernel(float r, float c) {
    float z = r * r;
    float p = fmaf(fmaf(z, BIB_COS_C2, BIB_COS_C1), z, BIB_COS_C0);
    float hz = 0.5f * z;
    float w = 1.0f - hz;
    return w + (((1.0f - w) - hz) + fmaf(z * z, p, -(r * c)));
}

/* sin(x) (want_cos 0) or cos(x) (1): BIB's own. */
static inline float bib_sincos(float x, int want_cos) {
    uint32_t u = bib_f32_bits(x), ax = u & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u)
        return bib_f32_canonical_nan(); /* sin and cos of +-Inf and NaN */
    if (ax < 0x39800000u)               /* |x| < 2^-12: x and 1 are the rounded values */
        return want_cos ? 1.0f : x;
    float r = bib_f32_from_bits(ax), c = 0.0f;
    int q = ax < 0x3F490FDBu ? 0 : bib_rem_pio2(ax, &r, &c); /* |x| < pi/4: no reduction */
    int n = (q + want_cos) & 3;                              /* cos(x) = sin(x + pi/2) */
    float y = (n & 1) ? bib_cos_kernel(r, c) : bib_sin_kernel(r, c);
    uint32_t sign = (n & 2) ? 0x80000000u : 0u;
    if (!want_cos)
        sign ^= u & 0x80000000u; /* sin is odd, cos even */
    return bib_f32_from_bits(bib_f32_bits(y) ^ sign);
}

/* ---- the other elementwise ops of spec/numerics.md section 5b --------------- */

/* sqrt, 1/x and 1/sqrt(x) from the correctly rounded primitives: RSQRT is
 * the quotient 1 / sqrt(x), each step rounded once. */
static inline float bib_sqrt_op(float x) {
    return bib_f32_canon(sqrtf(x));
}

static inline float bib_recip(float x) {
    return bib_f32_canon(1.0f / x);
}

static inline float bib_rsqrt(float x) {
    return bib_f32_canon(1.0f / sqrtf(x));
}

/* ABS and NEG work on the sign bit alone; a NaN comes out canonical. */
static inline float bib_abs(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    return bib_f32_from_bits(bib_f32_bits(x) & 0x7FFFFFFFu);
}

static inline float bib_neg(float x) {
    if (x != x)
        return bib_f32_canonical_nan();
    return bib_f32_from_bits(bib_f32_bits(x) ^ 0x80000000u);
}

/* FLOOR, CEIL and ROUND: x rounded to an integral value by its bits alone,
 * toward -Inf (dir 0), toward +Inf (dir 1) or to the nearest, halves to even
 * (dir 2). Exact: +-0, +-Inf and |x| >= 2^23 come back unchanged, a NaN
 * canonical, and a result of magnitude below 1 keeps x's sign
 * (ceil(-0.5) = -0). The fraction's bits are those below bit 150 - e of the
 * bits; adding 1 << (150 - e) to the cleared bits adds 1 to the magnitude,
 * carrying into the exponent when it must. */
static inline float bib_round_integral(float x, int dir) {
    uint32_t u = bib_f32_bits(x);
    uint32_t e = (u >> 23) & 0xFFu;
    uint32_t sign = u & 0x80000000u;
    if (e == 0xFFu)
        return x != x ? bib_f32_canonical_nan() : x;
    if (e >= 150u || (u & 0x7FFFFFFFu) == 0u)
        return x;
    /* Away from zero: floor of a negative, ceil of a positive, or the
       nearest when the fraction is over half (or half with an odd integer
       part). */
    bool up;
    if (e < 127u) {
        /* 0 < |x| < 1: the result is +-0 or +-1. */
        up = dir == 2 ? (u & 0x7FFFFFFFu) > 0x3F000000u : (sign != 0u) == (dir == 0);
        return bib_f32_from_bits(sign | (up ? 0x3F800000u : 0u));
    }
    uint32_t shift = 150u - e; /* 1..23 */
    uint32_t unit = 1u << shift;
    uint32_t frac = u & (unit - 1u);
    uint32_t t = u & ~(unit - 1u);
    if (frac == 0u)
        return x;
    if (dir == 2) {
        uint32_t half = unit >> 1;
        up = frac > half || (frac == half && (t & unit) != 0u);
    } else {
        up = (sign != 0u) == (dir == 0);
    }
    return bib_f32_from_bits(up ? t + unit : t);
}

/* TMIN and TMAX: the canonical NaN if either is NaN, else the smaller or
 * greater in the order -Inf < ... < -0 < +0 < ... < +Inf. */
static inline float bib_min2(float a, float b) {
    if (a != a || b != b)
        return bib_f32_canonical_nan();
    return bib_f32_order_key(b) < bib_f32_order_key(a) ? b : a;
}

static inline float bib_max2(float a, float b) {
    if (a != a || b != b)
        return bib_f32_canonical_nan();
    return bib_f32_order_key(b) > bib_f32_order_key(a) ? b : a;
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
