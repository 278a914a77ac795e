/* tests/fuzz/fuzz_extend.c: libFuzzer harness for bib_vm_extend (vm/extend.h),
 * the REPL's way to add a line to main without a reload.
 *
 * Promise checked: an extension gives what a reload of the grown module
 * gives. Each input is a .bib file (fixed up as in fuzz_common.h) whose
 * entry function is its last. The last k instructions before main's closing
 * one are cut off (k from 1 to 4, by main's length); what is left, with
 * main's frame shrunk by 0 to 2 registers, is the base, loaded and started.
 * The cut instructions are then given to bib_vm_extend, and the grown
 * module is also built by hand from the base and read (so verified) as a
 * reload would. Checked:
 *   1. the same verdict, and the same message unless it is about labels;
 *   2. the same module bytes;
 *   3. the same decoded program, field by field, except for latches the
 *      extension does not form and the wider zeroing of main's frame;
 *   4. the same liveness record (module.h, bib_liveness_tail_t).
 * Any difference aborts, so libFuzzer saves the input.
 *
 * Build and run: `make fuzz-build`, then from build/fuzz/work
 *   ../fuzz_extend -dict=../bib.dict ../corpus/fuzz_extend ../seeds/bib
 */
#define BIB_FUZZ_WANT_MUTATOR
#include "tests/fuzz/fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "include/bib.h"
#include "tests/unit/extend_compare.h"
#include "vm/extend.h"
#include "vm/vm.h"

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_extend: %s%s%s\n", what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
    abort();
}

static bib_vm_t *started(const uint8_t *bytes, size_t size) {
    bib_options_t opt;
    bib_options_init(&opt);
    opt.backend = "cpu";
    opt.threads = 1;
    opt.max_memory = 64u << 20;
    bib_vm_t *vm = NULL;
    if (bib_vm_create(&opt, &vm) != BIB_OK)
        abort();
    if (bib_vm_load(vm, bytes, size, "t") != BIB_OK || bib_vm_start(vm) != BIB_OK) {
        bib_vm_destroy(vm);
        return NULL;
    }
    return vm;
}

/* Removes the count instructions at pc at (main's, ahead of its last) and
   the labels inside them; labels on the last move with it. */
static void cut(bib_module_t *m, uint32_t at, uint32_t count) {
    bib_function_t *f = &m->funcs[m->entry_func];
    m->code[at] = m->code[at + count];
    if (m->lines != NULL)
        m->lines[at] = m->lines[at + count];
    m->code_count -= count;
    f->count -= count;
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->label_count; i++) {
        bib_label_t l = m->labels[i];
        if (l.pc > at && l.pc < at + count) {
            free(l.name);
            continue;
        }
        if (l.pc == at + count)
            l.pc = at;
        m->labels[n++] = l;
    }
    m->label_count = n;
    if (m->label_count > 1)
        qsort(m->labels, m->label_count, sizeof *m->labels, extend_compare_labels);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *bytes = bib_fuzz_copy(data, size);
    if (bytes == NULL)
        return 0;
    bib_module_t *m = NULL;
    bib_status_t st = bib_module_read(bytes, size, &m, NULL);
    free(bytes);
    if (st != BIB_OK)
        return 0;
    bib_function_t *f = &m->funcs[m->entry_func];
    if (m->entry_func + 1 != m->func_count || f->count < 2 || m->lines == NULL) {
        bib_module_free(m);
        return 0;
    }
    /* The extension: the k instructions ahead of main's last, as they are
       (their targets, constants and registers name the same things in the
       grown module). */
    uint32_t k = 1 + (f->count - 2) % 4;
    if (k > f->count - 1)
        k = f->count - 1;
    const uint32_t at = f->entry + f->count - 1 - k;
    bib_insn_t ext_code[4];
    uint32_t ext_lines[4];
    memcpy(ext_code, &m->code[at], k * sizeof *ext_code);
    memcpy(ext_lines, &m->lines[at], k * sizeof *ext_lines);
    const uint32_t nregs = f->nregs;
    cut(m, at, k);
    uint32_t shrink = f->nregs > 2 ? m->code_count % 3 : 0;
    f->nregs -= shrink;
    uint8_t *base = NULL;
    size_t base_size = 0;
    bib_module_t *check = NULL;
    if (bib_module_write(m, &base, &base_size, NULL) != BIB_OK ||
        bib_module_read(base, base_size, &check, NULL) != BIB_OK) {
        bib_module_free(check);
        bib_free(base);
        bib_module_free(m);
        return 0;
    }
    bib_module_free(check);
    bib_vm_t *vm = started(base, base_size);
    if (vm == NULL) {
        bib_free(base);
        bib_module_free(m);
        return 0;
    }

    /* The grown module by hand: m (the base) with the instructions back. */
    f = &m->funcs[m->entry_func];
    m->code[at + k] = m->code[at];
    m->lines[at + k] = m->lines[at];
    memcpy(&m->code[at], ext_code, k * sizeof *ext_code);
    memcpy(&m->lines[at], ext_lines, k * sizeof *ext_lines);
    m->code_count += k;
    f->count += k;
    f->nregs = nregs;
    if (m->label_count > 1)
        qsort(m->labels, m->label_count, sizeof *m->labels, extend_compare_labels);
    uint8_t *grown = NULL;
    size_t grown_size = 0;
    if (bib_module_write(m, &grown, &grown_size, NULL) != BIB_OK)
        fail("write", "the grown module");
    bib_module_free(m);
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *want = NULL;
    bib_status_t want_st = bib_module_read(grown, grown_size, &want, &diag);
    bib_module_free(want);

    bib_extension_t e = {
        ext_code, ext_lines, k, NULL, 0, NULL, 0, nregs, bib_vm_module(vm)->tensor_regs};
    st = bib_vm_extend(vm, &e, "t", 0);
    if (st != want_st) {
        fprintf(stderr, "extend: %s\nreload: %s\n", bib_vm_error(vm), diag.msg);
        fail("verdict", "extend and reload differ");
    }
    if (st != BIB_OK) {
        char expect[600];
        snprintf(expect, sizeof expect, "t: %s", diag.msg);
        if (strstr(diag.msg, "label") == NULL && strcmp(bib_vm_error(vm), expect) != 0) {
            fprintf(stderr, "extend: %s\nreload: %s\n", bib_vm_error(vm), expect);
            fail("message", "extend and reload say different things");
        }
    } else {
        uint8_t *mine = NULL;
        size_t mine_size = 0;
        if (bib_module_write(bib_vm_module(vm), &mine, &mine_size, NULL) != BIB_OK ||
            mine_size != grown_size || memcmp(mine, grown, grown_size) != 0)
            fail("module", "the extended module differs from the grown one");
        bib_free(mine);
        bib_vm_t *fresh = started(grown, grown_size);
        if (fresh == NULL)
            fail("load", "the grown module does not load");
        char why[160];
        bool had;
        const char *diff = extend_same_program(vm, fresh, why);
        if (diff != NULL)
            fail("decode", diff);
        if ((diff = extend_same_liveness(bib_vm_module(vm), bib_vm_module(fresh), &had)) != NULL)
            fail("liveness", diff);
        bib_vm_destroy(fresh);
    }
    bib_vm_destroy(vm);
    bib_free(base);
    bib_free(grown);
    return 0;
}
