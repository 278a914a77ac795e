/* vm/tensor.c: tensors at run time (see vm/tensor.h for the residency model).
 *
 * Owns the tensor register file, storage and its per-place validity, the
 * executors of a VM (started on first use, shut down with the VM), the named
 * inputs and outputs of the public API, and every tensor opcode: shape
 * inference and checks, output allocation, the choice of executor, the
 * copies that choice needs, and the trap messages. Kernels are the
 * executors' (backends/); this file only builds bib_call_t and dispatches.
 * Also the GPU_* opcodes (the CUDA executor driven by the program, or the CPU
 * executor when there is none), --backend=auto's per-call choice (with the
 * models of vm/placement.c), and bib_tensor_buffer_on for device programs.
 * And the fuel of each opcode's work (charge_fuel): computed from shapes
 * only, before anything runs, so it is the same on every executor.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "profile.h"
#include "tensor.h"
#include "vm.h"

#define BIB_SHAPE_TEXT 64
#define BIB_TENSOR_MAX_BYTES ((uint64_t)1 << 62)

/* ---- small helpers ---------------------------------------------------------- */

static const char *dtype_name(uint32_t dtype) {
    return dtype == BIB_DTYPE_F32 ? "f32" : dtype == BIB_DTYPE_I32 ? "i32" : "?";
}

/* "[3,4]" (no dtype) or "f32[3,4]". */
static const char *shape_text(char *buf, uint32_t dtype, uint32_t rank, const uint32_t *dims) {
    size_t n = 0;
    if (dtype != 0)
        n += (size_t)snprintf(buf, BIB_SHAPE_TEXT, "%s", dtype_name(dtype));
    n += (size_t)snprintf(buf + n, BIB_SHAPE_TEXT - n, "[");
    for (uint32_t i = 0; i < rank && n < BIB_SHAPE_TEXT; i++)
        n += (size_t)snprintf(buf + n, BIB_SHAPE_TEXT - n, "%s%" PRIu32, i ? "," : "", dims[i]);
    if (n < BIB_SHAPE_TEXT)
        snprintf(buf + n, BIB_SHAPE_TEXT - n, "]");
    return buf;
}

static const char *tshape(char *buf, const bib_tensor_t *t) {
    return shape_text(buf, 0, t->rank, t->dims);
}

static const char *tshape_typed(char *buf, const bib_tensor_t *t) {
    return shape_text(buf, t->dtype, t->rank, t->dims);
}

/* Element count, or false when it would exceed BIB_TENSOR_MAX_BYTES / 4. */
static bool count_of(uint32_t rank, const uint32_t *dims, uint64_t *out) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n) || n > BIB_TENSOR_MAX_BYTES / 4)
            return false;
    }
    *out = n;
    return true;
}

static bool same_shape(const bib_tensor_t *t, uint32_t rank, const uint32_t *dims) {
    if (t->rank != rank)
        return false;
    for (uint32_t i = 0; i < rank; i++)
        if (t->dims[i] != dims[i])
            return false;
    return true;
}

static uint32_t last_dim(const bib_tensor_t *t) {
    return t->rank ? t->dims[t->rank - 1] : 1;
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
static const char *reg_text(const bib_vm_t *vm, char *buf, size_t cap, uint32_t reg) {
    const char *name = reg_name(vm, reg);
    if (name != NULL)
        snprintf(buf, cap, "t%" PRIu32 " (%s)", reg, name);
    else
        snprintf(buf, cap, "t%" PRIu32, reg);
    return buf;
}

uint64_t bib_tensor_hash(uint32_t dtype, uint32_t rank, const uint32_t *dims, const void *data,
                         uint64_t bytes) {
    uint64_t h = 0xcbf29ce484222325ull;
    uint8_t word[4];
#define FNV_BYTE(b) (h = (h ^ (uint8_t)(b)) * 0x100000001b3ull)
#define FNV_U32(v)                                                                                 \
    do {                                                                                           \
        bib_write_u32le(word, (v));                                                                \
        for (int k_ = 0; k_ < 4; k_++)                                                             \
            FNV_BYTE(word[k_]);                                                                    \
    } while (0)
    FNV_U32(dtype);
    FNV_U32(rank);
    for (uint32_t i = 0; i < rank; i++)
        FNV_U32(dims[i]);
    /* Elements are stored little-endian, as the hash wants them. */
    const uint8_t *p = data;
    for (uint64_t i = 0; i < bytes; i++)
        FNV_BYTE(p[i]);
#undef FNV_U32
#undef FNV_BYTE
    return h;
}

/* A trap at ip's pc with a formatted cause. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static bib_status_t
trap(bib_vm_t *vm, const bib_dinsn_t *ip, bib_status_t status, const char *format, ...) {
    char cause[700];
    va_list ap;
    va_start(ap, format);
    vsnprintf(cause, sizeof cause, format, ap);
    va_end(ap);
    return bib_vm_trap_at(vm, status, (uint32_t)(ip - vm->program.code), "%s", cause);
}

/* ---- fuel --------------------------------------------------------------------- */

static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Takes the fuel of work elements of tensor work from the run (vm->fuel, which
 * the loop handed over): 1 + floor(work / BIB_FUEL_WORK_UNIT) for the opcode,
 * of which its fetch took the 1. Called once per opcode, after the checks of
 * its operands and before it changes anything: when the fuel left is short,
 * the opcode does not run, its unit goes back (it was not executed) and the
 * run traps at its pc. */
static bib_status_t charge_fuel(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t work) {
    const uint64_t extra = work / BIB_FUEL_WORK_UNIT;
    if (extra == 0)
        return BIB_OK;
    if (extra > vm->fuel.left) {
        vm->fuel.left++;
        return trap(vm, ip, BIB_E_TRAP,
                    "fuel exhausted (%s costs %" PRIu64 " for %" PRIu64
                    " elements of work, %" PRIu64 " left after %" PRIu64 " instructions)",
                    bib_isa_table[ip->op].name, extra + 1, work, vm->fuel.left,
                    vm->fuel.base - vm->fuel.left);
    }
    vm->fuel.left -= extra;
    vm->fuel.base -= extra;
    return BIB_OK;
}

/* ---- executors ------------------------------------------------------------- */

static const char *backend_name(const bib_vm_t *vm) {
    return vm->options.backend != NULL && vm->options.backend[0] != '\0' ? vm->options.backend
                                                                         : "cpu";
}

static bib_executor_config_t executor_config(const bib_vm_t *vm) {
    bib_executor_config_t c;
    c.threads = vm->options.threads;
    c.device = vm->options.device;
    c.validation = vm->options.validation != 0;
    c.timeout_ms = vm->options.device_timeout_ms;
    return c;
}

/* The place of the executor called name, or -1 when this build has none. */
static int place_of(const char *name) {
    for (uint32_t i = 0; i < bib_executor_count() && i < BIB_MAX_PLACES; i++)
        if (strcmp(bib_executor_at(i)->name, name) == 0)
            return (int)i;
    return -1;
}

static const char *place_name(int place) {
    return bib_executor_at((uint32_t)place)->name;
}

/* Starts the executor of place if it is not running yet. A place that failed
 * once is not tried again in this VM; ts->why[place] keeps the reason. */
static bib_status_t start_place(bib_vm_t *vm, int place) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (ts->ex[place] != NULL)
        return BIB_OK;
    if (ts->tried[place])
        return BIB_E_UNAVAILABLE;
    ts->tried[place] = true;
    ts->ops[place] = bib_executor_at((uint32_t)place);
    bib_executor_config_t config = executor_config(vm);
    char *why = ts->why[place];
    why[0] = '\0';
    bib_status_t st = ts->ops[place]->init(&config, &ts->ex[place], why, sizeof ts->why[place]);
    if (st != BIB_OK) {
        ts->ex[place] = NULL;
        if (why[0] == '\0')
            snprintf(why, sizeof ts->why[place], "it failed to start");
        return st == BIB_E_NOMEM ? st : BIB_E_UNAVAILABLE;
    }
    bib_profile_executor_started(vm, place); /* --profile: its device clock, before any kernel */
    return BIB_OK;
}

/* --backend=auto: starts every GPU executor this machine has and measures
 * each (vm/placement.c) with the CPU executor. A GPU executor that runs on
 * the CPU (lavapipe) is shut down again: it is never the fast choice. Having
 * no GPU at all is not an error: everything then runs on the CPU. */
static bib_status_t auto_start(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    bool any = false;
    char why[256];
    for (int p = 1; p < BIB_MAX_PLACES && p < (int)bib_executor_count(); p++) {
        if (start_place(vm, p) != BIB_OK)
            continue;
        if (bib_placement_cpu_device(ts->ops[p], ts->ex[p])) {
            snprintf(ts->why[p], sizeof ts->why[p],
                     "its device is the CPU (%.120s): auto never picks it for speed",
                     ts->ops[p]->describe ? ts->ops[p]->describe(ts->ex[p]) : "");
            ts->ops[p]->shutdown(ts->ex[p]);
            ts->ex[p] = NULL;
            continue;
        }
        bib_status_t st =
            bib_placement_model(ts->ops[p], ts->ex[p], &ts->models[p], NULL, why, sizeof why);
        if (st != BIB_OK) {
            snprintf(ts->why[p], sizeof ts->why[p], "measuring it failed: %.160s", why);
            ts->ops[p]->shutdown(ts->ex[p]);
            ts->ex[p] = NULL;
            continue;
        }
        any = true;
    }
    if (!any)
        return BIB_OK;
    bib_status_t st = start_place(vm, BIB_PLACE_HOST);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "executor 'cpu' is not available: %s", ts->why[BIB_PLACE_HOST]);
    st = bib_placement_model(ts->ops[BIB_PLACE_HOST], ts->ex[BIB_PLACE_HOST],
                             &ts->models[BIB_PLACE_HOST], NULL, why, sizeof why);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "--backend=auto: measuring the cpu executor failed: %s", why);
    return BIB_OK;
}

/* Seconds to make a storage valid at place under the models (0 when it is). */
static double move_cost(const bib_tensor_state_t *ts, const bib_storage_t *s, int place) {
    if (s->valid == 0 || (s->valid & (1u << place)))
        return 0;
    double cost = 0;
    if (!(s->valid & (1u << BIB_PLACE_HOST))) {
        int from = 1;
        while (from < BIB_MAX_PLACES && !(s->valid & (1u << from)))
            from++;
        if (from < BIB_MAX_PLACES && ts->models[from].measured)
            cost += bib_placement_copy_cost(&ts->models[from], s->bytes);
        if (place == BIB_PLACE_HOST)
            return cost;
    }
    return cost + bib_placement_copy_cost(&ts->models[place], s->bytes);
}

/* --backend=auto: the place with the least estimated time for the call,
 * its copies included. The host runs everything, so it is the default. */
static int auto_choose(bib_vm_t *vm, const bib_call_t *call, const bib_storage_t *const *in,
                       int nin) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (!ts->models[BIB_PLACE_HOST].measured)
        return BIB_PLACE_HOST;
    double flops = bib_placement_flops(call);
    int best = BIB_PLACE_HOST;
    double best_cost = INFINITY;
    for (int p = 0; p < BIB_MAX_PLACES; p++) {
        if (!ts->models[p].measured || ts->ex[p] == NULL ||
            (p != BIB_PLACE_HOST && !bib_tensor_place_runs(vm, p, call)))
            continue;
        double cost = bib_placement_run_cost(&ts->models[p], flops);
        for (int i = 0; i < nin; i++)
            cost += move_cost(ts, in[i], p);
        if (cost < best_cost) {
            best_cost = cost;
            best = p;
        }
    }
    return best;
}

/* Checks options.backend and starts what it selects: one executor, or for
 * auto every GPU executor that is faster than the CPU somewhere (measured). */
static bib_status_t resolve_backend(bib_vm_t *vm, bool needed) {
    bib_tensor_state_t *ts = &vm->tensor;
    const char *name = backend_name(vm);
    if (strcmp(name, "cpu") != 0 && strcmp(name, "vulkan") != 0 && strcmp(name, "cuda") != 0 &&
        strcmp(name, "auto") != 0)
        return bib_vm_fail(vm, BIB_E_USAGE,
                           "unknown executor '%s' (choose cpu, vulkan, cuda or auto)", name);
    if (!needed || ts->resolved)
        return BIB_OK;
    if (strcmp(name, "auto") == 0) {
        bib_status_t st = auto_start(vm);
        if (st != BIB_OK)
            return st;
        ts->automatic = true;
        ts->selected = -1;
        ts->resolved = true;
        return BIB_OK;
    }
    int place = place_of(name);
    if (place < 0)
        return bib_vm_fail(vm, BIB_E_UNAVAILABLE,
                           "executor '%s' is not available: this build has no %s executor "
                           "(it has: %s)",
                           name, name, BIB_EXECUTORS);
    bib_status_t st = start_place(vm, place);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "executor '%s' is not available: %s", name, ts->why[place]);
    ts->selected = place;
    ts->resolved = true;
    return BIB_OK;
}

static const char *executor_error(const bib_vm_t *vm, int place) {
    const bib_tensor_state_t *ts = &vm->tensor;
    const char *e = ts->ex[place] != NULL ? ts->ops[place]->error(ts->ex[place]) : NULL;
    return e != NULL && e[0] != '\0' ? e : "no reason given";
}

/* ---- storage ---------------------------------------------------------------- */

static void storage_unref(bib_vm_t *vm, bib_storage_t *s) {
    if (s == NULL || --s->refs > 0)
        return;
    bib_tensor_state_t *ts = &vm->tensor;
    for (int p = 1; p < BIB_MAX_PLACES; p++)
        if (s->buf[p] != NULL && ts->ex[p] != NULL)
            ts->ops[p]->buffer_free(ts->ex[p], s->buf[p]);
    bib_blocks_big_free(&vm->blocks, s->host, s->bytes);
    free(s);
}

/* A new storage of bytes, its host copy charged to the VM's blocks; valid
 * nowhere (zero: zero-filled and valid on the host). On failure the blocks'
 * error says why. */
/* BIB_POISON (debug and sanitize builds): every fresh tensor buffer that no
 * one zeroes starts filled with a signalling NaN (0xFFA5A5A5, also an
 * unlikely i32), so a kernel that leaves part of its output unwritten shows
 * the same odd bits in every test rather than whatever memory held. */
#ifdef BIB_POISON
#define POISON_WORD 0xFFA5A5A5u
static void poison_host(void *p, uint64_t bytes) {
    uint32_t *w = p;
    for (uint64_t i = 0; i < bytes / 4; i++)
        w[i] = POISON_WORD;
}

static void poison_device(bib_vm_t *vm, int place, void *buf, uint64_t bytes) {
    void *tmp = bytes ? malloc((size_t)bytes) : NULL;
    if (tmp == NULL)
        return;
    poison_host(tmp, bytes);
    vm->tensor.ops[place]->upload(vm->tensor.ex[place], buf, 0, tmp, (size_t)bytes);
    free(tmp);
}
#else
static void poison_host(void *p, uint64_t bytes) {
    (void)p, (void)bytes;
}

static void poison_device(bib_vm_t *vm, int place, void *buf, uint64_t bytes) {
    (void)vm, (void)place, (void)buf, (void)bytes;
}
#endif

static bib_status_t storage_new(bib_vm_t *vm, uint64_t bytes, bool zero, bib_storage_t **out) {
    *out = NULL;
    bib_storage_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(vm->blocks.error, sizeof vm->blocks.error, "host out of memory");
        return BIB_E_NOMEM;
    }
    void *host;
    bib_status_t st = bib_blocks_big_alloc(&vm->blocks, bytes, BIB_BLOCK_ALIGN, zero, &host);
    if (st != BIB_OK) {
        free(s);
        return st;
    }
    if (!zero)
        poison_host(host, bytes);
    s->refs = 1;
    s->bytes = bytes;
    s->host = host;
    s->valid = zero ? 1u << BIB_PLACE_HOST : 0;
    *out = s;
    return BIB_OK;
}

/* The buffer of s at place (the host pointer for the host), allocated on
 * first need. On failure why holds the executor's message. */
static bib_status_t storage_buffer(bib_vm_t *vm, bib_storage_t *s, int place, void **buf, char *why,
                                   size_t why_len) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (place == BIB_PLACE_HOST) {
        *buf = s->host;
        return BIB_OK;
    }
    if (s->buf[place] == NULL) {
        bib_status_t st =
            ts->ops[place]->buffer_alloc(ts->ex[place], (size_t)s->bytes, &s->buf[place]);
        if (st != BIB_OK) {
            s->buf[place] = NULL;
            snprintf(why, why_len, "%s", executor_error(vm, place));
            return st;
        }
        poison_device(vm, place, s->buf[place], s->bytes);
    }
    *buf = s->buf[place];
    return BIB_OK;
}

/* One copy between the host and device place `dev`, in the direction down
 * (device to host) or up. */
static bib_status_t storage_copy(bib_vm_t *vm, bib_storage_t *s, int dev, bool down, char *why,
                                 size_t why_len) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_status_t st;
    const uint64_t t0 = bib_profile_clock(vm); /* --profile: copies get rows of their own */
    if (down) {
        st = ts->ops[dev]->download(ts->ex[dev], s->buf[dev], 0, s->host, (size_t)s->bytes);
        ts->stats.downloads++;
        ts->stats.download_bytes += s->bytes;
    } else {
        st = ts->ops[dev]->upload(ts->ex[dev], s->buf[dev], 0, s->host, (size_t)s->bytes);
        ts->stats.uploads++;
        ts->stats.upload_bytes += s->bytes;
    }
    bib_profile_copy(vm, dev, down, s->bytes, t0);
    if (st != BIB_OK) {
        snprintf(why, why_len, "%s", executor_error(vm, dev));
        return st;
    }
    s->valid |= 1u << (down ? BIB_PLACE_HOST : dev);
    return BIB_OK;
}

/* Makes s's copy at place valid, moving the data from where it is valid: one
 * copy from or to the host, or, between two devices, a download then an
 * upload (the host stays valid too). The executor of place is running. On
 * failure why holds the executor's message. */
static bib_status_t storage_make_valid(bib_vm_t *vm, bib_storage_t *s, int place, char *why,
                                       size_t why_len) {
    const uint32_t bit = 1u << place;
    if (s->valid & bit)
        return BIB_OK;
    void *buf;
    bib_status_t st = storage_buffer(vm, s, place, &buf, why, why_len);
    if (st != BIB_OK)
        return st;
    if (s->valid == 0 || s->bytes == 0) {
        /* Nothing written yet (a fresh output): there is nothing to move. */
        s->valid |= bit;
        return BIB_OK;
    }
    if (!(s->valid & (1u << BIB_PLACE_HOST))) {
        int from = 1;
        while (from < BIB_MAX_PLACES && !(s->valid & (1u << from)))
            from++;
        st = storage_copy(vm, s, from, true, why, why_len);
        if (st != BIB_OK || place == BIB_PLACE_HOST)
            return st;
    }
    return storage_copy(vm, s, place, false, why, why_len);
}

/* Brings tensor t to the host for reading. */
static bib_status_t host_read(bib_vm_t *vm, const bib_tensor_t *t, char *why, size_t why_len) {
    return storage_make_valid(vm, t->storage, BIB_PLACE_HOST, why, why_len);
}

/* The executor a tensor is read back from, for messages. */
static const char *holder_name(const bib_tensor_t *t) {
    for (int p = 1; p < BIB_MAX_PLACES; p++)
        if (t->storage != NULL && (t->storage->valid & (1u << p)))
            return place_name(p);
    return "cpu";
}

static void tensor_clear(bib_vm_t *vm, bib_tensor_t *t) {
    storage_unref(vm, t->storage);
    t->storage = NULL;
}

/* ---- life cycle -------------------------------------------------------------- */

void bib_tensor_release(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    for (uint32_t i = 0; i < ts->reg_count; i++)
        tensor_clear(vm, &ts->regs[i]);
    ts->regs = NULL;
    ts->reg_count = 0;
    ts->symbols = NULL;
}

static void free_inputs(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (ts->inputs != NULL && vm->module != NULL)
        for (uint32_t i = 0; i < vm->module->tensor_count; i++)
            free(ts->inputs[i].data);
    free(ts->inputs);
    ts->inputs = NULL;
}

void bib_tensor_unload(bib_vm_t *vm) {
    bib_tensor_release(vm);
    free_inputs(vm);
}

bib_status_t bib_tensor_load(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    const bib_module_t *m = vm->module;
    /* An unknown executor name is a mistake in the options: say so at load,
       before a missing input or anything else about the run. */
    bib_status_t st = resolve_backend(vm, false);
    if (st != BIB_OK || m->tensor_count == 0)
        return st;
    ts->inputs = calloc(m->tensor_count, sizeof *ts->inputs);
    if (ts->inputs == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory for %" PRIu32 " tensor inputs",
                           m->tensor_count);
    return BIB_OK;
}

void bib_tensor_destroy(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_tensor_unload(vm);
    for (int p = BIB_MAX_PLACES - 1; p >= 0; p--) {
        if (ts->ex[p] != NULL)
            ts->ops[p]->shutdown(ts->ex[p]);
        ts->ex[p] = NULL;
        ts->ops[p] = NULL;
        ts->tried[p] = false;
    }
    ts->resolved = false;
}

/* ---- declarations: named inputs and outputs ---------------------------------- */

/* "f32[n,96]" with symbol names and '?' as declared. */
static void decl_text(const bib_module_t *m, const bib_tensor_decl_t *d, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "%s[", d->dtype ? dtype_name(d->dtype) : "");
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
        snprintf(msg + n, cap - n, ", given %s", shape_text(got, dtype, rank, dims));
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
    if (rank > BIB_MAX_RANK || (rank > 0 && dims == NULL))
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': rank %" PRIu32 " is more than %d", name,
                           rank, BIB_MAX_RANK);
    uint64_t count;
    if (!count_of(rank, dims, &count))
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': the shape is too large", name);
    for (uint32_t i = 0; i < rank; i++)
        if (dims[i] > BIB_MAX_TENSOR_DIM)
            return bib_vm_fail(vm, BIB_E_USAGE,
                               "input '%s': dimension %" PRIu32 " is larger than 2^31-1", name,
                               dims[i]);
    if (count > 0 && no_data)
        return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': data is NULL", name);

    /* Symbolic sizes as the other inputs already given fix them. */
    int64_t *symbols = symbols_new(m);
    if (symbols == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory checking input '%s'", name);
    bib_input_t *inputs = vm->tensor.inputs;
    char msg[400];
    for (uint32_t i = 0; i < m->tensor_count; i++)
        if ((int)i != di && inputs[i].set)
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
            held += inputs[i].bytes;
    if (bytes > vm->options.max_memory || held > vm->options.max_memory - bytes)
        return bib_vm_fail(vm, BIB_E_NOMEM,
                           "input '%s': memory cap reached: %" PRIu64 " bytes, with %" PRIu64
                           " for the other inputs, cap %" PRIu64 " bytes (max_memory)",
                           name, bytes, held, vm->options.max_memory);
    void *copy = malloc(bytes ? (size_t)bytes : 1);
    if (copy == NULL)
        return bib_vm_fail(vm, BIB_E_NOMEM, "input '%s': host out of memory for %" PRIu64 " bytes",
                           name, bytes);
    if (fill(ctx, copy, (size_t)bytes) != 0) {
        free(copy);
        return bib_vm_fail(vm, BIB_E_IO, "input '%s': its data could not be read", name);
    }
    bib_input_t *in = &inputs[di];
    free(in->data);
    in->set = true;
    in->dtype = dtype;
    in->rank = rank;
    memset(in->dims, 0, sizeof in->dims);
    for (uint32_t i = 0; i < rank; i++)
        in->dims[i] = dims[i];
    in->data = copy;
    in->bytes = bytes;
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
    bib_status_t st = host_read(vm, t, why, sizeof why);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "output '%s': reading it from the %s executor: %s", name,
                           holder_name(t), why);
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

/* A storage holding a copy of bytes, valid on the host, bound to register reg. */
static bib_status_t bind_copy(bib_vm_t *vm, const char *what, const char *name, uint32_t reg,
                              uint32_t dtype, uint32_t rank, const uint32_t *dims, const void *data,
                              uint64_t bytes) {
    bib_tensor_t *t = &vm->tensor.regs[reg];
    bib_storage_t *s;
    bib_status_t st = storage_new(vm, bytes, false, &s);
    if (st != BIB_OK) {
        char sh[BIB_SHAPE_TEXT];
        return bib_vm_fail(vm, st, "%s '%s' (t%" PRIu32 ", %s, %" PRIu64 " bytes): %s", what, name,
                           reg, shape_text(sh, dtype, rank, dims), bytes, vm->blocks.error);
    }
    if (bytes > 0)
        memcpy(s->host, data, (size_t)bytes);
    s->valid = 1u << BIB_PLACE_HOST;
    tensor_clear(vm, t);
    t->storage = s;
    t->dtype = dtype;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    for (uint32_t i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    t->count = bytes / 4;
    return BIB_OK;
}

bib_status_t bib_tensor_run_begin(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    const bib_module_t *m = vm->module;
    memset(&ts->stats, 0, sizeof ts->stats);
    ts->last_place = NULL;
    bib_status_t st = resolve_backend(vm, m->tensor_regs > 0);
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

    char msg[400];
    for (uint32_t i = 0; i < m->tensor_count; i++) {
        const bib_tensor_decl_t *d = &m->tensors[i];
        if (d->flags & BIB_TENSOR_INPUT) {
            const bib_input_t *in = &ts->inputs[i];
            if (!in->set)
                return bib_vm_fail(vm, BIB_E_USAGE, "input '%s' was not given", d->name);
            if (!decl_matches(m, d, in->dtype, in->rank, in->dims, ts->symbols, msg, sizeof msg))
                return bib_vm_fail(vm, BIB_E_USAGE, "input '%s': %s", d->name, msg);
            st = bind_copy(vm, "input", d->name, d->reg, in->dtype, in->rank, in->dims, in->data,
                           in->bytes);
        } else if (d->flags & BIB_TENSOR_CONST) {
            uint32_t dims[BIB_MAX_RANK] = {0};
            for (uint32_t k = 0; k < d->rank && k < BIB_MAX_RANK; k++)
                dims[k] = (uint32_t)d->dims[k];
            st = bind_copy(vm, "constant", d->name, d->reg, d->dtype, d->rank, dims, d->init,
                           d->init_size);
        }
        if (st != BIB_OK)
            return st;
    }
    return BIB_OK;
}

/* ---- the opcodes ---------------------------------------------------------------- */

/* What one kernel call needs, before residency is decided. */
typedef struct kspec {
    bib_kernel_t kernel;
    uint32_t sub;
    uint32_t in_regs[3];
    int nin;
    float f0;
    int64_t i0, i1;
    bool elementwise;  /* out may alias an input without a temporary */
    bool attention_2d; /* rank-2 q/k/v: run as [S,1,D] */
    bool forced;       /* run on place, whatever the backend (GPU_* opcodes) */
    int place;
    bool charged; /* the opcode's fuel is already taken (GPU_ALLOC's zeroes) */
} kspec_t;

/* The work of a kernel call in elements (spec/cli.md, --fuel), out_count the
 * result's: multiply-adds and the result for MATMUL ([M,K]x[K,N]: M*N*(K+1))
 * and ATTENTION (q [S,H,D], k and v [T,H,D]: QK^T and PV, then the result,
 * S*H*D*(2T+1)); for GATHER the indices, the rows they pick and the result;
 * otherwise every input's elements and the result's. */
static uint64_t kernel_work(const bib_tensor_state_t *ts, const kspec_t *k, uint64_t out_count) {
    const bib_tensor_t *a = k->nin > 0 ? &ts->regs[k->in_regs[0]] : NULL;
    switch (k->kernel) {
    case BIB_KERNEL_MATMUL:
        return sat_mul(out_count, (uint64_t)a->dims[1] + 1);
    case BIB_KERNEL_ATTENTION:
        return sat_mul(out_count, 2 * (uint64_t)ts->regs[k->in_regs[1]].dims[0] + 1);
    case BIB_KERNEL_GATHER:
        return sat_add(ts->regs[k->in_regs[1]].count, sat_mul(out_count, 2));
    default: {
        uint64_t work = out_count;
        for (int i = 0; i < k->nin; i++)
            work = sat_add(work, ts->regs[k->in_regs[i]].count);
        return work;
    }
    }
}

static bib_view_t view_of(const bib_tensor_t *t, bool as_heads) {
    bib_view_t v;
    memset(&v, 0, sizeof v);
    v.dtype = t->dtype;
    v.rank = t->rank;
    for (uint32_t i = 0; i < t->rank; i++)
        v.dims[i] = t->dims[i];
    if (as_heads) {
        v.rank = 3;
        v.dims[0] = t->dims[0];
        v.dims[1] = 1;
        v.dims[2] = t->dims[1];
    }
    return v;
}

/* The tensor at operand reg, which must be live. */
static bib_status_t need_live(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                              bib_tensor_t **out) {
    bib_tensor_t *t = &vm->tensor.regs[reg];
    *out = t;
    if (t->storage != NULL)
        return BIB_OK;
    char rt[300];
    reg_text(vm, rt, sizeof rt, reg);
    if (ip->op == BIB_OP_FREE && t->freed_at != 0)
        return trap(vm, ip, BIB_E_TRAP, "double FREE: %s was already freed at pc %" PRIu32, rt,
                    t->freed_at - 1);
    if (t->freed_at != 0)
        return trap(vm, ip, BIB_E_TRAP, "%s is not live: used after it was freed at pc %" PRIu32,
                    rt, t->freed_at - 1);
    return trap(vm, ip, BIB_E_TRAP, "%s is not live: nothing has been written to it", rt);
}

#define LIVE(var, reg)                                                                             \
    bib_tensor_t *var;                                                                             \
    do {                                                                                           \
        bib_status_t st_ = need_live(vm, ip, (reg), &var);                                         \
        if (st_ != BIB_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

static bib_status_t need_f32(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                             const bib_tensor_t *t) {
    if (t->dtype == BIB_DTYPE_F32)
        return BIB_OK;
    char rt[300], sh[BIB_SHAPE_TEXT];
    return trap(vm, ip, BIB_E_TRAP, "%s is %s; %s needs f32", reg_text(vm, rt, sizeof rt, reg),
                tshape_typed(sh, t), bib_isa_table[ip->op].name);
}

static bib_status_t need_rank1(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                               const bib_tensor_t *t) {
    if (t->rank >= 1)
        return BIB_OK;
    char rt[300];
    return trap(vm, ip, BIB_E_TRAP, "%s is a scalar []; %s works along a last axis",
                reg_text(vm, rt, sizeof rt, reg), bib_isa_table[ip->op].name);
}

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        bib_status_t st_ = (expr);                                                                 \
        if (st_ != BIB_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

bool bib_tensor_place_runs(bib_vm_t *vm, int place, const bib_call_t *call) {
    bib_tensor_state_t *ts = &vm->tensor;
    return ts->ex[place] != NULL && ts->ops[place]->kernels[call->kernel] != NULL &&
           ts->ops[place]->supports(ts->ex[place], call);
}

/* Chooses the place for a call: the selected executor when it runs the call,
 * else the host; under auto, the cheapest place by the measured models. */
static int choose_place(bib_vm_t *vm, const bib_call_t *call, const bib_tensor_t *const *in,
                        int nin) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (ts->automatic) {
        const bib_storage_t *st[3] = {NULL, NULL, NULL};
        for (int i = 0; i < nin; i++)
            st[i] = in[i]->storage;
        return auto_choose(vm, call, st, nin);
    }
    if (ts->selected <= BIB_PLACE_HOST)
        return BIB_PLACE_HOST;
    if (bib_tensor_place_runs(vm, ts->selected, call))
        return ts->selected;
    ts->stats.fallbacks++;
    return BIB_PLACE_HOST;
}

/* Runs a kernel writing register out_reg with the given result dtype and shape.
 * Allocates the output when the register is empty, checks it otherwise. */
static bib_status_t run_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t out_reg,
                               uint32_t dtype, uint32_t rank, const uint32_t *dims,
                               const kspec_t *k) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_tensor_t *out = &ts->regs[out_reg];
    char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT], why[300];
    bool fresh = false;
    uint64_t count = out->count;
    if (out->storage != NULL) {
        if (out->dtype != dtype || !same_shape(out, rank, dims))
            return trap(vm, ip, BIB_E_TRAP,
                        "shape mismatch: %s holds %s but the result is %s (a live destination "
                        "must have the result's shape)",
                        reg_text(vm, rt, sizeof rt, out_reg), tshape_typed(sh, out),
                        shape_text(sh2, dtype, rank, dims));
    } else if (!count_of(rank, dims, &count)) {
        return trap(vm, ip, BIB_E_NOMEM, "out of memory: %s would be %s, over 2^62 bytes",
                    reg_text(vm, rt, sizeof rt, out_reg), shape_text(sh, dtype, rank, dims));
    }
    if (!k->charged)
        CHECK(charge_fuel(vm, ip, kernel_work(ts, k, count)));
    if (out->storage == NULL) {
        bib_storage_t *s;
        bib_status_t st = storage_new(vm, count * 4, false, &s);
        if (st != BIB_OK)
            return trap(vm, ip, st, "out of memory allocating %s (%s, %" PRIu64 " bytes): %s",
                        reg_text(vm, rt, sizeof rt, out_reg), shape_text(sh, dtype, rank, dims),
                        count * 4, vm->blocks.error);
        out->storage = s;
        out->dtype = dtype;
        out->rank = rank;
        memset(out->dims, 0, sizeof out->dims);
        for (uint32_t i = 0; i < rank; i++)
            out->dims[i] = dims[i];
        out->count = count;
        out->freed_at = 0;
        fresh = true;
    }

    /* The call with placeholder buffers decides the place. */
    static const uint8_t placeholder = 0;
    bib_call_t call;
    memset(&call, 0, sizeof call);
    call.kernel = k->kernel;
    call.sub = k->sub;
    call.f[0] = k->f0;
    call.i[0] = k->i0;
    call.i[1] = k->i1;
    call.out = view_of(out, k->attention_2d);
    call.out.buf = (void *)&placeholder;
    const bib_tensor_t *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < k->nin; i++) {
        in[i] = &ts->regs[k->in_regs[i]];
        call.in[i] = view_of(in[i], k->attention_2d);
        call.in[i].buf = (void *)&placeholder;
    }
    int place = k->forced ? k->place : choose_place(vm, &call, in, k->nin);
    bib_status_t st = start_place(vm, place);
    if (st != BIB_OK) {
        if (fresh)
            tensor_clear(vm, out);
        return trap(vm, ip, BIB_E_UNAVAILABLE, "executor '%s' is not available: %s",
                    place_name(place), ts->why[place]);
    }
    const bib_executor_ops_t *ops = ts->ops[place];
    bib_executor_t *ex = ts->ex[place];
    if ((place == BIB_PLACE_HOST || k->forced) && !bib_tensor_place_runs(vm, place, &call)) {
        if (fresh)
            tensor_clear(vm, out);
        return trap(vm, ip, BIB_E_TRAP, "the %s executor does not run %s on these shapes",
                    ops->name, bib_isa_table[ip->op].name);
    }

    bool alias = false;
    for (int i = 0; i < k->nin; i++) {
        st = storage_make_valid(vm, in[i]->storage, place, why, sizeof why);
        if (st != BIB_OK) {
            if (fresh)
                tensor_clear(vm, out);
            return trap(vm, ip, bib_trap_status(st), "moving %s to the %s executor: %s",
                        reg_text(vm, rt, sizeof rt, k->in_regs[i]), ops->name, why);
        }
        call.in[i].buf =
            place == BIB_PLACE_HOST ? (void *)in[i]->storage->host : in[i]->storage->buf[place];
        if (in[i]->storage == out->storage && !k->elementwise)
            alias = true;
    }

    /* The output: its buffer at place, or a temporary when an input shares
       its storage and the kernel is not elementwise. */
    bib_storage_t *os = out->storage;
    void *temp = NULL;
    if (alias) {
        if (place == BIB_PLACE_HOST) {
            st = bib_blocks_big_alloc(&vm->blocks, os->bytes, BIB_BLOCK_ALIGN, 0, &temp);
            if (st != BIB_OK)
                snprintf(why, sizeof why, "%s", vm->blocks.error);
            else
                poison_host(temp, os->bytes);
        } else {
            st = ops->buffer_alloc(ex, (size_t)os->bytes, &temp);
            if (st != BIB_OK)
                snprintf(why, sizeof why, "%s", executor_error(vm, place));
            else
                poison_device(vm, place, temp, os->bytes);
        }
        if (st != BIB_OK)
            return trap(vm, ip, BIB_E_NOMEM,
                        "out of memory for a temporary of %" PRIu64 " bytes (%s is also an "
                        "input): %s",
                        os->bytes, reg_text(vm, rt, sizeof rt, out_reg), why);
        call.out.buf = temp;
    } else if (place == BIB_PLACE_HOST) {
        call.out.buf = os->host;
    } else {
        st = storage_buffer(vm, os, place, &call.out.buf, why, sizeof why);
        if (st != BIB_OK) {
            if (fresh)
                tensor_clear(vm, out);
            return trap(vm, ip, BIB_E_NOMEM, "out of %s memory for %s (%" PRIu64 " bytes): %s",
                        ops->name, reg_text(vm, rt, sizeof rt, out_reg), os->bytes, why);
        }
    }

    st = ops->kernels[k->kernel](ex, &call);
    ts->stats.kernels[place == BIB_PLACE_HOST ? BIB_STAT_HOST : BIB_STAT_DEVICE]++;
    ts->stats.place_kernels[place]++;
    ts->last_place = ops->name;
    if (st != BIB_OK) {
        snprintf(why, sizeof why, "%s", executor_error(vm, place));
        if (temp != NULL) {
            if (place == BIB_PLACE_HOST)
                bib_blocks_big_free(&vm->blocks, temp, os->bytes);
            else
                ops->buffer_free(ex, temp);
        }
        if (fresh)
            tensor_clear(vm, out);
        return trap(vm, ip, bib_trap_status(st), "%s", why);
    }
    if (temp != NULL) {
        if (place == BIB_PLACE_HOST) {
            bib_blocks_big_free(&vm->blocks, os->host, os->bytes);
            os->host = temp;
        } else {
            ops->buffer_free(ex, os->buf[place]);
            os->buf[place] = temp;
        }
    }
    os->valid = 1u << place;
    return BIB_OK;
}

/* Dimensions r[first..first+n) as tensor dims: each 0..2^31-1. A 0 makes an
 * empty tensor, as an input with a 0 in a '?' dimension does; every kernel
 * defines its result on one (spec/numerics.md, "Empty tensors"). */
static bib_status_t dims_from_regs(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                   uint32_t first, uint32_t n, uint32_t *dims) {
    if (n > BIB_MAX_RANK)
        return trap(vm, ip, BIB_E_TRAP, "%" PRIu32 " dimensions, more than %d", n, BIB_MAX_RANK);
    for (uint32_t i = 0; i < n; i++) {
        int64_t v = (int64_t)R[first + i];
        if (v < 0 || v > BIB_MAX_TENSOR_DIM)
            return trap(vm, ip, BIB_E_TRAP,
                        "dimension %" PRIu32 " (r%" PRIu32 " = %" PRId64
                        ") is outside 0..2147483647",
                        i, first + i, v);
        dims[i] = (uint32_t)v;
    }
    return BIB_OK;
}

static bib_status_t op_alloc(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    bib_tensor_t *t = &vm->tensor.regs[ip->a];
    char rt[300], sh[BIB_SHAPE_TEXT];
    if (t->storage != NULL)
        return trap(vm, ip, BIB_E_TRAP, "%s is already live (%s): FREE it before ALLOC",
                    reg_text(vm, rt, sizeof rt, ip->a), tshape_typed(sh, t));
    if (ip->b != BIB_DTYPE_F32 && ip->b != BIB_DTYPE_I32)
        return trap(vm, ip, BIB_E_TRAP, "dtype %" PRIu32 " is neither f32 (1) nor i32 (2)", ip->b);
    uint32_t dims[BIB_MAX_RANK] = {0};
    CHECK(dims_from_regs(vm, ip, R, ip->c, ip->d, dims));
    uint64_t count;
    if (!count_of(ip->d, dims, &count))
        return trap(vm, ip, BIB_E_NOMEM, "out of memory: %s would be %s, over 2^62 bytes",
                    reg_text(vm, rt, sizeof rt, ip->a), shape_text(sh, ip->b, ip->d, dims));
    /* The zeroes written. */
    CHECK(charge_fuel(vm, ip, count));
    bib_storage_t *s;
    bib_status_t st = storage_new(vm, count * 4, true, &s);
    if (st != BIB_OK)
        return trap(vm, ip, st, "out of memory allocating %s (%s, %" PRIu64 " bytes): %s",
                    reg_text(vm, rt, sizeof rt, ip->a), shape_text(sh, ip->b, ip->d, dims),
                    count * 4, vm->blocks.error);
    t->storage = s;
    t->dtype = ip->b;
    t->rank = ip->d;
    memcpy(t->dims, dims, sizeof t->dims);
    t->count = count;
    t->freed_at = 0;
    return BIB_OK;
}

static bib_status_t op_reshape(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    LIVE(src, ip->b);
    uint32_t dims[BIB_MAX_RANK] = {0};
    CHECK(dims_from_regs(vm, ip, R, ip->c, ip->d, dims));
    uint64_t count;
    char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    if (!count_of(ip->d, dims, &count) || count != src->count)
        return trap(vm, ip, BIB_E_TRAP,
                    "shape mismatch: %s is %s (%" PRIu64 " elements), the new shape %s has %s",
                    reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, src), src->count,
                    shape_text(sh2, 0, ip->d, dims),
                    count_of(ip->d, dims, &count) ? "a different count" : "too many");
    bib_tensor_t *dst = &vm->tensor.regs[ip->a];
    if (dst->storage != NULL && (dst->dtype != src->dtype || !same_shape(dst, ip->d, dims)))
        return trap(vm, ip, BIB_E_TRAP,
                    "shape mismatch: %s holds %s but the result is %s (a live destination "
                    "must have the result's shape)",
                    reg_text(vm, rt, sizeof rt, ip->a), tshape_typed(sh, dst),
                    shape_text(sh2, src->dtype, ip->d, dims));
    bib_storage_t *s = src->storage;
    s->refs++;
    uint32_t dtype = src->dtype;
    tensor_clear(vm, dst);
    dst->storage = s;
    dst->dtype = dtype;
    dst->rank = ip->d;
    memcpy(dst->dims, dims, sizeof dst->dims);
    dst->count = count;
    dst->freed_at = 0;
    vm->tensor.last_place = "host";
    return BIB_OK;
}

/* A host-side element access: the flat index r[idx_reg] must be inside t. */
static bib_status_t element_index(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t treg,
                                  const bib_tensor_t *t, uint64_t index) {
    if (index < t->count)
        return BIB_OK;
    char rt[300], sh[BIB_SHAPE_TEXT];
    return trap(vm, ip, BIB_E_TRAP, "index %" PRId64 " is outside %s %s (%" PRIu64 " elements)",
                (int64_t)index, reg_text(vm, rt, sizeof rt, treg), tshape_typed(sh, t), t->count);
}

static bib_status_t to_host(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                            const bib_tensor_t *t) {
    char why[300], rt[300];
    const char *from = holder_name(t);
    bib_status_t st = host_read(vm, t, why, sizeof why);
    if (st != BIB_OK)
        return trap(vm, ip, bib_trap_status(st), "reading %s back from the %s executor: %s",
                    reg_text(vm, rt, sizeof rt, reg), from, why);
    vm->tensor.last_place = "host";
    return BIB_OK;
}

static double u2d(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t d2u(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* ---- GPU_* opcodes: the CUDA executor, driven by the program --------------------- */

static bib_status_t op_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                              int forced_place);

/* One warning per process: a host running many VMs (bib test runs each case
 * in its own) learns it once, not once per VM. */
static atomic_flag gpu_fallback_warned = ATOMIC_FLAG_INIT;

/* The place GPU_* opcodes run on: CUDA's, started on first use; without a
 * CUDA device the host (the CPU executor gives the same bits), with one
 * warning per process, or a BIB_E_UNAVAILABLE trap under options.strict_device. */
static bib_status_t gpu_place(bib_vm_t *vm, const bib_dinsn_t *ip, int *out) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (!ts->gpu_resolved) {
        int p = place_of("cuda");
        if (p >= 0 && start_place(vm, p) == BIB_OK) {
            ts->gpu_place = p;
        } else {
            const char *why = p < 0 ? "this build has no CUDA executor" : ts->why[p];
            if (vm->options.strict_device)
                return trap(vm, ip, BIB_E_UNAVAILABLE,
                            "no CUDA device (%s); --strict-device forbids running GPU_* "
                            "opcodes on the CPU",
                            why);
            if (!atomic_flag_test_and_set(&gpu_fallback_warned))
                fprintf(stderr, "bib: no CUDA device (%s); GPU_* opcodes run on the CPU\n", why);
            ts->gpu_place = BIB_PLACE_HOST;
        }
        ts->gpu_resolved = true;
    }
    *out = ts->gpu_place;
    return BIB_OK;
}

static bib_status_t op_gpu(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    bib_tensor_state_t *ts = &vm->tensor;
    int place = BIB_PLACE_HOST;
    CHECK(gpu_place(vm, ip, &place));
    char why[300], rt[300];
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_GPU_INIT:
        ts->last_place = place_name(place);
        return BIB_OK;
    case BIB_OP_GPU_ALLOC: {
        CHECK(op_alloc(vm, ip, R));
        ts->last_place = place_name(place);
        if (place == BIB_PLACE_HOST)
            return BIB_OK;
        /* Zeroes written on the device: no copy of the host's zeroes. */
        bib_tensor_t *t = &ts->regs[ip->a];
        kspec_t k;
        memset(&k, 0, sizeof k);
        k.kernel = BIB_KERNEL_FILL;
        k.elementwise = true;
        k.forced = true;
        k.place = place;
        k.charged = true;
        uint32_t dims[BIB_MAX_RANK];
        memcpy(dims, t->dims, sizeof dims);
        return run_kernel(vm, ip, ip->a, t->dtype, t->rank, dims, &k);
    }
    case BIB_OP_GPU_UPLOAD: {
        LIVE(t, ip->a);
        /* A copy's reads and writes, whether or not one is needed. */
        CHECK(charge_fuel(vm, ip, sat_mul(t->count, 2)));
        ts->last_place = place_name(place);
        bib_status_t st = start_place(vm, place);
        if (st == BIB_OK)
            st = storage_make_valid(vm, t->storage, place, why, sizeof why);
        else
            snprintf(why, sizeof why, "%s", ts->why[place]);
        if (st != BIB_OK)
            return trap(vm, ip, bib_trap_status(st), "moving %s to the %s executor: %s",
                        reg_text(vm, rt, sizeof rt, ip->a), place_name(place), why);
        return BIB_OK;
    }
    case BIB_OP_GPU_DOWNLOAD: {
        LIVE(t, ip->a);
        CHECK(charge_fuel(vm, ip, sat_mul(t->count, 2)));
        return to_host(vm, ip, ip->a, t);
    }
    case BIB_OP_GPU_SYNC: {
        ts->last_place = place_name(place);
        if (place == BIB_PLACE_HOST || ts->ex[place] == NULL)
            return BIB_OK;
        bib_status_t st = ts->ops[place]->synchronize(ts->ex[place]);
        if (st != BIB_OK)
            return trap(vm, ip, bib_trap_status(st), "waiting for the %s executor: %s",
                        place_name(place), executor_error(vm, place));
        return BIB_OK;
    }
    case BIB_OP_GPU_MATMUL:
    case BIB_OP_GPU_ATTENTION:
    case BIB_OP_GPU_ATTENTION_CAUSAL:
        return op_kernel(vm, ip, R, place);
    default:
        return trap(vm, ip, BIB_E_TRAP, "opcode %s is not implemented in this build",
                    bib_isa_table[ip->op].name);
    }
}

/* Shape checks and the call for the kernels of family 0x0003, and for the
 * GPU_* kernels (forced_place >= 0: run there whatever the backend). */
static bib_status_t op_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                              int forced_place) {
    kspec_t k;
    memset(&k, 0, sizeof k);
    uint32_t dims[BIB_MAX_RANK] = {0};
    uint32_t rank = 0, dtype = BIB_DTYPE_F32;
    char rt[300], rt2[300], rt3[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT], sh3[BIB_SHAPE_TEXT];
    const bib_opcode_t op = ip->op == BIB_OP_GPU_MATMUL             ? BIB_OP_MATMUL
                            : ip->op == BIB_OP_GPU_ATTENTION        ? BIB_OP_ATTENTION
                            : ip->op == BIB_OP_GPU_ATTENTION_CAUSAL ? BIB_OP_ATTENTION_CAUSAL
                                                                    : (bib_opcode_t)ip->op;
    if (forced_place >= 0) {
        k.forced = true;
        k.place = forced_place;
    }

    switch (op) {
    case BIB_OP_MATMUL:
    case BIB_OP_LINEAR:
    case BIB_OP_LINEAR_RELU:
    case BIB_OP_LINEAR_GELU: {
        LIVE(a, ip->b);
        LIVE(b, ip->c);
        CHECK(need_f32(vm, ip, ip->b, a));
        CHECK(need_f32(vm, ip, ip->c, b));
        if (a->rank != 2 || b->rank != 2)
            return trap(vm, ip, BIB_E_TRAP, "%s needs rank-2 tensors: %s is %s, %s is %s",
                        bib_isa_table[op].name, reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, a),
                        reg_text(vm, rt2, sizeof rt2, ip->c), tshape(sh2, b));
        if (a->dims[1] != b->dims[0])
            return trap(vm, ip, BIB_E_TRAP, "inner dimensions differ: %s is %s, %s is %s",
                        reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, a),
                        reg_text(vm, rt2, sizeof rt2, ip->c), tshape(sh2, b));
        k.kernel = BIB_KERNEL_MATMUL;
        k.in_regs[0] = ip->b;
        k.in_regs[1] = ip->c;
        k.nin = 2;
        k.sub = BIB_ACT_NONE;
        if (op != BIB_OP_MATMUL) {
            LIVE(bias, ip->d);
            CHECK(need_f32(vm, ip, ip->d, bias));
            if (bias->count != b->dims[1] || last_dim(bias) != b->dims[1])
                return trap(vm, ip, BIB_E_TRAP,
                            "bias %s is %s; it must be a row of %" PRIu32 " (%s is %s)",
                            reg_text(vm, rt, sizeof rt, ip->d), tshape(sh, bias), b->dims[1],
                            reg_text(vm, rt2, sizeof rt2, ip->c), tshape(sh2, b));
            k.in_regs[2] = ip->d;
            k.nin = 3;
            k.sub = op == BIB_OP_LINEAR_RELU   ? BIB_ACT_RELU
                    : op == BIB_OP_LINEAR_GELU ? BIB_ACT_GELU
                                               : BIB_ACT_NONE;
        }
        rank = 2;
        dims[0] = a->dims[0];
        dims[1] = b->dims[1];
        break;
    }
    case BIB_OP_TRANSPOSE: {
        LIVE(a, ip->b);
        if (a->rank < 2)
            return trap(vm, ip, BIB_E_TRAP, "TRANSPOSE needs rank 2 or more: %s is %s",
                        reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, a));
        rank = a->rank;
        memcpy(dims, a->dims, sizeof dims);
        dims[rank - 2] = a->dims[rank - 1];
        dims[rank - 1] = a->dims[rank - 2];
        dtype = a->dtype;
        k.kernel = BIB_KERNEL_TRANSPOSE;
        k.in_regs[0] = ip->b;
        k.nin = 1;
        break;
    }
    case BIB_OP_SOFTMAX:
    case BIB_OP_RELU:
    case BIB_OP_SIGMOID:
    case BIB_OP_TANH:
    case BIB_OP_GELU:
    case BIB_OP_EXP:
    case BIB_OP_SCALE:
    case BIB_OP_COPY: {
        LIVE(a, ip->b);
        if (op != BIB_OP_COPY)
            CHECK(need_f32(vm, ip, ip->b, a));
        rank = a->rank;
        memcpy(dims, a->dims, sizeof dims);
        dtype = a->dtype;
        k.in_regs[0] = ip->b;
        k.nin = 1;
        k.elementwise = true;
        if (op == BIB_OP_SOFTMAX) {
            CHECK(need_rank1(vm, ip, ip->b, a));
            k.kernel = BIB_KERNEL_SOFTMAX;
            k.elementwise = false;
        } else if (op == BIB_OP_SCALE) {
            k.kernel = BIB_KERNEL_SCALE;
            k.f0 = (float)u2d(R[ip->c]);
        } else if (op == BIB_OP_COPY) {
            k.kernel = BIB_KERNEL_COPY;
        } else {
            k.kernel = BIB_KERNEL_UNARY;
            k.sub = op == BIB_OP_RELU      ? BIB_UNARY_RELU
                    : op == BIB_OP_SIGMOID ? BIB_UNARY_SIGMOID
                    : op == BIB_OP_TANH    ? BIB_UNARY_TANH
                    : op == BIB_OP_GELU    ? BIB_UNARY_GELU
                                           : BIB_UNARY_EXP;
        }
        break;
    }
    case BIB_OP_TADD:
    case BIB_OP_TSUB:
    case BIB_OP_TMUL:
    case BIB_OP_TDIV: {
        LIVE(a, ip->b);
        LIVE(b, ip->c);
        CHECK(need_f32(vm, ip, ip->b, a));
        CHECK(need_f32(vm, ip, ip->c, b));
        bool row = b->count == last_dim(a) && last_dim(b) == last_dim(a);
        if (!same_shape(a, b->rank, b->dims) && b->count != 1 && !row)
            return trap(vm, ip, BIB_E_TRAP,
                        "shape mismatch: %s is %s, %s is %s; the second operand must have the "
                        "first's shape, be a row of %" PRIu32 ", or have one element",
                        reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, a),
                        reg_text(vm, rt2, sizeof rt2, ip->c), tshape(sh2, b), last_dim(a));
        rank = a->rank;
        memcpy(dims, a->dims, sizeof dims);
        k.kernel = BIB_KERNEL_BINARY;
        k.sub = op == BIB_OP_TADD   ? BIB_BINARY_ADD
                : op == BIB_OP_TSUB ? BIB_BINARY_SUB
                : op == BIB_OP_TMUL ? BIB_BINARY_MUL
                                    : BIB_BINARY_DIV;
        k.in_regs[0] = ip->b;
        k.in_regs[1] = ip->c;
        k.nin = 2;
        /* Same storage means the same element count: elementwise either way. */
        k.elementwise = true;
        break;
    }
    case BIB_OP_SUM:
    case BIB_OP_MAX:
    case BIB_OP_MEAN:
    case BIB_OP_ARGMAX: {
        LIVE(a, ip->b);
        CHECK(need_f32(vm, ip, ip->b, a));
        CHECK(need_rank1(vm, ip, ip->b, a));
        rank = a->rank - 1;
        memcpy(dims, a->dims, sizeof dims);
        dims[rank] = 0;
        k.in_regs[0] = ip->b;
        k.nin = 1;
        if (op == BIB_OP_ARGMAX) {
            /* An empty row has no index to give: no value is right, so it
             * traps (as numpy's argmax raises) rather than inventing one. */
            if (last_dim(a) == 0)
                return trap(vm, ip, BIB_E_TRAP,
                            "ARGMAX over an empty last axis: %s is %s; an empty row has no "
                            "index of a maximum",
                            reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, a));
            k.kernel = BIB_KERNEL_ARGMAX;
            dtype = BIB_DTYPE_I32;
        } else {
            k.kernel = BIB_KERNEL_REDUCE;
            k.sub = op == BIB_OP_SUM   ? BIB_REDUCE_SUM
                    : op == BIB_OP_MAX ? BIB_REDUCE_MAX
                                       : BIB_REDUCE_MEAN;
        }
        break;
    }
    case BIB_OP_LAYERNORM:
    case BIB_OP_RMSNORM: {
        LIVE(a, ip->b);
        LIVE(g, ip->c);
        CHECK(need_f32(vm, ip, ip->b, a));
        CHECK(need_rank1(vm, ip, ip->b, a));
        CHECK(need_f32(vm, ip, ip->c, g));
        uint32_t n = last_dim(a);
        if (g->count != n || last_dim(g) != n)
            return trap(vm, ip, BIB_E_TRAP,
                        "gamma %s is %s; it must be a row of %" PRIu32 " (%s is %s)",
                        reg_text(vm, rt, sizeof rt, ip->c), tshape(sh, g), n,
                        reg_text(vm, rt2, sizeof rt2, ip->b), tshape(sh2, a));
        k.in_regs[0] = ip->b;
        k.in_regs[1] = ip->c;
        k.nin = 2;
        if (op == BIB_OP_LAYERNORM) {
            LIVE(be, ip->d);
            CHECK(need_f32(vm, ip, ip->d, be));
            if (be->count != n || last_dim(be) != n)
                return trap(vm, ip, BIB_E_TRAP,
                            "beta %s is %s; it must be a row of %" PRIu32 " (%s is %s)",
                            reg_text(vm, rt, sizeof rt, ip->d), tshape(sh, be), n,
                            reg_text(vm, rt2, sizeof rt2, ip->b), tshape(sh2, a));
            k.in_regs[2] = ip->d;
            k.nin = 3;
            k.kernel = BIB_KERNEL_LAYERNORM;
            k.f0 = 1e-5f;
        } else {
            k.kernel = BIB_KERNEL_RMSNORM;
            k.f0 = 1e-6f;
        }
        rank = a->rank;
        memcpy(dims, a->dims, sizeof dims);
        break;
    }
    case BIB_OP_ATTENTION:
    case BIB_OP_ATTENTION_CAUSAL: {
        LIVE(q, ip->b);
        LIVE(kk, ip->c);
        LIVE(v, ip->d);
        CHECK(need_f32(vm, ip, ip->b, q));
        CHECK(need_f32(vm, ip, ip->c, kk));
        CHECK(need_f32(vm, ip, ip->d, v));
        reg_text(vm, rt, sizeof rt, ip->b);
        reg_text(vm, rt2, sizeof rt2, ip->c);
        reg_text(vm, rt3, sizeof rt3, ip->d);
        if ((q->rank != 2 && q->rank != 3) || kk->rank != q->rank || v->rank != q->rank)
            return trap(vm, ip, BIB_E_TRAP,
                        "q, k and v must all be [S,H,D] or all [S,D]: q %s is %s, k %s is %s, "
                        "v %s is %s",
                        rt, tshape(sh, q), rt2, tshape(sh2, kk), rt3, tshape(sh3, v));
        uint32_t r = q->rank;
        if (!same_shape(v, kk->rank, kk->dims) || kk->dims[r - 1] != q->dims[r - 1] ||
            (r == 3 && kk->dims[1] != q->dims[1]))
            return trap(vm, ip, BIB_E_TRAP,
                        "shape mismatch: q %s is %s, k %s is %s, v %s is %s (k and v must be "
                        "equal, with q's heads and head size)",
                        rt, tshape(sh, q), rt2, tshape(sh2, kk), rt3, tshape(sh3, v));
        rank = r;
        memcpy(dims, q->dims, sizeof dims);
        k.kernel = BIB_KERNEL_ATTENTION;
        k.sub = op == BIB_OP_ATTENTION_CAUSAL;
        k.in_regs[0] = ip->b;
        k.in_regs[1] = ip->c;
        k.in_regs[2] = ip->d;
        k.nin = 3;
        k.f0 = (float)(1.0 / sqrt((double)q->dims[r - 1]));
        k.attention_2d = r == 2;
        break;
    }
    case BIB_OP_GATHER: {
        LIVE(table, ip->b);
        LIVE(idx, ip->c);
        if (idx->dtype != BIB_DTYPE_I32)
            return trap(vm, ip, BIB_E_TRAP, "indices %s are %s; GATHER needs i32 indices",
                        reg_text(vm, rt, sizeof rt, ip->c), tshape_typed(sh, idx));
        CHECK(need_rank1(vm, ip, ip->b, table));
        if (idx->rank + table->rank - 1 > BIB_MAX_RANK)
            return trap(vm, ip, BIB_E_TRAP,
                        "the result of %s rows at %s would have rank %" PRIu32 ", more than %d",
                        tshape(sh, table), tshape(sh2, idx), idx->rank + table->rank - 1,
                        BIB_MAX_RANK);
        rank = idx->rank + table->rank - 1;
        for (uint32_t i = 0; i < idx->rank; i++)
            dims[i] = idx->dims[i];
        for (uint32_t i = 1; i < table->rank; i++)
            dims[idx->rank + i - 1] = table->dims[i];
        dtype = table->dtype;
        k.kernel = BIB_KERNEL_GATHER;
        k.in_regs[0] = ip->b;
        k.in_regs[1] = ip->c;
        k.nin = 2;
        break;
    }
    default:
        return trap(vm, ip, BIB_E_TRAP, "opcode %s is not a tensor kernel", bib_isa_table[op].name);
    }
    return run_kernel(vm, ip, ip->a, dtype, rank, dims, &k);
}

bib_status_t bib_tensor_exec(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *R) {
    bib_tensor_state_t *ts = &vm->tensor;
    char rt[300], sh[BIB_SHAPE_TEXT];
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_ALLOC:
        ts->last_place = "host";
        return op_alloc(vm, ip, R);
    case BIB_OP_FREE: {
        LIVE(t, ip->a);
        tensor_clear(vm, t);
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
            return trap(vm, ip, BIB_E_TRAP, "axis %" PRId64 " is outside %s %s (rank %" PRIu32 ")",
                        axis, reg_text(vm, rt, sizeof rt, ip->b), tshape(sh, t), t->rank);
        R[ip->a] = t->dims[at];
        ts->last_place = "host";
        return BIB_OK;
    }
    case BIB_OP_TGET: {
        LIVE(t, ip->b);
        uint64_t index = R[ip->c];
        CHECK(element_index(vm, ip, ip->b, t, index));
        CHECK(to_host(vm, ip, ip->b, t));
        uint32_t w = bib_read_u32le(t->storage->host + index * 4);
        if (t->dtype == BIB_DTYPE_I32) {
            R[ip->a] = (uint64_t)(int64_t)(int32_t)w;
        } else {
            float f;
            memcpy(&f, &w, sizeof f);
            R[ip->a] = d2u((double)f);
        }
        return BIB_OK;
    }
    case BIB_OP_TSET: {
        LIVE(t, ip->a);
        uint64_t index = R[ip->b];
        CHECK(element_index(vm, ip, ip->a, t, index));
        CHECK(to_host(vm, ip, ip->a, t));
        uint32_t w;
        if (t->dtype == BIB_DTYPE_I32) {
            w = (uint32_t)R[ip->c];
        } else {
            float f = (float)u2d(R[ip->c]);
            memcpy(&w, &f, sizeof w);
        }
        bib_write_u32le(t->storage->host + index * 4, w);
        t->storage->valid = 1u << BIB_PLACE_HOST;
        return BIB_OK;
    }
    case BIB_OP_THASH: {
        LIVE(t, ip->b);
        CHECK(charge_fuel(vm, ip, t->count));
        CHECK(to_host(vm, ip, ip->b, t));
        R[ip->a] = bib_tensor_hash(t->dtype, t->rank, t->dims, t->storage->host, t->storage->bytes);
        return BIB_OK;
    }
    case BIB_OP_FILL:
    case BIB_OP_RNG: {
        LIVE(t, ip->a);
        kspec_t k;
        memset(&k, 0, sizeof k);
        k.elementwise = true;
        if (ip->op == BIB_OP_FILL) {
            k.kernel = BIB_KERNEL_FILL;
            if (t->dtype == BIB_DTYPE_I32)
                k.i0 = (int64_t)(int32_t)(uint32_t)R[ip->b];
            else
                k.f0 = (float)u2d(R[ip->b]);
        } else {
            CHECK(need_f32(vm, ip, ip->a, t));
            k.kernel = BIB_KERNEL_RNG;
            k.i0 = (int64_t)R[ip->b];
            k.i1 = ip->x.imm;
        }
        uint32_t dims[BIB_MAX_RANK];
        memcpy(dims, t->dims, sizeof dims);
        return run_kernel(vm, ip, ip->a, t->dtype, t->rank, dims, &k);
    }
    default:
        if (bib_isa_table[ip->op].opclass == BIB_CLASS_CUDA)
            return op_gpu(vm, ip, R);
        return op_kernel(vm, ip, R, -1);
    }
}

/* ---- traces --------------------------------------------------------------------- */

void bib_tensor_trace(bib_vm_t *vm, uint32_t pc, bool json, char *buf, size_t cap) {
    const bib_module_t *m = vm->module;
    const bib_insn_t *in = &m->code[pc];
    const bib_opinfo_t *info = &bib_isa_table[bib_isa_find_code(in->op)];
    const uint32_t words[4] = {in->a, in->b, in->c, in->d};
    bib_tensor_state_t *ts = &vm->tensor;
    const char *place = ts->last_place != NULL ? ts->last_place : "host";
    size_t n = 0;
    buf[0] = '\0';
    if (json)
        n += (size_t)snprintf(buf + n, cap - n, "\"executor\":\"%s\",\"shapes\":{", place);
    bool first = true;
    for (int k = 0; k < 4 && n < cap; k++) {
        uint8_t kind = info->kinds[k];
        if (kind != BIB_K_TD && kind != BIB_K_TS && kind != BIB_K_TM)
            continue;
        const bib_tensor_t *t = &ts->regs[words[k]];
        char sh[BIB_SHAPE_TEXT];
        if (json) {
            n += (size_t)snprintf(buf + n, cap - n, "%s\"t%" PRIu32 "\":", first ? "" : ",",
                                  words[k]);
            if (t->storage == NULL) {
                n += (size_t)snprintf(buf + n, cap - n, "null");
            } else {
                n += (size_t)snprintf(buf + n, cap - n, "\"%s\"", tshape_typed(sh, t));
            }
        } else {
            n += (size_t)snprintf(buf + n, cap - n, "%st%" PRIu32 "=%s", first ? "" : " ", words[k],
                                  t->storage ? tshape_typed(sh, t) : "empty");
        }
        first = false;
    }
    if (json && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "}");
    /* The result: the tensor written (TD or TM first operand), when live. */
    const bib_tensor_t *res = NULL;
    if (info->kinds[0] == BIB_K_TD || info->kinds[0] == BIB_K_TM)
        res = &ts->regs[in->a];
    char why[300];
    if (res != NULL && res->storage != NULL && host_read(vm, res, why, sizeof why) == BIB_OK &&
        n < cap) {
        uint64_t h = bib_tensor_hash(res->dtype, res->rank, res->dims, res->storage->host,
                                     res->storage->bytes);
        if (json) {
            n += (size_t)snprintf(buf + n, cap - n, ",\"shape\":[");
            for (uint32_t i = 0; i < res->rank && n < cap; i++)
                n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu32, i ? "," : "", res->dims[i]);
            if (n < cap)
                snprintf(buf + n, cap - n, "],\"hash\":\"%016" PRIx64 "\"", h);
        } else {
            snprintf(buf + n, cap - n, " on %s hash=%016" PRIx64, place, h);
        }
    } else if (!json && n < cap) {
        snprintf(buf + n, cap - n, " on %s", place);
    }
}

/* ---- device programs ------------------------------------------------------------ */

bib_status_t bib_tensor_buffer_on(bib_vm_t *vm, uint32_t reg, const char *executor,
                                  bib_executor_t **ex, void **buf, bool write) {
    bib_tensor_state_t *ts = &vm->tensor;
    *ex = NULL;
    *buf = NULL;
    int place = executor != NULL ? place_of(executor) : -1;
    if (place < 0)
        return bib_vm_fail(vm, BIB_E_UNAVAILABLE,
                           "executor '%s' is not available: this build has no such executor "
                           "(it has: %s)",
                           executor != NULL ? executor : "(null)", BIB_EXECUTORS);
    if (ts->regs == NULL || reg >= ts->reg_count || ts->regs[reg].storage == NULL)
        return bib_vm_fail(vm, BIB_E_TRAP, "t%" PRIu32 " is not live", reg);
    bib_status_t st = start_place(vm, place);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "executor '%s' is not available: %s", executor, ts->why[place]);
    bib_storage_t *s = ts->regs[reg].storage;
    char why[300], rt[300];
    st = storage_make_valid(vm, s, place, why, sizeof why);
    if (st != BIB_OK)
        return bib_vm_fail(vm, bib_trap_status(st), "moving %s to the %s executor: %s",
                           reg_text(vm, rt, sizeof rt, reg), executor, why);
    if (write)
        s->valid = 1u << place;
    *ex = ts->ex[place];
    *buf = place == BIB_PLACE_HOST ? (void *)s->host : s->buf[place];
    return BIB_OK;
}

/* ---- the collectives' access (vm/collective.c) --------------------------------- */

bib_status_t bib_tensor_charge(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t work) {
    return charge_fuel(vm, ip, work);
}

const char *bib_tensor_reg_text(const bib_vm_t *vm, char *buf, size_t cap, uint32_t reg) {
    return reg_text(vm, buf, cap, reg);
}

bib_status_t bib_tensor_host_in(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                const bib_tensor_t **out) {
    LIVE(t, reg);
    CHECK(to_host(vm, ip, reg, t));
    *out = t;
    return BIB_OK;
}

bib_status_t bib_tensor_host_out(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg, uint32_t dtype,
                                 uint32_t rank, const uint32_t *dims, uint8_t **host) {
    bib_tensor_t *out = &vm->tensor.regs[reg];
    char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    *host = NULL;
    if (out->storage != NULL) {
        if (out->dtype != dtype || !same_shape(out, rank, dims))
            return trap(vm, ip, BIB_E_TRAP,
                        "shape mismatch: %s holds %s but the result is %s (a live destination "
                        "must have the result's shape)",
                        reg_text(vm, rt, sizeof rt, reg), tshape_typed(sh, out),
                        shape_text(sh2, dtype, rank, dims));
        /* The whole buffer is about to be written: no copy back is needed,
           but a storage shared with a view keeps its other places' buffers. */
        out->storage->valid = 1u << BIB_PLACE_HOST;
        *host = out->storage->host;
        return BIB_OK;
    }
    uint64_t count;
    if (!count_of(rank, dims, &count))
        return trap(vm, ip, BIB_E_NOMEM, "out of memory: %s would be %s, over 2^62 bytes",
                    reg_text(vm, rt, sizeof rt, reg), shape_text(sh, dtype, rank, dims));
    bib_storage_t *s;
    bib_status_t st = storage_new(vm, count * 4, false, &s);
    if (st != BIB_OK)
        return trap(vm, ip, st, "out of memory allocating %s (%s, %" PRIu64 " bytes): %s",
                    reg_text(vm, rt, sizeof rt, reg), shape_text(sh, dtype, rank, dims), count * 4,
                    vm->blocks.error);
    s->valid = 1u << BIB_PLACE_HOST;
    out->storage = s;
    out->dtype = dtype;
    out->rank = rank;
    memset(out->dims, 0, sizeof out->dims);
    for (uint32_t i = 0; i < rank; i++)
        out->dims[i] = dims[i];
    out->count = count;
    out->freed_at = 0;
    *host = s->host;
    return BIB_OK;
}
