/* backends/cpu/cpufeatures.c: CPUID/XGETBV detection and the BIB_CPU_LEVEL /
 * BIB_THREADS choices. Holds no state: every answer is recomputed on request. */
#include "backends/cpu/cpufeatures.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    /* xgetbv spelled as bytes so this file needs no -mxsave. */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

void bib_cpu_detect(bib_cpu_features_t *f) {
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    f->intel =
        memcmp(&b, "Genu", 4) == 0 && memcmp(&d, "ineI", 4) == 0 && memcmp(&c, "ntel", 4) == 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    f->sse2 = (d >> 26) & 1;
    bool osxsave = (c >> 27) & 1;
    bool avx = (c >> 28) & 1;
    bool fma = (c >> 12) & 1;
    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        f->os_ymm = (xcr0 & 0x6) == 0x6;                /* XMM | YMM */
        f->os_zmm = f->os_ymm && (xcr0 & 0xe0) == 0xe0; /* opmask | ZMM_Hi256 | Hi16_ZMM */
    }
    f->avx = avx && f->os_ymm;
    f->fma = fma && f->os_ymm;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = ((b >> 5) & 1) && f->os_ymm;
        f->avx512f = ((b >> 16) & 1) && f->os_zmm;
        f->avx512dq = ((b >> 17) & 1) && f->os_zmm;
        f->avx512bw = ((b >> 30) & 1) && f->os_zmm;
        f->avx512vl = ((b >> 31) & 1) && f->os_zmm;
    }
}
#else
void bib_cpu_detect(bib_cpu_features_t *f) {
    memset(f, 0, sizeof *f);
}
#endif

bib_cpu_level_t bib_cpu_best_level(const bib_cpu_features_t *f) {
    if (f->avx512f && f->avx512dq && f->avx512bw && f->avx512vl && f->fma && f->avx2)
        return BIB_CPU_LEVEL_AVX512;
    if (f->avx2 && f->fma)
        return BIB_CPU_LEVEL_AVX2;
    return BIB_CPU_LEVEL_SCALAR;
}

const char *bib_cpu_level_name(bib_cpu_level_t level) {
    switch (level) {
    case BIB_CPU_LEVEL_SCALAR:
        return "scalar";
    case BIB_CPU_LEVEL_AVX2:
        return "avx2";
    case BIB_CPU_LEVEL_AVX512:
        return "avx512";
    }
    return "unknown";
}

bib_status_t bib_cpu_level_select(const bib_cpu_features_t *features, const char *forced,
                                  bib_cpu_level_t *out, char *why, size_t why_len) {
    bib_cpu_level_t best = bib_cpu_best_level(features);
    if (forced == NULL || forced[0] == '\0') {
        *out = best;
        return BIB_OK;
    }
    bib_cpu_level_t want;
    if (strcmp(forced, "scalar") == 0) {
        want = BIB_CPU_LEVEL_SCALAR;
    } else if (strcmp(forced, "avx2") == 0) {
        want = BIB_CPU_LEVEL_AVX2;
    } else if (strcmp(forced, "avx512") == 0) {
        want = BIB_CPU_LEVEL_AVX512;
    } else {
        snprintf(why, why_len, "%s=%s: unknown level (expected scalar, avx2 or avx512)",
                 BIB_CPU_LEVEL_ENV, forced);
        return BIB_E_USAGE;
    }
    if (want > best) {
        snprintf(why, why_len, "%s=%s: this CPU supports at most %s", BIB_CPU_LEVEL_ENV, forced,
                 bib_cpu_level_name(best));
        return BIB_E_UNAVAILABLE;
    }
    *out = want;
    return BIB_OK;
}

static uint32_t online_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (uint32_t)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

bib_status_t bib_cpu_threads_select(uint32_t requested, const char *forced, uint32_t *out,
                                    char *why, size_t why_len) {
    uint32_t n;
    if (requested != 0) {
        n = requested;
    } else if (forced != NULL && forced[0] != '\0') {
        char *end;
        errno = 0;
        unsigned long v = strtoul(forced, &end, 10);
        if (errno != 0 || *end != '\0' || forced[0] == '-' || v == 0 || v > BIB_CPU_MAX_THREADS) {
            snprintf(why, why_len, "%s=%s: expected an integer from 1 to %d", BIB_THREADS_ENV,
                     forced, BIB_CPU_MAX_THREADS);
            return BIB_E_USAGE;
        }
        n = (uint32_t)v;
    } else {
        n = online_cpus();
    }
    if (n > BIB_CPU_MAX_THREADS) {
        snprintf(why, why_len, "%u threads requested: at most %d are supported", n,
                 BIB_CPU_MAX_THREADS);
        return BIB_E_USAGE;
    }
    *out = n;
    return BIB_OK;
}
