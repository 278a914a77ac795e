/* vm/info.c: bib_info_gather, what this machine offers BIB (the facts of
 * `bib info`), and the readers of those facts.
 *
 * Owns gathering: the CPU's model, cores and memory from the OS; its SIMD
 * features and kernel level, each executor's devices and numerics paths (or
 * why there are none) from the executors themselves (host_facts, init,
 * describe, facts), so the facts say what a run would really get; and the
 * models --backend=auto measures (vm/placement.c) with what it picks; and the
 * MPI libraries a launcher's run would load (backends/comm.c). Nothing
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

#include "backends/comm.h"
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

/* What the readers copy out (pub) and the storage its strings point into,
 * which lives as long as the bib_info_t. */
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

typedef struct mpi_fact {
    bib_info_mpi_t pub;
    bib_comm_candidate_t found;
} mpi_fact_t;

struct bib_info {
    bib_info_cpu_t cpu;
    char model[256];
    bib_host_facts_t host;
    uint32_t nexecutors;
    executor_fact_t executors[INFO_MAX_EXECUTORS];
    bib_info_placement_t placement;
    uint32_t nmpi;
    mpi_fact_t mpi[2];
};

/* ---- MPI --------------------------------------------------------------------------- */

static void gather_mpi(bib_info_t *info) {
    bib_comm_candidate_t found[2];
    info->nmpi = bib_comm_candidates(found);
    for (uint32_t i = 0; i < info->nmpi; i++) {
        mpi_fact_t *m = &info->mpi[i];
        m->found = found[i];
        const bib_comm_candidate_t *c = &m->found;
        m->pub = (bib_info_mpi_t){
            .size = sizeof m->pub,
            .launcher = c->launcher,
            .library = c->library,
            .abi = c->abi,
            .version = c->abi != NULL ? c->version : NULL,
            .absent = c->abi == NULL ? c->absent : NULL,
            .selected = c->selected,
        };
    }
}

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
    const bib_device_facts_t *k = &f->facts;
    f->pub = (bib_info_device_t){.size = sizeof f->pub,
                                 .describe = f->describe,
                                 .has_facts = ops->facts != NULL,
                                 .name = k->name,
                                 .kind = k->kind,
                                 .fma = k->fma,
                                 .denormals = k->denormals,
                                 .rounding = k->rounding,
                                 .fp64 = k->fp64,
                                 .memory_bytes = k->memory_bytes,
                                 .max_buffer_bytes = k->max_buffer_bytes,
                                 .max_workgroup = k->max_workgroup,
                                 .shared_memory_bytes = k->shared_memory_bytes,
                                 .compute_units = k->compute_units,
                                 .max_threads = k->max_threads,
                                 .loop_limit = k->loop_limit};
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
    info->executors[0].pub.built = 1;
    gather_cpu_executor(&o, info->cpu.memory_total_bytes, &info->executors[0]);
    info->nexecutors = 1;
    /* GPU executors, in the registry's order of preference (CUDA first). */
    for (uint32_t i = 1; i < bib_executor_count() && info->nexecutors < BIB_MAX_PLACES; i++) {
        executor_fact_t *e = &info->executors[info->nexecutors++];
        e->pub.built = 1;
        gather_gpu_executor(&o, bib_executor_at(i), e);
    }
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
    gather_mpi(info);
    *out = info;
    return BIB_OK;
}

void bib_info_free(bib_info_t *info) {
    free(info);
}

/* ---- the readers ------------------------------------------------------------------ */

/* The size of each struct in 0.4.0 (or in the version that added it): a
 * host's may not be smaller. */
#define SIZE_AT(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

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
    return give(cpu, &info->cpu, sizeof info->cpu, SIZE_AT(bib_info_cpu_t, best_level));
}

uint32_t bib_info_executor_count(const bib_info_t *info) {
    return info != NULL ? info->nexecutors : 0;
}

bib_status_t bib_info_executor(const bib_info_t *info, uint32_t index,
                               bib_info_executor_t *executor) {
    if (info == NULL || index >= info->nexecutors)
        return BIB_E_USAGE;
    const bib_info_executor_t *e = &info->executors[index].pub;
    return give(executor, e, sizeof *e, SIZE_AT(bib_info_executor_t, model_error));
}

bib_status_t bib_info_device(const bib_info_t *info, uint32_t executor, uint32_t index,
                             bib_info_device_t *device) {
    if (info == NULL || executor >= info->nexecutors ||
        index >= info->executors[executor].pub.device_count)
        return BIB_E_USAGE;
    const bib_info_device_t *d = &info->executors[executor].devices[index].pub;
    return give(device, d, sizeof *d, SIZE_AT(bib_info_device_t, max_threads));
}

bib_status_t bib_info_placement(const bib_info_t *info, bib_info_placement_t *placement) {
    if (info == NULL)
        return BIB_E_USAGE;
    return give(placement, &info->placement, sizeof info->placement,
                SIZE_AT(bib_info_placement_t, threshold_flops_resident));
}

uint32_t bib_info_mpi_count(const bib_info_t *info) {
    return info != NULL ? info->nmpi : 0;
}

bib_status_t bib_info_mpi(const bib_info_t *info, uint32_t index, bib_info_mpi_t *mpi) {
    if (info == NULL || index >= info->nmpi)
        return BIB_E_USAGE;
    const bib_info_mpi_t *m = &info->mpi[index].pub;
    return give(mpi, m, sizeof *m, SIZE_AT(bib_info_mpi_t, selected));
}
