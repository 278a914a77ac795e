/* cli/main.c: the `bib` command, a thin client of libbib.
 *
 * Owns argument parsing, file I/O and exit codes. Everything that runs,
 * assembles or checks bytecode lives in the library; `bib test` lives in
 * cli/hextest.c, .npy files in cli/npy.c.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assembler/asm.h"
#include "backends/comm.h"
#include "backends/cpu/cpufeatures.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/npy.h"
#include "cli/repl.h"
#include "include/bib.h"
#include "module/module.h"
#include "vm/collective.h"
#include "vm/fileio.h"
#include "vm/tensor.h"

/* A --input or --output NAME=PATH pair (pointers into argv). */
typedef struct tensor_file {
    const char *spec; /* "NAME=PATH" as given */
    char name[256];
    const char *path;
} tensor_file_t;

#define MAX_TENSOR_FILES 64

int bib_cli_exit_code(bib_status_t status) {
    switch (status) {
    case BIB_OK:
        return 0;
    case BIB_E_USAGE:
        return BIB_EXIT_USAGE;
    case BIB_E_IO:
        return BIB_EXIT_NOINPUT;
    case BIB_E_TRAP:
    case BIB_E_TIMEOUT:
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

/* Parses a duration with its unit: ms, s or m (no unit is refused: 200 is
   ambiguous). Returns milliseconds, at least 1. */
static int parse_duration_ms(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-' || text[0] == '+')
        return -1;
    uint64_t mult;
    if (strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else
        return -1;
    if (v == 0 || v > UINT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

/* --allow-host's list: names separated by commas, none empty ("" is the
   empty list). */
static int valid_name_list(const char *text) {
    if (text[0] == '\0')
        return 1;
    for (const char *p = text;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len > 255)
            return 0;
        if (!comma)
            return 1;
        p = comma;
    }
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

static void *out_of_memory(size_t size) {
    fprintf(stderr, "bib: out of memory (%zu bytes)\n", size);
    exit(BIB_EXIT_NOMEM);
}

void *bib_cli_alloc(size_t size) {
    void *p = malloc(size ? size : 1);
    return p ? p : out_of_memory(size);
}

void *bib_cli_zalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    return p ? p : out_of_memory(count * size);
}

void *bib_cli_grow(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    return q ? q : out_of_memory(size);
}

char *bib_cli_strdup(const char *s) {
    return bib_cli_memdup(s, strlen(s));
}

void *bib_cli_memdup(const void *p, size_t n) {
    if (n == SIZE_MAX)
        return out_of_memory(n);
    unsigned char *q = bib_cli_alloc(n + 1);
    if (n)
        memcpy(q, p, n);
    q[n] = 0;
    return q;
}

uint64_t bib_cli_max_file_size;
int bib_cli_file_too_large;

int bib_cli_read_file(const char *path, uint8_t **bytes, size_t *size) {
    char why[600];
    bib_status_t st = bib_file_read(path, bib_cli_max_file_size, bytes, size, why, sizeof why);
    if (st == BIB_OK)
        return 0;
    fprintf(stderr, "bib: %s\n", why);
    if (st != BIB_E_NOMEM)
        return BIB_EXIT_NOINPUT;
    bib_cli_file_too_large = 1;
    return BIB_EXIT_NOMEM;
}

/* Splits "NAME=PATH"; returns -1 with a message when there is no '='. */
static int split_tensor_file(const char *option, const char *spec, tensor_file_t *out) {
    const char *eq = strchr(spec, '=');
    if (eq == NULL || eq == spec || eq[1] == '\0' || (size_t)(eq - spec) >= sizeof out->name) {
        fprintf(stderr, "bib: %s takes NAME=PATH.npy, not '%s'\n", option, spec);
        return -1;
    }
    out->spec = spec;
    memcpy(out->name, spec, (size_t)(eq - spec));
    out->name[eq - spec] = '\0';
    out->path = eq + 1;
    return 0;
}

static int set_inputs(bib_vm_t *vm, const tensor_file_t *inputs, int ninputs) {
    for (int i = 0; i < ninputs; i++) {
        char msg[600];
        bib_status_t st = bib_npy_set_input(vm, inputs[i].name, inputs[i].path,
                                            bib_cli_max_file_size, msg, sizeof msg);
        if (st != BIB_OK) {
            fprintf(stderr, "bib: --input %s: %s\n", inputs[i].name, msg);
            return st == BIB_E_IO ? BIB_EXIT_NOINPUT : bib_cli_exit_code(st);
        }
    }
    return 0;
}

/* Every output is written to a temporary file first; they are renamed into
   place only once all are written, so a failure leaves every target as it
   was. */
static int write_outputs(bib_vm_t *vm, const tensor_file_t *outputs, int noutputs) {
    bib_file_out_t files[MAX_TENSOR_FILES];
    int written = 0, rc = 0;
    char msg[600];
    for (; written < noutputs; written++) {
        const tensor_file_t *o = &outputs[written];
        bib_dtype_t dtype;
        uint32_t rank, dims[BIB_MAX_RANK];
        const void *data;
        bib_status_t st = bib_vm_get_output(vm, o->name, &dtype, &rank, dims, &data);
        if (st != BIB_OK) {
            fprintf(stderr, "bib: --output %s: %s\n", o->spec, bib_vm_error(vm));
            rc = bib_cli_exit_code(st);
            break;
        }
        if (bib_npy_begin(&files[written], o->path, dtype, rank, dims, data, msg, sizeof msg) !=
            BIB_OK) {
            fprintf(stderr, "bib: --output %s: %s\n", o->name, msg);
            rc = BIB_EXIT_CANTCREATE;
            break;
        }
    }
    for (int i = 0; i < written; i++) {
        if (rc != 0) {
            bib_file_out_discard(&files[i]);
        } else if (bib_file_out_commit(&files[i], msg, sizeof msg) != BIB_OK) {
            fprintf(stderr, "bib: --output %s: %s\n", outputs[i].name, msg);
            rc = BIB_EXIT_CANTCREATE;
        }
    }
    return rc;
}

/* Before anything runs: no input or output named twice, no two outputs onto
   one file, and every output's folder there and writable, so that a typo
   costs nothing. */
static int check_tensor_files(const char *module, const tensor_file_t *inputs, int ninputs,
                              const tensor_file_t *outputs, int noutputs) {
    /* Standard input can be read once: by the module or by one --input. */
    const char *stdin_user = strcmp(module, "-") == 0 ? "the module" : NULL;
    for (int i = 0; i < ninputs; i++) {
        if (strcmp(inputs[i].path, "-") != 0)
            continue;
        if (stdin_user != NULL) {
            fprintf(stderr, "bib: --input %s and %s both read standard input ('-')\n",
                    inputs[i].name, stdin_user);
            return BIB_EXIT_USAGE;
        }
        stdin_user = "another --input";
    }
    for (int i = 0; i < ninputs; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(inputs[i].name, inputs[j].name) == 0) {
                fprintf(stderr, "bib: --input %s is given twice ('%s' and '%s')\n", inputs[i].name,
                        inputs[j].spec, inputs[i].spec);
                return BIB_EXIT_USAGE;
            }
    for (int i = 0; i < noutputs; i++)
        for (int j = 0; j < i; j++) {
            if (strcmp(outputs[i].name, outputs[j].name) == 0) {
                fprintf(stderr, "bib: --output %s is given twice ('%s' and '%s')\n",
                        outputs[i].name, outputs[j].spec, outputs[i].spec);
                return BIB_EXIT_USAGE;
            }
            if (bib_file_same(outputs[i].path, outputs[j].path)) {
                fprintf(stderr, "bib: --output %s and --output %s name the same file\n",
                        outputs[j].spec, outputs[i].spec);
                return BIB_EXIT_USAGE;
            }
        }
    for (int i = 0; i < noutputs; i++) {
        if (strcmp(module, "-") != 0 && bib_file_same(outputs[i].path, module)) {
            fprintf(stderr, "bib: --output %s: '%s' is the module '%s' itself; give another path\n",
                    outputs[i].name, outputs[i].path, module);
            return BIB_EXIT_USAGE;
        }
        char msg[600];
        if (bib_file_check_writable(outputs[i].path, msg, sizeof msg) != BIB_OK) {
            fprintf(stderr, "bib: --output %s: %s\n", outputs[i].name, msg);
            return BIB_EXIT_CANTCREATE;
        }
    }
    return 0;
}

/* Writes a declaration's type as the shape messages do: f32[n,64], f32[?]. */
static void format_decl_type(const bib_tensor_info_t *t, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s[", t->dtype == BIB_DTYPE_I32 ? "i32" : "f32");
    for (uint32_t k = 0; k < t->rank && n > 0 && (size_t)n < size; k++) {
        const char *sep = k ? "," : "";
        if (t->dim_names[k] != NULL)
            n += snprintf(buf + n, size - (size_t)n, "%s%s", sep, t->dim_names[k]);
        else if (t->dims[k] < 0)
            n += snprintf(buf + n, size - (size_t)n, "%s?", sep);
        else
            n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, sep, t->dims[k]);
    }
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

static int given(const tensor_file_t *files, int count, const char *name) {
    for (int i = 0; i < count; i++)
        if (strcmp(files[i].name, name) == 0)
            return 1;
    return 0;
}

/* Before the run: every declared input must come with --input, and every
 * --output must name a declared output, so that a long run is not lost to a
 * mistake the command line already shows. All the missing inputs are named
 * at once. */
static int check_run_tensors(bib_vm_t *vm, const char *path, const tensor_file_t *inputs,
                             int ninputs, const tensor_file_t *outputs, int noutputs) {
    uint32_t count = bib_vm_tensor_count(vm);
    int missing = 0;
    for (uint32_t i = 0; i < count; i++) {
        bib_tensor_info_t t;
        if (bib_vm_tensor_info(vm, i, &t) != BIB_OK || !t.is_input ||
            given(inputs, ninputs, t.name))
            continue;
        char type[96];
        format_decl_type(&t, type, sizeof type);
        fprintf(stderr, "bib: %s: input '%s' (%s) was not given: add --input %s=PATH.npy\n", path,
                t.name, type, t.name);
        missing++;
    }
    if (missing)
        return BIB_EXIT_USAGE;
    /* Before any run, reading an output fails: on its name when the module
       has no such output (the VM's message lists those it has), else only
       because no run has finished. */
    for (int o = 0; o < noutputs; o++) {
        bib_dtype_t dtype;
        uint32_t rank, dims[BIB_MAX_RANK];
        const void *data;
        if (bib_vm_get_output(vm, outputs[o].name, &dtype, &rank, dims, &data) == BIB_E_USAGE) {
            fprintf(stderr, "bib: --output %s: %s\n", outputs[o].spec, bib_vm_error(vm));
            return BIB_EXIT_USAGE;
        }
    }
    return 0;
}

/* ---- printing outputs -------------------------------------------------------- */

/* Tensors up to this many elements are printed whole; larger ones as their
   shape and hash. */
#define PRINT_MAX_ELEMENTS 256

/* An f32 as numpy prints it: the fewest digits that read back as the same
   float, and a point on integral values ("1.", "0.5", "-3e-05", "nan"). */
static void format_f32(float x, char *buf, size_t cap) {
    if (isnan(x)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, cap, x < 0 ? "-inf" : "inf");
        return;
    }
    int digits = 1;
    for (; digits < 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    /* Positional, as numpy prints them, unless very large or small. */
    int exponent = x == 0 ? 0 : (int)floor(log10(fabs((double)x)));
    if (exponent > -5 && exponent < 16)
        snprintf(buf, cap, "%.*f", digits - 1 - exponent > 0 ? digits - 1 - exponent : 0,
                 (double)x);
    else
        snprintf(buf, cap, "%.*g", digits, (double)x);
    if (strpbrk(buf, ".e") == NULL && strlen(buf) + 2 <= cap)
        strcat(buf, ".");
}

static void format_element(bib_dtype_t dtype, const void *data, uint64_t i, char *buf, size_t cap) {
    if (dtype == BIB_DTYPE_I32) {
        int32_t v;
        memcpy(&v, (const uint8_t *)data + i * 4, 4);
        snprintf(buf, cap, "%" PRId32, v);
    } else {
        float v;
        memcpy(&v, (const uint8_t *)data + i * 4, 4);
        format_f32(v, buf, cap);
    }
}

/* One level of numpy's nesting: "[a b]" innermost, rows on their own lines
   indented under their bracket, blocks of rows a blank line apart. */
static void print_level(FILE *out, bib_dtype_t dtype, uint32_t rank, const uint32_t *dims,
                        const void *data, uint32_t level, uint64_t first, int width) {
    uint64_t stride = 1;
    for (uint32_t k = level + 1; k < rank; k++)
        stride *= dims[k];
    fputc('[', out);
    for (uint32_t i = 0; i < dims[level]; i++) {
        if (level + 1 == rank) {
            char text[32];
            format_element(dtype, data, first + i, text, sizeof text);
            fprintf(out, "%s%*s", i ? " " : "", width, text);
            continue;
        }
        if (i > 0) {
            for (uint32_t k = level + 1; k < rank; k++)
                fputc('\n', out);
            fprintf(out, "%*s", (int)level + 1, "");
        }
        print_level(out, dtype, rank, dims, data, level + 1, first + i * stride, width);
    }
    fputc(']', out);
}

/* Prints one output: "NAME: f32[2,3]" and its values, or for a large one
   the shape, the hash THASH gives and how to save it. */
static void print_output(FILE *out, const char *name, bib_dtype_t dtype, uint32_t rank,
                         const uint32_t *dims, const void *data) {
    uint64_t count = 1;
    fprintf(out, "%s: %s[", name, dtype == BIB_DTYPE_I32 ? "i32" : "f32");
    for (uint32_t k = 0; k < rank; k++) {
        fprintf(out, "%s%" PRIu32, k ? "," : "", dims[k]);
        count *= dims[k];
    }
    fputc(']', out);
    if (count > PRINT_MAX_ELEMENTS) {
        fprintf(out,
                " hash=%016" PRIx64 " (%" PRIu64 " elements; --output %s=PATH.npy saves them)\n",
                bib_tensor_hash((uint32_t)dtype, rank, dims, data, count * 4), count, name);
        return;
    }
    int width = 0;
    for (uint64_t i = 0; i < count; i++) {
        char text[32];
        format_element(dtype, data, i, text, sizeof text);
        if ((int)strlen(text) > width)
            width = (int)strlen(text);
    }
    fputc('\n', out);
    if (rank == 0) {
        char text[32];
        format_element(dtype, data, 0, text, sizeof text);
        fprintf(out, "%s\n", text);
        return;
    }
    print_level(out, dtype, rank, dims, data, 0, 0, width);
    fputc('\n', out);
}

/* Every output the module declares, in declaration order. */
static int print_outputs(bib_vm_t *vm) {
    uint32_t count = bib_vm_tensor_count(vm);
    for (uint32_t i = 0; i < count; i++) {
        bib_tensor_info_t t;
        if (bib_vm_tensor_info(vm, i, &t) != BIB_OK || !t.is_output)
            continue;
        bib_dtype_t dtype;
        uint32_t rank, dims[BIB_MAX_RANK];
        const void *data;
        bib_status_t st = bib_vm_get_output(vm, t.name, &dtype, &rank, dims, &data);
        if (st != BIB_OK) {
            fprintf(stderr, "bib: output %s: %s\n", t.name, bib_vm_error(vm));
            return bib_cli_exit_code(st);
        }
        print_output(stdout, t.name, dtype, rank, dims, data);
    }
    return 0;
}

/* The exit status for a program's exit value: the value itself in 0..63 and
   80..255; bib's own codes (64..79) and what does not fit a status are
   BIB_EXIT_PROGRAM_RANGE, said on stderr, so that HALT 70 never reads as a
   trap, nor HALT 256 as success. */
static int program_exit_status(int64_t value) {
    if ((value >= 0 && value < 64) || (value >= 80 && value <= 255))
        return (int)value;
    fprintf(stderr,
            "bib: the program's exit value %" PRId64
            " is not one bib passes on (0-63, 80-255): exit status %d\n",
            value, BIB_EXIT_PROGRAM_RANGE);
    return BIB_EXIT_PROGRAM_RANGE;
}

/* ---- commands ---------------------------------------------------------------- */

typedef struct run_request {
    const char *path;
    const tensor_file_t *inputs;
    int ninputs;
    const tensor_file_t *outputs;
    int noutputs;
    int print_outputs; /* no --output: print every output */
    int profile;
    const char *function; /* --function NAME, or NULL for the entry function */
    char **args;          /* the ARGs after "--" */
    int nargs;
} run_request_t;

/* The function's signature, for messages: "fib (.func fib args=1)". */
static void describe_function(bib_vm_t *vm, const char *name, char *buf, size_t cap) {
    int64_t index = bib_vm_function_find(vm, name);
    bib_function_info_t info;
    if (index < 0 || bib_vm_function_info(vm, (uint32_t)index, &info) != BIB_OK)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "%s takes %" PRIu32 " argument%s (.func %s args=%" PRIu32 ")", name,
                 info.nargs, info.nargs == 1 ? "" : "s", name, info.nargs);
}

int bib_cli_parse_arg(const char *text, bib_value_t *out) {
    char *end;
    errno = 0;
    long long i = strtoll(text, &end, 0);
    if (end != text && *end == '\0') {
        if (errno == ERANGE)
            return -2;
        out->i = i;
        return 0;
    }
    errno = 0;
    double f = strtod(text, &end);
    if (end == text || *end != '\0' || isspace((unsigned char)text[0]))
        return -1;
    if (errno == ERANGE && isinf(f)) /* 1e999; "inf" itself is taken */
        return -2;
    out->f = f;
    return 0;
}

/* Runs the entry function, or with --function the function named, its ARGs
   in its first registers. */
static bib_status_t run_program(bib_vm_t *vm, const run_request_t *req, int64_t *exit_value,
                                int *rc) {
    if (req->function == NULL && req->nargs == 0)
        return bib_vm_run(vm, exit_value);
    const char *name = req->function;
    if (name == NULL) {
        /* A module's entry function takes no arguments (spec/bib-format.md). */
        fprintf(stderr,
                "bib: the entry function takes no arguments; %d ARG%s after -- go to the "
                "function --function NAME names\n",
                req->nargs, req->nargs == 1 ? "" : "s");
        *rc = BIB_EXIT_USAGE;
        return BIB_E_USAGE;
    }
    char signature[300];
    describe_function(vm, name, signature, sizeof signature);
    bib_value_t args[256];
    if (req->nargs > (int)(sizeof args / sizeof args[0])) {
        fprintf(stderr, "bib: %d ARGs: at most 256 (%s)\n", req->nargs, signature);
        *rc = BIB_EXIT_USAGE;
        return BIB_E_USAGE;
    }
    for (int i = 0; i < req->nargs; i++) {
        int bad = bib_cli_parse_arg(req->args[i], &args[i]);
        if (bad != 0) {
            fprintf(stderr, "bib: ARG %d '%s' %s; %s\n", i + 1, req->args[i],
                    bad == -2 ? "is outside the range of a 64-bit integer and of an f64"
                              : "is not an integer (42, -7, 0x2a) or a number (2.5, 1e-3)",
                    signature);
            *rc = BIB_EXIT_USAGE;
            return BIB_E_USAGE;
        }
    }
    bib_status_t st = bib_vm_call(vm, name, args, (uint32_t)req->nargs, exit_value);
    if (st == BIB_E_USAGE) {
        fprintf(stderr, "bib: %s\n", bib_vm_error(vm));
        *rc = BIB_EXIT_USAGE;
    }
    return st;
}

/* --comm-timeout: under mpirun, the longest one exchange between ranks may
   wait (backends/comm.h). */
static uint64_t comm_timeout_ms = 10 * 60 * 1000;

static int cmd_run_ranks(const bib_options_t *options, const run_request_t *req);

static int cmd_run(const bib_options_t *options, const run_request_t *req) {
    if (bib_comm_launched())
        return cmd_run_ranks(options, req);
    int checked =
        check_tensor_files(req->path, req->inputs, req->ninputs, req->outputs, req->noutputs);
    if (checked != 0)
        return checked;
    bib_vm_t *vm = NULL;
    bib_status_t st = bib_vm_create(options, &vm);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: cannot create the VM: %s\n", bib_status_name(st));
        return bib_cli_exit_code(st);
    }
    bib_vm_register_stdio(vm, stdout);
    if (req->profile)
        bib_vm_profile(vm, 1);
    st = bib_vm_load_file(vm, req->path);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: %s\n", bib_vm_error(vm));
        bib_vm_destroy(vm);
        return bib_cli_exit_code(st);
    }
    int rc =
        check_run_tensors(vm, req->path, req->inputs, req->ninputs, req->outputs, req->noutputs);
    if (rc == 0)
        rc = set_inputs(vm, req->inputs, req->ninputs);
    if (rc != 0) {
        bib_vm_destroy(vm);
        return rc;
    }
    int64_t exit_value = 0;
    st = run_program(vm, req, &exit_value, &rc);
    fflush(stdout);
    if (rc != 0) {
        bib_vm_destroy(vm);
        return rc;
    }
    if (req->profile)
        bib_vm_profile_write(vm, stderr, req->profile == 2);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: %s\n", bib_vm_error(vm));
        bib_vm_destroy(vm);
        return bib_cli_exit_code(st);
    }
    rc = req->print_outputs ? print_outputs(vm) : write_outputs(vm, req->outputs, req->noutputs);
    /* A function called by name returns a value, printed as wasmtime
       --invoke prints it; the entry function's is the exit status. */
    if (rc == 0 && req->function != NULL)
        printf("%" PRId64 "\n", exit_value);
    fflush(stdout);
    bib_vm_destroy(vm);
    if (rc != 0 || req->function != NULL)
        return rc;
    return program_exit_status(exit_value);
}

/* ---- bib run under mpirun (spec/scale-out.md) ---------------------------------- */

/* An error line of this rank, and every rank's verdict: "bib: rank 1 of 3: ...". */
static int rank_fail(int code, const char *verdict) {
    fprintf(stderr, "bib: rank %d of %d: %s\n", bib_comm_rank(), bib_comm_size(), verdict);
    fflush(stderr);
    bib_comm_stop();
    return code;
}

/* Every rank's word at a step of the run (0: loaded, 1: finished): this
 * rank's failure (NULL when it has none) and exit code. 0 when every rank
 * goes on; else each rank prints the verdict and gets its exit code. */
static int agree(int step, const char *failure, int code) {
    char verdict[1200];
    int agreed = bib_collective_agree(step, failure, code, verdict, sizeof verdict);
    return agreed == 0 ? 0 : rank_fail(agreed, verdict);
}

/* What rank 0 says about one input file before its bytes follow. */
typedef struct input_note {
    int32_t code; /* 0, or the exit code of a file rank 0 could not read */
    uint32_t pad;
    uint64_t size;
    char text[496];
} input_note_t;

/* Rank 0 reads the file at path (its own path; "-" its stdin) and
   broadcasts the bytes: every rank gets them in *bytes (malloc'd; the
   caller frees) and *size. what names the file in messages ("--input x",
   "the module"). Returns 0, or, when rank 0 could not read it, the exit code
   with the line printed on every rank. */
static int share_file(const char *what, const char *path, uint8_t **bytes, size_t *size) {
    char why[600], msg[1200];
    input_note_t note;
    memset(&note, 0, sizeof note);
    *bytes = NULL;
    *size = 0;
    if (bib_comm_rank() == 0) {
        bib_status_t st =
            bib_file_read(path, bib_cli_max_file_size, bytes, size, note.text, sizeof note.text);
        if (st != BIB_OK)
            note.code = st == BIB_E_IO ? BIB_EXIT_NOINPUT : bib_cli_exit_code(st);
        note.size = *size;
    }
    if (bib_comm_bcast(&note, sizeof note, 0, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: rank %d of %d: sharing %s: %s; ending every rank\n", bib_comm_rank(),
                bib_comm_size(), what, why);
        bib_comm_abort(BIB_EXIT_TRAP);
    }
    if (note.code != 0) {
        snprintf(msg, sizeof msg, "rank 0: %s: %s", what, note.text);
        return rank_fail(note.code, msg);
    }
    if (bib_comm_rank() != 0) {
        *bytes = malloc(note.size ? (size_t)note.size : 1);
        if (*bytes == NULL) {
            fprintf(stderr,
                    "bib: rank %d of %d: %s: host out of memory for %llu bytes; ending every "
                    "rank\n",
                    bib_comm_rank(), bib_comm_size(), what, (unsigned long long)note.size);
            bib_comm_abort(BIB_EXIT_NOMEM);
        }
        *size = (size_t)note.size;
    }
    if (bib_comm_bcast(*bytes, *size, 0, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: rank %d of %d: sharing %s: %s; ending every rank\n", bib_comm_rank(),
                bib_comm_size(), what, why);
        bib_comm_abort(BIB_EXIT_TRAP);
    }
    return 0;
}

/* Every --input file, shared from rank 0 (share_file); every rank parses the
   same bytes and gives the VM the tensor, so a malformed file is the same
   error on every rank. Returns 0 or the exit code with the line printed. */
static int share_inputs(bib_vm_t *vm, const tensor_file_t *inputs, int ninputs) {
    char why[600], msg[1200], what[300];
    for (int i = 0; i < ninputs; i++) {
        uint8_t *bytes;
        size_t size;
        snprintf(what, sizeof what, "--input %s", inputs[i].name);
        int shared = share_file(what, inputs[i].path, &bytes, &size);
        if (shared != 0)
            return shared;
        bib_npy_t npy;
        bib_status_t st = bib_npy_parse(bytes, size, inputs[i].path, &npy, why, sizeof why);
        free(bytes);
        if (st == BIB_OK) {
            st = bib_vm_set_input(vm, inputs[i].name, npy.dtype, npy.rank, npy.dims, npy.data);
            if (st != BIB_OK)
                snprintf(why, sizeof why, "%s", bib_vm_error(vm));
            bib_npy_free(&npy);
        }
        if (st != BIB_OK) {
            snprintf(msg, sizeof msg, "--input %s: %s", inputs[i].name, why);
            return rank_fail(bib_cli_exit_code(st), msg);
        }
    }
    return 0;
}

/* After a run that every rank finished: each output must hold the same
   bytes on every rank (rank 0 writes it), or it is an error naming the
   ranks. */
static int check_outputs_agree(bib_vm_t *vm, const tensor_file_t *outputs, int noutputs) {
    const int n = bib_comm_size();
    for (int o = 0; o < noutputs; o++) {
        bib_dtype_t dtype;
        uint32_t rank, dims[BIB_MAX_RANK];
        const void *data;
        uint64_t h = 0;
        if (bib_vm_get_output(vm, outputs[o].name, &dtype, &rank, dims, &data) == BIB_OK) {
            uint64_t count = 1;
            for (uint32_t i = 0; i < rank; i++)
                count *= dims[i];
            /* FNV-1a over dtype, shape and bytes. */
            const uint32_t head[2] = {(uint32_t)dtype, rank};
            h = bib_fnv1a64(BIB_FNV1A64_BASIS, head, sizeof head);
            h = bib_fnv1a64(h, dims, rank * sizeof dims[0]);
            h = bib_fnv1a64(h, data, (size_t)count * 4);
        }
        uint64_t *all = bib_cli_zalloc((size_t)n, sizeof *all);
        char why[600], msg[700];
        if (bib_comm_allgather(&h, all, sizeof h, why, sizeof why) != BIB_OK) {
            fprintf(stderr, "bib: rank %d of %d: comparing output %s: %s; ending every rank\n",
                    bib_comm_rank(), n, outputs[o].name, why);
            bib_comm_abort(BIB_EXIT_TRAP);
        }
        for (int r = 1; r < n; r++)
            if (all[r] != all[0]) {
                snprintf(msg, sizeof msg,
                         "output %s differs between rank 0 and rank %d: every rank must end with "
                         "the same outputs (ALLGATHER the shards), rank 0 writes them",
                         outputs[o].name, r);
                free(all);
                return rank_fail(BIB_EXIT_TRAP, msg);
            }
        free(all);
    }
    return 0;
}

/* bib run as one of the ranks mpirun started: every rank loads the module and
   runs it; rank 0 reads the inputs and shares them, and writes the outputs.
   Every way a rank can fail ends in one agreement with the others, so every
   rank exits with the same error naming the rank that failed. */
static int cmd_run_ranks(const bib_options_t *options, const run_request_t *req) {
    const char *path = req->path;
    const tensor_file_t *inputs = req->inputs, *outputs = req->outputs;
    const int ninputs = req->ninputs, noutputs = req->noutputs, profile = req->profile;
    char why[600], failure[1200] = "";
    if (bib_comm_start(comm_timeout_ms, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: started by mpirun, but %s\n", why);
        return BIB_EXIT_UNAVAILABLE;
    }
    /* Launchers give stdin to rank 0 alone (the others get none, or one that
       never ends): a module from stdin is rank 0's, shared as the inputs
       are, before any rank can fail alone. */
    uint8_t *module = NULL;
    size_t module_size = 0;
    if (strcmp(path, "-") == 0) {
        int shared = share_file("the module", path, &module, &module_size);
        if (shared != 0)
            return shared;
    }
    int code = 0;
    if (bib_comm_rank() == 0) {
        code = check_tensor_files(path, inputs, ninputs, outputs, noutputs);
        if (code != 0)
            snprintf(failure, sizeof failure,
                     "the --input and --output files (rank 0's line above)");
    }
    bib_vm_t *vm = NULL;
    if (code == 0) {
        bib_status_t st = bib_vm_create(options, &vm);
        if (st != BIB_OK) {
            snprintf(failure, sizeof failure, "cannot create the VM: %s", bib_status_name(st));
            code = bib_cli_exit_code(st);
        }
    }
    if (code == 0) {
        bib_vm_register_stdio(vm, stdout);
        if (profile)
            bib_vm_profile(vm, 1);
        bib_status_t st = module != NULL ? bib_vm_load_file_bytes(vm, module, module_size, path)
                                         : bib_vm_load_file(vm, path);
        if (st != BIB_OK) {
            snprintf(failure, sizeof failure, "%s", bib_vm_error(vm));
            code = bib_cli_exit_code(st);
        } else if ((code = check_run_tensors(vm, path, inputs, ninputs, outputs, noutputs)) != 0) {
            snprintf(failure, sizeof failure, "the command line (the line above)");
        }
    }
    free(module);
    code = agree(0, code ? failure : NULL, code);
    if (code == 0)
        code = share_inputs(vm, inputs, ninputs);
    if (code != 0) {
        bib_vm_destroy(vm);
        return code;
    }
    int64_t exit_value = 0;
    int usage = 0;
    bib_status_t st = run_program(vm, req, &exit_value, &usage);
    fflush(stdout);
    if (profile)
        bib_vm_profile_write(vm, stderr, profile == 2);
    if (st != BIB_OK)
        snprintf(failure, sizeof failure, "%s", bib_vm_error(vm));
    code = agree(1, st != BIB_OK ? failure : NULL, usage != 0 ? usage : bib_cli_exit_code(st));
    if (code == 0)
        code = check_outputs_agree(vm, outputs, noutputs);
    if (code != 0) {
        bib_vm_destroy(vm);
        return code;
    }
    int rc = 0;
    if (bib_comm_rank() == 0) {
        rc = req->print_outputs ? print_outputs(vm) : write_outputs(vm, outputs, noutputs);
        if (rc == 0 && req->function != NULL)
            printf("%" PRId64 "\n", exit_value);
        fflush(stdout);
    }
    bib_vm_destroy(vm);
    bib_comm_stop();
    if (rc != 0 || req->function != NULL)
        return rc;
    return program_exit_status(exit_value);
}

/* bib bench FILE: loaded and given its inputs as run does them, then timed. */
static int cmd_bench_file(const bib_options_t *options, const char *path,
                          const tensor_file_t *inputs, int ninputs,
                          const bib_cli_bench_flags_t *flags) {
    int checked = check_tensor_files(path, inputs, ninputs, NULL, 0);
    char why[600];
    if (checked == 0 && flags->output != NULL &&
        bib_file_check_writable(flags->output, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: bench: %s\n", why);
        checked = BIB_EXIT_CANTCREATE;
    }
    if (checked != 0)
        return checked;
    bib_vm_t *vm = NULL;
    bib_status_t st = bib_vm_create(options, &vm);
    if (st != BIB_OK) {
        fprintf(stderr, "bib: cannot create the VM: %s\n", bib_status_name(st));
        return bib_cli_exit_code(st);
    }
    /* What the module prints would mix with the report: it goes nowhere. */
    FILE *sink = fopen("/dev/null", "w");
    bib_vm_register_stdio(vm, sink != NULL ? sink : stderr);
    st = bib_vm_load_file(vm, path);
    int rc = 0;
    if (st != BIB_OK) {
        fprintf(stderr, "bib: %s\n", bib_vm_error(vm));
        rc = bib_cli_exit_code(st);
    }
    if (rc == 0)
        rc = check_run_tensors(vm, path, inputs, ninputs, NULL, 0);
    if (rc == 0)
        rc = set_inputs(vm, inputs, ninputs);
    if (rc == 0)
        rc = bib_cli_bench_module(vm, path, options->backend ? options->backend : "cpu", flags);
    bib_vm_destroy(vm);
    if (sink != NULL)
        fclose(sink);
    return rc;
}

static int cmd_asm(const char *path, const char *out_path, int strip) {
    if (bib_file_same(path, out_path)) {
        fprintf(stderr, "bib: asm: the output '%s' is the source '%s' itself; give another -o\n",
                out_path, path);
        return BIB_EXIT_USAGE;
    }
    char why[600];
    if (bib_file_check_writable(out_path, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: %s\n", why);
        return BIB_EXIT_CANTCREATE;
    }
    uint8_t *src;
    size_t len;
    int read = bib_cli_read_file(path, &src, &len);
    if (read != 0)
        return read;
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    if (len >= BIB_MAGIC_BYTES && memcmp(src, BIB_MAGIC, BIB_MAGIC_BYTES) == 0) {
        fprintf(stderr,
                "bib: %s is a .bib module already, not assembly source (bib dis %s "
                "prints its source)\n",
                path, path);
        free(src);
        return BIB_EXIT_DATA;
    }
    bib_status_t st = strip ? bib_assemble_stripped((const char *)src, len, path,
                                                    bib_cli_max_file_size, &bytes, &size, &diag)
                            : bib_assemble_capped((const char *)src, len, path,
                                                  bib_cli_max_file_size, &bytes, &size, &diag);
    free(src);
    if (st != BIB_OK) {
        fputs(diag ? diag : "bib: assembly failed\n", stderr);
        bib_free(diag);
        return bib_cli_exit_code(st);
    }
    bib_free(diag);
    int rc = 0;
    if (bib_file_write(out_path, bytes, size, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: %s\n", why);
        rc = BIB_EXIT_CANTCREATE;
    }
    bib_free(bytes);
    return rc;
}

/* out_path NULL or "-": stdout. */
static int cmd_dis(const char *path, const char *out_path) {
    char why[600];
    if (out_path != NULL && bib_file_same(path, out_path)) {
        fprintf(stderr, "bib: dis: the output '%s' is the module '%s' itself; give another -o\n",
                out_path, path);
        return BIB_EXIT_USAGE;
    }
    if (out_path != NULL && bib_file_check_writable(out_path, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "bib: %s\n", why);
        return BIB_EXIT_CANTCREATE;
    }
    uint8_t *bytes;
    size_t size;
    int read = bib_cli_read_file(path, &bytes, &size);
    if (read != 0)
        return read;
    char *text = NULL, *diag = NULL;
    bib_status_t st = bib_disassemble(bytes, size, &text, &diag);
    free(bytes);
    if (st != BIB_OK) {
        /* The diagnostics are lines, each ending in a newline. */
        if (diag != NULL)
            fprintf(stderr, "bib: %s: %s", path, diag);
        else
            fprintf(stderr, "bib: %s: %s\n", path, bib_status_name(st));
        bib_free(diag);
        return bib_cli_exit_code(st);
    }
    int rc = 0;
    if (bib_file_write(out_path != NULL ? out_path : "-", text, strlen(text), why, sizeof why) !=
        BIB_OK) {
        fprintf(stderr, "bib: %s\n", why);
        rc = BIB_EXIT_CANTCREATE;
    }
    bib_free(text);
    bib_free(diag);
    return rc;
}

/* The flag of table (val its optopt) that arg, "--NAME=VALUE", names, when
   getopt refused it for the value (getopt gives only the flag's value
   then); NULL for any other refusal. NAME may be abbreviated, as getopt
   allows. */
static const char *flag_given_value(const struct option *table, const char *arg, int val) {
    if (strncmp(arg, "--", 2) != 0 || strchr(arg, '=') == NULL)
        return NULL;
    size_t len = strcspn(arg + 2, "=");
    for (; table->name != NULL; table++)
        if (table->has_arg == no_argument && table->val == val && len > 0 &&
            strncmp(table->name, arg + 2, len) == 0)
            return table->name;
    return NULL;
}

/* Finds the command word wherever it stands among the options: a first
   pass over every option any command takes, quietly, on a copy of argv
   (getopt permutes it, putting the words last). Returns the command's index
   in argv, or argc when there is none. */
static int find_command(int argc, char **argv, int *help, int *version) {
    struct option table[BIB_CLI_MAX_OPTIONS + 2];
    char shorts[80];
    bib_cli_getopt_all(table, shorts, sizeof shorts);
    char **copy = bib_cli_alloc(sizeof *copy * (size_t)(argc + 1));
    memcpy(copy, argv, sizeof *copy * (size_t)(argc + 1));
    opterr = 0;
    optind = 0;
    for (int c; (c = getopt_long(argc, copy, shorts, table, NULL)) != -1;) {
        *help |= c == 'h';
        *version |= c == 'V';
    }
    int at = argc;
    for (int i = 1; optind < argc && i < argc; i++)
        if (argv[i] == copy[optind])
            at = i;
    free(copy);
    return at;
}

static int bib_main(int argc, char **argv);

/* What a command printed to standard output and could not write (a full
   disk, a closed descriptor) is lost: that is an error, never exit 0. */
int main(int argc, char **argv) {
    int rc = bib_main(argc, argv);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        /* An earlier write failed, and errno has moved on: ask again. */
        struct stat st;
        int why = errno != 0 ? errno : fstat(STDOUT_FILENO, &st) != 0 ? errno : 0;
        fprintf(stderr, "bib: cannot write standard output (what was printed is lost): %s\n",
                why != 0 ? strerror(why) : "a write failed");
        if (rc == 0)
            rc = BIB_EXIT_CANTCREATE;
    }
    return rc;
}

/* SIGINT, SIGTERM, SIGHUP: the temporary files of outputs being written are
   removed (their targets keep what they held), then the signal ends the
   process as it would have. */
static void on_fatal_signal(int sig) {
    bib_file_out_unlink_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int bib_main(int argc, char **argv) {
    static const int fatal[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction was;
        /* A signal the process started with ignored stays ignored. */
        if (sigaction(fatal[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
            signal(fatal[i], on_fatal_signal);
    }
    /* Past `ulimit -f`, a write fails with EFBIG and is reported, where
       SIGXFSZ would kill the command between a temporary file and its rename. */
    signal(SIGXFSZ, SIG_IGN);
    /* Everything after "--" is run's ARGs, never options. */
    char **run_args = NULL;
    int nrun_args = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            run_args = argv + i + 1;
            nrun_args = argc - i - 1;
            argc = i;
            break;
        }
    int help = 0, version = 0;
    int at = find_command(argc, argv, &help, &version);
    if (at >= argc) {
        /* No command: only --help and --version make sense. */
        if (help) {
            bib_cli_usage(stdout);
            return 0;
        }
        if (version) {
            printf("%s\n", bib_build_info());
            return 0;
        }
        if (argc > 1)
            fprintf(stderr, "bib: no command given (bib help lists them)\n");
        else
            bib_cli_usage(stderr);
        return BIB_EXIT_USAGE;
    }
    int found = bib_cli_command_find(argv[at]);
    if (found < 0)
        return bib_cli_unknown_command(argv[at]);
    bib_cli_command_t command = (bib_cli_command_t)found;
    /* The command word leaves argv, so that getopt's words are the files. */
    for (int i = at; i + 1 < argc; i++)
        argv[i] = argv[i + 1];
    argc--;

    struct option long_options[BIB_CLI_MAX_OPTIONS + 1];
    char shorts[80];
    bib_cli_getopt_table(command, long_options, shorts, sizeof shorts);
    bib_options_t options;
    bib_options_init(&options);
    bib_cli_test_flags_t test_flags = {0};
    int profile = 0; /* --profile: 1 table, 2 JSON */
    int json = 0, quick = 0, print_none = 0, strip = 0;
    bib_cli_bench_flags_t bench = {.repetitions = 10, .warmup = 1, .format = BIB_BENCH_MARKDOWN};
    int bench_file_options = 0; /* --repetitions, --warmup, --format or --max-memory given */
    const char *function = NULL;
    /* -o/--output is asm's module path, or run's NAME=PATH (repeatable):
       which one is known once the command is. */
    const char *out_args[MAX_TENSOR_FILES];
    int nout = 0;
    tensor_file_t inputs[MAX_TENSOR_FILES];
    int ninputs = 0;
    int c;
    /* The leading ':' and opterr = 0: getopt stays quiet and the cases ':'
       and '?' below say what was wrong, in bib's own words. */
    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, shorts, long_options, NULL)) != -1) {
        uint64_t v;
        const char *flag;
        switch (c) {
        case BIB_OPT_TRACE:
            if (!optarg || strcmp(optarg, "text") == 0)
                options.trace_format = BIB_TRACE_TEXT;
            else if (strcmp(optarg, "json") == 0)
                options.trace_format = BIB_TRACE_JSON;
            else {
                fprintf(stderr, "bib: --trace takes 'text' or 'json', not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case BIB_OPT_FUEL:
            if (parse_u64(optarg, &options.fuel) || options.fuel == 0) {
                fprintf(stderr, "bib: --fuel takes a positive amount of fuel, not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case BIB_OPT_MAXMEM:
            if (parse_size(optarg, &options.max_memory) || options.max_memory == 0) {
                fprintf(stderr, "bib: --max-memory takes a size such as 64M, not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            bench_file_options = 1; /* under bench: the workloads set their own */
            break;
        case BIB_OPT_MAXFILE:
            if (parse_size(optarg, &options.max_file_size) || options.max_file_size == 0) {
                fprintf(stderr, "bib: --max-file-size takes a size such as 2G, not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            bib_cli_max_file_size = options.max_file_size;
            break;
        case BIB_OPT_MAXDEPTH:
            if (parse_u64(optarg, &v) || v == 0 || v > UINT32_MAX) {
                fprintf(stderr,
                        "bib: --max-depth takes a frame count from 1 to 4294967295, not '%s'\n",
                        optarg);
                return BIB_EXIT_USAGE;
            }
            options.max_call_depth = (uint32_t)v;
            break;
        case BIB_OPT_COVERAGE:
            test_flags.coverage = 1;
            break;
        case BIB_OPT_BACKEND:
            options.backend = optarg;
            break;
        case BIB_OPT_DEVICE:
            options.device = optarg;
            break;
        case BIB_OPT_THREADS:
            if (parse_u64(optarg, &v) || v == 0 || v > BIB_CPU_MAX_THREADS) {
                fprintf(stderr, "bib: --threads takes a thread count from 1 to %d, not '%s'\n",
                        BIB_CPU_MAX_THREADS, optarg);
                return BIB_EXIT_USAGE;
            }
            options.threads = (uint32_t)v;
            break;
        case BIB_OPT_VALIDATION:
            options.validation = 1;
            break;
        case BIB_OPT_STRICT_DEVICE:
            options.strict_device = 1;
            break;
        case BIB_OPT_JSON:
            json = 1;
            break;
        case BIB_OPT_DEVICE_TIMEOUT:
            if (parse_duration_ms(optarg, &options.device_timeout_ms)) {
                fprintf(stderr,
                        "bib: --device-timeout takes a duration such as 200ms or 5s, not "
                        "'%s'\n",
                        optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case BIB_OPT_COMM_TIMEOUT:
            if (parse_duration_ms(optarg, &comm_timeout_ms)) {
                fprintf(stderr,
                        "bib: --comm-timeout takes a duration such as 30s or 10m, not '%s'\n",
                        optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case BIB_OPT_DENY:
            /* A list, so that later kinds can join device-code. */
            for (const char *p = optarg;;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                if (len == strlen("device-code") && memcmp(p, "device-code", len) == 0) {
                    options.deny |= BIB_DENY_DEVICE_CODE;
                } else {
                    fprintf(stderr, "bib: --deny takes device-code, not '%.*s'\n", (int)len, p);
                    return BIB_EXIT_USAGE;
                }
                if (!comma)
                    break;
                p = comma + 1;
            }
            break;
        case BIB_OPT_ALLOW_HOST:
            if (!valid_name_list(optarg)) {
                fprintf(stderr,
                        "bib: --allow-host takes host function names separated by commas, not "
                        "'%s'\n",
                        optarg);
                return BIB_EXIT_USAGE;
            }
            options.allow_hosts = optarg;
            break;
        case BIB_OPT_QUICK:
            quick = 1;
            break;
        case BIB_OPT_FUNCTION:
            function = optarg;
            break;
        case BIB_OPT_STRIP:
            strip = 1;
            break;
        case BIB_OPT_REPETITIONS:
        case BIB_OPT_WARMUP:
            if (parse_u64(optarg, &v) || v > 1000000 || (c == BIB_OPT_REPETITIONS && v == 0)) {
                fprintf(stderr, "bib: --%s takes a count from %d to 1000000, not '%s'\n",
                        c == BIB_OPT_WARMUP ? "warmup" : "repetitions", c == BIB_OPT_WARMUP ? 0 : 1,
                        optarg);
                return BIB_EXIT_USAGE;
            }
            *(c == BIB_OPT_WARMUP ? &bench.warmup : &bench.repetitions) = (int)v;
            bench_file_options = 1;
            break;
        case BIB_OPT_FORMAT:
            if (strcmp(optarg, "md") == 0 || strcmp(optarg, "markdown") == 0)
                bench.format = BIB_BENCH_MARKDOWN;
            else if (strcmp(optarg, "csv") == 0)
                bench.format = BIB_BENCH_CSV;
            else if (strcmp(optarg, "json") == 0)
                bench.format = BIB_BENCH_JSON;
            else {
                fprintf(stderr, "bib: --format takes md, csv or json, not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            bench_file_options = 1;
            break;
        case BIB_OPT_PROFILE:
            if (!optarg || strcmp(optarg, "text") == 0)
                profile = 1;
            else if (strcmp(optarg, "json") == 0)
                profile = 2;
            else {
                fprintf(stderr, "bib: --profile takes 'text' or 'json', not '%s'\n", optarg);
                return BIB_EXIT_USAGE;
            }
            break;
        case BIB_OPT_INPUT:
            if (ninputs == MAX_TENSOR_FILES) {
                fprintf(stderr, "bib: at most %d --input options\n", MAX_TENSOR_FILES);
                return BIB_EXIT_USAGE;
            }
            if (split_tensor_file("--input", optarg, &inputs[ninputs]))
                return BIB_EXIT_USAGE;
            ninputs++;
            break;
        case 'v':
            test_flags.verbose = 1;
            break;
        case 'o':
            if (command == BIB_CMD_RUN && optarg[0] == '\0') {
                print_none = 1; /* --output=: print nothing */
                break;
            }
            if (nout == MAX_TENSOR_FILES) {
                fprintf(stderr, "bib: at most %d --output options\n", MAX_TENSOR_FILES);
                return BIB_EXIT_USAGE;
            }
            out_args[nout++] = optarg;
            break;
        case 'h':
            bib_cli_command_usage(stdout, command);
            return 0;
        case ':':
            fprintf(stderr, "bib: option '%s' needs a value (bib help %s lists %s's options)\n",
                    argv[optind - 1], bib_cli_command_name(command), bib_cli_command_name(command));
            return BIB_EXIT_USAGE;
        default:
            if (optopt != 0 && (flag = flag_given_value(long_options, argv[optind - 1], optopt))) {
                fprintf(stderr, "bib: --%s takes no value\n", flag);
                return BIB_EXIT_USAGE;
            }
            if (optopt != 0) {
                char text[3] = {'-', (char)optopt, '\0'};
                return bib_cli_bad_option(command, text);
            }
            return bib_cli_bad_option(command, argv[optind - 1]);
        }
    }
    int nfiles = argc - optind;
    char **files = argv + optind;
    if (run_args != NULL && command != BIB_CMD_RUN) {
        fprintf(stderr, "bib: %s takes no ARGs after --\n", bib_cli_command_name(command));
        return BIB_EXIT_USAGE;
    }

    switch (command) {
    case BIB_CMD_RUN: {
        if (nfiles != 1) {
            fprintf(stderr, "bib: run takes one file (- for stdin)\n");
            return BIB_EXIT_USAGE;
        }
        tensor_file_t outputs[MAX_TENSOR_FILES];
        for (int i = 0; i < nout; i++)
            if (split_tensor_file("--output", out_args[i], &outputs[i]))
                return BIB_EXIT_USAGE;
        if (print_none && nout > 0) {
            fprintf(stderr, "bib: --output= (print no output) and --output %s contradict\n",
                    out_args[0]);
            return BIB_EXIT_USAGE;
        }
        run_request_t req = {.path = files[0],
                             .inputs = inputs,
                             .ninputs = ninputs,
                             .outputs = outputs,
                             .noutputs = nout,
                             .print_outputs = !print_none && nout == 0,
                             .profile = profile,
                             .function = function,
                             .args = run_args,
                             .nargs = nrun_args};
        return cmd_run(&options, &req);
    }
    case BIB_CMD_ASM: {
        if (nfiles != 1 || nout > 1) {
            fprintf(stderr, "bib: asm takes one file and at most one -o OUT\n");
            return BIB_EXIT_USAGE;
        }
        if (nout == 1)
            return cmd_asm(files[0], out_args[0], strip);
        const char *in = files[0];
        if (strcmp(in, "-") == 0) {
            fprintf(stderr, "bib: asm -: the source is stdin, so give -o OUT.bib (-o - for "
                            "stdout)\n");
            return BIB_EXIT_USAGE;
        }
        /* No -o: prog.basm -> prog.bib beside it (any other name gains .bib). */
        size_t len = strlen(in);
        if (len > 5 && strcmp(in + len - 5, ".basm") == 0)
            len -= 5;
        char *out = bib_cli_alloc(len + 5);
        memcpy(out, in, len);
        memcpy(out + len, ".bib", 5);
        int rc = cmd_asm(in, out, strip);
        free(out);
        return rc;
    }
    case BIB_CMD_DIS:
        if (nfiles != 1 || nout > 1) {
            fprintf(stderr, "bib: dis takes one file and at most one -o OUT\n");
            return BIB_EXIT_USAGE;
        }
        return cmd_dis(files[0], nout ? out_args[0] : NULL);
    case BIB_CMD_INFO:
        if (nfiles != 0) {
            fprintf(stderr, "bib: info takes no file\n");
            return BIB_EXIT_USAGE;
        }
        return bib_cli_info(&options, json);
    case BIB_CMD_BENCH:
        if (nfiles > 1 || nout > 1) {
            fprintf(stderr, "bib: bench takes at most one file, and at most one -o\n");
            return BIB_EXIT_USAGE;
        }
        if (nfiles == 1) {
            if (quick) {
                fprintf(stderr, "bib: bench FILE times FILE: --quick is for the workloads "
                                "(--repetitions N sets the runs)\n");
                return BIB_EXIT_USAGE;
            }
            bench.output = nout ? out_args[0] : NULL;
            return cmd_bench_file(&options, files[0], inputs, ninputs, &bench);
        }
        if (bench_file_options || ninputs > 0) {
            fprintf(stderr, "bib: --repetitions, --warmup, --format, --max-memory and --input "
                            "are for bench FILE\n");
            return BIB_EXIT_USAGE;
        }
        /* The workloads run on every executor present and on auto: one
           --backend would be silently ignored. */
        if (options.backend != NULL) {
            fprintf(stderr, "bib: --backend is for bench FILE: bench without FILE runs every "
                            "executor present and auto\n");
            return BIB_EXIT_USAGE;
        }
        return bib_cli_bench(&options, nout ? out_args[0] : NULL, quick);
    case BIB_CMD_REPL:
        if (nfiles > 1) {
            fprintf(stderr, "bib: repl takes at most one file\n");
            return BIB_EXIT_USAGE;
        }
        return bib_cli_repl(&options, nfiles == 1 ? files[0] : NULL, profile);
    case BIB_CMD_TEST: {
        if (nfiles < 1) {
            fprintf(stderr, "bib: test takes at least one file or directory\n");
            return BIB_EXIT_USAGE;
        }
        int rc = bib_cli_test(&options, &test_flags, nfiles, files);
        /* A case file over the cap fails its case, and the whole with the
           status every command gives for a file too large. */
        return rc != 0 && bib_cli_file_too_large ? BIB_EXIT_NOMEM : rc;
    }
    case BIB_CMD_HELP:
        if (nfiles == 0) {
            bib_cli_usage(stdout);
            return 0;
        }
        if (nfiles > 1) {
            fprintf(stderr, "bib: help takes at most one command\n");
            return BIB_EXIT_USAGE;
        }
        found = bib_cli_command_find(files[0]);
        if (found < 0)
            return bib_cli_unknown_command(files[0]);
        bib_cli_command_usage(stdout, (bib_cli_command_t)found);
        return 0;
    case BIB_CMD_COUNT:
        break;
    }
    return BIB_EXIT_USAGE;
}
