/* bench/gpu_bench.c: a GPU executor's speed, through its ops table.
 *
 *   build/gpu_bench [cuda|vulkan] [MAX_N [MIN_N]]  (default: cuda 8192 1024)
 *
 * MIN_N = MAX_N times one MATMUL size only, with neither softmax nor the
 * tiny ops: what a profiler is pointed at (`make gpu-check`'s ncu_matmul).
 *
 * Run by `make cuda-bench` and `make gpu-check` (backends/cuda/cuda.mk) for
 * both executors; bench/torch_peer.py prints cuBLAS and torch.softmax, the
 * peers, in the same run. Prints:
 *   - MATMUL, fp32, bit-exact (one fma chain per output), square n = 1024,
 *     2048, 4096, 8192: TFLOP/s (2 n^3 per product), median of 5 timed
 *     batches after warm-up; a sample of outputs is checked against the
 *     contract's chain computed on the host;
 *   - SOFTMAX over 4096 x 4096: GB/s counting one read and one write;
 *   - per-op cost of tiny kernels queued back to back (FILL and ADD on 16
 *     floats): microseconds per op, wall time over many ops, one wait at the end.
 * Timing is the host clock around synchronize; each batch is long enough
 * (>= 50 ms) that the one wait is noise. Without the executor or its device
 * it prints "SKIP: <reason>" and exits 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "bench/timing.h"
#include "vm/placement.h"

static const bib_executor_ops_t *ops;
static char label[64]; /* "matmul fp32 exact (bib cuda)" and the like */

static void die(bib_executor_t *ex, const char *what) {
    fprintf(stderr, "gpu_bench: %s: %s\n", what, ops->error(ex));
    exit(1);
}

static void check(bib_executor_t *ex, bib_status_t st, const char *what) {
    if (st != BIB_OK)
        die(ex, what);
}

static bib_view_t view2(void *buf, uint32_t rows, uint32_t cols) {
    bib_view_t v = {buf, 0, BIB_DTYPE_F32, 2, {rows, cols, 0, 0}};
    return v;
}

/* Seconds per call of run(ex, arg): warm-up, then the median of 5 batches,
 * each of enough calls to last about 50 ms. */
typedef void (*bench_fn)(bib_executor_t *ex, void *arg);

static double time_per_call(bib_executor_t *ex, bench_fn run, void *arg) {
    for (int i = 0; i < 3; i++)
        run(ex, arg);
    check(ex, ops->synchronize(ex), "synchronize");
    double t0 = now();
    run(ex, arg);
    check(ex, ops->synchronize(ex), "synchronize");
    double one = now() - t0;
    long reps = one > 0.05 ? 1 : (long)(0.05 / (one > 1e-7 ? one : 1e-7)) + 1;
    double per[5];
    for (int b = 0; b < 5; b++) {
        t0 = now();
        for (long r = 0; r < reps; r++)
            run(ex, arg);
        check(ex, ops->synchronize(ex), "synchronize");
        per[b] = (now() - t0) / (double)reps;
    }
    return median(per, 5);
}

static void run_call(bib_executor_t *ex, void *arg) {
    const bib_call_t *c = arg;
    check(ex, ops->kernels[c->kernel](ex, c), "kernel");
}

/* The contract's chain for one output, on the host. */
static float host_chain(const float *a, const float *b, uint32_t n, uint32_t i, uint32_t j) {
    float acc = 0.0f;
    for (uint32_t p = 0; p < n; p++)
        acc = fmaf(a[(size_t)i * n + p], b[(size_t)p * n + j], acc);
    return acc;
}

static void bench_matmul(bib_executor_t *ex, uint32_t n) {
    size_t bytes = (size_t)n * n * 4;
    void *a, *b, *c;
    if (ops->buffer_alloc(ex, bytes, &a) != BIB_OK || ops->buffer_alloc(ex, bytes, &b) != BIB_OK ||
        ops->buffer_alloc(ex, bytes, &c) != BIB_OK) {
        snprintf(label, sizeof label, "matmul fp32 exact (bib %s)", ops->name);
        printf("%-34s %9u  SKIP: %s\n", label, n, ops->error(ex));
        return;
    }
    bib_call_t rng = {.kernel = BIB_KERNEL_RNG, .out = view2(a, n, n), .i = {7, 0}};
    check(ex, ops->kernels[BIB_KERNEL_RNG](ex, &rng), "rng");
    rng.out = view2(b, n, n);
    rng.i[1] = 1;
    check(ex, ops->kernels[BIB_KERNEL_RNG](ex, &rng), "rng");
    bib_call_t mm = {.kernel = BIB_KERNEL_MATMUL, .sub = BIB_ACT_NONE, .out = view2(c, n, n)};
    mm.in[0] = view2(a, n, n);
    mm.in[1] = view2(b, n, n);
    double t = time_per_call(ex, run_call, &mm);
    double tflops = 2.0 * n * (double)n * n / t / 1e12;
    const char *bits = "-";
    if (n <= 2048) {
        float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
        if (ha && hb && hc) {
            check(ex, ops->download(ex, a, 0, ha, bytes), "download");
            check(ex, ops->download(ex, b, 0, hb, bytes), "download");
            check(ex, ops->download(ex, c, 0, hc, bytes), "download");
            bits = "ok (64 sampled)";
            for (uint32_t s = 0; s < 64; s++) {
                uint32_t i = (s * 2654435761u) % n, j = (s * 40503u + 17u) % n;
                float want = host_chain(ha, hb, n, i, j);
                if (memcmp(&want, &hc[(size_t)i * n + j], 4) != 0) {
                    bits = "MISMATCH";
                    break;
                }
            }
        }
        free(ha), free(hb), free(hc);
    }
    snprintf(label, sizeof label, "matmul fp32 exact (bib %s)", ops->name);
    printf("%-34s %9u  %10.3f ms  %8.2f TFLOP/s  bits %s\n", label, n, t * 1e3, tflops, bits);
    ops->buffer_free(ex, a);
    ops->buffer_free(ex, b);
    ops->buffer_free(ex, c);
}

static void bench_softmax(bib_executor_t *ex, uint32_t rows, uint32_t cols) {
    size_t bytes = (size_t)rows * cols * 4;
    void *x, *y;
    check(ex, ops->buffer_alloc(ex, bytes, &x), "alloc");
    check(ex, ops->buffer_alloc(ex, bytes, &y), "alloc");
    bib_call_t rng = {.kernel = BIB_KERNEL_RNG, .out = view2(x, rows, cols), .i = {3, 0}};
    check(ex, ops->kernels[BIB_KERNEL_RNG](ex, &rng), "rng");
    bib_call_t sm = {.kernel = BIB_KERNEL_SOFTMAX, .out = view2(y, rows, cols)};
    sm.in[0] = view2(x, rows, cols);
    double t = time_per_call(ex, run_call, &sm);
    char size[32];
    snprintf(size, sizeof size, "%ux%u", rows, cols);
    snprintf(label, sizeof label, "softmax fp32 exact (bib %s)", ops->name);
    printf("%-34s %9s  %10.3f ms  %8.1f GB/s (read + write)\n", label, size, t * 1e3,
           2.0 * (double)bytes / t / 1e9);
    ops->buffer_free(ex, x);
    ops->buffer_free(ex, y);
}

typedef struct tiny {
    bib_call_t fill, add;
    int which; /* 0 fill, 1 add */
} tiny_t;

static void run_tiny(bib_executor_t *ex, void *arg) {
    tiny_t *t = arg;
    for (int i = 0; i < 1000; i++)
        run_call(ex, t->which ? &t->add : &t->fill);
}

static void bench_overhead(bib_executor_t *ex) {
    void *a, *b, *c;
    check(ex, ops->buffer_alloc(ex, 64, &a), "alloc");
    check(ex, ops->buffer_alloc(ex, 64, &b), "alloc");
    check(ex, ops->buffer_alloc(ex, 64, &c), "alloc");
    tiny_t t = {0};
    t.fill = (bib_call_t){.kernel = BIB_KERNEL_FILL, .out = view2(a, 1, 16), .f = {1.5f, 0}};
    t.add =
        (bib_call_t){.kernel = BIB_KERNEL_BINARY, .sub = BIB_BINARY_ADD, .out = view2(c, 1, 16)};
    t.add.in[0] = view2(a, 1, 16);
    t.add.in[1] = view2(b, 1, 16);
    static const char *names[2] = {"fill 16 floats, back to back", "add 16 floats, back to back"};
    for (t.which = 0; t.which < 2; t.which++) {
        double per = time_per_call(ex, run_tiny, &t) / 1000.0;
        printf("%-34s %9s  %10.2f us/op\n", names[t.which], "16", per * 1e6);
    }
    ops->buffer_free(ex, a);
    ops->buffer_free(ex, b);
    ops->buffer_free(ex, c);
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "cuda";
    ops = bib_executor_find(name);
    if (ops == NULL || strcmp(name, "cpu") == 0) {
        printf("SKIP: %s: no such GPU executor in this build (it has: %s)\n", name, BIB_EXECUTORS);
        return 0;
    }
    bib_executor_config_t cfg = {0};
    bib_executor_t *ex = NULL;
    char why[512] = "";
    if (ops->init(&cfg, &ex, why, sizeof why) != BIB_OK) {
        printf("SKIP: %s: %s\n", name, why);
        return 0;
    }
    printf("%s\n", ops->describe(ex));
    printf("%-34s %9s  %13s  %s\n", "work", "size", "time", "rate");
    uint32_t max_n = argc > 2 ? (uint32_t)atoi(argv[2]) : 8192;
    if (argc <= 2 && bib_placement_cpu_device(ops, ex)) {
        /* lavapipe runs a 4096^3 product for a minute: check, don't measure. */
        max_n = 512;
        printf("note: %s's device is the CPU: MATMUL sizes capped at %u\n", name, max_n);
    }
    uint32_t min_n = argc > 3 ? (uint32_t)atoi(argv[3]) : 1024;
    if (min_n == 0 || min_n > max_n)
        min_n = max_n;
    for (uint32_t n = min_n; n <= max_n; n *= 2)
        bench_matmul(ex, n);
    if (min_n != max_n || argc <= 3) {
        bench_softmax(ex, 4096, 4096);
        bench_overhead(ex);
    }
    ops->shutdown(ex);
    return 0;
}
