/* cli/hextest.c: `bib test`, the hex-program test runner (spec/hex-tests.md).
 *
 * For each case file it checks that the assembly assembles to exactly the
 * raw words, that the raw words disassemble and re-assemble to the same
 * words, and that running the module gives the expected result, output or
 * error, under the case's limits or the default fuel. It owns the coverage
 * listing; the case files are parsed by cli/hexcase.c, and assembling,
 * loading and running go through libbib.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/hexcase.h"
#include "module/module.h"

/* ---- case files ---------------------------------------------------------- */

/* A parsed case file (cli/hexcase.h) and its path. */
typedef struct hex_case {
    const char *path;
    bib_hexcase_t c;
} hex_case_t;

/* ---- running one case ------------------------------------------------------ */

typedef struct runner {
    const bib_options_t *base;
    const bib_cli_test_flags_t *flags;
    uint32_t coverage[BIB_OP__COUNT];
    int passed, failed;
    /* The folders walked so far: a folder reached again (a symbolic link
       back up the tree, or to a folder already given) is walked once. */
    struct {
        dev_t dev;
        ino_t ino;
    } * walked;
    size_t nwalked, walked_cap;
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

/* A case's "-- error" line, read once: the kind ("asm", "load" or "trap")
   and the text the message must contain, trimmed. */
typedef struct expected_error {
    const char *kind; /* NULL: the case expects no error */
    const char *text;
    size_t len;
} expected_error_t;

/* Reads tc's "-- error" into e; fails when it is not 'asm|load|trap: text'. */
static int read_expected_error(const hex_case_t *tc, expected_error_t *e, outcome_t *o) {
    static const char *const kinds[] = {"asm", "load", "trap"};
    *e = (expected_error_t){NULL, NULL, 0};
    const char *w = tc->c.error.text;
    if (w == NULL)
        return 0;
    while (*w == ' ' || *w == '\t')
        w++;
    size_t n = strcspn(w, ":\n");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && w[n] == ':'; i++)
        if (strlen(kinds[i]) == n && strncmp(w, kinds[i], n) == 0)
            e->kind = kinds[i];
    if (e->kind == NULL)
        return fail(o, "line %d: -- error: '%.*s' must read 'asm|load|trap: text'",
                    tc->c.error.line, (int)(n < 40 ? n : 40), w);
    const char *t = w + n + 1;
    while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
        t++;
    size_t len = strlen(t);
    while (len &&
           (t[len - 1] == ' ' || t[len - 1] == '\t' || t[len - 1] == '\n' || t[len - 1] == '\r'))
        len--;
    e->text = t;
    e->len = len;
    return 0;
}

/* Checks an error against the case's expected one. */
static int check_error(const expected_error_t *e, bib_status_t st, const char *message,
                       outcome_t *o) {
    if (e->kind == NULL)
        return fail(o, "unexpected %s error: %s", status_kind(st), message);
    if (strcmp(e->kind, status_kind(st)) != 0)
        return fail(o, "expected a %s error, got %s error: %s", e->kind, status_kind(st), message);
    if (e->len > 0 && memmem(message, strlen(message), e->text, e->len) == NULL)
        return fail(o, "expected the %s error to contain '%.*s', got: %s", e->kind, (int)e->len,
                    e->text, message);
    return 0;
}

/* The case's limits: its own, else the command line's, else (fuel) the
 * default that keeps a looping case from hanging the suite. */
static void apply_options(const hex_case_t *tc, bib_options_t *opt) {
    if (tc->c.has_fuel)
        opt->fuel = tc->c.fuel;
    else if (opt->fuel == 0)
        opt->fuel = BIB_HEXCASE_DEFAULT_FUEL;
    if (tc->c.has_max_memory)
        opt->max_memory = tc->c.max_memory;
    if (tc->c.has_max_depth)
        opt->max_call_depth = tc->c.max_depth;
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
        m->funcs[0] = (bib_function_t){bib_cli_strdup("main"), 0, count, 0, tc->c.regs};
        m->data = bib_cli_zalloc(1, 1);
    }
    return m;
}

/* Replaces the module's data with "-- mem" bytes. */
static int apply_mem(const hex_case_t *tc, bib_module_t *m, outcome_t *o) {
    if (!tc->c.mem.text)
        return 0;
    uint64_t *bytes;
    char msg[256];
    long n = bib_hexcase_words(tc->c.mem.text, tc->c.mem.line, 0xFF, &bytes, msg, sizeof msg);
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
        int op = bib_module_op(m, i);
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

    if (!tc->c.asm_src.text && !tc->c.raw.text)
        return fail(o, "a case needs '-- asm' or '-- raw'");
    if (!tc->c.has_result && !tc->c.out.text && !tc->c.error.text)
        return fail(o, "a case needs '-- result', '-- stdout' or '-- error'");
    /* Nothing is ignored: a case that expects an error has no result to
       check, and an error kind is one of the three. */
    if (tc->c.has_result && tc->c.error.text)
        return fail(o, "line %d: -- error: a case that expects an error has no '-- result'",
                    tc->c.error.line);
    expected_error_t expect;
    if (read_expected_error(tc, &expect, o) != 0)
        return -1;

    if (tc->c.asm_src.text) {
        char *diag = NULL;
        bib_status_t st = bib_assemble(tc->c.asm_src.text, strlen(tc->c.asm_src.text), tc->path,
                                       &bytes, &size, &diag);
        if (st != BIB_OK) {
            rc = check_error(&expect, st, diag ? diag : "", o);
            bib_free(diag);
            return rc;
        }
        bib_free(diag);
        if (bib_module_read(bytes, size, &assembled, &d) != BIB_OK) {
            fail(o, "assembled module does not load: %s", d.msg);
            goto done;
        }
    }
    if (tc->c.raw.text) {
        nwords =
            bib_hexcase_words(tc->c.raw.text, tc->c.raw.line, 0xFFFFFFFFu, &words, msg, sizeof msg);
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
    } else if (tc->c.mem.text) {
        if (apply_mem(tc, assembled, o))
            goto done;
        bib_free(bytes);
        bytes = NULL;
        if (bib_module_write(assembled, &bytes, &size, &d) != BIB_OK) {
            fail(o, "cannot write the module: %s", d.msg);
            goto done;
        }
    }
    if (tc->c.truncate >= 0) {
        if ((uint64_t)tc->c.truncate > size) {
            fail(o, "-- truncate %lld is past the module's %zu bytes", (long long)tc->c.truncate,
                 size);
            goto done;
        }
        size = (size_t)tc->c.truncate;
    }
    if (tc->c.flip_byte >= 0) {
        if ((uint64_t)tc->c.flip_byte >= size) {
            fail(o, "-- flip %lld %u is outside the module's %zu bytes", (long long)tc->c.flip_byte,
                 tc->c.flip_bit, size);
            goto done;
        }
        bytes[tc->c.flip_byte] ^= (uint8_t)(1u << tc->c.flip_bit);
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
        rc = check_error(&expect, st, bib_vm_error(vm), o);
        if (rc && !tc->c.has_fuel && r->base->fuel == 0 && strstr(o->why, "fuel exhausted")) {
            size_t n = strlen(o->why);
            snprintf(o->why + n, sizeof o->why - n,
                     " (bib test's default fuel; a case that needs more sets fuel=N in "
                     "'-- options')");
        }
    } else if (tc->c.error.text) {
        rc = fail(o, "expected an error, but the run ended with %lld", (long long)exit_value);
    } else {
        rc = 0;
        if (tc->c.has_result && tc->c.result != exit_value)
            rc = fail(o, "result %lld, expected %lld", (long long)exit_value,
                      (long long)tc->c.result);
        if (rc == 0 && tc->c.out.text && strcmp(tc->c.out.text, out_text) != 0) {
            size_t n = strlen(out_text);
            if (!tc->c.out_no_newline && n + 1 == strlen(tc->c.out.text) &&
                strncmp(tc->c.out.text, out_text, n) == 0)
                rc = fail(o, "stdout differs: it does not end with the newline that '-- stdout' "
                             "expects (write '-- stdout-no-newline' for output without one)");
            else
                rc = fail(o, "stdout differs:\n--- expected\n%s--- got\n%s", tc->c.out.text,
                          out_text);
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
        char msg[256];
        rc = bib_hexcase_parse(&tc.c, (const char *)text, len, msg, sizeof msg)
                 ? fail(&o, "%s", msg)
                 : run_case(r, &tc, &o);
        free(text);
    }
    if (rc == 0) {
        r->passed++;
        if (r->flags->verbose)
            printf("PASS %s\n", path);
    } else {
        r->failed++;
        printf("FAIL %s: %s\n", path, o.why);
    }
    bib_hexcase_free(&tc.c);
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
    for (size_t i = 0; i < r->nwalked; i++)
        if (r->walked[i].dev == st.st_dev && r->walked[i].ino == st.st_ino) {
            if (r->flags->verbose)
                printf("SKIP %s: the folder was walked already, under another name\n", path);
            return;
        }
    if (r->nwalked == r->walked_cap)
        r->walked =
            bib_cli_grow(r->walked, (r->walked_cap = r->walked_cap ? r->walked_cap * 2 : 16) *
                                        sizeof *r->walked);
    r->walked[r->nwalked].dev = st.st_dev;
    r->walked[r->nwalked++].ino = st.st_ino;
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
    /* A suite that found no case proves nothing: a wrong folder, or one
       whose cases lost their .hex. */
    if (r->passed + r->failed == 0) {
        printf("FAIL: no case files (*.hex) in %s%s\n", npaths ? paths[0] : "",
               npaths > 1 ? " and the other paths" : "");
        r->failed++;
    }
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
    free(r->walked);
    free(r);
    return rc;
}
