/* tests/unit/test_regression.c: one case per bug the fuzzers (tests/fuzz/)
 * found that a hex case cannot express (the container's checksum keeps a
 * `-- flip` from reaching past the header), kept forever. Each test builds
 * the module from assembly, breaks the one field the fuzzer broke, writes it
 * with a valid checksum and loads the bytes as any embedder would. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "include/bib.h"
#include "module/module.h"

/* The module that src assembles to, read back into memory. */
static bib_module_t *module_from_asm(const char *src) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diagnostics = NULL;
    bib_status_t st =
        bib_assemble(src, strlen(src), "regression.basm", &bytes, &size, &diagnostics);
    cr_assert_eq(st, BIB_OK, "assembly failed: %s", diagnostics != NULL ? diagnostics : "");
    bib_diag_t diag;
    bib_module_t *m = NULL;
    st = bib_module_read(bytes, size, &m, &diag);
    cr_assert_eq(st, BIB_OK, "read failed: %s", diag.msg);
    bib_free(bytes);
    bib_free(diagnostics);
    return m;
}

/* Writes m (valid checksum), frees it, and expects the bytes to fail to load
   with `status` and a message containing `text`, both through the reader and
   through bib_vm_load. */
static void expect_load_error(bib_module_t *m, bib_status_t status, const char *text) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    bib_diag_t diag;
    cr_assert_eq(bib_module_write(m, &bytes, &size, &diag), BIB_OK, "write failed: %s", diag.msg);
    bib_module_free(m);
    bib_module_t *back = NULL;
    diag.msg[0] = '\0';
    bib_status_t st = bib_module_read(bytes, size, &back, &diag);
    cr_expect_eq(st, status, "status %d, message: %s", st, diag.msg);
    cr_expect(strstr(diag.msg, text) != NULL, "message '%s' lacks '%s'", diag.msg, text);
    bib_module_free(back);
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    st = bib_vm_load(vm, bytes, size, "regression.bib");
    cr_expect_eq(st, status, "bib_vm_load status %d: %s", st, bib_vm_error(vm));
    cr_expect(strstr(bib_vm_error(vm), text) != NULL, "message '%s' lacks '%s'", bib_vm_error(vm),
              text);
    bib_vm_destroy(vm);
    free(bytes);
}

static const char symbolic_input[] = ".dim n, d\n"
                                     ".input x t0 f32[n, d]\n"
                                     ".func main regs=1\n"
                                     "    LDI r0, 0\n"
                                     "    HALT r0\n"
                                     ".end\n";

/* fuzz_load: a dimension -2 - (2^58 + 2) passed as symbol 0 because the
   verifier took the symbol index in 32 bits; the disassembler then printed
   the symbol's name, which assembles to -2, not the stored value. */
Test(regression, symbolic_dimension_index_is_judged_in_64_bits) {
    bib_module_t *m = module_from_asm(symbolic_input);
    cr_assert_eq(m->tensor_count, 1);
    cr_assert_eq(m->tensors[0].dims[0], BIB_DIM_SYMBOL(0));
    m->tensors[0].dims[0] = BIB_DIM_SYMBOL(0) - ((int64_t)1 << 58);
    expect_load_error(m, BIB_E_VERIFY, "tensor 0 'x': dimension 0 is -288230376151711746");
}

Test(regression, symbolic_dimension_far_below_int32_is_rejected) {
    bib_module_t *m = module_from_asm(symbolic_input);
    m->tensors[0].dims[1] = BIB_DIM_SYMBOL(1) - ((int64_t)1 << 32);
    expect_load_error(m, BIB_E_VERIFY, "tensor 0 'x': dimension 1 is");
}
