/* vm/debug.c: reading a stepped run's state (include/bib.h, "debugging and
 * profiling").
 *
 * Owns breakpoints, the position and call frames of a stepped run, the
 * module's functions and lines as a debugger sees them, and the tensor
 * registers as seen from outside (shape, where the valid copies are, hash,
 * elements). Starting, stepping and reloading runs is in api.c; the loop that
 * honours breakpoints is interp.c's instrumented instance. Nothing here
 * changes what a program computes: reading a tensor at most copies it back
 * to the host, as TGET would.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

void bib_debug_unload(bib_vm_t *vm) {
    free(vm->breaks);
    vm->breaks = NULL;
    vm->cursor.stop = BIB_STOP_NONE;
}

/* ---- breakpoints ------------------------------------------------------------ */

bib_status_t bib_vm_break(bib_vm_t *vm, uint32_t pc, int on) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->module == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "no module loaded: call bib_vm_load first");
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot change breakpoints while the VM is running");
    if (pc >= vm->module->code_count)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "pc %" PRIu32 " is outside the code (%" PRIu32 " instructions)", pc,
                           vm->module->code_count);
    if (vm->breaks == NULL) {
        if (!on)
            return BIB_OK;
        vm->breaks = calloc(vm->module->code_count, 1);
        if (vm->breaks == NULL)
            return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory for breakpoints");
    }
    vm->breaks[pc] = on != 0;
    return BIB_OK;
}

uint32_t bib_vm_breakpoints(const bib_vm_t *vm, uint32_t *pcs, uint32_t cap) {
    if (vm == NULL || vm->breaks == NULL || vm->module == NULL)
        return 0;
    uint32_t n = 0;
    for (uint32_t pc = 0; pc < vm->module->code_count; pc++) {
        if (!vm->breaks[pc])
            continue;
        if (pcs != NULL && n < cap)
            pcs[n] = pc;
        n++;
    }
    return n;
}

/* ---- position and frames ------------------------------------------------------ */

static uint32_t line_of(const bib_module_t *m, uint32_t pc) {
    return m->lines != NULL ? m->lines[pc] : 0;
}

bib_status_t bib_vm_position(const bib_vm_t *vm, bib_position_t *pos) {
    if (vm == NULL || pos == NULL)
        return BIB_E_USAGE;
    memset(pos, 0, sizeof *pos);
    const bib_cursor_t *cur = &vm->cursor;
    if (cur->stop == BIB_STOP_NONE || vm->module == NULL)
        return BIB_E_STATE;
    const bib_module_t *m = vm->module;
    pos->stop = cur->stop;
    pos->pc = (uint32_t)(cur->ip - vm->program.code);
    pos->depth = (uint32_t)(cur->fp - vm->frames) + 1;
    pos->func = bib_module_func_at(m, pos->pc);
    pos->func_name = m->funcs[pos->func].name;
    pos->line = line_of(m, pos->pc);
    pos->instructions = cur->fuel_start - cur->fuel;
    pos->exit_value = cur->stop == BIB_STOP_HALTED ? cur->exit_value : 0;
    return BIB_OK;
}

bib_status_t bib_vm_frame(const bib_vm_t *vm, uint32_t level, bib_frame_info_t *info) {
    if (vm == NULL || info == NULL)
        return BIB_E_USAGE;
    memset(info, 0, sizeof *info);
    const bib_cursor_t *cur = &vm->cursor;
    if (cur->stop == BIB_STOP_NONE || vm->module == NULL)
        return BIB_E_STATE;
    const uint32_t depth = (uint32_t)(cur->fp - vm->frames) + 1;
    if (level >= depth)
        return BIB_E_USAGE;
    /* Frame record k+1 holds what frame k (its caller) needs: the window and
       the instruction after the CALL. */
    const uint32_t k = depth - 1 - level;
    uint32_t pc;
    const uint64_t *regs;
    if (level == 0) {
        pc = (uint32_t)(cur->ip - vm->program.code);
        regs = cur->R;
    } else {
        pc = (uint32_t)(vm->frames[k + 1].ret - vm->program.code) - 1;
        regs = vm->frames[k + 1].regs;
    }
    const bib_module_t *m = vm->module;
    info->pc = pc;
    info->func = bib_module_func_at(m, pc);
    info->func_name = m->funcs[info->func].name;
    info->line = line_of(m, pc);
    info->nregs = m->funcs[info->func].nregs;
    /* A union with a uint64_t member may alias the register words. */
    info->regs = (const bib_value_t *)(const void *)regs;
    return BIB_OK;
}

/* ---- the module as a debugger sees it -------------------------------------------- */

uint32_t bib_vm_function_count(const bib_vm_t *vm) {
    return vm != NULL && vm->module != NULL ? vm->module->func_count : 0;
}

bib_status_t bib_vm_function_info(const bib_vm_t *vm, uint32_t index, bib_function_info_t *info) {
    if (vm == NULL || info == NULL || vm->module == NULL || index >= vm->module->func_count)
        return BIB_E_USAGE;
    const bib_function_t *f = &vm->module->funcs[index];
    info->name = f->name;
    info->entry = f->entry;
    info->count = f->count;
    info->nargs = f->nargs;
    info->nregs = f->nregs;
    return BIB_OK;
}

int64_t bib_vm_function_find(const bib_vm_t *vm, const char *name) {
    if (vm == NULL || vm->module == NULL || name == NULL)
        return -1;
    for (uint32_t i = 0; i < vm->module->func_count; i++)
        if (vm->module->funcs[i].name != NULL && strcmp(vm->module->funcs[i].name, name) == 0)
            return i;
    return -1;
}

uint32_t bib_vm_code_count(const bib_vm_t *vm) {
    return vm != NULL && vm->module != NULL ? vm->module->code_count : 0;
}

uint32_t bib_vm_pc_line(const bib_vm_t *vm, uint32_t pc) {
    if (vm == NULL || vm->module == NULL || pc >= vm->module->code_count)
        return 0;
    return line_of(vm->module, pc);
}

bib_status_t bib_vm_line_pc(const bib_vm_t *vm, uint32_t line, uint32_t *pc) {
    if (vm == NULL || pc == NULL || vm->module == NULL || vm->module->lines == NULL || line == 0)
        return BIB_E_USAGE;
    const bib_module_t *m = vm->module;
    /* Exact line first; else, per function, the first instruction after it
       (a label line marks the instruction that follows). */
    for (uint32_t i = 0; i < m->code_count; i++)
        if (m->lines[i] == line) {
            *pc = i;
            return BIB_OK;
        }
    uint32_t best = UINT32_MAX, best_line = UINT32_MAX;
    for (uint32_t f = 0; f < m->func_count; f++) {
        const bib_function_t *fn = &m->funcs[f];
        if (fn->count == 0 || m->lines[fn->entry] > line)
            continue;
        for (uint32_t i = fn->entry; i < fn->entry + fn->count; i++)
            if (m->lines[i] > line && m->lines[i] < best_line) {
                best = i;
                best_line = m->lines[i];
                break;
            }
    }
    if (best == UINT32_MAX)
        return BIB_E_USAGE;
    *pc = best;
    return BIB_OK;
}

bib_status_t bib_vm_insn_text(const bib_vm_t *vm, uint32_t pc, char *buf, size_t cap) {
    if (vm == NULL || buf == NULL || cap == 0 || vm->module == NULL || pc >= vm->module->code_count)
        return BIB_E_USAGE;
    bib_insn_format(vm->module, pc, buf, cap);
    return BIB_OK;
}

/* ---- tensors ---------------------------------------------------------------------- */

uint32_t bib_vm_tensor_regs(const bib_vm_t *vm) {
    return vm != NULL ? vm->tensor.reg_count : 0;
}

static const bib_tensor_t *live_tensor(bib_vm_t *vm, uint32_t reg) {
    if (vm->running || reg >= vm->tensor.reg_count || vm->tensor.regs == NULL)
        return NULL;
    const bib_tensor_t *t = &vm->tensor.regs[reg];
    return t->storage != NULL ? t : NULL;
}

bib_status_t bib_vm_tensor_reg(bib_vm_t *vm, uint32_t reg, bib_tensor_reg_info_t *info) {
    if (vm == NULL || info == NULL)
        return BIB_E_USAGE;
    memset(info, 0, sizeof *info);
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot read tensors while the VM is running");
    if (reg >= vm->tensor.reg_count)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "t%" PRIu32 " is outside the tensor register file (%" PRIu32
                           " registers)",
                           reg, vm->tensor.reg_count);
    const bib_module_t *m = vm->module;
    for (uint32_t i = 0; m != NULL && i < m->tensor_count; i++)
        if (m->tensors[i].reg == reg) {
            info->name = m->tensors[i].name;
            break;
        }
    const bib_tensor_t *t = live_tensor(vm, reg);
    if (t == NULL)
        return BIB_OK;
    info->live = 1;
    info->dtype = (bib_dtype_t)t->dtype;
    info->rank = t->rank;
    memcpy(info->dims, t->dims, sizeof info->dims);
    info->count = t->count;
    const bib_tensor_state_t *ts = &vm->tensor;
    size_t n = 0;
    for (int p = 0; p < BIB_MAX_PLACES; p++) {
        if (!(t->storage->valid & (1u << p)))
            continue;
        const char *name = p == BIB_PLACE_HOST  ? "cpu"
                           : ts->ops[p] != NULL ? ts->ops[p]->name
                                                : "?";
        n += (size_t)snprintf(info->executors + n, sizeof info->executors - n, "%s%s",
                              n > 0 ? "," : "", name);
        if (n >= sizeof info->executors)
            break;
    }
    if (n == 0)
        snprintf(info->executors, sizeof info->executors, "none");
    bib_status_t st = bib_tensor_reg_to_host(vm, reg);
    if (st != BIB_OK)
        return st;
    info->hash = bib_tensor_hash(t->dtype, t->rank, t->dims, t->storage->host, t->storage->bytes);
    return BIB_OK;
}

bib_status_t bib_vm_tensor_read(bib_vm_t *vm, uint32_t reg, uint64_t first, uint64_t count,
                                void *dst) {
    if (vm == NULL || (dst == NULL && count > 0))
        return BIB_E_USAGE;
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot read tensors while the VM is running");
    const bib_tensor_t *t = live_tensor(vm, reg);
    if (t == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE, "t%" PRIu32 " is not live", reg);
    if (first > t->count || count > t->count - first)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "elements %" PRIu64 "..%" PRIu64 " are outside t%" PRIu32 " (%" PRIu64
                           " elements)",
                           first, first + count, reg, t->count);
    bib_status_t st = bib_tensor_reg_to_host(vm, reg);
    if (st != BIB_OK)
        return st;
    if (count > 0)
        memcpy(dst, t->storage->host + first * 4, (size_t)count * 4);
    return BIB_OK;
}

/* ---- trace ----------------------------------------------------------------------- */

bib_status_t bib_vm_set_trace(bib_vm_t *vm, bib_trace_format_t format, FILE *out) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (format != BIB_TRACE_OFF && format != BIB_TRACE_TEXT && format != BIB_TRACE_JSON)
        return bib_vm_fail(vm, BIB_E_USAGE, "unknown trace format %d", (int)format);
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot change the trace while the VM is running");
    vm->options.trace_format = format;
    if (out != NULL)
        vm->trace = out;
    return BIB_OK;
}

bib_status_t bib_vm_set_trace_writer(bib_vm_t *vm, bib_trace_format_t format, bib_write_fn write,
                                     void *user) {
    if (vm == NULL)
        return BIB_E_USAGE;
    FILE *f = NULL;
    if (write != NULL) {
        f = bib_stream_open(write, user, 1);
        if (f == NULL)
            return bib_vm_fail(vm, BIB_E_NOMEM, "bib_vm_set_trace_writer: host out of memory");
    }
    bib_status_t st = bib_vm_set_trace(vm, format, f != NULL ? f : stderr);
    if (st != BIB_OK) {
        if (f != NULL)
            fclose(f);
        return st;
    }
    if (vm->trace_owned != NULL)
        fclose(vm->trace_owned);
    vm->trace_owned = f;
    return BIB_OK;
}
