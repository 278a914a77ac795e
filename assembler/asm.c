/* assembler/asm.c: the assembler, .basm text to .bib bytes (bib_assemble).
 *
 * The language is specified in spec/assembly.md. The .equ names are defined
 * first, in file order. Then two passes over the parsed lines, both driving
 * one builder (builder.c): the first declares every definition into it as it
 * meets it (functions, imports, constants, tensors, device code, code labels,
 * data bytes), so that anything but an .equ may be named before it is
 * defined; the second checks every instruction's operands against the kinds
 * in isa/opcodes.def, finding what they name in the builder or in the symbol
 * table, and emits the code. The builder lays the module out, verifies it and
 * writes the bytes. Errors are collected, not fatal: each is
 * "file:line:col: error: message", the source line and a caret.
 *
 * This file is the driver only: the public entry points, the order of the
 * passes, the module-wide checks and settings (entry, memory size, tensor
 * registers), finish with its verdict placed at a line, and the clean-up.
 * The passes live beside it (asm_internal.h lists who owns what): asm_lex.c
 * (lines, literals, symbols, diagnostics), asm_equ.c (.equ, defined before
 * pass 1), asm_directives.c (pass 1, then the '.bss' placement),
 * asm_devcode.c (.shader, .kernel), asm_operands.c (pass 2), and asm_text.c
 * (the text helpers the disassembler shares).
 */
#include "assembler/asm_internal.h"

#include <limits.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- driver ----------------------------------------------------------- */

static void check_module(asm_state_t *a) {
    for (uint32_t i = 0; i < a->func_count; i++) {
        asm_func_t *f = &a->funcs[i];
        if (!f->regs_given) {
            f->nregs = f->regs_used > f->nargs ? f->regs_used : f->nargs;
            if (f->nregs == 0)
                f->nregs = 1;
        }
    }
    if (a->tensors_stmt != ASM_NONE && a->tensors_given < a->tregs_used) {
        const stmt_t *s = &a->stmts[a->tensors_stmt];
        bib_asm_diag_at(
            a, a->tensors_stmt, s->word.col, s->word.len,
            "'.tensors %u' is smaller than the %u tensor registers used (t%u is named on line "
            "%u)",
            a->tensors_given, a->tregs_used, a->tregs_used - 1, a->stmts[a->tregs_stmt].line);
    }
    if (a->func_count == 0 && a->errors == 0)
        bib_asm_diag_at(a, ASM_NONE, 0, 0, "no functions: write one with '.func main' ... '.end'");
    uint64_t data_size = bib_builder_data_size(a->b);
    if (a->memory_stmt != ASM_NONE && a->memory_size < data_size) {
        const stmt_t *s = &a->stmts[a->memory_stmt];
        bib_asm_diag_at(a, a->memory_stmt, s->word.col, s->word.len,
                        "memory size %llu is smaller than the %llu bytes of data",
                        (unsigned long long)a->memory_size, (unsigned long long)data_size);
    } else if (a->memory_stmt != ASM_NONE && a->memory_size < a->bss_end) {
        const stmt_t *s = &a->stmts[a->memory_stmt];
        bib_asm_diag_at(a, a->memory_stmt, s->word.col, s->word.len,
                        "memory size %llu is smaller than the %llu bytes of data and '.bss' "
                        "reservations",
                        (unsigned long long)a->memory_size, (unsigned long long)a->bss_end);
    }
}

static uint32_t entry_function(asm_state_t *a) {
    if (a->entry_stmt != ASM_NONE) {
        span_t op = bib_asm_operand(a, &a->stmts[a->entry_stmt], 0);
        char *name = bib_asm_parse_name(a, a->entry_stmt, op, "function");
        if (name == NULL)
            return ASM_NONE;
        uint32_t func = bib_builder_find(a->b, BIB_BUILDER_FUNCTION, name);
        free(name);
        if (func == ASM_NONE)
            bib_asm_diag_span(a, a->entry_stmt, op, "unknown function '%s'", NULL);
        return func;
    }
    uint32_t named_main = bib_builder_find(a->b, BIB_BUILDER_FUNCTION, "main");
    return named_main != ASM_NONE ? named_main : 0;
}

static void asm_free(asm_state_t *a) {
    for (uint32_t i = 0; i < a->errors; i++)
        free(a->diags[i].text);
    free(a->diags);
    free(a->stmts);
    free(a->spans);
    bib_asm_symtab_free(&a->syms);
    free(a->funcs);
    free(a->tensor_stmts);
    free(a->fixups);
    free(a->bss);
    free(a->equs);
    free(a->pc_stmt);
    bib_builder_destroy(a->b);
}

/* What a directive decides for the whole module, handed over once every line
   is read: the entry, the tensor register count and the memory size. */
static void settle_module(asm_state_t *a, uint32_t entry) {
    if (entry != ASM_NONE)
        bib_builder_entry(a->b, entry);
    if (a->tensors_stmt != ASM_NONE)
        bib_builder_tensor_regs(a->b, a->tensors_given);
    /* '.bss' costs no bytes: it only makes linear memory larger than the
       data, and the VM zeroes what lies beyond the data. */
    uint64_t data_size = bib_builder_data_size(a->b);
    bib_builder_memory(a->b, a->memory_stmt != ASM_NONE ? a->memory_size
                             : a->bss_end > data_size   ? a->bss_end
                                                        : data_size);
}

static bib_status_t assemble(asm_state_t *a, const char *source, size_t length, int strip,
                             uint8_t **out, size_t *size) {
    if ((a->b = bib_builder_create()) == NULL) {
        bib_asm_out_of_memory(a);
        return BIB_E_ASM;
    }
    /* The file's own name, unless a '.source' line names another. */
    bib_builder_source(a->b, a->default_source);
    bib_asm_builder_failed(a);
    if (strip)
        bib_builder_strip(a->b);
    bib_asm_split_lines(a, source, length);
    if (!a->stopped && !a->oom)
        bib_asm_pass_equ(a);
    if (!a->stopped && !a->oom)
        bib_asm_pass1(a);
    if (!a->stopped && !a->oom)
        bib_asm_place_bss(a);
    if (!a->stopped && !a->oom)
        bib_asm_resolve_fixups(a);
    if (!a->stopped && !a->oom)
        check_module(a);
    uint32_t entry = entry_function(a);
    if (entry != ASM_NONE && entry < a->func_count && a->funcs[entry].nargs != 0)
        bib_asm_diag_at(a, a->funcs[entry].stmt, a->stmts[a->funcs[entry].stmt].word.col, 5,
                        "entry function '%s' takes %u arguments; the entry must take none",
                        bib_builder_function_name(a->b, entry), a->funcs[entry].nargs);
    if (a->stopped || a->oom)
        return BIB_E_ASM;
    pass2_t p = {a, ASM_NONE, 0, 0, ASM_NONE, 0, NULL, NULL};
    bib_asm_pass2(&p);
    if (a->errors > 0 || a->oom)
        return BIB_E_ASM;
    /* The operands are all read: their spans go before the builder makes
       its copies of the code, when the memory a large program takes peaks.
       The statements stay, for a verifier verdict to point at its line. */
    free(a->spans);
    a->spans = NULL;
    a->span_count = a->span_cap = 0;
    settle_module(a, entry);
    bib_status_t st = bib_builder_finish(a->b, out, size);
    unsigned pc;
    if (st != BIB_OK && sscanf(bib_builder_error(a->b), "pc %u ", &pc) == 1 && pc < a->pc_count) {
        /* A verifier verdict (tensor liveness, mostly): point at the line. */
        const stmt_t *s = &a->stmts[a->pc_stmt[pc]];
        bib_asm_diag_at(a, a->pc_stmt[pc], s->word.col, s->word.len, "%s", bib_builder_error(a->b));
    } else if (st != BIB_OK) {
        bib_asm_diag_at(a, ASM_NONE, 0, 0, "%s", bib_builder_error(a->b));
    }
    return st == BIB_OK ? BIB_OK : BIB_E_ASM;
}

static bib_status_t assemble_text(const char *source, size_t length, const char *filename,
                                  int deny_device_code, int strip, uint64_t max_size, uint8_t **out,
                                  size_t *size, char **diagnostics) {
    if (out != NULL)
        *out = NULL;
    if (size != NULL)
        *size = 0;
    if (diagnostics != NULL)
        *diagnostics = NULL;
    if ((source == NULL && length > 0) || out == NULL || size == NULL)
        return BIB_E_USAGE;
    asm_state_t a;
    memset(&a, 0, sizeof a);
    a.file = filename != NULL ? filename : "<input>";
    a.default_source = filename;
    a.memory_stmt = ASM_NONE;
    a.entry_stmt = ASM_NONE;
    a.tensors_stmt = ASM_NONE;
    a.deny_device_code = deny_device_code;
    a.max_size = max_size ? max_size : BIB_FILE_SIZE_CAP_DEFAULT;

    /* Literals must read the same under any locale the embedder set. */
    locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
    bib_status_t st = assemble(&a, source ? source : "", length, strip, out, size);
    if (c_locale) {
        uselocale(previous);
        freelocale(c_locale);
    }
    if (st != BIB_OK && (a.too_large || a.oom))
        st = BIB_E_NOMEM;
    if (st != BIB_OK && diagnostics != NULL)
        *diagnostics = bib_asm_diags_text(&a);
    asm_free(&a);
    return st;
}

bib_status_t bib_assemble(const char *source, size_t length, const char *filename, uint8_t **out,
                          size_t *size, char **diagnostics) {
    return assemble_text(source, length, filename, 0, 0, 0, out, size, diagnostics);
}

bib_status_t bib_assemble_capped(const char *source, size_t length, const char *filename,
                                 uint64_t max_size, uint8_t **out, size_t *size,
                                 char **diagnostics) {
    return assemble_text(source, length, filename, 0, 0, max_size, out, size, diagnostics);
}

bib_status_t bib_assemble_stripped(const char *source, size_t length, const char *filename,
                                   uint64_t max_size, uint8_t **out, size_t *size,
                                   char **diagnostics) {
    return assemble_text(source, length, filename, 0, 1, max_size, out, size, diagnostics);
}

bib_status_t bib_assemble_without_device_code(const char *source, size_t length,
                                              const char *filename, uint64_t max_size,
                                              uint8_t **out, size_t *size, char **diagnostics) {
    return assemble_text(source, length, filename, 1, 0, max_size, out, size, diagnostics);
}
