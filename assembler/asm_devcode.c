/* assembler/asm_devcode.c: the .shader and .kernel declarations
 * (spec/device-code.md): their operands, file or raw-block bodies, the
 * binding and argument lists, and the diagnostics of GLSL compilation.
 *
 * It does not compile or reflect device code itself: the external compilers
 * and the SPIR-V reflection are devcode.c's.
 */
#include "assembler/asm_internal.h"

#include <limits.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- device code: .shader and .kernel (spec/device-code.md) ------------ */

/* A .shader or .kernel line, compiled, before it goes to the builder. */
typedef struct asm_devcode {
    char *name, *entry, *params;   /* params: kernels only */
    uint32_t bindings, push_bytes; /* shaders only */
    uint32_t *words;               /* shader SPIR-V */
    uint32_t word_count;
    char *ptx; /* kernel PTX, NUL-terminated */
    uint32_t ptx_bytes;
} asm_devcode_t;

/* A path operand, relative to the directory of the file being assembled. */
static char *devcode_path(asm_state_t *a, uint32_t si, span_t op) {
    if (op.len == 0 || op.p[0] != '"') {
        bib_asm_diag_span(a, si, op, "expected a quoted file name, found '%s'", NULL);
        return NULL;
    }
    char *name = bib_asm_parse_name(a, si, op, "source file");
    if (name == NULL)
        return NULL;
    const char *slash = a->default_source != NULL ? strrchr(a->default_source, '/') : NULL;
    if (name[0] == '/' || slash == NULL)
        return name;
    size_t dir = (size_t)(slash - a->default_source) + 1;
    char *full = malloc(dir + strlen(name) + 1);
    if (full == NULL) {
        free(name);
        bib_asm_out_of_memory(a);
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
        bib_asm_out_of_memory(a);
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
            while (p < end && (bib_asm_is_space((unsigned char)*p) || *p == ','))
                p++;
            if (p >= end || *p == ';')
                break;
            const char *q = p;
            while (q < end && !bib_asm_is_space((unsigned char)*q) && *q != ',')
                q++;
            span_t sp = bib_asm_make_span(s, p, q);
            asm_int_t v;
            if (bib_asm_parse_int(sp, &v) != PARSE_OK || v.neg || v.mag > max) {
                bib_asm_diag_span(a, j, sp,
                                  max == 0xFF ? "expected a byte (0x00..0xFF), found '%s'"
                                              : "expected a 32-bit word, found '%s'",
                                  NULL);
                free(out);
                return NULL;
            }
            if (!bib_asm_grow_array((void **)&out, &cap, n + 1, sizeof *out)) {
                free(out);
                bib_asm_out_of_memory(a);
                return NULL;
            }
            out[n++] = (uint32_t)v.mag;
            p = q;
        }
    }
    *count = n;
    if (out == NULL && (out = malloc(4)) == NULL)
        bib_asm_out_of_memory(a);
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
                bib_asm_diag_at(a, target, 1,
                                a->stmts[target].text_len ? a->stmts[target].text_len : 1,
                                "shader '%s' line %u: %.*s", name, line, mlen, msg);
            else
                bib_asm_diag_at(a, si, a->stmts[si].word.col, a->stmts[si].word.len,
                                "shader '%s' (%s:%u): %.*s", name, path ? path : "glsl", line, mlen,
                                msg);
            reported = 1;
        }
        p += len + (nl ? 1 : 0);
    }
    if (!reported)
        bib_asm_diag_at(a, si, a->stmts[si].word.col, a->stmts[si].word.len,
                        "shader '%s' does not compile: %s", name, errors);
}

void bib_asm_pass1_devcode(asm_state_t *a, uint32_t si) {
    stmt_t *s = &a->stmts[si];
    int kernel = bib_asm_word_is(bib_asm_word(s), ".kernel");
    const char *what = kernel ? "kernel" : "shader";
    if (s->op_count < 2) {
        bib_asm_diag_at(
            a, si, s->word.col, s->word.len,
            kernel ? "'.kernel' needs a name and a form (ptx, cu, ptx-text or ptx-bytes)"
                   : "'.shader' needs a name and a form (file, glsl, spirv or spirv-words)");
        return;
    }
    span_t form = bib_asm_operand(a, s, 1);
    int has_path = kernel ? bib_asm_span_is(form, "ptx") || bib_asm_span_is(form, "cu")
                          : bib_asm_span_is(form, "file") || bib_asm_span_is(form, "spirv");
    int block = kernel ? bib_asm_span_is(form, "ptx-text") || bib_asm_span_is(form, "ptx-bytes")
                       : bib_asm_span_is(form, "glsl") || bib_asm_span_is(form, "spirv-words");
    if (!has_path && !block) {
        bib_asm_diag_span(
            a, si, form,
            kernel ? "unknown kernel form '%s' (expected ptx, cu, ptx-text or ptx-bytes)"
                   : "unknown shader form '%s' (expected file, glsl, spirv or spirv-words)",
            NULL);
        return;
    }
    asm_devcode_t d;
    memset(&d, 0, sizeof d);
    int bindings_given = 0, push_given = 0;
    uint64_t bindings = 0, push = 0;
    char *path = NULL;
    uint32_t first_opt = has_path ? 3 : 2;
    if (has_path &&
        (s->op_count < 3 || (path = devcode_path(a, si, bib_asm_operand(a, s, 2))) == NULL)) {
        if (s->op_count < 3)
            bib_asm_diag_span(a, si, form, "form '%s' needs a quoted file name after it", NULL);
        return;
    }
    d.name = bib_asm_parse_name(a, si, bib_asm_operand(a, s, 0), what);
    int ok = d.name != NULL;
    if (ok && a->deny_device_code) {
        bib_asm_diag_at(a, si, s->word.col, s->word.len,
                        "%s '%s' is user device code, which the load policy denies "
                        "(--deny=device-code); nothing it names was read or compiled",
                        what, d.name);
        ok = 0;
    }
    for (uint32_t i = first_opt; i < s->op_count && ok; i++) {
        span_t op = bib_asm_operand(a, s, i);
        const char *eq = memchr(op.p, '=', op.len);
        span_t key = {op.p, eq ? (uint32_t)(eq - op.p) : op.len, op.col};
        span_t val = eq ? bib_asm_make_span(s, eq + 1, op.p + op.len) : key;
        if (eq != NULL && bib_asm_span_is(key, "entry")) {
            free(d.entry);
            ok = (d.entry = bib_asm_parse_name(a, si, val, "entry point")) != NULL;
        } else if (eq != NULL && !kernel && bib_asm_span_is(key, "bindings")) {
            ok = bib_asm_parse_unsigned(a, si, val, BIB_MAX_SHADER_BINDINGS, &bindings,
                                        "a binding count");
            bindings_given = 1;
        } else if (eq != NULL && !kernel && bib_asm_span_is(key, "push")) {
            ok = bib_asm_parse_unsigned(a, si, val, BIB_MAX_PUSH_BYTES, &push,
                                        "a push-constant size");
            push_given = 1;
        } else if (eq != NULL && kernel && bib_asm_span_is(key, "params")) {
            free(d.params);
            d.params = malloc(val.len + 1);
            if (d.params == NULL) {
                bib_asm_out_of_memory(a);
                ok = 0;
                break;
            }
            memcpy(d.params, val.p, val.len);
            d.params[val.len] = '\0';
            if (strspn(d.params, "tilfd") != val.len || val.len > BIB_MAX_KERNEL_PARAMS) {
                bib_asm_diag_span(
                    a, si, val,
                    "a parameter signature is up to 32 of the letters t (tensor), i, l "
                    "(32/64-bit integer), f, d (32/64-bit float), found '%s'",
                    NULL);
                ok = 0;
            }
        } else {
            bib_asm_diag_span(
                a, si, op,
                kernel ? "unknown kernel option '%s' (expected entry=NAME or params=LETTERS)"
                       : "unknown shader option '%s' (expected entry=NAME, bindings=N or "
                         "push=BYTES)",
                NULL);
            ok = 0;
        }
    }
    if (ok && d.entry == NULL && (d.entry = strdup(kernel ? d.name : "main")) == NULL) {
        bib_asm_out_of_memory(a);
        ok = 0;
    }
    char why[1024];
    if (ok && !kernel) {
        char *errors = NULL;
        if (bib_asm_span_is(form, "spirv-words")) {
            ok = (d.words = devcode_numbers(a, si, UINT32_MAX, &d.word_count)) != NULL;
            /* Declared sizes are taken as given: the disassembler prints
               them, and any module the verifier accepts must rebuild. */
            if (ok && (!bindings_given || !push_given)) {
                bib_asm_diag_at(a, si, s->word.col, s->word.len,
                                "a spirv-words shader declares bindings=N and push=BYTES");
                ok = 0;
            }
        } else if (bib_asm_span_is(form, "spirv")) {
            char *bytes = NULL;
            size_t size = 0;
            ok = bib_devcode_read_file(path, &bytes, &size, why, sizeof why);
            if (!ok)
                bib_asm_diag_span(a, si, bib_asm_operand(a, s, 2), "%s", why);
            else if (size % 4 != 0 || size / 4 > BIB_MAX_SPIRV_WORDS) {
                bib_asm_diag_at(a, si, bib_asm_operand(a, s, 2).col, bib_asm_operand(a, s, 2).len,
                                "'%s' is %zu bytes: SPIR-V is whole 32-bit words (at most %u)",
                                path, size, BIB_MAX_SPIRV_WORDS);
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
            if (bib_asm_span_is(form, "glsl")) {
                src = devcode_body(a, si, &blen);
                len = blen;
                ok = src != NULL;
            } else {
                ok = bib_devcode_read_file(path, &src, &len, why, sizeof why);
                if (!ok)
                    bib_asm_diag_span(a, si, bib_asm_operand(a, s, 2), "%s", why);
            }
            if (ok &&
                !bib_devcode_glsl(src, len, d.name, d.entry, &d.words, &d.word_count, &errors)) {
                devcode_glsl_errors(a, si, d.name, path, errors ? errors : "out of memory");
                ok = 0;
            }
            free(src);
            free(errors);
        }
        if (ok && !bib_asm_span_is(form, "spirv-words")) {
            uint32_t rb, rp;
            if (!bib_devcode_reflect(d.words, d.word_count, &rb, &rp, why, sizeof why)) {
                bib_asm_diag_at(a, si, s->word.col, s->word.len, "shader '%s': %s", d.name, why);
                ok = 0;
            } else if ((bindings_given && bindings != rb) || (push_given && push != rp)) {
                bib_asm_diag_at(
                    a, si, s->word.col, s->word.len,
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
            bib_asm_diag_at(
                a, si, s->word.col, s->word.len,
                "kernel '%s' needs params=LETTERS (its parameter types, one letter each)", d.name);
            ok = 0;
        } else if (bib_asm_span_is(form, "ptx-bytes")) {
            uint32_t *bytes = devcode_numbers(a, si, 0xFF, &d.ptx_bytes);
            ok = bytes != NULL && (d.ptx = malloc((size_t)d.ptx_bytes + 1)) != NULL;
            for (uint32_t i = 0; ok && i < d.ptx_bytes; i++)
                d.ptx[i] = (char)bytes[i];
            if (ok)
                d.ptx[d.ptx_bytes] = '\0';
            else if (bytes != NULL)
                bib_asm_out_of_memory(a);
            free(bytes);
        } else if (bib_asm_span_is(form, "ptx-text")) {
            ok = (d.ptx = devcode_body(a, si, &d.ptx_bytes)) != NULL;
        } else {
            size_t size = 0;
            ok = bib_asm_span_is(form, "ptx")
                     ? bib_devcode_read_file(path, &d.ptx, &size, why, sizeof why)
                     : bib_devcode_nvcc(path, &d.ptx, &size, why, sizeof why);
            if (!ok)
                bib_asm_diag_span(a, si, bib_asm_operand(a, s, 2), "%s", why);
            else if (size > BIB_MAX_PTX_BYTES || strlen(d.ptx) != size) {
                bib_asm_diag_span(a, si, bib_asm_operand(a, s, 2),
                                  "the PTX of '%s' holds a NUL byte or is too large", NULL);
                ok = 0;
            }
            d.ptx_bytes = (uint32_t)size;
        }
    }
    free(path);
    uint32_t prev =
        ok ? bib_builder_find(a->b, kernel ? BIB_BUILDER_KERNEL : BIB_BUILDER_SHADER, d.name)
           : ASM_NONE;
    if (prev != ASM_NONE) {
        bib_asm_diag_span(a, si, bib_asm_operand(a, s, 0), "'%s' is already defined", NULL);
        ok = 0;
    }
    if (ok && (kernel ? bib_builder_kernel(a->b, d.name, d.entry, d.params, d.ptx, d.ptx_bytes)
                      : bib_builder_shader(a->b, d.name, d.entry, d.bindings, d.push_bytes, d.words,
                                           d.word_count)) == ASM_NONE) {
        bib_asm_builder_failed(a);
        ok = 0;
    }
    if (!ok && d.name != NULL && prev == ASM_NONE && !a->oom &&
        bib_asm_sym_add(&a->syms, d.name, kernel ? SYM_BROKEN_KERNEL : SYM_BROKEN_SHADER, 0, 0,
                        si) == NULL)
        bib_asm_out_of_memory(a);
    free(d.name);
    free(d.entry);
    free(d.params);
    free(d.words);
    free(d.ptx);
}
