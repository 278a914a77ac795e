/* backends/cpu/cpu.c: the CPU executor (bib_cpu_executor).
 *
 * Owns the executor's life cycle (SIMD level and thread count chosen at init
 * from cpufeatures, BIB_CPU_LEVEL and BIB_THREADS), host buffers (mimalloc,
 * 64-byte aligned, zeroed so no stale bytes ever reach a result), transfers
 * and the kernel table. Kernels run synchronously on the caller's thread and
 * the pool; their bits are spec/numerics.md's, whatever the level or thread
 * count. The kernels themselves live in ops*.c and gemm*.c.
 */
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/threadpool.h"

#define CPU_BUFFER_ALIGN 64

struct bib_executor {
    bib_cpu_ctx_t ctx;
    uint32_t threads;
    char error[256];
    char description[160];
};

static bib_status_t cpu_init(const bib_executor_config_t *config, bib_executor_t **out, char *why,
                             size_t why_len) {
    *out = NULL;
    bib_cpu_features_t features;
    bib_cpu_detect(&features);
    bib_cpu_level_t level;
    bib_status_t st =
        bib_cpu_level_select(&features, getenv(BIB_CPU_LEVEL_ENV), &level, why, why_len);
    if (st != BIB_OK)
        return st;
    uint32_t threads;
    st = bib_cpu_threads_select(config ? config->threads : 0, getenv(BIB_THREADS_ENV), &threads,
                                why, why_len);
    if (st != BIB_OK)
        return st;
    bib_executor_t *ex = mi_zalloc(sizeof *ex);
    if (!ex) {
        snprintf(why, why_len, "cpu: out of memory for the executor");
        return BIB_E_NOMEM;
    }
    st = bib_threadpool_create(threads, &ex->ctx.pool, why, why_len);
    if (st != BIB_OK) {
        mi_free(ex);
        return st;
    }
    ex->threads = threads;
    ex->ctx.level = level;
    ex->ctx.rowops = bib_cpu_rowops_for(level);
    ex->ctx.error = ex->error;
    ex->ctx.error_len = sizeof ex->error;
    snprintf(ex->description, sizeof ex->description,
             "cpu: %s, %u thread%s, fp32 bit-exact per spec/numerics.md (FTZ/DAZ off)",
             bib_cpu_level_name(level), threads, threads == 1 ? "" : "s");
    *out = ex;
    return BIB_OK;
}

static void cpu_shutdown(bib_executor_t *ex) {
    if (!ex)
        return;
    bib_threadpool_destroy(ex->ctx.pool);
    mi_free(ex);
}

static const char *cpu_error(const bib_executor_t *ex) {
    return ex->error;
}

static bib_status_t cpu_buffer_alloc(bib_executor_t *ex, size_t bytes, void **buf) {
    *buf = mi_zalloc_aligned(bytes ? bytes : 1, CPU_BUFFER_ALIGN);
    if (!*buf) {
        snprintf(ex->error, sizeof ex->error, "cpu: out of memory allocating a %zu-byte buffer",
                 bytes);
        return BIB_E_NOMEM;
    }
    return BIB_OK;
}

static void cpu_buffer_free(bib_executor_t *ex, void *buf) {
    (void)ex;
    mi_free(buf);
}

static bib_status_t check_range(bib_executor_t *ex, const char *what, void *buf, size_t offset,
                                size_t bytes) {
    size_t size = mi_usable_size(buf);
    if (offset > size || bytes > size - offset) {
        snprintf(ex->error, sizeof ex->error,
                 "cpu: %s of %zu bytes at offset %zu runs past the %zu-byte buffer", what, bytes,
                 offset, size);
        return BIB_E_USAGE;
    }
    return BIB_OK;
}

static bib_status_t cpu_upload(bib_executor_t *ex, void *buf, size_t offset_bytes, const void *src,
                               size_t bytes) {
    bib_status_t st = check_range(ex, "upload", buf, offset_bytes, bytes);
    if (st == BIB_OK && bytes)
        memcpy((char *)buf + offset_bytes, src, bytes);
    return st;
}

static bib_status_t cpu_download(bib_executor_t *ex, void *buf, size_t offset_bytes, void *dst,
                                 size_t bytes) {
    bib_status_t st = check_range(ex, "download", buf, offset_bytes, bytes);
    if (st == BIB_OK && bytes)
        memcpy(dst, (const char *)buf + offset_bytes, bytes);
    return st;
}

static bib_status_t cpu_synchronize(bib_executor_t *ex) {
    (void)ex; /* every kernel has finished when its call returns */
    return BIB_OK;
}

static bib_status_t cpu_memory(bib_executor_t *ex, uint64_t *free_bytes, uint64_t *total_bytes) {
    long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES);
    long total = sysconf(_SC_PHYS_PAGES);
    if (page <= 0 || avail < 0 || total <= 0) {
        snprintf(ex->error, sizeof ex->error, "cpu: sysconf cannot report physical memory");
        return BIB_E_UNAVAILABLE;
    }
    *free_bytes = (uint64_t)avail * (uint64_t)page;
    *total_bytes = (uint64_t)total * (uint64_t)page;
    return BIB_OK;
}

static bool cpu_supports(bib_executor_t *ex, const bib_call_t *call) {
    (void)ex;
    return bib_cpu_ops_supports(call);
}

static bib_status_t cpu_kernel(bib_executor_t *ex, const bib_call_t *call) {
    ex->error[0] = '\0';
    return bib_cpu_ops_run(&ex->ctx, call);
}

static const char *cpu_describe(bib_executor_t *ex) {
    return ex->description;
}

static void cpu_facts(bib_executor_t *ex, bib_device_facts_t *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "cpu: %s, %u thread%s", bib_cpu_level_name(ex->ctx.level),
             ex->threads, ex->threads == 1 ? "" : "s");
    snprintf(out->kind, sizeof out->kind, "CPU");
    snprintf(out->fma, sizeof out->fma, "fused (one fma chain per output, spec/numerics.md)");
    snprintf(out->denormals, sizeof out->denormals, "preserved (FTZ/DAZ off)");
    snprintf(out->rounding, sizeof out->rounding, "nearest-even");
    out->fp64 = 1;
    out->max_threads = BIB_CPU_MAX_THREADS;
}

static void cpu_host_facts(bib_host_facts_t *facts) {
    memset(facts, 0, sizeof *facts);
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    const char *const names[] = {"sse2",    "avx",      "avx2",     "fma",
                                 "avx512f", "avx512dq", "avx512bw", "avx512vl"};
    const bool have[] = {f.sse2,    f.avx,      f.avx2,     f.fma,
                         f.avx512f, f.avx512dq, f.avx512bw, f.avx512vl};
    for (size_t i = 0; i < sizeof have / sizeof have[0]; i++)
        if (have[i])
            facts->features[facts->nfeatures++] = names[i];
    facts->os_saves_ymm = f.os_ymm;
    facts->os_saves_zmm = f.os_zmm;
    bib_cpu_level_t level;
    facts->level_ok = bib_cpu_level_select(&f, getenv(BIB_CPU_LEVEL_ENV), &level, facts->level,
                                           sizeof facts->level) == BIB_OK;
    if (facts->level_ok)
        snprintf(facts->level, sizeof facts->level, "%s", bib_cpu_level_name(level));
    facts->best_level = bib_cpu_level_name(bib_cpu_best_level(&f));
}

const bib_executor_ops_t bib_cpu_executor = {
    .name = "cpu",
    .id = BIB_EXECUTOR_CPU,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .error = cpu_error,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .synchronize = cpu_synchronize,
    .memory = cpu_memory,
    .supports = cpu_supports,
    /* The reference: one entry point for every kernel the descriptor gives
       the CPU executor (all of them: it is where every call falls back to). */
    .kernels =
        {
#define KERNEL(name, dtype, shape, args, cost, per_element, subs, executors, contract)             \
    [BIB_KERNEL_##name] = ((executors)&BIB_RUNS_ON_CPU) ? cpu_kernel : NULL,
#include "isa/kernels.def"
#undef KERNEL
        },
    .describe = cpu_describe,
    .facts = cpu_facts,
    .host_facts = cpu_host_facts,
};
