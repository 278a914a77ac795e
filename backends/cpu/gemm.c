/* backends/cpu/gemm.c: the fp32 GEMM driver: reference, scalar level,
 * packing, cache blocking and the split over threads.
 *
 * Blocking (per thread, BLIS order): columns in blocks of nc, k in blocks of
 * kc, rows in blocks of mc; B's kc x nc block and A's mc x kc block are packed
 * into panels the micro-kernel streams. Only M and N are ever divided between
 * threads or tiles; a K block leaves its exact fp32 accumulators in C and the
 * next K block reloads them, so every output is one unbroken fma chain over k
 * ascending, as the reference computes it. Micro-kernels live in
 * gemm_<level>.c, one per row count, so a short M costs its own rows only;
 * a single row (GEMV) has its own kernel that streams B. Packing buffers are
 * kept per thread between calls. */
#include "backends/cpu/gemm.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <mimalloc.h>

#define ALIGN 64

static float canonical_nan(void) {
    uint32_t bits = BIB_GEMM_CANONICAL_NAN_BITS;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float b_at(const bib_gemm_t *g, size_t p, size_t j) {
    return g->b_transposed ? g->b[j * g->ldb + p] : g->b[p * g->ldb + j];
}

/* Rows [m0, m1) of the contract, literally. */
static void reference_rows(const bib_gemm_t *g, size_t m0, size_t m1) {
    const float nan = canonical_nan();
    for (size_t i = m0; i < m1; i++) {
        const float *a = g->a + i * g->lda;
        float *c = g->c + i * g->ldc;
        for (size_t j = 0; j < g->n; j++) {
            float acc = 0.0f;
            for (size_t p = 0; p < g->k; p++)
                acc = fmaf(a[p], b_at(g, p, j), acc);
            if (g->bias != NULL)
                acc = acc + g->bias[j];
            if (isnan(acc))
                acc = nan;
            c[j] = acc;
        }
        if (g->post != NULL && g->n > 0)
            g->post(c, g->n, g->post_ctx);
    }
}

void bib_gemm_f32_reference(const bib_gemm_t *g) {
    reference_rows(g, 0, g->m);
}

/* ---- packing ------------------------------------------------------------ */

/* The rows of pass `t` when mc rows run as ceil(mc / mr) passes of at most mr
 * rows, as even as they come (16 is 8 + 8, not 14 + 2: a short pass is bound
 * by its loads, not its fmas). Which rows share a pass never changes a bit. */
static size_t pass_rows(size_t mc, uint32_t mr, size_t t) {
    size_t passes = (mc + mr - 1) / mr;
    return mc / passes + (t < mc % passes ? 1 : 0);
}

/* A[i0 .. i0+mc)[p0 .. p0+kc) into panels of [kc][rows], one per pass
 * (pass_rows; its kernel runs that many rows). */
static void pack_a(const bib_gemm_t *g, const bib_gemm_kernel_t *kd, size_t i0, size_t mc,
                   size_t p0, size_t kc, float *restrict out) {
    const uint32_t mr = kd->mr;
    const float *src[BIB_GEMM_MAX_MR];
    size_t rows;
    for (size_t ir = 0, t = 0; ir < mc; ir += rows, t++) {
        rows = pass_rows(mc, mr, t);
        if (kd->pack_a != NULL) {
            kd->pack_a(g->a + (i0 + ir) * g->lda + p0, g->lda, rows, kc, out);
            out += kc * rows;
            continue;
        }
        for (size_t r = 0; r < rows; r++)
            src[r] = g->a + (i0 + ir + r) * g->lda + p0;
        for (size_t p = 0; p < kc; p++)
            for (size_t r = 0; r < rows; r++)
                out[p * rows + r] = src[r][p];
        out += kc * rows;
    }
}

/* B[p0 .. p0+kc)[j0 .. j0+nc) into ceil(nc/nr) panels of [kc][nr], columns
 * past nc zero. */
static void pack_b(const bib_gemm_t *g, size_t p0, size_t kc, size_t j0, size_t nc, uint32_t nr,
                   float *restrict out) {
    size_t panels = (nc + nr - 1) / nr;
    if (!g->b_transposed) {
        for (size_t p = 0; p < kc; p++) {
            const float *restrict src = g->b + (p0 + p) * g->ldb + j0;
            size_t full = nc / nr;
            if (nr == 32) /* a constant size, so the copy is inlined */
                for (size_t q = 0; q < full; q++)
                    memcpy(out + q * kc * nr + p * nr, src + q * nr, 32 * sizeof(float));
            else
                for (size_t q = 0; q < full; q++)
                    memcpy(out + q * kc * nr + p * nr, src + q * nr, nr * sizeof(float));
            for (size_t q = full; q < panels; q++) {
                float *restrict dst = out + q * kc * nr + p * nr;
                size_t cols = nc - q * nr;
                memcpy(dst, src + q * nr, cols * sizeof(float));
                for (size_t j = cols; j < nr; j++)
                    dst[j] = 0.0f;
            }
        }
        return;
    }
    for (size_t q = 0; q < panels; q++) {
        float *restrict dst = out + q * kc * nr;
        size_t cols = nc - q * nr < nr ? nc - q * nr : nr;
        for (size_t j = 0; j < cols; j++) {
            const float *restrict src = g->b + (j0 + q * nr + j) * g->ldb + p0;
            for (size_t p = 0; p < kc; p++)
                dst[p * nr + j] = src[p];
        }
        for (size_t j = cols; j < nr; j++)
            for (size_t p = 0; p < kc; p++)
                dst[p * nr + j] = 0.0f;
    }
}

/* ---- per-thread scratch -------------------------------------------------- */

/* Packing buffers are kept by each thread from one call to the next (grown
 * when a call needs more, freed when the thread ends), so a steady stream of
 * GEMMs allocates and page-faults nothing. */
typedef struct scratch_cache {
    float *base;
    size_t floats;
} scratch_cache_t;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_key_ok;
static _Thread_local scratch_cache_t *scratch_mine; /* also keeps it reachable */

static void scratch_free(void *p) {
    scratch_cache_t *cache = p;
    mi_free(cache->base);
    mi_free(cache);
}

static void scratch_key_init(void) {
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

static float *scratch_get(size_t floats) {
    pthread_once(&scratch_once, scratch_key_init);
    scratch_cache_t *cache = scratch_mine;
    if (cache == NULL) {
        if (!scratch_key_ok)
            return NULL;
        cache = mi_zalloc(sizeof *cache);
        if (cache == NULL || pthread_setspecific(scratch_key, cache) != 0) {
            mi_free(cache);
            return NULL;
        }
        scratch_mine = cache;
    }
    if (cache->floats < floats) {
        mi_free(cache->base);
        cache->floats = 0;
        cache->base = mi_malloc_aligned(floats * sizeof(float), ALIGN);
        if (cache->base == NULL)
            return NULL;
        cache->floats = floats;
    }
    return cache->base;
}

/* ---- blocked driver ------------------------------------------------------ */

typedef struct scratch {
    float *a;    /* mc x kc packed A */
    float *b;    /* kc x nc packed B (nc rounded up to nr) */
    float *tile; /* mr x nr edge tile */
    float *bias; /* nr padded bias for edge tiles */
} scratch_t;

static size_t round_up(size_t x, size_t to) {
    return (x + to - 1) / to * to;
}

/* K blocks of at most kc, as even as they come (512 is 256 + 256, not
 * 384 + 128: a short block pays a whole reload of C for little work). Only
 * where the chain pauses changes, never its order. */
static size_t k_block(size_t k, size_t kc) {
    size_t blocks = (k + kc - 1) / kc;
    return blocks <= 1 ? (k > 0 ? k : 1) : (k + blocks - 1) / blocks;
}

/* Scratch for a thread computing C[m0, m1) x [n0, n1). */
static bool scratch_for(const bib_gemm_t *g, const bib_gemm_kernel_t *kd, size_t rows, size_t cols,
                        scratch_t *s) {
    size_t kc = k_block(g->k, kd->kc);
    if (kc == 0)
        kc = 1;
    size_t mc = rows < kd->mc ? rows : kd->mc;
    size_t nc = round_up(cols < kd->nc ? cols : kd->nc, kd->nr);
    size_t fa = round_up(mc * kc + BIB_GEMM_PACK_SLACK, ALIGN / sizeof(float));
    size_t fb = round_up(kc * nc, ALIGN / sizeof(float));
    size_t ft = (size_t)kd->mr * kd->nr;
    float *base = scratch_get(fa + fb + ft + kd->nr);
    if (base == NULL)
        return false;
    s->a = base;
    s->b = s->a + fa;
    s->tile = s->b + fb;
    s->bias = s->tile + ft;
    return true;
}

/* A rows x cols tile with cols < nr: run the kernel on a private tile and
 * copy the part that exists. Same chain per output, so the same bits. */
static void edge_tile(const bib_gemm_t *g, const bib_gemm_kernel_t *kd, scratch_t *s, size_t kc,
                      const float *ap, const float *bp, size_t ldbp, float *c, size_t rows,
                      size_t cols, unsigned flags, const float *bias) {
    uint32_t nr = kd->nr;
    if (flags & BIB_GEMM_KERNEL_ACCUMULATE)
        for (size_t r = 0; r < rows; r++)
            memcpy(s->tile + r * nr, c + r * g->ldc, cols * sizeof(float));
    const float *tile_bias = NULL;
    if (bias != NULL) {
        memcpy(s->bias, bias, cols * sizeof(float));
        memset(s->bias + cols, 0, (nr - cols) * sizeof(float));
        tile_bias = s->bias;
    }
    kd->kernels[rows](kc, ap, bp, ldbp, s->tile, nr, flags, tile_bias);
    for (size_t r = 0; r < rows; r++)
        memcpy(c + r * g->ldc, s->tile + r * nr, cols * sizeof(float));
}

/* Up to this many rows per thread, B is read in place instead of packed: each
 * panel of it then serves too few tiles to pay for the copy. */
#define DIRECT_B_MAX_ROWS 128

size_t bib_gemm_direct_kc(size_t kc_direct, size_t ldb, size_t page, size_t l2_sets, size_t l2_ways,
                          size_t l2_line) {
    const size_t least = 64;
    size_t bytes = ldb * sizeof(float);
    if (page != 0 && bytes >= page && kc_direct > least)
        kc_direct = least; /* a page a row */
    if (l2_sets == 0 || l2_ways == 0 || l2_line == 0 || bytes % l2_line != 0)
        return kc_direct; /* unknown, or rows that drift across the sets */
    size_t a = bytes / l2_line, b = l2_sets;
    while (b != 0) { /* gcd(stride in lines, sets) */
        size_t t = a % b;
        a = b;
        b = t;
    }
    size_t fit = l2_ways * (l2_sets / a);
    if (fit >= kc_direct)
        return kc_direct;
    return fit > least ? fit : least;
}

/* The page size and the L2's geometry as the C library reads them (CPUID
 * on x86), on Intel cores only; zeros elsewhere and where it does not say,
 * which keeps kc_direct. Both caps were measured on a Xeon; on Zen 5 shorter
 * in-place K blocks (32-128 rows) were slower at M = 64 (bench/RESULTS.md,
 * "Zen 5: skinny shapes"), so AMD cores keep kc_direct until measured. Read
 * once. */
static size_t page_size, l2_sets, l2_ways, l2_line;
static pthread_once_t l2_once = PTHREAD_ONCE_INIT;

static void l2_read(void) {
    bib_cpu_features_t cpu;
    bib_cpu_detect(&cpu);
    if (!cpu.intel)
        return;
    long page = sysconf(_SC_PAGESIZE);
    page_size = page > 0 ? (size_t)page : 0;
    long size = sysconf(_SC_LEVEL2_CACHE_SIZE), ways = sysconf(_SC_LEVEL2_CACHE_ASSOC),
         line = sysconf(_SC_LEVEL2_CACHE_LINESIZE);
    if (size <= 0 || ways <= 0 || line <= 0 || size % (ways * line) != 0)
        return;
    l2_sets = (size_t)(size / (ways * line));
    l2_ways = (size_t)ways;
    l2_line = (size_t)line;
}

static size_t direct_kc(const bib_gemm_kernel_t *kd, size_t ldb) {
    pthread_once(&l2_once, l2_read);
    return bib_gemm_direct_kc(kd->kc_direct, ldb, page_size, l2_sets, l2_ways, l2_line);
}

/* C[m0, m1) x [n0, n1) on the calling thread (BLIS order: jc, pc, ic, jr, ir). */
static void blocked(const bib_gemm_t *g, const bib_gemm_kernel_t *kd, scratch_t *s, size_t m0,
                    size_t m1, size_t n0, size_t n1) {
    const uint32_t mr = kd->mr, nr = kd->nr;
    if (m1 - m0 == 1 && kd->gemv != NULL && !g->b_transposed) {
        float *c = g->c + m0 * g->ldc + n0;
        kd->gemv(n1 - n0, g->k, g->a + m0 * g->lda, g->b + n0, g->ldb, c,
                 g->bias != NULL ? g->bias + n0 : NULL);
        if (g->post != NULL)
            g->post(c, n1 - n0, g->post_ctx);
        return;
    }
    const bool direct_b = !g->b_transposed && m1 - m0 <= DIRECT_B_MAX_ROWS;
    const size_t kblock =
        k_block(g->k, direct_b && kd->kc_direct != 0 ? direct_kc(kd, g->ldb) : kd->kc);
    for (size_t jc = n0; jc < n1; jc += kd->nc) {
        size_t nc = n1 - jc < kd->nc ? n1 - jc : kd->nc;
        size_t p0 = 0;
        do {
            size_t kc = g->k - p0 < kblock ? g->k - p0 : kblock;
            unsigned flags = (p0 > 0 ? BIB_GEMM_KERNEL_ACCUMULATE : 0) |
                             (p0 + kc == g->k ? BIB_GEMM_KERNEL_FINISH : 0);
            if (!direct_b)
                pack_b(g, p0, kc, jc, nc, nr, s->b);
            else if (nc % nr != 0)
                pack_b(g, p0, kc, jc + nc / nr * nr, nc % nr, nr, s->b + nc / nr * nr * kc);
            for (size_t ic = m0; ic < m1; ic += kd->mc) {
                size_t mc = m1 - ic < kd->mc ? m1 - ic : kd->mc;
                pack_a(g, kd, ic, mc, p0, kc, s->a);
                for (size_t jr = 0; jr < nc; jr += nr) {
                    size_t cols = nc - jr < nr ? nc - jr : nr;
                    const float *bp = s->b + jr * kc;
                    size_t ldbp = nr;
                    if (direct_b && cols == nr) {
                        bp = g->b + p0 * g->ldb + jc + jr;
                        ldbp = g->ldb;
                    }
                    const float *bias = (flags & BIB_GEMM_KERNEL_FINISH) && g->bias != NULL
                                            ? g->bias + jc + jr
                                            : NULL;
                    size_t rows;
                    for (size_t ir = 0, t = 0; ir < mc; ir += rows, t++) {
                        rows = pass_rows(mc, mr, t);
                        const float *ap = s->a + ir * kc;
                        float *c = g->c + (ic + ir) * g->ldc + jc + jr;
                        if (cols == nr)
                            kd->kernels[rows](kc, ap, bp, ldbp, c, g->ldc, flags, bias);
                        else
                            edge_tile(g, kd, s, kc, ap, bp, ldbp, c, rows, cols, flags, bias);
                    }
                }
                if ((flags & BIB_GEMM_KERNEL_FINISH) && g->post != NULL)
                    for (size_t i = ic; i < ic + mc; i++)
                        g->post(g->c + i * g->ldc + jc, nc, g->post_ctx);
            }
            p0 += kc;
        } while (p0 < g->k);
    }
}

typedef struct job {
    const bib_gemm_t *g;
    const bib_gemm_kernel_t *kd; /* NULL: scalar level */
    bool split_n;                /* chunks are column panels, else rows */
    atomic_bool out_of_memory;
} job_t;

static void run_chunk(void *ctx, size_t begin, size_t end, uint32_t chunk) {
    (void)chunk;
    job_t *job = ctx;
    const bib_gemm_t *g = job->g;
    if (job->kd == NULL) {
        reference_rows(g, begin, end);
        return;
    }
    size_t m0 = 0, m1 = g->m, n0 = 0, n1 = g->n;
    if (job->split_n) {
        n0 = begin * job->kd->nr;
        n1 = end * job->kd->nr < g->n ? end * job->kd->nr : g->n;
    } else {
        m0 = begin;
        m1 = end;
    }
    scratch_t s;
    if (!scratch_for(g, job->kd, m1 - m0, n1 - n0, &s)) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    blocked(g, job->kd, &s, m0, m1, n0, n1);
}

/* How evenly cutting `len` into units of `unit` spreads it over `threads`
 * (the pool's fixed cut): the mean share over the largest, 1 when even. */
static double balance(size_t len, size_t unit, uint32_t threads) {
    size_t units = (len + unit - 1) / unit, largest = 0;
    for (uint32_t i = 0; i < threads; i++) {
        size_t begin, end;
        bib_threadpool_chunk(units, 1, threads, i, &begin, &end);
        size_t share =
            (end * unit < len ? end * unit : len) - (begin * unit < len ? begin * unit : len);
        largest = share > largest ? share : largest;
    }
    return largest == 0 ? 0.0 : (double)len / threads / (double)largest;
}

/* Below this many multiply-adds a second thread costs more than it saves. */
#define PARALLEL_MIN_FMAS (64u * 64u * 64u)

bib_status_t bib_gemm_f32(bib_threadpool_t *pool, bib_cpu_level_t level, const bib_gemm_t *g) {
    if (g->m == 0 || g->n == 0)
        return BIB_OK;
    job_t job = {.g = g, .kd = NULL, .split_n = false};
    atomic_init(&job.out_of_memory, false);
    if ((double)g->m * (double)g->n * (double)(g->k > 0 ? g->k : 1) < PARALLEL_MIN_FMAS)
        pool = NULL;
    switch (level) {
    case BIB_CPU_LEVEL_AVX512:
        job.kd = &bib_gemm_kernel_avx512;
        break;
    case BIB_CPU_LEVEL_AVX2:
        job.kd = &bib_gemm_kernel_avx2;
        break;
    case BIB_CPU_LEVEL_SCALAR:
        bib_threadpool_parallel_for(pool, g->m, 1, run_chunk, &job);
        return BIB_OK;
    }
    size_t panels_n = (g->n + job.kd->nr - 1) / job.kd->nr;
    /* Each thread reads the whole of the operand along the other axis: a
     * split by rows gives every thread all of B, one by columns all of A.
     * So rows when A is at least as tall as B is wide (B the smaller to
     * read twice), columns when it is shorter (the decoder shapes, where
     * B is the big one), unless that cut spreads the work clearly less
     * evenly than the other. Rows go whole rows at a time, not passes of
     * mr: a thread's rows still run as even passes (pass_rows). 256^3 on
     * two threads went from columns to rows this way, 0.86-0.91x of
     * oneDNN to 0.96-0.98x (each thread 128 rows, B read in place). */
    uint32_t threads = bib_threadpool_size(pool);
    double by_rows = balance(g->m, 1, threads), by_cols = balance(g->n, job.kd->nr, threads);
    job.split_n = g->m < g->n ? by_cols + 0.02 >= by_rows : by_cols > by_rows + 0.02;
    bib_threadpool_parallel_for(pool, job.split_n ? panels_n : g->m, 1, run_chunk, &job);
    return atomic_load(&job.out_of_memory) ? BIB_E_NOMEM : BIB_OK;
}
