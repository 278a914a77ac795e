/* vm/info.c: bib_info_report, what this machine offers BIB (`bib info`).
 *
 * Owns gathering the facts (CPU model, cores, memory and SIMD features; each
 * GPU executor's devices and numerics paths, or why there are none; the
 * models --backend=auto measures) and writing them as text or JSON. The facts
 * come from the executors themselves (init, describe) and vm/placement.c, so
 * the report says what a run would really get. Nothing here is cached but
 * the placement models.
 */
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm/placement.h"
#include "vm/vm.h"

#define INFO_MAX_DEVICES 8

/* A growing string; on allocation failure it stays NULL and says so. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool failed;
} sbuf_t;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
put(sbuf_t *b, const char *format, ...) {
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, format);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, format, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->p != NULL && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->failed = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* s as a JSON string literal. */
static void put_json(sbuf_t *b, const char *s) {
    put(b, "\"");
    for (; s != NULL && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            put(b, "\\%c", c);
        else if (c < 0x20)
            put(b, "\\u%04x", c);
        else
            put(b, "%c", c);
    }
    put(b, "\"");
}

/* A device's facts as JSON members (after others: each starts with a comma). */
static void put_facts(sbuf_t *b, const bib_device_facts_t *f) {
    const char *names[] = {"name", "kind", "fma", "denormals", "rounding"};
    const char *values[] = {f->name, f->kind, f->fma, f->denormals, f->rounding};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        put(b, ",\"%s\":", names[i]);
        if (values[i][0])
            put_json(b, values[i]);
        else
            put(b, "null");
    }
    put(b, ",\"fp64\":%s", f->fp64 ? "true" : "false");
    put(b, ",\"memory_bytes\":");
    if (f->memory_bytes)
        put(b, "%" PRIu64, f->memory_bytes);
    else
        put(b, "null");
    put(b, ",\"limits\":{");
    const char *lnames[] = {"max_buffer_bytes", "max_workgroup", "shared_memory_bytes",
                            "compute_units", "max_threads"};
    uint64_t lvalues[] = {f->max_buffer_bytes, f->max_workgroup, f->shared_memory_bytes,
                          f->compute_units, f->max_threads};
    for (size_t i = 0; i < sizeof lnames / sizeof lnames[0]; i++) {
        put(b, "%s\"%s\":", i ? "," : "", lnames[i]);
        if (lvalues[i])
            put(b, "%" PRIu64, lvalues[i]);
        else
            put(b, "null");
    }
    put(b, "}");
}

/* ---- the facts ------------------------------------------------------------------ */

typedef struct device_fact {
    char text[512]; /* describe() */
    bool has_facts;
    bib_device_facts_t facts; /* facts(), when the executor has it */
} device_fact_t;

typedef struct executor_fact {
    const bib_executor_ops_t *ops;
    uint32_t ndevices;
    device_fact_t devices[INFO_MAX_DEVICES];
    char absent[256];        /* why there is no device ("" when there is one) */
    bool started;            /* the default device started: auto's candidate */
    bib_place_model_t model; /* auto's measurement of the default device */
    bool cached;
    char model_error[256];
} executor_fact_t;

static uint64_t meminfo_kib(const char *field) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            sscanf(line + n + 1, "%" SCNu64, &v);
            break;
        }
    fclose(f);
    return v;
}

static void cpu_model_name(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown (no 'model name' in /proc/cpuinfo)");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        const char *v = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || v == NULL)
            continue;
        for (v++; *v == ' ' || *v == '\t'; v++)
            ;
        snprintf(buf, cap, "%s", v);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

/* Enumerates the devices of a GPU executor by index and starts the default
 * one (the device options selects) for auto's measurement. */
static void gather_executor(const bib_options_t *o, const bib_executor_ops_t *ops,
                            bib_place_model_t *host, executor_fact_t *e) {
    memset(e, 0, sizeof *e);
    e->ops = ops;
    char why[256];
    for (uint32_t i = 0; i < INFO_MAX_DEVICES; i++) {
        char sel[16];
        snprintf(sel, sizeof sel, "%" PRIu32, i);
        bib_executor_config_t c = {.threads = o->threads, .device = sel};
        bib_executor_t *ex = NULL;
        why[0] = '\0';
        if (ops->init(&c, &ex, why, sizeof why) != BIB_OK) {
            if (i == 0)
                snprintf(e->absent, sizeof e->absent, "%s", why[0] ? why : "it failed to start");
            break;
        }
        const char *d = ops->describe != NULL ? ops->describe(ex) : NULL;
        snprintf(e->devices[i].text, sizeof e->devices[i].text, "%s", d ? d : ops->name);
        e->devices[i].has_facts = ops->facts != NULL;
        if (ops->facts != NULL)
            ops->facts(ex, &e->devices[i].facts);
        ops->shutdown(ex);
        /* A selector the executor ignores would give the same device forever. */
        if (i > 0 && strcmp(e->devices[i].text, e->devices[i - 1].text) == 0)
            break;
        e->ndevices = i + 1;
    }
    if (e->ndevices == 0)
        return;
    bib_executor_config_t c = {.threads = o->threads, .device = o->device};
    bib_executor_t *ex = NULL;
    if (ops->init(&c, &ex, why, sizeof why) != BIB_OK) {
        snprintf(e->model_error, sizeof e->model_error, "the default device failed to start: %s",
                 why);
        return;
    }
    e->started = true;
    if (bib_placement_model(ops, ex, &e->model, &e->cached, why, sizeof why) != BIB_OK)
        snprintf(e->model_error, sizeof e->model_error, "measuring failed: %s", why);
    ops->shutdown(ex);
    (void)host;
}

/* ---- rendering -------------------------------------------------------------------- */

/* "MATMUL n x n x n" for a work of flops. */
static double square_n(double flops) {
    return cbrt(flops / 2);
}

/* Which place auto picks for a square MATMUL of n with operands on the host. */
static const char *auto_pick(const bib_place_model_t *host, executor_fact_t *ex, uint32_t nex,
                             double n) {
    double w = 2 * n * n * n;
    double best = bib_placement_run_cost(host, w);
    const char *name = "cpu";
    for (uint32_t i = 0; i < nex; i++) {
        const bib_place_model_t *m = &ex[i].model;
        if (!m->measured || m->cpu_device)
            continue;
        double c =
            bib_placement_run_cost(m, w) + 2 * bib_placement_copy_cost(m, (uint64_t)(n * n * 4));
        if (c < best) {
            best = c;
            name = ex[i].ops->name;
        }
    }
    return name;
}

bib_status_t bib_info_report(const bib_options_t *options, int json, char **report) {
    if (report == NULL)
        return BIB_E_USAGE;
    *report = NULL;
    bib_options_t o;
    if (bib_options_take(options, &o) != BIB_OK)
        return BIB_E_USAGE;

    /* CPU facts. */
    char model[256];
    cpu_model_name(model, sizeof model);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    uint64_t mem_total = meminfo_kib("MemTotal"), mem_avail = meminfo_kib("MemAvailable");
    /* Through the executor interface: the VM knows no CPUID. */
    bib_host_facts_t hf;
    memset(&hf, 0, sizeof hf);
    snprintf(hf.level, sizeof hf.level, "the cpu executor reports no kernel level");
    if (bib_cpu_executor.host_facts != NULL)
        bib_cpu_executor.host_facts(&hf);

    /* The CPU executor and its model. */
    bib_place_model_t host;
    memset(&host, 0, sizeof host);
    bool host_cached = false;
    char cpu_desc[256] = "", host_error[256] = "";
    bib_device_facts_t cpu_facts;
    bool has_cpu_facts = false;
    {
        bib_executor_config_t c = {.threads = o.threads};
        bib_executor_t *ex = NULL;
        char why[256] = "";
        if (bib_cpu_executor.init(&c, &ex, why, sizeof why) == BIB_OK) {
            snprintf(cpu_desc, sizeof cpu_desc, "%s", bib_cpu_executor.describe(ex));
            if (bib_cpu_executor.facts != NULL) {
                bib_cpu_executor.facts(ex, &cpu_facts);
                cpu_facts.memory_bytes = mem_total * 1024;
                has_cpu_facts = true;
            }
            if (bib_placement_model(&bib_cpu_executor, ex, &host, &host_cached, why, sizeof why) !=
                BIB_OK)
                snprintf(host_error, sizeof host_error, "measuring failed: %s", why);
            bib_cpu_executor.shutdown(ex);
        } else {
            snprintf(host_error, sizeof host_error, "the cpu executor failed to start: %s", why);
        }
    }

    /* GPU executors, in the registry's order of preference (CUDA first). */
    executor_fact_t gpus[BIB_MAX_PLACES];
    uint32_t ngpu = 0;
    bool have_vulkan = false, have_cuda = false;
    for (uint32_t i = 1; i < bib_executor_count() && ngpu < BIB_MAX_PLACES; i++) {
        const bib_executor_ops_t *ops = bib_executor_at(i);
        have_vulkan |= strcmp(ops->name, "vulkan") == 0;
        have_cuda |= strcmp(ops->name, "cuda") == 0;
        gather_executor(&o, ops, &host, &gpus[ngpu++]);
    }

    /* auto's decision. */
    double threshold = INFINITY, threshold_resident = INFINITY;
    const char *threshold_on = NULL;
    for (uint32_t i = 0; i < ngpu && host.measured; i++) {
        const bib_place_model_t *m = &gpus[i].model;
        if (!m->measured || m->cpu_device)
            continue;
        double t = bib_placement_crossover(&host, m, true);
        if (t < threshold) {
            threshold = t;
            threshold_resident = bib_placement_crossover(&host, m, false);
            threshold_on = gpus[i].ops->name;
        }
    }
    const double small_n = 16, large_n = 4096;
    const char *small_pick = host.measured ? auto_pick(&host, gpus, ngpu, small_n) : "cpu";
    const char *large_pick = host.measured ? auto_pick(&host, gpus, ngpu, large_n) : "cpu";

    sbuf_t b = {0};
    if (!json) {
        put(&b, "%s\n\nCPU\n", bib_build_info());
        put(&b, "  model:    %s\n", model);
        put(&b, "  cores:    %ld online, %d usable by this process\n", online, usable);
        put(&b, "  memory:   %.1f GiB total, %.1f GiB available\n", (double)mem_total / (1 << 20),
            (double)mem_avail / (1 << 20));
        put(&b, "  features:");
        for (uint32_t i = 0; i < hf.nfeatures; i++)
            put(&b, " %s", hf.features[i]);
        put(&b, " (CPUID; the OS saves YMM: %s, ZMM: %s)\n", hf.os_saves_ymm ? "yes" : "no",
            hf.os_saves_zmm ? "yes" : "no");
        if (hf.level_ok)
            put(&b, "  kernels:  %s (best this CPU supports: %s)\n", hf.level,
                hf.best_level != NULL ? hf.best_level : "?");
        else
            put(&b, "  kernels:  %s\n", hf.level);
        put(&b, "  executor: %s\n", cpu_desc[0] ? cpu_desc : host_error);
        for (uint32_t i = 0; i < ngpu; i++) {
            executor_fact_t *e = &gpus[i];
            put(&b, "\n%s\n", strcmp(e->ops->name, "cuda") == 0 ? "CUDA" : "Vulkan");
            if (e->ndevices == 0)
                put(&b, "  absent: %s\n", e->absent);
            for (uint32_t d = 0; d < e->ndevices; d++)
                put(&b, "  device %" PRIu32 ": %s\n", d, e->devices[d].text);
        }
        if (!have_vulkan)
            put(&b, "\nVulkan\n  absent: this build has no Vulkan executor (no libvulkan-dev or "
                    "glslc at build time)\n");
        if (!have_cuda)
            put(&b, "\nCUDA\n  absent: this build has no CUDA executor (no nvcc at build "
                    "time)\n");
        put(&b, "\n--backend=auto\n");
        if (host.measured)
            put(&b, "  cpu:      %.1f us per call, %.2f GFLOP/s (MATMUL)%s\n",
                host.overhead_s * 1e6, host.flops_per_s * 1e-9,
                host_cached ? " [cached]" : " [measured now]");
        else
            put(&b, "  cpu:      %s\n", host_error);
        for (uint32_t i = 0; i < ngpu; i++) {
            executor_fact_t *e = &gpus[i];
            put(&b, "  %-9s ", e->ops->name);
            if (e->ndevices == 0) {
                put(&b, "not a candidate: %s\n", e->absent);
                continue;
            }
            if (!e->model.measured) {
                put(&b, "not a candidate: %s\n", e->model_error);
                continue;
            }
            put(&b, "%.1f us per call, %.2f GFLOP/s (MATMUL), copies %.1f us + %.2f GB/s%s%s\n",
                e->model.overhead_s * 1e6, e->model.flops_per_s * 1e-9, e->model.transfer_s * 1e6,
                e->model.bytes_per_s * 1e-9, e->cached ? " [cached]" : " [measured now]",
                e->model.cpu_device ? "; not a candidate: its device is the CPU (lavapipe), "
                                      "never picked for speed"
                                    : "");
        }
        put(&b, "  small work (MATMUL %.0f^3, operands on the host): %s\n", small_n, small_pick);
        put(&b, "  large work (MATMUL %.0f^3, operands on the host): %s\n", large_n, large_pick);
        if (threshold_on != NULL && isfinite(threshold))
            put(&b,
                "  threshold: %s from %.3g MFLOP (MATMUL about %.0f^3) with operands on the "
                "host; %.3g MFLOP (about %.0f^3) when they are already on %s\n",
                threshold_on, threshold * 1e-6, square_n(threshold), threshold_resident * 1e-6,
                square_n(threshold_resident), threshold_on);
        else
            put(&b, "  threshold: none: no GPU executor here is faster than the cpu at any "
                    "size, so auto runs everything on the cpu\n");
    } else {
        put(&b, "{\"build\":");
        put_json(&b, bib_build_info());
        put(&b, ",\"cpu\":{\"model\":");
        put_json(&b, model);
        put(&b, ",\"cores_online\":%ld,\"cores_usable\":%d", online, usable);
        put(&b, ",\"memory_total_bytes\":%" PRIu64 ",\"memory_available_bytes\":%" PRIu64,
            mem_total * 1024, mem_avail * 1024);
        put(&b, ",\"features\":[");
        for (uint32_t i = 0; i < hf.nfeatures; i++)
            put(&b, "%s\"%s\"", i ? "," : "", hf.features[i]);
        put(&b, "],\"os_saves_ymm\":%s,\"os_saves_zmm\":%s", hf.os_saves_ymm ? "true" : "false",
            hf.os_saves_zmm ? "true" : "false");
        put(&b, ",\"kernel_level\":");
        put_json(&b, hf.level);
        put(&b, ",\"executor\":");
        put_json(&b, cpu_desc[0] ? cpu_desc : host_error);
        if (has_cpu_facts)
            put_facts(&b, &cpu_facts);
        put(&b, "},\"gpu_executors\":[");
        for (uint32_t i = 0; i < ngpu; i++) {
            executor_fact_t *e = &gpus[i];
            put(&b, "%s{\"name\":", i ? "," : "");
            put_json(&b, e->ops->name);
            put(&b, ",\"devices\":[");
            for (uint32_t d = 0; d < e->ndevices; d++) {
                put(&b, "%s{\"index\":%" PRIu32 ",\"describe\":", d ? "," : "", d);
                put_json(&b, e->devices[d].text);
                if (e->devices[d].has_facts)
                    put_facts(&b, &e->devices[d].facts);
                put(&b, "}");
            }
            put(&b, "],\"absent\":");
            if (e->ndevices == 0)
                put_json(&b, e->absent);
            else
                put(&b, "null");
            put(&b, "}");
        }
        put(&b, "],\"auto\":{\"models\":[");
        if (host.measured)
            put(&b,
                "{\"executor\":\"cpu\",\"overhead_s\":%.6g,\"flops_per_s\":%.6g,\"cached\":%s,"
                "\"candidate\":true}",
                host.overhead_s, host.flops_per_s, host_cached ? "true" : "false");
        for (uint32_t i = 0; i < ngpu; i++) {
            executor_fact_t *e = &gpus[i];
            if (!e->model.measured)
                continue;
            put(&b,
                ",{\"executor\":\"%s\",\"overhead_s\":%.6g,\"flops_per_s\":%.6g,"
                "\"transfer_s\":%.6g,\"bytes_per_s\":%.6g,\"cached\":%s,\"candidate\":%s}",
                e->ops->name, e->model.overhead_s, e->model.flops_per_s, e->model.transfer_s,
                e->model.bytes_per_s, e->cached ? "true" : "false",
                e->model.cpu_device ? "false" : "true");
        }
        put(&b, "],\"small\":{\"work\":\"MATMUL %.0f^3\",\"executor\":\"%s\"}", small_n,
            small_pick);
        put(&b, ",\"large\":{\"work\":\"MATMUL %.0f^3\",\"executor\":\"%s\"}", large_n, large_pick);
        if (threshold_on != NULL && isfinite(threshold))
            put(&b,
                ",\"threshold\":{\"executor\":\"%s\",\"flops_from_host\":%.6g,"
                "\"flops_resident\":%.6g}",
                threshold_on, threshold, threshold_resident);
        else
            put(&b, ",\"threshold\":null");
        put(&b, "}}\n");
    }
    if (b.failed) {
        free(b.p);
        return BIB_E_NOMEM;
    }
    *report = b.p;
    return BIB_OK;
}
