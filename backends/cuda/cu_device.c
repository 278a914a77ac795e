/* backends/cuda/cu_device.c: the CUDA executor's device side.
 *
 * Owns the life cycle (driver load, cuInit, device choice, the device's
 * primary context, one non-blocking stream), the kernel modules (one
 * embedded fatbin per .cu file of shaders/cuda, loaded with cuModuleLoadData, every
 * kernel handle looked up once here), error messages that name the failing
 * driver call and its CUDA_ERROR_* name, and launching. Kernels are queued
 * on the stream without waiting; only synchronize and download wait. Also
 * the device timer of --profile: CUDA events recorded around every timed
 * command and read when elapsed is asked. Memory lives in cu_memory.c, the
 * kernels' launch code in cu_kernels.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cuda/cu_internal.h"

const char *const bib_cu_fn_names[BIB_CU_FN__COUNT] = {
#define BIB_CU_UNARY_ROW(id, symbol) #symbol,
#include "backends/cuda/cu_unary_rows.h"
#undef BIB_CU_UNARY_ROW
#define BIB_CU_FN_NAME(id, module, symbol) symbol,
    BIB_CU_FUNCTIONS(BIB_CU_FN_NAME)
#undef BIB_CU_FN_NAME
};

static const char *const bib_cu_fn_modules[BIB_CU_FN__COUNT] = {
#define BIB_CU_UNARY_ROW(id, symbol) "elementwise",
#include "backends/cuda/cu_unary_rows.h"
#undef BIB_CU_UNARY_ROW
#define BIB_CU_FN_MODULE(id, module, symbol) module,
    BIB_CU_FUNCTIONS(BIB_CU_FN_MODULE)
#undef BIB_CU_FN_MODULE
};

bib_status_t bib_cu_fail(bib_executor_t *ex, bib_status_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->error, sizeof ex->error, fmt, ap);
    va_end(ap);
    return status;
}

bib_status_t bib_cu_check(bib_executor_t *ex, CUresult r, const char *call_fmt, ...) {
    if (r == CUDA_SUCCESS)
        return BIB_OK;
    char call[256], buf[32];
    va_list ap;
    va_start(ap, call_fmt);
    vsnprintf(call, sizeof call, call_fmt, ap);
    va_end(ap);
    snprintf(ex->error, sizeof ex->error, "%s: %s", call,
             bib_cu_error_name(&ex->api, r, buf, sizeof buf));
    return r == CUDA_ERROR_OUT_OF_MEMORY ? BIB_E_NOMEM : BIB_E_UNAVAILABLE;
}

bib_status_t bib_cu_enter(bib_executor_t *ex) {
    if (ex->lost)
        return bib_cu_fail(ex, BIB_E_STATE,
                           "cuda: unusable after device work ran past the device timeout (%llu ms)",
                           (unsigned long long)ex->timeout_ms);
    CUcontext cur = NULL;
    if (ex->api.CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ex->ctx)
        return BIB_OK;
    return bib_cu_check(ex, ex->api.CtxSetCurrent(ex->ctx), "cuCtxSetCurrent");
}

static uint64_t bib_cu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* With a timeout the stream is polled (cuStreamQuery), sleeping between
 * polls from 20 us up to 1 ms, until it is idle, fails or the deadline
 * passes; cuStreamSynchronize would block for as long as a kernel runs. Past
 * the deadline the work may still run and still use the staging memory and
 * the buffers: the executor is lost from then on. */
static bib_status_t bib_cu_poll(bib_executor_t *ex) {
    const uint64_t deadline = bib_cu_now_ns() + ex->timeout_ms * 1000000u;
    long nap_ns = 20000;
    for (;;) {
        CUresult r = ex->api.StreamQuery(ex->stream);
        if (r != CUDA_ERROR_NOT_READY)
            return bib_cu_check(ex, r, "cuStreamQuery");
        if (bib_cu_now_ns() >= deadline) {
            ex->lost = true;
            return bib_cu_fail(ex, BIB_E_TIMEOUT,
                               "cuda: device work ran past the device timeout (%llu ms); the "
                               "executor is unusable from now on",
                               (unsigned long long)ex->timeout_ms);
        }
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

bib_status_t bib_cu_wait(bib_executor_t *ex) {
    bib_status_t st =
        ex->timeout_ms > 0 && ex->timeout_ms < UINT64_MAX / 1000000u
            ? bib_cu_poll(ex)
            : bib_cu_check(ex, ex->api.StreamSynchronize(ex->stream), "cuStreamSynchronize");
    ex->waits++;
    if (ex->lost)
        return st;
    /* Even after an error nothing queued can still read the staging memory. */
    ex->staging_used = 0;
    return st;
}

/* ---- device timing ---------------------------------------------------------- */

#define BIB_CU_EVENTS_MAX 4096 /* events recorded before elapsed() must have read them */

static bool bib_cu_has_events(const bib_executor_t *ex) {
    return ex->api.EventCreate && ex->api.EventRecord && ex->api.EventSynchronize &&
           ex->api.EventElapsedTime && ex->api.EventDestroy;
}

/* Waits for the last recorded event and adds the time of every recorded
 * pair to timed_ms; the events can be recorded again. One stream runs its
 * commands in order, so the pairs never overlap and their sum is the busy
 * time. */
static bib_status_t bib_cu_time_fold(bib_executor_t *ex) {
    uint32_t n = ex->events_used & ~1u;
    ex->events_used = 0;
    if (n == 0)
        return BIB_OK;
    /* The events are on the stream: with a timeout, waiting for the stream
       first keeps cuEventSynchronize from blocking past it. */
    bib_status_t st = ex->timeout_ms > 0 ? bib_cu_wait(ex) : BIB_OK;
    if (st == BIB_OK)
        st = bib_cu_check(ex, ex->api.EventSynchronize(ex->events[n - 1]), "cuEventSynchronize");
    for (uint32_t i = 0; st == BIB_OK && i < n; i += 2) {
        float ms = 0;
        st = bib_cu_check(ex, ex->api.EventElapsedTime(&ms, ex->events[i], ex->events[i + 1]),
                          "cuEventElapsedTime");
        if (st == BIB_OK && ms > 0)
            ex->timed_ms += ms;
    }
    return st;
}

/* One more event, created when none is free. */
static bib_status_t bib_cu_time_record(bib_executor_t *ex) {
    if (ex->events_used == ex->events_made) {
        if (ex->events_made == ex->events_cap) {
            uint32_t cap = ex->events_cap ? ex->events_cap * 2 : 64;
            CUevent *grown = realloc(ex->events, cap * sizeof *grown);
            if (!grown)
                return bib_cu_fail(ex, BIB_E_NOMEM, "cuda: out of host memory for timing events");
            ex->events = grown;
            ex->events_cap = cap;
        }
        bib_status_t st =
            bib_cu_check(ex, ex->api.EventCreate(&ex->events[ex->events_made], CU_EVENT_DEFAULT),
                         "cuEventCreate");
        if (st != BIB_OK)
            return st;
        ex->events_made++;
    }
    bib_status_t st = bib_cu_check(ex, ex->api.EventRecord(ex->events[ex->events_used], ex->stream),
                                   "cuEventRecord");
    if (st == BIB_OK)
        ex->events_used++;
    return st;
}

bib_status_t bib_cu_time_begin(bib_executor_t *ex) {
    if (!ex->timing)
        return BIB_OK;
    if (ex->events_used + 2 > BIB_CU_EVENTS_MAX) {
        bib_status_t st = bib_cu_time_fold(ex);
        if (st != BIB_OK)
            return st;
    }
    return bib_cu_time_record(ex);
}

void bib_cu_time_end(bib_executor_t *ex) {
    if (!ex->timing || !(ex->events_used & 1))
        return;
    /* Without its second event the pair is dropped; the command ran anyway,
       so the error is not the command's. */
    char keep[sizeof ex->error];
    memcpy(keep, ex->error, sizeof keep);
    if (bib_cu_time_record(ex) != BIB_OK) {
        ex->events_used--;
        memcpy(ex->error, keep, sizeof keep);
    }
}

bib_status_t bib_cu_timing(bib_executor_t *ex, bool on) {
    bib_status_t st = bib_cu_enter(ex);
    if (st != BIB_OK)
        return st;
    if (!on) {
        /* What was timed so far is kept for the next elapsed(). */
        st = ex->timing ? bib_cu_time_fold(ex) : BIB_OK;
        ex->timing = false;
        return st;
    }
    if (!bib_cu_has_events(ex))
        return bib_cu_fail(ex, BIB_E_UNAVAILABLE,
                           "cuda: the driver lacks the event functions of the device timer "
                           "(cuEventCreate, cuEventRecord, cuEventSynchronize, "
                           "cuEventElapsedTime, cuEventDestroy)");
    ex->timing = true;
    ex->events_used = 0;
    ex->timed_ms = 0;
    return BIB_OK;
}

bib_status_t bib_cu_elapsed(bib_executor_t *ex, double *ms) {
    *ms = 0;
    bib_status_t st = bib_cu_enter(ex);
    if (st == BIB_OK)
        st = bib_cu_time_fold(ex);
    *ms = ex->timed_ms;
    ex->timed_ms = 0;
    return st;
}

/* ---- launching ---------------------------------------------------------------- */

bib_status_t bib_cu_launch(bib_executor_t *ex, bib_cu_fn_t fn, uint32_t gx, uint32_t gy,
                           uint32_t gz, uint32_t bx, uint32_t by, uint32_t shared,
                           const bib_cu_args_t *args) {
    void *params[1] = {(void *)args};
    bib_status_t st = bib_cu_time_begin(ex);
    if (st != BIB_OK)
        return st;
    CUresult r =
        ex->api.LaunchKernel(ex->fn[fn], gx, gy, gz, bx, by, 1, shared, ex->stream, params, NULL);
    bib_cu_time_end(ex);
    ex->launches++;
    return bib_cu_check(ex, r, "cuLaunchKernel(%s, grid %ux%ux%u, block %ux%u, %u shared bytes)",
                        bib_cu_fn_names[fn], gx, gy, gz, bx, by, shared);
}

/* ---- device choice ---------------------------------------------------------- */

/* The selector is a device index or a substring of the device's name; no
 * selector: device 0, the driver's (and CUDA_VISIBLE_DEVICES') first. from
 * names the environment variable the selector came from (NULL: the caller's
 * --device), for the message when no device matches. */
static bib_status_t bib_cu_pick_device(bib_executor_t *ex, const char *selector, const char *from,
                                       char *why, size_t why_len) {
    char buf[32];
    int count = 0;
    CUresult r = ex->api.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuDeviceGetCount failed: %s",
                 bib_cu_error_name(&ex->api, r, buf, sizeof buf));
        return BIB_E_UNAVAILABLE;
    }
    if (count == 0) {
        snprintf(why, why_len, "no CUDA device (cuDeviceGetCount: 0)");
        return BIB_E_UNAVAILABLE;
    }
    int chosen = -1;
    for (int i = 0; i < count && chosen < 0; i++) {
        CUdevice dev;
        char name[256] = "";
        if (ex->api.DeviceGet(&dev, i) != CUDA_SUCCESS ||
            ex->api.DeviceGetName(name, (int)sizeof name, dev) != CUDA_SUCCESS)
            continue;
        if (!selector || !*selector || bib_device_selector_matches(selector, (uint32_t)i, name)) {
            chosen = i;
            ex->device = dev;
            snprintf(ex->name, sizeof ex->name, "%s", name);
        }
    }
    if (chosen < 0) {
        /* The devices there are, so that the selector can be mended. */
        size_t used =
            (size_t)snprintf(why, why_len, "no CUDA device matches '%s'%s%s%s; %d %s:", selector,
                             from ? " (from " : "", from ? from : "", from ? ")" : "", count,
                             count == 1 ? "device" : "devices");
        for (int i = 0; i < count && used < why_len; i++) {
            CUdevice dev;
            char name[256] = "?";
            if (ex->api.DeviceGet(&dev, i) == CUDA_SUCCESS)
                ex->api.DeviceGetName(name, (int)sizeof name, dev);
            used +=
                (size_t)snprintf(why + used, why_len - used, "%s %d '%s'", i ? "," : "", i, name);
        }
        return BIB_E_UNAVAILABLE;
    }
    ex->ordinal = chosen;
    return BIB_OK;
}

static bib_status_t bib_cu_query(bib_executor_t *ex, char *why, size_t why_len) {
    char buf[32];
    struct {
        int *out;
        CUdevice_attribute attr;
        const char *what;
    } q[] = {
        {&ex->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability"},
        {&ex->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability"},
        {&ex->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"},
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        CUresult r = ex->api.DeviceGetAttribute(q[i].out, q[i].attr, ex->device);
        if (r != CUDA_SUCCESS) {
            snprintf(why, why_len, "cuDeviceGetAttribute(%s) failed: %s", q[i].what,
                     bib_cu_error_name(&ex->api, r, buf, sizeof buf));
            return BIB_E_UNAVAILABLE;
        }
    }
    CUresult r = ex->api.DeviceTotalMem(&ex->total_memory, ex->device);
    if (r == CUDA_SUCCESS)
        r = ex->api.DriverGetVersion(&ex->driver_version);
    if (r != CUDA_SUCCESS) {
        snprintf(why, why_len, "cuDeviceTotalMem_v2/cuDriverGetVersion failed: %s",
                 bib_cu_error_name(&ex->api, r, buf, sizeof buf));
        return BIB_E_UNAVAILABLE;
    }
    /* The fatbin holds SASS from sm_75 up and compute_90 PTX. */
    if (ex->cc_major * 10 + ex->cc_minor < 75) {
        snprintf(why, why_len,
                 "'%s' has compute capability %d.%d; BIB's CUDA kernels need 7.5 or newer",
                 ex->name, ex->cc_major, ex->cc_minor);
        return BIB_E_UNAVAILABLE;
    }
    return BIB_OK;
}

static bib_status_t bib_cu_load_modules(bib_executor_t *ex) {
    bib_status_t st;
    for (const bib_cu_fatbin_t *f = bib_cu_fatbins; f->name; f++) {
        if (ex->module_count == BIB_CU_MAX_MODULES)
            return bib_cu_fail(ex, BIB_E_UNAVAILABLE, "cuda: more than %d kernel modules",
                               BIB_CU_MAX_MODULES);
        CUmodule m = NULL;
        if ((st = bib_cu_check(ex, ex->api.ModuleLoadData(&m, f->image),
                               "cuModuleLoadData(%s, %zu bytes)", f->name, f->bytes)) != BIB_OK)
            return st;
        ex->modules[ex->module_count++] = m;
    }
    for (int i = 0; i < BIB_CU_FN__COUNT; i++) {
        uint32_t m = 0;
        while (m < ex->module_count && strcmp(bib_cu_fatbins[m].name, bib_cu_fn_modules[i]) != 0)
            m++;
        if (m == ex->module_count)
            return bib_cu_fail(ex, BIB_E_UNAVAILABLE, "cuda: no embedded module '%s' for %s",
                               bib_cu_fn_modules[i], bib_cu_fn_names[i]);
        if ((st = bib_cu_check(
                 ex, ex->api.ModuleGetFunction(&ex->fn[i], ex->modules[m], bib_cu_fn_names[i]),
                 "cuModuleGetFunction(%s)", bib_cu_fn_names[i])) != BIB_OK)
            return st;
    }
    return bib_cu_check(ex,
                        ex->api.FuncGetAttribute(&ex->binary_version,
                                                 CU_FUNC_ATTRIBUTE_BINARY_VERSION,
                                                 ex->fn[BIB_CU_FN_MATMUL_BIG_VEC_NONE]),
                        "cuFuncGetAttribute(BINARY_VERSION)");
}

/* ---- init and shutdown ------------------------------------------------------ */

/* Whether the stream still runs work that a wait of at most the timeout
 * does not see end (the executor is then lost). */
static bool bib_cu_still_busy(bib_executor_t *ex) {
    if (ex->lost)
        return ex->api.CtxSetCurrent(ex->ctx) != CUDA_SUCCESS ||
               ex->api.StreamQuery(ex->stream) == CUDA_ERROR_NOT_READY;
    return ex->ctx && ex->stream && ex->timeout_ms > 0 && bib_cu_enter(ex) == BIB_OK &&
           bib_cu_wait(ex) == BIB_E_TIMEOUT;
}

void bib_cu_shutdown(bib_executor_t *ex) {
    if (!ex)
        return;
    /* Work that runs past the timeout may still use the memory, the modules
       and the context, and the driver library's threads may be in it: all
       of that stays until the process ends (cuStreamSynchronize, cuMemFree
       or cuModuleUnload would wait for the work). */
    if (bib_cu_still_busy(ex)) {
        free(ex->events);
        free(ex);
        return;
    }
    ex->lost = false;
    if (ex->ctx) {
        if (bib_cu_enter(ex) == BIB_OK) {
            if (ex->stream)
                ex->api.StreamSynchronize(ex->stream);
            for (uint32_t i = 0; i < ex->events_made; i++)
                ex->api.EventDestroy(ex->events[i]);
            bib_cu_memory_shutdown(ex);
            for (uint32_t i = 0; i < ex->module_count; i++)
                ex->api.ModuleUnload(ex->modules[i]);
            if (ex->stream)
                ex->api.StreamDestroy(ex->stream);
        }
        ex->api.DevicePrimaryCtxRelease(ex->device);
    }
    bib_cu_api_unload(&ex->api);
    free(ex->events);
    free(ex);
}

bib_status_t bib_cu_init(const bib_executor_config_t *config, bib_executor_t **out, char *why,
                         size_t why_len) {
    *out = NULL;
    if (why_len)
        why[0] = 0;
    bib_executor_t *ex = calloc(1, sizeof *ex);
    if (!ex) {
        snprintf(why, why_len, "out of host memory");
        return BIB_E_NOMEM;
    }
    char buf[32];
    bib_status_t st = bib_cu_api_load(&ex->api, why, why_len);
    if (st == BIB_OK) {
        CUresult r = ex->api.Init(0);
        if (r != CUDA_SUCCESS) {
            snprintf(why, why_len, "cuInit failed: %s",
                     bib_cu_error_name(&ex->api, r, buf, sizeof buf));
            st = BIB_E_UNAVAILABLE;
        }
    }
    /* Lets tests run either tile configuration of MATMUL at any size, and
       one GPU run time the candidates for the big one. */
    const char *tiles = getenv("BIB_CUDA_MATMUL_TILES");
    ex->matmul_tiles = tiles && (atoi(tiles) == 64 || atoi(tiles) == 128) ? atoi(tiles) : 0;
    /* Shared memory past the static 48 KiB: STAGES * BK * (BM + 4 + BN)
       floats, as shaders/cuda/matmul.cu lays it out. */
    static const struct {
        const char *name;
        int fn;
        uint32_t tile_m, shared;
    } tune[] = {{"bk8", BIB_CU_FN_MATMUL_TUNE_BK8, 128, 0},
                {"m256", BIB_CU_FN_MATMUL_TUNE_M256, 256, 0},
                {"k16s3", BIB_CU_FN_MATMUL_TUNE_K16S3, 128, 3 * 16 * (132 + 128) * 4},
                {"k32", BIB_CU_FN_MATMUL_TUNE_K32, 128, 2 * 32 * (132 + 128) * 4},
                {"m256k16", BIB_CU_FN_MATMUL_TUNE_M256K16, 256, 2 * 16 * (260 + 128) * 4}};
    ex->matmul_tune = 0;
    for (size_t i = 0; tiles && i < sizeof tune / sizeof tune[0]; i++)
        if (strcmp(tiles, tune[i].name) == 0) {
            ex->matmul_tiles = 128, ex->matmul_tune = tune[i].fn;
            ex->matmul_tune_m = tune[i].tile_m, ex->matmul_tune_shared = tune[i].shared;
        }
    const char *selector = getenv("BIB_CUDA_DEVICE"), *from = "BIB_CUDA_DEVICE";
    if (config && config->device && *config->device)
        selector = config->device, from = NULL;
    ex->timeout_ms = config ? config->timeout_ms : 0;
    if (st == BIB_OK)
        st = bib_cu_pick_device(ex, selector, from, why, why_len);
    if (st == BIB_OK)
        st = bib_cu_query(ex, why, why_len);
    if (st == BIB_OK) {
        CUresult r = ex->api.DevicePrimaryCtxRetain(&ex->ctx, ex->device);
        if (r != CUDA_SUCCESS) {
            ex->ctx = NULL;
            snprintf(why, why_len, "cuDevicePrimaryCtxRetain failed on '%s': %s", ex->name,
                     bib_cu_error_name(&ex->api, r, buf, sizeof buf));
            st = r == CUDA_ERROR_OUT_OF_MEMORY ? BIB_E_NOMEM : BIB_E_UNAVAILABLE;
        }
    }
    if (st == BIB_OK && (st = bib_cu_enter(ex)) == BIB_OK)
        st = bib_cu_check(ex, ex->api.StreamCreate(&ex->stream, CU_STREAM_NON_BLOCKING),
                          "cuStreamCreate");
    if (st == BIB_OK)
        st = bib_cu_load_modules(ex);
    if (st == BIB_OK)
        st = bib_cu_memory_init(ex);
    if (st != BIB_OK) {
        if (why_len && !why[0])
            snprintf(why, why_len, "%s", ex->error);
        bib_cu_shutdown(ex);
        return st == BIB_E_NOMEM ? st : BIB_E_UNAVAILABLE;
    }
    snprintf(ex->describe, sizeof ex->describe,
             "cuda: %s (device %d, compute capability %d.%d, %d SMs, %.1f GiB), driver %d.%d; "
             "kernels: sm_%d code from the embedded fatbin; fp32 exact: fma fused (__fmaf_rn), "
             "no contraction (--fmad=false), denormals preserved (-ftz=false), IEEE div/sqrt",
             ex->name, ex->ordinal, ex->cc_major, ex->cc_minor, ex->sm_count,
             (double)ex->total_memory / (double)(1ull << 30), ex->driver_version / 1000,
             ex->driver_version % 1000 / 10, ex->binary_version);
    bib_device_facts_t *f = &ex->facts;
    snprintf(f->name, sizeof f->name, "%s", ex->name);
    snprintf(f->kind, sizeof f->kind, "GPU (compute capability %d.%d)", ex->cc_major, ex->cc_minor);
    snprintf(f->fma, sizeof f->fma, "fused (__fmaf_rn), no contraction (--fmad=false)");
    snprintf(f->denormals, sizeof f->denormals, "preserved (-ftz=false)");
    snprintf(f->rounding, sizeof f->rounding, "nearest-even, IEEE div/sqrt");
    f->fp64 = 1;
    f->memory_bytes = ex->total_memory;
    f->max_buffer_bytes = ex->total_memory;
    f->compute_units = (uint32_t)ex->sm_count;
    *out = ex;
    return BIB_OK;
}

const char *bib_cu_error(const bib_executor_t *ex) {
    return ex ? ex->error : "";
}

void bib_cu_facts(bib_executor_t *ex, bib_device_facts_t *out) {
    *out = ex->facts;
}

const char *bib_cu_describe(bib_executor_t *ex) {
    return ex->describe;
}

bib_status_t bib_cu_synchronize(bib_executor_t *ex) {
    bib_status_t st = bib_cu_enter(ex);
    return st == BIB_OK ? bib_cu_wait(ex) : st;
}

uint64_t bib_cuda_waits(const bib_executor_t *ex) {
    return ex->waits;
}

uint64_t bib_cuda_launches(const bib_executor_t *ex) {
    return ex->launches;
}

void bib_cuda_pool_stats(const bib_executor_t *ex, uint32_t *blocks, uint64_t *in_use) {
    uint32_t live = 0;
    for (uint32_t i = 0; i < ex->block_count; i++)
        live += ex->blocks[i].base != 0;
    *blocks = live;
    *in_use = ex->in_use;
}
