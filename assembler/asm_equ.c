/* assembler/asm_equ.c: .equ, the symbolic constants (spec/assembly.md,
 * "Symbolic constants").
 *
 * Owns the pass that defines every .equ before pass 1 (bib_asm_pass_equ),
 * so that a use can tell a name defined further down from one never
 * defined, and the lookup that every reader of a number asks before it
 * gives up on a name (bib_asm_equ_value and its integer forms).
 *
 * It does not read literals (asm_lex.c) nor decide where a value is
 * allowed: the directives (asm_directives.c) and the operands
 * (asm_operands.c) call in here where an integer or a float is accepted.
 */
#include "assembler/asm_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The name sp begins with (n bytes of it), as a string, without a
   diagnostic: the caller's own path reports a malformed name. NULL when it
   is not one, or out of memory (noted). */
static char *name_at(asm_state_t *a, span_t sp, uint32_t n) {
    char *out = malloc((size_t)n + 1);
    if (out == NULL) {
        bib_asm_out_of_memory(a);
        return NULL;
    }
    if (sp.p[0] != '"') {
        memcpy(out, sp.p, n);
        out[n] = '\0';
        return out;
    }
    uint32_t bad_at;
    const char *why;
    long len = bib_asm_unescape(sp.p + 1, n - 2, (uint8_t *)out, &bad_at, &why);
    if (len <= 0) {
        free(out);
        return NULL;
    }
    out[len] = '\0';
    return out;
}

/* Finds the .equ whose name sp begins with. 1: found, *e and *name_len set;
   0: sp does not begin with the name of one; -1: a use before its
   definition (reported unless quiet), or an .equ whose value was wrong. */
static int find(asm_state_t *a, uint32_t si, span_t sp, int quiet, const asm_equ_t **e,
                uint32_t *name_len) {
    if (a->equ_count == 0 || sp.len == 0)
        return 0;
    uint32_t n = bib_asm_name_length(sp.p, sp.p + sp.len);
    if (n == 0)
        return 0;
    char *name = name_at(a, sp, n);
    if (name == NULL)
        return a->oom ? -1 : 0;
    sym_t *sym = bib_asm_sym_find(&a->syms, name, SYM_EQU, 0);
    if (sym == NULL) {
        free(name);
        return 0;
    }
    const asm_equ_t *q = &a->equs[sym->value];
    if (q->stmt >= si) {
        if (!quiet && q->stmt == si)
            bib_asm_diag_at(a, si, sp.col, n, "'.equ' '%s' refers to itself", name);
        else if (!quiet)
            bib_asm_diag_at(a, si, sp.col, n,
                            "'%s' is used before its '.equ' on line %u (define it first)", name,
                            a->stmts[q->stmt].line);
        free(name);
        return -1;
    }
    free(name);
    if (q->state != EQU_OK)
        return -1;
    *e = q;
    *name_len = n;
    return 1;
}

/* x + y, when the sum stays within -2^63 .. 2^64-1. */
static int int_add(asm_int_t x, asm_int_t y, asm_int_t *out) {
    if (x.neg == y.neg) {
        if (x.mag > UINT64_MAX - y.mag)
            return 0;
        *out = (asm_int_t){x.neg, x.mag + y.mag};
    } else if (x.mag >= y.mag) {
        *out = (asm_int_t){x.neg, x.mag - y.mag};
    } else {
        *out = (asm_int_t){y.neg, y.mag - x.mag};
    }
    if (out->mag == 0)
        out->neg = 0;
    return bib_asm_int_fits(*out, INT64_MIN, UINT64_MAX);
}

/* An operand's sign before a name ("-N"): the span after it, and whether it
   negates. */
static span_t after_sign(span_t sp, int *negate) {
    *negate = 0;
    if (sp.len < 2 || (sp.p[0] != '-' && sp.p[0] != '+') ||
        (!bib_asm_is_ident_start((unsigned char)sp.p[1]) && sp.p[1] != '"'))
        return sp;
    *negate = sp.p[0] == '-';
    return (span_t){sp.p + 1, sp.len - 1, sp.col + 1};
}

/* -v for an .equ value: an integer within -2^63 .. 2^64-1, or a float with
   its sign bit flipped (exact, as the literal written with a '-' reads). */
static int negate(asm_equ_t *q) {
    if (q->is_float) {
        q->f64_bits ^= 1ull << 63;
        q->f32_bits ^= 1ull << 31;
        return 1;
    }
    q->value.neg = !q->value.neg && q->value.mag != 0;
    return bib_asm_int_fits(q->value, INT64_MIN, UINT64_MAX);
}

/* The value of an operand that names an .equ: "N" or "-N", and "N+4", "N-1"
   for an integer one. 1 with *out set; 0 when the operand does not begin
   with the name of an .equ (nothing is reported); -1 after a diagnostic. */
int bib_asm_equ_value(asm_state_t *a, uint32_t si, span_t sp, asm_equ_t *out) {
    const asm_equ_t *q;
    uint32_t n;
    int negated;
    span_t name = after_sign(sp, &negated);
    int found = find(a, si, name, 0, &q, &n);
    if (found <= 0)
        return found;
    *out = *q;
    if (negated && !negate(out)) {
        bib_asm_diag_span(a, si, sp, "value %s does not fit 64 bits", NULL);
        return -1;
    }
    if (n == name.len)
        return 1;
    span_t rest = {name.p + n, name.len - n, name.col + n};
    asm_int_t offset;
    if ((rest.p[0] != '+' && rest.p[0] != '-') || bib_asm_parse_int(rest, &offset) != PARSE_OK) {
        bib_asm_diag_span(a, si, rest, "expected '+N' or '-N' after an '.equ' name, found '%s'",
                          NULL);
        return -1;
    }
    if (q->is_float) {
        bib_asm_diag_span(a, si, sp,
                          "'%s' adds to a float '.equ': an offset applies to integers only", NULL);
        return -1;
    }
    if (!int_add(out->value, offset, &out->value)) {
        bib_asm_diag_span(a, si, sp, "value %s does not fit 64 bits", NULL);
        return -1;
    }
    return 1;
}

/* As bib_asm_equ_value, where only an integer is accepted: a float .equ is
   an error. */
int bib_asm_equ_int(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out) {
    asm_equ_t q;
    int found = bib_asm_equ_value(a, si, sp, &q);
    if (found <= 0)
        return found;
    if (q.is_float) {
        bib_asm_diag_at(a, si, sp.col, sp.len,
                        "'%.*s' is a float '.equ' (line %u); an integer is expected here",
                        (int)sp.len, sp.p, a->stmts[q.stmt].line);
        return -1;
    }
    *out = q.value;
    return 1;
}

/* The integer an operand that is exactly the name of an earlier integer
   .equ ("N" or "-N") stands for, without any diagnostic (pass 1 counting registers: pass 2
   reports what is wrong). 1 when it is one, else 0. */
int bib_asm_equ_peek_int(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out) {
    const asm_equ_t *q;
    uint32_t n;
    int negated;
    span_t name = after_sign(sp, &negated);
    if (find(a, si, name, 1, &q, &n) <= 0 || n != name.len || q->is_float)
        return 0;
    asm_equ_t value = *q;
    if (negated && !negate(&value))
        return 0;
    *out = value.value;
    return 1;
}

/* An .equ where a float of the given width is expected: an integer one is
   converted as an integer literal would be; a float one gives the bits its
   literal reads as at that width. PARSE_RANGE for raw bits wider than an
   f32. */
parse_result_t bib_asm_equ_float_bits(const asm_equ_t *e, int width, uint64_t *bits) {
    if (!e->is_float) {
        *bits = bib_asm_int_float_bits(e->value, width);
        return PARSE_OK;
    }
    if (width == 64) {
        *bits = e->f64_bits;
        return PARSE_OK;
    }
    if (!e->f32_fits)
        return PARSE_RANGE;
    *bits = e->f32_bits;
    return PARSE_OK;
}

/* Names that read as something else where a number is written: registers
   (r3, t3) and the float words (inf, nan, bits(...)). */
static int reads_as_other(const char *name) {
    size_t n = strlen(name);
    if (n >= 2 && (name[0] == 'r' || name[0] == 'R' || name[0] == 't' || name[0] == 'T') &&
        strspn(name + 1, "0123456789") == n - 1)
        return 1;
    return strcasecmp(name, "inf") == 0 || strcasecmp(name, "nan") == 0 ||
           strcasecmp(name, "bits") == 0;
}

static void define(asm_state_t *a, uint32_t si) {
    const stmt_t *s = &a->stmts[si];
    if (s->op_count != 2) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
                        "'.equ' takes a name and a value (.equ N, 10); found %u operand%s",
                        s->op_count, s->op_count == 1 ? "" : "s");
        return;
    }
    span_t op = bib_asm_operand(a, s, 0);
    char *name = bib_asm_parse_name(a, si, op, "'.equ'");
    if (name == NULL)
        return;
    sym_t *prev = bib_asm_sym_find(&a->syms, name, SYM_EQU, 0);
    if (reads_as_other(name)) {
        bib_asm_diag_at(a, si, op.col, op.len,
                        "'%s' reads as a register or a float; it cannot name an '.equ'", name);
    } else if (prev != NULL) {
        bib_asm_diag_at(a, si, op.col, op.len, "'.equ' name '%s' is already defined on line %u",
                        name, a->stmts[prev->stmt].line);
    } else if (!bib_asm_grow_array((void **)&a->equs, &a->equ_cap, a->equ_count + 1,
                                   sizeof *a->equs) ||
               bib_asm_sym_add(&a->syms, name, SYM_EQU, 0, a->equ_count, si) == NULL) {
        bib_asm_out_of_memory(a);
    } else {
        a->equs[a->equ_count++] = (asm_equ_t){si, EQU_PENDING, 0, {0, 0}, 0, 0, 0};
    }
    free(name);
}

/* Reads the value of an .equ; those above it have their values already. */
static void evaluate(asm_state_t *a, asm_equ_t *q) {
    uint32_t si = q->stmt;
    span_t op = bib_asm_operand(a, &a->stmts[si], 1);
    q->state = EQU_FAILED;
    if (bib_asm_looks_float(op)) {
        if (bib_asm_parse_float(op, 64, &q->f64_bits) != PARSE_OK) {
            bib_asm_diag_span(a, si, op, "malformed float '%s'", NULL);
            return;
        }
        q->f32_fits = bib_asm_parse_float(op, 32, &q->f32_bits) == PARSE_OK;
        q->is_float = 1;
        q->state = EQU_OK;
        return;
    }
    parse_result_t r = bib_asm_parse_int(op, &q->value);
    if (r == PARSE_OK) {
        q->state = EQU_OK;
        return;
    }
    if (r != PARSE_NOT) {
        bib_asm_diag_span(a, si, op,
                          r == PARSE_RANGE ? "value %s does not fit 64 bits"
                                           : "bad character literal %s (one character or escape "
                                             "between single quotes)",
                          NULL);
        return;
    }
    asm_equ_t from;
    int found = bib_asm_equ_value(a, si, op, &from);
    if (found == 0)
        bib_asm_diag_span(a, si, op,
                          "expected an integer, a float or the name of an earlier '.equ', found "
                          "'%s'",
                          NULL);
    if (found <= 0)
        return;
    q->is_float = from.is_float;
    q->value = from.value;
    q->f64_bits = from.f64_bits;
    q->f32_bits = from.f32_bits;
    q->f32_fits = from.f32_fits;
    q->state = EQU_OK;
}

/* Defines every .equ, then reads their values in file order, before pass 1
   lays out any data: a value is known wherever it may be used. */
void bib_asm_pass_equ(asm_state_t *a) {
    for (uint32_t si = 0; si < a->stmt_count && !a->stopped && !a->oom; si++)
        if (!a->stmts[si].bad && bib_asm_word_is(bib_asm_word(&a->stmts[si]), ".equ"))
            define(a, si);
    for (uint32_t i = 0; i < a->equ_count && !a->stopped && !a->oom; i++)
        evaluate(a, &a->equs[i]);
}
