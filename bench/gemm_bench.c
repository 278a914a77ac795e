/* bench/gemm_bench.c: BIB's fp32 GEMM beside a peer, oneDNN's dnnl_sgemm or
 * OpenBLAS's cblas_sgemm, on the same thread count in the same process.
 *
 * Built by `make bench` (target build/gemm_bench); by hand, from the repository root:
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -ffp-contract=off -fno-fast-math \
 *       -Iinclude -I. -o build/gemm_bench bench/gemm_bench.c build/libbib.a \
 *       -ldnnl -lgomp -lopenblas -lmimalloc -lm -lpthread
 * Run:
 *   build/gemm_bench dnnl|openblas [threads] [runs] [shapes]
 * threads defaults to BIB_THREADS or all CPUs, runs to 9; shapes is a comma
 * list of MxNxK or n (square), by default 256..4096 square and the decoder
 * shapes M = 1, 16, 64 with N = K = 4096. BIB_CPU_LEVEL=scalar|avx2|avx512
 * lowers BIB's SIMD level.
 *
 * OpenBLAS reads OPENBLAS_CORETYPE when it loads: run it with the variable
 * unset (bench/gemm.bench.sh does) or it may run another CPU's kernels; the
 * header line names the kernel it ran (openblas_get_corename).
 *
 * For each shape it prints the median and the best GFLOP/s of BIB and of the
 * peer over runs of at least 20 ms each (back-to-back calls where one call is
 * shorter), each after an untimed first call and WARM_S of untimed calls (so
 * page faults, first-call costs and the CPUs' wake from idle are excluded:
 * this is the steady state), their ratios, and whether BIB's result
 * has the bits of the scalar reference (checked up to 2^30 multiply-adds). On
 * a machine shared with other work the best is the steadier figure. "first"
 * is BIB's first call on a freshly allocated C (page faults and all) over
 * its median. */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/threadpool.h"
#include "bench/timing.h"

#include <mimalloc.h>

/* libgomp's, which oneDNN's Debian build runs on. */
void omp_set_num_threads(int threads);

/* Both libraries' idle workers spin for a while before they sleep; let them
 * settle so neither timing pays for the other's spinning threads. */
static void settle(void) {
    usleep(300 * 1000);
}

/* The least time one timed run lasts, in seconds (several calls if need be). */
#define SAMPLE_S 0.02

/* Back-to-back calls before the timed runs, in seconds. On a virtual
 * machine whose CPUs sat idle through settle(), the first tens of
 * milliseconds of two-thread work can run at one thread's speed, for BIB
 * and the peer alike (on the 2-vCPU Xeon, after 0.3 s idle, 2 to 40 ms of
 * it; after 1 s idle, 80 ms and more): the timed runs start after this. */
#define WARM_S 0.2

/* Deterministic inputs in [-1, 1). */
static void fill(float *x, size_t count, uint64_t seed) {
    for (size_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

typedef enum { PEER_DNNL, PEER_OPENBLAS } peer_t;

static int peer_sgemm(peer_t peer, size_t m, size_t n, size_t k, const float *a, const float *b,
                      float *c) {
    if (peer == PEER_OPENBLAS) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                    (int)k, b, (int)n, 0.0f, c, (int)n);
        return 0;
    }
    return dnnl_sgemm('N', 'N', (dnnl_dim_t)m, (dnnl_dim_t)n, (dnnl_dim_t)k, 1.0f, a, (dnnl_dim_t)k,
                      b, (dnnl_dim_t)n, 0.0f, c, (dnnl_dim_t)n) == dnnl_success
               ? 0
               : -1;
}

typedef struct shape {
    size_t m, n, k;
} shape_t;

/* "MxNxK" or "n"; returns the count parsed into out (at most cap). */
static size_t parse_shapes(const char *list, shape_t *out, size_t cap) {
    size_t count = 0;
    const char *s = list;
    while (*s && count < cap) {
        char *end;
        size_t m = strtoul(s, &end, 10), n = m, k = m;
        if (*end == 'x') {
            n = strtoul(end + 1, &end, 10);
            if (*end != 'x')
                return 0;
            k = strtoul(end + 1, &end, 10);
        }
        if (m == 0 || n == 0 || k == 0 || (*end != ',' && *end != '\0'))
            return 0;
        out[count++] = (shape_t){m, n, k};
        s = *end == ',' ? end + 1 : end;
    }
    return count;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "dnnl") != 0 && strcmp(argv[1], "openblas") != 0)) {
        fprintf(stderr, "usage: gemm_bench dnnl|openblas [threads] [runs] [MxNxK,...]\n");
        return 2;
    }
    peer_t peer = strcmp(argv[1], "dnnl") == 0 ? PEER_DNNL : PEER_OPENBLAS;
    char why[256];
    bib_cpu_features_t features;
    bib_cpu_detect(&features);
    bib_cpu_level_t level;
    if (bib_cpu_level_select(&features, getenv(BIB_CPU_LEVEL_ENV), &level, why, sizeof why)) {
        fprintf(stderr, "gemm_bench: %s\n", why);
        return 1;
    }
    uint32_t threads;
    uint32_t requested = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 0;
    if (bib_cpu_threads_select(requested, getenv(BIB_THREADS_ENV), &threads, why, sizeof why)) {
        fprintf(stderr, "gemm_bench: %s\n", why);
        return 1;
    }
    const char *clock_name = getenv("GEMM_BENCH_CLOCK");
    if (clock_name != NULL && strcmp(clock_name, "cpu") == 0)
        bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    int runs = argc > 3 ? atoi(argv[3]) : 9;
    if (runs < 1)
        runs = 1;
    shape_t shapes[32];
    size_t nshapes = parse_shapes(argc > 4 ? argv[4]
                                           : "256,512,1024,2048,4096,1x4096x4096,16x4096x4096,"
                                             "64x4096x4096",
                                  shapes, sizeof shapes / sizeof shapes[0]);
    if (nshapes == 0) {
        fprintf(stderr, "gemm_bench: shapes must be a comma list of n or MxNxK (all > 0)\n");
        return 2;
    }
    bib_threadpool_t *pool;
    if (bib_threadpool_create(threads, &pool, why, sizeof why)) {
        fprintf(stderr, "gemm_bench: %s\n", why);
        return 1;
    }
    char peer_name[128];
    if (peer == PEER_OPENBLAS) {
        openblas_set_num_threads((int)threads);
        snprintf(peer_name, sizeof peer_name, "OpenBLAS%s, kernel %s", OPENBLAS_VERSION,
                 openblas_get_corename());
    } else {
        omp_set_num_threads((int)threads);
        const dnnl_version_t *v = dnnl_version();
        snprintf(peer_name, sizeof peer_name, "oneDNN %d.%d.%d dnnl_sgemm, cpu isa 0x%x", v->major,
                 v->minor, v->patch, (unsigned)dnnl_get_effective_cpu_isa());
    }
    printf("gemm_bench: BIB level %s (%s) vs %s; %u thread%s; median of %d runs\n",
           bib_cpu_level_name(level),
           level == BIB_CPU_LEVEL_AVX512 ? bib_gemm_kernel_avx512.name
           : level == BIB_CPU_LEVEL_AVX2 ? bib_gemm_kernel_avx2.name
                                         : "reference loop",
           peer_name, threads, threads == 1 ? "" : "s", runs);
    printf("%16s %10s %10s %7s  %10s %10s %7s %10s %6s\n", "MxNxK", "BIB med", "peer med", "ratio",
           "BIB best", "peer best", "ratio", "bits", "first");

    double *times = malloc((size_t)runs * sizeof *times);
    int status = 0;
    for (size_t s = 0; s < nshapes; s++) {
        size_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
        float *a = mi_malloc_aligned(m * k * sizeof(float), 64);
        float *b = mi_malloc_aligned(k * n * sizeof(float), 64);
        float *c = mi_malloc_aligned(m * n * sizeof(float), 64);
        float *ref = mi_malloc_aligned(m * n * sizeof(float), 64);
        fill(a, m * k, 1 + m * 7 + k);
        fill(b, k * n, 2 + n * 5 + k);
        bib_gemm_t g = {
            .m = m, .n = n, .k = k, .a = a, .lda = k, .b = b, .ldb = n, .c = c, .ldc = n};
        double flops = 2.0 * (double)m * (double)n * (double)k;

        settle();
        double t0 = now();
        bib_gemm_f32(pool, level, &g); /* the first call: C's page faults, cold caches */
        double first_s = now() - t0, first = flops / first_s / 1e9;
        /* A run is enough back-to-back calls to last SAMPLE_S: a 256^3 call
         * takes 0.1 ms, and a few lone calls after settle() time the caches
         * and the clock warming up rather than the steady state. */
        int calls = first_s >= SAMPLE_S ? 1 : (int)(SAMPLE_S / first_s) + 1;
        for (double w = now(); now() - w < WARM_S;)
            bib_gemm_f32(pool, level, &g);
        for (int r = 0; r < runs; r++) {
            double t = now();
            for (int i = 0; i < calls; i++)
                if (bib_gemm_f32(pool, level, &g) != BIB_OK) {
                    fprintf(stderr, "gemm_bench: out of memory at %zux%zux%zu\n", m, n, k);
                    return 1;
                }
            times[r] = (now() - t) / calls;
        }
        double bib = flops / median(times, runs) / 1e9, bib_best = flops / times[0] / 1e9;

        settle();
        if (peer_sgemm(peer, m, n, k, a, b, ref) != 0) {
            fprintf(stderr, "gemm_bench: the peer failed at %zux%zux%zu\n", m, n, k);
            return 1;
        }
        for (double w = now(); now() - w < WARM_S;)
            peer_sgemm(peer, m, n, k, a, b, ref);
        for (int r = 0; r < runs; r++) {
            double t = now();
            for (int i = 0; i < calls; i++)
                peer_sgemm(peer, m, n, k, a, b, ref);
            times[r] = (now() - t) / calls;
        }
        double other = flops / median(times, runs) / 1e9, other_best = flops / times[0] / 1e9;

        const char *bits = "-";
        if ((double)m * (double)n * (double)k <= (double)(1u << 30)) {
            /* The scalar level is the reference loop cut into row chunks. */
            bib_gemm_t rg = g;
            rg.c = ref;
            bib_gemm_f32(pool, BIB_CPU_LEVEL_SCALAR, &rg);
            bits = memcmp(c, ref, m * n * sizeof(float)) == 0 ? "identical" : "DIFFERENT";
            if (bits[0] == 'D')
                status = 1;
        }
        char name[48];
        snprintf(name, sizeof name, "%zux%zux%zu", m, n, k);
        printf("%16s %10.1f %10.1f %7.2f  %10.1f %10.1f %7.2f %10s %6.2f\n", name, bib, other,
               bib / other, bib_best, other_best, bib_best / other_best, bits, first / bib);
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
