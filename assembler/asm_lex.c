/* assembler/asm_lex.c: the assembler's lexer, symbol table and diagnostics.
 *
 * Owns splitting the source into lines and raw blocks (bib_asm_split_lines),
 * each line into a word and its operand spans (parse_line), the literal readers
 * (integers, floats, characters, strings, names, registers, mnemonics,
 * label+offset expressions), the symbol table, and the collected
 * "file:line:col: error:" messages with their source line and caret.
 *
 * It does not decide what a directive or an instruction means: that is
 * asm_directives.c, asm_devcode.c and asm_operands.c.
 */
#include "assembler/asm_internal.h"

#include <limits.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- symbols ------------------------------------------------------------ */

/* A symbol's kind and scope are the space of its name in the index. */
static uint64_t sym_space(uint32_t kind, uint32_t scope) {
    return (uint64_t)scope << 32 | kind;
}

sym_t *bib_asm_sym_find(symtab_t *st, const char *name, uint32_t kind, uint32_t scope) {
    uint32_t i = bib_names_find(&st->index, sym_space(kind, scope), name);
    return i == BIB_NAMES_NONE ? NULL : &st->syms[i];
}

/* Adds a symbol that bib_asm_sym_find did not find; NULL when out of memory. */
sym_t *bib_asm_sym_add(symtab_t *st, const char *name, uint32_t kind, uint32_t scope,
                       uint64_t value, uint32_t stmt) {
    if (!bib_asm_grow_array((void **)&st->syms, &st->cap, st->count + 1, sizeof *st->syms) ||
        bib_names_add(&st->index, sym_space(kind, scope), name, st->count) != st->count)
        return NULL;
    sym_t *s = &st->syms[st->count++];
    *s = (sym_t){kind, scope, value, ASM_NONE, stmt};
    return s;
}

void bib_asm_symtab_free(symtab_t *st) {
    free(st->syms);
    bib_names_free(&st->index);
}

int bib_asm_grow_array(void **array, uint32_t *cap, uint32_t need, size_t elem) {
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

/* The most bytes of a source line a diagnostic shows. */
#define ASM_EXCERPT 160u

void bib_asm_diag_at(asm_state_t *a, uint32_t stmt, uint32_t col, uint32_t len, const char *format,
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
    bib_asm_text_vprintf(&t, format, ap);
    va_end(ap);
    bib_asm_text_put(&t, "\n", 1);
    if (s != NULL) {
        /* A long line is shown as a window of ASM_EXCERPT bytes around the
           column, "..." marking what is cut, so a diagnostic stays a few
           lines whatever the line's length. */
        uint32_t from = 0, to = s->text_len;
        if (s->text_len > ASM_EXCERPT) {
            uint32_t at = col > 0 ? col - 1 : 0;
            from = at > ASM_EXCERPT / 2 ? at - ASM_EXCERPT / 2 : 0;
            if (from > s->text_len)
                from = s->text_len;
            to = s->text_len - from > ASM_EXCERPT ? from + ASM_EXCERPT : s->text_len;
        }
        if (from > 0)
            bib_asm_text_put(&t, "...", 3);
        /* A NUL in the line is shown as U+2400, one column, so the caret
           stays under it and the text stays one C string. */
        for (uint32_t i = from; i < to; i++)
            if (s->text[i] == '\0')
                bib_asm_text_put(&t, "\xe2\x90\x80", 3);
            else
                bib_asm_text_put(&t, s->text + i, 1);
        if (to < s->text_len)
            bib_asm_text_put(&t, "...", 3);
        bib_asm_text_put(&t, "\n", 1);
        /* Tabs are copied so that the caret lines up under any tab width. */
        if (from > 0)
            bib_asm_text_put(&t, "   ", 3);
        for (uint32_t i = from; i + 1 < col && i < to; i++)
            bib_asm_text_put(&t, s->text[i] == '\t' ? "\t" : " ", 1);
        bib_asm_text_put(&t, "^", 1);
        for (uint32_t i = 1; i < len && col + i <= to; i++)
            bib_asm_text_put(&t, "~", 1);
        bib_asm_text_put(&t, "\n", 1);
    }
    if (t.failed ||
        !bib_asm_grow_array((void **)&a->diags, &a->diag_cap, a->errors + 1, sizeof *a->diags)) {
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
char *bib_asm_diags_text(asm_state_t *a) {
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

void bib_asm_diag_span(asm_state_t *a, uint32_t stmt, span_t sp, const char *format,
                       const char *arg) {
    char text[64];
    /* Long operands are cut so the message stays one readable line. */
    if (arg == NULL) {
        uint32_t n = sp.len < sizeof text - 4 ? sp.len : (uint32_t)sizeof text - 4;
        memcpy(text, sp.p, n);
        strcpy(text + n, n < sp.len ? "..." : "");
        arg = text;
    }
    bib_asm_diag_at(a, stmt, sp.col, sp.len, format, arg);
}

void bib_asm_out_of_memory(asm_state_t *a) {
    a->oom = 1;
}

/* After a builder call failed in a pass: running out of memory is the
   assembler's to report; any other failure the builder keeps, and finish
   reports it. */
void bib_asm_builder_failed(asm_state_t *a) {
    if (bib_builder_status(a->b) == BIB_E_NOMEM)
        bib_asm_out_of_memory(a);
}

/* ---- lexical helpers ---------------------------------------------------- */

int bib_asm_is_space(int c) {
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
const char *bib_asm_skip_quoted(const char *p, const char *end) {
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
long bib_asm_unescape(const char *p, uint32_t n, uint8_t *out, uint32_t *bad_at, const char **why) {
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

/* Keeps a span of statement s's line (bib_asm_make_span made it). */
static int push_span(asm_state_t *a, span_t sp) {
    if (!bib_asm_grow_array((void **)&a->spans, &a->span_cap, a->span_count + 1,
                            sizeof *a->spans)) {
        bib_asm_out_of_memory(a);
        return 0;
    }
    a->spans[a->span_count++] = (span_at_t){sp.col, sp.len};
    return 1;
}

/* The span at column at.col (from 1) of s's line; column 0, no word, is
 * the line's start, so no pointer before the text is formed. */
static span_t span_of(const stmt_t *s, span_at_t at) {
    return (span_t){s->text + (at.col ? at.col - 1 : 0), at.len, at.col};
}

span_t bib_asm_operand(const asm_state_t *a, const stmt_t *s, uint32_t index) {
    return span_of(s, a->spans[s->op_first + index]);
}

span_t bib_asm_label(const asm_state_t *a, const stmt_t *s, uint32_t index) {
    return span_of(s, a->spans[s->label_first + index]);
}

span_t bib_asm_word(const stmt_t *s) {
    return span_of(s, s->word);
}

span_t bib_asm_make_span(const stmt_t *s, const char *p, const char *end) {
    return (span_t){p, (uint32_t)(end - p), (uint32_t)(p - s->text) + 1};
}

/* Length of the name (identifier or quoted) at p, 0 when there is none. */
uint32_t bib_asm_name_length(const char *p, const char *end) {
    if (p < end && *p == '"') {
        const char *q = bib_asm_skip_quoted(p, end);
        return q ? (uint32_t)(q - p) : 0;
    }
    if (p >= end || !bib_asm_is_ident_start((unsigned char)*p))
        return 0;
    const char *q = p + 1;
    while (q < end && bib_asm_is_ident_char((unsigned char)*q))
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
            const char *close = bib_asm_skip_quoted(q, end);
            if (close == NULL) {
                bib_asm_diag_at(a, si, (uint32_t)(q - s->text) + 1, 1,
                                *q == '"' ? "unterminated string"
                                          : "unterminated character literal");
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
    while (end > p && bib_asm_is_space((unsigned char)end[-1]))
        end--;
    return end;
}

int bib_asm_is_tensor_decl(span_t w) {
    return (w.len == 6 && strncasecmp(w.p, ".input", 6) == 0) ||
           (w.len == 7 && strncasecmp(w.p, ".output", 7) == 0) ||
           (w.len == 7 && strncasecmp(w.p, ".tensor", 7) == 0);
}

/* Adds the list item from start to p, less trailing blanks, to the statement's
   operands; an empty one is an error ("missing WHAT"). 0 stops the list. */
static int push_item(asm_state_t *a, uint32_t si, const char *start, const char *p,
                     const char *what) {
    stmt_t *s = &a->stmts[si];
    const char *stop = p;
    while (stop > start && bib_asm_is_space((unsigned char)stop[-1]))
        stop--;
    if (stop == start) {
        bib_asm_diag_at(a, si, (uint32_t)(start - s->text) + 1, 1, "missing %s", what);
        s->bad = 1;
        return 0;
    }
    if (!push_span(a, bib_asm_make_span(s, start, stop)))
        return 0;
    s->op_count++;
    return 1;
}

/* Splits a '.tensor' value list at commas into the statement's operands. A
   list that ends with ',' or '\\' goes on on the next line. */
static void split_values(asm_state_t *a, uint32_t si, const char *p, const char *end) {
    stmt_t *s = &a->stmts[si];
    while (p < end && bib_asm_is_space((unsigned char)*p))
        p++;
    if (end > p && end[-1] == '\\') {
        s->continued = 1;
        end--;
        while (end > p && bib_asm_is_space((unsigned char)end[-1]))
            end--;
    }
    while (p < end) {
        const char *start = p;
        while (p < end && *p != ',') {
            const char *q = *p == '\'' ? bib_asm_skip_quoted(p, end) : NULL;
            p = q != NULL ? q : p + 1;
        }
        if (!push_item(a, si, start, p, "value"))
            return;
        if (p >= end)
            return;
        p++;
        while (p < end && bib_asm_is_space((unsigned char)*p))
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
        while (p < end && (bib_asm_is_space((unsigned char)*p) || *p == ','))
            p++;
        if (p >= end)
            return;
        if (*p == '=') {
            if (!push_span(a, bib_asm_make_span(s, p, p + 1)))
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
               and the NULL from bib_asm_skip_quoted was then dereferenced. */
            if (*p == '"' || *p == '\'') {
                const char *close = bib_asm_skip_quoted(p, end); /* closed: see strip_comment */
                p = close != NULL ? close : end;
                continue;
            }
            if (*p == '[') {
                depth++;
            } else if (*p == ']' && depth > 0) {
                depth--;
            } else if (depth == 0 &&
                       (bib_asm_is_space((unsigned char)*p) || *p == ',' || *p == '=')) {
                const char *q = p;
                while (q < end && bib_asm_is_space((unsigned char)*q))
                    q++;
                if (q < end && *q == '[') {
                    p = q;
                    continue;
                }
                break;
            }
            p++;
        }
        if (!push_span(a, bib_asm_make_span(s, start, p)))
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
    while (p < end && bib_asm_is_space((unsigned char)*p))
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
        while (p < end && bib_asm_is_space((unsigned char)*p))
            p++;
        uint32_t n = bib_asm_name_length(p, end);
        if (n == 0)
            break;
        const char *q = p + n;
        while (q < end && bib_asm_is_space((unsigned char)*q))
            q++;
        if (q >= end || *q != ':')
            break;
        if (!push_span(a, bib_asm_make_span(s, p, p + n)))
            return;
        s->label_count++;
        p = q + 1;
    }
    if (p >= end)
        return;

    const char *w = p;
    if (*p == '.')
        p++;
    while (p < end && bib_asm_is_ident_char((unsigned char)*p))
        p++;
    if (p == w || (*w == '.' && p == w + 1) || (p < end && !bib_asm_is_space((unsigned char)*p))) {
        const char *q = w;
        while (q < end && !bib_asm_is_space((unsigned char)*q) && *q != ',')
            q++;
        bib_asm_diag_span(a, si, bib_asm_make_span(s, w, q == w ? w + 1 : q),
                          "expected a mnemonic, a directive or a label, found '%s'", NULL);
        s->bad = 1;
        return;
    }
    s->word = (span_at_t){(uint32_t)(w - s->text) + 1, (uint32_t)(p - w)};
    if (bib_asm_is_tensor_decl(bib_asm_word(s))) {
        s->op_first = a->span_count;
        parse_decl_operands(a, si, p, end);
        return;
    }

    int words = word_separated(bib_asm_word(s));
    s->op_first = a->span_count;
    while (p < end && bib_asm_is_space((unsigned char)*p))
        p++;
    if (p >= end)
        return;
    for (;;) {
        const char *start = p;
        int depth = 0;
        while (p < end) {
            if (*p == '"' || *p == '\'') {
                p = bib_asm_skip_quoted(p, end); /* closed: checked above */
                continue;
            }
            if (*p == '(')
                depth++;
            else if (*p == ')' && depth > 0)
                depth--;
            else if (depth == 0 && (*p == ',' || (words && bib_asm_is_space((unsigned char)*p))))
                break;
            p++;
        }
        if (!push_item(a, si, start, p, "operand"))
            return;
        if (p >= end)
            return;
        int comma = *p == ',';
        p++;
        while (p < end && (bib_asm_is_space((unsigned char)*p) || (words && !comma && *p == ','))) {
            comma |= *p == ',';
            p++;
        }
        if (p >= end) {
            if (comma) {
                bib_asm_diag_at(a, si, (uint32_t)(end - s->text) + 1, 1,
                                "missing operand after ','");
                s->bad = 1;
            }
            return;
        }
    }
}

/* ---- operand values ----------------------------------------------------- */

uint64_t bib_asm_int_bits(asm_int_t v) {
    return v.neg ? 0 - v.mag : v.mag;
}

int bib_asm_int_fits(asm_int_t v, int64_t lo, uint64_t hi) {
    if (v.neg)
        return v.mag == 0 || (lo < 0 && v.mag - 1 <= (uint64_t)(-(lo + 1)));
    return v.mag <= hi;
}

void bib_asm_int_text(asm_int_t v, char *out, size_t cap) {
    snprintf(out, cap, "%s%llu", v.neg ? "-" : "", (unsigned long long)v.mag);
}

/* Integer or char literal. */
parse_result_t bib_asm_parse_int(span_t sp, asm_int_t *out) {
    const char *p = sp.p, *end = sp.p + sp.len;
    out->neg = 0;
    out->mag = 0;
    if (p < end && *p == '\'') {
        uint8_t buf[8];
        uint32_t bad_at;
        const char *why;
        if (sp.len < 3 || end[-1] != '\'' || sp.len > 8)
            return PARSE_BAD_CHAR;
        long n = bib_asm_unescape(p + 1, sp.len - 2, buf, &bad_at, &why);
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
int bib_asm_looks_float(span_t sp) {
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

/* The f64 (width 64) or f32 (width 32) bit pattern of the float nearest an
   integer. */
uint64_t bib_asm_int_float_bits(asm_int_t v, int width) {
    /* Through int64 when it fits, so the one rounding is the C library's. */
    int small = !v.neg || v.mag <= (1ull << 63);
    if (width == 32) {
        float f =
            small ? (v.neg ? (float)(int64_t)bib_asm_int_bits(v) : (float)v.mag) : -(float)v.mag;
        uint32_t b32;
        memcpy(&b32, &f, sizeof b32);
        return b32;
    }
    double d =
        small ? (v.neg ? (double)(int64_t)bib_asm_int_bits(v) : (double)v.mag) : -(double)v.mag;
    uint64_t b64;
    memcpy(&b64, &d, sizeof d);
    return b64;
}

/* A float in f64 (width 64) or f32 (width 32) form, as its bit pattern.
   Integers are converted to the nearest float. */
parse_result_t bib_asm_parse_float(span_t sp, int width, uint64_t *bits) {
    const char *p = sp.p;
    uint32_t n = sp.len;
    if (n >= 6 && strncasecmp(p, "bits(", 5) == 0 && p[n - 1] == ')') {
        asm_int_t v;
        span_t inner = {p + 5, n - 6, sp.col + 5};
        if (bib_asm_parse_int(inner, &v) != PARSE_OK || v.neg || inner.len == 0 ||
            inner.p[0] == '\'')
            return PARSE_NOT;
        if (width == 32 && v.mag > UINT32_MAX)
            return PARSE_RANGE;
        *bits = v.mag;
        return PARSE_OK;
    }
    asm_int_t iv;
    parse_result_t r = bib_asm_parse_int(sp, &iv);
    if (r == PARSE_OK && sp.p[0] != '\'') {
        *bits = bib_asm_int_float_bits(iv, width);
        return PARSE_OK;
    }
    if (!bib_asm_looks_float(sp) || n > 120)
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
char *bib_asm_parse_name(asm_state_t *a, uint32_t si, span_t sp, const char *what) {
    /* The container's limits: source file names are paths, the rest symbols. */
    uint32_t limit = strcmp(what, "source file") == 0 ? BIB_MAX_SOURCE_NAME : BIB_MAX_NAME;
    if (sp.len > 0 && sp.p[0] == '"') {
        if (bib_asm_name_length(sp.p, sp.p + sp.len) != sp.len) {
            bib_asm_diag_span(a, si, sp, "expected a name, found '%s'", NULL);
            return NULL;
        }
        char *out = malloc(sp.len);
        if (out == NULL) {
            bib_asm_out_of_memory(a);
            return NULL;
        }
        uint32_t bad_at;
        const char *why;
        long n = bib_asm_unescape(sp.p + 1, sp.len - 2, (uint8_t *)out, &bad_at, &why);
        if (n < 0) {
            bib_asm_diag_at(a, si, sp.col + 1 + bad_at, 2, "%s", why);
            free(out);
            return NULL;
        }
        out[n] = '\0';
        int control = 0;
        for (long i = 0; i < n; i++)
            control |= (unsigned char)out[i] < 0x20 || (unsigned char)out[i] == 0x7f;
        if (n == 0 || control || n > (long)limit) {
            bib_asm_diag_at(a, si, sp.col, sp.len,
                            "a %s name must be 1..%u bytes with no control characters", what,
                            limit);
            free(out);
            return NULL;
        }
        return out;
    }
    if (bib_asm_name_length(sp.p, sp.p + sp.len) != sp.len) {
        char msg[80];
        snprintf(msg, sizeof msg, "expected a %s name, found '%%s'", what);
        bib_asm_diag_span(a, si, sp, msg, NULL);
        return NULL;
    }
    if (sp.len > limit) {
        bib_asm_diag_at(a, si, sp.col, sp.len, "a %s name must be at most %u bytes", what, limit);
        return NULL;
    }
    char *out = malloc(sp.len + 1);
    if (out == NULL) {
        bib_asm_out_of_memory(a);
        return NULL;
    }
    memcpy(out, sp.p, sp.len);
    out[sp.len] = '\0';
    return out;
}

/* A register "r12" (prefix 'r') or tensor register "t3" (prefix 't').
   Returns 0 when the text is not one. An index too large for any register
   reads as UINT32_MAX, for the caller to report as out of range. */
int bib_asm_parse_reg(span_t sp, char prefix, uint32_t *index) {
    if (sp.len < 2 || (sp.p[0] | 0x20) != prefix)
        return 0;
    uint64_t v = 0;
    for (uint32_t i = 1; i < sp.len; i++) {
        if (sp.p[i] < '0' || sp.p[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(sp.p[i] - '0');
        if (v > UINT32_MAX)
            v = UINT32_MAX;
    }
    *index = (uint32_t)v;
    return 1;
}

int bib_asm_find_mnemonic(span_t w) {
    char name[32];
    if (w.len >= sizeof name)
        return -1;
    memcpy(name, w.p, w.len);
    name[w.len] = '\0';
    return bib_isa_find_name(name);
}

int bib_asm_word_is(span_t w, const char *name) {
    return strlen(name) == w.len && strncasecmp(w.p, name, w.len) == 0;
}

/* A count or size: an unsigned integer literal, or an .equ, in min..max;
   what names it in the message that gives the range. */
int bib_asm_parse_count(asm_state_t *a, uint32_t si, span_t sp, uint64_t min, uint64_t max,
                        uint64_t *out, const char *what) {
    asm_int_t v;
    parse_result_t r = bib_asm_parse_int(sp, &v);
    int equ = 0;
    if (r == PARSE_NOT) {
        equ = bib_asm_equ_int(a, si, sp, &v);
        if (equ < 0)
            return 0;
        if (equ > 0)
            r = PARSE_OK;
    }
    if (r == PARSE_NOT || r == PARSE_BAD_CHAR) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected %s, found '%%s'", what);
        bib_asm_diag_span(a, si, sp, msg, NULL);
        return 0;
    }
    if (r == PARSE_RANGE || (v.neg && v.mag != 0) || v.mag < min || v.mag > max) {
        char value[32] = "";
        if (equ > 0) {
            value[0] = ' ';
            value[1] = '=';
            value[2] = ' ';
            bib_asm_int_text(v, value + 3, sizeof value - 3);
        }
        bib_asm_diag_at(a, si, sp.col, sp.len, "%.*s%s is out of range for %s (%llu..%llu)",
                        (int)sp.len, sp.p, value, what, (unsigned long long)min,
                        (unsigned long long)max);
        return 0;
    }
    *out = v.mag;
    return 1;
}

int bib_asm_parse_unsigned(asm_state_t *a, uint32_t si, span_t sp, uint64_t max, uint64_t *out,
                           const char *what) {
    return bib_asm_parse_count(a, si, sp, 0, max, out, what);
}

/* An integer, char, .equ or data label, the names with an optional +N/-N:
   resolved against the .equ names and the data labels of pass 1. */
int bib_asm_parse_int_expr(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out, int floats_ok) {
    parse_result_t r = bib_asm_parse_int(sp, out);
    if (r == PARSE_OK)
        return 1;
    if (r == PARSE_RANGE) {
        bib_asm_diag_span(a, si, sp, "value %s does not fit 64 bits", NULL);
        return 0;
    }
    if (r == PARSE_BAD_CHAR) {
        bib_asm_diag_span(
            a, si, sp, "bad character literal %s (one character or escape between single quotes)",
            NULL);
        return 0;
    }
    uint32_t reg;
    if (bib_asm_parse_reg(sp, 'r', &reg)) {
        bib_asm_diag_span(a, si, sp, "expected an immediate, found register '%s'", NULL);
        return 0;
    }
    if (bib_asm_looks_float(sp)) {
        if (floats_ok)
            return 0;
        bib_asm_diag_span(a, si, sp,
                          "expected an integer, found '%s' (floats are allowed in LDI64, .const, "
                          "=constants, .f32 and .f64)",
                          NULL);
        return 0;
    }
    int equ = bib_asm_equ_int(a, si, sp, out);
    if (equ != 0)
        return equ > 0;
    uint32_t n = bib_asm_name_length(sp.p, sp.p + sp.len);
    if (n == 0) {
        bib_asm_diag_span(a, si, sp, "expected an integer or a data label, found '%s'", NULL);
        return 0;
    }
    asm_int_t offset = {0, 0};
    if (n < sp.len) {
        span_t rest = {sp.p + n, sp.len - n, sp.col + n};
        parse_result_t r =
            rest.p[0] == '+' || rest.p[0] == '-' ? bib_asm_parse_int(rest, &offset) : PARSE_NOT;
        if ((r != PARSE_OK && r != PARSE_RANGE) || rest.p[1] == '\'') {
            bib_asm_diag_span(a, si, rest, "expected '+N' or '-N' after a data label, found '%s'",
                              NULL);
            return 0;
        }
        if (r == PARSE_RANGE || offset.mag > (1ull << 40)) {
            bib_asm_diag_span(a, si, rest,
                              "the offset %s after a data label is out of range "
                              "(-1099511627776..+1099511627776)",
                              NULL);
            return 0;
        }
    }
    char *name = bib_asm_parse_name(a, si, (span_t){sp.p, n, sp.col}, "data label");
    if (name == NULL)
        return 0;
    sym_t *sym = bib_asm_sym_find(&a->syms, name, SYM_DATA, 0);
    free(name);
    if (sym == NULL) {
        bib_asm_diag_span(a, si, (span_t){sp.p, n, sp.col}, "unknown data label '%s'", NULL);
        return 0;
    }
    int64_t v = (int64_t)sym->value + (offset.neg ? -(int64_t)offset.mag : (int64_t)offset.mag);
    out->neg = v < 0;
    out->mag = v < 0 ? (uint64_t)-v : (uint64_t)v;
    return 1;
}

int bib_asm_span_is(span_t sp, const char *text) {
    return sp.len == strlen(text) && strncasecmp(sp.p, text, sp.len) == 0;
}

/* The directive that closes the raw block a '.shader' or '.kernel' line
   opens (".endshader", ".endkernel"), or NULL when its form names a file. */
/* Whether a form names text that follows in the source: one of the block
 * forms, or a form of their shape (NAME-text, -bytes or -words) that is
 * unknown, so its block is skipped whole and only the form is reported. */
static int is_block_form(span_t form, const char *const *forms) {
    for (; *forms != NULL; forms++)
        if (bib_asm_span_is(form, *forms))
            return 1;
    static const char *const tails[] = {"-text", "-bytes", "-words"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t n = strlen(tails[i]);
        if (form.len > n && strncasecmp(form.p + form.len - n, tails[i], n) == 0)
            return 1;
    }
    return 0;
}

const char *bib_asm_block_end(const asm_state_t *a, const stmt_t *s) {
    if (s->bad || s->op_count < 2)
        return NULL;
    static const char *const shader[] = {"glsl", "spirv-words", NULL};
    static const char *const kernel[] = {"ptx-text", "ptx-bytes", NULL};
    span_t form = bib_asm_operand(a, s, 1);
    if (bib_asm_word_is(bib_asm_word(s), ".shader") && is_block_form(form, shader))
        return ".endshader";
    if (bib_asm_word_is(bib_asm_word(s), ".kernel") && is_block_form(form, kernel))
        return ".endkernel";
    return NULL;
}

/* Whether the line's text, blanks and comment aside, is the directive. */
static int line_is(const char *text, uint32_t len, const char *directive) {
    const char *p = text, *end = text + len;
    while (p < end && bib_asm_is_space((unsigned char)*p))
        p++;
    size_t n = strlen(directive);
    if ((size_t)(end - p) < n || strncasecmp(p, directive, n) != 0)
        return 0;
    p += n;
    while (p < end && bib_asm_is_space((unsigned char)*p))
        p++;
    return p == end || *p == ';';
}

void bib_asm_split_lines(asm_state_t *a, const char *src, size_t length) {
    const char *p = src, *end = src + length;
    uint32_t line = 1;
    uint32_t open = ASM_NONE;  /* the '.tensor' whose value list goes on */
    uint32_t block = ASM_NONE; /* the '.shader' or '.kernel' whose raw lines go on */
    const char *block_close = NULL;
    /* A UTF-8 byte order mark, which some editors write first, is not text:
       line 1 and its columns start after it. */
    if (length >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    /* One statement a line: counted first, so the array is allocated once,
       at its size, rather than doubled past it. */
    size_t lines = p < end && end[-1] != '\n';
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        lines++;
    if (lines > 0 && lines <= UINT32_MAX) {
        if ((a->stmts = malloc(lines * sizeof *a->stmts)) == NULL) {
            bib_asm_out_of_memory(a);
            return;
        }
        a->stmt_cap = (uint32_t)lines;
    }
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if (stop > p && stop[-1] == '\r')
            stop--;
        if (!bib_asm_grow_array((void **)&a->stmts, &a->stmt_cap, a->stmt_count + 1,
                                sizeof *a->stmts)) {
            bib_asm_out_of_memory(a);
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
            bib_asm_diag_at(a, si, 1, 1, "line is too long");
            s->bad = 1;
            open = ASM_NONE;
        } else if (nul != NULL) {
            /* Text holds no NUL: one would end the line early in every C
               string that carries it, and hide what follows. */
            bib_asm_diag_at(a, si, (uint32_t)(nul - p) + 1, 1, "a NUL byte in the line");
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
            else if ((block_close = bib_asm_block_end(a, &a->stmts[si])) != NULL)
                block = si;
        }
        if (a->stopped || a->oom)
            return;
        p = nl ? nl + 1 : end;
    }
    if (open != ASM_NONE)
        bib_asm_diag_at(
            a, open, a->stmts[open].word.col, a->stmts[open].word.len,
            "the value list goes on past the end of the file (it ends with ',' or '\\')");
    if (block != ASM_NONE) {
        bib_asm_diag_at(a, block, a->stmts[block].word.col, a->stmts[block].word.len,
                        "this block has no '%s' line before the end of the file", block_close);
        a->stmts[block].bad = 1;
    }
}
