/* assembler/asm_text.c: the text helpers the assembler and the disassembler
 * share (bib_asm_text_*, asm.h): a growing text buffer, printf into it, and
 * the spellings of names and floats that the assembler reads back.
 *
 * Owns nothing of the .basm language: parsing is asm_lex.c's.
 */
#include "assembler/asm_internal.h"

#include <limits.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

void bib_asm_text_vprintf(bib_asm_text_t *t, const char *format, va_list ap) {
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
    bib_asm_text_vprintf(t, format, ap);
    va_end(ap);
}

int bib_asm_is_ident_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

int bib_asm_is_ident_char(int c) {
    return bib_asm_is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

void bib_asm_text_name(bib_asm_text_t *t, const char *name) {
    size_t n = strlen(name);
    int plain = n > 0 && bib_asm_is_ident_start((unsigned char)name[0]);
    for (size_t i = 1; plain && i < n; i++)
        plain = bib_asm_is_ident_char((unsigned char)name[i]);
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
