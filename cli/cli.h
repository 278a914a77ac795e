/* cli/cli.h: what the parts of the `bib` command share. */
#ifndef BIB_CLI_H
#define BIB_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

/* Exit codes (sysexits.h values, all below 128). 64 to 79 are bib's own: a
 * program's exit value in 0..63 or 80..255 is the exit status of run, any
 * other is BIB_EXIT_PROGRAM_RANGE (spec/cli.md). */
enum {
    BIB_EXIT_USAGE = 64,         /* bad command line */
    BIB_EXIT_DATA = 65,          /* malformed module, verify, assembly or link error */
    BIB_EXIT_NOINPUT = 66,       /* file cannot be read */
    BIB_EXIT_UNAVAILABLE = 69,   /* executor or device not available */
    BIB_EXIT_TRAP = 70,          /* the program trapped */
    BIB_EXIT_NOMEM = 71,         /* memory cap reached */
    BIB_EXIT_CANTCREATE = 73,    /* output file cannot be written */
    BIB_EXIT_PROGRAM_RANGE = 79, /* run: the program's exit value is not an exit status */
    BIB_EXIT_TESTFAIL = 1,       /* bib test: a case failed */
};

typedef struct bib_cli_test_flags {
    int coverage;
    int verbose;
} bib_cli_test_flags_t;

int bib_cli_exit_code(bib_status_t status);
/* Memory for the command's own bookkeeping (case files, copies of names):
 * on failure they print "bib: out of memory" with the size and exit with
 * BIB_EXIT_NOMEM, so callers need no NULL checks. A size of 0 is allowed. */
void *bib_cli_alloc(size_t size);
void *bib_cli_zalloc(size_t count, size_t size);
void *bib_cli_grow(void *p, size_t size);
char *bib_cli_strdup(const char *s);
/* A copy of n bytes (p may be NULL when n is 0) and a NUL after them. */
void *bib_cli_memdup(const void *p, size_t n);
/* --max-file-size: the cap on every file the command reads (0: the default,
 * BIB_FILE_SIZE_CAP_DEFAULT). bib_cli_file_too_large is set once a file
 * was refused for it. */
extern uint64_t bib_cli_max_file_size;
extern int bib_cli_file_too_large;
/* Reads a whole file, at most bib_cli_max_file_size bytes, with a NUL after
 * it (not counted in *size). Returns 0; or prints the reason and returns
 * the exit code: BIB_EXIT_NOINPUT when it cannot be read, BIB_EXIT_NOMEM
 * when it is over the cap ("bib: cannot read 'x': larger than the file size
 * cap of N bytes (--max-file-size raises it)"). */
int bib_cli_read_file(const char *path, uint8_t **bytes, size_t *size);
/* An argument for a function (run's ARGs, the REPL's :call): an integer
 * (decimal or 0x hex, with a sign) as i64, else a number strtod reads whole
 * (2.5, 1e-3, inf) as f64. Returns 0; -2 for an integer outside 64 bits or a
 * number past the f64 range (1e999); -1 for anything else. */
int bib_cli_parse_arg(const char *text, bib_value_t *out);
int bib_cli_test(const bib_options_t *options, const bib_cli_test_flags_t *flags, int npaths,
                 char **paths);
/* bib info (cli/info.c) and bib bench (cli/bench.c); each returns the exit code.
   bib_cli_bench's dir is -o's folder, NULL for the default build/bench. */
int bib_cli_info(const bib_options_t *options, int json);
int bib_cli_bench(const bib_options_t *options, const char *dir, int quick);

/* bib bench FILE: times the loaded module on vm (inputs given), and writes
 * the report to flags->output (NULL or "-": stdout). */
typedef enum bib_bench_format {
    BIB_BENCH_MARKDOWN,
    BIB_BENCH_CSV,
    BIB_BENCH_JSON,
} bib_bench_format_t;
typedef struct bib_cli_bench_flags {
    int repetitions; /* timed runs, at least 1 */
    int warmup;      /* untimed runs before them */
    bib_bench_format_t format;
    const char *output;
} bib_cli_bench_flags_t;
int bib_cli_bench_module(bib_vm_t *vm, const char *path, const char *backend,
                         const bib_cli_bench_flags_t *flags);

#endif
