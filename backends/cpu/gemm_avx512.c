/* backends/cpu/gemm_avx512.c: the AVX-512 GEMM micro-kernels (up to 14 x 32).
 *
 * Compiled with -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma; reached only
 * through bib_gemm_kernel_avx512 after cpufeatures selected the avx512 level.
 * Up to 28 zmm accumulators, each lane one output's fma chain over k
 * ascending; two zmm hold B's row, A is broadcast from the packed panel.
 * One kernel per row count (1 .. 14), all from the template in gemm_tile.h, so a short M
 * (a decoder's few tokens, the last rows of a tall M) costs its own rows only.
 *
 * Zen 4 runs one zmm fma per cycle (two 256-bit pipes), Zen 5 two, with a
 * latency of 4: 28 independent chains hide it, and per k the 16 loads (2 rows
 * of B, 14 broadcasts of A) fit the load ports beside the 28 fmas.
 *
 * Blocks, chosen by measurement against dnnl_sgemm on a Zen 5 (48 KiB L1d,
 * 1 MiB L2; bench/RESULTS.md): kc 768 (C's tiles are loaded and stored once
 * per K block, so a long block pays that rarely; B's micro-panel streams from
 * L2: 384 gave 0.86-0.88x of dnnl_sgemm at 2048 and 4096, 768 0.92-0.95x),
 * mc 336, nc 2048 (A packed twice per K block at n = 4096; B's packed block,
 * 6 MiB, is one per thread and shares the L3). With B read in place (up to
 * 128 rows a thread), kc 384: 16 x 4096 x 4096 ran at 1.2x dnnl_sgemm with
 * it, 1.1x with 768. A is packed by a 16 x 16 register transpose (pack_a
 * below). */
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
 * 4096 went from 0.5x to 0.9x of dnnl_sgemm). */
#define B_PREFETCH(bp)                                                                             \
    do {                                                                                           \
        _mm_prefetch((const char *)((bp) + NR), _MM_HINT_T1);                                      \
        _mm_prefetch((const char *)((bp) + NR + LANES), _MM_HINT_T1);                              \
    } while (0)
/* Packed, B's micro-panel (kc x NR, 96 KiB at kc 768) streams from L2: bring
 * the row 8 k's ahead into L1. On the Xeon, one thread, three rounds each:
 * 2048^3 151 -> 161 GFLOP/s, 4096^3 151 -> 156, 512^3 156 -> 165 (the
 * prefetch of the next k's row it replaces was already in L1). */
#define B_PREFETCH_PACKED(bp)                                                                      \
    do {                                                                                           \
        _mm_prefetch((const char *)((bp) + 8 * NR), _MM_HINT_T0);                                  \
        _mm_prefetch((const char *)((bp) + 8 * NR + LANES), _MM_HINT_T0);                          \
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
 * L2: a block of GEMV_COLS columns) between those steps, exactly as a K block
 * leaves them, so each output is still one fma chain over k ascending. */
#define GEMV_ROWS 16 /* 8 gave 0.88x of dnnl_sgemm at 1 x 4096 x 4096, 0.69x at N = 11008 */
#define GEMV_COLS 16384

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
                    _Pragma("GCC unroll 16") for (size_t t = 0; t < GEMV_ROWS; t++) acc =
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

#define UNROLL16 _Pragma("GCC unroll 16")

/* The 16 x 16 transpose of r[0..16) in place: r[q] becomes column q. Four
 * rounds of in-lane and cross-lane shuffles, 64 in all. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
    UNROLL16 for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* r[4g + c], lane l: rows 4g .. 4g+3 at column 4l + c */
    UNROLL16 for (int g = 0; g < 4; g++) {
        __m512d lo = _mm512_castps_pd(t[4 * g]), hi = _mm512_castps_pd(t[4 * g + 1]);
        __m512d lo2 = _mm512_castps_pd(t[4 * g + 2]), hi2 = _mm512_castps_pd(t[4 * g + 3]);
        r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, lo2));
        r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, lo2));
        r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi, hi2));
        r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi, hi2));
    }
    UNROLL16 for (int c = 0; c < 4; c++) {
        t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    }
    UNROLL16 for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
        r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
    }
}

/* One pass's A panel: out[p * rows + r] = a[r * lda + p]. Sixteen k's at a
 * time: each row's 16 floats are one load, a 16 x 16 transpose turns them
 * into the 16 k's, and each k's rows are one store of 16 lanes whose last
 * 16 - rows lanes the next store overwrites (the caller leaves 16 floats of
 * slack past the panels). The scalar transposing copy read one float of each
 * row in turn: at 256 x 256 it took a sixth of the time. */
static void pack_a(const float *restrict a, size_t lda, size_t rows, size_t kc,
                   float *restrict out) {
    size_t p = 0;
    for (; p + 16 <= kc; p += 16) {
        __m512 r[16];
        UNROLL16 for (size_t i = 0; i < 16; i++) r[i] =
            _mm512_maskz_loadu_ps(i < rows ? 0xFFFF : 0, a + (i < rows ? i : 0) * lda + p);
        transpose16(r);
        float *dst = out + p * rows;
        UNROLL16 for (size_t q = 0; q < 16; q++) _mm512_storeu_ps(dst + q * rows, r[q]);
    }
    for (; p < kc; p++)
        for (size_t i = 0; i < rows; i++)
            out[p * rows + i] = a[i * lda + p];
}

const bib_gemm_kernel_t bib_gemm_kernel_avx512 = {
    .name = "avx512 14x32",
    .mr = MR,
    .nr = NR,
    .kc = 768,
    .kc_direct = 384,
    .mc = MR * 24,
    .nc = 2048,
    .kernels = {NULL, kernel_1, kernel_2, kernel_3, kernel_4, kernel_5, kernel_6, kernel_7,
                kernel_8, kernel_9, kernel_10, kernel_11, kernel_12, kernel_13, kernel_14},
    .pack_a = pack_a,
    .gemv = gemv,
};
