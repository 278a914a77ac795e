/* tests/fuzz/fuzz_run.c: libFuzzer harness for loading and running modules.
 *
 * Promise checked: a verified program never crashes the VM, whatever it does;
 * it halts or traps. Each input (size and checksum fields fixed,
 * fuzz_common.h) is loaded with bib_vm_load into a VM with the standard print
 * functions writing to /dev/null, the CPU executor on one thread, fuel 100000
 * and a 64 MiB memory cap, and run twice (every run starts from a fresh
 * state; fuzz_diff.c checks that the two agree). Any status is fine; a
 * failure without a message, a crash, a sanitizer report or a timeout
 * (libFuzzer -timeout) is a bug.
 *
 * Build and run: `make fuzz` (tests/fuzz/fuzz.mk), or
 *   build/fuzz/fuzz_run -dict=build/fuzz/bib.dict -timeout=10 build/fuzz/corpus/run
 * build/fuzz/seeds/bib Reproduce a saved input: build/fuzz/fuzz_run crash-FILE, or build/bib run
 * --fuel 100000 --max-memory 64M --threads 1 crash-FILE
 */
#define BIB_FUZZ_WANT_MUTATOR
#include "tests/fuzz/fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "include/bib.h"

#define FUZZ_FUEL 100000u
#define FUZZ_MAX_MEMORY (64u << 20)

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    devnull = fopen("/dev/null", "w");
    if (devnull == NULL)
        abort();
    return 0;
}

static void check_message(bib_vm_t *vm, const char *stage) {
    const char *msg = bib_vm_error(vm);
    if (msg == NULL || msg[0] == '\0') {
        fprintf(stderr, "fuzz_run: %s failed without a message\n", stage);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *bytes = bib_fuzz_copy(data, size);
    if (bytes == NULL)
        return 0;

    bib_options_t opt;
    bib_options_init(&opt);
    opt.fuel = FUZZ_FUEL;
    opt.max_memory = FUZZ_MAX_MEMORY;
    opt.backend = "cpu";
    opt.threads = 1;
    bib_vm_t *vm = NULL;
    if (bib_vm_create(&opt, &vm) != BIB_OK)
        abort();
    if (bib_vm_register_stdio(vm, devnull) != BIB_OK)
        abort();
    bib_status_t st = bib_vm_load(vm, bytes, size, "fuzz.bib");
    if (st != BIB_OK) {
        check_message(vm, "load");
    } else {
        for (int run = 0; run < 2; run++) {
            int64_t exit_value = 0;
            st = bib_vm_run(vm, &exit_value);
            if (st != BIB_OK)
                check_message(vm, "run");
        }
    }
    bib_vm_destroy(vm);
    free(bytes);
    return 0;
}
