/* backends/cpu/gemm_tile.h: the GEMM micro-kernel, written once for every
 * vector width (included by gemm_avx2.c and gemm_avx512.c).
 *
 * A tile is `rows` (1 .. MR) rows of C by two vectors of columns (NR = 2 x
 * the lanes). Each lane is one output's fma chain over k ascending
 * (spec/numerics.md section 3): two vectors hold B's row, A's element is
 * broadcast from the packed panel. FINISH adds the bias after the chain and
 * canonicalizes NaN. kernel_1 .. kernel_MR are the tile at each row count, so
 * a short M costs its own rows only.
 *
 * The includer defines, before including:
 *   MR, NR          the tile (NR is two vectors)
 *   UNROLL          the unroll pragma for loops over rows (MR)
 *   VEC             the vector type;  LANES its float count (NR / 2)
 *   VLOAD(p) VSTORE(p, v) VZERO() VADD(a, b) VFMA(a, b, c) (a*b + c, fused)
 *   VBCAST(p)       a vector of *p
 *   VCANON(v, nan)  v with its NaN lanes replaced by nan
 *   VNAN()          the canonical NaN in every lane
 *   TILE_PREFETCH(c, rows, ldc)   what to prefetch before the k loop (may be empty)
 *   B_PREFETCH(bp)  what to prefetch beside each k's row of B read in place
 *                   (may be empty)
 *   B_PREFETCH_PACKED(bp)  the same for packed B (ldbp == NR; may be empty)
 */

static inline __attribute__((always_inline)) void
tile(const int rows, size_t kc, const float *restrict ap, const float *restrict bp, size_t ldbp,
     float *restrict c, size_t ldc, unsigned flags, const float *restrict bias) {
    VEC c0[MR], c1[MR];
    if (flags & BIB_GEMM_KERNEL_ACCUMULATE) {
        UNROLL for (int i = 0; i < rows; i++) {
            c0[i] = VLOAD(c + (size_t)i * ldc);
            c1[i] = VLOAD(c + (size_t)i * ldc + LANES);
        }
    } else {
        UNROLL for (int i = 0; i < rows; i++) {
            c0[i] = VZERO();
            c1[i] = VZERO();
        }
    }
    TILE_PREFETCH(c, rows, ldc);
    /* One k: B's row, then each row's broadcast and two fmas. The loop is
     * written twice so that each kind of B has its own prefetch. */
#define TILE_K_LOOP(PREFETCH)                                                                      \
    for (size_t p = 0; p < kc; p++) {                                                              \
        VEC b0 = VLOAD(bp), b1 = VLOAD(bp + LANES);                                                \
        PREFETCH(bp);                                                                              \
        UNROLL for (int i = 0; i < rows; i++) {                                                    \
            VEC a = VBCAST(ap + i);                                                                \
            c0[i] = VFMA(a, b0, c0[i]);                                                            \
            c1[i] = VFMA(a, b1, c1[i]);                                                            \
        }                                                                                          \
        ap += rows;                                                                                \
        bp += ldbp;                                                                                \
    }
    if (ldbp == NR)
        TILE_K_LOOP(B_PREFETCH_PACKED)
    else
        TILE_K_LOOP(B_PREFETCH)
#undef TILE_K_LOOP
    if (flags & BIB_GEMM_KERNEL_FINISH) {
        if (bias != NULL) {
            VEC bias0 = VLOAD(bias), bias1 = VLOAD(bias + LANES);
            UNROLL for (int i = 0; i < rows; i++) {
                c0[i] = VADD(c0[i], bias0);
                c1[i] = VADD(c1[i], bias1);
            }
        }
        VEC nan = VNAN();
        UNROLL for (int i = 0; i < rows; i++) {
            c0[i] = VCANON(c0[i], nan);
            c1[i] = VCANON(c1[i], nan);
        }
    }
    UNROLL for (int i = 0; i < rows; i++) {
        VSTORE(c + (size_t)i * ldc, c0[i]);
        VSTORE(c + (size_t)i * ldc + LANES, c1[i]);
    }
}

#define KERNEL(R)                                                                                  \
    static void kernel_##R(size_t kc, const float *restrict ap, const float *restrict bp,          \
                           size_t ldbp, float *restrict c, size_t ldc, unsigned flags,             \
                           const float *restrict bias) {                                           \
        tile(R, kc, ap, bp, ldbp, c, ldc, flags, bias);                                            \
    }
