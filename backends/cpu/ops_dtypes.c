/* backends/cpu/ops_dtypes.c: the CPU executor's dtype kernels.
 *
 * Owns the scalar reference of CAST, COMPARE, WHERE, LOGIC and the i32 form
 * of BINARY (spec/numerics.md, "Dtypes"). They are integer operations,
 * comparisons, selects and exact or correctly rounded conversions, so one
 * scalar loop serves every SIMD level: the bits are the reference's at each
 * level and thread count. Calls are split into fixed chunks of elements;
 * each element depends on its own inputs alone (in place is allowed).
 */
#include "backends/cpu/ops_dtypes.h"

#include <stdio.h>
#include <string.h>

#include "backends/callcheck.h"

/* ---- the driver --------------------------------------------------------- */

#define DT_GRAIN ((size_t)1 << 15)

static const uint32_t *in_words(const bib_view_t *v) {
    return (const uint32_t *)v->buf + v->offset;
}

typedef struct dt_task {
    const bib_call_t *call;
    bib_broadcast_t form1, form2; /* in1's and in2's against in0 */
    size_t row;                   /* in0's last axis */
} dt_task_t;

/* Runs BODY for i in [begin, end) with j the index into an operand of form
 * `form` (the same shape: i; a row: i mod row; one element: 0). One plain
 * loop per form, so the compiler sees simple indexing. */
#define DT_FORMS(form, begin, end, row, BODY)                                                      \
    do {                                                                                           \
        if ((form) == BIB_BROADCAST_SAME) {                                                        \
            for (size_t i = (begin); i < (end); i++) {                                             \
                size_t j = i;                                                                      \
                BODY;                                                                              \
            }                                                                                      \
        } else if ((form) == BIB_BROADCAST_ROW) {                                                  \
            size_t j = (begin) % (row);                                                            \
            for (size_t i = (begin); i < (end); i++) {                                             \
                BODY;                                                                              \
                if (++j == (row))                                                                  \
                    j = 0;                                                                         \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = (begin); i < (end); i++) {                                             \
                const size_t j = 0;                                                                \
                BODY;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void task_cast(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const uint32_t *x = in_words(&c->in[0]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    if (c->in[0].dtype == c->out.dtype) {
        memmove(y + begin, x + begin, (end - begin) * sizeof *y);
    } else if (c->out.dtype == BIB_DTYPE_I32) {
        const float *xf = (const float *)x;
        int32_t *yi = (int32_t *)y;
        for (size_t i = begin; i < end; i++)
            yi[i] = bib_cast_f32_i32(xf[i]);
    } else {
        const int32_t *xi = (const int32_t *)x;
        float *yf = (float *)y;
        for (size_t i = begin; i < end; i++)
            yf[i] = bib_cast_i32_f32(xi[i]);
    }
}

/* The comparisons, one loop per relation: IEEE on f32 (NaN false, -0 ==
 * +0), signed on i32. */
#define DT_COMPARE(T)                                                                              \
    do {                                                                                           \
        const T *a = (const T *)in_words(&c->in[0]), *b = (const T *)in_words(&c->in[1]);          \
        switch ((bib_compare_t)c->sub) {                                                           \
        case BIB_COMPARE_EQ:                                                                       \
            DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] == b[j]);                           \
            break;                                                                                 \
        case BIB_COMPARE_LT:                                                                       \
            DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] < b[j]);                            \
            break;                                                                                 \
        case BIB_COMPARE_LE:                                                                       \
            DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] <= b[j]);                           \
            break;                                                                                 \
        case BIB_COMPARE_GT:                                                                       \
            DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] > b[j]);                            \
            break;                                                                                 \
        case BIB_COMPARE_GE:                                                                       \
            DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] >= b[j]);                           \
            break;                                                                                 \
        case BIB_COMPARE__COUNT:                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

static void task_compare(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    int32_t *y = (int32_t *)c->out.buf + c->out.offset;
    if (c->in[0].dtype == BIB_DTYPE_F32)
        DT_COMPARE(float);
    else
        DT_COMPARE(int32_t);
}

static void task_where(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const uint32_t *cond = in_words(&c->in[0]), *x = in_words(&c->in[1]), *z = in_words(&c->in[2]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    /* Selected by masks, not branches: a condition that changes at random
     * mispredicts a branch on every other element (4 ns an element). */
    if (t->form1 == BIB_BROADCAST_SAME && t->form2 == BIB_BROADCAST_SAME) {
        for (size_t i = begin; i < end; i++) {
            uint32_t m = 0u - (uint32_t)(cond[i] != 0);
            y[i] = (x[i] & m) | (z[i] & ~m);
        }
        return;
    }
    const size_t row = t->row;
    for (size_t i = begin; i < end; i++) {
        size_t j1 = t->form1 == BIB_BROADCAST_SAME  ? i
                    : t->form1 == BIB_BROADCAST_ROW ? i % row
                                                    : 0;
        size_t j2 = t->form2 == BIB_BROADCAST_SAME  ? i
                    : t->form2 == BIB_BROADCAST_ROW ? i % row
                                                    : 0;
        uint32_t m = 0u - (uint32_t)(cond[i] != 0);
        y[i] = (x[j1] & m) | (z[j2] & ~m);
    }
}

static void task_logic(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const int32_t *a = (const int32_t *)in_words(&c->in[0]);
    const int32_t *b = c->in[1].buf ? (const int32_t *)in_words(&c->in[1]) : NULL;
    int32_t *y = (int32_t *)c->out.buf + c->out.offset;
    switch ((bib_logic_t)c->sub) {
    case BIB_LOGIC_NOT:
        for (size_t i = begin; i < end; i++)
            y[i] = a[i] == 0;
        break;
    case BIB_LOGIC_AND:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = (a[i] != 0) & (b[j] != 0));
        break;
    case BIB_LOGIC_OR:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = (a[i] != 0) | (b[j] != 0));
        break;
    case BIB_LOGIC_XOR:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = (a[i] != 0) ^ (b[j] != 0));
        break;
    case BIB_LOGIC__COUNT:
        break;
    }
}

/* i32 division toward zero; b != 0 (checked before the call computes
 * anything); b == -1 negates, wrapping INT32_MIN to itself. */
static inline int32_t i32_div(int32_t a, int32_t b) {
    return b == -1 ? (int32_t)(0u - (uint32_t)a) : a / b;
}

static void task_binary_i32(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    /* Wrapping arithmetic on the words as unsigned; the result's bits are
       the two's complement i32. */
    const uint32_t *a = in_words(&c->in[0]), *b = in_words(&c->in[1]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    switch ((bib_binary_t)c->sub) {
    case BIB_BINARY_ADD:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] + b[j]);
        break;
    case BIB_BINARY_SUB:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] - b[j]);
        break;
    case BIB_BINARY_MUL:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = a[i] * b[j]);
        break;
    case BIB_BINARY_DIV:
        DT_FORMS(t->form1, begin, end, t->row,
                 y[i] = (uint32_t)i32_div((int32_t)a[i], (int32_t)b[j]));
        break;
    case BIB_BINARY_MIN:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = (int32_t)a[i] < (int32_t)b[j] ? a[i] : b[j]);
        break;
    case BIB_BINARY_MAX:
        DT_FORMS(t->form1, begin, end, t->row, y[i] = (int32_t)a[i] > (int32_t)b[j] ? a[i] : b[j]);
        break;
    case BIB_BINARY_POW:    /* f32 only (bib_binary_i32) */
    case BIB_BINARY__COUNT: /* not an op; -Wswitch names a binary op left out */
        break;
    }
}

/* UNARY on i32: abs and neg wrap (0 - INT32_MIN is INT32_MIN). */
static void task_unary_i32(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const uint32_t *a = in_words(&c->in[0]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    if (c->sub == BIB_UNARY_ABS) {
        for (size_t i = begin; i < end; i++)
            y[i] = (int32_t)a[i] < 0 ? 0u - a[i] : a[i];
    } else if (c->sub == BIB_UNARY_NEG) {
        for (size_t i = begin; i < end; i++)
            y[i] = 0u - a[i];
    }
}

static bib_status_t run_elements(const bib_cpu_ctx_t *ctx, const bib_call_t *c,
                                 bib_parallel_fn fn) {
    dt_task_t t = {.call = c, .form1 = BIB_BROADCAST_SAME, .form2 = BIB_BROADCAST_SAME};
    const bib_view_t *x = &c->in[0];
    t.row = x->rank ? x->dims[x->rank - 1] : 1;
    if (c->in[1].buf)
        t.form1 = bib_view_broadcast(x, &c->in[1]);
    if (c->in[2].buf)
        t.form2 = bib_view_broadcast(x, &c->in[2]);
    size_t n = (size_t)bib_view_count(&c->out);
    if (n != 0)
        bib_threadpool_parallel_for(ctx->pool, n, DT_GRAIN, fn, &t);
    return BIB_OK;
}

bool bib_cpu_dtypes_supports(const bib_call_t *c) {
    return bib_call_shapes_ok(c, 0);
}

bib_status_t bib_cpu_dtypes_run(const bib_cpu_ctx_t *ctx, const bib_call_t *c) {
    switch (c->kernel) {
    case BIB_KERNEL_CAST:
        return run_elements(ctx, c, task_cast);
    case BIB_KERNEL_COMPARE:
        return run_elements(ctx, c, task_compare);
    case BIB_KERNEL_WHERE:
        return run_elements(ctx, c, task_where);
    case BIB_KERNEL_LOGIC:
        return run_elements(ctx, c, task_logic);
    case BIB_KERNEL_UNARY:
        return run_elements(ctx, c, task_unary_i32);
    case BIB_KERNEL_BINARY: {
        /* A zero divisor traps before anything is written. */
        if (c->sub == BIB_BINARY_DIV) {
            int64_t at = bib_i32_zero_divisor((const int32_t *)in_words(&c->in[1]),
                                              bib_view_count(&c->in[1]), bib_view_count(&c->out));
            if (at >= 0) {
                bib_i32_zero_divisor_message(ctx->error, ctx->error_len, at);
                return BIB_E_TRAP;
            }
        }
        return run_elements(ctx, c, task_binary_i32);
    }
    default:
        break;
    }
    snprintf(ctx->error, ctx->error_len, "cpu: kernel %d is not a dtype kernel", (int)c->kernel);
    return BIB_E_USAGE;
}
