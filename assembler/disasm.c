/* assembler/disasm.c: the disassembler, .bib bytes to .basm text
 * (bib_disassemble).
 *
 * The output is written to re-assemble (asm.c) to the same bytes: every field
 * of the module is spelled out (.memory, the pool as .const kN in pool order,
 * .import in import order, args= and regs= on every .func, .line at each
 * function's start and wherever a line is not the one before it + 1, .entry
 * when the default rule would pick another function, .tensors and .dim when
 * the defaults would differ, every tensor declaration with its constant
 * values). Parsing and verifying the bytes belong to module/format.c; this file
 * only prints a verified module. spec/assembly.md describes the layout.
 */
#include "assembler/asm.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Data shorter than these stays in .byte rows: a 3-byte ".ascii" or ".zero"
   would only make the listing longer. */
#define DISASM_MIN_ASCII 4
#define DISASM_MIN_ZERO 16
#define DISASM_BYTES_PER_ROW 16
#define DISASM_ASCII_PER_LINE 64

static int is_text_byte(uint8_t c) {
    return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t';
}

/* The length of the zero (or text) run at p, counted up to cap at most:
   each caller needs only to know whether a run is long enough, or a line's
   worth, so a long run is never scanned again for every line it yields. */
static uint32_t run_length(const uint8_t *p, uint32_t n, int zeros, uint32_t cap) {
    uint32_t i = 0;
    if (n > cap)
        n = cap;
    while (i < n && (zeros ? p[i] == 0 : is_text_byte(p[i])))
        i++;
    return i;
}

static void print_data(bib_asm_text_t *t, const bib_module_t *m) {
    const uint8_t *d = m->data;
    uint32_t n = m->data_size, i = 0;
    if (n == 0)
        return;
    bib_asm_text_printf(t, "\n.data                          ; %u bytes from address 0\n", n);
    while (i < n) {
        uint32_t zeros = run_length(d + i, n - i, 1, UINT32_MAX);
        if (zeros >= DISASM_MIN_ZERO) {
            bib_asm_text_printf(t, "    .zero   %u%*s; 0x%X\n", zeros, 20, "", i);
            i += zeros;
            continue;
        }
        uint32_t text = run_length(d + i, n - i, 0, DISASM_ASCII_PER_LINE);
        if (text >= DISASM_MIN_ASCII) {
            bib_asm_text_put(t, "    .ascii  \"", 13);
            for (uint32_t k = 0; k < text; k++) {
                uint8_t c = d[i + k];
                if (c == '\n')
                    bib_asm_text_put(t, "\\n", 2);
                else if (c == '\t')
                    bib_asm_text_put(t, "\\t", 2);
                else if (c == '"' || c == '\\')
                    bib_asm_text_printf(t, "\\%c", c);
                else
                    bib_asm_text_put(t, (const char *)&c, 1);
            }
            bib_asm_text_printf(t, "\"  ; 0x%X\n", i);
            i += text;
            continue;
        }
        /* A .byte row runs until a text or zero run long enough to print
           on its own starts. */
        uint32_t row = 0;
        while (row < DISASM_BYTES_PER_ROW && i + row < n) {
            if (row > 0 &&
                (run_length(d + i + row, n - i - row, 1, DISASM_MIN_ZERO) >= DISASM_MIN_ZERO ||
                 run_length(d + i + row, n - i - row, 0, DISASM_MIN_ASCII) >= DISASM_MIN_ASCII))
                break;
            row++;
        }
        bib_asm_text_put(t, "    .byte   ", 12);
        for (uint32_t k = 0; k < row; k++)
            bib_asm_text_printf(t, "%s0x%02X", k ? ", " : "", d[i + k]);
        bib_asm_text_printf(t, "  ; 0x%X\n", i);
        i += row;
    }
}

static void print_operands(bib_asm_text_t *t, const bib_module_t *m, const bib_insn_t *insn,
                           const bib_opinfo_t *info) {
    const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
    int first = 1;
    const char *comment = NULL;
    uint64_t wide = 0;
    for (int k = 0; k < 4; k++) {
        uint32_t kind = info->kinds[k], v = words[k];
        if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
            continue;
        bib_asm_text_put(t, first ? " " : ", ", first ? 1 : 2);
        first = 0;
        switch ((bib_operand_kind_t)kind) {
        case BIB_K_RD:
        case BIB_K_RS:
        case BIB_K_RM:
            bib_asm_text_printf(t, "r%u", v);
            break;
        case BIB_K_TD:
        case BIB_K_TS:
        case BIB_K_TM:
            bib_asm_text_printf(t, "t%u", v);
            break;
        case BIB_K_IMM:
        case BIB_K_DIVISOR:
            bib_asm_text_printf(t, "%d", (int32_t)v);
            break;
        case BIB_K_IMMLO:
            wide = (uint64_t)v | (k < 3 ? (uint64_t)words[k + 1] << 32 : 0);
            bib_asm_text_printf(t, "%lld", (long long)(int64_t)wide);
            /* Big patterns are usually f64 values: say which. */
            if ((int64_t)wide >= (1ll << 52) || (int64_t)wide <= -(1ll << 52))
                comment = "f64";
            break;
        case BIB_K_COUNT:
        case BIB_K_SCALE:
        case BIB_K_CASES:
            bib_asm_text_printf(t, "%u", v);
            break;
        case BIB_K_DTYPE:
            bib_asm_text_put(t, v == BIB_DTYPE_I32 ? "i32" : "f32", 3);
            break;
        case BIB_K_CONST:
            bib_asm_text_printf(t, "k%u", v);
            break;
        case BIB_K_TGT: {
            int64_t l = bib_module_label_at(m, v);
            if (l >= 0)
                bib_asm_text_name(t, m->labels[l].name);
            else
                bib_asm_text_printf(t, "L%u", v);
            break;
        }
        case BIB_K_FN:
            bib_asm_text_name(t, m->funcs[v].name);
            break;
        case BIB_K_HOST:
            bib_asm_text_name(t, m->imports[v]);
            break;
        case BIB_K_SHADER:
            bib_asm_text_name(t, m->shaders[v].name);
            break;
        case BIB_K_KERNEL:
            bib_asm_text_name(t, m->kernels[v].name);
            break;
        case BIB_K_NONE:
        case BIB_K_IMMHI:
        case BIB_K__N:
            break;
        }
    }
    if (comment != NULL) {
        bib_asm_text_put(t, "  ; f64 ", 8);
        bib_asm_text_f64(t, wide);
    }
}

#define DISASM_VALUES_PER_ROW 8

/* The register count the assembler gives by default (the builder's). */
static uint64_t tensor_regs_named(const bib_module_t *m) {
    return bib_module_tensor_regs_named(m->code, m->code_count, m->tensors, m->tensor_count);
}

/* The assembler numbers symbolic dimensions by first use in the
   declarations; a .dim line is needed only when the module's order differs
   or some name is used by none. */
static int dims_need_declaring(const bib_module_t *m) {
    uint32_t next = 0;
    for (uint32_t i = 0; i < m->tensor_count; i++) {
        for (uint32_t k = 0; k < m->tensors[i].rank; k++) {
            int64_t d = m->tensors[i].dims[k];
            if (d >= BIB_DIM_ANY)
                continue;
            uint32_t index = BIB_DIM_SYMBOL_INDEX(d);
            if (index > next)
                return 1;
            if (index == next)
                next++;
        }
    }
    return next != m->dim_name_count;
}

static void print_type(bib_asm_text_t *t, const bib_module_t *m, const bib_tensor_decl_t *d) {
    bib_asm_text_put(t, d->dtype == BIB_DTYPE_I32 ? " i32[" : " f32[", 5);
    for (uint32_t k = 0; k < d->rank; k++) {
        if (k > 0)
            bib_asm_text_put(t, ", ", 2);
        if (d->dims[k] >= 0)
            bib_asm_text_printf(t, "%lld", (long long)d->dims[k]);
        else if (d->dims[k] == BIB_DIM_ANY)
            bib_asm_text_put(t, "?", 1);
        else
            bib_asm_text_name(t, m->dim_names[BIB_DIM_SYMBOL_INDEX(d->dims[k])]);
    }
    bib_asm_text_put(t, "]", 1);
}

/* Whether PTX can be printed as its own lines (ptx-text) and read back
   byte for byte: lines of printable text and tabs, each ending in '\n',
   none of them the closing directive. */
static int ptx_is_plain(const char *ptx, uint32_t n) {
    if (n == 0 || ptx[n - 1] != '\n')
        return 0;
    const char *line = ptx;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)ptx[i];
        if (c == '\n') {
            const char *p = line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (strncasecmp(p, ".endkernel", 10) == 0)
                return 0;
            line = ptx + i + 1;
        } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return 0;
        }
    }
    return 1;
}

/* Device code (spec/device-code.md), as forms that keep every byte:
   SPIR-V words, and PTX as its lines or, when that cannot hold it, bytes. */
static void print_devcode(bib_asm_text_t *t, const bib_module_t *m) {
    for (uint32_t i = 0; i < m->shader_count; i++) {
        const bib_shader_decl_t *sh = &m->shaders[i];
        bib_asm_text_put(t, "\n.shader ", 9);
        bib_asm_text_name(t, sh->name);
        bib_asm_text_printf(t, " spirv-words bindings=%u push=%u entry=", sh->bindings,
                            sh->push_bytes);
        bib_asm_text_name(t, sh->entry);
        bib_asm_text_printf(t, "    ; %u words\n", sh->words);
        for (uint32_t w = 0; w < sh->words; w++)
            bib_asm_text_printf(t, "%s0x%08X%s", w % 8 == 0 ? "    " : " ", sh->spirv[w],
                                w % 8 == 7 || w + 1 == sh->words ? "\n" : ",");
        bib_asm_text_put(t, ".endshader\n", 11);
    }
    for (uint32_t i = 0; i < m->kernel_count; i++) {
        const bib_kernel_decl_t *k = &m->kernels[i];
        int plain = ptx_is_plain(k->ptx, k->ptx_bytes);
        bib_asm_text_put(t, "\n.kernel ", 9);
        bib_asm_text_name(t, k->name);
        bib_asm_text_printf(t, " %s entry=", plain ? "ptx-text" : "ptx-bytes");
        bib_asm_text_name(t, k->entry);
        bib_asm_text_printf(t, " params=%s\n", k->params);
        if (plain)
            bib_asm_text_put(t, k->ptx, k->ptx_bytes);
        else
            for (uint32_t b = 0; b < k->ptx_bytes; b++)
                bib_asm_text_printf(t, "%s0x%02X%s", b % 16 == 0 ? "    " : " ",
                                    (unsigned char)k->ptx[b],
                                    b % 16 == 15 || b + 1 == k->ptx_bytes ? "\n" : "");
        bib_asm_text_put(t, ".endkernel\n", 11);
    }
}

static void print_tensors(bib_asm_text_t *t, const bib_module_t *m) {
    if (m->tensor_regs == 0)
        return;
    bib_asm_text_put(t, "\n", 1);
    if (m->tensor_regs != tensor_regs_named(m))
        bib_asm_text_printf(t, ".tensors %u\n", m->tensor_regs);
    if (m->dim_name_count > 0 && dims_need_declaring(m)) {
        bib_asm_text_put(t, ".dim ", 5);
        for (uint32_t i = 0; i < m->dim_name_count; i++) {
            if (i > 0)
                bib_asm_text_put(t, ", ", 2);
            bib_asm_text_name(t, m->dim_names[i]);
        }
        bib_asm_text_put(t, "\n", 1);
    }
    for (uint32_t i = 0; i < m->tensor_count; i++) {
        const bib_tensor_decl_t *d = &m->tensors[i];
        const char *word = d->flags == BIB_TENSOR_INPUT    ? ".input "
                           : d->flags == BIB_TENSOR_OUTPUT ? ".output "
                                                           : ".tensor ";
        bib_asm_text_put(t, word, strlen(word));
        bib_asm_text_name(t, d->name);
        bib_asm_text_printf(t, " t%u", d->reg);
        if (d->dtype != 0)
            print_type(t, m, d);
        if (d->flags != BIB_TENSOR_CONST) {
            bib_asm_text_put(t, "\n", 1);
            continue;
        }
        uint64_t numel = d->init_size / 4;
        /* An empty constant (a 0 size) has no '=' list. */
        if (numel == 0) {
            bib_asm_text_put(t, "\n", 1);
            continue;
        }
        /* Long lists go on under the declaration, a row per line, each row
           but the last ending with ',' (the assembler's continuation). */
        int rows = numel > DISASM_VALUES_PER_ROW;
        bib_asm_text_put(t, rows ? " =" : " = ", rows ? 2 : 3);
        for (uint64_t e = 0; e < numel; e++) {
            if (rows && e % DISASM_VALUES_PER_ROW == 0)
                bib_asm_text_put(t, e == 0 ? "\n    " : ",\n    ", e == 0 ? 5 : 6);
            else if (e > 0)
                bib_asm_text_put(t, ", ", 2);
            uint32_t bits = bib_read_u32le(d->init + e * 4);
            if (d->dtype == BIB_DTYPE_I32)
                bib_asm_text_printf(t, "%d", (int32_t)bits);
            else
                bib_asm_text_f32(t, bits);
        }
        bib_asm_text_put(t, "\n", 1);
    }
}

static int compare_names(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Text names functions, so two functions with one name cannot be printed in a
   form that re-assembles; the verifier allows it, so it is checked here. */
static const char *duplicate_function_name(const bib_module_t *m, const char ***sorted_out) {
    const char **sorted = malloc((m->func_count ? m->func_count : 1) * sizeof *sorted);
    *sorted_out = sorted;
    if (sorted == NULL)
        return NULL;
    for (uint32_t i = 0; i < m->func_count; i++)
        sorted[i] = m->funcs[i].name;
    qsort(sorted, m->func_count, sizeof *sorted, compare_names);
    for (uint32_t i = 1; i < m->func_count; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            return sorted[i];
    return NULL;
}

static void print_module(bib_asm_text_t *t, const bib_module_t *m, const uint8_t *targeted) {
    bib_asm_text_printf(
        t,
        "; BIB module: %u function%s, %u instruction%s, %u constant%s, %u "
        "import%s, %u data byte%s\n",
        m->func_count, m->func_count == 1 ? "" : "s", m->code_count, m->code_count == 1 ? "" : "s",
        m->const_count, m->const_count == 1 ? "" : "s", m->import_count,
        m->import_count == 1 ? "" : "s", m->data_size, m->data_size == 1 ? "" : "s");
    if (m->lines == NULL) {
        bib_asm_text_put(t, ".nodebug\n", 9);
    } else if (m->source_name != NULL && m->source_name[0] != '\0') {
        bib_asm_text_put(t, ".source ", 8);
        bib_asm_text_name(t, m->source_name);
        bib_asm_text_put(t, "\n", 1);
    } else {
        bib_asm_text_put(t, ".source\n", 8);
    }
    uint32_t default_entry = 0;
    for (uint32_t i = 0; i < m->func_count; i++) {
        if (strcmp(m->funcs[i].name, "main") == 0) {
            default_entry = i;
            break;
        }
    }
    if (m->entry_func != default_entry) {
        bib_asm_text_put(t, ".entry ", 7);
        bib_asm_text_name(t, m->funcs[m->entry_func].name);
        bib_asm_text_put(t, "\n", 1);
    }
    bib_asm_text_printf(t, ".memory %llu\n", (unsigned long long)m->memory_size);

    print_data(t, m);

    if (m->const_count > 0)
        bib_asm_text_put(t, "\n", 1);
    for (uint32_t i = 0; i < m->const_count; i++) {
        const bib_const_t *k = &m->consts[i];
        if (k->type == BIB_CONST_F64) {
            bib_asm_text_printf(t, ".const k%u f64 ", i);
            bib_asm_text_f64(t, k->bits);
            bib_asm_text_put(t, "\n", 1);
        } else {
            bib_asm_text_printf(t, ".const k%u i64 %lld\n", i, (long long)(int64_t)k->bits);
        }
    }

    if (m->import_count > 0)
        bib_asm_text_put(t, "\n", 1);
    for (uint32_t i = 0; i < m->import_count; i++) {
        bib_asm_text_put(t, ".import ", 8);
        bib_asm_text_name(t, m->imports[i]);
        bib_asm_text_put(t, "\n", 1);
    }

    print_tensors(t, m);
    print_devcode(t, m);

    for (uint32_t fi = 0; fi < m->func_count; fi++) {
        const bib_function_t *f = &m->funcs[fi];
        bib_asm_text_put(t, "\n.func ", 7);
        bib_asm_text_name(t, f->name);
        bib_asm_text_printf(t, " args=%u regs=%u        ; pc %u..%u\n", f->nargs, f->nregs,
                            f->entry, f->entry + f->count - 1);
        for (uint32_t pc = f->entry; pc < f->entry + f->count; pc++) {
            int64_t l = bib_module_label_at(m, pc);
            if (l < 0 && targeted[pc])
                bib_asm_text_printf(t, "L%u:\n", pc);
            for (; l >= 0 && l < m->label_count && m->labels[l].pc == pc; l++) {
                bib_asm_text_name(t, m->labels[l].name);
                bib_asm_text_put(t, ":\n", 2);
            }
            if (m->lines != NULL &&
                (pc == f->entry || m->lines[pc] != bib_asm_line_after(m->lines[pc - 1])))
                bib_asm_text_printf(t, "    .line %u\n", m->lines[pc]);
            const bib_insn_t *insn = &m->code[pc];
            const bib_opinfo_t *info = bib_module_info(m, pc);
            bib_asm_text_printf(t, "    %-8s", info->name);
            print_operands(t, m, insn, info);
            bib_asm_text_put(t, "\n", 1);
        }
        bib_asm_text_put(t, ".end\n", 5);
    }
}

static char *copy_message(const char *msg) {
    size_t n = strlen(msg);
    char *p = malloc(n + 2);
    if (p != NULL) {
        memcpy(p, msg, n);
        p[n] = '\n';
        p[n + 1] = '\0';
    }
    return p;
}

bib_status_t bib_disassemble(const void *bytes, size_t size, char **text, char **diagnostics) {
    if (text != NULL)
        *text = NULL;
    if (diagnostics != NULL)
        *diagnostics = NULL;
    if (bytes == NULL || text == NULL) {
        if (diagnostics != NULL)
            *diagnostics = copy_message("disassemble: bytes and text must not be NULL");
        return BIB_E_USAGE;
    }
    bib_diag_t diag;
    diag.msg[0] = '\0';
    bib_module_t *m = NULL;
    bib_status_t st = bib_module_read(bytes, size, &m, &diag);
    if (st != BIB_OK) {
        if (diagnostics != NULL)
            *diagnostics = copy_message(diag.msg);
        return st;
    }

    const char **sorted = NULL;
    const char *dup = duplicate_function_name(m, &sorted);
    uint8_t *targeted = calloc(m->code_count ? m->code_count : 1, 1);
    if (sorted == NULL || targeted == NULL || dup != NULL) {
        if (diagnostics != NULL) {
            bib_asm_text_t msg = {0};
            if (dup != NULL)
                bib_asm_text_printf(&msg,
                                    "cannot disassemble: two functions are named '%s', and text "
                                    "names functions\n",
                                    dup);
            else
                bib_asm_text_printf(&msg, "disassemble: out of memory\n");
            *diagnostics = msg.p;
        }
        free(sorted);
        free(targeted);
        bib_module_free(m);
        return dup != NULL ? BIB_E_FORMAT : BIB_E_NOMEM;
    }
    free(sorted);
    for (uint32_t pc = 0; pc < m->code_count; pc++) {
        const bib_opinfo_t *info = bib_module_info(m, pc);
        const uint32_t words[4] = {m->code[pc].a, m->code[pc].b, m->code[pc].c, m->code[pc].d};
        for (int k = 0; k < 4; k++)
            if (info->kinds[k] == BIB_K_TGT)
                targeted[words[k]] = 1;
    }

    /* %g must write '.' whatever locale the embedder set. */
    locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
    bib_asm_text_t out = {0};
    print_module(&out, m, targeted);
    if (c_locale) {
        uselocale(previous);
        freelocale(c_locale);
    }
    free(targeted);
    bib_module_free(m);
    if (out.failed) {
        free(out.p);
        if (diagnostics != NULL)
            *diagnostics = copy_message("disassemble: out of memory");
        return BIB_E_NOMEM;
    }
    *text = out.p;
    return BIB_OK;
}
