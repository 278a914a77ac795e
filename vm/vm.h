/* vm/vm.h: the VM object and the interfaces between its parts (internal).
 *
 * Owns the layout of struct bib_vm, of the decoded program the interpreter
 * runs, and the calls between api.c (public API, loading, host functions),
 * decode.c (verified module -> decoded program), interp.c (dispatch loop)
 * and trace.c (instruction text, trace lines, trap messages). Embedders use
 * include/bib.h only.
 */
#ifndef BIB_VM_H
#define BIB_VM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "include/bib.h"
#include "isa/isa.h"
#include "module/module.h"
#include "vm/arena.h"
#include "vm/blocks.h"
#include "vm/collective.h"
#include "vm/devprog.h"
#include "vm/tensor.h"

#define BIB_CALL_DEPTH_DEFAULT 10000u

/* A host function as bound for one loaded module (one entry per import). */
typedef struct bib_host {
    bib_host_fn fn;
    void *user;
    const char *name; /* the import name, owned by the module */
} bib_host_t;

struct bib_dinsn;

/* A function of the decoded program. */
typedef struct bib_dfunc {
    const struct bib_dinsn *entry;
    uint32_t nregs;
    uint32_t nargs;
    uint32_t nzero; /* a call zeroes r[nargs..nzero): what may be read before written */
} bib_dfunc_t;

/* Superinstructions of the plain loop: an instruction fused with the one
 * after it, run in one dispatch. A compare whose result the next JZ/JNZ tests
 * writes its register and branches; an ADD, SUB or ADDI followed by JMP
 * (a loop latch) adds and jumps. Rows: X(fused name, first op, second op). */
#define BIB_FUSED_ROWS(X)                                                                          \
    X(EQ_JZ, EQ, JZ)                                                                               \
    X(EQ_JNZ, EQ, JNZ)                                                                             \
    X(NE_JZ, NE, JZ)                                                                               \
    X(NE_JNZ, NE, JNZ)                                                                             \
    X(LT_JZ, LT, JZ)                                                                               \
    X(LT_JNZ, LT, JNZ)                                                                             \
    X(LE_JZ, LE, JZ)                                                                               \
    X(LE_JNZ, LE, JNZ)                                                                             \
    X(LTU_JZ, LTU, JZ)                                                                             \
    X(LTU_JNZ, LTU, JNZ)                                                                           \
    X(LEU_JZ, LEU, JZ)                                                                             \
    X(LEU_JNZ, LEU, JNZ)                                                                           \
    X(FEQ_JZ, FEQ, JZ)                                                                             \
    X(FEQ_JNZ, FEQ, JNZ)                                                                           \
    X(FNE_JZ, FNE, JZ)                                                                             \
    X(FNE_JNZ, FNE, JNZ)                                                                           \
    X(FLT_JZ, FLT, JZ)                                                                             \
    X(FLT_JNZ, FLT, JNZ)                                                                           \
    X(FLE_JZ, FLE, JZ)                                                                             \
    X(FLE_JNZ, FLE, JNZ)                                                                           \
    X(ADD_JMP, ADD, JMP)                                                                           \
    X(SUB_JMP, SUB, JMP)                                                                           \
    X(ADDI_JMP, ADDI, JMP)

/* Loop latches: a JMP (alone, or fused with the ADD, SUB or ADDI before it)
 * whose target is a test, run together with that test, so that a while loop's
 * back edge and its exit test cost one dispatch. A test is an integer compare
 * fused with the JZ/JNZ after it (EQ_JZ .. LEU_JNZ) or a two-register branch
 * (JEQ .. JLEU), in that order (decode.c computes row indices from it).
 * Rows: X(lead, test), named L_<lead>_<test>. */
#define BIB_LATCH_TESTS(X, lead)                                                                   \
    X(lead, EQ_JZ)                                                                                 \
    X(lead, EQ_JNZ)                                                                                \
    X(lead, NE_JZ)                                                                                 \
    X(lead, NE_JNZ)                                                                                \
    X(lead, LT_JZ)                                                                                 \
    X(lead, LT_JNZ)                                                                                \
    X(lead, LE_JZ)                                                                                 \
    X(lead, LE_JNZ)                                                                                \
    X(lead, LTU_JZ)                                                                                \
    X(lead, LTU_JNZ)                                                                               \
    X(lead, LEU_JZ)                                                                                \
    X(lead, LEU_JNZ)                                                                               \
    X(lead, JEQ)                                                                                   \
    X(lead, JNE)                                                                                   \
    X(lead, JLT)                                                                                   \
    X(lead, JLE)                                                                                   \
    X(lead, JLTU)                                                                                  \
    X(lead, JLEU)
#define BIB_LATCH_TEST_COUNT 18
#define BIB_LATCH_ROWS(X)                                                                          \
    BIB_LATCH_TESTS(X, JMP) BIB_LATCH_TESTS(X, ADD) BIB_LATCH_TESTS(X, SUB) BIB_LATCH_TESTS(X, ADDI)

/* Forwarding superinstructions: an instruction whose result the next one
 * reads, run in one dispatch with that result kept in a machine register
 * instead of stored to the register file and loaded back. The first still
 * writes its register. The second reads the result as its left operand (L:
 * its b is the first's a), its right one (R: its c is the first's a), or
 * stores it (S: its a is the first's a). f64 results (ITOF's too) feed the
 * f64 arithmetic, integer results the integer arithmetic and ITOF, and
 * either kind a STORE or STOREX; a LOAD or LOADX feeds both kinds.
 * Rows: X(first op, second op, side), named F_<first>_<second>_<side>. */
#define BIB_FORWARD_F64(X, first)                                                                  \
    X(first, FADD, L)                                                                              \
    X(first, FADD, R)                                                                              \
    X(first, FSUB, L)                                                                              \
    X(first, FSUB, R)                                                                              \
    X(first, FMUL, L)                                                                              \
    X(first, FMUL, R)                                                                              \
    X(first, FDIV, L)                                                                              \
    X(first, FDIV, R)                                                                              \
    X(first, FADDK, L)                                                                             \
    X(first, FSUBK, L)                                                                             \
    X(first, FMULK, L)                                                                             \
    X(first, FDIVK, L)                                                                             \
    X(first, FRSUBK, L)                                                                            \
    X(first, FRDIVK, L)
#define BIB_FORWARD_INT(X, first)                                                                  \
    X(first, ADD, L)                                                                               \
    X(first, ADD, R)                                                                               \
    X(first, SUB, L)                                                                               \
    X(first, SUB, R)                                                                               \
    X(first, ADDI, L)                                                                              \
    X(first, MUL, L)                                                                               \
    X(first, MUL, R)                                                                               \
    X(first, MULI, L)                                                                              \
    X(first, DIVI, L)                                                                              \
    X(first, ITOF, L)
#define BIB_FORWARD_STORES(X, first)                                                               \
    X(first, STORE, S)                                                                             \
    X(first, STOREX, S)
/* The rows led by one first: an f64 result, an integer one, or a load's. */
#define BIB_FORWARD_FROM_F64(X, first)                                                             \
    BIB_FORWARD_F64(X, first)                                                                      \
    BIB_FORWARD_STORES(X, first)
#define BIB_FORWARD_FROM_INT(X, first)                                                             \
    BIB_FORWARD_INT(X, first)                                                                      \
    BIB_FORWARD_STORES(X, first)
#define BIB_FORWARD_FROM_LOAD(X, first)                                                            \
    BIB_FORWARD_F64(X, first)                                                                      \
    BIB_FORWARD_INT(X, first)                                                                      \
    BIB_FORWARD_STORES(X, first)
#define BIB_FORWARD_ROWS(X)                                                                        \
    BIB_FORWARD_FROM_F64(X, FADD)                                                                  \
    BIB_FORWARD_FROM_F64(X, FSUB)                                                                  \
    BIB_FORWARD_FROM_F64(X, FMUL)                                                                  \
    BIB_FORWARD_FROM_F64(X, FDIV)                                                                  \
    BIB_FORWARD_FROM_F64(X, FSQRT)                                                                 \
    BIB_FORWARD_FROM_F64(X, ITOF)                                                                  \
    BIB_FORWARD_FROM_INT(X, ADD)                                                                   \
    BIB_FORWARD_FROM_INT(X, SUB)                                                                   \
    BIB_FORWARD_FROM_INT(X, ADDI)                                                                  \
    BIB_FORWARD_FROM_INT(X, MUL)                                                                   \
    BIB_FORWARD_FROM_INT(X, MULI)                                                                  \
    BIB_FORWARD_FROM_INT(X, DIVI)                                                                  \
    BIB_FORWARD_FROM_LOAD(X, LOAD)                                                                 \
    BIB_FORWARD_FROM_LOAD(X, LOADX)

/* Dispatch indices of the plain loop: the opcodes, then the superinstructions. */
typedef enum bib_xop {
    BIB_XOP__FIRST_FUSED = BIB_OP__COUNT - 1,
#define BIB_FUSED_ENUM(name, ...) BIB_XOP_##name,
#define BIB_LATCH_ENUM(lead, test) BIB_XOP_L_##lead##_##test,
#define BIB_FORWARD_ENUM(first, second, side) BIB_XOP_F_##first##_##second##_##side,
    BIB_FUSED_ROWS(BIB_FUSED_ENUM) BIB_LATCH_ROWS(BIB_LATCH_ENUM) BIB_FORWARD_ROWS(BIB_FORWARD_ENUM)
#undef BIB_FUSED_ENUM
#undef BIB_LATCH_ENUM
#undef BIB_FORWARD_ENUM
        BIB_XOP__COUNT
} bib_xop_t;

/* One decoded instruction. decoded[pc] corresponds to module code[pc], so the
 * pc of a decoded instruction is its index. a..d are the raw operand words,
 * except that an FN operand's word holds the caller's register count (where
 * the callee's window starts). x holds the one operand that needs resolving,
 * chosen by operand kind:
 *   TGT          target: the decoded instruction jumped to
 *   IMM          imm: the word sign-extended to 64 bits (ADDI reads its
 *                immediate from the raw word c instead, so that x is free
 *                for ADDI_JMP; a branch, JEQI or LOOPLT, keeps its target
 *                in x and reads its immediate from its word; with two IMM
 *                words, STOREI's, x holds the later one, the offset c, and
 *                the value is read from word a)
 *   IMMLO+IMMHI  bits: the 64-bit immediate
 *   CONST        bits: the constant's value
 *   FN           func: the callee (FNREF: the function named)
 *   DIVISOR      imm, as IMM
 *   (CALLR)      imm: the caller's register count, where CALL keeps it in
 *                its FN word
 *   HOST         host: the bound host function
 * A superinstruction (xop != op) is the first instruction of its group; it
 * keeps its own operands and holds in x the second one's target, or for a
 * latch led by an ADD, SUB or ADDI the instruction after the test (the test
 * sits right before it; a JMP latch keeps its own target); a forwarding pair
 * keeps its own x, and its second instruction reads its own. Every later
 * instruction of the group keeps its own entry, so a jump that lands on one
 * runs it alone, and the instrumented loop runs op, never xop. */
typedef struct bib_dinsn {
    const void *handler; /* the plain loop's code for xop (interp.c fills it in) */
    uint16_t op;         /* bib_opcode_t: what every reader except the plain loop sees */
    uint16_t xop;        /* bib_xop_t: what the plain loop runs (op or a superinstruction) */
    uint32_t a, b, c, d;
    union {
        int64_t imm;
        uint64_t bits;
        const struct bib_dinsn *target;
        const bib_dfunc_t *func;
        const bib_host_t *host;
    } x;
} bib_dinsn_t;

/* The decoded form of a loaded module; lives in the VM's load arena. */
typedef struct bib_program {
    bib_dinsn_t *code;
    uint32_t code_count;
    uint32_t code_cap; /* code has room for this many (bib_decode_extension) */
    bib_dfunc_t *funcs;
    uint32_t func_count;
    bib_host_t *hosts;
    uint32_t host_count;
    const bib_dfunc_t *entry;
    uint32_t threaded; /* code[0..threaded) have their handler filled in */
} bib_program_t;

/* A frame record: what RET restores in the caller. */
typedef struct bib_frame {
    const bib_dinsn_t *ret; /* NULL for the entry function */
    uint64_t *regs;         /* the caller's register window */
    uint32_t dest;          /* caller register that receives the result */
} bib_frame_t;

/* Where a stepped run stands between calls; what the instrumented loop
 * starts from and saves back (interp.c). */
typedef struct bib_cursor {
    bib_stop_t stop;       /* BIB_STOP_NONE: no stepped run */
    const bib_dinsn_t *ip; /* paused: the next instruction; finished: the last one */
    uint64_t *R;           /* the current register window */
    bib_frame_t *fp;       /* the current frame record (vm->frames[depth - 1]) */
    uint64_t fuel;         /* fuel left */
    uint64_t fuel_start;   /* fuel at bib_vm_start less what tensor work has taken since
                              (the loop's fuel_base): fuel_start - fuel were executed */
    int64_t exit_value;    /* BIB_STOP_HALTED */
} bib_cursor_t;

/* Registered host functions (the registry outlives loads). */
typedef struct bib_host_entry {
    char *name;
    bib_host_fn fn;
    void *user;
} bib_host_entry_t;

struct bib_vm {
    bib_options_t options; /* defaults resolved: no zero means "default" left */
    FILE *trace;           /* where trace lines go */
    FILE *trace_owned;     /* a bib_write_fn stream for the trace, closed with the VM */
    FILE *output_owned;    /* a bib_write_fn stream for print_*, closed with the VM */

    bib_blocks_t blocks;    /* the memory cap and the blocks */
    bib_arena_t load_arena; /* decoded program: reset on every load */
    bib_arena_t run_arena;  /* register stack, frames: reset on every run */

    bib_host_entry_t *registry;
    uint32_t registry_count, registry_cap;

    bib_module_t *module; /* the loaded module, owned; NULL before a load */
    char *module_name;    /* for messages; owned */
    bib_program_t program;

    uint8_t *memory; /* linear memory (a large buffer charged to blocks) */
    uint64_t memory_size;
    bool memory_dirty; /* a run has written it since it was initialised */
    bool has_run;      /* bib_vm_memory returns NULL until a run */
    bool running;      /* inside bib_vm_run: host functions may not re-enter */

    /* Per-run stacks, owned by run_arena. */
    uint64_t *regs;
    uint64_t regs_cap; /* registers */
    bib_frame_t *frames;
    uint32_t frames_cap;

    bib_run_stats_t stats;

    /* The loop's fuel while a tensor or device opcode runs. The loop keeps
     * its counters in locals and hands them over around bib_tensor_exec,
     * which takes the work of the opcode beyond the unit its fetch took from
     * both (spec/cli.md, --fuel), or, when that work does not fit, gives the
     * unit back to left and traps without running the opcode. left: fuel
     * remaining. base: the run's fuel less what tensor work has taken, so
     * that base - left stays the instruction count. unrun: the opcode gave
     * its unit back (its trap is that fuel ran out; it did not run), so that
     * the trace and the profile leave it out too; the loop clears it. */
    struct {
        uint64_t left, base;
        bool unrun;
    } fuel;

    bib_tensor_state_t tensor;   /* tensor registers, storage, executors (tensor.c) */
    bib_devprog_state_t devprog; /* user shaders and kernels made on executors (devprog.c) */
    char *backend_name;          /* owned copies of options.backend, options.device and */
    char *device_name;           /* options.allow_hosts */
    char *allow_hosts;

    bib_cursor_t cursor;         /* a stepped run between calls (bib_vm_start .. step) */
    uint8_t *breaks;             /* per pc: nonzero where a breakpoint is; NULL when none */
    struct bib_profile *profile; /* NULL: profiling off (vm/profile.c) */

    char host_trap[256]; /* set by bib_vm_trap during a host call */
    bool host_trap_set;

    char *error; /* "" when none; heap, grows to fit */
    size_t error_cap;
};

/* ---- api.c -------------------------------------------------------------- */

/* options.c: *out = in's fields within in->size, defaults for the rest
   (in NULL: all defaults); BIB_E_USAGE for a size this library does not know. */
bib_status_t bib_options_take(const bib_options_t *in, bib_options_t *out);
/* options.c: a FILE whose bytes go to write(user, ...); closing it frees it. */
FILE *bib_stream_open(bib_write_fn write, void *user, int line_buffered);

/* Sets the VM's error text (printf-style) and returns status. */
bib_status_t bib_vm_fail(bib_vm_t *vm, bib_status_t status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bib_status_t bib_vm_failv(bib_vm_t *vm, bib_status_t status, const char *format, va_list ap);

/* Loads a module already in memory. Takes ownership of m whatever the
 * outcome. Verifies it (bib_module_verify), binds its imports to registered
 * host functions, pre-decodes it and sizes linear memory. name may be NULL. */
bib_status_t bib_vm_load_module(bib_vm_t *vm, bib_module_t *m, const char *name);

/* bib_vm_load of a file's bytes read by bib_file_read_pages: the pages behind
 * the module's constants go back to the system as they are copied
 * (bib_module_read_consuming), so a large model is not in memory twice while
 * it loads. The caller still frees the pages. */
bib_status_t bib_vm_load_consuming(bib_vm_t *vm, uint8_t *bytes, size_t size, const char *name);

/* ---- decode.c ------------------------------------------------------------ */

/* Pre-decodes a verified module into *out, allocating from arena, with room
 * for spare more instructions after its code. hosts has one binding per
 * import, in import order; it is copied. Fails only with BIB_E_NOMEM
 * (message in arena->blocks->error). */
bib_status_t bib_decode(const bib_module_t *m, const bib_host_t *hosts, uint32_t spare,
                        bib_arena_t *arena, bib_program_t *out);

/* Decodes what bib_module_verify_extension accepted in m: count instructions
 * inserted at pc at, ahead of the entry function's last instruction, which
 * moved to at + count. p holds m decoded before the insertion, with room for
 * it (p->code_cap), and the entry function's register count has not changed.
 * The groups are marked again around the new instructions. A latch whose
 * jump lands on them is not formed: groups only make the plain loop faster,
 * and every instruction gives the same result in a group or alone. */
void bib_decode_extension(const bib_module_t *m, uint32_t at, uint32_t count, bib_program_t *p);

/* ---- interp.c ------------------------------------------------------------ */

/* Runs the loaded program's entry function. The caller has reset the run
 * arena and initialised linear memory. Fills vm->stats.instructions. */
bib_status_t bib_interp_run(bib_vm_t *vm, int64_t *exit_value);

/* Points vm->cursor at the entry function's first instruction (registers and
 * frames as bib_vm_run prepared them). */
void bib_interp_begin(bib_vm_t *vm);
/* Runs the stepped run in vm->cursor through the instrumented loop: at most
 * budget instructions, stopping before a breakpoint (vm->breaks) unless it is
 * the first instruction. Saves the position back into vm->cursor. Returns
 * BIB_OK when paused or halted, the trap status otherwise. */
bib_status_t bib_interp_resume(bib_vm_t *vm, uint64_t budget);

/* ---- trace.c ------------------------------------------------------------- */

#define BIB_OPERAND_TEXT 300

/* The operands of the instruction at pc as assembly text, one string per
 * operand written (registers rN, immediates in signed decimal, LDI64 as one
 * value, targets L<pc>, functions and imports by name, constants kN).
 * Returns how many. The one place instructions are turned into text for
 * traces and trap messages. */
int bib_insn_operands(const bib_module_t *m, uint32_t pc, char out[4][BIB_OPERAND_TEXT]);
/* "MNEMONIC op, op, ..." of the instruction at pc. */
void bib_insn_format(const bib_module_t *m, uint32_t pc, char *buf, size_t cap);

/* A register's 64 bits as the f64 they hold, and back (registers hold
 * integers or f64 bit patterns). */
static inline double bib_f64_from_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline uint64_t bib_f64_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* Shortest decimal text that reads back to the same f64 (%.15g..%.17g). */
void bib_format_f64(double value, char *buf, size_t cap);

/* The status of a trap whose cause is a failure with status st (of an
 * executor, the block allocator): the memory cap (BIB_E_NOMEM) and the device
 * timeout (BIB_E_TIMEOUT) keep theirs, so the host can tell them apart;
 * anything else is BIB_E_TRAP. */
static inline bib_status_t bib_trap_status(bib_status_t st) {
    return st == BIB_E_NOMEM || st == BIB_E_TIMEOUT ? st : BIB_E_TRAP;
}

/* Sets the VM error to "trap at pc N (INSN) line L: <cause>" and returns
 * status (BIB_E_TRAP, BIB_E_NOMEM when a run ran out of memory, BIB_E_TIMEOUT
 * when device work ran past options.device_timeout_ms). */
bib_status_t bib_vm_trap_at(bib_vm_t *vm, bib_status_t status, uint32_t pc, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Trace lines, written to vm->trace in vm->options.trace_format. */
typedef enum bib_trace_write {
    BIB_TRACE_WRITE_DEST, /* the instruction wrote its RD operand: show it */
    BIB_TRACE_WRITE_NONE, /* nothing to show (CALL: the callee's frame starts) */
    BIB_TRACE_WRITE_RET,  /* RET: show the value returned */
    BIB_TRACE_WRITE_TRAP, /* the instruction trapped: say so, nothing written */
} bib_trace_write_t;
void bib_trace_step(bib_vm_t *vm, uint32_t pc, const uint64_t *regs, bib_trace_write_t kind,
                    uint64_t value);

/* ---- profile.c ----------------------------------------------------------- */

/* Monotonic host clock in nanoseconds. */
uint64_t bib_profile_now(void);
/* Starts a run's profile from zero. */
void bib_profile_reset(struct bib_profile *p);
/* The instrumented loop brackets every instruction: open before it runs,
   close once it has (then the executor of a tensor opcode is known). */
void bib_profile_open(bib_vm_t *vm, const bib_dinsn_t *ip);
/* The loop (re)starts: the time since the last close is not an instruction's. */
void bib_profile_resume(bib_vm_t *vm);
/* Closing a tensor or device instruction waits for the GPU executors' work,
   so that its time is the instruction's. When that wait runs past the device
   timeout, close sets the VM error to a trap at that instruction, points
   *trapped at it and returns BIB_E_TIMEOUT; with trapped NULL (a trap is
   already reported) it reports nothing. */
bib_status_t bib_profile_close(bib_vm_t *vm, const bib_dinsn_t **trapped);
/* The open instruction did not run after all (fuel ran out at its tensor
   work): it is not counted. */
void bib_profile_drop(bib_vm_t *vm);
/* Tensor code calls this around a copy between the host and place dev
   (down: to the host) that started at bib_profile_clock's t0; its time is
   taken out of the instruction that caused it. */
void bib_profile_copy(bib_vm_t *vm, int dev, bool down, uint64_t bytes, uint64_t t0);
static inline uint64_t bib_profile_clock(const bib_vm_t *vm) {
    return vm->profile != NULL ? bib_profile_now() : 0;
}
void bib_profile_destroy(struct bib_profile *p);

/* ---- debug.c ------------------------------------------------------------- */

/* A load or a fresh run ends any stepped run and (load) drops breakpoints. */
void bib_debug_unload(bib_vm_t *vm);

#endif
