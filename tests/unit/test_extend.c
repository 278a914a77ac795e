/* tests/unit/test_extend.c: bib_vm_extend (vm/extend.h), which the REPL uses
 * to add a line to main without reloading the module. Every extension is
 * checked against what a reload of the same grown module gives: the same
 * verdict and message, the same module bytes, the same decoded program
 * (apart from the speed-only groups the extension may leave unformed), and
 * the same results when run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/bib.h"
#include "module/module.h"
#include "tests/unit/extend_compare.h"
#include "vm/extend.h"
#include "vm/vm.h"

static const char base_src[] = ".tensor w t1 f32[2] = 1, 2\n"
                               ".tensor u t4 f32[1] = 3\n"
                               ".tensor v t7 f32[3] = 1, 2, 3\n"
                               ".func sq args=1 regs=3\n"
                               "    MUL r1, r0, r0\n"
                               "    LDI r2, 99\n"
                               "    RET r1\n"
                               ".end\n"
                               ".func main regs=4\n"
                               "    LDI r0, 3\n"
                               "    LDK r1, =1.5\n"
                               "top:\n"
                               "    ADDI r2, r2, 1\n"
                               "    HALT r0\n"
                               ".end\n";

static void assemble(const char *src, uint8_t **bytes, size_t *size) {
    char *diag = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", bytes, size, &diag), BIB_OK, "%s",
                 diag ? diag : "");
    bib_free(diag);
}

static bib_vm_t *started(const uint8_t *bytes, size_t size) {
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t"), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(bib_vm_start(vm), BIB_OK);
    return vm;
}

/* The grown module built independently of bib_vm_extend: prev read back,
   the extension inserted by hand, the labels sorted again, written out and
   read (so verified) as a reload would. Returns the read's status; *bytes
   holds the grown module's bytes either way. */
static bib_status_t reference(const uint8_t *prev, size_t prev_size, const bib_extension_t *e,
                              uint8_t **bytes, size_t *size, char msg[512]) {
    bib_module_t *m = NULL;
    cr_assert_eq(bib_module_read(prev, prev_size, &m, NULL), BIB_OK);
    bib_function_t *f = &m->funcs[m->entry_func];
    uint32_t at = f->entry + f->count - 1, n = e->count;
    m->code = realloc(m->code, (m->code_count + n) * sizeof *m->code);
    m->lines = realloc(m->lines, (m->code_count + n) * sizeof *m->lines);
    m->code[at + n] = m->code[at];
    m->lines[at + n] = m->lines[at];
    for (uint32_t i = 0; i < n; i++) {
        m->code[at + i] = e->code[i];
        m->lines[at + i] = e->lines != NULL ? e->lines[i] : 0;
    }
    m->code_count += n;
    f->count += n;
    f->nregs = e->nregs;
    m->tensor_regs = e->tensor_regs;
    m->consts = realloc(m->consts, (m->const_count + e->const_count + 1) * sizeof *m->consts);
    for (uint32_t i = 0; i < e->const_count; i++)
        m->consts[m->const_count++] = e->consts[i];
    m->labels = realloc(m->labels, (m->label_count + e->label_count + 1) * sizeof *m->labels);
    for (uint32_t i = 0; i < e->label_count; i++)
        m->labels[m->label_count++] = (bib_label_t){at, strdup(e->labels[i])};
    qsort(m->labels, m->label_count, sizeof *m->labels, extend_compare_labels);
    cr_assert_eq(bib_module_write(m, bytes, size, NULL), BIB_OK);
    bib_module_free(m);
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *back = NULL;
    bib_status_t st = bib_module_read(*bytes, *size, &back, &diag);
    bib_module_free(back);
    snprintf(msg, 512, "%s", diag.msg);
    return st;
}

static void same_program(const bib_vm_t *a, const bib_vm_t *b, uint32_t step) {
    char why[160];
    const char *diff = extend_same_program(a, b, why);
    cr_assert_null(diff, "step %u: %s", step, diff);
}

/* Whether a had a liveness record to compare (an extension taken back drops
   it); fails when it differs from b's. */
static bool same_liveness(const bib_module_t *a, const bib_module_t *b, uint32_t step) {
    bool had;
    const char *diff = extend_same_liveness(a, b, &had);
    cr_assert_null(diff, "step %u: %s", step, diff);
    return had;
}

/* ---- random extensions --------------------------------------------------- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

/* Scalar, branching (1 in 10), calling (1 in 10) and tensor instructions. */
static const char *const scalar_ops[] = {"NOP",  "MOV", "LDI",  "LDK", "ADD",
                                         "ADDI", "MUL", "MULI", "LT",  "FADD"};
static const char *const branch_ops[] = {"JZ", "JNZ", "JMP", "JLT"};
static const char *const tensor_ops[] = {"ALLOC", "FREE", "THASH", "COPY", "TADD"};

static const char *random_op(void) {
    uint32_t kind = rnd(10);
    if (kind == 0)
        return branch_ops[rnd(sizeof branch_ops / sizeof *branch_ops)];
    if (kind == 1)
        return "CALL";
    if (kind < 5)
        return tensor_ops[rnd(sizeof tensor_ops / sizeof *tensor_ops)];
    return scalar_ops[rnd(sizeof scalar_ops / sizeof *scalar_ops)];
}

/* One random instruction for pc (at + i of an extension of count), mostly
   valid; bad says whether it was made wrong on purpose. */
static bib_insn_t random_insn(const bib_module_t *m, uint32_t at, uint32_t i, uint32_t count,
                              uint32_t nregs, uint32_t tregs, uint32_t nconsts, bool *bad) {
    int op = bib_isa_find_name(random_op());
    cr_assert(op >= 0);
    const bib_opinfo_t *info = &bib_isa_table[op];
    const bib_function_t *f = &m->funcs[m->entry_func];
    uint32_t w[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
        bool wrong = rnd(40) == 0;
        switch ((bib_operand_kind_t)info->kinds[k]) {
        case BIB_K_RD:
        case BIB_K_RS:
        case BIB_K_RM:
            w[k] = wrong ? nregs + rnd(3) : rnd(nregs);
            /* A call's arguments r[c..c+1) must fit the frame. */
            if (k == 2 && info->kinds[3] == BIB_K_COUNT && w[k] + 1 > nregs && !wrong)
                w[k] = nregs - 1;
            break;
        case BIB_K_IMM:
            w[k] = (uint32_t)((int32_t)rnd(200) - 50);
            break;
        case BIB_K_TGT:
            /* Forward inside the extension (the closing HALT included), or
               back into the code before it; now and then outside main. A
               JMP goes forward, so that the end of main stays reached. */
            if (wrong)
                w[k] = rnd(f->entry);
            else if (rnd(4) != 0 || (info->flags & BIB_F_TERM))
                w[k] = at + i + 1 + rnd(count - i);
            else
                w[k] = f->entry + rnd(at - f->entry);
            break;
        case BIB_K_CONST:
            w[k] = wrong ? nconsts + rnd(2) : rnd(nconsts);
            break;
        case BIB_K_FN:
            w[k] = 0; /* sq */
            break;
        case BIB_K_COUNT:
            w[k] = 1;
            break;
        case BIB_K_DTYPE:
            w[k] = BIB_DTYPE_F32;
            break;
        case BIB_K_TD:
        case BIB_K_TS:
        case BIB_K_TM:
            w[k] = wrong ? tregs + rnd(2) : rnd(tregs);
            break;
        default:
            break;
        }
        *bad |= wrong;
    }
    return (bib_insn_t){bib_isa_table[op].code, w[0], w[1], w[2], w[3]};
}

Test(extend, random_extensions_match_a_reload_of_the_grown_module) {
    uint8_t *ref = NULL;
    size_t ref_size = 0;
    assemble(base_src, &ref, &ref_size);
    bib_vm_t *vm = started(ref, ref_size);
    rng_state = 12345;
    uint32_t accepted = 0, refused = 0, redecoded = 0, tails = 0;
    for (uint32_t step = 0; step < 600; step++) {
        const bib_module_t *m = bib_vm_module(vm);
        const bib_function_t *f = &m->funcs[m->entry_func];
        const uint32_t at = f->entry + f->count - 1;
        uint32_t count = rnd(4) == 0 ? 0 : 1 + rnd(rnd(8) == 0 ? 40 : 4);
        uint32_t nlabels = rnd(6) == 0 ? 1 + rnd(2) : count == 0;
        uint32_t nregs = f->nregs + (rnd(10) == 0 ? 1 + rnd(3) : 0);
        uint32_t tregs = m->tensor_regs + (rnd(30) == 0);
        bib_const_t consts[2];
        uint32_t nconsts = rnd(5) == 0 ? 1 + rnd(2) : 0;
        for (uint32_t i = 0; i < nconsts; i++)
            consts[i] = (bib_const_t){rnd(2) ? BIB_CONST_I64 : BIB_CONST_F64, 1000 + step * 3 + i};
        bib_insn_t code[48];
        uint32_t lines[48];
        bool bad = false;
        for (uint32_t i = 0; i < count; i++) {
            code[i] = random_insn(m, at, i, count, nregs, tregs, m->const_count + nconsts, &bad);
            lines[i] = 100 + step;
        }
        char names[2][32];
        const char *labels[2];
        for (uint32_t i = 0; i < nlabels; i++) {
            /* Now and then a name main already has, or the L<number> form. */
            uint32_t kind = rnd(25);
            if (kind == 0 && m->label_count > 0)
                snprintf(names[i], sizeof names[i], "%s", m->labels[m->label_count - 1].name);
            else if (kind == 1)
                snprintf(names[i], sizeof names[i], "L%u", step);
            else
                snprintf(names[i], sizeof names[i], "s%u_%c", step, "ba"[i]);
            labels[i] = names[i];
        }
        bib_extension_t e = {code, lines, count, labels, nlabels, consts, nconsts, nregs, tregs};
        uint8_t *grown = NULL;
        size_t grown_size = 0;
        char want[512];
        bib_status_t want_st = reference(ref, ref_size, &e, &grown, &grown_size, want);
        uint32_t cap = vm->program.code_cap;
        const bib_dinsn_t *before = vm->program.code;
        bib_status_t st = bib_vm_extend(vm, &e, "t", 0);
        cr_assert_eq(st, want_st, "step %u: extend says %s; a reload: %s", step, bib_vm_error(vm),
                     want);
        if (st != BIB_OK) {
            refused++;
            /* Label messages number the labels differently; the rest match. */
            char expect[600];
            snprintf(expect, sizeof expect, "t: %s", want);
            if (strstr(want, "label") == NULL)
                cr_assert_str_eq(bib_vm_error(vm), expect, "step %u", step);
            bib_free(grown);
            continue;
        }
        accepted++;
        redecoded += vm->program.code != before || vm->program.code_cap != cap;
        uint8_t *mine = NULL;
        size_t mine_size = 0;
        cr_assert_eq(bib_module_write(bib_vm_module(vm), &mine, &mine_size, NULL), BIB_OK);
        cr_assert(mine_size == grown_size && memcmp(mine, grown, mine_size) == 0,
                  "step %u: the extended module differs from the one built by hand", step);
        bib_free(mine);
        bib_vm_t *fresh = started(grown, grown_size);
        same_program(vm, fresh, step);
        tails += same_liveness(bib_vm_module(vm), bib_vm_module(fresh), step);
        bib_vm_destroy(fresh);
        bib_free(ref);
        ref = grown;
        ref_size = grown_size;
        (void)bad;
    }
    cr_assert(accepted > 100 && refused > 50 && redecoded > 3 && tails > 100,
              "accepted %u, refused %u, decoded again %u, liveness records %u", accepted, refused,
              redecoded, tails);
    bib_free(ref);
    bib_vm_destroy(vm);
}

/* ---- what an extension keeps ------------------------------------------- */

static int64_t reg(const bib_vm_t *vm, uint32_t r) {
    bib_frame_info_t fi;
    cr_assert_eq(bib_vm_frame(vm, 0, &fi), BIB_OK);
    cr_assert(r < fi.nregs);
    return fi.regs[r].i;
}

static void run_to_halt(bib_vm_t *vm) {
    bib_stop_t stop;
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(stop, BIB_STOP_HALTED, "%s", bib_vm_error(vm));
}

/* One instruction of main assembled: the extension the REPL would send. */
static bib_insn_t insn(const char *text) {
    char src[320];
    snprintf(src, sizeof src,
             ".tensor w t1 f32[2] = 1, 2\n.tensor u t4 f32[1] = 3\n"
             ".func sq args=1 regs=7\n MUL r1, r0, r0\n LDI r6, 55\n RET r1\n.end\n"
             ".func main regs=12\n %s\n HALT r0\n.end\n",
             text);
    uint8_t *bytes;
    size_t size;
    assemble(src, &bytes, &size);
    bib_module_t *m = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &m, NULL), BIB_OK);
    bib_insn_t in = m->code[m->funcs[m->entry_func].entry];
    bib_module_free(m);
    bib_free(bytes);
    return in;
}

static void extend(bib_vm_t *vm, bib_insn_t *code, uint32_t count, uint32_t nregs,
                   uint32_t offset) {
    bib_extension_t e = {code, NULL, count, NULL, 0, NULL, 0, nregs, 0};
    cr_assert_eq(bib_vm_extend(vm, &e, "t", offset), BIB_OK, "%s", bib_vm_error(vm));
}

Test(extend, a_grown_frame_moves_the_window_of_calls_already_decoded) {
    /* sq (pc 0..2) writes its r6: main's r9 if a call's window still
       started at main's first frame of 3 registers. */
    const char *src = ".func sq args=1 regs=7\n MUL r1, r0, r0\n LDI r6, 55\n RET r1\n.end\n"
                      ".func main regs=3\n LDI r0, 5\n CALL r1, sq, r0, 1\n HALT r1\n.end\n";
    uint8_t *bytes;
    size_t size;
    assemble(src, &bytes, &size);
    bib_vm_t *vm = started(bytes, size);
    bib_free(bytes);
    run_to_halt(vm);
    cr_assert_eq(reg(vm, 1), 25);
    /* A NOP fills the decoded code; LDI r9 grows the frame to 10; then a
       jump back to the CALL (pc 4), stopped as soon as it has returned. */
    bib_insn_t nop = insn("NOP"), set = insn("LDI r9, 77");
    extend(vm, &nop, 1, 3, 2);
    run_to_halt(vm);
    extend(vm, &set, 1, 10, 3);
    run_to_halt(vm);
    bib_insn_t loop[2] = {insn("ADDI r2, r2, 1"), insn("JLT r2, r0, x\nx:")};
    loop[1].c = 4;
    extend(vm, loop, 2, 10, 4);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_step(vm, 5, &stop), BIB_OK, "%s", bib_vm_error(vm));
    bib_position_t pos;
    cr_assert_eq(bib_vm_position(vm, &pos), BIB_OK);
    cr_assert_eq(pos.depth, 2);
    cr_assert_eq(bib_vm_step(vm, 1, &stop), BIB_OK);
    cr_assert_eq(bib_vm_position(vm, &pos), BIB_OK);
    cr_assert_eq(pos.pc, 5, "back from the call");
    cr_assert_eq(reg(vm, 9), 77, "the callee's window overlapped main's new registers");
    bib_vm_destroy(vm);
}

Test(extend, registers_a_grown_frame_adds_start_at_zero) {
    /* sq's frame sits above main's 2 registers and leaves its values there
       (r0 = 5, r1 = 25, r6 = 55). Main grown to 9 registers, by an
       extension and by a reload, must see zeros, as a run of the grown
       module from the start would. */
    const char *src = ".func sq args=1 regs=7\n MUL r1, r0, r0\n LDI r6, 55\n RET r1\n.end\n"
                      ".func main regs=2\n LDI r0, 5\n CALL r1, sq, r0, 1\n HALT r1\n.end\n";
    const char *grown = ".func sq args=1 regs=7\n MUL r1, r0, r0\n LDI r6, 55\n RET r1\n.end\n"
                        ".func main regs=9\n LDI r0, 5\n CALL r1, sq, r0, 1\n NOP\n HALT r1\n"
                        ".end\n";
    uint8_t *bytes, *grown_bytes;
    size_t size, grown_size;
    assemble(src, &bytes, &size);
    assemble(grown, &grown_bytes, &grown_size);
    for (int by_reload = 0; by_reload < 2; by_reload++) {
        bib_vm_t *vm = started(bytes, size);
        run_to_halt(vm);
        cr_assert_eq(reg(vm, 1), 25);
        if (by_reload) {
            cr_assert_eq(bib_vm_reload(vm, grown_bytes, grown_size, "t", 2), BIB_OK, "%s",
                         bib_vm_error(vm));
        } else {
            bib_insn_t nop = insn("NOP");
            extend(vm, &nop, 1, 9, 2);
        }
        for (uint32_t r = 2; r < 9; r++)
            cr_expect_eq(reg(vm, r), 0, "%s: r%u holds %lld", by_reload ? "reload" : "extension", r,
                         (long long)reg(vm, r));
        cr_expect_eq(reg(vm, 1), 25, "main's own registers are kept");
        bib_vm_destroy(vm);
    }
    bib_free(bytes);
    bib_free(grown_bytes);
}

Test(extend, a_refused_extension_leaves_the_run_as_it_was) {
    uint8_t *bytes;
    size_t size;
    assemble(base_src, &bytes, &size);
    bib_vm_t *vm = started(bytes, size);
    run_to_halt(vm);
    uint8_t *before = NULL, *after = NULL;
    size_t before_size, after_size;
    cr_assert_eq(bib_module_write(bib_vm_module(vm), &before, &before_size, NULL), BIB_OK);
    /* r7 in a frame of 4 registers; then t1 read after it was freed. */
    bib_insn_t bad_reg[2] = {insn("LDI r0, 1"), insn("ADDI r7, r0, 1")};
    bib_extension_t e = {bad_reg, NULL, 2, NULL, 0, NULL, 0, 4, 8};
    cr_assert_eq(bib_vm_extend(vm, &e, "t", 3), BIB_E_VERIFY);
    cr_assert_str_eq(bib_vm_error(vm), "t: pc 7 (ADDI): operand a names register r7 but function "
                                       "'main' has 4 registers (r0..r3)");
    bib_insn_t freed[2] = {insn("FREE t1"), insn("THASH r3, t1")};
    e = (bib_extension_t){freed, NULL, 2, NULL, 0, NULL, 0, 4, 8};
    cr_assert_eq(bib_vm_extend(vm, &e, "t", 3), BIB_E_VERIFY);
    cr_assert(strstr(bib_vm_error(vm), "pc 7 (THASH): operand b reads t1, which is freed") != NULL,
              "%s", bib_vm_error(vm));
    const char *dup[1] = {"top"};
    e = (bib_extension_t){freed, NULL, 1, dup, 1, NULL, 0, 4, 8};
    cr_assert_eq(bib_vm_extend(vm, &e, "t", 3), BIB_E_VERIFY);
    cr_assert(strstr(bib_vm_error(vm), "label 'top' is given twice") != NULL, "%s",
              bib_vm_error(vm));
    cr_assert_eq(bib_module_write(bib_vm_module(vm), &after, &after_size, NULL), BIB_OK);
    cr_assert(before_size == after_size && memcmp(before, after, before_size) == 0);
    /* The run goes on: a good extension runs from where main stopped. */
    bib_insn_t good[1] = {insn("ADDI r3, r2, 40")};
    const char *here[1] = {"more"};
    e = (bib_extension_t){good, NULL, 1, here, 1, NULL, 0, 4, 8};
    cr_assert_eq(bib_vm_extend(vm, &e, "t", 3), BIB_OK, "%s", bib_vm_error(vm));
    run_to_halt(vm);
    cr_assert_eq(reg(vm, 3), 41);
    const bib_module_t *m = bib_vm_module(vm);
    cr_assert_str_eq(m->labels[m->label_count - 1].name, "more");
    cr_assert_eq(m->labels[m->label_count - 1].pc, 6);
    bib_free(before);
    bib_free(after);
    bib_free(bytes);
    bib_vm_destroy(vm);
}

/* Extends vm as e says and checks the verdict against a reload's; returns
   the status. *ref follows the module as it grows. */
static bib_status_t extend_as_reload(bib_vm_t *vm, const bib_extension_t *e, uint8_t **ref,
                                     size_t *ref_size) {
    uint8_t *grown = NULL;
    size_t grown_size = 0;
    char want[512];
    bib_status_t want_st = reference(*ref, *ref_size, e, &grown, &grown_size, want);
    bib_status_t st = bib_vm_extend(vm, e, "t", 0);
    cr_assert_eq(st, want_st, "extend says %s; a reload: %s", bib_vm_error(vm), want);
    if (st == BIB_OK) {
        bib_free(*ref);
        *ref = grown;
        *ref_size = grown_size;
    } else {
        bib_free(grown);
    }
    return st;
}

Test(extend, liveness_goes_on_from_the_end_of_main) {
    uint8_t *ref;
    size_t ref_size;
    assemble(base_src, &ref, &ref_size);
    bib_vm_t *vm = started(ref, ref_size);
    /* t4 is set at the start, and main has not named it. */
    bib_insn_t read[1] = {insn("THASH r1, t4")};
    bib_extension_t e = {read, NULL, 1, NULL, 0, NULL, 0, 4, 8};
    cr_assert_eq(extend_as_reload(vm, &e, &ref, &ref_size), BIB_OK, "%s", bib_vm_error(vm));
    /* t9 (a new register) may have been allocated by a call: freeing it
       after one is no definite error. */
    bib_insn_t call[1] = {insn("CALL r2, sq, r0, 1")};
    e = (bib_extension_t){call, NULL, 1, NULL, 0, NULL, 0, 4, 8};
    cr_assert_eq(extend_as_reload(vm, &e, &ref, &ref_size), BIB_OK, "%s", bib_vm_error(vm));
    bib_insn_t free9[1] = {{bib_isa_table[bib_isa_find_name("FREE")].code, 9, 0, 0, 0}};
    e = (bib_extension_t){free9, NULL, 1, NULL, 0, NULL, 0, 4, 10};
    const bib_liveness_tail_t *record = bib_vm_module(vm)->liveness_tail;
    cr_assert_not_null(record);
    cr_assert_eq(extend_as_reload(vm, &e, &ref, &ref_size), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(bib_vm_module(vm)->liveness_tail, record, "the record was kept up, not rebuilt");
    /* Without the call, t9 was never allocated. */
    bib_vm_destroy(vm);
    bib_free(ref);
    assemble(base_src, &ref, &ref_size);
    vm = started(ref, ref_size);
    cr_assert_eq(extend_as_reload(vm, &e, &ref, &ref_size), BIB_E_VERIFY);
    cr_assert(strstr(bib_vm_error(vm), "t9 was never allocated") != NULL, "%s", bib_vm_error(vm));
    bib_free(ref);
    bib_vm_destroy(vm);
}

Test(extend, code_ahead_of_a_closing_jump_is_in_its_loop) {
    /* main ends in a JMP back to where the new code goes: the new code runs
       again and again, and liveness must see the loop. */
    const char *src = ".tensor idx t0 i32[2] = 1, 2\n"
                      ".func main regs=8\n"
                      "top:\n"
                      "    JMP top\n"
                      ".end\n";
    uint8_t *ref;
    size_t ref_size;
    assemble(src, &ref, &ref_size);
    bib_vm_t *vm = started(ref, ref_size);
    bib_insn_t log[2] = {{bib_isa_table[bib_isa_find_name("LOG")].code, 1, 0, 0, 0},
                         {bib_isa_table[bib_isa_find_name("FREE")].code, 1, 0, 0, 0}};
    /* LOG t1 then FREE t1: the second time round t1 is written while
       freed, which is no definite error (the first time it is not). */
    bib_extension_t e = {log, NULL, 2, NULL, 0, NULL, 0, 8, 2};
    bib_status_t st = extend_as_reload(vm, &e, &ref, &ref_size);
    if (st == BIB_OK) {
        bib_vm_t *fresh = started(ref, ref_size);
        cr_assert(same_liveness(bib_vm_module(vm), bib_vm_module(fresh), 0));
        same_program(vm, fresh, 0);
        bib_vm_destroy(fresh);
    }
    bib_free(ref);
    bib_vm_destroy(vm);
}
