/* bench/gemm_bench.c: BIB's fp32 GEMM beside OpenBLAS cblas_sgemm.
 *
 * Built by `make bench` (target build/gemm_bench); by hand, from the repository root:
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -ffp-contract=off -fno-fast-math \
 *       -Iinclude -I. -o build/gemm_bench bench/gemm_bench.c \
 *       build/obj/backends/cpu/gemm.o build/obj/backends/cpu/gemm_avx2.o \
 *       build/obj/backends/cpu/gemm_avx512.o build/obj/backends/cpu/threadpool.o \
 *       build/obj/backends/cpu/cpufeatures.o -lopenblas -lmimalloc -lm -lpthread
 * Run:
 *   build/gemm_bench [threads] [runs]      (defaults: BIB_THREADS or all CPUs; 9 runs)
 * BIB_CPU_LEVEL=scalar|avx2|avx512 lowers BIB's SIMD level. For each square
 * n it prints the median GFLOP/s of BIB and of OpenBLAS on the same thread
 * count, their ratio, and whether BIB's result has the bits of the scalar
 * reference (checked up to n = 1024; "-" above). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/threadpool.h"

#include <mimalloc.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Both libraries' idle workers spin for a while before they sleep; let them
 * settle so neither timing pays for the other's spinning threads. */
static void settle(void) {
    usleep(300 * 1000);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Deterministic inputs in [-1, 1). */
static void fill(float *x, size_t count, uint64_t seed) {
    for (size_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

int main(int argc, char **argv) {
    char why[256];
    bib_cpu_features_t features;
    bib_cpu_detect(&features);
    bib_cpu_level_t level;
    if (bib_cpu_level_select(&features, getenv(BIB_CPU_LEVEL_ENV), &level, why, sizeof why)) {
        fprintf(stderr, "gemm_bench: %s\n", why);
        return 1;
    }
    uint32_t threads;
    uint32_t requested = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 0;
    if (bib_cpu_threads_select(requested, getenv(BIB_THREADS_ENV), &threads, why, sizeof why)) {
        fprintf(stderr, "gemm_bench: %s\n", why);
        return 1;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 9;
    if (runs < 1)
        runs = 1;
    bib_threadpool_t *pool;
    if (bib_threadpool_create(threads, &pool, why, sizeof why)) {
        fprintf(stderr, "gemm_bench: %s\n", why);
        return 1;
    }
    openblas_set_num_threads((int)threads);
    printf("gemm_bench: level %s, %u thread%s, median of %d runs\n", bib_cpu_level_name(level),
           threads, threads == 1 ? "" : "s", runs);
    printf("%6s %12s %14s %7s %10s\n", "n", "BIB GFLOP/s", "OpenBLAS GF/s", "ratio", "bits");

    double *times = malloc((size_t)runs * sizeof *times);
    const size_t sizes[] = {256, 512, 1024, 2048};
    int status = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *a = mi_malloc_aligned(n * n * sizeof(float), 64);
        float *b = mi_malloc_aligned(n * n * sizeof(float), 64);
        float *c = mi_malloc_aligned(n * n * sizeof(float), 64);
        float *ref = mi_malloc_aligned(n * n * sizeof(float), 64);
        fill(a, n * n, 1 + n);
        fill(b, n * n, 2 + n);
        bib_gemm_t g = {
            .m = n, .n = n, .k = n, .a = a, .lda = n, .b = b, .ldb = n, .c = c, .ldc = n};
        double flops = 2.0 * (double)n * (double)n * (double)n;

        settle();
        bib_gemm_f32(pool, level, &g); /* warm-up: page faults, caches */
        for (int r = 0; r < runs; r++) {
            double t = now();
            if (bib_gemm_f32(pool, level, &g) != BIB_OK) {
                fprintf(stderr, "gemm_bench: out of memory at n=%zu\n", n);
                return 1;
            }
            times[r] = now() - t;
        }
        double bib = flops / median(times, runs) / 1e9;

        settle();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
                    (int)n, b, (int)n, 0.0f, ref, (int)n);
        for (int r = 0; r < runs; r++) {
            double t = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a,
                        (int)n, b, (int)n, 0.0f, ref, (int)n);
            times[r] = now() - t;
        }
        double blas = flops / median(times, runs) / 1e9;

        const char *bits = "-";
        if (n <= 1024) {
            /* The scalar level is the reference loop cut into row chunks. */
            bib_gemm_t rg = g;
            rg.c = ref;
            bib_gemm_f32(pool, BIB_CPU_LEVEL_SCALAR, &rg);
            bits = memcmp(c, ref, n * n * sizeof(float)) == 0 ? "identical" : "DIFFERENT";
            if (bits[0] == 'D')
                status = 1;
        }
        printf("%6zu %12.1f %14.1f %7.2f %10s\n", n, bib, blas, bib / blas, bits);
        fflush(stdout);
        mi_free(a);
        mi_free(b);
        mi_free(c);
        mi_free(ref);
    }
    free(times);
    bib_threadpool_destroy(pool);
    return status;
}
