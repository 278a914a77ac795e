/* backends/cpu/ops_avx2.c: the row functions for AVX2 + FMA (8 lanes).
 *
 * Only the vector primitives live here; the functions themselves are
 * ops_simd.h, shared with AVX-512, and give the scalar reference's bits.
 * Compiled with -mavx2 -mfma (Makefile); called only when cpufeatures says
 * the CPU has AVX2 and FMA.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backends/cpu/bmath.h"
#include "backends/cpu/ops.h"

typedef __m256 VF;
typedef __m256 VM;
typedef __m256i VI;

#define V_WIDTH 8
#define V_SUFFIX avx2
#define V_NAME "avx2"
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ZERO() _mm256_setzero_ps()
#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MUL _mm256_mul_ps
#define V_DIV _mm256_div_ps
#define V_FMA _mm256_fmadd_ps
#define V_FNMA _mm256_fnmadd_ps
#define V_MIN _mm256_min_ps
#define V_MAX _mm256_max_ps
#define V_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define V_LT(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define V_GE(a, b) _mm256_cmp_ps((a), (b), _CMP_GE_OQ)
#define V_EQ(a, b) _mm256_cmp_ps((a), (b), _CMP_EQ_OQ)
#define V_UNORD(a, b) _mm256_cmp_ps((a), (b), _CMP_UNORD_Q)
#define V_SELECT(m, a, b) _mm256_blendv_ps((b), (a), (m))
#define V_AND_BITS(a, bits)                                                                        \
    _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32((int)(bits))))
#define V_OR_BITS(a, b) _mm256_or_ps((a), (b))
#define V_AND_MASK(a, m) _mm256_and_ps((a), (m))
#define V_TAILMASK(r)                                                                              \
    _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(r)),                            \
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define V_HALF_SPLIT(kf, s1, s2)                                                                   \
    do {                                                                                           \
        __m256i k_ = _mm256_cvtps_epi32(kf);                                                       \
        __m256i k1_ = _mm256_srai_epi32(k_, 1);                                                    \
        __m256i k2_ = _mm256_sub_epi32(k_, k1_);                                                   \
        __m256i b_ = _mm256_set1_epi32(127);                                                       \
        (s1) = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1_, b_), 23));              \
        (s2) = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2_, b_), 23));              \
    } while (0)
#define V_ORDER_KEY(x)                                                                             \
    _mm256_xor_si256(_mm256_castps_si256(x),                                                       \
                     _mm256_srli_epi32(_mm256_srai_epi32(_mm256_castps_si256(x), 31), 1))
#define V_IMAX _mm256_max_epi32
#define V_ISET1 _mm256_set1_epi32
#define V_ISTORE(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
#define V_MASK_NONE() _mm256_setzero_ps()
#define V_MASK_OR(a, b) _mm256_or_ps((a), (b))
#define V_MASK_ANY(m) (_mm256_movemask_ps(m) != 0)

#include "backends/cpu/ops_simd.h"
