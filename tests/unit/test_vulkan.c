/* tests/unit/test_vulkan.c: the Vulkan executor against the CPU executor.
 *
 * Every kernel runs on both executors with the same inputs (shapes 1, 7, 33,
 * 1023, non-square and non-tile-multiple; -0, +-Inf, NaN, denormals, large
 * exp arguments) and must give the same bits. The validation layer is on
 * with a counting messenger (zero messages allowed), and every device buffer
 * carries guard words that must survive each kernel. Without a Vulkan device
 * the tests print "SKIP: <reason>" and are skipped, never passed.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/vulkan/vulkan.h"

#define GUARD 64 /* guard words on each side of a device tensor */
#define SENTINEL 0xDEADBEEFu

static bib_executor_t *vk, *cpu;

static void suite_init(void) {
    bib_executor_config_t cfg = {.threads = 1, .device = NULL, .validation = true};
    char why[512] = "";
    if (bib_vulkan_executor.init(&cfg, &vk, why, sizeof why) != BIB_OK) {
        vk = NULL;
        printf("SKIP: %s\n", why);
        cr_skip_test("no Vulkan: %s", why);
    }
    cr_assert_eq(bib_cpu_executor.init(&cfg, &cpu, why, sizeof why), BIB_OK, "cpu init: %s", why);
}

static void suite_fini(void) {
    if (vk) {
        uint32_t msgs = bib_vulkan_validation_messages(vk);
        bib_vulkan_executor.shutdown(vk);
        cr_expect_eq(msgs, 0, "the validation layer reported %u messages", msgs);
    }
    if (cpu)
        bib_cpu_executor.shutdown(cpu);
    vk = cpu = NULL;
}

TestSuite(vulkan, .init = suite_init, .fini = suite_fini);

/* ---- data ---------------------------------------------------------------- */

static uint64_t rng_state = 0x1234567;

static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Uniform in [lo, hi) with a few special values mixed in when special. */
static void fill_data(float *x, size_t n, float lo, float hi, bool special) {
    static const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                        0x7fc00000u, 0xffc00001u, 0x00000001u, 0x807fffffu,
                                        0x00400000u, 0x7f7fffffu, 0xff7fffffu, 0x42b20001u,
                                        0xc2d00001u, 0x3f800000u, 0xbf800000u};
    for (size_t i = 0; i < n; i++) {
        float u = (float)(rnd() >> 8) * 0x1p-24f;
        x[i] = lo + (hi - lo) * u;
        if (special && rnd() % 13 == 0)
            x[i] = bits_f(specials[rnd() % (sizeof specials / sizeof specials[0])]);
    }
}

/* ---- running one call on both executors --------------------------------- */

typedef struct tensor {
    const void *data; /* NULL for the output */
    uint32_t dtype;
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
} tensor_t;

static size_t tcount(const tensor_t *t) {
    size_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

/* Runs the call on one executor; returns the status and the output words
 * (with guards) in *words. Inputs and output get GUARD sentinel words on
 * each side, checked after the kernel. */
static bib_status_t run_on(const bib_executor_ops_t *ops, bib_executor_t *ex, bib_call_t call,
                           const tensor_t *in, int nin, const tensor_t *out, uint32_t *words,
                           char *err, size_t err_len) {
    void *bufs[4] = {0};
    size_t counts[4];
    const tensor_t *ts[4] = {out, &in[0], nin > 1 ? &in[1] : NULL, nin > 2 ? &in[2] : NULL};
    for (int t = 0; t < 1 + nin; t++) {
        size_t n = tcount(ts[t]);
        counts[t] = n;
        size_t total = n + 2 * GUARD;
        uint32_t *host = malloc(total * 4);
        cr_assert(host);
        for (size_t i = 0; i < total; i++)
            host[i] = SENTINEL;
        if (ts[t]->data)
            memcpy(host + GUARD, ts[t]->data, n * 4);
        cr_assert_eq(ops->buffer_alloc(ex, total * 4, &bufs[t]), BIB_OK, "%s", ops->error(ex));
        cr_assert_eq(ops->upload(ex, bufs[t], 0, host, total * 4), BIB_OK, "%s", ops->error(ex));
        free(host);
        bib_view_t *v = t == 0 ? &call.out : &call.in[t - 1];
        v->buf = bufs[t];
        v->offset = GUARD;
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
        size_t total = counts[t] + 2 * GUARD;
        uint32_t *host = t == 0 ? words : malloc(total * 4);
        cr_assert(host);
        cr_assert_eq(ops->download(ex, bufs[t], 0, host, total * 4), BIB_OK, "%s", ops->error(ex));
        for (size_t g = 0; g < GUARD; g++) {
            cr_assert_eq(host[g], SENTINEL, "%s: guard word %zu before tensor %d overwritten",
                         ops->name, g, t);
            cr_assert_eq(host[GUARD + counts[t] + g], SENTINEL,
                         "%s: guard word %zu after tensor %d overwritten", ops->name, g, t);
        }
        if (t != 0) {
            /* Inputs must come back unchanged (unless the call is in place). */
            cr_assert(memcmp(host + GUARD, ts[t]->data, counts[t] * 4) == 0,
                      "%s: input %d was modified", ops->name, t - 1);
            free(host);
        }
        ops->buffer_free(ex, bufs[t]);
    }
    return st;
}

/* Runs on both; asserts the same status and, on success, identical bits. */
static void compare(bib_call_t call, const tensor_t *in, int nin, tensor_t out, const char *what) {
    size_t n = tcount(&out), total = n + 2 * GUARD;
    uint32_t *a = malloc(total * 4), *b = malloc(total * 4);
    cr_assert(a && b);
    char ea[512] = "", eb[512] = "";
    bib_status_t sa = run_on(&bib_cpu_executor, cpu, call, in, nin, &out, a, ea, sizeof ea);
    bib_status_t sb = run_on(&bib_vulkan_executor, vk, call, in, nin, &out, b, eb, sizeof eb);
    cr_assert_eq(sa, sb, "%s: cpu status %d (%s), vulkan status %d (%s)", what, sa, ea, sb, eb);
    if (sa == BIB_OK) {
        for (size_t i = 0; i < n; i++) {
            uint32_t x = a[GUARD + i], y = b[GUARD + i];
            cr_assert_eq(x, y, "%s: element %zu of %zu: cpu 0x%08x (%g), vulkan 0x%08x (%g)", what,
                         i, n, x, (double)bits_f(x), y, (double)bits_f(y));
        }
    }
    free(a);
    free(b);
}

static tensor_t tf(const float *d, uint32_t rank, uint32_t d0, uint32_t d1, uint32_t d2,
                   uint32_t d3) {
    tensor_t t = {d, BIB_DTYPE_F32, rank, {d0, d1, d2, d3}};
    return t;
}

/* ---- the device and its probes ------------------------------------------ */

Test(vulkan, describe_names_device_and_probe_paths) {
    const char *d = bib_vulkan_executor.describe(vk);
    printf("%s\n", d);
    cr_assert(strstr(d, "fma:") && strstr(d, "denormals:") && strstr(d, "rounding:"), "%s", d);
}

Test(vulkan, validation_layer_is_active) {
    cr_assert(bib_vulkan_validation_active(vk),
              "VK_LAYER_KHRONOS_validation is not active, so zero messages would prove nothing");
}

Test(vulkan, division_and_sqrt_equal_ieee_bit_for_bit) {
    enum { N = 1 << 20 };
    float *a = malloc(N * 4), *b = malloc(N * 4), *q = malloc(N * 4), *r = malloc(N * 4);
    cr_assert(a && b && q && r);
    static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                  0x7fc00000u, 0x00000001u, 0x00000003u, 0x007fffffu,
                                  0x00800000u, 0x7f7fffffu, 0x3f800000u, 0x40000000u,
                                  0x3f800001u, 0x3fffffffu, 0x4b800000u, 0x33800000u};
    const size_t nsp = sizeof sp / sizeof sp[0];
    size_t i = 0;
    for (size_t x = 0; x < nsp; x++)
        for (size_t y = 0; y < nsp; y++, i++)
            a[i] = bits_f(sp[x] ^ (rnd() & 0x80000000u)), b[i] = bits_f(sp[y]);
    for (; i < N; i++) {
        uint32_t kind = i % 4;
        a[i] = bits_f(rnd());
        /* Mix in quotients near 1, tiny and huge ratios, and exact ones. */
        b[i] = kind == 0   ? bits_f(rnd())
               : kind == 1 ? bits_f((f_bits(a[i]) & 0xff800000u) | (rnd() & 0x7fffffu))
               : kind == 2 ? bits_f(rnd() & 0x807fffffu)
                           : bits_f((rnd() & 0x3fffu) | 0x3f800000u);
    }
    cr_assert_eq(bib_vulkan_divsqrt(vk, a, b, q, r, N), BIB_OK, "%s",
                 bib_vulkan_executor.error(vk));
    for (i = 0; i < N; i++) {
        volatile float e = a[i] / b[i];
        volatile float s = sqrtf(a[i]);
        uint32_t eq = e != e ? 0x7fc00000u : f_bits(e), es = s != s ? 0x7fc00000u : f_bits(s);
        cr_assert_eq(f_bits(q[i]), eq, "%a / %a: vulkan %a, ieee %a", (double)a[i], (double)b[i],
                     (double)q[i], (double)e);
        cr_assert_eq(f_bits(r[i]), es, "sqrt(%a): vulkan %a, ieee %a", (double)a[i], (double)r[i],
                     (double)s);
    }
    free(a), free(b), free(q), free(r);
}

/* ---- MATMUL -------------------------------------------------------------- */

static void matmul_case(uint32_t m, uint32_t k, uint32_t n, bool bias, bib_act_t act,
                        bool special) {
    float *a = malloc((size_t)m * k * 4 + 4), *b = malloc((size_t)k * n * 4 + 4),
          *c = malloc((size_t)n * 4 + 4);
    fill_data(a, (size_t)m * k, -2, 2, special);
    fill_data(b, (size_t)k * n, -2, 2, special);
    fill_data(c, n, -1, 1, special);
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = act};
    tensor_t in[3] = {tf(a, 2, m, k, 0, 0), tf(b, 2, k, n, 0, 0), tf(c, 1, n, 0, 0, 0)};
    char what[96];
    snprintf(what, sizeof what, "matmul %ux%ux%u bias=%d act=%d special=%d", m, k, n, bias, act,
             special);
    compare(call, in, bias ? 3 : 2, tf(NULL, 2, m, n, 0, 0), what);
    free(a), free(b), free(c);
}

Test(vulkan, matmul_matches_cpu_over_odd_shapes) {
    static const uint32_t shapes[][3] = {{1, 1, 1},      {7, 7, 7},      {33, 33, 33},
                                         {1023, 7, 33},  {7, 1023, 33},  {33, 7, 1023},
                                         {65, 130, 129}, {128, 64, 256}, {3, 0, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        matmul_case(shapes[s][0], shapes[s][1], shapes[s][2], false, BIB_ACT_NONE, false);
}

Test(vulkan, matmul_with_bias_and_activations_matches_cpu) {
    matmul_case(33, 65, 31, true, BIB_ACT_NONE, false);
    matmul_case(33, 65, 31, true, BIB_ACT_RELU, false);
    matmul_case(70, 17, 66, true, BIB_ACT_GELU, false);
    matmul_case(1, 1023, 7, false, BIB_ACT_GELU, false);
}

Test(vulkan, matmul_gpu_tile_configuration_matches_cpu) {
    /* The 128x128 tiles with 8x8 per thread that big GPU problems use. */
    setenv("BIB_VK_MATMUL_TILES", "128", 1);
    bib_executor_config_t cfg = {.validation = true};
    bib_executor_t *big = NULL, *saved = vk;
    char why[256] = "";
    cr_assert_eq(bib_vulkan_executor.init(&cfg, &big, why, sizeof why), BIB_OK, "%s", why);
    unsetenv("BIB_VK_MATMUL_TILES");
    vk = big;
    matmul_case(1, 1, 1, false, BIB_ACT_NONE, false);
    matmul_case(129, 33, 257, true, BIB_ACT_NONE, false);
    matmul_case(300, 70, 130, true, BIB_ACT_RELU, true);
    vk = saved;
    uint32_t msgs = bib_vulkan_validation_messages(big);
    bib_vulkan_executor.shutdown(big);
    cr_assert_eq(msgs, 0, "the validation layer reported %u messages", msgs);
}

Test(vulkan, matmul_special_values_match_cpu) {
    matmul_case(33, 33, 33, true, BIB_ACT_NONE, true);
    matmul_case(17, 9, 65, true, BIB_ACT_RELU, true);
    matmul_case(17, 9, 65, false, BIB_ACT_GELU, true);
}

/* ---- elementwise --------------------------------------------------------- */

static const uint32_t sizes[] = {1, 7, 33, 1023, 70001};

Test(vulkan, unary_ops_match_cpu) {
    for (uint32_t op = BIB_UNARY_RELU; op <= BIB_UNARY_EXP; op++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            uint32_t n = sizes[s];
            float *x = malloc(n * 4);
            fill_data(x, n, op == BIB_UNARY_EXP ? -110 : -12, op == BIB_UNARY_EXP ? 95 : 12, true);
            bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
            tensor_t in = tf(x, 1, n, 0, 0, 0);
            char what[64];
            snprintf(what, sizeof what, "unary op %u n=%u", op, n);
            compare(call, &in, 1, tf(NULL, 1, n, 0, 0, 0), what);
            free(x);
        }
}

Test(vulkan, unary_ops_match_cpu_on_small_and_tie_inputs) {
    /* Around tanh's polynomial switch, sigmoid's sign switch, denormals. */
    enum { N = 4096 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = bits_f((i % 2 ? 0x80000000u : 0) | (uint32_t)(0x3f1f0000u + (uint32_t)i * 37));
    x[0] = bits_f(0x00000001u), x[1] = bits_f(0x80000001u), x[2] = 0x1p-30f;
    for (uint32_t op = BIB_UNARY_RELU; op <= BIB_UNARY_EXP; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
        tensor_t in = tf(x, 1, N, 0, 0, 0);
        compare(call, &in, 1, tf(NULL, 1, N, 0, 0, 0), "unary near switch points");
    }
}

Test(vulkan, binary_ops_and_broadcasts_match_cpu) {
    for (uint32_t op = BIB_BINARY_ADD; op <= BIB_BINARY_DIV; op++)
        for (int mode = 0; mode < 3; mode++) {
            uint32_t rows = 37, cols = 33;
            float *a = malloc(rows * cols * 4), *b = malloc(rows * cols * 4);
            fill_data(a, rows * cols, -1e3f, 1e3f, true);
            fill_data(b, rows * cols, -10, 10, true);
            bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = op};
            tensor_t in[2] = {tf(a, 2, rows, cols, 0, 0), mode == 0   ? tf(b, 2, rows, cols, 0, 0)
                                                          : mode == 1 ? tf(b, 1, cols, 0, 0, 0)
                                                                      : tf(b, 1, 1, 0, 0, 0)};
            char what[64];
            snprintf(what, sizeof what, "binary op %u broadcast %d", op, mode);
            compare(call, in, 2, tf(NULL, 2, rows, cols, 0, 0), what);
            free(a), free(b);
        }
}

Test(vulkan, scale_matches_cpu) {
    float x[1023];
    fill_data(x, 1023, -1e30f, 1e30f, true);
    static const float factors[] = {0.125f, -3.0f, 1e30f, 0x1p-140f, 0.0f};
    for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++) {
        bib_call_t call = {.kernel = BIB_KERNEL_SCALE, .f = {factors[i], 0}};
        tensor_t in = tf(x, 1, 1023, 0, 0, 0);
        compare(call, &in, 1, tf(NULL, 1, 1023, 0, 0, 0), "scale");
    }
}

/* ---- layout and transfers ------------------------------------------------ */

Test(vulkan, transpose_matches_cpu) {
    static const uint32_t shapes[][3] = {
        {1, 1, 1}, {1, 7, 33}, {3, 33, 1023}, {2, 64, 32}, {5, 1023, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t b = shapes[s][0], r = shapes[s][1], c = shapes[s][2];
        float *x = malloc((size_t)b * r * c * 4);
        fill_data(x, (size_t)b * r * c, -1, 1, true);
        bib_call_t call = {.kernel = BIB_KERNEL_TRANSPOSE};
        tensor_t in = tf(x, 3, b, r, c, 0);
        compare(call, &in, 1, tf(NULL, 3, b, c, r, 0), "transpose");
        free(x);
    }
}

Test(vulkan, fill_and_copy_match_cpu) {
    float x[1023];
    fill_data(x, 1023, -1, 1, true);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .f = {bits_f(0xffc00123u), 0}};
    compare(fill, NULL, 0, tf(NULL, 1, 1023, 0, 0, 0), "fill f32 NaN payload");
    bib_call_t filli = {.kernel = BIB_KERNEL_FILL, .i = {-7, 0}};
    tensor_t ti = {NULL, BIB_DTYPE_I32, 1, {33}};
    compare(filli, NULL, 0, ti, "fill i32");
    bib_call_t copy = {.kernel = BIB_KERNEL_COPY};
    tensor_t in = tf(x, 2, 31, 33, 0, 0);
    compare(copy, &in, 1, tf(NULL, 1, 1023, 0, 0, 0), "copy");
}

/* ---- row kernels --------------------------------------------------------- */

static const uint32_t row_shapes[][2] = {{1, 1},  {7, 7},  {3, 33},  {2, 1023},
                                         {5, 64}, {4, 65}, {1, 5000}};

Test(vulkan, softmax_matches_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
            uint32_t r = row_shapes[s][0], n = row_shapes[s][1];
            float *x = malloc((size_t)r * n * 4);
            fill_data(x, (size_t)r * n, -30, 30, special);
            bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX};
            tensor_t in = tf(x, 2, r, n, 0, 0);
            compare(call, &in, 1, tf(NULL, 2, r, n, 0, 0), "softmax");
            free(x);
        }
}

Test(vulkan, reduce_and_argmax_match_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
            uint32_t r = row_shapes[s][0], n = row_shapes[s][1];
            float *x = malloc((size_t)r * n * 4);
            fill_data(x, (size_t)r * n, -30, 30, special);
            tensor_t in = tf(x, 2, r, n, 0, 0);
            for (uint32_t op = BIB_REDUCE_SUM; op <= BIB_REDUCE_MEAN; op++) {
                bib_call_t call = {.kernel = BIB_KERNEL_REDUCE, .sub = op};
                compare(call, &in, 1, tf(NULL, 1, r, 0, 0, 0), "reduce");
            }
            bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX};
            tensor_t out = {NULL, BIB_DTYPE_I32, 1, {r}};
            compare(am, &in, 1, out, "argmax");
            free(x);
        }
}

Test(vulkan, argmax_takes_first_maximum_and_first_nan) {
    float x[130];
    for (int i = 0; i < 130; i++)
        x[i] = (float)(i % 5);
    x[3] = -0.0f;
    tensor_t in = tf(x, 1, 130, 0, 0, 0);
    tensor_t out = {NULL, BIB_DTYPE_I32, 0, {0}};
    bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX};
    compare(am, &in, 1, out, "argmax ties");
    x[100] = NAN, x[77] = NAN;
    compare(am, &in, 1, out, "argmax NaN");
}

Test(vulkan, layernorm_and_rmsnorm_match_cpu) {
    for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
        uint32_t r = row_shapes[s][0], n = row_shapes[s][1];
        float *x = malloc((size_t)r * n * 4), *g = malloc(n * 4), *b = malloc(n * 4);
        fill_data(x, (size_t)r * n, -5, 7, s == 3);
        fill_data(g, n, 0.5f, 1.5f, false);
        fill_data(b, n, -1, 1, false);
        tensor_t in[3] = {tf(x, 2, r, n, 0, 0), tf(g, 1, n, 0, 0, 0), tf(b, 1, n, 0, 0, 0)};
        bib_call_t ln = {.kernel = BIB_KERNEL_LAYERNORM, .f = {1e-5f, 0}};
        compare(ln, in, 3, tf(NULL, 2, r, n, 0, 0), "layernorm");
        bib_call_t rms = {.kernel = BIB_KERNEL_RMSNORM, .f = {1e-6f, 0}};
        compare(rms, in, 2, tf(NULL, 2, r, n, 0, 0), "rmsnorm");
        free(x), free(g), free(b);
    }
}

/* ---- attention, gather, rng ---------------------------------------------- */

Test(vulkan, attention_matches_cpu) {
    static const uint32_t shapes[][4] = {
        {1, 1, 1, 1}, {7, 2, 33, 7}, {33, 3, 16, 40}, {5, 1, 65, 130}, {16, 4, 64, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (uint32_t causal = 0; causal < 2; causal++) {
            uint32_t S = shapes[s][0], H = shapes[s][1], D = shapes[s][2], T = shapes[s][3];
            float *q = malloc((size_t)S * H * D * 4), *k = malloc((size_t)T * H * D * 4),
                  *v = malloc((size_t)T * H * D * 4);
            fill_data(q, (size_t)S * H * D, -2, 2, false);
            fill_data(k, (size_t)T * H * D, -2, 2, false);
            fill_data(v, (size_t)T * H * D, -3, 3, s == 1);
            bib_call_t call = {
                .kernel = BIB_KERNEL_ATTENTION, .sub = causal, .f = {1.0f / sqrtf((float)D), 0}};
            tensor_t in[3] = {tf(q, 3, S, H, D, 0), tf(k, 3, T, H, D, 0), tf(v, 3, T, H, D, 0)};
            char what[80];
            snprintf(what, sizeof what, "attention S=%u H=%u D=%u T=%u causal=%u", S, H, D, T,
                     causal);
            compare(call, in, 3, tf(NULL, 3, S, H, D, 0), what);
            free(q), free(k), free(v);
        }
}

Test(vulkan, gather_matches_cpu_and_traps_out_of_range) {
    float table[40 * 33];
    fill_data(table, 40 * 33, -1, 1, true);
    int32_t idx[7] = {0, 39, 5, 5, 17, 1, 38};
    tensor_t in[2] = {tf(table, 2, 40, 33, 0, 0), {idx, BIB_DTYPE_I32, 1, {7}}};
    bib_call_t call = {.kernel = BIB_KERNEL_GATHER};
    compare(call, in, 2, tf(NULL, 2, 7, 33, 0, 0), "gather");
    idx[4] = 40;
    compare(call, in, 2, tf(NULL, 2, 7, 33, 0, 0), "gather out of range");
    idx[4] = -1;
    compare(call, in, 2, tf(NULL, 2, 7, 33, 0, 0), "gather negative");
}

Test(vulkan, rng_matches_cpu) {
    static const uint32_t counts[] = {1, 7, 33, 1023, 70001};
    for (size_t s = 0; s < sizeof counts / sizeof counts[0]; s++) {
        bib_call_t call = {.kernel = BIB_KERNEL_RNG, .i = {0x123456789abcdefll, 42 + (int64_t)s}};
        compare(call, NULL, 0, tf(NULL, 1, counts[s], 0, 0, 0), "rng");
    }
}

/* ---- the executor's machinery -------------------------------------------- */

Test(vulkan, a_run_of_kernels_costs_one_submit) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    enum { N = 4096 };
    float x[N], y[N];
    fill_data(x, N, -1, 1, false);
    void *a, *b;
    cr_assert_eq(ops->buffer_alloc(vk, N * 4, &a), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(vk, N * 4, &b), BIB_OK);
    cr_assert_eq(ops->synchronize(vk), BIB_OK);
    uint64_t before = bib_vulkan_submits(vk);
    cr_assert_eq(ops->upload(vk, a, 0, x, sizeof x), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_TANH};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {N}};
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](vk, &call), BIB_OK);
        bib_view_t t = call.out;
        call.out = call.in[0];
        call.in[0] = t;
    }
    cr_assert_eq(ops->download(vk, a, 0, y, sizeof y), BIB_OK);
    cr_assert_eq(bib_vulkan_submits(vk) - before, 1,
                 "upload + 10 kernels + download took %llu "
                 "submits",
                 (unsigned long long)(bib_vulkan_submits(vk) - before));
    ops->buffer_free(vk, a);
    ops->buffer_free(vk, b);
}

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

Test(vulkan, timing_gives_kernel_time_within_the_wall_time_and_adds_no_submit) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    cr_assert(ops->timing && ops->elapsed);
    enum { N = 1 << 16 };
    float *x = malloc(N * 4), *y = malloc(N * 4), *z = malloc(N * 4);
    cr_assert(x && y && z);
    fill_data(x, N, -1, 1, false);
    void *a, *b;
    cr_assert_eq(ops->buffer_alloc(vk, N * 4, &a), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(vk, N * 4, &b), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_TANH};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {N}};
    /* Untimed first, so pipeline creation is out of the timed run. */
    cr_assert_eq(ops->upload(vk, a, 0, x, N * 4), BIB_OK);
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](vk, &call), BIB_OK);
    cr_assert_eq(ops->download(vk, b, 0, z, N * 4), BIB_OK);

    cr_assert_eq(ops->timing(vk, true), BIB_OK, "%s", ops->error(vk));
    uint64_t before = bib_vulkan_submits(vk);
    double t0 = wall_ms();
    cr_assert_eq(ops->upload(vk, a, 0, x, N * 4), BIB_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](vk, &call), BIB_OK, "%s", ops->error(vk));
    cr_assert_eq(ops->download(vk, b, 0, y, N * 4), BIB_OK);
    double wall = wall_ms() - t0;
    cr_assert_eq(bib_vulkan_submits(vk) - before, 1, "timing added submits");
    double ms = -1;
    cr_assert_eq(ops->elapsed(vk, &ms), BIB_OK);
    cr_assert_gt(ms, 0.0, "ten kernels took no device time");
    cr_assert_leq(ms, wall, "device time %.3f ms exceeds the wall time %.3f ms", ms, wall);
    cr_assert_eq(ops->elapsed(vk, &ms), BIB_OK);
    cr_assert_eq(ms, 0.0, "elapsed counts from its last call: %g ms", ms);
    cr_assert_eq(memcmp(y, z, N * 4), 0, "timing changed a result");
    cr_assert_eq(ops->timing(vk, false), BIB_OK);
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](vk, &call), BIB_OK);
    cr_assert_eq(ops->synchronize(vk), BIB_OK);
    cr_assert_eq(ops->elapsed(vk, &ms), BIB_OK);
    cr_assert_eq(ms, 0.0, "a kernel after timing(false) was timed: %g ms", ms);
    ops->buffer_free(vk, a);
    ops->buffer_free(vk, b);
    free(x);
    free(y);
    free(z);
}

Test(vulkan, timing_more_commands_than_the_query_pool_holds) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    void *a, *b;
    cr_assert_eq(ops->buffer_alloc(vk, 256, &a), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(vk, 256, &b), BIB_OK);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .f = {2.5f}};
    fill.out = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {64}};
    bib_call_t copy = {.kernel = BIB_KERNEL_COPY};
    copy.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {64}};
    copy.in[0] = fill.out;
    cr_assert_eq(ops->timing(vk, true), BIB_OK, "%s", ops->error(vk));
    /* Fills and copies take no descriptor set: only the query pool (2048
       pairs) makes the executor submit on the way. */
    uint64_t before = bib_vulkan_submits(vk);
    for (int i = 0; i < 1500; i++) {
        cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](vk, &fill), BIB_OK, "%s", ops->error(vk));
        cr_assert_eq(ops->kernels[BIB_KERNEL_COPY](vk, &copy), BIB_OK, "%s", ops->error(vk));
    }
    cr_assert_eq(ops->synchronize(vk), BIB_OK);
    cr_assert_eq(bib_vulkan_submits(vk) - before, 2, "3000 timed commands in %llu submits",
                 (unsigned long long)(bib_vulkan_submits(vk) - before));
    double ms = -1;
    cr_assert_eq(ops->elapsed(vk, &ms), BIB_OK);
    cr_assert_gt(ms, 0.0);
    float out[64];
    cr_assert_eq(ops->download(vk, b, 0, out, sizeof out), BIB_OK);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(out[i], 2.5f);
    cr_assert_eq(ops->timing(vk, false), BIB_OK);
    ops->buffer_free(vk, a);
    ops->buffer_free(vk, b);
}

Test(vulkan, queue_without_timestamps_refuses_timing_and_says_why) {
    setenv("BIB_VK_NO_TIMESTAMPS", "1", 1);
    bib_executor_config_t cfg = {.validation = true};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    bib_status_t st = bib_vulkan_executor.init(&cfg, &ex, why, sizeof why);
    unsetenv("BIB_VK_NO_TIMESTAMPS");
    cr_assert_eq(st, BIB_OK, "%s", why);
    cr_assert_eq(bib_vulkan_executor.timing(ex, true), BIB_E_UNAVAILABLE);
    const char *e = bib_vulkan_executor.error(ex);
    cr_assert(strstr(e, "has no timestamps (timestampValidBits 0)"), "%s", e);
    /* Kernels still run, untimed. */
    void *a;
    cr_assert_eq(bib_vulkan_executor.buffer_alloc(ex, 256, &a), BIB_OK);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .f = {1.0f}};
    fill.out = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {64}};
    cr_assert_eq(bib_vulkan_executor.kernels[BIB_KERNEL_FILL](ex, &fill), BIB_OK);
    cr_assert_eq(bib_vulkan_executor.synchronize(ex), BIB_OK);
    bib_vulkan_executor.buffer_free(ex, a);
    uint32_t msgs = bib_vulkan_validation_messages(ex);
    bib_vulkan_executor.shutdown(ex);
    cr_assert_eq(msgs, 0, "the validation layer reported %u messages", msgs);
}

Test(vulkan, many_buffers_share_pooled_blocks_and_reuse_freed_ranges) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    void *bufs[300];
    uint64_t free0, total;
    cr_assert_eq(ops->memory(vk, &free0, &total), BIB_OK);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(ops->buffer_alloc(vk, 4096 + (size_t)i * 4, &bufs[i]), BIB_OK);
    for (int i = 0; i < 300; i += 2)
        ops->buffer_free(vk, bufs[i]);
    for (int i = 0; i < 300; i += 2)
        cr_assert_eq(ops->buffer_alloc(vk, 4096, &bufs[i]), BIB_OK);
    uint32_t w = 0x12345678u, r = 0;
    cr_assert_eq(ops->upload(vk, bufs[299], 4, &w, 4), BIB_OK);
    cr_assert_eq(ops->download(vk, bufs[299], 4, &r, 4), BIB_OK);
    cr_assert_eq(r, w);
    for (int i = 0; i < 300; i++)
        ops->buffer_free(vk, bufs[i]);
    uint64_t free1;
    cr_assert_eq(ops->memory(vk, &free1, &total), BIB_OK);
    cr_assert_eq(free1, free0, "every byte handed out came back");
}

Test(vulkan, transfer_outside_a_buffer_is_refused) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    void *b;
    uint32_t w[8] = {0};
    cr_assert_eq(ops->buffer_alloc(vk, 16, &b), BIB_OK);
    /* Buffers are rounded up to the pool's alignment; beyond that is refused. */
    cr_assert_eq(ops->upload(vk, b, 1u << 20, w, 4), BIB_E_USAGE);
    cr_assert(strstr(ops->error(vk), "overruns"), "%s", ops->error(vk));
    ops->buffer_free(vk, b);
}

Test(vulkan, device_selector_that_matches_nothing_is_unavailable_with_reason) {
    bib_executor_config_t cfg = {.device = "no-such-device-anywhere"};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(bib_vulkan_executor.init(&cfg, &ex, why, sizeof why), BIB_E_UNAVAILABLE);
    cr_assert_null(ex);
    cr_assert(strstr(why, "no Vulkan device matches 'no-such-device-anywhere'"), "%s", why);
}

Test(vulkan, device_selector_by_index_picks_that_device) {
    bib_executor_config_t cfg = {.device = "0"};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(bib_vulkan_executor.init(&cfg, &ex, why, sizeof why), BIB_OK, "%s", why);
    bib_vulkan_executor.shutdown(ex);
}

Test(vulkan, corrupt_pipeline_cache_file_is_ignored) {
    char dir[] = "/tmp/bib-vk-cache-XXXXXX";
    cr_assert(mkdtemp(dir));
    setenv("XDG_CACHE_HOME", dir, 1);
    bib_executor_config_t cfg = {0};
    char why[256] = "";
    for (int round = 0; round < 3; round++) {
        bib_executor_t *ex = NULL;
        cr_assert_eq(bib_vulkan_executor.init(&cfg, &ex, why, sizeof why), BIB_OK, "round %d: %s",
                     round, why);
        bib_vulkan_executor.shutdown(ex); /* writes the cache */
        char cmd[512];
        /* Round 0 leaves a good cache; then garbage, then a foreign header. */
        if (round == 0)
            snprintf(cmd, sizeof cmd, "for f in %s/bib/*; do head -c 4000 /dev/urandom > $f; done",
                     dir);
        else
            snprintf(cmd, sizeof cmd,
                     "for f in %s/bib/*; do printf '\\040\\000\\000\\000\\001\\000\\000\\000"
                     "\\336\\020\\000\\000' > $f; head -c 100 /dev/zero >> $f; done",
                     dir);
        cr_assert_eq(system(cmd), 0);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
