/* bench/ops_bench.c: memory-bound tensor kernels of the CPU executor beside memcpy.
 *
 * Built by `make bench` (target build/ops_bench). For each kernel it times the
 * executor's own entry point (the one the VM calls, thread pool included) on a
 * rows x cols f32 tensor and prints GB/s counting bytes read plus bytes
 * written, beside two peers moving the same bytes in the same run:
 *   memcpy-T  the tensor copied by as many threads as the executor runs, each
 *             a contiguous share of the rows (the executor's own split), on
 *             a thread pool of its own started once (no thread start in
 *             the timing);
 *   memcpy-1  one thread's memcpy of the whole tensor.
 * Each run times memcpy-T and the kernel back to back (alternating which goes
 * first) and takes their ratio, so a ratio compares two timings taken within
 * milliseconds of each other; on a machine shared with other work that keeps
 * ratios steadier than either figure. The table gives the medians over the
 * runs and the range of the per-run ratios; `hash` is FNV-1a of the output
 * bytes, the same on every run, level and thread count for a given build and
 * shape (bits before and after a change are compared with it).
 *   build/ops_bench [rows] [cols] [runs] [kernel,kernel,...]
 *   (defaults 4096 4096 15, every kernel)
 * BIB_THREADS and BIB_CPU_LEVEL select the thread count and SIMD level,
 * BENCH_CLOCK=cpu the process's CPU time as the clock (one thread only: idle
 * pool workers poll for a while before they sleep).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "bench/timing.h"
#include "isa/isa.h"
#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/threadpool.h"

#define MAX_RUNS 99

/* ---- memcpy on T threads ------------------------------------------------ */

/* The copy runs on a thread pool of its own, the executor's kind
 * (backends/cpu/threadpool.c): the rows cut into T contiguous shares as the
 * executor cuts a kernel's rows, each claimed by whichever thread gets to
 * it first, and idle workers that poll for a while and then sleep, so
 * neither pool's workers poll through the other's timing. */
typedef struct copy {
    char *dst;
    const char *src;
    size_t row_bytes;
} copy_t;

static void copy_rows(void *arg, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    const copy_t *c = arg;
    memcpy(c->dst + begin * c->row_bytes, c->src + begin * c->row_bytes,
           (end - begin) * c->row_bytes);
}

static void copier_run(bib_threadpool_t *pool, void *dst, const void *src, size_t rows,
                       size_t row_bytes) {
    copy_t c = {.dst = dst, .src = src, .row_bytes = row_bytes};
    bib_threadpool_parallel_for(pool, rows, 1, copy_rows, &c);
}

/* ---- the kernels -------------------------------------------------------- */

static bib_view_t view(void *buf, uint32_t rows, uint32_t cols) {
    bib_view_t v = {.buf = buf, .offset = 0, .dtype = BIB_DTYPE_F32, .rank = 2};
    v.dims[0] = rows;
    v.dims[1] = cols;
    return v;
}

static bib_view_t row(void *buf, uint32_t cols) {
    bib_view_t v = {.buf = buf, .offset = 0, .dtype = BIB_DTYPE_F32, .rank = 1};
    v.dims[0] = cols;
    return v;
}

typedef struct bench_case {
    const char *name;
    bib_kernel_t kernel;
    uint32_t sub;
    int inputs;     /* full-size inputs read */
    int row_inputs; /* [cols] inputs (gamma, beta, bias row) */
} bench_case_t;

static const bench_case_t cases[] = {
    {"exp", BIB_KERNEL_UNARY, BIB_UNARY_EXP, 1, 0},
    {"gelu", BIB_KERNEL_UNARY, BIB_UNARY_GELU, 1, 0},
    {"relu", BIB_KERNEL_UNARY, BIB_UNARY_RELU, 1, 0},
    {"add", BIB_KERNEL_BINARY, BIB_BINARY_ADD, 2, 0},
    {"div", BIB_KERNEL_BINARY, BIB_BINARY_DIV, 2, 0},
    {"scale", BIB_KERNEL_SCALE, 0, 1, 0},
    {"softmax", BIB_KERNEL_SOFTMAX, 0, 1, 0},
    {"layernorm", BIB_KERNEL_LAYERNORM, 0, 1, 2},
    {"rmsnorm", BIB_KERNEL_RMSNORM, 0, 1, 1},
};
#define CASES (sizeof cases / sizeof cases[0])

/* Whether `name` is in the comma list (NULL: every kernel). */
static bool selected(const char *list, const char *name) {
    if (list == NULL)
        return true;
    size_t len = strlen(name);
    for (const char *s = list; *s;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (n == len && strncmp(s, name, n) == 0)
            return true;
        s += n + (end != NULL);
    }
    return false;
}

int main(int argc, char **argv) {
    uint32_t rows = argc > 1 ? (uint32_t)atoi(argv[1]) : 4096;
    uint32_t cols = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096;
    int runs = argc > 3 ? atoi(argv[3]) : 15;
    const char *only = argc > 4 ? argv[4] : NULL;
    if (rows == 0 || cols == 0 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: ops_bench [rows] [cols] [runs 1..%d] [kernel,...]\n", MAX_RUNS);
        return 2;
    }
    const char *clock_name = getenv("BENCH_CLOCK");
    if (clock_name != NULL && strcmp(clock_name, "cpu") == 0)
        bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    char why[256];
    uint32_t threads;
    if (bib_cpu_threads_select(0, getenv(BIB_THREADS_ENV), &threads, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "ops_bench: %s\n", why);
        return 2;
    }
    const bib_executor_ops_t *cpu = &bib_cpu_executor;
    bib_executor_config_t config = {.threads = threads};
    bib_executor_t *ex = NULL;
    if (cpu->init(&config, &ex, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "ops_bench: the CPU executor did not start: %s\n", why);
        return 1;
    }
    size_t count = (size_t)rows * cols, bytes = count * sizeof(float);
    void *a, *b, *out, *gamma, *beta;
    if (cpu->buffer_alloc(ex, bytes, &a) || cpu->buffer_alloc(ex, bytes, &b) ||
        cpu->buffer_alloc(ex, bytes, &out) || cpu->buffer_alloc(ex, cols * 4, &gamma) ||
        cpu->buffer_alloc(ex, cols * 4, &beta)) {
        fprintf(stderr, "ops_bench: out of memory for %zu-byte tensors\n", bytes);
        return 1;
    }
    float *fa = a, *fb = b, *fg = gamma, *fbeta = beta;
    uint64_t seed = 1;
    for (size_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        fa[i] = (float)((double)(seed >> 40) / (double)(1ull << 24) * 8.0 - 4.0);
        fb[i] = 1.0f + fa[i] * fa[i];
    }
    memset(out, 0, bytes);
    for (uint32_t j = 0; j < cols; j++)
        fg[j] = 1.0f + 0.001f * (float)j, fbeta[j] = 0.01f * (float)j;

    bib_threadpool_t *copier;
    if (bib_threadpool_create(threads, &copier, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "ops_bench: the memcpy threads: %s\n", why);
        return 1;
    }
    double load0 = load_average();
    printf("Memory-bound kernels, CPU executor (%s), f32[%u,%u], %d runs, %s time; "
           "peer: memcpy of the same bytes on %u thread%s (memcpy-%u) and on 1\n",
           cpu->describe ? cpu->describe(ex) : "cpu", rows, cols, runs,
           bench_clock == CLOCK_MONOTONIC ? "wall" : "process CPU", threads,
           threads == 1 ? "" : "s", threads);
    printf("%-10s %9s %10s %10s %7s %13s  %s\n", "kernel", "GB/s", "memcpy-T", "memcpy-1", "ratio",
           "ratio range", "hash");

    /* memcpy itself, on T threads and on one, alternating. */
    double tm[MAX_RUNS], t1[MAX_RUNS], tk[MAX_RUNS], ratio[MAX_RUNS];
    copier_run(copier, out, a, rows, (size_t)cols * 4);
    memcpy(out, a, bytes);
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        copier_run(copier, out, a, rows, (size_t)cols * 4);
        tm[r] = now() - t0;
        t0 = now();
        memcpy(out, a, bytes);
        t1[r] = now() - t0;
        ratio[r] = tm[r] / t1[r];
    }
    double memcpy_t = 2.0 * (double)bytes / median(tm, runs) * 1e-9;
    double memcpy_1 = 2.0 * (double)bytes / median(t1, runs) * 1e-9;
    double rmid = median(ratio, runs);
    printf("%-10s %9.1f %10.1f %10.1f %7.2f %6.2f-%-6.2f  (memcpy-1 / memcpy-T)\n", "memcpy",
           memcpy_1, memcpy_t, memcpy_1, rmid, ratio[0], ratio[runs - 1]);

    int status = 0;
    for (size_t c = 0; c < CASES; c++) {
        if (!selected(only, cases[c].name))
            continue;
        bib_call_t call = {.kernel = cases[c].kernel, .sub = cases[c].sub};
        call.out = view(out, rows, cols);
        call.in[0] = view(a, rows, cols);
        if (cases[c].inputs == 2)
            call.in[1] = view(b, rows, cols);
        if (cases[c].row_inputs >= 1)
            call.in[1] = row(gamma, cols);
        if (cases[c].row_inputs == 2)
            call.in[2] = row(beta, cols);
        call.f[0] = cases[c].kernel == BIB_KERNEL_SCALE       ? 0.5f
                    : cases[c].kernel == BIB_KERNEL_LAYERNORM ? 1e-5f
                                                              : 1e-6f;
        double moved = (double)bytes * (cases[c].inputs + 1) + 4.0 * cols * cases[c].row_inputs;
        if (cpu->kernels[call.kernel](ex, &call) != BIB_OK) { /* untimed: warms the pool */
            fprintf(stderr, "ops_bench: %s failed: %s\n", cases[c].name, cpu->error(ex));
            status = 1;
            continue;
        }
        uint64_t hash = bib_fnv1a64(BIB_FNV1A64_BASIS, out, bytes);
        for (int r = 0; r < runs; r++) {
            double tc = 0, tr = 0;
            for (int order = 0; order < 2; order++) {
                bool copy_now = (order == 0) == (r % 2 == 0);
                double t0 = now();
                if (copy_now)
                    copier_run(copier, out, a, rows, (size_t)cols * 4);
                else if (cpu->kernels[call.kernel](ex, &call) != BIB_OK)
                    status = 1;
                double dt = now() - t0;
                if (copy_now)
                    tc = dt;
                else
                    tr = dt;
            }
            tm[r] = tc;
            tk[r] = tr;
            /* kernel GB/s over memcpy-T GB/s, bytes counted the same way */
            ratio[r] = (moved / tr) / (2.0 * (double)bytes / tc);
        }
        double gbs = moved / median(tk, runs) * 1e-9;
        double peer = 2.0 * (double)bytes / median(tm, runs) * 1e-9;
        rmid = median(ratio, runs);
        printf("%-10s %9.1f %10.1f %10.1f %7.2f %6.2f-%-6.2f  %016llx\n", cases[c].name, gbs, peer,
               memcpy_1, rmid, ratio[0], ratio[runs - 1], (unsigned long long)hash);
    }
    printf("load average %.2f at the start, %.2f at the end\n", load0, load_average());
    bib_threadpool_destroy(copier);
    cpu->shutdown(ex);
    return status;
}
