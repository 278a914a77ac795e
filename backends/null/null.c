/* backends/null/null.c: the null executor (null.h).
 *
 * To start a new executor, copy this directory and replace, slot by slot,
 * host memory with the device's: init probes and selects the device,
 * buffer_alloc hands out ranges of device memory, upload and download copy,
 * each kernel records the device's version of the call. Keep the checks:
 * every transfer and every view is checked against its buffer, and the error
 * text says what, where and why. Then give the new executor its column in
 * isa/kernels.def (BIB_RUNS_ON_*) for the kernels it has: the build checks
 * its kernels[] against that column, and every call for a kernel it lacks
 * runs on the CPU executor.
 */
#include "backends/null/null.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/callcheck.h"
#include "backends/cpu/ops.h"

/* Buffers are rounded up to this, as a pool's ranges are. */
#define NULL_ALIGN 256u

struct bib_executor {
    uint64_t in_use; /* bytes of the pool handed out */
    bib_cpu_ctx_t ctx;
    char error[256];
};

/* A buffer handle: the range's size and the host memory standing for it. */
typedef struct null_buffer {
    uint64_t size;
    void *data;
} null_buffer_t;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bib_status_t
null_fail(bib_executor_t *ex, bib_status_t status, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(ex->error, sizeof ex->error, format, ap);
    va_end(ap);
    return status;
}

/* One device, index 0, called "null". */
static bib_status_t null_init(const bib_executor_config_t *config, bib_executor_t **out, char *why,
                              size_t why_len) {
    *out = NULL;
    const char *sel = config != NULL ? config->device : NULL;
    if (sel != NULL && sel[0] != '\0' && strcmp(sel, "0") != 0 && strcmp(sel, "null") != 0) {
        snprintf(why, why_len, "no null device matches '%s' (the one device is 0, \"null\")", sel);
        return BIB_E_UNAVAILABLE;
    }
    bib_executor_t *ex = calloc(1, sizeof *ex);
    if (ex == NULL) {
        snprintf(why, why_len, "null: out of memory for the executor");
        return BIB_E_NOMEM;
    }
    ex->ctx.level = BIB_CPU_LEVEL_SCALAR;
    ex->ctx.rowops = &bib_cpu_rowops_scalar;
    ex->ctx.pool = NULL; /* the calling thread only */
    ex->ctx.error = ex->error;
    ex->ctx.error_len = sizeof ex->error;
    *out = ex;
    return BIB_OK;
}

static void null_shutdown(bib_executor_t *ex) {
    free(ex);
}

static const char *null_error(const bib_executor_t *ex) {
    return ex->error;
}

static bib_status_t null_buffer_alloc(bib_executor_t *ex, size_t bytes, void **buf) {
    *buf = NULL;
    uint64_t size = ((uint64_t)(bytes ? bytes : 1) + NULL_ALIGN - 1) / NULL_ALIGN * NULL_ALIGN;
    if (size > BIB_NULL_CAPACITY - ex->in_use)
        return null_fail(ex, BIB_E_NOMEM,
                         "null: out of device memory: a %zu-byte buffer does not fit in the "
                         "%llu bytes left of %llu",
                         bytes, (unsigned long long)(BIB_NULL_CAPACITY - ex->in_use),
                         (unsigned long long)BIB_NULL_CAPACITY);
    null_buffer_t *b = malloc(sizeof *b);
    void *data = b != NULL ? calloc(1, (size_t)size) : NULL;
    if (data == NULL) {
        free(b);
        return null_fail(ex, BIB_E_NOMEM, "null: out of host memory for a %zu-byte buffer", bytes);
    }
    b->size = size;
    b->data = data;
    ex->in_use += size;
    *buf = b;
    return BIB_OK;
}

static void null_buffer_free(bib_executor_t *ex, void *buf) {
    null_buffer_t *b = buf;
    if (b == NULL)
        return;
    ex->in_use -= b->size;
    free(b->data);
    free(b);
}

static bib_status_t null_range(bib_executor_t *ex, const char *what, const null_buffer_t *b,
                               size_t offset, size_t bytes) {
    if (b == NULL)
        return null_fail(ex, BIB_E_USAGE, "null: %s into no buffer", what);
    if (offset > b->size || bytes > b->size - offset)
        return null_fail(ex, BIB_E_USAGE,
                         "null: %s of %zu bytes at offset %zu overruns the %llu-byte buffer", what,
                         bytes, offset, (unsigned long long)b->size);
    return BIB_OK;
}

static bib_status_t null_upload(bib_executor_t *ex, void *buf, size_t offset_bytes, const void *src,
                                size_t bytes) {
    null_buffer_t *b = buf;
    bib_status_t st = null_range(ex, "upload", b, offset_bytes, bytes);
    if (st == BIB_OK && bytes > 0)
        memcpy((char *)b->data + offset_bytes, src, bytes);
    return st;
}

static bib_status_t null_download(bib_executor_t *ex, void *buf, size_t offset_bytes, void *dst,
                                  size_t bytes) {
    null_buffer_t *b = buf;
    bib_status_t st = null_range(ex, "download", b, offset_bytes, bytes);
    if (st == BIB_OK && bytes > 0)
        memcpy(dst, (const char *)b->data + offset_bytes, bytes);
    return st;
}

static bib_status_t null_synchronize(bib_executor_t *ex) {
    (void)ex; /* every kernel has finished when its call returns */
    return BIB_OK;
}

static bib_status_t null_memory(bib_executor_t *ex, uint64_t *free_bytes, uint64_t *total_bytes) {
    *free_bytes = BIB_NULL_CAPACITY - ex->in_use;
    *total_bytes = BIB_NULL_CAPACITY;
    return BIB_OK;
}

static bool null_supports(bib_executor_t *ex, const bib_call_t *call) {
    (void)ex;
    return bib_cpu_ops_supports(call);
}

/* A device kernel would check its views and record the call; this one
 * checks them, turns the handles into host pointers and runs the reference. */
static bib_status_t null_kernel(bib_executor_t *ex, const bib_call_t *call) {
    bib_call_t host = *call;
    bib_view_t *views[4] = {&host.out, &host.in[0], &host.in[1], &host.in[2]};
    static const char *const names[4] = {"output", "input 0", "input 1", "input 2"};
    for (int i = 0; i < 4; i++) {
        const null_buffer_t *b = views[i]->buf;
        if (b == NULL)
            continue;
        uint64_t n = bib_view_count(views[i]);
        if (views[i]->offset > b->size / 4 || n > b->size / 4 - views[i]->offset)
            return null_fail(ex, BIB_E_USAGE,
                             "null: %s (offset %zu, %llu elements) overruns its buffer of %llu "
                             "bytes",
                             names[i], views[i]->offset, (unsigned long long)n,
                             (unsigned long long)b->size);
        views[i]->buf = b->data;
    }
    ex->error[0] = '\0';
    return bib_cpu_ops_run(&ex->ctx, &host);
}

static const char *null_describe(bib_executor_t *ex) {
    (void)ex;
    return "null: host memory, the CPU executor's scalar reference kernels (fma: exact, "
           "denormals: kept, rounding: nearest even)";
}

/* Every kernel its column in isa/kernels.def names; tools/isa-gen.c checks. */
const bib_executor_ops_t bib_null_executor = {
    .name = "null",
    .id = BIB_EXECUTOR_NULL,
    .init = null_init,
    .shutdown = null_shutdown,
    .error = null_error,
    .buffer_alloc = null_buffer_alloc,
    .buffer_free = null_buffer_free,
    .upload = null_upload,
    .download = null_download,
    .synchronize = null_synchronize,
    .memory = null_memory,
    .supports = null_supports,
    .kernels =
        {
#define KERNEL(name, dtype, shape, args, cost, per_element, subs, executors, contract)             \
    [BIB_KERNEL_##name] = ((executors)&BIB_RUNS_ON_NULL) ? null_kernel : NULL,
#include "isa/kernels.def"
#undef KERNEL
        },
    .describe = null_describe,
    /* Optional slots left NULL: no user device programs, no submit (work
       finishes in its call), no device clock. */
};
