/* bench/ops_bench.c: memory-bound tensor kernels of the CPU executor beside memcpy.
 *
 * Built by `make bench` (target build/ops_bench). For each kernel it times the
 * executor's own entry point (the one the VM calls, thread pool included) on a
 * rows x cols f32 tensor and prints GB/s counting bytes read plus bytes
 * written, beside a memcpy of the same bytes measured in the same run.
 *   build/ops_bench [rows] [cols] [runs]      (defaults 4096 4096 9)
 * BIB_THREADS and BIB_CPU_LEVEL select the thread count and SIMD level.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

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

int main(int argc, char **argv) {
    uint32_t rows = argc > 1 ? (uint32_t)atoi(argv[1]) : 4096;
    uint32_t cols = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096;
    int runs = argc > 3 ? atoi(argv[3]) : 9;
    if (rows == 0 || cols == 0 || runs < 1 || runs > 99) {
        fprintf(stderr, "usage: ops_bench [rows] [cols] [runs 1..99]\n");
        return 2;
    }
    const bib_executor_ops_t *cpu = &bib_cpu_executor;
    bib_executor_config_t config = {0};
    bib_executor_t *ex = NULL;
    char why[256];
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
    for (uint32_t j = 0; j < cols; j++)
        fg[j] = 1.0f + 0.001f * (float)j, fbeta[j] = 0.01f * (float)j;

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
    double t[99];
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        memcpy(out, a, bytes);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    double memcpy_gbs = 2.0 * (double)bytes / t[runs / 2] * 1e-9;
    printf("Memory-bound kernels, CPU executor (%s), f32[%u,%u], median of %d\n",
           cpu->describe ? cpu->describe(ex) : "cpu", rows, cols, runs);
    printf("%-10s %10s %10s %8s\n", "kernel", "GB/s", "memcpy", "ratio");
    printf("%-10s %10.1f %10.1f %8.2f\n", "memcpy", memcpy_gbs, memcpy_gbs, 1.0);
    int status = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
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
        for (int r = 0; r < runs; r++) {
            double t0 = now();
            bib_status_t st = cpu->kernels[call.kernel](ex, &call);
            t[r] = now() - t0;
            if (st != BIB_OK) {
                fprintf(stderr, "ops_bench: %s failed: %s\n", cases[c].name, cpu->error(ex));
                status = 1;
                break;
            }
        }
        qsort(t, (size_t)runs, sizeof t[0], cmp_double);
        double moved = (double)bytes * (cases[c].inputs + 1) + 4.0 * cols * cases[c].row_inputs;
        double gbs = moved / t[runs / 2] * 1e-9;
        printf("%-10s %10.1f %10.1f %8.2f\n", cases[c].name, gbs, memcpy_gbs, gbs / memcpy_gbs);
    }
    cpu->shutdown(ex);
    return status;
}
