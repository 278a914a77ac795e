/* backends/cpu/ops_simd.h: the row functions, written once for any SIMD width.
 *
 * Included by ops_avx2.c and ops_avx512.c after they define the vector
 * primitives below (V_* macros) for their instruction set. Each function is
 * the scalar reference of ops.c / bmath.h applied lane by lane: the same
 * correctly rounded operations in the same order, so the bits match. What
 * the vector code leaves out are only steps whose result is already known:
 * exp's range selects (the clamp gives the same values), NaN blends on lanes
 * that a later blend or a caller overwrites, canonicalization of values that
 * cannot be NaN; each place says why. Row tails shorter than a vector are
 * loaded padded (V_LOAD_TAIL) and stored partially (V_STORE_TAIL), and the
 * reduction tree keeps BIB_TREE_LANES lanes in 64 / V_WIDTH registers,
 * finished in registers in the scalar tree's order.
 *
 * Required before inclusion:
 *   VF, VM           float vector, comparison mask
 *   V_WIDTH          lanes per VF
 *   V_SUFFIX         name suffix (avx2, avx512)
 *   V_LOAD, V_STORE, V_SET1, V_ZERO
 *   V_STREAM(p, v)   a non-temporal store; p aligned to the vector's size
 *   V_ADD, V_SUB, V_MUL, V_DIV, V_FMA(a,b,c)=a*b+c, V_FNMA(a,b,c)=c-a*b
 *   V_MIN(a, b), V_MAX(a, b) with x86's rule: b when either is NaN
 *   V_GT, V_LT, V_GE, V_UNORD, V_EQ -> VM; V_SELECT(m, a, b) = m ? a : b
 *   V_AND_BITS(a, bits), V_OR_BITS(a, b) on float vectors as bit patterns
 *   V_SCALE2K(p, kf) -> (p * 2^k1) * 2^k2 for integral kf = k in [-150, 128],
 *                       k1 = k >> 1, k2 = k - k1 (exp's last two multiplies)
 *   V_SCALE2K_DETOUR  whether V_SCALE2K must not see a result below 2^-125
 *                       (a microcode assist on this core)
 *   V_HSUM_TREE(v)   -> the tree's steps s = V_WIDTH/2 .. 1 inside one register
 *   V_LOAD_TAIL(p, r, fill) -> the first r (1..V_WIDTH) floats at p, other
 *                       lanes `fill`; reads nothing beyond p[r-1]
 *   V_STORE_TAIL(p, r, v)   -> writes the first r lanes only
 *   V_ORDER_KEY(x) -> integer vector as VI; V_IMAX(a, b), V_IMIN; VI; V_ISET1;
 *   V_IMAX_REDUCE(v) -> the greatest int32 lane
 *   V_TAILMASK(r) -> VF whose first r lanes are all-ones bits, others zero
 *   V_HMAX_ALL(v) -> every lane the greatest lane of v by V_MAX (the sign of
 *                    a zero and NaN as V_MAX's lane order makes them)
 *   V_LOAD_MASKZ(p, m) -> the lanes of m from p, +0 elsewhere; reads nothing
 *                       outside m's lanes (so p may point outside the row)
 *   V_GATHER_MASKZ(p, idx, m) -> p[idx[l]] for the lanes l of m, +0 elsewhere
 *   V_EVEN_LANES(a, b) -> lanes 0, 2, 4, ... of a, then those of b
 *   V_SQRT           correctly rounded square root, lane by lane
 *   V_FMS(a,b,c)     a*b-c, rounded once
 *   V_ROUND_FLOOR, V_ROUND_CEIL, V_ROUND_EVEN -> IEEE roundToIntegral
 *   V_MASK_AND, V_MASK_XOR, V_MASK_ALL (every lane set) on VM
 *   VI and its 32-bit lanes: V_BITS(VF), V_FROM_BITS(VI) (casts), V_ILOAD,
 *                    V_IADD, V_ISUB, V_IAND, V_IOR, V_IXOR, V_ISLL/V_ISRL/
 *                    V_ISRA (by a constant), V_ISLLV/V_ISRLV (by lane; 32 or
 *                    more gives 0), V_IMULLO, V_IMULHI_U32 (the low and high
 *                    words of the unsigned 64-bit product), V_IMAXU, V_ICVT
 *                    (int32 to float), V_FCVT_I (an integral float to
 *                    int32), V_IGT (signed) and V_IEQ -> VM, V_IEQ01 -> 1
 *                    or 0 a lane, V_ISELECT(m, a, b), V_ITABLE8(idx, t) =
 *                    t[idx] for idx in 0..7
 *   V_GROUP          short rows computed together (a row group)
 *   V_TREE_GROUP(r[V_GROUP]) -> the in-register tree steps of each row's
 *                    register r[g], packed: row g's sum in one lane
 *   V_MAX_GROUP(r[V_GROUP])  -> the same shape with V_MAX
 *   V_BCAST_ROW(v, g) -> every lane row g's value of a packed v
 */

#define V_CAT2(a, b) a##_##b
#define V_CAT(a, b) V_CAT2(a, b)
#define V_FN(name) V_CAT(name, V_SUFFIX)

#define V_NACC (BIB_TREE_LANES / V_WIDTH)

/* Loops over the V_NACC accumulators are unrolled so that they index the
 * array with constants and the accumulators stay in registers (rolled, GCC
 * keeps them on the stack and every add waits on a store). */
#define V_UNROLL _Pragma("GCC unroll 8")

static inline VF V_FN(v_canon)(VF y) {
    return V_SELECT(V_UNORD(y, y), V_SET1(bib_f32_canonical_nan()), y);
}

/* The same, for results that are rarely NaN: one compare and a branch that
 * is almost never taken instead of a blend on every vector. */
static inline VF V_FN(v_canon_rare)(VF y) {
    VM nan = V_UNORD(y, y);
    if (V_MASK_ANY(nan))
        y = V_SELECT(nan, V_SET1(bib_f32_canonical_nan()), y);
    return y;
}

/* p * 2^k for p in (1/2, 2) and integral kf = k in [-150, 128], rounded
 * once, as V_SCALE2K gives it. A lane with k <= -126 has a result below
 * 2^-125: subnormal, or zero, or just above the normal range's start.
 * The core takes a microcode assist (a hundred cycles and more) for a
 * vector operation whose result underflows, which made every exp(-Inf)
 * of a masked softmax row cost 30 times an ordinary exp. Those lanes are
 * rounded from p's bits instead: with p = M 2^(e-150), M its 24-bit
 * significand, the result's bits are 2M / 2^s rounded to nearest, ties to
 * even (s = 2 - e - k >= 1: the grid of 2^-149 that subnormals and the
 * first normal binade share), and a carry into bit 23 is the smallest
 * normal. The other lanes scale by 2^0 meanwhile, which cannot underflow. */
static inline VF V_FN(v_scale2k)(VF p, VF kf) {
    if (!V_SCALE2K_DETOUR)
        return V_SCALE2K(p, kf);
    VM tiny = V_LT(kf, V_SET1(-125.5f));
    if (!V_MASK_ANY(tiny))
        return V_SCALE2K(p, kf);
    VF y = V_SCALE2K(p, V_SELECT(tiny, V_ZERO(), kf));
    VI pb = V_BITS(p);
    VI m2 = V_ISLL(V_IOR(V_IAND(pb, V_ISET1(0x7FFFFF)), V_ISET1(0x800000)), 1);
    VI s = V_ISUB(V_ISUB(V_ISET1(2), V_ISRL(pb, 23)), V_FCVT_I(kf));
    VI half = V_ISLLV(V_ISET1(1), V_ISUB(s, V_ISET1(1)));
    VI odd = V_IAND(V_ISRLV(m2, s), V_ISET1(1));
    VI bits = V_ISRLV(V_IADD(V_IADD(m2, V_ISUB(half, V_ISET1(1))), odd), s);
    return V_SELECT(tiny, V_FROM_BITS(bits), y);
}

/* exp's sequence for x in [LO, HI], on `count` vectors in step: each
 * operation for every vector before the next one (count a constant where
 * inlined). One vector's sequence is a chain of a dozen dependent
 * operations; written one vector after another, the chains sit too far
 * apart in the instruction stream for the core to overlap enough of them
 * to fill its two fma pipes. Every lane's operations are the same whatever
 * count is. Outside [LO, HI] the contract pins +0 (x < LO) and +Inf
 * (x > HI); the sequence itself already gives exactly those at x = LO and
 * x = HI (exp_special_values checks it), so callers clamp instead of
 * selecting. */
#ifndef V_EXP_LOCK
#define V_EXP_LOCK 1 /* the most vectors a caller puts in step */
#endif
static inline __attribute__((always_inline)) void V_FN(v_exp_core_n)(VF x[], const VF *lo,
                                                                     int count) {
    VF kf[V_EXP_LOCK], r[V_EXP_LOCK], p[V_EXP_LOCK];
    V_UNROLL
    for (int a = 0; a < count; a++)
        kf[a] = V_FMA(x[a], V_SET1(BIB_EXP_LOG2E), V_SET1(BIB_EXP_SHIFT));
    V_UNROLL
    for (int a = 0; a < count; a++)
        kf[a] = V_SUB(kf[a], V_SET1(BIB_EXP_SHIFT));
    V_UNROLL
    for (int a = 0; a < count; a++)
        r[a] = V_FNMA(kf[a], V_SET1(BIB_EXP_LN2_HI), x[a]);
    V_UNROLL
    for (int a = 0; a < count; a++)
        r[a] = V_FNMA(kf[a], V_SET1(BIB_EXP_LN2_LO), r[a]);
    if (lo != NULL) /* bib_exp_hl: x[a] + lo[a] */
        V_UNROLL
    for (int a = 0; a < count; a++)
        r[a] = V_ADD(r[a], lo[a]);
    V_UNROLL
    for (int a = 0; a < count; a++)
        p[a] = V_FMA(V_SET1(BIB_EXP_C6), r[a], V_SET1(BIB_EXP_C5));
    static const float c[] = {BIB_EXP_C4, BIB_EXP_C3, BIB_EXP_C2, 1.0f, 1.0f};
    V_UNROLL
    for (int k = 0; k < 5; k++) {
        V_UNROLL
        for (int a = 0; a < count; a++)
            p[a] = V_FMA(p[a], r[a], V_SET1(c[k]));
    }
    V_UNROLL
    for (int a = 0; a < count; a++)
        x[a] = V_FN(v_scale2k)(p[a], kf[a]); /* (p * 2^k1) * 2^k2, p * 2^k1 exact */
}

/* The vectors of one tree block that go through exp in step. */
#define V_EXP_STEP (V_EXP_LOCK < V_NACC ? V_EXP_LOCK : V_NACC)

static inline __attribute__((always_inline)) VF V_FN(v_exp_core)(VF x) {
    V_FN(v_exp_core_n)(&x, NULL, 1);
    return x;
}

/* V_MAX(lo, x) and V_MIN(hi, x) return x when x is NaN (x86 returns the
 * second operand), so a NaN lane stays NaN through the clamp. */
static inline VF V_FN(v_exp)(VF x) {
    VF xc = V_MIN(V_SET1(BIB_EXP_HI), V_MAX(V_SET1(BIB_EXP_LO), x));
    VF y = V_FN(v_exp_core)(xc);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* exp for x <= 0, -Inf included, on `count` vectors in step (x[] in place).
 * A NaN lane gives some NaN: the caller canonicalizes or masks it. */
static inline __attribute__((always_inline)) void V_FN(v_exp_nonpos_n)(VF x[], int count) {
    V_UNROLL
    for (int a = 0; a < count; a++)
        x[a] = V_MAX(V_SET1(BIB_EXP_LO), x[a]);
    V_FN(v_exp_core_n)(x, NULL, count);
}

static inline VF V_FN(v_exp_nonpos)(VF x) {
    V_FN(v_exp_nonpos_n)(&x, 1);
    return x;
}

/* exp for x >= 0, +Inf included; NaN as for v_exp_nonpos. */
static inline VF V_FN(v_exp_nonneg)(VF x) {
    return V_FN(v_exp_core)(V_MIN(V_SET1(BIB_EXP_HI), x));
}

static inline VF V_FN(v_abs)(VF x) {
    return V_AND_BITS(x, 0x7FFFFFFFu);
}

static inline VF V_FN(v_tanh)(VF x) {
    VF sign = V_AND_BITS(x, 0x80000000u);
    VF a = V_FN(v_abs)(x);
    VF s = V_MUL(a, a);
    VF q = V_SET1(BIB_TANH_Q4);
    q = V_FMA(q, s, V_SET1(BIB_TANH_Q3));
    q = V_FMA(q, s, V_SET1(BIB_TANH_Q2));
    q = V_FMA(q, s, V_SET1(BIB_TANH_Q1));
    q = V_FMA(q, s, V_SET1(BIB_TANH_Q0));
    VF small = V_FMA(V_MUL(a, s), q, a);
    VF e = V_FN(v_exp_nonneg)(V_ADD(a, a));
    VF big = V_SUB(V_SET1(1.0f), V_DIV(V_SET1(2.0f), V_ADD(e, V_SET1(1.0f))));
    VF y = V_SELECT(V_LT(a, V_SET1(BIB_TANH_SMALL)), small, big);
    y = V_OR_BITS(y, sign);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* sigmoid without its NaN rule: a NaN lane gives some NaN. exp's argument
 * is -|x| with the sign bit set rather than 0 - |x|: the two differ only at
 * x = +-0, where exp gives 1 either way. */
static inline VF V_FN(v_sigmoid_nonan)(VF x) {
    VF e = V_FN(v_exp_nonpos)(V_OR_BITS(x, V_SET1(-0.0f)));
    VF num = V_SELECT(V_GE(x, V_ZERO()), V_SET1(1.0f), e);
    return V_DIV(num, V_ADD(V_SET1(1.0f), e));
}

static inline VF V_FN(v_sigmoid)(VF x) {
    VF y = V_FN(v_sigmoid_nonan)(x);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* For x not NaN, z is never NaN (x^3 has x's sign, so the fma cannot be
 * Inf - Inf) and sigmoid(z) is in [0, 1], so x * sigmoid(z) is NaN exactly
 * when x is NaN or -Inf (-Inf * +0): one compare finds both special
 * cases, and the blends run only for vectors that hold one. */
static inline VF V_FN(v_gelu)(VF x) {
    VF x3 = V_MUL(V_MUL(x, x), x);
    VF z = V_MUL(V_SET1(BIB_GELU_K), V_FMA(V_SET1(BIB_GELU_C1), x3, x));
    VF y = V_MUL(x, V_FN(v_sigmoid_nonan)(z));
    VM special = V_UNORD(y, y);
    if (V_MASK_ANY(special)) {
        VF fix =
            V_SELECT(V_EQ(x, V_SET1(-INFINITY)), V_SET1(-0.0f), V_SET1(bib_f32_canonical_nan()));
        y = V_SELECT(special, fix, y);
    }
    return y;
}

static inline VF V_FN(v_relu)(VF x) {
    VF y = V_SELECT(V_GT(x, V_ZERO()), x, V_ZERO());
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* bmath.h's erfc_sq for every lane; lanes with a > ERFC_MAX are +0, as the
 * scalar early return gives. exp's argument -sq is sq with its sign bit set
 * (sq >= +0; at +0 both give exp = 1). A lane whose a is NaN or whose sq,
 * sqe overflow gives NaN or 0 here: the callers select over those. */
static inline VF V_FN(v_erfc_sq)(VF a, VF sq, VF sqe) {
    VF q = V_DIV(V_SUB(a, V_SET1(2.0f)), V_ADD(a, V_SET1(2.0f)));
    VF p = V_SET1(BIB_ERFC_F11);
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F10));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F9));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F8));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F7));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F6));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F5));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F4));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F3));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F2));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F1));
    p = V_FMA(p, q, V_SET1(BIB_ERFC_F0));
    VF r = V_DIV(p, V_ADD(V_ADD(a, a), V_SET1(1.0f)));
    VF v = V_MUL(r, V_FN(v_exp_nonpos)(V_OR_BITS(sq, V_SET1(-0.0f))));
    VF y = V_FNMA(v, sqe, v);
    return V_SELECT(V_GT(a, V_SET1(BIB_ERFC_MAX)), V_ZERO(), y);
}

static inline VF V_FN(v_erf_small)(VF x) {
    VF s = V_MUL(x, x);
    VF p = V_SET1(BIB_ERF_E6);
    p = V_FMA(p, s, V_SET1(BIB_ERF_E5));
    p = V_FMA(p, s, V_SET1(BIB_ERF_E4));
    p = V_FMA(p, s, V_SET1(BIB_ERF_E3));
    p = V_FMA(p, s, V_SET1(BIB_ERF_E2));
    p = V_FMA(p, s, V_SET1(BIB_ERF_E1));
    p = V_FMA(p, s, V_SET1(BIB_ERF_E0));
    return V_FMA(x, p, x);
}

/* Both branches on every lane, then a select; -s is s with its sign bit set
 * (s >= +0), as the scalar -s. */
static inline VF V_FN(v_erf)(VF x) {
    VF a = V_FN(v_abs)(x);
    VF s = V_MUL(a, a);
    VF c = V_FN(v_erfc_sq)(a, s, V_FMA(a, a, V_OR_BITS(s, V_SET1(-0.0f))));
    VF big = V_OR_BITS(V_SUB(V_SET1(1.0f), c), V_AND_BITS(x, 0x80000000u));
    VF y = V_SELECT(V_LT(a, V_SET1(1.0f)), V_FN(v_erf_small)(x), big);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

static inline VF V_FN(v_gelu_erf)(VF x) {
    VF u = V_MUL(x, V_SET1(BIB_INV_SQRT2));
    VF hs = V_ADD(V_SET1(1.0f), V_FN(v_erf_small)(u));
    VF x2 = V_MUL(x, x);
    VF sq = V_MUL(V_SET1(0.5f), x2);
    VF sqe = V_MUL(V_SET1(0.5f), V_FMA(x, x, V_OR_BITS(x2, V_SET1(-0.0f))));
    VF c = V_FN(v_erfc_sq)(V_FN(v_abs)(u), sq, sqe);
    VF hb = V_SELECT(V_LT(u, V_ZERO()), c, V_SUB(V_SET1(2.0f), c));
    VF h = V_SELECT(V_GE(u, V_SET1(-0.5f)), V_SELECT(V_LT(u, V_SET1(1.0f)), hs, hb), hb);
    VF y = V_MUL(x, V_MUL(V_SET1(0.5f), h));
    y = V_SELECT(V_EQ(x, V_SET1(-INFINITY)), V_SET1(-0.0f), y);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* THE tree's pairwise finish on the 64 lanes held in acc[0..V_NACC):
 * acc[a] lane l is p[a * V_WIDTH + l], so p[i] += p[i + s] for s >= V_WIDTH
 * is acc[a] += acc[a + s / V_WIDTH]; the steps below V_WIDTH are
 * V_HSUM_TREE's, inside one register, in the same order. */
static inline float V_FN(v_tree_finish)(VF acc[V_NACC]) {
    V_UNROLL
    for (int s = V_NACC / 2; s >= 1; s >>= 1) {
        V_UNROLL
        for (int a = 0; a < s; a++)
            acc[a] = V_ADD(acc[a], acc[a + s]);
    }
    return V_HSUM_TREE(acc[0]);
}

/* Runs BODY(x_vector) -> y_vector over a row; the tail's missing lanes are
 * loaded as +0 and never stored. */
#define V_MAP_ROW(x, y, n, BODY)                                                                   \
    do {                                                                                           \
        size_t i_ = 0;                                                                             \
        for (; i_ + 2 * V_WIDTH <= (n); i_ += 2 * V_WIDTH) {                                       \
            VF v0_ = V_LOAD((x) + i_), v1_ = V_LOAD((x) + i_ + V_WIDTH);                           \
            VF y0_ = BODY(v0_), y1_ = BODY(v1_);                                                   \
            V_STORE((y) + i_, y0_);                                                                \
            V_STORE((y) + i_ + V_WIDTH, y1_);                                                      \
        }                                                                                          \
        for (; i_ + V_WIDTH <= (n); i_ += V_WIDTH) {                                               \
            VF v_ = V_LOAD((x) + i_);                                                              \
            V_STORE((y) + i_, BODY(v_));                                                           \
        }                                                                                          \
        if (i_ < (n)) {                                                                            \
            VF v_ = V_LOAD_TAIL((x) + i_, (n)-i_, 0.0f);                                           \
            V_STORE_TAIL((y) + i_, (n)-i_, BODY(v_));                                              \
        }                                                                                          \
    } while (0)

/* ---- sqrt, 1/x, 1/sqrt(x), abs, neg, floor, ceil, round, log, sin, cos ----
 * Lane by lane the steps of bmath.h's scalar functions, in the same order;
 * where the scalar code branches on a lane's value, both sides are computed
 * and the lane's side selected, and each scalar early return becomes a
 * select at the end. */

static inline VF V_FN(v_sqrt)(VF x) {
    return V_FN(v_canon)(V_SQRT(x));
}

static inline VF V_FN(v_recip)(VF x) {
    return V_FN(v_canon)(V_DIV(V_SET1(1.0f), x));
}

static inline VF V_FN(v_rsqrt)(VF x) {
    return V_FN(v_canon)(V_DIV(V_SET1(1.0f), V_SQRT(x)));
}

static inline VF V_FN(v_abs_op)(VF x) {
    return V_FN(v_canon)(V_FN(v_abs)(x));
}

static inline VF V_FN(v_neg)(VF x) {
    return V_FN(v_canon)(V_FROM_BITS(V_IXOR(V_BITS(x), V_ISET1(INT32_MIN))));
}

/* The hardware's round to integral (roundps, vrndscaleps) is IEEE 754's
 * roundToIntegral in the given direction: exact, so it has one answer,
 * which bib_round_integral computes from the bits (+-0, +-Inf and
 * |x| >= 2^23 unchanged, a result below 1 in magnitude keeping x's sign).
 * Only the NaN needs canonicalizing. */
static inline VF V_FN(v_floor)(VF x) {
    return V_FN(v_canon)(V_ROUND_FLOOR(x));
}

static inline VF V_FN(v_ceil)(VF x) {
    return V_FN(v_canon)(V_ROUND_CEIL(x));
}

static inline VF V_FN(v_round)(VF x) {
    return V_FN(v_canon)(V_ROUND_EVEN(x));
}

/* bib_log_hl's steps on every lane: ln x = *hi + *lo where x is positive
 * and finite (other lanes give values for the caller to select away). */
static inline __attribute__((always_inline)) void V_FN(v_log_hl)(VF x, VF *hi_out, VF *lo_out) {
    VM sub = V_LT(x, V_SET1(0x1p-126f)); /* denormal (and lanes selected away below) */
    VF xs = V_SELECT(sub, V_MUL(x, V_SET1(0x1p25f)), x);
    VI u = V_BITS(xs);
    VI e = V_ISRA(V_ISUB(u, V_ISET1((int32_t)BIB_LOG_SQRTHALF_BITS)), 23);
    VI k = V_IADD(V_ISELECT(sub, V_ISET1(-25), V_ISET1(0)), e);
    VF m = V_FROM_BITS(V_ISUB(u, V_ISLL(e, 23)));
    VF f = V_SUB(m, V_SET1(1.0f));
    VF d = V_ADD(V_SET1(2.0f), f);
    VF dl = V_SUB(f, V_SUB(d, V_SET1(2.0f)));
    VF sh = V_DIV(f, d);
    VF r = V_FNMA(sh, d, f);
    r = V_FNMA(sh, dl, r);
    VF sl = V_DIV(r, d);
    VF z = V_MUL(sh, sh);
    VF ze = V_FMS(sh, sh, z);
    VF rz = V_SET1(BIB_LOG_P4);
    rz = V_FMA(rz, z, V_SET1(BIB_LOG_P3));
    rz = V_FMA(rz, z, V_SET1(BIB_LOG_P2));
    rz = V_FMA(rz, z, V_SET1(BIB_LOG_P1));
    VF c = V_MUL(sh, z);
    VF ce = V_FMS(sh, z, c);
    VF th = V_MUL(V_SET1(BIB_LOG_P0), c);
    VF the = V_FMS(V_SET1(BIB_LOG_P0), c, th);
    VF cube_lo = V_ADD(V_ADD(ce, V_MUL(sh, ze)), V_MUL(V_SET1(3.0f), V_MUL(z, sl)));
    VF tl = V_ADD(
        V_ADD(V_ADD(the, V_MUL(V_SET1(BIB_LOG_P0), cube_lo)), V_MUL(V_SET1(BIB_LOG_P0_LO), c)),
        V_MUL(c, V_MUL(z, rz)));
    VF kf = V_ICVT(k);
    VF kh = V_MUL(kf, V_SET1(BIB_EXP_LN2_HI));
    VF kl = V_MUL(kf, V_SET1(BIB_EXP_LN2_LO));
    VF kle = V_FMS(kf, V_SET1(BIB_EXP_LN2_LO), kl);
    VF s2 = V_ADD(sh, sh);
    VF h1 = V_ADD(kh, s2);
    VF l1 = V_SUB(s2, V_SUB(h1, kh));
    VF h = V_ADD(h1, th);
    VF l2 = V_SUB(th, V_SUB(h, h1));
    VF small = V_ADD(V_ADD(l1, l2), V_ADD(V_ADD(V_ADD(sl, sl), tl), V_ADD(kl, kle)));
    VF hi = V_ADD(h, small);
    *hi_out = hi;
    *lo_out = V_SUB(small, V_SUB(hi, h));
}

/* bib_log: bib_log_hl's steps, then the special cases. */
static inline VF V_FN(v_log)(VF x) {
    VF hi, lo;
    V_FN(v_log_hl)(x, &hi, &lo);
    VF y = V_ADD(hi, lo);
    y = V_SELECT(V_EQ(x, V_ZERO()), V_SET1(-INFINITY), y);
    y = V_SELECT(V_EQ(x, V_SET1(INFINITY)), V_SET1(INFINITY), y);
    VM nan = V_MASK_OR(V_LT(x, V_ZERO()), V_UNORD(x, x));
    return V_SELECT(nan, V_SET1(bib_f32_canonical_nan()), y);
}

/* bib_f32_integer_kind on every lane: 0 not an integer, 1 odd, 2 even. */
static inline VI V_FN(v_integer_kind)(VF y) {
    VI u = V_IAND(V_BITS(y), V_ISET1(0x7FFFFFFF));
    VI e = V_ISUB(V_ISRL(u, 23), V_ISET1(127));
    VI frac = V_ISRLV(V_ISET1(0x7FFFFF), e); /* e < 0 or e > 23: selected below */
    VI units = V_ISRLV(u, V_ISUB(V_ISET1(23), e));
    VI kind = V_ISELECT(V_IEQ(V_IAND(u, frac), V_ISET1(0)),
                        V_ISUB(V_ISET1(2), V_IAND(units, V_ISET1(1))), V_ISET1(0));
    kind = V_ISELECT(V_IGT(e, V_ISET1(23)), V_ISET1(2), kind);
    kind = V_ISELECT(V_IGT(V_ISET1(0), e), V_ISET1(0), kind);
    kind = V_ISELECT(V_IGT(u, V_ISET1(0x7F7FFFFF)), V_ISET1(0), kind);
    return V_ISELECT(V_IEQ(u, V_ISET1(0)), V_ISET1(2), kind);
}

/* bib_pow: the general path (ln|x| as hi + lo, times y in double-float,
 * exp of the two parts), then the scalar code's early returns as selects,
 * the last taken first so that the first wins. A vector whose lanes all
 * return early (a broadcast y of 1/2, say) skips the general path. */
static inline VF V_FN(v_pow)(VF x, VF y) {
    const VF one = V_SET1(1.0f), inf = V_SET1(INFINITY), nan = V_SET1(bib_f32_canonical_nan());
    VI xs = V_IAND(V_BITS(x), V_ISET1(INT32_MIN));
    VF ax = V_FROM_BITS(V_IAND(V_BITS(x), V_ISET1(0x7FFFFFFF)));
    VI kind = V_FN(v_integer_kind)(y);
    VI rsign = V_ISELECT(V_IEQ(kind, V_ISET1(1)), xs, V_ISET1(0));
    VM trivial = V_MASK_OR(V_MASK_OR(V_EQ(y, V_ZERO()), V_EQ(x, one)), V_UNORD(x, y));
    trivial = V_MASK_OR(trivial, V_MASK_OR(V_EQ(y, one), V_EQ(y, V_SET1(2.0f))));
    trivial = V_MASK_OR(trivial, V_MASK_OR(V_EQ(y, V_SET1(-1.0f)), V_EQ(y, V_SET1(0.5f))));
    VM yinf = V_EQ(V_FROM_BITS(V_IAND(V_BITS(y), V_ISET1(0x7FFFFFFF))), inf);
    VM zero_or_inf = V_MASK_OR(V_EQ(ax, V_ZERO()), V_EQ(ax, inf));
    VM neg_base = V_MASK_AND(V_IEQ(kind, V_ISET1(0)), V_IEQ(xs, V_ISET1(INT32_MIN)));
    VF out = nan;
    if (!V_MASK_ALL(V_MASK_OR(V_MASK_OR(trivial, yinf), V_MASK_OR(zero_or_inf, neg_base)))) {
        VF lh, ll;
        V_FN(v_log_hl)(ax, &lh, &ll);
        VF zh = V_MUL(y, lh);
        VF ze = V_FMS(y, lh, zh);
        VF zl = V_FMA(y, ll, ze);
        VF r = V_MIN(V_SET1(BIB_EXP_HI), V_MAX(V_SET1(BIB_EXP_LO), zh));
        V_FN(v_exp_core_n)(&r, &zl, 1);
        r = V_SELECT(V_LT(zh, V_SET1(BIB_EXP_LO)), V_ZERO(), r);
        r = V_SELECT(V_GT(zh, V_SET1(BIB_EXP_HI)), inf, r);
        r = V_SELECT(V_UNORD(zh, zh), nan, r);
        out = V_FROM_BITS(V_IOR(V_BITS(r), rsign));
    }
    out = V_SELECT(neg_base, nan, out);
    /* 0^y and Inf^y: +Inf or +0 by the signs, x's sign for odd integers y */
    VM differ = V_MASK_XOR(V_EQ(ax, V_ZERO()), V_LT(y, V_ZERO()));
    VF mag = V_SELECT(differ, V_ZERO(), inf);
    out = V_SELECT(zero_or_inf, V_FROM_BITS(V_IOR(V_BITS(mag), rsign)), out);
    VF yinf_r = V_SELECT(V_MASK_XOR(V_LT(ax, one), V_GT(y, V_ZERO())), inf, V_ZERO());
    yinf_r = V_SELECT(V_EQ(ax, one), one, yinf_r);
    out = V_SELECT(yinf, yinf_r, out);
    VF root = V_SELECT(V_EQ(x, V_ZERO()), V_ZERO(), V_FN(v_canon)(V_SQRT(x)));
    root = V_SELECT(V_EQ(x, V_SET1(-INFINITY)), inf, root);
    out = V_SELECT(V_EQ(y, V_SET1(0.5f)), root, out);
    out = V_SELECT(V_EQ(y, V_SET1(-1.0f)), V_DIV(one, x), out);
    out = V_SELECT(V_EQ(y, V_SET1(2.0f)), V_MUL(x, x), out);
    out = V_SELECT(V_EQ(y, one), x, out);
    out = V_SELECT(V_UNORD(x, y), nan, out);
    return V_SELECT(V_MASK_OR(V_EQ(y, V_ZERO()), V_EQ(x, one)), one, out);
}

/* bib_two_over_pi padded to a vector's 16 lanes: bib_rem_pio2 reads words
 * o .. o + 3 with o = (e - 120) >> 5 <= 4 for a finite x, so a lane's words
 * come from the first 8 by a register permute. */
static const uint32_t V_FN(two_over_pi16)[16] = {BIB_TWO_OVER_PI_WORDS};

/* The number of leading zero bits of each lane (v != 0): from the exponent
 * of the float of its top or bottom 16 bits, which converts exactly. */
static inline VI V_FN(v_clz)(VI v) {
    VI hi = V_ISRL(v, 16);
    VM none = V_IEQ(hi, V_ISET1(0));
    VI w = V_ISELECT(none, V_IAND(v, V_ISET1(0xFFFF)), hi);
    VI lg = V_ISUB(V_ISRL(V_BITS(V_ICVT(w)), 23), V_ISET1(127));
    return V_ISUB(V_ISELECT(none, V_ISET1(31), V_ISET1(15)), lg);
}

/* bib_rem_pio2 on every lane of ax (lanes below pi/4 give values the caller
 * selects away): the same integer steps, the 32 x 32 -> 64-bit products as
 * their low and high words, a shift by 32 giving 0 where the scalar code
 * tests for a shift of 0. */
static inline __attribute__((always_inline)) VI V_FN(v_rem_pio2)(VI ax, VF *hi, VF *lo) {
    const VI zero = V_ISET1(0), ones = V_ISET1(-1), low30 = V_ISET1(0x3FFFFFFF);
    VI m = V_IOR(V_IAND(ax, V_ISET1(0x7FFFFF)), V_ISET1(0x800000));
    VI k = V_ISUB(V_ISRL(ax, 23), V_ISET1(120));
    VI o = V_ISRL(k, 5), sh = V_IAND(k, V_ISET1(31)), rsh = V_ISUB(V_ISET1(32), sh);
    VI table = V_ILOAD(V_FN(two_over_pi16));
    VI t[4], w[3];
    for (int j = 0; j < 4; j++)
        t[j] = V_ITABLE8(V_IADD(o, V_ISET1(j)), table);
    for (int j = 0; j < 3; j++)
        w[j] = V_IOR(V_ISLLV(t[j], sh), V_ISRLV(t[j + 1], rsh));
    VI f0 = V_IMULLO(m, w[2]);
    VI p1lo = V_IMULLO(m, w[1]);
    VI f1 = V_IADD(p1lo, V_IMULHI_U32(m, w[2]));
    VI carry = V_IXOR(V_IEQ01(V_IMAXU(f1, p1lo), f1), V_ISET1(1)); /* f1 < p1lo */
    VI f2 = V_IADD(V_IADD(V_IMULLO(m, w[0]), V_IMULHI_U32(m, w[1])), carry);
    VI q = V_ISRL(f2, 30);
    f2 = V_IAND(f2, low30);
    VM pos = V_IEQ(V_ISRL(f2, 29), zero);
    VI c = V_IEQ01(f0, zero);
    VI n1 = V_IADD(V_IXOR(f1, ones), c);
    c = V_IAND(c, V_IEQ01(n1, zero));
    VI n2 = V_IAND(V_IADD(V_IXOR(f2, ones), c), low30);
    f0 = V_ISELECT(pos, f0, V_ISUB(zero, f0));
    f1 = V_ISELECT(pos, f1, n1);
    f2 = V_ISELECT(pos, f2, n2);
    q = V_ISELECT(pos, q, V_IADD(q, V_ISET1(1)));
    f2 = V_IOR(V_ISLL(f2, 2), V_ISRL(f1, 30));
    f1 = V_IOR(V_ISLL(f1, 2), V_ISRL(f0, 30));
    f0 = V_ISLL(f0, 2);
    VI lz = zero;
    VM z2 = V_IEQ(f2, zero);
    /* Never for a lane that needs the reduction (no binary32 at or above pi/4
       cancels more than 29 bits), but kept as bib_rem_pio2 keeps it. */
    if (V_MASK_ANY(z2)) {
        f2 = V_ISELECT(z2, f1, f2);
        f1 = V_ISELECT(z2, f0, f1);
        lz = V_ISELECT(z2, V_ISET1(32), zero);
        z2 = V_IEQ(f2, zero);
        f2 = V_ISELECT(z2, f1, f2);
        f1 = V_ISELECT(z2, zero, f1);
        lz = V_ISELECT(z2, V_IADD(lz, V_ISET1(32)), lz);
    }
    VI s = V_FN(v_clz)(f2);
    f2 = V_IOR(V_ISLLV(f2, s), V_ISRLV(f1, V_ISUB(V_ISET1(32), s)));
    f1 = V_ISLLV(f1, s);
    lz = V_IADD(lz, s);
    VF fh = V_MUL(V_ICVT(V_ISRL(f2, 8)), V_FROM_BITS(V_ISLL(V_ISUB(V_ISET1(127 - 24), lz), 23)));
    VI flbits = V_IOR(V_ISLL(V_IAND(f2, V_ISET1(0xFF)), 16), V_ISRL(f1, 16));
    VF fl = V_MUL(V_ICVT(flbits), V_FROM_BITS(V_ISLL(V_ISUB(V_ISET1(127 - 48), lz), 23)));
    VI sign = V_ISELECT(pos, zero, V_ISET1(INT32_MIN));
    fh = V_FROM_BITS(V_IXOR(V_BITS(fh), sign));
    fl = V_FROM_BITS(V_IXOR(V_BITS(fl), sign));
    VF rh = V_MUL(fh, V_SET1(BIB_PIO2_HI));
    VF rl = V_FMA(fh, V_SET1(BIB_PIO2_LO),
                  V_FMA(fl, V_SET1(BIB_PIO2_HI), V_FMS(fh, V_SET1(BIB_PIO2_HI), rh)));
    VF r = V_ADD(rh, rl);
    *hi = r;
    *lo = V_SUB(rl, V_SUB(r, rh));
    return V_IAND(q, V_ISET1(3));
}

/* bib_sincos: both kernels on every lane, each lane taking its quadrant's. */
static inline __attribute__((always_inline)) VF V_FN(v_sincos)(VF x, int want_cos) {
    VI u = V_BITS(x), ax = V_IAND(u, V_ISET1(0x7FFFFFFF));
    VF a = V_FROM_BITS(ax);
    VF r = a, c = V_ZERO();
    VI q = V_ISET1(0);
    VM reduce = V_GE(a, V_SET1(0x1.921fb6p-1f)); /* bits 0x3F490FDB: |x| >= pi/4 */
    if (V_MASK_ANY(reduce)) {
        VF rr, cr;
        VI qr = V_FN(v_rem_pio2)(ax, &rr, &cr);
        r = V_SELECT(reduce, rr, r);
        c = V_SELECT(reduce, cr, c);
        q = V_ISELECT(reduce, qr, q);
    }
    VI n = V_IAND(V_IADD(q, V_ISET1(want_cos)), V_ISET1(3));
    VF z = V_MUL(r, r);
    VF ps = V_FMA(V_FMA(z, V_SET1(BIB_SIN_S2), V_SET1(BIB_SIN_S1)), z, V_SET1(BIB_SIN_S0));
    VF ys = V_ADD(r, V_FMA(V_MUL(z, r), ps, c));
    VF pc = V_FMA(V_FMA(z, V_SET1(BIB_COS_C2), V_SET1(BIB_COS_C1)), z, V_SET1(BIB_COS_C0));
    VF hz = V_MUL(V_SET1(0.5f), z);
    VF w = V_SUB(V_SET1(1.0f), hz);
    VF yc = V_ADD(w, V_ADD(V_SUB(V_SUB(V_SET1(1.0f), w), hz), V_FMS(V_MUL(z, z), pc, V_MUL(r, c))));
    VF y = V_SELECT(V_IEQ(V_IAND(n, V_ISET1(1)), V_ISET1(1)), yc, ys);
    VI sign = V_ISLL(V_ISRL(n, 1), 31);
    if (!want_cos)
        sign = V_IXOR(sign, V_IAND(u, V_ISET1(INT32_MIN)));
    y = V_FROM_BITS(V_IXOR(V_BITS(y), sign));
    y = V_SELECT(V_LT(a, V_SET1(0x1p-12f)), want_cos ? V_SET1(1.0f) : x, y);
    VM bad = V_MASK_OR(V_UNORD(x, x), V_EQ(a, V_SET1(INFINITY)));
    return V_SELECT(bad, V_SET1(bib_f32_canonical_nan()), y);
}

static inline VF V_FN(v_sin)(VF x) {
    return V_FN(v_sincos)(x, 0);
}

static inline VF V_FN(v_cos)(VF x) {
    return V_FN(v_sincos)(x, 1);
}

/* The unary ops with a vector form, X(op, its V_FN function). */
#define V_UNARY_VECTOR_OPS(X)                                                                      \
    X(RELU, v_relu)                                                                                \
    X(SIGMOID, v_sigmoid)                                                                          \
    X(TANH, v_tanh)                                                                                \
    X(GELU, v_gelu)                                                                                \
    X(EXP, v_exp)                                                                                  \
    X(ERF, v_erf)                                                                                  \
    X(GELU_ERF, v_gelu_erf)                                                                        \
    X(LOG, v_log)                                                                                  \
    X(SQRT, v_sqrt)                                                                                \
    X(RSQRT, v_rsqrt)                                                                              \
    X(RECIP, v_recip)                                                                              \
    X(ABS, v_abs_op)                                                                               \
    X(NEG, v_neg)                                                                                  \
    X(FLOOR, v_floor)                                                                              \
    X(CEIL, v_ceil)                                                                                \
    X(ROUND, v_round)                                                                              \
    X(SIN, v_sin)                                                                                  \
    X(COS, v_cos)

static void V_FN(row_unary)(bib_unary_t op, const float *x, float *y, size_t n) {
    switch (op) {
#define V_UNARY_CASE(name, fn)                                                                     \
    case BIB_UNARY_##name:                                                                         \
        V_MAP_ROW(x, y, n, V_FN(fn));                                                              \
        return;
        V_UNARY_VECTOR_OPS(V_UNARY_CASE)
#undef V_UNARY_CASE
    case BIB_UNARY__COUNT: /* not an op; -Wswitch names a unary op left out */
        break;
    }
    /* An op given no vector form (listed as a case above) would run the
       scalar reference's steps here, element by element, compiled with this
       level's fma: the same bits, several times slower. */
    bib_unary_row(op, x, y, n);
}

/* bib_min2 and bib_max2: the order of V_ORDER_KEY's integers (-0 < +0),
 * then the canonical NaN where either lane is NaN. */
static inline VF V_FN(v_min2)(VF a, VF b) {
    VF m = V_SELECT(V_IGT(V_ORDER_KEY(a), V_ORDER_KEY(b)), b, a);
    return V_SELECT(V_UNORD(a, b), V_SET1(bib_f32_canonical_nan()), m);
}

static inline VF V_FN(v_max2)(VF a, VF b) {
    VF m = V_SELECT(V_IGT(V_ORDER_KEY(b), V_ORDER_KEY(a)), b, a);
    return V_SELECT(V_UNORD(a, b), V_SET1(bib_f32_canonical_nan()), m);
}

static inline VF V_FN(v_binary)(bib_binary_t op, VF a, VF b) {
    switch (op) {
    case BIB_BINARY_ADD:
        return V_FN(v_canon)(V_ADD(a, b));
    case BIB_BINARY_SUB:
        return V_FN(v_canon)(V_SUB(a, b));
    case BIB_BINARY_MUL:
        return V_FN(v_canon)(V_MUL(a, b));
    case BIB_BINARY_DIV:
        return V_FN(v_canon)(V_DIV(a, b));
    case BIB_BINARY_MIN:
        return V_FN(v_min2)(a, b);
    case BIB_BINARY_MAX:
        return V_FN(v_max2)(a, b);
    case BIB_BINARY_POW:
        return V_FN(v_pow)(a, b);
    case BIB_BINARY__COUNT: /* not an op; -Wswitch names a binary op left out */
        break;
    }
    return a;
}

static void V_FN(row_binary)(bib_binary_t op, const float *a, const float *b, size_t b_step,
                             float *y, size_t n) {
    size_t i = 0;
    VF bs = V_SET1(b[0]);
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        VF bv = b_step ? V_LOAD(b + i) : bs;
        V_STORE(y + i, V_FN(v_binary)(op, V_LOAD(a + i), bv));
    }
    if (i < n) {
        VF bv = b_step ? V_LOAD_TAIL(b + i, n - i, 0.0f) : bs;
        V_STORE_TAIL(y + i, n - i, V_FN(v_binary)(op, V_LOAD_TAIL(a + i, n - i, 0.0f), bv));
    }
}

static void V_FN(row_scale)(const float *x, float s, float *y, size_t n) {
    VF sv = V_SET1(s);
#define V_SCALE_BODY(v) V_FN(v_canon)(V_MUL(v, sv))
    V_MAP_ROW(x, y, n, V_SCALE_BODY);
#undef V_SCALE_BODY
}

/* The row kernels read their row several times, first from memory and
 * then from cache; while they compute from cache, nothing would be fetched.
 * Their last pass therefore prefetches, one address per vector, the memory
 * right after the row, which in a row-major tensor is the next row (measured
 * on one thread, 4096 x 4096: softmax and layernorm +25-30%). A prefetch is
 * only a hint and never faults, so past the end of the tensor it is
 * harmless; the address is formed as an integer, not as a pointer past the
 * row. */
#define V_PREFETCH_NEXT_ROW(x, n, i)                                                               \
    _mm_prefetch((const char *)((uintptr_t)(x) + ((n) + (i)) * sizeof(float)), _MM_HINT_T0)

#define V_BYTES (V_WIDTH * sizeof(float))

/* The first r lanes at p, the others +0. */
#define V_TAIL0(p, r) V_LOAD_TAIL((p), (r), 0.0f)

/* A vector of r lanes (1..V_WIDTH) of a short row: a whole one moves with a
 * plain load or store, only a partial one masked (with masked moves for
 * whole vectors, rows of 64 ran 2.5x slower on an AMD EPYC with AVX-512). */
#define V_LOAD_PART(p, r, fill) ((r) == V_WIDTH ? V_LOAD(p) : V_LOAD_TAIL((p), (r), (fill)))
#define V_STORE_PART(p, r, v)                                                                      \
    do {                                                                                           \
        if ((r) == V_WIDTH)                                                                        \
            V_STORE((p), (v));                                                                     \
        else                                                                                       \
            V_STORE_TAIL((p), (r), (v));                                                           \
    } while (0)

/* Lanes of the vector at element o that lie in a row of n: 1..V_WIDTH for
 * o < n. A row's tail computes each accumulator's term under a condition
 * (+0 when the vector lies past the row, which leaves the lane unchanged)
 * and adds it unconditionally: an accumulator updated under a condition
 * sends the whole array to the stack. */
#define V_TAIL_LANES(o, n) ((n) - (o) < V_WIDTH ? (n) - (o) : V_WIDTH)

/* The tree with a term computed per element: TERM(v) -> VF. Tail lanes
 * beyond n contribute +0 (their term is masked to zero bits). */
#define V_TREE_ROW(x, n, TERM, result) V_TREE_ROW_PF(x, n, TERM, result, 0)
#define V_TREE_ROW_PF(x, n, TERM, result, PF)                                                      \
    do {                                                                                           \
        VF acc_[V_NACC];                                                                           \
        V_UNROLL                                                                                   \
        for (int a_ = 0; a_ < V_NACC; a_++)                                                        \
            acc_[a_] = V_ZERO();                                                                   \
        size_t i_ = 0;                                                                             \
        for (; i_ + BIB_TREE_LANES <= (n); i_ += BIB_TREE_LANES) {                                 \
            V_UNROLL                                                                               \
            for (int a_ = 0; a_ < V_NACC; a_++) {                                                  \
                if (PF)                                                                            \
                    V_PREFETCH_NEXT_ROW(x, n, i_ + (size_t)a_ * V_WIDTH);                          \
                VF v_ = V_LOAD((x) + i_ + (size_t)a_ * V_WIDTH);                                   \
                acc_[a_] = V_ADD(acc_[a_], TERM(v_));                                              \
            }                                                                                      \
        }                                                                                          \
        V_UNROLL                                                                                   \
        for (int a_ = 0; a_ < V_NACC; a_++) {                                                      \
            size_t o_ = i_ + (size_t)a_ * V_WIDTH;                                                 \
            VF t_ = V_ZERO();                                                                      \
            if (o_ < (n)) {                                                                        \
                size_t r_ = V_TAIL_LANES(o_, n);                                                   \
                VF v_ = V_LOAD_TAIL((x) + o_, r_, 0.0f);                                           \
                t_ = V_AND_MASK(TERM(v_), V_TAILMASK(r_));                                         \
            }                                                                                      \
            acc_[a_] = V_ADD(acc_[a_], t_);                                                        \
        }                                                                                          \
        (result) = V_FN(v_tree_finish)(acc_);                                                      \
    } while (0)

#define V_TERM_ID(v) (v)

static float V_FN(row_sum)(const float *x, size_t n) {
    float s;
    V_TREE_ROW(x, n, V_TERM_ID, s);
    return s;
}

static float V_FN(row_max)(const float *x, size_t n) {
    VI best = V_ISET1(bib_f32_order_key(-INFINITY));
    VM any_nan = V_MASK_NONE();
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        VF v = V_LOAD(x + i);
        any_nan = V_MASK_OR(any_nan, V_UNORD(v, v));
        best = V_IMAX(best, V_ORDER_KEY(v));
    }
    if (i < n) {
        VF v = V_LOAD_TAIL(x + i, n - i, -INFINITY);
        any_nan = V_MASK_OR(any_nan, V_UNORD(v, v));
        best = V_IMAX(best, V_ORDER_KEY(v));
    }
    if (V_MASK_ANY(any_nan))
        return bib_f32_canonical_nan();
    return bib_f32_from_order_key(V_IMAX_REDUCE(best));
}

/* The softmaxes' first pass: the row's maximum in *m. When it is not finite
 * (NaN, +Inf, or a row of -Inf) some x - m is NaN, and so is every output:
 * y is the canonical NaN row and the answer false. */
static bool V_FN(row_max_finite)(const float *x, float *y, size_t n, float *m) {
    *m = V_FN(row_max)(x, n);
    if (isfinite(*m))
        return true;
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canonical_nan();
    return false;
}

/* A row of at most BIB_TREE_LANES elements is the tree's first block and its
 * tail at once: each element is its own tree lane, and every lane starts
 * from +0, so a lane's sum is its e exactly (+0 + e = e for e >= +0). The
 * row stays in registers from the load to the store: one pass over memory,
 * no stored and reloaded e. The same operations as row_softmax give the same
 * bits; softmax_short_rows in the unit tests checks it against the scalar
 * reference for every length. */
static void V_FN(row_softmax_short)(const float *x, float *y, size_t n) {
    VF v[V_NACC];
    VI best = V_ISET1(bib_f32_order_key(-INFINITY));
    VM any_nan = V_MASK_NONE();
    V_UNROLL
    for (int a = 0; a < V_NACC; a++) {
        size_t o = (size_t)a * V_WIDTH;
        v[a] = o < n ? V_LOAD_PART(x + o, V_TAIL_LANES(o, n), -INFINITY) : V_SET1(-INFINITY);
        any_nan = V_MASK_OR(any_nan, V_UNORD(v[a], v[a]));
        best = V_IMAX(best, V_ORDER_KEY(v[a]));
    }
    float m = bib_f32_from_order_key(V_IMAX_REDUCE(best));
    if (V_MASK_ANY(any_nan) || !isfinite(m)) {
        for (size_t i = 0; i < n; i++)
            y[i] = bib_f32_canonical_nan();
        return;
    }
    /* Vectors wholly past the row are -Inf, whose e is +0: no exp for them. */
    VF mv = V_SET1(m), e[V_NACC], acc[V_NACC];
    V_UNROLL
    for (int a = 0; a < V_NACC; a++)
        acc[a] = e[a] = (size_t)a * V_WIDTH < n ? V_FN(v_exp_nonpos)(V_SUB(v[a], mv)) : V_ZERO();
    VF sv = V_SET1(V_FN(v_tree_finish)(acc));
    V_UNROLL
    for (int a = 0; a < V_NACC; a++) {
        size_t o = (size_t)a * V_WIDTH;
        if (o < n)
            V_STORE_PART(y + o, V_TAIL_LANES(o, n), V_DIV(e[a], sv));
    }
}

/* log-softmax: the sum of exp(x - m) through the tree (tail lanes masked to
 * +0), one scalar log, then (x - m) - log(s) in a second pass, so y may be
 * x. When m is not finite the scalar reference's x - m makes every output
 * NaN; otherwise s >= 1 (the maximum's term is exactly 1), log(s) is finite
 * and (x - m) - log(s) is never NaN. */
static void V_FN(row_logsoftmax)(const float *x, float *y, size_t n) {
    float m;
    if (!V_FN(row_max_finite)(x, y, n, &m))
        return;
    VF mv = V_SET1(m);
    float s;
#define V_EXPDEV(v) V_FN(v_exp_nonpos)(V_SUB(v, mv))
    V_TREE_ROW(x, n, V_EXPDEV, s);
#undef V_EXPDEV
    VF lv = V_SET1(bib_log(s));
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        V_PREFETCH_NEXT_ROW(x, n, i);
        V_STORE(y + i, V_SUB(V_SUB(V_LOAD(x + i), mv), lv));
    }
    if (i < n)
        V_STORE_TAIL(y + i, n - i, V_SUB(V_SUB(V_LOAD_TAIL(x + i, n - i, 0.0f), mv), lv));
}

/* ---- several rows at a time ----------------------------------------------
 *
 * A short row (at most one tree block, BIB_TREE_LANES elements) is a chain of
 * dependent steps (a reduction, a broadcast, another pass), and the steps
 * that fold a register's lanes cost as much as the arithmetic on the row.
 * Short rows therefore go V_GROUP at a time (the level's row group): each
 * step runs for every row of the group before the next, so the rows' chains
 * overlap, and the in-register steps of the tree (and of softmax's max) run
 * for the whole group in one set of shuffles (V_TREE_GROUP, V_MAX_GROUP).
 * Each row's operations and their order are those of the one-row functions:
 * the same bits. */

static inline bool V_FN(v_aligned)(const float *p) {
    return ((uintptr_t)p & (V_BYTES - 1)) == 0;
}

/* The tree's steps s >= V_WIDTH, inside one row's accumulators: p[i] +=
 * p[i + s] is acc[a] += acc[a + s / V_WIDTH]; what is left is acc[0], whose
 * lanes the in-register steps finish (v_tree_finish, V_TREE_GROUP). */
static inline VF V_FN(v_tree_fold)(VF acc[V_NACC]) {
    V_UNROLL
    for (int s = V_NACC / 2; s >= 1; s >>= 1) {
        V_UNROLL
        for (int a = 0; a < s; a++)
            acc[a] = V_ADD(acc[a], acc[a + s]);
    }
    return acc[0];
}

/* Short rows are streamed only when each of their vectors is a whole aligned
 * one: a partial line written non-temporally is slower than a cached one. */
static inline bool V_FN(short_rows_stream)(const float *y, size_t n, bool stream) {
    return stream && n % V_WIDTH == 0 && V_FN(v_aligned)(y);
}

#define V_STORE_SHORT(p, r, v, stream)                                                             \
    do {                                                                                           \
        if (stream)                                                                                \
            V_STREAM((p), (v));                                                                    \
        else                                                                                       \
            V_STORE_PART((p), (r), (v));                                                           \
    } while (0)

/* Loads row g of a group into v[a], a partial vector's missing lanes and the
 * vectors past the row as `fill`. */
#define V_LOAD_SHORT_ROW(v, x, n, fill)                                                            \
    do {                                                                                           \
        V_UNROLL                                                                                   \
        for (int a_ = 0; a_ < V_NACC; a_++) {                                                      \
            size_t o_ = (size_t)a_ * V_WIDTH;                                                      \
            (v)[a_] =                                                                              \
                o_ < (n) ? V_LOAD_PART((x) + o_, V_TAIL_LANES(o_, n), (fill)) : V_SET1(fill);      \
        }                                                                                          \
    } while (0)

/* The first step of a group prefetches the rows PF_AHEAD groups further
 * on, one address per line: short rows run too fast for the hardware's
 * prefetcher alone (f32[65536, 64], one thread, against none: softmax
 * 31 -> 36 GB/s, layernorm 48 -> 54, rmsnorm 56 -> 68). Eight groups
 * ahead rather than four: on two threads over f32[65536, 64] softmax went
 * from 86-92 to 101-105 GB/s, layernorm from 105-106 to 111-119 (three
 * interleaved rounds; twelve groups lost again). A prefetch never faults,
 * so past the end of the tensor it is harmless; the address is formed as
 * an integer. */
#define PF_AHEAD 8
static inline void V_FN(prefetch_group_ahead)(const float *x, size_t n) {
    uintptr_t p = (uintptr_t)x + (size_t)PF_AHEAD * V_GROUP * n * sizeof(float);
    for (size_t b = 0; b < V_GROUP * n * sizeof(float); b += 64)
        _mm_prefetch((const char *)(p + b), _MM_HINT_T0);
}

/* The output lines of the group PF_AHEAD groups on, taken for writing
 * (prefetchw) where the stores are cached: each store then finds its line
 * owned instead of waiting for it (softmax over f32[65536, 64] on two
 * threads: 4-18% faster in ten interleaved rounds, bench/RESULTS.md). CPUs
 * without PRFCHW run the instruction as a NOP. */
static inline void V_FN(prefetchw_group_ahead)(float *y, size_t n, bool on) {
    if (!on)
        return;
    const char *p = (const char *)(y + (size_t)PF_AHEAD * V_GROUP * n);
    for (size_t b = 0; b < V_GROUP * n * sizeof(float); b += 64)
        __asm__ volatile("prefetchw %0" ::"m"(*(p + b)));
}

/* A tree term with a partial vector's missing lanes as +0 (no term). */
#define V_TERM_MASKED(t, o, n) ((n) - (o) < V_WIDTH ? V_AND_MASK((t), V_TAILMASK((n) - (o))) : (t))

/* The last pass of a long row: y[i .. i+V_WIDTH) = FULL(i) for whole
 * vectors, PART(i, r) for r lanes (loads of r lanes; only those lanes are
 * stored). With stream, a partial vector first brings y to the vector's
 * alignment and the whole vectors are stored non-temporally. Each output
 * depends on its own element only, so where the vectors fall changes no bit.
 * With PF, every vector also prefetches the next row (V_PREFETCH_NEXT_ROW). */
#define V_LAST_PASS(x, y, n, stream, FULL, PART, PF)                                               \
    do {                                                                                           \
        size_t i_ = 0;                                                                             \
        if (stream) {                                                                              \
            size_t h_ =                                                                            \
                ((V_BYTES - ((uintptr_t)(y) & (V_BYTES - 1))) & (V_BYTES - 1)) / sizeof(float);    \
            if (h_ > (n))                                                                          \
                h_ = (n);                                                                          \
            if (h_ > 0)                                                                            \
                V_STORE_TAIL((y), h_, PART(0, h_));                                                \
            for (i_ = h_; i_ + V_WIDTH <= (n); i_ += V_WIDTH) {                                    \
                if (PF)                                                                            \
                    V_PREFETCH_NEXT_ROW(x, n, i_);                                                 \
                V_STREAM((y) + i_, FULL(i_));                                                      \
            }                                                                                      \
        } else {                                                                                   \
            for (; i_ + V_WIDTH <= (n); i_ += V_WIDTH) {                                           \
                if (PF)                                                                            \
                    V_PREFETCH_NEXT_ROW(x, n, i_);                                                 \
                V_STORE((y) + i_, FULL(i_));                                                       \
            }                                                                                      \
        }                                                                                          \
        if (i_ < (n))                                                                              \
            V_STORE_TAIL((y) + i_, (n)-i_, PART(i_, (n)-i_));                                      \
    } while (0)

/* ---- softmax ---- */

/* softmax's maximum, in every lane, by x86's max. It may differ from
 * section 2's MAX in two ways only, and neither reaches an output:
 *  - a NaN may be lost: a row with a NaN has exp(NaN - m) = NaN among its
 *    terms whatever m is, so its sum is NaN;
 *  - a zero maximum may come out as -0 rather than +0, or differ in sign
 *    between lanes: x - m is then x except for x = +-0, where it is +-0
 *    and exp gives exactly 1 for either sign (j = shift, kf = 0, r = +-0,
 *    the polynomial's steps c + (+-0) * p give c, 1 * 2^0 = 1).
 * The sum s is NaN exactly for the rows the contract makes NaN (a NaN, a
 * +Inf: Inf - Inf, only -Inf: -Inf - -Inf), and otherwise finite (every
 * term in [0, 1]), so callers test s instead of m. */
static inline VF V_FN(row_max_loose)(const float *x, size_t n) {
    VF m0 = V_SET1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 4 * V_WIDTH <= n; i += 4 * V_WIDTH) {
        m0 = V_MAX(m0, V_LOAD(x + i));
        m1 = V_MAX(m1, V_LOAD(x + i + V_WIDTH));
        m2 = V_MAX(m2, V_LOAD(x + i + 2 * V_WIDTH));
        m3 = V_MAX(m3, V_LOAD(x + i + 3 * V_WIDTH));
    }
    for (; i + V_WIDTH <= n; i += V_WIDTH)
        m0 = V_MAX(m0, V_LOAD(x + i));
    if (i < n)
        m1 = V_MAX(m1, V_LOAD_TAIL(x + i, n - i, -INFINITY));
    return V_HMAX_ALL(V_MAX(V_MAX(m0, m1), V_MAX(m2, m3)));
}

static void V_FN(row_nan)(float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canonical_nan();
}

/* V_GROUP short rows (n <= BIB_TREE_LANES) with row_softmax_short's
 * operations, the max by row_max_loose's rule, in three steps so that
 * groups' steps can overlap (softmax_short_pipeline): the group's maxima, packed
 * (V_MAX_GROUP); exp(x - m) into e (the rows' terms, in the cache) and the
 * group's sums, packed; the divisions. Each element is its own tree lane,
 * from +0: e >= +0 or NaN, and +0 + e = e. Vectors wholly past a row are
 * -Inf, whose e is +0: no exp for them. */
static inline __attribute__((always_inline)) VF V_FN(softmax_group_max)(const float *x, size_t n) {
    VF r[V_GROUP];
    V_FN(prefetch_group_ahead)(x, n);
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF v[V_NACC];
        V_LOAD_SHORT_ROW(v, x + g * n, n, -INFINITY);
        V_UNROLL
        for (int s = V_NACC / 2; s >= 1; s >>= 1) {
            V_UNROLL
            for (int a = 0; a < s; a++)
                v[a] = V_MAX(v[a], v[a + s]);
        }
        r[g] = v[0];
    }
    return V_MAX_GROUP(r);
}

/* One block of V_EXP_LOCK of the group's vectors (vector j is row
 * j / V_NACC's vector j % V_NACC) through exp in step, for rows where every
 * vector holds elements (n > (V_NACC - 1) * V_WIDTH): their terms stored in
 * e and, where the block holds whole rows, those rows' folds in r. Rows of
 * 64, AVX-512, one thread, in L2: 37 cycles a row one vector after another,
 * 33 with two rows in step; AVX2 89 -> 83 with half a row. */
static inline __attribute__((always_inline)) void
V_FN(softmax_group_exp_block)(const float *x, size_t n, VF mg, float e[V_GROUP][BIB_TREE_LANES],
                              int b, VF r[V_GROUP]) {
    VF v[V_EXP_LOCK];
    V_UNROLL
    for (int k = 0; k < V_EXP_LOCK; k++) {
        int g = (b + k) / V_NACC;
        size_t o = (size_t)((b + k) % V_NACC) * V_WIDTH;
        v[k] = V_SUB(V_LOAD_PART(x + g * n + o, V_TAIL_LANES(o, n), -INFINITY), V_BCAST_ROW(mg, g));
    }
    V_FN(v_exp_nonpos_n)(v, V_EXP_LOCK);
    V_UNROLL
    for (int k = 0; k < V_EXP_LOCK; k++)
        V_STORE(&e[0][0] + (size_t)(b + k) * V_WIDTH, v[k]);
#if V_EXP_LOCK % V_NACC == 0
    V_UNROLL
    for (int k = 0; k < V_EXP_LOCK; k += V_NACC)
        r[(b + k) / V_NACC] = V_FN(v_tree_fold)(v + k);
#else
    (void)r;
#endif
}

/* The group's packed sums once its blocks have run: rows the blocks did not
 * fold (blocks shorter than a row) fold from their terms stored in e. */
static inline __attribute__((always_inline)) VF
V_FN(softmax_group_exp_sums)(float e[V_GROUP][BIB_TREE_LANES], VF r[V_GROUP]) {
#if V_EXP_LOCK % V_NACC != 0
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF acc[V_NACC];
        V_UNROLL
        for (int a = 0; a < V_NACC; a++)
            acc[a] = V_LOAD(e[g] + a * V_WIDTH);
        r[g] = V_FN(v_tree_fold)(acc);
    }
#else
    (void)e;
#endif
    return V_TREE_GROUP(r);
}

static inline __attribute__((always_inline)) VF
V_FN(softmax_group_exp)(const float *x, size_t n, VF mg, float e[V_GROUP][BIB_TREE_LANES]) {
    VF r[V_GROUP];
    if (n > (V_NACC - 1) * V_WIDTH) {
        V_UNROLL
        for (int b = 0; b < V_GROUP * V_NACC; b += V_EXP_LOCK)
            V_FN(softmax_group_exp_block)(x, n, mg, e, b, r);
        return V_FN(softmax_group_exp_sums)(e, r);
    }
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF mv = V_BCAST_ROW(mg, g), acc[V_NACC];
        V_LOAD_SHORT_ROW(acc, x + g * n, n, -INFINITY);
        V_UNROLL
        for (int a = 0; a < V_NACC; a++) {
            acc[a] = (size_t)a * V_WIDTH < n ? V_FN(v_exp_nonpos)(V_SUB(acc[a], mv)) : V_ZERO();
            V_STORE(e[g] + a * V_WIDTH, acc[a]);
        }
        r[g] = V_FN(v_tree_fold)(acc);
    }
    return V_TREE_GROUP(r);
}

/* The divisions of the group's vectors [j0, j1) (vector j is row
 * j / V_NACC's vector j % V_NACC); vectors past a row's end are skipped. */
static inline __attribute__((always_inline)) void
V_FN(softmax_group_div_part)(float *y, size_t n, VF sg, float e[V_GROUP][BIB_TREE_LANES], int j0,
                             int j1, bool stream) {
    V_UNROLL
    for (int j = j0; j < j1; j++) {
        int g = j / V_NACC;
        size_t o = (size_t)(j % V_NACC) * V_WIDTH;
        if (o < n)
            V_STORE_SHORT(y + g * n + o, V_TAIL_LANES(o, n),
                          V_DIV(V_LOAD(e[g] + o), V_BCAST_ROW(sg, g)), stream);
    }
}

static inline __attribute__((always_inline)) void
V_FN(softmax_group_div)(float *y, size_t n, VF sg, float e[V_GROUP][BIB_TREE_LANES], bool stream) {
    V_FN(softmax_group_div_part)(y, n, sg, e, 0, V_GROUP * V_NACC, stream);
}

/* Groups as a software pipeline: while group i is divided and stored, group
 * i + 1 computes its exp and group i + 2 its max, so the steps in flight at
 * once never wait on each other (each group's steps still come in its own
 * order). Whole groups only: rows [0, groups * V_GROUP). With y == x, group
 * i's outputs land on its own rows, which the later steps do not read.
 * Rows of 64, one thread, in L2: 10.1 ns a row with two groups' steps
 * alternating, 9.1 pipelined.
 *
 * Where every vector of a row holds elements, group i's divisions go
 * between group i + 1's exp blocks, a block's worth after each: the divider
 * is its own unit and slow (a 512-bit division issues every 10 cycles on
 * Intel cores), and a group's divisions in one burst kept it busy while the
 * FMA ports waited. On the Xeon (Sapphire Rapids), one thread, rows of 64
 * in L2: 18.2 ns a row in one burst, 15.0 interleaved (with multiplications
 * in place of the divisions, which give other bits, 13-14); on two threads
 * over f32[65536, 64] 0.85-0.89x of a two-thread memcpy -> 0.94-0.98x. */
#if (V_GROUP * V_NACC) % V_EXP_LOCK != 0
#error "a group's vectors must be whole exp blocks"
#endif
static inline __attribute__((always_inline)) void
V_FN(softmax_short_pipeline)(const float *x, float *y, size_t n, size_t groups, bool stream) {
    _Alignas(64) float e[3][V_GROUP][BIB_TREE_LANES];
    const size_t gs = V_GROUP * n;
    const bool full_rows = n > (V_NACC - 1) * V_WIDTH;
    VF m_next = V_ZERO(), s_now = V_ZERO();
    VF m_now = V_FN(softmax_group_max)(x, n);
    if (groups > 1)
        m_next = V_FN(softmax_group_max)(x + gs, n);
    s_now = V_FN(softmax_group_exp)(x, n, m_now, e[0]);
    for (size_t i = 0; i < groups; i++) {
        VF m_after = V_ZERO(), s_next = V_ZERO();
        if (i + 2 < groups)
            m_after = V_FN(softmax_group_max)(x + (i + 2) * gs, n);
        /* A group's packed sums hold, beside each row's sum, sums of some
         * of that row's terms: NaN only where the row's sum is NaN too. A
         * group with a NaN among them goes to the one-row function, and
         * nothing else of its rows is stored. */
        bool special = V_MASK_ANY(V_UNORD(s_now, s_now));
        if (special)
            for (int g = 0; g < V_GROUP; g++)
                V_FN(row_softmax_short)(x + i * gs + g * n, y + i * gs + g * n, n);
        V_FN(prefetchw_group_ahead)(y + i * gs, n, i + PF_AHEAD < groups && !stream);
        if (i + 1 < groups && full_rows) {
            VF r[V_GROUP];
            V_UNROLL
            for (int b = 0; b < V_GROUP * V_NACC; b += V_EXP_LOCK) {
                V_FN(softmax_group_exp_block)(x + (i + 1) * gs, n, m_next, e[(i + 1) % 3], b, r);
                if (!special)
                    V_FN(softmax_group_div_part)
                (y + i * gs, n, s_now, e[i % 3], b, b + V_EXP_LOCK, stream);
            }
            s_next = V_FN(softmax_group_exp_sums)(e[(i + 1) % 3], r);
        } else {
            if (i + 1 < groups)
                s_next = V_FN(softmax_group_exp)(x + (i + 1) * gs, n, m_next, e[(i + 1) % 3]);
            if (!special)
                V_FN(softmax_group_div)(y + i * gs, n, s_now, e[i % 3], stream);
        }
        m_next = m_after;
        s_now = s_next;
    }
}

/* A long row's exp(x - m) written to e (y, or x when y is x, or a buffer)
 * while the tree accumulates it; the tree's sum. Tail lanes are loaded as
 * -Inf, whose e is +0, which leaves a tree lane unchanged. Every vector
 * prefetches the next row: this is the row's longest pass, and the only one
 * that computes long enough to hide the fetch. A tree block's vectors go
 * through exp V_EXP_STEP at a time in step (one thread, AVX-512: softmax
 * over f32[256, 4096] 52 -> 57 GB/s, over f32[2048, 256] 46 -> 49). */
static inline float V_FN(softmax_exp_pass)(const float *x, VF mv, float *e, size_t n) {
    VF acc[V_NACC];
    V_UNROLL
    for (int a = 0; a < V_NACC; a++)
        acc[a] = V_ZERO();
    size_t i = 0;
    for (; i + BIB_TREE_LANES <= n; i += BIB_TREE_LANES) {
        V_UNROLL
        for (int b = 0; b < V_NACC; b += V_EXP_STEP) {
            VF t[V_EXP_STEP];
            V_UNROLL
            for (int k = 0; k < V_EXP_STEP; k++) {
                size_t o = i + (size_t)(b + k) * V_WIDTH;
                V_PREFETCH_NEXT_ROW(x, n, o);
                t[k] = V_SUB(V_LOAD(x + o), mv);
            }
            V_FN(v_exp_nonpos_n)(t, V_EXP_STEP);
            V_UNROLL
            for (int k = 0; k < V_EXP_STEP; k++) {
                V_STORE(e + i + (size_t)(b + k) * V_WIDTH, t[k]);
                acc[b + k] = V_ADD(acc[b + k], t[k]);
            }
        }
    }
    V_UNROLL
    for (int a = 0; a < V_NACC; a++) {
        size_t o = i + (size_t)a * V_WIDTH;
        VF t = V_ZERO();
        if (o < n) {
            size_t r = V_TAIL_LANES(o, n);
            t = V_FN(v_exp_nonpos)(V_SUB(V_LOAD_TAIL(x + o, r, -INFINITY), mv));
            V_STORE_TAIL(e + o, r, t);
        }
        acc[a] = V_ADD(acc[a], t);
    }
    return V_FN(v_tree_finish)(acc);
}

/* Two passes after the max: exp written to y while the tree accumulates it,
 * then the division in place while the row is still in cache. Rows whose
 * sum is NaN are the contract's NaN rows (row_max_loose). Otherwise every
 * e is in [0, 1], 1 <= s <= n and e / s is never NaN: no canonicalization
 * is needed. */
static void V_FN(row_softmax)(const float *x, float *y, size_t n) {
    if (n <= BIB_TREE_LANES) {
        V_FN(row_softmax_short)(x, y, n);
        return;
    }
    float s = V_FN(softmax_exp_pass)(x, V_FN(row_max_loose)(x, n), y, n);
    if (isnan(s)) {
        V_FN(row_nan)(y, n);
        return;
    }
    VF sv = V_SET1(s);
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH)
        V_STORE(y + i, V_DIV(V_LOAD(y + i), sv));
    if (i < n)
        V_STORE_TAIL(y + i, n - i, V_DIV(V_LOAD_TAIL(y + i, n - i, 0.0f), sv));
}

/* Rows up to this long keep e in a buffer on the stack when y is streamed;
 * longer ones compute exp(x - m) again, the same bits, in the last pass. */
#define SOFTMAX_STREAM_SCRATCH 4096

/* A long row with y written once, at the end, non-temporally: e goes to a
 * buffer in the cache instead of y, so y is never read. */
static void V_FN(row_softmax_stream)(const float *x, float *y, size_t n) {
    VF mv = V_FN(row_max_loose)(x, n);
    if (n <= SOFTMAX_STREAM_SCRATCH) {
        _Alignas(64) float e[SOFTMAX_STREAM_SCRATCH];
        float s = V_FN(softmax_exp_pass)(x, mv, e, n);
        if (isnan(s)) {
            V_FN(row_nan)(y, n);
            return;
        }
        VF sv = V_SET1(s);
#define V_SOFTMAX_FULL(i) V_DIV(V_LOAD(e + (i)), sv)
#define V_SOFTMAX_PART(i, r) V_DIV(V_LOAD_TAIL(e + (i), (r), 0.0f), sv)
        V_LAST_PASS(x, y, n, true, V_SOFTMAX_FULL, V_SOFTMAX_PART, 0);
#undef V_SOFTMAX_FULL
#undef V_SOFTMAX_PART
        return;
    }
    float s;
#define V_EXPDEV(v) V_FN(v_exp_nonpos)(V_SUB(v, mv))
    V_TREE_ROW(x, n, V_EXPDEV, s);
#undef V_EXPDEV
    if (isnan(s)) {
        V_FN(row_nan)(y, n);
        return;
    }
    VF sv = V_SET1(s);
#define V_SOFTMAX_FULL(i) V_DIV(V_FN(v_exp_nonpos)(V_SUB(V_LOAD(x + (i)), mv)), sv)
#define V_SOFTMAX_PART(i, r)                                                                       \
    V_DIV(V_FN(v_exp_nonpos)(V_SUB(V_LOAD_TAIL(x + (i), (r), -INFINITY), mv)), sv)
    V_LAST_PASS(x, y, n, true, V_SOFTMAX_FULL, V_SOFTMAX_PART, 1);
#undef V_SOFTMAX_FULL
#undef V_SOFTMAX_PART
}

/* softmax_exp_pass for one row with the previous row's last pass folded
 * in: pe (that row's e) divided by its sum and streamed to py, vector for
 * vector beside this row's exp. Streamed on their own, a row's stores come
 * in one burst that the memory takes longer to drain than the core takes to
 * issue them, and the core waits; beside the exp they drain while it
 * computes. Rows whole vectors long (n % V_WIDTH == 0), py aligned. */
static inline float V_FN(softmax_exp_pass_div)(const float *x, VF mv, float *e, size_t n,
                                               const float *pe, VF psv, float *py) {
    VF acc[V_NACC];
    V_UNROLL
    for (int a = 0; a < V_NACC; a++)
        acc[a] = V_ZERO();
    size_t i = 0;
    for (; i + BIB_TREE_LANES <= n; i += BIB_TREE_LANES) {
        V_UNROLL
        for (int a = 0; a < V_NACC; a++) {
            size_t o = i + (size_t)a * V_WIDTH;
            V_PREFETCH_NEXT_ROW(x, n, o);
            VF t = V_FN(v_exp_nonpos)(V_SUB(V_LOAD(x + o), mv));
            V_STORE(e + o, t);
            acc[a] = V_ADD(acc[a], t);
            V_STREAM(py + o, V_DIV(V_LOAD(pe + o), psv));
        }
    }
    V_UNROLL
    for (int a = 0; a < V_NACC; a++) {
        size_t o = i + (size_t)a * V_WIDTH;
        VF t = V_ZERO();
        if (o < n) {
            t = V_FN(v_exp_nonpos)(V_SUB(V_LOAD(x + o), mv));
            V_STORE(e + o, t);
            V_STREAM(py + o, V_DIV(V_LOAD(pe + o), psv));
        }
        acc[a] = V_ADD(acc[a], t);
    }
    return V_FN(v_tree_finish)(acc);
}

/* Streamed rows of whole vectors (n % V_WIDTH == 0, y aligned) that fit the
 * stack buffers: row r's exp pass carries row r - 1's last pass
 * (softmax_exp_pass_div). Each row's operations are row_softmax_stream's.
 * A special row (NaN sum) is written as NaN on its own. With y == x, row
 * r - 1's outputs land on its own inputs, which nothing reads any more. */
static void V_FN(softmax_rows_pipelined)(const float *x, float *y, size_t n, size_t rows) {
    _Alignas(64) float e[2][SOFTMAX_STREAM_SCRATCH];
    float ps = 0.0f;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *er = e[r & 1], *pe = e[(r - 1) & 1], *py = y + (r - 1) * n;
        VF mv = V_FN(row_max_loose)(xr, n);
        if (r > 0 && !isnan(ps)) {
            ps = V_FN(softmax_exp_pass_div)(xr, mv, er, n, pe, V_SET1(ps), py);
            continue;
        }
        if (r > 0)
            V_FN(row_nan)(py, n);
        ps = V_FN(softmax_exp_pass)(xr, mv, er, n);
    }
    float *ly = y + (rows - 1) * n;
    const float *le = e[(rows - 1) & 1];
    if (isnan(ps)) {
        V_FN(row_nan)(ly, n);
        return;
    }
    VF sv = V_SET1(ps);
    for (size_t i = 0; i < n; i += V_WIDTH)
        V_STREAM(ly + i, V_DIV(V_LOAD(le + i), sv));
}

static void V_FN(softmax_rows)(const float *x, float *y, size_t n, size_t rows, bool stream) {
    size_t r = 0;
    if (n <= BIB_TREE_LANES) {
        bool st = V_FN(short_rows_stream)(y, n, stream);
        /* The full block on its own: every vector whole, no tail to test. */
        size_t groups = rows / V_GROUP;
        if (groups > 0 && n == BIB_TREE_LANES)
            V_FN(softmax_short_pipeline)(x, y, BIB_TREE_LANES, groups, st);
        else if (groups > 0)
            V_FN(softmax_short_pipeline)(x, y, n, groups, st);
        r = groups * V_GROUP;
        for (; r < rows; r++)
            V_FN(row_softmax_short)(x + r * n, y + r * n, n);
    } else if (stream && rows > 0 && n <= SOFTMAX_STREAM_SCRATCH && n % V_WIDTH == 0 &&
               V_FN(v_aligned)(y)) {
        V_FN(softmax_rows_pipelined)(x, y, n, rows);
    } else if (stream) {
        for (; r < rows; r++)
            V_FN(row_softmax_stream)(x + r * n, y + r * n, n);
    } else {
        for (; r < rows; r++)
            V_FN(row_softmax)(x + r * n, y + r * n, n);
    }
    if (stream)
        _mm_sfence();
}

/* ---- layernorm and rmsnorm ---- */

/* Whether every lane is finite (x - x is NaN for +-Inf and NaN). */
static inline bool V_FN(v_all_finite)(VF v) {
    VF z = V_SUB(v, v);
    return !V_MASK_ANY(V_UNORD(z, z));
}

/* Whether a norm's row parameters (gamma, beta; n of them) are finite and
 * eps is positive. Then a short row whose denominator is finite gives no
 * NaN, so its outputs skip canonicalization (the same bits: canon changes
 * NaNs only). The reasoning, for layernorm (rmsnorm is the same with
 * mean = 0 and no beta): den = sqrt(var + eps) finite means var is, so every
 * term d * d is (a tree of non-negative terms never shrinks to finite from
 * Inf or NaN), so every d = x - mean is finite and |d| <= sqrt(n * var),
 * the terms that underflowed to 0 aside, which are below 2^-74. With
 * eps > 0, den >= sqrt(eps) >= 2^-75 and den >= sqrt(var), so |d / den|
 * <= max(sqrt(n), 2) plus rounding: finite. Times a finite gamma it is
 * finite or +-Inf, never NaN, and plus a finite beta it stays so (Inf - Inf
 * needs both terms infinite). */
static inline bool V_FN(norm_params_clean)(const float *p, size_t n, float eps) {
    if (!(eps > 0.0f) || !isfinite(eps))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i]))
            return false;
    return true;
}

/* V_GROUP short rows (n <= BIB_TREE_LANES) with row_layernorm's operations,
 * in three steps that reread the rows from the cache, so that groups'
 * steps can overlap (layernorm_short_pipeline): the means, the
 * denominators, the outputs. The divisions by n, eps and the square root
 * run on the group's packed sums, lane for lane the scalar operations. Each
 * element is its own tree lane: the sum's lanes are +0 + x (which makes a
 * -0 into +0, as the scalar tree does); a variance term d * d is never -0,
 * so +0 + d * d = d * d. */
static inline __attribute__((always_inline)) VF V_FN(layernorm_group_mean)(const float *x,
                                                                           size_t n) {
    VF r[V_GROUP];
    V_FN(prefetch_group_ahead)(x, n);
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF acc[V_NACC];
        V_LOAD_SHORT_ROW(acc, x + g * n, n, 0.0f);
        V_UNROLL
        for (int a = 0; a < V_NACC; a++)
            acc[a] = V_ADD(V_ZERO(), acc[a]);
        r[g] = V_FN(v_tree_fold)(acc);
    }
    return V_DIV(V_TREE_GROUP(r), V_SET1((float)n));
}

static inline __attribute__((always_inline)) VF V_FN(layernorm_group_den)(const float *x, size_t n,
                                                                          VF mean, float eps) {
    VF r[V_GROUP];
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF mv = V_BCAST_ROW(mean, g), acc[V_NACC];
        V_LOAD_SHORT_ROW(acc, x + g * n, n, 0.0f);
        V_UNROLL
        for (int a = 0; a < V_NACC; a++) {
            size_t o = (size_t)a * V_WIDTH;
            VF d = V_SUB(acc[a], mv);
            acc[a] = o < n ? V_TERM_MASKED(V_MUL(d, d), o, n) : V_ZERO();
        }
        r[g] = V_FN(v_tree_fold)(acc);
    }
    return V_SQRT(V_ADD(V_DIV(V_TREE_GROUP(r), V_SET1((float)n)), V_SET1(eps)));
}

static inline __attribute__((always_inline)) void
V_FN(layernorm_group_store)(const float *x, const float *gamma, const float *beta, float *y,
                            size_t n, VF mean, VF den, bool canon, bool stream) {
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF mv = V_BCAST_ROW(mean, g), dv = V_BCAST_ROW(den, g);
        V_UNROLL
        for (int a = 0; a < V_NACC; a++) {
            size_t o = (size_t)a * V_WIDTH;
            if (o < n) {
                size_t rl = V_TAIL_LANES(o, n);
                VF t = V_DIV(V_SUB(V_LOAD_PART(x + g * n + o, rl, 0.0f), mv), dv);
                t = V_MUL(t, V_LOAD_PART(gamma + o, rl, 0.0f));
                t = V_ADD(t, V_LOAD_PART(beta + o, rl, 0.0f));
                if (canon)
                    t = V_FN(v_canon_rare)(t);
                V_STORE_SHORT(y + g * n + o, rl, t, stream);
            }
        }
    }
}

/* The outputs; canonicalized only when one could be NaN (v_norm_clean). */
static inline __attribute__((always_inline)) void
V_FN(layernorm_group_out)(const float *x, const float *gamma, const float *beta, float *y, size_t n,
                          VF mean, VF den, bool params_clean, bool stream) {
    if (params_clean && V_FN(v_all_finite)(den))
        V_FN(layernorm_group_store)(x, gamma, beta, y, n, mean, den, false, stream);
    else
        V_FN(layernorm_group_store)(x, gamma, beta, y, n, mean, den, true, stream);
}

/* Groups as a software pipeline, as softmax_short_pipeline: group i's
 * outputs beside group i + 1's denominators and group i + 2's means. y may
 * be x: group i's outputs land on its own rows, which the later steps do
 * not read. Rows of 64, one thread, in L2: 6.6 ns a row with two groups'
 * steps alternating, 5.1 pipelined. */
static inline __attribute__((always_inline)) void
V_FN(layernorm_short_pipeline)(const float *x, const float *gamma, const float *beta, float eps,
                               float *y, size_t n, size_t groups, bool clean, bool stream) {
    const size_t gs = V_GROUP * n;
    VF m_now = V_FN(layernorm_group_mean)(x, n), m_next = V_ZERO();
    if (groups > 1)
        m_next = V_FN(layernorm_group_mean)(x + gs, n);
    VF d_now = V_FN(layernorm_group_den)(x, n, m_now, eps);
    for (size_t i = 0; i < groups; i++) {
        VF m_after = V_ZERO(), d_next = V_ZERO();
        if (i + 2 < groups)
            m_after = V_FN(layernorm_group_mean)(x + (i + 2) * gs, n);
        if (i + 1 < groups)
            d_next = V_FN(layernorm_group_den)(x + (i + 1) * gs, n, m_next, eps);
        V_FN(prefetchw_group_ahead)(y + i * gs, n, i + PF_AHEAD < groups && !stream);
        V_FN(layernorm_group_out)
        (x + i * gs, gamma, beta, y + i * gs, n, m_now, d_now, clean, stream);
        m_now = m_next;
        m_next = m_after;
        d_now = d_next;
    }
}
/* A long row: the sum's pass reads the row from memory, the variance's and
 * the last one from the cache; the variance's pass prefetches the next row
 * (measured: about 10% faster than in the last pass, which with stream is
 * mostly stores). */
static void V_FN(row_layernorm_at)(const float *x, const float *gamma, const float *beta, float eps,
                                   float *y, size_t n, bool stream) {
    float nf = (float)n, sum, sq;
    V_TREE_ROW(x, n, V_TERM_ID, sum);
    float mean = sum / nf;
    VF mv = V_SET1(mean);
#define V_SQDEV(v) V_MUL(V_SUB(v, mv), V_SUB(v, mv))
    V_TREE_ROW_PF(x, n, V_SQDEV, sq, 1);
#undef V_SQDEV
    float var = sq / nf;
    VF den = V_SET1(sqrtf(var + eps));
#define V_LN(xv, gv, bv) V_ADD(V_MUL(V_DIV(V_SUB(xv, mv), den), gv), bv)
#define V_LN_FULL(i)                                                                               \
    V_FN(v_canon_rare)(V_LN(V_LOAD(x + (i)), V_LOAD(gamma + (i)), V_LOAD(beta + (i))))
#define V_LN_PART(i, r)                                                                            \
    V_FN(v_canon)(V_LN(V_TAIL0(x + (i), r), V_TAIL0(gamma + (i), r), V_TAIL0(beta + (i), r)))
    V_LAST_PASS(x, y, n, stream, V_LN_FULL, V_LN_PART, 0);
#undef V_LN
#undef V_LN_FULL
#undef V_LN_PART
}

static void V_FN(row_layernorm)(const float *x, const float *gamma, const float *beta, float eps,
                                float *y, size_t n) {
    V_FN(row_layernorm_at)(x, gamma, beta, eps, y, n, false);
}

static void V_FN(layernorm_rows)(const float *x, const float *gamma, const float *beta, float eps,
                                 float *y, size_t n, size_t rows, bool stream) {
    size_t r = 0;
    if (n <= BIB_TREE_LANES) {
        bool st = V_FN(short_rows_stream)(y, n, stream);
        bool clean =
            V_FN(norm_params_clean)(gamma, n, eps) && V_FN(norm_params_clean)(beta, n, eps);
        /* The full block on its own: every vector whole, no tail to test. */
        size_t groups = rows / V_GROUP;
        if (groups > 0 && n == BIB_TREE_LANES)
            V_FN(layernorm_short_pipeline)
        (x, gamma, beta, eps, y, BIB_TREE_LANES, groups, clean, st);
        else if (groups > 0)
            V_FN(layernorm_short_pipeline)(x, gamma, beta, eps, y, n, groups, clean, st);
        r = groups * V_GROUP;
    }
    for (; r < rows; r++)
        V_FN(row_layernorm_at)(x + r * n, gamma, beta, eps, y + r * n, n, stream);
    if (stream)
        _mm_sfence();
}

/* V_GROUP short rows with row_rmsnorm's operations, in two steps (the
 * denominators, the outputs) so that groups' steps can overlap; x * x
 * is never -0, so a tree lane +0 + x * x is x * x. */
static inline __attribute__((always_inline)) VF V_FN(rmsnorm_group_den)(const float *x, size_t n,
                                                                        float eps) {
    VF r[V_GROUP];
    V_FN(prefetch_group_ahead)(x, n);
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF acc[V_NACC];
        V_LOAD_SHORT_ROW(acc, x + g * n, n, 0.0f);
        V_UNROLL
        for (int a = 0; a < V_NACC; a++)
            acc[a] = V_MUL(acc[a], acc[a]); /* missing lanes: 0 * 0 */
        r[g] = V_FN(v_tree_fold)(acc);
    }
    return V_SQRT(V_ADD(V_DIV(V_TREE_GROUP(r), V_SET1((float)n)), V_SET1(eps)));
}

static inline __attribute__((always_inline)) void
V_FN(rmsnorm_group_store)(const float *x, const float *gamma, float *y, size_t n, VF den,
                          bool canon, bool stream) {
    V_UNROLL
    for (int g = 0; g < V_GROUP; g++) {
        VF dv = V_BCAST_ROW(den, g);
        V_UNROLL
        for (int a = 0; a < V_NACC; a++) {
            size_t o = (size_t)a * V_WIDTH;
            if (o < n) {
                size_t rl = V_TAIL_LANES(o, n);
                VF t = V_DIV(V_LOAD_PART(x + g * n + o, rl, 0.0f), dv);
                t = V_MUL(t, V_LOAD_PART(gamma + o, rl, 0.0f));
                if (canon)
                    t = V_FN(v_canon_rare)(t);
                V_STORE_SHORT(y + g * n + o, rl, t, stream);
            }
        }
    }
}

/* The outputs; canonicalized only when one could be NaN (norm_params_clean). */
static inline __attribute__((always_inline)) void
V_FN(rmsnorm_group_out)(const float *x, const float *gamma, float *y, size_t n, VF den,
                        bool params_clean, bool stream) {
    if (params_clean && V_FN(v_all_finite)(den))
        V_FN(rmsnorm_group_store)(x, gamma, y, n, den, false, stream);
    else
        V_FN(rmsnorm_group_store)(x, gamma, y, n, den, true, stream);
}

/* Groups as a software pipeline: group i's outputs beside group i + 1's
 * denominators. */
static inline __attribute__((always_inline)) void
V_FN(rmsnorm_short_pipeline)(const float *x, const float *gamma, float eps, float *y, size_t n,
                             size_t groups, bool clean, bool stream) {
    const size_t gs = V_GROUP * n;
    VF d_now = V_FN(rmsnorm_group_den)(x, n, eps);
    for (size_t i = 0; i < groups; i++) {
        VF d_next = V_ZERO();
        if (i + 1 < groups)
            d_next = V_FN(rmsnorm_group_den)(x + (i + 1) * gs, n, eps);
        V_FN(prefetchw_group_ahead)(y + i * gs, n, i + PF_AHEAD < groups && !stream);
        V_FN(rmsnorm_group_out)(x + i * gs, gamma, y + i * gs, n, d_now, clean, stream);
        d_now = d_next;
    }
}

static void V_FN(row_rmsnorm_at)(const float *x, const float *gamma, float eps, float *y, size_t n,
                                 bool stream) {
    float sq;
#define V_SQ(v) V_MUL(v, v)
    V_TREE_ROW(x, n, V_SQ, sq);
#undef V_SQ
    VF den = V_SET1(sqrtf(sq / (float)n + eps));
#define V_RMS(xv, gv) V_MUL(V_DIV(xv, den), gv)
#define V_RMS_FULL(i) V_FN(v_canon_rare)(V_RMS(V_LOAD(x + (i)), V_LOAD(gamma + (i))))
#define V_RMS_PART(i, r) V_FN(v_canon)(V_RMS(V_TAIL0(x + (i), r), V_TAIL0(gamma + (i), r)))
    V_LAST_PASS(x, y, n, stream, V_RMS_FULL, V_RMS_PART, 1);
#undef V_RMS
#undef V_RMS_FULL
#undef V_RMS_PART
}

static void V_FN(row_rmsnorm)(const float *x, const float *gamma, float eps, float *y, size_t n) {
    V_FN(row_rmsnorm_at)(x, gamma, eps, y, n, false);
}

static void V_FN(rmsnorm_rows)(const float *x, const float *gamma, float eps, float *y, size_t n,
                               size_t rows, bool stream) {
    size_t r = 0;
    if (n <= BIB_TREE_LANES) {
        bool st = V_FN(short_rows_stream)(y, n, stream);
        bool clean = V_FN(norm_params_clean)(gamma, n, eps);
        /* The full block on its own: every vector whole, no tail to test. */
        size_t groups = rows / V_GROUP;
        if (groups > 0 && n == BIB_TREE_LANES)
            V_FN(rmsnorm_short_pipeline)(x, gamma, eps, y, BIB_TREE_LANES, groups, clean, st);
        else if (groups > 0)
            V_FN(rmsnorm_short_pipeline)(x, gamma, eps, y, n, groups, clean, st);
        r = groups * V_GROUP;
    }
    for (; r < rows; r++)
        V_FN(row_rmsnorm_at)(x + r * n, gamma, eps, y + r * n, n, stream);
    if (stream)
        _mm_sfence();
}

static void V_FN(row_axpy)(float a, const float *x, float *y, size_t n) {
    VF av = V_SET1(a);
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH)
        V_STORE(y + i, V_FMA(av, V_LOAD(x + i), V_LOAD(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

/* CONV's direct form and POOL on output rows (bib_cpu_rowops_t.conv_rows,
 * pool_rows): blocks of NV vectors of outputs, each lane one output's steps
 * in the reference's order, held in registers over every tap. A block's
 * masks and indices depend on the window's column only, so they are made
 * once for all the rows of a call. A tap's inputs come by a masked load at
 * stride 1, by two masked loads and the even lanes at stride 2, by a
 * gather otherwise; lanes whose input is padding read +0, so CONV's
 * padding tap is fma(+0, w, acc), the reference's step, and POOL selects
 * them away. Positions are compared as floats, exact below 2^24. */
#define V_CONV_NV 4
#define V_CONV_MAX_KW 16
#define V_CONV_UNROLL _Pragma("GCC unroll 4")

/* Where a block's taps read: per window column j and vector v, the lanes
 * whose input is inside the row (in), and how to load them. */
typedef struct V_FN(conv_taps) {
    VM in[V_CONV_MAX_KW][V_CONV_NV];
    VM lo[V_CONV_MAX_KW][V_CONV_NV], hi[V_CONV_MAX_KW][V_CONV_NV]; /* stride 2 */
    VI idx[V_CONV_MAX_KW][V_CONV_NV];                              /* other strides */
    int64_t at[V_CONV_MAX_KW][V_CONV_NV];                          /* first input */
} V_FN(conv_taps_t);

static inline __attribute__((always_inline)) void
V_FN(conv_taps_make)(V_FN(conv_taps_t) * t, size_t kw, size_t q0, const int nv, size_t ow,
                     size_t in_w, int64_t off0, int64_t sw, int64_t dw) {
    static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const VF lane = V_LOAD(iota), wend = V_SET1((float)in_w);
    for (size_t j = 0; j < kw; j++)
        V_CONV_UNROLL for (int v = 0; v < nv; v++) {
            size_t q = q0 + (size_t)v * V_WIDTH;
            int64_t first = (int64_t)q * sw + off0 + (int64_t)j * dw;
            VF qs = V_ADD(V_SET1((float)q), lane);
            VF pos = V_FMA(qs, V_SET1((float)sw), V_SET1((float)(off0 + (int64_t)j * dw)));
            t->in[j][v] = V_MASK_AND(V_MASK_AND(V_GE(pos, V_ZERO()), V_LT(pos, wend)),
                                     V_LT(qs, V_SET1((float)ow)));
            t->idx[j][v] = V_FCVT_I(V_SELECT(t->in[j][v], pos, V_ZERO()));
            t->at[j][v] = first;
            VF c0 = V_ADD(V_SET1((float)first), lane);
            VF c1 = V_ADD(c0, V_SET1((float)V_WIDTH));
            t->lo[j][v] = V_MASK_AND(V_GE(c0, V_ZERO()), V_LT(c0, wend));
            t->hi[j][v] = V_MASK_AND(V_GE(c1, V_ZERO()), V_LT(c1, wend));
        }
}

/* xr + k as an address, k possibly before the row's start: only a masked
 * load reads at it, and never its masked lanes (integer arithmetic, since a
 * pointer before its object is undefined in C). */
static inline const float *V_FN(tap_at)(const float *xr, int64_t k) {
    return (const float *)((uintptr_t)xr + (uintptr_t)(k * (int64_t)sizeof(float)));
}

/* The inputs of tap column j for vector v from input row xr, +0 where the
 * tap is padding (stride 2: lanes past the row's outputs may hold inputs). */
static inline __attribute__((always_inline)) VF
V_FN(conv_tap_load)(const V_FN(conv_taps_t) * t, const float *xr, int64_t sw, size_t j, int v) {
    if (sw == 1)
        return V_LOAD_MASKZ(V_FN(tap_at)(xr, t->at[j][v]), t->in[j][v]);
    if (sw == 2)
        return V_EVEN_LANES(V_LOAD_MASKZ(V_FN(tap_at)(xr, t->at[j][v]), t->lo[j][v]),
                            V_LOAD_MASKZ(V_FN(tap_at)(xr, t->at[j][v] + V_WIDTH), t->hi[j][v]));
    return V_GATHER_MASKZ(xr, t->idx[j][v], t->in[j][v]);
}

/* Rows [row, row + rb) of a block: rb x nv independent chains in flight
 * (one vector's chain alone waits on each fma's latency). */
static inline __attribute__((always_inline)) void
V_FN(conv_rows_at)(const bib_conv_rows_t *r, const V_FN(conv_taps_t) * t, size_t q0, const int nv,
                   const int rb, size_t row, float *out) {
    VF acc[V_CONV_NV][V_CONV_NV];
    V_CONV_UNROLL for (int k = 0; k < rb; k++) V_CONV_UNROLL for (int v = 0; v < nv; v++)
        acc[k][v] = V_ZERO();
    const size_t plane = r->win.h * r->win.in_w;
    const float *wt = r->wt;
    for (size_t ci = 0; ci < r->cg; ci++) {
        for (size_t i = 0; i < r->win.kh; i++, wt += r->win.kw) {
            const float *xr[V_CONV_NV];
            V_CONV_UNROLL for (int k = 0; k < rb; k++) {
                int64_t ih =
                    r->win.ih0 + (int64_t)(row + (size_t)k) * r->win.sh + (int64_t)i * r->win.dh;
                xr[k] = ih < 0 || ih >= (int64_t)r->win.h
                            ? NULL
                            : r->win.x + ci * plane + (size_t)ih * r->win.in_w;
            }
            for (size_t j = 0; j < r->win.kw; j++) {
                VF w = V_SET1(wt[j]);
                V_CONV_UNROLL for (int k = 0; k < rb; k++)
                    V_CONV_UNROLL for (int v = 0; v < nv; v++) {
                    VF a = xr[k] ? V_FN(conv_tap_load)(t, xr[k], r->win.sw, j, v) : V_ZERO();
                    acc[k][v] = V_FMA(a, w, acc[k][v]);
                }
            }
        }
    }
    V_CONV_UNROLL for (int k = 0; k < rb; k++) {
        float *o = out + (row + (size_t)k) * r->win.ow;
        V_CONV_UNROLL for (int v = 0; v < nv; v++) {
            size_t at = q0 + (size_t)v * V_WIDTH, left = r->win.ow - at;
            VF y = V_FN(v_canon)(acc[k][v]);
            if (left >= V_WIDTH)
                V_STORE(o + at, y);
            else
                V_STORE_TAIL(o + at, left, y);
        }
    }
}

static inline __attribute__((always_inline)) void
V_FN(conv_block)(const bib_conv_rows_t *r, size_t q0, const int nv, float *out) {
    V_FN(conv_taps_t) t;
    V_FN(conv_taps_make)
    (&t, r->win.kw, q0, nv, r->win.ow, r->win.in_w, r->win.off0, r->win.sw, r->win.dw);
    size_t row = 0;
    if (nv == 1) {
        for (; row + 4 <= r->win.rows; row += 4)
            V_FN(conv_rows_at)(r, &t, q0, 1, 4, row, out);
        for (; row + 2 <= r->win.rows; row += 2)
            V_FN(conv_rows_at)(r, &t, q0, 1, 2, row, out);
    } else if (nv == 2) {
        for (; row + 2 <= r->win.rows; row += 2)
            V_FN(conv_rows_at)(r, &t, q0, 2, 2, row, out);
    }
    for (; row < r->win.rows; row++)
        V_FN(conv_rows_at)(r, &t, q0, nv, 1, row, out);
}

/* Runs fn_block over a row's outputs: whole blocks of V_CONV_NV vectors,
 * then one block of the vectors left (the count a constant in each call, so
 * that the block's accumulators stay in registers). */
#define V_CONV_BLOCKS(fn, r, out)                                                                  \
    do {                                                                                           \
        const size_t block_ = V_CONV_NV * V_WIDTH;                                                 \
        size_t q0_ = 0;                                                                            \
        for (; q0_ + block_ <= (r)->win.ow; q0_ += block_)                                         \
            V_FN(fn##_block)((r), q0_, V_CONV_NV, (out));                                          \
        switch (((r)->win.ow - q0_ + V_WIDTH - 1) / V_WIDTH) {                                     \
        case 1:                                                                                    \
            V_FN(fn##_block)((r), q0_, 1, (out));                                                  \
            break;                                                                                 \
        case 2:                                                                                    \
            V_FN(fn##_block)((r), q0_, 2, (out));                                                  \
            break;                                                                                 \
        case 3:                                                                                    \
            V_FN(fn##_block)((r), q0_, 3, (out));                                                  \
            break;                                                                                 \
        case 4:                                                                                    \
            V_FN(fn##_block)((r), q0_, 4, (out));                                                  \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Whether a row's positions, as floats, are exact (below 2^24). */
static bool V_FN(conv_geometry_fits)(size_t kw, size_t ow, size_t in_w, int64_t off0, int64_t sw,
                                     int64_t dw, int64_t w_end) {
    const double limit = 16777216.0;
    return kw <= V_CONV_MAX_KW && sw >= 1 && dw >= 1 &&
           (double)ow * (double)sw + fabs((double)off0) + (double)kw * (double)dw + 2.0 * V_WIDTH <
               limit &&
           (double)in_w < limit && (double)w_end < limit;
}

static bool V_FN(conv_rows)(const bib_conv_rows_t *r, float *out) {
    if (!V_FN(conv_geometry_fits)(r->win.kw, r->win.ow, r->win.in_w, r->win.off0, r->win.sw,
                                  r->win.dw, 0))
        return false;
    V_CONV_BLOCKS(conv, r, out);
    return true;
}

/* POOL: lanes whose tap is padding keep their sum (AVG: the reference skips
 * the add, which matters for -0) or read -Inf (MAX: its key never wins, as
 * the reference's skip), and count as the reference counts them. */
static inline __attribute__((always_inline)) void
V_FN(pool_block)(const bib_pool_rows_t *r, size_t q0, const int nv, float *out) {
    static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    V_FN(conv_taps_t) t;
    V_FN(conv_taps_make)
    (&t, r->win.kw, q0, nv, r->win.ow, r->win.in_w, r->win.off0, r->win.sw, r->win.dw);
    VM ext[V_CONV_MAX_KW][V_CONV_NV]; /* inside the padded extent */
    const VF lane = V_LOAD(iota), one = V_SET1(1.0f), ninf = V_SET1(-INFINITY);
    for (size_t j = 0; j < r->win.kw; j++)
        V_CONV_UNROLL for (int v = 0; v < nv; v++) {
            VF q = V_ADD(V_SET1((float)(q0 + (size_t)v * V_WIDTH)), lane);
            VF pos = V_FMA(q, V_SET1((float)r->win.sw),
                           V_SET1((float)(r->win.off0 + (int64_t)j * r->win.dw)));
            ext[j][v] = V_MASK_AND(
                V_MASK_AND(V_GE(pos, V_SET1((float)-r->pl)), V_LT(pos, V_SET1((float)r->w_end))),
                V_LT(q, V_SET1((float)r->win.ow)));
        }
    for (size_t row = 0; row < r->win.rows; row++) {
        VF sum[V_CONV_NV], count[V_CONV_NV];
        VI best[V_CONV_NV];
        VM nan[V_CONV_NV];
        V_CONV_UNROLL for (int v = 0; v < nv; v++) {
            sum[v] = V_ZERO(), count[v] = V_ZERO();
            best[v] = V_ISET1(bib_f32_order_key(-INFINITY));
            nan[v] = V_MASK_NONE();
        }
        const int64_t ih0 = r->win.ih0 + (int64_t)row * r->win.sh;
        for (size_t i = 0; i < r->win.kh; i++) {
            int64_t ih = ih0 + (int64_t)i * r->win.dh;
            if (ih < 0 || ih >= (int64_t)r->win.h) {
                if (r->avg && r->include_pad && ih >= -r->pt && ih < r->h_end)
                    for (size_t j = 0; j < r->win.kw; j++)
                        V_CONV_UNROLL for (int v = 0; v < nv; v++) count[v] =
                            V_ADD(count[v], V_SELECT(ext[j][v], one, V_ZERO()));
                continue;
            }
            const float *xr = r->win.x + (size_t)ih * r->win.in_w;
            for (size_t j = 0; j < r->win.kw; j++) {
                V_CONV_UNROLL for (int v = 0; v < nv; v++) {
                    VF a = V_FN(conv_tap_load)(&t, xr, r->win.sw, j, v);
                    if (r->avg) {
                        sum[v] = V_SELECT(t.in[j][v], V_ADD(sum[v], a), sum[v]);
                        count[v] = V_ADD(count[v], V_SELECT(r->include_pad ? ext[j][v] : t.in[j][v],
                                                            one, V_ZERO()));
                    } else {
                        a = V_SELECT(t.in[j][v], a, ninf);
                        nan[v] = V_MASK_OR(nan[v], V_UNORD(a, a));
                        best[v] = V_IMAX(best[v], V_ORDER_KEY(a));
                    }
                }
            }
        }
        float *o = out + row * r->win.ow;
        V_CONV_UNROLL for (int v = 0; v < nv; v++) {
            size_t at = q0 + (size_t)v * V_WIDTH, left = r->win.ow - at;
            VF y = r->avg ? V_DIV(sum[v], count[v])
                          : V_SELECT(nan[v], V_SET1(bib_f32_canonical_nan()),
                                     V_FROM_BITS(V_ORDER_KEY(V_FROM_BITS(best[v]))));
            y = V_FN(v_canon)(y);
            if (left >= V_WIDTH)
                V_STORE(o + at, y);
            else
                V_STORE_TAIL(o + at, left, y);
        }
    }
}

static bool V_FN(pool_rows)(const bib_pool_rows_t *r, float *out) {
    /* AVG counts its taps in floats: exact below 2^24, as the reference's
     * integer count converted once. */
    if (!V_FN(conv_geometry_fits)(r->win.kw, r->win.ow, r->win.in_w, r->win.off0, r->win.sw,
                                  r->win.dw, r->w_end) ||
        (double)r->pl >= 16777216.0 ||
        (r->avg && (double)r->win.kh * (double)r->win.kw >= 16777216.0))
        return false;
    V_CONV_BLOCKS(pool, r, out);
    return true;
}

/* BATCHNORM on one plane: the reference's four steps lane by lane. */
static void V_FN(row_batchnorm)(const float *x, float *y, size_t n, float mean, float den,
                                float scale, float bias, bool relu) {
    const VF m = V_SET1(mean), d = V_SET1(den), s = V_SET1(scale), b = V_SET1(bias);
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        VF v = V_ADD(V_MUL(V_DIV(V_SUB(V_LOAD(x + i), m), d), s), b);
        V_STORE(y + i, relu ? V_FN(v_relu)(v) : V_FN(v_canon)(v));
    }
    if (i < n) {
        VF v = V_ADD(V_MUL(V_DIV(V_SUB(V_LOAD_TAIL(x + i, n - i, 0.0f), m), d), s), b);
        V_STORE_TAIL(y + i, n - i, relu ? V_FN(v_relu)(v) : V_FN(v_canon)(v));
    }
}

/* REDUCE down columns (bib_cpu_rowops_t.reduce_cols): the scalar
 * reference's steps on V_COLS vectors of columns at a time, each lane one
 * column; the columns past the last whole vector take the scalar reference.
 * MAX and MIN keep each column's greatest or least order key and whether it
 * met a NaN; SUM, MEAN and PROD keep each column's 64 tree lanes. */
#define V_COLS 4
static void V_FN(reduce_cols)(uint32_t op, const float *x, size_t n, size_t m, size_t j0, size_t j1,
                              float *y) {
    size_t j = j0;
    const bool prod = op == BIB_REDUCE_PROD;
    while (j + V_WIDTH <= j1) {
        size_t nv = (j1 - j) / V_WIDTH < V_COLS ? (j1 - j) / V_WIDTH : V_COLS;
        if (op == BIB_REDUCE_MAX || op == BIB_REDUCE_MIN) {
            const bool max = op == BIB_REDUCE_MAX;
            VI best[V_COLS];
            VM nan[V_COLS];
            for (size_t v = 0; v < nv; v++) {
                best[v] = V_ISET1(bib_f32_order_key(max ? -INFINITY : INFINITY));
                nan[v] = V_MASK_NONE();
            }
            for (size_t i = 0; i < n; i++)
                for (size_t v = 0; v < nv; v++) {
                    VF a = V_LOAD(x + i * m + j + v * V_WIDTH);
                    nan[v] = V_MASK_OR(nan[v], V_UNORD(a, a));
                    best[v] =
                        max ? V_IMAX(best[v], V_ORDER_KEY(a)) : V_IMIN(best[v], V_ORDER_KEY(a));
                }
            for (size_t v = 0; v < nv; v++) {
                VF r = V_FROM_BITS(V_ORDER_KEY(V_FROM_BITS(best[v])));
                V_STORE(y + j + v * V_WIDTH, V_SELECT(nan[v], V_SET1(bib_f32_canonical_nan()), r));
            }
        } else {
            VF p[BIB_TREE_LANES][V_COLS];
            for (int l = 0; l < BIB_TREE_LANES; l++)
                for (size_t v = 0; v < nv; v++)
                    p[l][v] = V_SET1(prod ? 1.0f : 0.0f);
            for (size_t i = 0; i < n; i++) {
                VF *lane = p[i % BIB_TREE_LANES];
                const float *row = x + i * m + j;
                for (size_t v = 0; v < nv; v++) {
                    VF a = V_LOAD(row + v * V_WIDTH);
                    lane[v] = prod ? V_MUL(lane[v], a) : V_ADD(lane[v], a);
                }
            }
            for (int s = BIB_TREE_LANES / 2; s >= 1; s >>= 1)
                for (int l = 0; l < s; l++)
                    for (size_t v = 0; v < nv; v++)
                        p[l][v] = prod ? V_MUL(p[l][v], p[l + s][v]) : V_ADD(p[l][v], p[l + s][v]);
            for (size_t v = 0; v < nv; v++) {
                VF r = op == BIB_REDUCE_MEAN ? V_DIV(p[0][v], V_SET1((float)n)) : p[0][v];
                V_STORE(y + j + v * V_WIDTH, V_FN(v_canon)(r));
            }
        }
        j += nv * V_WIDTH;
    }
    if (j < j1)
        bib_cpu_rowops_scalar.reduce_cols(op, x, n, m, j, j1, y);
}

static size_t V_FN(first_past)(const float *x, size_t n, int32_t bar, bool max) {
    const VI b = V_ISET1(bar);
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        VF v = V_LOAD(x + i);
        VI k = V_ORDER_KEY(v);
        if (V_MASK_ANY(V_MASK_OR(V_UNORD(v, v), max ? V_IGT(k, b) : V_IGT(b, k))))
            break;
    }
    return i + bib_cpu_rowops_scalar.first_past(x + i, n - i, bar, max);
}

const bib_cpu_rowops_t V_CAT(bib_cpu_rowops, V_SUFFIX) = {
    .name = V_NAME,
    .unary = V_FN(row_unary),
    .binary = V_FN(row_binary),
    .scale = V_FN(row_scale),
    .softmax = V_FN(row_softmax),
    .logsoftmax = V_FN(row_logsoftmax),
    .layernorm = V_FN(row_layernorm),
    .rmsnorm = V_FN(row_rmsnorm),
    .softmax_rows = V_FN(softmax_rows),
    .layernorm_rows = V_FN(layernorm_rows),
    .rmsnorm_rows = V_FN(rmsnorm_rows),
    .sum = V_FN(row_sum),
    .max = V_FN(row_max),
    .reduce_cols = V_FN(reduce_cols),
    .axpy = V_FN(row_axpy),
    .conv_rows = V_FN(conv_rows),
    .pool_rows = V_FN(pool_rows),
    .batchnorm = V_FN(row_batchnorm),
    .first_past = V_FN(first_past),
};
