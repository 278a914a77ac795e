/* tests/fuzz/fuzz_load.c: libFuzzer harness for the .bib reader, verifier,
 * writer, disassembler and assembler (bytes in, nothing run).
 *
 * Promise checked: bad bytecode gets a clear error, never a crash. For every
 * input (after the size and checksum fields are fixed, fuzz_common.h):
 *   1. bib_module_read either fails with a non-empty one-line message or
 *      returns a verified module;
 *   2. a verified module written back (bytes W) reads again, and writing that
 *      gives W byte for byte (the reader keeps everything the writer says);
 *   3. bib_disassemble of the input re-assembles to exactly W (the promise of
 *      assembler/disasm.c), unless the disassembler refuses with a message
 *      (two functions with one name cannot be spelled in text).
 * Any violation aborts, so libFuzzer saves the input.
 *
 * Build and run: `make fuzz` (tests/fuzz/fuzz.mk), or
 *   build/fuzz/fuzz_load -dict=build/fuzz/bib.dict build/fuzz/corpus/load build/fuzz/seeds/bib
 * Reproduce a saved input: build/fuzz/fuzz_load crash-FILE (or `build/bib dis FILE`).
 */
#define BIB_FUZZ_WANT_MUTATOR
#include "tests/fuzz/fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "include/bib.h"

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_load: %s%s%s\n", what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
    abort();
}

/* A message must say something and stay on one line. */
static void check_message(const char *stage, const char *msg) {
    if (msg == NULL || msg[0] == '\0')
        fail(stage, "failed without a message");
    if (strchr(msg, '\n') != NULL)
        fail(stage, "message spans several lines");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *bytes = bib_fuzz_copy(data, size);
    if (bytes == NULL)
        return 0;

    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *m = NULL;
    bib_status_t st = bib_module_read(bytes, size, &m, &diag);
    if (st != BIB_OK) {
        if (m != NULL)
            fail("read", "failed but returned a module");
        if (st != BIB_E_FORMAT && st != BIB_E_VERIFY && st != BIB_E_NOMEM)
            fail("read", "failed with an unexpected status");
        check_message("read", diag.msg);
        free(bytes);
        return 0;
    }

    /* 2. write, read, write: the same bytes. */
    uint8_t *w1 = NULL, *w2 = NULL;
    size_t n1 = 0, n2 = 0;
    if (bib_module_write(m, &w1, &n1, &diag) != BIB_OK)
        fail("write of a verified module", diag.msg);
    bib_module_t *again = NULL;
    if (bib_module_read(w1, n1, &again, &diag) != BIB_OK)
        fail("reading back the written module", diag.msg);
    if (bib_module_write(again, &w2, &n2, &diag) != BIB_OK)
        fail("second write", diag.msg);
    if (n1 != n2 || memcmp(w1, w2, n1) != 0)
        fail("round trip", "write(read(write(m))) differs from write(m)");
    bib_module_free(again);
    free(w2);

    /* 3. disassemble the input, assemble the text: the canonical bytes. */
    char *text = NULL, *diagnostics = NULL;
    st = bib_disassemble(bytes, size, &text, &diagnostics);
    if (st != BIB_OK) {
        if (st != BIB_E_USAGE || diagnostics == NULL || diagnostics[0] == '\0')
            fail("disassembling a verified module", diagnostics);
    } else {
        uint8_t *asm_bytes = NULL;
        size_t asm_size = 0;
        char *asm_diag = NULL;
        st = bib_assemble(text, strlen(text), "fuzz.basm", &asm_bytes, &asm_size, &asm_diag);
        if (st != BIB_OK) {
            fprintf(stderr, "---- disassembly\n%s----\n", text);
            fail("re-assembling the disassembly", asm_diag);
        }
        if (asm_size != n1 || memcmp(asm_bytes, w1, n1) != 0) {
            fprintf(stderr, "---- disassembly\n%s----\n", text);
            fail("disassemble + assemble", "bytes differ from the written module");
        }
        bib_free(asm_bytes);
        bib_free(asm_diag);
    }
    bib_free(text);
    bib_free(diagnostics);
    free(w1);
    bib_module_free(m);
    free(bytes);
    return 0;
}
