/* tests/fuzz/fuzz_diff.c: differential libFuzzer harness across executor
 * configurations.
 *
 * Promise checked: one program gives the same bits on every run and every
 * executor configuration. Each input (fixed up as in fuzz_common.h) is run
 * in fresh VMs on the CPU executor as
 *
 *   A  scalar kernels, 1 thread (run twice in one VM: runs start fresh)
 *   B  the widest SIMD level this machine has, 2 threads
 *   C  AVX2, 2 threads (when the machine has AVX-512, so B is not AVX2)
 *   D  scalar kernels, 1 thread, profiled: the instrumented loop, which runs
 *      every instruction alone, never a superinstruction, and zeroes whole
 *      frames on calls where the plain loop zeroes only what the callee may
 *      read before writing (vm/decode.c)
 *
 * and every run must agree with A's first: the load status and message,
 * the run status, the exit value, every byte the program printed and the
 * trap message. Fuel and memory caps are the same everywhere (fuel is
 * counted from the program, never from the executor), so traps agree too.
 * On a mismatch both outcomes are printed and the harness aborts, so
 * libFuzzer saves the input. (The fuzz build has the CPU executor only;
 * `sh tools/replay-diff.sh` runs a corpus on the Vulkan and CUDA executors
 * of the normal build and compares them with the CPU the same way.)
 *
 * Build and run: `make fuzz` (tests/fuzz/fuzz.mk). Reproduce:
 *   build/fuzz/fuzz_diff crash-FILE
 */
#define BIB_FUZZ_WANT_MUTATOR
#include "tests/fuzz/fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "backends/cpu/cpufeatures.h"
#include "include/bib.h"

#define FUZZ_FUEL 100000u
#define FUZZ_MAX_MEMORY (64u << 20)

typedef struct outcome {
    bib_status_t load, run;
    int64_t exit_value;
    char message[512];
    char *out; /* what the program printed */
    size_t out_len;
} outcome_t;

typedef struct config {
    const char *name;
    const char *backend;
    const char *level; /* BIB_CPU_LEVEL */
    uint32_t threads;
    int profiled; /* the instrumented loop (profiling: no trace lines to hash) */
} config_t;

static config_t configs[4];
static int nconfigs;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    bib_cpu_features_t f;
    bib_cpu_detect(&f);
    bib_cpu_level_t best;
    char why[256];
    if (bib_cpu_level_select(&f, NULL, &best, why, sizeof why) != BIB_OK)
        best = BIB_CPU_LEVEL_SCALAR;
    configs[nconfigs++] = (config_t){"scalar/1 thread", "cpu", "scalar", 1, 0};
    if (best == BIB_CPU_LEVEL_AVX512) {
        configs[nconfigs++] = (config_t){"avx512/2 threads", "cpu", "avx512", 2, 0};
        configs[nconfigs++] = (config_t){"avx2/2 threads", "cpu", "avx2", 2, 0};
    } else if (best == BIB_CPU_LEVEL_AVX2) {
        configs[nconfigs++] = (config_t){"avx2/2 threads", "cpu", "avx2", 2, 0};
    } else {
        configs[nconfigs++] = (config_t){"scalar/2 threads", "cpu", "scalar", 2, 0};
    }
    configs[nconfigs++] = (config_t){"scalar/1 thread profiled", "cpu", "scalar", 1, 1};
    return 0;
}

static void outcome_free(outcome_t *o) {
    free(o->out);
    o->out = NULL;
}

/* Runs bytes in a fresh VM `runs` times, the outcomes in o[0 .. runs-1]. */
static void run_config(const config_t *c, const uint8_t *bytes, size_t size, outcome_t *o,
                       int runs) {
    setenv(BIB_CPU_LEVEL_ENV, c->level, 1);
    bib_options_t opt;
    bib_options_init(&opt);
    opt.fuel = FUZZ_FUEL;
    opt.max_memory = FUZZ_MAX_MEMORY;
    opt.backend = c->backend;
    opt.threads = c->threads;
    bib_vm_t *vm = NULL;
    if (bib_vm_create(&opt, &vm) != BIB_OK || (c->profiled && bib_vm_profile(vm, 1) != BIB_OK))
        abort();
    /* Imports bind at load, so one stream takes every run's output; each
       run's share is what it added. */
    char *all = NULL;
    size_t all_len = 0;
    FILE *out = open_memstream(&all, &all_len);
    if (out == NULL || bib_vm_register_stdio(vm, out) != BIB_OK)
        abort();
    bib_status_t load = bib_vm_load(vm, bytes, size, "fuzz.bib");
    char load_message[sizeof o->message] = "";
    if (load != BIB_OK)
        snprintf(load_message, sizeof load_message, "%s", bib_vm_error(vm));
    for (int r = 0; r < runs; r++) {
        memset(&o[r], 0, sizeof o[r]);
        o[r].load = load;
        snprintf(o[r].message, sizeof o[r].message, "%s", load_message);
        fflush(out);
        size_t start = all_len;
        if (load == BIB_OK) {
            o[r].run = bib_vm_run(vm, &o[r].exit_value);
            if (o[r].run != BIB_OK)
                snprintf(o[r].message, sizeof o[r].message, "%s", bib_vm_error(vm));
        }
        fflush(out);
        o[r].out_len = all_len - start;
        o[r].out = malloc(o[r].out_len + 1);
        if (o[r].out == NULL)
            abort();
        memcpy(o[r].out, all + start, o[r].out_len);
    }
    bib_vm_destroy(vm);
    fclose(out);
    free(all);
    unsetenv(BIB_CPU_LEVEL_ENV);
}

static int same(const outcome_t *a, const outcome_t *b) {
    return a->load == b->load && a->run == b->run && a->exit_value == b->exit_value &&
           strcmp(a->message, b->message) == 0 && a->out_len == b->out_len &&
           (a->out_len == 0 || memcmp(a->out, b->out, a->out_len) == 0);
}

static void print_outcome(const char *name, const outcome_t *o) {
    fprintf(stderr, "  %-18s load %d run %d exit %lld message '%s' output %zu bytes: %.*s\n", name,
            (int)o->load, (int)o->run, (long long)o->exit_value, o->message, o->out_len,
            (int)(o->out_len < 400 ? o->out_len : 400), o->out ? o->out : "");
}

static void mismatch(const char *what, const outcome_t *a, const char *bname, const outcome_t *b) {
    fprintf(stderr, "fuzz_diff: %s differs\n", what);
    print_outcome(configs[0].name, a);
    print_outcome(bname, b);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *bytes = bib_fuzz_copy(data, size);
    if (bytes == NULL)
        return 0;

    outcome_t ref[2];
    run_config(&configs[0], bytes, size, ref, 2);
    if (!same(&ref[0], &ref[1]))
        mismatch("a second run in the same VM", &ref[0], "scalar/1 thread, run 2", &ref[1]);
    outcome_free(&ref[1]);
    /* A module that does not load runs nowhere: nothing more to compare. */
    for (int i = 1; i < nconfigs && ref[0].load == BIB_OK; i++) {
        outcome_t o;
        run_config(&configs[i], bytes, size, &o, 1);
        if (!same(&ref[0], &o))
            mismatch(configs[i].name, &ref[0], configs[i].name, &o);
        outcome_free(&o);
    }
    outcome_free(&ref[0]);
    free(bytes);
    return 0;
}
