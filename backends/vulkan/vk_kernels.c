/* backends/vulkan/vk_kernels.c: the Vulkan executor's kernels and its ops
 * table.
 *
 * Each kernel checks its views against their buffers, fills the push
 * constants and records one dispatch (or one transfer command) through
 * vk_device.c; nothing here waits. The arithmetic lives in the shaders
 * (shaders/vulkan), which follow spec/numerics.md operation for operation. */
#include <stdlib.h>
#include <string.h>

#include "backends/callcheck.h"
#include "backends/cpu/bmath.h"
#include "backends/vulkan/vk_internal.h"

#define BIB_VK_MAX_GROUPS 65535u

/* The view's first element inside its bound block, checking that the view
 * lies inside its buffer. */
static bib_status_t bib_vk_elem(bib_executor_t *ex, const bib_view_t *v, const char *what,
                                uint32_t *elem) {
    const bib_vk_buffer_t *b = v->buf;
    uint64_t n = bib_view_count(v);
    if (!b)
        return bib_vk_fail(ex, BIB_E_USAGE, "vulkan: %s has no buffer", what);
    if ((v->offset + n) * 4 > b->size)
        return bib_vk_fail(ex, BIB_E_USAGE,
                           "vulkan: %s (offset %zu, %llu elements) overruns its buffer of %llu "
                           "bytes",
                           what, v->offset, (unsigned long long)n, (unsigned long long)b->size);
    /* Relative to the buffer's own range: descriptors bind exactly that range,
       so every access a shader can make is inside what the hazard tracker
       (and synchronization validation) sees. */
    uint64_t e = v->offset;
    if (e + n > UINT32_MAX)
        return bib_vk_fail(ex, BIB_E_USAGE, "vulkan: %s lies beyond 16 GiB of its buffer", what);
    *elem = (uint32_t)e;
    return BIB_OK;
}

/* Checks the call's views that have a name in names (out, in[0], in[1],
 * in[2]; NULL: a view the shader does not bind), in that order, writing
 * their element offsets to p's off_out, off_in0, off_in1 and off_in2, and
 * their buffers to bufs[0..3] (NULL for the others, and the scratch
 * bufs[4]). */
static bib_status_t bib_vk_views(bib_executor_t *ex, const bib_call_t *c,
                                 const char *const names[4], bib_vk_push_t *p,
                                 bib_vk_buffer_t *bufs[BIB_VK_BINDINGS]) {
    uint32_t *offs[4] = {&p->off_out, &p->off_in0, &p->off_in1, &p->off_in2};
    bufs[4] = NULL;
    for (int i = 0; i < 4; i++) {
        const bib_view_t *v = i ? &c->in[i - 1] : &c->out;
        bib_status_t st = names[i] ? bib_vk_elem(ex, v, names[i], offs[i]) : BIB_OK;
        if (st != BIB_OK)
            return st;
        bufs[i] = names[i] ? v->buf : NULL;
    }
    return BIB_OK;
}

static uint32_t bib_vk_groups(uint64_t n, uint32_t per_group) {
    uint64_t g = (n + per_group - 1) / per_group;
    return g > BIB_VK_MAX_GROUPS ? BIB_VK_MAX_GROUPS : (uint32_t)(g ? g : 1);
}

/* Records shader over n items, 256 to a workgroup (the shaders stride past
 * 65535 workgroups). */
static bib_status_t bib_vk_dispatch_items(bib_executor_t *ex, const char *shader,
                                          const uint32_t *spec, uint32_t spec_count,
                                          bib_vk_buffer_t *const *bufs, const bib_vk_push_t *p,
                                          uint64_t n) {
    return bib_vk_dispatch(ex, shader, spec, spec_count, bufs, p, bib_vk_groups(n, 256), 1, 1);
}

/* ---- loop budgets -------------------------------------------------------- */

/* Each kernel's bound, next to its dispatch below: at most how many loop
 * iterations one invocation of its shader runs for a call, every loop
 * counted (a nested loop's for each pass of the loops around it).
 * bib_vk_supports compares the bound with the device's probed limit
 * (ex->loop_limit, vk_device.c); a call past it runs on the CPU executor,
 * which gives the same bits. Counted in double: no product of a call's
 * sizes overflows, and the bounds need no exactness near 2^53. A shader
 * change that adds or lengthens a loop changes its bound here. */

/* A loop of n iterations, each running body iterations of inner loops,
 * and two passes more: the one that leaves it, and one where the driver
 * tests its condition apart from its body (lavapipe spends 6 iterations on
 * each channel of a 1x1 CONV, where conv.comp's three loops run once
 * each). */
static double bib_vk_loop(double n, double body) {
    return n * (1 + body) + 2;
}

/* Invocation passes of a grid-stride loop over n items, per_group to a
 * workgroup of the grid bib_vk_groups gives. */
static double bib_vk_strides(uint64_t n, uint32_t per_group) {
    uint64_t across = (uint64_t)bib_vk_groups(n, per_group) * per_group;
    return (double)((n + across - 1) / across);
}

/* The loop of bib_div or of bib_sqrt: 27 steps. Counted always where a
 * shader divides or takes a root once a row (lavapipe unrolls bib_div's
 * loop but not bib_sqrt's). */
#define BIB_VK_DIV_LOOPS 29

/* Once an element, the loop of bib_div where it counts: where the probe
 * found that the driver does not unroll it (ex->loop_fixed). */
static double bib_vk_div_loops(const bib_executor_t *ex) {
    return ex->loop_fixed ? BIB_VK_DIV_LOOPS : 0;
}

/* THE tree (tree.glsl): one loop of 6 steps, counted whether or not the
 * driver unrolls it. */
#define BIB_VK_TREE_LOOPS 8

/* The elementwise shaders (unary, binary, dtypes, gather, rng, strided,
 * take, batchnorm): a grid-stride loop over items, each running at most
 * BIB_VK_ITEM_LOOPS iterations of fixed loops (the longest, POW and
 * GELU_ERF, run bib_div's loop and bib_sqrt's at most three times in all;
 * rng's 10 rounds and 4 outputs). */
#define BIB_VK_ITEM_LOOPS 128
static double bib_vk_items_loops(uint64_t n) {
    return bib_vk_loop(bib_vk_strides(n, 256), BIB_VK_ITEM_LOOPS);
}

/* ---- MATMUL -------------------------------------------------------------- */

/* MATMUL's tile configurations (matmul.comp's specialization constants 1 to
 * 5), 256 invocations each: the two the executor picks from, then two
 * oblong ones that BIB_VK_MATMUL_TILES names for a GPU run to time. */
static const struct {
    const char *name;
    uint32_t bm, bn, bk, tm, tn;
} bib_vk_mm_tiles[] = {{"64", 64, 64, 16, 4, 4},
                       {"128", 128, 128, 8, 8, 8},
                       {"128x64", 128, 64, 16, 8, 4},
                       {"64x128", 64, 128, 16, 4, 8}};

/* The tile configuration MATMUL takes for an M x N output (an index into
 * bib_vk_mm_tiles). Big outputs on a GPU whose fma() is exact: 128x128
 * tiles, 8x8 per thread; otherwise 64x64 tiles, 4x4 per thread, so small
 * problems still fill the device. Where every step may need the fp64
 * emulation, its inlined copies in a block of more than 16 cost the block
 * its speed: on the H100 (fma() flushing, the fast path of matmul.comp)
 * 128x128 ran at 2.0 TFLOP/s at 4096 and 64x64 at 15.2. Forced there,
 * blocks of more than 16 run in two passes, the fast one apart: untimed
 * yet. Tile sizes change speed only, never bits. */
static int bib_vk_mm_pick(const bib_executor_t *ex, uint32_t M, uint32_t N) {
    bool gpu = ex->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
               ex->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    bool big = gpu && ex->fma_path == BIB_VK_FMA_NATIVE && (uint64_t)M * N >= (uint64_t)1024 * 1024;
    return ex->matmul_tiles ? ex->matmul_tiles - 1 : big ? 1 : 0;
}

/* matmul.comp's loops for one invocation: the tiles its workgroup strides
 * over, for each the K slices, for each the loads of A and of B and the
 * slice's steps (the register block's loops are unrolled), then the
 * epilogue's outputs, each with its activation's divisions (gelu's tanh
 * one, gelu_erf's erfc two) where bib_div's loop counts. Either pass of a
 * two-pass call loops no more than this. */
static double bib_vk_matmul_loops(const bib_executor_t *ex, const bib_call_t *c) {
    uint32_t M = c->in[0].dims[0], K = c->in[0].dims[1], N = c->in[1].dims[1];
    int pick = bib_vk_mm_pick(ex, M, N);
    uint32_t bm = bib_vk_mm_tiles[pick].bm, bn = bib_vk_mm_tiles[pick].bn,
             bk = bib_vk_mm_tiles[pick].bk, tm = bib_vk_mm_tiles[pick].tm,
             tn = bib_vk_mm_tiles[pick].tn;
    uint32_t nt = (bm / tm) * (bn / tn);
    double rows = bib_vk_strides((M + bm - 1) / bm, 1), cols = bib_vk_strides((N + bn - 1) / bn, 1);
    double slice = bib_vk_loop(bm * bk / nt, 0) + bib_vk_loop(bk * bn / nt, 0) + bib_vk_loop(bk, 0);
    double divs = c->sub == BIB_ACT_GELU ? 1 : c->sub == BIB_ACT_GELU_ERF ? 2 : 0;
    double epilogue = bib_vk_loop(tm, bib_vk_loop(tn, divs * bib_vk_div_loops(ex)));
    double tile = bib_vk_loop((double)(((uint64_t)K + bk - 1) / bk), slice) + epilogue;
    return bib_vk_loop(rows, bib_vk_loop(cols, tile));
}

int bib_vk_matmul_tiles(const char *name) {
    for (size_t i = 0; name && i < sizeof bib_vk_mm_tiles / sizeof bib_vk_mm_tiles[0]; i++)
        if (strcmp(name, bib_vk_mm_tiles[i].name) == 0)
            return (int)i + 1;
    return 0;
}

static bib_status_t bib_vk_matmul(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *a = &c->in[0], *b = &c->in[1], *bias = &c->in[2];
    uint32_t M = a->dims[0], K = a->dims[1], N = b->dims[1];
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    const char *names[4] = {"matmul output", "matmul input a", "matmul input b",
                            bias->buf ? "matmul bias" : NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    p.n[0] = M;
    p.n[1] = N;
    p.n[2] = K;
    p.u[0] = c->sub;
    p.u[1] = bias->buf != NULL;
    int pick = bib_vk_mm_pick(ex, M, N);
    uint32_t bm = bib_vk_mm_tiles[pick].bm, bn = bib_vk_mm_tiles[pick].bn,
             tm = bib_vk_mm_tiles[pick].tm, tn = bib_vk_mm_tiles[pick].tn;
    uint32_t spec[8] = {bm, bn, bib_vk_mm_tiles[pick].bk, tm, tn, (bm / tm) * (bn / tn), c->sub, 0};
    if (M == 0 || N == 0)
        return BIB_OK;
    /* Capped at 65535 workgroups per axis (NVIDIA allows no more along y);
       the shader strides over the tiles beyond. */
    uint32_t gx = bib_vk_groups(N, bn), gy = bib_vk_groups(M, bm);
    if (tm * tn <= 16 || ex->fma_path < BIB_VK_FMA_FLUSHING)
        return bib_vk_dispatch(ex, "matmul", spec, 8, bufs, &p, gx, gy, 1);
    /* Large blocks over a flushing fma(): the fast path alone, then the
     * tiles it gave up on, every step checked (matmul.comp's PASS), through
     * one word a tile in a scratch range freed at once (recorded work keeps
     * it). */
    void *marks = NULL;
    uint64_t tiles = (uint64_t)((M + bm - 1) / bm) * ((N + bn - 1) / bn);
    if ((st = bib_vk_buffer_alloc(ex, (size_t)tiles * 4, &marks)) != BIB_OK)
        return st;
    p.off_scratch = 0;
    bufs[4] = marks;
    spec[7] = 1;
    st = bib_vk_dispatch(ex, "matmul", spec, 8, bufs, &p, gx, gy, 1);
    spec[7] = 2;
    if (st == BIB_OK)
        st = bib_vk_dispatch(ex, "matmul", spec, 8, bufs, &p, gx, gy, 1);
    bib_vk_buffer_free(ex, marks);
    return st;
}

/* ---- TRANSPOSE ----------------------------------------------------------- */

static bib_status_t bib_vk_transpose(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0];
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"transpose output", "transpose input", NULL, NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint32_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1], batch = 1;
    for (uint32_t i = 0; i + 2 < x->rank; i++)
        batch *= x->dims[i];
    p.n[0] = batch;
    p.n[1] = rows;
    p.n[2] = cols;
    return bib_vk_dispatch(ex, "transpose", NULL, 0, bufs, &p, (cols + 31) / 32, (rows + 31) / 32,
                           batch);
}

/* ---- elementwise --------------------------------------------------------- */

static bib_status_t bib_vk_unary_op(bib_executor_t *ex, const bib_call_t *c, uint32_t op,
                                    uint32_t param) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"output", "input", NULL, NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint64_t n = bib_view_count(&c->out);
    p.n[0] = (uint32_t)n;
    p.u[1] = param;
    return bib_vk_dispatch_items(ex, "unary", &op, 1, bufs, &p, n);
}

/* dtypes.comp's KIND constant. */
enum {
    BIB_VK_DT_CAST_F2I,
    BIB_VK_DT_CAST_I2F,
    BIB_VK_DT_COMPARE_F32,
    BIB_VK_DT_COMPARE_I32,
    BIB_VK_DT_WHERE,
    BIB_VK_DT_LOGIC,
    BIB_VK_DT_BINARY_I32,
    BIB_VK_DT_COPY,
    BIB_VK_DT_UNARY_I32,
};

static bib_status_t bib_vk_dtypes(bib_executor_t *ex, const bib_call_t *c, uint32_t kind);

static bib_status_t bib_vk_unary(bib_executor_t *ex, const bib_call_t *c) {
    if (c->out.dtype == BIB_DTYPE_I32)
        return bib_vk_dtypes(ex, c, BIB_VK_DT_UNARY_I32);
    return bib_vk_unary_op(ex, c, c->sub, 0);
}

static bib_status_t bib_vk_scale(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_unary_op(ex, c, 100, bib_f32_bits(c->f[0]));
}

/* ---- row kernels: one workgroup of 64 per row (THE tree) ----------------- */

/* A row shader's dispatch: push n0 = rows, n1 = row length, u1 = param;
 * per_group rows to a workgroup (1: a workgroup of 64 lanes per row; 64:
 * an invocation per row). */
static bib_status_t bib_vk_rows_dispatch(bib_executor_t *ex, const bib_call_t *c,
                                         const char *shader, uint32_t op, uint32_t param,
                                         int inputs, uint32_t per_group) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    const char *names[4] = {"output", "input", inputs > 1 ? "gamma" : NULL,
                            inputs > 2 ? "beta" : NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint32_t n;
    uint64_t rows = bib_call_rows(c, &n);
    p.n[0] = (uint32_t)rows;
    p.n[1] = n;
    p.u[1] = param;
    if (rows == 0)
        return BIB_OK;
    return bib_vk_dispatch(ex, shader, &op, 1, bufs, &p, bib_vk_groups(rows, per_group), 1, 1);
}

static bib_status_t bib_vk_rowwise(bib_executor_t *ex, const bib_call_t *c, const char *shader,
                                   uint32_t op, uint32_t param, int inputs) {
    return bib_vk_rows_dispatch(ex, c, shader, op, param, inputs, 1);
}

/* The row shaders' loops for one invocation: the rows its workgroup strides
 * over, for each its lane's passes along the row (one in 64 elements) and
 * THE tree. reduce.comp: one pass, MEAN's division, ARGMAX's lane 0 over
 * the 64 lanes. softmax.comp: three passes, the last dividing, and LOG's
 * bib_log (two divisions). norm.comp: at most three passes, the last
 * dividing, two divisions and a square root. */
static double bib_vk_rows_loops(const bib_executor_t *ex, const bib_call_t *c) {
    uint32_t n;
    uint64_t rows = bib_call_rows(c, &n);
    double lane = (double)(((uint64_t)n + 63) / 64), row;
    if (c->kernel == BIB_KERNEL_REDUCE || c->kernel == BIB_KERNEL_ARGMAX)
        row = bib_vk_loop(lane, 0) + BIB_VK_TREE_LOOPS + BIB_VK_DIV_LOOPS + bib_vk_loop(64, 0);
    else
        row = 2 * bib_vk_loop(lane, 0) + bib_vk_loop(lane, bib_vk_div_loops(ex)) +
              2 * BIB_VK_TREE_LOOPS + 3 * BIB_VK_DIV_LOOPS;
    return bib_vk_loop(bib_vk_strides(rows, 1), row);
}

static bib_status_t bib_vk_softmax(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_rowwise(ex, c, "softmax", c->sub == BIB_SOFTMAX_LOG, 0, 1);
}

static bib_status_t bib_vk_reduce(bib_executor_t *ex, const bib_call_t *c) {
    static const uint32_t ops[BIB_REDUCE__COUNT] = {[BIB_REDUCE_SUM] = 0,
                                                    [BIB_REDUCE_MAX] = 1,
                                                    [BIB_REDUCE_MEAN] = 2,
                                                    [BIB_REDUCE_MIN] = 4,
                                                    [BIB_REDUCE_PROD] = 5};
    _Static_assert(BIB_REDUCE__COUNT == 5, "shaders/vulkan/reduce.comp has an op per reduction");
    return bib_vk_rowwise(ex, c, "reduce", ops[c->sub], 0, 1);
}

static bib_status_t bib_vk_argmax(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_rowwise(ex, c, "reduce", c->sub == BIB_ARGMAX_MIN ? 6 : 3, 0, 1);
}

/* argsort.comp: each lane's elements of its row (one in 64), each placed
 * by a loop over the whole row; those placed below k (the output's last
 * axis) are written. */
static bib_status_t bib_vk_argsort(bib_executor_t *ex, const bib_call_t *c) {
    uint32_t k = (uint32_t)c->out.dims[c->out.rank - 1];
    return bib_vk_rowwise(ex, c, "argsort", c->sub == BIB_ARGMAX_MIN ? 1 : 0, k, 1);
}

static double bib_vk_argsort_loops(const bib_call_t *c) {
    uint32_t n;
    uint64_t rows = bib_call_rows(c, &n);
    double lane = (double)(((uint64_t)n + 63) / 64);
    return bib_vk_loop(bib_vk_strides(rows, 1), bib_vk_loop(lane, bib_vk_loop((double)n, 0)));
}

/* cumsum.comp: one invocation per row, a loop along it. */
static bib_status_t bib_vk_cumsum(bib_executor_t *ex, const bib_call_t *c) {
    uint32_t op = (uint32_t)c->i[0] | (c->out.dtype == BIB_DTYPE_I32 ? 4u : 0u);
    return bib_vk_rows_dispatch(ex, c, "cumsum", op, 0, 1, 64);
}

static double bib_vk_cumsum_loops(const bib_call_t *c) {
    uint32_t n;
    uint64_t rows = bib_call_rows(c, &n);
    return bib_vk_loop(bib_vk_strides(rows, 64), bib_vk_loop((double)n, 0));
}

static bib_status_t bib_vk_layernorm(bib_executor_t *ex, const bib_call_t *c) {
    /* PACKED: gamma and beta are the rows of in1 (norm.comp's op 2). */
    if (c->sub == BIB_LAYERNORM_PACKED)
        return bib_vk_rowwise(ex, c, "norm", 2, bib_f32_bits(c->f[0]), 2);
    return bib_vk_rowwise(ex, c, "norm", 0, bib_f32_bits(c->f[0]), 3);
}

static bib_status_t bib_vk_rmsnorm(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_rowwise(ex, c, "norm", 1, bib_f32_bits(c->f[0]), 2);
}

/* ---- ATTENTION ----------------------------------------------------------- */

/* attention.comp's loops for one invocation: the queries its workgroup
 * strides over, for each its lane's passes over the keys (one in 64), each
 * with the dot product's loop over D, THE tree twice, two more passes over
 * the keys (the last dividing), then its lane's outputs (one in 64 of D),
 * each a loop over every key. */
static double bib_vk_attention_loops(const bib_executor_t *ex, const bib_call_t *c) {
    uint32_t S = c->in[0].dims[0], D = c->in[0].dims[2], T = c->in[1].dims[0];
    double keys = (double)(((uint64_t)T + 63) / 64), outs = (double)(((uint64_t)D + 63) / 64);
    double row = bib_vk_loop(keys, bib_vk_loop(D, 0)) + 2 * BIB_VK_TREE_LOOPS +
                 bib_vk_loop(keys, 0) + bib_vk_loop(keys, bib_vk_div_loops(ex)) +
                 bib_vk_loop(outs, bib_vk_loop(T, 0));
    return bib_vk_loop(bib_vk_strides(S, 1), row);
}

static bib_status_t bib_vk_attention(bib_executor_t *ex, const bib_call_t *c) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"attention output", "attention q", "attention k",
                                         "attention v"};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint32_t S = c->in[0].dims[0], H = c->in[0].dims[1], D = c->in[0].dims[2];
    uint32_t T = c->in[1].dims[0];
    if (S == 0 || H == 0 || D == 0)
        return BIB_OK;
    /* The probabilities of every (head, query) row live in a scratch range
     * that is freed at once: recorded work keeps it (see buffer_free). */
    void *scratch = NULL;
    if ((st = bib_vk_buffer_alloc(ex, (size_t)S * H * (T ? T : 1) * 4, &scratch)) != BIB_OK)
        return st;
    p.off_scratch = 0; /* the scratch binding is its own buffer's range */
    p.n[0] = S;
    p.n[1] = H;
    p.n[2] = D;
    p.n[3] = T;
    p.u[0] = c->sub != 0;
    p.u[1] = bib_f32_bits(c->f[0]);
    bufs[4] = scratch;
    st = bib_vk_dispatch(ex, "attention", NULL, 0, bufs, &p, bib_vk_groups(S, 1), H, 1);
    bib_vk_buffer_free(ex, scratch);
    return st;
}

/* ---- CONV, POOL, BATCHNORM (shaders/vulkan/conv.comp) -------------------- */

/* The window words of a CONV or POOL call that the shader packs two to a
 * push word (kh, kw, strides, dilations, pads): each must fit 16 bits, which
 * bib_vk_supports checks (a call past it runs on the CPU executor). */
static bool bib_vk_window_fits(const bib_call_t *c) {
    for (int i = c->kernel == BIB_KERNEL_CONV ? 1 : 0; i < 10; i++)
        if (c->p[i] < 0 || c->p[i] > 0xffff)
            return false;
    const bib_view_t *w = &c->in[1];
    return c->kernel != BIB_KERNEL_CONV ||
           (w->dims[w->rank - 1] <= 0xffff && (w->rank == 3 || w->dims[2] <= 0xffff));
}

/* conv.comp's loops for one invocation: the outputs it strides over
 * (bib_vk_dispatch_items' grid), for each CONV's loop over the group's
 * channels around the window's rows and columns, or a pool's window and
 * AVGPOOL's division; BATCHNORM's items divide and take a square root. */
static double bib_vk_conv_loops(const bib_call_t *c) {
    const bib_view_t *w = &c->in[1];
    double item;
    if (c->kernel == BIB_KERNEL_BATCHNORM)
        return bib_vk_items_loops(bib_view_count(&c->out));
    if (c->kernel == BIB_KERNEL_CONV)
        item = bib_vk_loop(w->dims[1], bib_vk_loop(w->rank == 3 ? 1 : w->dims[2],
                                                   bib_vk_loop(w->dims[w->rank - 1], 0)));
    else
        item = bib_vk_loop((double)c->p[0], bib_vk_loop((double)c->p[1], 0)) + BIB_VK_DIV_LOOPS;
    return bib_vk_loop(bib_vk_strides(bib_view_count(&c->out), 256), item);
}

static uint32_t bib_vk_pair(int64_t lo, int64_t hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* What conv.comp's CONV and POOL share: x's H and W in n[1] and n[2], the
 * output's OH and OW in n[4] and n[5] (a rank-3 view is 1-D, H = OH = 1),
 * and the output's element count, in off_in2 and returned. */
static uint64_t bib_vk_spatial(const bib_call_t *c, bib_vk_push_t *p) {
    const bib_view_t *x = &c->in[0], *o = &c->out;
    bool one_d = x->rank == 3;
    uint64_t n = bib_view_count(o);
    p->n[1] = one_d ? 1 : x->dims[2];
    p->n[2] = x->dims[x->rank - 1];
    p->n[4] = one_d ? 1 : o->dims[2];
    p->n[5] = o->dims[o->rank - 1];
    p->off_in2 = (uint32_t)n;
    return n;
}

static bib_status_t bib_vk_conv(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0], *w = &c->in[1], *o = &c->out;
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"conv output", "conv input", "conv weights", NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint64_t n = bib_vk_spatial(c, &p);
    p.n[0] = w->dims[1];
    p.n[3] = o->dims[1];
    p.off_scratch = (uint32_t)(o->dims[1] / (uint64_t)c->p[0]);
    p.u[0] = bib_vk_pair(x->rank == 3 ? 1 : w->dims[2], w->dims[w->rank - 1]);
    p.u[1] = bib_vk_pair(c->p[1], c->p[2]);
    p.u[2] = bib_vk_pair(c->p[3], c->p[4]);
    p.u[3] = bib_vk_pair(c->p[5], c->p[6]);
    uint32_t op = 0;
    if (n == 0)
        return BIB_OK;
    return bib_vk_dispatch_items(ex, "conv", &op, 1, bufs, &p, n);
}

static bib_status_t bib_vk_pool(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0];
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"pool output", "pool input", NULL, NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint64_t n = bib_vk_spatial(c, &p);
    p.n[0] = p.n[3] = x->dims[1];
    p.off_scratch = bib_vk_pair(c->p[8], c->p[9]);
    for (int i = 0; i < 4; i++)
        p.u[i] = bib_vk_pair(c->p[2 * i], c->p[2 * i + 1]);
    uint32_t op = c->sub == BIB_POOL_MAX ? 1 : c->p[11] ? 3 : 2;
    if (n == 0)
        return BIB_OK;
    return bib_vk_dispatch_items(ex, "conv", &op, 1, bufs, &p, n);
}

static bib_status_t bib_vk_batchnorm(bib_executor_t *ex, const bib_call_t *c) {
    const bib_view_t *x = &c->in[0], *o = &c->out;
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"batchnorm output", "batchnorm input",
                                         "batchnorm statistics", NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint64_t n = bib_view_count(o), planes = (uint64_t)x->dims[0] * x->dims[1];
    p.n[0] = (uint32_t)n;
    p.n[1] = x->dims[1];
    p.n[2] = planes ? (uint32_t)(n / planes) : 1;
    p.u[0] = bib_f32_bits(c->f[0]);
    uint32_t op = c->sub == BIB_ACT_RELU ? 5 : 4;
    if (n == 0)
        return BIB_OK;
    return bib_vk_dispatch_items(ex, "conv", &op, 1, bufs, &p, n);
}

/* ---- GATHER and RNG ------------------------------------------------------ */

static bib_status_t bib_vk_gather(bib_executor_t *ex, const bib_call_t *c) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"gather output", "gather table", "gather indices", NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    uint32_t rows = c->in[0].dims[0];
    uint64_t width = rows ? bib_view_count(&c->in[0]) / rows : 0;
    uint64_t n = bib_view_count(&c->in[1]);
    if (st != BIB_OK || n == 0)
        return st;
    /* An index out of range is an error the caller must see at this call. */
    if ((st = bib_call_check_on_host(&bib_vulkan_executor, bib_vk_fail, ex, c)) != BIB_OK ||
        width == 0)
        return st;
    p.n[0] = (uint32_t)n;
    p.n[1] = (uint32_t)width;
    p.n[2] = rows;
    return bib_vk_dispatch_items(ex, "gather", NULL, 0, bufs, &p, n * width);
}

static bib_status_t bib_vk_rng(bib_executor_t *ex, const bib_call_t *c) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"rng output", NULL, NULL, NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint64_t n = bib_view_count(&c->out);
    uint64_t seed = (uint64_t)c->i[0], stream = (uint64_t)c->i[1];
    p.n[0] = (uint32_t)n;
    p.u[0] = (uint32_t)seed;
    p.u[1] = (uint32_t)(seed >> 32);
    p.u[2] = (uint32_t)stream;
    p.u[3] = (uint32_t)(stream >> 32);
    if (n == 0)
        return BIB_OK;
    return bib_vk_dispatch_items(ex, "rng", NULL, 0, bufs, &p, (n + 3) / 4);
}

/* ---- dtypes: CAST, COMPARE, WHERE, LOGIC, BINARY on i32 (dtypes.comp) -- */

/* dtypes.comp numbers the subs so. */
_Static_assert(BIB_COMPARE_EQ == 0 && BIB_COMPARE_LT == 1 && BIB_COMPARE_LE == 2 &&
                   BIB_COMPARE_GT == 3 && BIB_COMPARE_GE == 4 && BIB_COMPARE__COUNT == 5,
               "shaders/vulkan/dtypes.comp compare() numbers bib_compare_t");
_Static_assert(BIB_LOGIC_NOT == 0 && BIB_LOGIC_AND == 1 && BIB_LOGIC_OR == 2 &&
                   BIB_LOGIC_XOR == 3 && BIB_LOGIC__COUNT == 4,
               "shaders/vulkan/dtypes.comp numbers bib_logic_t");

/* dtypes.comp's own numbers of the i32 BINARY and UNARY ops. */
static uint32_t bib_vk_dt_sub(uint32_t kind, uint32_t sub) {
    if (kind == BIB_VK_DT_UNARY_I32)
        return sub == BIB_UNARY_NEG;
    if (kind != BIB_VK_DT_BINARY_I32)
        return sub;
    switch ((bib_binary_t)sub) {
    case BIB_BINARY_ADD:
        return 0;
    case BIB_BINARY_SUB:
        return 1;
    case BIB_BINARY_MUL:
        return 2;
    case BIB_BINARY_DIV:
        return 3;
    case BIB_BINARY_MIN:
        return 4;
    case BIB_BINARY_MAX:
        return 5;
    case BIB_BINARY_POW: /* f32 only (bib_binary_i32) */
    case BIB_BINARY__COUNT:
        break;
    }
    return 0;
}

static bib_status_t bib_vk_dtypes(bib_executor_t *ex, const bib_call_t *c, uint32_t kind) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    const char *names[4] = {"output", c->in[0].buf ? "input 0" : NULL,
                            c->in[1].buf ? "input 1" : NULL, c->in[2].buf ? "input 2" : NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    const bib_view_t *x = &c->in[0];
    bib_broadcast_t forms[3];
    if (!bib_call_forms(c, forms))
        return bib_vk_fail(ex, BIB_E_USAGE, "vulkan: operand shapes do not broadcast");
    uint32_t spec[4] = {kind, bib_vk_dt_sub(kind, c->sub), (uint32_t)forms[1], (uint32_t)forms[2]};
    uint64_t n = bib_view_count(&c->out);
    if (n == 0)
        return BIB_OK;
    /* i32 DIV: a zero divisor is an error this call must return. */
    if ((st = bib_call_check_on_host(&bib_vulkan_executor, bib_vk_fail, ex, c)) != BIB_OK)
        return st;
    p.n[0] = (uint32_t)n;
    p.n[1] = x->rank ? x->dims[x->rank - 1] : 1;
    return bib_vk_dispatch_items(ex, "dtypes", spec, 4, bufs, &p, n);
}

static bib_status_t bib_vk_cast(bib_executor_t *ex, const bib_call_t *c) {
    uint32_t kind = c->in[0].dtype == c->out.dtype  ? BIB_VK_DT_COPY
                    : c->out.dtype == BIB_DTYPE_I32 ? BIB_VK_DT_CAST_F2I
                                                    : BIB_VK_DT_CAST_I2F;
    return bib_vk_dtypes(ex, c, kind);
}

static bib_status_t bib_vk_compare(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_dtypes(
        ex, c, c->in[0].dtype == BIB_DTYPE_I32 ? BIB_VK_DT_COMPARE_I32 : BIB_VK_DT_COMPARE_F32);
}

static bib_status_t bib_vk_where(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_dtypes(ex, c, BIB_VK_DT_WHERE);
}

static bib_status_t bib_vk_logic(bib_executor_t *ex, const bib_call_t *c) {
    return bib_vk_dtypes(ex, c, BIB_VK_DT_LOGIC);
}

static bib_status_t bib_vk_binary(bib_executor_t *ex, const bib_call_t *c) {
    if (c->out.dtype == BIB_DTYPE_I32)
        return bib_vk_dtypes(ex, c, BIB_VK_DT_BINARY_I32);
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"output", "input 0", "input 1", NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    bib_broadcast_t mode = bib_call_broadcast(c);
    if (mode == BIB_BROADCAST_NONE)
        return bib_vk_fail(ex, BIB_E_USAGE, "vulkan: binary operand shapes do not broadcast");
    uint64_t n = bib_view_count(&c->out);
    p.n[0] = (uint32_t)n;
    p.n[1] = c->in[0].rank ? c->in[0].dims[c->in[0].rank - 1] : 1;
    uint32_t spec[2] = {c->sub, (uint32_t)mode};
    return bib_vk_dispatch_items(ex, "binary", spec, 2, bufs, &p, n);
}

/* ---- STRIDED and TAKE ---------------------------------------------------- */

/* The output's shape padded to BIB_MAX_RANK axes in n[], the call's p[] in
 * s[] (bib_vk_supports: each fits), one invocation per output element. */
static bib_status_t bib_vk_indexed(bib_executor_t *ex, const bib_call_t *c, const char *shader,
                                   const char *const names[4]) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++)
        p.n[k] = bib_view_padded_dim(&c->out, k);
    for (int i = 0; i < BIB_CALL_PARAMS; i++)
        p.s[i] = (int32_t)c->p[i];
    uint64_t n = bib_view_count(&c->out);
    p.u[0] = (uint32_t)n;
    if (n == 0)
        return BIB_OK;
    return bib_vk_dispatch_items(ex, shader, NULL, 0, bufs, &p, n);
}

static bib_status_t bib_vk_strided(bib_executor_t *ex, const bib_call_t *c) {
    const char *names[4] = {"strided output", "strided input 0",
                            c->in[1].buf ? "strided input 1" : NULL, NULL};
    return bib_vk_indexed(ex, c, "strided", names);
}

static bib_status_t bib_vk_take(bib_executor_t *ex, const bib_call_t *c) {
    static const char *const names[4] = {"take output", "take table", "take indices", NULL};
    return bib_vk_indexed(ex, c, "take", names);
}

/* ---- transfers ----------------------------------------------------------- */

static bib_status_t bib_vk_fill(bib_executor_t *ex, const bib_call_t *c) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"fill output", NULL, NULL, NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    uint64_t n = bib_view_count(&c->out);
    if (st != BIB_OK || n == 0)
        return st;
    if ((st = bib_vk_time_reserve(ex)) != BIB_OK || (st = bib_vk_begin(ex)) != BIB_OK)
        return st;
    const bib_vk_buffer_t *b = c->out.buf;
    VkDeviceSize at = b->offset + (VkDeviceSize)p.off_out * 4; /* in the block */
    bib_vk_access_t acc = {b->block, at, at + n * 4, true};
    bib_vk_hazard(ex, &acc, 1);
    uint32_t word =
        c->out.dtype == BIB_DTYPE_I32 ? (uint32_t)(int32_t)c->i[0] : bib_f32_bits(c->f[0]);
    bib_vk_time_begin(ex);
    vkCmdFillBuffer(ex->cmd, bib_vk_block_buffer(ex, b), at, n * 4, word);
    bib_vk_time_end(ex);
    return BIB_OK;
}

/* Records one buffer-to-buffer copy of bytes, with the barrier it needs. */
static bib_status_t bib_vk_record_copy(bib_executor_t *ex, const bib_vk_buffer_t *src,
                                       VkDeviceSize from, const bib_vk_buffer_t *dst,
                                       VkDeviceSize to, VkDeviceSize bytes) {
    bib_status_t st;
    if ((st = bib_vk_time_reserve(ex)) != BIB_OK || (st = bib_vk_begin(ex)) != BIB_OK)
        return st;
    bib_vk_access_t acc[2] = {{dst->block, to, to + bytes, true},
                              {src->block, from, from + bytes, false}};
    bib_vk_hazard(ex, acc, 2);
    VkBufferCopy region = {from, to, bytes};
    bib_vk_time_begin(ex);
    vkCmdCopyBuffer(ex->cmd, bib_vk_block_buffer(ex, src), bib_vk_block_buffer(ex, dst), 1,
                    &region);
    bib_vk_time_end(ex);
    return BIB_OK;
}

static bib_status_t bib_vk_copy(bib_executor_t *ex, const bib_call_t *c) {
    bib_vk_push_t p = {0};
    bib_vk_buffer_t *bufs[BIB_VK_BINDINGS];
    static const char *const names[4] = {"copy output", "copy input", NULL, NULL};
    bib_status_t st = bib_vk_views(ex, c, names, &p, bufs);
    if (st != BIB_OK)
        return st;
    uint64_t n = bib_view_count(&c->out);
    const bib_vk_buffer_t *bo = bufs[0], *bi = bufs[1];
    VkDeviceSize to = bo->offset + (VkDeviceSize)p.off_out * 4,
                 from = bi->offset + (VkDeviceSize)p.off_in0 * 4;
    if (n == 0 || (bo->block == bi->block && to == from))
        return BIB_OK;
    if (bo->block != bi->block || to + n * 4 <= from || from + n * 4 <= to)
        return bib_vk_record_copy(ex, bi, from, bo, to, n * 4);
    /* Overlapping ranges move as memmove does (vkCmdCopyBuffer forbids
       overlap): through a temporary, freed at once since recorded work keeps
       it (see buffer_free). */
    void *tmp = NULL;
    if ((st = bib_vk_buffer_alloc(ex, (size_t)n * 4, &tmp)) != BIB_OK)
        return st;
    const bib_vk_buffer_t *t = tmp;
    st = bib_vk_record_copy(ex, bi, from, t, t->offset, n * 4);
    if (st == BIB_OK)
        st = bib_vk_record_copy(ex, t, t->offset, bo, to, n * 4);
    bib_vk_buffer_free(ex, tmp);
    return st;
}

/* ---- support ------------------------------------------------------------- */

/* Matrices in a tensor of rank >= 2 (the product of the leading axes). */
static uint64_t bib_vk_batch(const bib_view_t *v) {
    uint64_t b = 1;
    for (uint32_t i = 0; i + 2 < v->rank; i++)
        b *= v->dims[i];
    return b;
}

/* Iterations kept clear of the limit, for what the bounds may miss. */
#define BIB_VK_LOOP_MARGIN 64

/* At most how many loop iterations one invocation of the call's shader
 * runs (the bounds beside each kernel above); 0 for a kernel without a
 * shader or whose loops are few and fixed (TRANSPOSE: 8). */
static double bib_vk_loops(const bib_executor_t *ex, const bib_call_t *c) {
    switch (c->kernel) {
    case BIB_KERNEL_MATMUL:
        return bib_vk_matmul_loops(ex, c);
    case BIB_KERNEL_SOFTMAX:
    case BIB_KERNEL_REDUCE:
    case BIB_KERNEL_ARGMAX:
    case BIB_KERNEL_LAYERNORM:
    case BIB_KERNEL_RMSNORM:
        return bib_vk_rows_loops(ex, c);
    case BIB_KERNEL_ATTENTION:
        return bib_vk_attention_loops(ex, c);
    case BIB_KERNEL_ARGSORT:
        return bib_vk_argsort_loops(c);
    case BIB_KERNEL_CUMSUM:
        return bib_vk_cumsum_loops(c);
    case BIB_KERNEL_CONV:
    case BIB_KERNEL_POOL:
    case BIB_KERNEL_BATCHNORM:
        return bib_vk_conv_loops(c);
    case BIB_KERNEL_GATHER:
        return bib_vk_items_loops(bib_view_count(&c->out));
    case BIB_KERNEL_RNG:
        return bib_vk_items_loops((bib_view_count(&c->out) + 3) / 4);
    case BIB_KERNEL_UNARY:
    case BIB_KERNEL_BINARY:
    case BIB_KERNEL_SCALE:
    case BIB_KERNEL_CAST:
    case BIB_KERNEL_COMPARE:
    case BIB_KERNEL_WHERE:
    case BIB_KERNEL_LOGIC:
    case BIB_KERNEL_STRIDED:
    case BIB_KERNEL_TAKE:
        return bib_vk_items_loops(bib_view_count(&c->out));
    case BIB_KERNEL_TRANSPOSE:
    case BIB_KERNEL_FILL:
    case BIB_KERNEL_COPY:
    case BIB_KERNEL__COUNT:
        break;
    }
    return 0;
}

/* The limits on sizes and parameters that the shaders' indexing and grids
 * impose. */
static bool bib_vk_fits(bib_executor_t *ex, const bib_call_t *c) {
    if (!bib_call_shapes_ok(c, 0))
        return false;
    const bib_view_t *x = &c->in[0], *y = &c->in[1];
    /* Element indices are 32-bit in the shaders; tensors live in one block. */
    uint64_t limit = ex->max_buffer / 4;
    for (int i = -1; i < 3; i++) {
        const bib_view_t *v = i < 0 ? &c->out : &c->in[i];
        if (v->buf && bib_view_count(v) > limit)
            return false;
    }
    switch (c->kernel) {
    case BIB_KERNEL_TRANSPOSE:
        return x->dims[x->rank - 2] <= 65535u * 32u && x->dims[x->rank - 1] <= 65535u * 32u &&
               bib_vk_batch(x) <= 65535u;
    case BIB_KERNEL_STRIDED:
    case BIB_KERNEL_TAKE:
        /* The shaders' offsets and strides are ints. */
        for (int i = 0; i < BIB_CALL_PARAMS; i++)
            if (c->p[i] < INT32_MIN || c->p[i] > INT32_MAX)
                return false;
        return true;
    case BIB_KERNEL_CONV:
    case BIB_KERNEL_POOL:
        return bib_vk_window_fits(c);
    case BIB_KERNEL_ATTENTION:
        return x->dims[1] <= 65535u &&
               (uint64_t)x->dims[0] * x->dims[1] * (y->dims[0] ? y->dims[0] : 1) <= limit;
    default:
        return true;
    }
}

/* The GPU executors' common rules (backends/callcheck.c), then Vulkan's
 * limits: workgroup counts, 32-bit element indices into one block, and the
 * device's loop iterations an invocation (lavapipe: 65535). */
bool bib_vk_supports(bib_executor_t *ex, const bib_call_t *c) {
    if (!bib_vk_fits(ex, c))
        return false;
    /* Past the probed limit the driver would stop the shader's loops and
       leave work undone; the CPU executor gives the call's bits instead. */
    return ex->loop_limit == 0 || bib_vk_loops(ex, c) + BIB_VK_LOOP_MARGIN <= ex->loop_limit;
}

/* ---- probes and test hooks ---------------------------------------------- */

static bib_status_t bib_vk_run_arrays(bib_executor_t *ex, const char *shader, const float *in0,
                                      size_t n0, const float *in1, size_t n1, float *out,
                                      size_t nout, uint32_t count) {
    void *b0 = NULL, *b1 = NULL, *bo = NULL;
    bib_status_t st = bib_vk_buffer_alloc(ex, n0 * 4, &b0);
    if (st == BIB_OK && in1)
        st = bib_vk_buffer_alloc(ex, n1 * 4, &b1);
    if (st == BIB_OK)
        st = bib_vk_buffer_alloc(ex, nout * 4, &bo);
    if (st == BIB_OK)
        st = bib_vk_upload(ex, b0, 0, in0, n0 * 4);
    if (st == BIB_OK && in1)
        st = bib_vk_upload(ex, b1, 0, in1, n1 * 4);
    if (st == BIB_OK) {
        bib_vk_push_t p = {0}; /* offsets 0: each binding is its own buffer's range */
        p.n[0] = count;
        bib_vk_buffer_t *bufs[BIB_VK_BINDINGS] = {bo, b0, b1, NULL, NULL};
        st = bib_vk_dispatch(ex, shader, NULL, 0, bufs, &p, bib_vk_groups(count, 64), 1, 1);
    }
    if (st == BIB_OK)
        st = bib_vk_download(ex, bo, 0, out, nout * 4);
    bib_vk_buffer_free(ex, b0);
    bib_vk_buffer_free(ex, b1);
    bib_vk_buffer_free(ex, bo);
    return st;
}

bib_status_t bib_vk_run_probe(bib_executor_t *ex, bib_vk_fma_path_t path, const float *xyz,
                              float *res, uint32_t count) {
    bib_vk_fma_path_t saved = ex->fma_path;
    ex->fma_path = path;
    bib_status_t st = bib_vk_run_arrays(ex, "probe", xyz, 3 * (size_t)count, NULL, 0, res,
                                        3 * (size_t)count, count);
    ex->fma_path = saved;
    return st;
}

bib_status_t bib_vk_run_loops(bib_executor_t *ex, const uint32_t counts[3], bool divide,
                              uint32_t ran[3]) {
    void *bo = NULL;
    bib_status_t st = bib_vk_buffer_alloc(ex, 3 * 4, &bo);
    if (st == BIB_OK) {
        bib_vk_push_t p = {0};
        memcpy(p.n, counts, 3 * sizeof *counts);
        p.u[0] = bib_f32_bits(1.0e30f);
        p.u[1] = bib_f32_bits(1.0001f);
        uint32_t spec = divide;
        bib_vk_buffer_t *bufs[BIB_VK_BINDINGS] = {bo, NULL, NULL, NULL, NULL};
        st = bib_vk_dispatch(ex, "loops", &spec, 1, bufs, &p, 1, 1, 1);
    }
    if (st == BIB_OK)
        st = bib_vk_download(ex, bo, 0, ran, 3 * 4);
    bib_vk_buffer_free(ex, bo);
    return st;
}

bib_status_t bib_vulkan_divsqrt(bib_executor_t *ex, const float *a, const float *b, float *q,
                                float *r, uint32_t n) {
    float *out = malloc(2 * (size_t)n * sizeof *out);
    if (!out)
        return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory");
    bib_status_t st = bib_vk_run_arrays(ex, "divsqrt", a, n, b, n, out, 2 * (size_t)n, n);
    for (uint32_t i = 0; st == BIB_OK && i < n; i++) {
        q[i] = out[2 * i];
        r[i] = out[2 * i + 1];
    }
    free(out);
    return st;
}

/* One entry per kernel whose EXECUTORS column in isa/kernels.def names this
 * executor: tools/isa-gen.c fails the build when the two disagree. */
_Static_assert(BIB_KERNEL__COUNT == 26, "a kernel was added to isa/kernels.def: give it an "
                                        "entry below, or leave this executor out of its row");

const bib_executor_ops_t bib_vulkan_executor = {
    .name = "vulkan",
    .id = BIB_EXECUTOR_VULKAN,
    .init = bib_vk_init,
    .shutdown = bib_vk_shutdown,
    .error = bib_vk_error,
    .buffer_alloc = bib_vk_buffer_alloc,
    .buffer_free = bib_vk_buffer_free,
    .upload = bib_vk_upload,
    .download = bib_vk_download,
    .synchronize = bib_vk_synchronize,
    .memory = bib_vk_memory_query,
    .supports = bib_vk_supports,
    .kernels =
        {
            [BIB_KERNEL_MATMUL] = bib_vk_matmul,
            [BIB_KERNEL_TRANSPOSE] = bib_vk_transpose,
            [BIB_KERNEL_UNARY] = bib_vk_unary,
            [BIB_KERNEL_BINARY] = bib_vk_binary,
            [BIB_KERNEL_SCALE] = bib_vk_scale,
            [BIB_KERNEL_FILL] = bib_vk_fill,
            [BIB_KERNEL_COPY] = bib_vk_copy,
            [BIB_KERNEL_SOFTMAX] = bib_vk_softmax,
            [BIB_KERNEL_REDUCE] = bib_vk_reduce,
            [BIB_KERNEL_ARGMAX] = bib_vk_argmax,
            [BIB_KERNEL_ARGSORT] = bib_vk_argsort,
            [BIB_KERNEL_CUMSUM] = bib_vk_cumsum,
            [BIB_KERNEL_LAYERNORM] = bib_vk_layernorm,
            [BIB_KERNEL_RMSNORM] = bib_vk_rmsnorm,
            [BIB_KERNEL_ATTENTION] = bib_vk_attention,
            [BIB_KERNEL_GATHER] = bib_vk_gather,
            [BIB_KERNEL_RNG] = bib_vk_rng,
            [BIB_KERNEL_CAST] = bib_vk_cast,
            [BIB_KERNEL_COMPARE] = bib_vk_compare,
            [BIB_KERNEL_WHERE] = bib_vk_where,
            [BIB_KERNEL_LOGIC] = bib_vk_logic,
            [BIB_KERNEL_STRIDED] = bib_vk_strided,
            [BIB_KERNEL_TAKE] = bib_vk_take,
            [BIB_KERNEL_CONV] = bib_vk_conv,
            [BIB_KERNEL_POOL] = bib_vk_pool,
            [BIB_KERNEL_BATCHNORM] = bib_vk_batchnorm,
        },
    .describe = bib_vk_describe,
    .facts = bib_vk_facts,
    .program_create = bib_vk_program_create,
    .program_dispatch = bib_vk_program_dispatch,
    .program_destroy = bib_vk_program_destroy,
    .submit = bib_vk_submit,
    .timing = bib_vk_timing,
    .elapsed = bib_vk_elapsed,
};
