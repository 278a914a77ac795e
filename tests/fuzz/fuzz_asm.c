/* tests/fuzz/fuzz_asm.c: libFuzzer harness for the assembler (.basm text in).
 *
 * Promise checked: every failure to assemble produces diagnostics, never a
 * crash. For each input text:
 *   - bib_assemble fails with BIB_E_ASM and non-empty diagnostics whose first
 *     line is "file:line:col: error: ...", or
 *   - it succeeds, and its bytes read back as a verified module (the
 *     assembler never emits what the loader rejects) and disassemble to text
 *     that assembles to the same bytes.
 * Any violation aborts, so libFuzzer saves the input.
 *
 * The assembler can name files (.shader, .kernel, .include-style paths) and
 * run nvcc for .cu kernels; the fuzzer runs in build/fuzz so relative names
 * find nothing of the tree's.
 *
 * Build and run: `make fuzz` (tests/fuzz/fuzz.mk), or
 *   build/fuzz/fuzz_asm -dict=build/fuzz/basm.dict build/fuzz/corpus/asm build/fuzz/seeds/basm
 * Reproduce a saved input: build/fuzz/fuzz_asm crash-FILE (or `build/bib asm crash-FILE -o
 * /dev/null`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/bib.h"
#include "module/module.h"

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_asm: %s%s%s\n", what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *out = NULL;
    size_t out_size = 0;
    char *diagnostics = NULL;
    bib_status_t st =
        bib_assemble((const char *)data, size, "fuzz.basm", &out, &out_size, &diagnostics);
    if (st != BIB_OK) {
        if (out != NULL)
            fail("assemble", "failed but returned bytes");
        if (diagnostics == NULL || diagnostics[0] == '\0')
            fail("assemble", "failed without diagnostics");
        if (st == BIB_E_ASM && strstr(diagnostics, ": error: ") == NULL)
            fail("assemble", "diagnostics do not read 'file:line:col: error: message'");
        bib_free(diagnostics);
        return 0;
    }
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *m = NULL;
    if (bib_module_read(out, out_size, &m, &diag) != BIB_OK)
        fail("the assembled module does not load", diag.msg);
    bib_module_free(m);

    char *text = NULL, *dis_diag = NULL;
    st = bib_disassemble(out, out_size, &text, &dis_diag);
    if (st == BIB_OK) {
        uint8_t *again = NULL;
        size_t again_size = 0;
        char *again_diag = NULL;
        if (bib_assemble(text, strlen(text), "fuzz.basm", &again, &again_size, &again_diag) !=
            BIB_OK) {
            fprintf(stderr, "---- disassembly\n%s----\n", text);
            fail("re-assembling the disassembly", again_diag);
        }
        if (again_size != out_size || memcmp(again, out, out_size) != 0) {
            fprintf(stderr, "---- disassembly\n%s----\n", text);
            fail("disassemble + assemble", "bytes differ from the assembled module");
        }
        bib_free(again);
        bib_free(again_diag);
    } else if (st != BIB_E_USAGE || dis_diag == NULL || dis_diag[0] == '\0') {
        fail("disassembling an assembled module", dis_diag);
    }
    bib_free(text);
    bib_free(dis_diag);
    bib_free(out);
    bib_free(diagnostics);
    return 0;
}
