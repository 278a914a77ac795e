/* backends/cpu/gemm_avx2.c: the AVX2 + FMA GEMM micro-kernel (6 x 16 tile).
 *
 * Compiled with -mavx2 -mfma; reached only through bib_gemm_kernel_avx2 after
 * cpufeatures selected the avx2 level (or higher). 12 ymm accumulators, each
 * lane one output's fma chain over k ascending; two ymm hold B's row, A is
 * broadcast from the packed panel. */
#include "backends/cpu/gemm.h"

#include <immintrin.h>

#define MR 6
#define NR 16

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

#define DECLARE(i) __m256 c##i##_0, c##i##_1;
#define ZERO(i) c##i##_0 = _mm256_setzero_ps(), c##i##_1 = _mm256_setzero_ps();
#define LOAD(i)                                                                                    \
    c##i##_0 = _mm256_loadu_ps(c + (i)*ldc), c##i##_1 = _mm256_loadu_ps(c + (i)*ldc + 8);
#define STEP(i)                                                                                    \
    {                                                                                              \
        __m256 ai = _mm256_broadcast_ss(ap + (i));                                                 \
        c##i##_0 = _mm256_fmadd_ps(ai, b0, c##i##_0);                                              \
        c##i##_1 = _mm256_fmadd_ps(ai, b1, c##i##_1);                                              \
    }
#define ADD_BIAS(i)                                                                                \
    c##i##_0 = _mm256_add_ps(c##i##_0, bias0), c##i##_1 = _mm256_add_ps(c##i##_1, bias1);
#define CANON(i)                                                                                   \
    c##i##_0 = _mm256_blendv_ps(c##i##_0, nan, _mm256_cmp_ps(c##i##_0, c##i##_0, _CMP_UNORD_Q)),   \
    c##i##_1 = _mm256_blendv_ps(c##i##_1, nan, _mm256_cmp_ps(c##i##_1, c##i##_1, _CMP_UNORD_Q));
#define STORE(i)                                                                                   \
    _mm256_storeu_ps(c + (i)*ldc, c##i##_0), _mm256_storeu_ps(c + (i)*ldc + 8, c##i##_1);

static void kernel_6x16(size_t kc, const float *restrict ap, const float *restrict bp, size_t ldbp,
                        float *restrict c, size_t ldc, unsigned flags, const float *restrict bias) {
    ROWS(DECLARE)
    if (flags & BIB_GEMM_KERNEL_ACCUMULATE) {
        ROWS(LOAD)
    } else {
        ROWS(ZERO)
    }
    for (size_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        ROWS(STEP)
        ap += MR;
        bp += ldbp;
    }
    if (flags & BIB_GEMM_KERNEL_FINISH) {
        if (bias != NULL) {
            __m256 bias0 = _mm256_loadu_ps(bias), bias1 = _mm256_loadu_ps(bias + 8);
            ROWS(ADD_BIAS)
        }
        __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)BIB_GEMM_CANONICAL_NAN_BITS));
        ROWS(CANON)
    }
    ROWS(STORE)
}

const bib_gemm_kernel_t bib_gemm_kernel_avx2 = {
    .name = "avx2 6x16",
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = MR * 24,
    .nc = 1024,
    .kernel = kernel_6x16,
};
