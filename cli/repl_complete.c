/* cli/repl_complete.c: Tab completion in `bib repl`, and :complete.
 *
 * Owns what Tab offers for the word before the cursor (commands, opcodes,
 * directives, registers, tensors, labels, functions) and libedit's side of
 * it. Does not own reading lines or running the commands (cli/repl.c), nor
 * the session's source it reads labels from (cli/repl_session.c).
 */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <editline/readline.h>

#include "cli/cli.h"
#include "cli/repl_internal.h"
#include "isa/isa.h"

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
    ".entry", ".source", ".nodebug", ".shader", ".kernel", ".equ",     ".bss",
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
            while (repl_is_name_char((unsigned char)q[n]) && n + 1 < sizeof name)
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
        while (repl_is_name_char((unsigned char)p[n]) && n + 1 < sizeof name)
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

/* File names that complete word (a path): the entries of its directory
   that its last part begins, a directory's with a '/' after it. */
static void offer_files(completions_t *c, const char *word, size_t len) {
    const char *slash = strrchr(word, '/');
    size_t dir_len = slash != NULL ? (size_t)(slash - word) + 1 : 0;
    char *dir = bib_cli_memdup(dir_len > 0 ? word : ".", dir_len > 0 ? dir_len : 1);
    DIR *d = opendir(dir);
    const char *base = word + dir_len;
    size_t base_len = len - dir_len;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strncmp(e->d_name, base, base_len) != 0 || (base_len == 0 && e->d_name[0] == '.'))
            continue;
        size_t n = dir_len + strlen(e->d_name) + 2;
        char *path = bib_cli_alloc(n);
        snprintf(path, n, "%.*s%s", (int)dir_len, word, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            strcat(path, "/");
        offer(c, word, len, path, false);
        free(path);
    }
    if (d != NULL)
        closedir(d);
    free(dir);
}

/* The function names of the loaded module. */
static void offer_functions(repl_t *r, completions_t *c, const char *word, size_t len) {
    uint32_t nfuncs = bib_vm_function_count(r->vm);
    for (uint32_t i = 0; i < nfuncs; i++) {
        bib_function_info_t fi;
        if (bib_vm_function_info(r->vm, i, &fi) == BIB_OK)
            offer(c, word, len, fi.name, false);
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
    /* :load FILE and :input NAME=FILE: file names (the word after '='). */
    if (strncmp(first, ":load", 5) == 0 || strncmp(first, ":input", 6) == 0) {
        if (first[1] == 'l' || (word > line && word[-1] == '='))
            offer_files(c, word, len);
        return;
    }
    /* :break and :delete: code labels and functions. */
    if (strncmp(first, ":break", 6) == 0 || strncmp(first, ":delete", 7) == 0 ||
        strncmp(first, ":b ", 3) == 0) {
        offer_labels(r, c, word, len);
        offer_functions(r, c, word, len);
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
    offer_functions(r, c, word, len);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* :complete LINE: what Tab would offer at the end of LINE, one a line (for
   scripts and tests; a terminal session gets them from Tab). */
void repl_cmd_complete(repl_t *r, const char *line) {
    const char *word = line + strlen(line);
    while (word > line && word[-1] != ' ' && word[-1] != '\t' && word[-1] != ',' && word[-1] != '=')
        word--;
    completions_t c = {0};
    complete_word(r, line, word, &c);
    if (c.n > 1) /* c.v is NULL when nothing matched */
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

void repl_complete_attach(repl_t *r) {
    completing = r;
    rl_attempted_completion_function = tab_complete;
    rl_basic_word_break_characters = " \t,=";
}
