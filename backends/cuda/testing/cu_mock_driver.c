/* backends/cuda/testing/cu_mock_driver.c: a mock libcuda.so.1 for tests.
 *
 * Exports every entry point of BIB_CU_API (cu_internal.h) with the driver's
 * ABI: one device ("BIB mock CUDA device", compute capability 8.0), device
 * memory that is host memory (a CUdeviceptr is the host address), copies
 * done at once, a stream that is idle unless a test makes it busy (stream_busy). Modules loaded
 * with cuModuleLoadDataEx keep their PTX text: cuModuleGetFunction finds an entry only when the
 * text has ".entry NAME(", the parameter sizes come from its .param list, and PTX that has no
 * ".version" or says "bogus" is refused with a JIT log like ptxas's. cuLaunchKernel checks the
 * launch shape like the driver (no zero dimension, at most 1024 threads a block), records what it
 * was given (cu_mock_driver.h) and runs the one kernel "saxpy" (y = a*x + y over n floats) on host
 * memory; everything else it launches does nothing. Events read a mock device clock that launches,
 * copies and memsets advance by fixed steps (cu_mock_driver.h), so
 * cuEventElapsedTime gives exact, reproducible times. Not part of libbib: cuda.mk builds it as
 * $(BUILD)/tests/libcuda_mock.so. Its state is process-wide, as a driver's
 * is; tests that use it run one at a time (--jobs 1 or their own process).
 *
 * Built with BIB_CU_EMULATE (cuda.mk's $(BUILD)/tests/libcuda_emu.so, linked
 * with the kernel emulator cu_emu_sched.cpp and the g++ build of
 * shaders/cuda/<name>.cu), it also RUNS the built-in kernels: the device says it
 * is an emulator with the H100's compute capability 9.0 and 132 SMs (so the
 * executor picks the grids it would pick there), cuModuleGetFunction on a
 * fatbin finds only a kernel whose name the fatbin holds and the emulator
 * has, and cuLaunchKernel runs such a kernel over its whole grid before it
 * returns (cu_emu_launch.h). Without the flag none of that is compiled. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/testing/cu_mock_driver.h"
#if defined(BIB_CU_EMULATE)
#include "backends/cuda/testing/cu_emu_launch.h"
#endif

/* The driver ABI: results are ints, handles are pointers, CUdeviceptr is
   unsigned long long (cuda.h is not included: its macros rename symbols). */
typedef int res_t;
typedef unsigned long long dptr_t;

#define OK 0
#define E_INVALID_VALUE 1
#define E_OUT_OF_MEMORY 2
#define E_INVALID_PTX 218
#define E_INVALID_HANDLE 400
#define E_NOT_FOUND 500
#define E_NOT_READY 600
#define JIT_ERROR_LOG_BUFFER 5
#define JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

#define EXPORT __attribute__((visibility("default")))

EXPORT bib_mock_cuda_t bib_mock_cuda;

typedef struct mock_function {
    struct mock_function *next; /* the module's functions, freed with it */
    char name[64];
    unsigned nparams;
    unsigned size[BIB_MOCK_CUDA_PARAMS];
    unsigned max_dynamic; /* cuFuncSetAttribute's MAX_DYNAMIC_SHARED_SIZE_BYTES, 0 unset */
#if defined(BIB_CU_EMULATE)
    void *emulated; /* the kernel's host build; NULL for PTX */
#endif
} mock_function_t;

typedef struct mock_module {
    char *ptx; /* NULL for a fatbin (the built-in kernels) */
    mock_function_t *fns;
#if defined(BIB_CU_EMULATE)
    const unsigned char *fatbin; /* the image, and its length from its header */
    size_t fatbin_size;
#endif
} mock_module_t;

static int mock_context; /* its address is the one context */
static void *mock_current;
static int mock_stream;
static double mock_clock_ms; /* the device clock events read */

typedef struct mock_event {
    int recorded;
    double at_ms;
} mock_event_t;

EXPORT res_t cuGetErrorName(res_t r, const char **s) {
    switch (r) {
    case OK:
        *s = "CUDA_SUCCESS";
        return OK;
    case E_INVALID_VALUE:
        *s = "CUDA_ERROR_INVALID_VALUE";
        return OK;
    case E_OUT_OF_MEMORY:
        *s = "CUDA_ERROR_OUT_OF_MEMORY";
        return OK;
    case E_INVALID_PTX:
        *s = "CUDA_ERROR_INVALID_PTX";
        return OK;
    case E_INVALID_HANDLE:
        *s = "CUDA_ERROR_INVALID_HANDLE";
        return OK;
    case E_NOT_FOUND:
        *s = "CUDA_ERROR_NOT_FOUND";
        return OK;
    case E_NOT_READY:
        *s = "CUDA_ERROR_NOT_READY";
        return OK;
    case 700:
        *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
        return OK;
    default:
        *s = NULL;
        return E_INVALID_VALUE;
    }
}

EXPORT res_t cuInit(unsigned flags) {
    (void)flags;
    const char *busy = getenv("BIB_MOCK_CUDA_STREAM_BUSY");
    if (busy != NULL && strcmp(busy, "1") == 0)
        bib_mock_cuda.stream_busy = -1;
    return OK;
}
EXPORT res_t cuDriverGetVersion(int *v) {
    *v = 12040;
    return OK;
}
EXPORT res_t cuDeviceGetCount(int *n) {
    *n = 1;
    return OK;
}
EXPORT res_t cuDeviceGet(int *dev, int ordinal) {
    if (ordinal != 0)
        return E_INVALID_VALUE;
    *dev = 0;
    return OK;
}
#if defined(BIB_CU_EMULATE)
#define MOCK_DEVICE_NAME "BIB CUDA kernel emulator (on the CPU, no GPU)"
#define MOCK_CC_MAJOR 9
#define MOCK_SMS 132
#else
#define MOCK_DEVICE_NAME "BIB mock CUDA device"
#define MOCK_CC_MAJOR 8
#define MOCK_SMS 4
#endif

EXPORT res_t cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    snprintf(name, (size_t)len, MOCK_DEVICE_NAME);
    return OK;
}
EXPORT res_t cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    /* 75/76: compute capability major/minor; 16: multiprocessors. */
    *v = attr == 75 ? MOCK_CC_MAJOR : attr == 76 ? 0 : attr == 16 ? MOCK_SMS : 0;
    return OK;
}
EXPORT res_t cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    (void)dev;
    *bytes = (size_t)1 << 30;
    return OK;
}
EXPORT res_t cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    (void)dev;
    *ctx = &mock_context;
    return OK;
}
EXPORT res_t cuDevicePrimaryCtxRelease_v2(int dev) {
    (void)dev;
    return OK;
}
EXPORT res_t cuCtxGetCurrent(void **ctx) {
    *ctx = mock_current;
    return OK;
}
EXPORT res_t cuCtxSetCurrent(void *ctx) {
    mock_current = ctx;
    return OK;
}
EXPORT res_t cuStreamCreate(void **s, unsigned flags) {
    (void)flags;
    *s = &mock_stream;
    return OK;
}
EXPORT res_t cuStreamDestroy_v2(void *s) {
    (void)s;
    return OK;
}
EXPORT res_t cuStreamSynchronize(void *s) {
    (void)s;
    bib_mock_cuda.stream_syncs++;
    return OK;
}
EXPORT res_t cuStreamQuery(void *s) {
    (void)s;
    bib_mock_cuda.stream_queries++;
    if (bib_mock_cuda.stream_busy > 0)
        bib_mock_cuda.stream_busy--;
    else if (bib_mock_cuda.stream_busy == 0)
        return OK;
    return E_NOT_READY;
}

EXPORT res_t cuModuleLoadData(void **module, const void *image) {
    (void)image;
    mock_module_t *m = calloc(1, sizeof *m);
    if (!m)
        return E_OUT_OF_MEMORY;
#if defined(BIB_CU_EMULATE)
    /* A fatbin starts with magic 0xBA55ED50, a 16-bit version, a 16-bit
     * header size and a 64-bit size of what follows the header. */
    uint32_t magic;
    uint16_t header;
    uint64_t body;
    memcpy(&magic, image, 4);
    memcpy(&header, (const unsigned char *)image + 6, 2);
    memcpy(&body, (const unsigned char *)image + 8, 8);
    if (magic != 0xBA55ED50u) {
        free(m);
        return E_INVALID_VALUE;
    }
    m->fatbin = image;
    m->fatbin_size = header + body;
#endif
    *module = m;
    bib_mock_cuda.modules_live++;
    return OK;
}

static void mock_log(char *log, size_t cap, const char *fmt, int line) {
    if (log && cap)
        snprintf(log, cap, fmt, line);
}

EXPORT res_t cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *opts,
                                void **vals) {
    char *log = NULL;
    size_t cap = 0;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == JIT_ERROR_LOG_BUFFER)
            log = vals[i];
        else if (opts[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            cap = (size_t)(uintptr_t)vals[i];
    }
    const char *ptx = image;
    if (!strstr(ptx, ".version")) {
        mock_log(log, cap, "ptxas application ptx input, line %d; fatal   : Missing .version\n", 1);
        return E_INVALID_PTX;
    }
    const char *bad = strstr(ptx, "bogus");
    if (bad) {
        int line = 1;
        for (const char *p = ptx; p < bad; p++)
            line += *p == '\n';
        mock_log(log, cap,
                 "ptxas application ptx input, line %d; error   : Unknown instruction 'bogus'\n"
                 "ptxas fatal   : Ptx assembly aborted due to errors\n",
                 line);
        return E_INVALID_PTX;
    }
    mock_module_t *m = calloc(1, sizeof *m);
    if (!m || !(m->ptx = strdup(ptx))) {
        free(m);
        return E_OUT_OF_MEMORY;
    }
    *module = m;
    bib_mock_cuda.modules_live++;
    return OK;
}

EXPORT res_t cuModuleUnload(void *module) {
    mock_module_t *m = module;
    while (m->fns) {
        mock_function_t *f = m->fns;
        m->fns = f->next;
        free(f);
    }
    free(m->ptx);
    free(m);
    bib_mock_cuda.modules_live--;
    return OK;
}

/* ".param .u64 name" and the like, up to the entry's ')'. */
static void mock_params(const char *p, mock_function_t *f) {
    while (*p && *p != ')' && f->nparams < BIB_MOCK_CUDA_PARAMS) {
        const char *q = strstr(p, ".param");
        const char *end = strchr(p, ')');
        if (!q || (end && q > end))
            break;
        q += 6;
        while (*q == ' ' || *q == '\t')
            q++;
        unsigned size = 4;
        if (!strncmp(q, ".u64", 4) || !strncmp(q, ".s64", 4) || !strncmp(q, ".b64", 4) ||
            !strncmp(q, ".f64", 4))
            size = 8;
        f->size[f->nparams++] = size;
        p = q;
    }
}

EXPORT res_t cuModuleGetFunction(void **fn, void *module, const char *name) {
    mock_module_t *m = module;
    mock_function_t *f = calloc(1, sizeof *f);
    if (!f)
        return E_OUT_OF_MEMORY;
    snprintf(f->name, sizeof f->name, "%s", name);
    if (m->ptx) {
        char want[96];
        snprintf(want, sizeof want, ".entry %s(", name);
        const char *at = strstr(m->ptx, want);
        if (!at) {
            free(f);
            return E_NOT_FOUND;
        }
        mock_params(at + strlen(want), f);
    }
#if defined(BIB_CU_EMULATE)
    else {
        /* The name must be a symbol of this very fatbin (its ELF string
         * tables hold it NUL-terminated), and the emulator must have it. */
        size_t len = strlen(name) + 1;
        const unsigned char *p = m->fatbin, *end = m->fatbin + m->fatbin_size;
        int found = 0;
        while (!found && p && (size_t)(end - p) >= len) {
            p = memchr(p, name[0], (size_t)(end - p) - len + 1);
            if (p && !memcmp(p, name, len) && (p == m->fatbin || p[-1] == 0))
                found = 1;
            else if (p)
                p++;
        }
        if (!found || !(f->emulated = bib_cu_emu_kernel(name))) {
            free(f);
            return E_NOT_FOUND;
        }
    }
#endif
    f->next = m->fns;
    m->fns = f;
    *fn = f;
    return OK;
}

EXPORT res_t cuFuncGetAttribute(int *v, int attr, void *fn) {
    (void)attr, (void)fn;
    *v = MOCK_CC_MAJOR * 10;
    return OK;
}

/* MAX_DYNAMIC_SHARED_SIZE_BYTES (8) opts a function into dynamic shared
 * memory past 48 KiB, up to an H100's 227 KiB; other attributes are
 * accepted and ignored. */
EXPORT res_t cuFuncSetAttribute(void *fn, int attr, int value) {
    mock_function_t *f = fn;
    if (attr != 8)
        return OK;
    if (value < 0 || value > 227 * 1024)
        return E_INVALID_VALUE;
    f->max_dynamic = (unsigned)value;
    return OK;
}

static void mock_saxpy(const mock_function_t *f, unsigned threads) {
    if (f->nparams != 4 || f->size[0] != 8 || f->size[1] != 8)
        return;
    uint64_t xp, yp;
    float a;
    int32_t n;
    memcpy(&xp, bib_mock_cuda.param[0], 8);
    memcpy(&yp, bib_mock_cuda.param[1], 8);
    memcpy(&a, bib_mock_cuda.param[2], 4);
    memcpy(&n, bib_mock_cuda.param[3], 4);
    const float *x = (const float *)(uintptr_t)xp;
    float *y = (float *)(uintptr_t)yp;
    for (int32_t i = 0; i < n && (unsigned)i < threads; i++) {
        float p = a * x[i];
        y[i] = p + y[i];
    }
}

EXPORT res_t cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                            void **extra) {
    (void)extra;
    const mock_function_t *f = fn;
    if (bib_mock_cuda.fail_launch)
        return bib_mock_cuda.fail_launch;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return E_INVALID_VALUE;
    if (f->nparams > 0 && !params)
        return E_INVALID_VALUE;
    if (shared > 48 * 1024 && shared > f->max_dynamic)
        return E_INVALID_VALUE; /* past 48 KiB only after cuFuncSetAttribute */
    snprintf(bib_mock_cuda.last_entry, sizeof bib_mock_cuda.last_entry, "%s", f->name);
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    memcpy(bib_mock_cuda.grid, g, sizeof g);
    memcpy(bib_mock_cuda.block, b, sizeof b);
    bib_mock_cuda.shared = shared;
    bib_mock_cuda.stream = stream;
    bib_mock_cuda.nparams = f->nparams;
    memset(bib_mock_cuda.param, 0, sizeof bib_mock_cuda.param);
    for (unsigned i = 0; i < f->nparams; i++) {
        bib_mock_cuda.param_size[i] = f->size[i];
        memcpy(bib_mock_cuda.param[i], params[i], f->size[i]);
    }
    bib_mock_cuda.launches++;
    mock_clock_ms += 1.0;
    if (!strcmp(f->name, "saxpy"))
        mock_saxpy(f, gx * bx);
#if defined(BIB_CU_EMULATE)
    /* Every built-in kernel takes one bib_cu_args_t (cu_args.h). */
    if (f->emulated) {
        if (!params)
            return E_INVALID_VALUE;
        bib_cu_emu_launch(f->emulated, f->name, g, b, shared, f->max_dynamic, params[0]);
    }
#endif
    return OK;
}

EXPORT res_t cuMemAlloc_v2(dptr_t *p, size_t bytes) {
    if (bytes > ((size_t)1 << 30))
        return E_OUT_OF_MEMORY;
    void *m = calloc(1, bytes);
    if (!m)
        return E_OUT_OF_MEMORY;
    *p = (dptr_t)(uintptr_t)m;
    return OK;
}
EXPORT res_t cuMemFree_v2(dptr_t p) {
    free((void *)(uintptr_t)p);
    return OK;
}
EXPORT res_t cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    *free_bytes = *total = (size_t)1 << 30;
    return OK;
}
EXPORT res_t cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    *p = malloc(bytes);
    return *p ? OK : E_OUT_OF_MEMORY;
}
EXPORT res_t cuMemFreeHost(void *p) {
    free(p);
    return OK;
}
EXPORT res_t cuMemcpyHtoDAsync_v2(dptr_t dst, const void *src, size_t n, void *s) {
    (void)s;
    mock_clock_ms += 0.5;
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}
EXPORT res_t cuMemcpyDtoHAsync_v2(void *dst, dptr_t src, size_t n, void *s) {
    (void)s;
    mock_clock_ms += 0.5;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}
EXPORT res_t cuMemcpyDtoDAsync_v2(dptr_t dst, dptr_t src, size_t n, void *s) {
    (void)s;
    mock_clock_ms += 0.5;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}
EXPORT res_t cuMemsetD32Async(dptr_t dst, unsigned v, size_t n, void *s) {
    (void)s;
    mock_clock_ms += 0.5;
    uint32_t *p = (uint32_t *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++)
        p[i] = v;
    return OK;
}

EXPORT res_t cuEventCreate(void **event, unsigned flags) {
    (void)flags;
    mock_event_t *e = calloc(1, sizeof *e);
    if (!e)
        return E_OUT_OF_MEMORY;
    *event = e;
    bib_mock_cuda.events_live++;
    return OK;
}
EXPORT res_t cuEventRecord(void *event, void *stream) {
    (void)stream;
    if (bib_mock_cuda.fail_event_record)
        return bib_mock_cuda.fail_event_record;
    mock_event_t *e = event;
    e->recorded = 1;
    e->at_ms = mock_clock_ms;
    bib_mock_cuda.event_records++;
    return OK;
}
EXPORT res_t cuEventSynchronize(void *event) {
    return ((mock_event_t *)event)->recorded ? OK : E_INVALID_HANDLE;
}
/* Only the _v2 name: the executor must find it (CUDA 12.8 and later). */
EXPORT res_t cuEventElapsedTime_v2(float *ms, void *start, void *end) {
    const mock_event_t *a = start, *b = end;
    if (!a->recorded || !b->recorded)
        return E_INVALID_HANDLE;
    *ms = (float)(b->at_ms - a->at_ms);
    return OK;
}
EXPORT res_t cuEventDestroy_v2(void *event) {
    free(event);
    bib_mock_cuda.events_live--;
    return OK;
}
