/* vm/tensor_layout.c: the tensor opcodes that move elements between layouts.
 *
 * The rules of the strided copies (PERMUTE, EXPAND, SLICE, CONCAT), of
 * GATHER_AXIS and GATHER_ELEMENTS, and numpy's broadcast of the elementwise
 * opcodes' shapes; and the opcodes made of several calls: a kernel along the
 * last axis run on any axes (BIB_F_AXES: permute the named axes last, run
 * the row kernel, reshape) and an elementwise call on operands expanded to
 * the broadcast shape. vm/tensor_ops.c calls them from its rules; the
 * messages, checks and cost stay vm/tensor_ops.c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vm/tensor_internal.h"

/* ---- strided copies ---------------------------------------------------------------- */

/* Row-major strides of a shape, in elements. */
static void strides_of(uint32_t rank, const uint32_t *dims, int64_t *st) {
    int64_t s = 1;
    for (int i = (int)rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= (int64_t)dims[i];
    }
}

/* A STRIDED call's p[] for a result of rank `rank`, padded to rank 6 in
 * front (stride 0): element i of the result is in0[off0 + sum i_k st0[k]],
 * or, where i_axis >= split (CONCAT), in1[off1 + sum i_k st1[k]]. */
static void strided_params(bib_kspec_t *k, uint32_t rank, const uint32_t *dims, int64_t off0,
                           const int64_t *st0, int64_t off1, const int64_t *st1, uint32_t axis,
                           int64_t split) {
    const uint32_t pad = BIB_MAX_RANK - rank;
    memset(k->p, 0, sizeof k->p);
    k->p[0] = off0;
    k->p[7] = off1;
    for (uint32_t i = 0; i < rank; i++) {
        /* An axis of one element never moves: its stride is 0 (a huge SLICE
           step times a stride would not fit). */
        k->p[1 + pad + i] = dims[i] > 1 ? st0[i] : 0;
        k->p[8 + pad + i] = st1 != NULL && dims[i] > 1 ? st1[i] : 0;
    }
    if (st1 != NULL) {
        k->p[14] = pad + axis;
        k->p[15] = split;
    } else {
        /* No second source: the split is never reached. */
        k->p[14] = 0;
        k->p[15] = rank == BIB_MAX_RANK ? dims[0] : 1;
    }
}

/* A negative axis counts from the end; traps outside the rank. where says
 * where the axis came from ("r3", "operand d"). */
static bib_status_t need_axis(bib_vm_t *vm, const bib_dinsn_t *ip, const char *where, int64_t axis,
                              uint32_t reg, const bib_tensor_t *t, uint32_t *out) {
    int64_t at = axis < 0 ? axis + (int64_t)t->rank : axis;
    if (at >= 0 && at < (int64_t)t->rank) {
        *out = (uint32_t)at;
        return BIB_OK;
    }
    char rt[300], sh[BIB_SHAPE_TEXT], range[64];
    if (t->rank == 0)
        snprintf(range, sizeof range, "a scalar has no axis");
    else
        snprintf(range, sizeof range, "rank %" PRIu32 ": axes %" PRId64 "..%" PRIu32, t->rank,
                 -(int64_t)t->rank, t->rank - 1);
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s: axis %" PRId64 " (%s) is outside %s %s (%s)",
                           bib_isa_table[ip->op].name, axis, where,
                           bib_tensor_reg_text(vm, rt, sizeof rt, reg), bib_tensor_shape(sh, t),
                           range);
}

/* The register range an opcode reads must hold the rank of its input. */
static bib_status_t need_count(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                               const bib_tensor_t *t) {
    if (ip->d == t->rank)
        return BIB_OK;
    char rt[300], sh[BIB_SHAPE_TEXT];
    return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                           "%s: d = %" PRIu32 " but %s is %s (rank %" PRIu32 "): one %s per axis",
                           bib_isa_table[ip->op].name, ip->d,
                           bib_tensor_reg_text(vm, rt, sizeof rt, reg), bib_tensor_shape(sh, t),
                           t->rank, ip->op == BIB_OP_SLICE ? "start, end, step triple" : "axis");
}

static bib_status_t permute_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                 bib_kspec_t *k, const bib_tensor_t *a, bib_kresult_t *r) {
    CHECK(need_count(vm, ip, k->in_regs[0], a));
    int64_t st[BIB_MAX_RANK], pst[BIB_MAX_RANK];
    uint32_t seen = 0;
    strides_of(a->rank, a->dims, st);
    for (uint32_t i = 0; i < a->rank; i++) {
        uint32_t from;
        char what[40];
        snprintf(what, sizeof what, "r%" PRIu32, ip->c + i);
        CHECK(need_axis(vm, ip, what, (int64_t)R[ip->c + i], k->in_regs[0], a, &from));
        if (seen & (1u << from))
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "PERMUTE: axis %" PRIu32 " appears twice in r%" PRIu32
                                   "..r%" PRIu32 "; the axes must be a permutation",
                                   from, ip->c, ip->c + a->rank - 1);
        seen |= 1u << from;
        r->dims[i] = a->dims[from];
        pst[i] = st[from];
    }
    strided_params(k, r->rank, r->dims, 0, pst, 0, NULL, 0, 0);
    return BIB_OK;
}

/* numpy's broadcast of shapes x and y into out (rank max of both); false
 * when an axis differs and neither is 1. */
static bool broadcast_dims(uint32_t xr, const uint32_t *x, uint32_t yr, const uint32_t *y,
                           uint32_t *rank, uint32_t *out) {
    uint32_t n = xr > yr ? xr : yr;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t dx = i + xr >= n ? x[i + xr - n] : 1, dy = i + yr >= n ? y[i + yr - n] : 1;
        if (dx != dy && dx != 1 && dy != 1)
            return false;
        out[i] = dx == 1 ? dy : dx;
    }
    *rank = n;
    return true;
}

/* The strides that read t as if broadcast to rank/dims (0 on a repeated
 * axis). */
static void broadcast_strides(const bib_tensor_t *t, uint32_t rank, const uint32_t *dims,
                              int64_t *out) {
    int64_t st[BIB_MAX_RANK];
    strides_of(t->rank, t->dims, st);
    for (uint32_t i = 0; i < rank; i++) {
        uint32_t j = i + t->rank - rank; /* wraps below the input's first axis */
        out[i] = i + t->rank >= rank && t->dims[j] == dims[i] ? st[j] : 0;
    }
}

static bib_status_t expand_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                bib_kspec_t *k, const bib_tensor_t *a, bib_kresult_t *r) {
    uint32_t want[BIB_MAX_RANK] = {0};
    CHECK(bib_tensor_dims_from_regs(vm, ip, R, ip->c, ip->d, want));
    if (!broadcast_dims(a->rank, a->dims, ip->d, want, &r->rank, r->dims)) {
        char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "EXPAND: %s is %s, which does not broadcast to %s (each axis, "
                               "aligned from the last, must be equal or 1)",
                               bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]),
                               bib_tensor_shape(sh, a), bib_tensor_shape_text(sh2, 0, ip->d, want));
    }
    uint64_t count;
    if (!bib_tensor_count_of(r->rank, r->dims, &count)) {
        char sh[BIB_SHAPE_TEXT];
        return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                               "out of memory: EXPAND's result %s is over 2^62 bytes",
                               bib_tensor_shape_text(sh, 0, r->rank, r->dims));
    }
    int64_t st[BIB_MAX_RANK];
    broadcast_strides(a, r->rank, r->dims, st);
    strided_params(k, r->rank, r->dims, 0, st, 0, NULL, 0, 0);
    return BIB_OK;
}

/* numpy/ONNX Slice of one axis of n elements: the first index and the count. */
static void slice_axis(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *count) {
    if (start < 0)
        start = start < -n ? -1 : start + n;
    if (end < 0)
        end = end < -n ? -1 : end + n;
    int64_t c;
    if (step > 0) {
        start = start < 0 ? 0 : start > n ? n : start;
        end = end < 0 ? 0 : end > n ? n : end;
        c = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
        start = start < 0 ? -1 : start > n - 1 ? n - 1 : start;
        end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
        c = start > end ? (start - end - 1) / -step + 1 : 0;
    }
    *first = c > 0 ? start : 0;
    *count = c;
}

static bib_status_t slice_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                               bib_kspec_t *k, const bib_tensor_t *a, bib_kresult_t *r) {
    CHECK(need_count(vm, ip, k->in_regs[0], a));
    int64_t st[BIB_MAX_RANK], sst[BIB_MAX_RANK], off = 0;
    strides_of(a->rank, a->dims, st);
    for (uint32_t i = 0; i < a->rank; i++) {
        uint32_t at = ip->c + 3 * i;
        int64_t step = (int64_t)R[at + 2];
        if (step == 0)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "SLICE: the step of axis %" PRIu32 " (r%" PRIu32
                                   ") is 0; a step is a nonzero integer",
                                   i, at + 2);
        int64_t first, count;
        slice_axis((int64_t)a->dims[i], (int64_t)R[at], (int64_t)R[at + 1], step, &first, &count);
        r->dims[i] = (uint32_t)count;
        off += first * st[i];
        /* count > 1 means |step| < n: the product fits. */
        sst[i] = count > 1 ? st[i] * step : 0;
    }
    uint64_t total = 1;
    for (uint32_t i = 0; i < r->rank; i++)
        total *= r->dims[i]; /* at most the input's count */
    strided_params(k, r->rank, r->dims, total ? off : 0, sst, 0, NULL, 0, 0);
    return BIB_OK;
}

static bib_status_t concat_rule(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                bib_tensor_t *const *t, bib_kresult_t *r) {
    const bib_tensor_t *a = t[0], *b = t[1];
    char rt[300], rt2[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]);
    bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[1]);
    if (a->dtype != b->dtype)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "CONCAT: %s is %s, %s is %s; one dtype for both",
                               rt, bib_tensor_shape_typed(sh, a), rt2,
                               bib_tensor_shape_typed(sh2, b));
    uint32_t axis;
    CHECK(need_axis(vm, ip, "operand d", ip->x.imm, k->in_regs[0], a, &axis));
    bool same = a->rank == b->rank;
    for (uint32_t i = 0; same && i < a->rank; i++)
        same = i == axis || a->dims[i] == b->dims[i];
    if (!same)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "CONCAT: %s is %s, %s is %s; they must have one rank and differ on "
                               "axis %" PRIu32 " only",
                               rt, bib_tensor_shape(sh, a), rt2, bib_tensor_shape(sh2, b), axis);
    uint64_t n = (uint64_t)a->dims[axis] + b->dims[axis];
    if (n > BIB_MAX_TENSOR_DIM)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "CONCAT: axis %" PRIu32 " would have %" PRIu64
                               " elements, more than 2147483647",
                               axis, n);
    r->dims[axis] = (uint32_t)n;
    uint64_t count;
    if (!bib_tensor_count_of(r->rank, r->dims, &count))
        return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                               "out of memory: CONCAT's result %s is over 2^62 bytes",
                               bib_tensor_shape_text(sh, 0, r->rank, r->dims));
    int64_t st0[BIB_MAX_RANK], st1[BIB_MAX_RANK];
    strides_of(a->rank, a->dims, st0);
    strides_of(b->rank, b->dims, st1);
    int64_t split = a->dims[axis];
    strided_params(k, r->rank, r->dims, 0, st0, -split * st1[axis], st1, axis, split);
    return BIB_OK;
}

bib_status_t bib_tensor_strided_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                     bib_kspec_t *k, bib_tensor_t *const *t, bib_kresult_t *r) {
    switch ((bib_strided_t)k->sub) {
    case BIB_STRIDED_PERMUTE:
        return permute_rule(vm, ip, R, k, t[0], r);
    case BIB_STRIDED_EXPAND:
        return expand_rule(vm, ip, R, k, t[0], r);
    case BIB_STRIDED_SLICE:
        return slice_rule(vm, ip, R, k, t[0], r);
    case BIB_STRIDED_CONCAT:
        return concat_rule(vm, ip, k, t, r);
    case BIB_STRIDED__COUNT:
        break;
    }
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "opcode %s has no strided rule",
                           bib_isa_table[ip->op].name);
}

/* ---- GATHER_AXIS and GATHER_ELEMENTS ---------------------------------------------- */

/* Every index of idx (operand reg) must lie in [-n, n): checked here, on the
 * host, so the trap names the opcode, the index, its place and the bound. */
static bib_status_t check_indices(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                  const bib_tensor_t *idx, uint32_t axis, uint32_t table_reg,
                                  const bib_tensor_t *table) {
    if (idx->count == 0)
        return BIB_OK;
    CHECK(bib_tensor_to_host(vm, ip, reg, idx));
    const int64_t n = table->dims[axis];
    const uint8_t *w = idx->storage->host;
    for (uint64_t i = 0; i < idx->count; i++) {
        int64_t v = (int32_t)bib_read_u32le(w + 4 * i);
        if (v >= -n && v < n)
            continue;
        char rt[300], rt2[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
        return bib_tensor_trap(
            vm, ip, BIB_E_TRAP,
            "%s: index %" PRId64 " at position %" PRIu64 " of %s %s is outside "
            "%" PRId64 "..%" PRId64 " (axis %" PRIu32 " of %s %s)",
            bib_isa_table[ip->op].name, v, i, bib_tensor_reg_text(vm, rt, sizeof rt, reg),
            bib_tensor_shape(sh, idx), -n, n - 1, axis,
            bib_tensor_reg_text(vm, rt2, sizeof rt2, table_reg), bib_tensor_shape(sh2, table));
    }
    return BIB_OK;
}

bib_status_t bib_tensor_take_rule(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                  bib_tensor_t *const *t, bib_kresult_t *r) {
    const bib_tensor_t *a = t[0], *idx = t[1];
    const char *name = bib_isa_table[ip->op].name;
    char rt[300], rt2[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    uint32_t axis;
    CHECK(need_axis(vm, ip, "operand d", ip->x.imm, k->in_regs[0], a, &axis));
    int64_t st[BIB_MAX_RANK], ist[BIB_MAX_RANK], p0[BIB_MAX_RANK] = {0}, p1[BIB_MAX_RANK] = {0};
    strides_of(a->rank, a->dims, st);
    strides_of(idx->rank, idx->dims, ist);
    memset(r->dims, 0, sizeof r->dims);
    if (k->sub == BIB_TAKE_AXIS) {
        /* t[b]'s axes before d, the indices' axes, t[b]'s after d. */
        uint32_t rank = a->rank - 1 + idx->rank;
        if (rank > BIB_MAX_RANK)
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "%s: the result of %s %s at %s %s would have rank %" PRIu32 ", more than %d", name,
                bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]), bib_tensor_shape(sh, a),
                bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[1]), bib_tensor_shape(sh2, idx),
                rank, BIB_MAX_RANK);
        uint32_t o = 0;
        for (uint32_t i = 0; i < axis; i++, o++) {
            r->dims[o] = a->dims[i];
            p0[o] = st[i];
        }
        for (uint32_t i = 0; i < idx->rank; i++, o++) {
            r->dims[o] = idx->dims[i];
            p1[o] = ist[i];
        }
        for (uint32_t i = axis + 1; i < a->rank; i++, o++) {
            r->dims[o] = a->dims[i];
            p0[o] = st[i];
        }
        r->rank = rank;
    } else {
        /* The indices' shape; each axis but d within t[b]'s. */
        bool fits = idx->rank == a->rank;
        for (uint32_t i = 0; fits && i < a->rank; i++)
            fits = i == axis || idx->dims[i] <= a->dims[i];
        if (!fits)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "%s: indices %s are %s, data %s is %s; the indices need the "
                                   "data's rank and, but on axis %" PRIu32 ", no larger sizes",
                                   name, bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[1]),
                                   bib_tensor_shape(sh, idx),
                                   bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[0]),
                                   bib_tensor_shape(sh2, a), axis);
        r->rank = idx->rank;
        for (uint32_t i = 0; i < idx->rank; i++) {
            r->dims[i] = idx->dims[i];
            p0[i] = i == axis ? 0 : st[i];
            p1[i] = ist[i];
        }
    }
    CHECK(check_indices(vm, ip, k->in_regs[1], idx, axis, k->in_regs[0], a));
    memset(k->p, 0, sizeof k->p);
    const uint32_t pad = BIB_MAX_RANK - r->rank;
    for (uint32_t i = 0; i < r->rank; i++) {
        k->p[pad + i] = p0[i];
        k->p[6 + pad + i] = p1[i];
    }
    k->p[12] = st[axis];
    k->p[13] = a->dims[axis];
    return BIB_OK;
}

/* ---- opcodes made of several calls ------------------------------------------------ */

/* t seen with other dims (same element count): a copy of its register that
 * shares its storage without owning a reference; never cleared. */
static bib_tensor_t view_as(const bib_tensor_t *t, uint32_t rank, const uint32_t *dims) {
    bib_tensor_t v = *t;
    memset(v.dims, 0, sizeof v.dims);
    for (uint32_t i = 0; i < rank; i++)
        v.dims[i] = dims[i];
    v.rank = rank;
    return v;
}

/* Runs one STRIDED copy of src (operand in_reg, for messages) into *dst: the
 * register out_reg (dst NULL) or a fresh temporary. */
static bib_status_t run_copy(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t in_reg,
                             bib_tensor_t *src, uint32_t out_reg, bib_tensor_t *dst, uint32_t rank,
                             const uint32_t *dims, const int64_t *st) {
    bib_kspec_t k;
    memset(&k, 0, sizeof k);
    k.kernel = BIB_KERNEL_STRIDED;
    k.sub = BIB_STRIDED_PERMUTE;
    k.in_regs[0] = in_reg;
    k.in_t[0] = src;
    k.nin = 1;
    k.out_t = dst;
    /* A copy inside an opcode: the opcode was charged its fuel, from its
       operands' shapes, before the first copy (charge_operands). */
    k.charged = true;
    strided_params(&k, rank, dims, 0, st, 0, NULL, 0, 0);
    return bib_tensor_run_kernel(vm, ip, out_reg, src->dtype, rank, dims, &k);
}

/* Charges an opcode that copies operands before its kernel (run_copy) the
   fuel spec/cli.md gives it from the shapes alone: its operands' counts and
   its result's, as the kernel would be charged without the copies. So the
   copies cost nothing of their own, and a trap for fuel comes before any. */
static bib_status_t charge_operands(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                    bib_tensor_t *const *t, uint32_t rank, const uint32_t *dims) {
    uint64_t w = 1;
    for (uint32_t i = 0; i < rank; i++)
        w = bib_sat_mul(w, dims[i]);
    for (int i = 0; i < k->nin; i++)
        w = bib_sat_add(w, t[i]->count);
    CHECK(bib_tensor_charge_fuel(vm, ip, w));
    k->charged = true;
    return BIB_OK;
}

/* Copies src into a temporary laid out with its axes in the order perm. */
static bib_status_t run_permute(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t in_reg,
                                bib_tensor_t *src, const uint32_t *perm, bib_tensor_t *tmp) {
    int64_t st[BIB_MAX_RANK], pst[BIB_MAX_RANK];
    uint32_t dims[BIB_MAX_RANK] = {0};
    strides_of(src->rank, src->dims, st);
    for (uint32_t i = 0; i < src->rank; i++) {
        dims[i] = src->dims[perm[i]];
        pst[i] = st[perm[i]];
    }
    return run_copy(vm, ip, in_reg, src, ip->a, tmp, src->rank, dims, pst);
}

/* A REDUCE (or a CUMSUM) over one block of adjacent axes with kept axes
 * after it, on the CPU executor: the call's column form (p[0] = m, in0
 * viewed as [outer, n, m]), which works down the columns in place of
 * moving the named axes last first (a copy of the whole tensor that cost
 * twenty times the reduction) and back. The GPU executors have only the
 * row form: with one of them selected, or under auto, the axes are moved as
 * before. Sets k's input to *view, a's [outer, n, m]. */
static bool by_columns(const bib_vm_t *vm, const bib_tensor_t *a, uint32_t mask, bib_kspec_t *k,
                       bib_tensor_t *view) {
    const bib_tensor_state_t *ts = &vm->tensor;
    if (ts->automatic || ts->selected > BIB_PLACE_HOST)
        return false;
    uint32_t lo = (uint32_t)__builtin_ctz(mask), hi = 32u - (uint32_t)__builtin_clz(mask);
    if ((mask >> lo) != (1u << (hi - lo)) - 1u || hi >= a->rank)
        return false; /* not one block, or nothing kept after it */
    uint64_t outer = 1, n = 1, m = 1;
    for (uint32_t i = 0; i < a->rank; i++)
        *(i < lo ? &outer : i < hi ? &n : &m) *= a->dims[i];
    if (outer > UINT32_MAX || n > UINT32_MAX || m > UINT32_MAX || m == 0)
        return false;
    const uint32_t dims[3] = {(uint32_t)outer, (uint32_t)n, (uint32_t)m};
    *view = view_as(a, 3, dims);
    k->in_t[0] = view;
    k->p[0] = (int64_t)m;
    return true;
}

/* BIB_F_AXES: the kernel along the last axis, on the axes IMM c names. */
bib_status_t bib_tensor_op_axes(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                bib_tensor_t *a, const bib_kresult_t *dt) {
    const bib_shape_rule_t rule = bib_kernel_table[k->kernel].shape;
    const char *name = bib_isa_table[ip->op].name;
    char rt[300], sh[BIB_SHAPE_TEXT];
    uint32_t mask = 0;
    if (rule == BIB_SHAPE_REDUCE) {
        uint32_t c = ip->c;
        if (c >> a->rank != 0)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "%s: the axis bitmask c = 0x%" PRIx32 " names axis %d, but %s "
                                   "is %s (rank %" PRIu32 ")",
                                   name, c, 31 - __builtin_clz(c),
                                   bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]),
                                   bib_tensor_shape(sh, a), a->rank);
        mask = c != 0 ? c : (uint32_t)((1u << a->rank) - 1);
    } else {
        uint32_t axis;
        CHECK(need_axis(vm, ip, "operand c", (int32_t)ip->c, k->in_regs[0], a, &axis));
        mask = 1u << axis;
    }
    /* ROWS and SCAN keep the input's shape; REDUCE and INDEX drop the axes. */
    const bool same_shape = rule == BIB_SHAPE_ROWS || rule == BIB_SHAPE_SCAN;
    if (rule == BIB_SHAPE_SCAN)
        CHECK(bib_tensor_scan_flags(vm, ip, k));
    bool keep = false;
    if (!same_shape) {
        if (ip->d > 1)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "%s: keepdims d = %" PRIu32 " is neither 0 nor 1", name, ip->d);
        keep = ip->d == 1;
    }
    /* The kept axes in order, then the named ones in order. */
    uint32_t perm[BIB_MAX_RANK], n = 0;
    uint64_t inner = 1;
    bib_kresult_t res = {dt->dtype, 0, {0}};
    for (uint32_t i = 0; i < a->rank; i++)
        if (!(mask >> i & 1u))
            perm[n++] = i;
    const uint32_t kept = n;
    for (uint32_t i = 0; i < a->rank; i++) {
        if (mask >> i & 1u) {
            perm[n++] = i;
            inner *= a->dims[i];
            if (keep)
                res.dims[res.rank++] = 1;
        } else {
            res.dims[res.rank++] = a->dims[i];
        }
    }
    if (inner > UINT32_MAX)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s: the named axes of %s %s hold %" PRIu64
                               " elements, over 2^32 in one reduction",
                               name, bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]),
                               bib_tensor_shape(sh, a), inner);
    if (rule == BIB_SHAPE_INDEX && inner == 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s over an empty axis: %s is %s; an empty row has no index of a "
                               "maximum",
                               name, bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]),
                               bib_tensor_shape(sh, a));
    bool identity = true;
    for (uint32_t i = 0; i < a->rank; i++)
        identity = identity && perm[i] == i;
    bib_tensor_t cols;
    if (!identity && (k->kernel == BIB_KERNEL_REDUCE || k->kernel == BIB_KERNEL_CUMSUM) &&
        by_columns(vm, a, mask, k, &cols))
        return bib_tensor_run_kernel(vm, ip, ip->a, dt->dtype, same_shape ? a->rank : res.rank,
                                     same_shape ? a->dims : res.dims, k);
    /* The input with the named axes last (no copy when they already are). */
    bib_tensor_t moved = {0};
    bib_tensor_t *src = a;
    if (!identity) {
        bib_tensor_t *const ops[1] = {a};
        CHECK(charge_operands(vm, ip, k, ops, same_shape ? a->rank : res.rank,
                              same_shape ? a->dims : res.dims));
        CHECK(run_permute(vm, ip, k->in_regs[0], a, perm, &moved));
        src = &moved;
    }
    bib_status_t st;
    if (same_shape) {
        if (identity) {
            k->in_t[0] = src;
            return bib_tensor_run_kernel(vm, ip, ip->a, dt->dtype, a->rank, a->dims, k);
        }
        /* The kernel on the moved tensor, then its axes moved back. */
        bib_tensor_t done = {0};
        k->in_t[0] = src;
        k->out_t = &done;
        st = bib_tensor_run_kernel(vm, ip, ip->a, dt->dtype, moved.rank, moved.dims, k);
        if (st == BIB_OK) {
            uint32_t back[BIB_MAX_RANK];
            for (uint32_t i = 0; i < a->rank; i++)
                back[perm[i]] = i;
            int64_t mst[BIB_MAX_RANK], bst[BIB_MAX_RANK];
            strides_of(done.rank, done.dims, mst);
            for (uint32_t i = 0; i < a->rank; i++)
                bst[i] = mst[back[i]];
            st = run_copy(vm, ip, ip->a, &done, ip->a, NULL, a->rank, a->dims, bst);
        }
        bib_tensor_clear(vm, &done);
        bib_tensor_clear(vm, &moved);
        return st;
    }
    /* REDUCE and INDEX: rows of the named axes' elements, in row-major order. */
    uint32_t rows[BIB_MAX_RANK];
    for (uint32_t i = 0; i < kept; i++)
        rows[i] = a->dims[perm[i]];
    rows[kept] = (uint32_t)inner;
    bib_tensor_t flat = view_as(src, kept + 1, rows);
    k->in_t[0] = &flat;
    st = bib_tensor_run_kernel(vm, ip, ip->a, dt->dtype, res.rank, res.dims, k);
    bib_tensor_clear(vm, &moved);
    return st;
}

bib_status_t bib_tensor_broadcast_shape(bib_vm_t *vm, const bib_dinsn_t *ip, const bib_kspec_t *k,
                                        bib_tensor_t *const *t, bib_kresult_t *r) {
    char rt[300], rt2[300], rt3[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT], sh3[BIB_SHAPE_TEXT];
    uint64_t count;
    /* The operands' shapes folded left to right (two, or WHERE's three). */
    bool ok = broadcast_dims(t[0]->rank, t[0]->dims, t[1]->rank, t[1]->dims, &r->rank, r->dims);
    for (int i = 2; ok && i < k->nin; i++) {
        uint32_t rank, dims[BIB_MAX_RANK] = {0};
        ok = broadcast_dims(r->rank, r->dims, t[i]->rank, t[i]->dims, &rank, dims);
        r->rank = rank;
        memcpy(r->dims, dims, sizeof r->dims);
    }
    bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]);
    bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[1]);
    bib_tensor_shape(sh, t[0]);
    bib_tensor_shape(sh2, t[1]);
    if (k->nin == 3) {
        bib_tensor_reg_text(vm, rt3, sizeof rt3, k->in_regs[2]);
        bib_tensor_shape(sh3, t[2]);
    }
    if (ok) {
        if (bib_tensor_count_of(r->rank, r->dims, &count))
            return BIB_OK;
        char shr[BIB_SHAPE_TEXT];
        bib_tensor_shape_text(shr, 0, r->rank, r->dims);
        if (k->nin == 3)
            return bib_tensor_trap(
                vm, ip, BIB_E_NOMEM,
                "out of memory: the broadcast of %s, %s and %s is %s, over 2^62 bytes", sh, sh2,
                sh3, shr);
        return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                               "out of memory: the broadcast of %s and %s is %s, over 2^62 bytes",
                               sh, sh2, shr);
    }
    if (k->nin == 3)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "shape mismatch: %s is %s, %s is %s, %s is %s; they do not "
                               "broadcast (numpy's rule: each axis, aligned from the last, equal "
                               "or 1)",
                               rt, sh, rt2, sh2, rt3, sh3);
    return bib_tensor_trap(
        vm, ip, BIB_E_TRAP,
        "shape mismatch: %s is %s, %s is %s; they do not broadcast (numpy's rule: each axis, "
        "aligned from the last, equal or 1)",
        rt, sh, rt2, sh2);
}

/* BINARY, COMPARE, LOGIC and WHERE on the broadcast shape r: in0 must have
 * r's layout and each further input r's layout, a row of r's last axis or
 * one element (the kernels' forms); an operand that is none of these is
 * expanded into a temporary first. */
bib_status_t bib_tensor_op_broadcast(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                     bib_tensor_t *const *t, const bib_kresult_t *r) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < r->rank; i++)
        n *= r->dims[i];
    const uint32_t last = r->rank ? r->dims[r->rank - 1] : 1;
    bool ok[3] = {false, false, false};
    for (int i = 0; i < k->nin; i++) {
        const bib_tensor_t *b = t[i];
        ok[i] = b->count == n || (i > 0 && (b->count == 1 || (r->rank >= 1 && b->count == last &&
                                                              bib_tensor_last_dim(b) == last)));
    }
    bib_tensor_t wide[3] = {{0}, {0}, {0}}, as_r;
    bib_status_t st = BIB_OK;
    if (!ok[0] || !ok[1] || (k->nin > 2 && !ok[2]))
        CHECK(charge_operands(vm, ip, k, t, r->rank, r->dims));
    if (ok[0]) {
        as_r = view_as(t[0], r->rank, r->dims);
        k->in_t[0] = &as_r;
    }
    for (int i = 0; i < k->nin && st == BIB_OK; i++) {
        if (ok[i])
            continue;
        int64_t bst[BIB_MAX_RANK];
        broadcast_strides(t[i], r->rank, r->dims, bst);
        st = run_copy(vm, ip, k->in_regs[i], t[i], ip->a, &wide[i], r->rank, r->dims, bst);
        k->in_t[i] = &wide[i];
    }
    if (st == BIB_OK)
        st = bib_tensor_run_kernel(vm, ip, ip->a, r->dtype, r->rank, r->dims, k);
    for (int i = 0; i < 3; i++)
        bib_tensor_clear(vm, &wide[i]);
    return st;
}
