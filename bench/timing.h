/* bench/timing.h: the clock, the median and the load average the
 * benchmarks share.
 *
 * bench_clock is the wall clock unless a benchmark sets it to the process's
 * CPU time (BENCH_CLOCK=cpu, GEMM_BENCH_CLOCK=cpu): on one thread, on a
 * machine shared with other work, that counts only the time the benchmark
 * ran.
 */
#ifndef BIB_BENCH_TIMING_H
#define BIB_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The 1-minute load average, -1 where /proc/loadavg does not say: printed
 * beside a figure taken on a machine shared with other work. */
static inline double load_average(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

#endif
