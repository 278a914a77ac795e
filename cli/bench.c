/* cli/bench.c: `bib bench [--quick] [-o DIR]`, tensor workloads timed on
 * every executor present and on --backend=auto.
 *
 * Owns the workloads (MATMUL at three sizes, 8-head attention, an FFN block,
 * one transformer block), timing them through the public API exactly as an
 * embedder would run them (inputs bound, program run, result hashed on the
 * host so GPU work is finished), and the outputs: a Markdown table on stdout,
 * DIR/results.csv, and DIR/chart.png drawn by gnuplot when it is installed.
 * An executor that cannot start here is a visible skip with its reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "include/bib.h"
#include "cli/cli.h"
#include "isa/isa.h"
#include "vm/fileio.h"
#include "vm/json.h"

#define MAX_INPUTS 16
#define MAX_EXECUTORS 4

typedef struct input_spec {
    const char *name;
    uint32_t rank;
    uint32_t dims[2];
    float scale; /* values uniform in [-scale, scale] */
} input_spec_t;

typedef struct workload {
    char name[48];
    char source[2048];
    input_spec_t inputs[MAX_INPUTS];
    int ninputs;
    double flops;
} workload_t;

typedef struct result {
    int status; /* 0 ran; else skipped (why) */
    double best_ms, median_ms;
    int reps;
    uint64_t hash;
    char why[256];
} result_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- workloads ---------------------------------------------------------------- */

static void add_input(workload_t *w, const char *name, uint32_t rank, uint32_t d0, uint32_t d1,
                      float scale) {
    input_spec_t *in = &w->inputs[w->ninputs++];
    in->name = name;
    in->rank = rank;
    in->dims[0] = d0;
    in->dims[1] = d1;
    in->scale = scale;
}

static void make_matmul(workload_t *w, uint32_t n) {
    snprintf(w->name, sizeof w->name, "matmul-%u", n);
    snprintf(w->source, sizeof w->source,
             ".input A t0 f32[n, n]\n.input B t1 f32[n, n]\n.output y t2 f32[?, ?]\n"
             ".func main regs=4\n    MATMUL t2, A, B\n"
             "    LDI r1, 0\n    TGET r0, y, r1\n    HALT r0\n.end\n");
    add_input(w, "A", 2, n, n, 1.0f);
    add_input(w, "B", 2, n, n, 1.0f / sqrtf((float)n));
    w->flops = 2.0 * n * n * n;
}

static void make_attention(workload_t *w, uint32_t s, uint32_t heads, uint32_t d) {
    snprintf(w->name, sizeof w->name, "attention-%ux%uh", s, heads);
    snprintf(w->source, sizeof w->source,
             ".input q t0 f32[s, w]\n.input k t1 f32[s, w]\n.input v t2 f32[s, w]\n"
             ".output y t7 f32[?, ?, ?]\n"
             ".func main regs=8\n"
             "    DIM r0, q, 0\n    LDI r1, %u\n    LDI r2, %u\n"
             "    RESHAPE t4, q, r0, 3\n    RESHAPE t5, k, r0, 3\n    RESHAPE t6, v, r0, 3\n"
             "    ATTENTION t7, t4, t5, t6\n"
             "    LDI r1, 0\n    TGET r0, y, r1\n    HALT r0\n.end\n",
             heads, d);
    add_input(w, "q", 2, s, heads * d, 1.0f);
    add_input(w, "k", 2, s, heads * d, 1.0f);
    add_input(w, "v", 2, s, heads * d, 1.0f);
    w->flops = (double)s * s * heads * (4.0 * d);
}

static void make_ffn(workload_t *w, uint32_t n, uint32_t d, uint32_t h) {
    snprintf(w->name, sizeof w->name, "ffn-%ux%u", n, d);
    snprintf(w->source, sizeof w->source,
             ".input x t0 f32[n, d]\n.input W1 t1 f32[d, h]\n.input b1 t2 f32[h]\n"
             ".input W2 t3 f32[h, d]\n.input b2 t4 f32[d]\n.output y t6 f32[?, ?]\n"
             ".func main regs=2\n    LINEAR_GELU t5, x, W1, b1\n    LINEAR t6, t5, W2, b2\n"
             "    LDI r1, 0\n    TGET r0, y, r1\n    HALT r0\n.end\n");
    add_input(w, "x", 2, n, d, 1.0f);
    add_input(w, "W1", 2, d, h, 1.0f / sqrtf((float)d));
    add_input(w, "b1", 1, h, 0, 0.1f);
    add_input(w, "W2", 2, h, d, 1.0f / sqrtf((float)h));
    add_input(w, "b2", 1, d, 0, 0.1f);
    w->flops = 2.0 * n * d * h * 2;
}

/* One pre-norm transformer block: causal 8-head self-attention and a GELU FFN,
 * each with a residual. */
static void make_block(workload_t *w, uint32_t n, uint32_t d, uint32_t heads) {
    snprintf(w->name, sizeof w->name, "block-%ux%u", n, d);
    snprintf(w->source, sizeof w->source,
             ".input x t0 f32[n, d]\n.input g t1 f32[d]\n.input b t2 f32[d]\n"
             ".input Wq t3 f32[d, d]\n.input Wk t4 f32[d, d]\n.input Wv t5 f32[d, d]\n"
             ".input Wo t6 f32[d, d]\n.input bd t7 f32[d]\n"
             ".input W1 t8 f32[d, h]\n.input b1 t9 f32[h]\n.input W2 t10 f32[h, d]\n"
             ".output y t25 f32[?, ?]\n"
             ".func main regs=8\n"
             "    LAYERNORM t11, x, g, b\n"
             "    LINEAR t12, t11, Wq, bd\n    LINEAR t13, t11, Wk, bd\n"
             "    LINEAR t14, t11, Wv, bd\n"
             "    DIM r0, x, 0\n    LDI r1, %u\n    LDI r2, %u\n"
             "    RESHAPE t15, t12, r0, 3\n    RESHAPE t16, t13, r0, 3\n"
             "    RESHAPE t17, t14, r0, 3\n"
             "    ATTENTION_CAUSAL t18, t15, t16, t17\n"
             "    DIM r4, x, 1\n    MOV r3, r0\n    RESHAPE t19, t18, r3, 2\n"
             "    LINEAR t20, t19, Wo, bd\n    TADD t21, x, t20\n"
             "    LAYERNORM t22, t21, g, b\n    LINEAR_GELU t23, t22, W1, b1\n"
             "    LINEAR t24, t23, W2, bd\n    TADD t25, t21, t24\n"
             "    LDI r1, 0\n    TGET r0, y, r1\n    HALT r0\n.end\n",
             heads, d / heads);
    uint32_t h = 4 * d;
    add_input(w, "x", 2, n, d, 1.0f);
    add_input(w, "g", 1, d, 0, 1.0f);
    add_input(w, "b", 1, d, 0, 0.1f);
    const char *sq[] = {"Wq", "Wk", "Wv", "Wo"};
    for (int i = 0; i < 4; i++)
        add_input(w, sq[i], 2, d, d, 1.0f / sqrtf((float)d));
    add_input(w, "bd", 1, d, 0, 0.1f);
    add_input(w, "W1", 2, d, h, 1.0f / sqrtf((float)d));
    add_input(w, "b1", 1, h, 0, 0.1f);
    add_input(w, "W2", 2, h, d, 1.0f / sqrtf((float)h));
    w->flops = 2.0 * n * d * d * 4 + (double)n * n * d * 2 + 2.0 * n * d * h * 2;
}

/* ---- running ------------------------------------------------------------------- */

/* Fills data with values uniform in [-scale, scale] from a fixed seed, so
   every executor sees the same inputs (and must give the same hash). */
static void fill(float *data, size_t n, float scale, uint32_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        data[i] = ((float)(x >> 40) / (float)(1u << 24) * 2 - 1) * scale;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run_one(const bib_options_t *base, const char *backend, const workload_t *w,
                    const uint8_t *module, size_t size, int reps, result_t *r) {
    memset(r, 0, sizeof *r);
    bib_options_t o = *base;
    o.backend = backend;
    o.max_memory = (uint64_t)4 << 30;
    bib_vm_t *vm = NULL;
    bib_status_t st = bib_vm_create(&o, &vm);
    if (st == BIB_OK)
        st = bib_vm_load(vm, module, size, w->name);
    for (int i = 0; st == BIB_OK && i < w->ninputs; i++) {
        const input_spec_t *in = &w->inputs[i];
        size_t n = in->dims[0] * (size_t)(in->rank == 2 ? in->dims[1] : 1);
        float *data = malloc(n * sizeof *data);
        if (data == NULL) {
            st = BIB_E_NOMEM;
            break;
        }
        fill(data, n, in->scale, (uint32_t)i + 1);
        st = bib_vm_set_input(vm, in->name, BIB_DTYPE_F32, in->rank, in->dims, data);
        free(data);
    }
    double times[16];
    int64_t exit_value = 0;
    /* The first run starts the executor (and, for auto, measures it): not timed. */
    if (st == BIB_OK)
        st = bib_vm_run(vm, &exit_value);
    for (int i = 0; st == BIB_OK && i < reps; i++) {
        double t0 = now_s();
        st = bib_vm_run(vm, &exit_value);
        times[i] = (now_s() - t0) * 1e3;
    }
    if (st != BIB_OK) {
        r->status = (int)st;
        snprintf(r->why, sizeof r->why, "%s", vm ? bib_vm_error(vm) : bib_status_name(st));
    } else {
        qsort(times, (size_t)reps, sizeof times[0], cmp_double);
        r->best_ms = times[0];
        r->median_ms = times[reps / 2];
        r->reps = reps;
        /* FNV-1a 64 of the result's bytes: equal hashes, equal bits. */
        const void *data = NULL;
        bib_dtype_t dtype;
        uint32_t rank, dims[BIB_MAX_RANK];
        r->hash = BIB_FNV1A64_BASIS;
        if (bib_vm_get_output(vm, "y", &dtype, &rank, dims, &data) == BIB_OK) {
            size_t n = 4;
            for (uint32_t i = 0; i < rank; i++)
                n *= dims[i];
            r->hash = bib_fnv1a64(r->hash, data, n);
        }
    }
    bib_vm_destroy(vm);
}

/* ---- output --------------------------------------------------------------------- */

/* Creates dir when it is missing. -o's folder must have a parent already,
   as every output's folder must (spec/cli.md); the default, build/bench,
   gets its parents too (parents set). */
static int make_dir(const char *dir, bool parents) {
    char path[4096];
    if (strlen(dir) >= sizeof path) {
        fprintf(stderr, "bib: bench: cannot create '%s': %s\n", BIB_PATH_QUOTE(dir),
                strerror(ENAMETOOLONG));
        return -1;
    }
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; parents && *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bib: bench: cannot create '%s': %s\n", BIB_PATH_QUOTE(dir),
                strerror(errno));
        return -1;
    }
    char probe[4200], why[4400];
    snprintf(probe, sizeof probe, "%s/results.csv", dir);
    if (bib_file_check_writable(probe, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: bench: %s\n", why);
        return -1;
    }
    return 0;
}

/* The first device of the executor called name, from the facts of bib info;
   0 when it has none. */
static int first_device(const bib_info_t *info, const char *name, bib_info_device_t *device) {
    for (uint32_t i = 0; info != NULL && i < bib_info_executor_count(info); i++) {
        bib_info_executor_t e = {.size = sizeof e};
        if (bib_info_executor(info, i, &e) == BIB_OK && strcmp(e.name, name) == 0)
            return e.device_count > 0 && bib_info_device(info, i, 0, device) == BIB_OK;
    }
    return 0;
}

/* What each executor runs on, for the chart's subtitle: "cpu: AMD EPYC (2
   threads)", "vulkan: llvmpipe (CPU, software Vulkan)"; from bib info. */
static void device_names(const bib_options_t *options, const char *const *names, int nex,
                         char (*out)[160]) {
    bib_options_t o = *options;
    o.backend = NULL;
    bib_info_t *info = NULL;
    if (bib_info_gather(&o, &info) != BIB_OK)
        info = NULL;
    bib_info_cpu_t cpu = {.size = sizeof cpu};
    const char *model = info != NULL && bib_info_cpu(info, &cpu) == BIB_OK ? cpu.model : "";
    for (int e = 0; e < nex; e++) {
        bib_info_device_t d = {.size = sizeof d};
        int have = first_device(info, names[e], &d);
        if (strcmp(names[e], "cpu") == 0) {
            /* "cpu: avx512, 2 threads, fp32 ..." -> "2 threads" */
            const char *t = have ? strchr(d.describe, ',') : NULL;
            char count[32] = "";
            if (t != NULL)
                snprintf(count, sizeof count, "%.*s", (int)strcspn(t + 2, ","), t + 2);
            snprintf(out[e], sizeof out[e], "cpu: %.127s%s%s%s", model[0] ? model : "the CPU",
                     count[0] ? " (" : "", count, count[0] ? ")" : "");
            continue;
        }
        if (strcmp(names[e], "auto") == 0) {
            snprintf(out[e], sizeof out[e], "auto: picks an executor per instruction");
            continue;
        }
        if (!have || !d.has_facts) {
            snprintf(out[e], sizeof out[e], "%s: device not described", names[e]);
            continue;
        }
        /* lavapipe and other CPU Vulkan drivers: say so, lest its bars read
           as a GPU's. */
        const char *kind = strcmp(names[e], "vulkan") == 0 && strcmp(d.kind, "CPU") == 0
                               ? "CPU, software Vulkan"
                               : d.kind;
        snprintf(out[e], sizeof out[e], "%s: %.90s (%s)", names[e], d.name, kind);
    }
    bib_info_free(info);
}

/* Draws DIR/chart.png: GFLOP/s per workload on a log axis, one bar per
   executor with its value on it, and a subtitle naming each executor's
   device, the machine and the date. */
static void chart(const bib_options_t *options, const char *dir, const workload_t *w, int nw,
                  const char *const *names, int nex, result_t (*res)[MAX_EXECUTORS]) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bib: bench: gnuplot is not installed (apt install gnuplot-nox): no "
                        "chart drawn\n");
        return;
    }
    char tmp[] = "/tmp/bib-bench-XXXXXX";
    if (mkdtemp(tmp) == NULL) {
        fprintf(stderr, "bib: bench: no temporary directory for the chart: %s\n", strerror(errno));
        return;
    }
    char dat[4200], plt[4200], png[4200], cmd[20000];
    snprintf(dat, sizeof dat, "%s/data.dat", tmp);
    snprintf(plt, sizeof plt, "%s/chart.gp", tmp);
    snprintf(png, sizeof png, "%s/chart.png", dir);
    /* gnuplot draws into a temporary file beside chart.png, renamed over it
       once the drawing succeeded. */
    bib_file_out_t out;
    char why[4400];
    if (bib_file_out_open(&out, png, why, sizeof why) != BIB_OK ||
        bib_file_out_close(&out, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: bench: %s\n", why);
        bib_file_out_discard(&out);
        rmdir(tmp);
        return;
    }
    FILE *f = fopen(dat, "w");
    FILE *g = f ? fopen(plt, "w") : NULL;
    if (f == NULL || g == NULL) {
        fprintf(stderr, "bib: bench: cannot write the chart data in %s\n", tmp);
        if (f)
            fclose(f);
        bib_file_out_discard(&out);
        return;
    }
    fprintf(f, "workload");
    for (int e = 0; e < nex; e++)
        fprintf(f, " %s", names[e]);
    fprintf(f, "\n");
    double top = 0, bottom = 0;
    for (int i = 0; i < nw; i++) {
        fprintf(f, "%s", w[i].name);
        for (int e = 0; e < nex; e++) {
            if (res[i][e].status != 0 || res[i][e].best_ms <= 0) {
                fprintf(f, " NaN"); /* failed: no bar */
                continue;
            }
            double gflops = w[i].flops / (res[i][e].best_ms * 1e-3) * 1e-9;
            top = gflops > top ? gflops : top;
            bottom = bottom == 0 || gflops < bottom ? gflops : bottom;
            fprintf(f, " %.6g", gflops);
        }
        fprintf(f, "\n");
    }
    fclose(f);
    if (top <= 0)
        top = bottom = 1;
    /* The subtitle: each executor's device, the machine, the date. */
    char devices[MAX_EXECUTORS][160];
    device_names(options, names, nex, devices);
    char subtitle[1024] = "";
    size_t sn = 0;
    for (int e = 0; e < nex && sn < sizeof subtitle; e++)
        sn += (size_t)snprintf(subtitle + sn, sizeof subtitle - sn, "%s%s", e ? "\\n" : "",
                               devices[e]);
    char host[128] = "", date[32] = "";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL)
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    /* Quotes and backslashes would end or change gnuplot's string. */
    for (char *p = subtitle; *p; p++)
        if (*p == '"' || (*p == '\\' && p[1] != 'n'))
            *p = ' ';
    for (char *p = host; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = ' ';
    /* Log axis: the executors differ by orders of magnitude. Bars of
       column c sit at x + (c - 2 - (nex - 1) / 2) / (nex + 1) in a
       clustered histogram with gap 1; each value is written above its bar. */
    int height = 560 + 18 * nex;
    fprintf(g,
            "set terminal pngcairo size 1100,%d noenhanced font ',10'\n"
            "if (!exists('outfile')) outfile = 'chart.png'\n"
            "if (!exists('datafile')) datafile = 'chart.dat'\n"
            "set output outfile\n"
            "set title \"bib bench: GFLOP/s per workload (higher is better, log scale)\\n"
            "%s\\nmachine %s, %s\" font ',10'\n"
            "set style data histogram\nset style histogram clustered gap 1\n"
            "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
            "set ylabel 'GFLOP/s (log scale)'\nset grid ytics mytics\n"
            "set logscale y\nset yrange [%.6g:%.6g]\n"
            "set key inside top left vertical box opaque\n"
            "set lmargin 12\nset rmargin 6\nset bmargin 7\nset tmargin %d\n"
            "set xtics rotate by 25 right nomirror\nset xrange [-0.6:%d.6]\n"
            "n = %d\n"
            "plot for [c=2:n+1] datafile using c:xtic(1) title columnheader(c), \\\n"
            "     for [c=2:n+1] datafile skip 1 using ($0 + (c - 2 - (n - 1) / 2.0) / (n + "
            "1)):(column(c) * "
            "1.15):(sprintf('%%.3g', column(c))) with labels rotate by 90 left font ',8' "
            "notitle\n",
            height, subtitle, host[0] ? host : "unknown", date, bottom / 4, top * 12, 4 + nex,
            nw - 1, nex);
    fclose(g);
    /* The script and data stay beside the chart (chart.gp, chart.dat), so
       that `cd DIR && gnuplot chart.gp` redraws it; here they are drawn from
       the temporary folder. */
    snprintf(cmd, sizeof cmd, "gnuplot -e \"outfile='%s'; datafile='%s'\" '%s' 2>&1", out.tmp, dat,
             plt);
    int rc = system(cmd);
    if (rc != 0) {
        /* pngcairo is missing from some builds: the plain png terminal then. */
        snprintf(cmd, sizeof cmd,
                 "sed -i 's/^set terminal pngcairo.*/set terminal png size 1100,640/' '%s' && "
                 "gnuplot -e \"outfile='%s'; datafile='%s'\" '%s'",
                 plt, out.tmp, dat, plt);
        rc = system(cmd);
    }
    if (rc == 0) {
        int fd = open(out.tmp, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            (void)fsync(fd);
            close(fd);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "bib: bench: gnuplot failed (exit %d); the data is in %s\n", rc, tmp);
        bib_file_out_discard(&out);
        return;
    }
    if (bib_file_out_commit(&out, why, sizeof why) != BIB_OK)
        fprintf(stderr, "bib: bench: %s\n", why);
    else
        fprintf(stderr, "bib: bench: wrote %s\n", png);
    const char *keep[2][2] = {{plt, "chart.gp"}, {dat, "chart.dat"}};
    for (int k = 0; k < 2; k++) {
        uint8_t *bytes;
        size_t size;
        char target[4200];
        snprintf(target, sizeof target, "%s/%s", dir, keep[k][1]);
        if (bib_file_read(keep[k][0], 0, &bytes, &size, why, sizeof why) != BIB_OK ||
            bib_file_write(target, bytes, size, why, sizeof why) != BIB_OK)
            fprintf(stderr, "bib: bench: %s\n", why);
        else
            free(bytes);
    }
    remove(dat);
    remove(plt);
    rmdir(tmp);
}

int bib_cli_bench(const bib_options_t *options, const char *dir, int quick) {
    const bool parents = dir == NULL;
    if (dir == NULL)
        dir = "build/bench";
    static workload_t w[8];
    int nw = 0;
    memset(w, 0, sizeof w);
    if (quick) {
        make_matmul(&w[nw++], 128);
        make_matmul(&w[nw++], 256);
        make_matmul(&w[nw++], 512);
        make_attention(&w[nw++], 128, 8, 32);
        make_ffn(&w[nw++], 64, 128, 512);
        make_block(&w[nw++], 64, 128, 8);
    } else {
        make_matmul(&w[nw++], 512);
        make_matmul(&w[nw++], 1024);
        make_matmul(&w[nw++], 2048);
        make_attention(&w[nw++], 512, 8, 64);
        make_ffn(&w[nw++], 256, 512, 2048);
        make_block(&w[nw++], 256, 512, 8);
    }
    /* The folder first: a typo in -o costs nothing. */
    if (make_dir(dir, parents) != 0)
        return BIB_EXIT_CANTCREATE;
    const int reps = quick ? 2 : 3;
    const char *const candidates[] = {"cpu", "cuda", "vulkan", "auto"};
    const char *names[MAX_EXECUTORS];
    int nex = 0;
    bool interactive = isatty(STDERR_FILENO);

    uint8_t *modules[8] = {0};
    size_t sizes[8] = {0};
    for (int i = 0; i < nw; i++) {
        char *diag = NULL;
        bib_status_t st = bib_assemble(w[i].source, strlen(w[i].source), w[i].name, &modules[i],
                                       &sizes[i], &diag);
        if (st != BIB_OK) {
            fprintf(stderr, "bib: bench: workload %s does not assemble:\n%s\n", w[i].name,
                    diag ? diag : "");
            bib_free(diag);
            return BIB_EXIT_DATA;
        }
        bib_free(diag);
    }

    static result_t res[8][MAX_EXECUTORS];
    char skipped[MAX_EXECUTORS][300];
    int nskipped = 0;
    for (int c = 0; c < 4; c++) {
        /* Probe: an executor that cannot start is skipped with its reason. */
        result_t probe;
        run_one(options, candidates[c], &w[0], modules[0], sizes[0], 1, &probe);
        if (probe.status == BIB_E_UNAVAILABLE)
            snprintf(skipped[nskipped++], sizeof skipped[0], "%s: %s", candidates[c], probe.why);
        else
            names[nex++] = candidates[c];
    }
    /* Executors take turns on each workload, so a machine whose load drifts
       during the run skews every column alike. */
    for (int i = 0; i < nw; i++)
        for (int e = 0; e < nex; e++) {
            if (interactive)
                fprintf(stderr, "\r\033[K[%d/%d] %s on %s ...", i * nex + e + 1, nw * nex,
                        w[i].name, names[e]);
            run_one(options, names[e], &w[i], modules[i], sizes[i], reps, &res[i][e]);
        }
    if (interactive)
        fprintf(stderr, "\r\033[K");
    for (int i = 0; i < nw; i++)
        bib_free(modules[i]);

    /* The table. */
    printf("| workload | GFLOP |");
    for (int e = 0; e < nex; e++)
        printf(" %s ms (GFLOP/s) |", names[e]);
    printf(" same bits |\n|---|---:|");
    for (int e = 0; e < nex; e++)
        printf("---:|");
    printf("---|\n");
    bool all_same = true;
    for (int i = 0; i < nw; i++) {
        printf("| %s | %.3f |", w[i].name, w[i].flops * 1e-9);
        bool same = true;
        int first = -1;
        for (int e = 0; e < nex; e++) {
            const result_t *r = &res[i][e];
            if (r->status != 0) {
                printf(" failed |");
                same = false;
                continue;
            }
            printf(" %.2f (%.1f) |", r->best_ms, w[i].flops / (r->best_ms * 1e-3) * 1e-9);
            if (first < 0)
                first = e;
            else if (r->hash != res[i][first].hash)
                same = false;
        }
        all_same &= same;
        printf(" %s |\n", same ? "yes" : "NO");
    }
    printf("\nBest of %d timed runs after one untimed run; each run binds the inputs, runs the "
           "program and reads one result element on the host (so GPU work is finished and the "
           "result read back). "
           "\"same bits\": every executor's result hash is identical.\n",
           reps);
    for (int i = 0; i < nskipped; i++)
        printf("\nSKIP %s\n", skipped[i]);
    for (int i = 0; i < nw; i++)
        for (int e = 0; e < nex; e++)
            if (res[i][e].status != 0)
                printf("\n%s on %s failed: %s\n", w[i].name, names[e], res[i][e].why);

    /* CSV and chart: each file whole, or not written. */
    char path[4200], why[4400];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    char *csv = NULL;
    size_t csv_len = 0;
    FILE *f = open_memstream(&csv, &csv_len);
    if (f == NULL) {
        fprintf(stderr, "bib: bench: cannot write '%s': %s\n", path, strerror(errno));
        return BIB_EXIT_CANTCREATE;
    }
    fprintf(f, "workload,executor,flops,best_ms,median_ms,gflops,reps,hash,status\n");
    for (int i = 0; i < nw; i++)
        for (int e = 0; e < nex; e++) {
            const result_t *r = &res[i][e];
            fprintf(f, "%s,%s,%.0f,%.4f,%.4f,%.3f,%d,%016llx,%s\n", w[i].name, names[e], w[i].flops,
                    r->best_ms, r->median_ms,
                    r->status == 0 ? w[i].flops / (r->best_ms * 1e-3) * 1e-9 : 0.0, r->reps,
                    (unsigned long long)r->hash, r->status == 0 ? "ok" : "failed");
        }
    bool written = false;
    if (fclose(f) != 0)
        snprintf(why, sizeof why, "cannot write '%s': %s", path, strerror(errno));
    else
        written = bib_file_write(path, csv, csv_len, why, sizeof why) == BIB_OK;
    free(csv);
    if (!written) {
        fprintf(stderr, "bib: bench: %s\n", why);
        return BIB_EXIT_CANTCREATE;
    }
    fprintf(stderr, "bib: bench: wrote %s\n", path);
    chart(options, dir, w, nw, names, nex, res);
    return all_same ? 0 : BIB_EXIT_TESTFAIL;
}

/* ---- bib bench FILE ---------------------------------------------------------------- */

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\n\r") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Reads every output on the host, so that work a device still has queued is
   inside the timed run, as it is in bench's own workloads. */
static bib_status_t read_outputs(bib_vm_t *vm) {
    uint32_t count = bib_vm_tensor_count(vm);
    for (uint32_t i = 0; i < count; i++) {
        bib_tensor_info_t t;
        if (bib_vm_tensor_info(vm, i, &t) != BIB_OK || !t.is_output)
            continue;
        bib_dtype_t dtype;
        uint32_t rank, dims[BIB_MAX_RANK];
        const void *data;
        bib_status_t st = bib_vm_get_output(vm, t.name, &dtype, &rank, dims, &data);
        if (st != BIB_OK)
            return st;
    }
    return BIB_OK;
}

int bib_cli_bench_module(bib_vm_t *vm, const char *path, const char *backend,
                         const bib_cli_bench_flags_t *flags) {
    for (int i = 0; i < flags->warmup; i++) {
        int64_t exit_value;
        bib_status_t st = bib_vm_run(vm, &exit_value);
        if (st == BIB_OK)
            st = read_outputs(vm);
        if (st != BIB_OK) {
            fprintf(stderr, "bib: bench: %s: warmup run %d: %s\n", path, i + 1, bib_vm_error(vm));
            return bib_cli_exit_code(st);
        }
    }
    double *times = bib_cli_alloc(sizeof *times * (size_t)flags->repetitions);
    for (int i = 0; i < flags->repetitions; i++) {
        int64_t exit_value;
        double t0 = now_s();
        bib_status_t st = bib_vm_run(vm, &exit_value);
        if (st == BIB_OK)
            st = read_outputs(vm);
        times[i] = (now_s() - t0) * 1e3;
        if (st != BIB_OK) {
            fprintf(stderr, "bib: bench: %s: run %d: %s\n", path, i + 1, bib_vm_error(vm));
            free(times);
            return bib_cli_exit_code(st);
        }
    }
    /* The times in run order for JSON, sorted for the statistics. */
    double *sorted = bib_cli_alloc(sizeof *sorted * (size_t)flags->repetitions);
    memcpy(sorted, times, sizeof *sorted * (size_t)flags->repetitions);
    qsort(sorted, (size_t)flags->repetitions, sizeof *sorted, cmp_double);
    int n = flags->repetitions;
    double min = sorted[0], max = sorted[n - 1];
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    free(sorted);
    /* One more run, profiled: the instrumented loop times each opcode (and is
       slower), so it is not one of the timed runs. */
    bib_vm_profile(vm, 1);
    int64_t exit_value;
    bib_status_t st = bib_vm_run(vm, &exit_value);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: bench: %s: profiled run: %s\n", path, bib_vm_error(vm));
        free(times);
        return bib_cli_exit_code(st);
    }
    uint32_t rows = bib_vm_profile_rows(vm);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        free(times);
        return BIB_EXIT_NOMEM;
    }
    if (flags->format == BIB_BENCH_JSON) {
        fprintf(f, "{\"file\":");
        bib_json_string(f, path);
        fprintf(f, ",\"backend\":");
        bib_json_string(f, backend);
        fprintf(f,
                ",\"warmup\":%d,\"repetitions\":%d,\"min_ms\":%.6f,\"median_ms\":%.6f,"
                "\"max_ms\":%.6f,\"times_ms\":[",
                flags->warmup, n, min, median, max);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%.6f", i ? "," : "", times[i]);
        fprintf(f, "],\"profile\":[");
    } else if (flags->format == BIB_BENCH_CSV) {
        fprintf(f, "kind,name,executor,count,min_ms,median_ms,max_ms,total_ms,mean_us,flops,"
                   "bytes\n");
        fprintf(f, "run,");
        csv_field(f, path);
        fprintf(f, ",");
        csv_field(f, backend);
        fprintf(f, ",%d,%.6f,%.6f,%.6f,,,,\n", n, min, median, max);
    } else {
        fprintf(f, "%s on %s: %d timed run%s after %d untimed\n\n", path, backend, n,
                n == 1 ? "" : "s", flags->warmup);
        fprintf(f, "| runs | min ms | median ms | max ms |\n|---:|---:|---:|---:|\n");
        fprintf(f, "| %d | %.3f | %.3f | %.3f |\n\n", n, min, median, max);
        fprintf(f, "Per opcode, from one more run with the profiler on (spec/cli.md, "
                   "Profiles):\n\n");
        fprintf(f, "| op | executor | count | total ms | mean us | GFLOP/s | GB/s |\n"
                   "|---|---|---:|---:|---:|---:|---:|\n");
    }
    for (uint32_t i = 0; i < rows; i++) {
        bib_profile_row_t r;
        if (bib_vm_profile_row(vm, i, &r) != BIB_OK)
            continue;
        double mean_us = r.count ? r.seconds / (double)r.count * 1e6 : 0;
        if (flags->format == BIB_BENCH_JSON) {
            fprintf(f, "%s{\"op\":", i ? "," : "");
            bib_json_string(f, r.op);
            fprintf(f, ",\"executor\":");
            bib_json_string(f, r.executor);
            fprintf(f,
                    ",\"count\":%llu,\"total_ms\":%.6f,\"mean_us\":%.6f,\"flops\":%llu,"
                    "\"bytes\":%llu}",
                    (unsigned long long)r.count, r.seconds * 1e3, mean_us,
                    (unsigned long long)r.flops, (unsigned long long)r.bytes);
        } else if (flags->format == BIB_BENCH_CSV) {
            fprintf(f, "op,");
            csv_field(f, r.op);
            fprintf(f, ",");
            csv_field(f, r.executor);
            fprintf(f, ",%llu,,,,%.6f,%.6f,%llu,%llu\n", (unsigned long long)r.count,
                    r.seconds * 1e3, mean_us, (unsigned long long)r.flops,
                    (unsigned long long)r.bytes);
        } else {
            char gflops[32] = "-", gbps[32] = "-";
            if (r.flops && r.seconds > 0)
                snprintf(gflops, sizeof gflops, "%.3f", (double)r.flops / r.seconds * 1e-9);
            if (r.bytes && r.seconds > 0)
                snprintf(gbps, sizeof gbps, "%.3f", (double)r.bytes / r.seconds * 1e-9);
            fprintf(f, "| %s | %s | %llu | %.3f | %.3f | %s | %s |\n", r.op, r.executor,
                    (unsigned long long)r.count, r.seconds * 1e3, mean_us, gflops, gbps);
        }
    }
    if (flags->format == BIB_BENCH_JSON)
        fprintf(f, "]}\n");
    free(times);
    int rc = 0;
    char why[600];
    if (fclose(f) != 0) {
        fprintf(stderr, "bib: bench: cannot write the report: %s\n", strerror(errno));
        rc = BIB_EXIT_NOMEM;
    } else if (bib_file_write(flags->output ? flags->output : "-", text, len, why, sizeof why) !=
               BIB_OK) {
        fprintf(stderr, "bib: bench: %s\n", why);
        rc = BIB_EXIT_CANTCREATE;
    }
    free(text);
    return rc;
}
