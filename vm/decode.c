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
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

/* ---- what a call must zero --------------------------------------------------
 *
 * A callee's registers start at zero (spec/isa.md, CALL), but only a register
 * that the callee may read before it writes it can show it. Zeroing just
 * those, r[nargs..nzero), is what frame_zero_end computes: a backward
 * liveness over the function's blocks gives the registers live at its entry,
 * and nzero is one past the highest of them. An instruction outside the
 * scalar class (tensor, device, collective: their register blocks are read
 * by rules of their own), or a function too large for the work budget, keeps
 * the whole frame zeroed. */

#define ZERO_MAX_WORK (1u << 22) /* bitset words touched per function */

typedef struct zero_scan {
    const bib_module_t *m;
    const bib_function_t *f;
    uint32_t words;     /* 64-bit words per register set */
    uint32_t *block_of; /* per instruction of f: its block, at a leader; else UINT32_MAX */
    uint32_t *starts;   /* first pc of each block */
    uint32_t nblocks;
    uint64_t *use, *def, *in; /* nblocks sets each */
} zero_scan_t;

static void set_bit(uint64_t *set, uint32_t r) {
    set[r / 64] |= (uint64_t)1 << (r % 64);
}
static int has_bit(const uint64_t *set, uint32_t r) {
    return (int)(set[r / 64] >> (r % 64) & 1);
}

/* Adds the registers instruction pc reads that the block has not written
   (def) to use, then what it writes to def. A COUNT after a register reads
   the range r[c..c+d) (arguments, returned values). */
static void zero_step(const zero_scan_t *z, uint32_t pc, uint64_t *use, uint64_t *def) {
    const bib_insn_t *in = &z->m->code[pc];
    const bib_opinfo_t *info = bib_module_info(z->m, pc);
    const uint32_t w[4] = {in->a, in->b, in->c, in->d};
    for (int k = 0; k < 4; k++) {
        if (info->kinds[k] != BIB_K_RS && info->kinds[k] != BIB_K_RM)
            continue;
        uint32_t n =
            k < 3 && info->kinds[k] == BIB_K_RS && info->kinds[k + 1] == BIB_K_COUNT ? w[k + 1] : 1;
        for (uint32_t r = w[k]; r < w[k] + n; r++)
            if (!has_bit(def, r))
                set_bit(use, r);
    }
    for (int k = 0; k < 4; k++)
        if (info->kinds[k] == BIB_K_RD || info->kinds[k] == BIB_K_RM)
            set_bit(def, w[k]);
}

/* The blocks control may go to after block b's last instruction, as f's
   verifier sees them (a JTAB's table: the JMP blocks after it). */
static uint32_t zero_successors(const zero_scan_t *z, uint32_t b, uint32_t *out, uint32_t cap) {
    const bib_function_t *f = z->f;
    const uint32_t last = (b + 1 < z->nblocks ? z->starts[b + 1] : f->entry + f->count) - 1;
    const bib_insn_t *in = &z->m->code[last];
    const bib_opinfo_t *info = bib_module_info(z->m, last);
    const uint32_t w[4] = {in->a, in->b, in->c, in->d};
    uint32_t n = 0;
    for (int k = 0; k < 4 && (info->flags & BIB_F_BRANCH); k++) {
        if (info->kinds[k] == BIB_K_TGT && n < cap)
            out[n++] = z->block_of[w[k] - f->entry];
        if (info->kinds[k] == BIB_K_CASES)
            for (uint32_t i = 1; i <= w[k] && n < cap; i++)
                out[n++] = z->block_of[last + i - f->entry];
    }
    if (!(info->flags & BIB_F_TERM) && last + 1 < f->entry + f->count && n < cap)
        out[n++] = z->block_of[last + 1 - f->entry];
    return n;
}

static uint32_t zero_live_in(zero_scan_t *z) {
    const bib_module_t *m = z->m;
    const bib_function_t *f = z->f;
    /* Leaders: the entry, every jump target, whatever follows a branch. */
    for (uint32_t pc = f->entry; pc < f->entry + f->count; pc++) {
        const bib_insn_t *in = &m->code[pc];
        const bib_opinfo_t *info = bib_module_info(m, pc);
        if (info->opclass != BIB_CLASS_SCALAR)
            return f->nregs;
        const uint32_t w[4] = {in->a, in->b, in->c, in->d};
        for (int k = 0; k < 4; k++)
            if (info->kinds[k] == BIB_K_TGT)
                z->block_of[w[k] - f->entry] = 1;
        if ((info->flags & (BIB_F_BRANCH | BIB_F_TERM)) && pc + 1 < f->entry + f->count)
            z->block_of[pc + 1 - f->entry] = 1;
    }
    z->block_of[0] = 1;
    for (uint32_t i = 0; i < f->count; i++) {
        if (z->block_of[i]) {
            z->starts[z->nblocks] = f->entry + i;
            z->block_of[i] = z->nblocks++;
        } else {
            z->block_of[i] = UINT32_MAX;
        }
    }
    const size_t sets = (size_t)z->nblocks * z->words;
    if (sets > ZERO_MAX_WORK / 4)
        return f->nregs;
    z->use = calloc(3 * sets, sizeof *z->use);
    uint32_t *succ = malloc(((size_t)f->count + 2) * sizeof *succ);
    uint64_t *out = malloc((size_t)z->words * sizeof *out);
    uint32_t end = f->nregs;
    if (z->use == NULL || succ == NULL || out == NULL)
        goto done;
    z->def = z->use + sets;
    z->in = z->def + sets;
    for (uint32_t b = 0; b < z->nblocks; b++) {
        uint32_t stop = b + 1 < z->nblocks ? z->starts[b + 1] : f->entry + f->count;
        for (uint32_t pc = z->starts[b]; pc < stop; pc++)
            zero_step(z, pc, z->use + (size_t)b * z->words, z->def + (size_t)b * z->words);
    }
    /* Round robin, last block first, to the fixed point. */
    uint64_t work = 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t b = z->nblocks; b-- > 0;) {
            uint32_t n = zero_successors(z, b, succ, f->count + 2);
            memset(out, 0, (size_t)z->words * sizeof *out);
            for (uint32_t i = 0; i < n; i++)
                for (uint32_t j = 0; j < z->words; j++)
                    out[j] |= z->in[(size_t)succ[i] * z->words + j];
            uint64_t *in = z->in + (size_t)b * z->words;
            const uint64_t *use = z->use + (size_t)b * z->words;
            const uint64_t *def = z->def + (size_t)b * z->words;
            for (uint32_t j = 0; j < z->words; j++) {
                uint64_t v = use[j] | (out[j] & ~def[j]);
                changed |= v != in[j];
                in[j] = v;
            }
            work += (uint64_t)(n + 2) * z->words;
        }
        if (work > ZERO_MAX_WORK)
            goto done;
    }
    end = f->nargs;
    for (uint32_t r = f->nregs; r-- > f->nargs;)
        if (has_bit(z->in, r)) {
            end = r + 1;
            break;
        }
done:
    free(z->use);
    free(succ);
    free(out);
    return end;
}

/* One past the last register a call of f must zero (see above). */
static uint32_t frame_zero_end(const bib_module_t *m, const bib_function_t *f) {
    if (f->nargs >= f->nregs)
        return f->nregs;
    zero_scan_t z = {.m = m, .f = f, .words = (f->nregs + 63) / 64};
    z.block_of = calloc(f->count, sizeof *z.block_of);
    z.starts = malloc((size_t)f->count * sizeof *z.starts);
    uint32_t end = f->nregs;
    if (z.block_of != NULL && z.starts != NULL)
        end = zero_live_in(&z);
    free(z.block_of);
    free(z.starts);
    return end;
}

/* The superinstruction (BIB_FUSED_ROWS) for first followed by second, or -1. */
static int fused_op(const bib_dinsn_t *first, const bib_dinsn_t *second) {
#define BIB_FUSED_MATCH(name, op1, op2)                                                            \
    if (first->op == BIB_OP_##op1 && second->op == BIB_OP_##op2)                                   \
        return BIB_XOP_##name;
    BIB_FUSED_ROWS(BIB_FUSED_MATCH)
#undef BIB_FUSED_MATCH
    return -1;
}

/* The forwarding superinstruction (BIB_FORWARD_ROWS) for first followed by
   second, when second reads first's result where the row says, or -1. */
static int forward_op(const bib_dinsn_t *first, const bib_dinsn_t *second) {
    if (first->xop != first->op)
        return -1;
#define FWD_READS_L (second->b == first->a)
#define FWD_READS_R (second->c == first->a)
#define FWD_READS_S (second->a == first->a)
#define BIB_FORWARD_MATCH(op1, op2, side)                                                          \
    if (first->op == BIB_OP_##op1 && second->op == BIB_OP_##op2 && FWD_READS_##side)               \
        return BIB_XOP_F_##op1##_##op2##_##side;
    BIB_FORWARD_ROWS(BIB_FORWARD_MATCH)
#undef BIB_FORWARD_MATCH
#undef FWD_READS_L
#undef FWD_READS_R
#undef FWD_READS_S
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
    for (uint32_t i = 0; i + 1 < count; i++) {
        int xop = forward_op(&code[i], &code[i + 1]);
        if (xop >= 0)
            code[i].xop = (uint16_t)xop;
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

/* Decodes the instruction at pc of function fi into code[pc]: every field
   from the module, xop the instruction itself (fuse marks the groups). */
static void decode_one(const bib_module_t *m, uint32_t fi, uint32_t pc, bib_dinsn_t *code,
                       bib_dfunc_t *funcs, bib_host_t *bound) {
    const bib_function_t *f = &m->funcs[fi];
    const bib_insn_t *in = &m->code[pc];
    bib_dinsn_t *d = &code[pc];
    int op = bib_module_op(m, pc);
    const bib_opinfo_t *info = &bib_isa_table[op];
    uint32_t words[4] = {in->a, in->b, in->c, in->d};
    memset(d, 0, sizeof *d);
    d->op = (uint16_t)op;
    d->xop = (uint16_t)op;
    for (int k = 0; k < 4; k++) {
        uint32_t w = words[k];
        switch ((bib_operand_kind_t)info->kinds[k]) {
        case BIB_K_TGT:
            d->x.target = &code[w];
            break;
        case BIB_K_IMM:
        case BIB_K_DIVISOR:
            /* A branch keeps its target in x, its immediate in the word. */
            if (!(info->flags & BIB_F_BRANCH))
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
    /* A call through a register has no FN word to hold where the callee's
       window starts. */
    if ((info->flags & BIB_F_CALL) && info->kinds[1] == BIB_K_RS)
        d->x.imm = f->nregs;
    d->a = words[0];
    d->b = words[1];
    d->c = words[2];
    d->d = words[3];
}

bib_status_t bib_decode(const bib_module_t *m, const bib_host_t *hosts, uint32_t spare,
                        bib_arena_t *arena, bib_program_t *out) {
    memset(out, 0, sizeof *out);
    bib_dinsn_t *code;
    bib_dfunc_t *funcs;
    bib_host_t *bound = NULL;
    if (spare > BIB_MAX_CODE - m->code_count)
        spare = BIB_MAX_CODE - m->code_count;
    const uint32_t cap = m->code_count + spare;
    bib_status_t st =
        bib_arena_zalloc(arena, (size_t)cap * sizeof *code, _Alignof(bib_dinsn_t), (void **)&code);
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
        funcs[fi].nzero = frame_zero_end(m, f);
        for (uint32_t pc = f->entry; pc < f->entry + f->count; pc++)
            decode_one(m, fi, pc, code, funcs, bound);
        fuse(&code[f->entry], f->count);
    }
    out->code = code;
    out->code_count = m->code_count;
    out->code_cap = cap;
    out->funcs = funcs;
    out->func_count = m->func_count;
    out->hosts = bound;
    out->host_count = m->import_count;
    out->entry = &funcs[m->entry_func];
    return BIB_OK;
}

void bib_decode_extension(const bib_module_t *m, uint32_t at, uint32_t count, bib_program_t *p) {
    const uint32_t fi = m->entry_func;
    const bib_function_t *f = &m->funcs[fi];
    /* The instruction before the new ones may now lead a group with the
       first of them: it is decoded again too, and so is the moved last one. */
    const uint32_t from = at > f->entry ? at - 1 : at;
    const uint32_t end = at + count + 1; /* f->entry + f->count */
    for (uint32_t pc = from; pc < end; pc++)
        decode_one(m, fi, pc, p->code, p->funcs, p->hosts);
    fuse(&p->code[from], end - from);
    p->code_count = m->code_count;
    /* Which registers the new code reads before writing them is not
       scanned: a call of the entry function zeroes its whole frame. */
    p->funcs[fi].nzero = p->funcs[fi].nregs;
    if (p->threaded > from)
        p->threaded = from;
}
