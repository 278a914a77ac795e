/* cli/hextest.c: `bib test`, the hex-program test runner (spec/hex-tests.md).
 *
 * For each case file it checks that the assembly assembles to exactly the
 * raw words, that the raw words disassemble and re-assemble to the same
 * words, and that running the module gives the expected result, output or
 * error. It owns the case-file parser and the coverage listing; assembling,
 * loading and running go through libbib.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "vm/module.h"

/* ---- case files ---------------------------------------------------------- */

typedef struct hex_text {
    char *text; /* NUL-terminated; NULL when the section is absent */
    int line;   /* line of the section header in the case file */
} hex_text_t;

typedef struct hex_case {
    const char *path;
    hex_text_t asm_src, raw, mem, result, out, error, options;
    long truncate; /* -1: none */
    long flip_byte, flip_bit;
    bool out_no_newline; /* the section was -- stdout-no-newline */
} hex_case_t;

static void case_free(hex_case_t *tc) {
    free(tc->asm_src.text);
    free(tc->raw.text);
    free(tc->mem.text);
    free(tc->result.text);
    free(tc->out.text);
    free(tc->error.text);
    free(tc->options.text);
}

/* Splits a case file into its "-- name" sections. Returns 0, or -1 with msg set. */
static int case_parse(hex_case_t *tc, char *text, char *msg, size_t msglen) {
    tc->truncate = -1;
    tc->flip_byte = -1;
    hex_text_t *cur = NULL;
    size_t cap = 0, len = 0;
    int lineno = 0;
    char *line = text;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        lineno++;
        if (n >= 3 && strncmp(line, "-- ", 3) == 0) {
            char name[32] = {0};
            long x = 0, y = 0;
            sscanf(line + 3, "%31s %ld %ld", name, &x, &y);
            cur = NULL;
            if (strcmp(name, "asm") == 0)
                cur = &tc->asm_src;
            else if (strcmp(name, "raw") == 0)
                cur = &tc->raw;
            else if (strcmp(name, "mem") == 0)
                cur = &tc->mem;
            else if (strcmp(name, "result") == 0)
                cur = &tc->result;
            else if (strcmp(name, "stdout") == 0)
                cur = &tc->out;
            else if (strcmp(name, "stdout-no-newline") == 0)
                cur = &tc->out, tc->out_no_newline = true;
            else if (strcmp(name, "error") == 0)
                cur = &tc->error;
            else if (strcmp(name, "options") == 0)
                cur = &tc->options;
            else if (strcmp(name, "truncate") == 0)
                tc->truncate = x;
            else if (strcmp(name, "flip") == 0)
                tc->flip_byte = x, tc->flip_bit = y;
            else {
                snprintf(msg, msglen, "line %d: unknown section '-- %s'", lineno, name);
                return -1;
            }
            if (cur) {
                if (cur->text) {
                    snprintf(msg, msglen, "line %d: section '-- %s' appears twice", lineno, name);
                    return -1;
                }
                cur->text = bib_cli_zalloc(1, 1);
                cur->line = lineno;
                cap = 1, len = 0;
            }
        } else if (cur) {
            if (len + n + 2 > cap) {
                cap = (len + n + 2) * 2;
                cur->text = bib_cli_grow(cur->text, cap);
            }
            memcpy(cur->text + len, line, n);
            len += n;
            cur->text[len++] = '\n';
            cur->text[len] = 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    /* Every section line ends with a newline; output that does not (a last
       print_char) is written as -- stdout-no-newline. */
    if (tc->out_no_newline) {
        size_t n = strlen(tc->out.text);
        if (n > 0 && tc->out.text[n - 1] == '\n')
            tc->out.text[n - 1] = '\0';
    }
    return 0;
}

/* Parses whitespace-separated hex numbers (a ';' or '#' starts a comment).
 * Returns the count, or -1 with msg set. */
static long parse_hex_list(const char *text, int first_line, uint64_t max, uint64_t **out,
                           char *msg, size_t msglen) {
    size_t cap = 64, n = 0;
    uint64_t *v = bib_cli_alloc(cap * sizeof *v);
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
           one bad token, not 0x1000 followed by "G". strtoull would also take
           a sign or a 0x prefix, which a word of the listing never has. */
        size_t len = strcspn(p, " \t\r\n,;#");
        char *end;
        errno = 0;
        unsigned long long x = strtoull(p, &end, 16);
        if (end != p + len || errno || x > max || !isxdigit((unsigned char)*p) ||
            (len > 1 && (p[1] == 'x' || p[1] == 'X'))) {
            snprintf(msg, msglen, "line %d: '%.*s' is not a hex value up to 0x%llx", line,
                     (int)(len < 24 ? len : 24), p, (unsigned long long)max);
            free(v);
            return -1;
        }
        if (n == cap)
            v = bib_cli_grow(v, (cap *= 2) * sizeof *v);
        v[n++] = x;
        p = end;
    }
    *out = v;
    return (long)n;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* ---- running one case ------------------------------------------------------ */

typedef struct runner {
    const bib_options_t *base;
    const bib_cli_test_flags_t *flags;
    uint32_t coverage[BIB_OP__COUNT];
    int passed, failed;
} runner_t;

typedef struct outcome {
    char why[1024];
} outcome_t;

static int fail(outcome_t *o, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(o->why, sizeof o->why, format, ap);
    va_end(ap);
    return -1;
}

static const char *status_kind(bib_status_t st) {
    switch (st) {
    case BIB_E_ASM:
        return "asm";
    case BIB_E_TRAP:
    case BIB_E_NOMEM:
    case BIB_E_TIMEOUT:
        return "trap";
    default:
        return "load";
    }
}

/* Checks an error against "-- error" ("kind: substring"). */
static int check_error(const hex_case_t *tc, bib_status_t st, const char *message, outcome_t *o) {
    if (!tc->error.text)
        return fail(o, "unexpected %s error: %s", status_kind(st), message);
    char *want = bib_cli_strdup(tc->error.text);
    char *w = trim(want);
    char *colon = strchr(w, ':');
    int rc = 0;
    if (!colon) {
        rc = fail(o, "'-- error' must read 'asm|load|trap: text'");
    } else {
        *colon = 0;
        const char *sub = trim(colon + 1);
        if (strcmp(w, status_kind(st)) != 0)
            rc = fail(o, "expected a %s error, got %s error: %s", w, status_kind(st), message);
        else if (!strstr(message, sub))
            rc = fail(o, "expected the %s error to contain '%s', got: %s", w, sub, message);
    }
    free(want);
    return rc;
}

static void apply_options(const hex_case_t *tc, bib_options_t *opt) {
    if (!tc->options.text)
        return;
    char *copy = bib_cli_strdup(tc->options.text), *save = NULL;
    for (char *tok = strtok_r(copy, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        unsigned long long v;
        if (sscanf(tok, "fuel=%llu", &v) == 1)
            opt->fuel = v;
        else if (sscanf(tok, "max-memory=%llu", &v) == 1)
            opt->max_memory = v;
        else if (sscanf(tok, "max-depth=%llu", &v) == 1)
            opt->max_call_depth = (uint32_t)v;
    }
    free(copy);
}

static uint32_t option_regs(const hex_case_t *tc) {
    const char *p = tc->options.text ? strstr(tc->options.text, "regs=") : NULL;
    unsigned v = 16;
    if (p)
        sscanf(p, "regs=%u", &v);
    return v ? v : 16;
}

/* A module holding the raw words: the assembled module's tables when there
 * is assembly, else one function "main" with regs=N from "-- options". */
static bib_module_t *raw_module(const hex_case_t *tc, const bib_module_t *assembled,
                                const uint64_t *words, long nwords) {
    bib_module_t *m = bib_cli_zalloc(1, sizeof *m);
    uint32_t count = (uint32_t)(nwords / BIB_INSN_WORDS);
    m->code = bib_cli_zalloc(count ? count : 1, sizeof *m->code);
    m->code_count = count;
    for (uint32_t i = 0; i < count; i++) {
        const uint64_t *w = words + (size_t)i * BIB_INSN_WORDS;
        m->code[i] = (bib_insn_t){(uint32_t)w[0], (uint32_t)w[1], (uint32_t)w[2], (uint32_t)w[3],
                                  (uint32_t)w[4]};
    }
    if (assembled && assembled->code_count == count) {
        m->const_count = assembled->const_count;
        m->consts = bib_cli_memdup(assembled->consts, m->const_count * sizeof *m->consts);
        m->data_size = assembled->data_size;
        m->data = bib_cli_memdup(assembled->data, m->data_size);
        m->memory_size = assembled->memory_size;
        m->func_count = assembled->func_count;
        m->funcs = bib_cli_zalloc(m->func_count, sizeof *m->funcs);
        for (uint32_t i = 0; i < m->func_count; i++) {
            m->funcs[i] = assembled->funcs[i];
            m->funcs[i].name = bib_cli_strdup(assembled->funcs[i].name);
        }
        m->entry_func = assembled->entry_func;
        m->import_count = assembled->import_count;
        m->imports = bib_cli_zalloc(m->import_count + 1, sizeof *m->imports);
        for (uint32_t i = 0; i < m->import_count; i++)
            m->imports[i] = bib_cli_strdup(assembled->imports[i]);
        m->tensor_regs = assembled->tensor_regs;
        m->tensor_count = assembled->tensor_count;
        m->tensors = bib_cli_zalloc(m->tensor_count + 1, sizeof *m->tensors);
        for (uint32_t i = 0; i < m->tensor_count; i++) {
            m->tensors[i] = assembled->tensors[i];
            m->tensors[i].name = bib_cli_strdup(assembled->tensors[i].name);
            m->tensors[i].init = NULL;
            if (assembled->tensors[i].init != NULL)
                m->tensors[i].init =
                    bib_cli_memdup(assembled->tensors[i].init, (size_t)m->tensors[i].init_size);
        }
        m->dim_name_count = assembled->dim_name_count;
        m->dim_names = bib_cli_zalloc(m->dim_name_count + 1, sizeof *m->dim_names);
        for (uint32_t i = 0; i < m->dim_name_count; i++)
            m->dim_names[i] = bib_cli_strdup(assembled->dim_names[i]);
        /* Device code too, so a raw case can use VK_COMPUTE and GPU_LAUNCH. */
        m->shader_count = assembled->shader_count;
        m->shaders = bib_cli_zalloc(m->shader_count + 1, sizeof *m->shaders);
        for (uint32_t i = 0; i < m->shader_count; i++) {
            const bib_shader_decl_t *s = &assembled->shaders[i];
            m->shaders[i] = *s;
            m->shaders[i].name = bib_cli_strdup(s->name);
            m->shaders[i].entry = bib_cli_strdup(s->entry);
            m->shaders[i].spirv = bib_cli_memdup(s->spirv, (size_t)s->words * 4);
        }
        m->kernel_count = assembled->kernel_count;
        m->kernels = bib_cli_zalloc(m->kernel_count + 1, sizeof *m->kernels);
        for (uint32_t i = 0; i < m->kernel_count; i++) {
            const bib_kernel_decl_t *k = &assembled->kernels[i];
            m->kernels[i] = *k;
            m->kernels[i].name = bib_cli_strdup(k->name);
            m->kernels[i].entry = bib_cli_strdup(k->entry);
            m->kernels[i].params = bib_cli_strdup(k->params);
            m->kernels[i].ptx = bib_cli_memdup(k->ptx, (size_t)k->ptx_bytes);
        }
    } else {
        m->func_count = 1;
        m->funcs = bib_cli_zalloc(1, sizeof *m->funcs);
        m->funcs[0] = (bib_function_t){bib_cli_strdup("main"), 0, count, 0, option_regs(tc)};
        m->data = bib_cli_zalloc(1, 1);
    }
    return m;
}

/* Replaces the module's data with "-- mem" bytes. */
static int apply_mem(const hex_case_t *tc, bib_module_t *m, outcome_t *o) {
    if (!tc->mem.text)
        return 0;
    uint64_t *bytes;
    char msg[256];
    long n = parse_hex_list(tc->mem.text, tc->mem.line, 0xFF, &bytes, msg, sizeof msg);
    if (n < 0)
        return fail(o, "-- mem: %s", msg);
    free(m->data);
    m->data = bib_cli_alloc((size_t)n + 1);
    for (long i = 0; i < n; i++)
        m->data[i] = (uint8_t)bytes[i];
    m->data_size = (uint32_t)n;
    if (m->memory_size < (uint64_t)n)
        m->memory_size = (uint64_t)n;
    free(bytes);
    return 0;
}

static int compare_code(const bib_module_t *m, const uint64_t *words, long nwords, const char *what,
                        outcome_t *o) {
    long have = (long)m->code_count * BIB_INSN_WORDS;
    for (long i = 0; i < have && i < nwords; i++) {
        const bib_insn_t *in = &m->code[i / BIB_INSN_WORDS];
        uint32_t w = (uint32_t[]){in->op, in->a, in->b, in->c, in->d}[i % BIB_INSN_WORDS];
        if (w != words[i])
            return fail(o, "%s: instruction %ld word %ld is %08x, the raw section says %08llx",
                        what, i / BIB_INSN_WORDS, i % BIB_INSN_WORDS, w,
                        (unsigned long long)words[i]);
    }
    if (have != nwords)
        return fail(o, "%s: %ld words, the raw section has %ld", what, have, nwords);
    return 0;
}

/* raw words -> bytes -> disassembly -> assembly -> the same words. */
static int check_round_trip(const uint8_t *bytes, size_t size, const uint64_t *words, long nwords,
                            outcome_t *o) {
    char *text = NULL, *diag = NULL;
    bib_status_t st = bib_disassemble(bytes, size, &text, &diag);
    if (st != BIB_OK) {
        int rc = fail(o, "raw words do not disassemble: %s", diag ? diag : bib_status_name(st));
        bib_free(diag);
        return rc;
    }
    bib_free(diag);
    uint8_t *again = NULL;
    size_t again_size = 0;
    st = bib_assemble(text, strlen(text), "<disassembly>", &again, &again_size, &diag);
    bib_free(text);
    if (st != BIB_OK) {
        int rc = fail(o, "the disassembly does not re-assemble: %s", diag ? diag : "");
        bib_free(diag);
        return rc;
    }
    bib_free(diag);
    bib_module_t *m = NULL;
    bib_diag_t d;
    st = bib_module_read(again, again_size, &m, &d);
    bib_free(again);
    if (st != BIB_OK)
        return fail(o, "the re-assembled module does not load: %s", d.msg);
    int rc = compare_code(m, words, nwords, "re-assembled disassembly", o);
    bib_module_free(m);
    return rc;
}

static void count_coverage(runner_t *r, const bib_module_t *m) {
    for (uint32_t i = 0; i < m->code_count; i++) {
        int op = bib_isa_find_code(m->code[i].op);
        if (op >= 0)
            r->coverage[op]++;
    }
}

static int run_case(runner_t *r, hex_case_t *tc, outcome_t *o) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    bib_module_t *assembled = NULL, *coverage_module = NULL;
    uint64_t *words = NULL;
    long nwords = -1;
    int rc = -1;
    bib_diag_t d;
    char msg[256];

    if (!tc->asm_src.text && !tc->raw.text)
        return fail(o, "a case needs '-- asm' or '-- raw'");
    if (!tc->result.text && !tc->out.text && !tc->error.text)
        return fail(o, "a case needs '-- result', '-- stdout' or '-- error'");

    if (tc->asm_src.text) {
        char *diag = NULL;
        bib_status_t st = bib_assemble(tc->asm_src.text, strlen(tc->asm_src.text), tc->path, &bytes,
                                       &size, &diag);
        if (st != BIB_OK) {
            rc = check_error(tc, st, diag ? diag : "", o);
            bib_free(diag);
            return rc;
        }
        bib_free(diag);
        if (bib_module_read(bytes, size, &assembled, &d) != BIB_OK) {
            fail(o, "assembled module does not load: %s", d.msg);
            goto done;
        }
    }
    if (tc->raw.text) {
        nwords = parse_hex_list(tc->raw.text, tc->raw.line, 0xFFFFFFFFu, &words, msg, sizeof msg);
        if (nwords < 0) {
            fail(o, "-- raw: %s", msg);
            goto done;
        }
        if (nwords % BIB_INSN_WORDS) {
            fail(o, "-- raw: %ld words is not a whole number of 5-word instructions", nwords);
            goto done;
        }
        if (assembled && compare_code(assembled, words, nwords, "assembly", o))
            goto done;
        bib_module_t *m = raw_module(tc, assembled, words, nwords);
        if (apply_mem(tc, m, o)) {
            bib_module_free(m);
            goto done;
        }
        bib_free(bytes);
        bytes = NULL;
        bib_status_t st = bib_module_write(m, &bytes, &size, &d);
        bib_module_free(m);
        if (st != BIB_OK) {
            fail(o, "cannot write the raw module: %s", d.msg);
            goto done;
        }
        /* Only a module that verifies can round-trip through the disassembler. */
        if (bib_module_read(bytes, size, &coverage_module, &d) == BIB_OK &&
            check_round_trip(bytes, size, words, nwords, o))
            goto done;
    } else if (tc->mem.text) {
        if (apply_mem(tc, assembled, o))
            goto done;
        bib_free(bytes);
        bytes = NULL;
        if (bib_module_write(assembled, &bytes, &size, &d) != BIB_OK) {
            fail(o, "cannot write the module: %s", d.msg);
            goto done;
        }
    }
    if (tc->truncate >= 0) {
        if ((size_t)tc->truncate > size) {
            fail(o, "-- truncate %ld is past the module's %zu bytes", tc->truncate, size);
            goto done;
        }
        size = (size_t)tc->truncate;
    }
    if (tc->flip_byte >= 0) {
        if ((size_t)tc->flip_byte >= size || tc->flip_bit < 0 || tc->flip_bit > 7) {
            fail(o, "-- flip %ld %ld is outside the module's %zu bytes", tc->flip_byte,
                 tc->flip_bit, size);
            goto done;
        }
        bytes[tc->flip_byte] ^= (uint8_t)(1u << tc->flip_bit);
    }

    bib_options_t opt = *r->base;
    opt.trace_format = BIB_TRACE_OFF;
    apply_options(tc, &opt);
    bib_vm_t *vm = NULL;
    if (bib_vm_create(&opt, &vm) != BIB_OK) {
        fail(o, "cannot create a VM");
        goto done;
    }
    char *out_text = NULL;
    size_t out_len = 0;
    FILE *out = open_memstream(&out_text, &out_len);
    bib_vm_register_stdio(vm, out);
    int64_t exit_value = 0;
    bib_status_t st = bib_vm_load(vm, bytes, size, tc->path);
    if (st == BIB_OK)
        st = bib_vm_run(vm, &exit_value);
    fclose(out);
    if (st != BIB_OK) {
        rc = check_error(tc, st, bib_vm_error(vm), o);
    } else if (tc->error.text) {
        rc = fail(o, "expected an error, but the run ended with %lld", (long long)exit_value);
    } else {
        rc = 0;
        if (tc->result.text) {
            char *end;
            const char *want_text = trim(tc->result.text);
            long long want = strtoll(want_text, &end, 0);
            if (*end)
                rc = fail(o, "-- result: '%s' is not an integer", want_text);
            else if (want != exit_value)
                rc = fail(o, "result %lld, expected %lld", (long long)exit_value, want);
        }
        if (rc == 0 && tc->out.text && strcmp(tc->out.text, out_text) != 0) {
            size_t n = strlen(out_text);
            if (!tc->out_no_newline && n + 1 == strlen(tc->out.text) &&
                strncmp(tc->out.text, out_text, n) == 0)
                rc = fail(o, "stdout differs: it does not end with the newline that '-- stdout' "
                             "expects (write '-- stdout-no-newline' for output without one)");
            else
                rc =
                    fail(o, "stdout differs:\n--- expected\n%s--- got\n%s", tc->out.text, out_text);
        }
    }
    free(out_text);
    bib_vm_destroy(vm);
    if (rc == 0) {
        if (coverage_module)
            count_coverage(r, coverage_module);
        else if (assembled)
            count_coverage(r, assembled);
    }
done:
    bib_free(bytes);
    free(words);
    if (assembled)
        bib_module_free(assembled);
    if (coverage_module)
        bib_module_free(coverage_module);
    return rc;
}

static void run_file(runner_t *r, const char *path) {
    uint8_t *text;
    size_t len;
    outcome_t o = {{0}};
    hex_case_t tc = {0};
    tc.path = path;
    int rc;
    if (bib_cli_read_file(path, &text, &len)) {
        rc = fail(&o, "cannot read the case file");
    } else {
        char *s = bib_cli_grow(text, len + 1);
        s[len] = 0;
        char msg[256];
        rc = case_parse(&tc, s, msg, sizeof msg) ? fail(&o, "%s", msg) : run_case(r, &tc, &o);
        free(s);
    }
    if (rc == 0) {
        r->passed++;
        if (r->flags->verbose)
            printf("PASS %s\n", path);
    } else {
        r->failed++;
        printf("FAIL %s: %s\n", path, o.why);
    }
    case_free(&tc);
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_path(runner_t *r, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("FAIL %s: %s\n", path, strerror(errno));
        r->failed++;
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        run_file(r, path);
        return;
    }
    DIR *dir = opendir(path);
    if (!dir) {
        printf("FAIL %s: %s\n", path, strerror(errno));
        r->failed++;
        return;
    }
    size_t n = 0, cap = 64;
    char **names = bib_cli_alloc(cap * sizeof *names);
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(e->d_name);
        char *full = bib_cli_alloc(strlen(path) + len + 2);
        sprintf(full, "%s/%s", path, e->d_name);
        struct stat sub;
        int is_dir = stat(full, &sub) == 0 && S_ISDIR(sub.st_mode);
        if (!is_dir && (len < 4 || strcmp(e->d_name + len - 4, ".hex") != 0)) {
            free(full);
            continue;
        }
        if (n == cap)
            names = bib_cli_grow(names, (cap *= 2) * sizeof *names);
        names[n++] = full;
    }
    closedir(dir);
    qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        run_path(r, names[i]);
        free(names[i]);
    }
    free(names);
}

int bib_cli_test(const bib_options_t *options, const bib_cli_test_flags_t *flags, int npaths,
                 char **paths) {
    runner_t *r = bib_cli_zalloc(1, sizeof *r);
    r->base = options;
    r->flags = flags;
    for (int i = 0; i < npaths; i++)
        run_path(r, paths[i]);
    int uncovered = 0;
    if (flags->coverage) {
        for (int op = 0; op < BIB_OP__COUNT; op++) {
            if (bib_isa_table[op].flags & BIB_F_RESERVED || r->coverage[op])
                continue;
            printf("%s %s", uncovered ? "," : "coverage: not exercised by any passing case:",
                   bib_isa_table[op].name);
            uncovered++;
        }
        if (uncovered)
            printf("\n");
        else
            printf("coverage: every implemented opcode is exercised\n");
    }
    printf("%d passed, %d failed\n", r->passed, r->failed);
    int rc = (r->failed || uncovered) ? BIB_EXIT_TESTFAIL : 0;
    free(r);
    return rc;
}
