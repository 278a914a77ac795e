/* backends/cpu/unary.h: the elementwise unary ops of bib_unary_t, element by
 * element, from bmath.h.
 *
 * The scalar reference (ops.c) runs them. The SIMD levels run each op's
 * vector form (ops_simd.h: the same steps lane by lane), and fall back to
 * these for an op without one. Being inline, each translation unit compiles
 * them with its own flags: in ops_avx2.c and ops_avx512.c an fmaf is the fma
 * instruction rather than a call into libm. The bits are the same: fma is
 * exact either way.
 */
#ifndef BIB_CPU_UNARY_H
#define BIB_CPU_UNARY_H

#include <stddef.h>

#include "backends/cpu/bmath.h"
#include "isa/kernels.h"

static inline float bib_unary1(bib_unary_t op, float x) {
    switch (op) {
    case BIB_UNARY_RELU:
        return bib_relu(x);
    case BIB_UNARY_SIGMOID:
        return bib_sigmoid(x);
    case BIB_UNARY_TANH:
        return bib_tanh(x);
    case BIB_UNARY_GELU:
        return bib_gelu(x);
    case BIB_UNARY_EXP:
        return bib_exp(x);
    case BIB_UNARY_ERF:
        return bib_erf(x);
    case BIB_UNARY_LOG:
        return bib_log(x);
    case BIB_UNARY_SQRT:
        return bib_sqrt_op(x);
    case BIB_UNARY_RSQRT:
        return bib_rsqrt(x);
    case BIB_UNARY_RECIP:
        return bib_recip(x);
    case BIB_UNARY_ABS:
        return bib_abs(x);
    case BIB_UNARY_NEG:
        return bib_neg(x);
    case BIB_UNARY_GELU_ERF:
        return bib_gelu_erf(x);
    case BIB_UNARY_FLOOR:
        return bib_round_integral(x, 0);
    case BIB_UNARY_CEIL:
        return bib_round_integral(x, 1);
    case BIB_UNARY_ROUND:
        return bib_round_integral(x, 2);
    case BIB_UNARY_SIN:
        return bib_sincos(x, 0);
    case BIB_UNARY_COS:
        return bib_sincos(x, 1);
    case BIB_UNARY__COUNT: /* not an op; -Wswitch names a unary op left out */
        break;
    }
    return bib_f32_canonical_nan();
}

/* y[i] = op(x[i]) for n elements: one loop per op (a case for each unary
 * row of isa/opcodes.def), so each loop is the op's own code. */
static inline void bib_unary_row(bib_unary_t op, const float *x, float *y, size_t n) {
    switch (op) {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(UNARY, kernel, sub))                                              \
    (case BIB_UNARY_##sub                                                                          \
     : for (size_t i = 0; i < n; i++) y[i] = bib_unary1(BIB_UNARY_##sub, x[i]);                    \
     return;)
#include "isa/opcodes.def"
    case BIB_UNARY__COUNT:
        break;
    }
}

#endif
