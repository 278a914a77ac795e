/* backends/cpu/ops.c: the CPU executor's tensor kernels.
 *
 * Owns the scalar reference of every bib_kernel_t (the bits every executor
 * must reproduce, spec/numerics.md), the reference GEMM chain used when no
 * GEMM engine is attached, and the driver that splits a call into fixed
 * chunks of rows and hands each row to the row functions of the selected
 * SIMD level. It does not own the optimized GEMM (gemm*.c), the thread pool
 * (threadpool.c) or level detection (cpufeatures.c).
 */
#include "backends/cpu/ops.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/callcheck.h"
#include "backends/cpu/bmath.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/ops_dtypes.h"
#include "backends/cpu/unary.h"

/* ---- scalar row functions: the reference ----------------------------- */

static void scalar_unary(bib_unary_t op, const float *x, float *y, size_t n) {
    bib_unary_row(op, x, y, n);
}

static float scalar_binary1(bib_binary_t op, float a, float b) {
    switch (op) {
    case BIB_BINARY_ADD:
        return bib_f32_canon(a + b);
    case BIB_BINARY_SUB:
        return bib_f32_canon(a - b);
    case BIB_BINARY_MUL:
        return bib_f32_canon(a * b);
    case BIB_BINARY_DIV:
        return bib_f32_canon(a / b);
    case BIB_BINARY_POW:
        return bib_pow(a, b);
    case BIB_BINARY_MIN:
        return bib_min2(a, b);
    case BIB_BINARY_MAX:
        return bib_max2(a, b);
    case BIB_BINARY__COUNT: /* not an op; -Wswitch names a binary op left out */
        break;
    }
    return bib_f32_canonical_nan();
}

static void scalar_binary(bib_binary_t op, const float *a, const float *b, size_t b_step, float *y,
                          size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = scalar_binary1(op, a[i], b[i * b_step]);
}

static void scalar_scale(const float *x, float s, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canon(x[i] * s);
}

static void scalar_softmax(const float *x, float *y, size_t n) {
    float m = bib_max(x, n);
    for (size_t i = 0; i < n; i++)
        y[i] = bib_exp(x[i] - m);
    float s = bib_tree_sum(y, n);
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canon(y[i] / s);
}

/* log-softmax: d = x - m, s = tree-sum(exp(d)), y = canon(d - log(s)). The
 * sum is taken without storing exp(d), so y may be x (in place). */
static void scalar_logsoftmax(const float *x, float *y, size_t n) {
    float m = bib_max(x, n);
    float p[BIB_TREE_LANES] = {0};
    for (size_t i = 0; i < n; i++)
        p[i % BIB_TREE_LANES] = p[i % BIB_TREE_LANES] + bib_exp(x[i] - m);
    float ls = bib_log(bib_tree_finish(p));
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canon((x[i] - m) - ls);
}

static void scalar_layernorm(const float *x, const float *gamma, const float *beta, float eps,
                             float *y, size_t n) {
    float nf = (float)n;
    float mean = bib_tree_sum(x, n) / nf;
    float var = bib_tree_sum_sqdev(x, mean, n) / nf;
    float den = sqrtf(var + eps);
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canon(((x[i] - mean) / den) * gamma[i] + beta[i]);
}

static void scalar_rmsnorm(const float *x, const float *gamma, float eps, float *y, size_t n) {
    float ms = bib_tree_sum_sq(x, n) / (float)n;
    float den = sqrtf(ms + eps);
    for (size_t i = 0; i < n; i++)
        y[i] = bib_f32_canon((x[i] / den) * gamma[i]);
}

static void scalar_softmax_rows(const float *x, float *y, size_t n, size_t rows, bool stream) {
    (void)stream;
    for (size_t r = 0; r < rows; r++)
        scalar_softmax(x + r * n, y + r * n, n);
}

static void scalar_layernorm_rows(const float *x, const float *gamma, const float *beta, float eps,
                                  float *y, size_t n, size_t rows, bool stream) {
    (void)stream;
    for (size_t r = 0; r < rows; r++)
        scalar_layernorm(x + r * n, gamma, beta, eps, y + r * n, n);
}

static void scalar_rmsnorm_rows(const float *x, const float *gamma, float eps, float *y, size_t n,
                                size_t rows, bool stream) {
    (void)stream;
    for (size_t r = 0; r < rows; r++)
        scalar_rmsnorm(x + r * n, gamma, eps, y + r * n, n);
}

static float scalar_sum(const float *x, size_t n) {
    return bib_tree_sum(x, n);
}

static float scalar_max(const float *x, size_t n) {
    return bib_max(x, n);
}

static void scalar_axpy(float a, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

/* REDUCE down columns: each column's own steps, as bib_tree_sum,
 * bib_tree_prod, bib_max and bib_min take them along a row, for a block of
 * columns at a time (the lanes of each column's tree side by side). */
#define COL_BLOCK 64
static void scalar_reduce_cols(uint32_t op, const float *x, size_t n, size_t m, size_t j0,
                               size_t j1, float *y) {
    for (size_t b0 = j0; b0 < j1; b0 += COL_BLOCK) {
        size_t w = j1 - b0 < COL_BLOCK ? j1 - b0 : COL_BLOCK;
        if (op == BIB_REDUCE_MAX || op == BIB_REDUCE_MIN) {
            for (size_t j = 0; j < w; j++) {
                int32_t best = bib_f32_order_key(op == BIB_REDUCE_MAX ? -INFINITY : INFINITY);
                bool nan = false;
                for (size_t i = 0; i < n && !nan; i++) {
                    float v = x[i * m + b0 + j];
                    int32_t k = bib_f32_order_key(v);
                    nan = v != v;
                    best = op == BIB_REDUCE_MAX ? (k > best ? k : best) : (k < best ? k : best);
                }
                y[b0 + j] = nan ? bib_f32_canonical_nan() : bib_f32_from_order_key(best);
            }
            continue;
        }
        static _Thread_local float p[BIB_TREE_LANES][COL_BLOCK];
        const bool prod = op == BIB_REDUCE_PROD;
        for (int l = 0; l < BIB_TREE_LANES; l++)
            for (size_t j = 0; j < w; j++)
                p[l][j] = prod ? 1.0f : 0.0f;
        for (size_t i = 0; i < n; i++) {
            float *lane = p[i % BIB_TREE_LANES];
            const float *row = x + i * m + b0;
            for (size_t j = 0; j < w; j++)
                lane[j] = prod ? lane[j] * row[j] : lane[j] + row[j];
        }
        for (int s = BIB_TREE_LANES / 2; s >= 1; s >>= 1)
            for (int l = 0; l < s; l++)
                for (size_t j = 0; j < w; j++)
                    p[l][j] = prod ? p[l][j] * p[l + s][j] : p[l][j] + p[l + s][j];
        for (size_t j = 0; j < w; j++)
            y[b0 + j] = bib_f32_canon(op == BIB_REDUCE_MEAN ? p[0][j] / (float)n : p[0][j]);
    }
}

/* TOPK's scan (bib_cpu_rowops_t.first_past). */
static size_t scalar_first_past(const float *x, size_t n, int32_t bar, bool max) {
    for (size_t i = 0; i < n; i++) {
        int32_t k = bib_f32_order_key(x[i]);
        if (x[i] != x[i] || (max ? k > bar : k < bar))
            return i;
    }
    return n;
}

/* BATCHNORM on one plane: the contract's steps, each rounded. */
static void scalar_batchnorm(const float *x, float *y, size_t n, float mean, float den, float scale,
                             float bias, bool relu) {
    if (relu)
        for (size_t e = 0; e < n; e++)
            y[e] = bib_relu(((x[e] - mean) / den) * scale + bias);
    else
        for (size_t e = 0; e < n; e++)
            y[e] = bib_f32_canon(((x[e] - mean) / den) * scale + bias);
}

const bib_cpu_rowops_t bib_cpu_rowops_scalar = {
    .name = "scalar",
    .unary = scalar_unary,
    .binary = scalar_binary,
    .scale = scalar_scale,
    .softmax = scalar_softmax,
    .logsoftmax = scalar_logsoftmax,
    .layernorm = scalar_layernorm,
    .rmsnorm = scalar_rmsnorm,
    .softmax_rows = scalar_softmax_rows,
    .layernorm_rows = scalar_layernorm_rows,
    .rmsnorm_rows = scalar_rmsnorm_rows,
    .sum = scalar_sum,
    .max = scalar_max,
    .reduce_cols = scalar_reduce_cols,
    .axpy = scalar_axpy,
    .batchnorm = scalar_batchnorm,
    .first_past = scalar_first_past,
};

bool bib_cpu_scalef_detour = true;

static void scalef_detour_init(void) {
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    bib_cpu_scalef_detour = f.intel;
}

static pthread_once_t scalef_detour_once = PTHREAD_ONCE_INIT;

bool bib_cpu_set_scalef_detour(bool on) {
    pthread_once(&scalef_detour_once, scalef_detour_init); /* not overwritten later */
    bool was = bib_cpu_scalef_detour;
    bib_cpu_scalef_detour = on;
    return was;
}

const bib_cpu_rowops_t *bib_cpu_rowops_for(bib_cpu_level_t level) {
    pthread_once(&scalef_detour_once, scalef_detour_init);
    switch (level) {
    case BIB_CPU_LEVEL_SCALAR:
        return &bib_cpu_rowops_scalar;
    case BIB_CPU_LEVEL_AVX2:
        return &bib_cpu_rowops_avx2;
    case BIB_CPU_LEVEL_AVX512:
        return &bib_cpu_rowops_avx512;
    }
    return NULL;
}

/* ---- Philox4x32-10 ---------------------------------------------------- */

void bib_cpu_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* ---- the driver --------------------------------------------------------- */

static size_t view_count(const bib_view_t *v) {
    size_t n = 1;
    for (uint32_t i = 0; i < v->rank; i++)
        n *= v->dims[i];
    return n;
}

static size_t view_last(const bib_view_t *v) {
    return v->rank ? v->dims[v->rank - 1] : 1;
}

static float *view_f32(const bib_view_t *v) {
    return (float *)v->buf + v->offset;
}

static int32_t *view_i32(const bib_view_t *v) {
    return (int32_t *)v->buf + v->offset;
}

/* Chunk sizes: fixed, so the split is the same on every run; they only
 * decide which thread computes a row, never how. */
#define ELEMENT_GRAIN ((size_t)1 << 15)

static size_t row_grain(size_t row_len) {
    size_t g = ELEMENT_GRAIN / (row_len ? row_len : 1);
    return g ? g : 1;
}

static void run_parallel(const bib_cpu_ctx_t *ctx, size_t n, size_t grain, bib_parallel_fn fn,
                         void *arg) {
    if (n == 0)
        return;
    bib_threadpool_parallel_for(ctx->pool, n, grain, fn, arg);
}

/* Outputs at least this large are written with non-temporal stores by the
 * row kernels that can (softmax, layernorm, rmsnorm): they would not stay in
 * the caches anyway, and a cached store first reads the line it writes, a
 * third of the memory traffic of a pass that reads x once and writes y once.
 * Smaller outputs stay cached for the kernel that reads them next. The
 * store's kind changes no bit. The bound is glibc's for memcpy, 3/4 of the
 * L3 (32 MB here). Measured on f32[65536, 64] (16 MB out, 32 MB with its
 * input), each kernel repeated on a quiet machine, 2 threads: cached,
 * layernorm 102-109 GB/s and rmsnorm 113-137 against 81-88 streamed (the
 * L3 holds both tensors); softmax 48-73 cached against 73-86 streamed (it
 * computes more than it moves). With other work evicting the L3 streaming
 * won for all three, so the bound sits where the tensors stop fitting. */
#define STREAM_MIN_BYTES ((size_t)24 << 20)

typedef struct task {
    const bib_cpu_ctx_t *ctx;
    const bib_call_t *call;
    size_t row_len;
    bool stream; /* row kernels: y with non-temporal stores (STREAM_MIN_BYTES) */
} task_t;

static void task_unary(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    t->ctx->rowops->unary((bib_unary_t)t->call->sub, view_f32(&t->call->in[0]) + begin,
                          view_f32(&t->call->out) + begin, end - begin);
}

static void task_scale(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    t->ctx->rowops->scale(view_f32(&t->call->in[0]) + begin, t->call->f[0],
                          view_f32(&t->call->out) + begin, end - begin);
}

static void task_binary_flat(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const float *b = view_f32(&t->call->in[1]);
    size_t b_step = t->row_len; /* 1: same shape; 0: one element */
    t->ctx->rowops->binary((bib_binary_t)t->call->sub, view_f32(&t->call->in[0]) + begin,
                           b + begin * b_step, b_step, view_f32(&t->call->out) + begin,
                           end - begin);
}

/* What a row task reads from its task_t: the call, the level's row
 * functions, the row length n, and the f32 rows of in0 (x) and out (y). */
typedef struct rows {
    const bib_call_t *c;
    const bib_cpu_rowops_t *ro;
    size_t n;
    const float *x;
    float *y;
    bool stream;
} rows_t;

static rows_t task_rows(const void *arg) {
    const task_t *t = arg;
    return (rows_t){.c = t->call,
                    .ro = t->ctx->rowops,
                    .n = t->row_len,
                    .x = view_f32(&t->call->in[0]),
                    .y = view_f32(&t->call->out),
                    .stream = t->stream};
}

static void task_binary_rows(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    rows_t t = task_rows(arg);
    const float *b = view_f32(&t.c->in[1]);
    for (size_t r = begin; r < end; r++)
        t.ro->binary((bib_binary_t)t.c->sub, t.x + r * t.n, b, 1, t.y + r * t.n, t.n);
}

static void task_softmax(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    rows_t t = task_rows(arg);
    if (t.c->sub != BIB_SOFTMAX_LOG) {
        t.ro->softmax_rows(t.x + begin * t.n, t.y + begin * t.n, t.n, end - begin, t.stream);
        return;
    }
    for (size_t r = begin; r < end; r++)
        t.ro->logsoftmax(t.x + r * t.n, t.y + r * t.n, t.n);
}

static void task_layernorm(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    rows_t t = task_rows(arg);
    /* PACKED: gamma and beta are the two rows of in1. */
    const float *gamma = view_f32(&t.c->in[1]);
    const float *beta = t.c->sub == BIB_LAYERNORM_PACKED ? gamma + t.n : view_f32(&t.c->in[2]);
    t.ro->layernorm_rows(t.x + begin * t.n, gamma, beta, t.c->f[0], t.y + begin * t.n, t.n,
                         end - begin, t.stream);
}

static void task_rmsnorm(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    rows_t t = task_rows(arg);
    t.ro->rmsnorm_rows(t.x + begin * t.n, view_f32(&t.c->in[1]), t.c->f[0], t.y + begin * t.n, t.n,
                       end - begin, t.stream);
}

static void task_reduce(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    rows_t t = task_rows(arg);
    for (size_t r = begin; r < end; r++) {
        const float *row = t.x + r * t.n;
        if (t.c->sub == BIB_REDUCE_MAX) {
            t.y[r] = t.ro->max(row, t.n);
        } else if (t.c->sub == BIB_REDUCE_MIN) {
            /* MIN and PROD: the scalar reference at every level. */
            t.y[r] = bib_min(row, t.n);
        } else if (t.c->sub == BIB_REDUCE_PROD) {
            t.y[r] = bib_f32_canon(bib_tree_prod(row, t.n));
        } else {
            float s = t.ro->sum(row, t.n);
            t.y[r] = bib_f32_canon(t.c->sub == BIB_REDUCE_MEAN ? s / (float)t.n : s);
        }
    }
}

/* The column forms of REDUCE and CUMSUM (p[0] = m): in0 is [outer, n, m]
 * and each column runs down n. A unit of work is one outer index's columns
 * [j0, j1), COLS_CHUNK columns wide. */
#define COLS_CHUNK 256
typedef struct cols_unit {
    size_t o, j0, j1;
} cols_unit_t;

static size_t cols_units(const bib_call_t *c) {
    size_t m = c->in[0].dims[2];
    return (size_t)c->in[0].dims[0] * ((m + COLS_CHUNK - 1) / COLS_CHUNK);
}

static cols_unit_t cols_unit(const bib_call_t *c, size_t u) {
    size_t m = c->in[0].dims[2], chunks = (m + COLS_CHUNK - 1) / COLS_CHUNK;
    size_t j0 = (u % chunks) * COLS_CHUNK;
    return (cols_unit_t){u / chunks, j0, j0 + COLS_CHUNK < m ? j0 + COLS_CHUNK : m};
}

/* REDUCE's column form: out [outer, m], each output its column's reduction. */
static void task_reduce_cols(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const task_t *t = arg;
    const bib_call_t *c = t->call;
    size_t n = c->in[0].dims[1], m = c->in[0].dims[2];
    const float *x = view_f32(&c->in[0]);
    float *y = view_f32(&c->out);
    for (size_t u = begin; u < end; u++) {
        cols_unit_t w = cols_unit(c, u);
        t->ctx->rowops->reduce_cols(c->sub, x + w.o * n * m, n, m, w.j0, w.j1, y + w.o * m);
    }
}

static void task_argmax(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    rows_t t = task_rows(arg);
    size_t n = t.n;
    const float *x = t.x;
    int32_t *y = view_i32(&t.c->out);
    /* MIN: the first maximum of the keys' complements (~k reverses the
     * order and never overflows). */
    const int32_t flip = t.c->sub == BIB_ARGMAX_MIN ? -1 : 0;
    for (size_t r = begin; r < end; r++) {
        const float *row = x + r * n;
        size_t best = 0;
        int32_t best_key = n ? bib_f32_order_key(row[0]) ^ flip : 0;
        for (size_t i = 0; i < n; i++) {
            if (row[i] != row[i]) {
                best = i;
                break;
            }
            int32_t k = bib_f32_order_key(row[i]) ^ flip;
            if (k > best_key) {
                best_key = k;
                best = i;
            }
        }
        y[r] = (int32_t)best;
    }
}

/* ARGSORT: each row's sort keys, unsigned and ascending in the order the
 * row is to come out: NaN 0 (first), then the order key's bits flipped so
 * that MAX comes largest first and MIN smallest first (-0 and +0 apart).
 * No other value has key 0 (the extreme keys are NaNs'), so a stable sort
 * by key, which keeps the lower index first among equal keys, gives the
 * order ARGMAX (ARGMIN) picks. A call wants the first k of that order (k
 * is the output's last axis; ARGSORT's is the whole row, TOPK's the
 * opcode's c).
 *
 * The whole order is an LSD radix sort over three digits of the key (11,
 * 11 and 10 bits, counted in one pass), skipping a digit every key shares.
 * A few of many (TOPK of k <= n / ARGSORT_SELECT_RATIO) are selected
 * instead (select_row). */
typedef struct argsort_task {
    task_t t;
    size_t k;
    atomic_bool nomem;
} argsort_task_t;

#define ARGSORT_SELECT_RATIO 32

static inline uint32_t argsort_key(float x, bool max) {
    uint32_t u = (uint32_t)bib_f32_order_key(x) ^ 0x80000000u;
    return x != x ? 0u : max ? ~u : u;
}

static void argsort_row(const float *x, size_t n, size_t first, bool max, uint32_t *key,
                        uint32_t *idx, uint32_t *key2, uint32_t *idx2, int32_t *out) {
    if (n == 0)
        return;
    /* Three digits of 11, 11 and 10 bits, counted in one pass. */
    uint32_t count[3][2049];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = argsort_key(x[i], max);
        key[i] = k;
        idx[i] = (uint32_t)i;
        count[0][(k & 0x7FFu) + 1]++;
        count[1][((k >> 11) & 0x7FFu) + 1]++;
        count[2][(k >> 22) + 1]++;
    }
    for (int d = 0; d < 3; d++) {
        const int shift = 11 * d;
        uint32_t *c = count[d];
        if (c[((key[0] >> shift) & 0x7FFu) + 1] == n)
            continue; /* every key has this digit: the order stands */
        for (int b = 0; b < 2048; b++)
            c[b + 1] += c[b];
        for (size_t i = 0; i < n; i++) {
            uint32_t at = c[(key[i] >> shift) & 0x7FFu]++;
            key2[at] = key[i];
            idx2[at] = idx[i];
        }
        uint32_t *swap = key;
        key = key2, key2 = swap;
        swap = idx, idx = idx2, idx2 = swap;
    }
    for (size_t i = 0; i < first; i++)
        out[i] = (int32_t)idx[i];
}

/* Sinks h[i] in the max-heap h[0..n). */
static void sift_down(uint64_t *h, size_t n, size_t i) {
    const uint64_t v = h[i];
    for (size_t c = 2 * i + 1; c < n; i = c, c = 2 * i + 1) {
        if (c + 1 < n && h[c + 1] > h[c])
            c++;
        if (h[c] <= v)
            break;
        h[i] = h[c];
    }
    h[i] = v;
}

/* The order key (bib_f32_order_key) of the float whose sort key
 * (argsort_key) is key, key > 0 (0 is the NaNs'). */
static int32_t argsort_order(uint32_t key, bool max) {
    return (int32_t)((max ? ~key : key) ^ 0x80000000u);
}

/* The first k (0 < k <= n / ARGSORT_SELECT_RATIO) of a row's order
 * without sorting the row. Each element's key, the sort key above then its
 * index (distinct, and ascending in the order), goes into a max-heap of the
 * k smallest so far when below its top. A later element with the top's
 * sort key has a larger index, so only one whose sort key is below the
 * top's can enter: a NaN, or a value past the top's in the order (keys
 * compared as bib_f32_order_key's, so -0 and +0 apart), which the level's
 * vector scan finds. When the top is a NaN (every kept key a NaN's),
 * nothing can enter any more. At the end the heap is sorted in place. A
 * row in random order puts about k ln(n / k) keys into the heap, below
 * 6k + n / 64 for every n / k; a row that comes near the reverse of its
 * order puts in nearly all, and past that many the row is left to the sort
 * (false), which gives the same order. */
static bool select_row(const bib_cpu_rowops_t *ro, const float *x, size_t n, size_t k, bool max,
                       uint64_t *heap, int32_t *out) {
    for (size_t i = 0; i < k; i++)
        heap[i] = (uint64_t)argsort_key(x[i], max) << 32 | i;
    for (size_t i = k / 2; i-- > 0;)
        sift_down(heap, k, i);
    size_t budget = 6 * k + n / 64;
    for (size_t i = k; heap[0] >> 32 != 0 && i < n; i++) {
        i += ro->first_past(x + i, n - i, argsort_order((uint32_t)(heap[0] >> 32), max), max);
        if (i >= n)
            break;
        uint64_t key = (uint64_t)argsort_key(x[i], max) << 32 | i;
        if (key >= heap[0])
            continue;
        if (budget-- == 0)
            return false;
        heap[0] = key;
        sift_down(heap, k, 0);
    }
    for (size_t end = k; end-- > 1;) { /* the largest to the back, ascending */
        uint64_t top = heap[0];
        heap[0] = heap[end];
        heap[end] = top;
        sift_down(heap, end, 0);
    }
    for (size_t j = 0; j < k; j++)
        out[j] = (int32_t)(uint32_t)heap[j];
    return true;
}

static void task_argsort(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    argsort_task_t *a = arg;
    rows_t t = task_rows(&a->t);
    const size_t n = t.n, k = a->k;
    const bool max = t.c->sub == BIB_ARGMAX_MAX;
    const bool select = k > 0 && k * ARGSORT_SELECT_RATIO <= n;
    /* 4n words for the sort; k 64-bit keys (2k words) to select. */
    uint32_t *scratch = malloc(4 * (n ? n : 1) * sizeof *scratch);
    if (scratch == NULL) {
        atomic_store(&a->nomem, true);
        return;
    }
    int32_t *y = view_i32(&t.c->out);
    for (size_t r = begin; r < end && k > 0; r++) {
        if (!select ||
            !select_row(t.ro, t.x + r * n, n, k, max, (uint64_t *)(void *)scratch, y + r * k))
            argsort_row(t.x + r * n, n, k, max, scratch, scratch + n, scratch + 2 * n,
                        scratch + 3 * n, y + r * k);
    }
    free(scratch);
}

/* CUMSUM: each row's running sums, one add after another from its first
 * element (its last with BIB_SCAN_REVERSE); BIB_SCAN_EXCLUSIVE writes the
 * sum before each element's add, +0 first. The chains are latency bound,
 * so eight rows run interleaved, each sum in a register of its own: their
 * adds do not wait on each other. Each position is read before it is
 * written and never read again, so the result may be the input's storage. */
#define SCAN_STEP(T, ADD, OUT, r)                                                                  \
    do {                                                                                           \
        const T v = x[(r)*n + p], before = s##r;                                                   \
        s##r = ADD(before, v);                                                                     \
        y[(r)*n + p] = OUT(exclusive ? before : s##r);                                             \
    } while (0)

#define SCAN_FIRST(T, OUT, r)                                                                      \
    do {                                                                                           \
        s##r = x[(r)*n + p];                                                                       \
        y[(r)*n + p] = OUT(exclusive ? (T)0 : s##r);                                               \
    } while (0)

#define SCAN_ROWS_FN(name, T, ADD, OUT)                                                            \
    static void name(const T *x, T *y, size_t n, size_t rows, bool exclusive, bool reverse) {      \
        size_t r0 = 0;                                                                             \
        for (; r0 + 8 <= rows; r0 += 8, x += 8 * n, y += 8 * n) {                                  \
            T s0, s1, s2, s3, s4, s5, s6, s7;                                                      \
            size_t p = reverse ? n - 1 : 0;                                                        \
            SCAN_FIRST(T, OUT, 0);                                                                 \
            SCAN_FIRST(T, OUT, 1);                                                                 \
            SCAN_FIRST(T, OUT, 2);                                                                 \
            SCAN_FIRST(T, OUT, 3);                                                                 \
            SCAN_FIRST(T, OUT, 4);                                                                 \
            SCAN_FIRST(T, OUT, 5);                                                                 \
            SCAN_FIRST(T, OUT, 6);                                                                 \
            SCAN_FIRST(T, OUT, 7);                                                                 \
            for (size_t j = 1; j < n; j++) {                                                       \
                p = reverse ? n - 1 - j : j;                                                       \
                SCAN_STEP(T, ADD, OUT, 0);                                                         \
                SCAN_STEP(T, ADD, OUT, 1);                                                         \
                SCAN_STEP(T, ADD, OUT, 2);                                                         \
                SCAN_STEP(T, ADD, OUT, 3);                                                         \
                SCAN_STEP(T, ADD, OUT, 4);                                                         \
                SCAN_STEP(T, ADD, OUT, 5);                                                         \
                SCAN_STEP(T, ADD, OUT, 6);                                                         \
                SCAN_STEP(T, ADD, OUT, 7);                                                         \
            }                                                                                      \
        }                                                                                          \
        for (; r0 < rows; r0++, x += n, y += n) {                                                  \
            T s0;                                                                                  \
            size_t p = reverse ? n - 1 : 0;                                                        \
            SCAN_FIRST(T, OUT, 0);                                                                 \
            for (size_t j = 1; j < n; j++) {                                                       \
                p = reverse ? n - 1 - j : j;                                                       \
                SCAN_STEP(T, ADD, OUT, 0);                                                         \
            }                                                                                      \
        }                                                                                          \
    }

static inline float scan_add_f32(float a, float b) {
    return a + b;
}

static inline int32_t scan_add_i32(int32_t a, int32_t b) {
    return (int32_t)((uint32_t)a + (uint32_t)b); /* wrapping */
}

static inline int32_t scan_same_i32(int32_t v) {
    return v;
}

SCAN_ROWS_FN(scan_rows_f32, float, scan_add_f32, bib_f32_canon)
SCAN_ROWS_FN(scan_rows_i32, int32_t, scan_add_i32, scan_same_i32)

/* The column form (p[0] = m: in0 [outer, n, m]): columns j0..j1 of one
 * [n, m] block, each column's chain down n the row form's chain on that
 * column; neighbouring columns' adds are independent. */
#define SCAN_COLS_FN(name, T, ADD, OUT)                                                            \
    static void name(const T *x, T *y, size_t n, size_t m, size_t j0, size_t j1, bool exclusive,   \
                     bool reverse) {                                                               \
        T s[COLS_CHUNK];                                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            const size_t r = reverse ? n - 1 - i : i;                                              \
            const T *xr = x + r * m;                                                               \
            T *yr = y + r * m;                                                                     \
            if (i == 0) {                                                                          \
                for (size_t j = j0; j < j1; j++) {                                                 \
                    s[j - j0] = xr[j];                                                             \
                    yr[j] = OUT(exclusive ? (T)0 : s[j - j0]);                                     \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (size_t j = j0; j < j1; j++) {                                                     \
                const T v = xr[j], before = s[j - j0];                                             \
                s[j - j0] = ADD(before, v);                                                        \
                yr[j] = OUT(exclusive ? before : s[j - j0]);                                       \
            }                                                                                      \
        }                                                                                          \
    }

SCAN_COLS_FN(scan_cols_f32, float, scan_add_f32, bib_f32_canon)
SCAN_COLS_FN(scan_cols_i32, int32_t, scan_add_i32, scan_same_i32)

static void task_cumsum_cols(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const task_t *t = arg;
    const bib_call_t *c = t->call;
    const size_t n = c->in[0].dims[1], m = c->in[0].dims[2];
    const bool exclusive = c->i[0] & BIB_SCAN_EXCLUSIVE, reverse = c->i[0] & BIB_SCAN_REVERSE;
    for (size_t u = begin; u < end; u++) {
        cols_unit_t w = cols_unit(c, u);
        const size_t at = w.o * n * m;
        if (c->out.dtype == BIB_DTYPE_I32)
            scan_cols_i32(view_i32(&c->in[0]) + at, view_i32(&c->out) + at, n, m, w.j0, w.j1,
                          exclusive, reverse);
        else
            scan_cols_f32(view_f32(&c->in[0]) + at, view_f32(&c->out) + at, n, m, w.j0, w.j1,
                          exclusive, reverse);
    }
}

static void task_cumsum(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const task_t *t = arg;
    const bib_call_t *c = t->call;
    const size_t n = t->row_len;
    const bool exclusive = c->i[0] & BIB_SCAN_EXCLUSIVE, reverse = c->i[0] & BIB_SCAN_REVERSE;
    if (n == 0)
        return;
    if (c->out.dtype == BIB_DTYPE_I32)
        scan_rows_i32(view_i32(&c->in[0]) + begin * n, view_i32(&c->out) + begin * n, n,
                      end - begin, exclusive, reverse);
    else
        scan_rows_f32(view_f32(&c->in[0]) + begin * n, view_f32(&c->out) + begin * n, n,
                      end - begin, exclusive, reverse);
}

typedef struct act_post {
    const bib_cpu_rowops_t *rowops;
    bib_unary_t op;
} act_post_t;

static void matmul_act(float *c, size_t count, void *arg) {
    const act_post_t *post = arg;
    post->rowops->unary(post->op, c, c, count);
}

static bib_status_t run_matmul(const bib_cpu_ctx_t *ctx, const bib_call_t *c) {
    size_t m = c->in[0].dims[0], k = c->in[0].dims[1], n = c->in[1].dims[1];
    act_post_t post = {ctx->rowops, c->sub == BIB_ACT_GELU       ? BIB_UNARY_GELU
                                    : c->sub == BIB_ACT_GELU_ERF ? BIB_UNARY_GELU_ERF
                                                                 : BIB_UNARY_RELU};
    bib_gemm_t g = {
        .m = m,
        .n = n,
        .k = k,
        .a = view_f32(&c->in[0]),
        .lda = k,
        .b = view_f32(&c->in[1]),
        .ldb = n,
        .c = view_f32(&c->out),
        .ldc = n,
        .bias = c->in[2].buf ? view_f32(&c->in[2]) : NULL,
        .post = c->sub == BIB_ACT_NONE ? NULL : matmul_act,
        .post_ctx = &post,
    };
    bib_status_t st = bib_gemm_f32(ctx->pool, ctx->level, &g);
    if (st != BIB_OK)
        snprintf(ctx->error, ctx->error_len,
                 "matmul: out of memory for packing buffers (%zux%zux%zu)", m, n, k);
    return st;
}

static void task_transpose(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    /* Rows here are output rows: batch * cols of the input. */
    task_t *t = arg;
    const bib_call_t *c = t->call;
    const bib_view_t *in = &c->in[0];
    size_t rows = in->dims[in->rank - 2], cols = in->dims[in->rank - 1];
    const uint32_t *x = (const uint32_t *)in->buf + in->offset;
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    for (size_t r0 = 0; r0 < rows; r0 += 64) {
        size_t r1 = r0 + 64 < rows ? r0 + 64 : rows;
        for (size_t o = begin; o < end; o++) {
            size_t batch = o / cols, col = o % cols;
            const uint32_t *src = x + batch * rows * cols + col;
            uint32_t *dst = y + o * rows;
            for (size_t r = r0; r < r1; r++)
                dst[r] = src[r * cols];
        }
    }
}

/* i over the axes before the last (dims d) at row r, i[last] = 0. */
static void odometer_start(int64_t i[BIB_MAX_RANK], const uint32_t d[BIB_MAX_RANK], size_t r) {
    i[BIB_MAX_RANK - 1] = 0;
    for (int k = BIB_MAX_RANK - 2; k >= 0; k--) {
        i[k] = (int64_t)(r % d[k]);
        r /= d[k];
    }
}

/* Steps i over the axes before the last (dims d) to the next row. */
static inline void odometer_step(int64_t i[BIB_MAX_RANK], const uint32_t d[BIB_MAX_RANK]) {
    for (int k = BIB_MAX_RANK - 2; k >= 0; k--) {
        if (++i[k] < (int64_t)d[k])
            return;
        i[k] = 0;
    }
}

/* dst[j] = src[j * stride] for j < n: a memcpy at stride 1. */
static void copy_words(uint32_t *restrict dst, const uint32_t *restrict src, int64_t stride,
                       size_t n) {
    if (stride == 1) {
        memcpy(dst, src, n * sizeof *dst);
        return;
    }
    for (size_t j = 0; j < n; j++)
        dst[j] = src[(int64_t)j * stride];
}

/* STRIDED: output rows along its last (padded) axis; each element reads the
 * word its p[] names (backends/callcheck.c checked every one). A row reads
 * one source when the split axis is not the last, else the words before the
 * split from in0 and the rest from in1. */
static void task_strided(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const bib_call_t *c = t->call;
    const int64_t *p = c->p;
    const uint32_t *x0 = (const uint32_t *)c->in[0].buf + c->in[0].offset;
    const uint32_t *x1 = c->in[1].buf ? (const uint32_t *)c->in[1].buf + c->in[1].offset : NULL;
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    uint32_t d[BIB_MAX_RANK];
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++)
        d[k] = bib_view_padded_dim(&c->out, k);
    const size_t n = d[BIB_MAX_RANK - 1];
    const int64_t axis = p[14], split = p[15];
    /* The row's position, stepped from one row to the next (an odometer
     * over the axes before the last) instead of divided out each row. */
    int64_t i[BIB_MAX_RANK];
    odometer_start(i, d, begin);
    for (size_t r = begin; r < end; r++, odometer_step(i, d)) {
        int64_t at0 = p[0], at1 = p[7];
        for (int k = 0; k < BIB_MAX_RANK - 1; k++) {
            at0 += i[k] * p[1 + k];
            at1 += i[k] * p[8 + k];
        }
        uint32_t *yr = y + r * n;
        if (axis != BIB_MAX_RANK - 1) {
            if (i[axis] >= split)
                copy_words(yr, x1 + at1, p[13], n);
            else
                copy_words(yr, x0 + at0, p[6], n);
            continue;
        }
        size_t cut = split <= 0 ? 0 : (uint64_t)split < n ? (size_t)split : n;
        if (cut > 0) /* x0 + at0 is a word this row reads only then */
            copy_words(yr, x0 + at0, p[6], cut);
        if (cut < n)
            copy_words(yr + cut, x1 + at1 + (int64_t)cut * p[13], p[13], n - cut);
    }
}

/* TAKE: rows along the output's last (padded) axis; each element picks
 * in0 at its position with the indexed axis at in1's index (the VM checked
 * every index: run_take checks them again for direct callers). */
static void task_take(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const bib_call_t *c = t->call;
    const int64_t *p = c->p;
    const uint32_t *x = (const uint32_t *)c->in[0].buf + c->in[0].offset;
    const int32_t *idx = view_i32(&c->in[1]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    uint32_t d[BIB_MAX_RANK];
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++)
        d[k] = bib_view_padded_dim(&c->out, k);
    const size_t n = d[BIB_MAX_RANK - 1];
    int64_t i[BIB_MAX_RANK];
    odometer_start(i, d, begin);
    for (size_t r = begin; r < end; r++, odometer_step(i, d)) {
        int64_t at0 = 0, at1 = 0;
        for (int k = 0; k < BIB_MAX_RANK - 1; k++) {
            at0 += i[k] * p[k];
            at1 += i[k] * p[6 + k];
        }
        if (p[11] == 0) { /* one index for the whole row: a row of in0 */
            int64_t v = idx[at1];
            copy_words(y + r * n, x + at0 + (v < 0 ? v + p[13] : v) * p[12], p[5], n);
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            int64_t v = idx[at1 + (int64_t)j * p[11]];
            if (v < 0)
                v += p[13];
            y[r * n + j] = x[at0 + (int64_t)j * p[5] + v * p[12]];
        }
    }
}

static bib_status_t run_take(const bib_cpu_ctx_t *ctx, const bib_call_t *c, task_t *t) {
    size_t n = view_count(&c->in[1]);
    const int32_t *idx = view_i32(&c->in[1]);
    for (size_t i = 0; i < n; i++)
        if (idx[i] < -c->p[13] || idx[i] >= c->p[13]) {
            snprintf(ctx->error, ctx->error_len,
                     "take: index %d at position %zu is outside -%lld..%lld", (int)idx[i], i,
                     (long long)c->p[13], (long long)c->p[13] - 1);
            return BIB_E_TRAP;
        }
    size_t last = view_last(&c->out);
    run_parallel(ctx, last ? view_count(&c->out) / last : 0, row_grain(last), task_take, t);
    return BIB_OK;
}

/* The tiled STRIDED: when an output axis q other than the last reads in0
 * with stride 1 and the last does not (a transpose of some kind), rows read
 * one word per cache line. Then the output goes in tiles of STRIDED_TILE
 * along q by STRIDED_TILE along the last axis, whose reads and writes each
 * stay within STRIDED_TILE cache lines (16 x 16 measured fastest, about 4x
 * the untiled rows on a [64,512,512] transpose). A unit of work is one block of q
 * at one position of the other axes; the words moved are the same. */
#define STRIDED_TILE 16

typedef struct strided_tiles {
    const bib_call_t *call;
    uint32_t d[BIB_MAX_RANK];
    size_t ostride[BIB_MAX_RANK]; /* the output's own (contiguous) strides */
    int q;                        /* the axis read with stride 1 */
    size_t qblocks;
} strided_tiles_t;

static void task_strided_tiled(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const strided_tiles_t *st = arg;
    const bib_call_t *c = st->call;
    const int64_t *p = c->p;
    const uint32_t *x = (const uint32_t *)c->in[0].buf + c->in[0].offset;
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    const int last = BIB_MAX_RANK - 1, q = st->q;
    const size_t n = st->d[last], nq = st->d[q];
    const int64_t sj = p[1 + last];
    for (size_t u = begin; u < end; u++) {
        size_t rem = u / st->qblocks, q0 = (u % st->qblocks) * STRIDED_TILE;
        size_t q1 = q0 + STRIDED_TILE < nq ? q0 + STRIDED_TILE : nq;
        int64_t at = p[0];
        size_t yo = 0;
        for (int k = last - 1; k >= 0; k--) {
            if (k == q)
                continue;
            size_t i = rem % st->d[k];
            rem /= st->d[k];
            at += (int64_t)i * p[1 + k];
            yo += i * st->ostride[k];
        }
        /* Each output row of the tile is written in order; its reads are
           one word from each of the tile's input lines. */
        for (size_t j0 = 0; j0 < n; j0 += STRIDED_TILE) {
            size_t j1 = j0 + STRIDED_TILE < n ? j0 + STRIDED_TILE : n;
            for (size_t i = q0; i < q1; i++) {
                const uint32_t *src = x + at + (int64_t)i;
                uint32_t *dst = y + yo + i * st->ostride[q];
                for (size_t j = j0; j < j1; j++)
                    dst[j] = src[(int64_t)j * sj];
            }
        }
    }
}

/* Runs a STRIDED call, tiled when that helps (see above). */
static void run_strided(const bib_cpu_ctx_t *ctx, const bib_call_t *c, task_t *t) {
    strided_tiles_t st = {.call = c, .q = -1};
    size_t count = view_count(&c->out);
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++) {
        uint32_t at = k + c->out.rank;
        st.d[k] = at >= BIB_MAX_RANK ? c->out.dims[at - BIB_MAX_RANK] : 1;
    }
    size_t o = 1;
    for (int k = BIB_MAX_RANK - 1; k >= 0; k--) {
        st.ostride[k] = o;
        o *= st.d[k];
    }
    const int last = BIB_MAX_RANK - 1;
    /* One source (no split reachable), and the last axis strided. */
    bool one_source = c->p[15] >= (int64_t)st.d[c->p[14]];
    if (one_source && count > 0 && st.d[last] > 1 && c->p[1 + last] != 1)
        for (int k = last - 1; k >= 0 && st.q < 0; k--)
            if (c->p[1 + k] == 1 && st.d[k] > 1)
                st.q = k;
    if (st.q < 0) {
        size_t n = st.d[last];
        run_parallel(ctx, n ? count / n : 0, row_grain(n), task_strided, t);
        return;
    }
    st.qblocks = (st.d[st.q] + STRIDED_TILE - 1) / STRIDED_TILE;
    size_t units = count / st.d[st.q] / st.d[last] * st.qblocks;
    run_parallel(ctx, units, row_grain((size_t)STRIDED_TILE * st.d[last]), task_strided_tiled, &st);
}

static void task_rng(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const bib_call_t *c = t->call;
    float *y = view_f32(&c->out);
    uint64_t seed = (uint64_t)c->i[0], stream = (uint64_t)c->i[1];
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (size_t e = begin; e < end;) {
        uint64_t block = e / 4;
        uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream,
                           (uint32_t)(stream >> 32)};
        uint32_t words[4];
        bib_cpu_philox4x32_10(ctr, key, words);
        for (size_t w = e % 4; w < 4 && e < end; w++, e++)
            y[e] = (float)(words[w] >> 8) * 0x1p-24f;
    }
}

/* ATTENTION: a task unit is one head and a block of (at most) ATTN_BLOCK queries. Both
 * products run on the GEMM, whose chains are the contract's: the scores
 * q.k^T, and p.v over the keys every row of the block sees (the first row's
 * valid count; all of them when not causal). A causal row that sees more
 * continues its chains with axpy, one fma per key in the same ascending
 * order, so it is one chain still. Only valid keys are ever read, so a masked
 * key is never exp'd and never touches the sum or the output. ATTN_BLOCK is a
 * multiple of both micro-kernels' row tiles (14 and 6). */
#define ATTN_BLOCK 42

/* The scratch of all chunks together may take the call's operands' bytes, or
 * this much when that is more: it is outside the VM's memory cap, so it must
 * stay in proportion to the tensors the cap counts. */
#define ATTN_SCRATCH_MIN ((size_t)64 << 20)

typedef struct attn_task {
    const bib_cpu_ctx_t *ctx;
    const bib_call_t *call;
    size_t block;   /* queries per unit: ATTN_BLOCK, fewer when the scratch would not fit */
    float *scratch; /* per chunk: block * T scores, then D * T for k^T */
    size_t scratch_floats;
    atomic_int failed;
} attn_task_t;

/* kt[d][j] = k[j][h][d]: one head's keys as a [D, T] matrix, so that q.k^T
 * reads its B in place, row by row, instead of packing the transposed keys
 * again for every block of queries (measured: a fifth of ATTENTION's time
 * at S = T = 512, D = 64). The products' chains are the same. */
static void attn_keys_transposed(const float *k, size_t t_len, size_t stride, size_t d_len,
                                 float *kt) {
    enum { TILE = 8 };
    size_t j = 0;
    for (; j + TILE <= t_len; j += TILE) {
        const float *r = k + j * stride;
        for (size_t d = 0; d < d_len; d++) {
            float *dst = kt + d * t_len + j;
            for (size_t u = 0; u < TILE; u++)
                dst[u] = r[u * stride + d];
        }
    }
    for (; j < t_len; j++)
        for (size_t d = 0; d < d_len; d++)
            kt[d * t_len + j] = k[j * stride + d];
}

static size_t attn_valid(const bib_call_t *c, size_t i) {
    size_t s_len = c->in[0].dims[0], t_len = c->in[1].dims[0];
    if (!c->sub)
        return t_len;
    /* Causal: query i sees keys j <= i + (T - S), queries aligned with the
     * last S keys. */
    int64_t limit = (int64_t)i + (int64_t)t_len - (int64_t)s_len + 1;
    return limit <= 0 ? 0 : (size_t)limit < t_len ? (size_t)limit : t_len;
}

static void task_attention(void *arg, size_t begin, size_t end, uint32_t chunk) {
    attn_task_t *t = arg;
    const bib_call_t *c = t->call;
    const bib_cpu_rowops_t *ro = t->ctx->rowops;
    size_t s_len = c->in[0].dims[0], heads = c->in[0].dims[1], d_len = c->in[0].dims[2];
    size_t t_len = c->in[1].dims[0], stride = heads * d_len;
    size_t block = t->block, blocks = (s_len + block - 1) / block;
    const float *q = view_f32(&c->in[0]), *k = view_f32(&c->in[1]), *v = view_f32(&c->in[2]);
    float *o = view_f32(&c->out);
    float *scores = t->scratch + (size_t)chunk * t->scratch_floats;
    float *kt = scores + block * t_len;
    size_t kt_head = SIZE_MAX; /* the head whose keys kt holds */
    for (size_t unit = begin; unit < end; unit++) {
        size_t h = unit / blocks, i0 = (unit % blocks) * block;
        size_t rows = s_len - i0 < block ? s_len - i0 : block;
        size_t cols = attn_valid(c, i0 + rows - 1);
        if (cols) {
            if (kt_head != h) {
                attn_keys_transposed(k + h * d_len, t_len, stride, d_len, kt);
                kt_head = h;
            }
            bib_gemm_t g = {.m = rows,
                            .n = cols,
                            .k = d_len,
                            .a = q + i0 * stride + h * d_len,
                            .lda = stride,
                            .b = kt,
                            .ldb = t_len,
                            .c = scores,
                            .ldc = t_len};
            if (bib_gemm_f32(NULL, t->ctx->level, &g) != BIB_OK) {
                atomic_store(&t->failed, 1);
                return;
            }
        }
        for (size_t r = 0; r < rows; r++) {
            size_t n_valid = attn_valid(c, i0 + r);
            float *p = scores + r * t_len;
            ro->scale(p, c->f[0], p, n_valid);
            ro->softmax(p, p, n_valid);
        }
        /* Rows see nondecreasing key counts, so the first row's is common. */
        size_t common = attn_valid(c, i0);
        bib_gemm_t pv = {.m = rows,
                         .n = d_len,
                         .k = common,
                         .a = scores,
                         .lda = t_len,
                         .b = v + h * d_len,
                         .ldb = stride,
                         .c = o + i0 * stride + h * d_len,
                         .ldc = stride};
        if (bib_gemm_f32(NULL, t->ctx->level, &pv) != BIB_OK) {
            atomic_store(&t->failed, 1);
            return;
        }
        for (size_t r = 0; r < rows; r++) {
            size_t n_valid = attn_valid(c, i0 + r);
            float *p = scores + r * t_len;
            float *oi = o + (i0 + r) * stride + h * d_len;
            for (size_t j = common; j < n_valid; j++)
                ro->axpy(p[j], v + j * stride + h * d_len, oi, d_len);
            if (n_valid > common)
                for (size_t d = 0; d < d_len; d++)
                    oi[d] = bib_f32_canon(oi[d]);
        }
    }
}

/* Queries per unit and the grain of the units, so that every chunk's scratch
 * together stays within the budget (ATTN_SCRATCH_MIN): fewer chunks first,
 * then fewer queries per unit, down to one chunk of one query, whose
 * scratch, T + D * T floats, is no more than k and v. Neither choice changes
 * a bit: every output is its own chains whatever the blocks and chunks. */
static void attn_plan(const bib_cpu_ctx_t *ctx, const bib_call_t *c, attn_task_t *t, size_t *units,
                      size_t *grain) {
    size_t s_len = c->in[0].dims[0], heads = c->in[0].dims[1], d_len = c->in[0].dims[2];
    size_t t_len = c->in[1].dims[0] ? c->in[1].dims[0] : 1;
    size_t budget = 4 * (view_count(&c->in[0]) + view_count(&c->in[1]) + view_count(&c->in[2]) +
                         view_count(&c->out));
    if (budget < ATTN_SCRATCH_MIN)
        budget = ATTN_SCRATCH_MIN;
    size_t block = s_len < ATTN_BLOCK ? (s_len ? s_len : 1) : ATTN_BLOCK;
    const size_t row = t_len * sizeof(float), keys = d_len * row;
    if ((block * row + keys) > budget) {
        /* One chunk, and the queries that fit beside the keys. */
        block = budget > keys ? (budget - keys) / row : 1;
        block = block == 0 ? 1 : block > ATTN_BLOCK ? ATTN_BLOCK : block;
    }
    *units = heads * ((s_len + block - 1) / block);
    *grain = row_grain(ATTN_BLOCK * t_len * (d_len ? d_len : 1) * 2);
    size_t begin, end, per_chunk = block * row + keys;
    uint32_t threads = bib_threadpool_size(ctx->pool);
    size_t chunks = bib_threadpool_chunk(*units, *grain, threads, 0, &begin, &end);
    if (chunks > 1 && chunks * per_chunk > budget) {
        size_t fit = budget / per_chunk ? budget / per_chunk : 1;
        size_t g = (*units + fit - 1) / fit;
        *grain = g > *grain ? g : *grain;
    }
    t->block = block;
    t->scratch_floats = block * t_len + d_len * t_len;
}

static bib_status_t run_attention(const bib_cpu_ctx_t *ctx, const bib_call_t *c) {
    if (view_count(&c->out) == 0) /* no query, head or width: nothing to compute */
        return BIB_OK;
    attn_task_t t = {.ctx = ctx, .call = c};
    atomic_init(&t.failed, 0);
    size_t units, grain, begin, end;
    attn_plan(ctx, c, &t, &units, &grain);
    size_t chunks =
        bib_threadpool_chunk(units, grain, bib_threadpool_size(ctx->pool), 0, &begin, &end);
    t.scratch = malloc((chunks ? chunks : 1) * t.scratch_floats * sizeof(float));
    if (!t.scratch) {
        snprintf(ctx->error, ctx->error_len, "attention: out of memory for %zu x %zu scores",
                 t.block, (size_t)c->in[1].dims[0]);
        return BIB_E_NOMEM;
    }
    run_parallel(ctx, units, grain, task_attention, &t);
    free(t.scratch);
    if (atomic_load(&t.failed)) {
        snprintf(ctx->error, ctx->error_len, "attention: out of memory in a matrix multiply");
        return BIB_E_NOMEM;
    }
    return BIB_OK;
}

static bib_status_t run_gather(const bib_cpu_ctx_t *ctx, const bib_call_t *c) {
    size_t rows = c->in[0].dims[0];
    size_t width = view_count(&c->in[0]) / (rows ? rows : 1);
    size_t n = view_count(&c->in[1]);
    const int32_t *idx = view_i32(&c->in[1]);
    int64_t bad = bib_gather_bad_index(idx, n, rows);
    if (bad >= 0) {
        bib_gather_index_message(ctx->error, ctx->error_len, idx[bad], bad, rows);
        return BIB_E_TRAP;
    }
    const uint32_t *x = (const uint32_t *)c->in[0].buf + c->in[0].offset;
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    for (size_t r = 0; r < n; r++)
        memcpy(y + r * width, x + (size_t)idx[r] * width, width * sizeof *y);
    return BIB_OK;
}

/* ---- CONV, POOL, BATCHNORM ------------------------------------------------ */

/* A call's spatial geometry: rank-3 views are 2-D with H = KH = 1 (the
 * VM's checks make the h words 1, 1, 0, 0 then). */
typedef struct geom {
    size_t n, c, h, w;      /* x [N,C,H,W] */
    size_t oc, oh, ow;      /* out [N,OC,OH,OW] */
    size_t kh, kw;          /* window taps */
    int64_t sh, sw, dh, dw; /* stride, dilation */
    int64_t pt, pl;         /* the low pads (the high ones only size the output) */
} geom_t;

static geom_t call_geom(const bib_call_t *c) {
    const bib_view_t *x = &c->in[0], *o = &c->out;
    bool one_d = x->rank == 3;
    geom_t g = {.n = x->dims[0],
                .c = x->dims[1],
                .h = one_d ? 1 : x->dims[2],
                .w = x->dims[x->rank - 1],
                .oc = o->dims[1],
                .oh = one_d ? 1 : o->dims[2],
                .ow = o->dims[o->rank - 1]};
    const int64_t *p = c->p;
    if (c->kernel == BIB_KERNEL_CONV) {
        const bib_view_t *wt = &c->in[1];
        g.kh = one_d ? 1 : wt->dims[2];
        g.kw = wt->dims[wt->rank - 1];
        g.sh = p[1], g.sw = p[2], g.dh = p[3], g.dw = p[4], g.pt = p[5], g.pl = p[6];
    } else {
        g.kh = (size_t)p[0], g.kw = (size_t)p[1];
        g.sh = p[2], g.sw = p[3], g.dh = p[4], g.dw = p[5], g.pt = p[6], g.pl = p[7];
    }
    return g;
}

/* Output rows [oh, oh + rows) of plane x under g's window. */
static bib_window_rows_t window_rows(const geom_t *g, const float *x, size_t oh, size_t rows) {
    return (bib_window_rows_t){.x = x,
                               .kh = g->kh,
                               .kw = g->kw,
                               .h = g->h,
                               .in_w = g->w,
                               .ow = g->ow,
                               .rows = rows,
                               .ih0 = (int64_t)oh * g->sh - g->pt,
                               .sh = g->sh,
                               .dh = g->dh,
                               .off0 = -g->pl,
                               .sw = g->sw,
                               .dw = g->dw};
}

/* The outputs [lo, hi) of a row of ow whose tap at offset off = k*d - pad
 * (input position ow*s + off) falls inside 0..n-1. */
static void tap_range(int64_t off, int64_t s, size_t n, size_t ow, size_t *lo, size_t *hi) {
    /* ow*s + off >= 0  and  ow*s + off <= n - 1 */
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t last = (int64_t)n - 1 - off;
    int64_t b = last < 0 ? 0 : last / s + 1;
    if (b > (int64_t)ow)
        b = (int64_t)ow;
    if (a > b)
        a = b;
    *lo = (size_t)a, *hi = (size_t)b;
}

/* a[i] = fma(w, +0, a[i]) for i < n: the padding taps of a row. The
 * product w * +0 is exact (a zero, or NaN for an infinite or NaN w), so the
 * fma is that one add: the same bits, without an fma per element. */
static void fma_zero(float w, float *a, size_t n) {
    const float z = w * 0.0f;
    for (size_t i = 0; i < n; i++)
        a[i] = a[i] + z;
}

/* The strided taps of a row gathered into a contiguous block, so the chain
 * step is an axpy at every stride. */
#define CONV_GATHER 256

/* CONV, the direct form: a task unit is one output row (n, o, oh). The row
 * itself holds the OW accumulators; the loops run c, kh, kw ascending outside
 * the positions, so each output receives its fmas in the contract's order
 * (spec/numerics.md section 12a), padding taps as fma(w, +0, acc): every
 * lane its own chain, never split along the taps. */
static void task_conv(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const bib_call_t *c = t->call;
    const geom_t g = call_geom(c);
    const size_t groups = (size_t)c->p[0], cg = g.c / groups, og = g.oc / groups;
    const float *x = view_f32(&c->in[0]), *wt = view_f32(&c->in[1]);
    float *y = view_f32(&c->out);
    for (size_t row = begin; row < end; row++) {
        size_t oh = row % g.oh, o = (row / g.oh) % g.oc, n = row / (g.oh * g.oc);
        size_t c0 = (o / og) * cg;
        float *acc = y + row * g.ow;
        if (t->ctx->rowops->conv_rows != NULL) {
            /* The rows of this plane in the task, in one call. */
            size_t rows = g.oh - oh < end - row ? g.oh - oh : end - row;
            bib_conv_rows_t r = {.win = window_rows(&g, x + (n * g.c + c0) * g.h * g.w, oh, rows),
                                 .wt = wt + o * cg * g.kh * g.kw,
                                 .cg = cg};
            if (t->ctx->rowops->conv_rows(&r, acc)) {
                row += rows - 1;
                continue;
            }
        }
        for (size_t j = 0; j < g.ow; j++)
            acc[j] = 0.0f;
        for (size_t ci = 0; ci < cg; ci++) {
            const float *xc = x + (n * g.c + c0 + ci) * g.h * g.w;
            const float *wc = wt + (o * cg + ci) * g.kh * g.kw;
            for (size_t i = 0; i < g.kh; i++) {
                int64_t ih = (int64_t)oh * g.sh - g.pt + (int64_t)i * g.dh;
                bool h_pad = ih < 0 || ih >= (int64_t)g.h;
                const float *xr = xc + (h_pad ? 0 : (size_t)ih * g.w);
                for (size_t j = 0; j < g.kw; j++) {
                    float wv = wc[i * g.kw + j];
                    if (h_pad) {
                        fma_zero(wv, acc, g.ow);
                        continue;
                    }
                    int64_t off = (int64_t)j * g.dw - g.pl;
                    size_t lo, hi;
                    tap_range(off, g.sw, g.w, g.ow, &lo, &hi);
                    fma_zero(wv, acc, lo);
                    if (g.sw == 1) {
                        t->ctx->rowops->axpy(wv, xr + (int64_t)lo + off, acc + lo, hi - lo);
                    } else {
                        float gathered[CONV_GATHER];
                        for (size_t q0 = lo; q0 < hi; q0 += CONV_GATHER) {
                            size_t m = hi - q0 < CONV_GATHER ? hi - q0 : CONV_GATHER;
                            for (size_t q = 0; q < m; q++)
                                gathered[q] = xr[(int64_t)(q0 + q) * g.sw + off];
                            t->ctx->rowops->axpy(wv, gathered, acc + q0, m);
                        }
                    }
                    fma_zero(wv, acc + hi, g.ow - hi);
                }
            }
        }
        for (size_t j = 0; j < g.ow; j++)
            acc[j] = bib_f32_canon(acc[j]);
    }
}

/* CONV through the GEMM: per image and group, out[og, OH*OW] = w[og, K] .
 * col[K, OH*OW] with K = C/g * KH * KW in (c, kh, kw) order and padding
 * taps +0 in col, which is the contract's chain exactly (the GEMM's is
 * fma over k ascending from +0, then canonical NaN). col holds a block of
 * up to CONV_COLS output positions at a time, fewer when K is long (about
 * CONV_COL_BYTES in all); the block only bounds memory, never what a chain
 * adds. Returns false, having written nothing, when col cannot be had (the
 * direct form then runs the same chains). */
#define CONV_COLS ((size_t)2048)
#define CONV_COL_BYTES ((size_t)16 << 20)
/* Where the GEMM form takes over: a group's outputs and taps. */
#define CONV_GEMM_MIN_OUT 4
#define CONV_GEMM_MIN_TAPS 8

/* Row r = (c, kh, kw) of the column block: the input under tap r for the
 * output positions p0 .. p0+cols, +0 where the tap is padding. */
static void conv_col_row(const geom_t *g, const float *xg, size_t r, size_t p0, size_t cols,
                         float *dst) {
    size_t ci = r / (g->kh * g->kw), i = r / g->kw % g->kh, j = r % g->kw;
    const float *xc = xg + ci * g->h * g->w;
    int64_t off = (int64_t)j * g->dw - g->pl;
    size_t lo, hi;
    tap_range(off, g->sw, g->w, g->ow, &lo, &hi);
    size_t oh = p0 / g->ow, ow = p0 % g->ow;
    for (size_t q = 0; q < cols; oh++, ow = 0) {
        size_t run = g->ow - ow < cols - q ? g->ow - ow : cols - q;
        int64_t ih = (int64_t)oh * g->sh - g->pt + (int64_t)i * g->dh;
        float *d = dst + q - ow; /* d[ow'] for ow' in [ow, ow + run) */
        size_t end = ow + run;
        if (ih < 0 || ih >= (int64_t)g->h) {
            for (size_t u = ow; u < end; u++)
                d[u] = 0.0f;
        } else {
            const float *xr = xc + (size_t)ih * g->w;
            size_t a = lo > ow ? lo : ow, b = hi < end ? hi : end;
            if (a > b)
                a = b = (lo > end ? end : a);
            for (size_t u = ow; u < a; u++)
                d[u] = 0.0f;
            if (g->sw == 1) {
                if (b > a)
                    memcpy(d + a, xr + (int64_t)a + off, (b - a) * sizeof *d);
            } else {
                for (size_t u = a; u < b; u++)
                    d[u] = xr[(int64_t)u * g->sw + off];
            }
            for (size_t u = b; u < end; u++)
                d[u] = 0.0f;
        }
        q += run;
    }
}

/* The column block's rows [begin, end), one task each on the pool. */
typedef struct col_task {
    const geom_t *g;
    const float *xg;
    size_t p0, cols;
    float *col;
} col_task_t;

static void task_col(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const col_task_t *t = arg;
    for (size_t r = begin; r < end; r++)
        conv_col_row(t->g, t->xg, r, t->p0, t->cols, t->col + r * t->cols);
}

static bool conv_gemm(const bib_cpu_ctx_t *ctx, const bib_call_t *c, bib_status_t *status) {
    const geom_t g = call_geom(c);
    const size_t groups = (size_t)c->p[0], cg = g.c / groups, og = g.oc / groups;
    const size_t k = cg * g.kh * g.kw, positions = g.oh * g.ow;
    const float *x = view_f32(&c->in[0]), *wt = view_f32(&c->in[1]);
    float *y = view_f32(&c->out);
    /* A 1x1 window at stride 1 without padding: the columns are the input's
     * planes as they are (row r = channel r), so B is read in place. */
    const bool plain = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 &&
                       g.oh == g.h && g.ow == g.w;
    size_t block = CONV_COL_BYTES / sizeof(float) / k;
    block = plain ? positions : block < 16 ? 16 : block > CONV_COLS ? CONV_COLS : block;
    float *col = plain ? NULL : malloc(k * block * sizeof *col);
    if (!plain && !col)
        return false;
    bib_status_t st = BIB_OK;
    for (size_t n = 0; n < g.n && st == BIB_OK; n++) {
        for (size_t gi = 0; gi < groups && st == BIB_OK; gi++) {
            const float *xg = x + (n * g.c + gi * cg) * g.h * g.w;
            for (size_t p0 = 0; p0 < positions && st == BIB_OK; p0 += block) {
                size_t cols = positions - p0 < block ? positions - p0 : block;
                if (!plain) {
                    col_task_t ct = {.g = &g, .xg = xg, .p0 = p0, .cols = cols, .col = col};
                    run_parallel(ctx, k, row_grain(cols), task_col, &ct);
                }
                bib_gemm_t gm = {.m = og,
                                 .n = cols,
                                 .k = k,
                                 .a = wt + gi * og * k,
                                 .lda = k,
                                 .b = plain ? xg : col,
                                 .ldb = cols,
                                 .c = y + (n * g.oc + gi * og) * positions + p0,
                                 .ldc = positions};
                st = bib_gemm_f32(ctx->pool, ctx->level, &gm);
            }
        }
    }
    free(col);
    if (st != BIB_OK)
        snprintf(ctx->error, ctx->error_len, "conv: out of memory for packing buffers");
    *status = st;
    return true;
}

/* POOL: a task unit is one output row (n, c, oh); each output walks its
 * window's taps in (kh, kw) ascending order, skipping the padding. */
static void task_pool(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const bib_call_t *c = t->call;
    const geom_t g = call_geom(c);
    const bool avg = c->sub == BIB_POOL_AVG, include_pad = c->p[11] != 0;
    /* The padded extent the divisor counts with count_include_pad. */
    const int64_t h_end = (int64_t)g.h + c->p[8], w_end = (int64_t)g.w + c->p[9];
    const float *x = view_f32(&c->in[0]);
    float *y = view_f32(&c->out);
    for (size_t row = begin; row < end; row++) {
        size_t oh = row % g.oh, plane = row / g.oh;
        const float *xp = x + plane * g.h * g.w;
        if (t->ctx->rowops->pool_rows != NULL) {
            size_t rows = g.oh - oh < end - row ? g.oh - oh : end - row;
            bib_pool_rows_t r = {.win = window_rows(&g, xp, oh, rows),
                                 .avg = avg,
                                 .include_pad = include_pad,
                                 .pt = g.pt,
                                 .pl = g.pl,
                                 .h_end = h_end,
                                 .w_end = w_end};
            if (t->ctx->rowops->pool_rows(&r, y + row * g.ow)) {
                row += rows - 1;
                continue;
            }
        }
        for (size_t ow = 0; ow < g.ow; ow++) {
            int64_t h0 = (int64_t)oh * g.sh - g.pt, w0 = (int64_t)ow * g.sw - g.pl;
            float sum = 0.0f;
            int32_t best = bib_f32_order_key(-INFINITY);
            bool nan = false;
            uint32_t count = 0;
            for (size_t i = 0; i < g.kh; i++) {
                int64_t ih = h0 + (int64_t)i * g.dh;
                bool h_in = ih >= 0 && ih < (int64_t)g.h;
                for (size_t j = 0; j < g.kw; j++) {
                    int64_t iw = w0 + (int64_t)j * g.dw;
                    bool w_in = iw >= 0 && iw < (int64_t)g.w;
                    if (h_in && w_in) {
                        float v = xp[(size_t)ih * g.w + (size_t)iw];
                        if (avg) {
                            sum = sum + v;
                        } else if (v != v) {
                            nan = true;
                        } else {
                            int32_t key = bib_f32_order_key(v);
                            best = key > best ? key : best;
                        }
                        count++;
                    } else if (include_pad && ih >= -g.pt && ih < h_end && iw >= -g.pl &&
                               iw < w_end) {
                        count++;
                    }
                }
            }
            float out;
            if (avg) {
                out = sum / (float)count;
            } else if (nan) {
                out = bib_f32_canonical_nan();
            } else {
                out = bib_f32_from_order_key(best);
            }
            y[row * g.ow + ow] = bib_f32_canon(out);
        }
    }
}

/* BATCHNORM (and BATCHNORM_RELU): a task unit is one (n, c) plane. */
static void task_batchnorm(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    task_t *t = arg;
    const bib_call_t *c = t->call;
    const size_t channels = c->in[0].dims[1], plane = t->row_len;
    const float *x = view_f32(&c->in[0]), *st = view_f32(&c->in[1]);
    float *y = view_f32(&c->out);
    for (size_t u = begin; u < end; u++) {
        size_t ch = u % channels;
        float scale = st[ch], bias = st[channels + ch], mean = st[2 * channels + ch];
        float den = sqrtf(st[3 * channels + ch] + c->f[0]);
        t->ctx->rowops->batchnorm(x + u * plane, y + u * plane, plane, mean, den, scale, bias,
                                  c->sub == BIB_ACT_RELU);
    }
}

static bool all_f32(const bib_call_t *c, int inputs) {
    if (c->out.dtype != BIB_DTYPE_F32)
        return false;
    for (int i = 0; i < inputs; i++)
        if (c->in[i].buf && c->in[i].dtype != BIB_DTYPE_F32)
            return false;
    return true;
}

_Static_assert(BIB_KERNEL__COUNT == 26, "a kernel was added to isa/kernels.def: give it its "
                                        "rule in bib_cpu_ops_supports and its run in "
                                        "bib_cpu_ops_run");

bool bib_cpu_ops_supports(const bib_call_t *c) {
    if ((unsigned)c->kernel >= BIB_KERNEL__COUNT || c->sub >= bib_kernel_table[c->kernel].subs)
        return false;
    switch (c->kernel) {
    case BIB_KERNEL_MATMUL:
        return all_f32(c, 3) && c->in[0].rank == 2 && c->in[1].rank == 2;
    case BIB_KERNEL_TRANSPOSE:
        return c->in[0].rank >= 2 && c->in[0].dtype == c->out.dtype;
    case BIB_KERNEL_SOFTMAX:
    case BIB_KERNEL_SCALE:
    case BIB_KERNEL_LAYERNORM:
    case BIB_KERNEL_RMSNORM:
        return all_f32(c, 3);
    case BIB_KERNEL_UNARY:
        return all_f32(c, 1) || (c->out.dtype == BIB_DTYPE_I32 && bib_cpu_dtypes_supports(c));
    case BIB_KERNEL_BINARY:
        return all_f32(c, 2) || (c->out.dtype == BIB_DTYPE_I32 && bib_cpu_dtypes_supports(c));
    case BIB_KERNEL_REDUCE: /* p[0] > 0: the column form, in0 [outer, n, p[0]] */
        return all_f32(c, 1) &&
               (c->p[0] == 0 || (c->in[0].rank == 3 && c->in[0].dims[2] == (uint64_t)c->p[0]));
    case BIB_KERNEL_ATTENTION:
        return all_f32(c, 3) && c->in[0].rank == 3 && c->in[1].rank == 3 && c->in[2].rank == 3;
    case BIB_KERNEL_GATHER:
        return c->in[1].dtype == BIB_DTYPE_I32 && c->in[0].dtype == c->out.dtype &&
               c->in[0].rank >= 1;
    case BIB_KERNEL_ARGMAX:
        return c->in[0].dtype == BIB_DTYPE_F32 && c->out.dtype == BIB_DTYPE_I32;
    case BIB_KERNEL_ARGSORT: { /* out: the first k <= n of each row */
        size_t n = view_last(&c->in[0]), k = view_last(&c->out);
        return c->in[0].dtype == BIB_DTYPE_F32 && c->out.dtype == BIB_DTYPE_I32 &&
               c->in[0].rank >= 1 && c->out.rank == c->in[0].rank && k <= n &&
               (n == 0 ? view_count(&c->out) == 0
                       : view_count(&c->out) == view_count(&c->in[0]) / n * k);
    }
    case BIB_KERNEL_CUMSUM: /* p[0] > 0: the column form, in0 [outer, n, p[0]] */
        return (all_f32(c, 1) ||
                (c->in[0].dtype == BIB_DTYPE_I32 && c->out.dtype == BIB_DTYPE_I32)) &&
               view_count(&c->in[0]) == view_count(&c->out) &&
               (c->p[0] == 0 || (c->in[0].rank == 3 && c->in[0].dims[2] == (uint64_t)c->p[0]));
    case BIB_KERNEL_FILL:
    case BIB_KERNEL_COPY:
        return true;
    case BIB_KERNEL_RNG:
        return c->out.dtype == BIB_DTYPE_F32;
    case BIB_KERNEL_CAST:
    case BIB_KERNEL_COMPARE:
    case BIB_KERNEL_WHERE:
    case BIB_KERNEL_LOGIC:
        return bib_cpu_dtypes_supports(c);
    case BIB_KERNEL_STRIDED:
        return bib_call_strided_ok(c);
    case BIB_KERNEL_TAKE:
        return bib_call_take_ok(c);
    case BIB_KERNEL_CONV:
        return all_f32(c, 2) && (c->in[0].rank == 3 || c->in[0].rank == 4) &&
               c->in[1].rank == c->in[0].rank && c->out.rank == c->in[0].rank && c->p[0] >= 1;
    case BIB_KERNEL_POOL:
        return all_f32(c, 1) && (c->in[0].rank == 3 || c->in[0].rank == 4) &&
               c->out.rank == c->in[0].rank;
    case BIB_KERNEL_BATCHNORM:
        return all_f32(c, 2) && c->in[0].rank >= 2 && c->in[1].rank == 2 && c->in[1].dims[0] == 4 &&
               c->in[1].dims[1] == c->in[0].dims[1];
    case BIB_KERNEL__COUNT:
        break;
    }
    return false;
}

bib_status_t bib_cpu_ops_run(const bib_cpu_ctx_t *ctx, const bib_call_t *c) {
    task_t t = {.ctx = ctx, .call = c};
    size_t count = view_count(&c->out);
    size_t last = view_last(&c->in[0]);
    size_t rows = last ? view_count(&c->in[0]) / last : 0;
    switch (c->kernel) {
    case BIB_KERNEL_MATMUL:
        return run_matmul(ctx, c);
    case BIB_KERNEL_TRANSPOSE: {
        size_t cols = c->in[0].dims[c->in[0].rank - 1];
        size_t in_rows = c->in[0].dims[c->in[0].rank - 2];
        size_t out_rows = in_rows ? count / in_rows : 0;
        (void)cols;
        run_parallel(ctx, out_rows, row_grain(in_rows), task_transpose, &t);
        return BIB_OK;
    }
    case BIB_KERNEL_UNARY:
        if (c->out.dtype == BIB_DTYPE_I32)
            return bib_cpu_dtypes_run(ctx, c);
        run_parallel(ctx, count, ELEMENT_GRAIN, task_unary, &t);
        return BIB_OK;
    case BIB_KERNEL_BINARY: {
        if (c->out.dtype == BIB_DTYPE_I32)
            return bib_cpu_dtypes_run(ctx, c);
        size_t nb = view_count(&c->in[1]);
        if (nb == count || nb == 1) {
            t.row_len = nb == count ? 1 : 0;
            run_parallel(ctx, count, ELEMENT_GRAIN, task_binary_flat, &t);
        } else {
            t.row_len = last;
            run_parallel(ctx, rows, row_grain(last), task_binary_rows, &t);
        }
        return BIB_OK;
    }
    case BIB_KERNEL_SCALE:
        run_parallel(ctx, count, ELEMENT_GRAIN, task_scale, &t);
        return BIB_OK;
    case BIB_KERNEL_REDUCE:
        if (c->p[0] != 0) {
            run_parallel(ctx, cols_units(c), 1, task_reduce_cols, &t);
            return BIB_OK;
        }
        /* fall through */
    case BIB_KERNEL_SOFTMAX:
    case BIB_KERNEL_LAYERNORM:
    case BIB_KERNEL_RMSNORM:
    case BIB_KERNEL_ARGMAX: {
        /* A task per row (bib_call_rows): REDUCE's and ARGMAX's rows of
         * length 0 still get their output (+0, -Inf, NaN or index 0), never
         * left unwritten. */
        static const bib_parallel_fn row_task[BIB_KERNEL__COUNT] = {
            [BIB_KERNEL_SOFTMAX] = task_softmax,
            [BIB_KERNEL_LAYERNORM] = task_layernorm,
            [BIB_KERNEL_RMSNORM] = task_rmsnorm,
            [BIB_KERNEL_REDUCE] = task_reduce,
            [BIB_KERNEL_ARGMAX] = task_argmax};
        uint32_t n;
        uint64_t call_rows = bib_call_rows(c, &n);
        t.row_len = n;
        t.stream = c->kernel != BIB_KERNEL_REDUCE && c->kernel != BIB_KERNEL_ARGMAX &&
                   count * sizeof(float) >= STREAM_MIN_BYTES;
        run_parallel(ctx, call_rows, row_grain(n), row_task[c->kernel], &t);
        return BIB_OK;
    }
    case BIB_KERNEL_ATTENTION:
        return run_attention(ctx, c);
    case BIB_KERNEL_GATHER:
        return run_gather(ctx, c);
    case BIB_KERNEL_FILL: {
        uint32_t word =
            c->out.dtype == BIB_DTYPE_I32 ? (uint32_t)(int32_t)c->i[0] : bib_f32_bits(c->f[0]);
        uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
        for (size_t e = 0; e < count; e++)
            y[e] = word;
        return BIB_OK;
    }
    case BIB_KERNEL_RNG:
        run_parallel(ctx, count, ELEMENT_GRAIN, task_rng, &t);
        return BIB_OK;
    case BIB_KERNEL_CAST:
    case BIB_KERNEL_COMPARE:
    case BIB_KERNEL_WHERE:
    case BIB_KERNEL_LOGIC:
        return bib_cpu_dtypes_run(ctx, c);
    case BIB_KERNEL_STRIDED:
        run_strided(ctx, c, &t);
        return BIB_OK;
    case BIB_KERNEL_TAKE:
        return run_take(ctx, c, &t);
    case BIB_KERNEL_CONV: {
        /* Both forms compute the same chains (the GEMM where a group has
         * enough outputs and taps to fill its tiles); rows of OW outputs
         * otherwise, the grain by the row's fmas. */
        geom_t g = call_geom(c);
        size_t og = g.oc / (size_t)c->p[0];
        size_t taps = (g.c / (size_t)c->p[0]) * g.kh * g.kw;
        bib_status_t st;
        if (og >= CONV_GEMM_MIN_OUT && taps >= CONV_GEMM_MIN_TAPS && g.oh * g.ow > 0 && g.n > 0 &&
            conv_gemm(ctx, c, &st))
            return st;
        run_parallel(ctx, g.n * g.oc * g.oh, row_grain(g.ow * (taps ? taps : 1)), task_conv, &t);
        return BIB_OK;
    }
    case BIB_KERNEL_POOL: {
        geom_t g = call_geom(c);
        run_parallel(ctx, g.n * g.oc * g.oh, row_grain(g.ow * g.kh * g.kw), task_pool, &t);
        return BIB_OK;
    }
    case BIB_KERNEL_ARGSORT: {
        argsort_task_t a = {.t = {.ctx = ctx, .call = c, .row_len = last},
                            .k = c->out.dims[c->out.rank - 1]};
        atomic_init(&a.nomem, false);
        run_parallel(ctx, rows, row_grain(8 * last), task_argsort, &a);
        if (atomic_load(&a.nomem)) {
            snprintf(ctx->error, ctx->error_len, "argsort: out of memory for a row's keys (%zu)",
                     last);
            return BIB_E_NOMEM;
        }
        return BIB_OK;
    }
    case BIB_KERNEL_CUMSUM:
        if (c->p[0] != 0) {
            run_parallel(ctx, cols_units(c), 1, task_cumsum_cols, &t);
            return BIB_OK;
        }
        t.row_len = last;
        run_parallel(ctx, rows, row_grain(last), task_cumsum, &t);
        return BIB_OK;
    case BIB_KERNEL_BATCHNORM: {
        size_t planes = c->in[0].dims[0] * c->in[0].dims[1];
        t.row_len = planes ? count / planes : 0;
        run_parallel(ctx, planes, row_grain(t.row_len), task_batchnorm, &t);
        return BIB_OK;
    }
    case BIB_KERNEL_COPY:
        memmove((uint32_t *)c->out.buf + c->out.offset, (uint32_t *)c->in[0].buf + c->in[0].offset,
                count * sizeof(uint32_t));
        return BIB_OK;
    case BIB_KERNEL__COUNT:
        break;
    }
    snprintf(ctx->error, ctx->error_len, "cpu: kernel %d is not a tensor kernel", (int)c->kernel);
    return BIB_E_USAGE;
}
