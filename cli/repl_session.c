/* cli/repl_session.c: the source of a `bib repl` session and its assembly.
 *
 * Owns the session's source as typed (directives, `.func` blocks, main's
 * body), the module source generated from it with each line mapped back to
 * the session line, assembling it, splicing one typed instruction into the
 * committed module, and committing the result to the VM (spec/cli.md has
 * the session model). Does not own reading lines, the ':' commands or the
 * VM's creation (cli/repl.c), nor Tab completion (cli/repl_complete.c).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/repl_internal.h"
#include "module/module.h"
#include "vm/extend.h"

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

void repl_src_free(src_t *s) {
    src_truncate(s, 0);
    free(s->v);
    memset(s, 0, sizeof *s);
}

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
bool repl_generate(const repl_t *r, gen_t *g, uint32_t current, bool with_lines) {
    memset(g, 0, sizeof *g);
    return gen_src(g, &r->top, false) && gen_src(g, &r->funcs, with_lines) &&
           gen_line(g, ".func main", current) && gen_src(g, &r->body, with_lines) &&
           (!with_lines || gen_line(g, ".line 0", current)) &&
           gen_line(g, "    HALT r0", current) && gen_line(g, ".end", current);
}

void repl_gen_free(gen_t *g) {
    free(g->text);
    free(g->origin);
}

/* Prints text[0..n) with each "on line N" (where the assembler says an
   earlier line defined a name) naming the session line. */
static void print_mapped(const gen_t *g, const char *text, size_t n) {
    static const char said[] = "on line ";
    const size_t k = sizeof said - 1;
    size_t from = 0;
    for (size_t i = 0; i + k < n; i++) {
        if (memcmp(text + i, said, k) != 0 || !isdigit((unsigned char)text[i + k]))
            continue;
        size_t j = i + k;
        unsigned long line = 0;
        while (j < n && isdigit((unsigned char)text[j]) && line <= g->lines)
            line = line * 10 + (unsigned long)(text[j++] - '0');
        if (line < 1 || line > g->lines || (j < n && isdigit((unsigned char)text[j])))
            continue;
        fprintf(stderr, "%.*s%" PRIu32, (int)(i + k - from), text + from, g->origin[line - 1]);
        from = j;
        i = j - 1;
    }
    fprintf(stderr, "%.*s\n", (int)(n - from), text + from);
}

/* Prints assembler diagnostics with generated line numbers turned back into
   session lines (lines the session added map to the line being typed). */
static void print_diagnostics(const gen_t *g, const char *diag) {
    repl_out_flush();
    const char *p = diag;
    while (*p != '\0') {
        const char *end = strchr(p, '\n');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        unsigned long line = 0;
        int used = 0;
        if (n > 5 && strncmp(p, "repl:", 5) == 0 && sscanf(p + 5, "%lu%n", &line, &used) == 1 &&
            p[5 + used] == ':' && line >= 1 && line <= g->lines) {
            fprintf(stderr, "repl:%" PRIu32, g->origin[line - 1]);
            print_mapped(g, p + 5 + used, n - 5 - used);
        } else {
            fprintf(stderr, "%.*s\n", (int)n, p);
        }
        p += n;
        if (*p == '\n')
            p++;
    }
}

/* Assembles the interactive source; on success *bytes holds the module. */
bool repl_assemble(repl_t *r, uint8_t **bytes, size_t *size) {
    gen_t g;
    bool ok = repl_generate(r, &g, r->lineno, true);
    if (!ok) {
        repl_gen_free(&g);
        repl_error_line("host out of memory");
        return false;
    }
    char *diag = NULL;
    bib_status_t st = bib_assemble(g.text, g.len, "repl", bytes, size, &diag);
    if (st != BIB_OK)
        print_diagnostics(&g, diag != NULL ? diag : "repl: error: assembly failed");
    bib_free(diag);
    repl_gen_free(&g);
    return st == BIB_OK;
}

/* ---- one instruction appended to main, without reassembling the session ---- */

/* A line spliced: what bib_vm_extend takes, and the arrays it points to. */
typedef struct splice {
    bib_extension_t ext;
    bib_insn_t *code;
    uint32_t *lines;
    char **labels;
    uint32_t label_count;
    bib_const_t *consts;
} splice_t;

static void splice_free(splice_t *s) {
    for (uint32_t i = 0; s->labels != NULL && i < s->label_count; i++)
        free(s->labels[i]);
    free(s->labels);
    free(s->code);
    free(s->lines);
    free(s->consts);
    memset(s, 0, sizeof *s);
}

/* The index k will have in the loaded module's constant pool once s's new
   constants follow it (added to them when new; -1: out of memory). */
static int64_t splice_const(repl_t *r, splice_t *s, bib_const_t k) {
    uint32_t index;
    int found = bib_vm_const_find(r->vm, k, &index);
    if (found != 0)
        return found > 0 ? (int64_t)index : -1;
    const uint32_t base = bib_vm_module(r->vm)->const_count;
    for (uint32_t i = 0; i < s->ext.const_count; i++)
        if (s->consts[i].type == k.type && s->consts[i].bits == k.bits)
            return base + i;
    bib_const_t *v = realloc(s->consts, (s->ext.const_count + 1) * sizeof *v);
    if (v == NULL)
        return -1;
    s->consts = v;
    v[s->ext.const_count] = k;
    return base + s->ext.const_count++;
}

/* Where a statement goes on after its labels ("name:", each) and blanks. */
static const char *after_labels(const char *line) {
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *q = p;
        while (repl_is_name_char((unsigned char)*q))
            q++;
        if (q == p || *q != ':')
            return p;
        p = q + 1;
    }
}

/* A word of a line that names a label of main, a function, or both. */
typedef struct named {
    const char *at; /* in the line */
    size_t len;
    uint32_t pc;   /* the label's pc, or UINT32_MAX */
    uint32_t func; /* the function's index, or UINT32_MAX */
} named_t;

/* The k-th of named[0..n) that names a label (of_func false) or a function,
   as the probe has them: its pc or index; -1 when there are fewer. */
static int64_t nth_named(const named_t *named, uint32_t n, int64_t k, bool of_func) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = of_func ? named[i].func : named[i].pc;
        if (v != UINT32_MAX && k-- == 0)
            return v;
    }
    return -1;
}

/* Assembles the last line of main (an instruction, labels, or labels and an
   instruction) in a small source: the directives, a stand-in for each
   function the line names, and a main holding a call, one NOP for each
   label of main the line names, then the line. Its instructions, with their
   targets, functions, constants and imports mapped by name and value onto
   the loaded module and its own labels marking the first of them, are what
   *s gives bib_vm_extend to put before the closing HALT; the module is then
   what assembling the whole session gives (BIB_REPL_CHECK=1 compares the
   two). Returns false, with *s empty, whenever the line is not such a case
   (a line naming a host function the module does not import yet is not:
   imports are bound by a reload) or anything differs from plan: the caller
   then assembles the whole session, which also gives the diagnostics. */
static bool splice_line(repl_t *r, splice_t *s) {
    memset(s, 0, sizeof *s);
    const bib_module_t *m = bib_vm_module(r->vm);
    if (m == NULL || r->file != NULL || r->body.n == 0 || m->func_count == 0 ||
        m->entry_func != m->func_count - 1 || m->lines == NULL)
        return false;
    const src_line_t *line = &r->body.v[r->body.n - 1];
    /* Labels, then an instruction or nothing; not a directive. */
    if (*after_labels(line->text) == '.')
        return false;
    const bib_function_t *main_fn = &m->funcs[m->entry_func];
    const uint32_t halt = main_fn->entry + main_fn->count - 1;
    if (main_fn->entry + main_fn->count != m->code_count)
        return false;
    /* The words of the line that name a label of main or a function, each
       once (a word can be both). */
    const size_t len = strlen(line->text);
    named_t *named = malloc((len / 2 + 1) * sizeof *named);
    uint32_t nnamed = 0, nops = 0, nstubs = 0;
    bool ok = named != NULL;
    char word[BIB_MAX_NAME + 1], text[BIB_MAX_NAME + 64];
    for (const char *w = line->text; ok && *w != '\0';) {
        if (!repl_is_name_char((unsigned char)*w)) {
            w++;
            continue;
        }
        const char *e = w;
        while (repl_is_name_char((unsigned char)*e))
            e++;
        const size_t n = (size_t)(e - w);
        bool seen = n > BIB_MAX_NAME;
        for (uint32_t i = 0; !seen && i < nnamed; i++)
            seen = named[i].len == n && memcmp(named[i].at, w, n) == 0;
        if (!seen) {
            memcpy(word, w, n);
            word[n] = '\0';
            named_t *x = &named[nnamed];
            *x = (named_t){w, n, UINT32_MAX, UINT32_MAX};
            int found = bib_vm_entry_label(r->vm, word, &x->pc);
            ok = found >= 0;
            if (found == 0)
                x->pc = UINT32_MAX;
            int64_t f = bib_vm_function_find(r->vm, word);
            if (f >= 0 && (uint32_t)f != m->entry_func)
                x->func = (uint32_t)f;
            nops += x->pc != UINT32_MAX;
            nstubs += x->func != UINT32_MAX;
            nnamed += x->pc != UINT32_MAX || x->func != UINT32_MAX;
        }
        w = e;
    }
    /* The probe: the directives; a stand-in of the same name, arguments and
       registers for each function the line names (their bodies do not
       matter to it, and assembling them would cost what the session holds);
       main, holding a call of a function of its own (so that its tensor
       liveness knows nothing of main's tensor registers: the module's check
       judges the line), then the labels of main that the line names, each
       on a NOP of its own, then the line. Functions are mapped by name. */
    gen_t g;
    memset(&g, 0, sizeof g);
    ok = ok && gen_src(&g, &r->top, false);
    for (uint32_t i = 0; ok && i < nnamed; i++) {
        if (named[i].func == UINT32_MAX)
            continue;
        const bib_function_t *f = &m->funcs[named[i].func];
        snprintf(text, sizeof text, ".func %.*s args=%" PRIu32 " regs=%" PRIu32, (int)named[i].len,
                 named[i].at, f->nargs, f->nregs);
        ok = gen_line(&g, text, 0) && gen_line(&g, "    RET r0", 0) && gen_line(&g, ".end", 0);
    }
    ok = ok && gen_line(&g, ".func main", 0) && gen_line(&g, "    CALL r0, __repl_probe, r0, 0", 0);
    for (uint32_t i = 0; ok && i < nnamed; i++)
        if (named[i].pc != UINT32_MAX) {
            snprintf(text, sizeof text, "%.*s: NOP", (int)named[i].len, named[i].at);
            ok = gen_line(&g, text, 0);
        }
    ok = ok && gen_line(&g, line->text, 0) && gen_line(&g, "    HALT r0", 0) &&
         gen_line(&g, ".end", 0) && gen_line(&g, ".func __repl_probe", 0) &&
         gen_line(&g, "    RET r0", 0) && gen_line(&g, ".end", 0);
    uint8_t *probe_bytes = NULL;
    size_t probe_size = 0;
    char *diag = NULL;
    bib_module_t *probe = NULL;
    ok = ok && bib_assemble(g.text, g.len, "repl", &probe_bytes, &probe_size, &diag) == BIB_OK &&
         bib_module_read(probe_bytes, probe_size, &probe, NULL) == BIB_OK;
    repl_gen_free(&g);
    bib_free(diag);
    bib_free(probe_bytes);
    /* The stand-ins, main and the probe's own function, in that order; the
       line's instructions after the call and the label NOPs, and its own
       labels the probe's last. */
    ok = ok && probe->func_count == nstubs + 2 && probe->entry_func == nstubs;
    const bib_function_t *pm = ok ? &probe->funcs[probe->entry_func] : NULL;
    ok = ok && pm->count > nops + 1;
    const uint32_t first_nop = ok ? pm->entry + 1 : 0;
    const uint32_t line_pc = first_nop + nops;
    const uint32_t added = ok ? pm->count - nops - 2 : 0;
    uint32_t own = 0;
    while (ok && own < probe->label_count &&
           probe->labels[probe->label_count - 1 - own].pc >= line_pc)
        own++;
    ok = ok && added + own > 0;
    s->labels = ok && own > 0 ? calloc(own, sizeof *s->labels) : NULL;
    ok = ok && (own == 0 || s->labels != NULL);
    for (uint32_t i = 0; ok && i < own; i++) {
        s->labels[i] = strdup(probe->labels[probe->label_count - own + i].name);
        ok = s->labels[i] != NULL;
        s->label_count += ok;
    }
    s->code = ok ? malloc((added + 1) * sizeof *s->code) : NULL;
    s->lines = ok ? malloc((added + 1) * sizeof *s->lines) : NULL;
    ok = ok && s->code != NULL && s->lines != NULL;
    for (uint32_t k = 0; ok && k < added; k++) {
        bib_insn_t in = probe->code[line_pc + k];
        const bib_opinfo_t *info = &bib_isa_table[bib_isa_find_code(in.op)];
        uint32_t *words[4] = {&in.a, &in.b, &in.c, &in.d};
        for (int w = 0; ok && w < 4; w++) {
            int64_t v = *words[w];
            switch ((bib_operand_kind_t)info->kinds[w]) {
            case BIB_K_TGT:
                /* Only a label's NOP, or the line itself (its own labels). */
                if (v >= first_nop && v < line_pc)
                    v = nth_named(named, nnamed, v - first_nop, false);
                else if (v >= line_pc && v < line_pc + added)
                    v = halt + (v - line_pc);
                else
                    v = -1;
                break;
            case BIB_K_CONST:
                v = splice_const(r, s, probe->consts[v]);
                break;
            case BIB_K_FN:
                /* A stand-in, or main. */
                if (v < nstubs)
                    v = nth_named(named, nnamed, v, true);
                else
                    v = v == nstubs ? (int64_t)m->entry_func : -1;
                break;
            case BIB_K_HOST:
                /* An import the module has already; a new one takes a reload. */
                v = -1;
                for (uint32_t i = 0; i < m->import_count && v < 0; i++)
                    if (strcmp(m->imports[i], probe->imports[*words[w]]) == 0)
                        v = i;
                break;
            default:
                break;
            }
            ok = v >= 0;
            *words[w] = (uint32_t)v;
        }
        s->code[k] = in;
        s->lines[k] = line->origin;
    }
    free(named);
    if (ok) {
        /* Registers, inferred from those named, only grow. */
        const uint32_t nconsts = s->ext.const_count;
        s->ext = (bib_extension_t){
            .code = s->code,
            .lines = s->lines,
            .count = added,
            .labels = (const char *const *)s->labels,
            .label_count = own,
            .consts = s->consts,
            .const_count = nconsts,
            .nregs = pm->nregs > main_fn->nregs ? pm->nregs : main_fn->nregs,
            .tensor_regs =
                probe->tensor_regs > m->tensor_regs ? probe->tensor_regs : m->tensor_regs,
        };
    }
    bib_module_free(probe);
    if (!ok)
        splice_free(s);
    return ok;
}

/* BIB_REPL_CHECK=1: the loaded module, written out, against the whole
   session assembled (its line numbers and all). */
static void check_splice(repl_t *r) {
    uint8_t *full = NULL, *loaded = NULL;
    size_t full_size = 0, loaded_size = 0;
    char *d = NULL;
    gen_t all;
    if (repl_generate(r, &all, r->lineno, true) &&
        bib_assemble(all.text, all.len, "repl", &full, &full_size, &d) == BIB_OK &&
        bib_module_write(bib_vm_module(r->vm), &loaded, &loaded_size, NULL) == BIB_OK &&
        (full_size != loaded_size || memcmp(full, loaded, full_size) != 0))
        repl_error_line("internal: line %" PRIu32 " spliced differs from the session assembled",
                        r->lineno);
    repl_gen_free(&all);
    bib_free(full);
    bib_free(loaded);
    bib_free(d);
}

/* Swaps the assembled source in, keeping the run's state, and runs the new
   instructions of main. Returns false (nothing changed) when it cannot. */
static bool commit(repl_t *r, bool adds_to_main) {
    bib_position_t pos;
    bool have = r->loaded && bib_vm_position(r->vm, &pos) == BIB_OK;
    /* Loaded, but not started: waiting for inputs its .input lines declare. */
    bool waiting = r->loaded && !have;
    bib_function_info_t mi;
    uint32_t offset = r->main_count;
    if (have) {
        bool finished = pos.stop == BIB_STOP_HALTED || pos.stop == BIB_STOP_TRAPPED;
        if (!finished && pos.depth > 1) {
            repl_error_line("the program is paused in %s (depth %" PRIu32 "): :continue, :step or "
                            ":run first",
                            pos.func_name, pos.depth);
            return false;
        }
        if (!finished && repl_main_info(r, &mi) == 0) {
            offset = pos.pc - mi.entry;
            if (adds_to_main && offset != r->main_count) {
                repl_error_line("the program is paused at pc %" PRIu32 ": :continue, :step or :run "
                                "first",
                                pos.pc);
                return false;
            }
        }
    }
    uint8_t *bytes = NULL;
    size_t size = 0;
    splice_t splice;
    /* BIB_REPL_CHECK=whole: every line takes the whole-session path (tests
       compare the transcripts of the two paths). */
    const char *check = getenv("BIB_REPL_CHECK");
    bool whole = check != NULL && strcmp(check, "whole") == 0;
    bool spliced = adds_to_main && have && !whole && splice_line(r, &splice);
    if (!spliced && !repl_assemble(r, &bytes, &size))
        return false;
    bib_status_t st;
    char missing[512];
    if (!r->loaded || waiting) {
        st = bib_vm_load(r->vm, bytes, size, "repl");
        for (size_t i = 0; st == BIB_OK && i < r->ninputs; i++)
            if (!repl_give_input(r->vm, r->inputs[i]))
                st = BIB_E_USAGE;
        /* A module whose inputs are not all given yet (an .input typed
           first) waits for them: declarations take effect at :run, and
           the line is kept. */
        r->loaded = st == BIB_OK;
        if (st == BIB_OK && repl_missing_inputs(r, missing, sizeof missing) > 0) {
            bib_free(bytes);
            if (repl_main_info(r, &mi) == 0)
                r->main_count = mi.count - 1;
            repl_apply_breaks(r);
            if (adds_to_main)
                repl_error_line("waiting for inputs %s: :input NAME=PATH.npy, then :run (the "
                                "line is kept)",
                                missing);
            return true;
        }
        r->loaded = false;
        if (st == BIB_OK)
            st = bib_vm_start(r->vm);
        offset = 0;
    } else if (spliced) {
        st = bib_vm_extend(r->vm, &splice.ext, "repl", offset);
        splice_free(&splice);
    } else {
        st = bib_vm_reload(r->vm, bytes, size, "repl", offset);
    }
    if (st != BIB_OK && spliced) {
        /* Refused as a whole module: the full path says why, in the
           session's words. */
        spliced = false;
        if (!repl_assemble(r, &bytes, &size))
            return false;
        st = bib_vm_reload(r->vm, bytes, size, "repl", offset);
    }
    if (st != BIB_OK) {
        bib_free(bytes);
        repl_error_line("%s", bib_vm_error(r->vm));
        return false;
    }
    if (spliced && check != NULL)
        check_splice(r);
    bib_free(bytes);
    r->loaded = true;
    uint32_t old_count = r->main_count;
    if (repl_main_info(r, &mi) == 0)
        r->main_count = mi.count - 1;
    repl_apply_breaks(r);
    if (r->main_count == old_count || !adds_to_main)
        return true;

    uint32_t nbefore;
    uint64_t *before = repl_entry_regs(r, &nbefore);
    bib_stop_t stop;
    st = repl_resume(r, UINT64_MAX, &stop);
    repl_out_flush();
    bib_vm_position(r->vm, &pos);
    bool at_end = stop == BIB_STOP_HALTED && pos.depth == 1 && repl_main_info(r, &mi) == 0 &&
                  pos.pc == mi.entry + r->main_count;
    uint32_t nafter;
    uint64_t *after = repl_entry_regs(r, &nafter);
    for (uint32_t i = 0; after != NULL && i < nafter; i++)
        if (i >= nbefore || before == NULL || before[i] != after[i])
            repl_print_reg(i, after[i]);
    free(before);
    free(after);
    repl_report_stop(r, st, stop, at_end);
    return true;
}

/* Appends lines to part and commits; on failure takes them back. */
static void add_lines(repl_t *r, src_t *part, const src_t *lines, bool adds_to_main) {
    size_t keep = part->n;
    for (size_t i = 0; i < lines->n; i++)
        if (!src_push(part, lines->v[i].text, lines->v[i].origin)) {
            src_truncate(part, keep);
            repl_error_line("host out of memory");
            return;
        }
    if (!commit(r, adds_to_main))
        src_truncate(part, keep);
}

/* The first word of a statement after its labels ("" for none). */
static void first_word(const char *line, char *word, size_t cap) {
    const char *p = after_labels(line);
    size_t n = 0;
    while (*p != '\0' && *p != ' ' && *p != '\t' && *p != ';' && n + 1 < cap)
        word[n++] = (char)tolower((unsigned char)*p++);
    word[n] = '\0';
}

static bool continues(const char *line) {
    size_t n = strlen(line);
    while (n > 0 && isspace((unsigned char)line[n - 1]))
        n--;
    return n > 0 && (line[n - 1] == ',' || line[n - 1] == '\\');
}

/* A line of source typed at the prompt. */
void repl_source_line(repl_t *r, const char *line) {
    if (r->file != NULL) {
        repl_error_line("a file is loaded: instructions typed at the prompt need an interactive "
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
    repl_src_free(&one);
}
