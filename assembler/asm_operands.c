/* assembler/asm_operands.c: pass 2, the instructions.
 *
 * Checks each instruction's operands against the kinds in isa/opcodes.def
 * (registers, immediates, constants, labels, functions, imports, tensors,
 * shaders and kernels) and emits it through the builder, with its .line.
 *
 * It declares nothing but the inline '=' constants: every other name it
 * resolves was declared by pass 1 (asm_directives.c, asm_devcode.c), into the
 * builder or the symbol table.
 */
#include "assembler/asm_internal.h"

#include <limits.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- pass 2: instructions ----------------------------------------------- */

/* Parses one operand of the given kind into word(s). Returns 0 after a
   diagnostic. prev_rs is the register of the operand before (for COUNT). */
static int parse_operand(pass2_t *p, uint32_t si, const bib_opinfo_t *info, uint32_t kind,
                         span_t op, uint32_t prev_rs, uint32_t *word, uint32_t *word_hi) {
    asm_state_t *a = p->a;
    asm_func_t *f = &a->funcs[p->func];
    uint32_t reg;
    switch ((bib_operand_kind_t)kind) {
    case BIB_K_RD:
    case BIB_K_RS:
    case BIB_K_RM:
        if (!bib_asm_parse_reg(op, 'r', &reg)) {
            bib_asm_diag_span(a, si, op, "expected a register (r0, r1, ...), found '%s'", NULL);
            return 0;
        }
        if (reg >= BIB_MAX_REGS) {
            char msg[96];
            snprintf(msg, sizeof msg, "%%s is above r%u (a function has at most %u registers)",
                     BIB_MAX_REGS - 1, BIB_MAX_REGS);
            bib_asm_diag_span(a, si, op, msg, NULL);
            return 0;
        }
        if (reg >= f->nregs) {
            bib_asm_diag_at(a, si, op.col, op.len,
                            "register r%u is out of range: function '%s' has regs=%u (r0..r%u)",
                            reg, bib_builder_function_name(a->b, p->func), f->nregs, f->nregs - 1);
            return 0;
        }
        *word = reg;
        return 1;
    case BIB_K_TD:
    case BIB_K_TS:
    case BIB_K_TM: {
        if (bib_asm_parse_reg(op, 't', &reg)) {
            if (reg >= BIB_MAX_TENSOR_REGS) {
                bib_asm_diag_at(a, si, op.col, op.len,
                                "tensor register %.*s is out of range (t0..t%u)", (int)op.len, op.p,
                                BIB_MAX_TENSOR_REGS - 1);
                return 0;
            }
            *word = reg;
            return 1;
        }
        if (bib_asm_name_length(op.p, op.p + op.len) != op.len) {
            bib_asm_diag_span(a, si, op,
                              "expected a tensor register (t0, t1, ...) or name, found '%s'", NULL);
            return 0;
        }
        char *name = bib_asm_parse_name(a, si, op, "tensor");
        if (name == NULL)
            return 0;
        const bib_tensor_decl_t *decl =
            bib_builder_tensor_decl(a->b, bib_builder_find(a->b, BIB_BUILDER_TENSOR, name));
        free(name);
        if (decl == NULL) {
            bib_asm_diag_span(
                a, si, op,
                "unknown tensor '%s' (declare it with .input, .output or .tensor, or name "
                "a register t0, t1, ...)",
                NULL);
            return 0;
        }
        *word = decl->reg;
        return 1;
    }
    case BIB_K_SCALE:
    case BIB_K_CASES: {
        const int scale = kind == BIB_K_SCALE;
        uint64_t n;
        if (!bib_asm_parse_count(a, si, op, scale ? 0 : 1, scale ? 3 : BIB_MAX_CASES, &n,
                                 scale ? "a scale" : "a jump table size"))
            return 0;
        *word = (uint32_t)n;
        return 1;
    }
    case BIB_K_IMM:
    case BIB_K_DIVISOR: {
        asm_int_t v;
        if (!bib_asm_parse_int_expr(a, si, op, &v, 0))
            return 0;
        if (kind == BIB_K_DIVISOR && bib_asm_int_bits(v) == 0) {
            bib_asm_diag_span(a, si, op, "the divisor '%s' is zero", NULL);
            return 0;
        }
        if (!bib_asm_int_fits(v, INT32_MIN, INT32_MAX)) {
            char text[32];
            bib_asm_int_text(v, text, sizeof text);
            bib_asm_diag_at(a, si, op.col, op.len,
                            "value %s does not fit a signed 32-bit immediate%s", text,
                            info->code == BIB_CODE_LDI ? "; use LDI64" : "");
            return 0;
        }
        *word = (uint32_t)bib_asm_int_bits(v);
        return 1;
    }
    case BIB_K_IMMLO: {
        asm_int_t v;
        uint64_t bits;
        asm_equ_t q;
        int equ = bib_asm_equ_value(a, si, op, &q);
        if (equ < 0)
            return 0;
        if (equ > 0) {
            bits = q.is_float ? q.f64_bits : bib_asm_int_bits(q.value);
        } else if (bib_asm_parse_int_expr(a, si, op, &v, 1)) {
            if (!bib_asm_int_fits(v, INT64_MIN, UINT64_MAX)) {
                bib_asm_diag_span(a, si, op, "value %s does not fit 64 bits", NULL);
                return 0;
            }
            bits = bib_asm_int_bits(v);
        } else if (bib_asm_looks_float(op) && bib_asm_parse_float(op, 64, &bits) == PARSE_OK) {
            /* the f64 bit pattern */
        } else {
            if (bib_asm_looks_float(op))
                bib_asm_diag_span(a, si, op, "malformed float '%s'", NULL);
            return 0;
        }
        *word = (uint32_t)bits;
        *word_hi = (uint32_t)(bits >> 32);
        return 1;
    }
    case BIB_K_COUNT: {
        uint64_t n;
        if (!bib_asm_parse_unsigned(a, si, op, UINT32_MAX, &n, "a count"))
            return 0;
        if (prev_rs != ASM_NONE && prev_rs + n > f->nregs) {
            bib_asm_diag_at(a, si, op.col, op.len,
                            "registers r%u..r%llu are out of range: function '%s' has regs=%u",
                            prev_rs, (unsigned long long)(prev_rs + n - 1),
                            bib_builder_function_name(a->b, p->func), f->nregs);
            return 0;
        }
        if (p->callee != ASM_NONE && n != a->funcs[p->callee].nargs) {
            bib_asm_diag_at(a, si, op.col, op.len,
                            "function '%s' takes %u argument%s, this call passes %llu",
                            bib_builder_function_name(a->b, p->callee), a->funcs[p->callee].nargs,
                            a->funcs[p->callee].nargs == 1 ? "" : "s", (unsigned long long)n);
            return 0;
        }
        if (p->shader != NULL || p->kernel != NULL) {
            int shader = p->shader != NULL;
            uint32_t want = shader ? p->shader->bindings : (uint32_t)strlen(p->kernel->params);
            uint32_t extra = shader ? p->shader->push_bytes / 4 : 0;
            if (n != want) {
                bib_asm_diag_at(a, si, op.col, op.len, "%s '%s' takes %u %s, this passes %llu",
                                shader ? "shader" : "kernel",
                                shader ? p->shader->name : p->kernel->name, want,
                                shader ? "bindings" : "arguments", (unsigned long long)n);
                return 0;
            }
            if (prev_rs != ASM_NONE && prev_rs + n + extra > f->nregs) {
                bib_asm_diag_at(
                    a, si, op.col, op.len,
                    "registers r%u..r%llu (%llu arguments and %u pushed words) are out of "
                    "range: function '%s' has regs=%u",
                    prev_rs, (unsigned long long)(prev_rs + n + extra - 1), (unsigned long long)n,
                    extra, bib_builder_function_name(a->b, p->func), f->nregs);
                return 0;
            }
        }
        if (p->host_call && n > BIB_MAX_HOST_ARGS) {
            bib_asm_diag_at(a, si, op.col, op.len,
                            "a host call passes at most %u arguments, found %llu",
                            BIB_MAX_HOST_ARGS, (unsigned long long)n);
            return 0;
        }
        *word = (uint32_t)n;
        return 1;
    }
    case BIB_K_DTYPE:
        if (!bib_asm_parse_dtype(op, word)) {
            bib_asm_diag_span(a, si, op, "expected an element type (f32 or i32), found '%s'", NULL);
            return 0;
        }
        return 1;
    case BIB_K_CONST: {
        if (op.len > 1 && op.p[0] == '=') {
            span_t lit = {op.p + 1, op.len - 1, op.col + 1};
            while (lit.len > 0 && bib_asm_is_space((unsigned char)lit.p[0])) {
                lit.p++;
                lit.len--;
                lit.col++;
            }
            asm_equ_t q;
            int equ = bib_asm_equ_value(a, si, lit, &q);
            if (equ < 0)
                return 0;
            /* An .equ keeps its own type: a float one is an f64 entry. */
            uint32_t type =
                (equ > 0 ? q.is_float : bib_asm_looks_float(lit)) ? BIB_CONST_F64 : BIB_CONST_I64;
            uint64_t bits;
            if (!bib_asm_parse_const_value(a, si, lit, type, &bits))
                return 0;
            /* The first entry with these bits, else a new one after all the
               '.const' lines (pass 1 put them in the pool). */
            uint32_t index = bib_builder_const_find(a->b, type, bits);
            if (index == ASM_NONE &&
                (index = bib_builder_const_bits(a->b, type, bits)) == ASM_NONE) {
                bib_asm_out_of_memory(a);
                return 0;
            }
            *word = index;
            return 1;
        }
        char *name = bib_asm_parse_name(a, si, op, "constant");
        if (name == NULL)
            return 0;
        sym_t *sym = bib_asm_sym_find(&a->syms, name, SYM_CONST, 0);
        free(name);
        if (sym == NULL) {
            bib_asm_diag_span(a, si, op,
                              "unknown constant '%s' (declare it with '.const' or write =VALUE)",
                              NULL);
            return 0;
        }
        *word = (uint32_t)sym->value;
        return 1;
    }
    case BIB_K_TGT: {
        char *name = bib_asm_parse_name(a, si, op, "label");
        if (name == NULL)
            return 0;
        sym_t *sym = bib_asm_sym_find(&a->syms, name, SYM_CODE, p->func + 1);
        free(name);
        if (sym == NULL) {
            bib_asm_diag_span(a, si, op, "unknown label '%s'", NULL);
            return 0;
        }
        if (sym->value >= f->insn_count) {
            bib_asm_diag_span(a, si, op,
                              "label '%s' marks no instruction (it is at the end of the function)",
                              NULL);
            return 0;
        }
        *word = sym->label_id;
        return 1;
    }
    case BIB_K_FN: {
        char *name = bib_asm_parse_name(a, si, op, "function");
        if (name == NULL)
            return 0;
        p->callee = bib_builder_find(a->b, BIB_BUILDER_FUNCTION, name);
        free(name);
        if (p->callee == ASM_NONE) {
            bib_asm_diag_span(a, si, op, "unknown function '%s'", NULL);
            return 0;
        }
        *word = p->callee;
        return 1;
    }
    case BIB_K_HOST: {
        char *name = bib_asm_parse_name(a, si, op, "host function");
        if (name == NULL)
            return 0;
        uint32_t import = bib_builder_find(a->b, BIB_BUILDER_IMPORT, name);
        free(name);
        if (import == ASM_NONE) /* pass 1 imports every well-formed name */
            return 0;
        p->host_call = 1;
        *word = import;
        return 1;
    }
    case BIB_K_SHADER:
    case BIB_K_KERNEL: {
        int shader = kind == BIB_K_SHADER;
        char *name = bib_asm_parse_name(a, si, op, shader ? "shader" : "kernel");
        if (name == NULL)
            return 0;
        uint32_t index =
            bib_builder_find(a->b, shader ? BIB_BUILDER_SHADER : BIB_BUILDER_KERNEL, name);
        int broken = index == ASM_NONE &&
                     bib_asm_sym_find(&a->syms, name,
                                      shader ? SYM_BROKEN_SHADER : SYM_BROKEN_KERNEL, 0) != NULL;
        free(name);
        if (broken)
            return 0;
        if (index == ASM_NONE) {
            bib_asm_diag_span(a, si, op,
                              shader ? "unknown shader '%s' (declare it with '.shader')"
                                     : "unknown kernel '%s' (declare it with '.kernel')",
                              NULL);
            return 0;
        }
        if (shader)
            p->shader = bib_builder_shader_decl(a->b, index);
        else
            p->kernel = bib_builder_kernel_decl(a->b, index);
        *word = index;
        return 1;
    }
    case BIB_K_NONE:
    case BIB_K_IMMHI:
    case BIB_K__N:
        break;
    }
    return 0;
}

static void describe_operands(const bib_opinfo_t *info, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0; k < 4; k++) {
        uint32_t kind = info->kinds[k];
        if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
            continue;
        const char *name =
            kind == BIB_K_IMMLO ? "imm64" : bib_isa_kind_name((bib_operand_kind_t)kind);
        int n = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", name);
        if (n < 0 || (size_t)n >= cap - used)
            return;
        used += (size_t)n;
    }
}

static void pass2_instruction(pass2_t *p, uint32_t si) {
    asm_state_t *a = p->a;
    stmt_t *s = &a->stmts[si];
    int index = bib_asm_find_mnemonic(bib_asm_word(s));
    if (index < 0) {
        bib_asm_diag_span(a, si, bib_asm_word(s), "unknown mnemonic '%s'", NULL);
        return;
    }
    const bib_opinfo_t *info = &bib_isa_table[index];
    uint32_t expected = 0;
    for (int k = 0; k < 4; k++)
        if (info->kinds[k] != BIB_K_NONE && info->kinds[k] != BIB_K_IMMHI)
            expected++;
    if (s->op_count != expected) {
        char kinds[96];
        describe_operands(info, kinds, sizeof kinds);
        bib_asm_diag_at(a, si, s->word.col, s->word.len, "'%s' takes %u operand%s%s%s%s, found %u",
                        info->name, expected, expected == 1 ? "" : "s", expected ? " (" : "", kinds,
                        expected ? ")" : "", s->op_count);
        return;
    }
    uint32_t words[4] = {0, 0, 0, 0};
    uint32_t text = 0, prev_rs = ASM_NONE;
    p->callee = ASM_NONE;
    p->host_call = 0;
    p->shader = NULL;
    p->kernel = NULL;
    for (int k = 0; k < 4; k++) {
        uint32_t kind = info->kinds[k];
        if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
            continue;
        span_t op = bib_asm_operand(a, s, text++);
        uint32_t hi = 0;
        if (!parse_operand(p, si, info, kind, op, kind == BIB_K_COUNT ? prev_rs : ASM_NONE,
                           &words[k], &hi))
            return;
        if (kind == BIB_K_IMMLO && k < 3)
            words[k + 1] = hi;
        /* The launch size registers follow a device program operand. */
        uint32_t geometry = p->shader != NULL ? 3 : p->kernel != NULL ? 6 : 0;
        if (kind == BIB_K_RS && k > 0 && geometry > 0 &&
            (info->kinds[k - 1] == BIB_K_SHADER || info->kinds[k - 1] == BIB_K_KERNEL) &&
            words[k] + geometry > a->funcs[p->func].nregs) {
            bib_asm_diag_at(
                a, si, op.col, op.len,
                "registers r%u..r%u (the launch size) are out of range: function '%s' has "
                "regs=%u",
                words[k], words[k] + geometry - 1, bib_builder_function_name(a->b, p->func),
                a->funcs[p->func].nregs);
            return;
        }
        prev_rs = kind == BIB_K_RS ? words[k] : ASM_NONE;
    }
    if (info->flags & BIB_F_RESERVED) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
                        "'%s' is reserved: not implemented in this build", info->name);
        return;
    }
    bib_builder_line(a->b, p->line_set ? p->line : s->line);
    bib_builder_emit(a->b, info->code, words[0], words[1], words[2], words[3]);
    if (p->line_set)
        p->line = bib_asm_line_after(p->line);
    if (!bib_asm_grow_array((void **)&a->pc_stmt, &a->pc_cap, a->pc_count + 1, sizeof *a->pc_stmt))
        bib_asm_out_of_memory(a);
    else
        a->pc_stmt[a->pc_count++] = si;
}

static void terminator_list(char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        if ((bib_isa_table[i].flags & (BIB_F_TERM | BIB_F_RESERVED)) != BIB_F_TERM)
            continue;
        int n = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", bib_isa_table[i].name);
        if (n < 0 || (size_t)n >= cap - used)
            return;
        used += (size_t)n;
    }
}

void bib_asm_pass2(pass2_t *p) {
    asm_state_t *a = p->a;
    p->func = ASM_NONE;
    for (uint32_t si = 0; si < a->stmt_count && !a->stopped && !a->oom; si++) {
        stmt_t *s = &a->stmts[si];
        if (s->bad)
            continue;
        span_t w = bib_asm_word(s);
        if (bib_asm_word_is(w, ".func")) {
            p->func = s->func;
            if (p->func == ASM_NONE)
                continue;
            asm_func_t *f = &a->funcs[p->func];
            bib_builder_begin(a->b, p->func, f->nargs, f->nregs);
            continue;
        }
        if (s->func != ASM_NONE && s->func == p->func) {
            for (uint32_t i = 0; i < s->label_count; i++) {
                span_t l = bib_asm_label(a, s, i);
                char *name = bib_asm_parse_name(a, si, l, "label");
                sym_t *sym = name ? bib_asm_sym_find(&a->syms, name, SYM_CODE, p->func + 1) : NULL;
                if (sym != NULL && sym->stmt == si) {
                    bib_builder_bind(a->b, sym->label_id);
                    bib_builder_label_name(a->b, name);
                }
                free(name);
            }
        }
        if (w.len == 0)
            continue;
        if (w.p[0] != '.') {
            if (p->func != ASM_NONE)
                pass2_instruction(p, si);
        } else if (bib_asm_word_is(w, ".end")) {
            if (p->func == ASM_NONE)
                continue;
            asm_func_t *f = &a->funcs[p->func];
            const char *name = bib_builder_function_name(a->b, p->func);
            if (f->insn_count == 0) {
                bib_asm_diag_at(a, si, w.col, w.len, "function '%s' has no instructions", name);
            } else if (!(bib_isa_table[f->last_op].flags & BIB_F_TERM)) {
                char terms[96];
                terminator_list(terms, sizeof terms);
                bib_asm_diag_at(
                    a, si, w.col, w.len,
                    "function '%s' falls off its end: its last instruction (%s) must be one "
                    "of %s",
                    name, bib_isa_table[f->last_op].name, terms);
            }
            bib_builder_end(a->b);
            p->func = ASM_NONE;
        } else if (bib_asm_word_is(w, ".line")) {
            uint64_t n;
            if (bib_asm_expect_operands(a, si, 1, 1) &&
                bib_asm_parse_unsigned(a, si, bib_asm_operand(a, s, 0), UINT32_MAX, &n,
                                       "a line number")) {
                p->line = (uint32_t)n;
                p->line_set = 1;
            }
        }
    }
}
