/* backends/cpu/ops_simd.h: the row functions, written once for any SIMD width.
 *
 * Included by ops_avx2.c and ops_avx512.c after they define the vector
 * primitives below (V_* macros) for their instruction set. Each function is
 * the scalar reference of ops.c / bmath.h applied lane by lane: the same
 * correctly rounded operations in the same order, so the bits match. Row
 * tails shorter than a vector go through a zero-padded copy, and the
 * reduction tree keeps BIB_TREE_LANES lanes in 64 / V_WIDTH registers,
 * finished by bib_tree_finish exactly as the scalar code does.
 *
 * Required before inclusion:
 *   VF, VM           float vector, comparison mask
 *   V_WIDTH          lanes per VF
 *   V_SUFFIX         name suffix (avx2, avx512)
 *   V_LOAD, V_STORE, V_SET1, V_ZERO
 *   V_ADD, V_SUB, V_MUL, V_DIV, V_FMA(a,b,c)=a*b+c, V_FNMA(a,b,c)=c-a*b
 *   V_MIN, V_MAX (only to clamp finite ranges; NaN lanes are masked after)
 *   V_GT, V_LT, V_GE, V_UNORD, V_EQ -> VM; V_SELECT(m, a, b) = m ? a : b
 *   V_AND_BITS(a, bits), V_OR_BITS(a, b) on float vectors as bit patterns
 *   V_POW2I(k_float_vector) -> 2^k for integral k in [-126, 127]
 *   V_HALF_SPLIT(kf, &k1f, &k2f): k1 = floor(k/2), k2 = k - k1, as floats
 *   V_ORDER_KEY(x) -> integer vector as VI; V_IMAX(a, b); VI; V_ISTORE; V_ISET1
 *   V_TAILMASK(r) -> VF whose first r lanes are all-ones bits, others zero
 */

#define V_CAT2(a, b) a##_##b
#define V_CAT(a, b) V_CAT2(a, b)
#define V_FN(name) V_CAT(name, V_SUFFIX)

#define V_NACC (BIB_TREE_LANES / V_WIDTH)

static inline VF V_FN(v_canon)(VF y) {
    return V_SELECT(V_UNORD(y, y), V_SET1(bib_f32_canonical_nan()), y);
}

static inline VF V_FN(v_exp)(VF x) {
    const VF hi = V_SET1(BIB_EXP_HI), lo = V_SET1(BIB_EXP_LO);
    VM is_nan = V_UNORD(x, x);
    VM is_hi = V_GT(x, hi);
    VM is_lo = V_LT(x, lo);
    VF xc = V_MIN(V_MAX(x, lo), hi);
    VF j = V_FMA(xc, V_SET1(BIB_EXP_LOG2E), V_SET1(BIB_EXP_SHIFT));
    VF kf = V_SUB(j, V_SET1(BIB_EXP_SHIFT));
    VF r = V_FNMA(kf, V_SET1(BIB_EXP_LN2_HI), xc);
    r = V_FNMA(kf, V_SET1(BIB_EXP_LN2_LO), r);
    VF p = V_SET1(BIB_EXP_C6);
    p = V_FMA(p, r, V_SET1(BIB_EXP_C5));
    p = V_FMA(p, r, V_SET1(BIB_EXP_C4));
    p = V_FMA(p, r, V_SET1(BIB_EXP_C3));
    p = V_FMA(p, r, V_SET1(BIB_EXP_C2));
    p = V_FMA(p, r, V_SET1(1.0f));
    p = V_FMA(p, r, V_SET1(1.0f));
    VF s1, s2;
    V_HALF_SPLIT(kf, s1, s2);
    VF y = V_MUL(V_MUL(p, s1), s2);
    y = V_SELECT(is_hi, V_SET1(INFINITY), y);
    y = V_SELECT(is_lo, V_ZERO(), y);
    return V_SELECT(is_nan, V_SET1(bib_f32_canonical_nan()), y);
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
    VF e = V_FN(v_exp)(V_ADD(a, a));
    VF big = V_SUB(V_SET1(1.0f), V_DIV(V_SET1(2.0f), V_ADD(e, V_SET1(1.0f))));
    VF y = V_SELECT(V_LT(a, V_SET1(BIB_TANH_SMALL)), small, big);
    y = V_OR_BITS(y, sign);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

static inline VF V_FN(v_sigmoid)(VF x) {
    VF a = V_FN(v_abs)(x);
    VF e = V_FN(v_exp)(V_SUB(V_ZERO(), a));
    VF num = V_SELECT(V_GE(x, V_ZERO()), V_SET1(1.0f), e);
    VF y = V_DIV(num, V_ADD(V_SET1(1.0f), e));
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

static inline VF V_FN(v_gelu)(VF x) {
    VF x3 = V_MUL(V_MUL(x, x), x);
    VF z = V_MUL(V_SET1(BIB_GELU_K), V_FMA(V_SET1(BIB_GELU_C1), x3, x));
    VF y = V_MUL(x, V_FN(v_sigmoid)(z));
    y = V_SELECT(V_EQ(x, V_SET1(-INFINITY)), V_SET1(-0.0f), y);
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

static inline VF V_FN(v_relu)(VF x) {
    VF y = V_SELECT(V_GT(x, V_ZERO()), x, V_ZERO());
    return V_SELECT(V_UNORD(x, x), V_SET1(bib_f32_canonical_nan()), y);
}

/* Runs BODY(x_vector) -> y_vector over a row, tail through a padded copy. */
#define V_MAP_ROW(x, y, n, BODY)                                                                   \
    do {                                                                                           \
        size_t i_ = 0;                                                                             \
        for (; i_ + V_WIDTH <= (n); i_ += V_WIDTH) {                                               \
            VF v_ = V_LOAD((x) + i_);                                                              \
            V_STORE((y) + i_, BODY(v_));                                                           \
        }                                                                                          \
        if (i_ < (n)) {                                                                            \
            float t_[V_WIDTH] = {0};                                                               \
            memcpy(t_, (x) + i_, ((n)-i_) * sizeof(float));                                        \
            VF v_ = V_LOAD(t_);                                                                    \
            V_STORE(t_, BODY(v_));                                                                 \
            memcpy((y) + i_, t_, ((n)-i_) * sizeof(float));                                        \
        }                                                                                          \
    } while (0)

static void V_FN(row_unary)(bib_unary_t op, const float *x, float *y, size_t n) {
    switch (op) {
    case BIB_UNARY_RELU:
        V_MAP_ROW(x, y, n, V_FN(v_relu));
        return;
    case BIB_UNARY_SIGMOID:
        V_MAP_ROW(x, y, n, V_FN(v_sigmoid));
        return;
    case BIB_UNARY_TANH:
        V_MAP_ROW(x, y, n, V_FN(v_tanh));
        return;
    case BIB_UNARY_GELU:
        V_MAP_ROW(x, y, n, V_FN(v_gelu));
        return;
    case BIB_UNARY_EXP:
        V_MAP_ROW(x, y, n, V_FN(v_exp));
        return;
    }
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
        float ta[V_WIDTH] = {0}, tb[V_WIDTH] = {0};
        memcpy(ta, a + i, (n - i) * sizeof(float));
        if (b_step)
            memcpy(tb, b + i, (n - i) * sizeof(float));
        VF bv = b_step ? V_LOAD(tb) : bs;
        V_STORE(ta, V_FN(v_binary)(op, V_LOAD(ta), bv));
        memcpy(y + i, ta, (n - i) * sizeof(float));
    }
}

static void V_FN(row_scale)(const float *x, float s, float *y, size_t n) {
    VF sv = V_SET1(s);
#define V_SCALE_BODY(v) V_FN(v_canon)(V_MUL(v, sv))
    V_MAP_ROW(x, y, n, V_SCALE_BODY);
#undef V_SCALE_BODY
}

/* The tree with a term computed per element: TERM(v) -> VF. Tail lanes
 * beyond n contribute +0 (their term is masked to zero bits). */
#define V_TREE_ROW(x, n, TERM, result)                                                             \
    do {                                                                                           \
        VF acc_[V_NACC];                                                                           \
        for (int a_ = 0; a_ < V_NACC; a_++)                                                        \
            acc_[a_] = V_ZERO();                                                                   \
        size_t i_ = 0;                                                                             \
        for (; i_ + BIB_TREE_LANES <= (n); i_ += BIB_TREE_LANES)                                   \
            for (int a_ = 0; a_ < V_NACC; a_++) {                                                  \
                VF v_ = V_LOAD((x) + i_ + (size_t)a_ * V_WIDTH);                                   \
                acc_[a_] = V_ADD(acc_[a_], TERM(v_));                                              \
            }                                                                                      \
        for (int a_ = 0; a_ < V_NACC && i_ < (n); a_++, i_ += V_WIDTH) {                           \
            size_t r_ = (n)-i_ < V_WIDTH ? (n)-i_ : V_WIDTH;                                       \
            float t_[V_WIDTH] = {0};                                                               \
            memcpy(t_, (x) + i_, r_ * sizeof(float));                                              \
            VF v_ = V_LOAD(t_);                                                                    \
            acc_[a_] = V_ADD(acc_[a_], V_AND_MASK(TERM(v_), V_TAILMASK(r_)));                      \
        }                                                                                          \
        float p_[BIB_TREE_LANES];                                                                  \
        for (int a_ = 0; a_ < V_NACC; a_++)                                                        \
            V_STORE(p_ + a_ * V_WIDTH, acc_[a_]);                                                  \
        (result) = bib_tree_finish(p_);                                                            \
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
        float t[V_WIDTH];
        for (size_t l = 0; l < V_WIDTH; l++)
            t[l] = -INFINITY;
        memcpy(t, x + i, (n - i) * sizeof(float));
        VF v = V_LOAD(t);
        any_nan = V_MASK_OR(any_nan, V_UNORD(v, v));
        best = V_IMAX(best, V_ORDER_KEY(v));
    }
    if (V_MASK_ANY(any_nan))
        return bib_f32_canonical_nan();
    int32_t keys[V_WIDTH];
    V_ISTORE(keys, best);
    int32_t k = keys[0];
    for (int l = 1; l < V_WIDTH; l++)
        k = keys[l] > k ? keys[l] : k;
    return bib_f32_from_order_key(k);
}

static void V_FN(row_softmax)(const float *x, float *y, size_t n) {
    float m = V_FN(row_max)(x, n);
    VF mv = V_SET1(m);
#define V_SOFTMAX_EXP(v) V_FN(v_exp)(V_SUB(v, mv))
    V_MAP_ROW(x, y, n, V_SOFTMAX_EXP);
#undef V_SOFTMAX_EXP
    float s;
    V_TREE_ROW(y, n, V_TERM_ID, s);
    VF sv = V_SET1(s);
#define V_SOFTMAX_DIV(v) V_FN(v_canon)(V_DIV(v, sv))
    V_MAP_ROW(y, y, n, V_SOFTMAX_DIV);
#undef V_SOFTMAX_DIV
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
        VF t = V_MUL(V_DIV(V_SUB(V_LOAD(x + i), mv), den), V_LOAD(gamma + i));
        V_STORE(y + i, V_FN(v_canon)(V_ADD(t, V_LOAD(beta + i))));
    }
    for (; i < n; i++)
        y[i] = bib_f32_canon(((x[i] - mean) / sqrtf(var + eps)) * gamma[i] + beta[i]);
}

static void V_FN(row_rmsnorm)(const float *x, const float *gamma, float eps, float *y, size_t n) {
    float sq;
#define V_SQ(v) V_MUL(v, v)
    V_TREE_ROW(x, n, V_SQ, sq);
#undef V_SQ
    float d = sqrtf(sq / (float)n + eps);
    VF den = V_SET1(d);
    size_t i = 0;
    for (; i + V_WIDTH <= n; i += V_WIDTH)
        V_STORE(y + i, V_FN(v_canon)(V_MUL(V_DIV(V_LOAD(x + i), den), V_LOAD(gamma + i))));
    for (; i < n; i++)
        y[i] = bib_f32_canon((x[i] / d) * gamma[i]);
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
    .layernorm = V_FN(row_layernorm),
    .rmsnorm = V_FN(row_rmsnorm),
    .sum = V_FN(row_sum),
    .max = V_FN(row_max),
    .axpy = V_FN(row_axpy),
};
