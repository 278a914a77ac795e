/* vm/decode.c: turns a verified module into the dense form the interpreter runs.
 *
 * Decoding is driven by the operand kinds of isa/opcodes.def, never by opcode
 * names: a jump target becomes a pointer to the decoded instruction, an
 * immediate is sign-extended once, LDI64's halves are joined, a constant is
 * inlined, a callee or host function becomes a pointer. The module has passed
 * the verifier, so every index used here is in range; nothing is checked
 * twice.
 */
#include <string.h>

#include "vm.h"

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
            int op = bib_isa_find_code(in->op);
            const bib_opinfo_t *info = &bib_isa_table[op];
            uint32_t words[4] = {in->a, in->b, in->c, in->d};
            d->op = (uint16_t)op;
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
