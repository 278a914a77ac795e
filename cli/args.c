/* cli/args.c: the tables behind the `bib` command line (see args.h): one row
 * per command, one row per option naming the commands that take it. The
 * getopt tables, the help and the "did you mean" suggestions are all made
 * from these rows, so an option documented is an option accepted, and the
 * reverse.
 */
#include "cli/args.h"

#include <string.h>

#include "backends/cpu/cpufeatures.h"
#include "cli/cli.h"

#define ON(c) (1u << (c))
/* The options of a VM run: run, repl and test build a VM from them. */
#define VM_COMMANDS (ON(BIB_CMD_RUN) | ON(BIB_CMD_REPL) | ON(BIB_CMD_TEST))
#define EXECUTOR_COMMANDS (VM_COMMANDS | ON(BIB_CMD_BENCH) | ON(BIB_CMD_INFO))
#define FILE_COMMANDS                                                                              \
    (ON(BIB_CMD_RUN) | ON(BIB_CMD_ASM) | ON(BIB_CMD_DIS) | ON(BIB_CMD_TEST) | ON(BIB_CMD_REPL) |   \
     ON(BIB_CMD_BENCH))

typedef struct command_row {
    const char *name;
    const char *synopsis; /* after "bib " */
    const char *summary;  /* for the list of commands; continued lines start with spaces */
} command_row_t;

static const command_row_t commands[BIB_CMD_COUNT] = {
    [BIB_CMD_RUN] = {"run", "run FILE [options] [-- ARG...]",
                     "run a .bib module or a .basm source (assembled on the fly)\n"
                     "                    and print its outputs"},
    [BIB_CMD_ASM] = {"asm", "asm FILE [-o OUT] [--strip]",
                     "assemble .basm source into a .bib module (default OUT:\n"
                     "                    FILE with .basm replaced by .bib)"},
    [BIB_CMD_DIS] = {"dis", "dis FILE [-o OUT]", "disassemble a .bib module to .basm text"},
    [BIB_CMD_TEST] = {"test", "test PATH... [options]",
                      "run hex-program test cases (files or directories of *.hex)"},
    [BIB_CMD_REPL] = {"repl", "repl [FILE] [options]",
                      "interactive session: type instructions, step, inspect"},
    [BIB_CMD_INFO] = {"info", "info [--json]",
                      "describe the CPU, GPU devices, and what --backend=auto picks"},
    [BIB_CMD_BENCH] = {"bench", "bench [FILE] [options]",
                       "time FILE's module (min, median, max per run and a\n"
                       "                    profile per opcode), or without FILE tensor workloads\n"
                       "                    on every executor and auto (results.csv, chart.png in\n"
                       "                    -o DIR; --backend, --input, --repetitions, --warmup\n"
                       "                    and --format are for FILE)"},
    [BIB_CMD_HELP] = {"help", "help [COMMAND]", "this help, or one command's"},
};

typedef struct option_row {
    const char *name;
    int has_arg; /* getopt's no_argument, required_argument, optional_argument */
    int value;   /* getopt's answer: a BIB_OPT_* or the short option's letter */
    unsigned commands;
    const char *usage; /* "--fuel N", as the help writes it */
    const char *help;  /* continued lines start with spaces */
} option_row_t;

#define STR(x) #x
#define XSTR(x) STR(x)

/* An option may have one row per meaning (-o is a module, a text, a tensor
   file or a folder): each command sees only its own. */
static const option_row_t options[] = {
    {"input", required_argument, BIB_OPT_INPUT, ON(BIB_CMD_RUN) | ON(BIB_CMD_BENCH),
     "--input NAME=PATH", "give input tensor NAME from a .npy file (PATH - is stdin)"},
    {"output", required_argument, 'o', ON(BIB_CMD_RUN), "-o, --output NAME=PATH",
     "write output tensor NAME to a .npy file (PATH - is stdout);\n"
     "                       without --output every output is printed, --output=\n"
     "                       prints none"},
    {"function", required_argument, BIB_OPT_FUNCTION, ON(BIB_CMD_RUN), "--function NAME",
     "run function NAME (with the ARGs after --) and print what\n"
     "                       it returns, instead of the entry function's exit status"},
    {"output", required_argument, 'o', ON(BIB_CMD_ASM), "-o, --output OUT",
     "where to write the module (- is stdout)"},
    {"strip", no_argument, BIB_OPT_STRIP, ON(BIB_CMD_ASM), "--strip",
     "leave out the source name, line numbers and label names,\n"
     "                       as luac -s does"},
    {"output", required_argument, 'o', ON(BIB_CMD_DIS), "-o, --output OUT",
     "where to write the text (default and - : stdout)"},
    {"output", required_argument, 'o', ON(BIB_CMD_BENCH), "-o, --output DIR|PATH",
     "without FILE: where results.csv and chart.png go (default\n"
     "                       build/bench); with FILE: the report's file (default stdout)"},
    {"repetitions", required_argument, BIB_OPT_REPETITIONS, ON(BIB_CMD_BENCH), "--repetitions N",
     "(FILE) timed runs, default 10"},
    {"warmup", required_argument, BIB_OPT_WARMUP, ON(BIB_CMD_BENCH), "--warmup N",
     "(FILE) untimed runs before them, default 1"},
    {"format", required_argument, BIB_OPT_FORMAT, ON(BIB_CMD_BENCH), "--format md|csv|json",
     "(FILE) the report's form, default md (a Markdown table)"},
    {"quick", no_argument, BIB_OPT_QUICK, ON(BIB_CMD_BENCH), "--quick",
     "smaller workloads, fewer repetitions"},
    {"json", no_argument, BIB_OPT_JSON, ON(BIB_CMD_INFO), "--json", "one JSON object"},
    {"coverage", no_argument, BIB_OPT_COVERAGE, ON(BIB_CMD_TEST), "--coverage",
     "list implemented opcodes no case exercises"},
    {"verbose", no_argument, 'v', ON(BIB_CMD_TEST), "-v, --verbose",
     "print every case, not only failures"},
    {"trace", optional_argument, BIB_OPT_TRACE, VM_COMMANDS, "--trace[=text|json]",
     "print one line per executed instruction (to stderr)"},
    {"profile", optional_argument, BIB_OPT_PROFILE, ON(BIB_CMD_RUN) | ON(BIB_CMD_REPL),
     "--profile[=json]", "per-opcode times to stderr at exit"},
    {"fuel", required_argument, BIB_OPT_FUEL, VM_COMMANDS, "--fuel N",
     "bound the work: one unit per instruction, more for large\n"
     "                       tensor opcodes (spec/cli.md); a trap when it runs out"},
    {"max-memory", required_argument, BIB_OPT_MAXMEM, VM_COMMANDS, "--max-memory SIZE",
     "cap VM memory (bytes; K, M, G suffixes), default 256M"},
    {"max-memory", required_argument, BIB_OPT_MAXMEM, ON(BIB_CMD_BENCH), "--max-memory SIZE",
     "(FILE) cap VM memory (bytes; K, M, G suffixes), default 256M"},
    {"max-depth", required_argument, BIB_OPT_MAXDEPTH, VM_COMMANDS, "--max-depth N",
     "cap the call depth, default 10000"},
    {"backend", required_argument, BIB_OPT_BACKEND, VM_COMMANDS | ON(BIB_CMD_BENCH),
     "--backend NAME", "tensor executor: cpu (default), vulkan, cuda, auto"},
    {"strict-device", no_argument, BIB_OPT_STRICT_DEVICE, VM_COMMANDS, "--strict-device",
     "GPU_* opcodes fail without a CUDA device (default: CPU)"},
    {"device", required_argument, BIB_OPT_DEVICE, EXECUTOR_COMMANDS, "--device SEL",
     "GPU device: an index or part of its name"},
    {"threads", required_argument, BIB_OPT_THREADS, EXECUTOR_COMMANDS, "--threads N",
     "CPU executor threads, 1 to " XSTR(BIB_CPU_MAX_THREADS) " (default: one per core)"},
    {"validation", no_argument, BIB_OPT_VALIDATION, EXECUTOR_COMMANDS, "--validation",
     "GPU executors: enable validation layers"},
    {"device-timeout", required_argument, BIB_OPT_DEVICE_TIMEOUT, VM_COMMANDS, "--device-timeout T",
     "the longest a wait for GPU work may take: 200ms, 5s, 1m;\n"
     "                       past it the run traps (spec/security.md)"},
    {"comm-timeout", required_argument, BIB_OPT_COMM_TIMEOUT, ON(BIB_CMD_RUN), "--comm-timeout T",
     "under mpirun: the longest one exchange between ranks may\n"
     "                       wait, default 10m; past it every rank ends (spec/scale-out.md)"},
    {"deny", required_argument, BIB_OPT_DENY, VM_COMMANDS, "--deny=device-code",
     "refuse, at load, a module carrying Vulkan shaders or\n"
     "                       CUDA kernels"},
    {"allow-host", required_argument, BIB_OPT_ALLOW_HOST, VM_COMMANDS, "--allow-host=LIST",
     "refuse, at load, a module importing a host function not\n"
     "                       in LIST (NAME,NAME...; --allow-host= allows none)"},
    {"max-file-size", required_argument, BIB_OPT_MAXFILE, FILE_COMMANDS, "--max-file-size SIZE",
     "cap on every file read (module, source, .npy, case file)\n"
     "                       and on a module assembled, default 1G; a larger one is\n"
     "                       refused with exit status 71"},
    {"help", no_argument, 'h', ~0u, "-h, --help", "show this help"},
};
#define OPTION_COUNT (sizeof options / sizeof options[0])

int bib_cli_command_find(const char *name) {
    for (int c = 0; c < BIB_CMD_COUNT; c++)
        if (strcmp(commands[c].name, name) == 0)
            return c;
    return -1;
}

const char *bib_cli_command_name(bib_cli_command_t command) {
    return commands[command].name;
}

static void add_row(struct option *table, int *count, const option_row_t *row) {
    for (int i = 0; i < *count; i++)
        if (strcmp(table[i].name, row->name) == 0)
            return;
    table[(*count)++] = (struct option){row->name, row->has_arg, NULL, row->value};
}

static void finish_table(struct option *table, int count, char *shorts, size_t shorts_cap) {
    table[count] = (struct option){NULL, 0, NULL, 0};
    size_t n = 0;
    shorts[n++] = ':';
    for (int i = 0; i < count && n + 3 < shorts_cap; i++) {
        if (table[i].val >= 256)
            continue;
        shorts[n++] = (char)table[i].val;
        if (table[i].has_arg == required_argument)
            shorts[n++] = ':';
    }
    shorts[n] = '\0';
}

void bib_cli_getopt_table(bib_cli_command_t command, struct option *table, char *shorts,
                          size_t shorts_cap) {
    int count = 0;
    for (size_t i = 0; i < OPTION_COUNT && count < BIB_CLI_MAX_OPTIONS; i++)
        if (options[i].commands & ON(command))
            add_row(table, &count, &options[i]);
    finish_table(table, count, shorts, shorts_cap);
}

void bib_cli_getopt_all(struct option *table, char *shorts, size_t shorts_cap) {
    int count = 0;
    for (size_t i = 0; i < OPTION_COUNT && count < BIB_CLI_MAX_OPTIONS; i++)
        add_row(table, &count, &options[i]);
    if (count < BIB_CLI_MAX_OPTIONS)
        table[count++] = (struct option){"version", no_argument, NULL, 'V'};
    finish_table(table, count, shorts, shorts_cap);
}

void bib_cli_exit_table(FILE *out) {
    fprintf(out,
            "exit status (64 to 79 are bib's own; a program's exit value never takes them):\n"
            "  0-63, 80-255  run: the program's exit value (HALT, or the entry function's\n"
            "                return)\n"
            "  1             test: a case failed\n"
            "  %d            usage error (the command line, or run's ARGs)\n"
            "  %d            bad input file (format, verify, assembly, link, load policy)\n"
            "  %d            unreadable file\n"
            "  %d            executor unavailable\n"
            "  %d            trap (--device-timeout too)\n"
            "  %d            out of memory, or a file over --max-file-size\n"
            "  %d            output not writable (every output is written whole or not\n"
            "                at all)\n"
            "  %d            run: the program's exit value is negative, above 255 or in\n"
            "                64-79 (bib names it on stderr)\n",
            BIB_EXIT_USAGE, BIB_EXIT_DATA, BIB_EXIT_NOINPUT, BIB_EXIT_UNAVAILABLE, BIB_EXIT_TRAP,
            BIB_EXIT_NOMEM, BIB_EXIT_CANTCREATE, BIB_EXIT_PROGRAM_RANGE);
}

static void option_lines(FILE *out, unsigned mask) {
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        if (!(options[i].commands & mask) || options[i].value == 'h')
            continue;
        int width = (int)strlen(options[i].usage);
        if (width <= 20)
            fprintf(out, "  %-20s %s\n", options[i].usage, options[i].help);
        else
            fprintf(out, "  %s\n                       %s\n", options[i].usage, options[i].help);
    }
}

void bib_cli_usage(FILE *out) {
    fprintf(out, "usage: bib <command> [options] [file]\n\ncommands:\n");
    for (int c = 0; c < BIB_CMD_COUNT; c++)
        fprintf(out, "  %-17s %s\n", commands[c].name, commands[c].summary);
    fprintf(out, "\n'bib help COMMAND' (or bib COMMAND --help) lists that command's options.\n"
                 "A file named - is stdin; an output named - is stdout.\n\n"
                 "options of run and repl (test takes most of them):\n");
    option_lines(out, ON(BIB_CMD_REPL));
    fprintf(out, "  -h, --help           show this help\n"
                 "  -V, --version        show the version and the build's features\n\n");
    bib_cli_exit_table(out);
}

void bib_cli_command_usage(FILE *out, bib_cli_command_t command) {
    fprintf(out, "usage: bib %s\n\n  ", commands[command].synopsis);
    /* The summary's continued lines, indented for the list of commands, are
       indented as its first line here. */
    for (const char *p = commands[command].summary; *p; p++) {
        fputc(*p, out);
        if (*p == '\n') {
            while (p[1] == ' ')
                p++;
            fputs("  ", out);
        }
    }
    fprintf(out, "\n\noptions:\n");
    option_lines(out, ON(command));
    fprintf(out, "  -h, --help           show this help\n");
    if (command == BIB_CMD_RUN) {
        fprintf(out, "\nARGs go to --function's first registers in order, as many as its\n"
                     "args= declares: an integer (42, -7, 0x2a) as i64, any other number\n"
                     "(2.5, 1e-3) as f64. The entry function takes none.\n\n");
        bib_cli_exit_table(out);
    }
}

/* Edit distance with a swap of two neighbours counting as one edit
   ("rnu" is one from "run"), for suggestions; names are short. */
static size_t distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The nearest of the names to what was typed, if it is close: at most a
   third of the name's letters wrong, and at least one right. */
static const char *nearest(const char *typed, size_t len, const char *const *names, size_t count) {
    const char *best = NULL;
    size_t best_d = 64;
    for (size_t i = 0; i < count; i++) {
        size_t d = distance(typed, len, names[i]);
        if (d < best_d)
            best = names[i], best_d = d;
    }
    size_t limit = (strlen(best ? best : "") + 2) / 3;
    return best != NULL && best_d <= (limit ? limit : 1) && best_d < len ? best : NULL;
}

int bib_cli_unknown_command(const char *name) {
    const char *names[BIB_CMD_COUNT];
    for (int c = 0; c < BIB_CMD_COUNT; c++)
        names[c] = commands[c].name;
    const char *near = nearest(name, strlen(name), names, BIB_CMD_COUNT);
    if (near != NULL)
        fprintf(stderr, "bib: unknown command '%s'; did you mean %s? (bib help lists them)\n", name,
                near);
    else
        fprintf(stderr, "bib: unknown command '%s' (bib help lists them)\n", name);
    return BIB_EXIT_USAGE;
}

int bib_cli_bad_option(bib_cli_command_t command, const char *text) {
    const char *cmd = commands[command].name;
    if (text[0] != '-' || text[1] != '-') {
        fprintf(stderr, "bib: %s does not take the option '%s' (bib help %s lists its options)\n",
                cmd, text, cmd);
        return BIB_EXIT_USAGE;
    }
    const char *name = text + 2;
    size_t len = strcspn(name, "=");
    /* One this command does not take, though another does. */
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (strlen(options[i].name) == len && memcmp(options[i].name, name, len) == 0) {
            int owner = 0;
            while (owner < BIB_CMD_COUNT && !(options[i].commands & ON(owner)))
                owner++;
            fprintf(stderr,
                    "bib: %s does not take --%.*s (an option of %s; bib help %s lists %s's "
                    "options)\n",
                    cmd, (int)len, name, commands[owner].name, cmd, cmd);
            return BIB_EXIT_USAGE;
        }
    const char *names[OPTION_COUNT];
    size_t count = 0;
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (options[i].commands & ON(command))
            names[count++] = options[i].name;
    const char *near = nearest(name, len, names, count);
    if (near != NULL)
        fprintf(stderr, "bib: unknown option '--%.*s' for %s; did you mean --%s?\n", (int)len, name,
                cmd, near);
    else
        fprintf(stderr,
                "bib: unknown or ambiguous option '--%.*s' for %s (bib help %s lists its "
                "options)\n",
                (int)len, name, cmd, cmd);
    return BIB_EXIT_USAGE;
}
