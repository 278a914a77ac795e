/* backends/cpu/ops_avx512.c: the row functions for AVX-512 (16 lanes).
 *
 * Only the vector primitives live here; the functions themselves are
 * ops_simd.h, shared with AVX2, and give the scalar reference's bits.
 * Compiled with AVX-512 flags (Makefile); called only when cpufeatures says
 * the CPU has AVX-512F/DQ/BW/VL.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/cpu/bmath.h"
#include "backends/cpu/ops.h"

typedef __m512 VF;
typedef __mmask16 VM;
typedef __m512i VI;

#define V_WIDTH 16
#define V_SUFFIX avx512
#define V_NAME "avx512"
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ZERO() _mm512_setzero_ps()
#define V_ADD _mm512_add_ps
#define V_SUB _mm512_sub_ps
#define V_MUL _mm512_mul_ps
#define V_DIV _mm512_div_ps
#define V_FMA _mm512_fmadd_ps
#define V_FNMA _mm512_fnmadd_ps
#define V_MIN _mm512_min_ps
#define V_MAX _mm512_max_ps
#define V_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define V_LT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ)
#define V_GE(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GE_OQ)
#define V_EQ(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_EQ_OQ)
#define V_UNORD(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_UNORD_Q)
#define V_SELECT(m, a, b) _mm512_mask_blend_ps((m), (b), (a))
#define V_AND_BITS(a, bits)                                                                        \
    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)(bits))))
#define V_OR_BITS(a, b)                                                                            \
    _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define V_AND_MASK(a, m)                                                                           \
    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(m)))
#define V_TAILMASK(r)                                                                              \
    _mm512_castsi512_ps(_mm512_maskz_set1_epi32((__mmask16)((1u << (r)) - 1u), -1))
#define V_HALF_SPLIT(kf, s1, s2)                                                                   \
    do {                                                                                           \
        __m512i k_ = _mm512_cvtps_epi32(kf);                                                       \
        __m512i k1_ = _mm512_srai_epi32(k_, 1);                                                    \
        __m512i k2_ = _mm512_sub_epi32(k_, k1_);                                                   \
        __m512i b_ = _mm512_set1_epi32(127);                                                       \
        (s1) = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1_, b_), 23));              \
        (s2) = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2_, b_), 23));              \
    } while (0)
#define V_ORDER_KEY(x)                                                                             \
    _mm512_xor_si512(_mm512_castps_si512(x),                                                       \
                     _mm512_srli_epi32(_mm512_srai_epi32(_mm512_castps_si512(x), 31), 1))
#define V_IMAX _mm512_max_epi32
#define V_ISET1 _mm512_set1_epi32
#define V_ISTORE(p, v) _mm512_storeu_si512((void *)(p), (v))
#define V_MASK_NONE() ((__mmask16)0)
#define V_MASK_OR(a, b) ((__mmask16)((a) | (b)))
#define V_MASK_ANY(m) ((m) != 0)

#include "backends/cpu/ops_simd.h"
