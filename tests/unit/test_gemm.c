/* tests/unit/test_gemm.c: the CPU GEMM, its thread pool and CPU feature
 * selection. Every SIMD level and thread count must give the scalar
 * reference's bits; levels this CPU lacks are reported as skipped. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/threadpool.h"

#include <mimalloc.h>

static const uint32_t thread_counts[] = {1, 2, 3, 4};
#define N_THREAD_COUNTS (sizeof thread_counts / sizeof thread_counts[0])

static bib_cpu_level_t best_level(void) {
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    return bib_cpu_best_level(&f);
}

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Deterministic values in [-1, 1), with a sprinkling of exact zeros. */
static void fill(float *x, size_t count, uint64_t seed) {
    for (size_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (seed >> 60) == 0 ? 0.0f : (float)((double)(seed >> 40) / 8388608.0 - 1.0);
    }
}

/* Special values: -0, +-Inf, NaN (with payloads), denormals, huge values. */
static void fill_special(float *x, size_t count, uint64_t seed) {
    static const uint32_t specials[] = {
        0x80000000u, /* -0 */
        0x7F800000u, /* +Inf */
        0xFF800000u, /* -Inf */
        0x7FC00001u, /* quiet NaN with a payload */
        0xFFA00000u, /* signalling-pattern NaN, negative */
        0x00000001u, /* smallest denormal */
        0x807FFFFFu, /* largest negative denormal */
        0x00400000u, /* denormal */
        0x7F7FFFFFu, /* FLT_MAX */
        0x00800000u, /* FLT_MIN */
    };
    fill(x, count, seed);
    for (size_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        if ((seed >> 59) < 6) /* about 1 in 5 */
            x[i] = float_of(specials[(seed >> 32) % (sizeof specials / sizeof specials[0])]);
        else if ((seed >> 59) < 9) /* denormal magnitudes times ordinary values */
            x[i] *= 1e-39f;
    }
}

typedef struct problem {
    size_t m, n, k;
    size_t lda, ldb, ldc; /* 0: tight */
    bool b_transposed;
    bool bias;
    bool special;
    bib_gemm_post_fn post;
} problem_t;

/* Guard words around and between C's rows catch writes outside C. */
#define GUARD 0xDEADBEEFu
#define PAD 37

typedef struct buffers {
    float *a, *b, *bias, *c, *c_base;
    size_t c_words;
    bib_gemm_t g;
} buffers_t;

static void buffers_make(buffers_t *x, const problem_t *p, uint64_t seed) {
    size_t lda = p->lda ? p->lda : p->k;
    size_t brows = p->b_transposed ? p->n : p->k, bcols = p->b_transposed ? p->k : p->n;
    size_t ldb = p->ldb ? p->ldb : bcols;
    size_t ldc = p->ldc ? p->ldc : p->n;
    size_t a_words = p->m * lda + 1, b_words = brows * ldb + 1;
    x->a = mi_malloc(a_words * sizeof(float));
    x->b = mi_malloc(b_words * sizeof(float));
    x->bias = p->bias ? mi_malloc((p->n + 1) * sizeof(float)) : NULL;
    if (p->special) {
        fill_special(x->a, a_words, seed);
        fill_special(x->b, b_words, seed + 1);
    } else {
        fill(x->a, a_words, seed);
        fill(x->b, b_words, seed + 1);
    }
    if (x->bias)
        fill_special(x->bias, p->n + 1, seed + 2);
    x->c_words = p->m * ldc + 2 * PAD;
    x->c_base = mi_malloc(x->c_words * sizeof(float));
    x->c = x->c_base + PAD;
    x->g = (bib_gemm_t){.m = p->m,
                        .n = p->n,
                        .k = p->k,
                        .a = x->a,
                        .lda = lda,
                        .b = x->b,
                        .ldb = ldb,
                        .b_transposed = p->b_transposed,
                        .c = x->c,
                        .ldc = ldc,
                        .bias = x->bias,
                        .post = p->post};
}

static void buffers_guard(buffers_t *x) {
    uint32_t g = GUARD;
    for (size_t i = 0; i < x->c_words; i++)
        memcpy(&x->c_base[i], &g, sizeof g);
}

static void buffers_free(buffers_t *x) {
    mi_free(x->a);
    mi_free(x->b);
    mi_free(x->bias);
    mi_free(x->c_base);
}

/* Compares C and the guards to the reference's, word for word. */
static void expect_same(const buffers_t *got, const buffers_t *want, const char *what) {
    const bib_gemm_t *g = &want->g;
    for (size_t w = 0; w < want->c_words; w++) {
        uint32_t gb = bits_of(got->c_base[w]), wb = bits_of(want->c_base[w]);
        if (gb != wb) {
            long off = (long)w - PAD;
            if (off < 0 || (size_t)off >= g->m * g->ldc || (size_t)off % g->ldc >= g->n)
                cr_assert_fail("%s: wrote outside C at word %ld (0x%08x)", what, off, gb);
            else
                cr_assert_fail("%s: C[%zu][%zu] = 0x%08x, reference 0x%08x", what,
                               (size_t)off / g->ldc, (size_t)off % g->ldc, gb, wb);
            return;
        }
    }
}

/* Runs p at `level` on every thread count and checks the reference's bits. */
static void check_level(const problem_t *p, bib_cpu_level_t level, uint64_t seed) {
    buffers_t want, got;
    buffers_make(&want, p, seed);
    buffers_make(&got, p, seed);
    buffers_guard(&want);
    bib_gemm_f32_reference(&want.g);
    for (size_t t = 0; t < N_THREAD_COUNTS; t++) {
        bib_threadpool_t *pool;
        char why[128];
        cr_assert_eq(bib_threadpool_create(thread_counts[t], &pool, why, sizeof why), BIB_OK, "%s",
                     why);
        buffers_guard(&got);
        cr_assert_eq(bib_gemm_f32(pool, level, &got.g), BIB_OK);
        char what[200];
        snprintf(what, sizeof what, "%s, %u threads, m=%zu n=%zu k=%zu%s%s%s",
                 bib_cpu_level_name(level), thread_counts[t], p->m, p->n, p->k,
                 p->b_transposed ? ", B transposed" : "", p->bias ? ", bias" : "",
                 p->special ? ", special values" : "");
        expect_same(&got, &want, what);
        bib_threadpool_destroy(pool);
    }
    buffers_free(&want);
    buffers_free(&got);
}

static void require_level(bib_cpu_level_t level) {
    if (best_level() < level)
        cr_skip_test("this CPU lacks %s", bib_cpu_level_name(level));
}

/* Shapes around every tile and block edge of both kernels (mr 6/14, nr
 * 16/32, kc 256/768, mc 144/336, nc 1024/2048), the direct-B path (up to 128
 * rows a thread) on both sides of its edge, the GEMV's blocks (16 rows of B,
 * 16384 columns) and the AVX-512 A packing (16 k's at a time, then the rest). */
static const problem_t shapes[] = {
    {.m = 1, .n = 1, .k = 1},       {.m = 7, .n = 7, .k = 7},       {.m = 33, .n = 33, .k = 33},
    {.m = 1, .n = 100, .k = 300},   {.m = 100, .n = 1, .k = 300},   {.m = 14, .n = 32, .k = 256},
    {.m = 15, .n = 33, .k = 257},   {.m = 6, .n = 16, .k = 5},      {.m = 5, .n = 300, .k = 17},
    {.m = 300, .n = 5, .k = 600},   {.m = 57, .n = 1100, .k = 40},  {.m = 337, .n = 513, .k = 520},
    {.m = 1023, .n = 130, .k = 65}, {.m = 29, .n = 70, .k = 0},     {.m = 64, .n = 64, .k = 1},
    {.m = 56, .n = 96, .k = 300},   {.m = 128, .n = 70, .k = 385},  {.m = 129, .n = 70, .k = 769},
    {.m = 337, .n = 40, .k = 385},  {.m = 3, .n = 4100, .k = 5},    {.m = 2, .n = 4127, .k = 131},
    {.m = 1, .n = 4130, .k = 17},   {.m = 1, .n = 16390, .k = 33},  {.m = 150, .n = 70, .k = 1537},
    {.m = 29, .n = 45, .k = 770},   {.m = 200, .n = 2081, .k = 40}, {.m = 45, .n = 40, .k = 53},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static void check_shapes(bib_cpu_level_t level) {
    for (size_t s = 0; s < N_SHAPES; s++)
        check_level(&shapes[s], level, 100 + s);
}

Test(gemm, scalar_level_matches_reference_on_edge_shapes) {
    check_shapes(BIB_CPU_LEVEL_SCALAR);
}

Test(gemm, avx2_matches_reference_on_edge_shapes) {
    require_level(BIB_CPU_LEVEL_AVX2);
    check_shapes(BIB_CPU_LEVEL_AVX2);
}

Test(gemm, avx512_matches_reference_on_edge_shapes) {
    require_level(BIB_CPU_LEVEL_AVX512);
    check_shapes(BIB_CPU_LEVEL_AVX512);
}

/* Every row count a kernel has (1 .. 14, so 1 .. 29 covers two full tiles
 * and every remainder), across a K block edge. */
Test(gemm, every_row_count_matches_reference) {
    for (size_t m = 1; m <= 29; m++) {
        problem_t p = {.m = m, .n = 45, .k = 390};
        for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++)
            check_level(&p, (bib_cpu_level_t)level, 500 + m);
    }
}

/* Past the direct-B rows (B packed, on one thread) and past one mc block, so
 * the last block's rows run as 1 .. 2 x mr rows split into even passes (16 as
 * 8 + 8), across a K-block edge and an edge tile. */
Test(gemm, every_pass_split_matches_reference_with_packed_b, .timeout = 60) {
    for (size_t m = 337; m <= 365; m++) {
        problem_t p = {.m = m, .n = 45, .k = 390};
        for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++)
            check_level(&p, (bib_cpu_level_t)level, 600 + m);
    }
}

static void check_all_levels(const problem_t *p, uint64_t seed) {
    for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++)
        check_level(p, (bib_cpu_level_t)level, seed);
}

Test(gemm, large_odd_square_matches_reference, .timeout = 120) {
    problem_t p = {.m = 1023, .n = 1023, .k = 1023};
    for (int level = BIB_CPU_LEVEL_AVX2; level <= (int)best_level(); level++)
        check_level(&p, (bib_cpu_level_t)level, 7);
}

Test(gemm, transposed_b_matches_reference) {
    const problem_t ps[] = {
        {.m = 7, .n = 9, .k = 11, .b_transposed = true},
        {.m = 3, .n = 45, .k = 64, .b_transposed = true},
        {.m = 200, .n = 333, .k = 300, .b_transposed = true},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_all_levels(&ps[i], 300 + i);
}

Test(gemm, leading_dimensions_wider_than_rows_are_respected) {
    /* Views into bigger tensors, like one head of q[S,H,D]. */
    const problem_t ps[] = {
        {.m = 40, .n = 50, .k = 64, .lda = 256, .ldb = 77, .ldc = 53},
        {.m = 40, .n = 50, .k = 64, .lda = 256, .ldb = 256, .ldc = 256, .b_transposed = true},
        {.m = 3, .n = 70, .k = 30, .lda = 31, .ldb = 71, .ldc = 99},
        {.m = 300, .n = 50, .k = 53, .lda = 67, .ldb = 51, .ldc = 50},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_all_levels(&ps[i], 400 + i);
}

Test(gemm, bias_is_added_once_after_the_chain) {
    const problem_t ps[] = {
        {.m = 33, .n = 47, .k = 300, .bias = true}, {.m = 2, .n = 65, .k = 9, .bias = true},
        {.m = 19, .n = 23, .k = 0, .bias = true},   {.m = 1, .n = 2100, .k = 21, .bias = true},
        {.m = 1, .n = 37, .k = 0, .bias = true},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_all_levels(&ps[i], 500 + i);
}

Test(gemm, special_values_match_reference_bits) {
    const problem_t ps[] = {
        {.m = 31, .n = 77, .k = 40, .special = true},
        {.m = 100, .n = 130, .k = 270, .special = true, .bias = true},
        {.m = 4, .n = 33, .k = 20, .special = true, .b_transposed = true},
        {.m = 1, .n = 2077, .k = 19, .special = true, .bias = true},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_all_levels(&ps[i], 600 + i);
}

Test(gemm, nan_outputs_are_canonical) {
    float a[2] = {float_of(0x7FC12345u), 1.0f}, b[2 * 17];
    for (size_t i = 0; i < 2 * 17; i++)
        b[i] = 1.0f;
    b[3] = float_of(0xFFC00001u); /* NaN in row 0 */
    for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++) {
        float c[17];
        bib_gemm_t g = {
            .m = 1, .n = 17, .k = 2, .a = a, .lda = 2, .b = b, .ldb = 17, .c = c, .ldc = 17};
        cr_assert_eq(bib_gemm_f32(NULL, (bib_cpu_level_t)level, &g), BIB_OK);
        for (int j = 0; j < 17; j++)
            cr_expect_eq(bits_of(c[j]), BIB_GEMM_CANONICAL_NAN_BITS, "%s: C[0][%d] = 0x%08x",
                         bib_cpu_level_name((bib_cpu_level_t)level), j, bits_of(c[j]));
    }
}

Test(gemm, each_step_is_one_fused_multiply_add) {
    /* acc = -(1+2^-11); fma((1+2^-12)^2, acc) = 2^-24 exactly, while a
     * separate multiply would round the square to 1+2^-11 and give 0. */
    float a[2] = {-(1.0f + 0x1p-11f), 1.0f + 0x1p-12f};
    float b[2 * 16];
    for (int j = 0; j < 16; j++) {
        b[j] = 1.0f;
        b[16 + j] = 1.0f + 0x1p-12f;
    }
    for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++) {
        float c[16];
        bib_gemm_t g = {
            .m = 1, .n = 16, .k = 2, .a = a, .lda = 2, .b = b, .ldb = 16, .c = c, .ldc = 16};
        cr_assert_eq(bib_gemm_f32(NULL, (bib_cpu_level_t)level, &g), BIB_OK);
        for (int j = 0; j < 16; j++)
            cr_expect_eq(c[j], 0x1p-24f, "%s: C[0][%d] = %a",
                         bib_cpu_level_name((bib_cpu_level_t)level), j, (double)c[j]);
    }
}

Test(gemm, k_is_summed_in_ascending_order) {
    /* 1e8 + 1 rounds back to 1e8, so ascending order gives 0; any other
     * order (or a tree) gives 1. K = 600 crosses two K blocks. */
    enum { K = 600, N = 40 };
    float *a = mi_calloc(K, sizeof(float)), *b = mi_malloc(K * N * sizeof(float));
    for (int j = 0; j < K * N; j++)
        b[j] = 1.0f;
    a[0] = 1e8f;
    a[299] = 1.0f;
    a[599] = -1e8f;
    for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++) {
        float c[N];
        bib_gemm_t g = {
            .m = 1, .n = N, .k = K, .a = a, .lda = K, .b = b, .ldb = N, .c = c, .ldc = N};
        cr_assert_eq(bib_gemm_f32(NULL, (bib_cpu_level_t)level, &g), BIB_OK);
        for (int j = 0; j < N; j++)
            cr_expect_eq(bits_of(c[j]), 0u, "%s: C[0][%d] = %a",
                         bib_cpu_level_name((bib_cpu_level_t)level), j, (double)c[j]);
    }
    mi_free(a);
    mi_free(b);
}

Test(gemm, k_zero_gives_positive_zero_plus_bias) {
    float bias[3] = {-0.0f, 2.5f, 0.0f};
    for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++) {
        float c[6] = {9, 9, 9, 9, 9, 9};
        bib_gemm_t g = {
            .m = 2, .n = 3, .k = 0, .a = c, .lda = 1, .b = c, .ldb = 3, .c = c, .ldc = 3};
        cr_assert_eq(bib_gemm_f32(NULL, (bib_cpu_level_t)level, &g), BIB_OK);
        for (int i = 0; i < 6; i++)
            cr_expect_eq(bits_of(c[i]), 0u, "no bias: C word %d = 0x%08x", i, bits_of(c[i]));
        g.bias = bias;
        cr_assert_eq(bib_gemm_f32(NULL, (bib_cpu_level_t)level, &g), BIB_OK);
        /* +0 + -0 = +0 */
        cr_expect_eq(bits_of(c[0]), 0u);
        cr_expect_eq(c[1], 2.5f);
        cr_expect_eq(bits_of(c[3]), 0u);
    }
}

static void post_double_plus_one(float *c, size_t count, void *ctx) {
    atomic_size_t *calls = ctx;
    for (size_t i = 0; i < count; i++)
        c[i] = c[i] * 2.0f + 1.0f;
    if (calls != NULL)
        atomic_fetch_add(calls, count);
}

Test(gemm, post_op_runs_once_per_output_after_bias) {
    const problem_t ps[] = {
        {.m = 37, .n = 600, .k = 270, .bias = true, .post = post_double_plus_one},
        {.m = 3, .n = 40, .k = 5, .post = post_double_plus_one},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_all_levels(&ps[i], 700 + i);
    /* Count: every output exactly once, whatever the threads. */
    for (int level = BIB_CPU_LEVEL_SCALAR; level <= (int)best_level(); level++) {
        buffers_t x;
        buffers_make(&x, &ps[0], 1);
        atomic_size_t calls;
        atomic_init(&calls, 0);
        x.g.post_ctx = &calls;
        bib_threadpool_t *pool;
        char why[128];
        cr_assert_eq(bib_threadpool_create(2, &pool, why, sizeof why), BIB_OK);
        cr_assert_eq(bib_gemm_f32(pool, (bib_cpu_level_t)level, &x.g), BIB_OK);
        cr_expect_eq(atomic_load(&calls), ps[0].m * ps[0].n, "%s: post saw %zu elements",
                     bib_cpu_level_name((bib_cpu_level_t)level), atomic_load(&calls));
        bib_threadpool_destroy(pool);
        buffers_free(&x);
    }
}

Test(gemm, empty_output_writes_nothing) {
    float c[4] = {1, 2, 3, 4}, a[4] = {0}, b[4] = {0};
    bib_gemm_t g = {.m = 0, .n = 2, .k = 2, .a = a, .lda = 2, .b = b, .ldb = 2, .c = c, .ldc = 2};
    cr_assert_eq(bib_gemm_f32(NULL, best_level(), &g), BIB_OK);
    g.m = 2;
    g.n = 0;
    cr_assert_eq(bib_gemm_f32(NULL, best_level(), &g), BIB_OK);
    cr_expect(c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4);
}

/* B read in place with rows a page and more apart: on an Intel core the K
 * block shrinks to 64 rows (bib_gemm_direct_kc), so K = 300 and 700 pause
 * more often than with 384; elsewhere they take the usual blocks. */
Test(gemm, b_read_in_place_with_a_crowding_stride_matches_reference, .timeout = 60) {
    const problem_t ps[] = {
        {.m = 20, .n = 64, .k = 300, .ldb = 4096},
        {.m = 64, .n = 40, .k = 700, .ldb = 2048, .bias = true},
    };
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        check_all_levels(&ps[i], 900 + i);
}

Test(gemm, direct_k_block_is_the_rows_the_tlb_and_l2_sets_hold) {
    /* Rows a page or more apart: 64, whatever the L2. */
    cr_expect_eq(bib_gemm_direct_kc(384, 11008, 4096, 2048, 16, 64), 64);
    cr_expect_eq(bib_gemm_direct_kc(384, 1024, 4096, 0, 0, 0), 64);
    cr_expect_eq(bib_gemm_direct_kc(48, 1024, 4096, 0, 0, 0), 48);
    /* Under a page apart, the L2's sets. 2 MiB, 16 ways, 64-byte lines:
     * 2048 sets; 512 floats is 32 lines, so rows fall in 64 sets: 1024
     * lines. With 1024 sets, 32 sets: 512. */
    cr_expect_eq(bib_gemm_direct_kc(384, 512, 4096, 2048, 16, 64), 384);
    cr_expect_eq(bib_gemm_direct_kc(1024, 512, 4096, 2048, 16, 64), 1024);
    cr_expect_eq(bib_gemm_direct_kc(1024, 512, 4096, 1024, 16, 64), 512);
    /* 4 ways: 128; 1 way: 32, raised to 64. */
    cr_expect_eq(bib_gemm_direct_kc(384, 512, 4096, 1024, 4, 64), 128);
    cr_expect_eq(bib_gemm_direct_kc(384, 512, 4096, 1024, 1, 64), 64);
    /* A larger page: the sets alone. 4096 floats is 256 lines: 8 of 2048
     * sets, 128 lines; 11008 floats is 688 lines, gcd 16 with 2048 sets: 128
     * sets, 2048 rows. */
    cr_expect_eq(bib_gemm_direct_kc(384, 4096, 2 << 20, 2048, 16, 64), 128);
    cr_expect_eq(bib_gemm_direct_kc(384, 11008, 2 << 20, 2048, 16, 64), 384);
    /* Rows that are not whole lines apart drift across the sets. */
    cr_expect_eq(bib_gemm_direct_kc(384, 1001, 4096, 1024, 1, 64), 384);
    /* An unknown geometry keeps kc_direct. */
    cr_expect_eq(bib_gemm_direct_kc(384, 512, 0, 0, 0, 0), 384);
    cr_expect_eq(bib_gemm_direct_kc(384, 512, 0, 2048, 16, 0), 384);
}

/* ---- thread pool ---------------------------------------------------------- */

Test(threadpool, chunks_cover_the_range_in_order_without_overlap) {
    const size_t ns[] = {0, 1, 2, 7, 64, 1000, 1001};
    const size_t grains[] = {1, 3, 16, 5000};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof grains / sizeof grains[0]; b++)
            for (uint32_t threads = 1; threads <= 5; threads++) {
                size_t begin, end, next = 0;
                uint32_t chunks = bib_threadpool_chunk(ns[a], grains[b], threads, 0, &begin, &end);
                cr_assert_leq(chunks, threads);
                for (uint32_t i = 0; i < chunks; i++) {
                    bib_threadpool_chunk(ns[a], grains[b], threads, i, &begin, &end);
                    cr_assert_eq(begin, next, "n=%zu grain=%zu threads=%u chunk %u", ns[a],
                                 grains[b], threads, i);
                    cr_assert_gt(end, begin);
                    cr_assert(end == ns[a] || end % grains[b] == 0);
                    next = end;
                }
                cr_assert_eq(next, ns[a]);
            }
}

typedef struct count_job {
    atomic_int *hits;
    atomic_uint chunk_mask;
    size_t begins[8];
} count_job_t;

static void count_hits(void *ctx, size_t begin, size_t end, uint32_t chunk) {
    count_job_t *job = ctx;
    for (size_t i = begin; i < end; i++)
        atomic_fetch_add(&job->hits[i], 1);
    atomic_fetch_or(&job->chunk_mask, 1u << chunk);
    job->begins[chunk] = begin;
}

Test(threadpool, parallel_for_visits_every_element_once_with_fixed_chunks) {
    enum { N = 10007 };
    atomic_int *hits = mi_calloc(N, sizeof *hits);
    for (uint32_t threads = 1; threads <= 4; threads++) {
        bib_threadpool_t *pool;
        char why[128];
        cr_assert_eq(bib_threadpool_create(threads, &pool, why, sizeof why), BIB_OK);
        for (int round = 0; round < 200; round++) {
            for (size_t i = 0; i < N; i++)
                atomic_store(&hits[i], 0);
            count_job_t job = {.hits = hits};
            atomic_init(&job.chunk_mask, 0);
            bib_threadpool_parallel_for(pool, N, 7, count_hits, &job);
            for (size_t i = 0; i < N; i++)
                cr_assert_eq(atomic_load(&hits[i]), 1, "threads=%u element %zu", threads, i);
            cr_assert_eq(atomic_load(&job.chunk_mask), (1u << threads) - 1);
            for (uint32_t c = 0; c < threads; c++) {
                size_t begin, end;
                bib_threadpool_chunk(N, 7, threads, c, &begin, &end);
                cr_assert_eq(job.begins[c], begin);
            }
        }
        bib_threadpool_destroy(pool);
    }
    mi_free(hits);
}

typedef struct nest_job {
    bib_threadpool_t *pool;
    atomic_int *hits;
} nest_job_t;

static void inner(void *ctx, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    atomic_int *hits = ctx;
    for (size_t i = begin; i < end; i++)
        atomic_fetch_add(&hits[i], 1);
}

static void outer(void *ctx, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    nest_job_t *job = ctx;
    for (size_t i = begin; i < end; i++)
        bib_threadpool_parallel_for(job->pool, 100, 1, inner, job->hits + i * 100);
}

Test(threadpool, nested_parallel_for_runs_inline_instead_of_deadlocking, .timeout = 10) {
    atomic_int *hits = mi_calloc(8 * 100, sizeof *hits);
    bib_threadpool_t *pool;
    char why[128];
    cr_assert_eq(bib_threadpool_create(3, &pool, why, sizeof why), BIB_OK);
    nest_job_t job = {.pool = pool, .hits = hits};
    bib_threadpool_parallel_for(pool, 8, 1, outer, &job);
    for (size_t i = 0; i < 8 * 100; i++)
        cr_assert_eq(atomic_load(&hits[i]), 1, "element %zu", i);
    bib_threadpool_destroy(pool);
    mi_free(hits);
}

Test(threadpool, null_pool_runs_on_the_caller) {
    atomic_int hits[50];
    for (int i = 0; i < 50; i++)
        atomic_init(&hits[i], 0);
    cr_assert_eq(bib_threadpool_size(NULL), 1u);
    bib_threadpool_parallel_for(NULL, 50, 1, inner, hits);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(atomic_load(&hits[i]), 1);
}

Test(threadpool, zero_threads_is_a_usage_error) {
    bib_threadpool_t *pool;
    char why[128] = "";
    cr_assert_eq(bib_threadpool_create(0, &pool, why, sizeof why), BIB_E_USAGE);
    cr_assert_null(pool);
    cr_assert_neq(why[0], '\0');
}

/* ---- CPU features ------------------------------------------------------- */

Test(cpufeatures, detected_level_is_consistent_with_features) {
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    bib_cpu_level_t level = bib_cpu_best_level(&f);
    if (level >= BIB_CPU_LEVEL_AVX2)
        cr_assert(f.avx2 && f.fma && f.os_ymm);
    if (level == BIB_CPU_LEVEL_AVX512)
        cr_assert(f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl && f.os_zmm);
}

Test(cpufeatures, level_override_may_lower_the_level) {
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    bib_cpu_level_t level;
    char why[128];
    cr_assert_eq(bib_cpu_level_select(&f, NULL, &level, why, sizeof why), BIB_OK);
    cr_assert_eq(level, bib_cpu_best_level(&f));
    cr_assert_eq(bib_cpu_level_select(&f, "", &level, why, sizeof why), BIB_OK);
    cr_assert_eq(level, bib_cpu_best_level(&f));
    cr_assert_eq(bib_cpu_level_select(&f, "scalar", &level, why, sizeof why), BIB_OK);
    cr_assert_eq(level, BIB_CPU_LEVEL_SCALAR);
}

Test(cpufeatures, level_override_above_the_cpu_is_unavailable) {
    bib_cpu_features_t none = {.sse2 = true};
    bib_cpu_level_t level = BIB_CPU_LEVEL_SCALAR;
    char why[128] = "";
    cr_assert_eq(bib_cpu_level_select(&none, "avx2", &level, why, sizeof why), BIB_E_UNAVAILABLE);
    cr_assert_str_eq(why, "BIB_CPU_LEVEL=avx2: this CPU supports at most scalar");
}

Test(cpufeatures, unknown_level_name_is_a_usage_error) {
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    bib_cpu_level_t level;
    char why[128] = "";
    cr_assert_eq(bib_cpu_level_select(&f, "sse9", &level, why, sizeof why), BIB_E_USAGE);
    cr_assert(strstr(why, "sse9") != NULL);
}

Test(cpufeatures, thread_count_comes_from_request_then_env_then_cpus) {
    uint32_t n;
    char why[128];
    cr_assert_eq(bib_cpu_threads_select(3, "7", &n, why, sizeof why), BIB_OK);
    cr_assert_eq(n, 3u);
    cr_assert_eq(bib_cpu_threads_select(0, "7", &n, why, sizeof why), BIB_OK);
    cr_assert_eq(n, 7u);
    cr_assert_eq(bib_cpu_threads_select(0, NULL, &n, why, sizeof why), BIB_OK);
    cr_assert_geq(n, 1u);
}

Test(cpufeatures, malformed_thread_count_is_a_usage_error) {
    const char *bad[] = {"0", "-2", "two", "3x", "100000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t n;
        char why[128] = "";
        cr_assert_eq(bib_cpu_threads_select(0, bad[i], &n, why, sizeof why), BIB_E_USAGE,
                     "BIB_THREADS=%s", bad[i]);
        cr_assert(strstr(why, "BIB_THREADS") != NULL);
    }
}
