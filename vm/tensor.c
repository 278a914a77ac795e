/* vm/tensor.c: residency and placement of tensors (see vm/tensor.h for the
 * model, vm/tensor_internal.h for the other rooms of the tensor half).
 *
 * Owns the executors of a VM (started on first use, shut down with the VM),
 * storage and its per-place validity, --backend=auto's per-call choice (with
 * the models of vm/placement.c), the run of one kernel call: the choice of
 * place, the copies it needs, the output and its temporaries, and the call
 * through the executor's table; traces of tensor instructions and
 * bib_tensor_buffer_on for device programs. What an opcode means (its checks,
 * shape and cost) is vm/tensor_ops.c's; the public API is vm/tensor_api.c's.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/placement.h"
#include "vm/profile.h"
#include "vm/tensor_internal.h"
#include "vm/tensor_ops.h"

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
int bib_tensor_place_of(const char *name) {
    for (uint32_t i = 0; i < bib_executor_count() && i < BIB_MAX_PLACES; i++)
        if (strcmp(bib_executor_at(i)->name, name) == 0)
            return (int)i;
    return -1;
}

const char *bib_tensor_place_name(int place) {
    return bib_executor_at((uint32_t)place)->name;
}

/* Starts the executor of place if it is not running yet. A place that failed
 * once is not tried again in this VM; ts->why[place] keeps the reason. */
bib_status_t bib_tensor_start_place(bib_vm_t *vm, int place) {
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
        if (bib_tensor_start_place(vm, p) != BIB_OK)
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
    bib_status_t st = bib_tensor_start_place(vm, BIB_PLACE_HOST);
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
static int auto_choose(bib_vm_t *vm, const bib_call_t *call, double flops,
                       const bib_storage_t *const *in, int nin) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (!ts->models[BIB_PLACE_HOST].measured)
        return BIB_PLACE_HOST;
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
bib_status_t bib_tensor_resolve_backend(bib_vm_t *vm, bool needed) {
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
    int place = bib_tensor_place_of(name);
    if (place < 0)
        return bib_vm_fail(vm, BIB_E_UNAVAILABLE,
                           "executor '%s' is not available: this build has no %s executor "
                           "(it has: %s)",
                           name, name, BIB_EXECUTORS);
    bib_status_t st = bib_tensor_start_place(vm, place);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "executor '%s' is not available: %s", name, ts->why[place]);
    ts->selected = place;
    ts->resolved = true;
    return BIB_OK;
}

const char *bib_tensor_executor_error(const bib_vm_t *vm, int place) {
    const bib_tensor_state_t *ts = &vm->tensor;
    const char *e = ts->ex[place] != NULL ? ts->ops[place]->error(ts->ex[place]) : NULL;
    return e != NULL && e[0] != '\0' ? e : "no reason given";
}

/* ---- storage ---------------------------------------------------------------- */

bib_hostbuf_t *bib_hostbuf_new(uint8_t *data, uint64_t bytes, bool owned) {
    bib_hostbuf_t *h = malloc(sizeof *h);
    if (h != NULL)
        *h = (bib_hostbuf_t){.refs = 1, .owned = owned, .data = data, .bytes = bytes};
    return h;
}

void bib_hostbuf_unref(bib_hostbuf_t *h) {
    if (h == NULL || --h->refs > 0)
        return;
    if (h->owned)
        free(h->data);
    free(h);
}

/* Gives back s's host copy and its charge: its own buffer, or its reference
   to the bytes it shares. */
static void storage_release_host(bib_vm_t *vm, bib_storage_t *s) {
    if (s->shared != NULL) {
        bib_hostbuf_unref(s->shared);
        bib_blocks_uncharge(&vm->blocks, s->bytes);
        s->shared = NULL;
    } else {
        bib_blocks_big_free(&vm->blocks, s->host, s->bytes);
    }
    s->host = NULL;
}

static void storage_unref(bib_vm_t *vm, bib_storage_t *s) {
    if (s == NULL || --s->refs > 0)
        return;
    bib_tensor_state_t *ts = &vm->tensor;
    for (int p = 1; p < BIB_MAX_PLACES; p++)
        if (s->buf[p] != NULL && ts->ex[p] != NULL)
            ts->ops[p]->buffer_free(ts->ex[p], s->buf[p]);
    storage_release_host(vm, s);
    free(s);
}

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

/* A new storage of bytes, its host copy charged to the VM's blocks; valid
 * nowhere (zero: zero-filled and valid on the host). On failure the blocks'
 * error says why. */
bib_status_t bib_storage_new(bib_vm_t *vm, uint64_t bytes, bool zero, bib_storage_t **out) {
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

bib_status_t bib_storage_share(bib_vm_t *vm, bib_hostbuf_t *h, bib_storage_t **out) {
    *out = NULL;
    bib_storage_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(vm->blocks.error, sizeof vm->blocks.error, "host out of memory");
        return BIB_E_NOMEM;
    }
    bib_status_t st = bib_blocks_charge(&vm->blocks, h->bytes);
    if (st != BIB_OK) {
        free(s);
        return st;
    }
    h->refs++;
    s->refs = 1;
    s->bytes = h->bytes;
    s->host = h->data;
    s->shared = h;
    s->valid = 1u << BIB_PLACE_HOST;
    *out = s;
    return BIB_OK;
}

bib_status_t bib_storage_own_host(bib_vm_t *vm, bib_storage_t *s, char *why, size_t why_len) {
    if (s->shared == NULL)
        return BIB_OK;
    /* The charge moves from the shared bytes to the new buffer, so the cap
       cannot refuse it: only the host can. */
    bib_blocks_uncharge(&vm->blocks, s->bytes);
    void *own;
    bib_status_t st = bib_blocks_big_alloc(&vm->blocks, s->bytes, BIB_BLOCK_ALIGN, 0, &own);
    if (st != BIB_OK) {
        snprintf(why, why_len, "%s", vm->blocks.error);
        (void)bib_blocks_charge(&vm->blocks, s->bytes);
        return st;
    }
    if (s->valid & (1u << BIB_PLACE_HOST))
        memcpy(own, s->host, (size_t)s->bytes);
    else
        poison_host(own, s->bytes);
    bib_hostbuf_unref(s->shared);
    s->shared = NULL;
    s->host = own;
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
            snprintf(why, why_len, "%s", bib_tensor_executor_error(vm, place));
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
    if (down) {
        st = bib_storage_own_host(vm, s, why, why_len);
        if (st != BIB_OK)
            return st;
    }
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
        snprintf(why, why_len, "%s", bib_tensor_executor_error(vm, dev));
        return st;
    }
    s->valid |= 1u << (down ? BIB_PLACE_HOST : dev);
    return BIB_OK;
}

/* Makes s's copy at place valid, moving the data from where it is valid: one
 * copy from or to the host, or, between two devices, a download then an
 * upload (the host stays valid too). The executor of place is running. On
 * failure why holds the executor's message. */
bib_status_t bib_storage_make_valid(bib_vm_t *vm, bib_storage_t *s, int place, char *why,
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
bib_status_t bib_tensor_host_read(bib_vm_t *vm, const bib_tensor_t *t, char *why, size_t why_len) {
    return bib_storage_make_valid(vm, t->storage, BIB_PLACE_HOST, why, why_len);
}

/* The executor a tensor is read back from, for messages. */
const char *bib_tensor_holder_name(const bib_tensor_t *t) {
    for (int p = 1; p < BIB_MAX_PLACES; p++)
        if (t->storage != NULL && (t->storage->valid & (1u << p)))
            return bib_tensor_place_name(p);
    return "cpu";
}

void bib_tensor_clear(bib_vm_t *vm, bib_tensor_t *t) {
    storage_unref(vm, t->storage);
    t->storage = NULL;
}

bib_status_t bib_tensor_reg_to_host(bib_vm_t *vm, uint32_t reg) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_storage_t *s = ts->regs[reg].storage;
    if (s->valid == 0 || (s->valid & (1u << BIB_PLACE_HOST)) || s->bytes == 0)
        return BIB_OK;
    int from = 1;
    while (from < BIB_MAX_PLACES && !(s->valid & (1u << from)))
        from++;
    if (from == BIB_MAX_PLACES || ts->ex[from] == NULL || s->buf[from] == NULL)
        return bib_vm_fail(vm, BIB_E_STATE, "t%" PRIu32 " has no valid copy on a running executor",
                           reg);
    char why[300];
    bib_status_t st = bib_storage_make_valid(vm, s, BIB_PLACE_HOST, why, sizeof why);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "reading t%" PRIu32 " back from the %s executor: %s", reg,
                           ts->ops[from]->name, why);
    return BIB_OK;
}

/* ---- life cycle -------------------------------------------------------------- */

void bib_tensor_keep_constants(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_module_t *m = vm->module;
    for (uint32_t r = 0; r < ts->reg_count; r++) {
        bib_storage_t *s = ts->regs[r].storage;
        if (s == NULL || s->shared == NULL || s->shared->owned)
            continue;
        for (uint32_t i = 0; i < m->tensor_count; i++)
            if (m->tensors[i].init == s->shared->data)
                m->tensors[i].init = NULL;
        s->shared->owned = true;
    }
}

void bib_tensor_release(bib_vm_t *vm) {
    bib_tensor_state_t *ts = &vm->tensor;
    for (uint32_t i = 0; i < ts->reg_count; i++)
        bib_tensor_clear(vm, &ts->regs[i]);
    ts->regs = NULL;
    ts->reg_count = 0;
    ts->symbols = NULL;
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

/* ---- one kernel call: the place it runs on, its operands there ------------------- */

/* A view of a tensor of dtype and shape, without its buffer; as_heads: the
 * [S,D] of a one-head ATTENTION as [S,1,D]. */
static bib_view_t view_shaped(uint32_t dtype, uint32_t rank, const uint32_t *dims, bool as_heads) {
    bib_view_t v;
    memset(&v, 0, sizeof v);
    v.dtype = dtype;
    v.rank = rank;
    for (uint32_t i = 0; i < rank; i++)
        v.dims[i] = dims[i];
    if (as_heads) {
        v.rank = 3;
        v.dims[0] = dims[0];
        v.dims[1] = 1;
        v.dims[2] = dims[1];
    }
    return v;
}

/* The one rule of fallback: a place runs a call when its executor has the
 * kernel by the descriptor (isa/kernels.def, checked against its table at
 * build time) and takes the call's shapes. */
bool bib_tensor_place_runs(bib_vm_t *vm, int place, const bib_call_t *call) {
    bib_tensor_state_t *ts = &vm->tensor;
    return ts->ex[place] != NULL && bib_kernel_runs_on(call->kernel, ts->ops[place]->id) &&
           ts->ops[place]->supports(ts->ex[place], call);
}

/* Chooses the place for a call: the selected executor when it runs the call,
 * else the host; under auto, the cheapest place by the measured models. */
static int choose_place(bib_vm_t *vm, const bib_call_t *call, double ops,
                        const bib_tensor_t *const *in, int nin) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (ts->automatic) {
        const bib_storage_t *st[3] = {NULL, NULL, NULL};
        for (int i = 0; i < nin; i++)
            st[i] = in[i]->storage;
        return auto_choose(vm, call, ops, st, nin);
    }
    if (ts->selected <= BIB_PLACE_HOST)
        return BIB_PLACE_HOST;
    if (bib_tensor_place_runs(vm, ts->selected, call))
        return ts->selected;
    ts->stats.fallbacks++;
    return BIB_PLACE_HOST;
}

/* A batched MATMUL: one call per batch index, in row-major order, each
 * operand's view at its offset (the bias row stays). */
static bib_status_t run_batches(const bib_executor_ops_t *ops, bib_executor_t *ex, bib_call_t *call,
                                const bib_kspec_t *k) {
    uint32_t idx[BIB_MAX_RANK] = {0};
    bib_view_t *v[3] = {&call->out, &call->in[0], &call->in[1]};
    const size_t base[3] = {v[0]->offset, v[1]->offset, v[2]->offset};
    for (uint64_t b = 0; b < k->batches; b++) {
        for (int o = 0; o < 3; o++) {
            size_t off = base[o];
            for (uint32_t i = 0; i < k->nbatch; i++)
                off += (size_t)(idx[i] * k->batch_stride[o][i]);
            v[o]->offset = off;
        }
        bib_status_t st = ops->kernels[k->kernel](ex, call);
        if (st != BIB_OK)
            return st;
        for (uint32_t i = k->nbatch; i-- > 0;) {
            if (++idx[i] < k->batch_dims[i])
                break;
            idx[i] = 0;
        }
    }
    return BIB_OK;
}

/* Runs a kernel writing register out_reg with the given result dtype and shape.
 * Allocates the output when the register is empty, checks it otherwise. */
bib_status_t bib_tensor_run_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t out_reg,
                                   uint32_t dtype, uint32_t rank, const uint32_t *dims,
                                   const bib_kspec_t *k) {
    bib_tensor_state_t *ts = &vm->tensor;
    bib_tensor_t *out = k->out_t != NULL ? k->out_t : &ts->regs[out_reg];
    char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT], why[300];
    bool fresh = false;
    uint64_t count = out->count;
    if (out->storage != NULL) {
        if (out->dtype != dtype || !bib_tensor_same_shape(out, rank, dims))
            return bib_tensor_trap(
                vm, ip, BIB_E_TRAP,
                "shape mismatch: %s holds %s but the result is %s (a live destination "
                "must have the result's shape)",
                bib_tensor_reg_text(vm, rt, sizeof rt, out_reg), bib_tensor_shape_typed(sh, out),
                bib_tensor_shape_text(sh2, dtype, rank, dims));
    } else if (!bib_tensor_count_of(rank, dims, &count)) {
        return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                               "out of memory: %s would be %s, over 2^62 bytes",
                               bib_tensor_reg_text(vm, rt, sizeof rt, out_reg),
                               bib_tensor_shape_text(sh, dtype, rank, dims));
    }
    /* The call with placeholder buffers gives the cost and decides the place. */
    static const uint8_t placeholder = 0;
    bib_call_t call;
    memset(&call, 0, sizeof call);
    call.kernel = k->kernel;
    call.sub = k->sub;
    call.f[0] = k->f0;
    call.i[0] = k->i0;
    call.i[1] = k->i1;
    memcpy(call.p, k->p, sizeof call.p);
    call.out = view_shaped(dtype, rank, dims, k->attention_2d);
    call.out.buf = (void *)&placeholder;
    const bib_tensor_t *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < k->nin; i++) {
        in[i] = k->in_t[i] != NULL ? k->in_t[i] : &ts->regs[k->in_regs[i]];
        call.in[i] = view_shaped(in[i]->dtype, in[i]->rank, in[i]->dims, k->attention_2d);
        call.in[i].buf = (void *)&placeholder;
    }
    if (k->matrices)
        for (int i = 0; i < 3; i++) {
            bib_view_t *v = i == 0 ? &call.out : &call.in[i - 1];
            v->rank = 2;
            memset(v->dims, 0, sizeof v->dims);
            v->dims[0] = k->mdims[i][0];
            v->dims[1] = k->mdims[i][1];
        }
    bib_tensor_cost_t cost = bib_tensor_cost(&call);
    if (k->matrices) {
        cost.work = bib_sat_mul(cost.work, k->batches);
        cost.flops = bib_sat_mul(cost.flops, k->batches);
        cost.ops *= (double)k->batches;
    }
    ts->last_flops = cost.flops;
    if (!k->charged)
        CHECK(bib_tensor_charge_fuel(vm, ip, cost.work));
    if (out->storage == NULL) {
        bib_storage_t *s;
        bib_status_t st = bib_storage_new(vm, count * 4, false, &s);
        if (st != BIB_OK)
            return bib_tensor_trap(
                vm, ip, st, "out of memory allocating %s (%s, %" PRIu64 " bytes): %s",
                bib_tensor_reg_text(vm, rt, sizeof rt, out_reg),
                bib_tensor_shape_text(sh, dtype, rank, dims), count * 4, vm->blocks.error);
        bib_tensor_bind(out, s, dtype, rank, dims, count);
        fresh = true;
    }

    int place = k->forced ? k->place : choose_place(vm, &call, cost.ops, in, k->nin);
    bib_status_t st = bib_tensor_start_place(vm, place);
    if (st != BIB_OK) {
        if (fresh)
            bib_tensor_clear(vm, out);
        return bib_tensor_trap(vm, ip, BIB_E_UNAVAILABLE, "executor '%s' is not available: %s",
                               bib_tensor_place_name(place), ts->why[place]);
    }
    const bib_executor_ops_t *ops = ts->ops[place];
    bib_executor_t *ex = ts->ex[place];
    if ((place == BIB_PLACE_HOST || k->forced) && !bib_tensor_place_runs(vm, place, &call)) {
        if (fresh)
            bib_tensor_clear(vm, out);
        return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                               "the %s executor does not run %s on these shapes", ops->name,
                               bib_isa_table[ip->op].name);
    }

    bool alias = false;
    for (int i = 0; i < k->nin; i++)
        if (in[i]->storage == out->storage && !k->elementwise)
            alias = true;
    /* A live output written in place on the host gets a buffer of its own
       first (it may share a kept input's bytes), before the inputs' pointers
       are taken: an elementwise kernel may read it as an input. */
    if (!fresh && !alias && place == BIB_PLACE_HOST) {
        st = bib_storage_own_host(vm, out->storage, why, sizeof why);
        if (st != BIB_OK)
            return bib_tensor_trap(vm, ip, st, "out of memory for a copy of %s of its own: %s",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, out_reg), why);
    }
    for (int i = 0; i < k->nin; i++) {
        st = bib_storage_make_valid(vm, in[i]->storage, place, why, sizeof why);
        if (st != BIB_OK) {
            if (fresh)
                bib_tensor_clear(vm, out);
            return bib_tensor_trap(vm, ip, bib_trap_status(st), "moving %s to the %s executor: %s",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, k->in_regs[i]), ops->name,
                                   why);
        }
        call.in[i].buf =
            place == BIB_PLACE_HOST ? (void *)in[i]->storage->host : in[i]->storage->buf[place];
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
                snprintf(why, sizeof why, "%s", bib_tensor_executor_error(vm, place));
            else
                poison_device(vm, place, temp, os->bytes);
        }
        if (st != BIB_OK)
            return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                                   "out of memory for a temporary of %" PRIu64
                                   " bytes (%s is also an "
                                   "input): %s",
                                   os->bytes, bib_tensor_reg_text(vm, rt, sizeof rt, out_reg), why);
        call.out.buf = temp;
    } else if (place == BIB_PLACE_HOST) {
        call.out.buf = os->host;
    } else {
        st = storage_buffer(vm, os, place, &call.out.buf, why, sizeof why);
        if (st != BIB_OK) {
            if (fresh)
                bib_tensor_clear(vm, out);
            return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                                   "out of %s memory for %s (%" PRIu64 " bytes): %s", ops->name,
                                   bib_tensor_reg_text(vm, rt, sizeof rt, out_reg), os->bytes, why);
        }
    }

    if (k->matrices && k->nbatch > 0) {
        st = run_batches(ops, ex, &call, k);
    } else {
        st = ops->kernels[k->kernel](ex, &call);
    }
    ts->stats.kernels[place == BIB_PLACE_HOST ? BIB_STAT_HOST : BIB_STAT_DEVICE]++;
    ts->stats.place_kernels[place]++;
    ts->last_place = ops->name;
    if (st != BIB_OK) {
        snprintf(why, sizeof why, "%s", bib_tensor_executor_error(vm, place));
        if (temp != NULL) {
            if (place == BIB_PLACE_HOST)
                bib_blocks_big_free(&vm->blocks, temp, os->bytes);
            else
                ops->buffer_free(ex, temp);
        }
        if (fresh)
            bib_tensor_clear(vm, out);
        return bib_tensor_trap(vm, ip, bib_trap_status(st), "%s", why);
    }
    if (temp != NULL) {
        if (place == BIB_PLACE_HOST) {
            storage_release_host(vm, os);
            os->host = temp;
        } else {
            ops->buffer_free(ex, os->buf[place]);
            os->buf[place] = temp;
        }
    }
    os->valid = 1u << place;
    return BIB_OK;
}

/* ---- traces --------------------------------------------------------------------- */

void bib_tensor_trace(bib_vm_t *vm, uint32_t pc, bool json, char *buf, size_t cap) {
    const bib_module_t *m = vm->module;
    const bib_insn_t *in = &m->code[pc];
    const bib_opinfo_t *info = bib_module_info(m, pc);
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
        /* A register's shape is one fact: named once, where it first
           stands (TMUL t1, t0, t0 names t0 once). */
        bool again = false;
        for (int j = 0; j < k; j++)
            again |=
                words[j] == words[k] && (info->kinds[j] == BIB_K_TD || info->kinds[j] == BIB_K_TS ||
                                         info->kinds[j] == BIB_K_TM);
        if (again)
            continue;
        const bib_tensor_t *t = &ts->regs[words[k]];
        char sh[BIB_SHAPE_TEXT];
        if (json) {
            n += (size_t)snprintf(buf + n, cap - n, "%s\"t%" PRIu32 "\":", first ? "" : ",",
                                  words[k]);
            if (t->storage == NULL) {
                n += (size_t)snprintf(buf + n, cap - n, "null");
            } else {
                n += (size_t)snprintf(buf + n, cap - n, "\"%s\"", bib_tensor_shape_typed(sh, t));
            }
        } else {
            n += (size_t)snprintf(buf + n, cap - n, "%st%" PRIu32 "=%s", first ? "" : " ", words[k],
                                  t->storage ? bib_tensor_shape_typed(sh, t) : "empty");
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
    if (res != NULL && res->storage != NULL &&
        bib_tensor_host_read(vm, res, why, sizeof why) == BIB_OK && n < cap) {
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
    int place = executor != NULL ? bib_tensor_place_of(executor) : -1;
    if (place < 0)
        return bib_vm_fail(vm, BIB_E_UNAVAILABLE,
                           "executor '%s' is not available: this build has no such executor "
                           "(it has: %s)",
                           executor != NULL ? executor : "(null)", BIB_EXECUTORS);
    if (ts->regs == NULL || reg >= ts->reg_count || ts->regs[reg].storage == NULL)
        return bib_vm_fail(vm, BIB_E_TRAP, "t%" PRIu32 " is not live", reg);
    bib_status_t st = bib_tensor_start_place(vm, place);
    if (st != BIB_OK)
        return bib_vm_fail(vm, st, "executor '%s' is not available: %s", executor, ts->why[place]);
    bib_storage_t *s = ts->regs[reg].storage;
    char why[300], rt[300];
    st = bib_storage_make_valid(vm, s, place, why, sizeof why);
    if (st != BIB_OK)
        return bib_vm_fail(vm, bib_trap_status(st), "moving %s to the %s executor: %s",
                           bib_tensor_reg_text(vm, rt, sizeof rt, reg), executor, why);
    if (write && place == BIB_PLACE_HOST) {
        st = bib_storage_own_host(vm, s, why, sizeof why);
        if (st != BIB_OK)
            return bib_vm_fail(vm, st, "%s: a copy of its own: %s",
                               bib_tensor_reg_text(vm, rt, sizeof rt, reg), why);
    }
    if (write)
        s->valid = 1u << place;
    *ex = ts->ex[place];
    *buf = place == BIB_PLACE_HOST ? (void *)s->host : s->buf[place];
    return BIB_OK;
}

/* ---- the collectives' host copies (vm/collective.c) ----------------------------- */

bib_status_t bib_tensor_host_in(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                const bib_tensor_t **out) {
    LIVE(t, reg);
    CHECK(bib_tensor_to_host(vm, ip, reg, t));
    *out = t;
    return BIB_OK;
}

bib_status_t bib_tensor_host_out(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg, uint32_t dtype,
                                 uint32_t rank, const uint32_t *dims, uint8_t **host) {
    bib_tensor_t *out = &vm->tensor.regs[reg];
    char rt[300], sh[BIB_SHAPE_TEXT], sh2[BIB_SHAPE_TEXT];
    *host = NULL;
    if (out->storage != NULL) {
        if (out->dtype != dtype || !bib_tensor_same_shape(out, rank, dims))
            return bib_tensor_trap(vm, ip, BIB_E_TRAP,
                                   "shape mismatch: %s holds %s but the result is %s (a live "
                                   "destination must have the result's shape)",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, reg),
                                   bib_tensor_shape_typed(sh, out),
                                   bib_tensor_shape_text(sh2, dtype, rank, dims));
        /* The whole buffer is about to be written: no copy back is needed,
           but a storage shared with a view keeps its other places' buffers.
           In place (the destination is the input), its value stays. */
        char why[300];
        bib_status_t st = bib_storage_own_host(vm, out->storage, why, sizeof why);
        if (st != BIB_OK)
            return bib_tensor_trap(vm, ip, st, "out of memory for a copy of %s of its own: %s",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, reg), why);
        out->storage->valid = 1u << BIB_PLACE_HOST;
        *host = out->storage->host;
        return BIB_OK;
    }
    uint64_t count;
    if (!bib_tensor_count_of(rank, dims, &count))
        return bib_tensor_trap(vm, ip, BIB_E_NOMEM,
                               "out of memory: %s would be %s, over 2^62 bytes",
                               bib_tensor_reg_text(vm, rt, sizeof rt, reg),
                               bib_tensor_shape_text(sh, dtype, rank, dims));
    bib_storage_t *s;
    bib_status_t st = bib_storage_new(vm, count * 4, false, &s);
    if (st != BIB_OK)
        return bib_tensor_trap(
            vm, ip, st, "out of memory allocating %s (%s, %" PRIu64 " bytes): %s",
            bib_tensor_reg_text(vm, rt, sizeof rt, reg),
            bib_tensor_shape_text(sh, dtype, rank, dims), count * 4, vm->blocks.error);
    s->valid = 1u << BIB_PLACE_HOST;
    bib_tensor_bind(out, s, dtype, rank, dims, count);
    *host = s->host;
    return BIB_OK;
}
