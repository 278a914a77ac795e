/* vm/api.c: the VM half of the public API (include/bib.h).
 *
 * Owns the VM object's life, loading (read + verify, bind imports to
 * registered host functions, pre-decode, size linear memory), runs (fresh
 * state each time), the host-function registry with the standard output
 * functions, status names and the build line, and the run control of
 * stepped runs (start, step, continue, reload; inspection is in debug.c,
 * profiling in profile.c). The dispatch loop is in
 * interp.c, decoding in decode.c, instruction text in trace.c; the container
 * reader (module/format.c) is another module this one calls. Nothing here calls
 * the assembler: bib_vm_load_file, which assembles source text before it
 * loads it, lives with the assembler (assembler/load.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "vm/extend.h"
#include "vm/vm.h"

const char *bib_status_name(bib_status_t status) {
    switch (status) {
    case BIB_OK:
        return "ok";
    case BIB_E_USAGE:
        return "usage";
    case BIB_E_IO:
        return "io";
    case BIB_E_FORMAT:
        return "format";
    case BIB_E_VERIFY:
        return "verify";
    case BIB_E_ASM:
        return "asm";
    case BIB_E_LINK:
        return "link";
    case BIB_E_TRAP:
        return "trap";
    case BIB_E_NOMEM:
        return "nomem";
    case BIB_E_UNAVAILABLE:
        return "unavailable";
    case BIB_E_STATE:
        return "state";
    case BIB_E_TIMEOUT:
        return "timeout";
    }
    return "unknown";
}

void bib_free(void *ptr) {
    free(ptr);
}

/* ---- errors --------------------------------------------------------------- */

bib_status_t bib_vm_failv(bib_vm_t *vm, bib_status_t status, const char *format, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int need = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    if (need < 0)
        need = 0;
    if ((size_t)need + 1 > vm->error_cap) {
        char *grown = realloc(vm->error, (size_t)need + 1);
        if (grown == NULL) {
            /* Keep what fits: the status still says what happened. */
            if (vm->error_cap > 0)
                vsnprintf(vm->error, vm->error_cap, format, ap);
            return status;
        }
        vm->error = grown;
        vm->error_cap = (size_t)need + 1;
    }
    vsnprintf(vm->error, vm->error_cap, format, ap);
    return status;
}

bib_status_t bib_vm_fail(bib_vm_t *vm, bib_status_t status, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    bib_vm_failv(vm, status, format, ap);
    va_end(ap);
    return status;
}

static void clear_error(bib_vm_t *vm) {
    if (vm->error_cap > 0)
        vm->error[0] = '\0';
}

const char *bib_vm_error(const bib_vm_t *vm) {
    if (vm == NULL || vm->error == NULL)
        return "";
    return vm->error;
}

/* ---- create / destroy ----------------------------------------------------- */

static char *copy_string(const char *s) {
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

bib_status_t bib_vm_create(const bib_options_t *options, bib_vm_t **out) {
    if (out == NULL)
        return BIB_E_USAGE;
    *out = NULL;
    bib_options_t opt;
    if (bib_options_take(options, &opt) != BIB_OK)
        return BIB_E_USAGE;
    if (opt.trace_format != BIB_TRACE_OFF && opt.trace_format != BIB_TRACE_TEXT &&
        opt.trace_format != BIB_TRACE_JSON)
        return BIB_E_USAGE;
    if (opt.max_memory == 0)
        opt.max_memory = BIB_MEMORY_CAP_DEFAULT;
    if (opt.max_call_depth == 0)
        opt.max_call_depth = BIB_CALL_DEPTH_DEFAULT;
    if ((opt.deny & ~(uint32_t)BIB_DENY_DEVICE_CODE) != 0)
        return BIB_E_USAGE;

    bib_vm_t *vm = calloc(1, sizeof *vm);
    if (vm == NULL)
        return BIB_E_NOMEM;
    vm->options = opt;
    if (opt.backend != NULL || opt.device != NULL || opt.allow_hosts != NULL) {
        vm->backend_name = copy_string(opt.backend);
        vm->device_name = copy_string(opt.device);
        vm->allow_hosts = copy_string(opt.allow_hosts);
        if ((opt.backend != NULL && vm->backend_name == NULL) ||
            (opt.device != NULL && vm->device_name == NULL) ||
            (opt.allow_hosts != NULL && vm->allow_hosts == NULL)) {
            free(vm->backend_name);
            free(vm->device_name);
            free(vm->allow_hosts);
            free(vm);
            return BIB_E_NOMEM;
        }
        vm->options.backend = vm->backend_name;
        vm->options.device = vm->device_name;
        vm->options.allow_hosts = vm->allow_hosts;
    }
    vm->trace = opt.trace != NULL ? opt.trace : stderr;
    if (opt.trace_write != NULL) {
        vm->trace_owned = bib_stream_open(opt.trace_write, opt.trace_user, 1);
        if (vm->trace_owned == NULL) {
            free(vm->backend_name);
            free(vm->device_name);
            free(vm->allow_hosts);
            free(vm);
            return BIB_E_NOMEM;
        }
        vm->trace = vm->trace_owned;
    }
    bib_blocks_init(&vm->blocks, BIB_BLOCK_SIZE_DEFAULT, opt.max_memory);
    bib_arena_init(&vm->load_arena, &vm->blocks);
    bib_arena_init(&vm->run_arena, &vm->blocks);
    vm->error = calloc(1, 256);
    vm->error_cap = vm->error != NULL ? 256 : 0;
    *out = vm;
    return BIB_OK;
}

static void release_memory(bib_vm_t *vm) {
    bib_blocks_big_free(&vm->blocks, vm->memory, vm->memory_size);
    vm->memory = NULL;
    vm->memory_size = 0;
    vm->memory_dirty = false;
    vm->has_run = false;
}

static void unload(bib_vm_t *vm) {
    bib_debug_unload(vm);
    bib_devprog_unload(vm);
    bib_tensor_unload(vm);
    bib_arena_reset(&vm->run_arena);
    vm->regs = NULL;
    vm->regs_cap = 0;
    vm->frames = NULL;
    vm->frames_cap = 0;
    release_memory(vm);
    bib_arena_reset(&vm->load_arena);
    memset(&vm->program, 0, sizeof vm->program);
    bib_module_free(vm->module);
    vm->module = NULL;
    free(vm->module_name);
    vm->module_name = NULL;
}

void bib_vm_destroy(bib_vm_t *vm) {
    /* From inside a run (a host function of this VM's own run), freeing the
       VM would pull it from under the interpreter: the call is ignored, and
       the run's caller destroys the VM after the run, as it owns it. */
    if (vm == NULL || vm->running)
        return;
    unload(vm);
    bib_profile_destroy(vm->profile);
    bib_tensor_destroy(vm);
    bib_arena_destroy(&vm->run_arena);
    bib_arena_destroy(&vm->load_arena);
    bib_blocks_destroy(&vm->blocks);
    for (uint32_t i = 0; i < vm->registry_count; i++)
        free(vm->registry[i].name);
    free(vm->registry);
    free(vm->error);
    free(vm->backend_name);
    free(vm->device_name);
    free(vm->allow_hosts);
    if (vm->trace_owned != NULL)
        fclose(vm->trace_owned);
    if (vm->output_owned != NULL)
        fclose(vm->output_owned);
    free(vm);
}

/* ---- loading -------------------------------------------------------------- */

static const bib_host_entry_t *find_host(const bib_vm_t *vm, const char *name) {
    for (uint32_t i = 0; i < vm->registry_count; i++)
        if (strcmp(vm->registry[i].name, name) == 0)
            return &vm->registry[i];
    return NULL;
}

/* Whether name is one of the comma-separated names of list. */
static bool listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        p += len + (comma != NULL);
    }
    return false;
}

/* The load policy (options.deny, options.allow_hosts; spec/security.md):
 * refuses a verified module that carries what the host denies, naming the
 * section and the item, before anything of it is bound or run. */
static bib_status_t check_policy(bib_vm_t *vm, const bib_module_t *m, const char *label) {
    if (vm->options.deny & BIB_DENY_DEVICE_CODE) {
        if (m->shader_count > 0)
            return bib_vm_fail(vm, BIB_E_VERIFY,
                               "%s: section %d (shaders): shader '%s' is user device code, which "
                               "the load policy denies (--deny=device-code)",
                               label, BIB_SEC_SHADERS, m->shaders[0].name);
        if (m->kernel_count > 0)
            return bib_vm_fail(vm, BIB_E_VERIFY,
                               "%s: section %d (kernels): kernel '%s' is user device code, which "
                               "the load policy denies (--deny=device-code)",
                               label, BIB_SEC_KERNELS, m->kernels[0].name);
    }
    const char *allow = vm->options.allow_hosts;
    if (allow == NULL)
        return BIB_OK;
    for (uint32_t i = 0; i < m->import_count; i++) {
        if (listed(allow, m->imports[i]))
            continue;
        /* The list as the message shows it: "a, b", or "none". */
        char shown[512];
        size_t n = 0;
        for (const char *p = allow; *p != '\0' && n + 2 < sizeof shown; p++) {
            if (*p == ',') {
                shown[n++] = ',';
                shown[n++] = ' ';
            } else {
                shown[n++] = *p;
            }
        }
        shown[n] = '\0';
        return bib_vm_fail(vm, BIB_E_VERIFY,
                           "%s: section %d (symbols): import '%s' is not an allowed host function "
                           "(allowed: %s)",
                           label, BIB_SEC_SYMBOLS, m->imports[i], n > 0 ? shown : "none");
    }
    return BIB_OK;
}

/* Binds, decodes and installs a verified module; takes ownership of m. */
static bib_status_t install(bib_vm_t *vm, bib_module_t *m, const char *name) {
    const char *label = name != NULL ? name : "module";
    bib_status_t allowed = check_policy(vm, m, label);
    if (allowed != BIB_OK) {
        bib_module_free(m);
        return allowed;
    }
    bib_host_t *hosts = NULL;
    if (m->import_count > 0) {
        hosts = calloc(m->import_count, sizeof *hosts);
        if (hosts == NULL) {
            bib_module_free(m);
            return bib_vm_fail(vm, BIB_E_NOMEM, "%s: host out of memory binding imports", label);
        }
    }
    for (uint32_t i = 0; i < m->import_count; i++) {
        const bib_host_entry_t *e = find_host(vm, m->imports[i]);
        if (e == NULL) {
            bib_status_t st =
                bib_vm_fail(vm, BIB_E_LINK, "%s: import '%s' names no registered host function",
                            label, m->imports[i]);
            free(hosts);
            bib_module_free(m);
            return st;
        }
        hosts[i].fn = e->fn;
        hosts[i].user = e->user;
        hosts[i].name = m->imports[i];
    }

    unload(vm);
    bib_status_t st = bib_decode(m, hosts, 0, &vm->load_arena, &vm->program);
    free(hosts);
    if (st != BIB_OK) {
        st = bib_vm_fail(vm, st, "%s: decoding %u instructions: %s", label, m->code_count,
                         vm->blocks.error);
        bib_arena_reset(&vm->load_arena);
        bib_module_free(m);
        return st;
    }
    if (m->memory_size > 0) {
        void *mem;
        st = bib_blocks_big_alloc(&vm->blocks, m->memory_size, BIB_BLOCK_ALIGN, 1, &mem);
        if (st != BIB_OK) {
            st = bib_vm_fail(vm, st, "%s: linear memory of %" PRIu64 " bytes: %s", label,
                             m->memory_size, vm->blocks.error);
            bib_arena_reset(&vm->load_arena);
            memset(&vm->program, 0, sizeof vm->program);
            bib_module_free(m);
            return st;
        }
        vm->memory = mem;
        vm->memory_size = m->memory_size;
        if (m->data_size > 0)
            memcpy(vm->memory, m->data, m->data_size);
    }
    vm->module = m;
    vm->module_name = copy_string(name);
    st = bib_tensor_load(vm);
    if (st != BIB_OK) {
        bib_status_t keep = st;
        char *msg = copy_string(vm->error);
        unload(vm);
        bib_vm_fail(vm, keep, "%s: %s", label, msg != NULL ? msg : "out of memory");
        free(msg);
        return keep;
    }
    clear_error(vm);
    return BIB_OK;
}

bib_status_t bib_vm_load_module(bib_vm_t *vm, bib_module_t *m, const char *name) {
    if (vm == NULL || m == NULL) {
        bib_module_free(m);
        return vm != NULL ? bib_vm_fail(vm, BIB_E_USAGE, "no module to load") : BIB_E_USAGE;
    }
    if (vm->running) {
        bib_module_free(m);
        return bib_vm_fail(vm, BIB_E_STATE, "cannot load a module while the VM is running");
    }
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_status_t st = bib_module_verify(m, &diag);
    if (st != BIB_OK) {
        bib_module_free(m);
        return bib_vm_fail(vm, st, "%s: %s", name != NULL ? name : "module", diag.msg);
    }
    return install(vm, m, name);
}

static bib_status_t load_bytes(bib_vm_t *vm, const void *bytes, size_t size, const char *name,
                               bool consume) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (bytes == NULL && size > 0)
        return bib_vm_fail(vm, BIB_E_USAGE, "bib_vm_load: bytes is NULL");
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot load a module while the VM is running");
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *m = NULL;
    bib_status_t st = consume ? bib_module_read_consuming((uint8_t *)bytes, size, &m, &diag)
                              : bib_module_read(bytes, size, &m, &diag);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "%s: %s", name != NULL ? name : "module", diag.msg);
    return install(vm, m, name);
}

bib_status_t bib_vm_load(bib_vm_t *vm, const void *bytes, size_t size, const char *name) {
    return load_bytes(vm, bytes, size, name, false);
}

bib_status_t bib_vm_load_consuming(bib_vm_t *vm, uint8_t *bytes, size_t size, const char *name) {
    return load_bytes(vm, bytes, size, name, true);
}

/* ---- running -------------------------------------------------------------- */

/* Registers and frames for the entry function; both grow during the run. */
#define REGS_INITIAL 128u
#define FRAMES_INITIAL 64u

/* Fresh state for a run (bib_vm_run, bib_vm_start): registers, frames,
   linear memory, tensors. Ends any stepped run. */
static bib_status_t prepare_run(bib_vm_t *vm, const char *caller) {
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "%s called from inside a run", caller);
    if (vm->module == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "no module loaded: call bib_vm_load first");
    clear_error(vm);
    memset(&vm->stats, 0, sizeof vm->stats);
    vm->cursor.stop = BIB_STOP_NONE;
    if (vm->profile != NULL)
        bib_profile_reset(vm->profile);

    /* Fresh state: nothing of the previous run survives. */
    bib_tensor_release(vm);
    bib_arena_reset(&vm->run_arena);
    vm->regs = NULL;
    vm->frames = NULL;
    if (vm->memory_dirty) {
        const bib_module_t *m = vm->module;
        if (m->data_size > 0)
            memcpy(vm->memory, m->data, m->data_size);
        memset(vm->memory + m->data_size, 0, (size_t)(vm->memory_size - m->data_size));
        vm->memory_dirty = false;
    }
    bib_blocks_reset_peak(&vm->blocks);

    uint32_t nregs = vm->program.entry->nregs;
    vm->regs_cap = nregs > REGS_INITIAL ? nregs : REGS_INITIAL;
    vm->frames_cap =
        vm->options.max_call_depth < FRAMES_INITIAL ? vm->options.max_call_depth : FRAMES_INITIAL;
    void *regs, *frames;
    bib_status_t st = bib_arena_zalloc(&vm->run_arena, (size_t)vm->regs_cap * sizeof(uint64_t),
                                       sizeof(uint64_t), &regs);
    if (st == BIB_OK)
        st = bib_arena_alloc(&vm->run_arena, (size_t)vm->frames_cap * sizeof(bib_frame_t),
                             _Alignof(bib_frame_t), &frames);
    if (st != BIB_OK) {
        vm->stats.peak_memory = vm->blocks.peak;
        return bib_vm_fail(vm, st, "starting the run: %s", vm->blocks.error);
    }
    vm->regs = regs;
    vm->frames = frames;
    vm->has_run = true;
    st = bib_tensor_run_begin(vm);
    if (st != BIB_OK) {
        vm->stats.peak_memory = vm->blocks.peak;
        return st;
    }
    return BIB_OK;
}

/* Runs f from a fresh state, its first nargs registers set to args. */
static bib_status_t run_function(bib_vm_t *vm, const bib_dfunc_t *f, const bib_value_t *args,
                                 uint32_t nargs, int64_t *exit_value, const char *caller) {
    /* The interpreter starts at the program's entry: f is the entry for
       this run only. */
    const bib_dfunc_t *entry = vm->program.entry;
    vm->program.entry = f;
    bib_status_t st = prepare_run(vm, caller);
    if (st != BIB_OK) {
        vm->program.entry = entry;
        return st;
    }
    for (uint32_t i = 0; i < nargs; i++)
        vm->regs[i] = args[i].u;
    vm->running = true;
    vm->has_run = true;
    vm->memory_dirty = vm->memory_size > 0;
    st = bib_interp_run(vm, exit_value);
    vm->running = false;
    vm->program.entry = entry;
    vm->stats.peak_memory = vm->blocks.peak;
    if (vm->options.trace_format != BIB_TRACE_OFF)
        fflush(vm->trace);
    return st;
}

bib_status_t bib_vm_run(bib_vm_t *vm, int64_t *exit_value) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->module == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "no module loaded: call bib_vm_load first");
    return run_function(vm, vm->program.entry, NULL, 0, exit_value, "bib_vm_run");
}

/* The function bib_vm_call (caller) would run for name and nargs. */
static bib_status_t find_call(bib_vm_t *vm, const char *name, const bib_value_t *args,
                              uint32_t nargs, const char *caller, const bib_dfunc_t **out) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->module == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "no module loaded: call bib_vm_load first");
    if (name == NULL || (nargs > 0 && args == NULL))
        return bib_vm_fail(vm, BIB_E_USAGE, "%s: %s is NULL", caller,
                           name == NULL ? "name" : "args");
    int64_t index = bib_vm_function_find(vm, name);
    if (index < 0) {
        /* The functions it has, as many as fit the message. */
        char list[256];
        size_t n = 0;
        list[0] = '\0';
        for (uint32_t i = 0; i < vm->module->func_count && n < sizeof list; i++) {
            const char *f = vm->module->funcs[i].name;
            if (f != NULL)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", f);
        }
        return bib_vm_fail(vm, BIB_E_USAGE, "no function '%s' in the module (its functions: %s)",
                           name, list);
    }
    const bib_dfunc_t *f = &vm->program.funcs[index];
    if (f->nargs != nargs)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "function %s takes %" PRIu32 " argument%s (.func %s args=%" PRIu32
                           "), not %" PRIu32,
                           name, f->nargs, f->nargs == 1 ? "" : "s", name, f->nargs, nargs);
    *out = f;
    return BIB_OK;
}

bib_status_t bib_vm_call(bib_vm_t *vm, const char *name, const bib_value_t *args, uint32_t nargs,
                         int64_t *result) {
    const bib_dfunc_t *f = NULL;
    bib_status_t st = find_call(vm, name, args, nargs, "bib_vm_call", &f);
    return st != BIB_OK ? st : run_function(vm, f, args, nargs, result, "bib_vm_call");
}

bib_status_t bib_vm_start_call(bib_vm_t *vm, const char *name, const bib_value_t *args,
                               uint32_t nargs) {
    const bib_dfunc_t *f = NULL;
    bib_status_t st = find_call(vm, name, args, nargs, "bib_vm_start_call", &f);
    if (st != BIB_OK)
        return st;
    /* As run_function: f is the entry for this run only (the stepped loop
       reads the entry only at its start). */
    const bib_dfunc_t *entry = vm->program.entry;
    vm->program.entry = f;
    st = prepare_run(vm, "bib_vm_start_call");
    if (st == BIB_OK) {
        for (uint32_t i = 0; i < nargs; i++)
            vm->regs[i] = args[i].u;
        vm->memory_dirty = vm->memory_size > 0;
        bib_interp_begin(vm);
    }
    vm->program.entry = entry;
    return st;
}

/* ---- stepped runs ---------------------------------------------------------- */

bib_status_t bib_vm_start(bib_vm_t *vm) {
    if (vm == NULL)
        return BIB_E_USAGE;
    bib_status_t st = prepare_run(vm, "bib_vm_start");
    if (st != BIB_OK)
        return st;
    vm->memory_dirty = vm->memory_size > 0;
    bib_interp_begin(vm);
    return BIB_OK;
}

static bib_status_t resume(bib_vm_t *vm, uint64_t budget, bib_stop_t *stop, const char *caller) {
    if (stop != NULL)
        *stop = vm != NULL ? vm->cursor.stop : BIB_STOP_NONE;
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "%s called from inside a run", caller);
    bib_stop_t was = vm->cursor.stop;
    if (was != BIB_STOP_PAUSED && was != BIB_STOP_BREAKPOINT)
        return bib_vm_fail(vm, BIB_E_STATE, "%s: %s", caller,
                           was == BIB_STOP_NONE ? "no stepped run: call bib_vm_start first"
                                                : "the run has finished: call bib_vm_start");
    clear_error(vm);
    vm->running = true;
    bib_status_t st = bib_interp_resume(vm, budget);
    vm->running = false;
    vm->stats.peak_memory = vm->blocks.peak;
    if (vm->options.trace_format != BIB_TRACE_OFF)
        fflush(vm->trace);
    if (stop != NULL)
        *stop = vm->cursor.stop;
    return st;
}

bib_status_t bib_vm_step(bib_vm_t *vm, uint64_t count, bib_stop_t *stop) {
    return resume(vm, count, stop, "bib_vm_step");
}

bib_status_t bib_vm_continue(bib_vm_t *vm, bib_stop_t *stop) {
    return resume(vm, UINT64_MAX, stop, "bib_vm_continue");
}

/* Makes the entry frame's window hold nregs registers: the register stack of
   the run grows (zeroed) when it is smaller. */
static bib_status_t entry_regs(bib_vm_t *vm, uint32_t nregs) {
    if (nregs <= vm->regs_cap)
        return BIB_OK;
    void *p = vm->regs;
    bib_status_t st = bib_arena_grow(&vm->run_arena, &p, (size_t)vm->regs_cap * sizeof(uint64_t),
                                     (size_t)nregs * sizeof(uint64_t), sizeof(uint64_t));
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "reload: register stack of %u registers: %s", nregs,
                           vm->blocks.error);
    memset((uint64_t *)p + vm->regs_cap, 0, (size_t)(nregs - vm->regs_cap) * sizeof(uint64_t));
    vm->regs = p;
    vm->regs_cap = nregs;
    return BIB_OK;
}

/* A kept run's entry frame grown from `from` registers to `to`: the new
   registers start at zero, whatever the calls made earlier left on that
   part of the register stack (at depth 1 no callee frame is live there). */
static void zero_grown_entry_regs(bib_vm_t *vm, uint32_t from, uint32_t to) {
    if (to > from)
        memset(&vm->regs[from], 0, (size_t)(to - from) * sizeof vm->regs[0]);
}

/* Grows the run's tensor register file to n registers (or keeps it when it
   has as many), keeping what the registers hold. */
static bib_status_t tensor_regs_at_least(bib_vm_t *vm, uint32_t n) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (n <= ts->reg_count)
        return BIB_OK;
    void *p;
    bib_status_t st = bib_arena_zalloc(&vm->run_arena, (size_t)n * sizeof(bib_tensor_t),
                                       _Alignof(bib_tensor_t), &p);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "reload: tensor registers: %s", vm->blocks.error);
    if (ts->reg_count > 0)
        memcpy(p, ts->regs, (size_t)ts->reg_count * sizeof(bib_tensor_t));
    ts->regs = p;
    ts->reg_count = n;
    return BIB_OK;
}

/* Moves what was kept for the old module's tensor declarations (given inputs)
   and run (register file, symbolic sizes) over to the new module, matching by
   name. The new register file is at least as large as the old one. */
static bib_status_t carry_tensors(bib_vm_t *vm, const bib_module_t *old, const bib_module_t *m) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_input_t *inputs = NULL;
    if (m->tensor_count > 0) {
        inputs = calloc(m->tensor_count, sizeof *inputs);
        if (inputs == NULL)
            return bib_vm_fail(vm, BIB_E_NOMEM, "reload: host out of memory");
    }
    int64_t *symbols = ts->symbols;
    bib_status_t st = tensor_regs_at_least(vm, m->tensor_regs);
    if (st == BIB_OK && m->dim_name_count > 0) {
        void *p;
        st = bib_arena_alloc(&vm->run_arena, (size_t)m->dim_name_count * sizeof(int64_t),
                             _Alignof(int64_t), &p);
        if (st != BIB_OK) {
            st = bib_vm_fail(vm, st, "reload: symbolic sizes: %s", vm->blocks.error);
        } else {
            symbols = p;
            for (uint32_t i = 0; i < m->dim_name_count; i++) {
                symbols[i] = -1;
                for (uint32_t j = 0; ts->symbols != NULL && j < old->dim_name_count; j++)
                    if (strcmp(old->dim_names[j], m->dim_names[i]) == 0)
                        symbols[i] = ts->symbols[j];
            }
        }
    }
    if (st != BIB_OK) {
        free(inputs);
        return st;
    }
    for (uint32_t i = 0; i < m->tensor_count && ts->inputs != NULL; i++)
        for (uint32_t j = 0; j < old->tensor_count; j++)
            if (ts->inputs[j].set && strcmp(old->tensors[j].name, m->tensors[i].name) == 0) {
                inputs[i] = ts->inputs[j];
                ts->inputs[j].set = false;
                ts->inputs[j].kept = NULL;
            }
    /* A kept register may still share a dropped input's bytes: it holds
       its own reference. */
    for (uint32_t j = 0; ts->inputs != NULL && j < old->tensor_count; j++)
        bib_hostbuf_unref(ts->inputs[j].kept);
    free(ts->inputs);
    ts->inputs = inputs;
    ts->symbols = symbols;
    return BIB_OK;
}

/* A stepped run that a reload or an extension can keep: not inside a run,
   stopped at depth 1 or finished. */
static bib_status_t check_kept_run(bib_vm_t *vm, const char *fn) {
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "%s called from inside a run", fn);
    const bib_cursor_t *cur = &vm->cursor;
    if (cur->stop == BIB_STOP_NONE)
        return bib_vm_fail(vm, BIB_E_STATE, "%s: no stepped run to keep", fn);
    bool finished = cur->stop == BIB_STOP_HALTED || cur->stop == BIB_STOP_TRAPPED;
    if (!finished && cur->fp != vm->frames)
        return bib_vm_fail(vm, BIB_E_STATE, "%s: the run is paused inside a call (depth %u)", fn,
                           (unsigned)(cur->fp - vm->frames) + 1);
    return BIB_OK;
}

bib_status_t bib_vm_reload(bib_vm_t *vm, const void *bytes, size_t size, const char *name,
                           uint32_t offset) {
    if (vm == NULL)
        return BIB_E_USAGE;
    bib_status_t st = check_kept_run(vm, "bib_vm_reload");
    if (st != BIB_OK)
        return st;
    bib_cursor_t *cur = &vm->cursor;
    const char *label = name != NULL ? name : "module";
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *m = NULL;
    st = bib_module_read(bytes, size, &m, &diag);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "%s: %s", label, diag.msg);
    const bib_function_t *entry = &m->funcs[m->entry_func];
    if (offset >= entry->count) {
        bib_module_free(m);
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "%s: offset %u is past the entry function '%s' (%u instructions)", label,
                           offset, entry->name, entry->count);
    }
    const uint32_t pc = entry->entry + offset;
    st = check_policy(vm, m, label);
    if (st != BIB_OK) {
        bib_module_free(m);
        return st;
    }
    bib_host_t *hosts = NULL;
    if (m->import_count > 0 && (hosts = calloc(m->import_count, sizeof *hosts)) == NULL) {
        bib_module_free(m);
        return bib_vm_fail(vm, BIB_E_NOMEM, "%s: host out of memory binding imports", label);
    }
    for (uint32_t i = 0; i < m->import_count; i++) {
        const bib_host_entry_t *e = find_host(vm, m->imports[i]);
        if (e == NULL) {
            st = bib_vm_fail(vm, BIB_E_LINK, "%s: import '%s' names no registered host function",
                             label, m->imports[i]);
            free(hosts);
            bib_module_free(m);
            return st;
        }
        hosts[i] = (bib_host_t){e->fn, e->user, m->imports[i]};
    }
    /* Everything that can fail and leave the old module in place comes first. */
    const uint32_t entry_nregs = entry->nregs;
    st = entry_regs(vm, entry_nregs);
    uint8_t *mem = vm->memory;
    if (st == BIB_OK && m->memory_size != vm->memory_size) {
        void *p = NULL;
        if (m->memory_size > 0)
            st = bib_blocks_big_alloc(&vm->blocks, m->memory_size, BIB_BLOCK_ALIGN, 1, &p);
        if (st != BIB_OK)
            st = bib_vm_fail(vm, st, "%s: linear memory of %" PRIu64 " bytes: %s", label,
                             m->memory_size, vm->blocks.error);
        mem = p;
    }
    char *label_copy = st == BIB_OK ? copy_string(name) : NULL;
    if (st == BIB_OK && name != NULL && label_copy == NULL)
        st = bib_vm_fail(vm, BIB_E_NOMEM, "%s: host out of memory", label);
    if (st == BIB_OK)
        st = carry_tensors(vm, vm->module, m);
    if (st != BIB_OK) {
        if (mem != vm->memory)
            bib_blocks_big_free(&vm->blocks, mem, m->memory_size);
        free(label_copy);
        free(hosts);
        bib_module_free(m);
        return st;
    }
    /* The decoded program lives in the load arena; the run's state in the run
       arena and the blocks, which stay. */
    bib_arena_reset(&vm->load_arena);
    memset(&vm->program, 0, sizeof vm->program);
    st = bib_decode(m, hosts, 0, &vm->load_arena, &vm->program);
    free(hosts);
    if (st != BIB_OK) {
        /* Only the host running out of memory gets here; the run cannot go on. */
        st = bib_vm_fail(vm, st, "%s: decoding %u instructions: %s", label, m->code_count,
                         vm->blocks.error);
        if (mem != vm->memory)
            bib_blocks_big_free(&vm->blocks, mem, m->memory_size);
        free(label_copy);
        /* The inputs were moved over to m's declarations: unload with m. */
        bib_tensor_keep_constants(vm);
        bib_module_free(vm->module);
        vm->module = m;
        unload(vm);
        return st;
    }
    const bib_module_t *old = vm->module;
    if (mem != vm->memory) {
        uint64_t keep = m->memory_size < vm->memory_size ? m->memory_size : vm->memory_size;
        if (keep > 0)
            memcpy(mem, vm->memory, (size_t)keep);
        bib_blocks_big_free(&vm->blocks, vm->memory, vm->memory_size);
        vm->memory = mem;
        vm->memory_size = m->memory_size;
    }
    for (uint32_t i = 0; i < m->data_size; i++)
        if (i >= old->data_size || old->data[i] != m->data[i])
            vm->memory[i] = m->data[i];
    vm->memory_dirty = vm->memory_size > 0;
    zero_grown_entry_regs(vm, old->funcs[old->entry_func].nregs, entry_nregs);
    /* The kept tensor registers may share the old module's constants. */
    bib_tensor_keep_constants(vm);
    bib_module_free(vm->module);
    vm->module = m;
    free(vm->module_name);
    vm->module_name = label_copy;
    free(vm->breaks);
    vm->breaks = NULL;
    /* Unwind to the entry frame and go on at pc. */
    cur->fp = vm->frames;
    cur->R = vm->regs;
    cur->ip = vm->program.code + pc;
    cur->stop = BIB_STOP_PAUSED;
    vm->has_run = true;
    clear_error(vm);
    return BIB_OK;
}

/* Takes back what bib_vm_extend put into m before it could be refused: the
   instructions inserted at pc at (count of them), the constants from
   first_const on, the entry function's registers and the tensor registers. */
static void extension_undo(bib_module_t *m, uint32_t at, uint32_t count, uint32_t first_const,
                           uint32_t nregs, uint32_t tensor_regs) {
    bib_function_t *f = &m->funcs[m->entry_func];
    m->code[at] = m->code[at + count];
    if (m->lines != NULL)
        m->lines[at] = m->lines[at + count];
    int op = bib_isa_find_code(m->code[at].op);
    m->ops[at] = (uint16_t)(op < 0 ? BIB_OP__COUNT : op);
    m->code_count -= count;
    f->count -= count;
    f->nregs = nregs;
    m->const_count = first_const;
    bib_const_index_free(&m->const_index);
    m->tensor_regs = tensor_regs;
    /* The liveness record may describe the code taken back: the next check
       that needs it runs over the module. */
    bib_liveness_tail_free(m->liveness_tail);
    m->liveness_tail = NULL;
}

bib_status_t bib_vm_extend(bib_vm_t *vm, const bib_extension_t *ext, const char *name,
                           uint32_t offset) {
    if (vm == NULL || ext == NULL)
        return BIB_E_USAGE;
    bib_status_t st = check_kept_run(vm, "bib_vm_extend");
    if (st != BIB_OK)
        return st;
    const char *label = name != NULL ? name : "module";
    bib_module_t *m = vm->module;
    bib_function_t *f = &m->funcs[m->entry_func];
    if (m->entry_func + 1 != m->func_count || ext->count + ext->label_count == 0 ||
        (ext->count > 0 && ext->code == NULL) || (ext->label_count > 0 && ext->labels == NULL) ||
        (ext->const_count > 0 && ext->consts == NULL) || ext->nregs < f->nregs ||
        ext->tensor_regs < m->tensor_regs)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "bib_vm_extend: %s: needs instructions or labels, the entry function "
                           "last, and registers kept or grown",
                           label);
    if (ext->count > BIB_MAX_CODE - m->code_count)
        return bib_vm_fail(vm, BIB_E_VERIFY,
                           "%s: module has %llu instructions, more than the limit %u", label,
                           (unsigned long long)m->code_count + ext->count, BIB_MAX_CODE);
    if (ext->const_count > BIB_MAX_CONSTS - m->const_count)
        return bib_vm_fail(vm, BIB_E_VERIFY,
                           "%s: constant pool has %llu entries, more than the limit %u", label,
                           (unsigned long long)m->const_count + ext->const_count, BIB_MAX_CONSTS);
    const uint32_t count = ext->count;
    if (offset >= f->count + count)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "%s: offset %u is past the entry function '%s' (%u instructions)", label,
                           offset, f->name, f->count + count);
    /* Decoded again from scratch, with room to grow, when the decoded code
       is full or the entry function's frame grows (its calls hold where a
       callee's window starts): the bound imports are kept aside for that. */
    const bool redecode = m->code_count + count > vm->program.code_cap || ext->nregs != f->nregs;
    bib_host_t *hosts = NULL;
    if (redecode && vm->program.host_count > 0) {
        hosts = malloc(vm->program.host_count * sizeof *hosts);
        if (hosts == NULL)
            return bib_vm_fail(vm, BIB_E_NOMEM, "%s: host out of memory", label);
        memcpy(hosts, vm->program.hosts, vm->program.host_count * sizeof *hosts);
    }
    /* Room first: growing an array changes nothing the module says. */
    if (bib_module_reserve(m, m->code_count + count, m->const_count + ext->const_count,
                           m->label_count + ext->label_count) != BIB_OK) {
        free(hosts);
        return bib_vm_fail(vm, BIB_E_NOMEM, "%s: host out of memory adding %u instructions", label,
                           count);
    }
    bib_insn_t *code = m->code;
    /* Insert, then verify: a refusal takes the insertion back. */
    const uint32_t at = f->entry + f->count - 1, first_const = m->const_count;
    const uint32_t old_nregs = f->nregs, old_tensor_regs = m->tensor_regs;
    code[at + count] = code[at];
    if (count > 0)
        memcpy(&code[at], ext->code, (size_t)count * sizeof *code);
    if (m->lines != NULL) {
        m->lines[at + count] = m->lines[at];
        for (uint32_t i = 0; i < count; i++)
            m->lines[at + i] = ext->lines != NULL ? ext->lines[i] : 0;
    }
    if (ext->const_count > 0)
        memcpy(&m->consts[first_const], ext->consts, (size_t)ext->const_count * sizeof *m->consts);
    m->const_count += ext->const_count;
    m->code_count += count;
    f->count += count;
    f->nregs = ext->nregs;
    m->tensor_regs = ext->tensor_regs;
    bib_diag_t diag;
    diag.msg[0] = '\0';
    st = bib_module_verify_extension(m, at, count, first_const, ext->labels, ext->label_count,
                                     &diag);
    if (st != BIB_OK)
        st = bib_vm_fail(vm, st, "%s: %s", label, diag.msg);
    if (st == BIB_OK)
        st = entry_regs(vm, f->nregs);
    if (st == BIB_OK)
        st = tensor_regs_at_least(vm, m->tensor_regs);
    if (st == BIB_OK && bib_module_add_labels(m, at, ext->labels, ext->label_count) != BIB_OK)
        st = bib_vm_fail(vm, BIB_E_NOMEM, "%s: host out of memory adding %u labels", label,
                         ext->label_count);
    if (st != BIB_OK) {
        extension_undo(m, at, count, first_const, old_nregs, old_tensor_regs);
        free(hosts);
        return st;
    }
    zero_grown_entry_regs(vm, old_nregs, f->nregs);
    if (!redecode) {
        bib_decode_extension(m, at, count, &vm->program);
    } else {
        bib_arena_reset(&vm->load_arena);
        st = bib_decode(m, hosts, m->code_count, &vm->load_arena, &vm->program);
        free(hosts);
        if (st != BIB_OK) {
            /* Only the host running out of memory gets here; the run cannot go on. */
            st = bib_vm_fail(vm, st, "%s: decoding %u instructions: %s", label, m->code_count,
                             vm->blocks.error);
            unload(vm);
            return st;
        }
    }
    free(vm->breaks);
    vm->breaks = NULL;
    bib_cursor_t *cur = &vm->cursor;
    cur->fp = vm->frames;
    cur->R = vm->regs;
    cur->ip = vm->program.code + f->entry + offset;
    cur->stop = BIB_STOP_PAUSED;
    vm->has_run = true;
    clear_error(vm);
    return BIB_OK;
}

const bib_module_t *bib_vm_module(const bib_vm_t *vm) {
    return vm != NULL ? vm->module : NULL;
}

int bib_vm_entry_label(bib_vm_t *vm, const char *name, uint32_t *pc) {
    return vm != NULL && vm->module != NULL ? bib_module_entry_label(vm->module, name, pc) : -1;
}

int bib_vm_const_find(bib_vm_t *vm, bib_const_t k, uint32_t *index) {
    return vm != NULL && vm->module != NULL ? bib_module_const_find(vm->module, k, index) : -1;
}

void bib_vm_stats(const bib_vm_t *vm, bib_run_stats_t *stats) {
    if (stats == NULL)
        return;
    if (vm == NULL) {
        memset(stats, 0, sizeof *stats);
        return;
    }
    *stats = vm->stats;
}

uint8_t *bib_vm_memory(bib_vm_t *vm, uint64_t *size) {
    if (vm == NULL || !vm->has_run) {
        if (size != NULL)
            *size = 0;
        return NULL;
    }
    if (size != NULL)
        *size = vm->memory_size;
    return vm->memory;
}

/* ---- host functions ------------------------------------------------------- */

bib_status_t bib_vm_register_host(bib_vm_t *vm, const char *name, bib_host_fn fn, void *user) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (name == NULL || name[0] == '\0' || fn == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "bib_vm_register_host: a host function needs a name and a function");
    for (uint32_t i = 0; i < vm->registry_count; i++) {
        if (strcmp(vm->registry[i].name, name) == 0) {
            vm->registry[i].fn = fn;
            vm->registry[i].user = user;
            /* The loaded module's HOSTCALLs of it call the new one from now
               on: nothing keeps the old function or its user pointer. */
            for (uint32_t h = 0; h < vm->program.host_count; h++) {
                bib_host_t *bound = &vm->program.hosts[h];
                if (bound->name != NULL && strcmp(bound->name, name) == 0) {
                    bound->fn = fn;
                    bound->user = user;
                }
            }
            return BIB_OK;
        }
    }
    if (vm->registry_count == vm->registry_cap) {
        uint32_t cap = vm->registry_cap == 0 ? 16 : vm->registry_cap * 2;
        bib_host_entry_t *grown = realloc(vm->registry, cap * sizeof *grown);
        if (grown == NULL)
            return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory registering '%s'", name);
        vm->registry = grown;
        vm->registry_cap = cap;
    }
    char *copy = copy_string(name);
    if (copy == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory registering '%s'", name);
    vm->registry[vm->registry_count++] = (bib_host_entry_t){copy, fn, user};
    return BIB_OK;
}

void bib_vm_trap(bib_vm_t *vm, const char *format, ...) {
    if (vm == NULL)
        return;
    va_list ap;
    va_start(ap, format);
    vsnprintf(vm->host_trap, sizeof vm->host_trap, format, ap);
    va_end(ap);
    vm->host_trap_set = true;
}

static bib_status_t want_args(bib_vm_t *vm, const char *fn, uint32_t nargs, uint32_t want) {
    if (nargs == want)
        return BIB_OK;
    bib_vm_trap(vm, "%s takes %u argument%s, got %u", fn, want, want == 1 ? "" : "s", nargs);
    return BIB_E_TRAP;
}

static bib_status_t stdio_print_i64(bib_vm_t *vm, void *user, const bib_value_t *args,
                                    uint32_t nargs, bib_value_t *result) {
    if (want_args(vm, "print_i64", nargs, 1) != BIB_OK)
        return BIB_E_TRAP;
    fprintf((FILE *)user, "%" PRId64 "\n", args[0].i);
    result->i = 0;
    return BIB_OK;
}

static bib_status_t stdio_print_u64(bib_vm_t *vm, void *user, const bib_value_t *args,
                                    uint32_t nargs, bib_value_t *result) {
    if (want_args(vm, "print_u64", nargs, 1) != BIB_OK)
        return BIB_E_TRAP;
    fprintf((FILE *)user, "%" PRIu64 "\n", args[0].u);
    result->i = 0;
    return BIB_OK;
}

/* The most digits print_f64 writes after the point (include/bib.h). */
#define PRINT_F64_MAX_DIGITS 40

/* print_f64(x): the shortest text that reads back as x. print_f64(x, digits):
   x with that many digits after the point, as C's "%.*f" rounds it. */
static bib_status_t stdio_print_f64(bib_vm_t *vm, void *user, const bib_value_t *args,
                                    uint32_t nargs, bib_value_t *result) {
    if (nargs != 1 && nargs != 2) {
        bib_vm_trap(vm,
                    "print_f64 takes 1 or 2 arguments (the value, then the digits after the "
                    "point), got %u",
                    nargs);
        return BIB_E_TRAP;
    }
    if (nargs == 2) {
        int64_t digits = args[1].i;
        if (digits < 0 || digits > PRINT_F64_MAX_DIGITS) {
            bib_vm_trap(vm, "print_f64: %" PRId64 " digits after the point is out of range (0..%d)",
                        digits, PRINT_F64_MAX_DIGITS);
            return BIB_E_TRAP;
        }
        fprintf((FILE *)user, "%.*f\n", (int)digits, args[0].f);
    } else {
        char text[40];
        bib_format_f64(args[0].f, text, sizeof text);
        fprintf((FILE *)user, "%s\n", text);
    }
    result->i = 0;
    return BIB_OK;
}

static bib_status_t stdio_print_char(bib_vm_t *vm, void *user, const bib_value_t *args,
                                     uint32_t nargs, bib_value_t *result) {
    if (want_args(vm, "print_char", nargs, 1) != BIB_OK)
        return BIB_E_TRAP;
    fputc((int)(unsigned char)args[0].u, (FILE *)user);
    result->i = 0;
    return BIB_OK;
}

static bib_status_t stdio_print_str(bib_vm_t *vm, void *user, const bib_value_t *args,
                                    uint32_t nargs, bib_value_t *result) {
    if (want_args(vm, "print_str", nargs, 2) != BIB_OK)
        return BIB_E_TRAP;
    uint64_t size = 0;
    const uint8_t *mem = bib_vm_memory(vm, &size);
    uint64_t addr = args[0].u, len = args[1].u;
    if (addr > size || len > size - addr) {
        bib_vm_trap(vm,
                    "print_str: %" PRIu64 " bytes at address %" PRIu64
                    " are outside linear memory of %" PRIu64 " bytes",
                    len, addr, size);
        return BIB_E_TRAP;
    }
    if (len > 0)
        fwrite(mem + addr, 1, (size_t)len, (FILE *)user);
    result->i = 0;
    return BIB_OK;
}

bib_status_t bib_vm_register_stdio(bib_vm_t *vm, FILE *out) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (out == NULL)
        out = stdout;
    static const struct {
        const char *name;
        bib_host_fn fn;
    } table[] = {
        {"print_i64", stdio_print_i64}, {"print_u64", stdio_print_u64},
        {"print_f64", stdio_print_f64}, {"print_char", stdio_print_char},
        {"print_str", stdio_print_str},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        bib_status_t st = bib_vm_register_host(vm, table[i].name, table[i].fn, out);
        if (st != BIB_OK)
            return st;
    }
    return BIB_OK;
}

bib_status_t bib_vm_register_output(bib_vm_t *vm, bib_write_fn write, void *user) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (write == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE, "bib_vm_register_output: write is NULL");
    FILE *f = bib_stream_open(write, user, 0);
    if (f == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "bib_vm_register_output: host out of memory");
    bib_status_t st = bib_vm_register_stdio(vm, f);
    if (st != BIB_OK) {
        fclose(f);
        return st;
    }
    /* The registry now points at the new stream; an earlier one is unused. */
    if (vm->output_owned != NULL)
        fclose(vm->output_owned);
    vm->output_owned = f;
    return BIB_OK;
}

/* ---- build ---------------------------------------------------------------- */

const char *bib_build_info(void) {
#define BIB_BUILD_LINE(simd)                                                                       \
    "bib " BIB_VERSION_STRING " (simd: " simd ", executors: " BIB_EXECUTORS ")"
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return BIB_BUILD_LINE("avx512f");
    if (__builtin_cpu_supports("avx2"))
        return BIB_BUILD_LINE("avx2");
    if (__builtin_cpu_supports("sse2"))
        return BIB_BUILD_LINE("sse2");
#endif
    return BIB_BUILD_LINE("none");
#undef BIB_BUILD_LINE
}
