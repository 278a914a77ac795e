/* backends/cpu/gemm.h: the CPU executor's fp32 matrix multiply.
 *
 * Owns the bit contract of MATMUL on the CPU (spec/numerics.md states it for
 * every executor): each output is
 *
 *     acc = +0.0f; for p = 0 .. k-1 ascending: acc = fmaf(A[i][p], B[p][j], acc);
 *     if (bias) acc = acc + bias[j];          (one IEEE add)
 *     if (isnan(acc)) acc = BIB_GEMM_CANONICAL_NAN;
 *     then the caller's post-op, if any, on the finished value.
 *
 * Every SIMD level and every thread count gives exactly these bits: lanes run
 * across j (one lane, one chain), tiles cut M and N only, and a K block hands
 * its exact fp32 accumulator to the next through C. k == 0 gives +0.0f (+bias).
 *
 * Does not own the activations (relu, gelu): the executor passes them as a
 * post-op so their -0/NaN rules live with the other elementwise kernels.
 */
#ifndef BIB_CPU_GEMM_H
#define BIB_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"
#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/threadpool.h"

/* The one NaN a GEMM writes (quiet, positive, zero payload); NaN payloads
 * differ between fma implementations, so every executor writes this one. */
#define BIB_GEMM_CANONICAL_NAN_BITS 0x7FC00000u

/* Runs on finished outputs C[row][col .. col+count) in place, after the bias
 * and NaN canonicalisation. Called once per (row, column block) with
 * count <= n, possibly from several threads at once on disjoint ranges; it
 * must compute each element from that element alone. */
typedef void (*bib_gemm_post_fn)(float *c, size_t count, void *ctx);

/* C[m,n] = A[m,k] . B[k,n] (+ bias[n]), then post.
 * Row-major with explicit leading dimensions (in elements), so a view into a
 * bigger tensor (one attention head of q[S,H,D]: a = q + h*D, lda = H*D) needs
 * no copy. C must not overlap A, B or bias. */
typedef struct bib_gemm {
    size_t m, n, k;
    const float *a; /* A[i][p] = a[i*lda + p] */
    size_t lda;
    const float *b; /* B[p][j] = b[p*ldb + j]; with b_transposed, B[p][j] = b[j*ldb + p] */
    size_t ldb;
    bool b_transposed; /* b is stored [n][k]: Q . K^T passes K as-is */
    float *c;          /* C[i][j] = c[i*ldc + j]; fully overwritten (no beta) */
    size_t ldc;
    const float *bias;     /* nullable; [n] */
    bib_gemm_post_fn post; /* nullable */
    void *post_ctx;
} bib_gemm_t;

/* Computes *g at `level` (one that bib_cpu_level_select returned on this CPU)
 * on up to bib_threadpool_size(pool) threads; pool may be NULL (calling thread
 * only), which is also how to call it from inside a parallel_for chunk.
 * Returns BIB_E_NOMEM when packing buffers cannot be allocated (C is then
 * partly written), BIB_OK otherwise. */
bib_status_t bib_gemm_f32(bib_threadpool_t *pool, bib_cpu_level_t level, const bib_gemm_t *g);

/* The reference: the contract's loop, literally, on the calling thread with
 * libm fmaf. Slow; it defines the bits the other paths are tested against. */
void bib_gemm_f32_reference(const bib_gemm_t *g);

/* The K block when B is read in place: kc_direct, or fewer rows where a
 * strip of B (kc rows of nr columns, read again by every row tile of A)
 * would not stay near the core:
 *  - rows a page or more apart take a TLB entry each: at most 64 rows, which
 *    the first-level data TLBs of current x86 cores hold;
 *  - rows a power of two apart crowd a few of the L2's sets (ldb = 4096 on a
 *    2 MiB 16-way L2: 8 sets of 16 ways, 128 lines), and a taller strip
 *    evicts itself between two row tiles: at most the rows that fit, but
 *    not under 64.
 * page and the L2's geometry (sets, ways, line in bytes) are 0 where
 * unknown (gemm.c passes them on Intel cores only: on Zen 5 shorter blocks
 * measured slower). Only where the chains pause changes, so the bits are the
 * same whatever it returns. */
size_t bib_gemm_direct_kc(size_t kc_direct, size_t ldb, size_t page, size_t l2_sets, size_t l2_ways,
                          size_t l2_line);

/* ---- internal: the per-level micro-kernels (gemm_avx2.c, gemm_avx512.c) ----
 * A kernel computes one rows x nr tile of C (rows = its index in `kernels`,
 * 1 .. mr) from packed panels:
 *   ap: [kc][rows] (A rows of the tile, k-major), bp: [kc] rows of nr floats,
 *   row p at bp + p*ldbp (ldbp == nr for a packed panel).
 * flags: BIB_GEMM_KERNEL_ACCUMULATE starts from the tile's current C values
 * (the previous K block's exact accumulators) instead of +0; BIB_GEMM_KERNEL_FINISH
 * adds bias[0..nr) (when non-NULL) and canonicalises NaN before storing. */
enum {
    BIB_GEMM_KERNEL_ACCUMULATE = 1u << 0,
    BIB_GEMM_KERNEL_FINISH = 1u << 1,
};

typedef void (*bib_gemm_kernel_fn)(size_t kc, const float *ap, const float *bp, size_t ldbp,
                                   float *c, size_t ldc, unsigned flags, const float *bias);

/* One output row, B not transposed and read in place: c[0, n) = a[0, k) .
 * B[k][n] (b[p*ldb + j]), then bias[0, n) (when non-NULL) and NaN
 * canonicalisation, the same chains as the tiles. */
typedef void (*bib_gemm_gemv_fn)(size_t n, size_t k, const float *a, const float *b, size_t ldb,
                                 float *c, const float *bias);

/* Packs one pass of A: out[p * rows + r] = a[r * lda + p] for p < kc and
 * r < rows (rows <= mr). It may write up to BIB_GEMM_PACK_SLACK floats past
 * the panel, which the caller provides and owns. */
#define BIB_GEMM_PACK_SLACK 16
typedef void (*bib_gemm_pack_a_fn)(const float *a, size_t lda, size_t rows, size_t kc, float *out);

#define BIB_GEMM_MAX_MR 14

typedef struct bib_gemm_kernel {
    const char *name;
    uint32_t mr, nr;     /* register tile */
    uint32_t kc, mc, nc; /* cache blocks: kc x nr of B in L1, mc x kc of A in L2, kc x nc of B */
    uint32_t kc_direct;  /* kc when B is read in place (a short M); 0: kc. At most kc. */
    bib_gemm_kernel_fn kernels[BIB_GEMM_MAX_MR + 1]; /* [rows], rows = 1 .. mr */
    bib_gemm_gemv_fn gemv;                           /* nullable: rows of one use the tiles */
    bib_gemm_pack_a_fn pack_a;                       /* nullable: the scalar copy */
} bib_gemm_kernel_t;

extern const bib_gemm_kernel_t bib_gemm_kernel_avx2;
extern const bib_gemm_kernel_t bib_gemm_kernel_avx512;

#endif
