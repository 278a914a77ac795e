/* cli/repl.c: `bib repl`, an interactive session on one VM.
 *
 * Owns the session loop: reading lines (libedit with history on a terminal,
 * plain lines otherwise), the ':' commands and how their results are
 * printed, breakpoints and the session's VM. The session's source and its
 * assembly are cli/repl_session.c's; Tab completion is
 * cli/repl_complete.c's. The session model (spec/cli.md): typed
 * instructions are appended to a function `main`, typed `.func` blocks and
 * directives go before it; the whole source is re-assembled after every
 * line and swapped in with bib_vm_reload, which keeps registers, memory and
 * tensors, and only the new instructions run. Everything that runs,
 * assembles or inspects bytecode is libbib's; this file only talks to it.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli/cli.h"
#include "cli/npy.h"
#include "cli/repl.h"
#include "cli/repl_internal.h"
#include "isa/isa.h"
#include "module/module.h"
#include "vm/extend.h"
#include "vm/fileio.h"

void repl_out_flush(void) {
    fflush(stdout);
}

/* Errors go to stderr after whatever stdout holds, so a transcript taken
   with 2>&1 keeps the order. */
void repl_error_line(const char *format, ...) {
    repl_out_flush();
    va_list ap;
    va_start(ap, format);
    fputs("bib: ", stderr);
    vfprintf(stderr, format, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- positions and state ------------------------------------------------------- */

static void print_vm_position(bib_vm_t *vm, const char *what) {
    bib_position_t pos;
    if (bib_vm_position(vm, &pos) != BIB_OK)
        return;
    char insn[256];
    bib_vm_insn_text(vm, pos.pc, insn, sizeof insn);
    printf("%s at pc %" PRIu32 " in %s", what, pos.pc, pos.func_name);
    if (pos.line != 0)
        printf(" line %" PRIu32, pos.line);
    if (pos.depth > 1)
        printf(" depth %" PRIu32, pos.depth);
    printf(": %s\n", insn);
}

static void print_position(repl_t *r, const char *what) {
    print_vm_position(r->vm, what);
}

/* The entry function's registers (copied), to show what a line changed. */
uint64_t *repl_entry_regs(repl_t *r, uint32_t *n) {
    bib_position_t pos;
    bib_frame_info_t f;
    *n = 0;
    if (bib_vm_position(r->vm, &pos) != BIB_OK || bib_vm_frame(r->vm, pos.depth - 1, &f) != BIB_OK)
        return NULL;
    uint64_t *copy = malloc((f.nregs ? f.nregs : 1) * sizeof *copy);
    if (copy == NULL)
        return NULL;
    for (uint32_t i = 0; i < f.nregs; i++)
        copy[i] = f.regs[i].u;
    *n = f.nregs;
    return copy;
}

void repl_print_reg(uint32_t i, uint64_t v) {
    printf("r%" PRIu32 " = %" PRId64 " (0x%" PRIx64 ")\n", i, (int64_t)v, v);
}

/* ---- running: Ctrl-C pauses the program, the session stays ----------------------- */

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Instructions per slice: a resume costs microseconds, a slice milliseconds. */
#define REPL_SLICE (1u << 20)

/* repl_resume on vm, the session's or :call's own. */
static bib_status_t resume_vm(repl_t *r, bib_vm_t *vm, uint64_t n, bib_stop_t *stop) {
    struct sigaction on, old;
    memset(&on, 0, sizeof on);
    on.sa_handler = on_interrupt;
    sigemptyset(&on.sa_mask);
    on.sa_flags = SA_RESTART;
    /* A session started with SIGINT ignored (in the background, under
       nohup) keeps it ignored, as a shell would. */
    sigaction(SIGINT, NULL, &old);
    if (old.sa_handler != SIG_IGN)
        sigaction(SIGINT, &on, NULL);
    interrupted = 0;
    r->interrupted = false;
    bib_status_t st = BIB_OK;
    for (;;) {
        uint64_t k = n < REPL_SLICE ? n : REPL_SLICE;
        st = bib_vm_step(vm, k, stop);
        if (n != UINT64_MAX)
            n -= k;
        if (st != BIB_OK || *stop != BIB_STOP_PAUSED || n == 0)
            break;
        /* A slice that ends before an instruction with a breakpoint: the
           run stops there, as one bib_vm_continue would. */
        bib_position_t pos;
        uint32_t pcs[256];
        uint32_t nb = bib_vm_breakpoints(vm, pcs, 256);
        if (nb > 0 && bib_vm_position(vm, &pos) == BIB_OK) {
            bool hit = false;
            for (uint32_t i = 0; i < nb && i < 256 && !hit; i++)
                hit = pcs[i] == pos.pc;
            if (hit) {
                *stop = BIB_STOP_BREAKPOINT;
                break;
            }
        }
        if (interrupted) {
            r->interrupted = true;
            break;
        }
    }
    sigaction(SIGINT, &old, NULL);
    return st;
}

bib_status_t repl_resume(repl_t *r, uint64_t n, bib_stop_t *stop) {
    return resume_vm(r, r->vm, n, stop);
}

/* Says why a run stopped. quiet_halt: the session's own closing HALT. */
void repl_report_stop(repl_t *r, bib_status_t st, bib_stop_t stop, bool quiet_halt) {
    if (st != BIB_OK) {
        repl_error_line("%s", bib_vm_error(r->vm));
        return;
    }
    bib_position_t pos;
    bib_vm_position(r->vm, &pos);
    switch (stop) {
    case BIB_STOP_PAUSED:
        print_position(r, r->interrupted ? "interrupted by Ctrl-C" : "paused");
        break;
    case BIB_STOP_BREAKPOINT:
        print_position(r, "breakpoint");
        break;
    case BIB_STOP_HALTED: {
        /* Reaching the end of what was typed is no news in a session. */
        bib_function_info_t mi;
        bool at_end = r->file == NULL && pos.depth == 1 && repl_main_info(r, &mi) == 0 &&
                      pos.pc == mi.entry + r->main_count;
        if (!quiet_halt && !at_end)
            printf("halted: exit value %" PRId64 "\n", pos.exit_value);
        break;
    }
    default:
        break;
    }
}

/* ---- breakpoints ------------------------------------------------------------------ */

bool repl_is_name_char(int c) {
    return isalnum(c) || c == '_' || c == '.';
}

/* The session line where code label name is defined: in the loaded file's
   text, or in the interactive source. */
static uint32_t label_line(const repl_t *r, const char *name) {
    size_t n = strlen(name);
    if (r->file_text != NULL) {
        uint32_t line = 1;
        for (const char *p = r->file_text; *p != '\0'; line++) {
            const char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, name, n) == 0 && q[n] == ':')
                return line;
            p = strchr(p, '\n');
            if (p == NULL)
                break;
            p++;
        }
        return 0;
    }
    const src_t *parts[2] = {&r->funcs, &r->body};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < parts[k]->n; i++) {
            const char *q = parts[k]->v[i].text;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, name, n) == 0 && q[n] == ':')
                return parts[k]->v[i].origin;
        }
    return 0;
}

/* A breakpoint spec: a pc, a function name or a code label. */
static bool resolve_break(repl_t *r, const char *spec, uint32_t *pc) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(spec, &end, 0);
    if (isdigit((unsigned char)spec[0]) && *end == '\0' && errno == 0) {
        if (v >= bib_vm_code_count(r->vm))
            return false;
        *pc = (uint32_t)v;
        return true;
    }
    int64_t f = bib_vm_function_find(r->vm, spec);
    bib_function_info_t info;
    if (f >= 0 && bib_vm_function_info(r->vm, (uint32_t)f, &info) == BIB_OK) {
        *pc = info.entry;
        return true;
    }
    uint32_t line = label_line(r, spec);
    return line != 0 && bib_vm_line_pc(r->vm, line, pc) == BIB_OK;
}

void repl_apply_breaks(repl_t *r) {
    for (size_t i = 0; i < r->nbreaks; i++) {
        uint32_t pc;
        if (resolve_break(r, r->breaks[i], &pc))
            bib_vm_break(r->vm, pc, 1);
    }
}

static void clear_breaks(repl_t *r) {
    for (size_t i = 0; i < r->nbreaks; i++)
        free(r->breaks[i]);
    free(r->breaks);
    r->breaks = NULL;
    r->nbreaks = 0;
}

/* ---- the VM -------------------------------------------------------------------------- */

static bib_vm_t *new_vm(repl_t *r) {
    bib_vm_t *vm = NULL;
    bib_status_t st = bib_vm_create(&r->options, &vm);
    if (st != BIB_OK) {
        repl_error_line("cannot create the VM: %s", bib_status_name(st));
        return NULL;
    }
    bib_vm_register_stdio(vm, stdout);
    if (r->profile)
        bib_vm_profile(vm, 1);
    return vm;
}

static void reset_session(repl_t *r) {
    repl_src_free(&r->top);
    repl_src_free(&r->funcs);
    repl_src_free(&r->body);
    repl_src_free(&r->block);
    r->pending = 0;
    r->loaded = false;
    r->main_count = 0;
    free(r->file);
    free(r->file_text);
    r->file = NULL;
    r->file_text = NULL;
    r->file_size = 0;
    clear_breaks(r);
    for (size_t i = 0; i < r->ninputs; i++)
        free(r->inputs[i]);
    free(r->inputs);
    r->inputs = NULL;
    r->ninputs = 0;
}

int repl_main_info(repl_t *r, bib_function_info_t *info) {
    int64_t f = bib_vm_function_find(r->vm, "main");
    return f >= 0 ? (int)bib_vm_function_info(r->vm, (uint32_t)f, info) : -1;
}

/* ---- commands ------------------------------------------------------------------------ */

uint32_t repl_missing_inputs(repl_t *r, char *list, size_t cap) {
    uint32_t missing = 0;
    size_t used = 0;
    if (cap > 0)
        list[0] = '\0';
    for (uint32_t i = 0; r->loaded && i < bib_vm_tensor_count(r->vm); i++) {
        bib_tensor_info_t info;
        if (bib_vm_tensor_info(r->vm, i, &info) != BIB_OK || !info.is_input || info.name == NULL)
            continue;
        size_t n = strlen(info.name);
        bool given = false;
        for (size_t k = 0; k < r->ninputs && !given; k++)
            given = strncmp(r->inputs[k], info.name, n) == 0 && r->inputs[k][n] == '=';
        if (given)
            continue;
        if (used < cap)
            used +=
                (size_t)snprintf(list + used, cap - used, "%s%s", missing ? ", " : "", info.name);
        missing++;
    }
    return missing;
}

static bool need_run(repl_t *r) {
    bib_position_t pos;
    if (r->loaded && bib_vm_position(r->vm, &pos) == BIB_OK)
        return true;
    char list[512];
    if (r->loaded && repl_missing_inputs(r, list, sizeof list) > 0)
        repl_error_line("waiting for inputs %s: :input NAME=PATH.npy, then :run", list);
    else if (r->loaded)
        repl_error_line("the program has not started: :run starts it");
    else
        repl_error_line("nothing to run: type instructions, or :load FILE");
    return false;
}

static void cmd_step(repl_t *r, const char *arg, bool all) {
    if (!need_run(r))
        return;
    uint64_t n = 1;
    if (arg != NULL) {
        char *end;
        n = strtoull(arg, &end, 10);
        if (*end != '\0' || arg[0] == '-') {
            repl_error_line(":step takes a count, not '%s'", arg);
            return;
        }
    }
    bib_position_t pos;
    bib_vm_position(r->vm, &pos);
    if (pos.stop == BIB_STOP_HALTED || pos.stop == BIB_STOP_TRAPPED) {
        repl_error_line("the program has finished: :run starts it again");
        return;
    }
    bib_stop_t stop;
    bib_status_t st = repl_resume(r, all ? UINT64_MAX : n, &stop);
    repl_out_flush();
    repl_report_stop(r, st, stop, false);
}

static void cmd_run(repl_t *r) {
    if (!r->loaded) {
        repl_error_line("nothing to run: type instructions, or :load FILE");
        return;
    }
    bib_status_t st = bib_vm_start(r->vm);
    if (st != BIB_OK) {
        repl_error_line("%s", bib_vm_error(r->vm));
        return;
    }
    repl_apply_breaks(r);
    /* A fresh start stops at a breakpoint on its first instruction (a
       paused run moves past the one it is paused at). */
    bib_position_t pos;
    uint32_t pcs[256];
    uint32_t nb = bib_vm_breakpoints(r->vm, pcs, 256);
    for (uint32_t i = 0; i < nb && i < 256; i++)
        if (bib_vm_position(r->vm, &pos) == BIB_OK && pcs[i] == pos.pc) {
            repl_report_stop(r, BIB_OK, BIB_STOP_BREAKPOINT, false);
            return;
        }
    bib_stop_t stop;
    st = repl_resume(r, UINT64_MAX, &stop);
    repl_out_flush();
    repl_report_stop(r, st, stop, false);
}

static void cmd_regs(repl_t *r) {
    if (!need_run(r))
        return;
    bib_frame_info_t f;
    if (bib_vm_frame(r->vm, 0, &f) != BIB_OK)
        return;
    printf("%s (pc %" PRIu32 "):\n", f.func_name, f.pc);
    for (uint32_t i = 0; i < f.nregs; i++)
        repl_print_reg(i, f.regs[i].u);
}

static void cmd_backtrace(repl_t *r) {
    if (!need_run(r))
        return;
    bib_position_t pos;
    bib_vm_position(r->vm, &pos);
    for (uint32_t level = 0; level < pos.depth; level++) {
        bib_frame_info_t f;
        if (bib_vm_frame(r->vm, level, &f) != BIB_OK)
            break;
        char insn[256];
        bib_vm_insn_text(r->vm, f.pc, insn, sizeof insn);
        printf("#%" PRIu32 " pc %" PRIu32 " in %s", level, f.pc, f.func_name);
        if (f.line != 0)
            printf(" line %" PRIu32, f.line);
        printf(": %s\n", insn);
    }
}

static bool parse_u64(const char *text, uint64_t *out) {
    if (text == NULL || text[0] == '-')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0')
        return false;
    *out = v;
    return true;
}

static void cmd_mem(repl_t *r, const char *a, const char *b) {
    uint64_t addr, n = 64;
    if (!parse_u64(a, &addr) || (b != NULL && !parse_u64(b, &n))) {
        repl_error_line("usage: :mem ADDR [N]");
        return;
    }
    uint64_t size = 0;
    const uint8_t *mem = bib_vm_memory(r->vm, &size);
    if (mem == NULL || addr >= size) {
        repl_error_line("address %" PRIu64 " is outside linear memory (%" PRIu64 " bytes)", addr,
                        size);
        return;
    }
    if (n > size - addr)
        n = size - addr;
    for (uint64_t row = addr; row < addr + n; row += 16) {
        uint64_t end = row + 16 < addr + n ? row + 16 : addr + n;
        printf("%08" PRIx64 ":", row);
        for (uint64_t i = row; i < row + 16; i++) {
            if (i < end)
                printf(" %02x", mem[i]);
            else
                printf("   ");
        }
        printf("  |");
        for (uint64_t i = row; i < end; i++)
            putchar(mem[i] >= 0x20 && mem[i] < 0x7F ? mem[i] : '.');
        printf("|\n");
    }
}

static const char *dtype_text(bib_dtype_t d) {
    return d == BIB_DTYPE_F32 ? "f32" : d == BIB_DTYPE_I32 ? "i32" : "?";
}

static void print_tensor_line(uint32_t reg, const bib_tensor_reg_info_t *info) {
    printf("t%" PRIu32, reg);
    if (info->name != NULL)
        printf(" (%s)", info->name);
    printf(" %s[", dtype_text(info->dtype));
    for (uint32_t i = 0; i < info->rank; i++)
        printf("%s%" PRIu32, i ? "," : "", info->dims[i]);
    printf("] on %s hash=%016" PRIx64 "\n", info->executors, info->hash);
}

static void cmd_tensors(repl_t *r) {
    uint32_t n = bib_vm_tensor_regs(r->vm), live = 0;
    for (uint32_t reg = 0; reg < n; reg++) {
        bib_tensor_reg_info_t info;
        if (bib_vm_tensor_reg(r->vm, reg, &info) != BIB_OK) {
            repl_error_line("%s", bib_vm_error(r->vm));
            return;
        }
        if (!info.live)
            continue;
        print_tensor_line(reg, &info);
        live++;
    }
    if (live == 0)
        printf("no live tensors\n");
}

static void cmd_tensor(repl_t *r, const char *arg, const char *count) {
    uint64_t want = 8;
    if (count != NULL) {
        char *e;
        errno = 0;
        want = strtoull(count, &e, 10);
        if (!isdigit((unsigned char)count[0]) || *e != '\0' || errno != 0 || want == 0)
            arg = NULL;
    }
    if (arg == NULL) {
        repl_error_line("usage: :tensor tN|NAME [N] (N: the elements shown, default 8)");
        return;
    }
    uint32_t n = bib_vm_tensor_regs(r->vm), reg = UINT32_MAX;
    char *end;
    if (arg[0] == 't' && isdigit((unsigned char)arg[1])) {
        unsigned long v = strtoul(arg + 1, &end, 10);
        if (*end == '\0')
            reg = (uint32_t)v;
    }
    /* Reading a register may copy it to the host: read each one once, so
       the executors shown are those before this command. */
    bib_tensor_reg_info_t info;
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++) {
        if (reg != UINT32_MAX && i != reg)
            continue;
        if (bib_vm_tensor_reg(r->vm, i, &info) != BIB_OK) {
            repl_error_line("%s", bib_vm_error(r->vm));
            return;
        }
        found = reg == i || (info.name != NULL && strcmp(info.name, arg) == 0);
        if (found)
            reg = i;
    }
    if (!found) {
        repl_error_line("no tensor register '%s' (the file has %" PRIu32 ")", arg, n);
        return;
    }
    if (!info.live) {
        printf("t%" PRIu32 " is empty\n", reg);
        return;
    }
    print_tensor_line(reg, &info);
    uint64_t show = info.count < want ? info.count : want;
    uint32_t elems[256];
    printf("[");
    for (uint64_t at = 0; at < show; at += 256) {
        uint64_t k = show - at < 256 ? show - at : 256;
        if (bib_vm_tensor_read(r->vm, reg, at, k, elems) != BIB_OK) {
            printf("]\n");
            repl_error_line("%s", bib_vm_error(r->vm));
            return;
        }
        for (uint64_t i = 0; i < k; i++) {
            const char *sep = at + i ? ", " : "";
            if (info.dtype == BIB_DTYPE_I32) {
                printf("%s%" PRId32, sep, (int32_t)elems[i]);
            } else {
                float f;
                memcpy(&f, &elems[i], sizeof f);
                printf("%s%.9g", sep, (double)f);
            }
        }
    }
    printf("%s]\n", info.count > show ? ", ..." : "");
}

static void cmd_break(repl_t *r, const char *arg, bool on) {
    if (arg == NULL) {
        if (!on) {
            clear_breaks(r);
            if (r->loaded)
                for (uint32_t pc = 0; pc < bib_vm_code_count(r->vm); pc++)
                    bib_vm_break(r->vm, pc, 0);
            printf("no breakpoints\n");
            return;
        }
        uint32_t pcs[256];
        uint32_t n = r->loaded ? bib_vm_breakpoints(r->vm, pcs, 256) : 0;
        if (n == 0)
            printf("no breakpoints\n");
        for (uint32_t i = 0; i < n && i < 256; i++) {
            char insn[256];
            bib_vm_insn_text(r->vm, pcs[i], insn, sizeof insn);
            printf("breakpoint at pc %" PRIu32 ": %s\n", pcs[i], insn);
        }
        return;
    }
    uint32_t pc;
    if (!r->loaded || !resolve_break(r, arg, &pc)) {
        repl_error_line("no pc, function or label '%s'", arg);
        return;
    }
    if (bib_vm_break(r->vm, pc, on) != BIB_OK) {
        repl_error_line("%s", bib_vm_error(r->vm));
        return;
    }
    if (on) {
        char **grown = realloc(r->breaks, (r->nbreaks + 1) * sizeof *grown);
        char *copy = strdup(arg);
        if (grown == NULL || copy == NULL) {
            free(copy);
            repl_error_line("host out of memory");
            return;
        }
        r->breaks = grown;
        r->breaks[r->nbreaks++] = copy;
    } else {
        for (size_t i = 0; i < r->nbreaks;) {
            uint32_t other;
            if (resolve_break(r, r->breaks[i], &other) && other == pc) {
                free(r->breaks[i]);
                r->breaks[i] = r->breaks[--r->nbreaks];
            } else {
                i++;
            }
        }
    }
    char insn[256];
    bib_vm_insn_text(r->vm, pc, insn, sizeof insn);
    printf("%s at pc %" PRIu32 ": %s\n", on ? "breakpoint" : "cleared breakpoint", pc, insn);
}

/* Loads a file as the session's program: fresh state, paused at its start
   (or not started yet when it needs inputs). Returns 0, or the exit code of
   the load's failure. */
static int load_file(repl_t *r, bib_vm_t *vm, const char *path) {
    bib_status_t st = bib_vm_load_file(vm, path);
    if (st != BIB_OK) {
        repl_error_line("%s", bib_vm_error(vm));
        return bib_cli_exit_code(st);
    }
    (void)r;
    for (uint32_t i = 0; i < bib_vm_tensor_count(vm); i++) {
        bib_tensor_info_t info;
        if (bib_vm_tensor_info(vm, i, &info) == BIB_OK && info.is_input)
            return 0; /* :input first, then :run */
    }
    st = bib_vm_start(vm);
    if (st != BIB_OK)
        repl_error_line("%s", bib_vm_error(vm));
    return 0;
}

/* :load FILE; returns 0, or the exit code of why the file was not loaded. */
static int cmd_load(repl_t *r, const char *path) {
    if (path == NULL) {
        repl_error_line("usage: :load FILE");
        return BIB_EXIT_USAGE;
    }
    uint8_t *text = NULL;
    size_t size = 0;
    int rc = bib_cli_read_file(path, &text, &size);
    if (rc != 0)
        return rc;
    rc = load_file(r, r->vm, path);
    if (rc != 0) {
        free(text);
        return rc;
    }
    reset_session(r);
    r->file = strdup(path);
    r->file_text = malloc(size + 1);
    r->file_size = size;
    if (r->file_text != NULL) {
        memcpy(r->file_text, text, size);
        r->file_text[size] = '\0';
    }
    free(text);
    r->loaded = true;
    bib_position_t pos;
    if (bib_vm_position(r->vm, &pos) == BIB_OK)
        print_position(r, "loaded");
    else
        printf("loaded %s: give its inputs with :input NAME=PATH.npy, then :run\n", path);
    return 0;
}

/* Starts the session's executor on a program of one empty tensor register,
 * in a VM of its own, so that an executor that cannot run here is refused
 * when it is named, not at the first tensor instruction. */
static bool probe_backend(repl_t *r) {
    static const char probe[] = ".tensors 1\n.func main regs=1\n    HALT r0\n.end\n";
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bool ok = bib_assemble(probe, sizeof probe - 1, "probe", &bytes, &size, &diag) == BIB_OK;
    bib_free(diag);
    bib_vm_t *vm = ok ? new_vm(r) : NULL;
    ok = vm != NULL && bib_vm_load(vm, bytes, size, "backend") == BIB_OK &&
         bib_vm_start(vm) == BIB_OK;
    if (!ok && vm != NULL)
        repl_error_line("%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    bib_free(bytes);
    return ok;
}

static void cmd_backend(repl_t *r, const char *name) {
    if (name == NULL) {
        printf("backend %s\n", r->backend);
        return;
    }
    char previous[64];
    snprintf(previous, sizeof previous, "%s", r->backend);
    snprintf(r->backend, sizeof r->backend, "%s", name);
    r->options.backend = r->backend;
    bool ok = probe_backend(r);
    bib_vm_t *vm = ok ? new_vm(r) : NULL;
    ok = vm != NULL;
    if (ok && r->file != NULL) {
        ok = bib_vm_load_file(vm, r->file) == BIB_OK;
        for (size_t i = 0; ok && i < r->ninputs; i++)
            ok = repl_give_input(vm, r->inputs[i]);
        if (ok && bib_vm_start(vm) != BIB_OK) {
            repl_error_line("%s", bib_vm_error(vm));
            ok = false;
        }
    } else if (ok && r->loaded) {
        bib_vm_t *old = r->vm;
        r->vm = vm;
        uint8_t *bytes = NULL;
        size_t size = 0;
        ok = repl_assemble(r, &bytes, &size);
        bib_status_t st = ok ? bib_vm_load(vm, bytes, size, "repl") : BIB_E_ASM;
        if (st == BIB_OK)
            st = bib_vm_start(vm);
        if (ok && st != BIB_OK) {
            repl_error_line("%s", bib_vm_error(vm));
            ok = false;
        }
        bib_free(bytes);
        r->vm = old;
    }
    if (!ok) {
        bib_vm_destroy(vm);
        snprintf(r->backend, sizeof r->backend, "%s", previous);
        r->options.backend = r->backend;
        return;
    }
    bib_vm_destroy(r->vm);
    r->vm = vm;
    repl_apply_breaks(r);
    printf("backend %s: state reset (:run runs the program again)\n", r->backend);
}

/* :call NAME ARG...: runs one function on a VM of its own, so the session's
   state stays as it was; prints what it returns. */
static void cmd_call(repl_t *r, const char *name, char **argv, int argc) {
    if (name == NULL) {
        repl_error_line(":call takes a function name and its arguments: :call NAME ARG...");
        return;
    }
    if (!r->loaded && r->file == NULL) {
        repl_error_line("nothing to call: type a .func block, or :load FILE");
        return;
    }
    bib_value_t args[64];
    if (argc > 64) {
        repl_error_line(":call takes at most 64 arguments");
        return;
    }
    for (int i = 0; i < argc; i++) {
        int bad = bib_cli_parse_arg(argv[i], &args[i]);
        if (bad != 0) {
            repl_error_line("argument %d '%s' %s", i + 1, argv[i],
                            bad == -2 ? "is outside the range of a 64-bit integer and of an f64"
                                      : "is not an integer (42, -7, 0x2a) or a number (2.5, 1e-3)");
            return;
        }
    }
    bib_vm_t *vm = new_vm(r);
    if (vm == NULL)
        return;
    bool ok;
    if (r->file != NULL) {
        ok = bib_vm_load_file(vm, r->file) == BIB_OK;
    } else {
        uint8_t *bytes = NULL;
        size_t size = 0;
        ok = repl_assemble(r, &bytes, &size) && bib_vm_load(vm, bytes, size, "repl") == BIB_OK;
        bib_free(bytes);
    }
    for (size_t i = 0; ok && i < r->ninputs; i++)
        ok = repl_give_input(vm, r->inputs[i]);
    /* A stepped run, so that Ctrl-C stops the call and not the session. */
    bib_status_t st = ok ? bib_vm_start_call(vm, name, args, (uint32_t)argc) : BIB_E_STATE;
    bib_stop_t stop = BIB_STOP_NONE;
    if (st == BIB_OK)
        st = resume_vm(r, vm, UINT64_MAX, &stop);
    repl_out_flush();
    bib_position_t pos;
    if (st == BIB_OK && stop == BIB_STOP_HALTED && bib_vm_position(vm, &pos) == BIB_OK)
        printf("%s = %" PRId64 " (0x%" PRIx64 ")\n", name, pos.exit_value,
               (uint64_t)pos.exit_value);
    else if (st == BIB_OK && r->interrupted)
        print_vm_position(vm, "interrupted by Ctrl-C");
    else if (*bib_vm_error(vm))
        repl_error_line("%s", bib_vm_error(vm));
    r->interrupted = false;
    bib_vm_destroy(vm);
}

static void cmd_trace(repl_t *r, const char *arg) {
    bib_trace_format_t f;
    if (arg != NULL && (strcmp(arg, "on") == 0 || strcmp(arg, "text") == 0))
        f = BIB_TRACE_TEXT;
    else if (arg != NULL && strcmp(arg, "json") == 0)
        f = BIB_TRACE_JSON;
    else if (arg != NULL && strcmp(arg, "off") == 0)
        f = BIB_TRACE_OFF;
    else {
        repl_error_line("usage: :trace on|off|json");
        return;
    }
    r->options.trace_format = f;
    bib_vm_set_trace(r->vm, f, NULL);
}

static void cmd_profile(repl_t *r, const char *arg) {
    if (arg == NULL) {
        if (!r->profile) {
            repl_error_line("profiling is off (:profile on)");
            return;
        }
        repl_out_flush();
        bib_vm_profile_write(r->vm, stdout, r->profile == 2);
        return;
    }
    bool on = strcmp(arg, "on") == 0 || strcmp(arg, "json") == 0;
    if (!on && strcmp(arg, "off") != 0) {
        repl_error_line("usage: :profile [on|off|json]");
        return;
    }
    r->profile = !on ? 0 : strcmp(arg, "json") == 0 ? 2 : 1;
    bib_vm_profile(r->vm, on);
}

bool repl_give_input(bib_vm_t *vm, const char *arg) {
    const char *eq = arg != NULL ? strchr(arg, '=') : NULL;
    if (eq == NULL || eq == arg || eq[1] == '\0') {
        repl_error_line("usage: :input NAME=PATH.npy");
        return false;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    char msg[600];
    bib_status_t st = bib_npy_set_input(vm, name, eq + 1, bib_cli_max_file_size, msg, sizeof msg);
    if (st != BIB_OK)
        repl_error_line(":input %s: %s", name, msg);
    return st == BIB_OK;
}

static void cmd_input(repl_t *r, const char *arg) {
    if (!repl_give_input(r->vm, arg))
        return;
    char **grown = realloc(r->inputs, (r->ninputs + 1) * sizeof *grown);
    char *copy = strdup(arg);
    if (grown == NULL || copy == NULL) {
        free(copy);
        repl_error_line("host out of memory");
        return;
    }
    r->inputs = grown;
    r->inputs[r->ninputs++] = copy;
}

static void cmd_list(repl_t *r) {
    if (r->file_text != NULL && r->file_size >= BIB_MAGIC_BYTES &&
        memcmp(r->file_text, BIB_MAGIC, BIB_MAGIC_BYTES) == 0) {
        /* A module: its disassembly, not its bytes. */
        char *text = NULL, *diag = NULL;
        if (bib_disassemble(r->file_text, r->file_size, &text, &diag) == BIB_OK)
            fputs(text, stdout);
        else
            repl_error_line("%s", diag != NULL ? diag : "cannot disassemble the module");
        bib_free(text);
        bib_free(diag);
        return;
    }
    if (r->file_text != NULL) {
        fwrite(r->file_text, 1, r->file_size, stdout);
        return;
    }
    gen_t g;
    if (repl_generate(r, &g, 0, false))
        fputs(g.text, stdout);
    repl_gen_free(&g);
}

static const char help_text[] =
    "Type an instruction to run it now, a label, a .func ... .end block or a\n"
    "directive to add it to the session. Commands:\n"
    "  :regs              registers of the current frame\n"
    "  :mem ADDR [N]      N bytes of linear memory from ADDR (default 64)\n"
    "  :tensors           live tensor registers\n"
    "  :tensor tN|NAME [N]  one tensor: shape, executor, hash, first N elements (8)\n"
    "  :load FILE         run FILE (.basm or .bib) in the session, paused at its start\n"
    "  :input NAME=PATH   give input tensor NAME from a .npy file\n"
    "  :break [PC|FUNC|LABEL]  set a breakpoint (none: list them)\n"
    "  :delete [PC|FUNC|LABEL] clear a breakpoint (none: all)\n"
    "  :step [N]          execute N instructions (default 1)\n"
    "  :continue          run to a breakpoint or the end\n"
    "  :run               start the program again from a fresh state\n"
    "  :where, :bt        the position, the call frames\n"
    "  :list              the session's source\n"
    "  :backend cpu|vulkan|cuda|auto  switch the tensor executor (restarts the state)\n"
    "  :complete LINE     what Tab offers at the end of LINE, one a line\n"
    "  :call NAME ARG...  run function NAME with these arguments on a fresh state\n"
    "                     (the session's is kept) and print what it returns\n"
    "  :trace on|off|json   trace executed instructions to stderr\n"
    "  :profile [on|off|json]  profile runs; no argument: show the profile\n"
    "  :reset             forget everything: an empty session\n"
    "  :help, :quit\n";

/* Runs one ':' command; returns false for :quit. */
static bool command(repl_t *r, char *line) {
    /* :complete takes the rest of the line as it is. */
    const char *complete_arg = NULL;
    if (strncmp(line, ":complete", 9) == 0 && (line[9] == ' ' || line[9] == '\t')) {
        complete_arg = line + 10;
        line[9] = '\0';
    }
    char *save = NULL;
    char *cmd = strtok_r(line + 1, " \t", &save);
    char *a = strtok_r(NULL, " \t", &save);
    char *b = strtok_r(NULL, " \t", &save);
    if (cmd == NULL || strcmp(cmd, "help") == 0 || strcmp(cmd, "h") == 0) {
        fputs(help_text, stdout);
    } else if (strcmp(cmd, "quit") == 0 || strcmp(cmd, "q") == 0) {
        return false;
    } else if (strcmp(cmd, "regs") == 0) {
        cmd_regs(r);
    } else if (strcmp(cmd, "mem") == 0) {
        cmd_mem(r, a, b);
    } else if (strcmp(cmd, "tensors") == 0) {
        cmd_tensors(r);
    } else if (strcmp(cmd, "tensor") == 0) {
        cmd_tensor(r, a, b);
    } else if (strcmp(cmd, "load") == 0) {
        cmd_load(r, a);
    } else if (strcmp(cmd, "input") == 0) {
        cmd_input(r, a);
    } else if (strcmp(cmd, "break") == 0 || strcmp(cmd, "b") == 0) {
        cmd_break(r, a, true);
    } else if (strcmp(cmd, "delete") == 0) {
        cmd_break(r, a, false);
    } else if (strcmp(cmd, "step") == 0 || strcmp(cmd, "s") == 0) {
        cmd_step(r, a, false);
    } else if (strcmp(cmd, "continue") == 0 || strcmp(cmd, "c") == 0) {
        cmd_step(r, NULL, true);
    } else if (strcmp(cmd, "run") == 0) {
        cmd_run(r);
    } else if (strcmp(cmd, "complete") == 0) {
        repl_cmd_complete(r, complete_arg != NULL ? complete_arg : "");
    } else if (strcmp(cmd, "call") == 0) {
        char *rest[65];
        int n = 0;
        if (b != NULL)
            rest[n++] = b;
        for (char *w; n < 65 && (w = strtok_r(NULL, " \t", &save)) != NULL;)
            rest[n++] = w;
        cmd_call(r, a, rest, n);
    } else if (strcmp(cmd, "where") == 0) {
        bib_position_t pos;
        static const char *const state[] = {"", "paused", "breakpoint", "halted", "trapped"};
        if (need_run(r) && bib_vm_position(r->vm, &pos) == BIB_OK)
            print_position(r, state[pos.stop]);
    } else if (strcmp(cmd, "bt") == 0) {
        cmd_backtrace(r);
    } else if (strcmp(cmd, "list") == 0) {
        cmd_list(r);
    } else if (strcmp(cmd, "backend") == 0) {
        cmd_backend(r, a);
    } else if (strcmp(cmd, "trace") == 0) {
        cmd_trace(r, a);
    } else if (strcmp(cmd, "profile") == 0) {
        cmd_profile(r, a);
    } else if (strcmp(cmd, "reset") == 0) {
        reset_session(r);
        bib_vm_t *vm = new_vm(r);
        if (vm != NULL) {
            bib_vm_destroy(r->vm);
            r->vm = vm;
        }
        printf("session reset\n");
    } else {
        repl_error_line("unknown command ':%s' (:help lists them)", cmd);
    }
    return true;
}

/* ---- input ---------------------------------------------------------------------------- */

/* Lines the history keeps (in memory and in its file). */
#define REPL_HISTORY_MAX 1000

/* $XDG_CACHE_HOME/bib/repl_history, else ~/.cache/bib/repl_history; NULL
   when neither can be made. */
static char *history_path(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    if (xdg != NULL && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/bib", xdg);
    else if (home != NULL && home[0] != '\0')
        snprintf(dir, sizeof dir, "%s/.cache/bib", home);
    else
        return NULL;
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    mkdir(dir, 0700);
    *slash = '/';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return NULL;
    size_t n = strlen(dir) + sizeof "/repl_history";
    char *path = malloc(n);
    if (path != NULL)
        snprintf(path, n, "%s/repl_history", dir);
    return path;
}

/* The next line without its newline (caller frees), or NULL at the end.
 * *nul_col is the column of the first NUL byte in it (0 when none), and
 * *too_long says it passed the file size cap: the bytes after the cap are
 * read and dropped, so no input grows the session past it. */
static char *read_line(repl_t *r, size_t *nul_col, bool *too_long) {
    *nul_col = 0;
    *too_long = false;
    if (r->tty) {
        char *line = readline(r->pending ? "...> " : "bib> ");
        if (line != NULL && line[0] != '\0') {
            add_history(line);
            /* Written at once, so that a session ended by a signal (Ctrl-C
               at the prompt) keeps its lines. */
            if (r->history != NULL)
                write_history(r->history);
        }
        return line;
    }
    uint64_t max = bib_file_cap(bib_cli_max_file_size);
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    int c;
    while (buf != NULL && (c = getchar()) != EOF && c != '\n') {
        if (c == '\0' && *nul_col == 0 && !*too_long)
            *nul_col = n + 1;
        if (n >= max) {
            *too_long = true;
            continue;
        }
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                free(buf);
                return NULL;
            }
            buf = grown;
            cap *= 2;
        }
        buf[n++] = (char)c;
    }
    if (buf == NULL || (n == 0 && c == EOF)) {
        free(buf);
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    return buf;
}

int bib_cli_repl(const bib_options_t *options, const char *file, int profile) {
    repl_t r;
    memset(&r, 0, sizeof r);
    r.options = *options;
    snprintf(r.backend, sizeof r.backend, "%s", options->backend ? options->backend : "cpu");
    r.options.backend = r.backend;
    r.profile = profile;
    r.tty = isatty(STDIN_FILENO) != 0;
    r.vm = new_vm(&r);
    if (r.vm == NULL)
        return BIB_EXIT_UNAVAILABLE;
    if (r.tty) {
        printf("%s\ntype :help for commands, :quit to leave\n", bib_build_info());
        r.history = history_path();
        stifle_history(REPL_HISTORY_MAX);
        if (r.history != NULL)
            read_history(r.history);
        repl_complete_attach(&r);
    }
    /* A FILE that cannot be loaded ends a scripted session with the
       load's exit status (as `bib run` would); a terminal's session stays. */
    if (file != NULL) {
        int rc = cmd_load(&r, file);
        if (rc != 0 && !r.tty) {
            bib_vm_destroy(r.vm);
            reset_session(&r);
            return rc;
        }
    }
    char *line;
    size_t nul_col;
    bool too_long;
    while ((line = read_line(&r, &nul_col, &too_long)) != NULL) {
        r.lineno++;
        if (nul_col != 0 || too_long) {
            /* The text after a NUL would be lost without a word: the line is
               refused whole, as a line that does not assemble is. */
            if (too_long)
                repl_error_line("repl:%u: the line is longer than the file size cap of %" PRIu64
                                " bytes; it is dropped",
                                r.lineno, bib_file_cap(bib_cli_max_file_size));
            else
                repl_error_line("repl:%u:%zu: a NUL byte in the line; it is dropped", r.lineno,
                                nul_col);
            free(line);
            repl_out_flush();
            continue;
        }
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        bool go_on = true;
        /* ':' starts a command everywhere, inside a .func block too (:reset
           abandons the block). */
        if (p[0] == ':')
            go_on = command(&r, line + (p - line));
        else
            repl_source_line(&r, line);
        free(line);
        repl_out_flush();
        if (!go_on)
            break;
    }
    if (r.pending != 0)
        repl_error_line("input ended inside %s", r.pending == 1 ? "a .func block" : "a directive");
    if (r.profile && r.loaded) {
        repl_out_flush();
        bib_vm_profile_write(r.vm, stderr, r.profile == 2);
    }
    free(r.history);
    bib_vm_destroy(r.vm);
    reset_session(&r);
    return 0;
}
