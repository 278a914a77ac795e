/* vm/tensor_api.c: the public tensor API (include/bib.h), one layer.
 *
 * Owns the module's named tensors as the host sees them: their declarations
 * (bib_vm_tensor_count, bib_vm_tensor_info), the inputs a host gives
 * (bib_vm_set_input, bib_vm_set_input_fill: checked against the declarations
 * and the memory cap, symbolic dimensions bound across inputs, kept for the
 * following runs), the outputs it reads
 * (bib_vm_get_output: read back from where they were computed), and at the
 * start of each run the binding of inputs and constants to their registers.
 * Every function checks its arguments and the VM's state the same way and
 * fails with one line naming the tensor. Residency is vm/tensor.c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/tensor_internal.h"

void bib_tensor_free_inputs(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (ts->inputs != NULL && vm->module != NULL)
        for (uint32_t i = 0; i < vm->module->tensor_count; i++)
            bib_hostbuf_unref(ts->inputs[i].kept);
    free(ts->inputs);
    ts->inputs = NULL;
}

void bib_tensor_unload(bib_vm_t *vm) {
    bib_tensor_release(vm);
    bib_tensor_free_inputs(vm);
}

bib_status_t bib_tensor_load(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    const bib_module_t *m = vm->module;
    /* An unknown executor name is a mistake in the options: say so at load,
       before a missing input or anything else about the run. */
    bib_status_t st = bib_tensor_resolve_backend(vm, false);
    if (st != BIB_OK || m->tensor_count == 0)
        return st;
    ts->inputs = calloc(m->tensor_count, sizeof *ts->inputs);
    if (ts->inputs == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory for %" PRIu32 " tensor inputs",
                           m->tensor_count);
    return BIB_OK;
}

/* ---- declarations: named inputs and outputs ---------------------------------- */

/* "f32[n,96]" with symbol names and '?' as declared. */
static void decl_text(const bib_module_t *m, const bib_tensor_decl_t *d, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "%s[", d->dtype ? bib_tensor_dtype_name(d->dtype) : "");
    for (uint32_t i = 0; i < d->rank && n < cap; i++) {
        const char *sep = i ? "," : "";
        int64_t v = d->dims[i];
        if (v >= 0)
            n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, sep, v);
        else if (v == BIB_DIM_ANY)
            n += (size_t)snprintf(buf + n, cap - n, "%s?", sep);
        else if (BIB_DIM_SYMBOL_INDEX(v) < m->dim_name_count)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", sep,
                                  m->dim_names[BIB_DIM_SYMBOL_INDEX(v)]);
        else
            n += (size_t)snprintf(buf + n, cap - n, "%s?", sep);
    }
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* Checks a value against declaration d, binding its symbolic dimensions in
 * symbols (-1: unbound). On a mismatch writes one line to msg: what was
 * expected (with the sizes symbols already have) and what was given. */
static bool decl_matches(const bib_module_t *m, const bib_tensor_decl_t *d, uint32_t dtype,
                         uint32_t rank, const uint32_t *dims, int64_t *symbols, char *msg,
                         size_t cap) {
    char want[160], got[BIB_SHAPE_TEXT];
    bool ok = (d->dtype == 0 || d->dtype == dtype) && (d->dtype == 0 ? true : d->rank == rank);
    int64_t bound[BIB_MAX_RANK] = {0};
    uint32_t nbound = 0;
    for (uint32_t i = 0; ok && i < rank && d->dtype != 0; i++) {
        int64_t v = d->dims[i];
        if (v >= 0) {
            ok = v == dims[i];
        } else if (v != BIB_DIM_ANY && BIB_DIM_SYMBOL_INDEX(v) < m->dim_name_count) {
            uint32_t s = BIB_DIM_SYMBOL_INDEX(v);
            if (symbols[s] < 0) {
                symbols[s] = dims[i];
                bound[nbound++] = s;
            } else {
                ok = symbols[s] == dims[i];
            }
        }
    }
    if (ok)
        return true;
    for (uint32_t i = 0; i < nbound; i++)
        symbols[bound[i]] = -1;
    decl_text(m, d, want, sizeof want);
    size_t n = (size_t)snprintf(msg, cap, "expected %s", want);
    bool first = true;
    for (uint32_t i = 0; i < d->rank && n < cap; i++) {
        int64_t v = d->dims[i];
        if (v >= 0 || v == BIB_DIM_ANY || BIB_DIM_SYMBOL_INDEX(v) >= m->dim_name_count)
            continue;
        uint32_t s = BIB_DIM_SYMBOL_INDEX(v);
        if (symbols[s] < 0)
            continue;
        n += (size_t)snprintf(msg + n, cap - n, "%s%s = %" PRId64, first ? " where " : ", ",
                              m->dim_names[s], symbols[s]);
        first = false;
    }
    if (n < cap)
        snprintf(msg + n, cap - n, ", given %s", bib_tensor_shape_text(got, dtype, rank, dims));
    return false;
}

static int64_t *symbols_new(const bib_module_t *m) {
    int64_t *s = malloc((m->dim_name_count ? m->dim_name_count : 1) * sizeof *s);
    if (s != NULL)
        for (uint32_t i = 0; i < m->dim_name_count; i++)
            s[i] = -1;
    return s;
}

uint32_t bib_vm_tensor_count(const bib_vm_t *vm) {
    return vm != NULL && vm->module != NULL ? vm->module->tensor_count : 0;
}

bib_status_t bib_vm_tensor_info(const bib_vm_t *vm, uint32_t index, bib_tensor_info_t *info) {
    if (vm == NULL || info == NULL)
        return BIB_E_USAGE;
    if (vm->module == NULL || index >= vm->module->tensor_count)
        return BIB_E_USAGE;
    const bib_tensor_decl_t *d = &vm->module->tensors[index];
    memset(info, 0, sizeof *info);
    info->name = d->name;
    info->is_input = (d->flags & BIB_TENSOR_INPUT) != 0;
    info->is_output = (d->flags & BIB_TENSOR_OUTPUT) != 0;
    info->is_const = (d->flags & BIB_TENSOR_CONST) != 0;
    info->dtype = (bib_dtype_t)d->dtype;
    info->rank = d->rank;
    for (uint32_t i = 0; i < d->rank && i < BIB_MAX_RANK; i++) {
        info->dims[i] = d->dims[i] >= 0 ? d->dims[i] : -1;
        if (d->dims[i] <= BIB_DIM_SYMBOL(0) &&
            BIB_DIM_SYMBOL_INDEX(d->dims[i]) < vm->module->dim_name_count)
            info->dim_names[i] = vm->module->dim_names[BIB_DIM_SYMBOL_INDEX(d->dims[i])];
    }
    return BIB_OK;
}

static int find_decl(const bib_module_t *m, const char *name, uint32_t flag) {
    for (uint32_t i = 0; i < m->tensor_count; i++)
        if ((m->tensors[i].flags & flag) && strcmp(m->tensors[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* "x, W1, b1" (names of the declarations with flag). */
static void names_with(const bib_module_t *m, uint32_t flag, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < m->tensor_count && n < cap; i++)
        if (m->tensors[i].flags & flag)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", m->tensors[i].name);
    if (n == 0)
        snprintf(buf, cap, "none");
}

static bib_status_t set_input(bib_vm_t *vm, const char *name, bib_dtype_t dtype, uint32_t rank,
                              const uint32_t *dims, bib_input_fill_fn fill, void *ctx,
                              bool no_data) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->module == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "no module loaded: load one before setting inputs");
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot set an input while the VM is running");
    const bib_module_t *m = vm->module;
    if (name == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE, "bib_vm_set_input: name is NULL");
    int di = find_decl(m, name, BIB_TENSOR_INPUT);
    if (di < 0) {
        char list[256];
        names_with(m, BIB_TENSOR_INPUT, list, sizeof list);
        return bib_vm_fail(vm, BIB_E_USAGE, "the module has no input '%s' (its inputs: %s)", name,
                           list);
    }
    if (dtype != BIB_DTYPE_F32 && dtype != BIB_DTYPE_I32)
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': dtype %d is neither f32 nor i32", name,
                           (int)dtype);
    if (rank > BIB_MAX_RANK)
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': rank %" PRIu32 " is more than %d", name,
                           rank, BIB_MAX_RANK);
    if (rank > 0 && dims == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': dims is NULL for rank %" PRIu32, name,
                           rank);
    uint64_t count;
    if (!bib_tensor_count_of(rank, dims, &count))
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': the shape is too large", name);
    for (uint32_t i = 0; i < rank; i++)
        if (dims[i] > BIB_MAX_TENSOR_DIM)
            return bib_vm_fail(vm, BIB_E_USAGE,
                               "input '%s': dimension %" PRIu32 " is larger than 2^31-1", name,
                               dims[i]);
    if (count > 0 && no_data)
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': data is NULL", name);

    /* Symbolic sizes as the other inputs given for the next run fix them.
       Inputs kept from an earlier run do not: a host that gives A and B new
       sizes for a dimension they share gives one of them first (the run
       checks them all together, bib_tensor_run_begin). */
    int64_t *symbols = symbols_new(m);
    if (symbols == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory checking input '%s'", name);
    bib_input_t *inputs = vm->tensor.inputs;
    char msg[400];
    for (uint32_t i = 0; i < m->tensor_count; i++)
        if ((int)i != di && inputs[i].set && inputs[i].fresh)
            decl_matches(m, &m->tensors[i], inputs[i].dtype, inputs[i].rank, inputs[i].dims,
                         symbols, msg, sizeof msg);
    bool ok = decl_matches(m, &m->tensors[di], dtype, rank, dims, symbols, msg, sizeof msg);
    free(symbols);
    if (!ok)
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': %s", name, msg);

    /* The inputs count against the memory cap from here, before a byte of
       theirs is read: each becomes a tensor of the run. */
    uint64_t bytes = count * 4, held = 0;
    for (uint32_t i = 0; i < m->tensor_count; i++)
        if ((int)i != di && inputs[i].set)
            held += inputs[i].kept->bytes;
    if (bytes > vm->options.max_memory || held > vm->options.max_memory - bytes)
        return bib_vm_fail(vm, BIB_E_NOMEM,
                           "input '%s': memory cap reached: %" PRIu64 " bytes, with %" PRIu64
                           " for the other inputs, cap %" PRIu64
                           " bytes (max_memory: bib's --max-memory raises it)",
                           name, bytes, held, vm->options.max_memory);
    /* Aligned as a tensor's own buffer is: each run's tensor shares it.
       Rounded up to whole blocks, at least one (aligned_alloc may refuse
       0 bytes); bytes is under max_memory, so that does not wrap. */
    size_t rounded = ((size_t)bytes + BIB_BLOCK_ALIGN) & ~(size_t)(BIB_BLOCK_ALIGN - 1);
    uint8_t *copy = aligned_alloc(BIB_BLOCK_ALIGN, rounded);
    bib_hostbuf_t *kept = copy != NULL ? bib_hostbuf_new(copy, bytes, true) : NULL;
    if (kept == NULL) {
        free(copy);
        return bib_vm_fail(vm, BIB_E_NOMEM, "input '%s': host out of memory for %" PRIu64 " bytes",
                           name, bytes);
    }
    bib_host_advise_large(copy, bytes);
    if (fill(ctx, copy, (size_t)bytes) != 0) {
        bib_hostbuf_unref(kept);
        return bib_vm_fail(vm, BIB_E_IO, "input '%s': its data could not be read", name);
    }
    bib_input_t *in = &inputs[di];
    /* A tensor of the last run may still share the old value (an output
       read after this): it keeps its reference. */
    bib_hostbuf_unref(in->kept);
    in->set = true;
    in->fresh = true;
    in->dtype = dtype;
    in->rank = rank;
    memset(in->dims, 0, sizeof in->dims);
    for (uint32_t i = 0; i < rank; i++)
        in->dims[i] = dims[i];
    in->kept = kept;
    return BIB_OK;
}

/* bib_vm_set_input's fill: ctx is the caller's data (NULL is refused once
   the shape says there are bytes to copy). */
static int copy_input(void *ctx, void *data, size_t bytes) {
    if (bytes > 0)
        memcpy(data, ctx, bytes);
    return 0;
}

bib_status_t bib_vm_set_input(bib_vm_t *vm, const char *name, bib_dtype_t dtype, uint32_t rank,
                              const uint32_t *dims, const void *data) {
    return set_input(vm, name, dtype, rank, dims, copy_input, (void *)data, data == NULL);
}

bib_status_t bib_vm_set_input_fill(bib_vm_t *vm, const char *name, bib_dtype_t dtype, uint32_t rank,
                                   const uint32_t *dims, bib_input_fill_fn fill, void *ctx) {
    if (fill == NULL)
        return vm ? bib_vm_fail(vm, BIB_E_USAGE, "bib_vm_set_input_fill: fill is NULL")
                  : BIB_E_USAGE;
    return set_input(vm, name, dtype, rank, dims, fill, ctx, false);
}

bib_status_t bib_vm_get_output(bib_vm_t *vm, const char *name, bib_dtype_t *dtype, uint32_t *rank,
                               uint32_t dims[BIB_MAX_RANK], const void **data) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->module == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "no module loaded");
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot read an output while the VM is running");
    const bib_module_t *m = vm->module;
    if (name == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE, "bib_vm_get_output: name is NULL");
    int di = find_decl(m, name, BIB_TENSOR_OUTPUT);
    if (di < 0) {
        char list[256];
        names_with(m, BIB_TENSOR_OUTPUT, list, sizeof list);
        return bib_vm_fail(vm, BIB_E_USAGE, "the module has no output '%s' (its outputs: %s)", name,
                           list);
    }
    const bib_tensor_decl_t *d = &m->tensors[di];
    bib_tensor_state_t *ts = &vm->tensor;
    if (!vm->has_run || ts->regs == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "output '%s': no run has finished yet", name);
    bib_tensor_t *t = &ts->regs[d->reg];
    if (t->storage == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "output '%s': t%" PRIu32 " is empty after the run",
                           name, d->reg);
    char msg[400];
    if (ts->symbols != NULL &&
        !decl_matches(m, d, t->dtype, t->rank, t->dims, ts->symbols, msg, sizeof msg))
        return bib_vm_fail(vm, BIB_E_STATE, "output '%s' (t%" PRIu32 "): %s", name, d->reg, msg);
    char why[256];
    bib_status_t st = bib_tensor_host_read(vm, t, why, sizeof why);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "output '%s': reading it from the %s executor: %s", name,
                           bib_tensor_holder_name(t), why);
    if (dtype != NULL)
        *dtype = (bib_dtype_t)t->dtype;
    if (rank != NULL)
        *rank = t->rank;
    if (dims != NULL)
        for (uint32_t i = 0; i < BIB_MAX_RANK; i++)
            dims[i] = i < t->rank ? t->dims[i] : 0;
    if (data != NULL)
        *data = t->storage->host;
    return BIB_OK;
}

/* ---- run start --------------------------------------------------------------- */

/* A storage sharing h's bytes (no copy: bib_storage_own_host takes one
   before any write), valid on the host, bound to register reg; h NULL: an
   empty tensor of its own. */
static bib_status_t bind_shared(bib_vm_t *vm, const char *what, const char *name, uint32_t reg,
                                uint32_t dtype, uint32_t rank, const uint32_t *dims,
                                bib_hostbuf_t *h) {
    bib_tensor_t *t = &vm->tensor.regs[reg];
    const uint64_t bytes = h != NULL ? h->bytes : 0;
    bib_storage_t *s;
    bib_status_t st = h != NULL ? bib_storage_share(vm, h, &s) : bib_storage_new(vm, 0, true, &s);
    if (st != BIB_OK) {
        char sh[BIB_SHAPE_TEXT];
        return bib_vm_fail(vm, st, "%s '%s' (t%" PRIu32 ", %s, %" PRIu64 " bytes): %s", what, name,
                           reg, bib_tensor_shape_text(sh, dtype, rank, dims), bytes,
                           vm->blocks.error);
    }
    bib_tensor_clear(vm, t);
    bib_tensor_bind(t, s, dtype, rank, dims, bytes / 4);
    return BIB_OK;
}

bib_status_t bib_tensor_run_begin(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    const bib_module_t *m = vm->module;
    memset(&ts->stats, 0, sizeof ts->stats);
    ts->last_place = NULL;
    bib_status_t st = bib_tensor_resolve_backend(vm, m->tensor_regs > 0);
    if (st != BIB_OK || m->tensor_regs == 0)
        return st;

    void *regs, *symbols;
    st = bib_arena_zalloc(&vm->run_arena, (size_t)m->tensor_regs * sizeof(bib_tensor_t),
                          _Alignof(bib_tensor_t), &regs);
    if (st == BIB_OK)
        st = bib_arena_alloc(&vm->run_arena,
                             (size_t)(m->dim_name_count ? m->dim_name_count : 1) * sizeof(int64_t),
                             _Alignof(int64_t), &symbols);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "starting the run: %" PRIu32 " tensor registers: %s",
                           m->tensor_regs, vm->blocks.error);
    ts->regs = regs;
    ts->reg_count = m->tensor_regs;
    ts->symbols = symbols;
    for (uint32_t i = 0; i < m->dim_name_count; i++)
        ts->symbols[i] = -1;

    /* The inputs given since the last run fix the symbols first, so that a
       mismatch names an input kept from an earlier run, which the host has
       to give again. */
    char msg[400];
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < m->tensor_count; i++) {
            const bib_tensor_decl_t *d = &m->tensors[i];
            const bib_input_t *in = &ts->inputs[i];
            if (!(d->flags & BIB_TENSOR_INPUT) || (in->set && in->fresh) != (pass == 0))
                continue;
            if (!in->set)
                return bib_vm_fail(vm, BIB_E_USAGE, "input '%s' was not given", d->name);
            if (!decl_matches(m, d, in->dtype, in->rank, in->dims, ts->symbols, msg, sizeof msg))
                return bib_vm_fail(vm, BIB_E_USAGE, "input '%s'%s: %s", d->name,
                                   pass == 1 ? " (kept from an earlier run: give it again)" : "",
                                   msg);
        }
    /* Checked and the symbols bound: the inputs become tensors of the run. */
    for (uint32_t i = 0; i < m->tensor_count; i++) {
        const bib_tensor_decl_t *d = &m->tensors[i];
        if (d->flags & BIB_TENSOR_INPUT) {
            bib_input_t *in = &ts->inputs[i];
            in->fresh = false;
            st = bind_shared(vm, "input", d->name, d->reg, in->dtype, in->rank, in->dims, in->kept);
        } else if (d->flags & BIB_TENSOR_CONST) {
            uint32_t dims[BIB_MAX_RANK] = {0};
            for (uint32_t k = 0; k < d->rank && k < BIB_MAX_RANK; k++)
                dims[k] = (uint32_t)d->dims[k];
            /* The module keeps the bytes (bib_tensor_keep_constants moves
               them to the tensors when it goes before they do). */
            bib_hostbuf_t *h = NULL;
            if (d->init_size > 0 && (h = bib_hostbuf_new(d->init, d->init_size, false)) == NULL)
                return bib_vm_fail(vm, BIB_E_NOMEM, "constant '%s': host out of memory", d->name);
            st = bind_shared(vm, "constant", d->name, d->reg, d->dtype, d->rank, dims, h);
            bib_hostbuf_unref(h); /* the storage holds it now, or nothing does */
        }
        if (st != BIB_OK)
            return st;
    }
    return BIB_OK;
}
