/* assembler/asm_directives.c: pass 1, the definitions (spec/assembly.md).
 *
 * Owns every directive: data (.byte ... .align, .memory), .func/.end and
 * labels, .const, .import, the tensor declarations (.input, .output,
 * .tensor, .dim) and the pass that walks the lines to collect them all, so
 * that anything may be named before it is defined; then the data fixups.
 *
 * Each declaration goes into the builder as it is met (asm_internal.h says
 * how), so the module lists functions, imports, constants, dimensions and
 * tensors in the order of their lines, and the data grows in the builder.
 *
 * It does not parse instruction operands (asm_operands.c) nor device code
 * blocks (asm_devcode.c), and it emits no code.
 */
#include "assembler/asm_internal.h"

#include <limits.h>

#include <locale.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- pass 1: definitions ------------------------------------------------ */

/* Where a '.bss' without an alignment starts: a multiple of the widest
   scalar. */
#define BSS_DEFAULT_ALIGN 8

/* A .input, .output or .tensor line, read before it goes to the builder. */
typedef struct asm_tensor {
    char *name;
    uint32_t reg, flags, dtype, rank;
    int64_t dims[BIB_MAX_RANK];
    uint32_t *values; /* .tensor: the elements' bit patterns, numel of them */
    uint64_t numel;
} asm_tensor_t;

static int is_data_directive(span_t w) {
    static const char *const names[] = {".byte", ".i16",   ".i32",   ".i64",  ".f32",
                                        ".f64",  ".ascii", ".asciz", ".zero", ".align"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (bib_asm_word_is(w, names[i]))
            return 1;
    return 0;
}

/* Whether n more bytes of data or tensor values keep the module within the
   cap; reports the line where they do not, before anything is allocated. */
static int fits_cap(asm_state_t *a, uint32_t si, span_t where, uint64_t n) {
    /* Strictly below the cap: a module holds its headers and code besides,
       and must stay readable under the same cap. */
    uint64_t used = bib_builder_data_size(a->b) + a->tensor_bytes;
    if (n < a->max_size && used < a->max_size - n)
        return 1;
    bib_asm_diag_at(
        a, si, where.col, where.len,
        "%llu more bytes of data would make the module larger than the size cap of %llu "
        "bytes (--max-file-size raises it)",
        (unsigned long long)n, (unsigned long long)a->max_size);
    a->too_large = 1;
    return 0;
}

/* n zero bytes appended to the module's data, for the caller to fill; NULL
   after a diagnostic. */
static uint8_t *data_reserve(asm_state_t *a, uint32_t si, span_t where, uint64_t n) {
    uint64_t end = bib_builder_data_size(a->b) + n;
    if (end > UINT32_MAX || n > UINT32_MAX) {
        bib_asm_diag_at(a, si, where.col, where.len,
                        "data grows past 4 GiB, the most a module holds");
        return NULL;
    }
    if (!fits_cap(a, si, where, n))
        return NULL;
    uint8_t *at = bib_builder_data_append(a->b, n);
    if (at == NULL)
        bib_asm_builder_failed(a);
    return at;
}

static void put_le(uint8_t *p, uint64_t v, uint32_t width) {
    for (uint32_t i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void pass1_data(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    span_t w = bib_asm_word(s);
    if (bib_asm_word_is(w, ".zero") || bib_asm_word_is(w, ".align")) {
        uint64_t n;
        if (s->op_count != 1) {
            bib_asm_diag_at(a, si, w.col, w.len, "'%.*s' takes 1 operand, found %u", (int)w.len,
                            w.p, s->op_count);
            return;
        }
        if (!bib_asm_parse_unsigned(a, si, bib_asm_operand(a, s, 0), UINT32_MAX, &n,
                                    "a byte count"))
            return;
        if (bib_asm_word_is(w, ".align")) {
            if (n == 0 || (n & (n - 1)) != 0) {
                bib_asm_diag_span(a, si, bib_asm_operand(a, s, 0),
                                  "alignment %s is not a power of two", NULL);
                return;
            }
            n = (n - bib_builder_data_size(a->b) % n) % n;
        }
        data_reserve(a, si, bib_asm_operand(a, s, 0), n);
        return;
    }
    if (s->op_count == 0) {
        bib_asm_diag_at(a, si, w.col, w.len, "'%.*s' needs at least one value", (int)w.len, w.p);
        return;
    }
    int ascii = bib_asm_word_is(w, ".ascii"), asciz = bib_asm_word_is(w, ".asciz");
    for (uint32_t i = 0; i < s->op_count; i++) {
        span_t op = bib_asm_operand(a, s, i);
        if (ascii || asciz) {
            if (op.len < 2 || op.p[0] != '"' ||
                bib_asm_skip_quoted(op.p, op.p + op.len) != op.p + op.len) {
                bib_asm_diag_span(a, si, op, "expected a string in double quotes, found '%s'",
                                  NULL);
                return;
            }
            uint8_t *tmp = malloc(op.len);
            if (tmp == NULL) {
                bib_asm_out_of_memory(a);
                return;
            }
            uint32_t bad_at;
            const char *why;
            long n = bib_asm_unescape(op.p + 1, op.len - 2, tmp, &bad_at, &why);
            if (n < 0) {
                bib_asm_diag_at(a, si, op.col + 1 + bad_at, 2, "%s", why);
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
        uint32_t width = bib_asm_word_is(w, ".byte")                                  ? 1
                         : bib_asm_word_is(w, ".i16")                                 ? 2
                         : (bib_asm_word_is(w, ".i32") || bib_asm_word_is(w, ".f32")) ? 4
                                                                                      : 8;
        if (bib_asm_word_is(w, ".f32") || bib_asm_word_is(w, ".f64")) {
            uint64_t bits;
            asm_equ_t q;
            int equ = bib_asm_equ_value(a, si, op, &q);
            if (equ < 0)
                return;
            parse_result_t r = equ > 0 ? bib_asm_equ_float_bits(&q, (int)width * 8, &bits)
                                       : bib_asm_parse_float(op, (int)width * 8, &bits);
            if (r != PARSE_OK) {
                bib_asm_diag_span(a, si, op,
                                  r == PARSE_RANGE && equ > 0
                                      ? "'%s' holds raw bits wider than an f32's 32"
                                  : r == PARSE_RANGE ? "raw bits %s do not fit 32 bits"
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
        parse_result_t r = bib_asm_parse_int(op, &v);
        if (r == PARSE_NOT) {
            int equ = bib_asm_equ_int(a, si, op, &v);
            if (equ < 0)
                return;
            if (equ > 0)
                r = PARSE_OK;
        }
        if (r == PARSE_NOT && width >= 4 && bib_asm_name_length(op.p, op.p + op.len) > 0) {
            /* A data label: its address is known only after pass 1. */
            if (!bib_asm_grow_array((void **)&a->fixups, &a->fixup_cap, a->fixup_count + 1,
                                    sizeof *a->fixups)) {
                bib_asm_out_of_memory(a);
                return;
            }
            a->fixups[a->fixup_count++] =
                (data_fixup_t){(uint32_t)bib_builder_data_size(a->b), width, si, op};
            if (data_reserve(a, si, op, width) == NULL)
                return;
            continue;
        }
        if (r != PARSE_OK) {
            bib_asm_diag_span(a, si, op,
                              r == PARSE_RANGE      ? "value %s does not fit 64 bits"
                              : r == PARSE_BAD_CHAR ? "bad character literal %s"
                              : width >= 4 ? "expected an integer or a data label, found '%s'"
                                           : "expected an integer, found '%s'",
                              NULL);
            return;
        }
        int64_t lo = width == 8 ? INT64_MIN : -((int64_t)1 << (8 * width - 1));
        uint64_t hi = width == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * width)) - 1;
        if (!bib_asm_int_fits(v, lo, hi)) {
            char text[32];
            bib_asm_int_text(v, text, sizeof text);
            bib_asm_diag_at(a, si, op.col, op.len, "value %s does not fit %u bytes (%lld..%llu)",
                            text, width, (long long)lo, (unsigned long long)hi);
            return;
        }
        uint8_t *at = data_reserve(a, si, op, width);
        if (at == NULL)
            return;
        put_le(at, bib_asm_int_bits(v), width);
    }
}

static void pass1_func(asm_state_t *a, uint32_t si, uint32_t *current) {
    stmt_t *s = &a->stmts[si];
    if (*current != ASM_NONE) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
                        "'.func' inside function '%s' (missing '.end'?)",
                        bib_builder_function_name(a->b, *current));
        s->bad = 1;
        return;
    }
    if (s->op_count == 0) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len, "'.func' needs a name");
        s->bad = 1;
        return;
    }
    char *name = bib_asm_parse_name(a, si, bib_asm_operand(a, s, 0), "function");
    /* A function whose name is bad still opens a scope, so its body does not
       also report "instruction outside a function". */
    if (name == NULL) {
        s->bad = 1;
        name = calloc(1, 1);
        if (name == NULL) {
            bib_asm_out_of_memory(a);
            return;
        }
    }
    /* The builder numbers functions in the order of their '.func' lines. */
    uint32_t id = ASM_NONE;
    if (bib_asm_grow_array((void **)&a->funcs, &a->func_cap, a->func_count + 1, sizeof *a->funcs))
        id = bib_builder_declare(a->b, name);
    if (id == ASM_NONE) {
        free(name);
        bib_asm_out_of_memory(a);
        s->bad = 1;
        return;
    }
    a->func_count = id + 1;
    asm_func_t *f = &a->funcs[id];
    *f = (asm_func_t){si, 0, 0, 0, 0, 0, -1, 0};
    *current = id;
    if (s->bad) {
        free(name);
        return;
    }
    /* The first of a name keeps it: a second is an error. */
    uint32_t first = bib_builder_find(a->b, BIB_BUILDER_FUNCTION, name);
    if (first != id)
        bib_asm_diag_at(a, si, bib_asm_operand(a, s, 0).col, bib_asm_operand(a, s, 0).len,
                        "function '%s' is already defined on line %u", name,
                        a->stmts[a->funcs[first].stmt].line);
    for (uint32_t i = 1; i < s->op_count; i++) {
        span_t op = bib_asm_operand(a, s, i);
        const char *eq = memchr(op.p, '=', op.len);
        uint32_t klen = eq ? (uint32_t)(eq - op.p) : 0;
        int is_args = klen == 4 && strncasecmp(op.p, "args", 4) == 0;
        int is_regs = klen == 4 && strncasecmp(op.p, "regs", 4) == 0;
        if (!is_args && !is_regs) {
            bib_asm_diag_span(a, si, op, "expected 'args=N' or 'regs=N', found '%s'", NULL);
            continue;
        }
        span_t value = {eq + 1, op.len - klen - 1, op.col + klen + 1};
        uint64_t v;
        if (!bib_asm_parse_count(a, si, value, is_args ? 0 : 1, BIB_MAX_REGS, &v,
                                 is_args ? "an argument count" : "a register count"))
            continue;
        if (is_args) {
            f->nargs = (uint32_t)v;
        } else {
            f->nregs = (uint32_t)v;
            f->regs_given = 1;
        }
    }
    if (f->regs_given && f->nargs > f->nregs)
        bib_asm_diag_at(
            a, si, s->word.col, s->word.len,
            "function '%s' takes %u arguments but has regs=%u (arguments live in registers)", name,
            f->nargs, f->nregs);
    free(name);
}

/* ---- pass 1: tensor declarations ------------------------------------------ */

static void note_treg(asm_state_t *a, uint32_t si, uint32_t reg) {
    if (reg < BIB_MAX_TENSOR_REGS && reg + 1 > a->tregs_used) {
        a->tregs_used = reg + 1;
        a->tregs_stmt = si;
    }
}

/* The symbolic dimension called name (BIB_DIM_SYMBOL), which the builder
   numbers in order of first use; 0 after a failure. Frees name. */
static int64_t dim_symbol(asm_state_t *a, char *name) {
    int64_t dim = bib_builder_tensor_dim(a->b, name);
    free(name);
    if (dim == 0)
        bib_asm_builder_failed(a);
    return dim;
}

int bib_asm_parse_dtype(span_t sp, uint32_t *dtype) {
    if (bib_asm_word_is(sp, "f32"))
        *dtype = BIB_DTYPE_F32;
    else if (bib_asm_word_is(sp, "i32"))
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
        /* 0 is a size too: an empty tensor (spec/numerics.md, "Empty
           tensors"). */
        if (!bib_asm_parse_unsigned(a, si, d, BIB_MAX_TENSOR_DIM, &n, "a dimension size"))
            return 0;
        *out = (int64_t)n;
    } else {
        asm_int_t v;
        int equ = bib_asm_equ_int(a, si, d, &v);
        if (equ < 0)
            return 0;
        if (equ > 0) {
            if (v.neg || v.mag > BIB_MAX_TENSOR_DIM) {
                char text[32];
                bib_asm_int_text(v, text, sizeof text);
                bib_asm_diag_at(a, si, d.col, d.len,
                                "%.*s = %s is out of range for a dimension size (0..%llu)",
                                (int)d.len, d.p, text, (unsigned long long)BIB_MAX_TENSOR_DIM);
                return 0;
            }
            *out = (int64_t)v.mag;
            return 1;
        }
        char *name = bib_asm_parse_name(a, si, d, "dimension");
        if (name == NULL || (*out = dim_symbol(a, name)) == 0)
            return 0;
    }
    if (fixed_only && *out < 0) {
        bib_asm_diag_span(a, si, d, "a constant tensor needs fixed dimension sizes, found '%s'",
                          NULL);
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
    while (name_end > p && bib_asm_is_space((unsigned char)name_end[-1]))
        name_end--;
    span_t type = {p, (uint32_t)(name_end - p), sp.col};
    if (!bib_asm_parse_dtype(type, &t->dtype)) {
        bib_asm_diag_span(a, si, type.len ? type : sp,
                          "unknown element type '%s' (expected f32 or i32, as in f32[2, 3])", NULL);
        return 0;
    }
    t->rank = 0;
    if (open == NULL)
        return 1;
    if (end[-1] != ']') {
        bib_asm_diag_span(a, si, sp, "expected a shape in brackets such as f32[2, 3], found '%s'",
                          NULL);
        return 0;
    }
    const char *q = open + 1, *close = end - 1;
    while (q < close && bib_asm_is_space((unsigned char)*q))
        q++;
    while (q < close) {
        const char *start = q;
        while (q < close && *q != ',') {
            const char *after = *q == '"' ? bib_asm_skip_quoted(q, close) : NULL;
            q = after != NULL ? after : q + 1;
        }
        const char *stop = q;
        while (stop > start && bib_asm_is_space((unsigned char)stop[-1]))
            stop--;
        span_t d = {start, (uint32_t)(stop - start), sp.col + (uint32_t)(start - p)};
        if (d.len == 0) {
            bib_asm_diag_at(a, si, d.col, 1, "missing dimension");
            return 0;
        }
        if (t->rank == BIB_MAX_RANK) {
            bib_asm_diag_span(a, si, d, "a tensor has at most 6 dimensions; '%s' is a seventh",
                              NULL);
            return 0;
        }
        if (!parse_dim(a, si, d, fixed_only, &t->dims[t->rank]))
            return 0;
        t->rank++;
        if (q < close)
            q++;
        while (q < close && bib_asm_is_space((unsigned char)*q))
            q++;
        if (q == close && stop < close && close[-1] == ',') {
            bib_asm_diag_at(a, si, sp.col + (uint32_t)(close - p), 1,
                            "missing dimension after ','");
            return 0;
        }
    }
    return 1;
}

/* One element of a .tensor value list, as its 32-bit pattern. */
static int parse_element(asm_state_t *a, uint32_t si, span_t op, uint32_t dtype, uint32_t *out) {
    asm_equ_t q;
    int equ = bib_asm_equ_value(a, si, op, &q);
    if (equ < 0)
        return 0;
    if (dtype == BIB_DTYPE_F32) {
        uint64_t bits;
        parse_result_t r =
            equ > 0 ? bib_asm_equ_float_bits(&q, 32, &bits) : bib_asm_parse_float(op, 32, &bits);
        if (r != PARSE_OK) {
            bib_asm_diag_span(a, si, op,
                              r == PARSE_RANGE && equ > 0
                                  ? "'%s' holds raw bits wider than an f32's 32"
                              : r == PARSE_RANGE ? "raw bits %s do not fit 32 bits"
                                                 : "expected an f32 value, found '%s'",
                              NULL);
            return 0;
        }
        *out = (uint32_t)bits;
        return 1;
    }
    asm_int_t v;
    parse_result_t r = bib_asm_parse_int(op, &v);
    if (equ > 0 && q.is_float) {
        bib_asm_diag_span(a, si, op, "'%s' is a float '.equ'; an i32 value is expected here", NULL);
        return 0;
    }
    if (equ > 0) {
        v = q.value;
        r = PARSE_OK;
    }
    if (r == PARSE_OK && bib_asm_int_fits(v, INT32_MIN, UINT32_MAX)) {
        *out = (uint32_t)bib_asm_int_bits(v);
        return 1;
    }
    bib_asm_diag_span(a, si, op,
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
        numel = t->dims[k] != 0 && numel > limit / (uint64_t)t->dims[k]
                    ? limit + 1
                    : numel * (uint64_t)t->dims[k];
    if (numel > limit) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
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
    if (count == numel && !fits_cap(a, si, bib_asm_word(s), numel * 4))
        return 0;
    if (count == numel) {
        t->values = malloc((size_t)numel * 4 + 4);
        if (t->values == NULL) {
            bib_asm_out_of_memory(a);
            return 0;
        }
    }
    uint64_t at = 0;
    for (uint32_t j = si; j < a->stmt_count && (j == si || a->stmts[j].owner == si + 1); j++) {
        const stmt_t *line = &a->stmts[j];
        for (uint32_t i = j == si ? first : 0; i < line->op_count; i++, at++) {
            span_t op = bib_asm_operand(a, line, i);
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
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
                        "tensor '%s' has %llu element%s but %llu value%s given", t->name,
                        (unsigned long long)numel, numel == 1 ? "" : "s", (unsigned long long)count,
                        count == 1 ? " is" : "s are");
        return 0;
    }
    return 1;
}

static void pass1_tensor(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    span_t w = bib_asm_word(s);
    uint32_t flags = bib_asm_word_is(w, ".input")    ? BIB_TENSOR_INPUT
                     : bib_asm_word_is(w, ".output") ? BIB_TENSOR_OUTPUT
                                                     : BIB_TENSOR_CONST;
    uint32_t header = 0;
    while (header < s->op_count &&
           !(bib_asm_operand(a, s, header).len == 1 && bib_asm_operand(a, s, header).p[0] == '='))
        header++;
    int has_values = header < s->op_count;
    if (flags != BIB_TENSOR_CONST && has_values) {
        bib_asm_diag_span(a, si, bib_asm_operand(a, s, header),
                          "'%s' values belong to '.tensor' declarations only", NULL);
        return;
    }
    if ((flags == BIB_TENSOR_INPUT && header != 3) ||
        (flags == BIB_TENSOR_OUTPUT && header != 2 && header != 3) ||
        (flags == BIB_TENSOR_CONST && header != 3)) {
        bib_asm_diag_at(
            a, si, w.col, w.len, "%s; found %u operand%s",
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
    t.flags = flags;
    if (!bib_asm_parse_reg(bib_asm_operand(a, s, 1), 't', &t.reg) || t.reg >= BIB_MAX_TENSOR_REGS) {
        bib_asm_diag_span(a, si, bib_asm_operand(a, s, 1),
                          "expected a tensor register (t0 .. t65535), found '%s'", NULL);
        return;
    }
    if (header == 3 &&
        !parse_tensor_type(a, si, bib_asm_operand(a, s, 2), flags == BIB_TENSOR_CONST, &t))
        return;
    if ((t.name = bib_asm_parse_name(a, si, bib_asm_operand(a, s, 0), "tensor")) == NULL)
        return;
    uint32_t prev = bib_builder_find(a->b, BIB_BUILDER_TENSOR, t.name);
    if (prev != ASM_NONE) {
        bib_asm_diag_at(a, si, bib_asm_operand(a, s, 0).col, bib_asm_operand(a, s, 0).len,
                        "tensor '%s' is already declared on line %u", t.name,
                        a->stmts[a->tensor_stmts[prev]].line);
        free(t.name);
        return;
    }
    uint32_t declared = bib_builder_tensor_count(a->b);
    for (uint32_t i = 0; i < declared && flags != BIB_TENSOR_OUTPUT; i++) {
        const bib_tensor_decl_t *o = bib_builder_tensor_decl(a->b, i);
        if (o->reg == t.reg && o->flags != BIB_TENSOR_OUTPUT) {
            bib_asm_diag_at(
                a, si, bib_asm_operand(a, s, 1).col, bib_asm_operand(a, s, 1).len,
                "t%u already holds %s '%s' (line %u): a register carries at most one input "
                "or constant",
                t.reg, o->flags == BIB_TENSOR_INPUT ? "input" : "constant", o->name,
                a->stmts[a->tensor_stmts[i]].line);
            free(t.name);
            return;
        }
    }
    /* A constant without elements (a 0 among its sizes) may leave out the
       '=' and its empty list; any other needs them. */
    if (flags == BIB_TENSOR_CONST && !has_values) {
        bool empty = false;
        for (uint32_t k = 0; k < t.rank; k++)
            empty = empty || t.dims[k] == 0;
        if (!empty) {
            bib_asm_diag_at(a, si, w.col, w.len,
                            "'.tensor' takes a name, a tensor register, a type, '=' and the values "
                            "(.tensor w t2 f32[2] = 1.5, -2); only a constant with a 0 size may "
                            "leave them out");
            free(t.name);
            return;
        }
    }
    if (has_values && !parse_tensor_values(a, si, header + 1, &t)) {
        free(t.name);
        free(t.values);
        return;
    }
    if (!bib_asm_grow_array((void **)&a->tensor_stmts, &a->tensor_stmt_cap, declared + 1,
                            sizeof *a->tensor_stmts)) {
        free(t.name);
        free(t.values);
        bib_asm_out_of_memory(a);
        return;
    }
    bib_status_t st =
        flags == BIB_TENSOR_INPUT
            ? bib_builder_tensor_input(a->b, t.name, t.reg, (bib_dtype_t)t.dtype, t.rank, t.dims)
        : flags == BIB_TENSOR_OUTPUT
            ? bib_builder_tensor_output(a->b, t.name, t.reg, (bib_dtype_t)t.dtype, t.rank, t.dims)
            : bib_builder_tensor_const(a->b, t.name, t.reg, (bib_dtype_t)t.dtype, t.rank, t.dims,
                                       t.values);
    free(t.name);
    free(t.values);
    if (st != BIB_OK) {
        bib_asm_builder_failed(a);
        return;
    }
    a->tensor_stmts[declared] = si;
    note_treg(a, si, t.reg);
}

/* The shader a plain name operand names, when it is declared above; else
   NULL (pass 2 reports what is wrong with the operand). */
static const bib_shader_decl_t *shader_above(asm_state_t *a, span_t op) {
    if (bib_asm_name_length(op.p, op.p + op.len) != op.len || op.p[0] == '"')
        return NULL;
    char *name = strndup(op.p, op.len);
    uint32_t index = name ? bib_builder_find(a->b, BIB_BUILDER_SHADER, name) : ASM_NONE;
    free(name);
    return bib_builder_shader_decl(a->b, index);
}

/* Notes the registers an instruction names, for the default regs=. */
static void note_registers(asm_state_t *a, uint32_t si, asm_func_t *f, const bib_opinfo_t *info) {
    const stmt_t *s = &a->stmts[si];
    uint32_t text = 0, prev_reg = ASM_NONE;
    uint32_t program_geometry = 0, program_extra = 0;
    for (int k = 0; k < 4 && text < s->op_count; k++) {
        uint32_t kind = info->kinds[k];
        if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
            continue;
        span_t op = bib_asm_operand(a, s, text++);
        uint32_t reg;
        if ((kind == BIB_K_TD || kind == BIB_K_TS || kind == BIB_K_TM) &&
            bib_asm_parse_reg(op, 't', &reg)) {
            note_treg(a, si, reg);
            prev_reg = ASM_NONE;
            continue;
        }
        if ((kind == BIB_K_RD || kind == BIB_K_RS || kind == BIB_K_RM) &&
            bib_asm_parse_reg(op, 'r', &reg)) {
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
            const bib_shader_decl_t *shader = kind == BIB_K_SHADER ? shader_above(a, op) : NULL;
            program_geometry = kind == BIB_K_SHADER ? 3 : 6;
            program_extra = shader != NULL ? shader->push_bytes / 4 : 0;
            prev_reg = ASM_NONE;
            continue;
        }
        uint64_t count;
        asm_int_t v;
        if (kind == BIB_K_COUNT && prev_reg != ASM_NONE &&
            (bib_asm_parse_int(op, &v) == PARSE_OK || bib_asm_equ_peek_int(a, si, op, &v)) &&
            !v.neg && v.mag <= BIB_MAX_REGS) {
            count = v.mag + program_extra;
            if (prev_reg + count > f->regs_used && prev_reg + count <= BIB_MAX_REGS)
                f->regs_used = (uint32_t)(prev_reg + count);
        }
        prev_reg = ASM_NONE;
    }
}

/* Imports a host function the first time its name is met: the builder
   numbers imports in that order. */
static void pass1_import(asm_state_t *a, uint32_t si, span_t op) {
    char *name = bib_asm_parse_name(a, si, op, "host function");
    if (name == NULL)
        return;
    if (bib_builder_import(a->b, name) == ASM_NONE)
        bib_asm_out_of_memory(a);
    free(name);
}

/* Parses a constant value of the given type (".const" or "=" form). */
int bib_asm_parse_const_value(asm_state_t *a, uint32_t si, span_t op, uint32_t type,
                              uint64_t *bits) {
    asm_equ_t q;
    int equ = bib_asm_equ_value(a, si, op, &q);
    if (equ < 0)
        return 0;
    if (type == BIB_CONST_F64) {
        parse_result_t r =
            equ > 0 ? bib_asm_equ_float_bits(&q, 64, bits) : bib_asm_parse_float(op, 64, bits);
        if (r != PARSE_OK) {
            bib_asm_diag_span(a, si, op, "expected an f64 value, found '%s'", NULL);
            return 0;
        }
        return 1;
    }
    if (equ > 0 && q.is_float) {
        bib_asm_diag_span(a, si, op, "'%s' is a float '.equ'; an i64 value is expected here", NULL);
        return 0;
    }
    asm_int_t v;
    parse_result_t r = PARSE_OK;
    if (equ > 0)
        v = q.value;
    else
        r = bib_asm_parse_int(op, &v);
    if (r == PARSE_OK && bib_asm_int_fits(v, INT64_MIN, UINT64_MAX)) {
        *bits = bib_asm_int_bits(v);
        return 1;
    }
    bib_asm_diag_span(a, si, op,
                      r == PARSE_RANGE || r == PARSE_OK ? "value %s does not fit 64 bits"
                                                        : "expected an i64 value, found '%s'",
                      NULL);
    return 0;
}

static void pass1_const(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    if (s->op_count != 3) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
                        "'.const' takes a name, a type (i64 or f64) and a value; found %u operands",
                        s->op_count);
        return;
    }
    uint32_t type;
    if (bib_asm_word_is(bib_asm_operand(a, s, 1), "i64")) {
        type = BIB_CONST_I64;
    } else if (bib_asm_word_is(bib_asm_operand(a, s, 1), "f64")) {
        type = BIB_CONST_F64;
    } else {
        bib_asm_diag_span(a, si, bib_asm_operand(a, s, 1),
                          "unknown constant type '%s' (expected i64 or f64)", NULL);
        return;
    }
    char *name = bib_asm_parse_name(a, si, bib_asm_operand(a, s, 0), "constant");
    if (name == NULL)
        return;
    uint64_t bits;
    if (bib_asm_parse_const_value(a, si, bib_asm_operand(a, s, 2), type, &bits)) {
        sym_t *prev = bib_asm_sym_find(&a->syms, name, SYM_CONST, 0);
        if (prev != NULL) {
            bib_asm_diag_at(a, si, bib_asm_operand(a, s, 0).col, bib_asm_operand(a, s, 0).len,
                            "constant '%s' is already defined on line %u", name,
                            a->stmts[prev->stmt].line);
        } else {
            /* '.const' lines come first in the pool: pass 2 adds the inline
               ones. */
            uint32_t index = bib_builder_const_bits(a->b, type, bits);
            if (index == ASM_NONE ||
                bib_asm_sym_add(&a->syms, name, SYM_CONST, 0, index, si) == NULL)
                bib_asm_out_of_memory(a);
        }
    }
    free(name);
}

/* '.bss SIZE[, ALIGN]': memory to reserve after the data, without bytes in
   the module. */
static void pass1_bss(asm_state_t *a, uint32_t si) {
    const stmt_t *s = &a->stmts[si];
    uint64_t size, align = BSS_DEFAULT_ALIGN;
    if (!bib_asm_expect_operands(a, si, 1, 2) ||
        !bib_asm_parse_unsigned(a, si, bib_asm_operand(a, s, 0), BIB_MAX_MEMORY, &size,
                                "a byte count") ||
        (s->op_count == 2 && !bib_asm_parse_unsigned(a, si, bib_asm_operand(a, s, 1), UINT32_MAX,
                                                     &align, "an alignment")))
        return;
    if (align == 0 || (align & (align - 1)) != 0) {
        bib_asm_diag_span(a, si, bib_asm_operand(a, s, 1), "alignment %s is not a power of two",
                          NULL);
        return;
    }
    if (!bib_asm_grow_array((void **)&a->bss, &a->bss_cap, a->bss_count + 1, sizeof *a->bss)) {
        bib_asm_out_of_memory(a);
        return;
    }
    a->bss[a->bss_count++] = (asm_bss_t){si, size, align, 0};
}

int bib_asm_expect_operands(asm_state_t *a, uint32_t si, uint32_t lo, uint32_t hi) {
    const stmt_t *s = &a->stmts[si];
    if (s->op_count >= lo && s->op_count <= hi)
        return 1;
    span_t w = bib_asm_word(s);
    if (lo == hi)
        bib_asm_diag_at(a, si, w.col, w.len, "'%.*s' takes %u operand%s, found %u", (int)w.len, w.p,
                        lo, lo == 1 ? "" : "s", s->op_count);
    else
        bib_asm_diag_at(a, si, w.col, w.len, "'%.*s' takes %u to %u operands, found %u", (int)w.len,
                        w.p, lo, hi, s->op_count);
    return 0;
}

void bib_asm_pass1(asm_state_t *a) {
    uint32_t current = ASM_NONE;
    for (uint32_t si = 0; si < a->stmt_count && !a->stopped && !a->oom; si++) {
        stmt_t *s = &a->stmts[si];
        if (s->bad)
            continue;
        span_t w = bib_asm_word(s);
        /* .func opens its scope before its own labels would matter; a label
           on a .func line belongs to the data side, like any top-level one. */
        for (uint32_t i = 0; i < s->label_count; i++) {
            span_t l = bib_asm_label(a, s, i);
            char *name = bib_asm_parse_name(a, si, l, "label");
            if (name == NULL)
                continue;
            uint32_t kind = current != ASM_NONE ? SYM_CODE : SYM_DATA;
            uint32_t scope = current != ASM_NONE ? current + 1 : 0;
            sym_t *prev = bib_asm_sym_find(&a->syms, name, kind, scope);
            /* Data labels and .equ names both stand for numbers: one space. */
            sym_t *equ = kind == SYM_DATA ? bib_asm_sym_find(&a->syms, name, SYM_EQU, 0) : NULL;
            /* A '.bss' label holds the index of its reservation until all
               the data is laid out (bib_asm_place_bss). */
            uint64_t value = current != ASM_NONE          ? a->funcs[current].insn_count
                             : bib_asm_word_is(w, ".bss") ? a->bss_count
                                                          : bib_builder_data_size(a->b);
            sym_t *sym = NULL;
            if (prev != NULL) {
                bib_asm_diag_at(a, si, l.col, l.len, "label '%s' is already defined on line %u",
                                name, a->stmts[prev->stmt].line);
            } else if (equ != NULL && equ->stmt < si) {
                bib_asm_diag_at(a, si, l.col, l.len,
                                "label '%s' is already defined by '.equ' on line %u", name,
                                a->stmts[equ->stmt].line);
            } else if (equ != NULL) {
                span_t e = bib_asm_operand(a, &a->stmts[equ->stmt], 0);
                bib_asm_diag_at(a, equ->stmt, e.col, e.len,
                                "'.equ' name '%s' is already a data label on line %u", name,
                                a->stmts[si].line);
            } else if ((sym = bib_asm_sym_add(&a->syms, name, kind, scope, value, si)) == NULL) {
                bib_asm_out_of_memory(a);
            } else if (kind == SYM_CODE) {
                /* The builder's label now; pass 2 binds it where it stands. */
                if ((sym->label_id = bib_builder_label(a->b)) == ASM_NONE)
                    bib_asm_out_of_memory(a);
            }
            free(name);
        }
        if (w.len == 0) {
            s->func = current;
            continue;
        }
        if (bib_asm_word_is(w, ".func")) {
            pass1_func(a, si, &current);
            s->func = current;
            continue;
        }
        s->func = current;
        if (w.p[0] != '.') {
            int index = bib_asm_find_mnemonic(w);
            if (current == ASM_NONE) {
                bib_asm_diag_at(
                    a, si, w.col, w.len,
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
                for (int k = 0, text = 0; k < 4 && text < (int)s->op_count; k++) {
                    uint32_t kind = bib_isa_table[index].kinds[k];
                    if (kind == BIB_K_NONE || kind == BIB_K_IMMHI)
                        continue;
                    if (kind == BIB_K_HOST &&
                        bib_asm_name_length(bib_asm_operand(a, s, text).p,
                                            bib_asm_operand(a, s, text).p +
                                                bib_asm_operand(a, s, text).len) ==
                            bib_asm_operand(a, s, text).len)
                        pass1_import(a, si, bib_asm_operand(a, s, text));
                    text++;
                }
            }
            continue;
        }
        if (bib_asm_word_is(w, ".end")) {
            if (!bib_asm_expect_operands(a, si, 0, 0))
                continue;
            if (current == ASM_NONE) {
                bib_asm_diag_at(a, si, w.col, w.len, "'.end' without '.func'");
                continue;
            }
            a->funcs[current].ended = 1;
            current = ASM_NONE;
        } else if (is_data_directive(w)) {
            if (current != ASM_NONE) {
                bib_asm_diag_at(a, si, w.col, w.len,
                                "data directive '%.*s' inside function '%s' (put data outside "
                                "'.func' ... '.end')",
                                (int)w.len, w.p, bib_builder_function_name(a->b, current));
                continue;
            }
            pass1_data(a, si);
        } else if (bib_asm_is_tensor_decl(w) || bib_asm_word_is(w, ".tensors") ||
                   bib_asm_word_is(w, ".dim")) {
            if (current != ASM_NONE) {
                bib_asm_diag_at(
                    a, si, w.col, w.len,
                    "'%.*s' inside function '%s' (declare tensors outside '.func' ... '.end')",
                    (int)w.len, w.p, bib_builder_function_name(a->b, current));
                continue;
            }
            if (bib_asm_is_tensor_decl(w)) {
                pass1_tensor(a, si);
            } else if (bib_asm_word_is(w, ".dim")) {
                for (uint32_t i = 0; i < s->op_count; i++) {
                    span_t op = bib_asm_operand(a, s, i);
                    char *name = bib_asm_parse_name(a, si, op, "dimension");
                    sym_t *equ = name ? bib_asm_sym_find(&a->syms, name, SYM_EQU, 0) : NULL;
                    if (equ != NULL) {
                        bib_asm_diag_at(a, si, op.col, op.len,
                                        "'%s' is an '.equ' (line %u), not a dimension name", name,
                                        a->stmts[equ->stmt].line);
                        free(name);
                    } else if (name != NULL) {
                        dim_symbol(a, name);
                    }
                }
            } else if (bib_asm_expect_operands(a, si, 1, 1)) {
                uint64_t n;
                if (a->tensors_stmt != ASM_NONE)
                    bib_asm_diag_at(a, si, w.col, w.len, "'.tensors' is already given on line %u",
                                    a->stmts[a->tensors_stmt].line);
                else if (bib_asm_parse_unsigned(a, si, bib_asm_operand(a, s, 0),
                                                BIB_MAX_TENSOR_REGS, &n,
                                                "a tensor register count")) {
                    a->tensors_stmt = si;
                    a->tensors_given = (uint32_t)n;
                }
            }
        } else if (bib_asm_word_is(w, ".shader") || bib_asm_word_is(w, ".kernel")) {
            if (current != ASM_NONE) {
                bib_asm_diag_at(
                    a, si, w.col, w.len,
                    "'%.*s' inside function '%s' (declare device code outside '.func' ... "
                    "'.end')",
                    (int)w.len, w.p, bib_builder_function_name(a->b, current));
                continue;
            }
            bib_asm_pass1_devcode(a, si);
        } else if (bib_asm_word_is(w, ".endshader") || bib_asm_word_is(w, ".endkernel")) {
            if (!bib_asm_expect_operands(a, si, 0, 0))
                continue;
            if (si == 0 ||
                (a->stmts[si - 1].body_of == 0 && bib_asm_block_end(a, &a->stmts[si - 1]) == NULL))
                bib_asm_diag_at(a, si, w.col, w.len, "'%.*s' without a '%s' block", (int)w.len, w.p,
                                bib_asm_word_is(w, ".endshader") ? ".shader" : ".kernel");
        } else if (bib_asm_word_is(w, ".bss")) {
            if (current != ASM_NONE) {
                bib_asm_diag_at(a, si, w.col, w.len,
                                "'.bss' inside function '%s' (put reservations outside '.func' "
                                "... '.end')",
                                bib_builder_function_name(a->b, current));
                continue;
            }
            pass1_bss(a, si);
        } else if (bib_asm_word_is(w, ".equ")) {
            /* defined before pass 1 (asm_equ.c) */
        } else if (bib_asm_word_is(w, ".const")) {
            pass1_const(a, si);
        } else if (bib_asm_word_is(w, ".import")) {
            if (bib_asm_expect_operands(a, si, 1, 1))
                pass1_import(a, si, bib_asm_operand(a, s, 0));
        } else if (bib_asm_word_is(w, ".memory")) {
            uint64_t size;
            if (!bib_asm_expect_operands(a, si, 1, 1))
                continue;
            if (a->memory_stmt != ASM_NONE) {
                bib_asm_diag_at(a, si, w.col, w.len, "'.memory' is already given on line %u",
                                a->stmts[a->memory_stmt].line);
                continue;
            }
            if (bib_asm_parse_unsigned(a, si, bib_asm_operand(a, s, 0), BIB_MAX_MEMORY, &size,
                                       "a memory size in bytes")) {
                a->memory_size = size;
                a->memory_stmt = si;
            }
        } else if (bib_asm_word_is(w, ".entry")) {
            if (!bib_asm_expect_operands(a, si, 1, 1))
                continue;
            if (a->entry_stmt != ASM_NONE)
                bib_asm_diag_at(a, si, w.col, w.len, "'.entry' is already given on line %u",
                                a->stmts[a->entry_stmt].line);
            else
                a->entry_stmt = si;
        } else if (bib_asm_word_is(w, ".source")) {
            if (!bib_asm_expect_operands(a, si, 0, 1))
                continue;
            /* The last '.source' names the source; one without a name says
               there is none. */
            char *name = NULL;
            if (s->op_count == 1 &&
                (name = bib_asm_parse_name(a, si, bib_asm_operand(a, s, 0), "source file")) == NULL)
                continue;
            bib_builder_source(a->b, name);
            free(name);
            bib_asm_builder_failed(a);
        } else if (bib_asm_word_is(w, ".nodebug")) {
            if (bib_asm_expect_operands(a, si, 0, 0))
                bib_builder_nodebug(a->b);
        } else if (bib_asm_word_is(w, ".data")) {
            if (!bib_asm_expect_operands(a, si, 0, 0))
                continue;
            if (current != ASM_NONE)
                bib_asm_diag_at(a, si, w.col, w.len,
                                "'.data' inside function '%s' (missing '.end'?)",
                                bib_builder_function_name(a->b, current));
        } else if (bib_asm_word_is(w, ".line")) {
            /* applied in pass 2, where instructions are emitted in order */
        } else {
            bib_asm_diag_span(a, si, w, "unknown directive '%s'", NULL);
            s->bad = 1;
        }
    }
    if (current != ASM_NONE && !a->stopped)
        bib_asm_diag_at(a, a->funcs[current].stmt, a->stmts[a->funcs[current].stmt].word.col, 5,
                        "function '%s' has no '.end'", bib_builder_function_name(a->b, current));
}

/* Places the '.bss' reservations after all the data, in file order, each at
   a multiple of its alignment, and gives their labels those addresses. */
void bib_asm_place_bss(asm_state_t *a) {
    uint64_t at = bib_builder_data_size(a->b);
    for (uint32_t i = 0; i < a->bss_count; i++) {
        asm_bss_t *r = &a->bss[i];
        uint64_t start = (at + r->align - 1) & ~(r->align - 1);
        if (start > BIB_MAX_MEMORY || r->size > BIB_MAX_MEMORY - start) {
            const stmt_t *s = &a->stmts[r->stmt];
            bib_asm_diag_at(a, r->stmt, s->word.col, s->word.len,
                            "'.bss' of %llu bytes at address %llu ends past %llu bytes, the most "
                            "linear memory a module declares",
                            (unsigned long long)r->size, (unsigned long long)start,
                            (unsigned long long)BIB_MAX_MEMORY);
            return;
        }
        r->addr = start;
        at = start + r->size;
    }
    a->bss_end = at;
    for (uint32_t i = 0; i < a->syms.count && a->bss_count > 0; i++) {
        sym_t *sym = &a->syms.syms[i];
        if (sym->kind != SYM_DATA || !bib_asm_word_is(bib_asm_word(&a->stmts[sym->stmt]), ".bss"))
            continue;
        /* Pass 1 gave it the index its line's reservation would have. */
        uint64_t r = sym->value;
        sym->value = r < a->bss_count && a->bss[r].stmt == sym->stmt ? a->bss[r].addr : 0;
    }
}

/* Data labels named in .i32/.i64 are resolved once every label is known. */
void bib_asm_resolve_fixups(asm_state_t *a) {
    for (uint32_t i = 0; i < a->fixup_count && !a->stopped; i++) {
        data_fixup_t *fx = &a->fixups[i];
        asm_int_t v;
        if (!bib_asm_parse_int_expr(a, fx->stmt, fx->op, &v, 0))
            continue;
        if (!bib_asm_int_fits(v, fx->width == 8 ? INT64_MIN : INT32_MIN,
                              fx->width == 8 ? UINT64_MAX : UINT32_MAX)) {
            bib_asm_diag_span(a, fx->stmt, fx->op, "address %s does not fit the field", NULL);
            continue;
        }
        uint8_t bytes[8];
        put_le(bytes, bib_asm_int_bits(v), fx->width);
        if (bib_builder_data(a->b, fx->offset, bytes, fx->width) != BIB_OK)
            bib_asm_builder_failed(a);
    }
}
