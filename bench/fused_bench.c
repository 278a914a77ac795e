/* bench/fused_bench.c: ATTENTION and the FFN block of the CPU executor beside
 * MATMUL at the same inner sizes, same run.
 *
 * Built by `make bench` (target build/fused_bench). Each workload is timed
 * through the executor's own entry points (the ones the VM calls, thread pool
 * included), and beside it the MATMULs that do the same multiply-adds on
 * plain contiguous operands:
 *   attention  ATTENTION on q, k, v of f32[S, H, D] (T = S keys): per head
 *              q.k^T ([S, D] . [D, T]) and p.v ([S, T] . [T, D]); the peer
 *              is H MATMULs [S, D] . [D, T] and H MATMULs [S, T] . [T, D];
 *   ffn        LINEAR_GELU [N, E] . [E, F] + b1 then LINEAR [N, F] . [F, E]
 *              + b2; the peer is MATMUL [N, E] . [E, F] and [N, F] . [F, E].
 * GFLOP/s counts 2 flops per multiply-add of the products for both sides
 * (ATTENTION's scale, softmax and the FFN's bias and gelu are not counted),
 * so the ratio is the share of MATMUL's speed the workload keeps. Each run
 * times the workload and its peer back to back (alternating which goes
 * first); the table gives the medians, the per-run ratio's median and range,
 * and FNV-1a of the workload's output (the same for every level and thread
 * count of one build).
 *   build/fused_bench [runs]            (default 15)
 * BIB_THREADS and BIB_CPU_LEVEL select the thread count and SIMD level,
 * BENCH_CLOCK=cpu the process's CPU time as the clock.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "bench/timing.h"
#include "isa/isa.h"

#define MAX_RUNS 99

static bib_view_t view(void *buf, uint32_t rank, uint32_t d0, uint32_t d1, uint32_t d2) {
    bib_view_t v = {.buf = buf, .offset = 0, .dtype = BIB_DTYPE_F32, .rank = rank};
    v.dims[0] = d0;
    v.dims[1] = d1;
    v.dims[2] = d2;
    return v;
}

/* Kernel calls run one after another as one timed step. */
typedef struct step {
    bib_call_t calls[16];
    int count;
} step_t;

static const bib_executor_ops_t *cpu;
static bib_executor_t *ex;

static bool step_run(const step_t *s) {
    for (int i = 0; i < s->count; i++)
        if (cpu->kernels[s->calls[i].kernel](ex, &s->calls[i]) != BIB_OK) {
            fprintf(stderr, "fused_bench: kernel %d failed: %s\n", s->calls[i].kernel,
                    cpu->error(ex));
            return false;
        }
    return true;
}

static float *buffer(size_t floats, uint64_t seed, float scale) {
    void *p;
    if (cpu->buffer_alloc(ex, floats * sizeof(float), &p) != BIB_OK) {
        fprintf(stderr, "fused_bench: out of memory\n");
        exit(1);
    }
    float *f = p;
    for (size_t i = 0; i < floats; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        f[i] = (float)((double)(seed >> 40) / (double)(1ull << 24) * 2.0 - 1.0) * scale;
    }
    return f;
}

static bib_call_t matmul(float *a, float *b, float *c, uint32_t m, uint32_t k, uint32_t n) {
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = BIB_ACT_NONE};
    call.out = view(c, 2, m, n, 0);
    call.in[0] = view(a, 2, m, k, 0);
    call.in[1] = view(b, 2, k, n, 0);
    return call;
}

/* Times `work` and `peer` `runs` times, alternating; prints one row. */
static int compare(const char *name, const step_t *work, const step_t *peer, double flops,
                   const float *out, size_t out_floats, int runs) {
    double tw[MAX_RUNS], tp[MAX_RUNS], ratio[MAX_RUNS];
    if (!step_run(work) || !step_run(peer)) /* untimed: pool, packing buffers, pages */
        return 1;
    uint64_t hash = bib_fnv1a64(BIB_FNV1A64_BASIS, out, out_floats * sizeof(float));
    for (int r = 0; r < runs; r++) {
        for (int order = 0; order < 2; order++) {
            bool peer_now = (order == 0) == (r % 2 == 0);
            double t0 = now();
            if (!step_run(peer_now ? peer : work))
                return 1;
            double dt = now() - t0;
            if (peer_now)
                tp[r] = dt;
            else
                tw[r] = dt;
        }
        ratio[r] = tp[r] / tw[r];
    }
    double mw = median(tw, runs), mp = median(tp, runs), rm = median(ratio, runs);
    printf("%-10s %8.3f %9.3f %9.1f %9.3f %9.1f %7.2f %6.2f-%-6.2f %016llx\n", name, flops * 1e-9,
           mw * 1e3, flops / mw * 1e-9, mp * 1e3, flops / mp * 1e-9, rm, ratio[0], ratio[runs - 1],
           (unsigned long long)hash);
    return 0;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 15;
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: fused_bench [runs 1..%d]\n", MAX_RUNS);
        return 2;
    }
    const char *clock_name = getenv("BENCH_CLOCK");
    if (clock_name != NULL && strcmp(clock_name, "cpu") == 0)
        bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    cpu = &bib_cpu_executor;
    bib_executor_config_t config = {0};
    char why[256];
    if (cpu->init(&config, &ex, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "fused_bench: the CPU executor did not start: %s\n", why);
        return 1;
    }
    double load0 = load_average();
    printf("ATTENTION and FFN beside MATMUL at the same inner sizes, CPU executor (%s), "
           "median of %d runs, %s time\n",
           cpu->describe ? cpu->describe(ex) : "cpu", runs,
           bench_clock == CLOCK_MONOTONIC ? "wall" : "process CPU");
    printf("%-10s %8s %9s %9s %9s %9s %7s %13s %s\n", "workload", "GFLOP", "ms", "GFLOP/s",
           "peer ms", "peer", "ratio", "ratio range", "hash");
    int status = 0;

    /* ATTENTION, 8 heads, S = T = 512, head 64. */
    enum { S = 512, H = 8, D = 64 };
    float *q = buffer((size_t)S * H * D, 1, 1.0f), *k = buffer((size_t)S * H * D, 2, 1.0f);
    float *v = buffer((size_t)S * H * D, 3, 1.0f), *o = buffer((size_t)S * H * D, 4, 0.0f);
    step_t attn = {.count = 1};
    bib_call_t *a = &attn.calls[0];
    *a = (bib_call_t){.kernel = BIB_KERNEL_ATTENTION, .sub = 0};
    a->out = view(o, 3, S, H, D);
    a->in[0] = view(q, 3, S, H, D);
    a->in[1] = view(k, 3, S, H, D);
    a->in[2] = view(v, 3, S, H, D);
    a->f[0] = (float)(1.0 / sqrt((double)D));
    /* The peer: per head, [S, D] . [D, T] into one [S, T] buffer (in the
     * cache for the next product, as a program would reuse a register), then
     * that buffer . [T, D]; contiguous operands. */
    step_t peer = {.count = 2 * H};
    float *qh = buffer((size_t)H * S * D, 5, 1.0f), *kt = buffer((size_t)H * D * S, 6, 0.125f);
    float *vh = buffer((size_t)H * S * D, 8, 1.0f), *sc = buffer((size_t)S * S, 9, 0.0f);
    float *oh = buffer((size_t)H * S * D, 10, 0.0f);
    for (int h = 0; h < H; h++) {
        size_t sd = (size_t)h * S * D;
        peer.calls[2 * h] = matmul(qh + sd, kt + sd, sc, S, D, S);
        peer.calls[2 * h + 1] = matmul(sc, vh + sd, oh + sd, S, S, D);
    }
    double attn_flops = 4.0 * S * S * H * D;
    status |= compare("attention", &attn, &peer, attn_flops, o, (size_t)S * H * D, runs);

    /* FFN: 256 rows, width 512, hidden 2048. */
    enum { N = 256, E = 512, F = 2048 };
    float *x = buffer((size_t)N * E, 11, 1.0f), *w1 = buffer((size_t)E * F, 12, 0.044f);
    float *b1 = buffer(F, 13, 0.1f), *w2 = buffer((size_t)F * E, 14, 0.022f);
    float *b2 = buffer(E, 15, 0.1f), *hid = buffer((size_t)N * F, 16, 0.0f);
    float *y = buffer((size_t)N * E, 17, 0.0f);
    float *hid2 = buffer((size_t)N * F, 18, 0.0f), *y2 = buffer((size_t)N * E, 19, 0.0f);
    step_t ffn = {.count = 2};
    ffn.calls[0] = matmul(x, w1, hid, N, E, F);
    ffn.calls[0].sub = BIB_ACT_GELU;
    ffn.calls[0].in[2] = view(b1, 1, F, 0, 0);
    ffn.calls[1] = matmul(hid, w2, y, N, F, E);
    ffn.calls[1].in[2] = view(b2, 1, E, 0, 0);
    step_t ffn_peer = {.count = 2};
    ffn_peer.calls[0] = matmul(x, w1, hid2, N, E, F);
    ffn_peer.calls[1] = matmul(hid2, w2, y2, N, F, E);
    double ffn_flops = 2.0 * N * E * F * 2;
    status |= compare("ffn", &ffn, &ffn_peer, ffn_flops, y, (size_t)N * E, runs);

    printf("load average %.2f at the start, %.2f at the end\n", load0, load_average());
    cpu->shutdown(ex);
    return status;
}
