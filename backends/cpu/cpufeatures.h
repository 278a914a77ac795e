/* backends/cpu/cpufeatures.h: which SIMD level the CPU executor may use.
 *
 * Owns run-time CPUID/XGETBV detection, the BIB_CPU_LEVEL override (which may
 * only lower the level) and the BIB_THREADS thread count. It does not own any
 * kernel: the kernels in *_avx2.c and *_avx512.c are compiled for their level
 * and must only be called with a level this module selected.
 *
 * Every level computes the same bits (spec/numerics.md); the level only
 * changes speed.
 */
#ifndef BIB_CPU_CPUFEATURES_H
#define BIB_CPU_CPUFEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

/* Environment variables read by the CPU executor (its caller passes getenv's
 * result in, so these functions stay testable and free of hidden state). */
#define BIB_CPU_LEVEL_ENV "BIB_CPU_LEVEL" /* scalar | avx2 | avx512 */
#define BIB_THREADS_ENV "BIB_THREADS"     /* 1..BIB_CPU_MAX_THREADS */

#define BIB_CPU_MAX_THREADS 256

/* Ordered: a higher level implies every lower one. */
typedef enum bib_cpu_level {
    BIB_CPU_LEVEL_SCALAR = 0, /* portable C, libm fmaf */
    BIB_CPU_LEVEL_AVX2 = 1,   /* AVX2 + FMA, OS saves YMM state */
    BIB_CPU_LEVEL_AVX512 = 2, /* AVX-512 F/DQ/BW/VL + FMA, OS saves ZMM state */
} bib_cpu_level_t;

typedef struct bib_cpu_features {
    bool sse2, avx, avx2, fma;
    bool avx512f, avx512dq, avx512bw, avx512vl;
    bool os_ymm; /* XCR0 says the OS saves XMM and YMM state */
    bool os_zmm; /* XCR0 also says opmask and ZMM state */
    bool intel;  /* the vendor string is GenuineIntel */
} bib_cpu_features_t;

/* Fills *features from CPUID and XGETBV. A feature counts only when the OS
 * also saves the registers it needs (AVX needs os_ymm, AVX-512 os_zmm). */
void bib_cpu_detect(bib_cpu_features_t *features);

/* The highest level *features supports. */
bib_cpu_level_t bib_cpu_best_level(const bib_cpu_features_t *features);

/* "scalar", "avx2", "avx512". */
const char *bib_cpu_level_name(bib_cpu_level_t level);

/* Picks the level to run at: the best one, or `forced` (the value of
 * BIB_CPU_LEVEL, NULL or "" when unset). A forced level above what the CPU
 * supports, or an unknown name, is BIB_E_UNAVAILABLE / BIB_E_USAGE with a
 * one-line reason in why[0..why_len). */
bib_status_t bib_cpu_level_select(const bib_cpu_features_t *features, const char *forced,
                                  bib_cpu_level_t *out, char *why, size_t why_len);

/* Picks the worker thread count: `requested` when non-zero, else `forced`
 * (the value of BIB_THREADS, NULL or "" when unset), else the number of CPUs
 * this process may run on. A malformed or out-of-range BIB_THREADS is
 * BIB_E_USAGE with a reason in why. */
bib_status_t bib_cpu_threads_select(uint32_t requested, const char *forced, uint32_t *out,
                                    char *why, size_t why_len);

#endif
