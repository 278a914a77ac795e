/* tests/unit/executor_cts.h: the executor conformance suite, one suite that
 * every GPU executor runs (IREE's HAL CTS: instantiated once per driver).
 *
 * Every kernel of bib_kernel_t runs on the executor under test and on
 * bib_cpu_executor with the same inputs and must give the same bits: shapes
 * 1, 7, 33, 1023, non-square, non-tile-multiple, long rows, misaligned
 * views; -0, +-Inf, NaN with payloads, denormals, exp arguments beyond
 * +-100. Every device buffer carries guard words that must survive each
 * kernel and inputs must come back unchanged. Then what every pooled GPU
 * executor promises: shared blocks with freed ranges reused, transfers and
 * views past a buffer refused, uploads larger than the staging area,
 * running out of memory as a clean BIB_E_NOMEM after which the executor
 * goes on, device selection. Executor-specific tests stay in the file that
 * includes this one; this file reaches into no executor's private state.
 *
 * A test file includes it once, after saying what to test:
 *
 *   CTS_SUITE               the Criterion suite (vulkan, cuda); the file adds
 *                           its own tests with CTS_TEST(name), using cts_ops,
 *                           cts_ex and the helpers below
 *   CTS_EXECUTOR            pointer to the ops table under test
 *   CTS_UNAVAILABLE         optional: why the executor is not in this build;
 *                           then CTS_EXECUTOR may be NULL and every test skips
 *   CTS_DEVICE_NOUN         how init names the device kind ("Vulkan", "CUDA")
 *   CTS_DESCRIBE_WORDS      strings describe() must contain, comma-separated
 *   CTS_VALIDATION_MESSAGES(ex)  optional: validation messages since ex
 *                           started; every test ends asserting it is 0
 *   CTS_WAITS(ex)           optional: host waits (or queue submissions) so far
 *   CTS_BYTES_IN_USE(ex)    optional: pool bytes handed out; the default is
 *                           total - free from memory()
 *   CTS_MATMUL_TILES_ENV, CTS_MATMUL_TILES  optional: the variable that forces
 *                           a MATMUL tile configuration and its values
 *   CTS_NOMEM_WORDS         optional: strings the out-of-memory message holds
 *   CTS_SKIP_OVERLAPPING_COPY  optional: why the executor refuses a COPY
 *                           between overlapping ranges (a known gap, skipped
 *                           visibly until it is closed)
 *
 * When init returns BIB_E_UNAVAILABLE (or CTS_UNAVAILABLE is set) every test
 * of CTS_SUITE prints "SKIP: <reason>" and is skipped, never passed.
 */
#ifndef BIB_EXECUTOR_CTS_H
#define BIB_EXECUTOR_CTS_H

#include <criterion/criterion.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/bmath.h"

#if !defined(CTS_SUITE) || !defined(CTS_EXECUTOR) || !defined(CTS_DEVICE_NOUN) ||                  \
    !defined(CTS_DESCRIBE_WORDS)
#error "define CTS_SUITE, CTS_EXECUTOR, CTS_DEVICE_NOUN and CTS_DESCRIBE_WORDS first"
#endif
#ifndef CTS_VALIDATION_MESSAGES
#define CTS_VALIDATION_MESSAGES(ex) ((void)(ex), 0u)
#endif

#define CTS_GUARD 64 /* guard words after each device tensor, and at least before it */
#define CTS_SENTINEL 0xDEADBEEFu

static const bib_executor_ops_t *const cts_ops = CTS_EXECUTOR;
/* The executor under test and the reference; set by the suite's init. */
static bib_executor_t *cts_ex, *cts_cpu;

/* ---- starting and ending executors ---------------------------------------- */

/* Starts one more executor under test with env=value set during init (env
 * NULL: none); the test fails when it is unavailable. End it with cts_close. */
static bib_executor_t *cts_open(const char *device, const char *env, const char *value) {
    bib_executor_config_t cfg = {.threads = 1, .device = device, .validation = true};
    bib_executor_t *ex = NULL;
    char why[512] = "";
    if (env)
        setenv(env, value, 1);
    bib_status_t st = cts_ops->init(&cfg, &ex, why, sizeof why);
    if (env)
        unsetenv(env);
    cr_assert_eq(st, BIB_OK, "%s init (%s=%s): %s", cts_ops->name, env ? env : "-",
                 env ? value : "-", why);
    return ex;
}

/* The validation layer must have said nothing since ex started. */
static void cts_assert_silent(bib_executor_t *ex) {
    uint32_t msgs = CTS_VALIDATION_MESSAGES(ex);
    cr_assert_eq(msgs, 0, "the validation layer reported %u messages", msgs);
}

/* Ends ex, which must have run without a validation message. */
static void cts_close(bib_executor_t *ex) {
    cts_assert_silent(ex);
    cts_ops->shutdown(ex);
}

static void cts_suite_init(void) {
#ifdef CTS_UNAVAILABLE
    printf("SKIP: %s\n", CTS_UNAVAILABLE);
    cr_skip_test("%s", CTS_UNAVAILABLE);
#else
    bib_executor_config_t cfg = {.threads = 1, .device = NULL, .validation = true};
    char why[512] = "";
    if (cts_ops->init(&cfg, &cts_ex, why, sizeof why) != BIB_OK) {
        cts_ex = NULL;
        printf("SKIP: %s\n", why);
        cr_skip_test("no %s: %s", cts_ops->name, why);
    }
    cr_assert_eq(bib_cpu_executor.init(&cfg, &cts_cpu, why, sizeof why), BIB_OK, "cpu init: %s",
                 why);
#endif
}

static void cts_suite_fini(void) {
    if (cts_ex)
        cts_ops->shutdown(cts_ex);
    if (cts_cpu)
        bib_cpu_executor.shutdown(cts_cpu);
    cts_ex = cts_cpu = NULL;
}

TestSuite(CTS_SUITE, .init = cts_suite_init, .fini = cts_suite_fini);

/* A test of the suite. It ends by asserting that the validation layer
 * stayed silent: an assertion in the suite's fini is printed but fails no
 * test (Criterion 2.4), so the check must run in the test itself. */
#define CTS_TEST(name)                                                                             \
    static void cts_test_##name(void);                                                             \
    Test(CTS_SUITE, name) {                                                                        \
        cts_test_##name();                                                                         \
        cts_assert_silent(cts_ex);                                                                 \
    }                                                                                              \
    static void cts_test_##name(void)

/* ---- data ----------------------------------------------------------------- */

static uint64_t cts_rng_state = 0x1234567;

static uint32_t cts_rnd(void) {
    cts_rng_state = cts_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(cts_rng_state >> 33);
}

/* Uniform in [lo, hi) with special values mixed in when special: signed
 * zeros, infinities, NaNs with payloads, denormals, the largest finite
 * values, exp arguments around and beyond +-100, +-1. */
static void cts_fill_data(float *x, size_t n, float lo, float hi, bool special) {
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x00000001u,
        0x807fffffu, 0x00400000u, 0x7f7fffffu, 0xff7fffffu, 0x42b20001u, 0xc2d00001u, 0x3f800000u,
        0xbf800000u, 0x42ca0000u, 0xc2ca0000u, 0x42c80001u, 0xc2c80001u};
    for (size_t i = 0; i < n; i++) {
        float u = (float)(cts_rnd() >> 8) * 0x1p-24f;
        x[i] = lo + (hi - lo) * u;
        if (special && cts_rnd() % 13 == 0)
            x[i] = bib_f32_from_bits(specials[cts_rnd() % (sizeof specials / sizeof specials[0])]);
    }
}

/* ---- running one call on both executors ----------------------------------- */

typedef struct cts_tensor {
    const void *data; /* NULL for the output */
    uint32_t dtype;
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
} cts_tensor_t;

static cts_tensor_t cts_tf(const float *d, uint32_t rank, uint32_t d0, uint32_t d1, uint32_t d2,
                           uint32_t d3) {
    cts_tensor_t t = {d, BIB_DTYPE_F32, rank, {d0, d1, d2, d3}};
    return t;
}

static size_t cts_count(const cts_tensor_t *t) {
    size_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

/* Words before each tensor: CTS_GUARD, plus a few to misalign the views. */
static size_t cts_lead = CTS_GUARD;

/* Runs the call on one executor; returns the status and the output words
 * (with guards) in *words. Inputs and output get sentinel words on each
 * side, checked after the kernel, and inputs must come back unchanged. */
static bib_status_t cts_run_on(const bib_executor_ops_t *ops, bib_executor_t *ex, bib_call_t call,
                               const cts_tensor_t *in, int nin, const cts_tensor_t *out,
                               uint32_t *words, char *err, size_t err_len) {
    void *bufs[4] = {0};
    size_t counts[4];
    const cts_tensor_t *ts[4] = {out, nin > 0 ? &in[0] : NULL, nin > 1 ? &in[1] : NULL,
                                 nin > 2 ? &in[2] : NULL};
    const size_t lead = cts_lead;
    for (int t = 0; t < 1 + nin; t++) {
        size_t n = cts_count(ts[t]);
        counts[t] = n;
        size_t total = n + lead + CTS_GUARD;
        uint32_t *host = malloc(total * 4);
        cr_assert(host);
        for (size_t i = 0; i < total; i++)
            host[i] = CTS_SENTINEL;
        if (ts[t]->data)
            memcpy(host + lead, ts[t]->data, n * 4);
        cr_assert_eq(ops->buffer_alloc(ex, total * 4, &bufs[t]), BIB_OK, "%s", ops->error(ex));
        cr_assert_eq(ops->upload(ex, bufs[t], 0, host, total * 4), BIB_OK, "%s", ops->error(ex));
        free(host);
        bib_view_t *v = t == 0 ? &call.out : &call.in[t - 1];
        v->buf = bufs[t];
        v->offset = lead;
        v->dtype = ts[t]->dtype;
        v->rank = ts[t]->rank;
        memcpy(v->dims, ts[t]->dims, sizeof v->dims);
    }
    cr_assert(ops->supports(ex, &call), "%s does not support kernel %d", ops->name, call.kernel);
    bib_status_t st = ops->kernels[call.kernel](ex, &call);
    if (st != BIB_OK)
        snprintf(err, err_len, "%s", ops->error(ex));
    cr_assert_eq(ops->synchronize(ex), BIB_OK, "%s", ops->error(ex));
    for (int t = 0; t < 1 + nin; t++) {
        size_t total = counts[t] + lead + CTS_GUARD;
        uint32_t *host = t == 0 ? words : malloc(total * 4);
        cr_assert(host);
        cr_assert_eq(ops->download(ex, bufs[t], 0, host, total * 4), BIB_OK, "%s", ops->error(ex));
        for (size_t g = 0; g < lead; g++)
            cr_assert_eq(host[g], CTS_SENTINEL, "%s: guard word %zu before tensor %d overwritten",
                         ops->name, g, t);
        for (size_t g = 0; g < CTS_GUARD; g++)
            cr_assert_eq(host[lead + counts[t] + g], CTS_SENTINEL,
                         "%s: guard word %zu after tensor %d overwritten", ops->name, g, t);
        if (t != 0) {
            cr_assert(memcmp(host + lead, ts[t]->data, counts[t] * 4) == 0,
                      "%s: input %d was modified", ops->name, t - 1);
            free(host);
        }
        ops->buffer_free(ex, bufs[t]);
    }
    return st;
}

/* Runs on the CPU and on the executor under test; asserts the same status
 * and then identical bits, or the same error message. */
static void cts_compare(bib_call_t call, const cts_tensor_t *in, int nin, cts_tensor_t out,
                        const char *what) {
    size_t n = cts_count(&out), total = n + cts_lead + CTS_GUARD;
    uint32_t *a = malloc(total * 4), *b = malloc(total * 4);
    cr_assert(a && b);
    char ea[512] = "", eb[512] = "";
    bib_status_t sa = cts_run_on(&bib_cpu_executor, cts_cpu, call, in, nin, &out, a, ea, sizeof ea);
    bib_status_t sb = cts_run_on(cts_ops, cts_ex, call, in, nin, &out, b, eb, sizeof eb);
    cr_assert_eq(sa, sb, "%s: cpu status %d (%s), %s status %d (%s)", what, sa, ea, cts_ops->name,
                 sb, eb);
    if (sa == BIB_OK) {
        for (size_t i = 0; i < n; i++) {
            uint32_t x = a[cts_lead + i], y = b[cts_lead + i];
            cr_assert_eq(x, y, "%s: element %zu of %zu: cpu 0x%08x (%g), %s 0x%08x (%g)", what, i,
                         n, x, (double)bib_f32_from_bits(x), cts_ops->name, y,
                         (double)bib_f32_from_bits(y));
        }
    } else {
        cr_assert_str_eq(ea, eb, "%s: the executors' messages differ", what);
    }
    free(a);
    free(b);
}

/* ---- the device --------------------------------------------------------------- */

CTS_TEST(describe_names_the_device_and_its_numerics) {
    static const char *const words[] = {CTS_DESCRIBE_WORDS};
    cr_assert_not_null(cts_ops->describe);
    const char *d = cts_ops->describe(cts_ex);
    printf("%s\n", d);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        cr_assert(strstr(d, words[i]), "no '%s' in: %s", words[i], d);
}

CTS_TEST(device_selector_that_matches_nothing_is_unavailable_with_reason) {
    bib_executor_config_t cfg = {.device = "no-such-device-anywhere"};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(cts_ops->init(&cfg, &ex, why, sizeof why), BIB_E_UNAVAILABLE);
    cr_assert_null(ex);
    cr_assert(strstr(why, "no " CTS_DEVICE_NOUN " device matches 'no-such-device-anywhere'"), "%s",
              why);
}

CTS_TEST(device_selected_by_index_lives_beside_the_first_executor) {
    bib_executor_t *ex = cts_open("0", NULL, NULL);
    void *a, *b;
    uint32_t w = 0x3f800000u, r1 = 0, r2 = 0;
    cr_assert_eq(cts_ops->buffer_alloc(ex, 4, &a), BIB_OK, "%s", cts_ops->error(ex));
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, 4, &b), BIB_OK, "%s", cts_ops->error(cts_ex));
    cr_assert_eq(cts_ops->upload(ex, a, 0, &w, 4), BIB_OK);
    cr_assert_eq(cts_ops->upload(cts_ex, b, 0, &w, 4), BIB_OK);
    cr_assert_eq(cts_ops->download(ex, a, 0, &r1, 4), BIB_OK);
    cr_assert_eq(cts_ops->download(cts_ex, b, 0, &r2, 4), BIB_OK);
    cr_assert(r1 == w && r2 == w);
    cts_ops->buffer_free(ex, a);
    cts_ops->buffer_free(cts_ex, b);
    cts_close(ex);
}

/* ---- MATMUL ----------------------------------------------------------------- */

static void cts_matmul_case(uint32_t m, uint32_t k, uint32_t n, bool bias, bib_act_t act,
                            bool special) {
    float *a = malloc((size_t)m * k * 4 + 4), *b = malloc((size_t)k * n * 4 + 4),
          *c = malloc((size_t)n * 4 + 4);
    cr_assert(a && b && c);
    cts_fill_data(a, (size_t)m * k, -2, 2, special);
    cts_fill_data(b, (size_t)k * n, -2, 2, special);
    cts_fill_data(c, n, -1, 1, special);
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = act};
    cts_tensor_t in[3] = {cts_tf(a, 2, m, k, 0, 0), cts_tf(b, 2, k, n, 0, 0),
                          cts_tf(c, 1, n, 0, 0, 0)};
    char what[128];
    snprintf(what, sizeof what, "matmul %ux%ux%u bias=%d act=%d special=%d lead=%zu", m, k, n, bias,
             act, special, cts_lead);
    cts_compare(call, in, bias ? 3 : 2, cts_tf(NULL, 2, m, n, 0, 0), what);
    free(a), free(b), free(c);
}

static const uint32_t cts_matmul_shapes[][3] = {
    {1, 1, 1},      {7, 7, 7},      {33, 33, 33},    {1023, 7, 33},  {7, 1023, 33},
    {33, 7, 1023},  {65, 130, 129}, {128, 64, 256},  {3, 0, 5},      {129, 17, 257},
    {256, 32, 128}, {4, 4100, 12},  {130, 259, 131}, {300, 72, 200}, {1, 64, 1024}};

static void cts_matmul_all_shapes(void) {
    for (size_t s = 0; s < sizeof cts_matmul_shapes / sizeof cts_matmul_shapes[0]; s++)
        cts_matmul_case(cts_matmul_shapes[s][0], cts_matmul_shapes[s][1], cts_matmul_shapes[s][2],
                        false, BIB_ACT_NONE, false);
}

CTS_TEST(matmul_matches_cpu_over_odd_shapes) {
    cts_matmul_all_shapes();
}

CTS_TEST(matmul_matches_cpu_on_misaligned_views) {
    /* An odd lead moves every base off 16 bytes, so vector loads must step aside. */
    cts_lead = CTS_GUARD + 1;
    cts_matmul_all_shapes();
    cts_matmul_case(64, 64, 64, true, BIB_ACT_GELU, true);
    cts_lead = CTS_GUARD;
}

CTS_TEST(matmul_with_bias_and_activations_matches_cpu) {
    cts_matmul_case(33, 65, 31, true, BIB_ACT_NONE, false);
    cts_matmul_case(33, 65, 31, true, BIB_ACT_RELU, false);
    cts_matmul_case(70, 17, 66, true, BIB_ACT_GELU, false);
    cts_matmul_case(1, 1023, 7, false, BIB_ACT_GELU, false);
    cts_matmul_case(128, 64, 128, true, BIB_ACT_RELU, false);
    cts_matmul_case(3, 0, 5, true, BIB_ACT_GELU, false);
    cts_matmul_case(70, 17, 66, true, BIB_ACT_GELU_ERF, false);
    cts_matmul_case(129, 33, 130, true, BIB_ACT_GELU_ERF, true);
}

CTS_TEST(matmul_special_values_match_cpu) {
    cts_matmul_case(33, 33, 33, true, BIB_ACT_NONE, true);
    cts_matmul_case(17, 9, 65, true, BIB_ACT_RELU, true);
    cts_matmul_case(17, 9, 65, false, BIB_ACT_GELU, true);
    cts_matmul_case(64, 36, 64, true, BIB_ACT_NONE, true);
}

CTS_TEST(matmul_keeps_negative_zero_chains_through_padded_k) {
    /* Products that underflow to -0 leave acc == -0; K = 5 pads the last
     * slice, and the padding must leave -0 alone (bias off, act none). */
    enum { M = 5, K = 5, N = 7 };
    float a[M * K], b[K * N];
    for (int i = 0; i < M * K; i++)
        a[i] = -0x1p-80f;
    for (int i = 0; i < K * N; i++)
        b[i] = 0x1p-80f;
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = BIB_ACT_NONE};
    cts_tensor_t in[2] = {cts_tf(a, 2, M, K, 0, 0), cts_tf(b, 2, K, N, 0, 0)};
    cts_compare(call, in, 2, cts_tf(NULL, 2, M, N, 0, 0), "matmul -0 chains");
}

CTS_TEST(matmul_tiny_values_midway_through_k_match_cpu) {
    /* Values below 2^-40 first met past k = 16, in some tiles only: a GPU
     * fma() that flushes denormals is exact on the slices before them only,
     * and must stay on its checked path for the rest of the tile. Rows 0
     * mod 3 under 67 are zero but for k = 20..23, whose products (about
     * 2^-140) leave a denormal chain that the zeros after must keep; the
     * other rows are ordinary and meet B's tiny entries at k = 40..43 in
     * columns 0 mod 5 under 64 (products about 2^-100, normal). Tiles of
     * 64 or 128 past row 128 and column 64 meet neither. */
    enum { M = 200, K = 70, N = 140 };
    float *a = malloc(M * K * 4), *b = malloc(K * N * 4);
    cr_assert(a && b);
    cts_fill_data(a, M * K, -2, 2, false);
    cts_fill_data(b, K * N, -2, 2, false);
    for (int i = 0; i < 67; i += 3)
        for (int k = 0; k < K; k++)
            a[i * K + k] = k >= 20 && k < 24 ? ((i + k) & 1 ? -0x1.3p-70f : 0x1.7p-70f) : 0.0f;
    for (int k = 20; k < 24; k++)
        for (int j = 0; j < N; j++)
            b[k * N + j] = (j & 1 ? 0x1.5p-70f : -0x1.9p-70f) * (float)(1 + j % 7);
    for (int k = 40; k < 44; k++)
        for (int j = 0; j < 64; j += 5)
            b[k * N + j] = 0x1p-100f;
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = BIB_ACT_NONE};
    cts_tensor_t in[2] = {cts_tf(a, 2, M, K, 0, 0), cts_tf(b, 2, K, N, 0, 0)};
    cts_compare(call, in, 2, cts_tf(NULL, 2, M, N, 0, 0), "matmul tiny values midway");
    free(a), free(b);
}

#ifdef CTS_MATMUL_TILES_ENV
CTS_TEST(matmul_every_tile_configuration_matches_cpu) {
    /* Each forced configuration runs on any device, whatever the problem size
     * would pick by itself. */
    static const char *const tiles[] = {CTS_MATMUL_TILES};
    bib_executor_t *saved = cts_ex;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        cts_ex = cts_open(NULL, CTS_MATMUL_TILES_ENV, tiles[t]);
        cts_matmul_case(1, 1, 1, false, BIB_ACT_NONE, false);
        cts_matmul_case(129, 33, 257, true, BIB_ACT_NONE, false);
        cts_matmul_case(300, 70, 130, true, BIB_ACT_RELU, true);
        cts_matmul_case(257, 12, 260, true, BIB_ACT_GELU, true);
        cts_lead = CTS_GUARD + 3;
        cts_matmul_case(131, 19, 133, true, BIB_ACT_GELU, true);
        cts_lead = CTS_GUARD;
        /* float4 paths without an activation (the shapes' K and N are
         * multiples of 4), with and without a bias, K past one slice of
         * any configuration and not a multiple of 16. */
        cts_matmul_case(260, 36, 132, false, BIB_ACT_NONE, false);
        cts_matmul_case(129, 52, 264, true, BIB_ACT_NONE, true);
        cts_close(cts_ex);
    }
    cts_ex = saved;
}
#endif

CTS_TEST(matmul_large_matches_cpu) {
    cts_matmul_case(512, 384, 640, true, BIB_ACT_NONE, false);
    cts_matmul_case(1023, 257, 1025, false, BIB_ACT_NONE, false);
}

/* ---- elementwise ------------------------------------------------------------ */

static const uint32_t cts_sizes[] = {1, 7, 33, 1023, 70001};

CTS_TEST(unary_ops_match_cpu) {
    for (uint32_t op = BIB_UNARY_RELU; op < BIB_UNARY__COUNT; op++)
        for (size_t s = 0; s < sizeof cts_sizes / sizeof cts_sizes[0]; s++) {
            uint32_t n = cts_sizes[s];
            float *x = malloc(n * 4);
            cr_assert(x);
            cts_fill_data(x, n, op == BIB_UNARY_EXP ? -110 : -12, op == BIB_UNARY_EXP ? 110 : 12,
                          true);
            bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
            cts_tensor_t in = cts_tf(x, 1, n, 0, 0, 0);
            char what[64];
            snprintf(what, sizeof what, "unary op %u n=%u", op, n);
            cts_compare(call, &in, 1, cts_tf(NULL, 1, n, 0, 0, 0), what);
            free(x);
        }
}

CTS_TEST(unary_ops_match_cpu_on_small_and_tie_inputs) {
    /* Around tanh's polynomial switch, sigmoid's sign switch, denormals. */
    enum { N = 4096 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = bib_f32_from_bits((i % 2 ? 0x80000000u : 0) |
                                 (uint32_t)(0x3f1f0000u + (uint32_t)i * 37));
    x[0] = bib_f32_from_bits(0x00000001u), x[1] = bib_f32_from_bits(0x80000001u), x[2] = 0x1p-30f;
    for (uint32_t op = BIB_UNARY_RELU; op < BIB_UNARY__COUNT; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
        cts_tensor_t in = cts_tf(x, 1, N, 0, 0, 0);
        cts_compare(call, &in, 1, cts_tf(NULL, 1, N, 0, 0, 0), "unary near switch points");
    }
}

CTS_TEST(exp_matches_cpu_at_its_range_edges) {
    enum { N = 2048 };
    float x[N];
    for (int i = 0; i < N; i++) {
        /* Walk the bits around exp's overflow (89), underflow (-104) and
         * denormal-result region, and around +-100. */
        static const float centers[] = {89.0f, -104.0f, -87.3f, 88.72f, 100.0f, -100.0f};
        float c = centers[i % 6];
        x[i] = bib_f32_from_bits(bib_f32_bits(c) + (uint32_t)(i / 6) - 170u);
    }
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_EXP};
    cts_tensor_t in = cts_tf(x, 1, N, 0, 0, 0);
    cts_compare(call, &in, 1, cts_tf(NULL, 1, N, 0, 0, 0), "exp range edges");
}

CTS_TEST(binary_ops_and_broadcasts_match_cpu) {
    for (uint32_t op = BIB_BINARY_ADD; op < BIB_BINARY__COUNT; op++)
        for (int mode = 0; mode < 3; mode++) {
            uint32_t rows = 37, cols = 33;
            float *a = malloc(rows * cols * 4), *b = malloc(rows * cols * 4);
            cr_assert(a && b);
            cts_fill_data(a, rows * cols, -1e3f, 1e3f, true);
            cts_fill_data(b, rows * cols, -10, 10, true);
            bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = op};
            cts_tensor_t in[2] = {cts_tf(a, 2, rows, cols, 0, 0),
                                  mode == 0   ? cts_tf(b, 2, rows, cols, 0, 0)
                                  : mode == 1 ? cts_tf(b, 1, cols, 0, 0, 0)
                                              : cts_tf(b, 1, 1, 0, 0, 0)};
            char what[64];
            snprintf(what, sizeof what, "binary op %u broadcast %d", op, mode);
            cts_compare(call, in, 2, cts_tf(NULL, 2, rows, cols, 0, 0), what);
            free(a), free(b);
        }
}

CTS_TEST(binary_division_handles_denormals_and_zeros) {
    enum { N = 1024 };
    float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = bib_f32_from_bits(cts_rnd() & 0x80ffffffu); /* denormals and tiny normals */
        b[i] = bib_f32_from_bits((cts_rnd() & 0x807fffffu) | (i % 3 == 0 ? 0 : 0x3f000000u));
    }
    a[0] = 0.0f, b[0] = 0.0f, a[1] = -0.0f, b[1] = 0.0f, a[2] = 1.0f, b[2] = -0.0f;
    bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = BIB_BINARY_DIV};
    cts_tensor_t in[2] = {cts_tf(a, 1, N, 0, 0, 0), cts_tf(b, 1, N, 0, 0, 0)};
    cts_compare(call, in, 2, cts_tf(NULL, 1, N, 0, 0, 0), "division with denormals");
}

/* The math opcodes over raw bit patterns (every binade, denormals, NaN
 * payloads, infinities) and around their branch points: erf's |x| = 1,
 * erfc's cut-off 10.5, log's sqrt(1/2) split, gelu_erf's u = -1/2 and 1. */
CTS_TEST(math_ops_match_cpu_over_bit_patterns) {
    enum { N = 8192 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    cr_assert(x && y);
    static const float centers[] = {1.0f,         -1.0f,      10.5f,  0.70710677f,
                                    -0.70710677f, 1.4142135f, -14.0f, 3.9f};
    for (int i = 0; i < N; i++) {
        if (i % 4 == 0)
            x[i] = bib_f32_from_bits(bib_f32_bits(centers[(i / 4) % 8]) + (uint32_t)(i / 32) - 64u);
        else
            x[i] = bib_f32_from_bits(cts_rnd() ^ (cts_rnd() << 16));
        y[i] = i % 3 ? bib_f32_from_bits(cts_rnd() ^ (cts_rnd() << 16))
                     : (float)((int)(cts_rnd() % 41) - 20) * (i % 2 ? 0.5f : 1.0f);
    }
    cts_tensor_t in[2] = {cts_tf(x, 1, N, 0, 0, 0), cts_tf(y, 1, N, 0, 0, 0)};
    for (uint32_t op = BIB_UNARY_ERF; op < BIB_UNARY__COUNT; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
        char what[64];
        snprintf(what, sizeof what, "unary op %u over bit patterns", op);
        cts_compare(call, in, 1, cts_tf(NULL, 1, N, 0, 0, 0), what);
    }
    /* positive bases and moderate exponents: the log-exp path itself */
    for (int i = 0; i < N / 2; i++)
        x[i] = bib_f32_from_bits(bib_f32_bits(x[i]) & 0x7FFFFFFFu);
    for (uint32_t op = BIB_BINARY_POW; op <= BIB_BINARY_MAX; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = op};
        char what[64];
        snprintf(what, sizeof what, "binary op %u over bit patterns", op);
        cts_compare(call, in, 2, cts_tf(NULL, 1, N, 0, 0, 0), what);
    }
    free(x), free(y);
}

CTS_TEST(scale_matches_cpu) {
    float x[1023];
    cts_fill_data(x, 1023, -1e30f, 1e30f, true);
    static const float factors[] = {0.125f, -3.0f, 1e30f, 0x1p-140f, 0.0f};
    for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++) {
        bib_call_t call = {.kernel = BIB_KERNEL_SCALE, .f = {factors[i], 0}};
        cts_tensor_t in = cts_tf(x, 1, 1023, 0, 0, 0);
        cts_compare(call, &in, 1, cts_tf(NULL, 1, 1023, 0, 0, 0), "scale");
    }
}

/* ---- layout and transfers --------------------------------------------------- */

CTS_TEST(transpose_matches_cpu) {
    static const uint32_t shapes[][3] = {{1, 1, 1},   {1, 7, 33},   {3, 33, 1023},
                                         {2, 64, 32}, {5, 1023, 1}, {70, 3, 40}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t b = shapes[s][0], r = shapes[s][1], c = shapes[s][2];
        float *x = malloc((size_t)b * r * c * 4);
        cr_assert(x);
        cts_fill_data(x, (size_t)b * r * c, -1, 1, true);
        bib_call_t call = {.kernel = BIB_KERNEL_TRANSPOSE};
        cts_tensor_t in = cts_tf(x, 3, b, r, c, 0);
        cts_compare(call, &in, 1, cts_tf(NULL, 3, b, c, r, 0), "transpose");
        free(x);
    }
}

/* A STRIDED call reading in0 with strides st0 from off0 (and in1 past
 * split on axis, when in1 is given) into out. */
static bib_call_t cts_strided(int64_t off0, const int64_t st0[6], int64_t off1,
                              const int64_t st1[6], int64_t axis, int64_t split) {
    bib_call_t call = {.kernel = BIB_KERNEL_STRIDED};
    call.p[0] = off0;
    call.p[7] = off1;
    for (int k = 0; k < 6; k++) {
        call.p[1 + k] = st0[k];
        call.p[8 + k] = st1 ? st1[k] : 0;
    }
    call.p[14] = axis;
    call.p[15] = split;
    return call;
}

CTS_TEST(strided_copies_match_cpu) {
    enum { N = 2 * 3 * 2 * 5 * 4 * 33 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    cr_assert(x && y);
    cts_fill_data(x, N, -1, 1, true);
    cts_fill_data(y, N, -1, 1, true);
    cts_tensor_t in6 = {x, BIB_DTYPE_F32, 6, {2, 3, 2, 5, 4, 33}};
    /* A rank-6 permutation (out axis k = in axis {5, 0, 3, 1, 4, 2}). */
    static const int64_t perm[6] = {1, 3960, 66, 1320, 33, 660};
    cts_tensor_t out = {NULL, BIB_DTYPE_F32, 6, {33, 2, 5, 3, 4, 2}};
    cts_compare(cts_strided(0, perm, 0, NULL, 0, 33), &in6, 1, out, "strided permute");
    /* Negative steps from the far end, and a broadcast axis (stride 0). */
    static const int64_t rev[6] = {-3960, 0, 1320, -330, 66, -2};
    cts_tensor_t out2 = {NULL, BIB_DTYPE_F32, 6, {2, 7, 2, 3, 4, 17}};
    cts_compare(cts_strided(3960 + 990 + 32, rev, 0, NULL, 0, 2), &in6, 1, out2,
                "strided reverse and broadcast");
    /* Two sources split on axis 4 (CONCAT [.., 4, 33] with [.., 3, 33]). */
    cts_tensor_t two[2] = {in6, {y, BIB_DTYPE_F32, 6, {2, 3, 2, 5, 3, 33}}};
    static const int64_t a[6] = {3960, 1320, 660, 132, 33, 1};
    static const int64_t b[6] = {2970, 990, 495, 99, 33, 1};
    cts_tensor_t out3 = {NULL, BIB_DTYPE_F32, 6, {2, 3, 2, 5, 7, 33}};
    cts_compare(cts_strided(0, a, -4 * 33, b, 4, 4), two, 2, out3, "strided concat");
    /* i32 words move as they are; a rank-0 output reads one word. */
    cts_tensor_t ints = {x, BIB_DTYPE_I32, 1, {N}};
    static const int64_t one[6] = {0, 0, 0, 0, 0, 0};
    cts_compare(cts_strided(N - 1, one, 0, NULL, 0, 1), &ints, 1,
                (cts_tensor_t){NULL, BIB_DTYPE_I32, 0, {0}}, "strided scalar");
    /* A long run over the last axis: more elements than one grid pass. */
    static const int64_t flat[6] = {0, 0, 0, 0, 0, 1};
    cts_tensor_t in1 = {x, BIB_DTYPE_F32, 1, {N}};
    cts_compare(cts_strided(0, flat, 0, NULL, 0, 1), &in1, 1,
                (cts_tensor_t){NULL, BIB_DTYPE_F32, 1, {N}}, "strided flat");
    free(x);
    free(y);
}

CTS_TEST(take_matches_cpu_with_negative_indices) {
    /* x [3, 40, 7]; GATHER_AXIS on axis 1 with indices [5, 9] in -40..39,
     * then GATHER_ELEMENTS on axis 2 with indices [3, 40, 5] in -7..6. */
    enum { A = 3, B = 40, C = 7 };
    float *x = malloc(A * B * C * 4);
    int32_t *ia = malloc(5 * 9 * 4), *ie = malloc(A * B * 5 * 4);
    cr_assert(x && ia && ie);
    cts_fill_data(x, A * B * C, -1, 1, true);
    for (int i = 0; i < 5 * 9; i++)
        ia[i] = (int32_t)(cts_rnd() % (2 * B)) - B;
    for (int i = 0; i < A * B * 5; i++)
        ie[i] = (int32_t)(cts_rnd() % (2 * C)) - C;
    cts_tensor_t in[2] = {{x, BIB_DTYPE_F32, 3, {A, B, C}}, {ia, BIB_DTYPE_I32, 2, {5, 9}}};
    /* out [3, 5, 9, 7] padded to [1, 1, 3, 5, 9, 7]. */
    bib_call_t take = {.kernel = BIB_KERNEL_TAKE, .sub = BIB_TAKE_AXIS};
    const int64_t p[14] = {0, 0, B * C, 0, 0, 1, 0, 0, 0, 9, 1, 0, C, B};
    memcpy(take.p, p, sizeof p);
    cts_compare(take, in, 2, (cts_tensor_t){NULL, BIB_DTYPE_F32, 4, {A, 5, 9, C}}, "take axis");
    /* out [3, 40, 5] padded to [1, 1, 1, 3, 40, 5]. */
    in[1] = (cts_tensor_t){ie, BIB_DTYPE_I32, 3, {A, B, 5}};
    bib_call_t el = {.kernel = BIB_KERNEL_TAKE, .sub = BIB_TAKE_ELEMENTS};
    const int64_t q[14] = {0, 0, 0, B * C, C, 0, 0, 0, 0, B * 5, 5, 1, 1, C};
    memcpy(el.p, q, sizeof q);
    cts_compare(el, in, 2, (cts_tensor_t){NULL, BIB_DTYPE_F32, 3, {A, B, 5}}, "take elements");
    free(x);
    free(ia);
    free(ie);
}

CTS_TEST(fill_and_copy_match_cpu) {
    float x[1023];
    cts_fill_data(x, 1023, -1, 1, true);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .f = {bib_f32_from_bits(0xffc00123u), 0}};
    cts_compare(fill, NULL, 0, cts_tf(NULL, 1, 1023, 0, 0, 0), "fill f32 NaN payload");
    bib_call_t filli = {.kernel = BIB_KERNEL_FILL, .i = {-7, 0}};
    cts_tensor_t ti = {NULL, BIB_DTYPE_I32, 1, {33}};
    cts_compare(filli, NULL, 0, ti, "fill i32");
    bib_call_t copy = {.kernel = BIB_KERNEL_COPY};
    cts_tensor_t in = cts_tf(x, 2, 31, 33, 0, 0);
    cts_compare(copy, &in, 1, cts_tf(NULL, 1, 1023, 0, 0, 0), "copy");
}

CTS_TEST(copy_between_overlapping_ranges_moves_like_memmove) {
#ifdef CTS_SKIP_OVERLAPPING_COPY
    printf("SKIP: %s\n", CTS_SKIP_OVERLAPPING_COPY);
    cr_skip_test("%s", CTS_SKIP_OVERLAPPING_COPY);
#endif
    enum { N = 1000 };
    uint32_t w[N], r[N], expect[N];
    for (uint32_t i = 0; i < N; i++)
        w[i] = i * 2654435761u;
    void *b;
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, N * 4, &b), BIB_OK);
    for (int dir = 0; dir < 2; dir++) {
        cr_assert_eq(cts_ops->upload(cts_ex, b, 0, w, sizeof w), BIB_OK);
        bib_call_t call = {.kernel = BIB_KERNEL_COPY};
        size_t from = dir ? 100 : 0, to = dir ? 0 : 100;
        call.in[0] = (bib_view_t){b, from, BIB_DTYPE_I32, 1, {800}};
        call.out = (bib_view_t){b, to, BIB_DTYPE_I32, 1, {800}};
        cr_assert_eq(cts_ops->kernels[BIB_KERNEL_COPY](cts_ex, &call), BIB_OK, "%s",
                     cts_ops->error(cts_ex));
        cr_assert_eq(cts_ops->download(cts_ex, b, 0, r, sizeof r), BIB_OK);
        memcpy(expect, w, sizeof w);
        memmove(expect + to, expect + from, 800 * 4);
        cr_assert(memcmp(r, expect, sizeof r) == 0, "overlapping copy, direction %d", dir);
    }
    cts_ops->buffer_free(cts_ex, b);
}

/* ---- row kernels ------------------------------------------------------------ */

static const uint32_t cts_row_shapes[][2] = {{1, 1},   {7, 7},    {3, 33},   {2, 1023},
                                             {5, 64},  {4, 65},   {1, 5000}, {3, 4096},
                                             {2, 128}, {70, 257}, {2, 2048}, {1, 9000}};
#define CTS_ROW_SHAPES (sizeof cts_row_shapes / sizeof cts_row_shapes[0])

/* Rows of row shape s, uniform in [lo, hi); the caller frees them. */
static float *cts_rows(size_t s, float lo, float hi, bool special, uint32_t *r, uint32_t *n) {
    *r = cts_row_shapes[s][0], *n = cts_row_shapes[s][1];
    float *x = malloc((size_t)*r * *n * 4);
    cr_assert(x);
    cts_fill_data(x, (size_t)*r * *n, lo, hi, special);
    return x;
}

CTS_TEST(softmax_matches_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
            uint32_t r, n;
            float *x = cts_rows(s, -30, 30, special, &r, &n);
            bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX};
            cts_tensor_t in = cts_tf(x, 2, r, n, 0, 0);
            char what[64];
            snprintf(what, sizeof what, "softmax %ux%u special=%d", r, n, special);
            cts_compare(call, &in, 1, cts_tf(NULL, 2, r, n, 0, 0), what);
            free(x);
        }
}

CTS_TEST(softmax_handles_rows_of_infinities_and_huge_spreads) {
    enum { R = 4, N = 100 };
    float x[R * N];
    for (int i = 0; i < R * N; i++)
        x[i] = (float)(i % 7) * 40.0f - 120.0f; /* exp arguments far below -100 */
    for (int i = 0; i < N; i++)
        x[N + i] = -INFINITY;                      /* row 1: all -Inf -> NaN */
    x[2 * N + 5] = INFINITY;                       /* row 2: one +Inf */
    x[3 * N + 9] = bib_f32_from_bits(0x80000000u); /* row 3: -0 among the rest */
    bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX};
    cts_tensor_t in = cts_tf(x, 2, R, N, 0, 0);
    cts_compare(call, &in, 1, cts_tf(NULL, 2, R, N, 0, 0), "softmax infinities");
}

CTS_TEST(logsoftmax_matches_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
            uint32_t r, n;
            float *x = cts_rows(s, -30, 30, special, &r, &n);
            bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX, .sub = BIB_SOFTMAX_LOG};
            cts_tensor_t in = cts_tf(x, 2, r, n, 0, 0);
            char what[64];
            snprintf(what, sizeof what, "logsoftmax %ux%u special=%d", r, n, special);
            cts_compare(call, &in, 1, cts_tf(NULL, 2, r, n, 0, 0), what);
            free(x);
        }
    enum { R = 4, N = 100 };
    float x[R * N];
    for (int i = 0; i < R * N; i++)
        x[i] = (float)(i % 7) * 40.0f - 120.0f;
    for (int i = 0; i < N; i++)
        x[N + i] = -INFINITY;
    x[2 * N + 5] = INFINITY;
    x[3 * N + 9] = bib_f32_from_bits(0xFFC00001u);
    bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX, .sub = BIB_SOFTMAX_LOG};
    cts_tensor_t in = cts_tf(x, 2, R, N, 0, 0);
    cts_compare(call, &in, 1, cts_tf(NULL, 2, R, N, 0, 0), "logsoftmax infinities");
}

CTS_TEST(reduce_and_argmax_match_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
            uint32_t r, n;
            float *x = cts_rows(s, -30, 30, special, &r, &n);
            cts_tensor_t in = cts_tf(x, 2, r, n, 0, 0);
            for (uint32_t op = BIB_REDUCE_SUM; op < BIB_REDUCE__COUNT; op++) {
                bib_call_t call = {.kernel = BIB_KERNEL_REDUCE, .sub = op};
                cts_compare(call, &in, 1, cts_tf(NULL, 1, r, 0, 0, 0), "reduce");
            }
            cts_tensor_t out = {NULL, BIB_DTYPE_I32, 1, {r}};
            for (uint32_t op = 0; op < BIB_ARGMAX__COUNT; op++) {
                bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX, .sub = op};
                cts_compare(am, &in, 1, out, op == BIB_ARGMAX_MIN ? "argmin" : "argmax");
            }
            free(x);
        }
}

CTS_TEST(argmax_takes_first_maximum_and_first_nan) {
    float x[130];
    for (int i = 0; i < 130; i++)
        x[i] = (float)(i % 5);
    x[3] = -0.0f;
    cts_tensor_t in = cts_tf(x, 1, 130, 0, 0, 0);
    cts_tensor_t out = {NULL, BIB_DTYPE_I32, 0, {0}};
    bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX};
    cts_compare(am, &in, 1, out, "argmax ties");
    x[100] = NAN, x[77] = NAN;
    cts_compare(am, &in, 1, out, "argmax NaN");
    for (int i = 0; i < 130; i++)
        x[i] = i % 2 ? -0.0f : 0.0f;
    cts_compare(am, &in, 1, out, "argmax zeros of both signs");
}

CTS_TEST(argsort_matches_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
            uint32_t r, n;
            float *x = cts_rows(s, -30, 30, special, &r, &n);
            cts_tensor_t in = cts_tf(x, 2, r, n, 0, 0);
            cts_tensor_t out = {NULL, BIB_DTYPE_I32, 2, {r, n}};
            /* Each element loops over its row: a driver that stops long
             * loops (lavapipe: 65,535 iterations) refuses the longest rows,
             * which run on the CPU executor. */
            uint32_t dummy;
            bib_call_t probe = {
                .kernel = BIB_KERNEL_ARGSORT,
                .out = {.buf = &dummy, .dtype = BIB_DTYPE_I32, .rank = 2, .dims = {r, n}},
                .in = {{.buf = &dummy, .dtype = BIB_DTYPE_F32, .rank = 2, .dims = {r, n}}}};
            if (!cts_ops->supports(cts_ex, &probe)) {
                cr_log_info("%s: argsort of %u x %u runs on the CPU executor (loops)",
                            cts_ops->name, r, n);
                free(x);
                continue;
            }
            for (uint32_t op = 0; op < BIB_ARGMAX__COUNT; op++) {
                bib_call_t as = {.kernel = BIB_KERNEL_ARGSORT, .sub = op};
                cts_compare(as, &in, 1, out, op == BIB_ARGMAX_MIN ? "argsort asc" : "argsort desc");
            }
            free(x);
        }
    /* Ties everywhere, NaNs among them, zeros of both signs. */
    float x[3 * 130];
    for (int i = 0; i < 3 * 130; i++)
        x[i] = i < 130 ? (float)(i % 5) : i < 260 ? (i % 2 ? -0.0f : 0.0f) : (float)(i % 3) - 1.0f;
    x[100] = NAN, x[77] = NAN, x[300] = -NAN, x[7] = -INFINITY, x[8] = INFINITY;
    cts_tensor_t in = cts_tf(x, 2, 3, 130, 0, 0);
    cts_tensor_t out = {NULL, BIB_DTYPE_I32, 2, {3, 130}};
    for (uint32_t op = 0; op < BIB_ARGMAX__COUNT; op++) {
        bib_call_t as = {.kernel = BIB_KERNEL_ARGSORT, .sub = op};
        cts_compare(as, &in, 1, out, "argsort ties, NaNs and signed zeros");
        /* TOPK: the first k columns, on both sides of the CPU executor's
           selection bound (n / 8). */
        static const uint32_t ks[] = {1, 3, 16, 17, 129};
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            cts_tensor_t first = {NULL, BIB_DTYPE_I32, 2, {3, ks[ki]}};
            cts_compare(as, &in, 1, first, "topk ties, NaNs and signed zeros");
        }
    }
}

CTS_TEST(cumsum_matches_cpu) {
    for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
        uint32_t r, n;
        float *x = cts_rows(s, -1e4f, 1e4f, s == 3, &r, &n);
        cts_tensor_t in = cts_tf(x, 2, r, n, 0, 0);
        for (uint32_t flags = 0; flags <= BIB_SCAN__ALL; flags++) {
            bib_call_t call = {.kernel = BIB_KERNEL_CUMSUM, .i = {flags}};
            cts_compare(call, &in, 1, cts_tf(NULL, 2, r, n, 0, 0), "cumsum f32");
        }
        free(x);
    }
    /* Rows that start (and, reversed, end) with -0, sums that round away
       an addend, a NaN; then i32 sums that wrap. */
    float xf[3 * 70];
    int32_t xi[3 * 70];
    for (int i = 0; i < 3 * 70; i++) {
        xf[i] = i % 5 == 0 ? 1e8f : i % 5 == 1 ? -1e8f : (float)(i % 7) * 0.1f;
        xi[i] = (int32_t)((uint32_t)i * 2654435761u);
    }
    xf[0] = xf[70] = xf[69] = xf[209] = -0.0f, xf[150] = NAN;
    cts_tensor_t in[2] = {{xf, BIB_DTYPE_F32, 2, {3, 70}}, {xi, BIB_DTYPE_I32, 2, {3, 70}}};
    for (int d = 0; d < 2; d++)
        for (uint32_t flags = 0; flags <= BIB_SCAN__ALL; flags++) {
            bib_call_t call = {.kernel = BIB_KERNEL_CUMSUM, .i = {flags}};
            cts_compare(call, &in[d], 1, (cts_tensor_t){NULL, in[d].dtype, 2, {3, 70}},
                        d ? "cumsum i32" : "cumsum f32, -0 at the ends");
        }
}

CTS_TEST(max_orders_negative_zero_below_positive_zero) {
    float x[2 * 70];
    for (int i = 0; i < 140; i++)
        x[i] = i < 70 ? -0.0f : (i % 3 ? -0.0f : 0.0f);
    cts_tensor_t in = cts_tf(x, 2, 2, 70, 0, 0);
    bib_call_t call = {.kernel = BIB_KERNEL_REDUCE, .sub = BIB_REDUCE_MAX};
    cts_compare(call, &in, 1, cts_tf(NULL, 1, 2, 0, 0, 0), "max of signed zeros");
}

CTS_TEST(layernorm_and_rmsnorm_match_cpu) {
    for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
        uint32_t r, n;
        float *x = cts_rows(s, -5, 7, s == 3, &r, &n), *g = malloc(n * 4), *b = malloc(n * 4);
        cr_assert(g && b);
        cts_fill_data(g, n, 0.5f, 1.5f, false);
        cts_fill_data(b, n, -1, 1, false);
        cts_tensor_t in[3] = {cts_tf(x, 2, r, n, 0, 0), cts_tf(g, 1, n, 0, 0, 0),
                              cts_tf(b, 1, n, 0, 0, 0)};
        bib_call_t ln = {.kernel = BIB_KERNEL_LAYERNORM, .f = {1e-5f, 0}};
        cts_compare(ln, in, 3, cts_tf(NULL, 2, r, n, 0, 0), "layernorm");
        bib_call_t rms = {.kernel = BIB_KERNEL_RMSNORM, .f = {1e-6f, 0}};
        cts_compare(rms, in, 2, cts_tf(NULL, 2, r, n, 0, 0), "rmsnorm");
        free(x), free(g), free(b);
    }
}

CTS_TEST(layernorm_with_packed_gamma_beta_matches_cpu) {
    for (size_t s = 0; s < CTS_ROW_SHAPES; s++) {
        uint32_t r, n;
        float *x = cts_rows(s, -5, 7, s == 3, &r, &n), *gb = malloc(2 * (size_t)n * 4);
        cr_assert(gb);
        cts_fill_data(gb, 2 * (size_t)n, -1.5f, 1.5f, false);
        cts_tensor_t in[2] = {cts_tf(x, 2, r, n, 0, 0), cts_tf(gb, 2, 2, n, 0, 0)};
        bib_call_t ln = {
            .kernel = BIB_KERNEL_LAYERNORM, .sub = BIB_LAYERNORM_PACKED, .f = {0.25f, 0}};
        cts_compare(ln, in, 2, cts_tf(NULL, 2, r, n, 0, 0), "layernorm packed");
        free(x), free(gb);
    }
}

/* ---- CONV, POOL, BATCHNORM --------------------------------------------------- */

/* The output size of one axis (spec/numerics.md 12a). */
static uint32_t cts_window_out(int64_t n, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi,
                               bool ceil) {
    int64_t span = n + lo + hi - (d * (k - 1) + 1);
    int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (out - 1) * s >= n + lo)
        out--;
    return (uint32_t)out;
}

/* x [N,C,H,W] (h == 0: [N,C,W]), with special values; the CONV of w
 * [O,C/g,KH,KW] and both pools with the block's geometry. */
static void cts_conv_case(uint32_t n, uint32_t c, uint32_t h, uint32_t w, uint32_t o, uint32_t g,
                          uint32_t kh, uint32_t kw, const int64_t geo[8], bool ceil) {
    bool one_d = h == 0;
    uint32_t hh = one_d ? 1 : h, kkh = one_d ? 1 : kh;
    size_t nx = (size_t)n * c * hh * w, nw = (size_t)o * (c / g) * kkh * kw;
    float *x = malloc((nx ? nx : 1) * 4), *wt = malloc(nw * 4);
    cr_assert(x && wt);
    cts_fill_data(x, nx, -3, 3, true);
    cts_fill_data(wt, nw, -1, 1, true);
    /* geo: stride h,w, dilation h,w, pads t,l,b,r */
    uint32_t oh = cts_window_out(hh, kkh, geo[0], geo[2], geo[4], geo[6], false);
    uint32_t ow = cts_window_out(w, kw, geo[1], geo[3], geo[5], geo[7], false);
    cts_tensor_t in[2] = {one_d ? cts_tf(x, 3, n, c, w, 0) : cts_tf(x, 4, n, c, h, w),
                          one_d ? cts_tf(wt, 3, o, c / g, kw, 0) : cts_tf(wt, 4, o, c / g, kh, kw)};
    bib_call_t conv = {.kernel = BIB_KERNEL_CONV,
                       .p = {g, geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]}};
    cts_compare(conv, in, 2, one_d ? cts_tf(NULL, 3, n, o, ow, 0) : cts_tf(NULL, 4, n, o, oh, ow),
                "conv");
    for (uint32_t sub = 0; sub < BIB_POOL__COUNT; sub++) {
        for (int inc = 0; inc < (sub == BIB_POOL_AVG ? 2 : 1); inc++) {
            bib_call_t pool = {.kernel = BIB_KERNEL_POOL,
                               .sub = sub,
                               .p = {kkh, kw, geo[0], geo[1], geo[2], geo[3], geo[4], geo[5],
                                     geo[6], geo[7], ceil, inc}};
            uint32_t ph = cts_window_out(hh, kkh, geo[0], geo[2], geo[4], geo[6], ceil);
            uint32_t pw = cts_window_out(w, kw, geo[1], geo[3], geo[5], geo[7], ceil);
            cts_compare(pool, in, 1,
                        one_d ? cts_tf(NULL, 3, n, c, pw, 0) : cts_tf(NULL, 4, n, c, ph, pw),
                        sub == BIB_POOL_MAX ? "maxpool"
                        : inc               ? "avgpool counting pads"
                                            : "avgpool");
        }
    }
    free(x), free(wt);
}

CTS_TEST(conv_and_pools_match_cpu) {
    static const int64_t plain[8] = {1, 1, 1, 1, 0, 0, 0, 0};
    static const int64_t padded[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    static const int64_t odd[8] = {2, 3, 2, 1, 2, 0, 1, 3};
    static const int64_t far[8] = {5, 4, 1, 1, 0, 1, 0, 0};
    cts_conv_case(2, 3, 7, 9, 4, 1, 3, 3, plain, false);
    cts_conv_case(1, 4, 8, 8, 6, 2, 3, 3, padded, true);
    cts_conv_case(2, 5, 9, 9, 5, 5, 3, 3, padded, false); /* depthwise */
    cts_conv_case(1, 3, 13, 14, 3, 1, 3, 2, odd, true);
    cts_conv_case(1, 2, 12, 12, 3, 1, 2, 2, far, false);     /* stride > kernel */
    static const int64_t line[8] = {1, 2, 1, 2, 0, 3, 0, 1}; /* 1-D: h words 1, 1, 0, 0 */
    cts_conv_case(2, 3, 0, 40, 4, 1, 1, 5, line, true);
    cts_conv_case(1, 3, 3, 257, 2, 1, 2, 5, padded, false);
    cts_conv_case(0, 3, 5, 5, 2, 1, 3, 3, plain, false); /* empty batch */
}

CTS_TEST(batchnorm_matches_cpu) {
    static const uint32_t shapes[][4] = {{2, 3, 5, 7}, {3, 17, 1, 1}, {1, 64, 9, 33}};
    for (size_t s = 0; s < 3; s++) {
        const uint32_t *d = shapes[s];
        size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
        float *x = malloc(n * 4), *st = malloc(4 * d[1] * 4);
        cr_assert(x && st);
        cts_fill_data(x, n, -4, 4, true);
        cts_fill_data(st, 3 * d[1], -2, 2, s == 2);
        cts_fill_data(st + 3 * d[1], d[1], 0, 3, s == 2); /* var, with -0, Inf, NaN when special */
        cts_tensor_t in[2] = {cts_tf(x, 4, d[0], d[1], d[2], d[3]), cts_tf(st, 2, 4, d[1], 0, 0)};
        for (uint32_t sub = 0; sub <= BIB_ACT_RELU; sub++) {
            bib_call_t bn = {
                .kernel = BIB_KERNEL_BATCHNORM, .sub = sub, .f = {s == 1 ? 0.0f : 1e-5f, 0}};
            cts_compare(bn, in, 2, cts_tf(NULL, 4, d[0], d[1], d[2], d[3]),
                        sub ? "batchnorm_relu" : "batchnorm");
        }
        free(x), free(st);
    }
}

/* ---- attention, gather, rng ------------------------------------------------- */

static void cts_attention_case(uint32_t S, uint32_t H, uint32_t D, uint32_t T, bool special) {
    for (uint32_t causal = 0; causal < 2; causal++) {
        float *q = malloc((size_t)S * H * D * 4), *k = malloc((size_t)T * H * D * 4 + 4),
              *v = malloc((size_t)T * H * D * 4 + 4);
        cr_assert(q && k && v);
        cts_fill_data(q, (size_t)S * H * D, -2, 2, false);
        cts_fill_data(k, (size_t)T * H * D, -2, 2, false);
        cts_fill_data(v, (size_t)T * H * D, -3, 3, special);
        bib_call_t call = {
            .kernel = BIB_KERNEL_ATTENTION, .sub = causal, .f = {1.0f / sqrtf((float)D), 0}};
        cts_tensor_t in[3] = {cts_tf(q, 3, S, H, D, 0), cts_tf(k, 3, T, H, D, 0),
                              cts_tf(v, 3, T, H, D, 0)};
        char what[80];
        snprintf(what, sizeof what, "attention S=%u H=%u D=%u T=%u causal=%u", S, H, D, T, causal);
        cts_compare(call, in, 3, cts_tf(NULL, 3, S, H, D, 0), what);
        free(q), free(k), free(v);
    }
}

CTS_TEST(attention_matches_cpu) {
    static const uint32_t shapes[][4] = {{1, 1, 1, 1},    {7, 2, 33, 7},   {33, 3, 16, 40},
                                         {5, 1, 65, 130}, {16, 4, 64, 16}, {40, 2, 8, 7},
                                         {3, 2, 130, 70}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        cts_attention_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], s == 1);
}

CTS_TEST(attention_with_long_rows_matches_cpu) {
    /* More keys than a GPU keeps in shared memory (CUDA: 8192): the
     * probabilities go through global scratch. */
    cts_attention_case(3, 2, 8, 9000, false);
}

CTS_TEST(gather_matches_cpu_and_traps_out_of_range) {
    float table[40 * 33];
    cts_fill_data(table, 40 * 33, -1, 1, true);
    int32_t idx[7] = {0, 39, 5, 5, 17, 1, 38};
    cts_tensor_t in[2] = {cts_tf(table, 2, 40, 33, 0, 0), {idx, BIB_DTYPE_I32, 1, {7}}};
    bib_call_t call = {.kernel = BIB_KERNEL_GATHER};
    cts_compare(call, in, 2, cts_tf(NULL, 2, 7, 33, 0, 0), "gather");
    idx[4] = 40;
    cts_compare(call, in, 2, cts_tf(NULL, 2, 7, 33, 0, 0), "gather out of range");
    idx[4] = -1;
    cts_compare(call, in, 2, cts_tf(NULL, 2, 7, 33, 0, 0), "gather negative");
}

/* Runs on the CPU and on the executor under test; both must succeed and
 * write exactly `want` (the output buffers start as sentinel words, so an
 * output left unwritten fails). */
static void cts_expect(bib_call_t call, const cts_tensor_t *in, int nin, cts_tensor_t out,
                       const uint32_t *want, const char *what) {
    size_t n = cts_count(&out), total = n + cts_lead + CTS_GUARD;
    uint32_t *got = malloc(total * 4);
    cr_assert(got);
    const bib_executor_ops_t *ops[2] = {&bib_cpu_executor, cts_ops};
    bib_executor_t *exs[2] = {cts_cpu, cts_ex};
    for (int e = 0; e < 2; e++) {
        char err[512] = "";
        bib_status_t st = cts_run_on(ops[e], exs[e], call, in, nin, &out, got, err, sizeof err);
        cr_assert_eq(st, BIB_OK, "%s on %s: status %d (%s)", what, ops[e]->name, st, err);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(got[cts_lead + i], want[i], "%s on %s: element %zu is 0x%08x, want 0x%08x",
                         what, ops[e]->name, i, got[cts_lead + i], want[i]);
    }
    free(got);
}

CTS_TEST(zero_size_operands_give_defined_bytes) {
    static const float one[1] = {1.0f};
    static const uint32_t zeros[12] = {0};
    /* Reductions over rows of length 0: SUM +0, MAX -Inf, MEAN NaN; ARGMAX
     * (which the VM refuses) 0. */
    static const uint32_t want_reduce[3][3] = {{0, 0, 0},
                                               {0xFF800000u, 0xFF800000u, 0xFF800000u},
                                               {0x7FC00000u, 0x7FC00000u, 0x7FC00000u}};
    cts_tensor_t empty_rows = cts_tf(one, 2, 3, 0, 0, 0);
    for (uint32_t op = BIB_REDUCE_SUM; op <= BIB_REDUCE_MEAN; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_REDUCE, .sub = op};
        cts_expect(call, &empty_rows, 1, cts_tf(NULL, 1, 3, 0, 0, 0), want_reduce[op],
                   "reduce of [3,0]");
        cts_expect(call, &empty_rows, 1, cts_tf(NULL, 1, 3, 0, 0, 0), want_reduce[op],
                   "reduce of [3,0]");
    }
    bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX};
    cts_expect(am, &empty_rows, 1, (cts_tensor_t){NULL, BIB_DTYPE_I32, 1, {3}}, zeros,
               "argmax of [3,0]");
    /* MATMUL with K = 0: chains of no terms are +0; LINEAR adds the bias to
     * them (+0 + -0 = +0). */
    float bias[4] = {1.5f, -0.0f, -2.0f, 0.25f};
    uint32_t want_bias[12];
    for (int i = 0; i < 12; i++)
        want_bias[i] = i % 4 == 1 ? 0 : bib_f32_bits(bias[i % 4]);
    cts_tensor_t mm[3] = {cts_tf(one, 2, 3, 0, 0, 0), cts_tf(one, 2, 0, 4, 0, 0),
                          cts_tf(bias, 1, 4, 0, 0, 0)};
    bib_call_t matmul = {.kernel = BIB_KERNEL_MATMUL};
    cts_expect(matmul, mm, 2, cts_tf(NULL, 2, 3, 4, 0, 0), zeros, "matmul [3,0].[0,4]");
    cts_expect(matmul, mm, 3, cts_tf(NULL, 2, 3, 4, 0, 0), want_bias, "linear [3,0].[0,4]");
    /* ATTENTION with no keys: each output is a chain of no terms, +0. */
    float q[12];
    for (int i = 0; i < 12; i++)
        q[i] = (float)i;
    cts_tensor_t att[3] = {cts_tf(q, 3, 2, 2, 3, 0), cts_tf(one, 3, 0, 2, 3, 0),
                           cts_tf(one, 3, 0, 2, 3, 0)};
    for (uint32_t causal = 0; causal <= 1; causal++) {
        bib_call_t call = {.kernel = BIB_KERNEL_ATTENTION, .sub = causal, .f = {0.5f, 0}};
        cts_expect(call, att, 3, cts_tf(NULL, 3, 2, 2, 3, 0), zeros, "attention with T = 0");
    }
    /* Empty outputs: nothing to write, nothing written past them. */
    static const uint32_t shapes[3][2] = {{0, 5}, {5, 0}, {0, 0}};
    for (int s = 0; s < 3; s++) {
        uint32_t r = shapes[s][0], c = shapes[s][1];
        float g[5] = {1, 1, 1, 1, 1};
        cts_tensor_t in[3] = {cts_tf(one, 2, r, c, 0, 0), cts_tf(g, 1, c, 0, 0, 0),
                              cts_tf(g, 1, c, 0, 0, 0)};
        cts_tensor_t same = cts_tf(NULL, 2, r, c, 0, 0);
        cts_compare((bib_call_t){.kernel = BIB_KERNEL_SOFTMAX}, in, 1, same, "softmax empty");
        cts_compare((bib_call_t){.kernel = BIB_KERNEL_LAYERNORM, .f = {1e-5f, 0}}, in, 3, same,
                    "layernorm empty");
        cts_compare((bib_call_t){.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_EXP}, in, 1, same,
                    "exp empty");
        cts_compare((bib_call_t){.kernel = BIB_KERNEL_TRANSPOSE}, in, 1,
                    cts_tf(NULL, 2, c, r, 0, 0), "transpose empty");
    }
    /* GATHER from rows of width 0 still checks its indices. */
    int32_t idx[2] = {1, 2};
    cts_tensor_t gin[2] = {cts_tf(one, 2, 3, 0, 0, 0), {idx, BIB_DTYPE_I32, 1, {2}}};
    bib_call_t gather = {.kernel = BIB_KERNEL_GATHER};
    cts_compare(gather, gin, 2, cts_tf(NULL, 2, 2, 0, 0, 0), "gather of empty rows");
    idx[1] = 3;
    cts_compare(gather, gin, 2, cts_tf(NULL, 2, 2, 0, 0, 0), "gather of empty rows, bad index");
}

CTS_TEST(rng_matches_cpu) {
    for (size_t s = 0; s < sizeof cts_sizes / sizeof cts_sizes[0]; s++) {
        bib_call_t call = {.kernel = BIB_KERNEL_RNG, .i = {0x123456789abcdefll, 42 + (int64_t)s}};
        cts_compare(call, NULL, 0, cts_tf(NULL, 1, cts_sizes[s], 0, 0, 0), "rng");
    }
    bib_call_t call = {.kernel = BIB_KERNEL_RNG, .i = {-1, (int64_t)0x8000000000000001ull}};
    cts_compare(call, NULL, 0, cts_tf(NULL, 1, 4099, 0, 0, 0), "rng, high seed and stream words");
}

/* ---- dtypes: CAST, COMPARE, WHERE, LOGIC, BINARY on i32 ------------------- */

static cts_tensor_t cts_ti(const int32_t *d, uint32_t rank, uint32_t d0, uint32_t d1) {
    cts_tensor_t t = {d, BIB_DTYPE_I32, rank, {d0, d1}};
    return t;
}

/* i32 words: uniform, small values (-3..3), and the limits mixed in. */
static void cts_fill_i32(int32_t *x, size_t n) {
    static const int32_t specials[] = {INT32_MIN, INT32_MAX, 0,          1,          -1,
                                       16777217,  -16777219, 2147483583, 2147483584, -2147483584};
    for (size_t i = 0; i < n; i++) {
        uint32_t r = cts_rnd();
        x[i] = (int32_t)(r << 1 ^ cts_rnd());
        if (r % 3 == 0)
            x[i] = (int32_t)(cts_rnd() % 7) - 3;
        if (r % 11 == 0)
            x[i] = specials[cts_rnd() % (sizeof specials / sizeof specials[0])];
    }
}

CTS_TEST(cast_pins_nan_saturation_and_rounding) {
    static const uint32_t f[] = {0x7fc00000u, 0xffc00001u, 0x7f800000u, 0xff800000u,
                                 0x4effffffu, 0x4f000000u, 0xcf000000u, 0xcf000001u,
                                 0x3fc00000u, 0xbfc00000u, 0x80000000u, 0x00000001u,
                                 0x3f7fffffu, 0xc0200000u, 0x7f7fffffu, 0x4b7fffffu};
    static const uint32_t want_i[] = {
        0,           0,       0x7fffffffu,  0x80000000u, 2147483520, 0x7fffffffu, 0x80000000u,
        0x80000000u, 1,       (uint32_t)-1, 0,           0,          0,           (uint32_t)-2,
        0x7fffffffu, 16777215};
    bib_call_t call = {.kernel = BIB_KERNEL_CAST};
    cts_tensor_t in = {f, BIB_DTYPE_F32, 1, {16}};
    cts_expect(call, &in, 1, cts_ti(NULL, 1, 16, 0), want_i, "cast f32 -> i32");
    /* i32 -> f32: ties to even at 2^24 and 2^31, the limits. */
    static const int32_t i[] = {16777217,  16777219,   16777218,   -16777217, INT32_MIN,
                                INT32_MAX, 2147483583, 2147483584, -3,        0};
    static const uint32_t want_f[] = {0x4b800000u, 0x4b800002u, 0x4b800001u, 0xcb800000u,
                                      0xcf000000u, 0x4f000000u, 0x4effffffu, 0x4f000000u,
                                      0xc0400000u, 0x00000000u};
    cts_tensor_t ini = cts_ti(i, 1, 10, 0);
    cts_expect(call, &ini, 1, cts_tf(NULL, 1, 10, 0, 0, 0), want_f, "cast i32 -> f32");
    /* The same dtype copies the bits, NaN payloads too. */
    cts_expect(call, &in, 1, cts_tf(NULL, 1, 16, 0, 0, 0), f, "cast f32 -> f32");
}

CTS_TEST(cast_matches_cpu) {
    for (size_t s = 0; s < sizeof cts_sizes / sizeof cts_sizes[0]; s++) {
        uint32_t n = cts_sizes[s];
        float *x = malloc(n * 4);
        int32_t *k = malloc(n * 4);
        cr_assert(x && k);
        cts_fill_data(x, n, -3e9f, 3e9f, true);
        cts_fill_i32(k, n);
        bib_call_t call = {.kernel = BIB_KERNEL_CAST};
        cts_tensor_t fin = cts_tf(x, 1, n, 0, 0, 0), iin = cts_ti(k, 1, n, 0);
        cts_compare(call, &fin, 1, cts_ti(NULL, 1, n, 0), "cast f32 -> i32");
        cts_compare(call, &iin, 1, cts_tf(NULL, 1, n, 0, 0, 0), "cast i32 -> f32");
        cts_compare(call, &iin, 1, cts_ti(NULL, 1, n, 0), "cast i32 -> i32");
        free(x), free(k);
    }
}

CTS_TEST(compare_ops_match_cpu_over_both_dtypes_and_broadcasts) {
    uint32_t rows = 37, cols = 33, n = rows * cols;
    float *a = malloc(n * 4), *b = malloc(n * 4);
    int32_t *ia = malloc(n * 4), *ib = malloc(n * 4);
    cr_assert(a && b && ia && ib);
    cts_fill_data(a, n, -4, 4, true);
    cts_fill_i32(ia, n);
    for (uint32_t i = 0; i < n; i++) {
        /* Half the pairs equal (or zeros of opposite sign), so == is tested. */
        bool same = cts_rnd() % 2;
        b[i] = same ? a[i] : (float)((int)(cts_rnd() % 9) - 4);
        if (same && a[i] == 0)
            b[i] = cts_rnd() % 2 ? 0.0f : -0.0f;
        ib[i] = same ? ia[i] : (int32_t)(cts_rnd() % 7) - 3;
    }
    for (uint32_t op = 0; op < BIB_COMPARE__COUNT; op++)
        for (int mode = 0; mode < 3; mode++) {
            uint32_t bn = mode == 0 ? n : mode == 1 ? cols : 1;
            bib_call_t call = {.kernel = BIB_KERNEL_COMPARE, .sub = op};
            char what[64];
            cts_tensor_t in[2] = {cts_tf(a, 2, rows, cols, 0, 0),
                                  mode == 0 ? cts_tf(b, 2, rows, cols, 0, 0)
                                            : cts_tf(b + 5, 1, bn, 0, 0, 0)};
            snprintf(what, sizeof what, "compare op %u f32 broadcast %d", op, mode);
            cts_compare(call, in, 2, cts_ti(NULL, 2, rows, cols), what);
            cts_tensor_t ii[2] = {cts_ti(ia, 2, rows, cols),
                                  mode == 0 ? cts_ti(ib, 2, rows, cols) : cts_ti(ib + 5, 1, bn, 0)};
            snprintf(what, sizeof what, "compare op %u i32 broadcast %d", op, mode);
            cts_compare(call, ii, 2, cts_ti(NULL, 2, rows, cols), what);
        }
    free(a), free(b), free(ia), free(ib);
}

CTS_TEST(compare_nan_is_false_and_negative_zero_equals_zero) {
    static const uint32_t a[] = {0x7fc00000u, 0x7fc00000u, 0x80000000u, 0x00000000u, 0xff800000u};
    static const uint32_t b[] = {0x7fc00000u, 0x3f800000u, 0x00000000u, 0x80000000u, 0xffc00001u};
    static const uint32_t want[BIB_COMPARE__COUNT][5] = {[BIB_COMPARE_EQ] = {0, 0, 1, 1, 0},
                                                         [BIB_COMPARE_LT] = {0, 0, 0, 0, 0},
                                                         [BIB_COMPARE_LE] = {0, 0, 1, 1, 0},
                                                         [BIB_COMPARE_GT] = {0, 0, 0, 0, 0},
                                                         [BIB_COMPARE_GE] = {0, 0, 1, 1, 0}};
    cts_tensor_t in[2] = {{a, BIB_DTYPE_F32, 1, {5}}, {b, BIB_DTYPE_F32, 1, {5}}};
    for (uint32_t op = 0; op < BIB_COMPARE__COUNT; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_COMPARE, .sub = op};
        cts_expect(call, in, 2, cts_ti(NULL, 1, 5, 0), want[op], "compare specials");
    }
}

CTS_TEST(where_moves_bits_for_every_broadcast) {
    uint32_t rows = 29, cols = 65, n = rows * cols;
    int32_t *cond = malloc(n * 4);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    cr_assert(cond && x && y);
    cts_fill_i32(cond, n);
    cts_fill_data(x, n, -1, 1, true);
    cts_fill_data(y, n, -1, 1, true);
    for (int mx = 0; mx < 3; mx++)
        for (int my = 0; my < 3; my++) {
            uint32_t nx = mx == 0 ? n : mx == 1 ? cols : 1, ny = my == 0 ? n : my == 1 ? cols : 1;
            bib_call_t call = {.kernel = BIB_KERNEL_WHERE};
            cts_tensor_t in[3] = {
                cts_ti(cond, 2, rows, cols),
                mx == 0 ? cts_tf(x, 2, rows, cols, 0, 0) : cts_tf(x + 3, 1, nx, 0, 0, 0),
                my == 0 ? cts_tf(y, 2, rows, cols, 0, 0) : cts_tf(y + 1, 1, ny, 0, 0, 0)};
            char what[64];
            snprintf(what, sizeof what, "where forms %d %d", mx, my);
            cts_compare(call, in, 3, cts_tf(NULL, 2, rows, cols, 0, 0), what);
        }
    /* NaN payloads and -0 pass through unchanged; i32 values too. */
    static const int32_t c[] = {1, 0, -7, 0, INT32_MIN};
    static const uint32_t p[] = {0xffc00001u, 1, 0x80000000u, 2, 0x7f800001u};
    static const uint32_t q[] = {3, 0x7fa00000u, 4, 0x80000000u, 5};
    static const uint32_t want[] = {0xffc00001u, 0x7fa00000u, 0x80000000u, 0x80000000u,
                                    0x7f800001u};
    cts_tensor_t in[3] = {
        cts_ti(c, 1, 5, 0), {p, BIB_DTYPE_F32, 1, {5}}, {q, BIB_DTYPE_F32, 1, {5}}};
    bib_call_t call = {.kernel = BIB_KERNEL_WHERE};
    cts_expect(call, in, 3, cts_tf(NULL, 1, 5, 0, 0, 0), want, "where keeps bits");
    cts_tensor_t ini[3] = {cts_ti(c, 1, 5, 0), cts_ti((const int32_t *)p, 1, 5, 0),
                           cts_ti((const int32_t *)q, 1, 5, 0)};
    cts_expect(call, ini, 3, cts_ti(NULL, 1, 5, 0), want, "where on i32");
    free(cond), free(x), free(y);
}

CTS_TEST(logic_ops_give_zero_or_one) {
    static const int32_t a[] = {0, 0, 5, -1, INT32_MIN, 2};
    static const int32_t b[] = {0, 7, 0, INT32_MIN, -3, 1};
    static const uint32_t want[BIB_LOGIC__COUNT][6] = {[BIB_LOGIC_NOT] = {1, 1, 0, 0, 0, 0},
                                                       [BIB_LOGIC_AND] = {0, 0, 0, 1, 1, 1},
                                                       [BIB_LOGIC_OR] = {0, 1, 1, 1, 1, 1},
                                                       [BIB_LOGIC_XOR] = {0, 1, 1, 0, 0, 0}};
    cts_tensor_t in[2] = {cts_ti(a, 1, 6, 0), cts_ti(b, 1, 6, 0)};
    for (uint32_t op = 0; op < BIB_LOGIC__COUNT; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_LOGIC, .sub = op};
        cts_expect(call, in, op == BIB_LOGIC_NOT ? 1 : 2, cts_ti(NULL, 1, 6, 0), want[op],
                   "logic on truth values");
    }
    uint32_t rows = 37, cols = 33, n = rows * cols;
    int32_t *x = malloc(n * 4), *y = malloc(n * 4);
    cr_assert(x && y);
    cts_fill_i32(x, n);
    cts_fill_i32(y, n);
    for (uint32_t op = 0; op < BIB_LOGIC__COUNT; op++)
        for (int mode = 0; mode < 3; mode++) {
            uint32_t bn = mode == 0 ? n : mode == 1 ? cols : 1;
            bib_call_t call = {.kernel = BIB_KERNEL_LOGIC, .sub = op};
            cts_tensor_t ii[2] = {cts_ti(x, 2, rows, cols),
                                  mode == 0 ? cts_ti(y, 2, rows, cols) : cts_ti(y + 2, 1, bn, 0)};
            char what[64];
            snprintf(what, sizeof what, "logic op %u broadcast %d", op, mode);
            cts_compare(call, ii, op == BIB_LOGIC_NOT ? 1 : 2, cts_ti(NULL, 2, rows, cols), what);
        }
    free(x), free(y);
}

CTS_TEST(unary_i32_abs_and_neg_wrap) {
    static const int32_t x[] = {INT32_MIN, INT32_MAX, -7, 0, 5, -1};
    static const uint32_t want_abs[] = {0x80000000u, 0x7fffffffu, 7, 0, 5, 1};
    static const uint32_t want_neg[] = {0x80000000u, 0x80000001u, 7, 0, (uint32_t)-5, 1};
    cts_tensor_t in = cts_ti(x, 1, 6, 0);
    bib_call_t abs_call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_ABS};
    bib_call_t neg_call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_NEG};
    cts_expect(abs_call, &in, 1, cts_ti(NULL, 1, 6, 0), want_abs, "i32 abs");
    cts_expect(neg_call, &in, 1, cts_ti(NULL, 1, 6, 0), want_neg, "i32 neg");
    for (size_t s = 0; s < sizeof cts_sizes / sizeof cts_sizes[0]; s++) {
        uint32_t n = cts_sizes[s];
        int32_t *k = malloc(n * 4);
        cr_assert(k);
        cts_fill_i32(k, n);
        cts_tensor_t ki = cts_ti(k, 1, n, 0);
        cts_compare(abs_call, &ki, 1, cts_ti(NULL, 1, n, 0), "i32 abs");
        cts_compare(neg_call, &ki, 1, cts_ti(NULL, 1, n, 0), "i32 neg");
        free(k);
    }
}

CTS_TEST(binary_i32_wraps_truncates_and_traps_on_a_zero_divisor) {
    uint32_t rows = 37, cols = 33, n = rows * cols;
    int32_t *a = malloc(n * 4), *b = malloc(n * 4);
    cr_assert(a && b);
    cts_fill_i32(a, n);
    cts_fill_i32(b, n);
    for (uint32_t i = 0; i < n; i++)
        if (b[i] == 0)
            b[i] = -1;
    for (uint32_t op = 0; op < BIB_BINARY__COUNT; op++) {
        if (!bib_binary_i32(op))
            continue;
        for (int mode = 0; mode < 3; mode++) {
            uint32_t bn = mode == 0 ? n : mode == 1 ? cols : 1;
            bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = op};
            cts_tensor_t ii[2] = {cts_ti(a, 2, rows, cols),
                                  mode == 0 ? cts_ti(b, 2, rows, cols) : cts_ti(b + 4, 1, bn, 0)};
            char what[64];
            snprintf(what, sizeof what, "i32 binary op %u broadcast %d", op, mode);
            cts_compare(call, ii, 2, cts_ti(NULL, 2, rows, cols), what);
        }
    }
    static const int32_t x[] = {INT32_MIN, INT32_MIN, -7, 7, -7, INT32_MAX};
    static const int32_t y[] = {-1, 1, 2, -2, -2, 2};
    static const uint32_t want[BIB_BINARY__COUNT][6] = {
        [BIB_BINARY_ADD] = {0x7fffffffu, 0x80000001u, (uint32_t)-5, 5, (uint32_t)-9, 0x80000001u},
        [BIB_BINARY_SUB] = {0x80000001u, 0x7fffffffu, (uint32_t)-9, 9, (uint32_t)-5, 0x7ffffffdu},
        [BIB_BINARY_MUL] = {0x80000000u, 0x80000000u, (uint32_t)-14, (uint32_t)-14, 14,
                            0xfffffffeu},
        [BIB_BINARY_DIV] = {0x80000000u, 0x80000000u, (uint32_t)-3, (uint32_t)-3, 3, 0x3fffffffu},
        [BIB_BINARY_MIN] = {0x80000000u, 0x80000000u, (uint32_t)-7, (uint32_t)-2, (uint32_t)-7, 2},
        [BIB_BINARY_MAX] = {(uint32_t)-1, 1, 2, 7, (uint32_t)-2, 0x7fffffffu}};
    cts_tensor_t in[2] = {cts_ti(x, 1, 6, 0), cts_ti(y, 1, 6, 0)};
    for (uint32_t op = 0; op < BIB_BINARY__COUNT; op++) {
        if (!bib_binary_i32(op))
            continue;
        bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = op};
        cts_expect(call, in, 2, cts_ti(NULL, 1, 6, 0), want[op], "i32 binary edges");
    }
    /* A zero divisor: the same error on both executors, naming the first
     * element whose divisor is 0, and nothing written. */
    b[n - 3] = 0;
    b[40] = 0;
    bib_call_t div = {.kernel = BIB_KERNEL_BINARY, .sub = BIB_BINARY_DIV};
    static const int first[3] = {40, 20, 0};
    for (int mode = 0; mode < 3; mode++) {
        uint32_t bn = mode == 0 ? n : mode == 1 ? cols : 1;
        const int32_t *d = mode == 0 ? b : mode == 1 ? b + 20 : b + 40;
        cts_tensor_t ii[2] = {cts_ti(a, 2, rows, cols),
                              mode == 0 ? cts_ti(d, 2, rows, cols) : cts_ti(d, 1, bn, 0)};
        cts_tensor_t out = cts_ti(NULL, 2, rows, cols);
        char want_err[128];
        snprintf(want_err, sizeof want_err,
                 "integer division by zero: the divisor of element %d is 0", first[mode]);
        uint32_t *got = malloc((n + cts_lead + CTS_GUARD) * 4);
        cr_assert(got);
        const bib_executor_ops_t *ops[2] = {&bib_cpu_executor, cts_ops};
        bib_executor_t *exs[2] = {cts_cpu, cts_ex};
        for (int e = 0; e < 2; e++) {
            char err[512] = "";
            bib_status_t st = cts_run_on(ops[e], exs[e], div, ii, 2, &out, got, err, sizeof err);
            cr_assert_eq(st, BIB_E_TRAP, "zero divisor, form %d, on %s: status %d", mode,
                         ops[e]->name, st);
            cr_assert_str_eq(err, want_err, "zero divisor, form %d, on %s", mode, ops[e]->name);
            for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(got[cts_lead + i], CTS_SENTINEL,
                             "zero divisor, form %d, on %s: element %u was written", mode,
                             ops[e]->name, i);
        }
        free(got);
    }
    free(a), free(b);
}

/* ---- pooled memory and transfers ------------------------------------------- */

#ifdef CTS_WAITS
CTS_TEST(a_run_of_kernels_costs_one_wait) {
    enum { N = 4096 };
    float x[N], y[N];
    cts_fill_data(x, N, -1, 1, false);
    void *a, *b;
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, N * 4, &a), BIB_OK);
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, N * 4, &b), BIB_OK);
    cr_assert_eq(cts_ops->synchronize(cts_ex), BIB_OK);
    uint64_t before = CTS_WAITS(cts_ex);
    cr_assert_eq(cts_ops->upload(cts_ex, a, 0, x, sizeof x), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_TANH};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {N}};
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(cts_ops->kernels[BIB_KERNEL_UNARY](cts_ex, &call), BIB_OK);
        bib_view_t t = call.out;
        call.out = call.in[0];
        call.in[0] = t;
    }
    cr_assert_eq(cts_ops->download(cts_ex, a, 0, y, sizeof y), BIB_OK);
    uint64_t waits = CTS_WAITS(cts_ex) - before;
    cr_assert_eq(waits, 1, "upload + 10 kernels + download took %llu waits",
                 (unsigned long long)waits);
    cts_ops->buffer_free(cts_ex, a);
    cts_ops->buffer_free(cts_ex, b);
}
#endif

/* Bytes of the executor's pool handed out to buffers now. */
static uint64_t cts_bytes_in_use(bib_executor_t *ex) {
#ifdef CTS_BYTES_IN_USE
    return CTS_BYTES_IN_USE(ex);
#else
    uint64_t free_bytes, total;
    cr_assert_eq(cts_ops->memory(ex, &free_bytes, &total), BIB_OK, "%s", cts_ops->error(ex));
    return total - free_bytes;
#endif
}

CTS_TEST(many_buffers_share_pooled_blocks_and_reuse_freed_ranges) {
    void *bufs[300];
    uint64_t used0 = cts_bytes_in_use(cts_ex);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(cts_ops->buffer_alloc(cts_ex, 4096 + (size_t)i * 4, &bufs[i]), BIB_OK);
    for (int i = 0; i < 300; i += 2)
        cts_ops->buffer_free(cts_ex, bufs[i]);
    for (int i = 0; i < 300; i += 2)
        cr_assert_eq(cts_ops->buffer_alloc(cts_ex, 4096, &bufs[i]), BIB_OK);
    uint32_t w = 0x12345678u, r = 0;
    cr_assert_eq(cts_ops->upload(cts_ex, bufs[299], 4, &w, 4), BIB_OK);
    cr_assert_eq(cts_ops->download(cts_ex, bufs[299], 4, &r, 4), BIB_OK);
    cr_assert_eq(r, w);
    for (int i = 0; i < 300; i++)
        cts_ops->buffer_free(cts_ex, bufs[i]);
    cr_assert_eq(cts_bytes_in_use(cts_ex), used0, "every byte handed out came back");
}

CTS_TEST(transfer_outside_a_buffer_is_refused) {
    void *b;
    uint32_t w[8] = {0};
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, 16, &b), BIB_OK);
    /* Buffers are rounded up to the pool's alignment (256 bytes at most);
     * beyond that is refused. */
    cr_assert_eq(cts_ops->upload(cts_ex, b, 1u << 20, w, 4), BIB_E_USAGE);
    cr_assert(strstr(cts_ops->error(cts_ex), "overruns"), "%s", cts_ops->error(cts_ex));
    cr_assert_eq(cts_ops->download(cts_ex, b, 256, w, 4), BIB_E_USAGE);
    cr_assert(strstr(cts_ops->error(cts_ex), "overruns"), "%s", cts_ops->error(cts_ex));
    cts_ops->buffer_free(cts_ex, b);
}

CTS_TEST(view_past_its_buffer_is_refused) {
    void *b;
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, 256, &b), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_RELU};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {64}};
    call.in[0] = (bib_view_t){b, 32, BIB_DTYPE_F32, 1, {64}};
    cr_assert_eq(cts_ops->kernels[BIB_KERNEL_UNARY](cts_ex, &call), BIB_E_USAGE);
    cr_assert(strstr(cts_ops->error(cts_ex), "overruns its buffer"), "%s", cts_ops->error(cts_ex));
    cts_ops->buffer_free(cts_ex, b);
}

CTS_TEST(upload_larger_than_staging_round_trips) {
    size_t n = (80u << 20) / 4 + 123; /* more than twice the staging area */
    uint32_t *w = malloc(n * 4), *r = malloc(n * 4);
    cr_assert(w && r);
    for (size_t i = 0; i < n; i++)
        w[i] = (uint32_t)(i * 2654435761u);
    void *b;
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, n * 4, &b), BIB_OK, "%s", cts_ops->error(cts_ex));
    cr_assert_eq(cts_ops->upload(cts_ex, b, 0, w, n * 4), BIB_OK, "%s", cts_ops->error(cts_ex));
    cr_assert_eq(cts_ops->download(cts_ex, b, 0, r, n * 4), BIB_OK, "%s", cts_ops->error(cts_ex));
    cr_assert(memcmp(w, r, n * 4) == 0);
    cts_ops->buffer_free(cts_ex, b);
    free(w), free(r);
}

CTS_TEST(out_of_device_memory_is_a_clean_error_and_the_executor_goes_on) {
    uint64_t free_bytes, total;
    cr_assert_eq(cts_ops->memory(cts_ex, &free_bytes, &total), BIB_OK, "%s",
                 cts_ops->error(cts_ex));
    cr_assert_gt(total, 0);
    void *huge = NULL;
    bib_status_t st = cts_ops->buffer_alloc(cts_ex, (size_t)(total + (1ull << 30)), &huge);
    cr_assert_eq(st, BIB_E_NOMEM, "status %d: %s", st, cts_ops->error(cts_ex));
    cr_assert_null(huge);
    printf("%s\n", cts_ops->error(cts_ex));
#ifdef CTS_NOMEM_WORDS
    static const char *const words[] = {CTS_NOMEM_WORDS};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        cr_assert(strstr(cts_ops->error(cts_ex), words[i]), "no '%s' in: %s", words[i],
                  cts_ops->error(cts_ex));
#endif
    /* Still usable: a kernel on fresh buffers gives the CPU's bits. */
    float x[33];
    cts_fill_data(x, 33, -3, 3, false);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_GELU};
    cts_tensor_t in = cts_tf(x, 1, 33, 0, 0, 0);
    cts_compare(call, &in, 1, cts_tf(NULL, 1, 33, 0, 0, 0), "gelu after out of memory");
}

#endif
