/* cli/repl.c: `bib repl`, an interactive session on one VM.
 *
 * Owns the session: reading lines (libedit with history on a terminal, plain
 * lines otherwise), the session's accumulated source, the ':' commands and
 * how their results are printed. The session model (spec/cli.md): typed
 * instructions are appended to a function `main`, typed `.func` blocks and
 * directives go before it; the whole source is re-assembled after every
 * line and swapped in with bib_vm_reload, which keeps registers, memory and
 * tensors, and only the new instructions run. Everything that runs,
 * assembles or inspects bytecode is libbib's; this file only talks to it.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli/cli.h"
#include "cli/npy.h"
#include "cli/repl.h"
#include "isa/isa.h"
#include "module/module.h"
#include "vm/fileio.h"

/* One line of the session's source and the session line it came from. */
typedef struct src_line {
    char *text;
    uint32_t origin; /* 1-based input line; 0 for lines the session adds */
} src_line_t;

typedef struct src {
    src_line_t *v;
    size_t n, cap;
} src_t;

typedef struct repl {
    bib_options_t options;
    char backend[64];
    int profile; /* 0 off, 1 table, 2 JSON */
    bib_vm_t *vm;
    bool tty;
    uint32_t lineno; /* input lines read */

    /* Interactive source: directives, functions, then main's body. */
    src_t top, funcs, body;
    src_t block;         /* a .func block or a continued directive being typed */
    int pending;         /* 0 none, 1 in a .func block, 2 a directive continues */
    bool loaded;         /* a module is loaded and a stepped run started */
    uint32_t main_count; /* instructions in main before its closing HALT */

    /* A file loaded with :load (then typed instructions are refused). */
    char *file;
    char *file_text;

    char **breaks; /* breakpoint specs as typed: re-resolved after each reload */
    size_t nbreaks;
    char **inputs; /* :input NAME=PATH specs, given again to a new VM (:backend) */
    size_t ninputs;

    /* The module of the interactive source as last committed (NULL when
       none): an instruction appended to main is spliced into it, so that a
       line costs the same however long the session. */
    bib_module_t *module;
} repl_t;

static bool give_input(bib_vm_t *vm, const char *arg);
static void cmd_complete(repl_t *r, const char *line);
static int main_info(repl_t *r, bib_function_info_t *info);

static void out_flush(void) {
    fflush(stdout);
}

/* Errors go to stderr after whatever stdout holds, so a transcript taken
   with 2>&1 keeps the order. */
static void error_line(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void error_line(const char *format, ...) {
    out_flush();
    va_list ap;
    va_start(ap, format);
    fputs("bib: ", stderr);
    vfprintf(stderr, format, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- source ---------------------------------------------------------------- */

static bool src_push(src_t *s, const char *text, uint32_t origin) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        src_line_t *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return false;
        s->v = v;
        s->cap = cap;
    }
    char *copy = strdup(text);
    if (copy == NULL)
        return false;
    s->v[s->n++] = (src_line_t){copy, origin};
    return true;
}

static void src_truncate(src_t *s, size_t n) {
    while (s->n > n)
        free(s->v[--s->n].text);
}

static void src_free(src_t *s) {
    src_truncate(s, 0);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* The generated text and, per text line, the session line it maps to. */
typedef struct gen {
    char *text;
    size_t len, cap;
    uint32_t *origin;
    size_t lines, lines_cap;
} gen_t;

static bool gen_line(gen_t *g, const char *text, uint32_t origin) {
    size_t n = strlen(text);
    if (g->len + n + 2 > g->cap) {
        size_t cap = (g->cap + n + 2) * 2;
        char *t = realloc(g->text, cap);
        if (t == NULL)
            return false;
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, text, n);
    g->len += n;
    g->text[g->len++] = '\n';
    g->text[g->len] = '\0';
    if (g->lines == g->lines_cap) {
        size_t cap = g->lines_cap ? g->lines_cap * 2 : 64;
        uint32_t *o = realloc(g->origin, cap * sizeof *o);
        if (o == NULL)
            return false;
        g->origin = o;
        g->lines_cap = cap;
    }
    g->origin[g->lines++] = origin;
    return true;
}

/* Lines of s, each instruction line after ".line N" so that debug info,
   traps and positions name the session line. */
static bool gen_src(gen_t *g, const src_t *s, bool with_lines) {
    for (size_t i = 0; i < s->n; i++) {
        if (with_lines && s->v[i].origin != 0) {
            char dir[32];
            snprintf(dir, sizeof dir, ".line %" PRIu32, s->v[i].origin);
            if (!gen_line(g, dir, s->v[i].origin))
                return false;
        }
        if (!gen_line(g, s->v[i].text, s->v[i].origin))
            return false;
    }
    return true;
}

/* The session's module source; with_lines adds the .line directives (off:
   the source as typed, for :list). */
static bool generate(const repl_t *r, gen_t *g, uint32_t current, bool with_lines) {
    memset(g, 0, sizeof *g);
    return gen_src(g, &r->top, false) && gen_src(g, &r->funcs, with_lines) &&
           gen_line(g, ".func main", current) && gen_src(g, &r->body, with_lines) &&
           (!with_lines || gen_line(g, ".line 0", current)) &&
           gen_line(g, "    HALT r0", current) && gen_line(g, ".end", current);
}

static void gen_free(gen_t *g) {
    free(g->text);
    free(g->origin);
}

/* Prints assembler diagnostics with generated line numbers turned back into
   session lines (lines the session added map to the line being typed). */
static void print_diagnostics(const gen_t *g, const char *diag) {
    out_flush();
    const char *p = diag;
    while (*p != '\0') {
        const char *end = strchr(p, '\n');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        unsigned long line = 0;
        int used = 0;
        if (n > 5 && strncmp(p, "repl:", 5) == 0 && sscanf(p + 5, "%lu%n", &line, &used) == 1 &&
            p[5 + used] == ':' && line >= 1 && line <= g->lines) {
            fprintf(stderr, "repl:%" PRIu32 "%.*s\n", g->origin[line - 1], (int)(n - 5 - used),
                    p + 5 + used);
        } else {
            fprintf(stderr, "%.*s\n", (int)n, p);
        }
        p += n;
        if (*p == '\n')
            p++;
    }
}

/* ---- positions and state ------------------------------------------------------- */

static void print_position(repl_t *r, const char *what) {
    bib_position_t pos;
    if (bib_vm_position(r->vm, &pos) != BIB_OK)
        return;
    char insn[256];
    bib_vm_insn_text(r->vm, pos.pc, insn, sizeof insn);
    printf("%s at pc %" PRIu32 " in %s", what, pos.pc, pos.func_name);
    if (pos.line != 0)
        printf(" line %" PRIu32, pos.line);
    if (pos.depth > 1)
        printf(" depth %" PRIu32, pos.depth);
    printf(": %s\n", insn);
}

/* The entry function's registers (copied), to show what a line changed. */
static uint64_t *entry_regs(repl_t *r, uint32_t *n) {
    bib_position_t pos;
    bib_frame_info_t f;
    *n = 0;
    if (bib_vm_position(r->vm, &pos) != BIB_OK || bib_vm_frame(r->vm, pos.depth - 1, &f) != BIB_OK)
        return NULL;
    uint64_t *copy = malloc((f.nregs ? f.nregs : 1) * sizeof *copy);
    if (copy == NULL)
        return NULL;
    for (uint32_t i = 0; i < f.nregs; i++)
        copy[i] = f.regs[i].u;
    *n = f.nregs;
    return copy;
}

static void print_reg(uint32_t i, uint64_t v) {
    printf("r%" PRIu32 " = %" PRId64 " (0x%" PRIx64 ")\n", i, (int64_t)v, v);
}

/* Says why a run stopped. quiet_halt: the session's own closing HALT. */
static void report_stop(repl_t *r, bib_status_t st, bib_stop_t stop, bool quiet_halt) {
    if (st != BIB_OK) {
        error_line("%s", bib_vm_error(r->vm));
        return;
    }
    bib_position_t pos;
    bib_vm_position(r->vm, &pos);
    switch (stop) {
    case BIB_STOP_PAUSED:
        print_position(r, "paused");
        break;
    case BIB_STOP_BREAKPOINT:
        print_position(r, "breakpoint");
        break;
    case BIB_STOP_HALTED: {
        /* Reaching the end of what was typed is no news in a session. */
        bib_function_info_t mi;
        bool at_end = r->file == NULL && pos.depth == 1 && main_info(r, &mi) == 0 &&
                      pos.pc == mi.entry + r->main_count;
        if (!quiet_halt && !at_end)
            printf("halted: exit value %" PRId64 "\n", pos.exit_value);
        break;
    }
    default:
        break;
    }
}

/* ---- breakpoints ------------------------------------------------------------------ */

static bool is_name_char(int c) {
    return isalnum(c) || c == '_' || c == '.';
}

/* The session line where code label name is defined: in the loaded file's
   text, or in the interactive source. */
static uint32_t label_line(const repl_t *r, const char *name) {
    size_t n = strlen(name);
    if (r->file_text != NULL) {
        uint32_t line = 1;
        for (const char *p = r->file_text; *p != '\0'; line++) {
            const char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, name, n) == 0 && q[n] == ':')
                return line;
            p = strchr(p, '\n');
            if (p == NULL)
                break;
            p++;
        }
        return 0;
    }
    const src_t *parts[2] = {&r->funcs, &r->body};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < parts[k]->n; i++) {
            const char *q = parts[k]->v[i].text;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, name, n) == 0 && q[n] == ':')
                return parts[k]->v[i].origin;
        }
    return 0;
}

/* A breakpoint spec: a pc, a function name or a code label. */
static bool resolve_break(repl_t *r, const char *spec, uint32_t *pc) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(spec, &end, 0);
    if (isdigit((unsigned char)spec[0]) && *end == '\0' && errno == 0) {
        if (v >= bib_vm_code_count(r->vm))
            return false;
        *pc = (uint32_t)v;
        return true;
    }
    int64_t f = bib_vm_function_find(r->vm, spec);
    bib_function_info_t info;
    if (f >= 0 && bib_vm_function_info(r->vm, (uint32_t)f, &info) == BIB_OK) {
        *pc = info.entry;
        return true;
    }
    uint32_t line = label_line(r, spec);
    return line != 0 && bib_vm_line_pc(r->vm, line, pc) == BIB_OK;
}

static void apply_breaks(repl_t *r) {
    for (size_t i = 0; i < r->nbreaks; i++) {
        uint32_t pc;
        if (resolve_break(r, r->breaks[i], &pc))
            bib_vm_break(r->vm, pc, 1);
    }
}

static void clear_breaks(repl_t *r) {
    for (size_t i = 0; i < r->nbreaks; i++)
        free(r->breaks[i]);
    free(r->breaks);
    r->breaks = NULL;
    r->nbreaks = 0;
}

/* ---- the VM -------------------------------------------------------------------------- */

static bib_vm_t *new_vm(repl_t *r) {
    bib_vm_t *vm = NULL;
    bib_status_t st = bib_vm_create(&r->options, &vm);
    if (st != BIB_OK) {
        error_line("cannot create the VM: %s", bib_status_name(st));
        return NULL;
    }
    bib_vm_register_stdio(vm, stdout);
    if (r->profile)
        bib_vm_profile(vm, 1);
    return vm;
}

static void forget_module(repl_t *r) {
    bib_module_free(r->module);
    r->module = NULL;
}

static void reset_session(repl_t *r) {
    forget_module(r);
    src_free(&r->top);
    src_free(&r->funcs);
    src_free(&r->body);
    src_free(&r->block);
    r->pending = 0;
    r->loaded = false;
    r->main_count = 0;
    free(r->file);
    free(r->file_text);
    r->file = NULL;
    r->file_text = NULL;
    clear_breaks(r);
    for (size_t i = 0; i < r->ninputs; i++)
        free(r->inputs[i]);
    free(r->inputs);
    r->inputs = NULL;
    r->ninputs = 0;
}

static int main_info(repl_t *r, bib_function_info_t *info) {
    int64_t f = bib_vm_function_find(r->vm, "main");
    return f >= 0 ? (int)bib_vm_function_info(r->vm, (uint32_t)f, info) : -1;
}

/* Assembles the interactive source; on success *bytes holds the module. */
static bool assemble(repl_t *r, uint8_t **bytes, size_t *size) {
    gen_t g;
    bool ok = generate(r, &g, r->lineno, true);
    if (!ok) {
        gen_free(&g);
        error_line("host out of memory");
        return false;
    }
    char *diag = NULL;
    bib_status_t st = bib_assemble(g.text, g.len, "repl", bytes, size, &diag);
    if (st != BIB_OK)
        print_diagnostics(&g, diag != NULL ? diag : "repl: error: assembly failed");
    bib_free(diag);
    gen_free(&g);
    return st == BIB_OK;
}

/* ---- one instruction appended to main, without reassembling the session ---- */

/* Index of name among the module's imports, appended when new (-1: out of
   memory). */
static int64_t import_index(bib_module_t *m, const char *name) {
    for (uint32_t i = 0; i < m->import_count; i++)
        if (strcmp(m->imports[i], name) == 0)
            return i;
    char **v = realloc(m->imports, (m->import_count + 1) * sizeof *v);
    if (v == NULL)
        return -1;
    m->imports = v;
    if ((v[m->import_count] = strdup(name)) == NULL)
        return -1;
    return m->import_count++;
}

static int64_t const_index(bib_module_t *m, bib_const_t k) {
    for (uint32_t i = 0; i < m->const_count; i++)
        if (m->consts[i].type == k.type && m->consts[i].bits == k.bits)
            return i;
    bib_const_t *v = realloc(m->consts, (m->const_count + 1) * sizeof *v);
    if (v == NULL)
        return -1;
    m->consts = v;
    v[m->const_count] = k;
    return m->const_count++;
}

/* Assembles the last line of main (an instruction, no label) in a small
   source: the directives, the functions, and a main holding one NOP per
   label main has so far, then the line. Its instructions are spliced into
   the committed module before the closing HALT, their labels, constants
   and imports mapped by name and value. The result is what assembling the
   whole session gives (BIB_REPL_CHECK=1 compares the two). Returns false
   whenever the line is not such a case or anything differs from plan: the
   caller then assembles the whole session, which also gives the
   diagnostics. */
static bool splice_line(repl_t *r, uint8_t **bytes, size_t *size) {
    bib_module_t *m = r->module;
    if (m == NULL || r->file != NULL || r->body.n == 0 || m->func_count == 0 ||
        m->entry_func != m->func_count - 1 || m->lines == NULL)
        return false;
    const src_line_t *line = &r->body.v[r->body.n - 1];
    const char *p = line->text;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *q = p;
    while (is_name_char((unsigned char)*q))
        q++;
    if (q == p || *q == ':' || *p == '.')
        return false; /* a label, a directive or nothing */
    bib_function_t *main_fn = &m->funcs[m->entry_func];
    uint32_t halt = main_fn->entry + main_fn->count - 1;
    if (main_fn->entry + main_fn->count != m->code_count)
        return false;
    /* The probe: labels of main in pc order, each on a NOP of its own. */
    gen_t g;
    memset(&g, 0, sizeof g);
    bool ok = gen_src(&g, &r->top, false) && gen_src(&g, &r->funcs, false) &&
              gen_line(&g, ".func main", 0);
    uint32_t first_label = m->label_count;
    for (uint32_t i = 0; i < m->label_count; i++)
        if (m->labels[i].pc >= main_fn->entry) {
            first_label = i;
            break;
        }
    char text[300];
    for (uint32_t i = first_label; ok && i < m->label_count; i++) {
        snprintf(text, sizeof text, "%s: NOP", m->labels[i].name);
        ok = gen_line(&g, text, 0);
    }
    ok = ok && gen_line(&g, line->text, 0) && gen_line(&g, "    HALT r0", 0) &&
         gen_line(&g, ".end", 0);
    uint8_t *probe_bytes = NULL;
    size_t probe_size = 0;
    char *diag = NULL;
    bib_module_t *probe = NULL;
    ok = ok && bib_assemble(g.text, g.len, "repl", &probe_bytes, &probe_size, &diag) == BIB_OK &&
         bib_module_read(probe_bytes, probe_size, &probe, NULL) == BIB_OK;
    gen_free(&g);
    bib_free(diag);
    bib_free(probe_bytes);
    uint32_t nlabels = m->label_count - first_label;
    const bib_function_t *pm = ok ? &probe->funcs[probe->func_count - 1] : NULL;
    /* The same functions before main, and the line's instructions after the
       label NOPs. */
    ok = ok && probe->func_count == m->func_count && pm->count > nlabels + 1;
    for (uint32_t i = 0; ok && i + 1 < m->func_count; i++)
        ok = strcmp(probe->funcs[i].name, m->funcs[i].name) == 0;
    uint32_t added = ok ? pm->count - nlabels - 1 : 0;
    bib_insn_t *insns = ok ? malloc(added * sizeof *insns) : NULL;
    ok = ok && insns != NULL;
    for (uint32_t k = 0; ok && k < added; k++) {
        bib_insn_t in = probe->code[pm->entry + nlabels + k];
        const bib_opinfo_t *info = &bib_isa_table[bib_isa_find_code(in.op)];
        uint32_t *words[4] = {&in.a, &in.b, &in.c, &in.d};
        for (int w = 0; ok && w < 4; w++) {
            int64_t v = *words[w];
            switch ((bib_operand_kind_t)info->kinds[w]) {
            case BIB_K_TGT:
                /* Only a label's NOP, or the line itself (a jump to itself). */
                if (v >= pm->entry && v < pm->entry + nlabels)
                    v = m->labels[first_label + (v - pm->entry)].pc;
                else if (v == pm->entry + nlabels + k)
                    v = halt + k;
                else
                    ok = false;
                break;
            case BIB_K_CONST:
                v = const_index(m, probe->consts[v]);
                break;
            case BIB_K_HOST:
                v = import_index(m, probe->imports[v]);
                break;
            default:
                break;
            }
            ok = ok && v >= 0;
            *words[w] = (uint32_t)v;
        }
        insns[k] = in;
    }
    uint32_t nregs = ok && pm->nregs > main_fn->nregs ? pm->nregs : main_fn->nregs;
    /* The tensor register file, inferred like regs from the registers named. */
    uint32_t tregs =
        ok && probe->tensor_regs > m->tensor_regs ? probe->tensor_regs : m->tensor_regs;
    bib_module_free(probe);
    if (ok) {
        /* Before the closing HALT: its pc moves, and nothing else does. */
        bib_insn_t *code = realloc(m->code, (m->code_count + added) * sizeof *code);
        uint32_t *lines = code ? realloc(m->lines, (m->code_count + added) * sizeof *lines) : NULL;
        if (code != NULL)
            m->code = code;
        if (lines != NULL)
            m->lines = lines;
        ok = code != NULL && lines != NULL;
        if (ok) {
            m->code[halt + added] = m->code[halt];
            m->lines[halt + added] = m->lines[halt];
            for (uint32_t k = 0; k < added; k++) {
                m->code[halt + k] = insns[k];
                m->lines[halt + k] = line->origin;
            }
            m->code_count += added;
            main_fn->count += added;
            main_fn->nregs = nregs;
            m->tensor_regs = tregs;
        }
    }
    free(insns);
    if (!ok || bib_module_write(m, bytes, size, NULL) != BIB_OK) {
        /* The module may be half changed: the full path rebuilds it. */
        forget_module(r);
        return false;
    }
    if (getenv("BIB_REPL_CHECK") != NULL) {
        uint8_t *full = NULL;
        size_t full_size = 0;
        char *d = NULL;
        gen_t all;
        if (generate(r, &all, r->lineno, true) &&
            bib_assemble(all.text, all.len, "repl", &full, &full_size, &d) == BIB_OK &&
            (full_size != *size || memcmp(full, *bytes, full_size) != 0))
            error_line("internal: line %" PRIu32 " spliced differs from the session assembled",
                       r->lineno);
        gen_free(&all);
        bib_free(full);
        bib_free(d);
    }
    return true;
}

/* Swaps the assembled source in, keeping the run's state, and runs the new
   instructions of main. Returns false (nothing changed) when it cannot. */
static bool commit(repl_t *r, bool adds_to_main) {
    bib_position_t pos;
    bool have = r->loaded && bib_vm_position(r->vm, &pos) == BIB_OK;
    bib_function_info_t mi;
    uint32_t offset = r->main_count;
    if (have) {
        bool finished = pos.stop == BIB_STOP_HALTED || pos.stop == BIB_STOP_TRAPPED;
        if (!finished && pos.depth > 1) {
            error_line("the program is paused in %s (depth %" PRIu32 "): :continue, :step or "
                       ":run first",
                       pos.func_name, pos.depth);
            return false;
        }
        if (!finished && main_info(r, &mi) == 0) {
            offset = pos.pc - mi.entry;
            if (adds_to_main && offset != r->main_count) {
                error_line("the program is paused at pc %" PRIu32 ": :continue, :step or :run "
                           "first",
                           pos.pc);
                return false;
            }
        }
    }
    uint8_t *bytes = NULL;
    size_t size = 0;
    /* splice_line changes r->module in place: a line refused after it is
       forgotten, and the next line assembles the whole session again. */
    bool spliced = adds_to_main && r->loaded && splice_line(r, &bytes, &size);
    if (!spliced && !assemble(r, &bytes, &size)) {
        forget_module(r);
        return false;
    }
    bib_status_t st;
    if (!r->loaded) {
        st = bib_vm_load(r->vm, bytes, size, "repl");
        if (st == BIB_OK)
            st = bib_vm_start(r->vm);
        offset = 0;
    } else {
        st = bib_vm_reload(r->vm, bytes, size, "repl", offset);
    }
    if (st != BIB_OK && spliced) {
        /* Refused as a whole module: the full path says why, in the
           session's words. */
        bib_free(bytes);
        bytes = NULL;
        forget_module(r);
        spliced = false;
        if (!assemble(r, &bytes, &size))
            return false;
        st = bib_vm_reload(r->vm, bytes, size, "repl", offset);
    }
    if (st != BIB_OK) {
        bib_free(bytes);
        forget_module(r);
        error_line("%s", bib_vm_error(r->vm));
        return false;
    }
    if (!spliced) {
        forget_module(r);
        if (bib_module_read(bytes, size, &r->module, NULL) != BIB_OK)
            r->module = NULL;
    }
    bib_free(bytes);
    r->loaded = true;
    uint32_t old_count = r->main_count;
    if (main_info(r, &mi) == 0)
        r->main_count = mi.count - 1;
    apply_breaks(r);
    if (r->main_count == old_count || !adds_to_main)
        return true;

    uint32_t nbefore;
    uint64_t *before = entry_regs(r, &nbefore);
    bib_stop_t stop;
    st = bib_vm_continue(r->vm, &stop);
    out_flush();
    bib_vm_position(r->vm, &pos);
    bool at_end = stop == BIB_STOP_HALTED && pos.depth == 1 && main_info(r, &mi) == 0 &&
                  pos.pc == mi.entry + r->main_count;
    uint32_t nafter;
    uint64_t *after = entry_regs(r, &nafter);
    for (uint32_t i = 0; after != NULL && i < nafter; i++)
        if (i >= nbefore || before == NULL || before[i] != after[i])
            print_reg(i, after[i]);
    free(before);
    free(after);
    report_stop(r, st, stop, at_end);
    return true;
}

/* Appends lines to part and commits; on failure takes them back. */
static void add_lines(repl_t *r, src_t *part, const src_t *lines, bool adds_to_main) {
    size_t keep = part->n;
    for (size_t i = 0; i < lines->n; i++)
        if (!src_push(part, lines->v[i].text, lines->v[i].origin)) {
            src_truncate(part, keep);
            error_line("host out of memory");
            return;
        }
    if (!commit(r, adds_to_main))
        src_truncate(part, keep);
}

/* The first word of a statement after its labels ("" for none). */
static void first_word(const char *line, char *word, size_t cap) {
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *q = p;
        while (is_name_char((unsigned char)*q))
            q++;
        if (q > p && *q == ':') {
            p = q + 1;
            continue;
        }
        size_t n = 0;
        while (*p != '\0' && *p != ' ' && *p != '\t' && *p != ';' && n + 1 < cap)
            word[n++] = (char)tolower((unsigned char)*p++);
        word[n] = '\0';
        return;
    }
}

static bool continues(const char *line) {
    size_t n = strlen(line);
    while (n > 0 && isspace((unsigned char)line[n - 1]))
        n--;
    return n > 0 && (line[n - 1] == ',' || line[n - 1] == '\\');
}

/* A line of source typed at the prompt. */
static void source_line(repl_t *r, const char *line) {
    if (r->file != NULL) {
        error_line("a file is loaded: instructions typed at the prompt need an interactive "
                   "session (:reset)");
        return;
    }
    char word[32];
    first_word(line, word, sizeof word);
    if (r->pending == 1) {
        src_push(&r->block, line, r->lineno);
        if (strcmp(word, ".end") == 0) {
            r->pending = 0;
            add_lines(r, &r->funcs, &r->block, false);
            src_truncate(&r->block, 0);
        }
        return;
    }
    if (r->pending == 2) {
        src_push(&r->block, line, r->lineno);
        if (!continues(line)) {
            r->pending = 0;
            add_lines(r, &r->top, &r->block, false);
            src_truncate(&r->block, 0);
        }
        return;
    }
    if (word[0] == '\0' && strchr(line, ':') == NULL)
        return; /* blank or comment only */
    src_t one = {0};
    src_push(&one, line, r->lineno);
    if (strcmp(word, ".func") == 0) {
        r->pending = 1;
        src_push(&r->block, line, r->lineno);
    } else if (word[0] == '.') {
        if (continues(line)) {
            r->pending = 2;
            src_push(&r->block, line, r->lineno);
        } else {
            add_lines(r, &r->top, &one, false);
        }
    } else {
        add_lines(r, &r->body, &one, true);
    }
    src_free(&one);
}

/* ---- commands ------------------------------------------------------------------------ */

static bool need_run(repl_t *r) {
    bib_position_t pos;
    if (r->loaded && bib_vm_position(r->vm, &pos) == BIB_OK)
        return true;
    error_line("nothing to run: type instructions, or :load FILE");
    return false;
}

static void cmd_step(repl_t *r, const char *arg, bool all) {
    if (!need_run(r))
        return;
    uint64_t n = 1;
    if (arg != NULL) {
        char *end;
        n = strtoull(arg, &end, 10);
        if (*end != '\0' || arg[0] == '-') {
            error_line(":step takes a count, not '%s'", arg);
            return;
        }
    }
    bib_position_t pos;
    bib_vm_position(r->vm, &pos);
    if (pos.stop == BIB_STOP_HALTED || pos.stop == BIB_STOP_TRAPPED) {
        error_line("the program has finished: :run starts it again");
        return;
    }
    bib_stop_t stop;
    bib_status_t st = all ? bib_vm_continue(r->vm, &stop) : bib_vm_step(r->vm, n, &stop);
    out_flush();
    report_stop(r, st, stop, false);
}

static void cmd_run(repl_t *r) {
    if (!r->loaded) {
        error_line("nothing to run: type instructions, or :load FILE");
        return;
    }
    bib_status_t st = bib_vm_start(r->vm);
    if (st != BIB_OK) {
        error_line("%s", bib_vm_error(r->vm));
        return;
    }
    apply_breaks(r);
    bib_stop_t stop;
    st = bib_vm_continue(r->vm, &stop);
    out_flush();
    report_stop(r, st, stop, false);
}

static void cmd_regs(repl_t *r) {
    if (!need_run(r))
        return;
    bib_frame_info_t f;
    if (bib_vm_frame(r->vm, 0, &f) != BIB_OK)
        return;
    printf("%s (pc %" PRIu32 "):\n", f.func_name, f.pc);
    for (uint32_t i = 0; i < f.nregs; i++)
        print_reg(i, f.regs[i].u);
}

static void cmd_backtrace(repl_t *r) {
    if (!need_run(r))
        return;
    bib_position_t pos;
    bib_vm_position(r->vm, &pos);
    for (uint32_t level = 0; level < pos.depth; level++) {
        bib_frame_info_t f;
        if (bib_vm_frame(r->vm, level, &f) != BIB_OK)
            break;
        char insn[256];
        bib_vm_insn_text(r->vm, f.pc, insn, sizeof insn);
        printf("#%" PRIu32 " pc %" PRIu32 " in %s", level, f.pc, f.func_name);
        if (f.line != 0)
            printf(" line %" PRIu32, f.line);
        printf(": %s\n", insn);
    }
}

static bool parse_u64(const char *text, uint64_t *out) {
    if (text == NULL || text[0] == '-')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0')
        return false;
    *out = v;
    return true;
}

static void cmd_mem(repl_t *r, const char *a, const char *b) {
    uint64_t addr, n = 64;
    if (!parse_u64(a, &addr) || (b != NULL && !parse_u64(b, &n))) {
        error_line("usage: :mem ADDR [N]");
        return;
    }
    uint64_t size = 0;
    const uint8_t *mem = bib_vm_memory(r->vm, &size);
    if (mem == NULL || addr >= size) {
        error_line("address %" PRIu64 " is outside linear memory (%" PRIu64 " bytes)", addr, size);
        return;
    }
    if (n > size - addr)
        n = size - addr;
    for (uint64_t row = addr; row < addr + n; row += 16) {
        uint64_t end = row + 16 < addr + n ? row + 16 : addr + n;
        printf("%08" PRIx64 ":", row);
        for (uint64_t i = row; i < row + 16; i++) {
            if (i < end)
                printf(" %02x", mem[i]);
            else
                printf("   ");
        }
        printf("  |");
        for (uint64_t i = row; i < end; i++)
            putchar(mem[i] >= 0x20 && mem[i] < 0x7F ? mem[i] : '.');
        printf("|\n");
    }
}

static const char *dtype_text(bib_dtype_t d) {
    return d == BIB_DTYPE_F32 ? "f32" : d == BIB_DTYPE_I32 ? "i32" : "?";
}

static void print_tensor_line(uint32_t reg, const bib_tensor_reg_info_t *info) {
    printf("t%" PRIu32, reg);
    if (info->name != NULL)
        printf(" (%s)", info->name);
    printf(" %s[", dtype_text(info->dtype));
    for (uint32_t i = 0; i < info->rank; i++)
        printf("%s%" PRIu32, i ? "," : "", info->dims[i]);
    printf("] on %s hash=%016" PRIx64 "\n", info->executors, info->hash);
}

static void cmd_tensors(repl_t *r) {
    uint32_t n = bib_vm_tensor_regs(r->vm), live = 0;
    for (uint32_t reg = 0; reg < n; reg++) {
        bib_tensor_reg_info_t info;
        if (bib_vm_tensor_reg(r->vm, reg, &info) != BIB_OK) {
            error_line("%s", bib_vm_error(r->vm));
            return;
        }
        if (!info.live)
            continue;
        print_tensor_line(reg, &info);
        live++;
    }
    if (live == 0)
        printf("no live tensors\n");
}

static void cmd_tensor(repl_t *r, const char *arg) {
    if (arg == NULL) {
        error_line("usage: :tensor tN|NAME [N]");
        return;
    }
    uint32_t n = bib_vm_tensor_regs(r->vm), reg = UINT32_MAX;
    char *end;
    if (arg[0] == 't' && isdigit((unsigned char)arg[1])) {
        unsigned long v = strtoul(arg + 1, &end, 10);
        if (*end == '\0')
            reg = (uint32_t)v;
    }
    /* Reading a register may copy it to the host: read each one once, so
       the executors shown are those before this command. */
    bib_tensor_reg_info_t info;
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++) {
        if (reg != UINT32_MAX && i != reg)
            continue;
        if (bib_vm_tensor_reg(r->vm, i, &info) != BIB_OK) {
            error_line("%s", bib_vm_error(r->vm));
            return;
        }
        found = reg == i || (info.name != NULL && strcmp(info.name, arg) == 0);
        if (found)
            reg = i;
    }
    if (!found) {
        error_line("no tensor register '%s' (the file has %" PRIu32 ")", arg, n);
        return;
    }
    if (!info.live) {
        printf("t%" PRIu32 " is empty\n", reg);
        return;
    }
    print_tensor_line(reg, &info);
    uint64_t show = info.count < 8 ? info.count : 8;
    uint32_t elems[8];
    if (bib_vm_tensor_read(r->vm, reg, 0, show, elems) != BIB_OK) {
        error_line("%s", bib_vm_error(r->vm));
        return;
    }
    printf("[");
    for (uint64_t i = 0; i < show; i++) {
        if (info.dtype == BIB_DTYPE_I32) {
            printf("%s%" PRId32, i ? ", " : "", (int32_t)elems[i]);
        } else {
            float f;
            memcpy(&f, &elems[i], sizeof f);
            printf("%s%.9g", i ? ", " : "", (double)f);
        }
    }
    printf("%s]\n", info.count > show ? ", ..." : "");
}

static void cmd_break(repl_t *r, const char *arg, bool on) {
    if (arg == NULL) {
        if (!on) {
            clear_breaks(r);
            if (r->loaded)
                for (uint32_t pc = 0; pc < bib_vm_code_count(r->vm); pc++)
                    bib_vm_break(r->vm, pc, 0);
            printf("no breakpoints\n");
            return;
        }
        uint32_t pcs[256];
        uint32_t n = r->loaded ? bib_vm_breakpoints(r->vm, pcs, 256) : 0;
        if (n == 0)
            printf("no breakpoints\n");
        for (uint32_t i = 0; i < n && i < 256; i++) {
            char insn[256];
            bib_vm_insn_text(r->vm, pcs[i], insn, sizeof insn);
            printf("breakpoint at pc %" PRIu32 ": %s\n", pcs[i], insn);
        }
        return;
    }
    uint32_t pc;
    if (!r->loaded || !resolve_break(r, arg, &pc)) {
        error_line("no pc, function or label '%s'", arg);
        return;
    }
    if (bib_vm_break(r->vm, pc, on) != BIB_OK) {
        error_line("%s", bib_vm_error(r->vm));
        return;
    }
    if (on) {
        char **grown = realloc(r->breaks, (r->nbreaks + 1) * sizeof *grown);
        char *copy = strdup(arg);
        if (grown == NULL || copy == NULL) {
            free(copy);
            error_line("host out of memory");
            return;
        }
        r->breaks = grown;
        r->breaks[r->nbreaks++] = copy;
    } else {
        for (size_t i = 0; i < r->nbreaks;) {
            uint32_t other;
            if (resolve_break(r, r->breaks[i], &other) && other == pc) {
                free(r->breaks[i]);
                r->breaks[i] = r->breaks[--r->nbreaks];
            } else {
                i++;
            }
        }
    }
    char insn[256];
    bib_vm_insn_text(r->vm, pc, insn, sizeof insn);
    printf("%s at pc %" PRIu32 ": %s\n", on ? "breakpoint" : "cleared breakpoint", pc, insn);
}

/* Loads a file as the session's program: fresh state, paused at its start
   (or not started yet when it needs inputs). */
static bool load_file(repl_t *r, bib_vm_t *vm, const char *path) {
    bib_status_t st = bib_vm_load_file(vm, path);
    if (st != BIB_OK) {
        error_line("%s", bib_vm_error(vm));
        return false;
    }
    (void)r;
    for (uint32_t i = 0; i < bib_vm_tensor_count(vm); i++) {
        bib_tensor_info_t info;
        if (bib_vm_tensor_info(vm, i, &info) == BIB_OK && info.is_input)
            return true; /* :input first, then :run */
    }
    st = bib_vm_start(vm);
    if (st != BIB_OK)
        error_line("%s", bib_vm_error(vm));
    return true;
}

static void cmd_load(repl_t *r, const char *path) {
    if (path == NULL) {
        error_line("usage: :load FILE");
        return;
    }
    uint8_t *text = NULL;
    size_t size = 0;
    if (bib_cli_read_file(path, &text, &size) != 0)
        return;
    if (!load_file(r, r->vm, path)) {
        free(text);
        return;
    }
    reset_session(r);
    r->file = strdup(path);
    r->file_text = malloc(size + 1);
    if (r->file_text != NULL) {
        memcpy(r->file_text, text, size);
        r->file_text[size] = '\0';
    }
    free(text);
    r->loaded = true;
    bib_position_t pos;
    if (bib_vm_position(r->vm, &pos) == BIB_OK)
        print_position(r, "loaded");
    else
        printf("loaded %s: give its inputs with :input NAME=PATH.npy, then :run\n", path);
}

/* Starts the session's executor on a program of one empty tensor register,
 * in a VM of its own, so that an executor that cannot run here is refused
 * when it is named, not at the first tensor instruction. */
static bool probe_backend(repl_t *r) {
    static const char probe[] = ".tensors 1\n.func main regs=1\n    HALT r0\n.end\n";
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bool ok = bib_assemble(probe, sizeof probe - 1, "probe", &bytes, &size, &diag) == BIB_OK;
    bib_free(diag);
    bib_vm_t *vm = ok ? new_vm(r) : NULL;
    ok = vm != NULL && bib_vm_load(vm, bytes, size, "backend") == BIB_OK &&
         bib_vm_start(vm) == BIB_OK;
    if (!ok && vm != NULL)
        error_line("%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    bib_free(bytes);
    return ok;
}

static void cmd_backend(repl_t *r, const char *name) {
    if (name == NULL) {
        printf("backend %s\n", r->backend);
        return;
    }
    char previous[64];
    snprintf(previous, sizeof previous, "%s", r->backend);
    snprintf(r->backend, sizeof r->backend, "%s", name);
    r->options.backend = r->backend;
    bool ok = probe_backend(r);
    bib_vm_t *vm = ok ? new_vm(r) : NULL;
    ok = vm != NULL;
    if (ok && r->file != NULL) {
        ok = bib_vm_load_file(vm, r->file) == BIB_OK;
        for (size_t i = 0; ok && i < r->ninputs; i++)
            ok = give_input(vm, r->inputs[i]);
        if (ok && bib_vm_start(vm) != BIB_OK) {
            error_line("%s", bib_vm_error(vm));
            ok = false;
        }
    } else if (ok && r->loaded) {
        bib_vm_t *old = r->vm;
        r->vm = vm;
        uint8_t *bytes = NULL;
        size_t size = 0;
        ok = assemble(r, &bytes, &size);
        bib_status_t st = ok ? bib_vm_load(vm, bytes, size, "repl") : BIB_E_ASM;
        if (st == BIB_OK)
            st = bib_vm_start(vm);
        if (ok && st != BIB_OK) {
            error_line("%s", bib_vm_error(vm));
            ok = false;
        }
        bib_free(bytes);
        r->vm = old;
    }
    if (!ok) {
        bib_vm_destroy(vm);
        snprintf(r->backend, sizeof r->backend, "%s", previous);
        r->options.backend = r->backend;
        return;
    }
    bib_vm_destroy(r->vm);
    r->vm = vm;
    apply_breaks(r);
    printf("backend %s: state reset (:run runs the program again)\n", r->backend);
}

/* :call NAME ARG...: runs one function on a VM of its own, so the session's
   state stays as it was; prints what it returns. */
static void cmd_call(repl_t *r, const char *name, char **argv, int argc) {
    if (name == NULL) {
        error_line(":call takes a function name and its arguments: :call NAME ARG...");
        return;
    }
    if (!r->loaded && r->file == NULL) {
        error_line("nothing to call: type a .func block, or :load FILE");
        return;
    }
    bib_value_t args[64];
    if (argc > 64) {
        error_line(":call takes at most 64 arguments");
        return;
    }
    for (int i = 0; i < argc; i++)
        if (bib_cli_parse_arg(argv[i], &args[i]) != 0) {
            error_line("argument %d '%s' is not an integer (42, -7, 0x2a) or a number (2.5, 1e-3)",
                       i + 1, argv[i]);
            return;
        }
    bib_vm_t *vm = new_vm(r);
    if (vm == NULL)
        return;
    bool ok;
    if (r->file != NULL) {
        ok = bib_vm_load_file(vm, r->file) == BIB_OK;
    } else {
        uint8_t *bytes = NULL;
        size_t size = 0;
        ok = assemble(r, &bytes, &size) && bib_vm_load(vm, bytes, size, "repl") == BIB_OK;
        bib_free(bytes);
    }
    for (size_t i = 0; ok && i < r->ninputs; i++)
        ok = give_input(vm, r->inputs[i]);
    int64_t result = 0;
    bib_status_t st = ok ? bib_vm_call(vm, name, args, (uint32_t)argc, &result) : BIB_E_STATE;
    out_flush();
    if (st == BIB_OK)
        printf("%s = %" PRId64 " (0x%" PRIx64 ")\n", name, result, (uint64_t)result);
    else if (*bib_vm_error(vm))
        error_line("%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

static void cmd_trace(repl_t *r, const char *arg) {
    bib_trace_format_t f;
    if (arg != NULL && (strcmp(arg, "on") == 0 || strcmp(arg, "text") == 0))
        f = BIB_TRACE_TEXT;
    else if (arg != NULL && strcmp(arg, "json") == 0)
        f = BIB_TRACE_JSON;
    else if (arg != NULL && strcmp(arg, "off") == 0)
        f = BIB_TRACE_OFF;
    else {
        error_line("usage: :trace on|off|json");
        return;
    }
    r->options.trace_format = f;
    bib_vm_set_trace(r->vm, f, NULL);
}

static void cmd_profile(repl_t *r, const char *arg) {
    if (arg == NULL) {
        if (!r->profile) {
            error_line("profiling is off (:profile on)");
            return;
        }
        out_flush();
        bib_vm_profile_write(r->vm, stdout, r->profile == 2);
        return;
    }
    bool on = strcmp(arg, "on") == 0 || strcmp(arg, "json") == 0;
    if (!on && strcmp(arg, "off") != 0) {
        error_line("usage: :profile [on|off|json]");
        return;
    }
    r->profile = !on ? 0 : strcmp(arg, "json") == 0 ? 2 : 1;
    bib_vm_profile(r->vm, on);
}

static bool give_input(bib_vm_t *vm, const char *arg) {
    const char *eq = arg != NULL ? strchr(arg, '=') : NULL;
    if (eq == NULL || eq == arg || eq[1] == '\0') {
        error_line("usage: :input NAME=PATH.npy");
        return false;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    char msg[600];
    bib_status_t st = bib_npy_set_input(vm, name, eq + 1, bib_cli_max_file_size, msg, sizeof msg);
    if (st != BIB_OK)
        error_line(":input %s: %s", name, msg);
    return st == BIB_OK;
}

static void cmd_input(repl_t *r, const char *arg) {
    if (!give_input(r->vm, arg))
        return;
    char **grown = realloc(r->inputs, (r->ninputs + 1) * sizeof *grown);
    char *copy = strdup(arg);
    if (grown == NULL || copy == NULL) {
        free(copy);
        error_line("host out of memory");
        return;
    }
    r->inputs = grown;
    r->inputs[r->ninputs++] = copy;
}

static void cmd_list(repl_t *r) {
    if (r->file_text != NULL) {
        fputs(r->file_text, stdout);
        return;
    }
    gen_t g;
    if (generate(r, &g, 0, false))
        fputs(g.text, stdout);
    gen_free(&g);
}

static const char help_text[] =
    "Type an instruction to run it now, a label, a .func ... .end block or a\n"
    "directive to add it to the session. Commands:\n"
    "  :regs              registers of the current frame\n"
    "  :mem ADDR [N]      N bytes of linear memory from ADDR (default 64)\n"
    "  :tensors           live tensor registers\n"
    "  :tensor tN|NAME    one tensor: shape, executor, hash, first elements\n"
    "  :load FILE         run FILE (.basm or .bib) in the session, paused at its start\n"
    "  :input NAME=PATH   give input tensor NAME from a .npy file\n"
    "  :break [PC|FUNC|LABEL]  set a breakpoint (none: list them)\n"
    "  :delete [PC|FUNC|LABEL] clear a breakpoint (none: all)\n"
    "  :step [N]          execute N instructions (default 1)\n"
    "  :continue          run to a breakpoint or the end\n"
    "  :run               start the program again from a fresh state\n"
    "  :where, :bt        the position, the call frames\n"
    "  :list              the session's source\n"
    "  :backend cpu|vulkan|cuda|auto  switch the tensor executor (restarts the state)\n"
    "  :complete LINE     what Tab offers at the end of LINE, one a line\n"
    "  :call NAME ARG...  run function NAME with these arguments on a fresh state\n"
    "                     (the session's is kept) and print what it returns\n"
    "  :trace on|off|json   trace executed instructions to stderr\n"
    "  :profile [on|off|json]  profile runs; no argument: show the profile\n"
    "  :reset             forget everything: an empty session\n"
    "  :help, :quit\n";

/* Runs one ':' command; returns false for :quit. */
static bool command(repl_t *r, char *line) {
    /* :complete takes the rest of the line as it is. */
    const char *complete_arg = NULL;
    if (strncmp(line, ":complete", 9) == 0 && (line[9] == ' ' || line[9] == '\t')) {
        complete_arg = line + 10;
        line[9] = '\0';
    }
    char *save = NULL;
    char *cmd = strtok_r(line + 1, " \t", &save);
    char *a = strtok_r(NULL, " \t", &save);
    char *b = strtok_r(NULL, " \t", &save);
    if (cmd == NULL || strcmp(cmd, "help") == 0 || strcmp(cmd, "h") == 0) {
        fputs(help_text, stdout);
    } else if (strcmp(cmd, "quit") == 0 || strcmp(cmd, "q") == 0) {
        return false;
    } else if (strcmp(cmd, "regs") == 0) {
        cmd_regs(r);
    } else if (strcmp(cmd, "mem") == 0) {
        cmd_mem(r, a, b);
    } else if (strcmp(cmd, "tensors") == 0) {
        cmd_tensors(r);
    } else if (strcmp(cmd, "tensor") == 0) {
        cmd_tensor(r, a);
    } else if (strcmp(cmd, "load") == 0) {
        cmd_load(r, a);
    } else if (strcmp(cmd, "input") == 0) {
        cmd_input(r, a);
    } else if (strcmp(cmd, "break") == 0 || strcmp(cmd, "b") == 0) {
        cmd_break(r, a, true);
    } else if (strcmp(cmd, "delete") == 0) {
        cmd_break(r, a, false);
    } else if (strcmp(cmd, "step") == 0 || strcmp(cmd, "s") == 0) {
        cmd_step(r, a, false);
    } else if (strcmp(cmd, "continue") == 0 || strcmp(cmd, "c") == 0) {
        cmd_step(r, NULL, true);
    } else if (strcmp(cmd, "run") == 0) {
        cmd_run(r);
    } else if (strcmp(cmd, "complete") == 0) {
        cmd_complete(r, complete_arg != NULL ? complete_arg : "");
    } else if (strcmp(cmd, "call") == 0) {
        char *rest[65];
        int n = 0;
        if (b != NULL)
            rest[n++] = b;
        for (char *w; n < 65 && (w = strtok_r(NULL, " \t", &save)) != NULL;)
            rest[n++] = w;
        cmd_call(r, a, rest, n);
    } else if (strcmp(cmd, "where") == 0) {
        bib_position_t pos;
        static const char *const state[] = {"", "paused", "breakpoint", "halted", "trapped"};
        if (need_run(r) && bib_vm_position(r->vm, &pos) == BIB_OK)
            print_position(r, state[pos.stop]);
    } else if (strcmp(cmd, "bt") == 0) {
        cmd_backtrace(r);
    } else if (strcmp(cmd, "list") == 0) {
        cmd_list(r);
    } else if (strcmp(cmd, "backend") == 0) {
        cmd_backend(r, a);
    } else if (strcmp(cmd, "trace") == 0) {
        cmd_trace(r, a);
    } else if (strcmp(cmd, "profile") == 0) {
        cmd_profile(r, a);
    } else if (strcmp(cmd, "reset") == 0) {
        reset_session(r);
        bib_vm_t *vm = new_vm(r);
        if (vm != NULL) {
            bib_vm_destroy(r->vm);
            r->vm = vm;
        }
        printf("session reset\n");
    } else {
        error_line("unknown command ':%s' (:help lists them)", cmd);
    }
    return true;
}

/* ---- input ---------------------------------------------------------------------------- */

/* ---- completion ------------------------------------------------------------------------ */

static const char *const command_names[] = {
    ":help",  ":quit",    ":regs",  ":mem",      ":tensors", ":tensor",   ":load",  ":input",
    ":break", ":delete",  ":step",  ":continue", ":run",     ":call",     ":where", ":bt",
    ":list",  ":backend", ":trace", ":profile",  ":reset",   ":complete",
};

static const char *const directive_names[] = {
    ".func",  ".end",    ".memory",  ".data",   ".asciz",  ".ascii",   ".byte",
    ".i16",   ".i32",    ".i64",     ".f32",    ".f64",    ".zero",    ".align",
    ".const", ".import", ".input",   ".output", ".tensor", ".tensors", ".dim",
    ".entry", ".source", ".nodebug", ".shader", ".kernel",
};

/* The candidates gathered for one completion, each malloc'd. */
typedef struct completions {
    char **v;
    size_t n, cap;
} completions_t;

static void offer(completions_t *c, const char *word, size_t len, const char *candidate,
                  bool any_case) {
    if ((any_case ? strncasecmp(candidate, word, len) : strncmp(candidate, word, len)) != 0)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i], candidate) == 0)
            return;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 32;
        c->v = bib_cli_grow(c->v, c->cap * sizeof *c->v);
    }
    c->v[c->n++] = bib_cli_strdup(candidate);
}

/* The code labels defined in the session (or the loaded file). */
static void offer_labels(const repl_t *r, completions_t *c, const char *word, size_t len) {
    const src_t *parts[2] = {&r->funcs, &r->body};
    char name[256];
    for (int k = 0; k < 2 && r->file_text == NULL; k++)
        for (size_t i = 0; i < parts[k]->n; i++) {
            const char *q = parts[k]->v[i].text;
            while (*q == ' ' || *q == '\t')
                q++;
            size_t n = 0;
            while (is_name_char((unsigned char)q[n]) && n + 1 < sizeof name)
                n++;
            if (n > 0 && q[n] == ':') {
                memcpy(name, q, n);
                name[n] = '\0';
                offer(c, word, len, name, false);
            }
        }
    for (const char *p = r->file_text; p != NULL && *p != '\0';) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = 0;
        while (is_name_char((unsigned char)p[n]) && n + 1 < sizeof name)
            n++;
        if (n > 0 && p[n] == ':' && p[0] != '.') {
            memcpy(name, p, n);
            name[n] = '\0';
            offer(c, word, len, name, false);
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
}

/* What Tab offers for word, the last word of line (the text before the
   cursor): commands and opcodes (and directives) as the first word;
   registers, tensor registers, labels, functions and tensor names after. */
static void complete_word(repl_t *r, const char *line, const char *word, completions_t *c) {
    size_t len = strlen(word);
    const char *first = line;
    while (*first == ' ' || *first == '\t')
        first++;
    bool is_first = first == word || first + strspn(first, " \t") == word;
    if (is_first) {
        for (size_t i = 0; i < sizeof command_names / sizeof *command_names; i++)
            offer(c, word, len, command_names[i], false);
        for (size_t i = 0; i < sizeof directive_names / sizeof *directive_names; i++)
            offer(c, word, len, directive_names[i], true);
        for (int i = 0; i < BIB_OP__COUNT; i++)
            offer(c, word, len, bib_isa_table[i].name, true);
        return;
    }
    /* Operands, and the arguments of :break, :tensor, :call, :backend. */
    bib_frame_info_t f;
    uint32_t nregs = 16;
    if (bib_vm_frame(r->vm, 0, &f) == BIB_OK && f.nregs > nregs)
        nregs = f.nregs;
    char name[32];
    if (strncmp(first, ":backend", 8) == 0) {
        const char *const backends[] = {"cpu", "vulkan", "cuda", "auto"};
        for (int i = 0; i < 4; i++)
            offer(c, word, len, backends[i], false);
        return;
    }
    if (strncmp(first, ":trace", 6) == 0 || strncmp(first, ":profile", 8) == 0) {
        const char *const modes[] = {"on", "off", "json"};
        for (int i = 0; i < 3; i++)
            offer(c, word, len, modes[i], false);
        return;
    }
    if (first[0] != ':' && (len == 0 || word[0] == 'r'))
        for (uint32_t i = 0; i < nregs; i++) {
            snprintf(name, sizeof name, "r%" PRIu32, i);
            offer(c, word, len, name, false);
        }
    uint32_t tregs = bib_vm_tensor_regs(r->vm);
    if (len == 0 || word[0] == 't')
        for (uint32_t i = 0; i < tregs; i++) {
            snprintf(name, sizeof name, "t%" PRIu32, i);
            offer(c, word, len, name, false);
        }
    uint32_t ntensors = bib_vm_tensor_count(r->vm);
    for (uint32_t i = 0; i < ntensors; i++) {
        bib_tensor_info_t t;
        if (bib_vm_tensor_info(r->vm, i, &t) == BIB_OK)
            offer(c, word, len, t.name, false);
    }
    if (strncmp(first, ":tensor", 7) == 0)
        return;
    offer_labels(r, c, word, len);
    uint32_t nfuncs = bib_vm_function_count(r->vm);
    for (uint32_t i = 0; i < nfuncs; i++) {
        bib_function_info_t fi;
        if (bib_vm_function_info(r->vm, i, &fi) == BIB_OK)
            offer(c, word, len, fi.name, false);
    }
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* :complete LINE: what Tab would offer at the end of LINE, one a line (for
   scripts and tests; a terminal session gets them from Tab). */
static void cmd_complete(repl_t *r, const char *line) {
    const char *word = line + strlen(line);
    while (word > line && word[-1] != ' ' && word[-1] != '\t' && word[-1] != ',')
        word--;
    completions_t c = {0};
    complete_word(r, line, word, &c);
    qsort(c.v, c.n, sizeof *c.v, compare_strings);
    for (size_t i = 0; i < c.n; i++) {
        printf("%s\n", c.v[i]);
        free(c.v[i]);
    }
    free(c.v);
}

/* libedit's side: the session being completed, and the candidates of the
   current Tab, handed out one by one. */
static repl_t *completing;
static completions_t tab;

static char *tab_generator(const char *text, int state) {
    (void)text;
    static size_t next;
    if (state == 0)
        next = 0;
    return next < tab.n ? strdup(tab.v[next++]) : NULL;
}

static char **tab_complete(const char *text, int start, int end) {
    (void)end;
    for (size_t i = 0; i < tab.n; i++)
        free(tab.v[i]);
    tab.n = 0;
    /* ":load FILE" and ":input NAME=FILE": file names, libedit's default. */
    const char *line = rl_line_buffer;
    while (*line == ' ')
        line++;
    if (strncmp(line, ":load", 5) == 0 || strncmp(line, ":input", 6) == 0)
        return NULL;
    char *before = bib_cli_memdup(rl_line_buffer, (size_t)start);
    size_t tlen = strlen(text);
    char *upto = bib_cli_alloc((size_t)start + tlen + 1);
    memcpy(upto, before, (size_t)start);
    memcpy(upto + start, text, tlen + 1);
    complete_word(completing, upto, upto + start, &tab);
    free(before);
    free(upto);
    rl_attempted_completion_over = 1;
    return rl_completion_matches(text, tab_generator);
}

/* $XDG_CACHE_HOME/bib/repl_history, else ~/.cache/bib/repl_history; NULL
   when neither can be made. */
static char *history_path(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    if (xdg != NULL && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/bib", xdg);
    else if (home != NULL && home[0] != '\0')
        snprintf(dir, sizeof dir, "%s/.cache/bib", home);
    else
        return NULL;
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    mkdir(dir, 0700);
    *slash = '/';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return NULL;
    size_t n = strlen(dir) + sizeof "/repl_history";
    char *path = malloc(n);
    if (path != NULL)
        snprintf(path, n, "%s/repl_history", dir);
    return path;
}

/* The next line without its newline (caller frees), or NULL at the end.
 * *nul_col is the column of the first NUL byte in it (0 when none), and
 * *too_long says it passed the file size cap: the bytes after the cap are
 * read and dropped, so no input grows the session past it. */
static char *read_line(repl_t *r, size_t *nul_col, bool *too_long) {
    *nul_col = 0;
    *too_long = false;
    if (r->tty) {
        char *line = readline(r->pending ? "...> " : "bib> ");
        if (line != NULL && line[0] != '\0')
            add_history(line);
        return line;
    }
    uint64_t max = bib_file_cap(bib_cli_max_file_size);
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    int c;
    while (buf != NULL && (c = getchar()) != EOF && c != '\n') {
        if (c == '\0' && *nul_col == 0 && !*too_long)
            *nul_col = n + 1;
        if (n >= max) {
            *too_long = true;
            continue;
        }
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                free(buf);
                return NULL;
            }
            buf = grown;
            cap *= 2;
        }
        buf[n++] = (char)c;
    }
    if (buf == NULL || (n == 0 && c == EOF)) {
        free(buf);
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    return buf;
}

int bib_cli_repl(const bib_options_t *options, const char *file, int profile) {
    repl_t r;
    memset(&r, 0, sizeof r);
    r.options = *options;
    snprintf(r.backend, sizeof r.backend, "%s", options->backend ? options->backend : "cpu");
    r.options.backend = r.backend;
    r.profile = profile;
    r.tty = isatty(STDIN_FILENO) != 0;
    r.vm = new_vm(&r);
    if (r.vm == NULL)
        return BIB_EXIT_UNAVAILABLE;
    char *history = NULL;
    if (r.tty) {
        printf("%s\ntype :help for commands, :quit to leave\n", bib_build_info());
        history = history_path();
        if (history != NULL)
            read_history(history);
        completing = &r;
        rl_attempted_completion_function = tab_complete;
        rl_basic_word_break_characters = " \t,";
    }
    if (file != NULL)
        cmd_load(&r, (char *)file);
    char *line;
    size_t nul_col;
    bool too_long;
    while ((line = read_line(&r, &nul_col, &too_long)) != NULL) {
        r.lineno++;
        if (nul_col != 0 || too_long) {
            /* The text after a NUL would be lost without a word: the line is
               refused whole, as a line that does not assemble is. */
            if (too_long)
                error_line("repl:%u: the line is longer than the file size cap of %" PRIu64
                           " bytes; it is dropped",
                           r.lineno, bib_file_cap(bib_cli_max_file_size));
            else
                error_line("repl:%u:%zu: a NUL byte in the line; it is dropped", r.lineno, nul_col);
            free(line);
            out_flush();
            continue;
        }
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        bool go_on = true;
        if (p[0] == ':' && r.pending == 0)
            go_on = command(&r, line + (p - line));
        else
            source_line(&r, line);
        free(line);
        out_flush();
        if (!go_on)
            break;
    }
    if (r.pending != 0)
        error_line("input ended inside %s", r.pending == 1 ? "a .func block" : "a directive");
    if (r.profile && r.loaded) {
        out_flush();
        bib_vm_profile_write(r.vm, stderr, r.profile == 2);
    }
    if (history != NULL) {
        write_history(history);
        free(history);
    }
    bib_vm_destroy(r.vm);
    reset_session(&r);
    return 0;
}
