/* cli/main.c: the `bib` command, a thin client of libbib.
 *
 * Owns argument parsing, file I/O and exit codes. Everything that runs,
 * assembles or checks bytecode lives in the library; `bib test` lives in
 * cli/hextest.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bib.h"
#include "cli.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: bib <command> [options] [file]\n"
            "\n"
            "commands:\n"
            "  run FILE          run a .bib module or a .basm source (assembled on the fly)\n"
            "  asm FILE -o OUT   assemble .basm source into a .bib module\n"
            "  dis FILE          disassemble a .bib module to .basm text on stdout\n"
            "  test PATH...      run hex-program test cases (files or directories of *.hex)\n"
            "\n"
            "options:\n"
            "  --trace[=text|json]  print one line per executed instruction (to stderr)\n"
            "  --fuel N             stop with a trap after N instructions\n"
            "  --max-memory SIZE    cap VM memory (bytes; K, M, G suffixes), default 256M\n"
            "  --max-depth N        cap the call depth, default 10000\n"
            "  --coverage           (test) list implemented opcodes no case exercises\n"
            "  -v, --verbose        (test) print every case, not only failures\n"
            "  -o, --output FILE    (asm) where to write the module\n"
            "  -h, --help           show this help\n"
            "  -V, --version        show the version and the build's features\n"
            "\n"
            "exit status: the program's exit value (low 8 bits) for run; %d usage error,\n"
            "%d bad input file (format, verify, assembly, link), %d unreadable file,\n"
            "%d trap, %d out of memory, %d executor unavailable\n",
            BIB_EXIT_USAGE, BIB_EXIT_DATA, BIB_EXIT_NOINPUT, BIB_EXIT_TRAP, BIB_EXIT_NOMEM,
            BIB_EXIT_UNAVAILABLE);
}

int bib_cli_exit_code(bib_status_t status) {
    switch (status) {
    case BIB_OK:
        return 0;
    case BIB_E_USAGE:
        return BIB_EXIT_USAGE;
    case BIB_E_IO:
        return BIB_EXIT_NOINPUT;
    case BIB_E_TRAP:
        return BIB_EXIT_TRAP;
    case BIB_E_NOMEM:
        return BIB_EXIT_NOMEM;
    case BIB_E_UNAVAILABLE:
        return BIB_EXIT_UNAVAILABLE;
    default:
        return BIB_EXIT_DATA;
    }
}

/* Parses a byte size with an optional K/M/G suffix (powers of 1024). */
static int parse_size(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-')
        return -1;
    uint64_t mult = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mult = 1ull << 10, end++;
        break;
    case 'm':
    case 'M':
        mult = 1ull << 20, end++;
        break;
    case 'g':
    case 'G':
        mult = 1ull << 30, end++;
        break;
    default:
        break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || (mult > 1 && v > UINT64_MAX / mult))
        return -1;
    *out = v * mult;
    return 0;
}

static int parse_u64(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-')
        return -1;
    *out = v;
    return 0;
}

int bib_cli_read_file(const char *path, uint8_t **bytes, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bib: cannot open '%s': %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger, cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "bib: cannot read '%s': %s\n", path, buf ? "read error" : "out of memory");
        free(buf);
        return -1;
    }
    *bytes = buf;
    *size = n;
    return 0;
}

static int write_file(const char *path, const uint8_t *bytes, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "bib: cannot create '%s': %s\n", path, strerror(errno));
        return -1;
    }
    size_t n = fwrite(bytes, 1, size, f);
    if (fclose(f) != 0 || n != size) {
        fprintf(stderr, "bib: cannot write '%s'\n", path);
        return -1;
    }
    return 0;
}

static int cmd_run(const bib_options_t *options, const char *path) {
    bib_vm_t *vm = NULL;
    bib_status_t st = bib_vm_create(options, &vm);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: cannot create the VM: %s\n", bib_status_name(st));
        return bib_cli_exit_code(st);
    }
    bib_vm_register_stdio(vm, stdout);
    st = bib_vm_load_file(vm, path);
    int64_t exit_value = 0;
    if (st == BIB_OK)
        st = bib_vm_run(vm, &exit_value);
    fflush(stdout);
    if (st != BIB_OK)
        fprintf(stderr, "bib: %s\n", bib_vm_error(vm));
    bib_vm_destroy(vm);
    return st == BIB_OK ? (int)(exit_value & 0xFF) : bib_cli_exit_code(st);
}

static int cmd_asm(const char *path, const char *out_path) {
    uint8_t *src;
    size_t len;
    if (bib_cli_read_file(path, &src, &len))
        return BIB_EXIT_NOINPUT;
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bib_status_t st = bib_assemble((const char *)src, len, path, &bytes, &size, &diag);
    free(src);
    if (st != BIB_OK) {
        fputs(diag ? diag : "bib: assembly failed\n", stderr);
        bib_free(diag);
        return bib_cli_exit_code(st);
    }
    bib_free(diag);
    int rc = write_file(out_path, bytes, size) ? BIB_EXIT_CANTCREATE : 0;
    bib_free(bytes);
    return rc;
}

static int cmd_dis(const char *path) {
    uint8_t *bytes;
    size_t size;
    if (bib_cli_read_file(path, &bytes, &size))
        return BIB_EXIT_NOINPUT;
    char *text = NULL, *diag = NULL;
    bib_status_t st = bib_disassemble(bytes, size, &text, &diag);
    free(bytes);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: %s: %s\n", path, diag ? diag : bib_status_name(st));
        bib_free(diag);
        return bib_cli_exit_code(st);
    }
    fputs(text, stdout);
    bib_free(text);
    bib_free(diag);
    return 0;
}

int main(int argc, char **argv) {
    enum { OPT_TRACE = 256, OPT_FUEL, OPT_MAXMEM, OPT_MAXDEPTH, OPT_COVERAGE };
    static const struct option long_options[] = {
        {"trace", optional_argument, NULL, OPT_TRACE},
        {"fuel", required_argument, NULL, OPT_FUEL},
        {"max-memory", required_argument, NULL, OPT_MAXMEM},
        {"max-depth", required_argument, NULL, OPT_MAXDEPTH},
        {"coverage", no_argument, NULL, OPT_COVERAGE},
        {"verbose", no_argument, NULL, 'v'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    bib_options_t options;
    bib_options_init(&options);
    bib_cli_test_flags_t test_flags = {0};
    const char *out_path = NULL;
    int c;
    /* GNU getopt permutes, so options may come before or after the command and file. */
    while ((c = getopt_long(argc, argv, "o:hvV", long_options, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case OPT_TRACE:
            if (!optarg || strcmp(optarg, "text") == 0)
                options.trace_format = BIB_TRACE_TEXT;
            else if (strcmp(optarg, "json") == 0)
                options.trace_format = BIB_TRACE_JSON;
            else {
                fprintf(stderr, "bib: --trace takes 'text' or 'json', not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case OPT_FUEL:
            if (parse_u64(optarg, &options.fuel) || options.fuel == 0) {
                fprintf(stderr, "bib: --fuel takes a positive instruction count, not '%s'\n",
                        optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case OPT_MAXMEM:
            if (parse_size(optarg, &options.max_memory) || options.max_memory == 0) {
                fprintf(stderr, "bib: --max-memory takes a size such as 64M, not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case OPT_MAXDEPTH:
            if (parse_u64(optarg, &v) || v == 0 || v > UINT32_MAX) {
                fprintf(stderr, "bib: --max-depth takes a positive frame count, not '%s'\n",
                        optarg);
                return BIB_EXIT_USAGE;
            }
            options.max_call_depth = (uint32_t)v;
            break;
        case OPT_COVERAGE:
            test_flags.coverage = 1;
            break;
        case 'v':
            test_flags.verbose = 1;
            break;
        case 'o':
            out_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("%s\n", bib_build_info());
            return 0;
        default:
            usage(stderr);
            return BIB_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return BIB_EXIT_USAGE;
    }
    const char *command = argv[optind++];
    int nfiles = argc - optind;
    char **files = argv + optind;

    if (strcmp(command, "run") == 0) {
        if (nfiles != 1) {
            fprintf(stderr, "bib: run takes one file\n");
            return BIB_EXIT_USAGE;
        }
        return cmd_run(&options, files[0]);
    }
    if (strcmp(command, "asm") == 0) {
        if (nfiles != 1 || !out_path) {
            fprintf(stderr, "bib: asm takes one file and -o OUT\n");
            return BIB_EXIT_USAGE;
        }
        return cmd_asm(files[0], out_path);
    }
    if (strcmp(command, "dis") == 0) {
        if (nfiles != 1) {
            fprintf(stderr, "bib: dis takes one file\n");
            return BIB_EXIT_USAGE;
        }
        return cmd_dis(files[0]);
    }
    if (strcmp(command, "test") == 0) {
        if (nfiles < 1) {
            fprintf(stderr, "bib: test takes at least one file or directory\n");
            return BIB_EXIT_USAGE;
        }
        return bib_cli_test(&options, &test_flags, nfiles, files);
    }
    fprintf(stderr, "bib: unknown command '%s' (try bib --help)\n", command);
    return BIB_EXIT_USAGE;
}
