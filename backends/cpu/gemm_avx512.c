/* backends/cpu/gemm_avx512.c: the AVX-512 GEMM micro-kernel (14 x 32 tile).
 *
 * Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma; reached only
 * through bib_gemm_kernel_avx512 after cpufeatures selected the avx512 level.
 * 28 zmm accumulators, each lane one output's fma chain over k ascending;
 * two zmm hold B's row, A is broadcast from the packed panel. */
#include "backends/cpu/gemm.h"

#include <immintrin.h>

#define MR 14
#define NR 32

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

#define DECLARE(i) __m512 c##i##_0, c##i##_1;
#define ZERO(i) c##i##_0 = _mm512_setzero_ps(), c##i##_1 = _mm512_setzero_ps();
#define LOAD(i)                                                                                    \
    c##i##_0 = _mm512_loadu_ps(c + (i)*ldc), c##i##_1 = _mm512_loadu_ps(c + (i)*ldc + 16);
#define STEP(i)                                                                                    \
    {                                                                                              \
        __m512 ai = _mm512_set1_ps(ap[i]);                                                         \
        c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0);                                              \
        c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1);                                              \
    }
#define ADD_BIAS(i)                                                                                \
    c##i##_0 = _mm512_add_ps(c##i##_0, bias0), c##i##_1 = _mm512_add_ps(c##i##_1, bias1);
#define CANON(i)                                                                                   \
    c##i##_0 =                                                                                     \
        _mm512_mask_mov_ps(c##i##_0, _mm512_cmp_ps_mask(c##i##_0, c##i##_0, _CMP_UNORD_Q), nan),   \
    c##i##_1 =                                                                                     \
        _mm512_mask_mov_ps(c##i##_1, _mm512_cmp_ps_mask(c##i##_1, c##i##_1, _CMP_UNORD_Q), nan);
#define STORE(i)                                                                                   \
    _mm512_storeu_ps(c + (i)*ldc, c##i##_0), _mm512_storeu_ps(c + (i)*ldc + 16, c##i##_1);
#define PREFETCH(i)                                                                                \
    _mm_prefetch((const char *)(c + (i)*ldc), _MM_HINT_T0),                                        \
        _mm_prefetch((const char *)(c + (i)*ldc + 16), _MM_HINT_T0);

static void kernel_14x32(size_t kc, const float *restrict ap, const float *restrict bp, size_t ldbp,
                         float *restrict c, size_t ldc, unsigned flags,
                         const float *restrict bias) {
    ROWS(DECLARE)
    if (flags & BIB_GEMM_KERNEL_ACCUMULATE) {
        ROWS(LOAD)
    } else {
        ROWS(PREFETCH)
        ROWS(ZERO)
    }
    for (size_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        ROWS(STEP)
        ap += MR;
        bp += ldbp;
    }
    if (flags & BIB_GEMM_KERNEL_FINISH) {
        if (bias != NULL) {
            __m512 bias0 = _mm512_loadu_ps(bias), bias1 = _mm512_loadu_ps(bias + 16);
            ROWS(ADD_BIAS)
        }
        __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32((int)BIB_GEMM_CANONICAL_NAN_BITS));
        ROWS(CANON)
    }
    ROWS(STORE)
}

const bib_gemm_kernel_t bib_gemm_kernel_avx512 = {
    .name = "avx512 14x32",
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .mc = MR * 24,
    .nc = 512,
    .kernel = kernel_14x32,
};
