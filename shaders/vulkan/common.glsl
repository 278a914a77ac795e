// common.glsl: what every BIB compute shader shares (included, never compiled alone).
//
// Owns the binding layout (four storage buffers bound as whole pool blocks,
// addressed through element offsets in push constants), the push-constant
// block, and the exact arithmetic primitives of spec/numerics.md that the
// device may not provide natively: fma (fused or emulated, chosen by the
// start-up probe through specialization constant 0), and correctly rounded
// division and square root built from integer operations only.
//
// Every float temporary is `precise` so that no driver contracts or
// reassociates. Rounding mode and denormal modes are not declared here: the
// host inserts RoundingModeRTE / DenormPreserve / SignedZeroInfNanPreserve
// into the SPIR-V when the device supports them.

#extension GL_EXT_control_flow_attributes : enable

// 0: GLSL fma() is fused on this device (probed); 1: exact emulation.
layout(constant_id = 0) const int BIB_FMA_MODE = 0;

layout(std430, binding = 0) buffer Out { float out_f[]; };
layout(std430, binding = 1) buffer In0 { float in0_f[]; };
layout(std430, binding = 2) buffer In1 { float in1_f[]; };
layout(std430, binding = 3) buffer In2 { float in2_f[]; };
// Raw 32-bit views of the same bindings, for kernels that move bits (i32
// data, indices) without passing them through float registers.
layout(std430, binding = 0) buffer OutU { uint out_u[]; };
layout(std430, binding = 1) buffer In0U { uint in0_u[]; };
layout(std430, binding = 2) buffer In1U { uint in1_u[]; };
// Binding 4: kernel scratch (attention's probabilities), written and read
// back by other invocations of the same workgroup.
layout(std430, binding = 4) coherent buffer Scratch { float scratch_f[]; };

// One layout for every kernel; each kernel documents which words it reads.
layout(push_constant) uniform Push {
    uint off_out; // element offsets of the views inside their bound blocks
    uint off_in0;
    uint off_in1;
    uint off_in2;
    uint n0; // kernel-specific sizes
    uint n1;
    uint n2;
    uint n3;
    uint n4;
    uint n5;
    uint u0; // kernel-specific words (float parameters travel as bits)
    uint u1;
    uint u2;
    uint u3;
    uint off_scratch;
    int s[16]; // kernel-specific signed words (STRIDED's offsets and strides)
} pc;

#if BIB_HAVE_F64
// True for a denormal (not for zero): its exponent field is 0, its fraction not.
bool bib_is_denormal(float x) {
    uint u = floatBitsToUint(x);
    return (u & 0x7f800000u) == 0u && (u & 0x007fffffu) != 0u;
}

// A float widened to double exactly. A denormal float is rebuilt from its
// bits (m * 2^-149, in double arithmetic that stays normal) rather than
// converted: NVIDIA's driver, left to its default (no DenormPreserve
// declared), flushes a denormal source of float -> double conversion (the
// H100 probe's case 66).
double bib_widen(float a) {
    if (!bib_is_denormal(a))
        return double(a);
    uint u = floatBitsToUint(a);
    precise double m = double(u & 0x007fffffu) * packDouble2x32(uvec2(0u, 0x36a00000u)); // 2^-149
    return (u & 0x80000000u) != 0u ? -m : m;
}

// A double rounded to odd (at least two bits beyond float's) narrowed to the
// nearest float. Where the float is denormal the rounding is done on the
// integer multiple of 2^-149 and the float built from its bits, so that no
// conversion with a denormal result is left to the driver.
float bib_narrow(double s) {
    uvec2 w = unpackDouble2x32(s);
    if ((w.y & 0x7ff00000u) >= 0x38100000u) // |s| >= 2^-126, or Inf/NaN
        return float(s);
    precise double q = roundEven(abs(s) * packDouble2x32(uvec2(0u, 0x49400000u))); // * 2^149
    return uintBitsToFloat((w.y & 0x80000000u) | uint(q));
}

// Exact fp32 fma from fp64 (Boldo and Melquiond): the product of two floats is
// exact in double; the sum is rounded to odd in double (53 >= 24 + 2 bits), so
// the final rounding to float is the one correctly rounded result.
float bib_fma_emulated(float a, float b, float c) {
    precise double p = bib_widen(a) * bib_widen(b);
    precise double dc = bib_widen(c);
    precise double s = p + dc;
    // TwoSum: s + e == p + dc exactly.
    precise double bb = s - p;
    precise double e = (p - (s - bb)) + (dc - bb);
    uvec2 w = unpackDouble2x32(s);
    bool finite = (w.y & 0x7ff00000u) != 0x7ff00000u;
    if (finite && e != 0.0LF && (w.x & 1u) == 0u) {
        // Round to odd: move one ulp toward the exact value, which lies
        // strictly between s and that neighbour.
        if ((e > 0.0LF) == (s > 0.0LF)) {
            w.x += 1u; // even -> odd never carries
        } else {
            if (w.x == 0u)
                w.y -= 1u;
            w.x -= 1u;
        }
        s = packDouble2x32(w);
    }
    return bib_narrow(s);
}

// Flush to zero as NVIDIA's fma() does (a denormal operand or result becomes
// zero of its sign): BIB_FMA_MODE 3 computes fused fma through it, so that the
// fallback of mode 2 is tested on a device whose fma() does not flush.
float bib_flush(float x) {
    uint u = floatBitsToUint(x);
    return (u & 0x7f800000u) == 0u ? uintBitsToFloat(u & 0x80000000u) : x;
}

// Mode 2: fma() is fused but flushes denormals (the H100's driver, probed).
// Its result is the exact one unless an operand is denormal, or the exact
// result is denormal or zero (flushed to, or is, zero: exponent field 0) with
// both factors non-zero; those rare cases take the emulation. A zero factor
// (padding taps, ReLU zeros) leaves c, or a zero whose sign the fused
// operation gets right, and stays on the fast path.
float bib_fma_ftz(float a, float b, float c) {
    precise float r;
    if (BIB_FMA_MODE == 3) {
        r = bib_flush(bib_fma_emulated(bib_flush(a), bib_flush(b), bib_flush(c)));
    } else {
        r = fma(a, b, c);
    }
    uint ua = floatBitsToUint(a) & 0x7fffffffu, ub = floatBitsToUint(b) & 0x7fffffffu;
    bool suspect = (floatBitsToUint(r) & 0x7f800000u) == 0u && ua != 0u && ub != 0u;
    if (suspect || bib_is_denormal(a) || bib_is_denormal(b) || bib_is_denormal(c))
        r = bib_fma_emulated(a, b, c);
    return r;
}
#endif

// BIB_FMA_MODE (specialization constant 0, chosen by the start-up probe):
// 0 fma() fused and exact; 1 the fp64 emulation; 2 fma() fused but flushing
// denormals, with the emulation for the rare operands where that matters;
// 3 mode 2 over a simulated flushing fma (tests only).
float bib_fma(float a, float b, float c) {
    if (BIB_FMA_MODE == 0) {
        precise float r = fma(a, b, c);
        return r;
    }
#if BIB_HAVE_F64
    if (BIB_FMA_MODE >= 2)
        return bib_fma_ftz(a, b, c);
    return bib_fma_emulated(a, b, c);
#else
    // This variant is only chosen for devices whose probe found fma() fused
    // and exact; without fp64 the host refuses devices that need more.
    precise float r = fma(a, b, c);
    return r;
#endif
}

// IEEE comparisons with zero, read from the bits (for non-NaN x): NVIDIA's
// driver, left to its default (no DenormPreserve declared), compares a
// denormal as if it were zero.
bool bib_is_zero(float x) {
    return (floatBitsToUint(x) & 0x7fffffffu) == 0u;
}

bool bib_lt0(float x) {
    return (floatBitsToUint(x) & 0x80000000u) != 0u && !bib_is_zero(x);
}

bool bib_gt0(float x) {
    return (floatBitsToUint(x) & 0x80000000u) == 0u && !bib_is_zero(x);
}

// ---- correctly rounded division and sqrt from integer operations ----------
// SPIR-V's OpFDiv is 2.5 ulp and sqrt is derived from inversesqrt, so both are
// computed as soft-float: the significands are divided (or rooted) bit by bit
// with a remainder, then rounded to nearest-even with the remainder as
// sticky bit. The result equals IEEE '/' and sqrtf bit for bit, denormals and
// specials included.

const uint BIB_QNAN = 0x7fc00000u;

// Rounds (sign, biased exponent e of the leading bit, 27-bit significand m
// with the leading one at bit 26 and guard bits 2..0, sticky) to float bits.
// e may be <= 0: the value is then shifted into the subnormal range first.
uint bib_round_pack(uint sign, int e, uint m, bool sticky) {
    if (e <= 0) {
        int sh = 1 - e;
        if (sh >= 32) {
            sticky = sticky || m != 0u;
            m = 0u;
        } else {
            uint lost = m & ((1u << uint(sh)) - 1u);
            sticky = sticky || lost != 0u;
            m >>= uint(sh);
        }
        e = 0;
    }
    // m: bits 26..3 significand (incl. hidden), 2..0 round bits.
    uint rb = m & 7u;
    uint q = m >> 3;
    bool st = sticky || (rb & 3u) != 0u;
    bool halfway = (rb & 4u) != 0u;
    if (halfway && (st || (q & 1u) != 0u))
        q += 1u;
    // q may now carry into bit 24 (next binade) or, for subnormals, into the
    // normal range; both are handled by adding q to the exponent field.
    if (e == 0) {
        return sign | q; // subnormal (or rounded up to the smallest normal)
    }
    uint bits = (uint(e - 1) << 23) + q; // hidden bit adds one to the exponent
    if (bits >= 0x7f800000u)
        return sign | 0x7f800000u;
    return sign | bits;
}

// Splits a finite nonzero float into its significand (leading one at bit 23)
// and unbiased-style exponent such that value = m * 2^(e - 150).
void bib_unpack(uint x, out uint m, out int e) {
    uint ex = (x >> 23) & 0xffu;
    m = x & 0x7fffffu;
    if (ex == 0u) {
        int lz = 23 - findMSB(m);
        m <<= uint(lz);
        e = 1 - lz;
    } else {
        m |= 0x800000u;
        e = int(ex);
    }
}

float bib_div(float fa, float fb) {
    uint a = floatBitsToUint(fa), b = floatBitsToUint(fb);
    uint sign = (a ^ b) & 0x80000000u;
    uint aa = a & 0x7fffffffu, ab = b & 0x7fffffffu;
    if (aa > 0x7f800000u || ab > 0x7f800000u)
        return uintBitsToFloat(BIB_QNAN);
    if (aa == 0x7f800000u)
        return uintBitsToFloat(ab == 0x7f800000u ? BIB_QNAN : (sign | 0x7f800000u));
    if (ab == 0x7f800000u)
        return uintBitsToFloat(sign);
    if (ab == 0u)
        return uintBitsToFloat(aa == 0u ? BIB_QNAN : (sign | 0x7f800000u));
    if (aa == 0u)
        return uintBitsToFloat(sign);
    uint ma, mb;
    int ea, eb;
    bib_unpack(aa, ma, ea);
    bib_unpack(ab, mb, eb);
    // Quotient of significands in [0.5, 2): make it [1, 2) by pre-shifting.
    int e = ea - eb + 127;
    if (ma < mb) {
        ma <<= 1;
        e -= 1;
    }
    // Long division: 27 quotient bits (leading one, 23 fraction, 3 round).
    uint r = ma, q = 0u;
    for (int i = 0; i < 27; ++i) {
        q <<= 1;
        if (r >= mb) {
            r -= mb;
            q |= 1u;
        }
        r <<= 1;
    }
    return uintBitsToFloat(bib_round_pack(sign, e, q, r != 0u));
}

float bib_sqrt(float fx) {
    uint x = floatBitsToUint(fx);
    if (x == 0u || x == 0x80000000u)
        return fx; // sqrt(+-0) = +-0
    if (x > 0x7f800000u || (x & 0x80000000u) != 0u)
        return uintBitsToFloat(BIB_QNAN); // NaN, negative
    if (x == 0x7f800000u)
        return fx;
    uint m;
    int e;
    bib_unpack(x, m, e);
    // value = m * 2^(e-150); make the exponent even so it halves exactly.
    int ue = e - 127; // value = (m / 2^23) * 2^ue, m in [2^23, 2^24)
    uint hi = 0u, lo = m;
    if ((ue & 1) != 0) {
        ue -= 1;
        lo <<= 1;
    }
    // Digit-by-digit root of the 64-bit radicand (lo << 29), giving 27 bits.
    // radicand = m' * 2^29 with m' < 2^25, i.e. < 2^54: held in (hi, lo).
    hi = lo >> 3;
    lo = lo << 29;
    uint root = 0u, remh = 0u, reml = 0u;
    // Process two radicand bits per step, top bits first (54 bits -> 27 steps).
    for (int i = 0; i < 27; ++i) {
        int sh = 52 - 2 * i; // position of the next bit pair
        uint pair = sh >= 32 ? (hi >> uint(sh - 32)) & 3u : (lo >> uint(sh)) & 3u;
        // rem = rem * 4 + pair (rem fits in 64 bits: < 2^29)
        remh = (remh << 2) | (reml >> 30);
        reml = (reml << 2) | pair;
        uint t = (root << 2) | 1u; // trial = 4*root + 1 (< 2^29)
        root <<= 1;
        if (remh != 0u || reml >= t) {
            uint borrow = reml < t ? 1u : 0u;
            reml -= t;
            remh -= borrow;
            root |= 1u;
        }
    }
    // root has 27 bits with leading one at bit 26; exponent ue/2.
    return uintBitsToFloat(bib_round_pack(0u, (ue >> 1) + 127, root, (remh | reml) != 0u));
}

// ---- BIB's own functions (backends/cpu/bmath.h, spec/numerics.md) ---------
// Each is the reference's sequence of correctly rounded operations, one for
// one: fma through bib_fma, '/' through bib_div, sqrt through bib_sqrt.

#define BIB_EXP_LOG2E uintBitsToFloat(0x3fb8aa3bu)
#define BIB_EXP_SHIFT uintBitsToFloat(0x4b400000u)
#define BIB_EXP_LN2_HI uintBitsToFloat(0x3f317000u)
#define BIB_EXP_LN2_LO uintBitsToFloat(0x3805fdf4u)
#define BIB_EXP_C6 uintBitsToFloat(0x3ab5121bu)
#define BIB_EXP_C5 uintBitsToFloat(0x3c091cefu)
#define BIB_EXP_C4 uintBitsToFloat(0x3d2aac79u)
#define BIB_EXP_C3 uintBitsToFloat(0x3e2aaa49u)
#define BIB_EXP_C2 uintBitsToFloat(0x3efffffeu)
#define BIB_EXP_HI uintBitsToFloat(0x42b20000u)
#define BIB_EXP_LO uintBitsToFloat(0xc2d00000u)
#define BIB_TANH_SMALL uintBitsToFloat(0x3f200000u)
#define BIB_TANH_Q0 uintBitsToFloat(0xbeaaaa99u)
#define BIB_TANH_Q1 uintBitsToFloat(0x3e088393u)
#define BIB_TANH_Q2 uintBitsToFloat(0xbd5c1e2au)
#define BIB_TANH_Q3 uintBitsToFloat(0x3ca9133fu)
#define BIB_TANH_Q4 uintBitsToFloat(0xbbbaf0a8u)
#define BIB_GELU_K uintBitsToFloat(0x3fcc422au)
#define BIB_GELU_C1 uintBitsToFloat(0x3d372713u)

bool bib_isnan(float x) {
    return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u;
}

// Every arithmetic kernel stores through this: NaN bits differ between
// devices, so outputs carry the one canonical quiet NaN.
float bib_canon(float x) {
    return bib_isnan(x) ? uintBitsToFloat(BIB_QNAN) : x;
}

// Maps a float to an int whose order is -Inf < ... < -0 < +0 < ... < +Inf.
int bib_order_key(float x) {
    int i = floatBitsToInt(x);
    return i ^ int(uint(i >> 31) & 0x7fffffffu);
}

float bib_from_order_key(int k) {
    return intBitsToFloat(k ^ int(uint(k >> 31) & 0x7fffffffu));
}

float bib_pow2i(int e) {
    return uintBitsToFloat(uint(e + 127) << 23);
}

float bib_exp(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    if (x > BIB_EXP_HI)
        return uintBitsToFloat(0x7f800000u);
    if (x < BIB_EXP_LO)
        return 0.0;
    precise float j = bib_fma(x, BIB_EXP_LOG2E, BIB_EXP_SHIFT);
    precise float kf = j - BIB_EXP_SHIFT;
    precise float nk = -kf;
    precise float r = bib_fma(nk, BIB_EXP_LN2_HI, x);
    r = bib_fma(nk, BIB_EXP_LN2_LO, r);
    precise float p = BIB_EXP_C6;
    p = bib_fma(p, r, BIB_EXP_C5);
    p = bib_fma(p, r, BIB_EXP_C4);
    p = bib_fma(p, r, BIB_EXP_C3);
    p = bib_fma(p, r, BIB_EXP_C2);
    p = bib_fma(p, r, 1.0);
    p = bib_fma(p, r, 1.0);
    int k = int(kf);
    int k1 = k >> 1; // floor(k / 2)
    int k2 = k - k1;
    precise float y = p * bib_pow2i(k1);
    precise float z = y * bib_pow2i(k2);
    return z;
}

float bib_tanh(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    uint sign = floatBitsToUint(x) & 0x80000000u;
    precise float a = uintBitsToFloat(floatBitsToUint(x) & 0x7fffffffu);
    precise float y;
    if (a < BIB_TANH_SMALL) {
        precise float s = a * a;
        precise float q = BIB_TANH_Q4;
        q = bib_fma(q, s, BIB_TANH_Q3);
        q = bib_fma(q, s, BIB_TANH_Q2);
        q = bib_fma(q, s, BIB_TANH_Q1);
        q = bib_fma(q, s, BIB_TANH_Q0);
        precise float t = a * s;
        y = bib_fma(t, q, a);
    } else {
        precise float aa = a + a;
        precise float e = bib_exp(aa);
        precise float e1 = e + 1.0;
        precise float d = bib_div(2.0, e1);
        y = 1.0 - d;
    }
    return uintBitsToFloat(floatBitsToUint(y) | sign);
}

float bib_sigmoid(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    precise float na = uintBitsToFloat(floatBitsToUint(x) | 0x80000000u); // -|x|
    precise float e = bib_exp(na);
    precise float num = bib_lt0(x) ? e : 1.0;
    precise float den = 1.0 + e;
    return bib_div(num, den);
}

float bib_gelu(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    if (floatBitsToUint(x) == 0xff800000u)
        return uintBitsToFloat(0x80000000u); // gelu(-Inf) = -0
    precise float x2 = x * x;
    precise float x3 = x2 * x;
    precise float w = bib_fma(BIB_GELU_C1, x3, x);
    precise float z = BIB_GELU_K * w;
    precise float s = bib_sigmoid(z);
    precise float g = x * s;
    return g;
}

float bib_relu(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    return bib_gt0(x) ? x : 0.0;
}

// ---- log, erf, gelu_erf, pow (bmath.h, spec/numerics.md section 5a) -------

#define BIB_LOG_P0 uintBitsToFloat(0x3f2aaaabu)
#define BIB_LOG_P0_LO uintBitsToFloat(0xb2aaaaabu)
#define BIB_LOG_P1 uintBitsToFloat(0x3eccccccu)
#define BIB_LOG_P2 uintBitsToFloat(0x3e924993u)
#define BIB_LOG_P3 uintBitsToFloat(0x3e633cffu)
#define BIB_LOG_P4 uintBitsToFloat(0x3e464e33u)
#define BIB_ERFC_MAX uintBitsToFloat(0x41280000u)
#define BIB_ERFC_F0 uintBitsToFloat(0x3fa37407u)
#define BIB_ERFC_F1 uintBitsToFloat(0xbdbdfaf5u)
#define BIB_ERFC_F2 uintBitsToFloat(0xbe2a03e7u)
#define BIB_ERFC_F3 uintBitsToFloat(0x3e27fcfeu)
#define BIB_ERFC_F4 uintBitsToFloat(0xbd5e13a0u)
#define BIB_ERFC_F5 uintBitsToFloat(0xbc039351u)
#define BIB_ERFC_F6 uintBitsToFloat(0x3c0eb371u)
#define BIB_ERFC_F7 uintBitsToFloat(0x3aa4278bu)
#define BIB_ERFC_F8 uintBitsToFloat(0xbaba77e0u)
#define BIB_ERFC_F9 uintBitsToFloat(0xb9d24190u)
#define BIB_ERFC_F10 uintBitsToFloat(0x3933830eu)
#define BIB_ERFC_F11 uintBitsToFloat(0x38a8a7a1u)
#define BIB_ERF_E0 uintBitsToFloat(0x3e0375d4u)
#define BIB_ERF_E1 uintBitsToFloat(0xbec0939fu)
#define BIB_ERF_E2 uintBitsToFloat(0x3de7167cu)
#define BIB_ERF_E3 uintBitsToFloat(0xbcdbfc86u)
#define BIB_ERF_E4 uintBitsToFloat(0x3baa02d8u)
#define BIB_ERF_E5 uintBitsToFloat(0xba51fb78u)
#define BIB_ERF_E6 uintBitsToFloat(0x38a4b505u)
#define BIB_INV_SQRT2 uintBitsToFloat(0x3f3504f3u)
#define BIB_F32_INF uintBitsToFloat(0x7f800000u)
#define BIB_F32_NEG_INF uintBitsToFloat(0xff800000u)

float bib_exp_hl(float hi, float lo) {
    if (bib_isnan(hi))
        return uintBitsToFloat(BIB_QNAN);
    if (hi > BIB_EXP_HI)
        return BIB_F32_INF;
    if (hi < BIB_EXP_LO)
        return 0.0;
    precise float j = bib_fma(hi, BIB_EXP_LOG2E, BIB_EXP_SHIFT);
    precise float kf = j - BIB_EXP_SHIFT;
    precise float nk = -kf;
    precise float r = bib_fma(nk, BIB_EXP_LN2_HI, hi);
    r = bib_fma(nk, BIB_EXP_LN2_LO, r);
    r = r + lo;
    precise float p = BIB_EXP_C6;
    p = bib_fma(p, r, BIB_EXP_C5);
    p = bib_fma(p, r, BIB_EXP_C4);
    p = bib_fma(p, r, BIB_EXP_C3);
    p = bib_fma(p, r, BIB_EXP_C2);
    p = bib_fma(p, r, 1.0);
    p = bib_fma(p, r, 1.0);
    int k = int(kf);
    int k1 = k >> 1;
    int k2 = k - k1;
    precise float y = p * bib_pow2i(k1);
    precise float z = y * bib_pow2i(k2);
    return z;
}

// ln x = hi + lo for x positive, finite, not zero.
void bib_log_hl(float xin, out float hi, out float lo) {
    precise float x = xin;
    int k = 0;
    if (x < uintBitsToFloat(0x00800000u)) {
        x = x * uintBitsToFloat(0x4c000000u); // 2^25, exact
        k = -25;
    }
    uint u = floatBitsToUint(x);
    uint v = u - 0x3f3504f3u;
    int e = int(v) >> 23;
    k += e;
    precise float m = uintBitsToFloat(u - (uint(e) << 23));
    precise float f = m - 1.0;
    precise float d = 2.0 + f;
    precise float d2 = d - 2.0;
    precise float dl = f - d2;
    precise float sh = bib_div(f, d);
    precise float nsh = -sh;
    precise float r = bib_fma(nsh, d, f);
    r = bib_fma(nsh, dl, r);
    precise float sl = bib_div(r, d);
    precise float z = sh * sh;
    precise float nz = -z;
    precise float ze = bib_fma(sh, sh, nz);
    precise float rz = BIB_LOG_P4;
    rz = bib_fma(rz, z, BIB_LOG_P3);
    rz = bib_fma(rz, z, BIB_LOG_P2);
    rz = bib_fma(rz, z, BIB_LOG_P1);
    precise float c = sh * z;
    precise float nc = -c;
    precise float ce = bib_fma(sh, z, nc);
    precise float th = BIB_LOG_P0 * c;
    precise float nth = -th;
    precise float the = bib_fma(BIB_LOG_P0, c, nth);
    precise float shze = sh * ze;
    precise float cl1 = ce + shze;
    precise float zsl = z * sl;
    precise float zsl3 = 3.0 * zsl;
    precise float cube_lo = cl1 + zsl3;
    precise float tl1 = BIB_LOG_P0 * cube_lo;
    precise float tl2 = the + tl1;
    precise float tl3 = BIB_LOG_P0_LO * c;
    precise float tl4 = tl2 + tl3;
    precise float zr = z * rz;
    precise float czr = c * zr;
    precise float tl = tl4 + czr;
    precise float kf = float(k);
    precise float kh = kf * BIB_EXP_LN2_HI;
    precise float kl = kf * BIB_EXP_LN2_LO;
    precise float nkl = -kl;
    precise float kle = bib_fma(kf, BIB_EXP_LN2_LO, nkl);
    precise float s2 = sh + sh;
    precise float h1 = kh + s2;
    precise float hk = h1 - kh;
    precise float l1 = s2 - hk;
    precise float h = h1 + th;
    precise float hd1 = h - h1;
    precise float l2 = th - hd1;
    precise float l12 = l1 + l2;
    precise float sl2 = sl + sl;
    precise float a1 = sl2 + tl;
    precise float a2 = kl + kle;
    precise float a3 = a1 + a2;
    precise float small = l12 + a3;
    precise float hh = h + small;
    precise float hd = hh - h;
    precise float ll = small - hd;
    hi = hh;
    lo = ll;
}

float bib_log(float x) {
    if (bib_isnan(x) || bib_lt0(x))
        return uintBitsToFloat(BIB_QNAN);
    if (bib_is_zero(x))
        return BIB_F32_NEG_INF;
    if (x == BIB_F32_INF)
        return BIB_F32_INF;
    float hi, lo;
    bib_log_hl(x, hi, lo);
    precise float y = hi + lo;
    return y;
}

// erfc(a) for a >= 0 given a^2 == sq + sqe exactly.
float bib_erfc_sq(float a, float sq, float sqe) {
    if (a > BIB_ERFC_MAX)
        return 0.0;
    precise float am = a - 2.0;
    precise float ap = a + 2.0;
    precise float q = bib_div(am, ap);
    precise float p = BIB_ERFC_F11;
    p = bib_fma(p, q, BIB_ERFC_F10);
    p = bib_fma(p, q, BIB_ERFC_F9);
    p = bib_fma(p, q, BIB_ERFC_F8);
    p = bib_fma(p, q, BIB_ERFC_F7);
    p = bib_fma(p, q, BIB_ERFC_F6);
    p = bib_fma(p, q, BIB_ERFC_F5);
    p = bib_fma(p, q, BIB_ERFC_F4);
    p = bib_fma(p, q, BIB_ERFC_F3);
    p = bib_fma(p, q, BIB_ERFC_F2);
    p = bib_fma(p, q, BIB_ERFC_F1);
    p = bib_fma(p, q, BIB_ERFC_F0);
    precise float a2 = a + a;
    precise float den = a2 + 1.0;
    precise float r = bib_div(p, den);
    precise float nsq = -sq;
    precise float e = bib_exp(nsq);
    precise float v = r * e;
    precise float nv = -v;
    precise float y = bib_fma(nv, sqe, v);
    return y;
}

float bib_erf_small(float x) {
    precise float s = x * x;
    precise float p = BIB_ERF_E6;
    p = bib_fma(p, s, BIB_ERF_E5);
    p = bib_fma(p, s, BIB_ERF_E4);
    p = bib_fma(p, s, BIB_ERF_E3);
    p = bib_fma(p, s, BIB_ERF_E2);
    p = bib_fma(p, s, BIB_ERF_E1);
    p = bib_fma(p, s, BIB_ERF_E0);
    precise float y = bib_fma(x, p, x);
    return y;
}

float bib_erf(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    uint sign = floatBitsToUint(x) & 0x80000000u;
    precise float a = uintBitsToFloat(floatBitsToUint(x) & 0x7fffffffu);
    if (a < 1.0)
        return bib_erf_small(x);
    precise float s = a * a;
    precise float ns = -s;
    precise float se = bib_fma(a, a, ns);
    precise float c = bib_erfc_sq(a, s, se);
    precise float y = 1.0 - c;
    return uintBitsToFloat(floatBitsToUint(y) | sign);
}

float bib_gelu_erf(float x) {
    if (bib_isnan(x))
        return uintBitsToFloat(BIB_QNAN);
    if (floatBitsToUint(x) == 0xff800000u)
        return uintBitsToFloat(0x80000000u);
    precise float u = x * BIB_INV_SQRT2;
    precise float h;
    if (u >= -0.5 && u < 1.0) {
        precise float e = bib_erf_small(u);
        h = 1.0 + e;
    } else {
        precise float a = uintBitsToFloat(floatBitsToUint(u) & 0x7fffffffu);
        precise float x2 = x * x;
        precise float nx2 = -x2;
        precise float x2e = bib_fma(x, x, nx2);
        precise float sq = 0.5 * x2;
        precise float sqe = 0.5 * x2e;
        precise float c = bib_erfc_sq(a, sq, sqe);
        precise float c2 = 2.0 - c;
        h = bib_lt0(u) ? c : c2;
    }
    precise float hh = 0.5 * h;
    precise float y = x * hh;
    return y;
}

// 0: y is not an integer; 1: an odd integer; 2: an even integer.
int bib_integer_kind(float y) {
    uint u = floatBitsToUint(y) & 0x7fffffffu;
    if (u == 0u)
        return 2;
    int e = int(u >> 23) - 127;
    if (e < 0 || u >= 0x7f800000u)
        return 0;
    if (e > 23)
        return 2;
    uint frac = 0x7fffffu >> uint(e);
    if ((u & frac) != 0u)
        return 0;
    return ((u >> uint(23 - e)) & 1u) != 0u ? 1 : 2;
}

float bib_pow(float x, float y) {
    if (bib_is_zero(y) || x == 1.0)
        return 1.0;
    if (bib_isnan(x) || bib_isnan(y))
        return uintBitsToFloat(BIB_QNAN);
    if (y == 1.0)
        return x;
    if (y == 2.0) {
        precise float xx = x * x;
        return xx;
    }
    if (y == -1.0)
        return bib_div(1.0, x);
    if (y == 0.5 && x == BIB_F32_NEG_INF)
        return BIB_F32_INF;
    if (y == 0.5) // +0 for -0 (sqrt keeps the sign); NaN for x < 0
        return bib_is_zero(x) ? 0.0 : bib_canon(bib_sqrt(x));
    precise float ax = uintBitsToFloat(floatBitsToUint(x) & 0x7fffffffu);
    uint xsign = floatBitsToUint(x) & 0x80000000u;
    if (y == BIB_F32_INF || y == BIB_F32_NEG_INF) {
        if (ax == 1.0)
            return 1.0;
        return (ax < 1.0) == bib_gt0(y) ? 0.0 : BIB_F32_INF;
    }
    int kind = bib_integer_kind(y);
    uint rsign = kind == 1 ? xsign : 0u;
    if (bib_is_zero(ax) || ax == BIB_F32_INF) {
        float mag = bib_is_zero(ax) == bib_lt0(y) ? BIB_F32_INF : 0.0;
        return uintBitsToFloat(floatBitsToUint(mag) | rsign);
    }
    if (xsign != 0u && kind == 0)
        return uintBitsToFloat(BIB_QNAN);
    float lh, ll;
    bib_log_hl(ax, lh, ll);
    precise float zh = y * lh;
    precise float nzh = -zh;
    precise float ze = bib_fma(y, lh, nzh);
    precise float zl = bib_fma(y, ll, ze);
    precise float r = bib_exp_hl(zh, zl);
    return uintBitsToFloat(floatBitsToUint(r) | rsign);
}

float bib_min2(float a, float b) {
    if (bib_isnan(a) || bib_isnan(b))
        return uintBitsToFloat(BIB_QNAN);
    return bib_order_key(b) < bib_order_key(a) ? b : a;
}

float bib_max2(float a, float b) {
    if (bib_isnan(a) || bib_isnan(b))
        return uintBitsToFloat(BIB_QNAN);
    return bib_order_key(b) > bib_order_key(a) ? b : a;
}

// ---- sin and cos (bmath.h, spec/numerics.md section 5c) ------------------

#define BIB_PIO2_HI uintBitsToFloat(0x3fc90fdbu)
#define BIB_PIO2_LO uintBitsToFloat(0xb33bbd2eu)
#define BIB_SIN_S0 uintBitsToFloat(0xbe2aaaa3u)
#define BIB_SIN_S1 uintBitsToFloat(0x3c08839du)
#define BIB_SIN_S2 uintBitsToFloat(0xb94ca1d7u)
#define BIB_COS_C0 uintBitsToFloat(0x3d2aaaa5u)
#define BIB_COS_C1 uintBitsToFloat(0xbab60619u)
#define BIB_COS_C2 uintBitsToFloat(0x37ccf5b6u)

const uint BIB_TWO_OVER_PI[11] = uint[11](0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                          0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu,
                                          0xdebbc561u, 0xb7246e3au, 0x424dd2e0u);

// bmath.h bib_rem_pio2: |x| = (q + f) pi/2, q mod 4 returned, r = f pi/2 as
// hi + lo; the same integer steps (32-bit products through umulExtended),
// then the same float operations.
int bib_rem_pio2(uint ax, out float hi, out float lo) {
    uint m = (ax & 0x7fffffu) | 0x800000u;
    uint k = (ax >> 23) - 120u;
    uint o = k >> 5, sh = k & 31u;
    uint w[3];
    for (uint j = 0u; j < 3u; j++)
        w[j] = sh != 0u ? (BIB_TWO_OVER_PI[o + j] << sh) | (BIB_TWO_OVER_PI[o + j + 1u] >> (32u - sh))
                        : BIB_TWO_OVER_PI[o + j];
    uint h2, l2, h1, l1, h0, l0, c;
    umulExtended(m, w[2], h2, l2);
    umulExtended(m, w[1], h1, l1);
    umulExtended(m, w[0], h0, l0);
    uint f0 = l2;
    uint f1 = uaddCarry(l1, h2, c);
    uint f2 = l0 + h1 + c;
    int q = int(f2 >> 30);
    f2 &= 0x3fffffffu;
    bool neg = (f2 >> 29) != 0u;
    if (neg) {
        q++;
        f0 = ~f0 + 1u;
        c = f0 == 0u ? 1u : 0u;
        f1 = ~f1 + c;
        c = (c != 0u && f1 == 0u) ? 1u : 0u;
        f2 = (~f2 + c) & 0x3fffffffu;
    }
    uint lz = 0u;
    f2 = (f2 << 2) | (f1 >> 30);
    f1 = (f1 << 2) | (f0 >> 30);
    f0 <<= 2;
    if (f2 == 0u) {
        f2 = f1;
        f1 = f0;
        f0 = 0u;
        lz += 32u;
    }
    if (f2 == 0u) {
        f2 = f1;
        f1 = 0u;
        lz += 32u;
    }
    uint s = uint(31 - findMSB(f2));
    if (s != 0u) {
        f2 = (f2 << s) | (f1 >> (32u - s));
        f1 = f1 << s;
    }
    lz += s;
    precise float fh = float(f2 >> 8) * uintBitsToFloat((127u - 24u - lz) << 23);
    precise float fl = float(((f2 & 0xffu) << 16) | (f1 >> 16)) * uintBitsToFloat((127u - 48u - lz) << 23);
    if (neg) {
        fh = -fh;
        fl = -fl;
    }
    precise float rh = fh * BIB_PIO2_HI;
    precise float rl = bib_fma(fh, BIB_PIO2_LO, bib_fma(fl, BIB_PIO2_HI, bib_fma(fh, BIB_PIO2_HI, -rh)));
    precise float r = rh + rl;
    precise float d = r - rh;
    precise float rc = rl - d;
    hi = r;
    lo = rc;
    return q & 3;
}

// bmath.h bib_sin_kernel, bib_cos_kernel, bib_sincos.
float bib_sin_kernel(float r, float c) {
    precise float z = r * r;
    precise float p = bib_fma(bib_fma(z, BIB_SIN_S2, BIB_SIN_S1), z, BIB_SIN_S0);
    precise float zr = z * r;
    precise float y = r + bib_fma(zr, p, c);
    return y;
}

float bib_cos_kernel(float r, float c) {
    precise float z = r * r;
    precise float p = bib_fma(bib_fma(z, BIB_COS_C2, BIB_COS_C1), z, BIB_COS_C0);
    precise float hz = 0.5 * z;
    precise float w = 1.0 - hz;
    precise float zz = z * z;
    precise float rc = r * c;
    precise float corr = ((1.0 - w) - hz) + bib_fma(zz, p, -rc);
    precise float y = w + corr;
    return y;
}

float bib_sincos(float x, uint want_cos) {
    uint u = floatBitsToUint(x), ax = u & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return uintBitsToFloat(BIB_QNAN);
    if (ax < 0x39800000u)
        return want_cos != 0u ? 1.0 : x;
    float r = uintBitsToFloat(ax), c = 0.0;
    int q = 0;
    if (ax >= 0x3f490fdbu)
        q = bib_rem_pio2(ax, r, c);
    uint n = (uint(q) + want_cos) & 3u;
    float y = (n & 1u) != 0u ? bib_cos_kernel(r, c) : bib_sin_kernel(r, c);
    uint sign = (n & 2u) != 0u ? 0x80000000u : 0u;
    if (want_cos == 0u)
        sign ^= u & 0x80000000u;
    return uintBitsToFloat(floatBitsToUint(y) ^ sign);
}

// bmath.h bib_round_integral: FLOOR (dir 0), CEIL (1), ROUND (2, halves to
// even), from the bits alone.
float bib_round_integral(float x, uint dir) {
    uint u = floatBitsToUint(x);
    uint e = (u >> 23) & 0xffu;
    uint sign = u & 0x80000000u;
    if (e == 0xffu)
        return (u & 0x7fffffu) != 0u ? uintBitsToFloat(BIB_QNAN) : x;
    if (e >= 150u || (u & 0x7fffffffu) == 0u)
        return x;
    bool up;
    if (e < 127u) {
        up = dir == 2u ? (u & 0x7fffffffu) > 0x3f000000u : (sign != 0u) == (dir == 0u);
        return uintBitsToFloat(sign | (up ? 0x3f800000u : 0u));
    }
    uint unit = 1u << (150u - e);
    uint frac = u & (unit - 1u);
    uint t = u & ~(unit - 1u);
    if (frac == 0u)
        return x;
    if (dir == 2u)
        up = frac > (unit >> 1) || (frac == (unit >> 1) && (t & unit) != 0u);
    else
        up = (sign != 0u) == (dir == 0u);
    return uintBitsToFloat(up ? t + unit : t);
}

// bib_unary_t order: relu, sigmoid, tanh, gelu, exp, erf, log, sqrt, rsqrt,
// recip, abs, neg, gelu_erf, floor, ceil, round, sin, cos.
float bib_unary(uint op, float x) {
    if (op == 0u)
        return bib_relu(x);
    if (op == 1u)
        return bib_sigmoid(x);
    if (op == 2u)
        return bib_tanh(x);
    if (op == 3u)
        return bib_gelu(x);
    if (op == 4u)
        return bib_exp(x);
    if (op == 5u)
        return bib_erf(x);
    if (op == 6u)
        return bib_log(x);
    if (op == 7u)
        return bib_canon(bib_sqrt(x));
    if (op == 8u) {
        precise float r = bib_sqrt(x);
        return bib_canon(bib_div(1.0, r));
    }
    if (op == 9u)
        return bib_canon(bib_div(1.0, x));
    if (op == 10u)
        return bib_isnan(x) ? uintBitsToFloat(BIB_QNAN)
                            : uintBitsToFloat(floatBitsToUint(x) & 0x7fffffffu);
    if (op == 11u)
        return bib_isnan(x) ? uintBitsToFloat(BIB_QNAN)
                            : uintBitsToFloat(floatBitsToUint(x) ^ 0x80000000u);
    if (op == 12u)
        return bib_gelu_erf(x);
    if (op <= 15u)
        return bib_round_integral(x, op - 13u);
    return bib_sincos(x, op - 16u);
}
