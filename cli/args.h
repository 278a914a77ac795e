/* cli/args.h: the `bib` command line: its commands, which options each one
 * takes, the help text made from those tables, and the messages for a
 * command or option it does not know (with the nearest one suggested).
 *
 * Parsing the option values and running the commands stays in cli/main.c.
 */
#ifndef BIB_CLI_ARGS_H
#define BIB_CLI_ARGS_H

#include <getopt.h>
#include <stdio.h>

typedef enum bib_cli_command {
    BIB_CMD_RUN,
    BIB_CMD_ASM,
    BIB_CMD_DIS,
    BIB_CMD_TEST,
    BIB_CMD_REPL,
    BIB_CMD_INFO,
    BIB_CMD_BENCH,
    BIB_CMD_HELP,
    BIB_CMD_COUNT,
} bib_cli_command_t;

/* getopt_long's value for each long option without a short form. */
enum {
    BIB_OPT_TRACE = 256,
    BIB_OPT_FUEL,
    BIB_OPT_MAXMEM,
    BIB_OPT_MAXDEPTH,
    BIB_OPT_COVERAGE,
    BIB_OPT_BACKEND,
    BIB_OPT_DEVICE,
    BIB_OPT_THREADS,
    BIB_OPT_VALIDATION,
    BIB_OPT_INPUT,
    BIB_OPT_PROFILE,
    BIB_OPT_STRICT_DEVICE,
    BIB_OPT_JSON,
    BIB_OPT_QUICK,
    BIB_OPT_MAXFILE,
    BIB_OPT_DEVICE_TIMEOUT,
    BIB_OPT_DENY,
    BIB_OPT_ALLOW_HOST,
    BIB_OPT_FUNCTION,
    BIB_OPT_STRIP,
    BIB_OPT_REPETITIONS,
    BIB_OPT_WARMUP,
    BIB_OPT_FORMAT,
    BIB_OPT_COMM_TIMEOUT,
};

/* The command called name, or -1. */
int bib_cli_command_find(const char *name);
const char *bib_cli_command_name(bib_cli_command_t command);

/* The getopt_long table of every option the command takes (NULL-terminated,
 * at most BIB_CLI_MAX_OPTIONS + 1 rows) and its short options string (with
 * the leading ':' that keeps getopt quiet). */
#define BIB_CLI_MAX_OPTIONS 40
void bib_cli_getopt_table(bib_cli_command_t command, struct option *table, char *shorts,
                          size_t shorts_cap);
/* The same for every command at once: to find the command word among the
 * options, wherever it stands. */
void bib_cli_getopt_all(struct option *table, char *shorts, size_t shorts_cap);

/* `bib --help`: the commands, the shared options and the exit status table. */
void bib_cli_usage(FILE *out);
/* `bib help CMD`, `bib CMD --help`: that command's usage and its options only. */
void bib_cli_command_usage(FILE *out, bib_cli_command_t command);
/* The exit status table, as in README.md and spec/cli.md. */
void bib_cli_exit_table(FILE *out);

/* The messages for what getopt refused, each one line on stderr, with the
 * nearest known name suggested when one is close. Each returns
 * BIB_EXIT_USAGE. text is the argument as typed ("--fule=3", "-x"). */
int bib_cli_unknown_command(const char *name);
int bib_cli_bad_option(bib_cli_command_t command, const char *text);

#endif
