/* backends/cpu/ops.h: the CPU executor's tensor kernels (internal header).
 *
 * ops.c holds the scalar reference of every kernel except the GEMM core and
 * runs each call row by row through a bib_cpu_rowops_t, the per-SIMD-level
 * table of row functions (scalar in ops.c, AVX2 in ops_avx2.c, AVX-512 in
 * ops_avx512.c). Every level gives the scalar reference's bits: each row
 * function is the sequence spec/numerics.md writes down, lane by lane.
 *
 * Work is split into fixed chunks of whole rows (or elements), and every row
 * is computed the same way whatever chunk or thread it lands in, so the bits
 * never depend on the thread count.
 */
#ifndef BIB_CPU_OPS_H
#define BIB_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/threadpool.h"

/* Output rows of one plane under a window (CONV's direct form and POOL):
 * output row k < rows, column q < ow reads the window's taps (i, j),
 * i < kh, j < kw, at input row ih = ih0 + k*sh + i*dh and column
 * iw = q*sw + off0 + j*dw of an h x in_w plane; a tap outside the plane is
 * padding. */
typedef struct bib_window_rows {
    const float *x; /* the (first) input plane */
    size_t kh, kw, h, in_w, ow, rows;
    int64_t ih0, sh, dh, off0, sw, dw;
} bib_window_rows_t;

/* CONV's direct form (kernel.def's CONV): out[k*ow + q] is the chain of fmas
 * over the taps (ci, i, j) ascending, ci < cg, of wt[(ci*kh + i)*kw + j] and
 * the input at (ih, iw) of plane x + ci*h*in_w, +0 where the tap is padding.
 * Then canonical NaN. */
typedef struct bib_conv_rows {
    bib_window_rows_t win;
    const float *wt; /* the output channel's taps, [cg][kh][kw] */
    size_t cg;
} bib_conv_rows_t;

/* POOL (kernel.def's POOL): out[k*ow + q] pools the window's taps (i, j)
 * ascending that fall inside the plane: AVG sums them from +0 and divides by
 * their count (with include_pad, also the taps inside the padded extent
 * [-pt, h_end) x [-pl, w_end)); MAX takes the greatest order key, NaN if
 * any is NaN, -Inf for none. Then canonical NaN. */
typedef struct bib_pool_rows {
    bib_window_rows_t win;
    bool avg, include_pad;
    int64_t pt, pl, h_end, w_end;
} bib_pool_rows_t;

/* Row functions of one SIMD level. n is the row length; rows never alias
 * unless y == x (in place is allowed for every function). */
typedef struct bib_cpu_rowops {
    const char *name;
    void (*unary)(bib_unary_t op, const float *x, float *y, size_t n);
    /* b_step 1: b has n elements; b_step 0: b is one element broadcast. */
    void (*binary)(bib_binary_t op, const float *a, const float *b, size_t b_step, float *y,
                   size_t n);
    void (*scale)(const float *x, float s, float *y, size_t n);
    void (*softmax)(const float *x, float *y, size_t n);
    void (*logsoftmax)(const float *x, float *y, size_t n);
    void (*layernorm)(const float *x, const float *gamma, const float *beta, float eps, float *y,
                      size_t n);
    void (*rmsnorm)(const float *x, const float *gamma, float eps, float *y, size_t n);
    /* The same three on rows [0, rows) of a contiguous [rows][n] block (row r
     * at x + r * n, y + r * n): short rows are computed several at a time, so
     * that one row's chain of dependent steps overlaps the next row's. With
     * stream, y is written with non-temporal stores where they fit (the
     * caller's tensor is larger than the caches, so y would only evict what
     * is still to be read), then fenced. The same bits either way. */
    void (*softmax_rows)(const float *x, float *y, size_t n, size_t rows, bool stream);
    void (*layernorm_rows)(const float *x, const float *gamma, const float *beta, float eps,
                           float *y, size_t n, size_t rows, bool stream);
    void (*rmsnorm_rows)(const float *x, const float *gamma, float eps, float *y, size_t n,
                         size_t rows, bool stream);
    float (*sum)(const float *x, size_t n); /* THE tree */
    float (*max)(const float *x, size_t n); /* NaN -> canonical NaN; -0 < +0 */
    /* REDUCE (op: bib_reduce_t) down the columns of a [n][m] block: y[j] for
     * j in [j0, j1) is the reduction of x[i * m + j] over i ascending, with
     * the bits of the row functions on that column (THE tree for SUM, MEAN
     * and PROD, the order of keys for MAX and MIN). */
    void (*reduce_cols)(uint32_t op, const float *x, size_t n, size_t m, size_t j0, size_t j1,
                        float *y);
    /* y[i] = fma(a, x[i], y[i]): one step of ATTENTION's output chains. */
    void (*axpy)(float a, const float *x, float *y, size_t n);
    /* CONV's direct form on rows of one plane; returns false, having
     * written nothing, where this level has no form for the geometry (the
     * caller then runs the reference's steps). NULL at the scalar level. */
    bool (*conv_rows)(const bib_conv_rows_t *r, float *out);
    /* POOL on rows of one plane, the same steps as the reference's; false
     * where this level has no form for the geometry. NULL at the scalar
     * level. */
    bool (*pool_rows)(const bib_pool_rows_t *r, float *out);
    /* BATCHNORM on one plane: y[e] = ((x[e] - mean) / den) * scale + bias,
     * then relu (bib_relu) or canonical NaN. */
    void (*batchnorm)(const float *x, float *y, size_t n, float mean, float den, float scale,
                      float bias, bool relu);
    /* TOPK's scan: the first i whose order key (bib_f32_order_key) is above
     * bar (max) or below it (min), or whose x[i] is a NaN; n when none is. */
    size_t (*first_past)(const float *x, size_t n, int32_t bar, bool max);
} bib_cpu_rowops_t;

extern const bib_cpu_rowops_t bib_cpu_rowops_scalar;
extern const bib_cpu_rowops_t bib_cpu_rowops_avx2;
extern const bib_cpu_rowops_t bib_cpu_rowops_avx512;

/* What a kernel needs from the executor. */
typedef struct bib_cpu_ctx {
    bib_cpu_level_t level;
    const bib_cpu_rowops_t *rowops; /* bib_cpu_rowops_for(level) */
    bib_threadpool_t *pool;         /* NULL: the calling thread only */
    char *error;                    /* one-line message on failure */
    size_t error_len;
} bib_cpu_ctx_t;

/* The row functions for a level; NULL when the level is not compiled in. */
const bib_cpu_rowops_t *bib_cpu_rowops_for(bib_cpu_level_t level);

/* Whether exp's last scaling at AVX-512 takes the lanes whose result is
 * below 2^-125 around vscalefps (ops_simd.h, v_scale2k). Intel cores take
 * a microcode assist for a vector operation whose result underflows; on
 * AMD's Zen 5 vscalefps takes none (exp over [-100, -90]: 0.106 ns an
 * element without the detour, 0.289 with it), while AVX2's two multiplies
 * do (1.45 against 0.70 ns), so AVX2 always takes it. Set from the CPU's
 * vendor by bib_cpu_rowops_for; the bits are the same either way. */
extern bool bib_cpu_scalef_detour;

/* Sets bib_cpu_scalef_detour and returns what it was (tests run both). */
bool bib_cpu_set_scalef_detour(bool on);

/* Runs one call. Shapes have been checked by the VM; a data-dependent error
 * (GATHER's index out of range) returns BIB_E_TRAP with ctx->error set. */
bib_status_t bib_cpu_ops_run(const bib_cpu_ctx_t *ctx, const bib_call_t *call);

/* Whether bib_cpu_ops_run handles the call's kernel, dtypes and shapes. */
bool bib_cpu_ops_supports(const bib_call_t *call);

/* Philox4x32-10 on one counter (spec/numerics.md "RNG"). */
void bib_cpu_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
