/* tests/unit/test_vulkan.c: the Vulkan executor.
 *
 * The executor conformance suite (executor_cts.h) runs first: every kernel
 * against the CPU executor's bits over awkward shapes and special values,
 * guard words around every device buffer, pooled memory, device selection,
 * with the validation layer on and its counting messenger required to stay
 * silent. Then what only Vulkan has: the validation layer really active,
 * the shaders' exact division and square root, submission counts and
 * timestamps (--profile), and the pipeline cache file. Without a Vulkan
 * device every test prints "SKIP: <reason>" and is skipped, never passed.
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

#define CTS_SUITE vulkan
#define CTS_EXECUTOR (&bib_vulkan_executor)
#define CTS_DEVICE_NOUN "Vulkan"
#define CTS_DESCRIBE_WORDS "fma:", "denormals:", "rounding:"
#define CTS_VALIDATION_MESSAGES(ex) bib_vulkan_validation_messages(ex)
#define CTS_WAITS(ex) bib_vulkan_submits(ex)
/* 128: the 128x128 tiles with 8x8 per thread that big GPU problems use. */
#define CTS_MATMUL_TILES_ENV "BIB_VK_MATMUL_TILES"
#define CTS_MATMUL_TILES "64", "128", "128x64", "64x128"
#include "tests/unit/executor_cts.h"

/* ---- the device and its probes ------------------------------------------ */

CTS_TEST(validation_layer_is_active) {
    cr_assert(bib_vulkan_validation_active(cts_ex),
              "VK_LAYER_KHRONOS_validation is not active, so zero messages would prove nothing");
}

/* The fma paths a device may need, each on the arithmetic kernels against the
 * CPU's bits: the fp64 emulation (lavapipe and any device whose fma() is not
 * fused) and fma() that flushes denormals with the emulation where they meet
 * it (the H100's driver), here over a simulated flushing fma(). A path that
 * fails its own start-up probe fails the test at cts_open; the path the
 * suite's executor took is left out, every other test having run it. */
CTS_TEST(every_fma_path_gives_cpu_bits) {
    static const struct {
        const char *env, *says;
    } paths[] = {{"emulated", "emulated (fp64 round-to-odd"},
                 {"flushing-simulated", "fused fma(), emulated where denormals meet it"}};
    bib_executor_t *saved = cts_ex;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (strstr(cts_ops->describe(saved), paths[p].says))
            continue; /* the suite's own executor takes this path: every test ran it */
        cts_ex = cts_open(NULL, "BIB_VK_FMA", paths[p].env);
        const char *d = cts_ops->describe(cts_ex);
        cr_assert(strstr(d, paths[p].says), "BIB_VK_FMA=%s: %s", paths[p].env, d);
        cts_test_matmul_matches_cpu_over_odd_shapes();
        cts_test_matmul_special_values_match_cpu();
        cts_test_matmul_keeps_negative_zero_chains_through_padded_k();
        cts_test_matmul_tiny_values_midway_through_k_match_cpu();
        cts_test_unary_ops_match_cpu_on_small_and_tie_inputs();
        cts_test_exp_matches_cpu_at_its_range_edges();
        cts_test_math_ops_match_cpu_over_bit_patterns();
        cts_test_binary_ops_and_broadcasts_match_cpu();
        cts_test_softmax_matches_cpu();
        cts_close(cts_ex);
    }
    cts_ex = saved;
}

/* Blocks of more than 16 over a flushing fma() run in two passes (the fast
 * path alone, then the tiles it gave up on, every step checked): each
 * configuration forced here over the simulated flushing fma(), with tiles
 * that meet tiny values and tiles that do not in one product. */
CTS_TEST(matmul_big_tiles_over_a_flushing_fma_match_cpu) {
    static const char *const tiles[] = {"128", "128x64", "64x128"};
    bib_executor_t *saved = cts_ex;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        setenv("BIB_VK_MATMUL_TILES", tiles[t], 1);
        cts_ex = cts_open(NULL, "BIB_VK_FMA", "flushing-simulated");
        unsetenv("BIB_VK_MATMUL_TILES");
        cts_test_matmul_tiny_values_midway_through_k_match_cpu();
        cts_test_matmul_keeps_negative_zero_chains_through_padded_k();
        cts_test_matmul_special_values_match_cpu();
        cts_matmul_case(300, 70, 260, true, BIB_ACT_RELU, true);
        cts_matmul_case(257, 40, 129, false, BIB_ACT_NONE, false);
        cts_close(cts_ex);
    }
    cts_ex = saved;
}

CTS_TEST(division_and_sqrt_equal_ieee_bit_for_bit) {
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
            a[i] = bib_f32_from_bits(sp[x] ^ (cts_rnd() & 0x80000000u)),
            b[i] = bib_f32_from_bits(sp[y]);
    for (; i < N; i++) {
        uint32_t kind = i % 4;
        a[i] = bib_f32_from_bits(cts_rnd());
        /* Mix in quotients near 1, tiny and huge ratios, and exact ones. */
        b[i] = kind == 0 ? bib_f32_from_bits(cts_rnd())
               : kind == 1
                   ? bib_f32_from_bits((bib_f32_bits(a[i]) & 0xff800000u) | (cts_rnd() & 0x7fffffu))
               : kind == 2 ? bib_f32_from_bits(cts_rnd() & 0x807fffffu)
                           : bib_f32_from_bits((cts_rnd() & 0x3fffu) | 0x3f800000u);
    }
    cr_assert_eq(bib_vulkan_divsqrt(cts_ex, a, b, q, r, N), BIB_OK, "%s",
                 bib_vulkan_executor.error(cts_ex));
    for (i = 0; i < N; i++) {
        volatile float e = a[i] / b[i];
        volatile float s = sqrtf(a[i]);
        uint32_t eq = e != e ? 0x7fc00000u : bib_f32_bits(e),
                 es = s != s ? 0x7fc00000u : bib_f32_bits(s);
        cr_assert_eq(bib_f32_bits(q[i]), eq, "%a / %a: vulkan %a, ieee %a", (double)a[i],
                     (double)b[i], (double)q[i], (double)e);
        cr_assert_eq(bib_f32_bits(r[i]), es, "sqrt(%a): vulkan %a, ieee %a", (double)a[i],
                     (double)r[i], (double)s);
    }
    free(a), free(b), free(q), free(r);
}

/* ---- device limits -------------------------------------------------------- */

CTS_TEST(matmul_needing_more_than_65535_workgroups_along_an_axis_matches_cpu) {
    /* 64x64 tiles: M = 65536 * 64 + 1 rows need 65537 row tiles along y, past
     * the 65535 workgroups Vulkan guarantees (and NVIDIA allows along y); the
     * grid is capped and the shader strides over the remaining tiles. */
    const uint32_t big = 65536u * 64u + 1u;
    bib_executor_t *saved = cts_ex;
    cts_ex = cts_open(NULL, "BIB_VK_MATMUL_TILES", "64");
    cts_matmul_case(big, 1, 1, true, BIB_ACT_RELU, false);
    cts_close(cts_ex);
    cts_ex = saved;
}

/* ---- the loop limit -------------------------------------------------------- */

CTS_TEST(loop_probe_finds_lavapipes_limit) {
    const char *d = cts_ops->describe(cts_ex);
    if (!strstr(d, "llvmpipe")) {
        printf("SKIP: not lavapipe: %s\n", d);
        cr_skip_test("not lavapipe");
    }
    /* Mesa's LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of an invocation. */
    cr_assert_eq(bib_vulkan_loop_limit(cts_ex), 65535, "%s", d);
    cr_assert(strstr(d, "loops: 65535 iterations an invocation (probed"), "%s", d);
}

/* A call of size s (its tensors' data from pool, or NULL): one per kernel
 * whose shader loops by an amount its sizes choose. */
typedef struct vk_sized {
    bib_call_t call;
    cts_tensor_t in[3], out;
    int nin;
} vk_sized_t;
typedef vk_sized_t vk_shape_fn(uint32_t s, const float *pool);

/* Whether the executor takes the call of size s: supports reads the views'
 * shapes and whether they have a buffer, never the buffer. */
static bool vk_takes(vk_shape_fn *shape, uint32_t s, void *buf) {
    vk_sized_t c = shape(s, NULL);
    bib_view_t *v[4] = {&c.call.out, &c.call.in[0], &c.call.in[1], &c.call.in[2]};
    for (int t = 0; t < 1 + c.nin; t++) {
        const cts_tensor_t *ts = t ? &c.in[t - 1] : &c.out;
        *v[t] = (bib_view_t){buf, 0, ts->dtype, ts->rank, {0}};
        memcpy(v[t]->dims, ts->dims, sizeof v[t]->dims);
    }
    return cts_ops->supports(cts_ex, &c.call);
}

/* Skips the test where the start-up probe found no loop limit. */
static void vk_need_loop_limit(void) {
    if (bib_vulkan_loop_limit(cts_ex) == 0) {
        printf("SKIP: %s: no loop limit found\n", cts_ops->describe(cts_ex));
        cr_skip_test("no loop limit");
    }
}

/* The call of the largest size in [lo, hi) that the executor takes runs on
 * it with the CPU's bits (the kernel's loop bound is not too low: its
 * loops all ran), and the next size is declined, to run on the CPU executor
 * (the bound is not too high to matter: hi is past the limit). */
static void vk_at_the_loop_limit(vk_shape_fn *shape, uint32_t lo, uint32_t hi, const char *what) {
    void *buf;
    cr_assert_eq(cts_ops->buffer_alloc(cts_ex, 4, &buf), BIB_OK);
    cr_assert(vk_takes(shape, lo, buf), "%s: size %u is not taken", what, lo);
    cr_assert(!vk_takes(shape, hi, buf), "%s: size %u, past the loop limit, is taken", what, hi);
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (vk_takes(shape, mid, buf))
            lo = mid;
        else
            hi = mid;
    }
    cts_ops->buffer_free(cts_ex, buf);
    vk_sized_t c = shape(lo, NULL);
    size_t most = 1;
    for (int t = 0; t < c.nin; t++)
        most = cts_count(&c.in[t]) > most ? cts_count(&c.in[t]) : most;
    float *pool = malloc(most * 4);
    cr_assert(pool);
    cts_fill_data(pool, most, -2, 2, false);
    c = shape(lo, pool);
    char at[96];
    snprintf(at, sizeof at, "%s, size %u (the largest the limit allows)", what, lo);
    cts_compare(c.call, c.in, c.nin, c.out, at);
    free(pool);
}

static vk_sized_t vk_sum_row(uint32_t s, const float *pool) {
    return (vk_sized_t){{.kernel = BIB_KERNEL_REDUCE, .sub = BIB_REDUCE_SUM},
                        {cts_tf(pool, 2, 1, s, 0, 0)},
                        cts_tf(NULL, 1, 1, 0, 0, 0),
                        1};
}

static vk_sized_t vk_mean_row(uint32_t s, const float *pool) {
    vk_sized_t c = vk_sum_row(s, pool);
    c.call.sub = BIB_REDUCE_MEAN;
    return c;
}

static vk_sized_t vk_argmax_row(uint32_t s, const float *pool) {
    vk_sized_t c = vk_sum_row(s, pool);
    c.call = (bib_call_t){.kernel = BIB_KERNEL_ARGMAX};
    c.out = (cts_tensor_t){NULL, BIB_DTYPE_I32, 1, {1}};
    return c;
}

static vk_sized_t vk_softmax_row(uint32_t s, const float *pool) {
    return (vk_sized_t){{.kernel = BIB_KERNEL_SOFTMAX},
                        {cts_tf(pool, 2, 1, s, 0, 0)},
                        cts_tf(NULL, 2, 1, s, 0, 0),
                        1};
}

static vk_sized_t vk_logsoftmax_row(uint32_t s, const float *pool) {
    vk_sized_t c = vk_softmax_row(s, pool);
    c.call.sub = BIB_SOFTMAX_LOG;
    return c;
}

static vk_sized_t vk_layernorm_row(uint32_t s, const float *pool) {
    return (vk_sized_t){
        {.kernel = BIB_KERNEL_LAYERNORM, .f = {1e-5f, 0}},
        {cts_tf(pool, 2, 1, s, 0, 0), cts_tf(pool, 1, s, 0, 0, 0), cts_tf(pool, 1, s, 0, 0, 0)},
        cts_tf(NULL, 2, 1, s, 0, 0),
        3};
}

static vk_sized_t vk_rmsnorm_row(uint32_t s, const float *pool) {
    vk_sized_t c = vk_layernorm_row(s, pool);
    c.call = (bib_call_t){.kernel = BIB_KERNEL_RMSNORM, .f = {1e-6f, 0}};
    c.nin = 2;
    return c;
}

/* A 2 x s by s x 3 product: one tile, K = s. */
static vk_sized_t vk_matmul_long_k(uint32_t s, const float *pool) {
    return (vk_sized_t){{.kernel = BIB_KERNEL_MATMUL},
                        {cts_tf(pool, 2, 2, s, 0, 0), cts_tf(pool, 2, s, 3, 0, 0)},
                        cts_tf(NULL, 2, 2, 3, 0, 0),
                        2};
}

/* One query of one head of 128 over s keys. */
static vk_sized_t vk_attention_keys(uint32_t s, const float *pool) {
    return (vk_sized_t){{.kernel = BIB_KERNEL_ATTENTION, .f = {0.0883883476f, 0}},
                        {cts_tf(pool, 3, 1, 1, 128, 0), cts_tf(pool, 3, s, 1, 128, 0),
                         cts_tf(pool, 3, s, 1, 128, 0)},
                        cts_tf(NULL, 3, 1, 1, 128, 0),
                        3};
}

/* A 1x1 CONV over s channels: one output, one chain of s steps. */
static vk_sized_t vk_conv_channels(uint32_t s, const float *pool) {
    return (vk_sized_t){{.kernel = BIB_KERNEL_CONV, .p = {1, 1, 1, 1, 1, 0, 0, 0, 0}},
                        {cts_tf(pool, 4, 1, s, 1, 1), cts_tf(pool, 4, 1, s, 1, 1)},
                        cts_tf(NULL, 4, 1, 1, 1, 1),
                        2};
}

/* An average pool whose one window is the whole 1-D row of s. */
static vk_sized_t vk_pool_window(uint32_t s, const float *pool) {
    return (vk_sized_t){
        {.kernel = BIB_KERNEL_POOL, .sub = BIB_POOL_AVG, .p = {1, s, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}},
        {cts_tf(pool, 3, 1, 1, s, 0)},
        cts_tf(NULL, 3, 1, 1, 1, 0),
        1};
}

/* lavapipe's loops stop after 65535 iterations of an invocation: a row of
 * 2^22 summed there gave 131070. */
CTS_TEST(reductions_past_the_loop_limit_run_on_the_cpu) {
    vk_need_loop_limit();
    vk_at_the_loop_limit(vk_sum_row, 1, (1u << 22) + 64, "sum of one row");
    vk_at_the_loop_limit(vk_mean_row, 1, (1u << 22) + 64, "mean of one row");
    vk_at_the_loop_limit(vk_argmax_row, 1, (1u << 22) + 64, "argmax of one row");
}

CTS_TEST(softmax_and_norms_past_the_loop_limit_run_on_the_cpu) {
    vk_need_loop_limit();
    vk_at_the_loop_limit(vk_softmax_row, 1, 1500000, "softmax of one row");
    vk_at_the_loop_limit(vk_logsoftmax_row, 1, 1500000, "logsoftmax of one row");
    vk_at_the_loop_limit(vk_layernorm_row, 1, 1500000, "layernorm of one row");
    vk_at_the_loop_limit(vk_rmsnorm_row, 1, 1500000, "rmsnorm of one row");
}

CTS_TEST(matmul_past_the_loop_limit_runs_on_the_cpu) {
    vk_need_loop_limit();
    vk_at_the_loop_limit(vk_matmul_long_k, 1, 65536, "matmul 2xKx3");
    /* The 128x128 tiles' slices are 8 deep: more loop passes per k. */
    bib_executor_t *saved = cts_ex;
    cts_ex = cts_open(NULL, "BIB_VK_MATMUL_TILES", "128");
    vk_at_the_loop_limit(vk_matmul_long_k, 1, 32768, "matmul 2xKx3, 128x128 tiles");
    cts_close(cts_ex);
    cts_ex = saved;
}

CTS_TEST(attention_past_the_loop_limit_runs_on_the_cpu) {
    vk_need_loop_limit();
    vk_at_the_loop_limit(vk_attention_keys, 1, 16384, "attention S=1 H=1 D=128");
}

CTS_TEST(conv_and_pool_past_the_loop_limit_run_on_the_cpu) {
    vk_need_loop_limit();
    vk_at_the_loop_limit(vk_conv_channels, 1, 70000, "1x1 conv over C channels");
    vk_at_the_loop_limit(vk_pool_window, 1, 65535, "avgpool over one window");
}

/* ---- float controls -------------------------------------------------------- */

CTS_TEST(stricter_float_controls_independence_still_gives_cpu_bits) {
    /* Under 32_BIT_ONLY (16- and 64-bit modes tied) the shaders declare the
     * tied widths together or not at all, so here 16-bit modes appear beside
     * the 64-bit ones. Under NONE (all widths tied) the widths a shader uses
     * get the one mode, and 16 beside them where it supports it too (none:
     * it does; none-no16: it does not, NVIDIA's case). The validation layer
     * (which knows only the device's real rules) checks that the patched
     * modules are valid for this device, and the kernels must keep their bits. */
    static const char *const rules[] = {"32", "none", "none-no16"};
    bib_executor_t *saved = cts_ex;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        cts_ex = cts_open(NULL, "BIB_VK_FLOAT_INDEPENDENCE", rules[r]);
        /* A width without the mode no longer keeps the others from it. */
        if (strcmp(rules[r], "none-no16") == 0 && strstr(cts_ops->describe(saved), "RTE declared"))
            cr_assert(strstr(cts_ops->describe(cts_ex), "RoundingModeRTE declared"),
                      "none-no16: %s", cts_ops->describe(cts_ex));
        cts_matmul_case(65, 33, 70, true, BIB_ACT_GELU, true);
        cts_matmul_case(17, 9, 65, true, BIB_ACT_RELU, true);
        cts_close(cts_ex);
    }
    cts_ex = saved;
}

/* ---- submissions and the device clock ------------------------------------ */

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

CTS_TEST(timing_gives_kernel_time_within_the_wall_time_and_adds_no_submit) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    cr_assert(ops->timing && ops->elapsed);
    enum { N = 1 << 16 };
    float *x = malloc(N * 4), *y = malloc(N * 4), *z = malloc(N * 4);
    cr_assert(x && y && z);
    cts_fill_data(x, N, -1, 1, false);
    void *a, *b;
    cr_assert_eq(ops->buffer_alloc(cts_ex, N * 4, &a), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(cts_ex, N * 4, &b), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_TANH};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {N}};
    /* Untimed first, so pipeline creation is out of the timed run. */
    cr_assert_eq(ops->upload(cts_ex, a, 0, x, N * 4), BIB_OK);
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cts_ex, &call), BIB_OK);
    cr_assert_eq(ops->download(cts_ex, b, 0, z, N * 4), BIB_OK);

    cr_assert_eq(ops->timing(cts_ex, true), BIB_OK, "%s", ops->error(cts_ex));
    uint64_t before = bib_vulkan_submits(cts_ex);
    double t0 = wall_ms();
    cr_assert_eq(ops->upload(cts_ex, a, 0, x, N * 4), BIB_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cts_ex, &call), BIB_OK, "%s",
                     ops->error(cts_ex));
    cr_assert_eq(ops->download(cts_ex, b, 0, y, N * 4), BIB_OK);
    double wall = wall_ms() - t0;
    cr_assert_eq(bib_vulkan_submits(cts_ex) - before, 1, "timing added submits");
    double ms = -1;
    cr_assert_eq(ops->elapsed(cts_ex, &ms), BIB_OK);
    cr_assert_gt(ms, 0.0, "ten kernels took no device time");
    cr_assert_leq(ms, wall, "device time %.3f ms exceeds the wall time %.3f ms", ms, wall);
    cr_assert_eq(ops->elapsed(cts_ex, &ms), BIB_OK);
    cr_assert_eq(ms, 0.0, "elapsed counts from its last call: %g ms", ms);
    cr_assert_eq(memcmp(y, z, N * 4), 0, "timing changed a result");
    cr_assert_eq(ops->timing(cts_ex, false), BIB_OK);
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cts_ex, &call), BIB_OK);
    cr_assert_eq(ops->synchronize(cts_ex), BIB_OK);
    cr_assert_eq(ops->elapsed(cts_ex, &ms), BIB_OK);
    cr_assert_eq(ms, 0.0, "a kernel after timing(false) was timed: %g ms", ms);
    ops->buffer_free(cts_ex, a);
    ops->buffer_free(cts_ex, b);
    free(x);
    free(y);
    free(z);
}

CTS_TEST(timing_more_commands_than_the_query_pool_holds) {
    const bib_executor_ops_t *ops = &bib_vulkan_executor;
    void *a, *b;
    cr_assert_eq(ops->buffer_alloc(cts_ex, 256, &a), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(cts_ex, 256, &b), BIB_OK);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .f = {2.5f}};
    fill.out = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {64}};
    bib_call_t copy = {.kernel = BIB_KERNEL_COPY};
    copy.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {64}};
    copy.in[0] = fill.out;
    cr_assert_eq(ops->timing(cts_ex, true), BIB_OK, "%s", ops->error(cts_ex));
    /* Fills and copies take no descriptor set: only the query pool (2048
       pairs) makes the executor submit on the way. */
    uint64_t before = bib_vulkan_submits(cts_ex);
    for (int i = 0; i < 1500; i++) {
        cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](cts_ex, &fill), BIB_OK, "%s",
                     ops->error(cts_ex));
        cr_assert_eq(ops->kernels[BIB_KERNEL_COPY](cts_ex, &copy), BIB_OK, "%s",
                     ops->error(cts_ex));
    }
    cr_assert_eq(ops->synchronize(cts_ex), BIB_OK);
    cr_assert_eq(bib_vulkan_submits(cts_ex) - before, 2, "3000 timed commands in %llu submits",
                 (unsigned long long)(bib_vulkan_submits(cts_ex) - before));
    double ms = -1;
    cr_assert_eq(ops->elapsed(cts_ex, &ms), BIB_OK);
    cr_assert_gt(ms, 0.0);
    float out[64];
    cr_assert_eq(ops->download(cts_ex, b, 0, out, sizeof out), BIB_OK);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(out[i], 2.5f);
    cr_assert_eq(ops->timing(cts_ex, false), BIB_OK);
    ops->buffer_free(cts_ex, a);
    ops->buffer_free(cts_ex, b);
}

CTS_TEST(queue_without_timestamps_refuses_timing_and_says_why) {
    bib_executor_t *ex = cts_open(NULL, "BIB_VK_NO_TIMESTAMPS", "1");
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
    cts_close(ex);
}

/* ---- the pipeline cache --------------------------------------------------- */

CTS_TEST(corrupt_pipeline_cache_file_is_ignored) {
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
