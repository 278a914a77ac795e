/* backends/cpu/gemm_avx2.c: the AVX2 + FMA GEMM micro-kernel (6 x 16 tile).
 *
 * Compiled with -mavx2 -mfma; reached only through bib_gemm_kernel_avx2 after
 * cpufeatures selected the avx2 level (or higher). Up to 12 ymm accumulators,
 * each lane one output's fma chain over k ascending; two ymm hold B's row, A
 * is broadcast from the packed panel. One kernel per row count (1 .. 6), all
 * from one template. */
#include "backends/cpu/gemm.h"

#include <immintrin.h>

#define MR 6
#define NR 16

#define UNROLL _Pragma("GCC unroll 6")

static inline __attribute__((always_inline)) void
tile(const int rows, size_t kc, const float *restrict ap, const float *restrict bp, size_t ldbp,
     float *restrict c, size_t ldc, unsigned flags, const float *restrict bias) {
    __m256 c0[MR], c1[MR];
    if (flags & BIB_GEMM_KERNEL_ACCUMULATE) {
        UNROLL for (int i = 0; i < rows; i++) {
            c0[i] = _mm256_loadu_ps(c + (size_t)i * ldc);
            c1[i] = _mm256_loadu_ps(c + (size_t)i * ldc + 8);
        }
    } else {
        UNROLL for (int i = 0; i < rows; i++) {
            c0[i] = _mm256_setzero_ps();
            c1[i] = _mm256_setzero_ps();
        }
    }
    for (size_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        UNROLL for (int i = 0; i < rows; i++) {
            __m256 a = _mm256_broadcast_ss(ap + i);
            c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
        }
        ap += rows;
        bp += ldbp;
    }
    if (flags & BIB_GEMM_KERNEL_FINISH) {
        if (bias != NULL) {
            __m256 bias0 = _mm256_loadu_ps(bias), bias1 = _mm256_loadu_ps(bias + 8);
            UNROLL for (int i = 0; i < rows; i++) {
                c0[i] = _mm256_add_ps(c0[i], bias0);
                c1[i] = _mm256_add_ps(c1[i], bias1);
            }
        }
        __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)BIB_GEMM_CANONICAL_NAN_BITS));
        UNROLL for (int i = 0; i < rows; i++) {
            c0[i] = _mm256_blendv_ps(c0[i], nan, _mm256_cmp_ps(c0[i], c0[i], _CMP_UNORD_Q));
            c1[i] = _mm256_blendv_ps(c1[i], nan, _mm256_cmp_ps(c1[i], c1[i], _CMP_UNORD_Q));
        }
    }
    UNROLL for (int i = 0; i < rows; i++) {
        _mm256_storeu_ps(c + (size_t)i * ldc, c0[i]);
        _mm256_storeu_ps(c + (size_t)i * ldc + 8, c1[i]);
    }
}

#define KERNEL(R)                                                                                  \
    static void kernel_##R(size_t kc, const float *restrict ap, const float *restrict bp,          \
                           size_t ldbp, float *restrict c, size_t ldc, unsigned flags,             \
                           const float *restrict bias) {                                           \
        tile(R, kc, ap, bp, ldbp, c, ldc, flags, bias);                                            \
    }
KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
KERNEL(5)
KERNEL(6)

const bib_gemm_kernel_t bib_gemm_kernel_avx2 = {
    .name = "avx2 6x16",
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = MR * 24,
    .nc = 1024,
    .kernels = {NULL, kernel_1, kernel_2, kernel_3, kernel_4, kernel_5, kernel_6},
};
