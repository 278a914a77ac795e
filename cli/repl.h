/* cli/repl.h: `bib repl`, the interactive session (cli/repl.c). */
#ifndef BIB_CLI_REPL_H
#define BIB_CLI_REPL_H

#include "include/bib.h"

/* Runs a session on stdin: with a terminal, line editing and history
 * (libedit); otherwise plain lines with no prompt. file (may be NULL) is
 * loaded first, as ":load FILE" would. profile: 0 off, 1 table, 2 JSON
 * (written at ":profile" and at exit). Returns the exit code. */
int bib_cli_repl(const bib_options_t *options, const char *file, int profile);

#endif
