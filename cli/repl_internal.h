/* cli/repl_internal.h: what the files of `bib repl` share (cli/repl.c,
 * cli/repl_session.c, cli/repl_complete.c): the session's state and the
 * functions one file calls in another. Not part of the CLI's interface
 * (that is cli/repl.h).
 */
#ifndef BIB_CLI_REPL_INTERNAL_H
#define BIB_CLI_REPL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"
#include "module/module.h"

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
    char *history;   /* the history file on a terminal, else NULL */
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
    size_t file_size; /* bytes of file_text */

    char **breaks; /* breakpoint specs as typed: re-resolved after each reload */
    size_t nbreaks;
    char **inputs; /* :input NAME=PATH specs, given again to a new VM (:backend) */
    size_t ninputs;
    bool interrupted; /* the last repl_resume was stopped by Ctrl-C */
} repl_t;

/* The generated text and, per text line, the session line it maps to. */
typedef struct gen {
    char *text;
    size_t len, cap;
    uint32_t *origin;
    size_t lines, lines_cap;
} gen_t;

/* cli/repl.c */
void repl_out_flush(void);
/* Errors go to stderr after whatever stdout holds, so a transcript taken
   with 2>&1 keeps the order. */
void repl_error_line(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* The entry function's registers (copied), to show what a line changed. */
uint64_t *repl_entry_regs(repl_t *r, uint32_t *n);
void repl_print_reg(uint32_t i, uint64_t v);
/* Runs the stepped program for up to n instructions (UINT64_MAX: until it
   stops) in slices, so that Ctrl-C (SIGINT) pauses it where it is, with
   r->interrupted set, instead of ending the session. */
bib_status_t repl_resume(repl_t *r, uint64_t n, bib_stop_t *stop);
/* Says why a run stopped. quiet_halt: the session's own closing HALT. */
void repl_report_stop(repl_t *r, bib_status_t st, bib_stop_t stop, bool quiet_halt);
bool repl_is_name_char(int c);
/* :input NAME=PATH given to vm; false (with the message printed) on failure. */
bool repl_give_input(bib_vm_t *vm, const char *arg);
/* The loaded module's input tensors that no :input has given: how many, and
   their names in list ("x, W1"). */
uint32_t repl_missing_inputs(repl_t *r, char *list, size_t cap);
void repl_apply_breaks(repl_t *r);
int repl_main_info(repl_t *r, bib_function_info_t *info);

/* cli/repl_session.c */
void repl_src_free(src_t *s);
/* The session's module source; with_lines adds the .line directives (off:
   the source as typed, for :list). */
bool repl_generate(const repl_t *r, gen_t *g, uint32_t current, bool with_lines);
void repl_gen_free(gen_t *g);
/* Assembles the interactive source; on success *bytes holds the module. */
bool repl_assemble(repl_t *r, uint8_t **bytes, size_t *size);
/* A line of source typed at the prompt. */
void repl_source_line(repl_t *r, const char *line);

/* cli/repl_complete.c */
/* :complete LINE: what Tab would offer at the end of LINE, one a line. */
void repl_cmd_complete(repl_t *r, const char *line);
/* Hands Tab in a terminal session on r to libedit. */
void repl_complete_attach(repl_t *r);

#endif
