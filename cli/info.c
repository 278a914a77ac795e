/* cli/info.c: `bib info [--json]`: the facts bib_info_gather gives
 * (include/bib.h), written as text for people or as one JSON object for
 * programs (spec/cli.md). It reads them through the public API only, as any
 * host could; gathering them is the library's (vm/info.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "include/bib.h"
#include "cli/cli.h"
#include "vm/json.h"

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

/* What both renderings start from: the CPU, auto's picks, the cpu executor
 * (the first) and how many executors there are. */
typedef struct summary {
    bib_info_cpu_t cpu;
    bib_info_placement_t pl;
    bib_info_executor_t host;
    uint32_t nex;
} summary_t;

static void summarize(const bib_info_t *info, summary_t *s) {
    s->cpu = (bib_info_cpu_t){.size = sizeof s->cpu};
    s->pl = (bib_info_placement_t){.size = sizeof s->pl};
    s->host = (bib_info_executor_t){.size = sizeof s->host};
    bib_info_cpu(info, &s->cpu);
    bib_info_placement(info, &s->pl);
    bib_info_executor(info, 0, &s->host);
    s->nex = bib_info_executor_count(info);
}

static void render_text(FILE *out, const bib_info_t *info) {
    summary_t s;
    summarize(info, &s);

    fprintf(out, "%s\n\nCPU\n", bib_build_info());
    fprintf(out, "  model:    %s\n", s.cpu.model);
    fprintf(out, "  cores:    %" PRIu32 " online, %" PRIu32 " usable by this process\n",
            s.cpu.cores_online, s.cpu.cores_usable);
    fprintf(out, "  memory:   %.1f GiB total, %.1f GiB available\n",
            (double)s.cpu.memory_total_bytes / (1 << 30),
            (double)s.cpu.memory_available_bytes / (1 << 30));
    fprintf(out, "  features:");
    for (uint32_t i = 0; i < s.cpu.feature_count; i++)
        fprintf(out, " %s", s.cpu.features[i]);
    fprintf(out, " (CPUID; the OS saves YMM: %s, ZMM: %s)\n", s.cpu.os_saves_ymm ? "yes" : "no",
            s.cpu.os_saves_zmm ? "yes" : "no");
    if (s.cpu.kernel_level_ok)
        fprintf(out, "  kernels:  %s (best this CPU supports: %s)\n", s.cpu.kernel_level,
                s.cpu.best_level != NULL ? s.cpu.best_level : "?");
    else
        fprintf(out, "  kernels:  %s\n", s.cpu.kernel_level);
    fprintf(out, "  executor: ");
    put_cpu_executor(out, info, &s.host, 0);
    fprintf(out, "\n");
    for (uint32_t i = 1; i < s.nex; i++) {
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
    if (s.host.measured) {
        fprintf(out, "  cpu:      %.1f us per call, %.2f GFLOP/s (MATMUL)%s\n",
                s.host.overhead_s * 1e6, s.host.flops_per_s * 1e-9,
                s.host.cached ? " [cached]" : " [measured now]");
    } else {
        fprintf(out, "  cpu:      ");
        if (s.host.device_count == 0)
            put_cpu_executor(out, info, &s.host, 0);
        else
            fputs(no_model(&s.host), out);
        fprintf(out, "\n");
    }
    for (uint32_t i = 1; i < s.nex; i++) {
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
    fprintf(out, "  small work (MATMUL %" PRIu32 "^3, operands on the host): %s\n", s.pl.small_n,
            s.pl.small_executor);
    fprintf(out, "  large work (MATMUL %" PRIu32 "^3, operands on the host): %s\n", s.pl.large_n,
            s.pl.large_executor);
    if (s.pl.threshold_executor != NULL)
        fprintf(out,
                "  threshold: %s from %.3g MFLOP (MATMUL about %.0f^3) with operands on the "
                "host; %.3g MFLOP (about %.0f^3) when they are already on %s\n",
                s.pl.threshold_executor, s.pl.threshold_flops_from_host * 1e-6,
                square_n(s.pl.threshold_flops_from_host), s.pl.threshold_flops_resident * 1e-6,
                square_n(s.pl.threshold_flops_resident), s.pl.threshold_executor);
    else
        fprintf(out, "  threshold: none: no GPU executor here is faster than the cpu at any "
                     "size, so auto runs everything on the cpu\n");

    fprintf(out, "\nMPI (what a run under a launcher loads)\n");
    int launched = 0;
    for (uint32_t i = 0; i < bib_info_mpi_count(info); i++) {
        bib_info_mpi_t m = {.size = sizeof m};
        bib_info_mpi(info, i, &m);
        launched |= m.selected;
        fprintf(out, "  %s: %s: ", m.launcher, m.library);
        if (m.abi != NULL)
            fprintf(out, "%s ABI, \"%s\"", m.abi, m.version);
        else
            fprintf(out, "unusable: %s", m.absent);
        fprintf(out, "%s\n", m.selected ? " [selected]" : "");
    }
    if (!launched)
        fprintf(out, "  this process: not started by a launcher (a world of one)\n");
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
                            "compute_units",    "max_threads",   "loop_iterations"};
    uint64_t lvalues[] = {d->max_buffer_bytes, d->max_workgroup, d->shared_memory_bytes,
                          d->compute_units,    d->max_threads,   d->loop_limit};
    for (size_t i = 0; i < sizeof lnames / sizeof lnames[0]; i++) {
        fprintf(out, "%s\"%s\":", i ? "," : "", lnames[i]);
        json_number_or_null(out, lvalues[i]);
    }
    fprintf(out, "}");
}

static void render_json(FILE *out, const bib_info_t *info) {
    summary_t s;
    summarize(info, &s);

    fprintf(out, "{\"build\":");
    bib_json_string(out, bib_build_info());
    fprintf(out, ",\"cpu\":{\"model\":");
    bib_json_string(out, s.cpu.model);
    fprintf(out, ",\"cores_online\":%" PRIu32 ",\"cores_usable\":%" PRIu32, s.cpu.cores_online,
            s.cpu.cores_usable);
    fprintf(out, ",\"memory_total_bytes\":%" PRIu64 ",\"memory_available_bytes\":%" PRIu64,
            s.cpu.memory_total_bytes, s.cpu.memory_available_bytes);
    fprintf(out, ",\"features\":[");
    for (uint32_t i = 0; i < s.cpu.feature_count; i++) {
        fprintf(out, "%s", i ? "," : "");
        bib_json_string(out, s.cpu.features[i]);
    }
    fprintf(out, "],\"os_saves_ymm\":%s,\"os_saves_zmm\":%s", s.cpu.os_saves_ymm ? "true" : "false",
            s.cpu.os_saves_zmm ? "true" : "false");
    fprintf(out, ",\"kernel_level\":");
    bib_json_string(out, s.cpu.kernel_level);
    fprintf(out, ",\"executor\":");
    put_cpu_executor(out, info, &s.host, 1);
    bib_info_device_t d = {.size = sizeof d};
    if (s.host.device_count > 0 && bib_info_device(info, 0, 0, &d) == BIB_OK && d.has_facts)
        json_facts(out, &d);
    fprintf(out, "},\"gpu_executors\":[");
    for (uint32_t i = 1, n = 0; i < s.nex; i++) {
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
    /* Every executor of the build, with its model or why it has none, and
       why it is not a candidate when it is not (as the text says). */
    fprintf(out, "],\"auto\":{\"models\":[");
    fprintf(out, "{\"executor\":\"cpu\"");
    if (s.host.measured) {
        fprintf(out, ",\"overhead_s\":%.6g,\"flops_per_s\":%.6g,\"cached\":%s,\"candidate\":true}",
                s.host.overhead_s, s.host.flops_per_s, s.host.cached ? "true" : "false");
    } else {
        fprintf(out, ",\"overhead_s\":null,\"flops_per_s\":null,\"cached\":null,"
                     "\"candidate\":false,\"reason\":");
        if (s.host.device_count == 0)
            put_cpu_executor(out, info, &s.host, 1);
        else
            bib_json_string(out, no_model(&s.host));
        fprintf(out, "}");
    }
    for (uint32_t i = 1; i < s.nex; i++) {
        bib_info_executor_t e = {.size = sizeof e};
        bib_info_executor(info, i, &e);
        if (!e.built)
            continue;
        fprintf(out, ",{\"executor\":");
        bib_json_string(out, e.name);
        if (!e.measured) {
            fprintf(out, ",\"overhead_s\":null,\"flops_per_s\":null,\"transfer_s\":null,"
                         "\"bytes_per_s\":null,\"cached\":null,\"candidate\":false,\"reason\":");
            bib_json_string(out, no_model(&e));
            fprintf(out, "}");
            continue;
        }
        fprintf(out,
                ",\"overhead_s\":%.6g,\"flops_per_s\":%.6g,\"transfer_s\":%.6g,"
                "\"bytes_per_s\":%.6g,\"cached\":%s,\"candidate\":%s",
                e.overhead_s, e.flops_per_s, e.transfer_s, e.bytes_per_s,
                e.cached ? "true" : "false", e.cpu_device ? "false" : "true");
        if (e.cpu_device)
            fprintf(out,
                    ",\"reason\":\"its device is the CPU (lavapipe), never picked for speed\"");
        fprintf(out, "}");
    }
    fprintf(out, "],\"small\":{\"work\":\"MATMUL %" PRIu32 "^3\",\"executor\":", s.pl.small_n);
    bib_json_string(out, s.pl.small_executor);
    fprintf(out, "},\"large\":{\"work\":\"MATMUL %" PRIu32 "^3\",\"executor\":", s.pl.large_n);
    bib_json_string(out, s.pl.large_executor);
    fprintf(out, "}");
    if (s.pl.threshold_executor != NULL) {
        fprintf(out, ",\"threshold\":{\"executor\":");
        bib_json_string(out, s.pl.threshold_executor);
        fprintf(out, ",\"flops_from_host\":%.6g,\"flops_resident\":%.6g}",
                s.pl.threshold_flops_from_host, s.pl.threshold_flops_resident);
    } else {
        fprintf(out, ",\"threshold\":null");
    }
    fprintf(out, "},\"mpi\":[");
    for (uint32_t i = 0; i < bib_info_mpi_count(info); i++) {
        bib_info_mpi_t m = {.size = sizeof m};
        bib_info_mpi(info, i, &m);
        fprintf(out, "%s{\"launcher\":", i > 0 ? "," : "");
        bib_json_string(out, m.launcher);
        fprintf(out, ",\"library\":");
        bib_json_string(out, m.library);
        fprintf(out, ",\"abi\":");
        json_or_null(out, m.abi);
        fprintf(out, ",\"version\":");
        json_or_null(out, m.version);
        fprintf(out, ",\"absent\":");
        json_or_null(out, m.absent);
        fprintf(out, ",\"selected\":%s}", m.selected ? "true" : "false");
    }
    /* The text's "this process: not started by a launcher": null then, else
       the launcher whose library this process loads. */
    fprintf(out, "],\"launched_by\":");
    const char *launcher = NULL;
    for (uint32_t i = 0; i < bib_info_mpi_count(info); i++) {
        bib_info_mpi_t m = {.size = sizeof m};
        bib_info_mpi(info, i, &m);
        if (m.selected && launcher == NULL)
            launcher = m.launcher;
    }
    json_or_null(out, launcher);
    fprintf(out, "}\n");
}

int bib_cli_info(const bib_options_t *options, int json) {
    bib_info_t *info = NULL;
    bib_status_t st = bib_info_gather(options, &info);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: info: %s\n", bib_status_name(st));
        return bib_cli_exit_code(st);
    }
    if (json)
        render_json(stdout, info);
    else
        render_text(stdout, info);
    bib_info_free(info);
    return 0;
}
