/* cli/hexcase.c: the strict parser of `bib test` case files (cli/hexcase.h,
 * spec/hex-tests.md).
 *
 * Nothing in a case file is ignored: an unknown section or option, a number
 * that is not one, a value out of its field's range, a negative offset, an
 * empty or overflowing result each stop the case with one line naming the
 * line and the field. It allocates with malloc and reports running out of
 * memory like any other refusal, so a fuzzer can drive it on any bytes.
 */
#include "cli/hexcase.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refuse(char *msg, size_t msglen, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(msg, msglen, format, ap);
    va_end(ap);
    return -1;
}

/* Up to 40 bytes of s[0..len) as they may appear in a one-line message:
 * control and non-ASCII bytes as \xNN, "..." when cut. */
typedef struct shown {
    char text[40 * 4 + 4];
} shown_t;

static const char *show(shown_t *out, const char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F)
            out->text[o++] = (char)c;
        else
            o += (size_t)snprintf(out->text + o, 5, "\\x%02X", c);
    }
    if (len > 40)
        memcpy(out->text + o, "...", 3), o += 3;
    out->text[o] = '\0';
    return out->text;
}

void bib_hexcase_free(bib_hexcase_t *tc) {
    free(tc->asm_src.text);
    free(tc->raw.text);
    free(tc->mem.text);
    free(tc->out.text);
    free(tc->error.text);
    memset(tc, 0, sizeof *tc);
}

/* An unsigned number, the whole of s[0..len): decimal digits, or 0x and hex
 * digits; no sign, no blanks. Returns 0, 1 when it is not a number, 2 when
 * it is one above max. */
static int parse_unsigned(const char *s, size_t len, uint64_t max, uint64_t *out) {
    unsigned base = 10;
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        base = 16, s += 2, len -= 2;
    if (len == 0)
        return 1;
    uint64_t v = 0;
    bool over = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && isxdigit(c))
            d = (unsigned)(tolower(c) - 'a' + 10);
        else
            return 1;
        if (v > (UINT64_MAX - d) / base)
            over = true;
        else
            v = v * base + d;
    }
    if (over || v > max)
        return 2;
    *out = v;
    return 0;
}

/* A token of the options section: NAME=VALUE with the value in range. */
typedef struct option_field {
    const char *name;
    uint64_t min, max;
} option_field_t;

static const option_field_t option_fields[] = {
    {"fuel", 1, UINT64_MAX},
    {"max-memory", 1, UINT64_MAX},
    {"max-depth", 1, UINT32_MAX},
    {"regs", 1, UINT32_MAX}, /* the loader refuses more than BIB_MAX_REGS */
};
#define OPTION_FIELDS (sizeof option_fields / sizeof option_fields[0])

static int parse_option(bib_hexcase_t *tc, const char *tok, size_t len, int line, bool seen[],
                        char *msg, size_t msglen) {
    shown_t a, b;
    const char *eq = memchr(tok, '=', len);
    size_t name_len = eq ? (size_t)(eq - tok) : len;
    size_t f = 0;
    while (f < OPTION_FIELDS && !(strlen(option_fields[f].name) == name_len &&
                                  memcmp(option_fields[f].name, tok, name_len) == 0))
        f++;
    if (f == OPTION_FIELDS || !eq)
        return refuse(msg, msglen,
                      "line %d: -- options: unknown option '%s' (fuel, max-memory, max-depth, "
                      "regs)",
                      line, show(&a, tok, len));
    if (seen[f])
        return refuse(msg, msglen, "line %d: -- options: %s is given twice", line,
                      option_fields[f].name);
    seen[f] = true;
    const char *val = eq + 1;
    size_t val_len = len - name_len - 1;
    uint64_t v = 0;
    int bad = parse_unsigned(val, val_len, UINT64_MAX, &v);
    if (bad == 1)
        return refuse(msg, msglen, "line %d: -- options: %s: '%s' is not a number", line,
                      show(&a, tok, len), show(&b, val, val_len));
    if (bad == 2 || v < option_fields[f].min || v > option_fields[f].max)
        return refuse(msg, msglen, "line %d: -- options: %s: %s is outside %llu..%llu", line,
                      show(&a, tok, len), show(&b, val, val_len),
                      (unsigned long long)option_fields[f].min,
                      (unsigned long long)option_fields[f].max);
    switch (f) {
    case 0:
        tc->has_fuel = true, tc->fuel = v;
        break;
    case 1:
        tc->has_max_memory = true, tc->max_memory = v;
        break;
    case 2:
        tc->has_max_depth = true, tc->max_depth = (uint32_t)v;
        break;
    default:
        tc->regs = (uint32_t)v;
        break;
    }
    return 0;
}

static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Every token of the options section, with its own line number. */
static int parse_options(bib_hexcase_t *tc, const char *text, int header_line, char *msg,
                         size_t msglen) {
    bool seen[OPTION_FIELDS] = {false};
    int line = header_line + 1;
    for (const char *p = text; *p;) {
        if (*p == '\n')
            line++;
        if (is_blank(*p)) {
            p++;
            continue;
        }
        size_t len = 0;
        while (p[len] && !is_blank(p[len]))
            len++;
        if (parse_option(tc, p, len, line, seen, msg, msglen))
            return -1;
        p += len;
    }
    return 0;
}

/* The expected exit value: one integer, decimal (with an optional '-') in
 * the int64 range, or 0x hex up to 64 bits (the bit pattern). */
static int parse_result(bib_hexcase_t *tc, const char *text, int header_line, char *msg,
                        size_t msglen) {
    shown_t a;
    int line = header_line + 1;
    const char *p = text;
    while (is_blank(*p)) {
        if (*p == '\n' && p[1])
            line++;
        p++;
    }
    size_t len = strlen(p);
    while (len && is_blank(p[len - 1]))
        len--;
    if (len == 0)
        return refuse(msg, msglen, "line %d: -- result is empty", header_line);
    for (size_t i = 0; i < len; i++)
        if (is_blank(p[i]))
            return refuse(msg, msglen, "line %d: -- result: '%s' is more than one value", line,
                          show(&a, p, len));
    bool neg = p[0] == '-';
    bool hex = !neg && len > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    uint64_t v = 0;
    uint64_t max = hex ? UINT64_MAX : neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int bad = parse_unsigned(p + neg, len - neg, max, &v);
    if (bad == 1)
        return refuse(msg, msglen, "line %d: -- result: '%s' is not an integer", line,
                      show(&a, p, len));
    if (bad == 2)
        return refuse(msg, msglen, "line %d: -- result: '%s' is outside the 64-bit range", line,
                      show(&a, p, len));
    tc->has_result = true;
    tc->result = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* The arguments of "-- truncate N" and "-- flip BYTE BIT". */
static int parse_header_args(bib_hexcase_t *tc, const char *name, char **args, int nargs, int line,
                             char *msg, size_t msglen) {
    shown_t a;
    bool flip = strcmp(name, "flip") == 0;
    int want = flip ? 2 : 1;
    if (nargs != want)
        return refuse(msg, msglen, "line %d: -- %s takes %s, found %d value%s", line, name,
                      flip ? "a byte offset and a bit (-- flip BYTE BIT)"
                           : "one byte offset (-- truncate N)",
                      nargs, nargs == 1 ? "" : "s");
    if ((flip ? tc->flip_byte : tc->truncate) >= 0)
        return refuse(msg, msglen, "line %d: -- %s appears twice", line, name);
    uint64_t offset, bit = 0;
    if (parse_unsigned(args[0], strlen(args[0]), INT64_MAX, &offset))
        return refuse(msg, msglen, "line %d: -- %s: '%s' is not a byte offset", line, name,
                      show(&a, args[0], strlen(args[0])));
    if (flip && parse_unsigned(args[1], strlen(args[1]), 7, &bit))
        return refuse(msg, msglen, "line %d: -- flip: bit '%s' is not 0..7", line,
                      show(&a, args[1], strlen(args[1])));
    if (flip)
        tc->flip_byte = (int64_t)offset, tc->flip_bit = (uint32_t)bit;
    else
        tc->truncate = (int64_t)offset;
    return 0;
}

/* Appends n bytes and a newline to a section. */
static int append_line(bib_hexcase_text_t *sec, size_t *len, size_t *cap, const char *line,
                       size_t n) {
    if (*len + n + 2 > *cap) {
        size_t want = (*len + n + 2) * 2;
        char *grown = realloc(sec->text, want);
        if (grown == NULL)
            return -1;
        sec->text = grown;
        *cap = want;
    }
    memcpy(sec->text + *len, line, n);
    *len += n;
    sec->text[(*len)++] = '\n';
    sec->text[*len] = '\0';
    return 0;
}

/* A section header: "-- NAME" and its arguments, split on blanks. */
static int parse_header(bib_hexcase_t *tc, const char *line, size_t n, int lineno,
                        bib_hexcase_text_t **cur, bib_hexcase_text_t *result,
                        bib_hexcase_text_t *options, char *msg, size_t msglen) {
    shown_t a;
    char buf[128];
    if (n - 3 >= sizeof buf)
        return refuse(msg, msglen, "line %d: a section header of %zu bytes is too long", lineno, n);
    memcpy(buf, line + 3, n - 3);
    buf[n - 3] = '\0';
    char *words[4];
    int count = 0;
    for (char *save = NULL, *w = strtok_r(buf, " \t\r", &save); w;
         w = strtok_r(NULL, " \t\r", &save)) {
        if (count == 4)
            return refuse(msg, msglen, "line %d: -- %s: too many values", lineno, words[0]);
        words[count++] = w;
    }
    const char *name = count ? words[0] : "";
    static const struct {
        const char *name;
        size_t offset;
    } plain[] = {
        {"asm", offsetof(bib_hexcase_t, asm_src)},
        {"raw", offsetof(bib_hexcase_t, raw)},
        {"mem", offsetof(bib_hexcase_t, mem)},
        {"stdout", offsetof(bib_hexcase_t, out)},
        {"stdout-no-newline", offsetof(bib_hexcase_t, out)},
        {"error", offsetof(bib_hexcase_t, error)},
    };
    *cur = NULL;
    if (strcmp(name, "truncate") == 0 || strcmp(name, "flip") == 0)
        return parse_header_args(tc, name, words + 1, count - 1, lineno, msg, msglen);
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (strcmp(name, plain[i].name) == 0)
            *cur = (bib_hexcase_text_t *)((char *)tc + plain[i].offset);
    if (strcmp(name, "result") == 0)
        *cur = result;
    else if (strcmp(name, "options") == 0)
        *cur = options;
    if (*cur == NULL)
        return refuse(msg, msglen, "line %d: unknown section '-- %s'", lineno,
                      show(&a, name, strlen(name)));
    if (count > 1)
        return refuse(msg, msglen, "line %d: -- %s takes no values, found '%s'", lineno, name,
                      show(&a, words[1], strlen(words[1])));
    if ((*cur)->text) {
        if (*cur == &tc->out && (tc->out_no_newline || strcmp(name, "stdout") != 0))
            return refuse(msg, msglen,
                          "line %d: a case has one of -- stdout and -- stdout-no-newline", lineno);
        return refuse(msg, msglen, "line %d: section '-- %s' appears twice", lineno, name);
    }
    if (strcmp(name, "stdout-no-newline") == 0)
        tc->out_no_newline = true;
    (*cur)->text = calloc(1, 1);
    if ((*cur)->text == NULL)
        return refuse(msg, msglen, "out of memory reading the case file");
    (*cur)->line = lineno;
    return 0;
}

int bib_hexcase_parse(bib_hexcase_t *tc, const char *text, size_t len, char *msg, size_t msglen) {
    memset(tc, 0, sizeof *tc);
    tc->truncate = -1;
    tc->flip_byte = -1;
    tc->regs = 16;
    bib_hexcase_text_t result = {0}, options = {0};
    bib_hexcase_text_t *cur = NULL;
    size_t sec_len = 0, sec_cap = 0;
    int lineno = 0, rc = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        const char *line = text + at;
        const char *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        lineno++;
        if (memchr(line, '\0', n)) {
            rc = refuse(msg, msglen, "line %d: a NUL byte in a text file", lineno);
        } else if (n >= 3 && memcmp(line, "-- ", 3) == 0) {
            rc = parse_header(tc, line, n, lineno, &cur, &result, &options, msg, msglen);
            sec_len = 0, sec_cap = 1;
        } else if (cur && append_line(cur, &sec_len, &sec_cap, line, n)) {
            rc = refuse(msg, msglen, "out of memory reading the case file");
        }
        at += n + (nl != NULL);
    }
    /* Every section line ends with a newline; output that does not (a last
       print_char) is written as -- stdout-no-newline. */
    if (rc == 0 && tc->out_no_newline) {
        size_t n = strlen(tc->out.text);
        if (n > 0 && tc->out.text[n - 1] == '\n')
            tc->out.text[n - 1] = '\0';
    }
    if (rc == 0 && options.text)
        rc = parse_options(tc, options.text, options.line, msg, msglen);
    if (rc == 0 && result.text)
        rc = parse_result(tc, result.text, result.line, msg, msglen);
    free(result.text);
    free(options.text);
    if (rc)
        bib_hexcase_free(tc);
    return rc;
}

long bib_hexcase_words(const char *text, int first_line, uint64_t max, uint64_t **out, char *msg,
                       size_t msglen) {
    size_t cap = 64, n = 0;
    uint64_t *v = malloc(cap * sizeof *v);
    if (v == NULL)
        return refuse(msg, msglen, "out of memory reading hex words");
    int line = first_line + 1;
    for (const char *p = text; *p;) {
        if (*p == '\n')
            line++;
        if (*p == ';' || *p == '#') {
            while (*p && *p != '\n')
                p++;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') {
            p++;
            continue;
        }
        /* A value is the whole token up to the next separator: "0001000G" is
           one bad token, not 0x1000 followed by "G"; a sign or a 0x prefix,
           which a word of the listing never has, is refused too. */
        size_t len = strcspn(p, " \t\r\n,;#");
        uint64_t x = 0;
        bool ok = len <= 16;
        for (size_t i = 0; ok && i < len; i++)
            ok = isxdigit((unsigned char)p[i]) != 0;
        for (size_t i = 0; ok && i < len; i++) {
            unsigned char c = (unsigned char)p[i];
            x = x << 4 | (uint64_t)(c <= '9' ? c - '0' : tolower(c) - 'a' + 10);
        }
        if (!ok || x > max) {
            free(v);
            shown_t a;
            return refuse(msg, msglen, "line %d: '%s' is not a hex value up to 0x%llx", line,
                          show(&a, p, len), (unsigned long long)max);
        }
        if (n == cap) {
            uint64_t *grown = realloc(v, (cap *= 2) * sizeof *v);
            if (grown == NULL) {
                free(v);
                return refuse(msg, msglen, "out of memory reading hex words");
            }
            v = grown;
        }
        v[n++] = x;
        p += len;
    }
    *out = v;
    return (long)n;
}
