/* examples/embed.c: a host program that embeds libbib the way a compiler would.
 *
 * It emits a function with the builder API (no assembly text), registers a
 * host function of its own, runs the module, and reads the result.
 * After `make install`:
 *   cc embed.c $(pkg-config --cflags --libs bib)                   (libbib.so)
 *   cc embed.c $(pkg-config --cflags --static --libs bib | sed 's/-lbib /-l:libbib.a /')
 *                                                                  (libbib.a)
 *   ./a.out          prints "sum of squares 1..10 = 385" and "host saw 385"
 */
#include <stdio.h>
#include <stdlib.h>

#include "bib.h"

/* A host function: bytecode reaches it through HOSTCALL by name. */
static bib_status_t report(bib_vm_t *vm, void *user, const bib_value_t *args, uint32_t nargs,
                           bib_value_t *result) {
    (void)vm;
    (void)nargs;
    *(int64_t *)user = args[0].i;
    result->i = 0;
    return BIB_OK;
}

static uint32_t op(const char *mnemonic) {
    int64_t code = bib_opcode(mnemonic);
    if (code < 0) {
        fprintf(stderr, "unknown mnemonic %s\n", mnemonic);
        exit(1);
    }
    return (uint32_t)code;
}

int main(void) {
    /* sum = 0; for (i = 1; i <= 10; i++) sum += i * i; report(sum); print_i64(sum) */
    bib_builder_t *b = bib_builder_create();
    uint32_t main_fn = bib_builder_declare(b, "main");
    uint32_t report_fn = bib_builder_import(b, "report");
    uint32_t print_fn = bib_builder_import(b, "print_i64");
    uint32_t loop = bib_builder_label(b), done = bib_builder_label(b);
    bib_builder_begin(b, main_fn, 0, 5);
    bib_builder_emit(b, op("LDI"), 0, 0, 0, 0);  /* r0 = sum = 0 */
    bib_builder_emit(b, op("LDI"), 1, 1, 0, 0);  /* r1 = i = 1 */
    bib_builder_emit(b, op("LDI"), 2, 10, 0, 0); /* r2 = 10 */
    bib_builder_bind(b, loop);
    bib_builder_emit(b, op("JLT"), 2, 1, done, 0); /* if 10 < i: done */
    bib_builder_emit(b, op("MUL"), 3, 1, 1, 0);    /* r3 = i * i */
    bib_builder_emit(b, op("ADD"), 0, 0, 3, 0);    /* sum += r3 */
    bib_builder_emit(b, op("ADDI"), 1, 1, 1, 0);   /* i += 1 */
    bib_builder_emit(b, op("JMP"), loop, 0, 0, 0);
    bib_builder_bind(b, done);
    bib_builder_emit(b, op("HOSTCALL"), 4, report_fn, 0, 1);
    bib_builder_emit(b, op("HOSTCALL"), 4, print_fn, 0, 1);
    bib_builder_emit(b, op("HALT"), 0, 0, 0, 0);
    bib_builder_end(b);

    uint8_t *bytes = NULL;
    size_t size = 0;
    if (bib_builder_finish(b, &bytes, &size) != BIB_OK) {
        fprintf(stderr, "builder: %s\n", bib_builder_error(b));
        return 1;
    }
    bib_builder_destroy(b);

    bib_vm_t *vm = NULL;
    int64_t seen = 0, exit_value = 0;
    bib_vm_create(NULL, &vm);
    bib_vm_register_host(vm, "report", report, &seen);
    bib_vm_register_stdio(vm, stdout);
    fputs("sum of squares 1..10 = ", stdout);
    if (bib_vm_load(vm, bytes, size, "embedded") != BIB_OK ||
        bib_vm_run(vm, &exit_value) != BIB_OK) {
        fprintf(stderr, "bib: %s\n", bib_vm_error(vm));
        return 1;
    }
    printf("host saw %lld, exit value %lld\n", (long long)seen, (long long)exit_value);
    bib_free(bytes);
    bib_vm_destroy(vm);
    return seen == 385 ? 0 : 1;
}
