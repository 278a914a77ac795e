/* backends/cpu/gemm_avx2.c: the AVX2 + FMA GEMM micro-kernel (6 x 16 tile).
 *
 * Compiled with -mavx2 -mfma; reached only through bib_gemm_kernel_avx2 after
 * cpufeatures selected the avx2 level (or higher). Up to 12 ymm accumulators,
 * each lane one output's fma chain over k ascending; two ymm hold B's row, A
 * is broadcast from the packed panel. One kernel per row count (1 .. 6), all
 * from the one template in gemm_tile.h. */
#include "backends/cpu/gemm.h"

#include <immintrin.h>

#define MR 6
#define NR 16

#define UNROLL _Pragma("GCC unroll 6")
#define VEC __m256
#define LANES 8
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VZERO() _mm256_setzero_ps()
#define VADD(a, b) _mm256_add_ps(a, b)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VBCAST(p) _mm256_broadcast_ss(p)
#define VNAN() _mm256_castsi256_ps(_mm256_set1_epi32((int)BIB_GEMM_CANONICAL_NAN_BITS))
#define VCANON(v, nan) _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q))
#define TILE_PREFETCH(c, rows, ldc)

#define B_PREFETCH(bp)
#define B_PREFETCH_PACKED(bp)
#include "backends/cpu/gemm_tile.h"

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
