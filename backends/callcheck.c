/* backends/callcheck.c: the kernel calls the GPU executors accept
 * (callcheck.h). Each rule is what the kernel's code assumes: a buffer it
 * reads or writes is there, its elements are f32 where it computes in
 * floating point, the shapes relate as isa/kernels.def says, and the
 * sub-operation is one the kernel has (below its row's SUBS). */
#include "backends/callcheck.h"

#include <stdio.h>
#include <stdlib.h>

uint64_t bib_view_count(const bib_view_t *v) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < v->rank; i++)
        n *= v->dims[i];
    return n;
}

uint64_t bib_view_rows(const bib_view_t *v, uint32_t *last) {
    *last = v->rank ? v->dims[v->rank - 1] : 1;
    return *last ? bib_view_count(v) / *last : 0;
}

uint64_t bib_call_rows(const bib_call_t *c, uint32_t *last) {
    uint64_t rows = bib_view_rows(&c->in[0], last);
    if (c->kernel == BIB_KERNEL_REDUCE || c->kernel == BIB_KERNEL_ARGMAX)
        rows = bib_view_count(&c->out);
    return rows;
}

bib_broadcast_t bib_view_broadcast(const bib_view_t *to, const bib_view_t *v) {
    uint64_t n0 = bib_view_count(to), n1 = bib_view_count(v);
    if (n1 == n0)
        return BIB_BROADCAST_SAME;
    if (n1 == 1)
        return BIB_BROADCAST_ONE;
    if (to->rank > 0 && n1 == to->dims[to->rank - 1])
        return BIB_BROADCAST_ROW;
    return BIB_BROADCAST_NONE;
}

bib_broadcast_t bib_call_broadcast(const bib_call_t *c) {
    return bib_view_broadcast(&c->in[0], &c->in[1]);
}

bool bib_call_forms(const bib_call_t *c, bib_broadcast_t forms[3]) {
    for (int i = 0; i < 3; i++) {
        forms[i] =
            i && c->in[i].buf ? bib_view_broadcast(&c->in[0], &c->in[i]) : BIB_BROADCAST_SAME;
        if (forms[i] == BIB_BROADCAST_NONE)
            return false;
    }
    return true;
}

int64_t bib_i32_zero_divisor(const int32_t *divisor, uint64_t n, uint64_t count) {
    if (count == 0)
        return -1;
    for (uint64_t j = 0; j < n; j++)
        if (divisor[j] == 0)
            return (int64_t)j;
    return -1;
}

void bib_i32_zero_divisor_message(char *buf, size_t cap, int64_t element) {
    snprintf(buf, cap, "integer division by zero: the divisor of element %lld is 0",
             (long long)element);
}

int64_t bib_gather_bad_index(const int32_t *indices, uint64_t n, uint64_t rows) {
    for (uint64_t r = 0; r < n; r++)
        if (indices[r] < 0 || (uint64_t)indices[r] >= rows)
            return (int64_t)r;
    return -1;
}

void bib_gather_index_message(char *buf, size_t cap, int32_t index, int64_t position,
                              uint64_t rows) {
    snprintf(buf, cap, "gather: index %d at position %lld is outside the table's %llu rows",
             (int)index, (long long)position, (unsigned long long)rows);
}

bib_status_t bib_call_check_on_host(const bib_executor_ops_t *ops, bib_executor_fail_fn *fail,
                                    bib_executor_t *ex, const bib_call_t *c) {
    bool gather = c->kernel == BIB_KERNEL_GATHER;
    if (!gather && !(c->kernel == BIB_KERNEL_BINARY && c->sub == BIB_BINARY_DIV &&
                     c->out.dtype == BIB_DTYPE_I32))
        return BIB_OK;
    uint64_t n = bib_view_count(&c->in[1]), count = bib_view_count(&c->out);
    if (n == 0 || (!gather && count == 0))
        return BIB_OK;
    int32_t *v = malloc(n * sizeof *v);
    if (!v)
        return fail(ex, BIB_E_NOMEM, "%s: out of host memory for %s", ops->name,
                    gather ? "gather indices" : "divisors");
    bib_status_t st = ops->download(ex, c->in[1].buf, c->in[1].offset * 4, v, n * 4);
    char msg[200];
    uint64_t rows = c->in[0].dims[0];
    int64_t at = st != BIB_OK ? -1
                 : gather     ? bib_gather_bad_index(v, n, rows)
                              : bib_i32_zero_divisor(v, n, count);
    if (at >= 0 && gather)
        bib_gather_index_message(msg, sizeof msg, v[at], at, rows);
    else if (at >= 0)
        bib_i32_zero_divisor_message(msg, sizeof msg, at);
    free(v);
    return at >= 0 ? fail(ex, BIB_E_TRAP, "%s", msg) : st;
}

static bool bib_call_is_f32(const bib_view_t *v) {
    return v->buf && v->dtype == BIB_DTYPE_F32;
}

static bool bib_call_is(const bib_view_t *v, uint32_t dtype) {
    return v->buf && v->dtype == dtype;
}

/* out and the first `inputs` inputs are i32 tensors with buffers. */
static bool bib_call_all_i32(const bib_call_t *c, int inputs) {
    if (!bib_call_is(&c->out, BIB_DTYPE_I32))
        return false;
    for (int i = 0; i < inputs; i++)
        if (!bib_call_is(&c->in[i], BIB_DTYPE_I32))
            return false;
    return true;
}

static bool bib_dtype_known(uint32_t dtype) {
    return dtype == BIB_DTYPE_F32 || dtype == BIB_DTYPE_I32;
}

/* out and the first `inputs` inputs are f32 tensors with buffers. */
static bool bib_call_all_f32(const bib_call_t *c, int inputs) {
    if (!bib_call_is_f32(&c->out))
        return false;
    for (int i = 0; i < inputs; i++)
        if (!bib_call_is_f32(&c->in[i]))
            return false;
    return true;
}

/* The lowest and highest index a source reads over the output's box of
 * axes [lo_k, hi_k), false when the box is empty. */
static bool strided_span(const uint32_t *lo, const uint32_t *hi, int64_t off, const int64_t *st,
                         int64_t *min, int64_t *max) {
    __int128 a = off, b = off;
    for (int k = 0; k < BIB_MAX_RANK; k++) {
        if (hi[k] <= lo[k])
            return false;
        __int128 x = (__int128)lo[k] * st[k], y = (__int128)(hi[k] - 1) * st[k];
        a += x < y ? x : y;
        b += x < y ? y : x;
    }
    if (a < INT64_MIN || b > INT64_MAX)
        return false;
    *min = (int64_t)a;
    *max = (int64_t)b;
    return true;
}

bool bib_call_strided_ok(const bib_call_t *c) {
    const bib_view_t *o = &c->out;
    if (!o->buf || !c->in[0].buf || o->rank > BIB_MAX_RANK || c->p[14] < 0 ||
        c->p[14] >= BIB_MAX_RANK)
        return false;
    uint32_t dims[BIB_MAX_RANK], lo[BIB_MAX_RANK] = {0}, hi[BIB_MAX_RANK];
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++)
        hi[k] = dims[k] = bib_view_padded_dim(o, k);
    uint32_t axis = (uint32_t)c->p[14];
    int64_t split = c->p[15];
    if (split < 0 || split > (int64_t)dims[axis])
        return false;
    int64_t min, max;
    /* in0 below the split, in1 at and past it. */
    hi[axis] = (uint32_t)split;
    if (strided_span(lo, hi, c->p[0], c->p + 1, &min, &max) &&
        (min < 0 || (uint64_t)max >= bib_view_count(&c->in[0]) || c->in[0].dtype != o->dtype))
        return false;
    hi[axis] = dims[axis];
    lo[axis] = (uint32_t)split;
    if (strided_span(lo, hi, c->p[7], c->p + 8, &min, &max) &&
        (!c->in[1].buf || min < 0 || (uint64_t)max >= bib_view_count(&c->in[1]) ||
         c->in[1].dtype != o->dtype))
        return false;
    return true;
}

bool bib_call_take_ok(const bib_call_t *c) {
    const bib_view_t *o = &c->out;
    if (!o->buf || !c->in[0].buf || !c->in[1].buf || o->rank > BIB_MAX_RANK ||
        c->in[1].dtype != BIB_DTYPE_I32 || c->in[0].dtype != o->dtype || c->p[13] < 0 ||
        c->p[13] > UINT32_MAX || c->p[12] < 0)
        return false;
    uint32_t lo[BIB_MAX_RANK] = {0}, hi[BIB_MAX_RANK];
    for (uint32_t k = 0; k < BIB_MAX_RANK; k++)
        hi[k] = bib_view_padded_dim(o, k);
    int64_t min, max;
    if (!strided_span(lo, hi, 0, c->p, &min, &max))
        return true; /* an empty output reads nothing */
    if (c->p[13] == 0)
        return false; /* a position to fill, and no element to pick */
    __int128 top = (__int128)max + (__int128)(c->p[13] - 1) * c->p[12];
    if (min < 0 || top >= (__int128)bib_view_count(&c->in[0]))
        return false;
    if (!strided_span(lo, hi, 0, c->p + 6, &min, &max) || min < 0 ||
        (uint64_t)max >= bib_view_count(&c->in[1]))
        return false;
    return true;
}

_Static_assert(BIB_KERNEL__COUNT == 26, "a kernel was added to isa/kernels.def: give it its "
                                        "rule in bib_call_shapes_ok");

bool bib_call_shapes_ok(const bib_call_t *c, uint32_t rules) {
    const bib_view_t *o = &c->out, *x = &c->in[0], *y = &c->in[1];
    uint32_t last = x->rank ? x->dims[x->rank - 1] : 1;
    if ((unsigned)c->kernel >= BIB_KERNEL__COUNT || c->sub >= bib_kernel_table[c->kernel].subs)
        return false;
    switch (c->kernel) {
    case BIB_KERNEL_MATMUL:
        return bib_call_all_f32(c, 2) && x->rank == 2 && y->rank == 2 && o->rank == 2 &&
               x->dims[1] == y->dims[0] && o->dims[0] == x->dims[0] && o->dims[1] == y->dims[1] &&
               (!c->in[2].buf ||
                (bib_call_is_f32(&c->in[2]) && bib_view_count(&c->in[2]) == y->dims[1]));
    case BIB_KERNEL_TRANSPOSE:
        return x->buf && o->buf && x->rank >= 2 &&
               (!(rules & BIB_CALL_RULE_TRANSPOSE_SAME_DTYPE) || x->dtype == o->dtype) &&
               bib_view_count(x) == bib_view_count(o);
    case BIB_KERNEL_UNARY:
        return bib_call_all_f32(c, 1) || (bib_unary_i32(c->sub) && bib_call_all_i32(c, 1) &&
                                          bib_view_count(o) == bib_view_count(x));
    case BIB_KERNEL_SCALE:
    case BIB_KERNEL_SOFTMAX:
        return bib_call_all_f32(c, 1);
    case BIB_KERNEL_BINARY:
        return (bib_call_all_f32(c, 2) || (bib_binary_i32(c->sub) && bib_call_all_i32(c, 2))) &&
               bib_call_broadcast(c) != BIB_BROADCAST_NONE;
    case BIB_KERNEL_REDUCE: /* the column form (p[0] > 0) is the CPU executor's alone */
        return bib_call_all_f32(c, 1) && c->p[0] == 0;
    case BIB_KERNEL_ARGMAX:
        return bib_call_is_f32(x) && o->buf && o->dtype == BIB_DTYPE_I32;
    case BIB_KERNEL_ARGSORT: { /* out: the first k <= last of each row */
        uint32_t k;
        return bib_call_is_f32(x) && o->buf && o->dtype == BIB_DTYPE_I32 && o->rank >= 1 &&
               (bib_view_rows(o, &k) == bib_view_rows(x, &last) || k == 0) && k <= last &&
               last <= BIB_ARGSORT_GPU_ROW_MAX;
    }
    case BIB_KERNEL_CUMSUM: /* the column form (p[0] > 0) is the CPU executor's alone */
        return (bib_call_all_f32(c, 1) || bib_call_all_i32(c, 1)) && c->p[0] == 0 &&
               bib_view_count(o) == bib_view_count(x) && (c->i[0] & ~(int64_t)BIB_SCAN__ALL) == 0;
    case BIB_KERNEL_LAYERNORM:
        if (c->sub == BIB_LAYERNORM_PACKED)
            return bib_call_all_f32(c, 2) && bib_view_count(&c->in[1]) == 2 * (uint64_t)last;
        return bib_call_all_f32(c, 3) && bib_view_count(&c->in[1]) == last &&
               bib_view_count(&c->in[2]) == last;
    case BIB_KERNEL_RMSNORM:
        return bib_call_all_f32(c, 2) && bib_view_count(&c->in[1]) == last;
    case BIB_KERNEL_ATTENTION:
        return bib_call_all_f32(c, 3) && x->rank == 3 && y->rank == 3 && c->in[2].rank == 3;
    case BIB_KERNEL_GATHER:
        return x->buf && y->buf && o->buf && y->dtype == BIB_DTYPE_I32 && x->dtype == o->dtype &&
               x->rank >= 1;
    case BIB_KERNEL_RNG:
        return bib_call_is_f32(o);
    case BIB_KERNEL_FILL:
        return o->buf != NULL;
    case BIB_KERNEL_COPY:
        return o->buf && x->buf && bib_view_count(o) == bib_view_count(x);
    case BIB_KERNEL_CAST:
        return o->buf && x->buf && bib_dtype_known(o->dtype) && bib_dtype_known(x->dtype) &&
               bib_view_count(o) == bib_view_count(x);
    case BIB_KERNEL_COMPARE:
        return bib_call_is(o, BIB_DTYPE_I32) && x->buf && bib_dtype_known(x->dtype) &&
               bib_call_is(y, x->dtype) && bib_view_count(o) == bib_view_count(x) &&
               bib_call_broadcast(c) != BIB_BROADCAST_NONE;
    case BIB_KERNEL_WHERE:
        return bib_call_is(x, BIB_DTYPE_I32) && o->buf && bib_dtype_known(o->dtype) &&
               bib_call_is(y, o->dtype) && bib_call_is(&c->in[2], o->dtype) &&
               bib_view_count(o) == bib_view_count(x) &&
               bib_view_broadcast(x, y) != BIB_BROADCAST_NONE &&
               bib_view_broadcast(x, &c->in[2]) != BIB_BROADCAST_NONE;
    case BIB_KERNEL_LOGIC:
        if (c->sub == BIB_LOGIC_NOT)
            return bib_call_all_i32(c, 1) && bib_view_count(o) == bib_view_count(x);
        return bib_call_all_i32(c, 2) && bib_view_count(o) == bib_view_count(x) &&
               bib_call_broadcast(c) != BIB_BROADCAST_NONE;
    case BIB_KERNEL_STRIDED:
        return bib_call_strided_ok(c);
    case BIB_KERNEL_TAKE:
        return bib_call_take_ok(c);
    case BIB_KERNEL_CONV:
        return bib_call_all_f32(c, 2) && (x->rank == 3 || x->rank == 4) && y->rank == x->rank &&
               o->rank == x->rank && c->p[0] >= 1 && o->dims[0] == x->dims[0] &&
               o->dims[1] == y->dims[0] && (uint64_t)y->dims[1] * (uint64_t)c->p[0] == x->dims[1];
    case BIB_KERNEL_POOL:
        return bib_call_all_f32(c, 1) && (x->rank == 3 || x->rank == 4) && o->rank == x->rank &&
               o->dims[0] == x->dims[0] && o->dims[1] == x->dims[1];
    case BIB_KERNEL_BATCHNORM:
        return bib_call_all_f32(c, 2) && x->rank >= 2 && y->rank == 2 && y->dims[0] == 4 &&
               y->dims[1] == x->dims[1] && bib_view_count(o) == bib_view_count(x);
    default:
        return false;
    }
}
