/* vm/info.c: bib_info_gather, what this machine offers BIB (the facts of
 * `bib info`), and the readers of those facts.
 *
 * Owns gathering: the CPU's model, cores and memory from the OS; its SIMD
 * features and kernel level, each executor's devices and numerics paths (or
 * why there are none) from the executors themselves (host_facts, init,
 * describe, facts), so the facts say what a run would really get; and the
 * models --backend=auto measures (vm/placement.c) with what it picks. Nothing
 * here is cached but the placement models. Writing the facts as text or JSON
 * is the `bib` command's (cli/info.c).
 */
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm/json.h"
#include "vm/placement.h"
#include "vm/vm.h"

#define INFO_MAX_DEVICES 8

/* The executors a build may lack, and what it needs at build time for each. */
static const struct {
    const char *name, *why;
} optional_executors[] = {
    {"vulkan", "this build has no Vulkan executor (no libvulkan-dev or glslc at build time)"},
    {"cuda", "this build has no CUDA executor (no nvcc at build time)"},
};
#define INFO_MAX_EXECUTORS                                                                         \
    (BIB_MAX_PLACES + sizeof optional_executors / sizeof optional_executors[0])

typedef struct device_fact {
    bib_info_device_t pub;
    char describe[512];
    bib_device_facts_t facts;
} device_fact_t;

typedef struct executor_fact {
    bib_info_executor_t pub;
    device_fact_t devices[INFO_MAX_DEVICES];
    char absent[256];
    char model_error[320];
    bib_place_model_t model;
} executor_fact_t;

struct bib_info {
    bib_info_cpu_t cpu;
    char model[256];
    bib_host_facts_t host;
    uint32_t nexecutors;
    executor_fact_t executors[INFO_MAX_EXECUTORS];
    bib_info_placement_t placement;
};

/* ---- the CPU ---------------------------------------------------------------------- */

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

static void gather_cpu(bib_info_t *info) {
    bib_info_cpu_t *c = &info->cpu;
    c->size = sizeof *c;
    cpu_model_name(info->model, sizeof info->model);
    c->model = info->model;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    c->cores_online = online > 0 ? (uint32_t)online : 0;
    cpu_set_t set;
    c->cores_usable =
        sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set) : c->cores_online;
    c->memory_total_bytes = meminfo_kib("MemTotal") * 1024;
    c->memory_available_bytes = meminfo_kib("MemAvailable") * 1024;
    /* Through the executor interface: the VM knows no CPUID. */
    bib_host_facts_t *h = &info->host;
    snprintf(h->level, sizeof h->level, "the cpu executor reports no kernel level");
    if (bib_cpu_executor.host_facts != NULL)
        bib_cpu_executor.host_facts(h);
    c->feature_count = h->nfeatures;
    c->features = h->features;
    c->os_saves_ymm = h->os_saves_ymm;
    c->os_saves_zmm = h->os_saves_zmm;
    c->kernel_level_ok = h->level_ok;
    c->kernel_level = h->level;
    c->best_level = h->best_level;
}

/* ---- the executors ---------------------------------------------------------------- */

/* Records device d of e, started as ex. */
static void take_device(executor_fact_t *e, uint32_t d, const bib_executor_ops_t *ops,
                        bib_executor_t *ex) {
    device_fact_t *f = &e->devices[d];
    const char *text = ops->describe != NULL ? ops->describe(ex) : NULL;
    snprintf(f->describe, sizeof f->describe, "%s", text ? text : ops->name);
    if (ops->facts != NULL)
        ops->facts(ex, &f->facts);
    bib_info_device_t *p = &f->pub;
    p->size = sizeof *p;
    p->describe = f->describe;
    p->has_facts = ops->facts != NULL;
    p->name = f->facts.name;
    p->kind = f->facts.kind;
    p->fma = f->facts.fma;
    p->denormals = f->facts.denormals;
    p->rounding = f->facts.rounding;
    p->fp64 = f->facts.fp64;
    p->memory_bytes = f->facts.memory_bytes;
    p->max_buffer_bytes = f->facts.max_buffer_bytes;
    p->max_workgroup = f->facts.max_workgroup;
    p->shared_memory_bytes = f->facts.shared_memory_bytes;
    p->compute_units = f->facts.compute_units;
    p->max_threads = f->facts.max_threads;
}

/* Measures (or reads from the cache) auto's model of the started ex. */
static void take_model(executor_fact_t *e, const bib_executor_ops_t *ops, bib_executor_t *ex) {
    bool cached = false;
    char why[256];
    if (bib_placement_model(ops, ex, &e->model, &cached, why, sizeof why) != BIB_OK) {
        snprintf(e->model_error, sizeof e->model_error, "measuring failed: %s", why);
        e->pub.model_error = e->model_error;
        return;
    }
    bib_info_executor_t *p = &e->pub;
    p->measured = e->model.measured;
    p->cached = cached;
    p->cpu_device = e->model.cpu_device;
    p->overhead_s = e->model.overhead_s;
    p->flops_per_s = e->model.flops_per_s;
    p->transfer_s = e->model.transfer_s;
    p->bytes_per_s = e->model.bytes_per_s;
}

/* The CPU executor: one device, the host, with the machine's memory. */
static void gather_cpu_executor(const bib_options_t *o, uint64_t memory_bytes, executor_fact_t *e) {
    e->pub.name = bib_cpu_executor.name;
    bib_executor_config_t c = {.threads = o->threads};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    if (bib_cpu_executor.init(&c, &ex, why, sizeof why) != BIB_OK) {
        snprintf(e->absent, sizeof e->absent, "%s", why[0] ? why : "it failed to start");
        e->pub.absent = e->absent;
        return;
    }
    take_device(e, 0, &bib_cpu_executor, ex);
    e->devices[0].pub.memory_bytes = memory_bytes;
    e->pub.device_count = 1;
    take_model(e, &bib_cpu_executor, ex);
    bib_cpu_executor.shutdown(ex);
}

/* A GPU executor: its devices by index, then the default one (the device
 * options selects) for auto's model. */
static void gather_gpu_executor(const bib_options_t *o, const bib_executor_ops_t *ops,
                                executor_fact_t *e) {
    e->pub.name = ops->name;
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
        take_device(e, i, ops, ex);
        ops->shutdown(ex);
        /* A selector the executor ignores would give the same device forever. */
        if (i > 0 && strcmp(e->devices[i].describe, e->devices[i - 1].describe) == 0)
            break;
        e->pub.device_count = i + 1;
    }
    if (e->pub.device_count == 0) {
        e->pub.absent = e->absent;
        return;
    }
    bib_executor_config_t c = {.threads = o->threads, .device = o->device};
    bib_executor_t *ex = NULL;
    if (ops->init(&c, &ex, why, sizeof why) != BIB_OK) {
        snprintf(e->model_error, sizeof e->model_error, "the default device failed to start: %s",
                 why);
        e->pub.model_error = e->model_error;
        return;
    }
    take_model(e, ops, ex);
    ops->shutdown(ex);
}

/* ---- auto's decision -------------------------------------------------------------- */

/* Which executor auto picks for a square MATMUL of n with operands on the
 * host: the one with the least estimated time, copies included. */
static const char *auto_pick(const bib_info_t *info, double n) {
    const bib_place_model_t *host = &info->executors[0].model;
    double w = 2 * n * n * n;
    double best = bib_placement_run_cost(host, w);
    const char *name = "cpu";
    for (uint32_t i = 1; i < info->nexecutors; i++) {
        const bib_place_model_t *m = &info->executors[i].model;
        if (!m->measured || m->cpu_device)
            continue;
        double c =
            bib_placement_run_cost(m, w) + 2 * bib_placement_copy_cost(m, (uint64_t)(n * n * 4));
        if (c < best) {
            best = c;
            name = info->executors[i].pub.name;
        }
    }
    return name;
}

static void gather_placement(bib_info_t *info) {
    bib_info_placement_t *p = &info->placement;
    p->size = sizeof *p;
    p->small_n = 16;
    p->large_n = 4096;
    const bib_place_model_t *host = &info->executors[0].model;
    p->small_executor = host->measured ? auto_pick(info, p->small_n) : "cpu";
    p->large_executor = host->measured ? auto_pick(info, p->large_n) : "cpu";
    double threshold = INFINITY;
    for (uint32_t i = 1; i < info->nexecutors && host->measured; i++) {
        const bib_place_model_t *m = &info->executors[i].model;
        if (!m->measured || m->cpu_device)
            continue;
        double t = bib_placement_crossover(host, m, true);
        if (t < threshold) {
            threshold = t;
            p->threshold_executor = info->executors[i].pub.name;
            p->threshold_flops_from_host = t;
            p->threshold_flops_resident = bib_placement_crossover(host, m, false);
        }
    }
}

bib_status_t bib_info_gather(const bib_options_t *options, bib_info_t **out) {
    if (out == NULL)
        return BIB_E_USAGE;
    *out = NULL;
    bib_options_t o;
    if (bib_options_take(options, &o) != BIB_OK)
        return BIB_E_USAGE;
    bib_info_t *info = calloc(1, sizeof *info);
    if (info == NULL)
        return BIB_E_NOMEM;
    gather_cpu(info);
    for (uint32_t i = 0; i < INFO_MAX_EXECUTORS; i++)
        info->executors[i].pub.size = sizeof info->executors[i].pub;
    gather_cpu_executor(&o, info->cpu.memory_total_bytes, &info->executors[0]);
    info->nexecutors = 1;
    /* GPU executors, in the registry's order of preference (CUDA first). */
    for (uint32_t i = 1; i < bib_executor_count() && info->nexecutors < BIB_MAX_PLACES; i++) {
        executor_fact_t *e = &info->executors[info->nexecutors++];
        e->pub.built = 1;
        gather_gpu_executor(&o, bib_executor_at(i), e);
    }
    info->executors[0].pub.built = 1;
    for (size_t k = 0; k < sizeof optional_executors / sizeof optional_executors[0]; k++) {
        bool built = false;
        for (uint32_t i = 0; i < info->nexecutors; i++)
            built |= strcmp(info->executors[i].pub.name, optional_executors[k].name) == 0;
        if (built)
            continue;
        executor_fact_t *e = &info->executors[info->nexecutors++];
        e->pub.name = optional_executors[k].name;
        e->pub.absent = optional_executors[k].why;
    }
    gather_placement(info);
    *out = info;
    return BIB_OK;
}

void bib_info_free(bib_info_t *info) {
    free(info);
}

/* ---- the readers ------------------------------------------------------------------ */

/* The size of each struct in 0.4.0: a host's may not be smaller. */
#define SIZE_0_4(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* Copies the library's struct src (own bytes) into the host's dst, whose
 * size field says how large it is: the fields both know, then zeros for
 * those only the host knows. */
static bib_status_t give(void *dst, const void *src, size_t own, size_t oldest) {
    if (dst == NULL)
        return BIB_E_USAGE;
    size_t size;
    memcpy(&size, dst, sizeof size);
    if (size < oldest)
        return BIB_E_USAGE;
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size,
           (size < own ? size : own) - sizeof size);
    if (size > own)
        memset((char *)dst + own, 0, size - own);
    return BIB_OK;
}

bib_status_t bib_info_cpu(const bib_info_t *info, bib_info_cpu_t *cpu) {
    if (info == NULL)
        return BIB_E_USAGE;
    return give(cpu, &info->cpu, sizeof info->cpu, SIZE_0_4(bib_info_cpu_t, best_level));
}

uint32_t bib_info_executor_count(const bib_info_t *info) {
    return info != NULL ? info->nexecutors : 0;
}

bib_status_t bib_info_executor(const bib_info_t *info, uint32_t index,
                               bib_info_executor_t *executor) {
    if (info == NULL || index >= info->nexecutors)
        return BIB_E_USAGE;
    const bib_info_executor_t *e = &info->executors[index].pub;
    return give(executor, e, sizeof *e, SIZE_0_4(bib_info_executor_t, model_error));
}

bib_status_t bib_info_device(const bib_info_t *info, uint32_t executor, uint32_t index,
                             bib_info_device_t *device) {
    if (info == NULL || executor >= info->nexecutors ||
        index >= info->executors[executor].pub.device_count)
        return BIB_E_USAGE;
    const bib_info_device_t *d = &info->executors[executor].devices[index].pub;
    return give(device, d, sizeof *d, SIZE_0_4(bib_info_device_t, max_threads));
}

bib_status_t bib_info_placement(const bib_info_t *info, bib_info_placement_t *placement) {
    if (info == NULL)
        return BIB_E_USAGE;
    return give(placement, &info->placement, sizeof info->placement,
                SIZE_0_4(bib_info_placement_t, threshold_flops_resident));
}

/* ---- rendering -------------------------------------------------------------------- */

/* An executor's heading in the text. */
static const char *title(const char *name) {
    return strcmp(name, "cuda") == 0 ? "CUDA" : strcmp(name, "vulkan") == 0 ? "Vulkan" : name;
}

/* Why auto has no model of executor e (which is not measured). */
static const char *no_model(const bib_info_executor_t *e) {
    if (e->device_count == 0)
        return e->absent;
    return e->model_error != NULL ? e->model_error : "";
}

/* The cpu executor's line: its device, or why it did not start. */
static void put_cpu_executor(FILE *out, const bib_info_t *info, const bib_info_executor_t *e,
                             int json) {
    bib_info_device_t d = {.size = sizeof d};
    char why[300];
    const char *text = why;
    if (e->device_count > 0 && bib_info_device(info, 0, 0, &d) == BIB_OK)
        text = d.describe;
    else
        snprintf(why, sizeof why, "the cpu executor failed to start: %s", e->absent);
    if (json)
        bib_json_string(out, text);
    else
        fputs(text, out);
}

/* "MATMUL n x n x n" for a work of flops. */
static double square_n(double flops) {
    return cbrt(flops / 2);
}

static void render_text(FILE *out, const bib_info_t *info) {
    bib_info_cpu_t cpu = {.size = sizeof cpu};
    bib_info_placement_t pl = {.size = sizeof pl};
    bib_info_executor_t host = {.size = sizeof host};
    bib_info_cpu(info, &cpu);
    bib_info_placement(info, &pl);
    bib_info_executor(info, 0, &host);
    uint32_t nex = bib_info_executor_count(info);

    fprintf(out, "%s\n\nCPU\n", bib_build_info());
    fprintf(out, "  model:    %s\n", cpu.model);
    fprintf(out, "  cores:    %" PRIu32 " online, %" PRIu32 " usable by this process\n",
            cpu.cores_online, cpu.cores_usable);
    fprintf(out, "  memory:   %.1f GiB total, %.1f GiB available\n",
            (double)cpu.memory_total_bytes / (1 << 30),
            (double)cpu.memory_available_bytes / (1 << 30));
    fprintf(out, "  features:");
    for (uint32_t i = 0; i < cpu.feature_count; i++)
        fprintf(out, " %s", cpu.features[i]);
    fprintf(out, " (CPUID; the OS saves YMM: %s, ZMM: %s)\n", cpu.os_saves_ymm ? "yes" : "no",
            cpu.os_saves_zmm ? "yes" : "no");
    if (cpu.kernel_level_ok)
        fprintf(out, "  kernels:  %s (best this CPU supports: %s)\n", cpu.kernel_level,
                cpu.best_level != NULL ? cpu.best_level : "?");
    else
        fprintf(out, "  kernels:  %s\n", cpu.kernel_level);
    fprintf(out, "  executor: ");
    put_cpu_executor(out, info, &host, 0);
    fprintf(out, "\n");
    for (uint32_t i = 1; i < nex; i++) {
        bib_info_executor_t e = {.size = sizeof e};
        bib_info_executor(info, i, &e);
        fprintf(out, "\n%s\n", title(e.name));
        if (e.device_count == 0)
            fprintf(out, "  absent: %s\n", e.absent);
        for (uint32_t d = 0; d < e.device_count; d++) {
            bib_info_device_t dev = {.size = sizeof dev};
            bib_info_device(info, i, d, &dev);
            fprintf(out, "  device %" PRIu32 ": %s\n", d, dev.describe);
        }
    }
    fprintf(out, "\n--backend=auto\n");
    if (host.measured) {
        fprintf(out, "  cpu:      %.1f us per call, %.2f GFLOP/s (MATMUL)%s\n",
                host.overhead_s * 1e6, host.flops_per_s * 1e-9,
                host.cached ? " [cached]" : " [measured now]");
    } else {
        fprintf(out, "  cpu:      ");
        if (host.device_count == 0)
            put_cpu_executor(out, info, &host, 0);
        else
            fputs(no_model(&host), out);
        fprintf(out, "\n");
    }
    for (uint32_t i = 1; i < nex; i++) {
        bib_info_executor_t e = {.size = sizeof e};
        bib_info_executor(info, i, &e);
        if (!e.built)
            continue;
        fprintf(out, "  %-9s ", e.name);
        if (!e.measured) {
            fprintf(out, "not a candidate: %s\n", no_model(&e));
            continue;
        }
        fprintf(out, "%.1f us per call, %.2f GFLOP/s (MATMUL), copies %.1f us + %.2f GB/s%s%s\n",
                e.overhead_s * 1e6, e.flops_per_s * 1e-9, e.transfer_s * 1e6, e.bytes_per_s * 1e-9,
                e.cached ? " [cached]" : " [measured now]",
                e.cpu_device ? "; not a candidate: its device is the CPU (lavapipe), "
                               "never picked for speed"
                             : "");
    }
    fprintf(out, "  small work (MATMUL %" PRIu32 "^3, operands on the host): %s\n", pl.small_n,
            pl.small_executor);
    fprintf(out, "  large work (MATMUL %" PRIu32 "^3, operands on the host): %s\n", pl.large_n,
            pl.large_executor);
    if (pl.threshold_executor != NULL)
        fprintf(out,
                "  threshold: %s from %.3g MFLOP (MATMUL about %.0f^3) with operands on the "
                "host; %.3g MFLOP (about %.0f^3) when they are already on %s\n",
                pl.threshold_executor, pl.threshold_flops_from_host * 1e-6,
                square_n(pl.threshold_flops_from_host), pl.threshold_flops_resident * 1e-6,
                square_n(pl.threshold_flops_resident), pl.threshold_executor);
    else
        fprintf(out, "  threshold: none: no GPU executor here is faster than the cpu at any "
                     "size, so auto runs everything on the cpu\n");
}

/* A string member's value, null when the executor does not know it. */
static void json_or_null(FILE *out, const char *s) {
    if (s != NULL && s[0])
        bib_json_string(out, s);
    else
        fputs("null", out);
}

static void json_number_or_null(FILE *out, uint64_t v) {
    if (v)
        fprintf(out, "%" PRIu64, v);
    else
        fputs("null", out);
}

/* A device's facts as JSON members (after others: each starts with a comma). */
static void json_facts(FILE *out, const bib_info_device_t *d) {
    const char *names[] = {"name", "kind", "fma", "denormals", "rounding"};
    const char *values[] = {d->name, d->kind, d->fma, d->denormals, d->rounding};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        fprintf(out, ",\"%s\":", names[i]);
        json_or_null(out, values[i]);
    }
    fprintf(out, ",\"fp64\":%s", d->fp64 ? "true" : "false");
    fprintf(out, ",\"memory_bytes\":");
    json_number_or_null(out, d->memory_bytes);
    fprintf(out, ",\"limits\":{");
    const char *lnames[] = {"max_buffer_bytes", "max_workgroup", "shared_memory_bytes",
                            "compute_units", "max_threads"};
    uint64_t lvalues[] = {d->max_buffer_bytes, d->max_workgroup, d->shared_memory_bytes,
                          d->compute_units, d->max_threads};
    for (size_t i = 0; i < sizeof lnames / sizeof lnames[0]; i++) {
        fprintf(out, "%s\"%s\":", i ? "," : "", lnames[i]);
        json_number_or_null(out, lvalues[i]);
    }
    fprintf(out, "}");
}

static void render_json(FILE *out, const bib_info_t *info) {
    bib_info_cpu_t cpu = {.size = sizeof cpu};
    bib_info_placement_t pl = {.size = sizeof pl};
    bib_info_executor_t host = {.size = sizeof host};
    bib_info_cpu(info, &cpu);
    bib_info_placement(info, &pl);
    bib_info_executor(info, 0, &host);
    uint32_t nex = bib_info_executor_count(info);

    fprintf(out, "{\"build\":");
    bib_json_string(out, bib_build_info());
    fprintf(out, ",\"cpu\":{\"model\":");
    bib_json_string(out, cpu.model);
    fprintf(out, ",\"cores_online\":%" PRIu32 ",\"cores_usable\":%" PRIu32, cpu.cores_online,
            cpu.cores_usable);
    fprintf(out, ",\"memory_total_bytes\":%" PRIu64 ",\"memory_available_bytes\":%" PRIu64,
            cpu.memory_total_bytes, cpu.memory_available_bytes);
    fprintf(out, ",\"features\":[");
    for (uint32_t i = 0; i < cpu.feature_count; i++) {
        fprintf(out, "%s", i ? "," : "");
        bib_json_string(out, cpu.features[i]);
    }
    fprintf(out, "],\"os_saves_ymm\":%s,\"os_saves_zmm\":%s", cpu.os_saves_ymm ? "true" : "false",
            cpu.os_saves_zmm ? "true" : "false");
    fprintf(out, ",\"kernel_level\":");
    bib_json_string(out, cpu.kernel_level);
    fprintf(out, ",\"executor\":");
    put_cpu_executor(out, info, &host, 1);
    bib_info_device_t d = {.size = sizeof d};
    if (host.device_count > 0 && bib_info_device(info, 0, 0, &d) == BIB_OK && d.has_facts)
        json_facts(out, &d);
    fprintf(out, "},\"gpu_executors\":[");
    for (uint32_t i = 1, n = 0; i < nex; i++) {
        bib_info_executor_t e = {.size = sizeof e};
        bib_info_executor(info, i, &e);
        if (!e.built)
            continue;
        fprintf(out, "%s{\"name\":", n++ ? "," : "");
        bib_json_string(out, e.name);
        fprintf(out, ",\"devices\":[");
        for (uint32_t k = 0; k < e.device_count; k++) {
            bib_info_device_t dev = {.size = sizeof dev};
            bib_info_device(info, i, k, &dev);
            fprintf(out, "%s{\"index\":%" PRIu32 ",\"describe\":", k ? "," : "", k);
            bib_json_string(out, dev.describe);
            if (dev.has_facts)
                json_facts(out, &dev);
            fprintf(out, "}");
        }
        fprintf(out, "],\"absent\":");
        if (e.device_count == 0)
            bib_json_string(out, e.absent);
        else
            fputs("null", out);
        fprintf(out, "}");
    }
    fprintf(out, "],\"auto\":{\"models\":[");
    if (host.measured)
        fprintf(out,
                "{\"executor\":\"cpu\",\"overhead_s\":%.6g,\"flops_per_s\":%.6g,\"cached\":%s,"
                "\"candidate\":true}",
                host.overhead_s, host.flops_per_s, host.cached ? "true" : "false");
    for (uint32_t i = 1; i < nex; i++) {
        bib_info_executor_t e = {.size = sizeof e};
        bib_info_executor(info, i, &e);
        if (!e.built || !e.measured)
            continue;
        fprintf(out, ",{\"executor\":");
        bib_json_string(out, e.name);
        fprintf(out,
                ",\"overhead_s\":%.6g,\"flops_per_s\":%.6g,\"transfer_s\":%.6g,"
                "\"bytes_per_s\":%.6g,\"cached\":%s,\"candidate\":%s}",
                e.overhead_s, e.flops_per_s, e.transfer_s, e.bytes_per_s,
                e.cached ? "true" : "false", e.cpu_device ? "false" : "true");
    }
    fprintf(out, "],\"small\":{\"work\":\"MATMUL %" PRIu32 "^3\",\"executor\":", pl.small_n);
    bib_json_string(out, pl.small_executor);
    fprintf(out, "},\"large\":{\"work\":\"MATMUL %" PRIu32 "^3\",\"executor\":", pl.large_n);
    bib_json_string(out, pl.large_executor);
    fprintf(out, "}");
    if (pl.threshold_executor != NULL) {
        fprintf(out, ",\"threshold\":{\"executor\":");
        bib_json_string(out, pl.threshold_executor);
        fprintf(out, ",\"flops_from_host\":%.6g,\"flops_resident\":%.6g}",
                pl.threshold_flops_from_host, pl.threshold_flops_resident);
    } else {
        fprintf(out, ",\"threshold\":null");
    }
    fprintf(out, "}}\n");
}

bib_status_t bib_info_report(const bib_options_t *options, int json, char **report) {
    if (report == NULL)
        return BIB_E_USAGE;
    *report = NULL;
    bib_info_t *info = NULL;
    bib_status_t st = bib_info_gather(options, &info);
    if (st != BIB_OK)
        return st;
    size_t size = 0;
    FILE *out = open_memstream(report, &size);
    if (out == NULL) {
        bib_info_free(info);
        return BIB_E_NOMEM;
    }
    if (json)
        render_json(out, info);
    else
        render_text(out, info);
    bib_info_free(info);
    if (fclose(out) != 0) {
        free(*report);
        *report = NULL;
        return BIB_E_NOMEM;
    }
    return BIB_OK;
}
