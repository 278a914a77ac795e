/* assembler/asm.c: the assembler, .basm text to .bib bytes (bib_assemble).
 *
 * The language is specified in spec/assembly.md. The .equ names are defined
 * first, in file order. Then two passes over the parsed lines: the first
 * collects every definition (functions, code and data labels, constants,
 * imports, data bytes) so that anything but an .equ may be named before it is
 * defined; the second checks every instruction's operands against the kinds in
 * isa/opcodes.def and emits through the builder (builder.c), which lays the
 * module out, verifies it and writes the bytes. Errors are collected, not
 * fatal: each is "file:line:col: error: message", the source line and a caret.
 *
 * This file is the driver only: the public entry points, the order of the
 * passes, the module-wide checks, the builder calls and the clean-up. The
 * passes live beside it (asm_internal.h lists who owns what): asm_lex.c
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
    if (a->memory_stmt != ASM_NONE && a->memory_size < a->data_size) {
        const stmt_t *s = &a->stmts[a->memory_stmt];
        bib_asm_diag_at(a, a->memory_stmt, s->word.col, s->word.len,
                        "memory size %llu is smaller than the %llu bytes of data",
                        (unsigned long long)a->memory_size, (unsigned long long)a->data_size);
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
        span_t op = a->spans[a->stmts[a->entry_stmt].op_first];
        char *name = bib_asm_parse_name(a, a->entry_stmt, op, "function");
        if (name == NULL)
            return ASM_NONE;
        sym_t *sym = bib_asm_sym_find(&a->syms, name, SYM_FUNC, 0);
        free(name);
        if (sym == NULL) {
            bib_asm_diag_span(a, a->entry_stmt, op, "unknown function '%s'", NULL);
            return ASM_NONE;
        }
        return (uint32_t)sym->value;
    }
    for (uint32_t i = 0; i < a->func_count; i++)
        if (strcmp(a->funcs[i].name, "main") == 0)
            return i;
    return 0;
}

static void asm_free(asm_state_t *a) {
    for (uint32_t i = 0; i < a->errors; i++)
        free(a->diags[i].text);
    free(a->diags);
    free(a->stmts);
    free(a->spans);
    bib_asm_symtab_free(&a->syms);
    for (uint32_t i = 0; i < a->func_count; i++)
        free(a->funcs[i].name);
    free(a->funcs);
    for (uint32_t i = 0; i < a->import_count; i++)
        free(a->imports[i]);
    free(a->imports);
    free(a->consts);
    free(a->data);
    free(a->fixups);
    free(a->bss);
    free(a->equs);
    free(a->source_name);
    for (uint32_t i = 0; i < a->tensor_count; i++) {
        free(a->tensors[i].name);
        free(a->tensors[i].values);
    }
    free(a->tensors);
    for (uint32_t i = 0; i < a->dim_count; i++)
        free(a->dim_names[i]);
    free(a->dim_names);
    for (uint32_t i = 0; i < a->shader_count + a->kernel_count; i++) {
        asm_devcode_t *d = i < a->shader_count ? &a->shaders[i] : &a->kernels[i - a->shader_count];
        free(d->name);
        free(d->entry);
        free(d->params);
        free(d->words);
        free(d->ptx);
    }
    free(a->shaders);
    free(a->kernels);
    free(a->pc_stmt);
}

static bib_status_t assemble(asm_state_t *a, const char *source, size_t length, uint8_t **out,
                             size_t *size) {
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
                        a->funcs[entry].name, a->funcs[entry].nargs);
    if (a->stopped || a->oom)
        return BIB_E_ASM;

    bib_builder_t *b = bib_builder_create();
    if (b == NULL) {
        bib_asm_out_of_memory(a);
        return BIB_E_ASM;
    }
    for (uint32_t i = 0; i < a->func_count; i++)
        bib_builder_declare(b, a->funcs[i].name);
    for (uint32_t i = 0; i < a->import_count; i++)
        bib_builder_import(b, a->imports[i]);
    for (uint32_t i = 0; i < a->const_count; i++)
        bib_asm_builder_const(b, a->consts[i]);
    for (uint32_t i = 0; i < a->dim_count; i++)
        bib_builder_tensor_dim(b, a->dim_names[i]);
    for (uint32_t i = 0; i < a->tensor_count; i++) {
        const asm_tensor_t *t = &a->tensors[i];
        if (t->flags == BIB_TENSOR_INPUT)
            bib_builder_tensor_input(b, t->name, t->reg, (bib_dtype_t)t->dtype, t->rank, t->dims);
        else if (t->flags == BIB_TENSOR_OUTPUT)
            bib_builder_tensor_output(b, t->name, t->reg, (bib_dtype_t)t->dtype, t->rank, t->dims);
        else
            bib_builder_tensor_const(b, t->name, t->reg, (bib_dtype_t)t->dtype, t->rank, t->dims,
                                     t->values);
    }
    if (a->tensors_stmt != ASM_NONE)
        bib_builder_tensor_regs(b, a->tensors_given);
    for (uint32_t i = 0; i < a->shader_count; i++) {
        const asm_devcode_t *d = &a->shaders[i];
        bib_builder_shader(b, d->name, d->entry, d->bindings, d->push_bytes, d->words,
                           d->word_count);
    }
    for (uint32_t i = 0; i < a->kernel_count; i++) {
        const asm_devcode_t *d = &a->kernels[i];
        bib_builder_kernel(b, d->name, d->entry, d->params, d->ptx, d->ptx_bytes);
    }
    pass2_t p = {a, b, ASM_NONE, 0, 0, ASM_NONE, 0, NULL};
    bib_asm_pass2(&p);
    if (a->errors > 0 || a->oom) {
        bib_builder_destroy(b);
        return BIB_E_ASM;
    }
    if (entry != ASM_NONE)
        bib_builder_entry(b, entry);
    if (a->nodebug)
        bib_builder_nodebug(b);
    if (a->strip)
        bib_builder_strip(b);
    bib_builder_source(b, a->source_set ? a->source_name : a->default_source);
    /* '.bss' costs no bytes: it only makes linear memory larger than the
       data, and the VM zeroes what lies beyond the data. */
    bib_builder_memory(b, a->memory_stmt != ASM_NONE  ? a->memory_size
                          : a->bss_end > a->data_size ? a->bss_end
                                                      : a->data_size);
    if (a->data_size > 0)
        bib_builder_data(b, 0, a->data, (size_t)a->data_size);
    free(a->data); /* the builder holds the data now: keep one copy alive */
    a->data = NULL;
    a->data_cap = 0;
    bib_status_t st = bib_builder_finish(b, out, size);
    unsigned pc;
    if (st != BIB_OK && sscanf(bib_builder_error(b), "pc %u ", &pc) == 1 && pc < a->pc_count) {
        /* A verifier verdict (tensor liveness, mostly): point at the line. */
        const stmt_t *s = &a->stmts[a->pc_stmt[pc]];
        bib_asm_diag_at(a, a->pc_stmt[pc], s->word.col, s->word.len, "%s", bib_builder_error(b));
    } else if (st != BIB_OK) {
        bib_asm_diag_at(a, ASM_NONE, 0, 0, "%s", bib_builder_error(b));
    }
    bib_builder_destroy(b);
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
    a.strip = strip;
    a.max_size = max_size ? max_size : BIB_FILE_SIZE_CAP_DEFAULT;

    /* Literals must read the same under any locale the embedder set. */
    locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
    bib_status_t st = assemble(&a, source ? source : "", length, out, size);
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
