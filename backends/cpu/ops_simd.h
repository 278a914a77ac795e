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
 *   V_ADD, V_SUB, V_MUL, V_DIV, V_FMA(a,b,c)=a*b+c, V_FNMA(a,b,c)=c-a*b
 *   V_MIN(a, b), V_MAX(a, b) with x86's rule: b when either is NaN
 *   V_GT, V_LT, V_GE, V_UNORD, V_EQ -> VM; V_SELECT(m, a, b) = m ? a : b
 *   V_AND_BITS(a, bits), V_OR_BITS(a, b) on float vectors as bit patterns
 *   V_SCALE2K(p, kf) -> (p * 2^k1) * 2^k2 for integral kf = k in [-150, 128],
 *                       k1 = k >> 1, k2 = k - k1 (exp's last two multiplies)
 *   V_HSUM_TREE(v)   -> the tree's steps s = V_WIDTH/2 .. 1 inside one register
 *   V_LOAD_TAIL(p, r, fill) -> the first r (1..V_WIDTH) floats at p, other
 *                       lanes `fill`; reads nothing beyond p[r-1]
 *   V_STORE_TAIL(p, r, v)   -> writes the first r lanes only
 *   V_ORDER_KEY(x) -> integer vector as VI; V_IMAX(a, b); VI; V_ISET1;
 *   V_IMAX_REDUCE(v) -> the greatest int32 lane
 *   V_TAILMASK(r) -> VF whose first r lanes are all-ones bits, others zero
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

/* exp's sequence for x in [LO, HI]. Outside that range the contract pins
 * +0 (x < LO) and +Inf (x > HI); the sequence itself already gives exactly
 * those at x = LO and x = HI (exp_special_values checks it), so callers
 * clamp instead of selecting. */
static inline VF V_FN(v_exp_core)(VF x) {
    VF j = V_FMA(x, V_SET1(BIB_EXP_LOG2E), V_SET1(BIB_EXP_SHIFT));
    VF kf = V_SUB(j, V_SET1(BIB_EXP_SHIFT));
    VF r = V_FNMA(kf, V_SET1(BIB_EXP_LN2_HI), x);
    r = V_FNMA(kf, V_SET1(BIB_EXP_LN2_LO), r);
    VF p = V_SET1(BIB_EXP_C6);
    p = V_FMA(p, r, V_SET1(BIB_EXP_C5));
    p = V_FMA(p, r, V_SET1(BIB_EXP_C4));
    p = V_FMA(p, r, V_SET1(BIB_EXP_C3));
    p = V_FMA(p, r, V_SET1(BIB_EXP_C2));
    p = V_FMA(p, r, V_SET1(1.0f));
    p = V_FMA(p, r, V_SET1(1.0f));
    return V_SCALE2K(p, kf); /* (p * 2^k1) * 2^k2, p * 2^k1 exact */
}

/* V_MAX(lo, x) and V_MIN(hi, x) return x when x is NaN (x86 returns the
 * second operand), so a NaN lane stays NaN through the clamp. */
static inline VF V_FN(v_exp)(VF x) {
    VF xc = V_MIN(V_SET1(BIB_EXP_HI), V_MAX(V_SET1(BIB_EXP_LO), x));
    VF y = V_FN(v_exp_core)(xc);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* exp for x <= 0, -Inf included. A NaN lane gives some NaN: the caller
 * canonicalizes or masks it. */
static inline VF V_FN(v_exp_nonpos)(VF x) {
    return V_FN(v_exp_core)(V_MAX(V_SET1(BIB_EXP_LO), x));
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

/* The unary ops with a vector form, X(op, its V_FN function). */
#define V_UNARY_VECTOR_OPS(X)                                                                      \
    X(RELU, v_relu)                                                                                \
    X(SIGMOID, v_sigmoid)                                                                          \
    X(TANH, v_tanh)                                                                                \
    X(GELU, v_gelu)                                                                                \
    X(EXP, v_exp)                                                                                  \
    X(ERF, v_erf)                                                                                  \
    X(GELU_ERF, v_gelu_erf)

static void V_FN(row_unary)(bib_unary_t op, const float *x, float *y, size_t n) {
    switch (op) {
#define V_UNARY_CASE(name, fn)                                                                     \
    case BIB_UNARY_##name:                                                                         \
        V_MAP_ROW(x, y, n, V_FN(fn));                                                              \
        return;
        V_UNARY_VECTOR_OPS(V_UNARY_CASE)
#undef V_UNARY_CASE
    case BIB_UNARY_LOG:
    case BIB_UNARY_SQRT:
    case BIB_UNARY_RSQRT:
    case BIB_UNARY_RECIP:
    case BIB_UNARY_ABS:
    case BIB_UNARY_NEG:
    case BIB_UNARY__COUNT: /* not an op; -Wswitch names a unary op left out */
        break;
    }
    /* An op with no vector form listed here runs the scalar reference (same
       bits, element by element). */
    bib_cpu_rowops_scalar.unary(op, x, y, n);
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
    case BIB_BINARY_POW: /* row_binary runs these on the scalar reference */
    case BIB_BINARY_MIN:
    case BIB_BINARY_MAX:
    case BIB_BINARY__COUNT: /* not an op; -Wswitch names a binary op left out */
        break;
    }
    return a;
}

static void V_FN(row_binary)(bib_binary_t op, const float *a, const float *b, size_t b_step,
                             float *y, size_t n) {
    if (op == BIB_BINARY_POW || op == BIB_BINARY_MIN || op == BIB_BINARY_MAX) {
        /* No vector form: the scalar reference, element by element. */
        bib_cpu_rowops_scalar.binary(op, a, b, b_step, y, n);
        return;
    }
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
#define V_TREE_ROW(x, n, TERM, result)                                                             \
    do {                                                                                           \
        VF acc_[V_NACC];                                                                           \
        V_UNROLL                                                                                   \
        for (int a_ = 0; a_ < V_NACC; a_++)                                                        \
            acc_[a_] = V_ZERO();                                                                   \
        size_t i_ = 0;                                                                             \
        for (; i_ + BIB_TREE_LANES <= (n); i_ += BIB_TREE_LANES) {                                 \
            V_UNROLL                                                                               \
            for (int a_ = 0; a_ < V_NACC; a_++) {                                                  \
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

/* Two passes after the max: exp written to y while the tree accumulates it,
 * then the division in place while the row is still in cache.
 *
 * When m is NaN, +Inf or -Inf (a row of -Inf), some x - m is NaN, so the sum
 * and every output are NaN: the row is the canonical NaN. Otherwise every
 * x - m is <= 0 and not NaN, every e is in [0, 1], the e of the maximum is
 * exactly 1, so 1 <= s <= n and e / s is never NaN: no canonicalization is
 * needed. Tail lanes are loaded as -Inf, whose e is +0, which leaves a tree
 * lane unchanged. */
static void V_FN(row_softmax)(const float *x, float *y, size_t n) {
    if (n <= BIB_TREE_LANES) {
        V_FN(row_softmax_short)(x, y, n);
        return;
    }
    float m;
    if (!V_FN(row_max_finite)(x, y, n, &m))
        return;
    VF mv = V_SET1(m);
    VF acc[V_NACC];
    V_UNROLL
    for (int a = 0; a < V_NACC; a++)
        acc[a] = V_ZERO();
    size_t i = 0;
    for (; i + BIB_TREE_LANES <= n; i += BIB_TREE_LANES) {
        V_UNROLL
        for (int a = 0; a < V_NACC; a++) {
            size_t o = i + (size_t)a * V_WIDTH;
            VF e = V_FN(v_exp_nonpos)(V_SUB(V_LOAD(x + o), mv));
            V_STORE(y + o, e);
            acc[a] = V_ADD(acc[a], e);
        }
    }
    V_UNROLL
    for (int a = 0; a < V_NACC; a++) {
        size_t o = i + (size_t)a * V_WIDTH;
        VF e = V_ZERO();
        if (o < n) {
            size_t r = V_TAIL_LANES(o, n);
            e = V_FN(v_exp_nonpos)(V_SUB(V_LOAD_TAIL(x + o, r, -INFINITY), mv));
            V_STORE_TAIL(y + o, r, e);
        }
        acc[a] = V_ADD(acc[a], e);
    }
    VF sv = V_SET1(V_FN(v_tree_finish)(acc));
    for (i = 0; i + V_WIDTH <= n; i += V_WIDTH) {
        V_PREFETCH_NEXT_ROW(x, n, i);
        V_STORE(y + i, V_DIV(V_LOAD(y + i), sv));
    }
    if (i < n)
        V_STORE_TAIL(y + i, n - i, V_DIV(V_LOAD_TAIL(y + i, n - i, 0.0f), sv));
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

static void V_FN(row_layernorm)(const float *x, const float *gamma, const float *beta, float eps,
                                float *y, size_t n) {
    float nf = (float)n, sum, sq;
    V_TREE_ROW(x, n, V_TERM_ID, sum);
    float mean = sum / nf;
    VF mv = V_SET1(mean);
#define V_SQDEV(v) V_MUL(V_SUB(v, mv), V_SUB(v, mv))
    V_TREE_ROW(x, n, V_SQDEV, sq);
#undef V_SQDEV
    float var = sq / nf;
    VF den = V_SET1(sqrtf(var + eps));
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        V_PREFETCH_NEXT_ROW(x, n, i);
        VF t = V_MUL(V_DIV(V_SUB(V_LOAD(x + i), mv), den), V_LOAD(gamma + i));
        V_STORE(y + i, V_FN(v_canon_rare)(V_ADD(t, V_LOAD(beta + i))));
    }
    if (i < n) {
        size_t r = n - i;
        VF t = V_MUL(V_DIV(V_SUB(V_LOAD_TAIL(x + i, r, 0.0f), mv), den),
                     V_LOAD_TAIL(gamma + i, r, 0.0f));
        V_STORE_TAIL(y + i, r, V_FN(v_canon)(V_ADD(t, V_LOAD_TAIL(beta + i, r, 0.0f))));
    }
}

static void V_FN(row_rmsnorm)(const float *x, const float *gamma, float eps, float *y, size_t n) {
    float sq;
#define V_SQ(v) V_MUL(v, v)
    V_TREE_ROW(x, n, V_SQ, sq);
#undef V_SQ
    VF den = V_SET1(sqrtf(sq / (float)n + eps));
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH) {
        V_PREFETCH_NEXT_ROW(x, n, i);
        V_STORE(y + i, V_FN(v_canon_rare)(V_MUL(V_DIV(V_LOAD(x + i), den), V_LOAD(gamma + i))));
    }
    if (i < n) {
        size_t r = n - i;
        VF t = V_MUL(V_DIV(V_LOAD_TAIL(x + i, r, 0.0f), den), V_LOAD_TAIL(gamma + i, r, 0.0f));
        V_STORE_TAIL(y + i, r, V_FN(v_canon)(t));
    }
}

static void V_FN(row_axpy)(float a, const float *x, float *y, size_t n) {
    VF av = V_SET1(a);
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH)
        V_STORE(y + i, V_FMA(av, V_LOAD(x + i), V_LOAD(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
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
    .sum = V_FN(row_sum),
    .max = V_FN(row_max),
    .axpy = V_FN(row_axpy),
};
