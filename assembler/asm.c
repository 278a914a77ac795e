/* assembler/asm.c: the assembler, .basm text to .bib bytes (bib_assemble).
 *
 * The language is specified in spec/assembly.md. Two passes over the parsed
 * lines: the first collects every definition (functions, code and data labels,
 * constants, imports, data bytes) so that anything may be named before it is
 * defined; the second checks every instruction's operands against the kinds in
 * isa/opcodes.def and emits through the builder (builder.c), which lays the
 * module out, verifies it and writes the bytes. Errors are collected, not
 * fatal: each is "file:line:col: error: message", the source line and a caret.
 * This file also owns the text helpers (names, floats) that the disassembler
 * uses to print what this file reads.
 */
#include "assembler/asm.h"

#include <limits.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "assembler/devcode.h"

#define ASM_MAX_ERRORS 50
#define ASM_NONE UINT32_MAX

/* ---- text buffer ----------------------------------------------------- */

void bib_asm_text_put(bib_asm_text_t *t, const char *s, size_t n) {
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (p == NULL) {
            t->failed = 1;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void text_vprintf(bib_asm_text_t *t, const char *format, va_list ap) {
    char small[256];
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(small, sizeof small, format, copy);
    va_end(copy);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        bib_asm_text_put(t, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        t->failed = 1;
        return;
    }
    vsnprintf(big, (size_t)n + 1, format, ap);
    bib_asm_text_put(t, big, (size_t)n);
    free(big);
}

void bib_asm_text_printf(bib_asm_text_t *t, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    text_vprintf(t, format, ap);
    va_end(ap);
}

static int is_ident_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(int c) {
    return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

void bib_asm_text_name(bib_asm_text_t *t, const char *name) {
    size_t n = strlen(name);
    int plain = n > 0 && is_ident_start((unsigned char)name[0]);
    for (size_t i = 1; plain && i < n; i++)
        plain = is_ident_char((unsigned char)name[i]);
    if (plain) {
        bib_asm_text_put(t, name, n);
        return;
    }
    bib_asm_text_put(t, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '"' || c == '\\')
            bib_asm_text_printf(t, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            bib_asm_text_printf(t, "\\x%02X", c);
        else
            bib_asm_text_put(t, (const char *)&c, 1);
    }
    bib_asm_text_put(t, "\"", 1);
}

void bib_asm_text_f64(bib_asm_text_t *t, uint64_t bits) {
    double v;
    memcpy(&v, &bits, sizeof v);
    char buf[64];
    /* The shortest %g that strtod maps back to the same bits; a NaN with a
       payload (or a sign strtod does not give back) has no such text. */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        /* "1" or "-0" would read back as integers; a '.' keeps them floats. */
        if (strpbrk(buf, ".eEn") == NULL)
            strcat(buf, ".0");
        double back = strtod(buf, NULL);
        uint64_t back_bits;
        memcpy(&back_bits, &back, sizeof back_bits);
        if (back_bits == bits) {
            bib_asm_text_put(t, buf, strlen(buf));
            return;
        }
    }
    bib_asm_text_printf(t, "bits(0x%016llX)", (unsigned long long)bits);
}

void bib_asm_text_f32(bib_asm_text_t *t, uint32_t bits) {
    float v;
    memcpy(&v, &bits, sizeof v);
    char buf[64];
    /* Whole numbers read best as "10.0" rather than %g's "1e+01". */
    if (v == v && fabsf(v) < 1e9f && v == truncf(v) && !(v == 0 && signbit(v))) {
        bib_asm_text_printf(t, "%.1f", (double)v);
        return;
    }
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        /* "-0" would read back as the integer 0, which is +0. */
        if (strpbrk(buf, ".eEn") == NULL)
            strcat(buf, ".0");
        float back = strtof(buf, NULL);
        uint32_t back_bits;
        memcpy(&back_bits, &back, sizeof back_bits);
        if (back_bits == bits) {
            bib_asm_text_put(t, buf, strlen(buf));
            return;
        }
    }
    bib_asm_text_printf(t, "bits(0x%08X)", bits);
}

/* ---- symbols ------------------------------------------------------------ */

/* Symbol kinds share one table; code labels also carry their function as
   scope, so two functions can each have "loop". */
typedef enum sym_kind {
    SYM_FUNC,
    SYM_DATA,
    SYM_CONST,
    SYM_IMPORT,
    SYM_CODE,
    SYM_TENSOR, /* value: index in asm_state_t.tensors */
    SYM_DIM,    /* value: symbolic dimension index */
    SYM_SHADER, /* value: index in asm_state_t.shaders */
    SYM_KERNEL, /* value: index in asm_state_t.kernels */
    /* A .shader or .kernel whose declaration failed (its error is already
       reported): uses of the name say nothing more. */
    SYM_BROKEN_SHADER,
    SYM_BROKEN_KERNEL,
} sym_kind_t;

typedef struct sym {
    char *name;
    uint32_t kind, scope;
    uint64_t value;    /* function id, data address, pool index, import id, instruction index */
    uint32_t label_id; /* code labels: builder label id, ASM_NONE until needed */
    uint32_t stmt;     /* statement that defines it */
} sym_t;

typedef struct symtab {
    sym_t *syms;
    uint32_t count, cap;
    uint32_t *slots; /* open addressing: index + 1, 0 = empty */
    uint32_t nslots;
} symtab_t;

static uint32_t sym_hash(const char *name, uint32_t kind, uint32_t scope) {
    uint32_t h = 2166136261u ^ kind ^ (scope * 0x9E3779B9u);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static sym_t *sym_find(symtab_t *st, const char *name, uint32_t kind, uint32_t scope) {
    if (st->nslots == 0)
        return NULL;
    uint32_t mask = st->nslots - 1;
    for (uint32_t i = sym_hash(name, kind, scope) & mask;; i = (i + 1) & mask) {
        uint32_t s = st->slots[i];
        if (s == 0)
            return NULL;
        sym_t *sym = &st->syms[s - 1];
        if (sym->kind == kind && sym->scope == scope && strcmp(sym->name, name) == 0)
            return sym;
    }
}

/* Adds a symbol that sym_find did not find; NULL when out of memory. */
static sym_t *sym_add(symtab_t *st, const char *name, uint32_t kind, uint32_t scope, uint64_t value,
                      uint32_t stmt) {
    if ((st->count + 1) * 2 > st->nslots) {
        uint32_t n = st->nslots ? st->nslots * 2 : 64;
        uint32_t *slots = calloc(n, sizeof *slots);
        if (slots == NULL)
            return NULL;
        for (uint32_t i = 0; i < st->count; i++) {
            sym_t *s = &st->syms[i];
            uint32_t j = sym_hash(s->name, s->kind, s->scope) & (n - 1);
            while (slots[j] != 0)
                j = (j + 1) & (n - 1);
            slots[j] = i + 1;
        }
        free(st->slots);
        st->slots = slots;
        st->nslots = n;
    }
    if (st->count == st->cap) {
        uint32_t cap = st->cap ? st->cap * 2 : 64;
        sym_t *syms = realloc(st->syms, cap * sizeof *syms);
        if (syms == NULL)
            return NULL;
        st->syms = syms;
        st->cap = cap;
    }
    size_t len = strlen(name) + 1;
    char *copy = malloc(len);
    if (copy == NULL)
        return NULL;
    memcpy(copy, name, len);
    sym_t *s = &st->syms[st->count];
    *s = (sym_t){copy, kind, scope, value, ASM_NONE, stmt};
    uint32_t j = sym_hash(name, kind, scope) & (st->nslots - 1);
    while (st->slots[j] != 0)
        j = (j + 1) & (st->nslots - 1);
    st->slots[j] = ++st->count;
    return s;
}

static void symtab_free(symtab_t *st) {
    for (uint32_t i = 0; i < st->count; i++)
        free(st->syms[i].name);
    free(st->syms);
    free(st->slots);
}

/* ---- parsed lines ------------------------------------------------------- */

typedef struct span {
    const char *p;
    uint32_t len;
    uint32_t col; /* 1-based byte column */
} span_t;

typedef struct stmt {
    uint32_t line;
    const char *text; /* the source line, for diagnostics */
    uint32_t text_len;
    uint32_t label_first, label_count; /* in asm_t.spans */
    span_t word;                       /* mnemonic or directive; len 0 when none */
    uint32_t op_first, op_count;       /* in asm_t.spans */
    int bad;                           /* a syntax error was reported: skip it */
    uint32_t func;                     /* enclosing function, ASM_NONE at top level */
    int continued;                     /* a '.tensor' value list goes on on the next line */
    uint32_t owner;   /* continuation line: 1 + the '.tensor' statement it belongs to; else 0 */
    uint32_t body_of; /* raw line of a '.shader'/'.kernel' block: 1 + that statement; else 0 */
} stmt_t;

typedef struct asm_func {
    char *name;
    uint32_t stmt; /* its .func line */
    uint32_t nargs, nregs;
    int regs_given;
    uint32_t regs_used; /* highest register named + 1 */
    uint32_t insn_count;
    int last_op; /* opcode index of the last instruction, -1 when none */
    int ended;
} asm_func_t;

/* A .input, .output or .tensor declaration. */
typedef struct asm_tensor {
    char *name;
    uint32_t stmt, reg, flags, dtype, rank;
    int64_t dims[BIB_MAX_RANK];
    uint32_t *values; /* .tensor: the elements' bit patterns, numel of them */
    uint64_t numel;
} asm_tensor_t;

/* A .shader or .kernel declaration, compiled in pass 1. */
typedef struct asm_devcode {
    char *name, *entry, *params; /* params: kernels only */
    uint32_t stmt;
    uint32_t bindings, push_bytes; /* shaders only */
    uint32_t *words;               /* shader SPIR-V */
    uint32_t word_count;
    char *ptx; /* kernel PTX, NUL-terminated */
    uint32_t ptx_bytes;
} asm_devcode_t;

typedef struct data_fixup {
    uint32_t offset, width, stmt;
    span_t op;
} data_fixup_t;

/* One error. Passes find errors out of line order; they are sorted by place
   before they are printed. */
typedef struct asm_diag {
    uint32_t line, col, seq;
    char *text;
} asm_diag_t;

typedef struct asm_state {
    const char *file;
    asm_diag_t *diags;
    uint32_t errors, diag_cap;
    int stopped;

    stmt_t *stmts;
    uint32_t stmt_count, stmt_cap;
    span_t *spans;
    uint32_t span_count, span_cap;

    symtab_t syms;
    asm_func_t *funcs;
    uint32_t func_count, func_cap;
    char **imports;
    uint32_t import_count, import_cap;
    bib_const_t *consts;
    uint32_t const_count, const_cap;

    uint8_t *data;
    uint64_t data_size, data_cap;
    data_fixup_t *fixups;
    uint32_t fixup_count, fixup_cap;
    uint64_t memory_size;
    uint32_t memory_stmt; /* ASM_NONE when no .memory */
    uint32_t entry_stmt;  /* ASM_NONE when no .entry */

    asm_tensor_t *tensors;
    uint32_t tensor_count, tensor_cap;
    char **dim_names;
    uint32_t dim_count, dim_cap;
    uint32_t tregs_used;   /* highest tensor register named + 1 */
    uint32_t tregs_stmt;   /* where that highest register is named */
    uint32_t tensors_stmt; /* ASM_NONE when no .tensors */
    uint32_t tensors_given;
    int deny_device_code; /* .shader and .kernel are errors (the load policy, vm/api.c) */
    asm_devcode_t *shaders, *kernels;
    uint32_t shader_count, shader_cap, kernel_count, kernel_cap;
    uint32_t *pc_stmt; /* the statement of each emitted instruction, by pc */
    uint32_t pc_count, pc_cap;
    int nodebug;
    int strip; /* bib asm --strip: no debug section, no label names */
    int source_set;
    char *source_name;
    const char *default_source; /* the file name given, or NULL */

    int oom;
    uint64_t max_size;     /* the cap on the data and tensor bytes (bib_assemble_capped) */
    uint64_t tensor_bytes; /* the .tensor values so far */
    int too_large;         /* a directive passed max_size: BIB_E_NOMEM */
} asm_state_t;

static int grow_array(void **array, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap)
        return 1;
    uint64_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX)
        return 0;
    void *p = realloc(*array, (size_t)n * elem);
    if (p == NULL)
        return 0;
    *array = p;
    *cap = (uint32_t)n;
    return 1;
}

/* ---- diagnostics --------------------------------------------------------- */

static void diag_at(asm_state_t *a, uint32_t stmt, uint32_t col, uint32_t len, const char *format,
                    ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static void diag_at(asm_state_t *a, uint32_t stmt, uint32_t col, uint32_t len, const char *format,
                    ...) {
    if (a->stopped)
        return;
    if (a->errors == ASM_MAX_ERRORS) {
        a->stopped = 1;
        return;
    }
    bib_asm_text_t t = {0};
    const stmt_t *s = stmt < a->stmt_count ? &a->stmts[stmt] : NULL;
    if (s != NULL)
        bib_asm_text_printf(&t, "%s:%u:%u: error: ", a->file, s->line, col);
    else
        bib_asm_text_printf(&t, "%s: error: ", a->file);
    va_list ap;
    va_start(ap, format);
    text_vprintf(&t, format, ap);
    va_end(ap);
    bib_asm_text_put(&t, "\n", 1);
    if (s != NULL) {
        /* A NUL in the line is shown as U+2400, one column, so the caret
           stays under it and the text stays one C string. */
        for (uint32_t i = 0; i < s->text_len; i++)
            if (s->text[i] == '\0')
                bib_asm_text_put(&t, "\xe2\x90\x80", 3);
            else
                bib_asm_text_put(&t, s->text + i, 1);
        bib_asm_text_put(&t, "\n", 1);
        /* Tabs are copied so that the caret lines up under any tab width. */
        for (uint32_t i = 0; i + 1 < col && i < s->text_len; i++)
            bib_asm_text_put(&t, s->text[i] == '\t' ? "\t" : " ", 1);
        bib_asm_text_put(&t, "^", 1);
        for (uint32_t i = 1; i < len; i++)
            bib_asm_text_put(&t, "~", 1);
        bib_asm_text_put(&t, "\n", 1);
    }
    if (t.failed ||
        !grow_array((void **)&a->diags, &a->diag_cap, a->errors + 1, sizeof *a->diags)) {
        free(t.p);
        a->oom = 1;
        a->stopped = 1;
        return;
    }
    a->diags[a->errors] = (asm_diag_t){s ? s->line : UINT32_MAX, s ? col : 0, a->errors, t.p};
    a->errors++;
}

static int compare_diags(const void *x, const void *y) {
    const asm_diag_t *p = x, *q = y;
    if (p->line != q->line)
        return p->line < q->line ? -1 : 1;
    if (p->col != q->col)
        return p->col < q->col ? -1 : 1;
    return p->seq < q->seq ? -1 : p->seq > q->seq;
}

/* All errors, in source order, as one text; NULL when out of memory. */
static char *diags_text(asm_state_t *a) {
    qsort(a->diags, a->errors, sizeof *a->diags, compare_diags);
    bib_asm_text_t t = {0};
    for (uint32_t i = 0; i < a->errors; i++)
        bib_asm_text_put(&t, a->diags[i].text, strlen(a->diags[i].text));
    if (a->stopped && !a->oom)
        bib_asm_text_printf(&t, "%s: error: too many errors; stopped after %d\n", a->file,
                            ASM_MAX_ERRORS);
    if (a->oom)
        bib_asm_text_printf(&t, "%s: error: out of memory\n", a->file);
    if (t.len == 0)
        bib_asm_text_printf(&t, "%s: error: assembly failed\n", a->file);
    if (t.failed) {
        free(t.p);
        return NULL;
    }
    return t.p;
}

static void diag_span(asm_state_t *a, uint32_t stmt, span_t sp, const char *format,
                      const char *arg) {
    char text[64];
    /* Long operands are cut so the message stays one readable line. */
    if (arg == NULL) {
        uint32_t n = sp.len < sizeof text - 4 ? sp.len : (uint32_t)sizeof text - 4;
        memcpy(text, sp.p, n);
        strcpy(text + n, n < sp.len ? "..." : "");
        arg = text;
    }
    diag_at(a, stmt, sp.col, sp.len, format, arg);
}

static void out_of_memory(asm_state_t *a) {
    a->oom = 1;
}

/* ---- lexical helpers ---------------------------------------------------- */

static int is_space(int c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static int hex_value(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Position just past the quoted text that starts at p[0] (a ' or "), or NULL
   when the quote is not closed before end. */
static const char *skip_quoted(const char *p, const char *end) {
    char q = *p++;
    while (p < end) {
        if (*p == '\\' && p + 1 < end)
            p += 2;
        else if (*p == q)
            return p + 1;
        else
            p++;
    }
    return NULL;
}

/* Decodes the body of a quoted string or char (between the quotes) into out
   (at least n bytes). Returns the decoded length, or -1 with *bad_at set to
   the offending offset and *why to the reason. */
static long unescape(const char *p, uint32_t n, uint8_t *out, uint32_t *bad_at, const char **why) {
    long len = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)p[i];
        if (c != '\\') {
            out[len++] = c;
            continue;
        }
        if (i + 1 >= n) {
            *bad_at = i;
            *why = "a backslash ends the string";
            return -1;
        }
        char e = p[++i];
        switch (e) {
        case 'n':
            out[len++] = '\n';
            break;
        case 't':
            out[len++] = '\t';
            break;
        case 'r':
            out[len++] = '\r';
            break;
        case '0':
            out[len++] = 0;
            break;
        case '\\':
        case '\'':
        case '"':
            out[len++] = (uint8_t)e;
            break;
        case 'x': {
            int h1 = i + 1 < n ? hex_value((unsigned char)p[i + 1]) : -1;
            if (h1 < 0) {
                *bad_at = i - 1;
                *why = "'\\x' needs one or two hex digits";
                return -1;
            }
            i++;
            int v = h1;
            int h2 = i + 1 < n ? hex_value((unsigned char)p[i + 1]) : -1;
            if (h2 >= 0) {
                v = v * 16 + h2;
                i++;
            }
            out[len++] = (uint8_t)v;
            break;
        }
        default:
            *bad_at = i - 1;
            *why = "unknown escape (use \\n \\t \\r \\0 \\\\ \\' \\\" or \\xHH)";
            return -1;
        }
    }
    return len;
}

/* ---- line parsing ------------------------------------------------------- */

static int push_span(asm_state_t *a, span_t sp) {
    if (!grow_array((void **)&a->spans, &a->span_cap, a->span_count + 1, sizeof *a->spans)) {
        out_of_memory(a);
        return 0;
    }
    a->spans[a->span_count++] = sp;
    return 1;
}

/* A statement's operand spans. Before the first operand of the source there
   is no span array at all, and NULL + 0 is undefined behaviour, so such a
   statement gets NULL (it has no operand to index). */
static const span_t *stmt_operands(const asm_state_t *a, const stmt_t *s) {
    return a->spans != NULL ? a->spans + s->op_first : NULL;
}

static span_t make_span(const stmt_t *s, const char *p, const char *end) {
    return (span_t){p, (uint32_t)(end - p), (uint32_t)(p - s->text) + 1};
}

/* Length of the name (identifier or quoted) at p, 0 when there is none. */
static uint32_t name_length(const char *p, const char *end) {
    if (p < end && *p == '"') {
        const char *q = skip_quoted(p, end);
        return q ? (uint32_t)(q - p) : 0;
    }
    if (p >= end || !is_ident_start((unsigned char)*p))
        return 0;
    const char *q = p + 1;
    while (q < end && is_ident_char((unsigned char)*q))
        q++;
    return (uint32_t)(q - p);
}

/* Directives whose operands are separated by blanks (".func f args=1"); the
   rest separate operands with commas. */
static int word_separated(span_t w) {
    return (w.len == 5 && strncasecmp(w.p, ".func", 5) == 0) ||
           (w.len == 6 && strncasecmp(w.p, ".const", 6) == 0) ||
           (w.len == 7 && strncasecmp(w.p, ".shader", 7) == 0) ||
           (w.len == 7 && strncasecmp(w.p, ".kernel", 7) == 0);
}

/* The end of the line's text before its comment (the first ';' outside
   quotes) and trailing blanks; NULL after a diagnostic for an open quote. */
static const char *strip_comment(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    const char *p = s->text, *end = s->text + s->text_len;
    for (const char *q = p; q < end;) {
        if (*q == '"' || *q == '\'') {
            const char *close = skip_quoted(q, end);
            if (close == NULL) {
                diag_at(a, si, (uint32_t)(q - s->text) + 1, 1,
                        *q == '"' ? "unterminated string" : "unterminated character literal");
                s->bad = 1;
                return NULL;
            }
            q = close;
        } else if (*q == ';') {
            end = q;
            break;
        } else {
            q++;
        }
    }
    while (end > p && is_space((unsigned char)end[-1]))
        end--;
    return end;
}

static int is_tensor_decl(span_t w) {
    return (w.len == 6 && strncasecmp(w.p, ".input", 6) == 0) ||
           (w.len == 7 && strncasecmp(w.p, ".output", 7) == 0) ||
           (w.len == 7 && strncasecmp(w.p, ".tensor", 7) == 0);
}

/* Splits a '.tensor' value list at commas into the statement's operands. A
   list that ends with ',' or '\\' goes on on the next line. */
static void split_values(asm_state_t *a, uint32_t si, const char *p, const char *end) {
    stmt_t *s = &a->stmts[si];
    while (p < end && is_space((unsigned char)*p))
        p++;
    if (end > p && end[-1] == '\\') {
        s->continued = 1;
        end--;
        while (end > p && is_space((unsigned char)end[-1]))
            end--;
    }
    while (p < end) {
        const char *start = p;
        while (p < end && *p != ',') {
            const char *q = *p == '\'' ? skip_quoted(p, end) : NULL;
            p = q != NULL ? q : p + 1;
        }
        const char *stop = p;
        while (stop > start && is_space((unsigned char)stop[-1]))
            stop--;
        if (stop == start) {
            diag_at(a, si, (uint32_t)(start - s->text) + 1, 1, "missing value");
            s->bad = 1;
            return;
        }
        if (!push_span(a, make_span(s, start, stop)))
            return;
        s->op_count++;
        if (p >= end)
            return;
        p++;
        while (p < end && is_space((unsigned char)*p))
            p++;
        if (p >= end)
            s->continued = 1;
    }
}

/* Operands of .input, .output and .tensor: blank- (or comma-) separated
   words, where a type's brackets ("f32[n, 4]") keep their commas and blanks,
   then for .tensor an "=" operand and the values. */
static void parse_decl_operands(asm_state_t *a, uint32_t si, const char *p, const char *end) {
    stmt_t *s = &a->stmts[si];
    for (;;) {
        while (p < end && (is_space((unsigned char)*p) || *p == ','))
            p++;
        if (p >= end)
            return;
        if (*p == '=') {
            if (!push_span(a, make_span(s, p, p + 1)))
                return;
            s->op_count++;
            if (p + 1 >= end)
                s->continued = 1;
            split_values(a, si, p + 1, end);
            return;
        }
        const char *start = p;
        int depth = 0;
        while (p < end) {
            /* Both quote kinds, as strip_comment scans them: skipping only
               '"' made the '"' inside the char literal '"' look unclosed,
               and the NULL from skip_quoted was then dereferenced. */
            if (*p == '"' || *p == '\'') {
                const char *close = skip_quoted(p, end); /* closed: see strip_comment */
                p = close != NULL ? close : end;
                continue;
            }
            if (*p == '[') {
                depth++;
            } else if (*p == ']' && depth > 0) {
                depth--;
            } else if (depth == 0 && (is_space((unsigned char)*p) || *p == ',' || *p == '=')) {
                const char *q = p;
                while (q < end && is_space((unsigned char)*q))
                    q++;
                if (q < end && *q == '[') {
                    p = q;
                    continue;
                }
                break;
            }
            p++;
        }
        if (!push_span(a, make_span(s, start, p)))
            return;
        s->op_count++;
    }
}

/* A line that goes on with the value list of the '.tensor' before it. */
static void parse_continuation(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    const char *end = strip_comment(a, si);
    s->op_first = a->span_count;
    if (end == NULL)
        return;
    const char *p = s->text;
    while (p < end && is_space((unsigned char)*p))
        p++;
    if (p == end) {
        s->continued = 1; /* a blank or comment line inside the list */
        return;
    }
    split_values(a, si, p, end);
}

/* Splits one line into labels, word and operands. */
static void parse_line(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    const char *p = s->text, *end = strip_comment(a, si);
    if (end == NULL)
        return;

    s->label_first = a->span_count;
    for (;;) {
        while (p < end && is_space((unsigned char)*p))
            p++;
        uint32_t n = name_length(p, end);
        if (n == 0)
            break;
        const char *q = p + n;
        while (q < end && is_space((unsigned char)*q))
            q++;
        if (q >= end || *q != ':')
            break;
        if (!push_span(a, make_span(s, p, p + n)))
            return;
        s->label_count++;
        p = q + 1;
    }
    if (p >= end)
        return;

    const char *w = p;
    if (*p == '.')
        p++;
    while (p < end && is_ident_char((unsigned char)*p))
        p++;
    if (p == w || (*w == '.' && p == w + 1) || (p < end && !is_space((unsigned char)*p))) {
        const char *q = w;
        while (q < end && !is_space((unsigned char)*q) && *q != ',')
            q++;
        diag_span(a, si, make_span(s, w, q == w ? w + 1 : q),
                  "expected a mnemonic, a directive or a label, found '%s'", NULL);
        s->bad = 1;
        return;
    }
    s->word = make_span(s, w, p);
    if (is_tensor_decl(s->word)) {
        s->op_first = a->span_count;
        parse_decl_operands(a, si, p, end);
        return;
    }

    int words = word_separated(s->word);
    s->op_first = a->span_count;
    while (p < end && is_space((unsigned char)*p))
        p++;
    if (p >= end)
        return;
    for (;;) {
        const char *start = p;
        int depth = 0;
        while (p < end) {
            if (*p == '"' || *p == '\'') {
                p = skip_quoted(p, end); /* closed: checked above */
                continue;
            }
            if (*p == '(')
                depth++;
            else if (*p == ')' && depth > 0)
                depth--;
            else if (depth == 0 && (*p == ',' || (words && is_space((unsigned char)*p))))
                break;
            p++;
        }
        const char *stop = p;
        while (stop > start && is_space((unsigned char)stop[-1]))
            stop--;
        if (stop == start) {
            diag_at(a, si, (uint32_t)(start - s->text) + 1, 1, "missing operand");
            s->bad = 1;
            return;
        }
        if (!push_span(a, make_span(s, start, stop)))
            return;
        s->op_count++;
        if (p >= end)
            return;
        int comma = *p == ',';
        p++;
        while (p < end && (is_space((unsigned char)*p) || (words && !comma && *p == ','))) {
            comma |= *p == ',';
            p++;
        }
        if (p >= end) {
            if (comma) {
                diag_at(a, si, (uint32_t)(end - s->text) + 1, 1, "missing operand after ','");
                s->bad = 1;
            }
            return;
        }
    }
}

/* ---- operand values ----------------------------------------------------- */

typedef struct asm_int {
    int neg;
    uint64_t mag;
} asm_int_t;

static uint64_t int_bits(asm_int_t v) {
    return v.neg ? 0 - v.mag : v.mag;
}

static int int_fits(asm_int_t v, int64_t lo, uint64_t hi) {
    if (v.neg)
        return v.mag == 0 || (lo < 0 && v.mag - 1 <= (uint64_t)(-(lo + 1)));
    return v.mag <= hi;
}

static void int_text(asm_int_t v, char *out, size_t cap) {
    snprintf(out, cap, "%s%llu", v.neg ? "-" : "", (unsigned long long)v.mag);
}

typedef enum parse_result {
    PARSE_OK,
    PARSE_NOT,      /* not this kind of literal */
    PARSE_RANGE,    /* a literal, but its value does not fit */
    PARSE_BAD_CHAR, /* a malformed character literal */
} parse_result_t;

/* Integer or char literal. */
static parse_result_t parse_int(span_t sp, asm_int_t *out) {
    const char *p = sp.p, *end = sp.p + sp.len;
    out->neg = 0;
    out->mag = 0;
    if (p < end && *p == '\'') {
        uint8_t buf[8];
        uint32_t bad_at;
        const char *why;
        if (sp.len < 3 || end[-1] != '\'' || sp.len > 8)
            return PARSE_BAD_CHAR;
        long n = unescape(p + 1, sp.len - 2, buf, &bad_at, &why);
        if (n != 1)
            return PARSE_BAD_CHAR;
        out->mag = buf[0];
        return PARSE_OK;
    }
    if (p < end && (*p == '-' || *p == '+')) {
        out->neg = *p == '-';
        p++;
    }
    unsigned base = 10;
    if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    } else if (end - p > 2 && p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
        base = 2;
        p += 2;
    }
    if (p >= end)
        return PARSE_NOT;
    int overflow = 0;
    for (; p < end; p++) {
        int d = hex_value((unsigned char)*p);
        if (d < 0 || (unsigned)d >= base)
            return PARSE_NOT;
        if (out->mag > (UINT64_MAX - (unsigned)d) / base)
            overflow = 1;
        out->mag = out->mag * base + (unsigned)d;
    }
    return overflow ? PARSE_RANGE : PARSE_OK;
}

/* Is this operand written as a float (rather than an integer)? */
static int looks_float(span_t sp) {
    const char *p = sp.p, *end = sp.p + sp.len;
    if (p < end && (*p == '-' || *p == '+'))
        p++;
    size_t n = (size_t)(end - p);
    if ((n == 3 && (strncasecmp(p, "inf", 3) == 0 || strncasecmp(p, "nan", 3) == 0)) ||
        (n >= 5 && strncasecmp(p, "bits(", 5) == 0))
        return 1;
    if (n > 0 && !(*p >= '0' && *p <= '9') && *p != '.')
        return 0;
    int hex = n > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    for (const char *q = p; q < end; q++)
        if (*q == '.' || (!hex && (*q == 'e' || *q == 'E')) || (hex && (*q == 'p' || *q == 'P')))
            return 1;
    return 0;
}

/* A float in f64 (width 64) or f32 (width 32) form, as its bit pattern.
   Integers are converted to the nearest float. */
static parse_result_t parse_float(span_t sp, int width, uint64_t *bits) {
    const char *p = sp.p;
    uint32_t n = sp.len;
    if (n >= 6 && strncasecmp(p, "bits(", 5) == 0 && p[n - 1] == ')') {
        asm_int_t v;
        span_t inner = {p + 5, n - 6, sp.col + 5};
        if (parse_int(inner, &v) != PARSE_OK || v.neg || inner.len == 0 || inner.p[0] == '\'')
            return PARSE_NOT;
        if (width == 32 && v.mag > UINT32_MAX)
            return PARSE_RANGE;
        *bits = v.mag;
        return PARSE_OK;
    }
    asm_int_t iv;
    parse_result_t r = parse_int(sp, &iv);
    if (r == PARSE_OK && sp.p[0] != '\'') {
        /* Through int64 when it fits, so the one rounding is the C library's. */
        int small = !iv.neg || iv.mag <= (1ull << 63);
        double d =
            small ? (iv.neg ? (double)(int64_t)int_bits(iv) : (double)iv.mag) : -(double)iv.mag;
        if (width == 32) {
            float f =
                small ? (iv.neg ? (float)(int64_t)int_bits(iv) : (float)iv.mag) : -(float)iv.mag;
            uint32_t b32;
            memcpy(&b32, &f, sizeof b32);
            *bits = b32;
        } else {
            memcpy(bits, &d, sizeof d);
        }
        return PARSE_OK;
    }
    if (!looks_float(sp) || n > 120)
        return PARSE_NOT;
    char buf[128];
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *stop;
    if (width == 32) {
        float f = strtof(buf, &stop);
        uint32_t b32;
        memcpy(&b32, &f, sizeof b32);
        *bits = b32;
    } else {
        double d = strtod(buf, &stop);
        memcpy(bits, &d, sizeof d);
    }
    return *stop == '\0' && stop != buf ? PARSE_OK : PARSE_NOT;
}

/* A name operand (identifier or quoted) into a malloc'd string; NULL with a
   diagnostic when it is not one. */
static char *parse_name(asm_state_t *a, uint32_t si, span_t sp, const char *what) {
    /* The container's limits: source file names are paths, the rest symbols. */
    uint32_t limit = strcmp(what, "source file") == 0 ? BIB_MAX_SOURCE_NAME : BIB_MAX_NAME;
    if (sp.len > 0 && sp.p[0] == '"') {
        if (name_length(sp.p, sp.p + sp.len) != sp.len) {
            diag_span(a, si, sp, "expected a name, found '%s'", NULL);
            return NULL;
        }
        char *out = malloc(sp.len);
        if (out == NULL) {
            out_of_memory(a);
            return NULL;
        }
        uint32_t bad_at;
        const char *why;
        long n = unescape(sp.p + 1, sp.len - 2, (uint8_t *)out, &bad_at, &why);
        if (n < 0) {
            diag_at(a, si, sp.col + 1 + bad_at, 2, "%s", why);
            free(out);
            return NULL;
        }
        out[n] = '\0';
        int control = 0;
        for (long i = 0; i < n; i++)
            control |= (unsigned char)out[i] < 0x20 || (unsigned char)out[i] == 0x7f;
        if (n == 0 || control || n > (long)limit) {
            diag_at(a, si, sp.col, sp.len,
                    "a %s name must be 1..%u bytes with no control characters", what, limit);
            free(out);
            return NULL;
        }
        return out;
    }
    if (name_length(sp.p, sp.p + sp.len) != sp.len) {
        char msg[80];
        snprintf(msg, sizeof msg, "expected a %s name, found '%%s'", what);
        diag_span(a, si, sp, msg, NULL);
        return NULL;
    }
    if (sp.len > limit) {
        diag_at(a, si, sp.col, sp.len, "a %s name must be at most %u bytes", what, limit);
        return NULL;
    }
    char *out = malloc(sp.len + 1);
    if (out == NULL) {
        out_of_memory(a);
        return NULL;
    }
    memcpy(out, sp.p, sp.len);
    out[sp.len] = '\0';
    return out;
}

/* A register "r12" (prefix 'r') or tensor register "t3" (prefix 't').
   Returns 0 when the text is not one. */
static int parse_reg(span_t sp, char prefix, uint32_t *index) {
    if (sp.len < 2 || (sp.p[0] | 0x20) != prefix)
        return 0;
    uint64_t v = 0;
    for (uint32_t i = 1; i < sp.len; i++) {
        if (sp.p[i] < '0' || sp.p[i] > '9' || v > BIB_MAX_REGS)
            return 0;
        v = v * 10 + (unsigned)(sp.p[i] - '0');
    }
    if (v > UINT32_MAX)
        return 0;
    *index = (uint32_t)v;
    return 1;
}

static int find_mnemonic(span_t w) {
    char name[32];
    if (w.len >= sizeof name)
        return -1;
    memcpy(name, w.p, w.len);
    name[w.len] = '\0';
    return bib_isa_find_name(name);
}

static int word_is(span_t w, const char *name) {
    return strlen(name) == w.len && strncasecmp(w.p, name, w.len) == 0;
}

/* A count or size: an unsigned integer literal up to max. */
static int parse_unsigned(asm_state_t *a, uint32_t si, span_t sp, uint64_t max, uint64_t *out,
                          const char *what) {
    asm_int_t v;
    parse_result_t r = parse_int(sp, &v);
    if (r == PARSE_NOT || r == PARSE_BAD_CHAR) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected %s, found '%%s'", what);
        diag_span(a, si, sp, msg, NULL);
        return 0;
    }
    if (r == PARSE_RANGE || (v.neg && v.mag != 0) || v.mag > max) {
        diag_at(a, si, sp.col, sp.len, "%.*s is out of range for %s (0..%llu)", (int)sp.len, sp.p,
                what, (unsigned long long)max);
        return 0;
    }
    *out = v.mag;
    return 1;
}

/* An integer, char, or data label with an optional +N/-N: resolved against
   the data labels of pass 1. */
static int parse_int_expr(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out, int floats_ok) {
    parse_result_t r = parse_int(sp, out);
    if (r == PARSE_OK)
        return 1;
    if (r == PARSE_RANGE) {
        diag_span(a, si, sp, "value %s does not fit 64 bits", NULL);
        return 0;
    }
    if (r == PARSE_BAD_CHAR) {
        diag_span(a, si, sp,
                  "bad character literal %s (one character or escape between single quotes)", NULL);
        return 0;
    }
    uint32_t reg;
    if (parse_reg(sp, 'r', &reg)) {
        diag_span(a, si, sp, "expected an immediate, found register '%s'", NULL);
        return 0;
    }
    if (looks_float(sp)) {
        if (floats_ok)
            return 0;
        diag_span(a, si, sp,
                  "expected an integer, found '%s' (floats are allowed in LDI64, .const, "
                  "=constants, .f32 and .f64)",
                  NULL);
        return 0;
    }
    uint32_t n = name_length(sp.p, sp.p + sp.len);
    if (n == 0) {
        diag_span(a, si, sp, "expected an integer or a data label, found '%s'", NULL);
        return 0;
    }
    asm_int_t offset = {0, 0};
    if (n < sp.len) {
        span_t rest = {sp.p + n, sp.len - n, sp.col + n};
        if ((rest.p[0] != '+' && rest.p[0] != '-') || parse_int(rest, &offset) != PARSE_OK ||
            rest.p[1] == '\'' || offset.mag > (1ull << 40)) {
            diag_span(a, si, rest, "expected '+N' or '-N' after a data label, found '%s'", NULL);
            return 0;
        }
    }
    char *name = parse_name(a, si, (span_t){sp.p, n, sp.col}, "data label");
    if (name == NULL)
        return 0;
    sym_t *sym = sym_find(&a->syms, name, SYM_DATA, 0);
    free(name);
    if (sym == NULL) {
        diag_span(a, si, (span_t){sp.p, n, sp.col}, "unknown data label '%s'", NULL);
        return 0;
    }
    int64_t v = (int64_t)sym->value + (offset.neg ? -(int64_t)offset.mag : (int64_t)offset.mag);
    out->neg = v < 0;
    out->mag = v < 0 ? (uint64_t)-v : (uint64_t)v;
    return 1;
}

/* ---- pass 1: definitions ------------------------------------------------ */

static int is_data_directive(span_t w) {
    static const char *const names[] = {".byte", ".i16",   ".i32",   ".i64",  ".f32",
                                        ".f64",  ".ascii", ".asciz", ".zero", ".align"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (word_is(w, names[i]))
            return 1;
    return 0;
}

/* Whether n more bytes of data or tensor values keep the module within the
   cap; reports the line where they do not, before anything is allocated. */
static int fits_cap(asm_state_t *a, uint32_t si, span_t where, uint64_t n) {
    /* Strictly below the cap: a module holds its headers and code besides,
       and must stay readable under the same cap. */
    uint64_t used = a->data_size + a->tensor_bytes;
    if (n < a->max_size && used < a->max_size - n)
        return 1;
    diag_at(a, si, where.col, where.len,
            "%llu more bytes of data would make the module larger than the size cap of %llu "
            "bytes (--max-file-size raises it)",
            (unsigned long long)n, (unsigned long long)a->max_size);
    a->too_large = 1;
    return 0;
}

static uint8_t *data_reserve(asm_state_t *a, uint32_t si, span_t where, uint64_t n) {
    uint64_t end = a->data_size + n;
    if (end > UINT32_MAX || n > UINT32_MAX) {
        diag_at(a, si, where.col, where.len, "data grows past 4 GiB, the most a module holds");
        return NULL;
    }
    if (!fits_cap(a, si, where, n))
        return NULL;
    if (end > a->data_cap || a->data == NULL) { // even for n == 0: `at` below needs a base
        uint64_t cap = a->data_cap ? a->data_cap : 256;
        while (cap < end)
            cap *= 2;
        uint8_t *p = realloc(a->data, (size_t)cap);
        if (p == NULL) {
            out_of_memory(a);
            return NULL;
        }
        a->data = p;
        a->data_cap = cap;
    }
    uint8_t *at = a->data + a->data_size;
    memset(at, 0, (size_t)n);
    a->data_size = end;
    return at;
}

static void put_le(uint8_t *p, uint64_t v, uint32_t width) {
    for (uint32_t i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void pass1_data(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    span_t w = s->word;
    const span_t *ops = stmt_operands(a, s);
    if (word_is(w, ".zero") || word_is(w, ".align")) {
        uint64_t n;
        if (s->op_count != 1) {
            diag_at(a, si, w.col, w.len, "'%.*s' takes 1 operand, found %u", (int)w.len, w.p,
                    s->op_count);
            return;
        }
        if (!parse_unsigned(a, si, ops[0], UINT32_MAX, &n, "a byte count"))
            return;
        if (word_is(w, ".align")) {
            if (n == 0 || (n & (n - 1)) != 0) {
                diag_span(a, si, ops[0], "alignment %s is not a power of two", NULL);
                return;
            }
            n = (n - a->data_size % n) % n;
        }
        data_reserve(a, si, ops[0], n);
        return;
    }
    if (s->op_count == 0) {
        diag_at(a, si, w.col, w.len, "'%.*s' needs at least one value", (int)w.len, w.p);
        return;
    }
    int ascii = word_is(w, ".ascii"), asciz = word_is(w, ".asciz");
    for (uint32_t i = 0; i < s->op_count; i++) {
        span_t op = ops[i];
        if (ascii || asciz) {
            if (op.len < 2 || op.p[0] != '"' || skip_quoted(op.p, op.p + op.len) != op.p + op.len) {
                diag_span(a, si, op, "expected a string in double quotes, found '%s'", NULL);
                return;
            }
            uint8_t *tmp = malloc(op.len);
            if (tmp == NULL) {
                out_of_memory(a);
                return;
            }
            uint32_t bad_at;
            const char *why;
            long n = unescape(op.p + 1, op.len - 2, tmp, &bad_at, &why);
            if (n < 0) {
                diag_at(a, si, op.col + 1 + bad_at, 2, "%s", why);
                free(tmp);
                return;
            }
            uint8_t *at = data_reserve(a, si, op, (uint64_t)n + (asciz ? 1 : 0));
            if (at != NULL)
                memcpy(at, tmp, (size_t)n);
            free(tmp);
            if (at == NULL)
                return;
            continue;
        }
        uint32_t width = word_is(w, ".byte")                          ? 1
                         : word_is(w, ".i16")                         ? 2
                         : (word_is(w, ".i32") || word_is(w, ".f32")) ? 4
                                                                      : 8;
        if (word_is(w, ".f32") || word_is(w, ".f64")) {
            uint64_t bits;
            parse_result_t r = parse_float(op, (int)width * 8, &bits);
            if (r != PARSE_OK) {
                diag_span(a, si, op,
                          r == PARSE_RANGE ? "raw bits %s do not fit 32 bits"
                                           : "expected a float, found '%s'",
                          NULL);
                return;
            }
            uint8_t *at = data_reserve(a, si, op, width);
            if (at == NULL)
                return;
            put_le(at, bits, width);
            continue;
        }
        asm_int_t v;
        parse_result_t r = parse_int(op, &v);
        if (r == PARSE_NOT && width >= 4 && name_length(op.p, op.p + op.len) > 0) {
            /* A data label: its address is known only after pass 1. */
            if (!grow_array((void **)&a->fixups, &a->fixup_cap, a->fixup_count + 1,
                            sizeof *a->fixups)) {
                out_of_memory(a);
                return;
            }
            a->fixups[a->fixup_count++] = (data_fixup_t){(uint32_t)a->data_size, width, si, op};
            if (data_reserve(a, si, op, width) == NULL)
                return;
            continue;
        }
        if (r != PARSE_OK) {
            diag_span(a, si, op,
                      r == PARSE_RANGE      ? "value %s does not fit 64 bits"
                      : r == PARSE_BAD_CHAR ? "bad character literal %s"
                      : width >= 4          ? "expected an integer or a data label, found '%s'"
                                            : "expected an integer, found '%s'",
                      NULL);
            return;
        }
        int64_t lo = width == 8 ? INT64_MIN : -((int64_t)1 << (8 * width - 1));
        uint64_t hi = width == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * width)) - 1;
        if (!int_fits(v, lo, hi)) {
            char text[32];
            int_text(v, text, sizeof text);
            diag_at(a, si, op.col, op.len, "value %s does not fit %u bytes (%lld..%llu)", text,
                    width, (long long)lo, (unsigned long long)hi);
            return;
        }
        uint8_t *at = data_reserve(a, si, op, width);
        if (at == NULL)
            return;
        put_le(at, int_bits(v), width);
    }
}

static void pass1_func(asm_state_t *a, uint32_t si, uint32_t *current) {
    stmt_t *s = &a->stmts[si];
    const span_t *ops = stmt_operands(a, s);
    if (*current != ASM_NONE) {
        diag_at(a, si, s->word.col, s->word.len, "'.func' inside function '%s' (missing '.end'?)",
                a->funcs[*current].name);
        s->bad = 1;
        return;
    }
    if (s->op_count == 0) {
        diag_at(a, si, s->word.col, s->word.len, "'.func' needs a name");
        s->bad = 1;
        return;
    }
    char *name = parse_name(a, si, ops[0], "function");
    /* A function whose name is bad still opens a scope, so its body does not
       also report "instruction outside a function". */
    if (name == NULL) {
        s->bad = 1;
        name = calloc(1, 1);
        if (name == NULL) {
            out_of_memory(a);
            return;
        }
    }
    if (!grow_array((void **)&a->funcs, &a->func_cap, a->func_count + 1, sizeof *a->funcs)) {
        free(name);
        out_of_memory(a);
        s->bad = 1;
        return;
    }
    uint32_t id = a->func_count++;
    asm_func_t *f = &a->funcs[id];
    *f = (asm_func_t){name, si, 0, 0, 0, 0, 0, -1, 0};
    *current = id;
    if (s->bad)
        return;
    sym_t *prev = sym_find(&a->syms, name, SYM_FUNC, 0);
    if (prev != NULL) {
        diag_at(a, si, ops[0].col, ops[0].len, "function '%s' is already defined on line %u", name,
                a->stmts[prev->stmt].line);
    } else if (sym_add(&a->syms, name, SYM_FUNC, 0, id, si) == NULL) {
        out_of_memory(a);
    }
    for (uint32_t i = 1; i < s->op_count; i++) {
        span_t op = ops[i];
        const char *eq = memchr(op.p, '=', op.len);
        uint32_t klen = eq ? (uint32_t)(eq - op.p) : 0;
        int is_args = klen == 4 && strncasecmp(op.p, "args", 4) == 0;
        int is_regs = klen == 4 && strncasecmp(op.p, "regs", 4) == 0;
        if (!is_args && !is_regs) {
            diag_span(a, si, op, "expected 'args=N' or 'regs=N', found '%s'", NULL);
            continue;
        }
        span_t value = {eq + 1, op.len - klen - 1, op.col + klen + 1};
        uint64_t v;
        if (!parse_unsigned(a, si, value, BIB_MAX_REGS, &v, "a register count"))
            continue;
        if (is_args) {
            f->nargs = (uint32_t)v;
        } else {
            if (v == 0) {
                diag_at(a, si, value.col, value.len, "regs must be at least 1");
                continue;
            }
            f->nregs = (uint32_t)v;
            f->regs_given = 1;
        }
    }
    if (f->regs_given && f->nargs > f->nregs)
        diag_at(a, si, s->word.col, s->word.len,
                "function '%s' takes %u arguments but has regs=%u (arguments live in registers)",
                name, f->nargs, f->nregs);
}

/* ---- pass 1: tensor declarations ------------------------------------------ */

static void note_treg(asm_state_t *a, uint32_t si, uint32_t reg) {
    if (reg < BIB_MAX_TENSOR_REGS && reg + 1 > a->tregs_used) {
        a->tregs_used = reg + 1;
        a->tregs_stmt = si;
    }
}

/* The index of symbolic dimension name, declared on first use; ASM_NONE when
   out of memory. */
static uint32_t dim_symbol(asm_state_t *a, uint32_t si, char *name) {
    sym_t *sym = sym_find(&a->syms, name, SYM_DIM, 0);
    if (sym != NULL) {
        free(name);
        return (uint32_t)sym->value;
    }
    if (!grow_array((void **)&a->dim_names, &a->dim_cap, a->dim_count + 1, sizeof *a->dim_names) ||
        sym_add(&a->syms, name, SYM_DIM, 0, a->dim_count, si) == NULL) {
        free(name);
        out_of_memory(a);
        return ASM_NONE;
    }
    a->dim_names[a->dim_count] = name;
    return a->dim_count++;
}

static int parse_dtype(span_t sp, uint32_t *dtype) {
    if (word_is(sp, "f32"))
        *dtype = BIB_DTYPE_F32;
    else if (word_is(sp, "i32"))
        *dtype = BIB_DTYPE_I32;
    else
        return 0;
    return 1;
}

/* One dimension: an integer size, '?' or a symbolic name. */
static int parse_dim(asm_state_t *a, uint32_t si, span_t d, int fixed_only, int64_t *out) {
    if (d.len == 1 && d.p[0] == '?') {
        *out = BIB_DIM_ANY;
    } else if ((d.p[0] >= '0' && d.p[0] <= '9') || d.p[0] == '-' || d.p[0] == '+') {
        uint64_t n;
        if (!parse_unsigned(a, si, d, BIB_MAX_TENSOR_DIM, &n, "a dimension size"))
            return 0;
        if (n == 0) {
            diag_at(a, si, d.col, d.len, "a dimension size is 1..%d, found 0", BIB_MAX_TENSOR_DIM);
            return 0;
        }
        *out = (int64_t)n;
    } else {
        char *name = parse_name(a, si, d, "dimension");
        if (name == NULL)
            return 0;
        uint32_t index = dim_symbol(a, si, name);
        if (index == ASM_NONE)
            return 0;
        *out = BIB_DIM_SYMBOL(index);
    }
    if (fixed_only && *out < 0) {
        diag_span(a, si, d, "a constant tensor needs fixed dimension sizes, found '%s'", NULL);
        return 0;
    }
    return 1;
}

/* A type with its shape: "f32[2, n, ?]", "i32[]" or "f32" (rank 0). */
static int parse_tensor_type(asm_state_t *a, uint32_t si, span_t sp, int fixed_only,
                             asm_tensor_t *t) {
    const char *p = sp.p, *end = sp.p + sp.len;
    const char *open = memchr(p, '[', sp.len);
    const char *name_end = open != NULL ? open : end;
    while (name_end > p && is_space((unsigned char)name_end[-1]))
        name_end--;
    span_t type = {p, (uint32_t)(name_end - p), sp.col};
    if (!parse_dtype(type, &t->dtype)) {
        diag_span(a, si, type.len ? type : sp,
                  "unknown element type '%s' (expected f32 or i32, as in f32[2, 3])", NULL);
        return 0;
    }
    t->rank = 0;
    if (open == NULL)
        return 1;
    if (end[-1] != ']') {
        diag_span(a, si, sp, "expected a shape in brackets such as f32[2, 3], found '%s'", NULL);
        return 0;
    }
    const char *q = open + 1, *close = end - 1;
    while (q < close && is_space((unsigned char)*q))
        q++;
    while (q < close) {
        const char *start = q;
        while (q < close && *q != ',') {
            const char *after = *q == '"' ? skip_quoted(q, close) : NULL;
            q = after != NULL ? after : q + 1;
        }
        const char *stop = q;
        while (stop > start && is_space((unsigned char)stop[-1]))
            stop--;
        span_t d = {start, (uint32_t)(stop - start), sp.col + (uint32_t)(start - p)};
        if (d.len == 0) {
            diag_at(a, si, d.col, 1, "missing dimension");
            return 0;
        }
        if (t->rank == BIB_MAX_RANK) {
            diag_span(a, si, d, "a tensor has at most 4 dimensions; '%s' is a fifth", NULL);
            return 0;
        }
        if (!parse_dim(a, si, d, fixed_only, &t->dims[t->rank]))
            return 0;
        t->rank++;
        if (q < close)
            q++;
        while (q < close && is_space((unsigned char)*q))
            q++;
        if (q == close && stop < close && close[-1] == ',') {
            diag_at(a, si, sp.col + (uint32_t)(close - p), 1, "missing dimension after ','");
            return 0;
        }
    }
    return 1;
}

/* One element of a .tensor value list, as its 32-bit pattern. */
static int parse_element(asm_state_t *a, uint32_t si, span_t op, uint32_t dtype, uint32_t *out) {
    if (dtype == BIB_DTYPE_F32) {
        uint64_t bits;
        parse_result_t r = parse_float(op, 32, &bits);
        if (r != PARSE_OK) {
            diag_span(a, si, op,
                      r == PARSE_RANGE ? "raw bits %s do not fit 32 bits"
                                       : "expected an f32 value, found '%s'",
                      NULL);
            return 0;
        }
        *out = (uint32_t)bits;
        return 1;
    }
    asm_int_t v;
    parse_result_t r = parse_int(op, &v);
    if (r == PARSE_OK && int_fits(v, INT32_MIN, UINT32_MAX)) {
        *out = (uint32_t)int_bits(v);
        return 1;
    }
    diag_span(a, si, op,
              r == PARSE_OK || r == PARSE_RANGE
                  ? "value %s does not fit i32 (-2147483648 .. 4294967295)"
                  : "expected an i32 value, found '%s'",
              NULL);
    return 0;
}

/* The values of a .tensor: the operands after "=" on its own line, then on
   its continuation lines. */
static int parse_tensor_values(asm_state_t *a, uint32_t si, uint32_t first, asm_tensor_t *t) {
    stmt_t *s = &a->stmts[si];
    /* The data must fit the 4 GiB container (with room for its headers). */
    const uint64_t limit = (UINT32_MAX - 4096) / 4;
    uint64_t numel = 1;
    for (uint32_t k = 0; k < t->rank && numel <= limit; k++)
        numel = numel > limit / (uint64_t)t->dims[k] ? limit + 1 : numel * (uint64_t)t->dims[k];
    if (numel > limit) {
        diag_at(a, si, s->word.col, s->word.len,
                "tensor '%s' has more elements than a module can hold (4 GiB)", t->name);
        return 0;
    }
    t->numel = numel;
    /* The values are counted first, so the memory taken follows the text
       given, not the shape declared. */
    uint64_t count = 0;
    for (uint32_t j = si; j < a->stmt_count && (j == si || a->stmts[j].owner == si + 1); j++) {
        const stmt_t *line = &a->stmts[j];
        if (line->bad)
            return 0; /* reported where it was split */
        count += line->op_count - (j == si ? first : 0);
    }
    if (count == numel && !fits_cap(a, si, s->word, numel * 4))
        return 0;
    if (count == numel) {
        t->values = malloc((size_t)numel * 4 + 4);
        if (t->values == NULL) {
            out_of_memory(a);
            return 0;
        }
    }
    uint64_t at = 0;
    for (uint32_t j = si; j < a->stmt_count && (j == si || a->stmts[j].owner == si + 1); j++) {
        const stmt_t *line = &a->stmts[j];
        for (uint32_t i = j == si ? first : 0; i < line->op_count; i++, at++) {
            span_t op = a->spans[line->op_first + i];
            uint32_t bits;
            if (!parse_element(a, j, op, t->dtype, &bits))
                return 0;
            if (t->values != NULL)
                t->values[at] = bits;
        }
    }
    if (count == numel)
        a->tensor_bytes += numel * 4;
    if (count != numel) {
        diag_at(a, si, s->word.col, s->word.len,
                "tensor '%s' has %llu element%s but %llu value%s given", t->name,
                (unsigned long long)numel, numel == 1 ? "" : "s", (unsigned long long)count,
                count == 1 ? " is" : "s are");
        return 0;
    }
    return 1;
}

static void pass1_tensor(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    span_t w = s->word;
    const span_t *ops = stmt_operands(a, s);
    uint32_t flags = word_is(w, ".input")    ? BIB_TENSOR_INPUT
                     : word_is(w, ".output") ? BIB_TENSOR_OUTPUT
                                             : BIB_TENSOR_CONST;
    uint32_t header = 0;
    while (header < s->op_count && !(ops[header].len == 1 && ops[header].p[0] == '='))
        header++;
    int has_values = header < s->op_count;
    if (flags != BIB_TENSOR_CONST && has_values) {
        diag_span(a, si, ops[header], "'%s' values belong to '.tensor' declarations only", NULL);
        return;
    }
    if ((flags == BIB_TENSOR_INPUT && header != 3) ||
        (flags == BIB_TENSOR_OUTPUT && header != 2 && header != 3) ||
        (flags == BIB_TENSOR_CONST && (header != 3 || !has_values))) {
        diag_at(a, si, w.col, w.len, "%s; found %u operand%s",
                flags == BIB_TENSOR_INPUT ? "'.input' takes a name, a tensor register and a type "
                                            "(.input x t0 f32[n, 4])"
                : flags == BIB_TENSOR_OUTPUT
                    ? "'.output' takes a name, a tensor register and optionally a type "
                      "(.output y t1 f32[n, 4])"
                    : "'.tensor' takes a name, a tensor register, a type, '=' and the values "
                      "(.tensor w t2 f32[2] = 1.5, -2)",
                header, header == 1 ? "" : "s");
        return;
    }
    asm_tensor_t t;
    memset(&t, 0, sizeof t);
    t.stmt = si;
    t.flags = flags;
    if (!parse_reg(ops[1], 't', &t.reg) || t.reg >= BIB_MAX_TENSOR_REGS) {
        diag_span(a, si, ops[1], "expected a tensor register (t0 .. t65535), found '%s'", NULL);
        return;
    }
    if (header == 3 && !parse_tensor_type(a, si, ops[2], flags == BIB_TENSOR_CONST, &t))
        return;
    if ((t.name = parse_name(a, si, ops[0], "tensor")) == NULL)
        return;
    sym_t *prev = sym_find(&a->syms, t.name, SYM_TENSOR, 0);
    if (prev != NULL) {
        diag_at(a, si, ops[0].col, ops[0].len, "tensor '%s' is already declared on line %u", t.name,
                a->stmts[prev->stmt].line);
        free(t.name);
        return;
    }
    for (uint32_t i = 0; i < a->tensor_count && flags != BIB_TENSOR_OUTPUT; i++) {
        const asm_tensor_t *o = &a->tensors[i];
        if (o->reg == t.reg && o->flags != BIB_TENSOR_OUTPUT) {
            diag_at(a, si, ops[1].col, ops[1].len,
                    "t%u already holds %s '%s' (line %u): a register carries at most one input "
                    "or constant",
                    t.reg, o->flags == BIB_TENSOR_INPUT ? "input" : "constant", o->name,
                    a->stmts[o->stmt].line);
            free(t.name);
            return;
        }
    }
    if (has_values && !parse_tensor_values(a, si, header + 1, &t)) {
        free(t.name);
        free(t.values);
        return;
    }
    if (!grow_array((void **)&a->tensors, &a->tensor_cap, a->tensor_count + 1,
                    sizeof *a->tensors) ||
        sym_add(&a->syms, t.name, SYM_TENSOR, 0, a->tensor_count, si) == NULL) {
        free(t.name);
        free(t.values);
        out_of_memory(a);
        return;
    }
    a->tensors[a->tensor_count++] = t;
    note_treg(a, si, t.reg);
}

/* Notes the registers an instruction names, for the default regs=. */
static void note_registers(asm_state_t *a, uint32_t si, asm_func_t *f, const bib_opinfo_t *info) {
    const stmt_t *s = &a->stmts[si];
    const span_t *ops = stmt_operands(a, s);
    uint32_t text = 0, prev_reg = ASM_NONE;
    uint32_t program_geometry = 0, program_extra = 0;
    for (int k = 0; k < 4 && text < s->op_count; k++) {
        uint32_t kind = info->kinds[k];
        if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
            continue;
        span_t op = ops[text++];
        uint32_t reg;
        if ((kind == BIB_K_TD || kind == BIB_K_TS || kind == BIB_K_TM) &&
            parse_reg(op, 't', &reg)) {
            note_treg(a, si, reg);
            prev_reg = ASM_NONE;
            continue;
        }
        if ((kind == BIB_K_RD || kind == BIB_K_RS) && parse_reg(op, 'r', &reg)) {
            if (reg + 1 > f->regs_used && reg < BIB_MAX_REGS)
                f->regs_used = reg + 1;
            if (program_geometry > 0 && kind == BIB_K_RS && reg < BIB_MAX_REGS &&
                reg + program_geometry > f->regs_used)
                f->regs_used = reg + program_geometry;
            program_geometry = 0;
            prev_reg = kind == BIB_K_RS ? reg : ASM_NONE;
            continue;
        }
        if (kind == BIB_K_SHADER || kind == BIB_K_KERNEL) {
            /* Device code declared above sizes the frame: the launch size
               registers and a shader's pushed words. */
            char *name = name_length(op.p, op.p + op.len) == op.len && op.p[0] != '"'
                             ? strndup(op.p, op.len)
                             : NULL;
            sym_t *sym =
                name ? sym_find(&a->syms, name, kind == BIB_K_SHADER ? SYM_SHADER : SYM_KERNEL, 0)
                     : NULL;
            free(name);
            program_geometry = kind == BIB_K_SHADER ? 3 : 6;
            program_extra =
                sym != NULL && kind == BIB_K_SHADER ? a->shaders[sym->value].push_bytes / 4 : 0;
            prev_reg = ASM_NONE;
            continue;
        }
        uint64_t count;
        asm_int_t v;
        if (kind == BIB_K_COUNT && prev_reg != ASM_NONE && parse_int(op, &v) == PARSE_OK &&
            !v.neg && v.mag <= BIB_MAX_REGS) {
            count = v.mag + program_extra;
            if (prev_reg + count > f->regs_used && prev_reg + count <= BIB_MAX_REGS)
                f->regs_used = (uint32_t)(prev_reg + count);
        }
        prev_reg = ASM_NONE;
    }
}

static void pass1_import(asm_state_t *a, uint32_t si, span_t op) {
    char *name = parse_name(a, si, op, "host function");
    if (name == NULL)
        return;
    if (sym_find(&a->syms, name, SYM_IMPORT, 0) == NULL) {
        if (!grow_array((void **)&a->imports, &a->import_cap, a->import_count + 1,
                        sizeof *a->imports) ||
            sym_add(&a->syms, name, SYM_IMPORT, 0, a->import_count, si) == NULL) {
            free(name);
            out_of_memory(a);
            return;
        }
        a->imports[a->import_count++] = name;
        return;
    }
    free(name);
}

static uint32_t add_const(asm_state_t *a, uint32_t type, uint64_t bits) {
    if (!grow_array((void **)&a->consts, &a->const_cap, a->const_count + 1, sizeof *a->consts)) {
        out_of_memory(a);
        return ASM_NONE;
    }
    a->consts[a->const_count] = (bib_const_t){type, bits};
    return a->const_count++;
}

/* Parses a constant value of the given type (".const" or "=" form). */
static int parse_const_value(asm_state_t *a, uint32_t si, span_t op, uint32_t type,
                             uint64_t *bits) {
    if (type == BIB_CONST_F64) {
        parse_result_t r = parse_float(op, 64, bits);
        if (r != PARSE_OK) {
            diag_span(a, si, op, "expected an f64 value, found '%s'", NULL);
            return 0;
        }
        return 1;
    }
    asm_int_t v;
    parse_result_t r = parse_int(op, &v);
    if (r == PARSE_OK && int_fits(v, INT64_MIN, UINT64_MAX)) {
        *bits = int_bits(v);
        return 1;
    }
    diag_span(a, si, op,
              r == PARSE_RANGE || r == PARSE_OK ? "value %s does not fit 64 bits"
                                                : "expected an i64 value, found '%s'",
              NULL);
    return 0;
}

static void pass1_const(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    const span_t *ops = stmt_operands(a, s);
    if (s->op_count != 3) {
        diag_at(a, si, s->word.col, s->word.len,
                "'.const' takes a name, a type (i64 or f64) and a value; found %u operands",
                s->op_count);
        return;
    }
    uint32_t type;
    if (word_is(ops[1], "i64")) {
        type = BIB_CONST_I64;
    } else if (word_is(ops[1], "f64")) {
        type = BIB_CONST_F64;
    } else {
        diag_span(a, si, ops[1], "unknown constant type '%s' (expected i64 or f64)", NULL);
        return;
    }
    char *name = parse_name(a, si, ops[0], "constant");
    if (name == NULL)
        return;
    uint64_t bits;
    if (parse_const_value(a, si, ops[2], type, &bits)) {
        sym_t *prev = sym_find(&a->syms, name, SYM_CONST, 0);
        if (prev != NULL) {
            diag_at(a, si, ops[0].col, ops[0].len, "constant '%s' is already defined on line %u",
                    name, a->stmts[prev->stmt].line);
        } else {
            uint32_t index = add_const(a, type, bits);
            if (index != ASM_NONE && sym_add(&a->syms, name, SYM_CONST, 0, index, si) == NULL)
                out_of_memory(a);
        }
    }
    free(name);
}

static int expect_operands(asm_state_t *a, uint32_t si, uint32_t lo, uint32_t hi) {
    const stmt_t *s = &a->stmts[si];
    if (s->op_count >= lo && s->op_count <= hi)
        return 1;
    if (lo == hi)
        diag_at(a, si, s->word.col, s->word.len, "'%.*s' takes %u operand%s, found %u",
                (int)s->word.len, s->word.p, lo, lo == 1 ? "" : "s", s->op_count);
    else
        diag_at(a, si, s->word.col, s->word.len, "'%.*s' takes %u to %u operands, found %u",
                (int)s->word.len, s->word.p, lo, hi, s->op_count);
    return 0;
}

/* ---- device code: .shader and .kernel (spec/device-code.md) ------------ */

static const char *block_end(const asm_state_t *a, const stmt_t *s);
static int span_is(span_t sp, const char *text);

/* A path operand, relative to the directory of the file being assembled. */
static char *devcode_path(asm_state_t *a, uint32_t si, span_t op) {
    if (op.len == 0 || op.p[0] != '"') {
        diag_span(a, si, op, "expected a quoted file name, found '%s'", NULL);
        return NULL;
    }
    char *name = parse_name(a, si, op, "source file");
    if (name == NULL)
        return NULL;
    const char *slash = a->default_source != NULL ? strrchr(a->default_source, '/') : NULL;
    if (name[0] == '/' || slash == NULL)
        return name;
    size_t dir = (size_t)(slash - a->default_source) + 1;
    char *full = malloc(dir + strlen(name) + 1);
    if (full == NULL) {
        free(name);
        out_of_memory(a);
        return NULL;
    }
    memcpy(full, a->default_source, dir);
    strcpy(full + dir, name);
    free(name);
    return full;
}

/* The raw lines of a block, each followed by '\n'. */
static char *devcode_body(asm_state_t *a, uint32_t si, uint32_t *len) {
    bib_asm_text_t t = {0};
    bib_asm_text_put(&t, "", 0);
    for (uint32_t j = si + 1; j < a->stmt_count && a->stmts[j].body_of == si + 1; j++) {
        bib_asm_text_put(&t, a->stmts[j].text, a->stmts[j].text_len);
        bib_asm_text_put(&t, "\n", 1);
    }
    if (t.failed) {
        free(t.p);
        out_of_memory(a);
        return NULL;
    }
    *len = (uint32_t)t.len;
    return t.p;
}

/* Hex numbers of a spirv-words or ptx-bytes block, separated by commas or
   blanks, each at most max. */
static uint32_t *devcode_numbers(asm_state_t *a, uint32_t si, uint64_t max, uint32_t *count) {
    uint32_t n = 0, cap = 0;
    uint32_t *out = NULL;
    for (uint32_t j = si + 1; j < a->stmt_count && a->stmts[j].body_of == si + 1; j++) {
        const stmt_t *s = &a->stmts[j];
        const char *p = s->text, *end = s->text + s->text_len;
        while (p < end) {
            while (p < end && (is_space((unsigned char)*p) || *p == ','))
                p++;
            if (p >= end || *p == ';')
                break;
            const char *q = p;
            while (q < end && !is_space((unsigned char)*q) && *q != ',')
                q++;
            span_t sp = make_span(s, p, q);
            asm_int_t v;
            if (parse_int(sp, &v) != PARSE_OK || v.neg || v.mag > max) {
                diag_span(a, j, sp,
                          max == 0xFF ? "expected a byte (0x00..0xFF), found '%s'"
                                      : "expected a 32-bit word, found '%s'",
                          NULL);
                free(out);
                return NULL;
            }
            if (!grow_array((void **)&out, &cap, n + 1, sizeof *out)) {
                free(out);
                out_of_memory(a);
                return NULL;
            }
            out[n++] = (uint32_t)v.mag;
            p = q;
        }
    }
    *count = n;
    if (out == NULL && (out = malloc(4)) == NULL)
        out_of_memory(a);
    return out;
}

/* Reports a GLSL compiler's messages ("NAME:LINE: error: TEXT") at the
   .basm lines they come from: the block's line LINE, or the .shader line
   for a file. */
static void devcode_glsl_errors(asm_state_t *a, uint32_t si, const char *name, const char *path,
                                const char *errors) {
    int reported = 0;
    const char *p = errors;
    size_t nlen = strlen(name);
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        unsigned line = 0;
        int at = 0;
        if (len > nlen + 1 && strncmp(p, name, nlen) == 0 && p[nlen] == ':' &&
            sscanf(p + nlen + 1, "%u:%n", &line, &at) == 1 && at > 0) {
            const char *msg = p + nlen + 1 + at;
            while (*msg == ' ')
                msg++;
            if (strncmp(msg, "error: ", 7) == 0)
                msg += 7;
            int mlen = (int)(len - (size_t)(msg - p));
            uint32_t target = si + line;
            if (path == NULL && line >= 1 && target < a->stmt_count &&
                a->stmts[target].body_of == si + 1)
                diag_at(a, target, 1, a->stmts[target].text_len ? a->stmts[target].text_len : 1,
                        "shader '%s' line %u: %.*s", name, line, mlen, msg);
            else
                diag_at(a, si, a->stmts[si].word.col, a->stmts[si].word.len,
                        "shader '%s' (%s:%u): %.*s", name, path ? path : "glsl", line, mlen, msg);
            reported = 1;
        }
        p += len + (nl ? 1 : 0);
    }
    if (!reported)
        diag_at(a, si, a->stmts[si].word.col, a->stmts[si].word.len,
                "shader '%s' does not compile: %s", name, errors);
}

static void pass1_devcode(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    int kernel = word_is(s->word, ".kernel");
    const char *what = kernel ? "kernel" : "shader";
    if (s->op_count < 2) {
        diag_at(a, si, s->word.col, s->word.len,
                kernel ? "'.kernel' needs a name and a form (ptx, cu, ptx-text or ptx-bytes)"
                       : "'.shader' needs a name and a form (file, glsl, spirv or spirv-words)");
        return;
    }
    const span_t *ops = stmt_operands(a, s);
    span_t form = ops[1];
    int has_path = kernel ? span_is(form, "ptx") || span_is(form, "cu")
                          : span_is(form, "file") || span_is(form, "spirv");
    int block = block_end(a, s) != NULL;
    if (!has_path && !block) {
        diag_span(a, si, form,
                  kernel ? "unknown kernel form '%s' (expected ptx, cu, ptx-text or ptx-bytes)"
                         : "unknown shader form '%s' (expected file, glsl, spirv or spirv-words)",
                  NULL);
        return;
    }
    asm_devcode_t d;
    memset(&d, 0, sizeof d);
    d.stmt = si;
    int bindings_given = 0, push_given = 0;
    uint64_t bindings = 0, push = 0;
    char *path = NULL;
    uint32_t first_opt = has_path ? 3 : 2;
    if (has_path && (s->op_count < 3 || (path = devcode_path(a, si, ops[2])) == NULL)) {
        if (s->op_count < 3)
            diag_span(a, si, form, "form '%s' needs a quoted file name after it", NULL);
        return;
    }
    d.name = parse_name(a, si, ops[0], what);
    int ok = d.name != NULL;
    if (ok && a->deny_device_code) {
        diag_at(a, si, s->word.col, s->word.len,
                "%s '%s' is user device code, which the load policy denies "
                "(--deny=device-code); nothing it names was read or compiled",
                what, d.name);
        ok = 0;
    }
    for (uint32_t i = first_opt; i < s->op_count && ok; i++) {
        span_t op = ops[i];
        const char *eq = memchr(op.p, '=', op.len);
        span_t key = {op.p, eq ? (uint32_t)(eq - op.p) : op.len, op.col};
        span_t val = eq ? make_span(s, eq + 1, op.p + op.len) : key;
        if (eq != NULL && span_is(key, "entry")) {
            free(d.entry);
            ok = (d.entry = parse_name(a, si, val, "entry point")) != NULL;
        } else if (eq != NULL && !kernel && span_is(key, "bindings")) {
            ok = parse_unsigned(a, si, val, BIB_MAX_SHADER_BINDINGS, &bindings, "a binding count");
            bindings_given = 1;
        } else if (eq != NULL && !kernel && span_is(key, "push")) {
            ok = parse_unsigned(a, si, val, BIB_MAX_PUSH_BYTES, &push, "a push-constant size");
            push_given = 1;
        } else if (eq != NULL && kernel && span_is(key, "params")) {
            free(d.params);
            d.params = malloc(val.len + 1);
            if (d.params == NULL) {
                out_of_memory(a);
                ok = 0;
                break;
            }
            memcpy(d.params, val.p, val.len);
            d.params[val.len] = '\0';
            if (strspn(d.params, "tilfd") != val.len || val.len > BIB_MAX_KERNEL_PARAMS) {
                diag_span(a, si, val,
                          "a parameter signature is up to 32 of the letters t (tensor), i, l "
                          "(32/64-bit integer), f, d (32/64-bit float), found '%s'",
                          NULL);
                ok = 0;
            }
        } else {
            diag_span(a, si, op,
                      kernel ? "unknown kernel option '%s' (expected entry=NAME or params=LETTERS)"
                             : "unknown shader option '%s' (expected entry=NAME, bindings=N or "
                               "push=BYTES)",
                      NULL);
            ok = 0;
        }
    }
    if (ok && d.entry == NULL && (d.entry = strdup(kernel ? d.name : "main")) == NULL) {
        out_of_memory(a);
        ok = 0;
    }
    char why[1024];
    if (ok && !kernel) {
        char *errors = NULL;
        if (span_is(form, "spirv-words")) {
            ok = (d.words = devcode_numbers(a, si, UINT32_MAX, &d.word_count)) != NULL;
            /* Declared sizes are taken as given: the disassembler prints
               them, and any module the verifier accepts must rebuild. */
            if (ok && (!bindings_given || !push_given)) {
                diag_at(a, si, s->word.col, s->word.len,
                        "a spirv-words shader declares bindings=N and push=BYTES");
                ok = 0;
            }
        } else if (span_is(form, "spirv")) {
            char *bytes = NULL;
            size_t size = 0;
            ok = bib_devcode_read_file(path, &bytes, &size, why, sizeof why);
            if (!ok)
                diag_span(a, si, ops[2], "%s", why);
            else if (size % 4 != 0 || size / 4 > BIB_MAX_SPIRV_WORDS) {
                diag_at(a, si, ops[2].col, ops[2].len,
                        "'%s' is %zu bytes: SPIR-V is whole 32-bit words (at most %u)", path, size,
                        BIB_MAX_SPIRV_WORDS);
                ok = 0;
            } else {
                d.words = (uint32_t *)bytes;
                d.word_count = (uint32_t)(size / 4);
                bytes = NULL;
            }
            free(bytes);
        } else {
            char *src = NULL;
            size_t len = 0;
            uint32_t blen = 0;
            if (span_is(form, "glsl")) {
                src = devcode_body(a, si, &blen);
                len = blen;
                ok = src != NULL;
            } else {
                ok = bib_devcode_read_file(path, &src, &len, why, sizeof why);
                if (!ok)
                    diag_span(a, si, ops[2], "%s", why);
            }
            if (ok &&
                !bib_devcode_glsl(src, len, d.name, d.entry, &d.words, &d.word_count, &errors)) {
                devcode_glsl_errors(a, si, d.name, path, errors ? errors : "out of memory");
                ok = 0;
            }
            free(src);
            free(errors);
        }
        if (ok && !span_is(form, "spirv-words")) {
            uint32_t rb, rp;
            if (!bib_devcode_reflect(d.words, d.word_count, &rb, &rp, why, sizeof why)) {
                diag_at(a, si, s->word.col, s->word.len, "shader '%s': %s", d.name, why);
                ok = 0;
            } else if ((bindings_given && bindings != rb) || (push_given && push != rp)) {
                diag_at(a, si, s->word.col, s->word.len,
                        "shader '%s' binds %u buffers and pushes %u bytes, but this line says "
                        "bindings=%llu push=%llu",
                        d.name, rb, rp, (unsigned long long)(bindings_given ? bindings : rb),
                        (unsigned long long)(push_given ? push : rp));
                ok = 0;
            } else {
                bindings = rb;
                push = rp;
            }
        }
        d.bindings = (uint32_t)bindings;
        d.push_bytes = (uint32_t)push;
    } else if (ok) {
        if (d.params == NULL) {
            diag_at(a, si, s->word.col, s->word.len,
                    "kernel '%s' needs params=LETTERS (its parameter types, one letter each)",
                    d.name);
            ok = 0;
        } else if (span_is(form, "ptx-bytes")) {
            uint32_t *bytes = devcode_numbers(a, si, 0xFF, &d.ptx_bytes);
            ok = bytes != NULL && (d.ptx = malloc((size_t)d.ptx_bytes + 1)) != NULL;
            for (uint32_t i = 0; ok && i < d.ptx_bytes; i++)
                d.ptx[i] = (char)bytes[i];
            if (ok)
                d.ptx[d.ptx_bytes] = '\0';
            else if (bytes != NULL)
                out_of_memory(a);
            free(bytes);
        } else if (span_is(form, "ptx-text")) {
            ok = (d.ptx = devcode_body(a, si, &d.ptx_bytes)) != NULL;
        } else {
            size_t size = 0;
            ok = span_is(form, "ptx") ? bib_devcode_read_file(path, &d.ptx, &size, why, sizeof why)
                                      : bib_devcode_nvcc(path, &d.ptx, &size, why, sizeof why);
            if (!ok)
                diag_span(a, si, ops[2], "%s", why);
            else if (size > BIB_MAX_PTX_BYTES || strlen(d.ptx) != size) {
                diag_span(a, si, ops[2], "the PTX of '%s' holds a NUL byte or is too large", NULL);
                ok = 0;
            }
            d.ptx_bytes = (uint32_t)size;
        }
    }
    free(path);
    asm_devcode_t **list = kernel ? &a->kernels : &a->shaders;
    uint32_t *count = kernel ? &a->kernel_count : &a->shader_count;
    uint32_t *cap = kernel ? &a->kernel_cap : &a->shader_cap;
    uint32_t kind = kernel ? SYM_KERNEL : SYM_SHADER;
    sym_t *prev = ok ? sym_find(&a->syms, d.name, kind, 0) : NULL;
    if (prev != NULL) {
        diag_span(a, si, ops[0], "'%s' is already defined", NULL);
        ok = 0;
    }
    if (ok && (!grow_array((void **)list, cap, *count + 1, sizeof **list) ||
               sym_add(&a->syms, d.name, kind, 0, *count, si) == NULL)) {
        out_of_memory(a);
        ok = 0;
    }
    if (!ok) {
        if (d.name != NULL && prev == NULL && !a->oom &&
            sym_add(&a->syms, d.name, kernel ? SYM_BROKEN_KERNEL : SYM_BROKEN_SHADER, 0, 0, si) ==
                NULL)
            out_of_memory(a);
        free(d.name);
        free(d.entry);
        free(d.params);
        free(d.words);
        free(d.ptx);
        return;
    }
    (*list)[(*count)++] = d;
}

static void pass1(asm_state_t *a) {
    uint32_t current = ASM_NONE;
    for (uint32_t si = 0; si < a->stmt_count && !a->stopped && !a->oom; si++) {
        stmt_t *s = &a->stmts[si];
        if (s->bad)
            continue;
        span_t w = s->word;
        /* .func opens its scope before its own labels would matter; a label
           on a .func line belongs to the data side, like any top-level one. */
        for (uint32_t i = 0; i < s->label_count; i++) {
            span_t l = a->spans[s->label_first + i];
            char *name = parse_name(a, si, l, "label");
            if (name == NULL)
                continue;
            uint32_t kind = current != ASM_NONE ? SYM_CODE : SYM_DATA;
            uint32_t scope = current != ASM_NONE ? current + 1 : 0;
            sym_t *prev = sym_find(&a->syms, name, kind, scope);
            if (prev != NULL)
                diag_at(a, si, l.col, l.len, "label '%s' is already defined on line %u", name,
                        a->stmts[prev->stmt].line);
            else if (sym_add(&a->syms, name, kind, scope,
                             current != ASM_NONE ? a->funcs[current].insn_count : a->data_size,
                             si) == NULL)
                out_of_memory(a);
            free(name);
        }
        if (w.len == 0) {
            s->func = current;
            continue;
        }
        if (word_is(w, ".func")) {
            pass1_func(a, si, &current);
            s->func = current;
            continue;
        }
        s->func = current;
        if (w.p[0] != '.') {
            int index = find_mnemonic(w);
            if (current == ASM_NONE) {
                diag_at(a, si, w.col, w.len,
                        "instruction outside a function (put it between '.func' and '.end')");
                s->bad = 1;
                continue;
            }
            if (index < 0)
                continue; /* reported in pass 2, beside the operand errors */
            asm_func_t *f = &a->funcs[current];
            f->insn_count++;
            f->last_op = index;
            note_registers(a, si, f, &bib_isa_table[index]);
            if (bib_isa_table[index].code == BIB_CODE_HOSTCALL) {
                const span_t *ops = stmt_operands(a, s);
                for (int k = 0, text = 0; k < 4 && text < (int)s->op_count; k++) {
                    uint32_t kind = bib_isa_table[index].kinds[k];
                    if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
                        continue;
                    if (kind == BIB_K_HOST &&
                        name_length(ops[text].p, ops[text].p + ops[text].len) == ops[text].len)
                        pass1_import(a, si, ops[text]);
                    text++;
                }
            }
            continue;
        }
        if (word_is(w, ".end")) {
            if (!expect_operands(a, si, 0, 0))
                continue;
            if (current == ASM_NONE) {
                diag_at(a, si, w.col, w.len, "'.end' without '.func'");
                continue;
            }
            a->funcs[current].ended = 1;
            current = ASM_NONE;
        } else if (is_data_directive(w)) {
            if (current != ASM_NONE) {
                diag_at(a, si, w.col, w.len,
                        "data directive '%.*s' inside function '%s' (put data outside "
                        "'.func' ... '.end')",
                        (int)w.len, w.p, a->funcs[current].name);
                continue;
            }
            pass1_data(a, si);
        } else if (is_tensor_decl(w) || word_is(w, ".tensors") || word_is(w, ".dim")) {
            if (current != ASM_NONE) {
                diag_at(a, si, w.col, w.len,
                        "'%.*s' inside function '%s' (declare tensors outside '.func' ... '.end')",
                        (int)w.len, w.p, a->funcs[current].name);
                continue;
            }
            if (is_tensor_decl(w)) {
                pass1_tensor(a, si);
            } else if (word_is(w, ".dim")) {
                for (uint32_t i = 0; i < s->op_count; i++) {
                    char *name = parse_name(a, si, a->spans[s->op_first + i], "dimension");
                    if (name != NULL)
                        dim_symbol(a, si, name);
                }
            } else if (expect_operands(a, si, 1, 1)) {
                uint64_t n;
                if (a->tensors_stmt != ASM_NONE)
                    diag_at(a, si, w.col, w.len, "'.tensors' is already given on line %u",
                            a->stmts[a->tensors_stmt].line);
                else if (parse_unsigned(a, si, a->spans[s->op_first], BIB_MAX_TENSOR_REGS, &n,
                                        "a tensor register count")) {
                    a->tensors_stmt = si;
                    a->tensors_given = (uint32_t)n;
                }
            }
        } else if (word_is(w, ".shader") || word_is(w, ".kernel")) {
            if (current != ASM_NONE) {
                diag_at(a, si, w.col, w.len,
                        "'%.*s' inside function '%s' (declare device code outside '.func' ... "
                        "'.end')",
                        (int)w.len, w.p, a->funcs[current].name);
                continue;
            }
            pass1_devcode(a, si);
        } else if (word_is(w, ".endshader") || word_is(w, ".endkernel")) {
            if (!expect_operands(a, si, 0, 0))
                continue;
            if (si == 0 ||
                (a->stmts[si - 1].body_of == 0 && block_end(a, &a->stmts[si - 1]) == NULL))
                diag_at(a, si, w.col, w.len, "'%.*s' without a '%s' block", (int)w.len, w.p,
                        word_is(w, ".endshader") ? ".shader" : ".kernel");
        } else if (word_is(w, ".const")) {
            pass1_const(a, si);
        } else if (word_is(w, ".import")) {
            if (expect_operands(a, si, 1, 1))
                pass1_import(a, si, a->spans[s->op_first]);
        } else if (word_is(w, ".memory")) {
            uint64_t size;
            if (!expect_operands(a, si, 1, 1))
                continue;
            if (a->memory_stmt != ASM_NONE) {
                diag_at(a, si, w.col, w.len, "'.memory' is already given on line %u",
                        a->stmts[a->memory_stmt].line);
                continue;
            }
            if (parse_unsigned(a, si, a->spans[s->op_first], BIB_MAX_MEMORY, &size,
                               "a memory size in bytes")) {
                a->memory_size = size;
                a->memory_stmt = si;
            }
        } else if (word_is(w, ".entry")) {
            if (!expect_operands(a, si, 1, 1))
                continue;
            if (a->entry_stmt != ASM_NONE)
                diag_at(a, si, w.col, w.len, "'.entry' is already given on line %u",
                        a->stmts[a->entry_stmt].line);
            else
                a->entry_stmt = si;
        } else if (word_is(w, ".source")) {
            if (!expect_operands(a, si, 0, 1))
                continue;
            free(a->source_name);
            a->source_name = NULL;
            a->source_set = 1;
            if (s->op_count == 1)
                a->source_name = parse_name(a, si, a->spans[s->op_first], "source file");
        } else if (word_is(w, ".nodebug")) {
            if (expect_operands(a, si, 0, 0))
                a->nodebug = 1;
        } else if (word_is(w, ".data")) {
            if (!expect_operands(a, si, 0, 0))
                continue;
            if (current != ASM_NONE)
                diag_at(a, si, w.col, w.len, "'.data' inside function '%s' (missing '.end'?)",
                        a->funcs[current].name);
        } else if (word_is(w, ".line")) {
            /* applied in pass 2, where instructions are emitted in order */
        } else {
            diag_span(a, si, w, "unknown directive '%s'", NULL);
            s->bad = 1;
        }
    }
    if (current != ASM_NONE && !a->stopped)
        diag_at(a, a->funcs[current].stmt, a->stmts[a->funcs[current].stmt].word.col, 5,
                "function '%s' has no '.end'", a->funcs[current].name);
}

/* Data labels named in .i32/.i64 are resolved once every label is known. */
static void resolve_fixups(asm_state_t *a) {
    for (uint32_t i = 0; i < a->fixup_count && !a->stopped; i++) {
        data_fixup_t *fx = &a->fixups[i];
        asm_int_t v;
        if (!parse_int_expr(a, fx->stmt, fx->op, &v, 0))
            continue;
        if (!int_fits(v, fx->width == 8 ? INT64_MIN : INT32_MIN,
                      fx->width == 8 ? UINT64_MAX : UINT32_MAX)) {
            diag_span(a, fx->stmt, fx->op, "address %s does not fit the field", NULL);
            continue;
        }
        put_le(a->data + fx->offset, int_bits(v), fx->width);
    }
}

/* ---- pass 2: instructions ----------------------------------------------- */

typedef struct pass2 {
    asm_state_t *a;
    bib_builder_t *b;
    uint32_t func; /* current function */
    uint32_t line; /* the next instruction's line, once a .line has set it */
    int line_set;
    uint32_t callee;              /* FN operand of the instruction being parsed */
    uint32_t host_call;           /* the instruction has a HOST operand */
    const asm_devcode_t *program; /* SHADER or KERNEL operand of the instruction, or NULL */
} pass2_t;

/* After '.line N', each instruction gets the line after the one before it,
   so one .line covers a run of one-instruction source lines. 0 (unknown)
   stays unknown, and the line after UINT32_MAX wraps to 0. disasm.c
   decides where to print '.line' by the same rule. */
static uint32_t line_after(uint32_t line) {
    return line == 0 ? 0 : line + 1;
}

static void builder_const(bib_builder_t *b, bib_const_t k) {
    double d;
    memcpy(&d, &k.bits, sizeof d);
    if (k.type == BIB_CONST_F64)
        bib_builder_const_f64(b, d);
    else
        bib_builder_const_i64(b, (int64_t)k.bits);
}

static uint32_t code_label_id(pass2_t *p, sym_t *sym) {
    if (sym->label_id == ASM_NONE)
        sym->label_id = bib_builder_label(p->b);
    return sym->label_id;
}

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
        if (!parse_reg(op, 'r', &reg)) {
            diag_span(a, si, op, "expected a register (r0, r1, ...), found '%s'", NULL);
            return 0;
        }
        if (reg >= f->nregs) {
            diag_at(a, si, op.col, op.len,
                    "register r%u is out of range: function '%s' has regs=%u (r0..r%u)", reg,
                    f->name, f->nregs, f->nregs - 1);
            return 0;
        }
        *word = reg;
        return 1;
    case BIB_K_TD:
    case BIB_K_TS:
    case BIB_K_TM: {
        if (parse_reg(op, 't', &reg)) {
            if (reg >= BIB_MAX_TENSOR_REGS) {
                diag_at(a, si, op.col, op.len, "tensor register t%u is out of range (t0..t%u)", reg,
                        BIB_MAX_TENSOR_REGS - 1);
                return 0;
            }
            *word = reg;
            return 1;
        }
        if (name_length(op.p, op.p + op.len) != op.len) {
            diag_span(a, si, op, "expected a tensor register (t0, t1, ...) or name, found '%s'",
                      NULL);
            return 0;
        }
        char *name = parse_name(a, si, op, "tensor");
        if (name == NULL)
            return 0;
        sym_t *sym = sym_find(&a->syms, name, SYM_TENSOR, 0);
        free(name);
        if (sym == NULL) {
            diag_span(a, si, op,
                      "unknown tensor '%s' (declare it with .input, .output or .tensor, or name "
                      "a register t0, t1, ...)",
                      NULL);
            return 0;
        }
        *word = a->tensors[sym->value].reg;
        return 1;
    }
    case BIB_K_IMM: {
        asm_int_t v;
        if (!parse_int_expr(a, si, op, &v, 0))
            return 0;
        if (!int_fits(v, INT32_MIN, INT32_MAX)) {
            char text[32];
            int_text(v, text, sizeof text);
            diag_at(a, si, op.col, op.len, "value %s does not fit a signed 32-bit immediate%s",
                    text, info->code == BIB_CODE_LDI ? "; use LDI64" : "");
            return 0;
        }
        *word = (uint32_t)int_bits(v);
        return 1;
    }
    case BIB_K_IMMLO: {
        asm_int_t v;
        uint64_t bits;
        if (parse_int_expr(a, si, op, &v, 1)) {
            if (!int_fits(v, INT64_MIN, UINT64_MAX)) {
                diag_span(a, si, op, "value %s does not fit 64 bits", NULL);
                return 0;
            }
            bits = int_bits(v);
        } else if (looks_float(op) && parse_float(op, 64, &bits) == PARSE_OK) {
            /* the f64 bit pattern */
        } else {
            if (looks_float(op))
                diag_span(a, si, op, "malformed float '%s'", NULL);
            return 0;
        }
        *word = (uint32_t)bits;
        *word_hi = (uint32_t)(bits >> 32);
        return 1;
    }
    case BIB_K_COUNT: {
        uint64_t n;
        if (!parse_unsigned(a, si, op, UINT32_MAX, &n, "a count"))
            return 0;
        if (prev_rs != ASM_NONE && prev_rs + n > f->nregs) {
            diag_at(a, si, op.col, op.len,
                    "registers r%u..r%llu are out of range: function '%s' has regs=%u", prev_rs,
                    (unsigned long long)(prev_rs + n - 1), f->name, f->nregs);
            return 0;
        }
        if (p->callee != ASM_NONE && n != a->funcs[p->callee].nargs) {
            diag_at(a, si, op.col, op.len,
                    "function '%s' takes %u argument%s, this call passes %llu",
                    a->funcs[p->callee].name, a->funcs[p->callee].nargs,
                    a->funcs[p->callee].nargs == 1 ? "" : "s", (unsigned long long)n);
            return 0;
        }
        if (p->program != NULL) {
            int shader = p->program->params == NULL;
            uint32_t want = shader ? p->program->bindings : (uint32_t)strlen(p->program->params);
            uint32_t extra = shader ? p->program->push_bytes / 4 : 0;
            if (n != want) {
                diag_at(a, si, op.col, op.len, "%s '%s' takes %u %s, this passes %llu",
                        shader ? "shader" : "kernel", p->program->name, want,
                        shader ? "bindings" : "arguments", (unsigned long long)n);
                return 0;
            }
            if (prev_rs != ASM_NONE && prev_rs + n + extra > f->nregs) {
                diag_at(a, si, op.col, op.len,
                        "registers r%u..r%llu (%llu arguments and %u pushed words) are out of "
                        "range: function '%s' has regs=%u",
                        prev_rs, (unsigned long long)(prev_rs + n + extra - 1),
                        (unsigned long long)n, extra, f->name, f->nregs);
                return 0;
            }
        }
        if (p->host_call && n > BIB_MAX_HOST_ARGS) {
            diag_at(a, si, op.col, op.len, "a host call passes at most %u arguments, found %llu",
                    BIB_MAX_HOST_ARGS, (unsigned long long)n);
            return 0;
        }
        *word = (uint32_t)n;
        return 1;
    }
    case BIB_K_DTYPE:
        if (!parse_dtype(op, word)) {
            diag_span(a, si, op, "expected an element type (f32 or i32), found '%s'", NULL);
            return 0;
        }
        return 1;
    case BIB_K_CONST: {
        if (op.len > 1 && op.p[0] == '=') {
            span_t lit = {op.p + 1, op.len - 1, op.col + 1};
            while (lit.len > 0 && is_space((unsigned char)lit.p[0])) {
                lit.p++;
                lit.len--;
                lit.col++;
            }
            uint32_t type = looks_float(lit) ? BIB_CONST_F64 : BIB_CONST_I64;
            uint64_t bits;
            if (!parse_const_value(a, si, lit, type, &bits))
                return 0;
            for (uint32_t i = 0; i < a->const_count; i++) {
                if (a->consts[i].type == type && a->consts[i].bits == bits) {
                    *word = i;
                    return 1;
                }
            }
            uint32_t index = add_const(a, type, bits);
            if (index == ASM_NONE)
                return 0;
            builder_const(p->b, a->consts[index]);
            *word = index;
            return 1;
        }
        char *name = parse_name(a, si, op, "constant");
        if (name == NULL)
            return 0;
        sym_t *sym = sym_find(&a->syms, name, SYM_CONST, 0);
        free(name);
        if (sym == NULL) {
            diag_span(a, si, op, "unknown constant '%s' (declare it with '.const' or write =VALUE)",
                      NULL);
            return 0;
        }
        *word = (uint32_t)sym->value;
        return 1;
    }
    case BIB_K_TGT: {
        char *name = parse_name(a, si, op, "label");
        if (name == NULL)
            return 0;
        sym_t *sym = sym_find(&a->syms, name, SYM_CODE, p->func + 1);
        free(name);
        if (sym == NULL) {
            diag_span(a, si, op, "unknown label '%s'", NULL);
            return 0;
        }
        if (sym->value >= f->insn_count) {
            diag_span(a, si, op,
                      "label '%s' marks no instruction (it is at the end of the function)", NULL);
            return 0;
        }
        *word = code_label_id(p, sym);
        return 1;
    }
    case BIB_K_FN: {
        char *name = parse_name(a, si, op, "function");
        if (name == NULL)
            return 0;
        sym_t *sym = sym_find(&a->syms, name, SYM_FUNC, 0);
        free(name);
        if (sym == NULL) {
            diag_span(a, si, op, "unknown function '%s'", NULL);
            return 0;
        }
        p->callee = (uint32_t)sym->value;
        *word = p->callee;
        return 1;
    }
    case BIB_K_HOST: {
        char *name = parse_name(a, si, op, "host function");
        if (name == NULL)
            return 0;
        sym_t *sym = sym_find(&a->syms, name, SYM_IMPORT, 0);
        free(name);
        if (sym == NULL) /* pass 1 imports every well-formed name */
            return 0;
        p->host_call = 1;
        *word = (uint32_t)sym->value;
        return 1;
    }
    case BIB_K_SHADER:
    case BIB_K_KERNEL: {
        int shader = kind == BIB_K_SHADER;
        char *name = parse_name(a, si, op, shader ? "shader" : "kernel");
        if (name == NULL)
            return 0;
        sym_t *sym = sym_find(&a->syms, name, shader ? SYM_SHADER : SYM_KERNEL, 0);
        int broken =
            sym == NULL &&
            sym_find(&a->syms, name, shader ? SYM_BROKEN_SHADER : SYM_BROKEN_KERNEL, 0) != NULL;
        free(name);
        if (broken)
            return 0;
        if (sym == NULL) {
            diag_span(a, si, op,
                      shader ? "unknown shader '%s' (declare it with '.shader')"
                             : "unknown kernel '%s' (declare it with '.kernel')",
                      NULL);
            return 0;
        }
        p->program = shader ? &a->shaders[sym->value] : &a->kernels[sym->value];
        *word = (uint32_t)sym->value;
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
    int index = find_mnemonic(s->word);
    if (index < 0) {
        diag_span(a, si, s->word, "unknown mnemonic '%s'", NULL);
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
        diag_at(a, si, s->word.col, s->word.len, "'%s' takes %u operand%s%s%s%s, found %u",
                info->name, expected, expected == 1 ? "" : "s", expected ? " (" : "", kinds,
                expected ? ")" : "", s->op_count);
        return;
    }
    uint32_t words[4] = {0, 0, 0, 0};
    uint32_t text = 0, prev_rs = ASM_NONE;
    p->callee = ASM_NONE;
    p->host_call = 0;
    p->program = NULL;
    for (int k = 0; k < 4; k++) {
        uint32_t kind = info->kinds[k];
        if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
            continue;
        span_t op = a->spans[s->op_first + text++];
        uint32_t hi = 0;
        if (!parse_operand(p, si, info, kind, op, kind == BIB_K_COUNT ? prev_rs : ASM_NONE,
                           &words[k], &hi))
            return;
        if (kind == BIB_K_IMMLO && k < 3)
            words[k + 1] = hi;
        /* The launch size registers follow a device program operand. */
        uint32_t geometry = p->program == NULL ? 0 : p->program->params == NULL ? 3 : 6;
        if (kind == BIB_K_RS && k > 0 && geometry > 0 &&
            (info->kinds[k - 1] == BIB_K_SHADER || info->kinds[k - 1] == BIB_K_KERNEL) &&
            words[k] + geometry > a->funcs[p->func].nregs) {
            diag_at(a, si, op.col, op.len,
                    "registers r%u..r%u (the launch size) are out of range: function '%s' has "
                    "regs=%u",
                    words[k], words[k] + geometry - 1, a->funcs[p->func].name,
                    a->funcs[p->func].nregs);
            return;
        }
        prev_rs = kind == BIB_K_RS ? words[k] : ASM_NONE;
    }
    if (info->flags & BIB_F_RESERVED) {
        diag_at(a, si, s->word.col, s->word.len, "'%s' is reserved: not implemented in this build",
                info->name);
        return;
    }
    bib_builder_line(p->b, p->line_set ? p->line : s->line);
    bib_builder_emit(p->b, info->code, words[0], words[1], words[2], words[3]);
    if (p->line_set)
        p->line = line_after(p->line);
    if (!grow_array((void **)&a->pc_stmt, &a->pc_cap, a->pc_count + 1, sizeof *a->pc_stmt))
        out_of_memory(a);
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

static void pass2(pass2_t *p) {
    asm_state_t *a = p->a;
    p->func = ASM_NONE;
    for (uint32_t si = 0; si < a->stmt_count && !a->stopped && !a->oom; si++) {
        stmt_t *s = &a->stmts[si];
        if (s->bad)
            continue;
        span_t w = s->word;
        if (word_is(w, ".func")) {
            p->func = s->func;
            if (p->func == ASM_NONE)
                continue;
            asm_func_t *f = &a->funcs[p->func];
            bib_builder_begin(p->b, p->func, f->nargs, f->nregs);
            continue;
        }
        if (s->func != ASM_NONE && s->func == p->func) {
            for (uint32_t i = 0; i < s->label_count; i++) {
                span_t l = a->spans[s->label_first + i];
                char *name = parse_name(a, si, l, "label");
                sym_t *sym = name ? sym_find(&a->syms, name, SYM_CODE, p->func + 1) : NULL;
                if (sym != NULL && sym->stmt == si) {
                    bib_builder_bind(p->b, code_label_id(p, sym));
                    bib_builder_label_name(p->b, name);
                }
                free(name);
            }
        }
        if (w.len == 0)
            continue;
        if (w.p[0] != '.') {
            if (p->func != ASM_NONE)
                pass2_instruction(p, si);
        } else if (word_is(w, ".end")) {
            if (p->func == ASM_NONE)
                continue;
            asm_func_t *f = &a->funcs[p->func];
            if (f->insn_count == 0) {
                diag_at(a, si, w.col, w.len, "function '%s' has no instructions", f->name);
            } else if (!(bib_isa_table[f->last_op].flags & BIB_F_TERM)) {
                char terms[96];
                terminator_list(terms, sizeof terms);
                diag_at(a, si, w.col, w.len,
                        "function '%s' falls off its end: its last instruction (%s) must be one "
                        "of %s",
                        f->name, bib_isa_table[f->last_op].name, terms);
            }
            bib_builder_end(p->b);
            p->func = ASM_NONE;
        } else if (word_is(w, ".line")) {
            uint64_t n;
            if (expect_operands(a, si, 1, 1) &&
                parse_unsigned(a, si, a->spans[s->op_first], UINT32_MAX, &n, "a line number")) {
                p->line = (uint32_t)n;
                p->line_set = 1;
            }
        }
    }
}

/* ---- driver ----------------------------------------------------------- */

static int span_is(span_t sp, const char *text) {
    return sp.len == strlen(text) && strncasecmp(sp.p, text, sp.len) == 0;
}

/* The directive that closes the raw block a '.shader' or '.kernel' line
   opens (".endshader", ".endkernel"), or NULL when its form names a file. */
static const char *block_end(const asm_state_t *a, const stmt_t *s) {
    if (s->bad || s->op_count < 2)
        return NULL;
    span_t form = a->spans[s->op_first + 1];
    if (word_is(s->word, ".shader") && (span_is(form, "glsl") || span_is(form, "spirv-words")))
        return ".endshader";
    if (word_is(s->word, ".kernel") &&
        (span_is(form, "ptx-text") || span_is(form, "ptx-bytes") || span_is(form, "cu-text")))
        return ".endkernel";
    return NULL;
}

/* Whether the line's text, blanks and comment aside, is the directive. */
static int line_is(const char *text, uint32_t len, const char *directive) {
    const char *p = text, *end = text + len;
    while (p < end && is_space((unsigned char)*p))
        p++;
    size_t n = strlen(directive);
    if ((size_t)(end - p) < n || strncasecmp(p, directive, n) != 0)
        return 0;
    p += n;
    while (p < end && is_space((unsigned char)*p))
        p++;
    return p == end || *p == ';';
}

static void split_lines(asm_state_t *a, const char *src, size_t length) {
    const char *p = src, *end = src + length;
    uint32_t line = 1;
    uint32_t open = ASM_NONE;  /* the '.tensor' whose value list goes on */
    uint32_t block = ASM_NONE; /* the '.shader' or '.kernel' whose raw lines go on */
    const char *block_close = NULL;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if (stop > p && stop[-1] == '\r')
            stop--;
        if (!grow_array((void **)&a->stmts, &a->stmt_cap, a->stmt_count + 1, sizeof *a->stmts)) {
            out_of_memory(a);
            return;
        }
        stmt_t *s = &a->stmts[a->stmt_count++];
        memset(s, 0, sizeof *s);
        s->line = line++;
        s->text = p;
        s->text_len = (uint32_t)(stop - p);
        s->func = ASM_NONE;
        uint32_t si = a->stmt_count - 1;
        const char *nul = memchr(p, '\0', (size_t)(stop - p));
        if ((size_t)(stop - p) > UINT32_MAX / 2) {
            diag_at(a, si, 1, 1, "line is too long");
            s->bad = 1;
            open = ASM_NONE;
        } else if (nul != NULL) {
            /* Text holds no NUL: one would end the line early in every C
               string that carries it, and hide what follows. */
            diag_at(a, si, (uint32_t)(nul - p) + 1, 1, "a NUL byte in the line");
            s->bad = 1;
            open = ASM_NONE;
        } else if (block != ASM_NONE && !line_is(s->text, s->text_len, block_close)) {
            s->body_of = block + 1; /* device source: kept verbatim, not parsed */
        } else if (block != ASM_NONE) {
            parse_line(a, si);
            block = ASM_NONE;
        } else if (open != ASM_NONE) {
            s->owner = open + 1;
            parse_continuation(a, si);
            if (!a->stmts[si].continued || a->stmts[si].bad)
                open = ASM_NONE;
        } else {
            parse_line(a, si);
            if (a->stmts[si].continued && !a->stmts[si].bad)
                open = si;
            else if ((block_close = block_end(a, &a->stmts[si])) != NULL)
                block = si;
        }
        if (a->stopped || a->oom)
            return;
        p = nl ? nl + 1 : end;
    }
    if (open != ASM_NONE)
        diag_at(a, open, a->stmts[open].word.col, a->stmts[open].word.len,
                "the value list goes on past the end of the file (it ends with ',' or '\\')");
    if (block != ASM_NONE) {
        diag_at(a, block, a->stmts[block].word.col, a->stmts[block].word.len,
                "this block has no '%s' line before the end of the file", block_close);
        a->stmts[block].bad = 1;
    }
}

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
        diag_at(a, a->tensors_stmt, s->word.col, s->word.len,
                "'.tensors %u' is smaller than the %u tensor registers used (t%u is named on line "
                "%u)",
                a->tensors_given, a->tregs_used, a->tregs_used - 1, a->stmts[a->tregs_stmt].line);
    }
    if (a->func_count == 0 && a->errors == 0)
        diag_at(a, ASM_NONE, 0, 0, "no functions: write one with '.func main' ... '.end'");
    if (a->memory_stmt != ASM_NONE && a->memory_size < a->data_size) {
        const stmt_t *s = &a->stmts[a->memory_stmt];
        diag_at(a, a->memory_stmt, s->word.col, s->word.len,
                "memory size %llu is smaller than the %llu bytes of data",
                (unsigned long long)a->memory_size, (unsigned long long)a->data_size);
    }
}

static uint32_t entry_function(asm_state_t *a) {
    if (a->entry_stmt != ASM_NONE) {
        span_t op = a->spans[a->stmts[a->entry_stmt].op_first];
        char *name = parse_name(a, a->entry_stmt, op, "function");
        if (name == NULL)
            return ASM_NONE;
        sym_t *sym = sym_find(&a->syms, name, SYM_FUNC, 0);
        free(name);
        if (sym == NULL) {
            diag_span(a, a->entry_stmt, op, "unknown function '%s'", NULL);
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
    symtab_free(&a->syms);
    for (uint32_t i = 0; i < a->func_count; i++)
        free(a->funcs[i].name);
    free(a->funcs);
    for (uint32_t i = 0; i < a->import_count; i++)
        free(a->imports[i]);
    free(a->imports);
    free(a->consts);
    free(a->data);
    free(a->fixups);
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
    split_lines(a, source, length);
    if (!a->stopped && !a->oom)
        pass1(a);
    if (!a->stopped && !a->oom)
        resolve_fixups(a);
    if (!a->stopped && !a->oom)
        check_module(a);
    uint32_t entry = entry_function(a);
    if (entry != ASM_NONE && entry < a->func_count && a->funcs[entry].nargs != 0)
        diag_at(a, a->funcs[entry].stmt, a->stmts[a->funcs[entry].stmt].word.col, 5,
                "entry function '%s' takes %u arguments; the entry must take none",
                a->funcs[entry].name, a->funcs[entry].nargs);
    if (a->stopped || a->oom)
        return BIB_E_ASM;

    bib_builder_t *b = bib_builder_create();
    if (b == NULL) {
        out_of_memory(a);
        return BIB_E_ASM;
    }
    for (uint32_t i = 0; i < a->func_count; i++)
        bib_builder_declare(b, a->funcs[i].name);
    for (uint32_t i = 0; i < a->import_count; i++)
        bib_builder_import(b, a->imports[i]);
    for (uint32_t i = 0; i < a->const_count; i++)
        builder_const(b, a->consts[i]);
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
    pass2(&p);
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
    bib_builder_memory(b, a->memory_stmt != ASM_NONE ? a->memory_size : a->data_size);
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
        diag_at(a, a->pc_stmt[pc], s->word.col, s->word.len, "%s", bib_builder_error(b));
    } else if (st != BIB_OK) {
        diag_at(a, ASM_NONE, 0, 0, "%s", bib_builder_error(b));
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
        *diagnostics = diags_text(&a);
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
