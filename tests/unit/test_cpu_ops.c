/* tests/unit/test_cpu_ops.c: the CPU executor's tensor kernels.
 *
 * Bit identity of every kernel between the scalar reference on one thread
 * and every SIMD level this CPU has on 1 and 3 threads, over awkward shapes
 * and special values; plus the contract's pinned cases (exp limits, signed
 * zeros, canonical NaN, Philox known answers, gather's error). Accuracy
 * against float64 lives in tests/oracle.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/bmath.h"
#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/threadpool.h"

typedef struct env {
    bib_cpu_ctx_t ctx;
    char error[256];
} env_t;

static bib_cpu_level_t best_level(void) {
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    return bib_cpu_best_level(&f);
}

static void env_open(env_t *e, bib_cpu_level_t level, uint32_t threads) {
    memset(e, 0, sizeof *e);
    e->ctx.level = level;
    e->ctx.rowops = bib_cpu_rowops_for(level);
    e->ctx.error = e->error;
    e->ctx.error_len = sizeof e->error;
    char why[128];
    cr_assert_eq(bib_threadpool_create(threads, &e->ctx.pool, why, sizeof why), BIB_OK, "%s", why);
}

static void env_close(env_t *e) {
    bib_threadpool_destroy(e->ctx.pool);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Values in [-range, range] with specials sprinkled in when `specials`. */
static float *random_f32(size_t n, float range, bool specials) {
    static const uint32_t special_bits[] = {
        0x80000000u,           0x00000000u,
        0x7F800000u,           0xFF800000u,
        0x7FC00123u,           0xFFC00000u,
        0x00000001u,           0x807FFFFFu,
        0x42C80000u /* 100 */, 0xC2C80000u /* -100 */,
        0x43480000u /* 200 */, 0xC3480000u /* -200 */,
        0x42B17218u,           0xC2CE0000u,
    };
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        x[i] = ((float)(next_u32() >> 8) * 0x1p-24f * 2.0f - 1.0f) * range;
        if (specials && next_u32() % 16 == 0)
            x[i] = bib_f32_from_bits(special_bits[next_u32() % (sizeof special_bits / 4)]);
    }
    return x;
}

static bib_view_t view2(void *buf, uint32_t dtype, uint32_t rows, uint32_t cols) {
    bib_view_t v = {.buf = buf, .dtype = dtype, .rank = 2, .dims = {rows, cols}};
    return v;
}

static bib_view_t view1(void *buf, uint32_t dtype, uint32_t n) {
    bib_view_t v = {.buf = buf, .dtype = dtype, .rank = 1, .dims = {n}};
    return v;
}

/* Runs `call` (whose out.buf is replaced) at the scalar level on one thread
 * and at every level on 1 and 3 threads; asserts identical output bytes. */
static void check_identity(const char *what, bib_call_t call, size_t out_bytes) {
    env_t e;
    env_open(&e, BIB_CPU_LEVEL_SCALAR, 1);
    uint8_t *ref = calloc(out_bytes + 64, 1);
    call.out.buf = ref;
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK, "%s: %s", what, e.error);
    env_close(&e);
    uint8_t *got = malloc(out_bytes + 64);
    for (int level = 0; level <= (int)best_level(); level++) {
        for (uint32_t threads = 1; threads <= 3; threads += 2) {
            memset(got, 0xA5, out_bytes + 64);
            env_open(&e, (bib_cpu_level_t)level, threads);
            call.out.buf = got;
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK, "%s: %s", what, e.error);
            env_close(&e);
            for (size_t b = 0; b < out_bytes; b += 4) {
                uint32_t r, g;
                memcpy(&r, ref + b, 4);
                memcpy(&g, got + b, 4);
                cr_assert_eq(r, g, "%s: %s x%u element %zu: 0x%08x, reference 0x%08x", what,
                             bib_cpu_level_name((bib_cpu_level_t)level), threads, b / 4, g, r);
            }
            for (size_t b = out_bytes; b < out_bytes + 64; b++)
                cr_assert_eq(got[b], 0xA5, "%s: wrote past the output (guard byte %zu)", what,
                             b - out_bytes);
        }
    }
    free(ref);
    free(got);
}

static const uint32_t shapes[][2] = {{1, 1},   {1, 7},    {3, 33}, {2, 1023},  {5, 64},
                                     {4, 130}, {64, 257}, {9, 16}, {300, 200}, {2, 70000}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* Sets exp's detour around vscalefps at AVX-512 (bib_cpu_scalef_detour)
 * after the executor's own choice from the vendor, so that both paths are
 * tested on any CPU; returns what it was. */
static bool set_scalef_detour(bool on) {
    (void)bib_cpu_rowops_for(BIB_CPU_LEVEL_SCALAR);
    return bib_cpu_set_scalef_detour(on);
}

Test(cpu_ops_identity, unary_every_op_every_level) {
    for (int detour = 0; detour < 2; detour++) {
        bool was = set_scalef_detour(detour);
        for (uint32_t op = BIB_UNARY_RELU; op < BIB_UNARY__COUNT; op++)
            for (size_t s = 0; s < NSHAPES; s++) {
                uint32_t r = shapes[s][0], c = shapes[s][1];
                float *x = random_f32((size_t)r * c, op == BIB_UNARY_EXP ? 120.0f : 12.0f, true);
                bib_call_t call = {.kernel = BIB_KERNEL_UNARY,
                                   .sub = op,
                                   .out = view2(NULL, BIB_DTYPE_F32, r, c),
                                   .in = {view2(x, BIB_DTYPE_F32, r, c)}};
                char what[64];
                snprintf(what, sizeof what, "unary %u [%u,%u], detour %d", op, r, c, detour);
                check_identity(what, call, (size_t)r * c * 4);
                free(x);
            }
        set_scalef_detour(was);
    }
}

Test(cpu_ops_identity, binary_same_row_and_scalar_broadcast) {
    for (uint32_t op = BIB_BINARY_ADD; op < BIB_BINARY__COUNT; op++)
        for (size_t s = 0; s < NSHAPES; s++) {
            uint32_t r = shapes[s][0], c = shapes[s][1];
            float *a = random_f32((size_t)r * c, 1e3f, true);
            float *b = random_f32((size_t)r * c, 1e3f, true);
            bib_view_t bviews[3] = {view2(b, BIB_DTYPE_F32, r, c), view1(b, BIB_DTYPE_F32, c),
                                    view1(b, BIB_DTYPE_F32, 1)};
            for (int m = 0; m < 3; m++) {
                bib_call_t call = {.kernel = BIB_KERNEL_BINARY,
                                   .sub = op,
                                   .out = view2(NULL, BIB_DTYPE_F32, r, c),
                                   .in = {view2(a, BIB_DTYPE_F32, r, c), bviews[m]}};
                char what[64];
                snprintf(what, sizeof what, "binary %u mode %d [%u,%u]", op, m, r, c);
                check_identity(what, call, (size_t)r * c * 4);
            }
            free(a);
            free(b);
        }
}

static void row_kernel_identity(bib_kernel_t kernel, uint32_t sub, float range, float f0) {
    for (size_t s = 0; s < NSHAPES; s++) {
        uint32_t r = shapes[s][0], c = shapes[s][1];
        float *x = random_f32((size_t)r * c, range, true);
        float *g = random_f32(c, 2.0f, false), *b = random_f32(c, 2.0f, false);
        bool reduces = kernel == BIB_KERNEL_REDUCE || kernel == BIB_KERNEL_ARGMAX;
        bib_call_t call = {.kernel = kernel,
                           .sub = sub,
                           .out = reduces ? view1(NULL, BIB_DTYPE_F32, r)
                                          : view2(NULL, BIB_DTYPE_F32, r, c),
                           .in = {view2(x, BIB_DTYPE_F32, r, c), view1(g, BIB_DTYPE_F32, c),
                                  view1(b, BIB_DTYPE_F32, c)},
                           .f = {f0}};
        if (kernel == BIB_KERNEL_ARGMAX)
            call.out.dtype = BIB_DTYPE_I32;
        char what[64];
        snprintf(what, sizeof what, "kernel %d sub %u [%u,%u]", kernel, sub, r, c);
        check_identity(what, call, (reduces ? (size_t)r : (size_t)r * c) * 4);
        /* and once more without special values, where results are finite */
        free(x);
        x = random_f32((size_t)r * c, range, false);
        call.in[0].buf = x;
        check_identity(what, call, (reduces ? (size_t)r : (size_t)r * c) * 4);
        free(x);
        free(g);
        free(b);
    }
}

Test(cpu_ops_identity, softmax) {
    row_kernel_identity(BIB_KERNEL_SOFTMAX, 0, 150.0f, 0);
}
Test(cpu_ops_identity, layernorm) {
    row_kernel_identity(BIB_KERNEL_LAYERNORM, 0, 10.0f, 1e-5f);
}
Test(cpu_ops_identity, rmsnorm) {
    row_kernel_identity(BIB_KERNEL_RMSNORM, 0, 10.0f, 1e-6f);
}
Test(cpu_ops_identity, reduce_sum_max_mean) {
    for (uint32_t op = BIB_REDUCE_SUM; op < BIB_REDUCE__COUNT; op++)
        row_kernel_identity(BIB_KERNEL_REDUCE, op, 1e4f, 0);
}
Test(cpu_ops_identity, argmax) {
    row_kernel_identity(BIB_KERNEL_ARGMAX, 0, 5.0f, 0);
}
Test(cpu_ops_identity, scale) {
    row_kernel_identity(BIB_KERNEL_SCALE, 0, 1e3f, -0.37f);
}

/* Inputs where the vector code's shortcuts matter: exp's range ends (it
 * clamps instead of selecting), tanh's branch point, gelu's -Inf and the
 * finite x whose x^3 or z overflow, NaNs of both signs, denormals. 37
 * values, so every level also runs a partial vector. */
static const uint32_t edge_bits[] = {
    0x00000000u, 0x80000000u,           0x7F800000u,
    0xFF800000u, 0x7FC00000u,           0xFFC00000u,
    0x7F800001u, 0x00000001u,           0x807FFFFFu,
    0x7F7FFFFFu, 0xFF7FFFFFu,           0x42B20000u /* 89 */,
    0x42B20001u, 0x42B1FFFFu,           0xC2D00000u /* -104 */,
    0xC2D00001u, 0xC2CFFFFFu,           0x3F200000u /* 0.625 */,
    0x3F1FFFFFu, 0xBF200000u,           0x55E6B5CBu /* 3.2e13: x^3 = Inf */,
    0xD5E6B5CBu, 0x4CBEBC20u /* 1e8 */, 0xCCBEBC20u,
    0x41200000u, 0xC1200000u,           0x3F800000u,
    0xBF800000u, 0x3C23D70Au,           0xBC23D70Au,
    0x42C80000u, 0xC2C80000u,           0x42AE0000u /* 87 */,
    0xC2AE0000u, 0x00800000u,           0x80800000u,
    0x3A83126Fu,
};
#define NEDGE (sizeof edge_bits / sizeof edge_bits[0])

Test(cpu_ops_identity, unary_edge_values_every_level) {
    float x[NEDGE];
    for (size_t i = 0; i < NEDGE; i++)
        x[i] = bib_f32_from_bits(edge_bits[i]);
    for (uint32_t op = BIB_UNARY_RELU; op < BIB_UNARY__COUNT; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY,
                           .sub = op,
                           .out = view2(NULL, BIB_DTYPE_F32, 1, NEDGE),
                           .in = {view2(x, BIB_DTYPE_F32, 1, NEDGE)}};
        char what[64];
        snprintf(what, sizeof what, "unary %u on edge values", op);
        check_identity(what, call, NEDGE * 4);
    }
}

/* Every pair of edge values through every binary op: MIN and MAX order -0
 * before +0 and give the canonical NaN if either is NaN, which their
 * vector forms compute from integer keys. */
Test(cpu_ops_identity, binary_edge_value_pairs_every_level) {
    float a[NEDGE * NEDGE], b[NEDGE * NEDGE];
    for (size_t i = 0; i < NEDGE; i++)
        for (size_t j = 0; j < NEDGE; j++) {
            a[i * NEDGE + j] = bib_f32_from_bits(edge_bits[i]);
            b[i * NEDGE + j] = bib_f32_from_bits(edge_bits[j]);
        }
    for (uint32_t op = BIB_BINARY_ADD; op < BIB_BINARY__COUNT; op++) {
        bib_call_t call = {
            .kernel = BIB_KERNEL_BINARY,
            .sub = op,
            .out = view2(NULL, BIB_DTYPE_F32, NEDGE, NEDGE),
            .in = {view2(a, BIB_DTYPE_F32, NEDGE, NEDGE), view2(b, BIB_DTYPE_F32, NEDGE, NEDGE)}};
        char what[64];
        snprintf(what, sizeof what, "binary %u on edge pairs", op);
        check_identity(what, call, NEDGE * NEDGE * 4);
    }
}

/* Fills ref with the scalar reference softmax of rows x rows of n, and
 * checks that every SIMD level gives the same bits in place (y == x). */
static void softmax_in_place_matches(const float *x, uint32_t rows, uint32_t n, float *ref,
                                     const char *what) {
    size_t bytes = (size_t)rows * n * 4;
    float *got = malloc(bytes);
    for (uint32_t r = 0; r < rows; r++)
        bib_cpu_rowops_scalar.softmax(x + (size_t)r * n, ref + (size_t)r * n, n);
    for (int level = 0; level <= (int)best_level(); level++) {
        const bib_cpu_rowops_t *ro = bib_cpu_rowops_for((bib_cpu_level_t)level);
        memcpy(got, x, bytes);
        for (uint32_t r = 0; r < rows; r++)
            ro->softmax(got + (size_t)r * n, got + (size_t)r * n, n);
        cr_assert_eq(memcmp(got, ref, bytes), 0, "%s: %s in place differs", ro->name, what);
    }
    free(got);
}

/* Softmax rows whose maximum is +Inf, NaN or -Inf (all NaN out), rows where
 * x - m overflows to -Inf, a row of one repeated value; 67 columns, so the
 * 64-lane blocks end in a partial one. Run in place too. */
Test(cpu_ops_identity, softmax_rows_of_special_values) {
    enum { ROWS = 7, COLS = 67 };
    float *x = random_f32(ROWS * COLS, 30.0f, false);
    x[0 * COLS + 5] = INFINITY;
    for (int j = 0; j < COLS; j++)
        x[1 * COLS + j] = -INFINITY;
    for (int j = 0; j < COLS; j++)
        x[2 * COLS + j] = j == 66 ? 0.0f : -INFINITY;
    x[3 * COLS + 64] = bib_f32_from_bits(0xFFC00001u);
    for (int j = 0; j < COLS; j++)
        x[4 * COLS + j] = j % 2 ? 3.4e38f : -3.4e38f;
    for (int j = 0; j < COLS; j++)
        x[5 * COLS + j] = -7.25f;
    x[6 * COLS + 66] = 1e30f;
    bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX,
                       .out = view2(NULL, BIB_DTYPE_F32, ROWS, COLS),
                       .in = {view2(x, BIB_DTYPE_F32, ROWS, COLS)}};
    check_identity("softmax special rows", call, ROWS * COLS * 4);
    float *ref = malloc(ROWS * COLS * 4);
    softmax_in_place_matches(x, ROWS, COLS, ref, "softmax special rows");
    for (int j = 0; j < COLS; j++)
        cr_assert_eq(bib_f32_bits(ref[1 * COLS + j]), 0x7FC00000u, "a row of -Inf is NaN");
    free(ref);
    free(x);
}

/* Rows of every length up to one tree block and just past it (the SIMD
 * levels keep a short row in registers), with special values and rows whose
 * maximum is NaN, +Inf or -Inf among them; out of place and in place. */
Test(cpu_ops_identity, softmax_short_rows) {
    enum { ROWS = 6 };
    for (uint32_t n = 1; n <= BIB_TREE_LANES + 2; n++) {
        float *x = random_f32(ROWS * n, 100.0f, true);
        x[1 * n + n / 2] = INFINITY;
        for (uint32_t j = 0; j < n; j++)
            x[2 * n + j] = -INFINITY;
        x[3 * n + n - 1] = bib_f32_from_bits(0xFFC00001u);
        for (uint32_t j = 0; j < n; j++)
            x[4 * n + j] = j == n - 1 ? 88.0f : -INFINITY;
        for (uint32_t j = 0; j < n; j++) /* no specials: a finite row */
            x[5 * n + j] = ((float)(next_u32() >> 8) * 0x1p-24f - 0.5f) * 40.0f;
        bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX,
                           .out = view2(NULL, BIB_DTYPE_F32, ROWS, n),
                           .in = {view2(x, BIB_DTYPE_F32, ROWS, n)}};
        char what[64];
        snprintf(what, sizeof what, "softmax rows of %u", n);
        check_identity(what, call, (size_t)ROWS * n * 4);
        float *ref = malloc(ROWS * n * 4);
        softmax_in_place_matches(x, ROWS, n, ref, what);
        cr_assert_eq(bib_f32_bits(ref[2 * n]), 0x7FC00000u, "a row of -Inf is NaN");
        cr_assert_eq(ref[4 * n + n - 1], 1.0f, "one finite value among -Inf has all the mass");
        free(ref);
        free(x);
    }
}

/* Short rows go several at a time (ops_simd.h's row groups, in a software
 * pipeline of groups): every length up to one tree block and just past it, at row
 * counts that fill the groups exactly, leave a tail of single rows, and
 * hold one special row (NaN, +Inf, only -Inf, only -0, +-0) in a group, through the
 * executor at every level and thread count, for softmax, layernorm and
 * rmsnorm. */
Test(cpu_ops_identity, short_rows_in_groups) {
    static const uint32_t row_counts[] = {8, 9, 16, 23, 40};
    static const bib_kernel_t kernels[] = {BIB_KERNEL_SOFTMAX, BIB_KERNEL_LAYERNORM,
                                           BIB_KERNEL_RMSNORM};
    for (uint32_t n = 1; n <= BIB_TREE_LANES + 2; n++)
        for (size_t rc = 0; rc < sizeof row_counts / sizeof row_counts[0]; rc++) {
            uint32_t rows = row_counts[rc];
            float *x = random_f32((size_t)rows * n, 30.0f, false);
            float *g = random_f32(n, 2.0f, false), *b = random_f32(n, 2.0f, false);
            uint32_t special = (uint32_t)(next_u32() % rows);
            switch (next_u32() % 5) {
            case 0:
                x[(size_t)special * n + n / 2] = bib_f32_from_bits(0xFFC00001u);
                break;
            case 1:
                x[(size_t)special * n + n - 1] = INFINITY;
                break;
            case 2:
                for (uint32_t j = 0; j < n; j++)
                    x[(size_t)special * n + j] = -INFINITY;
                break;
            case 3: /* a sum of -0: +0 only through the tree's +0 start */
                for (uint32_t j = 0; j < n; j++)
                    x[(size_t)special * n + j] = -0.0f;
                break;
            default:
                for (uint32_t j = 0; j < n; j++)
                    x[(size_t)special * n + j] = j % 2 ? -0.0f : 0.0f;
            }
            g[0] = -0.0f, b[0] = -0.0f; /* -0 * ... + -0 keeps signs in view */
            for (size_t k = 0; k < 3; k++) {
                bib_call_t call = {.kernel = kernels[k],
                                   .out = view2(NULL, BIB_DTYPE_F32, rows, n),
                                   .in = {view2(x, BIB_DTYPE_F32, rows, n),
                                          view1(g, BIB_DTYPE_F32, n), view1(b, BIB_DTYPE_F32, n)},
                                   .f = {kernels[k] == BIB_KERNEL_RMSNORM ? 1e-6f : 1e-5f}};
                char what[64];
                snprintf(what, sizeof what, "kernel %d [%u,%u], row %u special", kernels[k], rows,
                         n, special);
                check_identity(what, call, (size_t)rows * n * 4);
            }
            free(x), free(g), free(b);
        }
}

/* Short softmax rows whose every vector holds elements run group i's
 * divisions between group i + 1's exp blocks (softmax_short_pipeline). The
 * rows function itself at every level, in place and not, streamed and not,
 * with special rows (a NaN, +Inf, only -Inf) in the first, a middle and the
 * last whole group and in the tail, against the scalar reference. */
Test(cpu_ops_identity, softmax_rows_divisions_between_groups) {
    enum { ROWS = 23 };
    static const uint32_t specials[] = {1, 9, 19, 22};
    const bib_cpu_rowops_t *sc = &bib_cpu_rowops_scalar;
    for (uint32_t n = 33; n <= BIB_TREE_LANES; n++) {
        size_t count = (size_t)ROWS * n;
        float *x = random_f32(count, 40.0f, true);
        for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
            float *row = x + (size_t)specials[k] * n;
            if (k == 0)
                row[n / 3] = bib_f32_from_bits(0xFFC00001u);
            else if (k == 1)
                row[n - 1] = INFINITY;
            else
                for (uint32_t j = 0; j < n; j++)
                    row[j] = -INFINITY;
        }
        float *ref = malloc(count * 4), *y = aligned_alloc(64, (count * 4 + 63) / 64 * 64);
        for (uint32_t r = 0; r < ROWS; r++)
            sc->softmax(x + (size_t)r * n, ref + (size_t)r * n, n);
        for (int level = 0; level <= (int)best_level(); level++) {
            const bib_cpu_rowops_t *ro = bib_cpu_rowops_for((bib_cpu_level_t)level);
            for (int stream = 0; stream < 2; stream++)
                for (int in_place = 0; in_place < 2; in_place++) {
                    memset(y, 0x5A, count * 4);
                    if (in_place)
                        memcpy(y, x, count * 4);
                    ro->softmax_rows(in_place ? y : x, y, n, ROWS, stream);
                    cr_assert_eq(memcmp(y, ref, count * 4), 0,
                                 "%s: softmax rows of %u, stream %d, in place %d", ro->name, n,
                                 stream, in_place);
                }
        }
        free(x), free(ref), free(y);
    }
}

/* Short softmax rows in groups over the whole of exp's range: x - m from 0
 * down past LO (-104), so that terms are normal, denormal (x - m below
 * about -87.3, where exp's last scaling rounds) and +0, with the edges
 * themselves planted (x - m = LO, -87.3365 where 2^k leaves the normal
 * range, -88, -103.97). The four rows of a group go through exp's sequence
 * in step (v_exp_core_n); every level and thread count against the scalar
 * reference. */
Test(cpu_ops_identity, softmax_short_rows_over_exp_range) {
    static const uint32_t row_counts[] = {8, 19};
    static const float edges[] = {-104.0f, -87.3365f, -88.0f, -103.97f, -87.0f, -0.0f};
    for (int detour = 0; detour < 2; detour++) {
        bool was = set_scalef_detour(detour);
        for (uint32_t n = 1; n <= BIB_TREE_LANES + 2; n++)
            for (size_t rc = 0; rc < sizeof row_counts / sizeof row_counts[0]; rc++) {
                uint32_t rows = row_counts[rc];
                float *x = random_f32((size_t)rows * n, 60.0f, false);
                for (size_t i = 0; i < (size_t)rows * n; i++)
                    x[i] = x[i] - 58.0f; /* [-118, 2] */
                for (uint32_t r = 0; r < rows; r++) {
                    x[(size_t)r * n] = 2.0f; /* each row's maximum: x - m = x - 2 */
                    for (uint32_t j = 1; j < n; j += 3)
                        x[(size_t)r * n + j] = 2.0f + edges[(r + j) % 6];
                }
                bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX,
                                   .out = view2(NULL, BIB_DTYPE_F32, rows, n),
                                   .in = {view2(x, BIB_DTYPE_F32, rows, n)}};
                char what[64];
                snprintf(what, sizeof what, "softmax [%u,%u] over exp's range, detour %d", rows, n,
                         detour);
                check_identity(what, call, (size_t)rows * n * 4);
                free(x);
            }
        set_scalef_detour(was);
    }
}

/* Short norm rows skip canonicalization when no output can be NaN (finite
 * gamma and beta, eps > 0, a finite denominator). The cases next to that
 * bound, in groups, against the reference: an infinite gamma, a NaN beta,
 * eps of 0 with a constant row (0 / 0), a negative eps, a row whose
 * deviations overflow, a tiny denominator. */
Test(cpu_ops_identity, short_norm_rows_near_the_nan_bound) {
    enum { ROWS = 16 };
    static const float eps_values[] = {1e-5f, 0.0f, -1e-3f, 1e-38f};
    for (uint32_t n = 1; n <= BIB_TREE_LANES; n += (n < 16 ? 1 : 16))
        for (int variant = 0; variant < 4; variant++)
            for (size_t e = 0; e < sizeof eps_values / sizeof eps_values[0]; e++) {
                float *x = random_f32((size_t)ROWS * n, 3.0f, false);
                float *g = random_f32(n, 2.0f, false), *b = random_f32(n, 2.0f, false);
                for (uint32_t j = 0; j < n; j++)
                    x[3 * n + j] = 0.5f; /* a constant row: var 0 */
                for (uint32_t j = 0; j < n; j++)
                    x[5 * n + j] = j % 2 ? 3e38f : -3e38f; /* d * d overflows */
                for (uint32_t j = 0; j < n; j++)
                    x[9 * n + j] = 1e-30f * (float)(j % 3); /* d * d underflows */
                if (variant == 1)
                    g[n - 1] = INFINITY;
                if (variant == 2)
                    b[n / 2] = bib_f32_from_bits(0x7FC00123u);
                if (variant == 3)
                    g[0] = 0.0f, g[n - 1] = 3e38f;
                for (int k = 0; k < 2; k++) {
                    bib_call_t call = {.kernel = k ? BIB_KERNEL_RMSNORM : BIB_KERNEL_LAYERNORM,
                                       .out = view2(NULL, BIB_DTYPE_F32, ROWS, n),
                                       .in = {view2(x, BIB_DTYPE_F32, ROWS, n),
                                              view1(g, BIB_DTYPE_F32, n),
                                              view1(b, BIB_DTYPE_F32, n)},
                                       .f = {eps_values[e]}};
                    char what[80];
                    snprintf(what, sizeof what, "%s [%u,%u] variant %d eps %g",
                             k ? "rmsnorm" : "layernorm", ROWS, n, variant, eps_values[e]);
                    check_identity(what, call, (size_t)ROWS * n * 4);
                }
                free(x), free(g), free(b);
            }
}

/* The rows functions with stream on (non-temporal stores, which the
 * executor picks for large outputs only) and off, against the scalar
 * reference: outputs aligned and at offsets from a vector's alignment, in
 * place and not, short and long rows, rows of whole vectors (which softmax
 * streams one row behind its exp pass), rows longer than softmax's stack
 * buffers. */
Test(cpu_ops_identity, rows_functions_streamed_and_cached) {
    static const uint32_t lengths[] = {1,   15,  16,   17,   48,   63,   64,  65,
                                       100, 128, 1000, 4096, 4097, 4112, 5000};
    static const uint32_t offsets[] = {0, 1, 3, 8, 15};
    enum { ROWS = 11 };
    const bib_cpu_rowops_t *sc = &bib_cpu_rowops_scalar;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        uint32_t n = lengths[li];
        size_t count = (size_t)ROWS * n;
        float *x = random_f32(count, 20.0f, true);
        float *g = random_f32(n, 2.0f, false), *b = random_f32(n, 2.0f, false);
        float *ref = malloc(count * 4 * 3);
        for (uint32_t r = 0; r < ROWS; r++) {
            const float *xr = x + (size_t)r * n;
            sc->softmax(xr, ref + (size_t)r * n, n);
            sc->layernorm(xr, g, b, 1e-5f, ref + count + (size_t)r * n, n);
            sc->rmsnorm(xr, g, 1e-6f, ref + 2 * count + (size_t)r * n, n);
        }
        float *buf = aligned_alloc(64, ((count + 32) * 4 + 63) / 64 * 64);
        for (int level = 0; level <= (int)best_level(); level++) {
            const bib_cpu_rowops_t *ro = bib_cpu_rowops_for((bib_cpu_level_t)level);
            for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++)
                for (int stream = 0; stream < 2; stream++)
                    for (int in_place = 0; in_place < 2; in_place++)
                        for (int k = 0; k < 3; k++) {
                            uint32_t offset = offsets[oi];
                            float *y = buf + offset;
                            const float *src = x;
                            if (in_place) {
                                memcpy(y, x, count * 4);
                                src = y;
                            }
                            if (k == 0)
                                ro->softmax_rows(src, y, n, ROWS, stream);
                            else if (k == 1)
                                ro->layernorm_rows(src, g, b, 1e-5f, y, n, ROWS, stream);
                            else
                                ro->rmsnorm_rows(src, g, 1e-6f, y, n, ROWS, stream);
                            cr_assert_eq(memcmp(y, ref + k * count, count * 4), 0,
                                         "%s: rows function %d, n %u, offset %u, stream %d, in "
                                         "place %d",
                                         ro->name, k, n, offset, stream, in_place);
                        }
        }
        free(x), free(g), free(b), free(ref), free(buf);
    }
}

Test(cpu_ops_identity, matmul_bias_and_activations) {
    static const uint32_t mnk[][3] = {{1, 1, 1}, {7, 33, 5}, {33, 7, 1023}, {64, 130, 17}};
    for (size_t s = 0; s < 4; s++)
        for (uint32_t act = BIB_ACT_NONE; act < BIB_ACT__COUNT; act++) {
            uint32_t m = mnk[s][0], n = mnk[s][1], k = mnk[s][2];
            float *a = random_f32((size_t)m * k, 3.0f, false);
            float *b = random_f32((size_t)k * n, 3.0f, false);
            float *bias = random_f32(n, 3.0f, false);
            bib_call_t call = {.kernel = BIB_KERNEL_MATMUL,
                               .sub = act,
                               .out = view2(NULL, BIB_DTYPE_F32, m, n),
                               .in = {view2(a, BIB_DTYPE_F32, m, k), view2(b, BIB_DTYPE_F32, k, n),
                                      view1(bias, BIB_DTYPE_F32, n)}};
            check_identity("matmul", call, (size_t)m * n * 4);
            /* the contract: one fma chain, then one add, then the activation */
            env_t e;
            env_open(&e, best_level(), 2);
            float *y = malloc((size_t)m * n * 4);
            call.out.buf = y;
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
            env_close(&e);
            for (uint32_t i = 0; i < m; i++)
                for (uint32_t j = 0; j < n; j++) {
                    float acc = 0.0f;
                    for (uint32_t p = 0; p < k; p++)
                        acc = fmaf(a[i * k + p], b[p * n + j], acc);
                    acc = acc + bias[j];
                    acc = act == BIB_ACT_RELU       ? bib_relu(acc)
                          : act == BIB_ACT_GELU     ? bib_gelu(acc)
                          : act == BIB_ACT_GELU_ERF ? bib_gelu_erf(acc)
                                                    : acc;
                    cr_assert_eq(bib_f32_bits(y[i * n + j]), bib_f32_bits(acc),
                                 "matmul [%u,%u,%u] act %u at (%u,%u)", m, n, k, act, i, j);
                }
            free(y);
            free(a);
            free(b);
            free(bias);
        }
}

/* The contract's attention, written out plainly. */
static void attention_contract(const float *q, const float *k, const float *v, float *o,
                               uint32_t s_len, uint32_t t_len, uint32_t heads, uint32_t d_len,
                               float scale, bool causal) {
    size_t stride = (size_t)heads * d_len;
    float *p = malloc((t_len + 1) * sizeof *p);
    for (uint32_t i = 0; i < s_len; i++)
        for (uint32_t h = 0; h < heads; h++) {
            int64_t lim = causal ? (int64_t)i + t_len - s_len + 1 : t_len;
            uint32_t nv = lim < 0 ? 0 : lim > t_len ? t_len : (uint32_t)lim;
            for (uint32_t j = 0; j < nv; j++) {
                float acc = 0.0f;
                for (uint32_t d = 0; d < d_len; d++)
                    acc = fmaf(q[i * stride + h * d_len + d], k[j * stride + h * d_len + d], acc);
                p[j] = acc * scale;
            }
            float m = bib_max(p, nv);
            for (uint32_t j = 0; j < nv; j++)
                p[j] = bib_exp(p[j] - m);
            float sum = bib_tree_sum(p, nv);
            for (uint32_t j = 0; j < nv; j++)
                p[j] = p[j] / sum;
            for (uint32_t d = 0; d < d_len; d++) {
                float acc = 0.0f;
                for (uint32_t j = 0; j < nv; j++)
                    acc = fmaf(p[j], v[j * stride + h * d_len + d], acc);
                o[i * stride + h * d_len + d] = bib_f32_canon(acc);
            }
        }
    free(p);
}

Test(cpu_ops_identity, attention_matches_contract_causal_and_not) {
    /* Blocks of queries (42 rows) whole and cut, causal rows that see more
     * keys than their block's first row, queries that see none (S > T),
     * and key counts past the GEMM's K block. */
    static const uint32_t shp[][4] = {
        {1, 1, 1, 1},     {7, 7, 2, 33},   {33, 40, 3, 16}, {20, 20, 1, 64},  {40, 33, 2, 8},
        {100, 90, 2, 24}, {130, 97, 3, 8}, {84, 84, 1, 64}, {45, 700, 2, 40}, {200, 60, 1, 17}};
    for (size_t s = 0; s < sizeof shp / sizeof shp[0]; s++)
        for (uint32_t causal = 0; causal <= 1; causal++) {
            uint32_t S = shp[s][0], T = shp[s][1], H = shp[s][2], D = shp[s][3];
            float *q = random_f32((size_t)S * H * D, 2.0f, false);
            float *k = random_f32((size_t)T * H * D, 2.0f, false);
            float *v = random_f32((size_t)T * H * D, 2.0f, false);
            float scale = (float)(1.0 / sqrt((double)D));
            bib_view_t qv = {.buf = q, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {S, H, D}};
            bib_view_t kv = {.buf = k, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {T, H, D}};
            bib_view_t vv = {.buf = v, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {T, H, D}};
            bib_call_t call = {.kernel = BIB_KERNEL_ATTENTION,
                               .sub = causal,
                               .out = qv,
                               .in = {qv, kv, vv},
                               .f = {scale}};
            check_identity("attention", call, (size_t)S * H * D * 4);
            float *want = malloc((size_t)S * H * D * 4), *got = malloc((size_t)S * H * D * 4);
            attention_contract(q, k, v, want, S, T, H, D, scale, causal);
            env_t e;
            env_open(&e, best_level(), 2);
            call.out.buf = got;
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
            env_close(&e);
            for (size_t i = 0; i < (size_t)S * H * D; i++)
                cr_assert_eq(bib_f32_bits(got[i]), bib_f32_bits(want[i]),
                             "attention S%u T%u H%u D%u causal %u element %zu", S, T, H, D, causal,
                             i);
            free(q), free(k), free(v), free(want), free(got);
        }
}

/* CONV and the pools written out as spec/numerics.md 12a states them, one
 * output at a time with libm fmaf: the bits both CPU forms (GEMM and direct)
 * must give. x [N,C,H,W], w [O,C/g,KH,KW]; geo = stride h,w, dilation h,w,
 * pads t,l,b,r. */
typedef struct conv_geo {
    uint32_t n, c, h, w, o, g, kh, kw;
    int64_t s[2], d[2], pad[4];
} conv_geo_t;

static uint32_t geo_out(int64_t n, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi) {
    return (uint32_t)((n + lo + hi - (d * (k - 1) + 1)) / s + 1);
}

static void conv_contract(const conv_geo_t *q, const float *x, const float *w, float *y) {
    uint32_t oh = geo_out(q->h, q->kh, q->s[0], q->d[0], q->pad[0], q->pad[2]);
    uint32_t ow = geo_out(q->w, q->kw, q->s[1], q->d[1], q->pad[1], q->pad[3]);
    uint32_t cg = q->c / q->g, og = q->o / q->g;
    for (uint32_t n = 0; n < q->n; n++)
        for (uint32_t o = 0; o < q->o; o++)
            for (uint32_t i = 0; i < oh; i++)
                for (uint32_t j = 0; j < ow; j++) {
                    float acc = 0.0f;
                    for (uint32_t c = 0; c < cg; c++)
                        for (uint32_t a = 0; a < q->kh; a++)
                            for (uint32_t b = 0; b < q->kw; b++) {
                                int64_t ih = (int64_t)i * q->s[0] - q->pad[0] + a * q->d[0];
                                int64_t iw = (int64_t)j * q->s[1] - q->pad[1] + b * q->d[1];
                                size_t xc = (size_t)n * q->c + (o / og) * cg + c;
                                float v = ih >= 0 && ih < q->h && iw >= 0 && iw < q->w
                                              ? x[(xc * q->h + (size_t)ih) * q->w + (size_t)iw]
                                              : 0.0f;
                                acc =
                                    fmaf(w[(((size_t)o * cg + c) * q->kh + a) * q->kw + b], v, acc);
                            }
                    y[(((size_t)n * q->o + o) * oh + i) * ow + j] = bib_f32_canon(acc);
                }
}

Test(cpu_ops_identity, conv_matches_contract_in_both_forms) {
    /* GEMM form (4+ outputs per group, 8+ taps) and the direct form
     * (depthwise, few outputs), strides 1 and above, dilation, asymmetric
     * pads wider than the kernel, position counts past the column block
     * (whose length follows K). */
    static const conv_geo_t geos[] = {
        {2, 3, 7, 9, 4, 1, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
        {1, 8, 9, 11, 8, 2, 3, 3, {2, 3}, {2, 1}, {2, 0, 1, 3}},
        {2, 6, 10, 10, 6, 6, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}},
        {1, 4, 6, 7, 2, 1, 2, 3, {1, 2}, {1, 2}, {3, 4, 3, 4}},
        {1, 2, 50, 60, 5, 1, 3, 3, {1, 1}, {1, 1}, {0, 2, 1, 0}},
        {3, 1, 1, 300, 4, 1, 1, 5, {1, 3}, {1, 2}, {0, 4, 0, 1}},
        /* K = 2304: column blocks shorter than 2048 positions */
        {1, 256, 45, 45, 4, 1, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
        /* The direct form's vector rows: depthwise rows of several blocks and
         * a tail of 1, 2 and 3 vectors, padding rows, strides (gathers) with
         * dilation, a window wider than a vector form takes (17), few outputs
         * over many channels. */
        {1, 8, 20, 131, 8, 8, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
        {1, 3, 4, 64, 3, 3, 3, 3, {1, 1}, {1, 1}, {2, 1, 2, 1}},
        {1, 3, 4, 48, 3, 3, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
        {1, 3, 3, 33, 3, 3, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
        {1, 3, 5, 56, 3, 3, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
        {1, 3, 5, 112, 3, 3, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}},
        {2, 4, 9, 70, 4, 4, 5, 5, {2, 2}, {1, 2}, {2, 3, 2, 3}},
        {1, 6, 11, 50, 6, 6, 3, 3, {3, 3}, {2, 1}, {0, 5, 1, 0}},
        {1, 6, 5, 40, 2, 2, 3, 17, {1, 1}, {1, 1}, {1, 8, 1, 8}},
        {1, 16, 12, 12, 3, 1, 3, 3, {1, 1}, {2, 2}, {2, 2, 2, 2}},
        /* 1x1 windows: the input itself is the GEMM's B at stride 1 without
         * padding; strided or padded ones build columns. */
        {2, 16, 7, 9, 8, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
        {1, 16, 7, 9, 8, 1, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}},
        {1, 16, 5, 5, 8, 2, 1, 1, {1, 1}, {1, 1}, {1, 1, 0, 0}},
        {1, 24, 30, 100, 8, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
    };
    for (size_t gi = 0; gi < sizeof geos / sizeof geos[0]; gi++) {
        const conv_geo_t *q = &geos[gi];
        uint32_t oh = geo_out(q->h, q->kh, q->s[0], q->d[0], q->pad[0], q->pad[2]);
        uint32_t ow = geo_out(q->w, q->kw, q->s[1], q->d[1], q->pad[1], q->pad[3]);
        size_t nx = (size_t)q->n * q->c * q->h * q->w,
               nw = (size_t)q->o * (q->c / q->g) * q->kh * q->kw;
        size_t ny = (size_t)q->n * q->o * oh * ow;
        float *x = random_f32(nx, 3.0f, true), *w = random_f32(nw, 1.0f, true);
        float *want = malloc(ny * 4), *got = malloc(ny * 4);
        conv_contract(q, x, w, want);
        bib_call_t call = {
            .kernel = BIB_KERNEL_CONV,
            .out = {.dtype = BIB_DTYPE_F32, .rank = 4, .dims = {q->n, q->o, oh, ow}},
            .in = {{.buf = x, .dtype = BIB_DTYPE_F32, .rank = 4, .dims = {q->n, q->c, q->h, q->w}},
                   {.buf = w,
                    .dtype = BIB_DTYPE_F32,
                    .rank = 4,
                    .dims = {q->o, q->c / q->g, q->kh, q->kw}}},
            .p = {q->g, q->s[0], q->s[1], q->d[0], q->d[1], q->pad[0], q->pad[1], q->pad[2],
                  q->pad[3]}};
        check_identity("conv", call, ny * 4);
        env_t e;
        env_open(&e, best_level(), 2);
        call.out.buf = got;
        cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK, "%s", e.error);
        env_close(&e);
        for (size_t i = 0; i < ny; i++)
            cr_assert_eq(bib_f32_bits(got[i]), bib_f32_bits(want[i]),
                         "conv case %zu element %zu: 0x%08x, the contract 0x%08x", gi, i,
                         bib_f32_bits(got[i]), bib_f32_bits(want[i]));
        free(x), free(w), free(want), free(got);
    }
}

Test(cpu_ops_identity, pool_rows_match_reference) {
    /* The vector rows against the scalar reference: MAX and AVG (with and
     * without count_include_pad) over rows of several vector blocks and
     * tails, strides (gathers), dilation, pads wider than the window, bottom
     * and right pads that only the padded extent sees (ceil_mode), a window
     * wider than a vector form takes (17), and special values. geo: n, c, h,
     * w, kh, kw, then p[2..10) = stride h,w, dilation h,w, pad t,l,b,r. */
    static const int64_t geos[][14] = {
        {1, 3, 20, 131, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {1, 4, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
        {2, 2, 9, 70, 5, 5, 2, 3, 1, 2, 2, 3, 2, 3},
        {1, 2, 7, 64, 2, 2, 2, 2, 1, 1, 0, 0, 1, 1},
        {1, 2, 6, 33, 3, 3, 1, 1, 2, 2, 2, 2, 0, 4},
        {1, 2, 5, 40, 1, 17, 1, 1, 1, 1, 0, 8, 0, 8},
        {3, 1, 1, 300, 1, 5, 1, 3, 1, 2, 0, 4, 0, 1},
        {1, 2, 4, 4, 4, 4, 1, 1, 1, 1, 3, 3, 3, 3},
        /* A window of 2^24 + 16 taps: AVG's count is past what a float counts
         * exactly, so the vector rows leave it to the reference. */
        {1, 1, 1, 16, 1048577, 16, 1, 1, 1, 1, 1048576, 0, 0, 0},
    };
    for (size_t gi = 0; gi < sizeof geos / sizeof geos[0]; gi++) {
        const int64_t *q = geos[gi];
        uint32_t oh = geo_out(q[2], q[4], q[6], q[8], q[10], q[12]);
        uint32_t ow = geo_out(q[3], q[5], q[7], q[9], q[11], q[13]);
        size_t nx = (size_t)(q[0] * q[1] * q[2] * q[3]), ny = (size_t)(q[0] * q[1]) * oh * ow;
        float *x = random_f32(nx, 3.0f, gi % 2 == 0);
        for (int sub = 0; sub < 3; sub++) {
            bib_call_t call = {
                .kernel = BIB_KERNEL_POOL,
                .sub = sub == 0 ? BIB_POOL_MAX : BIB_POOL_AVG,
                .out = {.dtype = BIB_DTYPE_F32,
                        .rank = 4,
                        .dims = {(uint32_t)q[0], (uint32_t)q[1], oh, ow}},
                .in = {{.buf = x,
                        .dtype = BIB_DTYPE_F32,
                        .rank = 4,
                        .dims = {(uint32_t)q[0], (uint32_t)q[1], (uint32_t)q[2], (uint32_t)q[3]}}},
                .p = {q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11], q[12], q[13], 0, sub == 2}};
            check_identity(sub == 0   ? "maxpool"
                           : sub == 1 ? "avgpool"
                                      : "avgpool with pads",
                           call, ny * 4);
        }
        free(x);
    }
}

Test(cpu_ops_identity, batchnorm_planes_match_reference) {
    /* Planes of several vectors and a tail, one element, and stats with a
     * zero variance and eps (den 0), -0 and +0 means, NaN and Inf. */
    static const uint32_t dims[][4] = {{2, 5, 7, 9}, {1, 3, 1, 1}, {1, 4, 16, 16}, {3, 2, 1, 37}};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const uint32_t *d = dims[di];
        size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
        float *x = random_f32(n, 4.0f, true), *st = random_f32(4 * d[1], 2.0f, false);
        for (uint32_t ch = 0; ch < d[1]; ch++)
            st[3 * d[1] + ch] = fabsf(st[3 * d[1] + ch]);
        st[3 * d[1]] = 0.0f;             /* var 0 */
        st[2 * d[1] + d[1] - 1] = -0.0f; /* mean -0 */
        if (d[1] > 2)
            st[1] = bib_f32_from_bits(0x7F800000u); /* scale of channel 1 +Inf */
        for (int act = 0; act < 2; act++)
            for (int eps = 0; eps < 2; eps++) {
                bib_call_t call = {
                    .kernel = BIB_KERNEL_BATCHNORM,
                    .sub = act ? BIB_ACT_RELU : BIB_ACT_NONE,
                    .out = {.dtype = BIB_DTYPE_F32, .rank = 4, .dims = {d[0], d[1], d[2], d[3]}},
                    .in = {{.buf = x,
                            .dtype = BIB_DTYPE_F32,
                            .rank = 4,
                            .dims = {d[0], d[1], d[2], d[3]}},
                           view2(st, BIB_DTYPE_F32, 4, d[1])},
                    .f = {eps ? 1e-5 : 0.0}};
                check_identity(act ? "batchnorm_relu" : "batchnorm", call, n * 4);
            }
        free(x), free(st);
    }
}

/* call's words at every level and thread count (check_identity), and at
 * the scalar level against want. */
static void check_words(const char *what, size_t case_no, bib_call_t call, const uint32_t *want,
                        size_t n) {
    check_identity(what, call, n * 4);
    env_t env;
    env_open(&env, BIB_CPU_LEVEL_SCALAR, 1);
    uint32_t *got = malloc(n * 4);
    call.out.buf = got;
    cr_assert_eq(bib_cpu_ops_run(&env.ctx, &call), BIB_OK, "%s", env.error);
    env_close(&env);
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(got[k], want[k], "%s case %zu word %zu: 0x%x, the formula 0x%x", what, case_no,
                     k, got[k], want[k]);
    free(got);
}

/* STRIDED and TAKE against kernels.def's formulas written out, one output
 * word at a time: out [2,3,5] (padded to rank 6 in front) from in0 and in1
 * of 240 words, over strides 1, 2, negative and 0, a split on the last
 * axis, on another axis and none; TAKE with an index per row (a row of in0
 * copied) and per element, negative indices included. Every level, 1 and 3
 * threads. */
Test(cpu_ops_identity, strided_and_take_match_their_formulas) {
    enum { N = 240 };
    uint32_t *x0 = malloc(N * 4), *x1 = malloc(N * 4);
    for (uint32_t k = 0; k < N; k++)
        x0[k] = 0x1000u + k, x1[k] = 0x2000u + k;
    /* p[0], strides of axes 3..5 for in0; p[7], the same for in1; split axis, at */
    static const int64_t cases[][9] = {
        {0, 15, 5, 1, 0, 15, 5, 1, 6},     {4, 60, 10, 2, 3, 30, -1, 3, 6},
        {200, -60, 0, -2, 0, 0, 20, 1, 6}, {0, 15, 5, 1, 1, 15, 5, 1, 5},
        {9, 7, 1, 2, 2, 1, 33, 3, 4},      {0, 1, 2, 6, 100, -30, 7, -1, 3},
    };
    static const int64_t splits[] = {2, 0, 5, 1, 3, 7};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t *q = cases[ci];
        int64_t axis = q[8] == 6 ? 5 : q[8], split = q[8] == 6 ? 5 : splits[ci];
        bib_call_t c = {
            .kernel = BIB_KERNEL_STRIDED,
            .out = {.dtype = BIB_DTYPE_F32, .rank = 3, .dims = {2, 3, 5}},
            .in = {view1(x0, BIB_DTYPE_F32, N), view1(x1, BIB_DTYPE_F32, N)},
            .p = {q[0], 0, 0, 0, q[1], q[2], q[3], q[4], 0, 0, 0, q[5], q[6], q[7], axis, split}};
        uint32_t want[30];
        for (uint32_t a = 0; a < 2; a++)
            for (uint32_t b = 0; b < 3; b++)
                for (uint32_t e = 0; e < 5; e++) {
                    int64_t i[6] = {0, 0, 0, a, b, e};
                    bool second = i[axis] >= split;
                    int64_t at = second ? c.p[7] : c.p[0];
                    for (int k = 0; k < 6; k++)
                        at += i[k] * c.p[(second ? 8 : 1) + k];
                    cr_assert(at >= 0 && at < N, "case %zu reads word %lld", ci, (long long)at);
                    want[(a * 3 + b) * 5 + e] = second ? x1[at] : x0[at];
                }
        check_words("strided", ci, c, want, 30);
    }
    /* TAKE: in0 [8,6,5] read along axis 1 (stride 5, 6 long) by in1. */
    int32_t idx[30];
    for (int k = 0; k < 30; k++)
        idx[k] = (k * 7) % 12 - 6;
    static const int64_t takes[][6] = {
        /* in0 strides of axes 3, 4, 5; in1 strides of axes 3, 4, 5 */
        {30, 0, 1, 15, 5, 1}, /* an index per element */
        {30, 0, 1, 3, 1, 0},  /* an index per row: rows of in0 */
        {60, 1, 0, 0, 5, 0},  /* an index per row, in0 read down a column */
    };
    for (size_t ti = 0; ti < sizeof takes / sizeof takes[0]; ti++) {
        const int64_t *q = takes[ti];
        bib_call_t c = {.kernel = BIB_KERNEL_TAKE,
                        .out = {.dtype = BIB_DTYPE_F32, .rank = 3, .dims = {2, 3, 5}},
                        .in = {view1(x0, BIB_DTYPE_F32, N), view1(idx, BIB_DTYPE_I32, 30)},
                        .p = {0, 0, 0, q[0], q[1], q[2], 0, 0, 0, q[3], q[4], q[5], 5, 6}};
        uint32_t want[30];
        for (uint32_t a = 0; a < 2; a++)
            for (uint32_t b = 0; b < 3; b++)
                for (uint32_t e = 0; e < 5; e++) {
                    int64_t j = idx[a * q[3] + b * q[4] + e * q[5]];
                    j += j < 0 ? 6 : 0;
                    int64_t at = a * q[0] + b * q[1] + e * q[2] + j * 5;
                    cr_assert(at >= 0 && at < N, "take %zu reads word %lld", ti, (long long)at);
                    want[(a * 3 + b) * 5 + e] = x0[at];
                }
        check_words("take", ti, c, want, 30);
    }
    free(x0), free(x1);
}

/* ARGSORT against a sort written out: the order ARGMAX (ARGMIN) takes
 * element after element, by a stable insertion of each index, over rows
 * with NaNs, ties, signed zeros and infinities; every level and thread
 * count (check_identity). */
static bool argsort_before(float a, size_t ia, float b, size_t ib, bool max) {
    bool na = a != a, nb = b != b;
    if (na || nb)
        return na && (!nb || ia < ib);
    int32_t ka = bib_f32_order_key(a), kb = bib_f32_order_key(b);
    if (ka != kb)
        return max ? ka > kb : ka < kb;
    return ia < ib;
}

/* Each row's order by a stable insertion of each index. */
static void sort_written_out(const float *x, uint32_t r, uint32_t n, bool max, int32_t *want) {
    for (uint32_t row = 0; row < r; row++) {
        const float *xr = x + (size_t)row * n;
        int32_t *w = want + (size_t)row * n;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t at = k;
            while (at > 0 && argsort_before(xr[k], k, xr[w[at - 1]], (size_t)w[at - 1], max)) {
                w[at] = w[at - 1];
                at--;
            }
            w[at] = (int32_t)k;
        }
    }
}

Test(cpu_ops_identity, argsort_matches_a_sort_written_out) {
    static const uint32_t dims[][2] = {{1, 1}, {3, 7}, {2, 64}, {5, 300}, {2, 1000}, {1, 0}};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        uint32_t r = dims[di][0], n = dims[di][1];
        float *x = random_f32((size_t)r * n, 3.0f, true);
        for (size_t i = 0; i < (size_t)r * n; i += 3)
            x[i] = (float)(int)x[i]; /* ties */
        int32_t *want = malloc(((size_t)r * n + 1) * 4);
        for (int max = 1; max >= 0; max--) {
            sort_written_out(x, r, n, max, want);
            bib_call_t c = {.kernel = BIB_KERNEL_ARGSORT,
                            .sub = max ? BIB_ARGMAX_MAX : BIB_ARGMAX_MIN,
                            .out = view2(NULL, BIB_DTYPE_I32, r, n),
                            .in = {view2(x, BIB_DTYPE_F32, r, n)}};
            check_words(max ? "argsort desc" : "argsort asc", di, c, (const uint32_t *)want,
                        (size_t)r * n);
        }
        free(x), free(want);
    }
}

/* TOPK (ARGSORT with an output of k < n columns): the first k of the order
 * written out, for k on both sides of the selection's bound (n / 32), over
 * rows in and against their order (one of them every element a new best,
 * which the selection leaves to the sort), all equal, NaNs throughout,
 * signed zeros (where the heap's top is a zero and the scan must let the
 * other zero through), random with ties. */
Test(cpu_ops_identity, topk_is_the_first_k_of_the_sort) {
    enum { R = 8, N = 1000 };
    float *x = random_f32((size_t)R * N, 3.0f, true);
    int32_t *want = malloc((size_t)R * N * 4), *first = malloc((size_t)R * N * 4);
    cr_assert(want && first);
    for (uint32_t i = 0; i < N; i++) {
        x[i] = (float)i;                                                  /* ascending */
        x[N + i] = (float)(N - i);                                        /* descending */
        x[2 * N + i] = 1.5f;                                              /* all equal */
        x[3 * N + i] = i % 7 ? NAN : -0.0f;                               /* NaNs, signed zeros */
        x[4 * N + i] = (float)(int)x[4 * N + i] * (i % 2 ? 1.0f : -1.0f); /* ties */
        x[5 * N + i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? -0.0f : x[5 * N + i];
        x[6 * N + i] = i % 2 ? 0.0f : -0.0f; /* the bar a zero: -0 and +0 told apart */
        x[7 * N + i] = i % 97 == 50 ? 0.0f : i % 89 == 30 ? -0.0f : -1.0f - (float)(i % 5);
    }
    static const uint32_t ks[] = {1, 2, 5, 17, N / 32, N / 32 + 1, 125, 400, N - 1};
    for (int max = 1; max >= 0; max--) {
        sort_written_out(x, R, N, max, want);
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            uint32_t k = ks[ki];
            for (uint32_t row = 0; row < R; row++)
                memcpy(first + (size_t)row * k, want + (size_t)row * N, (size_t)k * 4);
            bib_call_t c = {.kernel = BIB_KERNEL_ARGSORT,
                            .sub = max ? BIB_ARGMAX_MAX : BIB_ARGMAX_MIN,
                            .out = view2(NULL, BIB_DTYPE_I32, R, k),
                            .in = {view2(x, BIB_DTYPE_F32, R, N)}};
            check_words(max ? "topk desc" : "topk asc", ki, c, (const uint32_t *)first,
                        (size_t)R * k);
        }
    }
    free(x), free(want), free(first);
}

/* CUMSUM against the scan written out, one add after another in double
 * rounded to float after each add (exactly the float add), for every flag,
 * f32 and i32, over row counts that leave the interleaved groups of eight
 * a remainder and rows with NaNs, -0 first, infinities and sums that round;
 * every level and thread count (check_words). */
Test(cpu_ops_identity, cumsum_matches_the_scan_written_out) {
    static const uint32_t dims[][2] = {{1, 1}, {3, 7}, {13, 64}, {2, 1000}, {19, 5}, {4, 0}};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const uint32_t r = dims[di][0], n = dims[di][1];
        const size_t count = (size_t)r * n;
        float *x = random_f32(count, 1e4f, true), *wf = malloc(count * 4 + 4);
        int32_t *xi = malloc(count * 4 + 4), *wi = malloc(count * 4 + 4);
        cr_assert(wf && xi && wi);
        for (size_t e = 0; e < count; e++) {
            x[e] = e % 11 == 3 ? 1e8f : e % 11 == 7 ? -1e8f : x[e]; /* sums that round */
            xi[e] = (int32_t)((uint32_t)e * 2654435761u);           /* sums that wrap */
        }
        if (count > 20)
            x[0] = -0.0f, x[n] = -0.0f, x[5] = NAN, x[count - 2] = INFINITY;
        for (uint32_t flags = 0; flags <= BIB_SCAN__ALL; flags++) {
            const bool excl = flags & BIB_SCAN_EXCLUSIVE, rev = flags & BIB_SCAN_REVERSE;
            for (uint32_t row = 0; row < r; row++) {
                float s = 0.0f;
                uint32_t si = 0;
                for (uint32_t j = 0; j < n; j++) {
                    size_t at = (size_t)row * n + (rev ? n - 1 - j : j);
                    float before = s;
                    uint32_t before_i = si;
                    s = j == 0 ? x[at] : (float)((double)before + (double)x[at]);
                    si = j == 0 ? (uint32_t)xi[at] : before_i + (uint32_t)xi[at];
                    float y = excl ? (j == 0 ? 0.0f : before) : s;
                    wf[at] = y != y ? bib_f32_canonical_nan() : y;
                    wi[at] = (int32_t)(excl ? (j == 0 ? 0u : before_i) : si);
                }
            }
            bib_call_t c = {.kernel = BIB_KERNEL_CUMSUM,
                            .out = view2(NULL, BIB_DTYPE_F32, r, n),
                            .in = {view2(x, BIB_DTYPE_F32, r, n)},
                            .i = {flags}};
            check_words("cumsum f32", di * 4 + flags, c, (const uint32_t *)wf, count);
            c.out.dtype = c.in[0].dtype = BIB_DTYPE_I32;
            c.in[0].buf = xi;
            check_words("cumsum i32", di * 4 + flags, c, (const uint32_t *)wi, count);
        }
        free(x), free(wf), free(xi), free(wi);
    }
}

/* CUMSUM's column form (p[0] = m, in0 [outer, n, m]) against the row form
 * on each column (moved into rows here), f32 and i32, every flag; m wider
 * than one chunk of columns; every level and thread count. */
Test(cpu_ops_identity, cumsum_columns_match_the_rows_on_each_column) {
    enum { O = 3, N = 37, M = 300 };
    const size_t count = (size_t)O * N * M;
    float *x = random_f32(count, 1e4f, true), *xt = malloc(count * 4), *want = malloc(count * 4);
    int32_t *xi = malloc(count * 4), *xit = malloc(count * 4), *wi = malloc(count * 4);
    cr_assert(xt && want && xi && xit && wi);
    for (size_t e = 0; e < count; e++) {
        x[e] = e % 13 == 4 ? 1e8f : e % 13 == 9 ? -1e8f : e % 29 == 0 ? -0.0f : x[e];
        xi[e] = (int32_t)((uint32_t)e * 2654435761u);
    }
    x[7] = NAN;
    /* The columns as rows: xt[o][j][i] = x[o][i][j]. */
    for (size_t o = 0; o < O; o++)
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < M; j++) {
                xt[(o * M + j) * N + i] = x[(o * N + i) * M + j];
                xit[(o * M + j) * N + i] = xi[(o * N + i) * M + j];
            }
    for (uint32_t flags = 0; flags <= BIB_SCAN__ALL; flags++) {
        for (int d = 0; d < 2; d++) {
            const uint32_t dt = d ? BIB_DTYPE_I32 : BIB_DTYPE_F32;
            env_t env;
            env_open(&env, BIB_CPU_LEVEL_SCALAR, 1);
            uint32_t *rows = malloc(count * 4);
            bib_call_t rc = {.kernel = BIB_KERNEL_CUMSUM,
                             .out = view2(rows, dt, O * M, N),
                             .in = {view2(d ? (void *)xit : (void *)xt, dt, O * M, N)},
                             .i = {flags}};
            cr_assert_eq(bib_cpu_ops_run(&env.ctx, &rc), BIB_OK, "%s", env.error);
            env_close(&env);
            uint32_t *w = d ? (uint32_t *)wi : (uint32_t *)want;
            for (size_t o = 0; o < O; o++)
                for (size_t i = 0; i < N; i++)
                    for (size_t j = 0; j < M; j++)
                        w[(o * N + i) * M + j] = rows[(o * M + j) * N + i];
            free(rows);
            bib_view_t in = {
                .buf = d ? (void *)xi : (void *)x, .dtype = dt, .rank = 3, .dims = {O, N, M}};
            bib_call_t c = {
                .kernel = BIB_KERNEL_CUMSUM, .out = in, .in = {in}, .i = {flags}, .p = {M}};
            c.out.buf = NULL;
            check_words(d ? "cumsum columns i32" : "cumsum columns f32", flags, c, w, count);
        }
    }
    free(x), free(xt), free(want), free(xi), free(xit), free(wi);
}

Test(cpu_ops_identity, transpose_rng_fill_copy) {
    for (size_t s = 0; s < NSHAPES; s++) {
        uint32_t r = shapes[s][0], c = shapes[s][1];
        float *x = random_f32((size_t)r * c, 1.0f, true);
        bib_call_t t = {.kernel = BIB_KERNEL_TRANSPOSE,
                        .out = view2(NULL, BIB_DTYPE_F32, c, r),
                        .in = {view2(x, BIB_DTYPE_F32, r, c)}};
        check_identity("transpose", t, (size_t)r * c * 4);
        bib_call_t g = {.kernel = BIB_KERNEL_RNG,
                        .out = view2(NULL, BIB_DTYPE_F32, r, c),
                        .i = {0x123456789abcdefll, 7}};
        check_identity("rng", g, (size_t)r * c * 4);
        free(x);
    }
}

Test(cpu_ops, transpose_swaps_the_last_two_axes) {
    float x[2 * 3 * 5], y[2 * 5 * 3];
    for (int i = 0; i < 30; i++)
        x[i] = (float)i;
    bib_view_t in = {.buf = x, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {2, 3, 5}};
    bib_view_t out = {.buf = y, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {2, 5, 3}};
    bib_call_t call = {.kernel = BIB_KERNEL_TRANSPOSE, .out = out, .in = {in}};
    env_t e;
    env_open(&e, best_level(), 2);
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    env_close(&e);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++)
                cr_assert_eq(y[b * 15 + j * 3 + i], x[b * 15 + i * 5 + j]);
}

Test(cpu_ops, exp_special_values) {
    cr_assert_eq(bib_f32_bits(bib_exp(0.0f)), bib_f32_bits(1.0f));
    cr_assert_eq(bib_f32_bits(bib_exp(-0.0f)), bib_f32_bits(1.0f));
    cr_assert_eq(bib_exp(INFINITY), INFINITY);
    cr_assert_eq(bib_f32_bits(bib_exp(-INFINITY)), 0u);
    cr_assert_eq(bib_exp(89.0f), INFINITY);
    /* The vector code clamps to [LO, HI] instead of selecting +0 and +Inf
     * beyond them: that is exact only because the sequence itself gives
     * exactly +0 at LO and +Inf at HI. */
    cr_assert_eq(bib_f32_bits(bib_exp(BIB_EXP_LO)), 0u, "exp(LO) is +0");
    cr_assert_eq(bib_f32_bits(bib_exp(BIB_EXP_HI)), 0x7F800000u, "exp(HI) is +Inf");
    cr_assert_eq(bib_exp(100.0f), INFINITY);
    cr_assert_eq(bib_f32_bits(bib_exp(-104.5f)), 0u);
    cr_assert_eq(bib_f32_bits(bib_exp(bib_f32_from_bits(0xFFC00001u))), 0x7FC00000u);
    float big = bib_exp(88.7f);
    cr_assert(isfinite(big) && big > 3.2e38f);
    float tiny = bib_exp(-100.0f); /* 3.72e-44: a denormal, kept */
    cr_assert(tiny > 0.0f && tiny < 1.2e-38f);
    cr_assert(fabs((double)tiny - exp(-100.0)) <= 0x1p-149, "exp(-100) = %a", (double)tiny);
}

Test(cpu_ops, signed_zero_rules) {
    cr_assert_eq(bib_f32_bits(bib_relu(-0.0f)), 0u, "relu(-0) is +0");
    cr_assert_eq(bib_f32_bits(bib_tanh(-0.0f)), 0x80000000u, "tanh(-0) is -0");
    cr_assert_eq(bib_f32_bits(bib_gelu(-INFINITY)), 0x80000000u, "gelu(-Inf) is -0");
    cr_assert_eq(bib_f32_bits(bib_sigmoid(-0.0f)), bib_f32_bits(0.5f));
    float z[2] = {-0.0f, 0.0f}, zr[2] = {0.0f, -0.0f}, nz[2] = {-0.0f, -0.0f};
    cr_assert_eq(bib_f32_bits(bib_max(z, 2)), 0u, "max(-0,+0) is +0");
    cr_assert_eq(bib_f32_bits(bib_max(zr, 2)), 0u, "max(+0,-0) is +0");
    cr_assert_eq(bib_f32_bits(bib_max(nz, 2)), 0x80000000u, "max(-0,-0) is -0");
    cr_assert_eq(bib_f32_bits(bib_tree_sum(nz, 2)), 0u, "the tree starts from +0");
}

Test(cpu_ops, nan_outputs_are_canonical) {
    float x[5] = {1.0f, bib_f32_from_bits(0xFFC00000u), 3.0f, bib_f32_from_bits(0x7FC00042u), 2.0f};
    float y[5];
    env_t e;
    env_open(&e, best_level(), 1);
    for (uint32_t op = BIB_UNARY_RELU; op < BIB_UNARY__COUNT; op++) {
        e.ctx.rowops->unary(op, x, y, 5);
        cr_assert_eq(bib_f32_bits(y[1]), 0x7FC00000u, "unary %u", op);
        cr_assert_eq(bib_f32_bits(y[3]), 0x7FC00000u, "unary %u", op);
    }
    e.ctx.rowops->softmax(x, y, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(bib_f32_bits(y[i]), 0x7FC00000u, "softmax of a row with NaN is NaN");
    cr_assert_eq(bib_f32_bits(e.ctx.rowops->max(x, 5)), 0x7FC00000u);
    float zero = 0.0f, q;
    e.ctx.rowops->binary(BIB_BINARY_DIV, &zero, &zero, 1, &q, 1);
    cr_assert_eq(bib_f32_bits(q), 0x7FC00000u, "0/0 is the canonical NaN, not x86's 0xFFC00000");
    int32_t idx;
    bib_call_t call = {.kernel = BIB_KERNEL_ARGMAX,
                       .out = view1(&idx, BIB_DTYPE_I32, 1),
                       .in = {view2(x, BIB_DTYPE_F32, 1, 5)}};
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    cr_assert_eq(idx, 1, "argmax is the first NaN's index");
    env_close(&e);
}

Test(cpu_ops, softmax_of_extreme_inputs_is_finite) {
    float x[4] = {-1000.0f, 1000.0f, 999.0f, -INFINITY}, y[4];
    bib_cpu_rowops_scalar.softmax(x, y, 4);
    cr_assert_eq(y[0], 0.0f);
    cr_assert_eq(y[3], 0.0f);
    cr_assert(fabsf(y[1] - 0.7310586f) < 1e-6f && fabsf(y[2] - 0.2689414f) < 1e-6f);
}

Test(cpu_ops, argmax_takes_the_first_maximum) {
    float x[6] = {1.0f, 5.0f, -2.0f, 5.0f, 5.0f, 0.0f};
    int32_t idx;
    bib_call_t call = {.kernel = BIB_KERNEL_ARGMAX,
                       .out = view1(&idx, BIB_DTYPE_I32, 1),
                       .in = {view2(x, BIB_DTYPE_F32, 1, 6)}};
    env_t e;
    env_open(&e, BIB_CPU_LEVEL_SCALAR, 1);
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    env_close(&e);
    cr_assert_eq(idx, 1);
}

Test(cpu_ops, philox_known_answers) {
    /* Random123's kat_vectors for philox4x32_10. */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x408f276du,
         0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
        {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, 0xd16cfe09u,
         0x94fdccebu, 0x5001e420u, 0x24126ea1u},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t out[4];
        bib_cpu_philox4x32_10(kat[t], kat[t] + 4, out);
        for (int w = 0; w < 4; w++)
            cr_assert_eq(out[w], kat[t][6 + w], "vector %d word %d: 0x%08x", t, w, out[w]);
    }
}

Test(cpu_ops, rng_maps_words_to_24_bit_uniforms) {
    float y[9];
    bib_call_t call = {.kernel = BIB_KERNEL_RNG,
                       .out = view1(y, BIB_DTYPE_F32, 9),
                       .i = {0x0000000500000003ll, 2}};
    env_t e;
    env_open(&e, BIB_CPU_LEVEL_SCALAR, 1);
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    env_close(&e);
    uint32_t key[2] = {3, 5}, ctr[4] = {2, 0, 2, 0}, w[4];
    bib_cpu_philox4x32_10(ctr, key, w);
    cr_assert_eq(y[8], (float)(w[0] >> 8) * 0x1p-24f, "element 8 is word 0 of counter (2,0,2,0)");
    for (int i = 0; i < 9; i++)
        cr_assert(y[i] >= 0.0f && y[i] < 1.0f);
}

Test(cpu_ops, gather_copies_rows_and_rejects_bad_indices) {
    float table[4 * 3];
    for (int i = 0; i < 12; i++)
        table[i] = (float)i;
    int32_t idx[3] = {3, 0, 3};
    float out[9];
    bib_call_t call = {.kernel = BIB_KERNEL_GATHER,
                       .out = view2(out, BIB_DTYPE_F32, 3, 3),
                       .in = {view2(table, BIB_DTYPE_F32, 4, 3), view1(idx, BIB_DTYPE_I32, 3)}};
    env_t e;
    env_open(&e, best_level(), 1);
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    cr_assert_eq(out[0], 9.0f);
    cr_assert_eq(out[4], 1.0f);
    idx[1] = 4;
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_E_TRAP);
    cr_assert(strstr(e.error, "index 4") && strstr(e.error, "position 1") &&
                  strstr(e.error, "4 rows"),
              "message: %s", e.error);
    idx[1] = -1;
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_E_TRAP);
    env_close(&e);
}

Test(cpu_ops, fill_and_copy_move_bits) {
    uint32_t y[5], z[5];
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .out = view1(y, BIB_DTYPE_F32, 5), .f = {-0.0f}};
    env_t e;
    env_open(&e, best_level(), 1);
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &fill), BIB_OK);
    bib_call_t copy = {.kernel = BIB_KERNEL_COPY,
                       .out = view1(z, BIB_DTYPE_F32, 5),
                       .in = {view1(y, BIB_DTYPE_F32, 5)}};
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &copy), BIB_OK);
    env_close(&e);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(z[i], 0x80000000u);
}

/* Runs `call` at every SIMD level on 1 and 3 threads into a buffer first
 * filled with 0xA5 bytes; each time the first `words` output words must be
 * `want` and the 16 words after them untouched. */
static void expect_words_every_level(const char *what, bib_call_t call, const uint32_t *want,
                                     size_t words) {
    uint32_t got[64 + 16];
    cr_assert(words <= 64);
    for (int level = 0; level <= (int)best_level(); level++)
        for (uint32_t threads = 1; threads <= 3; threads += 2) {
            env_t e;
            memset(got, 0xA5, sizeof got);
            env_open(&e, (bib_cpu_level_t)level, threads);
            call.out.buf = got;
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK, "%s: %s", what, e.error);
            env_close(&e);
            for (size_t i = 0; i < words; i++)
                cr_assert_eq(got[i], want[i], "%s: %s x%u element %zu: 0x%08x, want 0x%08x", what,
                             bib_cpu_level_name((bib_cpu_level_t)level), threads, i, got[i],
                             want[i]);
            for (size_t i = words; i < words + 16; i++)
                cr_assert_eq(got[i], 0xA5A5A5A5u, "%s: wrote past the output (word %zu)", what, i);
        }
}

Test(cpu_ops, reductions_over_an_empty_last_axis_are_defined) {
    float x[1] = {42.0f};
    static const uint32_t sum[3] = {0, 0, 0}, max[3] = {0xFF800000u, 0xFF800000u, 0xFF800000u},
                          mean[3] = {0x7FC00000u, 0x7FC00000u, 0x7FC00000u};
    static const uint32_t *want[3] = {
        [BIB_REDUCE_SUM] = sum, [BIB_REDUCE_MAX] = max, [BIB_REDUCE_MEAN] = mean};
    for (uint32_t op = BIB_REDUCE_SUM; op <= BIB_REDUCE_MEAN; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_REDUCE,
                           .sub = op,
                           .out = view1(NULL, BIB_DTYPE_F32, 3),
                           .in = {view2(x, BIB_DTYPE_F32, 3, 0)}};
        expect_words_every_level("reduce of [3,0]", call, want[op], 3);
        /* rank 1: one row, a scalar result */
        bib_call_t one = {.kernel = BIB_KERNEL_REDUCE,
                          .sub = op,
                          .out = {.dtype = BIB_DTYPE_F32, .rank = 0},
                          .in = {view1(x, BIB_DTYPE_F32, 0)}};
        expect_words_every_level("reduce of [0]", one, want[op], 1);
    }
    /* The VM refuses ARGMAX over an empty axis; the kernel still writes 0. */
    static const uint32_t zero[3] = {0, 0, 0};
    bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX,
                     .out = view1(NULL, BIB_DTYPE_I32, 3),
                     .in = {view2(x, BIB_DTYPE_F32, 3, 0)}};
    expect_words_every_level("argmax of [3,0]", am, zero, 3);
}

Test(cpu_ops, matmul_with_empty_inner_dimension_is_the_bias) {
    float a[1] = {7.0f}, b[1] = {9.0f};
    float bias[4] = {1.5f, -0.0f, -2.0f, 0.25f};
    uint32_t want[12], zeros[12] = {0};
    for (int i = 0; i < 12; i++)
        want[i] = bib_f32_bits(bias[i % 4]);
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL,
                       .out = view2(NULL, BIB_DTYPE_F32, 3, 4),
                       .in = {view2(a, BIB_DTYPE_F32, 3, 0), view2(b, BIB_DTYPE_F32, 0, 4)}};
    expect_words_every_level("matmul [3,0].[0,4]", call, zeros, 12);
    call.in[2] = view1(bias, BIB_DTYPE_F32, 4);
    /* +0 + -0 is +0: the bias is added to a +0 chain */
    want[1] = want[5] = want[9] = 0;
    expect_words_every_level("linear [3,0].[0,4] + bias", call, want, 12);
}

Test(cpu_ops, attention_with_no_keys_is_zero) {
    float q[2 * 2 * 3], kv[1] = {5.0f};
    for (int i = 0; i < 12; i++)
        q[i] = (float)i;
    static const uint32_t zeros[12] = {0};
    for (uint32_t causal = 0; causal <= 1; causal++) {
        bib_view_t qv = {.buf = q, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {2, 2, 3}};
        bib_view_t kv0 = {.buf = kv, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {0, 2, 3}};
        bib_call_t call = {.kernel = BIB_KERNEL_ATTENTION,
                           .sub = causal,
                           .out = qv,
                           .in = {qv, kv0, kv0},
                           .f = {0.5f}};
        expect_words_every_level("attention with T = 0", call, zeros, 12);
    }
}

/* ---- the elementwise math opcodes (spec/numerics.md sections 5a, 5b) ---- */

typedef struct math_case {
    uint32_t x, y, want; /* y: TPOW, TMIN, TMAX's second operand */
} math_case_t;

#define QNAN 0x7FC00000u
#define PINF 0x7F800000u
#define NINF 0xFF800000u
#define NZERO 0x80000000u
#define ONE 0x3F800000u

/* Runs unary op on the cases' x at every level and thread count (each case
 * once, in chunks of 64) and checks the exact result bits. */
static void expect_unary(const char *what, bib_unary_t op, const math_case_t *c, size_t n) {
    for (size_t at = 0; at < n; at += 64) {
        size_t m = n - at < 64 ? n - at : 64;
        float x[64];
        uint32_t want[64];
        for (size_t i = 0; i < m; i++)
            x[i] = bib_f32_from_bits(c[at + i].x), want[i] = c[at + i].want;
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY,
                           .sub = op,
                           .out = view1(NULL, BIB_DTYPE_F32, (uint32_t)m),
                           .in = {view1(x, BIB_DTYPE_F32, (uint32_t)m)}};
        expect_words_every_level(what, call, want, m);
    }
}

static void expect_binary(const char *what, bib_binary_t op, const math_case_t *c, size_t n) {
    float a[64], b[64];
    uint32_t want[64];
    cr_assert(n <= 64);
    for (size_t i = 0; i < n; i++) {
        a[i] = bib_f32_from_bits(c[i].x), b[i] = bib_f32_from_bits(c[i].y);
        want[i] = c[i].want;
    }
    bib_call_t call = {
        .kernel = BIB_KERNEL_BINARY,
        .sub = op,
        .out = view1(NULL, BIB_DTYPE_F32, (uint32_t)n),
        .in = {view1(a, BIB_DTYPE_F32, (uint32_t)n), view1(b, BIB_DTYPE_F32, (uint32_t)n)}};
    expect_words_every_level(what, call, want, n);
}

Test(cpu_ops_math, special_values_of_the_unary_ops) {
    static const math_case_t erf[] = {
        {0, 0, 0},
        {NZERO, 0, NZERO},
        {PINF, 0, ONE},
        {NINF, 0, 0xBF800000u},
        {0xFFC00001u, 0, QNAN},
        {0x00000001u, 0, 0x00000001u},
        {0x80000001u, 0, 0x80000001u},
        {0x40800000u /* 4 */, 0, ONE},
        {0xC1200000u, 0, 0xBF800000u},
        {ONE, 0, 0x3F57BB3Du /* erf(1), correctly rounded */},
    };
    expect_unary("ERF", BIB_UNARY_ERF, erf, sizeof erf / sizeof erf[0]);
    static const math_case_t log[] = {
        {0, 0, NINF},
        {NZERO, 0, NINF},
        {PINF, 0, PINF},
        {NINF, 0, QNAN},
        {0xBF800000u, 0, QNAN},
        {0x80000001u, 0, QNAN},
        {0x7FC00123u, 0, QNAN},
        {ONE, 0, 0},
        {0x40000000u, 0, 0x3F317218u /* ln 2 */},
        {0x00000001u, 0, 0xC2CE8ED0u /* ln 2^-149 */},
        {0x40800000u, 0, 0x3FB17218u /* ln 4 */},
    };
    expect_unary("LOG", BIB_UNARY_LOG, log, sizeof log / sizeof log[0]);
    static const math_case_t gelu_erf[] = {
        {NINF, 0, NZERO},
        {PINF, 0, PINF},
        {0xFFC00001u, 0, QNAN},
        {0, 0, 0},
        {NZERO, 0, NZERO},
        {0x41A00000u /* 20 */, 0, 0x41A00000u},
        {0xC1A00000u /* -20 */, 0, NZERO},
    };
    expect_unary("GELU_ERF", BIB_UNARY_GELU_ERF, gelu_erf, sizeof gelu_erf / sizeof gelu_erf[0]);
    static const math_case_t sqrt[] = {
        {0, 0, 0},
        {NZERO, 0, NZERO},
        {PINF, 0, PINF},
        {NINF, 0, QNAN},
        {0xBF800000u, 0, QNAN},
        {0xFFC00001u, 0, QNAN},
        {0x40800000u, 0, 0x40000000u},
        {0x40000000u, 0, 0x3FB504F3u},
        {0x00000001u, 0, 0x1A3504F3u},
    };
    expect_unary("SQRT", BIB_UNARY_SQRT, sqrt, sizeof sqrt / sizeof sqrt[0]);
    static const math_case_t rsqrt[] = {
        {0, 0, PINF},
        {NZERO, 0, NINF},
        {PINF, 0, 0},
        {NINF, 0, QNAN},
        {0xBF800000u, 0, QNAN},
        {0x40800000u, 0, 0x3F000000u},
        {0x40000000u, 0, 0x3F3504F3u /* 1 / binary32(sqrt 2) */},
    };
    expect_unary("RSQRT", BIB_UNARY_RSQRT, rsqrt, sizeof rsqrt / sizeof rsqrt[0]);
    static const math_case_t recip[] = {
        {0, 0, PINF},
        {NZERO, 0, NINF},
        {PINF, 0, 0},
        {NINF, 0, NZERO},
        {0x40400000u, 0, 0x3EAAAAABu},
        {0x00000001u, 0, PINF},
        {0xFFC00001u, 0, QNAN},
    };
    expect_unary("RECIP", BIB_UNARY_RECIP, recip, sizeof recip / sizeof recip[0]);
    static const math_case_t abs[] = {
        {NZERO, 0, 0},          {NINF, 0, PINF},
        {0xFFC00001u, 0, QNAN}, {0x80000001u, 0, 0x00000001u},
        {0x7F800001u, 0, QNAN},
    };
    expect_unary("TABS", BIB_UNARY_ABS, abs, sizeof abs / sizeof abs[0]);
    static const math_case_t neg[] = {
        {0, 0, NZERO},          {NZERO, 0, 0},
        {PINF, 0, NINF},        {0x00000001u, 0, 0x80000001u},
        {0x7FC00000u, 0, QNAN}, {0xFFC00001u, 0, QNAN},
    };
    expect_unary("TNEG", BIB_UNARY_NEG, neg, sizeof neg / sizeof neg[0]);
}

/* C99 Annex F (and numpy's float32 power) at every special case. */
Test(cpu_ops_math, pow_special_cases_follow_annex_f) {
    static const math_case_t pow[] = {
        {QNAN, 0, ONE},
        {QNAN, NZERO, ONE},
        {ONE, QNAN, ONE},
        {0xBF800000u, PINF, ONE},
        {0xBF800000u, NINF, ONE},
        {0x40000000u, QNAN, QNAN},
        {QNAN, 0x40000000u, QNAN},
        /* zeros: +Inf for y < 0, the sign of x kept for odd integers */
        {0, 0xC0400000u /* -3 */, PINF},
        {NZERO, 0xC0400000u, NINF},
        {NZERO, 0xC0000000u, PINF},
        {NZERO, 0xBF000000u, PINF},
        {0, 0x40400000u, 0},
        {NZERO, 0x40400000u, NZERO},
        {NZERO, 0x40000000u, 0},
        {NZERO, 0x3F000000u, 0},
        /* infinite y */
        {0x3F000000u, PINF, 0},
        {0x3F000000u, NINF, PINF},
        {0x40000000u, PINF, PINF},
        {0x40000000u, NINF, 0},
        /* infinite x */
        {NINF, 0xC0400000u, NZERO},
        {NINF, 0xC0000000u, 0},
        {NINF, 0x40400000u, NINF},
        {NINF, 0x40000000u, PINF},
        {NINF, 0x3F000000u, PINF},
        {PINF, 0xBF800000u, 0},
        {PINF, 0x3F000000u, PINF},
        /* negative x: integer y gives the sign of its parity, others NaN */
        {0xC0000000u, 0x3F000000u, QNAN},
        {0xC0000000u, 0x3FC00000u, QNAN},
        {0xC0000000u, 0x40400000u, 0xC1000000u /* -8 */},
        {0xC0000000u, 0x40000000u, 0x40800000u},
        {0xC0000000u, 0xBF800000u, 0xBF000000u},
        {0xBF800000u, 0x7149F2CAu /* 1e30 */, ONE},
        {0xBF800000u, 0x40400000u, 0xBF800000u},
        {0xC1200000u, 0x421C0000u /* -10^39 */, NINF},
        /* y = 1, 2, 0.5 and -1 are exact; overflow and underflow */
        {0x40000000u, 0x3F000000u, 0x3FB504F3u},
        {0x41100000u, 0x3F000000u, 0x40400000u},
        {0x3FC00000u, 0x40000000u, 0x40100000u},
        {0x00000001u, ONE, 0x00000001u},
        {0x41200000u, 0x421C0000u, PINF},
        {0x41200000u, 0xC2480000u /* -50 */, 0},
        {0x40000000u, 0xC3150000u /* -149 */, 0x00000001u},
        {0x40000000u, 0x41200000u, 0x44800000u /* 1024 */},
    };
    expect_binary("TPOW", BIB_BINARY_POW, pow, sizeof pow / sizeof pow[0]);
}

Test(cpu_ops_math, min_and_max_propagate_nan_and_order_signed_zeros) {
    static const math_case_t min[] = {
        {NZERO, 0, NZERO},
        {0, NZERO, NZERO},
        {QNAN, ONE, QNAN},
        {ONE, 0xFFC00001u, QNAN},
        {NINF, 0x40400000u, NINF},
        {0x40400000u, ONE, ONE},
        {0x00000001u, 0x80000001u, 0x80000001u},
    };
    expect_binary("TMIN", BIB_BINARY_MIN, min, sizeof min / sizeof min[0]);
    static const math_case_t max[] = {
        {NZERO, 0, 0},
        {0, NZERO, 0},
        {QNAN, ONE, QNAN},
        {ONE, 0xFFC00001u, QNAN},
        {NINF, 0x40400000u, 0x40400000u},
        {0x40400000u, ONE, 0x40400000u},
        {NZERO, NZERO, NZERO},
    };
    expect_binary("TMAX", BIB_BINARY_MAX, max, sizeof max / sizeof max[0]);
}

/* Against the C library's double functions over many bit patterns, normal
 * and denormal: the accuracy spec/numerics.md states (tests/oracle measures
 * against numpy; this is the same bound, checked on every build). */
static double ulps(float got, double ref) {
    float r = (float)fabs(ref);
    int e;
    frexpf(r > 0x1.fffffep127f ? 0x1.fffffep127f : r, &e);
    double sp = r < 0x1p-126f ? 0x1p-149 : ldexp(1.0, e - 24);
    if ((double)r == ldexp(1.0, e - 1) && fabs(ref) < r && r >= 0x1p-125f)
        sp /= 2;
    return fabs((double)got - ref) / sp;
}

Test(cpu_ops_math, erf_log_and_pow_stay_within_their_ulp_bounds) {
    double worst_erf = 0, worst_log = 0, worst_pow = 0;
    for (uint64_t b = 0; b < 0x80000000u; b += 4093) {
        float x = bib_f32_from_bits((uint32_t)b);
        if (x != x || isinf(x))
            continue;
        worst_erf = fmax(worst_erf, ulps(bib_erf(x), erf((double)x)));
        worst_erf = fmax(worst_erf, ulps(bib_erf(-x), erf(-(double)x)));
        if (x > 0)
            worst_log = fmax(worst_log, ulps(bib_log(x), log((double)x)));
        float y = bib_f32_from_bits(0x3F800000u + (uint32_t)(b % 0x04000000u)) - 2.0f;
        y = y * (float)(b % 97);
        double ref = pow((double)x, (double)y);
        if (x > 0 && fabs(ref) >= 0x1p-126 && fabs(ref) <= 0x1.fffffep127)
            worst_pow = fmax(worst_pow, ulps(bib_pow(x, y), ref));
    }
    cr_assert_leq(worst_erf, 1.1, "erf: %.3f ULP", worst_erf);
    cr_assert_leq(worst_log, 0.55, "log: %.3f ULP", worst_log);
    cr_assert_leq(worst_pow, 1.5, "pow: %.3f ULP", worst_pow);
}

/* SIN and COS: within 1 ULP of the C library's double sin and cos (an
 * exhaustive run over every float measured 0.936 and 0.940), on every
 * 509th float (the reduction's every exponent), every float around the
 * switch points, and at the special values. */
Test(cpu_ops_math, sin_and_cos_stay_within_1_ulp_on_every_argument) {
    double worst_sin = 0, worst_cos = 0;
    for (uint64_t b = 0; b < 0x7F800000u; b += 509) {
        float x = bib_f32_from_bits((uint32_t)b);
        worst_sin = fmax(worst_sin, ulps(bib_sincos(x, 0), sin((double)x)));
        worst_cos = fmax(worst_cos, ulps(bib_sincos(x, 1), cos((double)x)));
    }
    static const uint32_t centers[] = {0x39800000u /* 2^-12 */, 0x3F490FDBu /* pi/4 */,
                                       0x3FC90FDBu /* pi/2 */,  0x40490FDBu /* pi */,
                                       0x4B800000u /* 2^24 */,  0x7F7FFFFFu /* FLT_MAX */};
    for (size_t c = 0; c < sizeof centers / sizeof centers[0]; c++)
        for (uint32_t d = 0; d < 4096; d++) {
            float x = bib_f32_from_bits(centers[c] - 2048u + d);
            worst_sin = fmax(worst_sin, ulps(bib_sincos(x, 0), sin((double)x)));
            worst_cos = fmax(worst_cos, ulps(bib_sincos(x, 1), cos((double)x)));
        }
    cr_assert_leq(worst_sin, 1.0, "sin: %.3f ULP", worst_sin);
    cr_assert_leq(worst_cos, 1.0, "cos: %.3f ULP", worst_cos);
    /* odd and even, bit for bit; the specials */
    for (uint32_t b = 0; b < 0x7F800000u; b += 100003) {
        float x = bib_f32_from_bits(b);
        cr_assert_eq(bib_f32_bits(bib_sincos(-x, 0)), bib_f32_bits(bib_sincos(x, 0)) ^ 0x80000000u);
        cr_assert_eq(bib_f32_bits(bib_sincos(-x, 1)), bib_f32_bits(bib_sincos(x, 1)));
    }
    cr_assert_eq(bib_f32_bits(bib_sincos(-0.0f, 0)), 0x80000000u);
    cr_assert_eq(bib_f32_bits(bib_sincos(-0.0f, 1)), 0x3F800000u);
    cr_assert_eq(bib_f32_bits(bib_sincos(bib_f32_from_bits(0x80000001u), 0)), 0x80000001u);
    for (int w = 0; w < 2; w++) {
        cr_assert_eq(bib_f32_bits(bib_sincos(INFINITY, w)), QNAN);
        cr_assert_eq(bib_f32_bits(bib_sincos(-INFINITY, w)), QNAN);
        cr_assert_eq(bib_f32_bits(bib_sincos(bib_f32_from_bits(0xFFC00001u), w)), QNAN);
    }
}

/* FLOOR, CEIL and ROUND against the C library's floorf, ceilf and rintf
 * (round to nearest, ties to even: the default mode) on every float of
 * magnitude in [0.5, 8), every 61st below 2^24 (where the fraction
 * matters) and every 4093rd beyond; a NaN comes out canonical. Then every SIMD level and
 * thread count on the quarters, their neighbours and the edges. */
Test(cpu_ops_math, floor_ceil_and_round_are_exact) {
    static const struct {
        int dir;
        float (*libm)(float);
        const char *name;
    } ops[] = {{0, floorf, "floor"}, {1, ceilf, "ceil"}, {2, rintf, "round"}};
    for (uint64_t b = 0; b <= 0xFFFFFFFFu;) {
        float x = bib_f32_from_bits((uint32_t)b);
        for (int o = 0; o < 3; o++) {
            uint32_t got = bib_f32_bits(bib_round_integral(x, ops[o].dir));
            uint32_t want = x != x ? QNAN : bib_f32_bits(ops[o].libm(x));
            if (got != want)
                cr_assert_fail("%s(0x%08x): 0x%08x, libm 0x%08x", ops[o].name, (uint32_t)b, got,
                               want);
        }
        uint32_t mag = (uint32_t)b & 0x7FFFFFFFu;
        b += mag >= 0x3F000000u && mag < 0x41000000u ? 1 : mag < 0x4B800000u ? 61 : 4093;
    }
    enum { N = 4096 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - N / 2) * 0.25f + (i % 3 == 0 ? 0x1p-12f : 0.0f);
    x[0] = bib_f32_from_bits(0x80000001u), x[1] = -0.0f, x[2] = bib_f32_from_bits(0x7F800001u);
    x[3] = 0x1.fffffep22f, x[4] = -0x1.fffffep22f, x[5] = 8388607.5f, x[6] = -0.5f;
    for (int o = 0; o < 3; o++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY,
                           .sub = BIB_UNARY_FLOOR + (uint32_t)o,
                           .out = view1(NULL, BIB_DTYPE_F32, N),
                           .in = {view1(x, BIB_DTYPE_F32, N)}};
        check_identity(ops[o].name, call, N * 4);
    }
}

/* LOGSOFTMAX: identity across levels and threads, in place too, and its
 * pinned rows. */
Test(cpu_ops_math, logsoftmax_every_level_and_special_rows) {
    row_kernel_identity(BIB_KERNEL_SOFTMAX, BIB_SOFTMAX_LOG, 150.0f, 0);
    enum { COLS = 67 };
    float x[4 * COLS];
    for (int j = 0; j < COLS; j++) {
        x[j] = -INFINITY;                            /* all -Inf: NaN */
        x[COLS + j] = j == 3 ? 0.0f : -INFINITY;     /* [-Inf.., 0, ..]: 0 and -Inf */
        x[2 * COLS + j] = 2.5f;                      /* equal: -log(67) */
        x[3 * COLS + j] = j == 66 ? INFINITY : 1.0f; /* +Inf: NaN */
    }
    bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX,
                       .sub = BIB_SOFTMAX_LOG,
                       .out = view2(NULL, BIB_DTYPE_F32, 4, COLS),
                       .in = {view2(x, BIB_DTYPE_F32, 4, COLS)}};
    check_identity("logsoftmax special rows", call, sizeof x);
    float y[4 * COLS];
    env_t e;
    env_open(&e, best_level(), 1);
    call.out.buf = y;
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    /* in place gives the same bytes */
    call.out.buf = x;
    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
    env_close(&e);
    cr_assert_eq(memcmp(x, y, sizeof x), 0, "logsoftmax in place differs");
    for (int j = 0; j < COLS; j++) {
        cr_assert_eq(bib_f32_bits(y[j]), QNAN);
        cr_assert_eq(bib_f32_bits(y[COLS + j]), j == 3 ? 0u : NINF);
        cr_assert_eq(bib_f32_bits(y[2 * COLS + j]), bib_f32_bits(-bib_log(67.0f)));
        cr_assert_eq(bib_f32_bits(y[3 * COLS + j]), QNAN);
    }
}

/* LAYERNORM PACKED is LAYERNORM with gamma and beta taken from the rows of
 * one [2,N] tensor, bit for bit. */
Test(cpu_ops_math, layernorm_packed_equals_layernorm_with_its_rows) {
    for (size_t s = 0; s < NSHAPES; s++) {
        uint32_t r = shapes[s][0], c = shapes[s][1];
        float *x = random_f32((size_t)r * c, 10.0f, s % 2 == 0);
        float *gb = random_f32(2 * (size_t)c, 2.0f, false);
        bib_call_t packed = {.kernel = BIB_KERNEL_LAYERNORM,
                             .sub = BIB_LAYERNORM_PACKED,
                             .out = view2(NULL, BIB_DTYPE_F32, r, c),
                             .in = {view2(x, BIB_DTYPE_F32, r, c), view2(gb, BIB_DTYPE_F32, 2, c)},
                             .f = {0.003f}};
        check_identity("layernorm packed", packed, (size_t)r * c * 4);
        bib_call_t plain = packed;
        plain.sub = BIB_LAYERNORM_NONE;
        plain.in[1] = view1(gb, BIB_DTYPE_F32, c);
        plain.in[2] = view1(gb + c, BIB_DTYPE_F32, c);
        float *a = malloc((size_t)r * c * 4), *b = malloc((size_t)r * c * 4);
        env_t e;
        env_open(&e, best_level(), 2);
        packed.out.buf = a, plain.out.buf = b;
        cr_assert_eq(bib_cpu_ops_run(&e.ctx, &packed), BIB_OK);
        cr_assert_eq(bib_cpu_ops_run(&e.ctx, &plain), BIB_OK);
        env_close(&e);
        cr_assert_eq(memcmp(a, b, (size_t)r * c * 4), 0, "packed [%u,%u] differs", r, c);
        free(a), free(b), free(x), free(gb);
    }
}

/* A row's bytes do not depend on how many rows come with it. */
Test(cpu_ops_math, row_results_do_not_depend_on_the_batch) {
    enum { N = 301, ROWS = 37 };
    float *x = random_f32((size_t)ROWS * N, 40.0f, false), *gb = random_f32(2 * N, 2.0f, false);
    static const uint32_t subs[2] = {BIB_SOFTMAX_LOG, BIB_LAYERNORM_PACKED};
    for (int k = 0; k < 2; k++) {
        float *all = malloc((size_t)ROWS * N * 4), *one = malloc(N * 4);
        bib_call_t call = {.kernel = k ? BIB_KERNEL_LAYERNORM : BIB_KERNEL_SOFTMAX,
                           .sub = subs[k],
                           .out = view2(all, BIB_DTYPE_F32, ROWS, N),
                           .in = {view2(x, BIB_DTYPE_F32, ROWS, N), view2(gb, BIB_DTYPE_F32, 2, N)},
                           .f = {1e-5f}};
        env_t e;
        env_open(&e, best_level(), 2);
        cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
        for (uint32_t r = 0; r < ROWS; r += 5) {
            call.out = view2(one, BIB_DTYPE_F32, 1, N);
            call.in[0] = view2(x + (size_t)r * N, BIB_DTYPE_F32, 1, N);
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
            cr_assert_eq(memcmp(one, all + (size_t)r * N, N * 4), 0, "kernel %d row %u", k, r);
        }
        env_close(&e);
        free(all), free(one);
    }
    free(x), free(gb);
}

/* The same for short rows, which run in groups in a batch and one by one
 * alone: softmax, layernorm and rmsnorm over rows of 64 and 40. */
Test(cpu_ops_math, short_row_results_do_not_depend_on_the_batch) {
    enum { ROWS = 37 };
    static const uint32_t lengths[2] = {64, 40};
    static const bib_kernel_t kernels[3] = {BIB_KERNEL_SOFTMAX, BIB_KERNEL_LAYERNORM,
                                            BIB_KERNEL_RMSNORM};
    for (int li = 0; li < 2; li++) {
        uint32_t n = lengths[li];
        float *x = random_f32((size_t)ROWS * n, 40.0f, false), *g = random_f32(n, 2.0f, false),
              *b = random_f32(n, 2.0f, false);
        float *all = malloc((size_t)ROWS * n * 4), *one = malloc(n * 4);
        for (int k = 0; k < 3; k++) {
            bib_call_t call = {.kernel = kernels[k],
                               .out = view2(all, BIB_DTYPE_F32, ROWS, n),
                               .in = {view2(x, BIB_DTYPE_F32, ROWS, n), view1(g, BIB_DTYPE_F32, n),
                                      view1(b, BIB_DTYPE_F32, n)},
                               .f = {1e-5f}};
            env_t e;
            env_open(&e, best_level(), 2);
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
            for (uint32_t r = 0; r < ROWS; r++) {
                call.out = view2(one, BIB_DTYPE_F32, 1, n);
                call.in[0] = view2(x + (size_t)r * n, BIB_DTYPE_F32, 1, n);
                cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK);
                cr_assert_eq(memcmp(one, all + (size_t)r * n, n * 4), 0, "kernel %d n %u row %u",
                             kernels[k], n, r);
            }
            env_close(&e);
        }
        free(all), free(one), free(x), free(g), free(b);
    }
}

/* The vector forms of ERF and GELU_ERF (both branches on every lane, then a
 * select) against the scalar reference over bit patterns of every binade
 * and around their branch points (|x| = 1, u = -1/2 and 1, erfc's 10.5,
 * exp's underflow in the tail). */
Test(cpu_ops_math, erf_and_gelu_erf_vector_forms_match_the_reference) {
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x);
    static const float centers[] = {1.0f,       -1.0f,      0.70710677f, -0.70710677f, 1.4142135f,
                                    14.849242f, -14.84924f, 10.5f,       -13.2f,       -0.5f};
    for (uint32_t i = 0; i < N; i++)
        x[i] = i % 2
                   ? bib_f32_from_bits(next_u32() ^ (next_u32() << 16))
                   : bib_f32_from_bits(bib_f32_bits(centers[(i / 2) % 10]) + (i / 20) % 512 - 256);
    static const bib_unary_t ops[] = {BIB_UNARY_ERF, BIB_UNARY_GELU_ERF};
    for (int k = 0; k < 2; k++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY,
                           .sub = ops[k],
                           .out = view1(NULL, BIB_DTYPE_F32, N),
                           .in = {view1(x, BIB_DTYPE_F32, N)}};
        check_identity(k ? "gelu_erf bit patterns" : "erf bit patterns", call, N * 4);
    }
    free(x);
}

/* The inputs whose reduction by pi/2 cancels the most bits (25 to 29 of the
 * fraction's leading bits are zero): for each binade, the x nearest a
 * multiple of pi/2 relative to its size, found by scanning every binary32
 * at or above pi/4 with bib_rem_pio2's integer steps. 29 bits (0x50A3E87F)
 * is the most any input cancels. */
static const uint32_t pio2_hard_bits[] = {
    0x3FC90FDBu, 0x4096CBE4u, 0x4116CBE4u, 0x437CE5F1u, 0x43FCE5F1u, 0x447CE5F1u, 0x44FCE5F1u,
    0x474D246Fu, 0x47CD246Fu, 0x4882665Eu, 0x4A2562AEu, 0x4AA562AEu, 0x4C2332E9u, 0x4CA332E9u,
    0x4E13D4A5u, 0x4E93D4A5u, 0x50A3E87Fu, 0x5123E87Fu, 0x51A3E87Fu, 0x5223E87Fu, 0x52A3E87Fu,
    0x53B146A6u, 0x543146A6u, 0x54B146A6u, 0x56787577u, 0x5C07BCD0u, 0x5C87BCD0u, 0x5FE4112Cu,
    0x61D3B126u, 0x62EC1B4Au, 0x642E0733u, 0x64AE0733u, 0x65898498u, 0x66098498u, 0x66898498u,
    0x6946E3BBu, 0x6A1976F1u, 0x6A9976F1u, 0x6B1976F1u, 0x6C55DA58u, 0x6CD5DA58u, 0x6D2063C2u,
    0x6F79BE45u, 0x6FF9BE45u, 0x7079BE45u, 0x70F9BE45u, 0x7179BE45u, 0x723FA09Au, 0x72BFA09Au,
    0x7452DE59u, 0x77584625u, 0x77D84625u, 0x78584625u, 0x79407F54u, 0x7EBDCDA0u, 0x7F3DCDA0u,
};

/* Every unary op's vector form against the scalar reference over bit
 * patterns spread across all 2^32 (a stride of 4093 reaches every binade,
 * denormals, infinities and NaNs of both signs), then the hardest cases of
 * SIN and COS's reduction with their neighbours and negatives, and the
 * binade edges of LOG and the rounding ops. The vector forms compute both
 * sides of each scalar branch and select, so every lane value matters.
 * (All 2^32 inputs of every op were checked the same way when the vector
 * forms were written; that takes minutes, this about a second.) */
Test(cpu_ops_math, unary_vector_forms_match_the_reference_over_bit_patterns) {
    enum { STRIDE = 4093, NSTRIDE = (int)(0xFFFFFFFFu / STRIDE) + 1 };
    size_t nhard = sizeof pio2_hard_bits / sizeof pio2_hard_bits[0];
    size_t n = (size_t)NSTRIDE + nhard * 6 + 2 * 255 * 4;
    float *x = malloc(n * sizeof *x);
    size_t k = 0;
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += STRIDE)
        x[k++] = bib_f32_from_bits((uint32_t)b);
    for (size_t i = 0; i < nhard; i++)
        for (int d = -1; d <= 1; d++) {
            x[k++] = bib_f32_from_bits(pio2_hard_bits[i] + (uint32_t)d);
            x[k++] = bib_f32_from_bits((pio2_hard_bits[i] + (uint32_t)d) ^ 0x80000000u);
        }
    for (uint32_t e = 0; e < 255; e++) /* each binade's first and last two values, both signs */
        for (uint32_t s = 0; s < 2; s++) {
            uint32_t first = (s << 31) | (e << 23);
            x[k++] = bib_f32_from_bits(first);
            x[k++] = bib_f32_from_bits(first + 1u);
            x[k++] = bib_f32_from_bits(first + 0x7FFFFEu);
            x[k++] = bib_f32_from_bits(first + 0x7FFFFFu);
        }
    cr_assert_eq(k, n);
    for (uint32_t op = BIB_UNARY_RELU; op < BIB_UNARY__COUNT; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY,
                           .sub = op,
                           .out = view1(NULL, BIB_DTYPE_F32, (uint32_t)n),
                           .in = {view1(x, BIB_DTYPE_F32, (uint32_t)n)}};
        char what[64];
        snprintf(what, sizeof what, "unary %u over bit patterns", op);
        check_identity(what, call, n * 4);
    }
    free(x);
}

/* POW's vector form (the general path on every lane, then the scalar code's
 * special cases as selects) against the scalar reference: x over bit
 * patterns of every binade, y over exponents that take each special case
 * (0, +-1, 2, -1, 1/2, +-Inf, NaN, odd and even integers, integers past
 * 2^23 and 2^24, non-integers, overflowing and underflowing ones). */
Test(cpu_ops_math, pow_vector_form_matches_the_reference) {
    static const float ys[] = {
        0.0f,        -0.0f,       1.0f,        -1.0f,      2.0f,        -2.0f,    0.5f,
        -0.5f,       3.0f,        -3.0f,       4.0f,       1.5f,        2.5f,     1e-3f,
        -1e-3f,      INFINITY,    -INFINITY,   NAN,        1e10f,       -1e10f,   16777216.0f,
        16777218.0f, 8388609.0f,  -8388609.0f, 1e-40f,     3.4e38f,     -3.4e38f, 127.0f,
        -149.0f,     0.33333334f, 7.0f,        1.0000001f, 0.99999994f, -7.25f,   9.875f};
    enum { STRIDE = 65537, NX = (int)(0xFFFFFFFFu / STRIDE) + 1, NY = sizeof ys / sizeof ys[0] };
    size_t n = (size_t)NX * NY;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t j = 0; j < NY; j++)
        for (size_t i = 0; i < NX; i++) {
            x[j * NX + i] = bib_f32_from_bits((uint32_t)(i * STRIDE + j));
            y[j * NX + i] = ys[j];
        }
    bib_call_t call = {.kernel = BIB_KERNEL_BINARY,
                       .sub = BIB_BINARY_POW,
                       .out = view2(NULL, BIB_DTYPE_F32, NY, NX),
                       .in = {view2(x, BIB_DTYPE_F32, NY, NX), view2(y, BIB_DTYPE_F32, NY, NX)}};
    check_identity("pow over bit patterns", call, n * 4);
    free(x);
    free(y);
}

/* REDUCE's column form (p[0] = m: in0 [outer, n, m], each output its
 * column's reduction) gives, at every level and thread count, the bits of
 * the row form on that column: THE tree for SUM, MEAN and PROD, the order
 * of keys for MAX and MIN, the canonical NaN. Columns that fill no whole
 * vector, columns past several chunks, n below the tree's 64 lanes, n = 0. */
Test(cpu_ops_identity, reduce_columns_give_the_row_form_bits) {
    static const uint32_t shapes3[][3] = {{1, 1, 1},   {2, 7, 3},    {3, 64, 17},
                                          {1, 65, 16}, {2, 130, 40}, {1, 300, 257},
                                          {4, 5, 600}, {2, 0, 9},    {1, 1000, 33}};
    for (uint32_t op = 0; op < BIB_REDUCE__COUNT; op++)
        for (size_t s = 0; s < sizeof shapes3 / sizeof shapes3[0]; s++) {
            uint32_t outer = shapes3[s][0], n = shapes3[s][1], m = shapes3[s][2];
            size_t count = (size_t)outer * n * m;
            float *x = random_f32(count, op == BIB_REDUCE_PROD ? 1.5f : 100.0f, true);
            bib_call_t call = {
                .kernel = BIB_KERNEL_REDUCE,
                .sub = op,
                .out = view2(NULL, BIB_DTYPE_F32, outer, m),
                .in = {{.buf = x, .dtype = BIB_DTYPE_F32, .rank = 3, .dims = {outer, n, m}}},
                .p = {m}};
            cr_assert(bib_cpu_ops_supports(&call));
            char what[80];
            snprintf(what, sizeof what, "reduce %u down columns [%u,%u,%u]", op, outer, n, m);
            check_identity(what, call, (size_t)outer * m * 4);
            /* The row form on each column, moved into a row. */
            float *col = malloc((n ? n : 1) * sizeof *col), *got = malloc((size_t)outer * m * 4);
            env_t e;
            env_open(&e, best_level(), 2);
            call.out.buf = got;
            cr_assert_eq(bib_cpu_ops_run(&e.ctx, &call), BIB_OK, "%s", e.error);
            for (uint32_t o = 0; o < outer; o++)
                for (uint32_t j = 0; j < m; j++) {
                    for (uint32_t i = 0; i < n; i++)
                        col[i] = x[((size_t)o * n + i) * m + j];
                    float want;
                    bib_call_t row = {.kernel = BIB_KERNEL_REDUCE,
                                      .sub = op,
                                      .out = view1(&want, BIB_DTYPE_F32, 1),
                                      .in = {view2(col, BIB_DTYPE_F32, 1, n)}};
                    cr_assert_eq(bib_cpu_ops_run(&e.ctx, &row), BIB_OK, "%s", e.error);
                    cr_assert_eq(bib_f32_bits(got[(size_t)o * m + j]), bib_f32_bits(want),
                                 "%s: column %u of %u: 0x%08x, the row form 0x%08x", what, j, o,
                                 bib_f32_bits(got[(size_t)o * m + j]), bib_f32_bits(want));
                }
            env_close(&e);
            free(col);
            free(got);
            free(x);
        }
}
