/* vm/decode.c: turns a verified module into the dense form the interpreter runs.
 *
 * Decoding is driven by the operand kinds of isa/opcodes.def, never by opcode
 * names: a jump target becomes a pointer to the decoded instruction, an
 * immediate is sign-extended once, LDI64's halves are joined, a constant is
 * inlined, a callee or host function becomes a pointer. The module has passed
 * the verifier, so every index used here is in range; nothing is checked
 * twice. The groups of instructions that the plain loop runs as one
 * superinstruction are marked here too (BIB_FUSED_ROWS, BIB_LATCH_ROWS in
 * vm.h).
 */
#include <string.h>

#include "vm/vm.h"

/* The superinstruction (BIB_FUSED_ROWS) for first followed by second, or -1. */
static int fused_op(const bib_dinsn_t *first, const bib_dinsn_t *second) {
#define BIB_FUSED_MATCH(name, op1, op2)                                                            \
    if (first->op == BIB_OP_##op1 && second->op == BIB_OP_##op2)                                   \
        return BIB_XOP_##name;
    BIB_FUSED_ROWS(BIB_FUSED_MATCH)
#undef BIB_FUSED_MATCH
    return -1;
}

_Static_assert(BIB_XOP_LEU_JNZ - BIB_XOP_EQ_JZ == 11 && BIB_OP_JLEU - BIB_OP_JEQ == 5 &&
                   BIB_XOP_L_JMP_JLEU - BIB_XOP_L_JMP_EQ_JZ == BIB_LATCH_TEST_COUNT - 1,
               "BIB_LATCH_TESTS follows the fused compares, then JEQ .. JLEU");

/* The latch superinstruction for first (a JMP, or an ADD/SUB/ADDI followed
   by jmp) jumping to test, or -1 when test is no test (BIB_LATCH_ROWS). */
static int latch_op(const bib_dinsn_t *first, const bib_dinsn_t *jmp, const bib_dinsn_t *test) {
    int index;
    if (test->xop >= BIB_XOP_EQ_JZ && test->xop <= BIB_XOP_LEU_JNZ)
        index = test->xop - BIB_XOP_EQ_JZ;
    else if (test->op >= BIB_OP_JEQ && test->op <= BIB_OP_JLEU)
        index = BIB_XOP_LEU_JNZ - BIB_XOP_EQ_JZ + 1 + (test->op - BIB_OP_JEQ);
    else
        return -1;
    int lead;
    if (first == jmp)
        lead = BIB_XOP_L_JMP_EQ_JZ;
    else if (first->op == BIB_OP_ADD)
        lead = BIB_XOP_L_ADD_EQ_JZ;
    else if (first->op == BIB_OP_SUB)
        lead = BIB_XOP_L_SUB_EQ_JZ;
    else if (first->op == BIB_OP_ADDI)
        lead = BIB_XOP_L_ADDI_EQ_JZ;
    else
        return -1;
    return lead + index;
}

/* Marks the superinstructions of one function's decoded code (count
   instructions). A compare fuses with a JZ/JNZ only when that branch tests
   the register the compare writes, and a group never reaches past the
   function's end. Pairs first, so that the latches see which tests are
   fused compares. */
static void fuse(bib_dinsn_t *code, uint32_t count) {
    for (uint32_t i = 0; i + 1 < count; i++) {
        bib_dinsn_t *first = &code[i];
        const bib_dinsn_t *second = &code[i + 1];
        int xop = fused_op(first, second);
        if (xop < 0)
            continue;
        if (second->op != BIB_OP_JMP && second->a != first->a)
            continue;
        first->xop = (uint16_t)xop;
        first->x.target = second->x.target;
    }
    for (uint32_t i = 0; i < count; i++) {
        bib_dinsn_t *first = &code[i];
        const bib_dinsn_t *jmp = first;
        if (first->op != BIB_OP_JMP) {
            if (i + 1 == count || code[i + 1].op != BIB_OP_JMP)
                continue;
            jmp = &code[i + 1];
        }
        const bib_dinsn_t *test = jmp->x.target;
        int xop = latch_op(first, jmp, test);
        if (xop < 0)
            continue;
        first->xop = (uint16_t)xop;
        /* A JMP keeps its target (the instrumented loop runs it); an ADD, SUB
           or ADDI points at the instruction after the test, so that the loop
           goes on without a dependent add after the load. */
        if (first != jmp)
            first->x.target = test + (test->xop == test->op ? 1 : 2);
    }
}

bib_status_t bib_decode(const bib_module_t *m, const bib_host_t *hosts, bib_arena_t *arena,
                        bib_program_t *out) {
    memset(out, 0, sizeof *out);
    bib_dinsn_t *code;
    bib_dfunc_t *funcs;
    bib_host_t *bound = NULL;
    bib_status_t st = bib_arena_zalloc(arena, (size_t)m->code_count * sizeof *code,
                                       _Alignof(bib_dinsn_t), (void **)&code);
    if (st == BIB_OK)
        st = bib_arena_zalloc(arena, (size_t)m->func_count * sizeof *funcs, _Alignof(bib_dfunc_t),
                              (void **)&funcs);
    if (st == BIB_OK && m->import_count > 0)
        st = bib_arena_alloc(arena, (size_t)m->import_count * sizeof *bound, _Alignof(bib_host_t),
                             (void **)&bound);
    if (st != BIB_OK)
        return st;
    if (m->import_count > 0)
        memcpy(bound, hosts, (size_t)m->import_count * sizeof *bound);

    for (uint32_t fi = 0; fi < m->func_count; fi++) {
        const bib_function_t *f = &m->funcs[fi];
        funcs[fi].entry = &code[f->entry];
        funcs[fi].nregs = f->nregs;
        funcs[fi].nargs = f->nargs;
        for (uint32_t pc = f->entry; pc < f->entry + f->count; pc++) {
            const bib_insn_t *in = &m->code[pc];
            bib_dinsn_t *d = &code[pc];
            int op = bib_module_op(m, pc);
            const bib_opinfo_t *info = &bib_isa_table[op];
            uint32_t words[4] = {in->a, in->b, in->c, in->d};
            d->op = (uint16_t)op;
            d->xop = (uint16_t)op;
            for (int k = 0; k < 4; k++) {
                uint32_t w = words[k];
                switch ((bib_operand_kind_t)info->kinds[k]) {
                case BIB_K_TGT:
                    d->x.target = &code[w];
                    break;
                case BIB_K_IMM:
                    d->x.imm = (int64_t)(int32_t)w;
                    break;
                case BIB_K_IMMLO:
                    d->x.bits |= w;
                    break;
                case BIB_K_IMMHI:
                    d->x.bits |= (uint64_t)w << 32;
                    break;
                case BIB_K_CONST:
                    d->x.bits = m->consts[w].bits;
                    break;
                case BIB_K_FN:
                    d->x.func = &funcs[w];
                    words[k] = f->nregs;
                    break;
                case BIB_K_HOST:
                    d->x.host = &bound[w];
                    break;
                default:
                    break;
                }
            }
            d->a = words[0];
            d->b = words[1];
            d->c = words[2];
            d->d = words[3];
        }
        fuse(&code[f->entry], f->count);
    }
    out->code = code;
    out->code_count = m->code_count;
    out->funcs = funcs;
    out->func_count = m->func_count;
    out->hosts = bound;
    out->host_count = m->import_count;
    out->entry = &funcs[m->entry_func];
    return BIB_OK;
}
