/* backends/cuda/cu_kernels.c: the CUDA executor's kernels and its ops table.
 *
 * Each kernel checks its views against their buffers, fills one
 * bib_cu_args_t on the stack and queues one launch (or one driver memset or
 * copy) on the executor's stream; nothing here waits, except GATHER, whose
 * out-of-range index must be reported by the call itself. The arithmetic
 * lives in shaders/cuda, which follows spec/numerics.md operation for
 * operation. Launch shapes (tile sizes, grid sizes) change speed only: every
 * kernel computes each output the same way wherever it runs. */
#include <string.h>

#include "backends/callcheck.h"
#include "backends/cpu/bmath.h"
#include "backends/cuda/cu_internal.h"

#define BIB_CU_MAX_GRID_X 0x7fffffffu
#define BIB_CU_MAX_GRID_YZ 65535u
#define BIB_CU_EW_THREADS 256u
/* Attention's global scratch stays below this unless one row needs more. */
#define BIB_CU_ATTN_SCRATCH ((uint64_t)256 << 20)

/* The device address of the view's first element, checking that the view
 * lies inside its buffer. Every dtype is 4 bytes wide. */
static bib_status_t bib_cu_addr(bib_executor_t *ex, const bib_view_t *v, const char *what,
                                uint64_t *addr) {
    const bib_cu_buffer_t *b = v->buf;
    if (!b)
        return bib_cu_fail(ex, BIB_E_USAGE, "cuda: %s has no buffer", what);
    uint64_t n = bib_view_count(v);
    if (v->offset > b->size / 4 || n > b->size / 4 - v->offset)
        return bib_cu_fail(ex, BIB_E_USAGE,
                           "cuda: %s (offset %zu, %llu elements) overruns its buffer of %zu bytes",
                           what, v->offset, (unsigned long long)n, b->size);
    *addr = (uint64_t)b->ptr + (uint64_t)v->offset * 4;
    return BIB_OK;
}

/* Makes the executor's context current, then checks the call's views that
 * have a name in names (out, in[0], in[1], in[2]; NULL: a view the kernel
 * does not take), in that order, writing their addresses to p's out, in0,
 * in1 and in2. */
static bib_status_t bib_cu_views(bib_executor_t *ex, const bib_call_t *c,
                                 const char *const names[4], bib_cu_args_t *p) {
    uint64_t *addrs[4] = {&p->out, &p->in0, &p->in1, &p->in2};
    bib_status_t st = bib_cu_enter(ex);
    for (int i = 0; i < 4 && st == BIB_OK; i++)
        if (names[i])
            st = bib_cu_addr(ex, i ? &c->in[i - 1] : &c->out, names[i], addrs[i]);
    return st;
}

/* Blocks for a grid-stride loop over n items: enough to fill the device,
 * never more than the items need. */
static uint32_t bib_cu_ew_blocks(const bib_executor_t *ex, uint64_t n) {
    uint64_t want = (n + BIB_CU_EW_THREADS - 1) / BIB_CU_EW_THREADS;
    uint64_t cap = (uint64_t)(ex->sm_count > 0 ? ex->sm_count : 1) * 8;
    return (uint32_t)(want < cap ? (want ? want : 1) : cap);
}

/* Queues fn as a grid-stride loop over n items. */
static bib_status_t bib_cu_launch_items(bib_executor_t *ex, bib_cu_fn_t fn, uint64_t n,
                                        const bib_cu_args_t *p) {
    return bib_cu_launch(ex, fn, bib_cu_ew_blocks(ex, n), 1, 1, BIB_CU_EW_THREADS, 1, 0, p);
}

static uint32_t bib_cu_rows_grid(uint64_t rows) {
    return (uint32_t)(rows < BIB_CU_MAX_GRID_X ? rows : BIB_CU_MAX_GRID_X);
}

/* ---- MATMUL -------------------------------------------------------------- */

static bib_status_t bib_cu_matmul(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *a = &c->in[0], *b = &c->in[1], *bias = &c->in[2];
    bib_cu_args_t p = {0};
    const char *names[4] = {"matmul output", "matmul input a", "matmul input b",
                            bias->buf ? "matmul bias" : NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    uint64_t M = a->dims[0], K = a->dims[1], N = b->dims[1];
    if (M == 0 || N == 0)
        return BIB_OK;
    p.n[0] = M;
    p.n[1] = N;
    p.n[2] = K;
    p.u[0] = bias->buf != NULL;
    /* 128 x 128 tiles once they fill every SM; 64 x 64 below that.
     * BIB_CUDA_MATMUL_TILES forces one (tests run both). */
    uint64_t big_tiles = ((M + 127) / 128) * ((N + 127) / 128);
    bool big = ex->matmul_tiles ? ex->matmul_tiles == 128 : big_tiles >= (uint64_t)ex->sm_count;
    uint32_t tile = big ? 128 : 64;
    bool vec = K % 4 == 0 && N % 4 == 0 && (p.in0 | p.in1 | p.out) % 16 == 0;
    bib_cu_fn_t base =
        big ? (vec ? BIB_CU_FN_MATMUL_BIG_VEC_NONE : BIB_CU_FN_MATMUL_BIG_ANY_NONE)
            : (vec ? BIB_CU_FN_MATMUL_SMALL_VEC_NONE : BIB_CU_FN_MATMUL_SMALL_ANY_NONE);
    /* The X-macro lists each family as NONE, RELU, GELU: bib_act_t's order. */
    bib_cu_fn_t fn = (bib_cu_fn_t)(base + c->sub);
    uint32_t tile_m = tile, shared = 0;
    if (ex->matmul_tune && big && vec && c->sub == BIB_ACT_NONE) {
        fn = (bib_cu_fn_t)ex->matmul_tune;
        tile_m = ex->matmul_tune_m;
        shared = ex->matmul_tune_shared;
        if (shared && !ex->matmul_tune_opted) {
            CUresult r = ex->api.FuncSetAttribute(
                ex->fn[fn], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared);
            if ((st = bib_cu_check(ex, r, "cuFuncSetAttribute(%s, %u shared bytes)",
                                   bib_cu_fn_names[fn], shared)) != BIB_OK)
                return st;
            ex->matmul_tune_opted = true;
        }
    }
    return bib_cu_launch(ex, fn, (uint32_t)((N + tile - 1) / tile),
                         (uint32_t)((M + tile_m - 1) / tile_m), 1, 256, 1, shared, &p);
}

/* ---- TRANSPOSE ----------------------------------------------------------- */

static bib_status_t bib_cu_transpose(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0];
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"transpose output", "transpose input", NULL, NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    uint64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1], batch = 1;
    for (uint32_t i = 0; i + 2 < x->rank; i++)
        batch *= x->dims[i];
    if (rows == 0 || cols == 0 || batch == 0)
        return BIB_OK;
    p.n[0] = batch;
    p.n[1] = rows;
    p.n[2] = cols;
    uint32_t gz = (uint32_t)(batch < BIB_CU_MAX_GRID_YZ ? batch : BIB_CU_MAX_GRID_YZ);
    return bib_cu_launch(ex, BIB_CU_FN_TRANSPOSE, (uint32_t)((cols + 31) / 32),
                         (uint32_t)((rows + 31) / 32), gz, 32, 8, 0, &p);
}

/* ---- elementwise --------------------------------------------------------- */

static bib_status_t bib_cu_elementwise(bib_executor_t *ex, const bib_call_t *c, bib_cu_fn_t fn,
                                       uint32_t param) {
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"output", "input", NULL, NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t n = bib_view_count(&c->out);
    if (st != BIB_OK || n == 0)
        return st;
    p.n[0] = n;
    p.u[0] = param;
    return bib_cu_launch_items(ex, fn, n, &p);
}

/* The unary kernels are bib_cu_fn_t's first, in bib_unary_t order (generated
   from the rows, cu_unary_rows.h); BIB_CU_FUNCTIONS lists the binary ones as
   <op>_{SAME,ROW,ONE} in bib_binary_t order, and each MATMUL family as NONE,
   RELU, GELU, GELU_ERF (bib_act_t). */
_Static_assert(BIB_CU_FN_UNARY_RELU == 0, "the unary kernels come first");
_Static_assert(BIB_CU_FN_BINARY_MAX_ONE - BIB_CU_FN_BINARY_ADD_SAME + 1 == 3 * BIB_BINARY__COUNT,
               "a binary op was added to isa/opcodes.def: add its kernels to BIB_CU_FUNCTIONS");
_Static_assert(BIB_CU_FN_MATMUL_BIG_VEC_GELU_ERF - BIB_CU_FN_MATMUL_BIG_VEC_NONE + 1 ==
                   BIB_ACT__COUNT,
               "MATMUL's activations are bib_act_t");

static bib_status_t bib_cu_dtypes(bib_executor_t *ex, const bib_call_t *c, bib_cu_fn_t fn,
                                  uint32_t op, uint32_t u3);

static bib_status_t bib_cu_unary(bib_executor_t *ex, const bib_call_t *c) {
    if (c->out.dtype == BIB_DTYPE_I32)
        return bib_cu_dtypes(ex, c, BIB_CU_FN_UNARY_I32, c->sub, 0);
    return bib_cu_elementwise(ex, c, (bib_cu_fn_t)c->sub, 0);
}

static bib_status_t bib_cu_scale(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_elementwise(ex, c, BIB_CU_FN_SCALE, bib_f32_bits(c->f[0]));
}

/* ---- dtypes: CAST, COMPARE, WHERE, LOGIC, BINARY on i32 (dtypes.cu) ---- */

/* u[0] = op, u[1] and u[2] = in1's and in2's form against in0, u[3] as the
 * kernel says; n[0] = element count, n[1] = in0's last axis. */
static bib_status_t bib_cu_dtypes(bib_executor_t *ex, const bib_call_t *c, bib_cu_fn_t fn,
                                  uint32_t op, uint32_t u3) {
    bib_cu_args_t p = {0};
    const char *names[4] = {"output", c->in[0].buf ? "input 0" : NULL,
                            c->in[1].buf ? "input 1" : NULL, c->in[2].buf ? "input 2" : NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    const bib_view_t *x = &c->in[0];
    bib_broadcast_t forms[3];
    if (!bib_call_forms(c, forms))
        return bib_cu_fail(ex, BIB_E_USAGE, "cuda: operand shapes do not broadcast");
    p.u[0] = op;
    p.u[1] = (uint32_t)forms[1];
    p.u[2] = (uint32_t)forms[2];
    p.u[3] = u3;
    uint64_t n = bib_view_count(&c->out);
    if (n == 0)
        return BIB_OK;
    /* i32 DIV: a zero divisor is an error this call must return. */
    if ((st = bib_call_check_on_host(&bib_cuda_executor, bib_cu_fail, ex, c)) != BIB_OK)
        return st;
    p.n[0] = n;
    p.n[1] = x->rank ? x->dims[x->rank - 1] : 1;
    return bib_cu_launch_items(ex, fn, n, &p);
}

static bib_status_t bib_cu_cast(bib_executor_t *ex, const bib_call_t *c) {
    uint32_t op = c->in[0].dtype == c->out.dtype ? 2 : c->out.dtype == BIB_DTYPE_I32 ? 0 : 1;
    return bib_cu_dtypes(ex, c, BIB_CU_FN_CAST, op, 0);
}

static bib_status_t bib_cu_compare(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_dtypes(ex, c, BIB_CU_FN_COMPARE, c->sub, c->in[0].dtype == BIB_DTYPE_I32);
}

static bib_status_t bib_cu_where(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_dtypes(ex, c, BIB_CU_FN_WHERE, 0, 0);
}

static bib_status_t bib_cu_logic(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_dtypes(ex, c, BIB_CU_FN_LOGIC, c->sub, 0);
}

static bib_status_t bib_cu_binary(bib_executor_t *ex, const bib_call_t *c) {
    if (c->out.dtype == BIB_DTYPE_I32)
        return bib_cu_dtypes(ex, c, BIB_CU_FN_BINARY_I32, c->sub, 0);
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"output", "input 0", "input 1", NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    bib_broadcast_t form = bib_call_broadcast(c);
    if (form == BIB_BROADCAST_NONE)
        return bib_cu_fail(ex, BIB_E_USAGE, "cuda: binary operand shapes do not broadcast");
    uint64_t n = bib_view_count(&c->out);
    if (n == 0)
        return BIB_OK;
    p.n[0] = n;
    p.n[1] = c->in[0].rank ? c->in[0].dims[c->in[0].rank - 1] : 1;
    /* BIB_CU_FUNCTIONS lists BINARY_<op>_{SAME,ROW,ONE} in bib_binary_t order. */
    bib_cu_fn_t fn = (bib_cu_fn_t)(BIB_CU_FN_BINARY_ADD_SAME + 3 * c->sub + (uint32_t)form);
    return bib_cu_launch_items(ex, fn, n, &p);
}

/* ---- row kernels: one block of 64 per row (THE tree) --------------------- */

/* A row kernel's launch: n[0] = rows, n[1] = row length, u[0] = param,
 * u[1] = the output's last axis; per_block rows to a block (1: a block per
 * row; BIB_CU_ROW_THREADS: a thread per row). */
static bib_status_t bib_cu_rows_launch(bib_executor_t *ex, const bib_call_t *c, bib_cu_fn_t fn,
                                       uint32_t param, int inputs, uint32_t per_block) {
    bib_cu_args_t p = {0};
    const char *names[4] = {"output", "input", inputs > 1 ? "gamma" : NULL,
                            inputs > 2 ? "beta" : NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    uint32_t n;
    uint64_t rows = bib_call_rows(c, &n);
    if (rows == 0)
        return BIB_OK;
    p.n[0] = rows;
    p.n[1] = n;
    p.u[0] = param;
    p.u[1] = c->out.rank ? (uint32_t)c->out.dims[c->out.rank - 1] : 1; /* ARGSORT's first k */
    uint64_t blocks = (rows + per_block - 1) / per_block;
    return bib_cu_launch(ex, fn, bib_cu_rows_grid(blocks), 1, 1, BIB_CU_ROW_THREADS, 1, 0, &p);
}

static bib_status_t bib_cu_rowwise(bib_executor_t *ex, const bib_call_t *c, bib_cu_fn_t fn,
                                   uint32_t param, int inputs) {
    return bib_cu_rows_launch(ex, c, fn, param, inputs, 1);
}

static bib_status_t bib_cu_softmax(bib_executor_t *ex, const bib_call_t *c) {
    uint32_t n;
    bib_view_rows(&c->in[0], &n);
    /* Rows of up to 64 * 2^k elements keep them in registers; longer ones
     * stream. Same operations, same bits. */
    bool log = c->sub == BIB_SOFTMAX_LOG;
    bib_cu_fn_t fn = log ? BIB_CU_FN_LOGSOFTMAX_S : BIB_CU_FN_SOFTMAX_S;
    static const bib_cu_fn_t cached[2][7] = {
        {BIB_CU_FN_SOFTMAX_R1, BIB_CU_FN_SOFTMAX_R2, BIB_CU_FN_SOFTMAX_R4, BIB_CU_FN_SOFTMAX_R8,
         BIB_CU_FN_SOFTMAX_R16, BIB_CU_FN_SOFTMAX_R32, BIB_CU_FN_SOFTMAX_R64},
        {BIB_CU_FN_LOGSOFTMAX_R1, BIB_CU_FN_LOGSOFTMAX_R2, BIB_CU_FN_LOGSOFTMAX_R4,
         BIB_CU_FN_LOGSOFTMAX_R8, BIB_CU_FN_LOGSOFTMAX_R16, BIB_CU_FN_LOGSOFTMAX_R32,
         BIB_CU_FN_LOGSOFTMAX_R64}};
    for (size_t i = 0; i < 7; i++)
        if ((uint64_t)n <= (uint64_t)BIB_CU_ROW_THREADS << i) {
            fn = cached[log][i];
            break;
        }
    return bib_cu_rowwise(ex, c, fn, 0, 1);
}

static bib_status_t bib_cu_reduce(bib_executor_t *ex, const bib_call_t *c) {
    _Static_assert(BIB_REDUCE__COUNT == 5, "shaders/cuda/rows.cu has a kernel per reduction");
    static const bib_cu_fn_t fns[BIB_REDUCE__COUNT] = {[BIB_REDUCE_SUM] = BIB_CU_FN_REDUCE_SUM,
                                                       [BIB_REDUCE_MAX] = BIB_CU_FN_REDUCE_MAX,
                                                       [BIB_REDUCE_MEAN] = BIB_CU_FN_REDUCE_MEAN,
                                                       [BIB_REDUCE_MIN] = BIB_CU_FN_REDUCE_MIN,
                                                       [BIB_REDUCE_PROD] = BIB_CU_FN_REDUCE_PROD};
    return bib_cu_rowwise(ex, c, fns[c->sub], 0, 1);
}

static bib_status_t bib_cu_argmax(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_rowwise(ex, c, BIB_CU_FN_ARGMAX, c->sub == BIB_ARGMAX_MIN, 1);
}

static bib_status_t bib_cu_argsort(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_rowwise(ex, c, BIB_CU_FN_ARGSORT, c->sub == BIB_ARGMAX_MIN, 1);
}

/* One thread per row, blocks of BIB_CU_ROW_THREADS rows. */
static bib_status_t bib_cu_cumsum(bib_executor_t *ex, const bib_call_t *c) {
    uint32_t op = (uint32_t)c->i[0] | (c->out.dtype == BIB_DTYPE_I32 ? 4u : 0u);
    return bib_cu_rows_launch(ex, c, BIB_CU_FN_CUMSUM, op, 1, BIB_CU_ROW_THREADS);
}

static bib_status_t bib_cu_layernorm(bib_executor_t *ex, const bib_call_t *c) {
    if (c->sub != BIB_LAYERNORM_PACKED)
        return bib_cu_rowwise(ex, c, BIB_CU_FN_LAYERNORM, bib_f32_bits(c->f[0]), 3);
    /* PACKED: gamma and beta are the rows of in1 [2,N]; beta is in1's second
     * row, so the call passes it as in2 and the kernel is the same. */
    bib_call_t packed = *c;
    uint32_t n = c->in[0].rank ? c->in[0].dims[c->in[0].rank - 1] : 1;
    packed.in[2] = c->in[1];
    packed.in[2].offset += n;
    packed.in[1].rank = packed.in[2].rank = 1;
    packed.in[1].dims[0] = packed.in[2].dims[0] = n;
    return bib_cu_rowwise(ex, &packed, BIB_CU_FN_LAYERNORM, bib_f32_bits(c->f[0]), 3);
}

static bib_status_t bib_cu_rmsnorm(bib_executor_t *ex, const bib_call_t *c) {
    return bib_cu_rowwise(ex, c, BIB_CU_FN_RMSNORM, bib_f32_bits(c->f[0]), 2);
}

/* ---- ATTENTION ----------------------------------------------------------- */

static bib_status_t bib_cu_attention(bib_executor_t *ex, const bib_call_t *c) {
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"attention output", "attention q", "attention k",
                                         "attention v"};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    uint64_t S = c->in[0].dims[0], H = c->in[0].dims[1], D = c->in[0].dims[2];
    uint64_t T = c->in[1].dims[0];
    if (S == 0 || H == 0 || D == 0)
        return BIB_OK;
    p.n[0] = S;
    p.n[1] = H;
    p.n[2] = D;
    p.n[3] = T;
    p.u[0] = c->sub != 0;
    p.u[1] = bib_f32_bits(c->f[0]);
    p.u[2] = T <= BIB_CU_ATTN_SMEM_KEYS;
    uint32_t shared = p.u[2] ? (uint32_t)(T * 4) : 0;
    uint32_t gx = bib_cu_rows_grid(S);
    void *scratch = NULL;
    if (!p.u[2]) {
        /* Long rows: each block keeps its row of probabilities in global
         * scratch, reused for every query it walks to, so the scratch is
         * gx * H * T floats with gx just big enough to fill the device.
         * Freed at once: the launch is queued before any later use of the
         * range (one stream), so the pool may hand it out again. */
        uint64_t fill = ((uint64_t)ex->sm_count * 16 + H - 1) / H;
        uint64_t cap = BIB_CU_ATTN_SCRATCH / (H * T * 4); /* rows of scratch that fit */
        if (fill > cap)
            fill = cap;
        gx = (uint32_t)(S < fill ? S : fill ? fill : 1);
        if ((st = bib_cu_buffer_alloc(ex, (size_t)((uint64_t)gx * H * T * 4), &scratch)) != BIB_OK)
            return st;
        p.scratch = ((bib_cu_buffer_t *)scratch)->ptr;
    }
    st = bib_cu_launch(ex, BIB_CU_FN_ATTENTION, gx, (uint32_t)H, 1, BIB_CU_ROW_THREADS, 1, shared,
                       &p);
    bib_cu_buffer_free(ex, scratch);
    return st;
}

/* ---- STRIDED and TAKE ---------------------------------------------------- */

/* The output's shape padded to BIB_MAX_RANK axes in n[],
 * the call's p[] in s[], one grid-stride loop over the output. */
static bib_status_t bib_cu_indexed(bib_executor_t *ex, const bib_call_t *c, bib_cu_fn_t fn,
                                   const char *const names[4]) {
    bib_cu_args_t p = {0};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++)
        p.n[k] = bib_view_padded_dim(&c->out, k);
    memcpy(p.s, c->p, sizeof p.s);
    uint64_t n = bib_view_count(&c->out);
    if (n == 0)
        return BIB_OK;
    p.u[0] = n > UINT32_MAX; /* 64-bit index arithmetic only when needed */
    return bib_cu_launch_items(ex, fn, n, &p);
}

static bib_status_t bib_cu_strided(bib_executor_t *ex, const bib_call_t *c) {
    const char *names[4] = {"strided output", "strided input 0",
                            c->in[1].buf ? "strided input 1" : NULL, NULL};
    return bib_cu_indexed(ex, c, BIB_CU_FN_STRIDED, names);
}

static bib_status_t bib_cu_take(bib_executor_t *ex, const bib_call_t *c) {
    static const char *const names[4] = {"take output", "take table", "take indices", NULL};
    return bib_cu_indexed(ex, c, BIB_CU_FN_TAKE, names);
}

/* ---- GATHER and RNG ------------------------------------------------------ */

/* ---- CONV, POOL, BATCHNORM (shaders/cuda/conv.cu) ------------------------- */

static uint64_t bib_cu_pair(uint64_t lo, uint64_t hi) {
    return lo | hi << 32;
}

static bib_status_t bib_cu_conv(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0], *w = &c->in[1], *o = &c->out;
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"conv output", "conv input", "conv weights", NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t n = bib_view_count(o);
    if (st != BIB_OK || n == 0)
        return st;
    bool one_d = x->rank == 3;
    p.n[0] = bib_cu_pair(w->dims[1], o->dims[1] / (uint64_t)c->p[0]);
    p.n[1] = bib_cu_pair(one_d ? 1 : x->dims[2], x->dims[x->rank - 1]);
    p.n[2] = bib_cu_pair(o->dims[1], 0);
    p.n[3] = bib_cu_pair(one_d ? 1 : o->dims[2], o->dims[o->rank - 1]);
    p.n[4] = bib_cu_pair(one_d ? 1 : w->dims[2], w->dims[w->rank - 1]);
    p.n[5] = bib_cu_pair((uint64_t)c->p[1], (uint64_t)c->p[2]);
    for (int i = 0; i < 4; i++)
        p.u[i] = (uint32_t)c->p[3 + i];
    p.scratch = n;
    return bib_cu_launch_items(ex, BIB_CU_FN_CONV, n, &p);
}

static bib_status_t bib_cu_pool(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0], *o = &c->out;
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"pool output", "pool input", NULL, NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t n = bib_view_count(o);
    if (st != BIB_OK || n == 0)
        return st;
    bool one_d = x->rank == 3;
    p.n[0] = bib_cu_pair(x->dims[1], (uint64_t)c->p[8]);
    p.n[1] = bib_cu_pair(one_d ? 1 : x->dims[2], x->dims[x->rank - 1]);
    p.n[2] = bib_cu_pair((uint64_t)c->p[9], 0);
    p.n[3] = bib_cu_pair(one_d ? 1 : o->dims[2], o->dims[o->rank - 1]);
    p.n[4] = bib_cu_pair((uint64_t)c->p[0], (uint64_t)c->p[1]);
    p.n[5] = bib_cu_pair((uint64_t)c->p[2], (uint64_t)c->p[3]);
    for (int i = 0; i < 4; i++)
        p.u[i] = (uint32_t)c->p[4 + i];
    p.scratch = n;
    bib_cu_fn_t fn = c->sub == BIB_POOL_MAX ? BIB_CU_FN_POOL_MAX
                     : c->p[11]             ? BIB_CU_FN_POOL_AVG_PAD
                                            : BIB_CU_FN_POOL_AVG;
    return bib_cu_launch_items(ex, fn, n, &p);
}

static bib_status_t bib_cu_batchnorm(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0], *o = &c->out;
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"batchnorm output", "batchnorm input",
                                         "batchnorm statistics", NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t n = bib_view_count(o), planes = (uint64_t)x->dims[0] * x->dims[1];
    if (st != BIB_OK || n == 0)
        return st;
    p.n[0] = n;
    p.n[1] = x->dims[1];
    p.n[2] = n / planes;
    p.u[0] = bib_f32_bits(c->f[0]);
    bib_cu_fn_t fn = c->sub == BIB_ACT_RELU ? BIB_CU_FN_BATCHNORM_RELU : BIB_CU_FN_BATCHNORM;
    return bib_cu_launch_items(ex, fn, n, &p);
}

static bib_status_t bib_cu_gather(bib_executor_t *ex, const bib_call_t *c) {
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"gather output", "gather table", "gather indices", NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t rows = c->in[0].dims[0];
    uint64_t width = rows ? bib_view_count(&c->in[0]) / rows : 0;
    uint64_t n = bib_view_count(&c->in[1]);
    if (st != BIB_OK || n == 0)
        return st;
    /* An index out of range is an error this call must return, with the
     * CPU executor's message. */
    if ((st = bib_call_check_on_host(&bib_cuda_executor, bib_cu_fail, ex, c)) != BIB_OK ||
        width == 0)
        return st;
    p.n[0] = n;
    p.n[1] = width;
    return bib_cu_launch_items(ex, BIB_CU_FN_GATHER, n * width, &p);
}

static bib_status_t bib_cu_rng(bib_executor_t *ex, const bib_call_t *c) {
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"rng output", NULL, NULL, NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t n = bib_view_count(&c->out);
    if (st != BIB_OK || n == 0)
        return st;
    uint64_t seed = (uint64_t)c->i[0], stream = (uint64_t)c->i[1];
    p.n[0] = n;
    p.u[0] = (uint32_t)seed;
    p.u[1] = (uint32_t)(seed >> 32);
    p.u[2] = (uint32_t)stream;
    p.u[3] = (uint32_t)(stream >> 32);
    return bib_cu_launch_items(ex, BIB_CU_FN_RNG, (n + 3) / 4, &p);
}

/* ---- FILL and COPY: driver commands that move bits ---------------------- */

static bib_status_t bib_cu_fill(bib_executor_t *ex, const bib_call_t *c) {
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"fill output", NULL, NULL, NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    uint64_t n = bib_view_count(&c->out);
    if (st != BIB_OK || n == 0)
        return st;
    uint32_t word =
        c->out.dtype == BIB_DTYPE_I32 ? (uint32_t)(int32_t)c->i[0] : bib_f32_bits(c->f[0]);
    if ((st = bib_cu_time_begin(ex)) != BIB_OK)
        return st;
    ex->launches++;
    CUresult r = ex->api.MemsetD32Async((CUdeviceptr)p.out, word, n, ex->stream);
    bib_cu_time_end(ex);
    return bib_cu_check(ex, r, "cuMemsetD32Async(%llu words)", (unsigned long long)n);
}

static bib_status_t bib_cu_copy(bib_executor_t *ex, const bib_call_t *c) {
    bib_cu_args_t p = {0};
    static const char *const names[4] = {"copy output", "copy input", NULL, NULL};
    bib_status_t st = bib_cu_views(ex, c, names, &p);
    if (st != BIB_OK)
        return st;
    uint64_t dst = p.out, src = p.in0;
    uint64_t bytes = bib_view_count(&c->out) * 4;
    if (bytes == 0 || dst == src)
        return BIB_OK;
    if (dst < src + bytes && src < dst + bytes) {
        /* Overlapping ranges (the CPU's memmove): through a temporary. */
        void *tmp = NULL;
        if ((st = bib_cu_buffer_alloc(ex, bytes, &tmp)) != BIB_OK)
            return st;
        CUdeviceptr t = ((bib_cu_buffer_t *)tmp)->ptr;
        ex->launches += 2;
        if ((st = bib_cu_time_begin(ex)) == BIB_OK) {
            st = bib_cu_check(ex, ex->api.MemcpyDtoDAsync(t, (CUdeviceptr)src, bytes, ex->stream),
                              "cuMemcpyDtoDAsync_v2(%llu bytes)", (unsigned long long)bytes);
            if (st == BIB_OK)
                st = bib_cu_check(ex,
                                  ex->api.MemcpyDtoDAsync((CUdeviceptr)dst, t, bytes, ex->stream),
                                  "cuMemcpyDtoDAsync_v2(%llu bytes)", (unsigned long long)bytes);
            bib_cu_time_end(ex);
        }
        bib_cu_buffer_free(ex, tmp);
        return st;
    }
    if ((st = bib_cu_time_begin(ex)) != BIB_OK)
        return st;
    ex->launches++;
    CUresult r = ex->api.MemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, ex->stream);
    bib_cu_time_end(ex);
    return bib_cu_check(ex, r, "cuMemcpyDtoDAsync_v2(%llu bytes)", (unsigned long long)bytes);
}

/* ---- support ------------------------------------------------------------- */

/* The GPU executors' common rules (backends/callcheck.c), then CUDA's grid
 * limits. */
bool bib_cu_supports(bib_executor_t *ex, const bib_call_t *c) {
    (void)ex;
    if (!bib_call_shapes_ok(c, BIB_CALL_RULE_TRANSPOSE_SAME_DTYPE))
        return false;
    const bib_view_t *x = &c->in[0], *y = &c->in[1];
    switch (c->kernel) {
    case BIB_KERNEL_MATMUL:
        /* Grid y counts 64-row tiles at worst; the kernel's tile indices
         * are 32-bit and run up to a tile past N and K. */
        return ((uint64_t)x->dims[0] + 63) / 64 <= BIB_CU_MAX_GRID_YZ && x->dims[1] < (1u << 31) &&
               y->dims[1] < (1u << 31);
    case BIB_KERNEL_TRANSPOSE:
        return ((uint64_t)x->dims[x->rank - 2] + 31) / 32 <= BIB_CU_MAX_GRID_YZ;
    case BIB_KERNEL_ATTENTION:
        return x->dims[1] <= BIB_CU_MAX_GRID_YZ;
    default:
        return true;
    }
}

/* One entry per kernel whose EXECUTORS column in isa/kernels.def names this
 * executor: tools/isa-gen.c fails the build when the two disagree. */
_Static_assert(BIB_KERNEL__COUNT == 26, "a kernel was added to isa/kernels.def: give it an "
                                        "entry below, or leave this executor out of its row");

const bib_executor_ops_t bib_cuda_executor = {
    .name = "cuda",
    .id = BIB_EXECUTOR_CUDA,
    .init = bib_cu_init,
    .shutdown = bib_cu_shutdown,
    .error = bib_cu_error,
    .buffer_alloc = bib_cu_buffer_alloc,
    .buffer_free = bib_cu_buffer_free,
    .upload = bib_cu_upload,
    .download = bib_cu_download,
    .synchronize = bib_cu_synchronize,
    .memory = bib_cu_memory_query,
    .supports = bib_cu_supports,
    .kernels =
        {
            [BIB_KERNEL_MATMUL] = bib_cu_matmul,
            [BIB_KERNEL_TRANSPOSE] = bib_cu_transpose,
            [BIB_KERNEL_SOFTMAX] = bib_cu_softmax,
            [BIB_KERNEL_UNARY] = bib_cu_unary,
            [BIB_KERNEL_BINARY] = bib_cu_binary,
            [BIB_KERNEL_SCALE] = bib_cu_scale,
            [BIB_KERNEL_REDUCE] = bib_cu_reduce,
            [BIB_KERNEL_LAYERNORM] = bib_cu_layernorm,
            [BIB_KERNEL_RMSNORM] = bib_cu_rmsnorm,
            [BIB_KERNEL_ATTENTION] = bib_cu_attention,
            [BIB_KERNEL_GATHER] = bib_cu_gather,
            [BIB_KERNEL_ARGMAX] = bib_cu_argmax,
            [BIB_KERNEL_ARGSORT] = bib_cu_argsort,
            [BIB_KERNEL_CUMSUM] = bib_cu_cumsum,
            [BIB_KERNEL_FILL] = bib_cu_fill,
            [BIB_KERNEL_RNG] = bib_cu_rng,
            [BIB_KERNEL_STRIDED] = bib_cu_strided,
            [BIB_KERNEL_TAKE] = bib_cu_take,
            [BIB_KERNEL_CONV] = bib_cu_conv,
            [BIB_KERNEL_POOL] = bib_cu_pool,
            [BIB_KERNEL_BATCHNORM] = bib_cu_batchnorm,
            [BIB_KERNEL_COPY] = bib_cu_copy,
            [BIB_KERNEL_CAST] = bib_cu_cast,
            [BIB_KERNEL_COMPARE] = bib_cu_compare,
            [BIB_KERNEL_WHERE] = bib_cu_where,
            [BIB_KERNEL_LOGIC] = bib_cu_logic,
        },
    .describe = bib_cu_describe,
    .facts = bib_cu_facts,
    .program_create = bib_cu_program_create,
    .program_dispatch = bib_cu_program_dispatch,
    .program_destroy = bib_cu_program_destroy,
    .submit = bib_cu_submit,
    .timing = bib_cu_timing,
    .elapsed = bib_cu_elapsed,
};
