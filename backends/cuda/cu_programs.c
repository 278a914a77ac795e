/* backends/cuda/cu_programs.c: user CUDA kernels (GPU_LAUNCH).
 *
 * Owns the CUDA side of spec/device-code.md: a program is the module's PTX
 * loaded into the executor's context with cuModuleLoadDataEx (the driver's
 * JIT error log goes into the error message, so a PTX mistake says which
 * line and why), the CUfunction of its entry and its parameter signature.
 * A dispatch builds kernelParams on the stack by walking the signature and
 * queues one cuLaunchKernel on the executor's stream without waiting, so
 * user kernels and built-in ones run in program order on one stream. The
 * PTX is compiled by the driver with its defaults: BIB's numerics contract
 * covers its own kernels only. Modules are unloaded once the stream is idle,
 * because queued launches may still use them. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cu_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "an 'i'/'f' parameter is the low 4 bytes of a little-endian slot"
#endif

/* BIB_MAX_KERNEL_PARAMS in module/module.h: the verifier never lets more through. */
#define BIB_CU_PROGRAM_PARAMS 32u
/* The JIT log kept for the error message; ex->error bounds what is shown. */
#define BIB_CU_JIT_LOG 2048u

typedef struct bib_cu_program {
    CUmodule module;
    CUfunction function;
    uint32_t nparams, ntensors, nslots;
    char signature[BIB_CU_PROGRAM_PARAMS + 1];
    char entry[128]; /* for messages only: cut when longer */
} bib_cu_program_t;

/* The JIT log as one line: its lines joined with "; ", runs of blanks as one. */
static void bib_cu_log_line(const char *log, char *out, size_t out_len) {
    size_t w = 0;
    bool space = false, newline = false;
    for (; *log && w + 3 < out_len; log++) {
        char c = *log;
        if (c == '\n' || c == '\r') {
            newline = w > 0;
            continue;
        }
        if (c == ' ' || c == '\t') {
            space = w > 0;
            continue;
        }
        if (newline) {
            out[w++] = ';';
            out[w++] = ' ';
        } else if (space) {
            out[w++] = ' ';
        }
        newline = space = false;
        out[w++] = c;
    }
    out[w] = 0;
}

static bib_status_t bib_cu_program_check(bib_executor_t *ex, bib_program_kind_t kind,
                                         const char *code, size_t size, const char *entry,
                                         const char *signature, bib_cu_program_t *p) {
    if (kind != BIB_PROGRAM_PTX)
        return bib_cu_fail(ex, BIB_E_UNAVAILABLE,
                           "cuda: runs PTX kernels only, not program kind %d", (int)kind);
    if (!entry || !*entry)
        return bib_cu_fail(ex, BIB_E_USAGE, "cuda: a kernel needs an entry name");
    if (!code || size == 0 || code[size - 1] != 0 || memchr(code, 0, size - 1))
        return bib_cu_fail(ex, BIB_E_USAGE,
                           "cuda: kernel '%s': the PTX must be text ending in its one NUL", entry);
    size_t n = signature ? strlen(signature) : 0;
    if (n > BIB_CU_PROGRAM_PARAMS)
        return bib_cu_fail(ex, BIB_E_USAGE, "cuda: kernel '%s' has %zu parameters; at most %u",
                           entry, n, BIB_CU_PROGRAM_PARAMS);
    for (size_t i = 0; i < n; i++) {
        if (!strchr("tilfd", signature[i]))
            return bib_cu_fail(ex, BIB_E_USAGE,
                               "cuda: kernel '%s': parameter %zu has type '%c'; expected one of "
                               "t i l f d",
                               entry, i, signature[i]);
        if (signature[i] == 't')
            p->ntensors++;
        else
            p->nslots++;
    }
    p->nparams = (uint32_t)n;
    memcpy(p->signature, signature ? signature : "", n + 1);
    snprintf(p->entry, sizeof p->entry, "%s", entry);
    return BIB_OK;
}

bib_status_t bib_cu_program_create(bib_executor_t *ex, bib_program_kind_t kind, const void *code,
                                   size_t size, const char *entry, uint32_t bindings,
                                   uint32_t push_bytes, const char *signature, void **prog) {
    (void)bindings, (void)push_bytes;
    if (prog)
        *prog = NULL;
    if (!ex || !prog)
        return BIB_E_UNAVAILABLE;
    bib_cu_program_t *p = calloc(1, sizeof *p);
    if (!p)
        return bib_cu_fail(ex, BIB_E_NOMEM, "cuda: out of host memory for a kernel");
    bib_status_t st = bib_cu_program_check(ex, kind, code, size, entry, signature, p);
    if (st == BIB_OK)
        st = bib_cu_enter(ex);
    if (st != BIB_OK) {
        free(p);
        return st;
    }
    char log[BIB_CU_JIT_LOG] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = ex->api.ModuleLoadDataEx(&p->module, code, 2, opts, vals);
    if (r != CUDA_SUCCESS) {
        char buf[32];
        const char *name = bib_cu_error_name(&ex->api, r, buf, sizeof buf);
        log[sizeof log - 1] = 0;
        char line[BIB_CU_JIT_LOG];
        bib_cu_log_line(log, line, sizeof line);
        free(p);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return bib_cu_fail(ex, BIB_E_NOMEM, "cuModuleLoadDataEx(entry '%s'): %s", entry, name);
        return bib_cu_fail(ex, BIB_E_UNAVAILABLE,
                           "the driver rejected its PTX (cuModuleLoadDataEx: %s)%s%s", name,
                           line[0] ? ": " : "", line[0] ? line : "; the JIT gave no log");
    }
    r = ex->api.ModuleGetFunction(&p->function, p->module, entry);
    if (r != CUDA_SUCCESS) {
        char buf[32];
        const char *name = bib_cu_error_name(&ex->api, r, buf, sizeof buf);
        ex->api.ModuleUnload(p->module);
        free(p);
        if (r == CUDA_ERROR_NOT_FOUND)
            return bib_cu_fail(ex, BIB_E_UNAVAILABLE,
                               "no entry '%s' in its PTX (cuModuleGetFunction: %s)", entry, name);
        return bib_cu_fail(ex, BIB_E_UNAVAILABLE, "cuModuleGetFunction(entry '%s'): %s", entry,
                           name);
    }
    *prog = p;
    return BIB_OK;
}

bib_status_t bib_cu_program_dispatch(bib_executor_t *ex, void *prog, void *const *buffers,
                                     const uint64_t *sizes, uint32_t nbuffers, const void *push,
                                     uint32_t push_bytes, const uint32_t groups[3],
                                     const uint32_t block[3]) {
    (void)sizes;
    if (!ex)
        return BIB_E_UNAVAILABLE;
    const bib_cu_program_t *p = prog;
    if (!p || !groups || !block || (p->ntensors > 0 && !buffers) || (p->nslots > 0 && !push))
        return bib_cu_fail(ex, BIB_E_USAGE,
                           "cuda: a launch needs a kernel, a grid, a block and its arguments");
    if (nbuffers != p->ntensors || push_bytes != p->nslots * 8u)
        return bib_cu_fail(ex, BIB_E_USAGE,
                           "cuda: kernel '%s' (signature '%s') takes %u tensors and %u other "
                           "parameters; the launch gives %u tensors and %u bytes of slots",
                           p->entry, p->signature, p->ntensors, p->nslots, nbuffers, push_bytes);
    bib_status_t st = bib_cu_enter(ex);
    if (st != BIB_OK)
        return st;
    /* The driver copies every parameter's bytes during cuLaunchKernel, so
       pointers into this frame and into the caller's slots are enough. */
    CUdeviceptr ptrs[BIB_CU_PROGRAM_PARAMS];
    void *params[BIB_CU_PROGRAM_PARAMS];
    const uint8_t *slot = push;
    uint32_t nt = 0;
    for (uint32_t i = 0; i < p->nparams; i++) {
        if (p->signature[i] == 't') {
            const bib_cu_buffer_t *b = buffers[nt];
            if (!b)
                return bib_cu_fail(ex, BIB_E_USAGE,
                                   "cuda: kernel '%s': tensor parameter %u "
                                   "has no buffer",
                                   p->entry, i);
            ptrs[nt] = b->ptr;
            params[i] = &ptrs[nt++];
        } else {
            /* 'i' and 'f' read the slot's low 4 bytes, 'l' and 'd' all 8:
               on a little-endian host both start at the slot. */
            params[i] = (void *)slot;
            slot += 8;
        }
    }
    if ((st = bib_cu_time_begin(ex)) != BIB_OK)
        return st;
    CUresult r =
        ex->api.LaunchKernel(p->function, groups[0], groups[1], groups[2], block[0], block[1],
                             block[2], 0, ex->stream, p->nparams ? params : NULL, NULL);
    bib_cu_time_end(ex);
    ex->launches++;
    return bib_cu_check(ex, r, "cuLaunchKernel(kernel '%s', grid %ux%ux%u, block %ux%ux%u)",
                        p->entry, groups[0], groups[1], groups[2], block[0], block[1], block[2]);
}

void bib_cu_program_destroy(bib_executor_t *ex, void *prog) {
    bib_cu_program_t *p = prog;
    if (!p)
        return;
    if (ex && p->module && bib_cu_enter(ex) == BIB_OK) {
        /* Launches still queued may use the module; keep the error of the
           work that failed, if any, for whoever asks next. */
        char keep[sizeof ex->error];
        memcpy(keep, ex->error, sizeof keep);
        bib_cu_wait(ex); /* at most the timeout: past it the module stays loaded */
        if (!ex->lost)
            ex->api.ModuleUnload(p->module);
        memcpy(ex->error, keep, sizeof keep);
    }
    free(p);
}

/* Work queued on a stream is already on its way to the device; asking the
   stream about it pushes the driver's queue out and reports a fault of
   earlier work without waiting for the rest. */
bib_status_t bib_cu_submit(bib_executor_t *ex) {
    if (!ex)
        return BIB_E_UNAVAILABLE;
    bib_status_t st = bib_cu_enter(ex);
    if (st != BIB_OK)
        return st;
    CUresult r = ex->api.StreamQuery(ex->stream);
    return r == CUDA_ERROR_NOT_READY ? BIB_OK : bib_cu_check(ex, r, "cuStreamQuery");
}
