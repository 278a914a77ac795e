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

#include "backends/callcheck.h"

/* ---- the element functions: the reference ----------------------------- */

int32_t bib_cast_f32_i32(float x) {
    if (x != x)
        return 0;
    if (x >= 0x1p31f)
        return INT32_MAX;
    if (x <= -0x1p31f)
        return INT32_MIN;
    return (int32_t)x; /* in range: C truncates toward zero, exactly */
}

float bib_cast_i32_f32(int32_t x) {
    return (float)x; /* round to nearest even (the FPU's mode, never changed) */
}

static int32_t i32_binary1(bib_binary_t op, int32_t a, int32_t b) {
    uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
    switch (op) {
    case BIB_BINARY_ADD:
        return (int32_t)(ua + ub);
    case BIB_BINARY_SUB:
        return (int32_t)(ua - ub);
    case BIB_BINARY_MUL:
        return (int32_t)(ua * ub);
    case BIB_BINARY_DIV:
        /* b != 0 (checked before the call computes anything); b == -1
           negates, wrapping INT32_MIN to itself. */
        return b == -1 ? (int32_t)(0u - ua) : a / b;
    case BIB_BINARY__COUNT: /* not an op; -Wswitch names a binary op left out */
        break;
    }
    return 0;
}

static int f32_compare1(bib_compare_t op, float a, float b) {
    switch (op) {
    case BIB_COMPARE_EQ:
        return a == b;
    case BIB_COMPARE_LT:
        return a < b;
    case BIB_COMPARE_LE:
        return a <= b;
    case BIB_COMPARE_GT:
        return a > b;
    case BIB_COMPARE_GE:
        return a >= b;
    case BIB_COMPARE__COUNT:
        break;
    }
    return 0;
}

static int i32_compare1(bib_compare_t op, int32_t a, int32_t b) {
    switch (op) {
    case BIB_COMPARE_EQ:
        return a == b;
    case BIB_COMPARE_LT:
        return a < b;
    case BIB_COMPARE_LE:
        return a <= b;
    case BIB_COMPARE_GT:
        return a > b;
    case BIB_COMPARE_GE:
        return a >= b;
    case BIB_COMPARE__COUNT:
        break;
    }
    return 0;
}

static int32_t logic1(bib_logic_t op, int32_t a, int32_t b) {
    switch (op) {
    case BIB_LOGIC_NOT:
        return a == 0;
    case BIB_LOGIC_AND:
        return a != 0 && b != 0;
    case BIB_LOGIC_OR:
        return a != 0 || b != 0;
    case BIB_LOGIC_XOR:
        return (a != 0) != (b != 0);
    case BIB_LOGIC__COUNT:
        break;
    }
    return 0;
}

/* ---- the driver --------------------------------------------------------- */

#define DT_GRAIN ((size_t)1 << 15)

static const uint32_t *in_words(const bib_view_t *v) {
    return (const uint32_t *)v->buf + v->offset;
}

/* The index into an operand of form f for result element i; row: the row
 * length. */
static size_t form_index(bib_broadcast_t f, size_t i, size_t row) {
    return f == BIB_BROADCAST_SAME ? i : f == BIB_BROADCAST_ROW ? i % row : 0;
}

typedef struct dt_task {
    const bib_call_t *call;
    bib_broadcast_t form1, form2; /* in1's and in2's against in0 */
    size_t row;                   /* in0's last axis */
} dt_task_t;

static void task_cast(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const uint32_t *x = in_words(&c->in[0]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    if (c->in[0].dtype == c->out.dtype) {
        for (size_t i = begin; i < end; i++)
            y[i] = x[i];
    } else if (c->out.dtype == BIB_DTYPE_I32) {
        for (size_t i = begin; i < end; i++)
            y[i] = (uint32_t)bib_cast_f32_i32(bib_f32_from_bits(x[i]));
    } else {
        for (size_t i = begin; i < end; i++)
            y[i] = bib_f32_bits(bib_cast_i32_f32((int32_t)x[i]));
    }
}

static void task_compare(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const uint32_t *a = in_words(&c->in[0]), *b = in_words(&c->in[1]);
    int32_t *y = (int32_t *)c->out.buf + c->out.offset;
    bib_compare_t op = (bib_compare_t)c->sub;
    bool f32 = c->in[0].dtype == BIB_DTYPE_F32;
    for (size_t i = begin; i < end; i++) {
        uint32_t u = a[i], v = b[form_index(t->form1, i, t->row)];
        y[i] = f32 ? f32_compare1(op, bib_f32_from_bits(u), bib_f32_from_bits(v))
                   : i32_compare1(op, (int32_t)u, (int32_t)v);
    }
}

static void task_where(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const uint32_t *cond = in_words(&c->in[0]), *x = in_words(&c->in[1]), *z = in_words(&c->in[2]);
    uint32_t *y = (uint32_t *)c->out.buf + c->out.offset;
    for (size_t i = begin; i < end; i++)
        y[i] =
            cond[i] != 0 ? x[form_index(t->form1, i, t->row)] : z[form_index(t->form2, i, t->row)];
}

static void task_logic(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const int32_t *a = (const int32_t *)in_words(&c->in[0]);
    const int32_t *b = c->in[1].buf ? (const int32_t *)in_words(&c->in[1]) : NULL;
    int32_t *y = (int32_t *)c->out.buf + c->out.offset;
    bib_logic_t op = (bib_logic_t)c->sub;
    for (size_t i = begin; i < end; i++)
        y[i] = logic1(op, a[i], b ? b[form_index(t->form1, i, t->row)] : 0);
}

static void task_binary_i32(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const dt_task_t *t = arg;
    const bib_call_t *c = t->call;
    const int32_t *a = (const int32_t *)in_words(&c->in[0]);
    const int32_t *b = (const int32_t *)in_words(&c->in[1]);
    int32_t *y = (int32_t *)c->out.buf + c->out.offset;
    bib_binary_t op = (bib_binary_t)c->sub;
    for (size_t i = begin; i < end; i++)
        y[i] = i32_binary1(op, a[i], b[form_index(t->form1, i, t->row)]);
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
