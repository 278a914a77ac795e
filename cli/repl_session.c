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
    if (bib_module_reserve(m, m->code_count, m->const_count + 1, m->label_count) != BIB_OK)
        return -1;
    m->consts[m->const_count] = k;
    return m->const_count++;
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

/* Assembles the last line of main (an instruction, labels, or labels and an
   instruction) in a small source: the directives, the functions, and a main
   holding a call, one NOP for each label of main the line names, then the
   line. Its instructions are spliced into the committed module before the
   closing HALT, their labels, constants and imports mapped by name and
   value, and its own labels mark the first of them. The result is what assembling the
   whole session gives (BIB_REPL_CHECK=1 compares the two). Returns
   SPLICE_EXTEND with *ext describing what the line adds (pointing into
   r->module, and *names, which the caller frees) when the VM can take it
   with bib_vm_extend; SPLICE_RELOAD with the module's bytes when the line
   adds an import (bound anew by a reload); and SPLICE_NONE whenever the
   line is not such a case or anything differs from plan: the caller then
   assembles the whole session, which also gives the diagnostics. */
typedef enum { SPLICE_NONE, SPLICE_EXTEND, SPLICE_RELOAD } splice_t;

static splice_t splice_line(repl_t *r, bib_extension_t *ext, char ***names, uint8_t **bytes,
                            size_t *size) {
    bib_module_t *m = r->module;
    if (m == NULL || r->file != NULL || r->body.n == 0 || m->func_count == 0 ||
        m->entry_func != m->func_count - 1 || m->lines == NULL)
        return SPLICE_NONE;
    const src_line_t *line = &r->body.v[r->body.n - 1];
    /* Labels, then an instruction or nothing; not a directive. */
    if (*after_labels(line->text) == '.')
        return SPLICE_NONE;
    bib_function_t *main_fn = &m->funcs[m->entry_func];
    uint32_t halt = main_fn->entry + main_fn->count - 1;
    if (main_fn->entry + main_fn->count != m->code_count)
        return SPLICE_NONE;
    const uint32_t old_consts = m->const_count, old_imports = m->import_count;
    /* The probe: a call of a function of its own (after main, so that the
       session's functions keep their indices), so that its tensor liveness
       knows nothing of main's tensor registers (the module's check judges
       the line); then the labels of main that the line names, each on a
       NOP of its own (nop_pc: the pc each NOP stands for); then the line. */
    gen_t g;
    memset(&g, 0, sizeof g);
    bool ok = gen_src(&g, &r->top, false) && gen_src(&g, &r->funcs, false) &&
              gen_line(&g, ".func main", 0) && gen_line(&g, "    CALL r0, __repl_probe, r0, 0", 0);
    /* Each word of the line that names a label of main, once. */
    const size_t len = strlen(line->text);
    uint32_t *nop_pc = malloc((len / 2 + 1) * sizeof *nop_pc);
    const char **nop_name = malloc((len / 2 + 1) * sizeof *nop_name);
    uint32_t nops = 0;
    ok = ok && nop_pc != NULL && nop_name != NULL;
    char word[BIB_MAX_NAME + 1], text[BIB_MAX_NAME + 8];
    for (const char *w = line->text; ok && *w != '\0';) {
        if (!repl_is_name_char((unsigned char)*w)) {
            w++;
            continue;
        }
        const char *e = w;
        while (repl_is_name_char((unsigned char)*e))
            e++;
        size_t n = (size_t)(e - w);
        uint32_t pc;
        int found = 0;
        if (n <= BIB_MAX_NAME) {
            memcpy(word, w, n);
            word[n] = '\0';
            found = bib_module_entry_label(m, word, &pc);
            ok = found >= 0;
        }
        for (uint32_t i = 0; found > 0 && i < nops; i++)
            found = strncmp(nop_name[i], w, n) != 0 || nop_name[i][n] != '\0';
        if (found > 0) {
            snprintf(text, sizeof text, "%s: NOP", word);
            ok = gen_line(&g, text, 0);
            nop_name[nops] = w;
            nop_pc[nops++] = pc;
        }
        w = e;
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
    /* The same functions before main, and the line's instructions after the
       call and the label NOPs; the line's own labels are the probe's last. */
    ok = ok && probe->func_count == m->func_count + 1 && probe->entry_func == m->entry_func;
    const bib_function_t *pm = ok ? &probe->funcs[probe->entry_func] : NULL;
    ok = ok && pm->count > nops + 1;
    for (uint32_t i = 0; ok && i + 1 < m->func_count; i++)
        ok = strcmp(probe->funcs[i].name, m->funcs[i].name) == 0;
    const uint32_t first_nop = ok ? pm->entry + 1 : 0;
    const uint32_t line_pc = first_nop + nops;
    uint32_t added = ok ? pm->count - nops - 2 : 0;
    uint32_t own = 0;
    while (ok && own < probe->label_count &&
           probe->labels[probe->label_count - 1 - own].pc >= line_pc)
        own++;
    ok = ok && added + own > 0;
    *names = ok && own > 0 ? calloc(own, sizeof **names) : NULL;
    ok = ok && (own == 0 || *names != NULL);
    for (uint32_t i = 0; ok && i < own; i++)
        ok = ((*names)[i] = strdup(probe->labels[probe->label_count - own + i].name)) != NULL;
    bib_insn_t *insns = ok ? malloc((added + 1) * sizeof *insns) : NULL;
    ok = ok && insns != NULL;
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
                    v = nop_pc[v - first_nop];
                else if (v >= line_pc && v < line_pc + added)
                    v = halt + (v - line_pc);
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
    free(nop_pc);
    free(nop_name);
    uint32_t nregs = ok && pm->nregs > main_fn->nregs ? pm->nregs : main_fn->nregs;
    /* The tensor register file, inferred like regs from the registers named. */
    uint32_t tregs =
        ok && probe->tensor_regs > m->tensor_regs ? probe->tensor_regs : m->tensor_regs;
    bib_module_free(probe);
    if (ok) {
        /* Before the closing HALT: its pc moves, and nothing else does. */
        ok = bib_module_reserve(m, m->code_count + added, m->const_count, m->label_count) == BIB_OK;
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
            ok = bib_module_add_labels(m, halt, (const char *const *)*names, own) == BIB_OK;
        }
    }
    free(insns);
    /* A new import is bound by a reload; anything else the VM extends. */
    const bool reload = ok && m->import_count != old_imports;
    if (!ok || reload) {
        for (uint32_t i = 0; *names != NULL && i < own; i++)
            free((*names)[i]);
        free(*names);
        *names = NULL;
    }
    if (!ok || (reload && bib_module_write(m, bytes, size, NULL) != BIB_OK)) {
        /* The module may be half changed: the full path rebuilds it. */
        repl_forget_module(r);
        return SPLICE_NONE;
    }
    if (reload)
        return SPLICE_RELOAD;
    ext->code = &m->code[halt];
    ext->lines = &m->lines[halt];
    ext->count = added;
    ext->labels = (const char *const *)*names;
    ext->label_count = own;
    ext->consts = &m->consts[old_consts];
    ext->const_count = m->const_count - old_consts;
    ext->nregs = main_fn->nregs;
    ext->tensor_regs = m->tensor_regs;
    return SPLICE_EXTEND;
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
    /* splice_line changes r->module in place: a line refused after it is
       forgotten, and the next line assembles the whole session again. */
    bib_extension_t ext;
    char **names = NULL;
    splice_t splice =
        adds_to_main && r->loaded ? splice_line(r, &ext, &names, &bytes, &size) : SPLICE_NONE;
    bool spliced = splice != SPLICE_NONE;
    if (!spliced && !repl_assemble(r, &bytes, &size)) {
        repl_forget_module(r);
        return false;
    }
    bib_status_t st;
    if (!r->loaded) {
        st = bib_vm_load(r->vm, bytes, size, "repl");
        if (st == BIB_OK)
            st = bib_vm_start(r->vm);
        offset = 0;
    } else if (splice == SPLICE_EXTEND) {
        st = bib_vm_extend(r->vm, &ext, "repl", offset);
        for (uint32_t i = 0; names != NULL && i < ext.label_count; i++)
            free(names[i]);
        free(names);
    } else {
        st = bib_vm_reload(r->vm, bytes, size, "repl", offset);
    }
    if (st != BIB_OK && spliced) {
        /* Refused as a whole module: the full path says why, in the
           session's words. */
        bib_free(bytes);
        bytes = NULL;
        repl_forget_module(r);
        spliced = false;
        if (!repl_assemble(r, &bytes, &size))
            return false;
        st = bib_vm_reload(r->vm, bytes, size, "repl", offset);
    }
    if (st != BIB_OK) {
        bib_free(bytes);
        repl_forget_module(r);
        repl_error_line("%s", bib_vm_error(r->vm));
        return false;
    }
    if (!spliced) {
        repl_forget_module(r);
        if (bib_module_read(bytes, size, &r->module, NULL) != BIB_OK)
            r->module = NULL;
    } else if (getenv("BIB_REPL_CHECK") != NULL) {
        check_splice(r);
    }
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
    st = bib_vm_continue(r->vm, &stop);
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
