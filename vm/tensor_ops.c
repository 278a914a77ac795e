/* vm/tensor_ops.c: what a tensor opcode means (vm/tensor_ops.h).
 *
 * Owns every tensor opcode's semantics: the operand checks, the result's
 * shape and dtype and the call's scalars by the rules of its kernel's row
 * (isa/kernels.def), the opcodes that need no kernel (ALLOC, FREE, RESHAPE,
 * DIM, TGET, TSET, THASH), the trap messages, the cost of a call and the fuel
 * it takes: computed from shapes only, before anything runs, so the same on
 * every executor. The rules of the strided copies, the gathers and the
 * broadcasts, and the opcodes made of several calls (any axes, expanded
 * operands), are vm/tensor_layout.c's. Where a call runs and how its
 * operands get there is vm/tensor.c's.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/callcheck.h"
#include "vm/tensor_internal.h"
#include "vm/tensor_ops.h"

/* ---- messages ------------------------------------------------------------------ */

const char *bib_tensor_dtype_name(uint32_t dtype) {
    return dtype == BIB_DTYPE_F32 ? "f32" : dtype == BIB_DTYPE_I32 ? "i32" : "?";
}

/* "[3,4]" (no dtype) or "f32[3,4]". */
const char *bib_tensor_shape_text(char *buf, uint32_t dtype, uint32_t rank, const uint32_t *dims) {
    size_t n = 0;
    if (dtype != 0)
        n += (size_t)snprintf(buf, BIB_SHAPE_TEXT, "%s", bib_tensor_dtype_name(dtype));
    n += (size_t)snprintf(buf + n, BIB_SHAPE_TEXT - n, "[");
    for (uint32_t i = 0; i < rank && n < BIB_SHAPE_TEXT; i++)
        n += (size_t)snprintf(buf + n, BIB_SHAPE_TEXT - n, "%s%" PRIu32, i ? "," : "", dims[i]);
    if (n < BIB_SHAPE_TEXT)
        snprintf(buf + n, BIB_SHAPE_TEXT - n, "]");
    return buf;
}

const char *bib_tensor_shape(char *buf, const bib_tensor_t *t) {
    return bib_tensor_shape_text(buf, 0, t->rank, t->dims);
}

const char *bib_tensor_shape_typed(char *buf, const bib_tensor_t *t) {
    return bib_tensor_shape_text(buf, t->dtype, t->rank, t->dims);
}

/* The declared name of tensor register reg, or NULL. */
static const char *reg_name(const bib_vm_t *vm, uint32_t reg) {
    const bib_module_t *m = vm->module;
    for (uint32_t i = 0; i < m->tensor_count; i++)
        if (m->tensors[i].reg == reg)
            return m->tensors[i].name;
    return NULL;
}

/* "t3" or "t3 (x)". */
const char *bib_tensor_reg_text(const bib_vm_t *vm, char *buf, size_t cap, uint32_t reg) {
    const char *name = reg_name(vm, reg);
    if (name != NULL)
        snprintf(buf, cap, "t%" PRIu32 " (%s)", reg, name);
    else
        snprintf(buf, cap, "t%" PRIu32, reg);
    return buf;
}

uint64_t bib_tensor_hash(uint32_t dtype, uint32_t rank, const uint32_t *dims, const void *data,
                         uint64_t bytes) {
    /* dtype, rank and dims as u32 little-endian words, then the elements,
       which are stored little-endian as the hash wants them. */
    uint32_t words[2 + BIB_MAX_RANK] = {dtype, rank};
    uint32_t n = 2;
    for (uint32_t i = 0; i < rank && i < BIB_MAX_RANK; i++)
        words[n++] = dims[i];
    uint8_t head[sizeof words];
    for (uint32_t i = 0; i < n; i++)
        bib_write_u32le(head + 4 * i, words[i]);
    return bib_fnv1a64(bib_fnv1a64(BIB_FNV1A64_BASIS, head, 4 * n), data, (size_t)bytes);
}

bib_status_t bib_tensor_trap(bib_vm_t *vm, const bib_dinsn_t *ip, bib_status_t status,
                             const char *format, ...) {
    char cause[700];
    va_list ap;
    va_start(ap, format);
    vsnprintf(cause, sizeof cause, format, ap);
    va_end(ap);
    return bib_vm_trap_at(vm, status, (uint32_t)(ip - vm->program.code), "%s", cause);
}

/* ---- fuel --------------------------------------------------------------------- */

/* Takes the fuel of work elements of tensor work from the run (vm->fuel, which
 * the loop handed over): 1 + floor(work / BIB_FUEL_WORK_UNIT) for the opcode,
 * of which its fetch took the 1. Called once per opcode, after the checks of
 * its operands and before it changes anything: when the fuel left is short,
 * the opcode does not run, its unit goes back (it was not executed) and the
 * run traps at its pc. */
bib_status_t bib_tensor_charge_fuel(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t work) {
    const uint64_t extra = work / BIB_FUEL_WORK_UNIT;
    if (extra == 0)
        return BIB_OK;
    if (extra > vm->fuel.left) {
        vm->fuel.left++;
        vm->fuel.unrun = true;
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "fuel exhausted (%s costs %" PRIu64 " for %" PRIu64
                               " elements of work, %" PRIu64 " left after %" PRIu64
                               " instructions)",
                               bib_isa_table[ip->op].name, extra + 1, work, vm->fuel.left,
                               vm->fuel.base - vm->fuel.left);
    }
    vm->fuel.left -= extra;
    vm->fuel.base -= extra;
    return BIB_OK;
}

/* ---- operands and the opcodes without a kernel --------------------------------- */

/* The tensor at operand reg, which must be live. */
bib_status_t bib_tensor_need_live(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                  bib_tensor_t **out) {
    bib_tensor_t *t = &vm->tensor.regs[reg];
    *out = t;
    if (t->storage != NULL)
        return BIB_OK;
    char rt[300];
    bib_tensor_reg_text(vm, rt, sizeof rt, reg);
    if (ip->op == BIB_OP_FREE && t->freed_at != 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "double FREE: %s was already freed at pc %" PRIu32, rt,
                               t->freed_at - 1);
    if (t->freed_at != 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s is not live: used after it was freed at pc %" PRIu32, rt,
                               t->freed_at - 1);
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s is not live: nothing has been written to it",
                           rt);
}

static bib_status_t need_f32(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                             const bib_tensor_t *t) {
    if (t->dtype == BIB_DTYPE_F32)
        return BIB_OK;
    char rt[300], sh[BIB_SHAPE_TEXT];
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s is %s; %s needs f32",
                           bib_tensor_reg_text(vm, rt, sizeof rt, reg),
                           bib_tensor_shape_typed(sh, t), bib_isa_table[ip->op].name);
}

/* An operand of dtype want; what: how the message says it ("i32"). */
static bib_status_t need_dtype(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                               const bib_tensor_t *t, uint32_t want, const char *what) {
    if (t->dtype == want)
        return BIB_OK;
    char rt[300], sh[BIB_SHAPE_TEXT];
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s is %s; %s needs %s",
                           bib_tensor_reg_text(vm, rt, sizeof rt, reg),
                           bib_tensor_shape_typed(sh, t), bib_isa_table[ip->op].name, what);
}

/* A trap unless t has an axis; why says what the opcode does with it. */
static bib_status_t need_rank1(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                               const bib_tensor_t *t, const char *why) {
    if (t->rank >= 1)
        return BIB_OK;
    char rt[300];
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s is a scalar []; %s %s",
                           bib_tensor_reg_text(vm, rt, sizeof rt, reg), bib_isa_table[ip->op].name,
                           why);
}

/* Dimensions r[first..first+n) as tensor dims: each 0..2^31-1. A 0 makes an
 * empty tensor, as an input with a 0 in a '?' dimension does; every kernel
 * defines its result on one (spec/numerics.md, "Empty tensors"). */
bib_status_t bib_tensor_dims_from_regs(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                       uint32_t first, uint32_t n, uint32_t *dims) {
    if (n > BIB_MAX_RANK)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%" PRIu32 " dimensions, more than %d", n,
                               BIB_MAX_RANK);
    for (uint32_t i = 0; i < n; i++) {
        int64_t v = (int64_t)R[first + i];
        if (v < 0 || v > BIB_MAX_TENSOR_DIM)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "dimension %" PRIu32 " (r%" PRIu32 " = %" PRId64
                                   ") is outside 0..2147483647",
                                   i, first + i, v);
        dims[i] = (uint32_t)v;
    }
    return BIB_OK;
}

bib_status_t bib_tensor_op_alloc(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    bib_tensor_t *t = &vm->tensor.regs[ip->a];
    char rt[300], sh[BIB_SHAPE_TEXT];
    if (t->storage != NULL)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s is already live (%s): FREE it before ALLOC",
                               bib_tensor_reg_text(vm, rt, sizeof rt, ip->a),
                               bib_tensor_shape_typed(sh, t));
    if (ip->b != BIB_DTYPE_F32 && ip->b != BIB_DTYPE_I32)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "dtype %" PRIu32 " is neither f32 (1) nor i32 (2)", ip->b);
    uint32_t dims[BIB_MAX_RANK] = {0};
    CHECK(bib_tensor_dims_from_regs(vm, ip, R, ip->c, ip->d, dims));
    uint64_t count;
    if (!bib_tensor_count_of(ip->d, dims, &count))
        return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                               "out of memory: %s would be %s, over 2^62 bytes",
                               bib_tensor_reg_text(vm, rt, sizeof rt, ip->a),
                               bib_tensor_shape_text(sh, ip->b, ip->d, dims));
    /* The zeroes written. */
    CHECK(bib_tensor_charge_fuel(vm, ip, count));
    bib_storage_t *s;
    bib_status_t st = bib_storage_new(vm, count * 4, true, &s);
    if (st != BIB_OK)
        return bib_tensor_trap(
            vm, ip, st, "out of memory allocating %s (%s, %" PRIu64 " bytes): %s",
            bib_tensor_reg_text(vm, rt, sizeof rt, ip->a),
            bib_tensor_shape_text(sh, ip->b, ip->d, dims), count * 4, vm->blocks.error);
    bib_tensor_bind(t, s, ip->b, ip->d, dims, count);
    return BIB_OK;
}

static bib_status_t op_reshape(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    LIVE(src, ip->b);
    uint32_t dims[BIB_MAX_RANK] = {0};
    CHECK(bib_tensor_dims_from_regs(vm, ip, R, ip->c, ip->d, dims));
    uint64_t count;
    char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    if (!bib_tensor_count_of(ip->d, dims, &count) || count != src->count)
        return bib_tensor_trap(
            vm, ip, BIB_E_TRAP,
            "shape mismatch: %s is %s (%" PRIu64 " elements), the new shape %s has %s",
            bib_tensor_reg_text(vm, rt, sizeof rt, ip->b), bib_tensor_shape(sh, src), src->count,
            bib_tensor_shape_text(sh2, 0, ip->d, dims),
            bib_tensor_count_of(ip->d, dims, &count) ? "a different count" : "too many");
    bib_tensor_t *dst = &vm->tensor.regs[ip->a];
    if (dst->storage != NULL &&
        (dst->dtype != src->dtype || !bib_tensor_same_shape(dst, ip->d, dims)))
        return bib_tensor_trap(
            vm, ip, BIB_E_TRAP,
            "shape mismatch: %s holds %s but the result is %s (a live destination "
            "must have the result's shape)",
            bib_tensor_reg_text(vm, rt, sizeof rt, ip->a), bib_tensor_shape_typed(sh, dst),
            bib_tensor_shape_text(sh2, src->dtype, ip->d, dims));
    bib_storage_t *s = src->storage;
    s->refs++;
    uint32_t dtype = src->dtype;
    bib_tensor_clear(vm, dst);
    bib_tensor_bind(dst, s, dtype, ip->d, dims, count);
    vm->tensor.last_place = "host";
    return BIB_OK;
}

/* A host-side element access: the flat index r[idx_reg] must be inside t. */
static bib_status_t element_index(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t treg,
                                  const bib_tensor_t *t, uint64_t index) {
    if (index < t->count)
        return BIB_OK;
    char rt[300], sh[BIB_SHAPE_TEXT];
    return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                           "index %" PRId64 " is outside %s %s (%" PRIu64 " elements)",
                           (int64_t)index, bib_tensor_reg_text(vm, rt, sizeof rt, treg),
                           bib_tensor_shape_typed(sh, t), t->count);
}

bib_status_t bib_tensor_to_host(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                const bib_tensor_t *t) {
    char why[300], rt[300];
    const char *from = bib_tensor_holder_name(t);
    bib_status_t st = bib_tensor_host_read(vm, t, why, sizeof why);
    if (st != BIB_OK)
        return bib_tensor_trap(vm, ip, bib_trap_status(st),
                               "reading %s back from the %s executor: %s",
                               bib_tensor_reg_text(vm, rt, sizeof rt, reg), from, why);
    vm->tensor.last_place = "host";
    return BIB_OK;
}

/* ---- the opcodes that run a kernel: rules from isa/kernels.def ------------------ */

/* The kernel's dtype rule: traps on an operand of the wrong dtype, else
 * writes the result's dtype. t: the operand tensors (in[0..nin), or for an
 * in-place kernel the modified tensor as in[0]). */
static bib_status_t dtype_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const bib_kspec_t *k,
                               bib_tensor_t *const *t, bib_kresult_t *r) {
    char rt[300], sh[BIB_SHAPE_TEXT];
    switch (bib_kernel_table[k->kernel].dtype) {
    case BIB_DTYPES_F32:
        for (int i = 0; i < k->nin; i++)
            CHECK(need_f32(vm, ip, k->in_regs[i], t[i]));
        r->dtype = BIB_DTYPE_F32;
        return BIB_OK;
    case BIB_DTYPES_ANY:
        r->dtype = t[0]->dtype;
        return BIB_OK;
    case BIB_DTYPES_F32_TO_I32:
        CHECK(need_f32(vm, ip, k->in_regs[0], t[0]));
        r->dtype = BIB_DTYPE_I32;
        return BIB_OK;
    case BIB_DTYPES_GATHER:
        if (t[1]->dtype != BIB_DTYPE_I32)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP, "indices %s are %s; %s needs i32 indices",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[1]),
                                   bib_tensor_shape_typed(sh, t[1]), bib_isa_table[ip->op].name);
        r->dtype = t[0]->dtype;
        return BIB_OK;
    case BIB_DTYPES_F32_OR_I32:
        if (t[0]->dtype == BIB_DTYPE_I32 && bib_sub_i32(k->kernel, k->sub)) {
            for (int i = 1; i < k->nin; i++)
                CHECK(need_dtype(vm, ip, k->in_regs[i], t[i], BIB_DTYPE_I32,
                                 "i32 like its first operand"));
            r->dtype = BIB_DTYPE_I32;
            return BIB_OK;
        }
        for (int i = 0; i < k->nin; i++)
            CHECK(need_f32(vm, ip, k->in_regs[i], t[i]));
        r->dtype = BIB_DTYPE_F32;
        return BIB_OK;
    case BIB_DTYPES_CAST:
        /* The target is the opcode's DTYPE operand (the verifier took only
           f32 and i32). */
        r->dtype = BIB_DTYPE_F32;
        for (int w = 1; w < 4; w++)
            if (bib_isa_table[ip->op].kinds[w] == BIB_K_DTYPE)
                r->dtype = w == 1 ? ip->b : w == 2 ? ip->c : ip->d;
        return BIB_OK;
    case BIB_DTYPES_COMPARE:
        if (t[0]->dtype == BIB_DTYPE_I32)
            CHECK(need_dtype(vm, ip, k->in_regs[1], t[1], BIB_DTYPE_I32,
                             "i32 like its first operand"));
        else
            for (int i = 0; i < k->nin; i++)
                CHECK(need_f32(vm, ip, k->in_regs[i], t[i]));
        r->dtype = BIB_DTYPE_I32;
        return BIB_OK;
    case BIB_DTYPES_WHERE:
        CHECK(need_dtype(vm, ip, k->in_regs[0], t[0], BIB_DTYPE_I32, "an i32 condition"));
        CHECK(need_dtype(vm, ip, k->in_regs[2], t[2], t[1]->dtype,
                         t[1]->dtype == BIB_DTYPE_I32 ? "i32 like its second operand"
                                                      : "f32 like its second operand"));
        r->dtype = t[1]->dtype;
        return BIB_OK;
    case BIB_DTYPES_I32:
        for (int i = 0; i < k->nin; i++)
            CHECK(need_dtype(vm, ip, k->in_regs[i], t[i], BIB_DTYPE_I32, "i32"));
        r->dtype = BIB_DTYPE_I32;
        return BIB_OK;
    case BIB_DTYPES__COUNT:
        break;
    }
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "opcode %s has no dtype rule",
                           bib_isa_table[ip->op].name);
}

/* A row operand (a bias, gamma or beta) must be a row as long as n. */
static bib_status_t need_row(bib_vm_t *vm, const bib_dinsn_t *ip, const char *what, uint32_t reg,
                             const bib_tensor_t *row, uint32_t n, uint32_t of_reg,
                             const bib_tensor_t *of) {
    if (row->count == n && bib_tensor_last_dim(row) == n)
        return BIB_OK;
    char rt[300], rt2[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    return bib_tensor_trap(
        vm, ip, BIB_E_TRAP, "%s %s is %s; it must be a row of %" PRIu32 " (%s is %s)", what,
        bib_tensor_reg_text(vm, rt, sizeof rt, reg), bib_tensor_shape(sh, row), n,
        bib_tensor_reg_text(vm, rt2, sizeof rt2, of_reg), bib_tensor_shape(sh2, of));
}

/* ---- CONV and the pools: the parameter block and the output size ----------- */

/* One spatial axis of a window: input size n, window taps k, stride s,
 * dilation d, pads lo and hi; the output size, or -1 when the window's
 * extent d*(k-1)+1 exceeds the padded input. ceil: the ceil_mode rule of
 * ONNX and PyTorch (a last window that would start in the high padding is
 * dropped). */
static int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t d, int64_t lo, int64_t hi,
                          bool ceil) {
    int64_t extent = d * (k - 1) + 1, padded = n + lo + hi;
    if (extent > padded)
        return -1;
    int64_t span = padded - extent;
    int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (out - 1) * s >= n + lo)
        out--;
    return out;
}

/* The block word names, for messages: CONV's and the pools'. */
static const char *const conv_words[BIB_PARAM_BLOCK] = {
    "groups",   "stride h",   "stride w",  "dilation h", "dilation w", "pad top",
    "pad left", "pad bottom", "pad right", "word 9",     "word 10",    "word 11"};
static const char *const pool_words[BIB_PARAM_BLOCK] = {
    "kernel h", "kernel w", "stride h",   "stride w",  "dilation h", "dilation w",
    "pad top",  "pad left", "pad bottom", "pad right", "ceil_mode",  "count_include_pad"};

/* Word i of the block must lie in lo..hi; the trap names the word, its
 * register and its value. */
static bib_status_t block_word(bib_vm_t *vm, const bib_dinsn_t *ip, const bib_kspec_t *k,
                               const char *const *names, int i, int64_t lo, int64_t hi,
                               const char *why) {
    if (k->p[i] >= lo && k->p[i] <= hi)
        return BIB_OK;
    uint32_t first = bib_isa_table[ip->op].kinds[3] == BIB_K_RS ? ip->d : ip->c;
    return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                           "%s parameter %s (r%" PRIu32 " = %" PRId64 ") must be %s",
                           bib_isa_table[ip->op].name, names[i], first + (uint32_t)i, k->p[i], why);
}

#define BLOCK_MAX ((int64_t)BIB_MAX_TENSOR_DIM)

/* Pads up to 2^31-1 on a small input can ask for more outputs along an axis
 * than a dimension holds. */
static bib_status_t output_fits(bib_vm_t *vm, const bib_dinsn_t *ip, int64_t oh, int64_t ow) {
    if (oh <= BLOCK_MAX && ow <= BLOCK_MAX)
        return BIB_OK;
    return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                           "%s output would be %" PRId64 " x %" PRId64
                           " positions, over 2147483647 along an axis",
                           bib_isa_table[ip->op].name, oh, ow);
}

static bib_status_t conv_shape(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                               bib_tensor_t *const *t, bib_kresult_t *r) {
    char rt[300], rt2[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    const char *name = bib_isa_table[ip->op].name;
    const bib_tensor_t *x = t[0], *w = t[1];
    bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]);
    bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[1]);
    bib_tensor_shape(sh, x);
    bib_tensor_shape(sh2, w);
    if ((x->rank != 3 && x->rank != 4) || w->rank != x->rank)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s needs x [N,C,L] with w [O,C/g,K], or x [N,C,H,W] with w "
                               "[O,C/g,KH,KW]: x %s is %s, w %s is %s",
                               name, rt, sh, rt2, sh2);
    const bool one_d = x->rank == 3;
    CHECK(block_word(vm, ip, k, conv_words, 0, 1, BLOCK_MAX, "1 to 2147483647"));
    for (int i = 1; i <= 4; i++)
        CHECK(block_word(vm, ip, k, conv_words, i, 1, one_d && (i == 1 || i == 3) ? 1 : BLOCK_MAX,
                         one_d && (i == 1 || i == 3) ? "1 for a 1-D convolution"
                                                     : "1 to 2147483647"));
    for (int i = 5; i <= 8; i++)
        CHECK(block_word(vm, ip, k, conv_words, i, 0, one_d && (i == 5 || i == 7) ? 0 : BLOCK_MAX,
                         one_d && (i == 5 || i == 7) ? "0 for a 1-D convolution"
                                                     : "0 to 2147483647"));
    for (int i = 9; i < BIB_PARAM_BLOCK; i++)
        CHECK(block_word(vm, ip, k, conv_words, i, 0, 0, "0 (reserved)"));
    const int64_t groups = k->p[0];
    const int64_t n = x->dims[0], c = x->dims[1], o = w->dims[0], cg = w->dims[1];
    const int64_t h = one_d ? 1 : x->dims[2], wd = x->dims[x->rank - 1];
    const int64_t kh = one_d ? 1 : w->dims[2], kw = w->dims[w->rank - 1];
    if (cg * groups != c || o % groups != 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s channel mismatch: x %s is %s, w %s is %s with groups %" PRId64
                               " (x's C must be w's C/g times groups, and O a multiple of groups)",
                               name, rt, sh, rt2, sh2, groups);
    if (kh == 0 || kw == 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s kernel of w %s is %s: it has no taps", name,
                               rt2, sh2);
    int64_t oh = window_out(h, kh, k->p[1], k->p[3], k->p[5], k->p[7], false);
    int64_t ow = window_out(wd, kw, k->p[2], k->p[4], k->p[6], k->p[8], false);
    if (oh < 0 || ow < 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s kernel larger than the padded input: x %s is %s, w %s is %s "
                               "(dilation %" PRId64 ",%" PRId64 ", pads %" PRId64 ",%" PRId64
                               ",%" PRId64 ",%" PRId64 ")",
                               name, rt, sh, rt2, sh2, k->p[3], k->p[4], k->p[5], k->p[6], k->p[7],
                               k->p[8]);
    CHECK(output_fits(vm, ip, oh, ow));
    r->rank = x->rank;
    r->dims[0] = (uint32_t)n;
    r->dims[1] = (uint32_t)o;
    if (!one_d)
        r->dims[2] = (uint32_t)oh;
    r->dims[r->rank - 1] = (uint32_t)ow;
    return BIB_OK;
}

static bib_status_t pool_shape(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                               bib_tensor_t *const *t, bib_kresult_t *r) {
    char rt[300], sh[BIB_SHAPE_TEXT];
    const char *name = bib_isa_table[ip->op].name;
    const bib_tensor_t *x = t[0];
    bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]);
    bib_tensor_shape(sh, x);
    if (x->rank != 3 && x->rank != 4)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s needs x [N,C,L] or [N,C,H,W]: %s is %s",
                               name, rt, sh);
    const bool one_d = x->rank == 3;
    for (int i = 0; i < 6; i++) {
        bool h_word = i % 2 == 0;
        CHECK(block_word(vm, ip, k, pool_words, i, 1, one_d && h_word ? 1 : BLOCK_MAX,
                         one_d && h_word ? "1 for a 1-D pool" : "1 to 2147483647"));
    }
    for (int i = 6; i <= 9; i++)
        CHECK(block_word(vm, ip, k, pool_words, i, 0, one_d && (i == 6 || i == 8) ? 0 : BLOCK_MAX,
                         one_d && (i == 6 || i == 8) ? "0 for a 1-D pool" : "0 to 2147483647"));
    CHECK(block_word(vm, ip, k, pool_words, 10, 0, 1, "0 or 1"));
    if (k->sub == BIB_POOL_AVG)
        CHECK(block_word(vm, ip, k, pool_words, 11, 0, 1, "0 or 1"));
    else
        CHECK(block_word(vm, ip, k, pool_words, 11, 0, 0, "0 (reserved for MAXPOOL)"));
    const int64_t h = one_d ? 1 : x->dims[2], wd = x->dims[x->rank - 1];
    const bool ceil = k->p[10] != 0;
    int64_t oh = window_out(h, k->p[0], k->p[2], k->p[4], k->p[6], k->p[8], ceil);
    int64_t ow = window_out(wd, k->p[1], k->p[3], k->p[5], k->p[7], k->p[9], ceil);
    if (oh < 0 || ow < 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s kernel larger than the padded input: x %s is %s, kernel %" PRId64
                               ",%" PRId64 " (dilation %" PRId64 ",%" PRId64 ", pads %" PRId64
                               ",%" PRId64 ",%" PRId64 ",%" PRId64 ")",
                               name, rt, sh, k->p[0], k->p[1], k->p[4], k->p[5], k->p[6], k->p[7],
                               k->p[8], k->p[9]);
    CHECK(output_fits(vm, ip, oh, ow));
    r->rank = x->rank;
    if (!one_d)
        r->dims[2] = (uint32_t)oh;
    r->dims[r->rank - 1] = (uint32_t)ow;
    return BIB_OK;
}

/* MATMUL's shapes, as numpy.matmul takes them: [..., M, K] . [..., K, N] ->
 * [..., M, N] with the batch axes broadcast; a rank-1 left operand is a row
 * [1,K] and a rank-1 right operand a column [K,1], whose axis the result
 * drops. The kernel sees matrices: when only the left operand has batch axes
 * they fold into M (one call, the same fma chains); otherwise one call per
 * batch index. */
static bib_status_t product_rule(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                 bib_tensor_t *const *t, bib_kresult_t *r) {
    char rt[300], rt2[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    const char *name = bib_isa_table[ip->op].name;
    const bib_tensor_t *a = t[0], *b = t[1];
    bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]);
    bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[1]);
    if (a->rank == 0 || b->rank == 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "%s needs operands of rank 1 or more: %s is %s, %s is %s", name, rt,
                               bib_tensor_shape(sh, a), rt2, bib_tensor_shape(sh2, b));
    const uint32_t m = a->rank >= 2 ? a->dims[a->rank - 2] : 1, depth = a->dims[a->rank - 1];
    const uint32_t bk = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
    const uint32_t n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (depth != bk)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "inner dimensions differ: %s is %s, %s is %s",
                               rt, bib_tensor_shape(sh, a), rt2, bib_tensor_shape(sh2, b));
    const uint32_t abatch = a->rank >= 2 ? a->rank - 2 : 0, bbatch = b->rank >= 2 ? b->rank - 2 : 0;
    const uint32_t nb = abatch > bbatch ? abatch : bbatch;
    const uint64_t msize[3] = {(uint64_t)m * n, (uint64_t)m * depth, (uint64_t)depth * n};
    uint64_t stride[3] = {msize[0], msize[1], msize[2]};
    k->matrices = true;
    k->nbatch = nb;
    k->batches = 1;
    /* From the innermost batch axis out: each operand's stride, 0 where it
       broadcasts (a size-1 axis against a longer one). */
    for (uint32_t i = nb; i-- > 0;) {
        const uint32_t da = i >= nb - abatch ? a->dims[i - (nb - abatch)] : 1;
        const uint32_t db = i >= nb - bbatch ? b->dims[i - (nb - bbatch)] : 1;
        if (da != db && da != 1 && db != 1)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "batch dimensions do not broadcast: %s is %s, %s is %s", rt,
                                   bib_tensor_shape(sh, a), rt2, bib_tensor_shape(sh2, b));
        const uint32_t d = da == 1 ? db : da;
        k->batch_dims[i] = d;
        k->batch_stride[0][i] = stride[0];
        k->batch_stride[1][i] = da == 1 ? 0 : stride[1];
        k->batch_stride[2][i] = db == 1 ? 0 : stride[2];
        stride[0] *= d;
        stride[1] *= da;
        stride[2] *= db;
        k->batches *= d;
    }
    if (k->nin == 3)
        CHECK(need_row(vm, ip, "bias", k->in_regs[2], t[2], n, k->in_regs[1], b));
    r->rank = 0;
    memset(r->dims, 0, sizeof r->dims);
    for (uint32_t i = 0; i < nb; i++)
        r->dims[r->rank++] = k->batch_dims[i];
    if (a->rank >= 2)
        r->dims[r->rank++] = m;
    if (b->rank >= 2)
        r->dims[r->rank++] = n;
    /* The left operand's batch folds into M when the right has none. */
    uint32_t rows = m;
    if (bbatch == 0 && k->batches > 0) {
        rows = (uint32_t)(k->batches * m);
        if (k->batches * m > UINT32_MAX)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s: %s is %s, over 2^32 rows", name, rt,
                                   bib_tensor_shape(sh, a));
        k->nbatch = 0;
        k->batches = 1;
    }
    k->mdims[0][0] = rows;
    k->mdims[0][1] = n;
    k->mdims[1][0] = rows;
    k->mdims[1][1] = depth;
    k->mdims[2][0] = depth;
    k->mdims[2][1] = n;
    return BIB_OK;
}

/* CUMSUM's flags (the call's i[0]): bits of bib_scan_flags_t only. */
bib_status_t bib_tensor_scan_flags(bib_vm_t *vm, const bib_dinsn_t *ip, const bib_kspec_t *k) {
    if (((uint64_t)k->i0 & ~(uint64_t)BIB_SCAN__ALL) == 0)
        return BIB_OK;
    int w = 3; /* the flags' operand: the last IMM (BIB_ARGS_FLAGS) */
    while (w > 1 && bib_isa_table[ip->op].kinds[w] != BIB_K_IMM)
        w--;
    return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                           "%s: flags %c = 0x%" PRIx32 " has bits other than 1 (exclusive) and 2 "
                           "(reverse)",
                           bib_isa_table[ip->op].name, 'a' + w, (uint32_t)k->i0);
}

/* The kernel's shape rule: traps on operand shapes it does not take, else
 * writes the result's shape (and how the call may alias its output). */
static bib_status_t shape_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                               bib_kspec_t *k, bib_tensor_t *const *t, bib_kresult_t *r) {
    char rt[300], rt2[300], rt3[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT], sh3[BIB_SHAPE_TEXT];
    const char *name = bib_isa_table[ip->op].name;
    const bib_tensor_t *a = t[0];
    r->rank = a->rank;
    memcpy(r->dims, a->dims, sizeof r->dims);
    switch (bib_kernel_table[k->kernel].shape) {
    case BIB_SHAPE_SAME:
    case BIB_SHAPE_IN_PLACE:
        /* Same storage means the same element count: elementwise either way. */
        k->elementwise = true;
        return BIB_OK;
    case BIB_SHAPE_ROWS:
        return need_rank1(vm, ip, k->in_regs[0], a, "works along a last axis");
    case BIB_SHAPE_SCAN:
        CHECK(need_rank1(vm, ip, k->in_regs[0], a, "works along a last axis"));
        return bib_tensor_scan_flags(vm, ip, k);
    case BIB_SHAPE_FIRST: {
        CHECK(need_rank1(vm, ip, k->in_regs[0], a, "works along a last axis"));
        if (bib_isa_table[ip->op].kinds[2] != BIB_K_IMM)
            return BIB_OK;
        const int64_t first = ip->x.imm, n = bib_tensor_last_dim(a);
        if (first < 0 || first > n)
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "%s: c = %" PRId64 " is not 0..%" PRId64 ", the last axis of %s %s", name, first, n,
                bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]), bib_tensor_shape(sh, a));
        r->dims[r->rank - 1] = (uint32_t)first;
        return BIB_OK;
    }
    case BIB_SHAPE_BROADCAST:
        /* numpy's broadcast of both shapes; operands that are not the
           result's layout, a row of it or one element are expanded first
           (op_broadcast). A call with in0 alone (TNOT) is elementwise. */
        k->elementwise = true;
        if (k->nin == 1)
            return BIB_OK;
        return bib_tensor_broadcast_shape(vm, ip, k, t, r);
    case BIB_SHAPE_WHERE:
        /* numpy's broadcast of the condition's and both values' shapes;
           expanded as BROADCAST's operands are (op_broadcast). */
        k->elementwise = true;
        return bib_tensor_broadcast_shape(vm, ip, k, t, r);
    case BIB_SHAPE_PRODUCT:
        return product_rule(vm, ip, k, t, r);
    case BIB_SHAPE_TRANSPOSE:
        if (a->rank < 2)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP, "%s needs rank 2 or more: %s is %s", name,
                                   bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]),
                                   bib_tensor_shape(sh, a));
        r->dims[r->rank - 2] = a->dims[r->rank - 1];
        r->dims[r->rank - 1] = a->dims[r->rank - 2];
        return BIB_OK;
    case BIB_SHAPE_REDUCE:
    case BIB_SHAPE_INDEX:
        CHECK(need_rank1(vm, ip, k->in_regs[0], a, "works along a last axis"));
        /* An empty row has no index to give: no value is right, so it traps
         * (as numpy's argmax raises) rather than inventing one. */
        if (bib_kernel_table[k->kernel].shape == BIB_SHAPE_INDEX && bib_tensor_last_dim(a) == 0)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "%s over an empty last axis: %s is %s; an empty row has no "
                                   "index of a maximum",
                                   name, bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]),
                                   bib_tensor_shape(sh, a));
        r->rank = a->rank - 1;
        r->dims[r->rank] = 0;
        return BIB_OK;
    case BIB_SHAPE_NORM: {
        static const char *const rows[2] = {"gamma", "beta"};
        CHECK(need_rank1(vm, ip, k->in_regs[0], a, "works along a last axis"));
        if (k->kernel == BIB_KERNEL_LAYERNORM && k->sub == BIB_LAYERNORM_PACKED) {
            /* gamma and beta as the two rows of one [2,N] tensor */
            const bib_tensor_t *gb = t[1];
            uint32_t n = bib_tensor_last_dim(a);
            if (gb->rank == 2 && gb->dims[0] == 2 && gb->dims[1] == n)
                return BIB_OK;
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "gamma and beta %s is %s; it must be [2,%" PRIu32 "] (row 0 gamma, row 1 beta; "
                "%s is %s)",
                bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[1]), bib_tensor_shape(sh, gb), n,
                bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[0]), bib_tensor_shape(sh2, a));
        }
        for (int i = 1; i < k->nin; i++)
            CHECK(need_row(vm, ip, rows[i - 1], k->in_regs[i], t[i], bib_tensor_last_dim(a),
                           k->in_regs[0], a));
        return BIB_OK;
    }
    case BIB_SHAPE_ATTENTION: {
        const bib_tensor_t *q = a, *kk = t[1], *v = t[2];
        bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]);
        bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[1]);
        bib_tensor_reg_text(vm, rt3, sizeof rt3, k->in_regs[2]);
        if ((q->rank != 2 && q->rank != 3) || kk->rank != q->rank || v->rank != q->rank)
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "q, k and v must all be [S,H,D] or all [S,D]: q %s is %s, k %s is %s, "
                "v %s is %s",
                rt, bib_tensor_shape(sh, q), rt2, bib_tensor_shape(sh2, kk), rt3,
                bib_tensor_shape(sh3, v));
        uint32_t n = q->rank;
        if (!bib_tensor_same_shape(v, kk->rank, kk->dims) || kk->dims[n - 1] != q->dims[n - 1] ||
            (n == 3 && kk->dims[1] != q->dims[1]))
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "shape mismatch: q %s is %s, k %s is %s, v %s is %s (k and v must be "
                "equal, with q's heads and head size)",
                rt, bib_tensor_shape(sh, q), rt2, bib_tensor_shape(sh2, kk), rt3,
                bib_tensor_shape(sh3, v));
        k->attention_2d = n == 2;
        return BIB_OK;
    }
    case BIB_SHAPE_GATHER: {
        const bib_tensor_t *table = a, *idx = t[1];
        CHECK(need_rank1(vm, ip, k->in_regs[0], table,
                         "picks rows along the first axis of a table [V, ...]"));
        if (idx->rank + table->rank - 1 > BIB_MAX_RANK)
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "the result of %s rows at %s would have rank %" PRIu32
                                   ", more than %d",
                                   bib_tensor_shape(sh, table), bib_tensor_shape(sh2, idx),
                                   idx->rank + table->rank - 1, BIB_MAX_RANK);
        r->rank = idx->rank + table->rank - 1;
        memset(r->dims, 0, sizeof r->dims);
        for (uint32_t i = 0; i < idx->rank; i++)
            r->dims[i] = idx->dims[i];
        for (uint32_t i = 1; i < table->rank; i++)
            r->dims[idx->rank + i - 1] = table->dims[i];
        return BIB_OK;
    }
    case BIB_SHAPE_STRIDED:
        return bib_tensor_strided_rule(vm, ip, R, k, t, r);
    case BIB_SHAPE_TAKE:
        return bib_tensor_take_rule(vm, ip, k, t, r);
    case BIB_SHAPE_CONV:
        return conv_shape(vm, ip, k, t, r);
    case BIB_SHAPE_POOL:
        return pool_shape(vm, ip, k, t, r);
    case BIB_SHAPE_CHANNELS: {
        const bib_tensor_t *st = t[1];
        if (a->rank < 2)
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP, "%s needs x of rank 2 or more ([N,C,...]): %s is %s", name,
                bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[0]), bib_tensor_shape(sh, a));
        if (st->rank != 2 || st->dims[0] != 4 || st->dims[1] != a->dims[1])
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "shape mismatch: %s statistics %s are %s; they must be [4,%" PRIu32
                "] (scale, bias, mean, var for the %" PRIu32 " channels of %s %s)",
                name, bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[1]),
                bib_tensor_shape(sh, st), a->dims[1], a->dims[1],
                bib_tensor_reg_text(vm, rt2, sizeof rt2, k->in_regs[0]), bib_tensor_shape(sh2, a));
        return BIB_OK;
    }
    case BIB_SHAPE__COUNT:
        break;
    }
    return bib_tensor_trap(vm, ip, BIB_E_TRAP, "opcode %s has no shape rule", name);
}

/* The kernel's args rule: the call's scalars from the instruction. */
static void args_rule(const bib_dinsn_t *ip, const uint64_t *R, bib_kspec_t *k,
                      bib_tensor_t *const *t) {
    switch (bib_kernel_table[k->kernel].args) {
    case BIB_ARGS_NONE:
    case BIB_ARGS__COUNT:
        return;
    case BIB_ARGS_SCALAR_C:
        k->f0 = (float)bib_f64_from_bits(R[ip->c]);
        return;
    case BIB_ARGS_EPS_1E5: {
        /* LAYERNORM_EPS names its eps in an RS operand; LAYERNORM has none. */
        const bib_opinfo_t *info = &bib_isa_table[ip->op];
        const uint32_t words[4] = {ip->a, ip->b, ip->c, ip->d};
        k->f0 = 1e-5f;
        for (int w = 1; w < 4; w++)
            if (info->kinds[w] == BIB_K_RS)
                k->f0 = (float)bib_f64_from_bits(R[words[w]]);
        return;
    }
    case BIB_ARGS_EPS_1E6:
        k->f0 = 1e-6f;
        return;
    case BIB_ARGS_ATTENTION:
        /* Before the shape rule has checked q's rank: a rank-0 q traps there. */
        if (t[0]->rank > 0)
            k->f0 = (float)(1.0 / sqrt((double)t[0]->dims[t[0]->rank - 1]));
        return;
    case BIB_ARGS_FILL:
        if (t[0]->dtype == BIB_DTYPE_I32)
            k->i0 = (int64_t)(int32_t)(uint32_t)R[ip->b];
        else
            k->f0 = (float)bib_f64_from_bits(R[ip->b]);
        return;
    case BIB_ARGS_SEED:
        k->i0 = (int64_t)R[ip->b];
        k->i1 = ip->x.imm;
        return;
    case BIB_ARGS_BLOCK: {
        const uint32_t words[4] = {ip->a, ip->b, ip->c, ip->d};
        for (int w = 3; w >= 0; w--) {
            if (bib_isa_table[ip->op].kinds[w] == BIB_K_RS) {
                for (int i = 0; i < BIB_PARAM_BLOCK; i++)
                    k->p[i] = (int64_t)R[words[w] + i];
                return;
            }
        }
        return;
    }
    case BIB_ARGS_SCALAR_D:
        k->f0 = (float)bib_f64_from_bits(R[ip->d]);
        return;
    case BIB_ARGS_FLAGS: {
        const uint32_t words[4] = {ip->a, ip->b, ip->c, ip->d};
        for (int w = 3; w >= 1; w--) {
            if (bib_isa_table[ip->op].kinds[w] == BIB_K_IMM) {
                k->i0 = (int32_t)words[w];
                return;
            }
        }
        return;
    }
    }
}

_Static_assert(BIB_DTYPES__COUNT == 9 && BIB_SHAPE__COUNT == 19 && BIB_ARGS__COUNT == 10,
               "bib_tensor_op_kernel's rules have a case for every value of isa/kernels.h");

/* An opcode of a KOP or GKOP row: its operands checked by its kernel's rules,
 * then one call (forced_place >= 0: run there whatever the backend, for the
 * GPU_* opcodes); a BIB_F_AXES row, or BINARY on operands that need
 * expanding, runs a few. The inputs are the TS operands in order; the result
 * is operand a (TD, or TM for an in-place kernel). */
bib_status_t bib_tensor_op_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                  int forced_place) {
    const bib_opinfo_t *info = &bib_isa_table[ip->op];
    if (info->kernel < 0)
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "opcode %s is not a tensor kernel", info->name);
    bib_kspec_t k;
    memset(&k, 0, sizeof k);
    k.kernel = (bib_kernel_t)info->kernel;
    k.sub = info->sub;
    if (forced_place >= 0) {
        k.forced = true;
        k.place = forced_place;
    }
    const uint32_t words[4] = {ip->a, ip->b, ip->c, ip->d};
    bib_tensor_t *t[3] = {NULL, NULL, NULL};
    if (bib_kernel_table[k.kernel].shape == BIB_SHAPE_IN_PLACE) {
        LIVE(out, ip->a);
        t[0] = out;
        /* The modified tensor's dtype is checked as an input's would be. */
        k.in_regs[0] = ip->a;
        k.nin = 1;
    } else {
        for (int w = 1; w < 4; w++) {
            if (info->kinds[w] != BIB_K_TS)
                continue;
            LIVE(in, words[w]);
            t[k.nin] = in;
            k.in_regs[k.nin++] = words[w];
        }
    }
    bib_kresult_t r;
    CHECK(dtype_rule(vm, ip, &k, t, &r));
    /* The args first: CONV's and the pools' shape rules read their block. */
    args_rule(ip, R, &k, t);
    if (info->flags & BIB_F_AXES)
        return bib_tensor_op_axes(vm, ip, &k, t[0], &r);
    CHECK(shape_rule(vm, ip, R, &k, t, &r));
    if ((bib_kernel_table[k.kernel].shape == BIB_SHAPE_BROADCAST && k.nin == 2) ||
        bib_kernel_table[k.kernel].shape == BIB_SHAPE_WHERE)
        return bib_tensor_op_broadcast(vm, ip, &k, t, &r);
    if (bib_kernel_table[k.kernel].shape == BIB_SHAPE_IN_PLACE)
        k.nin = 0; /* no inputs: the kernel writes operand a only */
    return bib_tensor_run_kernel(vm, ip, ip->a, r.dtype, r.rank, r.dims, &k);
}

/* ---- the entry point ------------------------------------------------------------ */

bib_status_t bib_tensor_exec(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *R) {
    bib_tensor_state_t *ts = &vm->tensor;
    ts->last_flops = 0;
    char rt[300], sh[BIB_SHAPE_TEXT];
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_ALLOC:
        ts->last_place = "host";
        return bib_tensor_op_alloc(vm, ip, R);
    case BIB_OP_FREE: {
        LIVE(t, ip->a);
        bib_tensor_clear(vm, t);
        t->freed_at = (uint32_t)(ip - vm->program.code) + 1;
        ts->last_place = "host";
        return BIB_OK;
    }
    case BIB_OP_RESHAPE:
        return op_reshape(vm, ip, R);
    case BIB_OP_DIM: {
        LIVE(t, ip->b);
        int64_t axis = ip->x.imm;
        int64_t at = axis < 0 ? axis + (int64_t)t->rank : axis;
        if (at < 0 || at >= (int64_t)t->rank)
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP, "axis %" PRId64 " is outside %s %s (rank %" PRIu32 ")", axis,
                bib_tensor_reg_text(vm, rt, sizeof rt, ip->b), bib_tensor_shape(sh, t), t->rank);
        R[ip->a] = t->dims[at];
        ts->last_place = "host";
        return BIB_OK;
    }
    case BIB_OP_TGET: {
        LIVE(t, ip->b);
        uint64_t index = R[ip->c];
        CHECK(element_index(vm, ip, ip->b, t, index));
        CHECK(bib_tensor_to_host(vm, ip, ip->b, t));
        uint32_t w = bib_read_u32le(t->storage->host + index * 4);
        if (t->dtype == BIB_DTYPE_I32) {
            R[ip->a] = (uint64_t)(int64_t)(int32_t)w;
        } else {
            float f;
            memcpy(&f, &w, sizeof f);
            R[ip->a] = bib_f64_bits((double)f);
        }
        return BIB_OK;
    }
    case BIB_OP_TSET: {
        LIVE(t, ip->a);
        uint64_t index = R[ip->b];
        CHECK(element_index(vm, ip, ip->a, t, index));
        CHECK(bib_tensor_to_host(vm, ip, ip->a, t));
        char why[300];
        bib_status_t st = bib_storage_own_host(vm, t->storage, why, sizeof why);
        if (st != BIB_OK)
            return bib_tensor_trap(vm, ip, st, "out of memory for a copy of %s of its own: %s",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, ip->a), why);
        uint32_t w;
        if (t->dtype == BIB_DTYPE_I32) {
            w = (uint32_t)R[ip->c];
        } else {
            float f = (float)bib_f64_from_bits(R[ip->c]);
            memcpy(&w, &f, sizeof w);
        }
        bib_write_u32le(t->storage->host + index * 4, w);
        t->storage->valid = 1u << BIB_PLACE_HOST;
        return BIB_OK;
    }
    case BIB_OP_THASH: {
        LIVE(t, ip->b);
        CHECK(bib_tensor_charge_fuel(vm, ip, t->count));
        CHECK(bib_tensor_to_host(vm, ip, ip->b, t));
        R[ip->a] = bib_tensor_hash(t->dtype, t->rank, t->dims, t->storage->host, t->storage->bytes);
        return BIB_OK;
    }
    default:
        if (bib_isa_table[ip->op].opclass == BIB_CLASS_CUDA)
            return bib_tensor_op_gpu(vm, ip, R);
        return bib_tensor_op_kernel(vm, ip, R, -1);
    }
}

/* ---- the cost of a call -------------------------------------------------------- */

_Static_assert(BIB_COST__COUNT == 7, "bib_tensor_cost has a case for every bib_cost_form_t");

bib_tensor_cost_t bib_tensor_cost(const bib_call_t *call) {
    const bib_kernel_info_t *k = &bib_kernel_table[call->kernel];
    const uint64_t out = bib_view_count(&call->out);
    const double out_d = (double)out;
    bib_tensor_cost_t c = {0, 0, 0};
    switch (k->cost) {
    case BIB_COST_PRODUCT: {
        /* [M,K] . [K,N]: a multiply-add per k for each output, then the
           output itself; the estimate adds the bias and activation. */
        const uint64_t depth = call->in[0].dims[1];
        c.work = bib_sat_mul(out, depth + 1);
        c.flops = bib_sat_mul(bib_sat_mul(out, depth), 2);
        c.ops = 2.0 * out_d * (double)depth + 2 * out_d;
        return c;
    }
    case BIB_COST_ATTENTION: {
        /* q [S,H,D], k and v [T,H,D]: q.k^T and p.v, a multiply-add per key
           and element each, then the result; the estimate adds about 20
           operations of softmax per score. */
        const uint64_t keys = call->in[1].dims[0];
        c.work = bib_sat_mul(out, 2 * keys + 1);
        c.flops = bib_sat_mul(bib_sat_mul(out, keys), 4);
        const double sh = (double)call->in[0].dims[0] * call->in[0].dims[1];
        c.ops = sh * (double)keys * (4 * (double)call->in[0].dims[2] + 20);
        return c;
    }
    case BIB_COST_GATHER:
        /* The indices, the rows they pick and the result. */
        c.work = bib_sat_add(bib_view_count(&call->in[1]), bib_sat_mul(out, 2));
        c.ops = out_d;
        return c;
    case BIB_COST_CONV: {
        /* One fma per tap of each output's chain, then the output. */
        const uint64_t o = call->in[1].dims[0];
        const uint64_t taps = o ? bib_view_count(&call->in[1]) / o : 0;
        c.work = bib_sat_mul(out, taps + 1);
        c.flops = bib_sat_mul(bib_sat_mul(out, taps), 2);
        c.ops = 2.0 * out_d * (double)taps + out_d;
        return c;
    }
    case BIB_COST_POOL: {
        /* One compare or add per tap of each window, then the output. */
        const uint64_t window = bib_sat_mul((uint64_t)call->p[0], (uint64_t)call->p[1]);
        c.work = bib_sat_mul(out, bib_sat_add(window, 1));
        c.ops = out_d * ((double)window + 1);
        return c;
    }
    case BIB_COST_ELEMENTS:
    case BIB_COST_ROWS:
    case BIB_COST__COUNT:
        break;
    }
    /* Every input's elements and the result's. */
    c.work = out;
    for (int i = 0; i < 3; i++)
        if (call->in[i].buf != NULL)
            c.work = bib_sat_add(c.work, bib_view_count(&call->in[i]));
    if (k->cost == BIB_COST_ROWS)
        c.ops = (double)k->per_element * (double)bib_view_count(&call->in[0]);
    else
        c.ops = (double)k->per_element * out_d;
    return c;
}
