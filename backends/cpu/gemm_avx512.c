/* backends/cpu/gemm_avx512.c: the AVX-512 GEMM micro-kernels (up to 14 x 32).
 *
 * Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma; reached only
 * through bib_gemm_kernel_avx512 after cpufeatures selected the avx512 level.
 * Up to 28 zmm accumulators, each lane one output's fma chain over k
 * ascending; two zmm hold B's row, A is broadcast from the packed panel.
 * One kernel per row count (1 .. 14), all from the template in gemm_tile.h, so a short M
 * (a decoder's few tokens, the last rows of a tall M) costs its own rows only.
 *
 * Zen 4 runs one zmm fma per cycle (two 256-bit pipes) with a latency of 4:
 * 28 independent chains hide it, and per k the 16 loads (2 rows of B, 14
 * broadcasts of A) fit the load ports beside the 28 fmas.
 *
 * Blocks (Zen 4: 32 KiB L1d, 1 MiB L2), chosen by measurement against
 * dnnl_sgemm: kc 384 (a K block is long, so C's tiles are reloaded
 * rarely; B's 48 KiB micro-panel streams from L2), mc 336 (A's 504 KiB
 * block stays in L2 beside it), nc 4096 (A packed once per K block). */
#include "backends/cpu/gemm.h"

#include <immintrin.h>

#define MR 14
#define NR 32

#define UNROLL _Pragma("GCC unroll 14")
#define VEC __m512
#define LANES 16
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VZERO() _mm512_setzero_ps()
#define VADD(a, b) _mm512_add_ps(a, b)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VBCAST(p) _mm512_set1_ps(*(p))
#define VNAN() _mm512_castsi512_ps(_mm512_set1_epi32((int)BIB_GEMM_CANONICAL_NAN_BITS))
#define VCANON(v, nan) _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan)
/* The tile below this one is usually the next call's: bring its C rows in
 * while this one computes (a prefetch never faults, even past C). */
#define TILE_PREFETCH(c, rows, ldc)                                                                \
    do {                                                                                           \
        const float *next = (c) + (size_t)(rows) * (ldc);                                          \
        UNROLL for (int i = 0; i < (rows); i++) {                                                  \
            _mm_prefetch((const char *)(next + (size_t)i * (ldc)), _MM_HINT_T0);                   \
            _mm_prefetch((const char *)(next + (size_t)i * (ldc) + LANES), _MM_HINT_T0);           \
        }                                                                                          \
    } while (0)

/* Read in place (a short M), the next tile's B is the NR columns to the right
 * of this k's row: bring them to L2 while this tile computes, a whole tile
 * ahead of their use, so the strided rows never wait on memory (16 x 4096 x
 * 4096 went from 0.5x to 0.9x of dnnl_sgemm). Packed, bp + NR is the next
 * k's row, already near: two cheap load-port slots per k. */
#define B_PREFETCH(bp)                                                                             \
    do {                                                                                           \
        _mm_prefetch((const char *)((bp) + NR), _MM_HINT_T1);                                      \
        _mm_prefetch((const char *)((bp) + NR + LANES), _MM_HINT_T1);                              \
    } while (0)
#include "backends/cpu/gemm_tile.h"

KERNEL(1)
KERNEL(2)
KERNEL(3)
KERNEL(4)
KERNEL(5)
KERNEL(6)
KERNEL(7)
KERNEL(8)
KERNEL(9)
KERNEL(10)
KERNEL(11)
KERNEL(12)
KERNEL(13)
KERNEL(14)

/* One row: c[0, n) = a[0, k) . B[k][n], B read in place. A GEMV is bound by
 * reading B once, so B is read as it lies, GEMV_ROWS rows at a time, each a
 * sequential stream the prefetchers follow; the accumulators live in c (in
 * L1: a block of GEMV_COLS columns) between those steps, exactly as a K block
 * leaves them, so each output is still one fma chain over k ascending. */
#define GEMV_ROWS 8
#define GEMV_COLS 2048

static void gemv(size_t n, size_t k, const float *restrict a, const float *restrict b, size_t ldb,
                 float *restrict c, const float *restrict bias) {
    for (size_t j0 = 0; j0 < n; j0 += GEMV_COLS) {
        size_t cols = n - j0 < GEMV_COLS ? n - j0 : GEMV_COLS;
        float *restrict cb = c + j0;
        for (size_t p0 = 0; p0 < k; p0 += GEMV_ROWS) {
            size_t rows = k - p0 < GEMV_ROWS ? k - p0 : GEMV_ROWS;
            const float *restrict bb = b + p0 * ldb + j0;
            __m512 av[GEMV_ROWS];
            for (size_t t = 0; t < rows; t++)
                av[t] = _mm512_set1_ps(a[p0 + t]);
            for (size_t j = 0; j < cols; j += 16) {
                __mmask16 m =
                    cols - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cols - j)) - 1u);
                __m512 acc = p0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, cb + j);
                if (rows == GEMV_ROWS) {
                    _Pragma("GCC unroll 8") for (size_t t = 0; t < GEMV_ROWS; t++) acc =
                        _mm512_fmadd_ps(av[t], _mm512_maskz_loadu_ps(m, bb + t * ldb + j), acc);
                } else {
                    for (size_t t = 0; t < rows; t++)
                        acc =
                            _mm512_fmadd_ps(av[t], _mm512_maskz_loadu_ps(m, bb + t * ldb + j), acc);
                }
                _mm512_mask_storeu_ps(cb + j, m, acc);
            }
        }
        __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32((int)BIB_GEMM_CANONICAL_NAN_BITS));
        for (size_t j = 0; j < cols; j += 16) {
            __mmask16 m = cols - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cols - j)) - 1u);
            __m512 acc = k == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, cb + j);
            if (bias != NULL)
                acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, bias + j0 + j));
            acc = _mm512_mask_mov_ps(acc, _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q), nan);
            _mm512_mask_storeu_ps(cb + j, m, acc);
        }
    }
}

const bib_gemm_kernel_t bib_gemm_kernel_avx512 = {
    .name = "avx512 14x32",
    .mr = MR,
    .nr = NR,
    .kc = 384,
    .mc = MR * 24,
    .nc = 4096,
    .kernels = {NULL, kernel_1, kernel_2, kernel_3, kernel_4, kernel_5, kernel_6, kernel_7,
                kernel_8, kernel_9, kernel_10, kernel_11, kernel_12, kernel_13, kernel_14},
    .gemv = gemv,
};
