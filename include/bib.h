/* bib.h: the public C API of libbib, the BIB bytecode virtual machine.
 *
 * This is the one header an embedder includes. It covers:
 *   - creating a VM with options, loading a module (bytes, .bib file or .basm
 *     source), running it, reading its results and its error text;
 *   - registering host functions that bytecode reaches through HOSTCALL;
 *   - emitting bytecode from a host compiler (bib_builder_*), and assembling
 *     or disassembling text.
 *
 * Conventions:
 *   - Functions that can fail return bib_status_t. The VM keeps a one-line
 *     message for the last failure (bib_vm_error); the builder keeps its
 *     first one (bib_builder_error), as described at bib_builder_create.
 *     The readers that take a const VM (bib_vm_tensor_info, bib_vm_position,
 *     bib_vm_frame, bib_vm_function_info, bib_vm_line_pc, bib_vm_insn_text,
 *     bib_vm_profile_row and the profile writers) say a bad index or state by
 *     their status alone: they leave the message as it was.
 *   - Memory returned through an out-pointer (uint8_t **, char **) belongs to
 *     the caller, who releases it with bib_free.
 *   - There is no global mutable state: any number of VMs and builders can
 *     live in one process. One VM must not be used by two threads at once.
 *   - Nothing needs a FILE *: every function that writes to a stream has a
 *     twin taking a bib_write_fn callback (or returning a string), for
 *     bindings that have no C stdio.
 *
 * Stability (libbib.so.0, until version 1.0 within one minor version; from
 * 1.0 on, for the whole major version):
 *   - Every BIB_API function keeps its signature and meaning; new functions
 *     are added, none removed.
 *   - bib_options_t only grows at its end. A host fills it with
 *     bib_options_init, which records the size it was compiled with in
 *     options.size; bib_vm_create takes the fields within that size and
 *     gives the rest their defaults, so a host built against an older bib.h
 *     keeps working with a newer library.
 *   - The structs of bib_info_gather's facts are filled by the library and
 *     versioned by their size field: they only grow at their end, and a host
 *     built against another bib.h reads what both know.
 *   - The other structs (bib_tensor_info_t, bib_run_stats_t, the debugging
 *     and profiling structs) are filled by the library and are not
 *     versioned: their layout may change in a new minor version before 1.0,
 *     and only with the soname (libbib.so.N) after it.
 *   - Status values and enum values keep their numbers; new ones are added
 *     at the end. Error message texts are for people and may change.
 *   - The bytecode format has its own version (spec/bib-format.md).
 *   - Symbols that are not declared here are internal: libbib.so exports
 *     only the BIB_API functions.
 */
#ifndef BIB_H
#define BIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions: the library is built with
 * -fvisibility=hidden, so nothing else leaves libbib.so. */
#if defined(__GNUC__) || defined(__clang__)
#define BIB_API __attribute__((visibility("default")))
#else
#define BIB_API
#endif

#define BIB_VERSION_MAJOR 0
#define BIB_VERSION_MINOR 5
#define BIB_VERSION_PATCH 0
#define BIB_VERSION_STRING "0.5.0"

typedef enum bib_status {
    BIB_OK = 0,
    BIB_E_USAGE,       /* an API argument or option is invalid */
    BIB_E_IO,          /* a file could not be read or written */
    BIB_E_FORMAT,      /* the module bytes are malformed */
    BIB_E_VERIFY,      /* the verifier rejected the module */
    BIB_E_ASM,         /* assembly source has errors */
    BIB_E_LINK,        /* an import names no registered host function */
    BIB_E_TRAP,        /* the program trapped while running */
    BIB_E_NOMEM,       /* the memory cap was reached, or the host is out of memory */
    BIB_E_UNAVAILABLE, /* an executor or device is not available */
    BIB_E_STATE,       /* the call does not fit the VM's state (run before load) */
    BIB_E_TIMEOUT,     /* a trap: device work ran past options.device_timeout_ms */
} bib_status_t;

/* Short name of a status ("trap", "format", ...). Never NULL. */
BIB_API const char *bib_status_name(bib_status_t status);

/* Releases memory that the library handed to the caller. */
BIB_API void bib_free(void *ptr);

/* Receives text the library writes (trace lines, print_* output): length
 * bytes at bytes, not NUL-terminated, in the order written. */
typedef void (*bib_write_fn)(void *user, const char *bytes, size_t length);

/* A register value: registers are 64 bits, read as integer or f64 by each opcode. */
typedef union bib_value {
    int64_t i;
    uint64_t u;
    double f;
} bib_value_t;

/* ---- options ---------------------------------------------------------- */

typedef enum bib_trace_format {
    BIB_TRACE_OFF = 0,
    BIB_TRACE_TEXT, /* one line per executed instruction */
    BIB_TRACE_JSON, /* JSON Lines, one object per executed instruction */
} bib_trace_format_t;

/* Elements of tensor work per unit of fuel beyond an opcode's first (see
 * bib_options_t.fuel): 4 KiB of f32, a few microseconds on one CPU core for
 * the slowest elementwise opcodes. */
#define BIB_FUEL_WORK_UNIT 1024

/* The largest file (module, source, included device code) the library reads
 * unless bib_options_t.max_file_size says otherwise, and the largest module an
 * assembly may produce: 1 GiB. A larger one is BIB_E_NOMEM. */
#define BIB_FILE_SIZE_CAP_DEFAULT ((uint64_t)1 << 30)

/* Options of a VM. Fill with bib_options_init, then set fields: a struct
 * not initialised that way has size 0 and bib_vm_create refuses it.
 * Fields are only ever appended (see Stability above). */
typedef struct bib_options {
    size_t size;             /* sizeof(bib_options_t) as the host compiled it; set by
                                bib_options_init, never by hand */
    uint64_t max_memory;     /* cap on VM memory in bytes; 0 means the default, 256 MiB.
                                Inputs count against it from bib_vm_set_input on. */
    uint64_t fuel;           /* work a run may do; 0 means unlimited. An instruction takes
                                one unit, so fuel N runs exactly N scalar instructions; a
                                tensor opcode takes 1 + floor(W / BIB_FUEL_WORK_UNIT), W
                                its elements read and written (multiply-adds for MATMUL,
                                LINEAR*, ATTENTION*), see spec/cli.md. When the run has
                                less left than an instruction takes, that instruction does
                                not run and the run traps "fuel exhausted" at its pc. */
    uint32_t max_call_depth; /* frames; 0 means the default, 10000 */
    bib_trace_format_t trace_format;
    FILE *trace;         /* where the trace goes when trace_format is not OFF; NULL means stderr */
    const char *backend; /* tensor executor: "cpu" (default when NULL), "vulkan", "cuda", "auto" */
    const char *device;  /* GPU device selector (index or name substring); NULL: the best one */
    uint32_t threads;    /* CPU executor threads; 0 means one per core */
    int validation;      /* GPU executors: enable validation layers and extra checks */
    int strict_device;   /* GPU_* opcodes without a CUDA device: fail (BIB_E_UNAVAILABLE)
                            instead of running them on the CPU executor with a warning */
    /* Since 0.2. */
    /* For modules the host did not write (spec/security.md). */
    uint32_t deny;              /* load policy: BIB_DENY_* bits; 0 denies nothing. Every load and
                                   reload refuses a module carrying what is denied (BIB_E_VERIFY,
                                   naming the section and the item); nothing of it runs */
    const char *allow_hosts;    /* load policy: NULL lets a module import any registered host
                                   function; otherwise the names it may import, separated by
                                   commas ("" allows none); an import outside the list is
                                   BIB_E_VERIFY at load. Copied by bib_vm_create */
    uint64_t device_timeout_ms; /* the longest one wait for GPU work may take; 0 means no
                                   limit. Past it the run traps with BIB_E_TIMEOUT at the
                                   instruction that waited, and that GPU executor is unusable
                                   in this VM from then on (device opcodes trap) */
    uint64_t max_file_size;     /* cap on a file bib_vm_load_file reads (and on the module
                                   it assembles from source); 0 means
                                   BIB_FILE_SIZE_CAP_DEFAULT */
    bib_write_fn trace_write;   /* when set, trace lines go here instead of to trace */
    void *trace_user;           /* passed to trace_write */
    /* New fields go here, at the end; a default other than zero goes in
       defaults() of vm/options.c. */
} bib_options_t;

/* bib_options_t.deny bits. */
#define BIB_DENY_DEVICE_CODE                                                                       \
    0x1u /* user device code: Vulkan shaders (section 17, VK_COMPUTE)                              \
            and CUDA kernels (section 18, GPU_LAUNCH) */

/* The smallest options.size bib_vm_create accepts: every field up to
 * strict_device. The fields after it (the load policy, the device timeout,
 * the file size cap, the trace callback, and those added later) take their
 * defaults when a host's struct ends before them. */
#define BIB_OPTIONS_SIZE_MIN (offsetof(bib_options_t, strict_device) + sizeof(int))

/* Fills the first size bytes of *options with the defaults and sets
 * options->size = size. Bindings that lay the struct out themselves call this
 * with their own size; C and C++ hosts call bib_options_init. */
BIB_API void bib_options_init_size(bib_options_t *options, size_t size);

/* Fills *options with the defaults, recording this header's struct size. */
static inline void bib_options_init(bib_options_t *options) {
    bib_options_init_size(options, sizeof *options);
}

/* ---- the VM ------------------------------------------------------------ */

typedef struct bib_vm bib_vm_t;

/* Creates a VM. options may be NULL for the defaults. The caller owns *out and
 * releases it with bib_vm_destroy. BIB_E_USAGE (and *out NULL) when
 * options->size is below BIB_OPTIONS_SIZE_MIN or above this library's
 * sizeof(bib_options_t) (options not made by bib_options_init, or a host
 * built against a newer bib.h than the library), or trace_format is unknown. */
BIB_API bib_status_t bib_vm_create(const bib_options_t *options, bib_vm_t **out);
/* Frees the VM and all it holds. Called from inside a run of that VM (by one
 * of its host functions) it does nothing: the run goes on, and the VM is
 * freed by the call its owner makes after the run. */
BIB_API void bib_vm_destroy(bib_vm_t *vm);

/* The message for the last failure on this VM ("" when none). The text stays
 * valid until the next call on the VM. */
BIB_API const char *bib_vm_error(const bib_vm_t *vm);

/* Loads a module from bytes. The whole module is validated and verified before
 * this returns; nothing runs. The bytes are copied. name is used in messages
 * (may be NULL). Replaces any module loaded before. */
BIB_API bib_status_t bib_vm_load(bib_vm_t *vm, const void *bytes, size_t size, const char *name);

/* Loads a .bib file, or assembles a .basm file (by extension, or when the file
 * does not start with the .bib magic) and loads the result. The path "-"
 * reads stdin, module or source by its first bytes. */
BIB_API bib_status_t bib_vm_load_file(bib_vm_t *vm, const char *path);

/* Runs the loaded module's entry function from a fresh state: registers,
 * linear memory (re-initialised from the data section) and per-run memory are
 * reset each time. On BIB_OK, *exit_value (may be NULL) is the value given to
 * HALT or returned by the entry function. On BIB_E_TRAP, bib_vm_error names
 * the pc, the instruction, the source line when known, and the cause; the VM
 * stays usable. Traps with a cause a host may want to tell apart have their
 * own status and the same message: BIB_E_NOMEM (the memory cap) and
 * BIB_E_TIMEOUT (options.device_timeout_ms). */
BIB_API bib_status_t bib_vm_run(bib_vm_t *vm, int64_t *exit_value);

/* Runs the loaded module's function `name` from a fresh state, as bib_vm_run
 * runs the entry function, with its first nargs registers set to args (each
 * 64 bits: an integer in .i, a float in .f). nargs must be what the
 * function's `.func NAME args=N` declares. On BIB_OK, *result (may be NULL)
 * is the value it returned or gave HALT. No such function, or another
 * count, is BIB_E_USAGE with a message naming the function and its args=;
 * traps are as for bib_vm_run. */
BIB_API bib_status_t bib_vm_call(bib_vm_t *vm, const char *name, const bib_value_t *args,
                                 uint32_t nargs, int64_t *result);

/* Counters from the last run. */
typedef struct bib_run_stats {
    uint64_t instructions; /* instructions executed */
    uint64_t peak_memory;  /* highest VM memory use in bytes */
    uint64_t fuel;         /* fuel used: instructions plus the tensor work charged beyond
                              one unit per instruction (bib_options_t.fuel) */
} bib_run_stats_t;
BIB_API void bib_vm_stats(const bib_vm_t *vm, bib_run_stats_t *stats);

/* The linear memory of the last (or current) run. *size receives its length.
 * Returns NULL before the first run. Valid until the next run, load or destroy. */
BIB_API uint8_t *bib_vm_memory(bib_vm_t *vm, uint64_t *size);

/* ---- tensors ----------------------------------------------------------- */

typedef enum bib_dtype {
    BIB_DTYPE_F32 = 1,
    BIB_DTYPE_I32 = 2,
} bib_dtype_t;

#define BIB_MAX_RANK 6

/* A tensor the loaded module declares with .input, .output or .tensor. */
typedef struct bib_tensor_info {
    const char *name;
    int is_input, is_output, is_const;
    bib_dtype_t dtype; /* 0 for an output declared without a type */
    uint32_t rank;
    int64_t dims[BIB_MAX_RANK];          /* -1 for an open ('?') or symbolic dimension */
    const char *dim_names[BIB_MAX_RANK]; /* a symbolic dimension's name, else NULL */
} bib_tensor_info_t;

/* The number of declared tensors, and each one's description (valid while the
 * module stays loaded). */
BIB_API uint32_t bib_vm_tensor_count(const bib_vm_t *vm);
BIB_API bib_status_t bib_vm_tensor_info(const bib_vm_t *vm, uint32_t index,
                                        bib_tensor_info_t *info);

/* Gives the value of input `name` for the following runs; the data (rank
 * dims, row-major, little-endian) is copied. A wrong dtype or a shape that does
 * not fit the declaration (or the sizes that inputs given since the last run
 * began gave its symbolic dimensions) is BIB_E_USAGE with a message naming the
 * tensor, the expected and the given shape. Inputs kept from an earlier run
 * are checked when the next run begins: to give A[M,K] and B[K,N] a new K,
 * set both, in either order; a run with only one of them given anew is
 * refused, naming the other. */
BIB_API bib_status_t bib_vm_set_input(bib_vm_t *vm, const char *name, bib_dtype_t dtype,
                                      uint32_t rank, const uint32_t *dims, const void *data);

/* bib_vm_set_input for data that is still to be read: once the shape fits the
 * declaration and the input fits the memory cap (max_memory, less the other
 * inputs given), fill(ctx, data, bytes) writes the input's bytes into the
 * VM's own buffer, so nothing is read that the cap refuses and no copy is
 * made. fill returns 0 when it wrote them all; otherwise the input keeps its
 * previous value and the result is BIB_E_IO (the caller knows why). An input
 * over the cap is BIB_E_NOMEM. */
typedef int (*bib_input_fill_fn)(void *ctx, void *data, size_t bytes);
BIB_API bib_status_t bib_vm_set_input_fill(bib_vm_t *vm, const char *name, bib_dtype_t dtype,
                                           uint32_t rank, const uint32_t *dims,
                                           bib_input_fill_fn fill, void *ctx);

/* After a run: the value of output `name`. *data points into the VM (valid
 * until the next run, load or destroy); the tensor is brought to the host
 * from whichever executor holds it. */
BIB_API bib_status_t bib_vm_get_output(bib_vm_t *vm, const char *name, bib_dtype_t *dtype,
                                       uint32_t *rank, uint32_t dims[BIB_MAX_RANK],
                                       const void **data);

/* ---- host functions ---------------------------------------------------- */

/* A host function receives the arguments of HOSTCALL and writes its result.
 * It returns BIB_OK, or another status after calling bib_vm_trap to say why;
 * the run then stops with a trap that names the HOSTCALL's pc. */
typedef bib_status_t (*bib_host_fn)(bib_vm_t *vm, void *user, const bib_value_t *args,
                                    uint32_t nargs, bib_value_t *result);

/* Registers (or replaces) a host function by name. A module's imports are
 * resolved by name when it is loaded; an unresolved import is a BIB_E_LINK
 * error naming it, so register before loading. Replacing a function the
 * loaded module imports takes effect at once: its next HOSTCALL calls the
 * new function with the new user pointer, and the old ones are not used
 * again (a host may free them). */
BIB_API bib_status_t bib_vm_register_host(bib_vm_t *vm, const char *name, bib_host_fn fn,
                                          void *user);

/* Registers the standard output functions, writing to out:
 *   print_i64(x)        the decimal integer and a newline
 *   print_u64(x)        the unsigned decimal integer and a newline
 *   print_f64(x)        the shortest decimal that reads back as the same f64, and a newline
 *   print_f64(x,digits) x with digits (0..40) digits after the point, rounded as C's
 *                       "%.*f" rounds (print_f64(1/3.0, 9) prints 0.333333333), and a
 *                       newline; digits outside 0..40 is a trap
 *   print_char(c)       one byte
 *   print_str(addr,len) len bytes of linear memory from addr (bounds-checked)
 * Each returns 0. */
BIB_API bib_status_t bib_vm_register_stdio(bib_vm_t *vm, FILE *out);
/* The same functions, writing through write(user, ...) instead of a FILE.
 * Either call replaces the output functions registered before, in the loaded
 * module too (as bib_vm_register_host does). */
BIB_API bib_status_t bib_vm_register_output(bib_vm_t *vm, bib_write_fn write, void *user);

/* For host functions: sets the message of the trap they are about to return.
 * printf-style. */
BIB_API void bib_vm_trap(bib_vm_t *vm, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- opcodes ----------------------------------------------------------- */

/* The opcode word of a mnemonic ("ADD" -> 0x00020000), or -1 when unknown.
 * spec/isa.md lists every opcode, its operands and its meaning. */
BIB_API int64_t bib_opcode(const char *mnemonic);

/* ---- emitting bytecode: the builder ------------------------------------ */

typedef struct bib_builder bib_builder_t;

/* Creates an empty module builder. The caller releases it with bib_builder_destroy.
 * Every call on a NULL builder does nothing and returns BIB_E_USAGE, the id
 * UINT32_MAX, or 0 (bib_builder_tensor_dim).
 * A builder's first failure sticks: bib_builder_error keeps its message ("" while
 * there is none), later calls go on as usual (each returns its own status),
 * and bib_builder_finish fails with that first failure's status, so a host
 * compiler may check once at the end. */
BIB_API bib_builder_t *bib_builder_create(void);
BIB_API void bib_builder_destroy(bib_builder_t *b);
BIB_API const char *bib_builder_error(const bib_builder_t *b);

/* Names the source file for debug info (may be NULL). */
BIB_API void bib_builder_source(bib_builder_t *b, const char *filename);
/* Sets the source line recorded for the instructions emitted after this call. */
BIB_API void bib_builder_line(bib_builder_t *b, uint32_t line);

/* Declares a function and returns its id (its index in the module). A function
 * may be declared before it is defined, so calls can refer to it. The first
 * function named "main" is the entry; without one, function 0 is. */
BIB_API uint32_t bib_builder_declare(bib_builder_t *b, const char *name);
/* Starts the body of a declared function. nargs arguments arrive in r0..;
 * nregs is the register count of its frame (nregs >= nargs, at least 1).
 * Bodies are laid out in declaration (function id) order. */
BIB_API bib_status_t bib_builder_begin(bib_builder_t *b, uint32_t func, uint32_t nargs,
                                       uint32_t nregs);
/* Ends the current function body. */
BIB_API bib_status_t bib_builder_end(bib_builder_t *b);

/* Labels: create one, then bind it to the next instruction emitted. */
BIB_API uint32_t bib_builder_label(bib_builder_t *b);
BIB_API bib_status_t bib_builder_bind(bib_builder_t *b, uint32_t label);

/* Imports a host function by name; returns its import id (deduplicated). */
BIB_API uint32_t bib_builder_import(bib_builder_t *b, const char *name);
/* Adds a constant-pool entry; returns its index. */
BIB_API uint32_t bib_builder_const_i64(bib_builder_t *b, int64_t value);
BIB_API uint32_t bib_builder_const_f64(bib_builder_t *b, double value);

/* Emits one instruction. The operand words are taken as the opcode's operand
 * kinds say: a jump-target operand is a label id, a function operand a
 * function id, a host operand an import id, a constant operand a pool index.
 * Every other operand is the raw word. */
BIB_API bib_status_t bib_builder_emit(bib_builder_t *b, uint32_t opcode, uint32_t a, uint32_t bb,
                                      uint32_t c, uint32_t d);

/* Linear memory: its size in bytes, and initial contents at an offset. */
BIB_API bib_status_t bib_builder_memory(bib_builder_t *b, uint64_t size);
BIB_API bib_status_t bib_builder_data(bib_builder_t *b, uint64_t offset, const void *bytes,
                                      size_t size);

/* Tensors: declarations of named inputs and outputs and of constant tensors.
 * dims[] entries are sizes, BIB_DIM_ANY for an open dimension, or a value
 * from bib_builder_tensor_dim for a symbolic one (the same symbol must get the
 * same size from every input that uses it). A constant's data is element
 * count x 4-byte elements in host order. The tensor register file is as large
 * as the highest register named, unless bib_builder_tensor_regs says more. */
#define BIB_DIM_ANY (-1)
BIB_API int64_t bib_builder_tensor_dim(bib_builder_t *b, const char *name); /* 0 on failure */
BIB_API bib_status_t bib_builder_tensor_input(bib_builder_t *b, const char *name, uint32_t reg,
                                              bib_dtype_t dtype, uint32_t rank,
                                              const int64_t *dims);
BIB_API bib_status_t bib_builder_tensor_output(bib_builder_t *b, const char *name, uint32_t reg,
                                               bib_dtype_t dtype, uint32_t rank,
                                               const int64_t *dims);
BIB_API bib_status_t bib_builder_tensor_const(bib_builder_t *b, const char *name, uint32_t reg,
                                              bib_dtype_t dtype, uint32_t rank, const int64_t *dims,
                                              const void *data);
BIB_API void bib_builder_tensor_regs(bib_builder_t *b, uint32_t count);

/* Resolves labels, checks the module, and writes the .bib bytes to *out
 * (caller frees with bib_free). The builder can be destroyed afterwards. A
 * builder makes one module (its code and data move into it): finishing it
 * again fails with BIB_E_STATE. */
BIB_API bib_status_t bib_builder_finish(bib_builder_t *b, uint8_t **out, size_t *size);

/* ---- assembly text ----------------------------------------------------- */

/* Assembles .basm source. On success *out and *size hold the .bib bytes. On
 * BIB_E_ASM, *diagnostics holds every error found, one per line, written
 * "file:line:col: error: message" followed by the offending source line.
 * Either out-pointer result is the caller's to bib_free. filename is used in
 * messages and debug info. */
BIB_API bib_status_t bib_assemble(const char *source, size_t length, const char *filename,
                                  uint8_t **out, size_t *size, char **diagnostics);

/* bib_assemble with a cap on the module's size (0 means
 * BIB_FILE_SIZE_CAP_DEFAULT, which bib_assemble uses): data (.zero, .align,
 * .tensor and the other data directives) that would pass it is refused
 * before any memory is taken for it, with BIB_E_NOMEM and a diagnostic at its
 * line. */
BIB_API bib_status_t bib_assemble_capped(const char *source, size_t length, const char *filename,
                                         uint64_t max_size, uint8_t **out, size_t *size,
                                         char **diagnostics);

/* Disassembles .bib bytes into .basm text that re-assembles to the same bytes.
 * On failure *diagnostics holds the reason: the loader's status for bytes it
 * refuses, and BIB_E_FORMAT for a module text cannot express (two functions
 * sharing one name). */
BIB_API bib_status_t bib_disassemble(const void *bytes, size_t size, char **text,
                                     char **diagnostics);

/* ==== debugging and profiling (vm/debug.c, vm/profile.c) ================ */
/* Everything from here to the matching end marker belongs to the stepping,
 * inspection and profiling API that `bib repl` and `--profile` are built on. */

/* Why a stepped run returned control. */
typedef enum bib_stop {
    BIB_STOP_NONE = 0,   /* no stepped run (never started, or ended by a load or bib_vm_run) */
    BIB_STOP_PAUSED,     /* paused: just started, or the step count was reached */
    BIB_STOP_BREAKPOINT, /* paused before an instruction that has a breakpoint */
    BIB_STOP_HALTED,     /* finished: HALT, or RET from the entry function */
    BIB_STOP_TRAPPED,    /* finished with a trap; bib_vm_error says why */
} bib_stop_t;

/* Stepped runs. bib_vm_start begins a run from a fresh state, as bib_vm_run
 * does, and executes nothing. bib_vm_step and bib_vm_continue execute it
 * piecewise; between calls the run is paused and the functions below read
 * its state. Breakpoints only stop stepped runs. A load, bib_vm_run or a new
 * bib_vm_start ends a stepped run. Trace and profile options apply. */
BIB_API bib_status_t bib_vm_start(bib_vm_t *vm);
/* Executes at most count instructions. Returns BIB_OK when the run paused or
 * halted and the trap's status (BIB_E_TRAP, BIB_E_NOMEM, BIB_E_TIMEOUT) when it trapped;
 * *stop (may be NULL) says which. On a finished run: BIB_E_STATE. */
BIB_API bib_status_t bib_vm_step(bib_vm_t *vm, uint64_t count, bib_stop_t *stop);
/* Runs until a breakpoint, the end or a trap. The instruction the run is
 * paused at executes even when it has a breakpoint, so continuing moves on. */
BIB_API bib_status_t bib_vm_continue(bib_vm_t *vm, bib_stop_t *stop);

/* Sets (on != 0) or clears the breakpoint at pc of the loaded module. A load
 * clears every breakpoint. */
BIB_API bib_status_t bib_vm_break(bib_vm_t *vm, uint32_t pc, int on);
/* Writes up to cap breakpoint pcs, ascending, to pcs; returns how many there are. */
BIB_API uint32_t bib_vm_breakpoints(const bib_vm_t *vm, uint32_t *pcs, uint32_t cap);

/* Where a stepped run is. */
typedef struct bib_position {
    bib_stop_t stop;
    uint32_t pc;    /* paused: the next instruction; finished: the last one executed */
    uint32_t depth; /* call frames: 1 in the entry function */
    uint32_t func;  /* the function containing pc */
    const char *func_name;
    uint32_t line;         /* source line of pc; 0 when unknown */
    uint64_t instructions; /* executed since bib_vm_start */
    int64_t exit_value;    /* BIB_STOP_HALTED: the value given to HALT or returned */
} bib_position_t;
/* BIB_E_STATE when there is no stepped run. */
BIB_API bib_status_t bib_vm_position(const bib_vm_t *vm, bib_position_t *pos);

/* One call frame of a stepped run: level 0 is the innermost, depth - 1 the
 * entry function's. regs points into the VM and is valid until the run
 * moves on or ends. */
typedef struct bib_frame_info {
    uint32_t pc; /* the innermost frame: as bib_position_t; callers: their CALL */
    uint32_t func;
    const char *func_name;
    uint32_t line;
    uint32_t nregs;
    const bib_value_t *regs;
} bib_frame_info_t;
BIB_API bib_status_t bib_vm_frame(const bib_vm_t *vm, uint32_t level, bib_frame_info_t *info);

/* The loaded module's functions, lines and instruction text. */
typedef struct bib_function_info {
    const char *name;
    uint32_t entry, count; /* first pc and instruction count */
    uint32_t nargs, nregs;
} bib_function_info_t;
BIB_API uint32_t bib_vm_function_count(const bib_vm_t *vm);
BIB_API bib_status_t bib_vm_function_info(const bib_vm_t *vm, uint32_t index,
                                          bib_function_info_t *info);
/* The index of the function called name, or -1. */
BIB_API int64_t bib_vm_function_find(const bib_vm_t *vm, const char *name);
BIB_API uint32_t bib_vm_code_count(const bib_vm_t *vm);
/* The source line recorded for pc (0 when unknown). */
BIB_API uint32_t bib_vm_pc_line(const bib_vm_t *vm, uint32_t pc);
/* The first pc recorded at line, or failing that at the nearest later line
 * of the same function; BIB_E_USAGE when no instruction has such a line. */
BIB_API bib_status_t bib_vm_line_pc(const bib_vm_t *vm, uint32_t line, uint32_t *pc);
/* "MNEMONIC op, op" of the instruction at pc, as traces print it. */
BIB_API bib_status_t bib_vm_insn_text(const bib_vm_t *vm, uint32_t pc, char *buf, size_t cap);

/* A tensor register of the current (or last) run. */
typedef struct bib_tensor_reg_info {
    int live; /* the rest is meaningful only when live */
    bib_dtype_t dtype;
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
    uint64_t count;     /* elements */
    const char *name;   /* the declaration naming the register, or NULL */
    char executors[64]; /* executors holding a valid copy, e.g. "cpu" or "cpu,vulkan" */
    uint64_t hash;      /* what THASH gives for it */
} bib_tensor_reg_info_t;
/* The size of the tensor register file (0 before a run). */
BIB_API uint32_t bib_vm_tensor_regs(const bib_vm_t *vm);
/* Describes t[reg]. Hashing reads the value on the host: a tensor valid only
 * on a device is copied back once (as TGET would); nothing else changes. */
BIB_API bib_status_t bib_vm_tensor_reg(bib_vm_t *vm, uint32_t reg, bib_tensor_reg_info_t *info);
/* Copies count elements (4 bytes each, little-endian) of t[reg] from element
 * first into dst; BIB_E_USAGE when the range is outside the tensor. */
BIB_API bib_status_t bib_vm_tensor_read(bib_vm_t *vm, uint32_t reg, uint64_t first, uint64_t count,
                                        void *dst);

/* For interactive sessions (bib repl): replaces the loaded module with the
 * .bib bytes while keeping a stepped run's state (the entry frame's
 * registers, linear memory, tensor registers, given inputs) and leaves the
 * run paused at instruction `offset` of the new entry function (0 is its
 * first; offsets stay put when code is added after them). The run must
 * be paused, halted or trapped; a run paused inside a call (depth > 1) is
 * BIB_E_STATE, a finished one is unwound to its entry frame. New registers
 * start at zero; linear memory takes the new size; data bytes that differ
 * from the old module's are written into it. Breakpoints are cleared. On
 * failure nothing changes. */
BIB_API bib_status_t bib_vm_reload(bib_vm_t *vm, const void *bytes, size_t size, const char *name,
                                   uint32_t offset);

/* Changes the trace format of the following runs and steps; out (NULL:
 * keep the current stream) is where the lines go. */
BIB_API bib_status_t bib_vm_set_trace(bib_vm_t *vm, bib_trace_format_t format, FILE *out);
/* The same, the lines going through write(user, ...); write NULL: stderr. */
BIB_API bib_status_t bib_vm_set_trace_writer(bib_vm_t *vm, bib_trace_format_t format,
                                             bib_write_fn write, void *user);

/* Profiling: with on != 0, every following run (bib_vm_run or stepped)
 * counts, per opcode and per executor, executions and host time (monotonic
 * clock), and the copies between host and devices. Each run starts from
 * zero. Off (the default) costs nothing. */
BIB_API bib_status_t bib_vm_profile(bib_vm_t *vm, int on);
typedef struct bib_profile_row {
    const char *op;       /* mnemonic, or "upload" / "download" */
    const char *executor; /* "vm" for scalar opcodes, else the executor ("cpu", "vulkan", "host") */
    uint64_t count;
    double seconds; /* total host time */
    uint64_t flops; /* MATMUL, LINEAR*, ATTENTION*: floating-point operations; else 0 */
    uint64_t bytes; /* tensor kernels and copies: bytes read and written; else 0 */
} bib_profile_row_t;
/* Rows of the last run, by total time, longest first. */
BIB_API uint32_t bib_vm_profile_rows(const bib_vm_t *vm);
BIB_API bib_status_t bib_vm_profile_row(const bib_vm_t *vm, uint32_t index, bib_profile_row_t *row);
/* Writes the profile of the last run as a table (json == 0) or one JSON
 * object (spec/cli.md gives both formats). */
BIB_API bib_status_t bib_vm_profile_write(const bib_vm_t *vm, FILE *out, int json);
/* The same text as a string in *text, the caller's to bib_free. */
BIB_API bib_status_t bib_vm_profile_report(const bib_vm_t *vm, int json, char **text);

/* ==== end of debugging and profiling ===================================== */

/* ---- build features ---------------------------------------------------- */

/* One line describing the build: version, SIMD level, executors compiled in. */
BIB_API const char *bib_build_info(void);

/* ---- what this machine offers: the facts of `bib info` ----------------- */

/* What this machine offers BIB, gathered once: the CPU (model, cores,
 * memory, SIMD features and the kernel level chosen), every executor with
 * its devices and the numerics paths each gets (or why it has none),
 * --backend=auto's cost model of each with what it picks for small and
 * large work, and the MPI libraries a run under a launcher would load. `bib info` prints these
 * facts (spec/cli.md); a host reads them with the functions below.
 *
 * The structs below are filled by the library and versioned by their first
 * field: the host sets size to the sizeof it compiled
 * (`bib_info_cpu_t cpu = {.size = sizeof cpu};`), the library fills the fields
 * within it, and zeroes those it does not know (a host built against a newer
 * bib.h reads them as unknown: NULL or 0). A size below the struct's
 * size in 0.4.0 (or in the version that added it) is BIB_E_USAGE. Fields are only ever appended.
 * Every string belongs to the bib_info_t and stays valid until bib_info_free. */
typedef struct bib_info bib_info_t;

/* Gathers the facts: starts every executor on each of its devices in turn,
 * and the default one (options->device) for auto's model, read from the
 * cache under $XDG_CACHE_HOME/bib or else measured (about a second per
 * executor, then cached). options selects threads and device (may be
 * NULL). The caller owns *out and releases it with bib_info_free.
 * BIB_E_USAGE when options->size is not one bib_vm_create accepts. */
BIB_API bib_status_t bib_info_gather(const bib_options_t *options, bib_info_t **out);
BIB_API void bib_info_free(bib_info_t *info);

/* The host CPU. */
typedef struct bib_info_cpu_s {
    size_t size;                     /* sizeof(bib_info_cpu_t) as the host compiled it */
    const char *model;               /* /proc/cpuinfo's model name, or why it is unknown */
    uint32_t cores_online;           /* cores the system has online (0: unknown) */
    uint32_t cores_usable;           /* cores this process may run on (its affinity) */
    uint64_t memory_total_bytes;     /* 0 where /proc/meminfo does not say */
    uint64_t memory_available_bytes; /* 0 where /proc/meminfo does not say */
    uint32_t feature_count;
    const char *const *features; /* the SIMD features the cpu executor can use ("avx2",
                                    "fma"...), by CPUID */
    int os_saves_ymm;            /* the OS saves the AVX registers on a switch */
    int os_saves_zmm;            /* the OS saves the AVX-512 registers on a switch */
    int kernel_level_ok;         /* kernel_level names the level the cpu executor runs at;
                                    0: it says why there is none (BIB_CPU_LEVEL names a
                                    level the executor cannot use) */
    const char *kernel_level;    /* "scalar", "avx2", "avx512", or why there is none */
    const char *best_level;      /* the best level this CPU supports; NULL when unknown */
} bib_info_cpu_t;
BIB_API bib_status_t bib_info_cpu(const bib_info_t *info, bib_info_cpu_t *cpu);

/* One executor: "cpu" first, then the GPU executors in auto's order of
 * preference (CUDA before Vulkan), then those this library was built
 * without (built 0). */
typedef struct bib_info_executor_s {
    size_t size;           /* sizeof(bib_info_executor_t) as the host compiled it */
    const char *name;      /* "cpu", "cuda", "vulkan" */
    int built;             /* compiled into this library; 0: absent says why not */
    uint32_t device_count; /* the devices it started on, read with bib_info_device */
    const char *absent;    /* why it has no device here; NULL when device_count > 0 */
    /* --backend=auto's cost model of its default device: */
    int measured;            /* the model below is known */
    int cached;              /* read from the cache rather than measured by this gather */
    int cpu_device;          /* a GPU executor whose device is the CPU (lavapipe): auto
                                never picks it for speed */
    double overhead_s;       /* seconds per kernel call */
    double flops_per_s;      /* sustained MATMUL rate */
    double transfer_s;       /* seconds per copy between the host and the device (0: cpu) */
    double bytes_per_s;      /* copy bandwidth (0: cpu) */
    const char *model_error; /* why there is no model although there are devices (the
                                default device failed to start, measuring failed); NULL
                                when measured or absent */
} bib_info_executor_t;
BIB_API uint32_t bib_info_executor_count(const bib_info_t *info);
BIB_API bib_status_t bib_info_executor(const bib_info_t *info, uint32_t index,
                                       bib_info_executor_t *executor);

/* Device index of executor number executor: what it is and how it computes.
 * A string is "" and a number 0 where the executor does not know. */
typedef struct bib_info_device_s {
    size_t size;                  /* sizeof(bib_info_device_t) as the host compiled it */
    const char *describe;         /* one line: the device and its numerics paths */
    int has_facts;                /* the executor reports the fields below one by one */
    const char *name;             /* the device's name */
    const char *kind;             /* "discrete GPU", "integrated GPU", "CPU" (the cpu, lavapipe) */
    const char *fma;              /* how fma is computed: "native (fused, probed)"... */
    const char *denormals;        /* "preserved (probed)", "flushed"... */
    const char *rounding;         /* "nearest-even (probed)"... */
    int fp64;                     /* 1: the device computes f64 */
    uint64_t memory_bytes;        /* device memory (the cpu: the machine's) */
    uint64_t max_buffer_bytes;    /* the largest buffer a tensor may take */
    uint32_t max_workgroup;       /* threads in one workgroup (block) at most */
    uint64_t shared_memory_bytes; /* workgroup (block) shared memory */
    uint32_t compute_units;       /* SMs (CUDA) */
    uint32_t max_threads;         /* the cpu executor's thread cap (--threads) */
    uint32_t loop_limit;          /* loop iterations one shader invocation may run, as the
                                     start-up probe found it (lavapipe: 65535); 0: none found.
                                     A call that could loop more runs on the cpu executor */
} bib_info_device_t;
BIB_API bib_status_t bib_info_device(const bib_info_t *info, uint32_t executor, uint32_t index,
                                     bib_info_device_t *device);

/* What --backend=auto picks for a square MATMUL with operands on the host,
 * small and large, and the work from which a GPU executor overtakes the cpu. */
typedef struct bib_info_placement_s {
    size_t size;                      /* sizeof(bib_info_placement_t) as the host compiled it */
    uint32_t small_n;                 /* the small work: MATMUL small_n^3 */
    const char *small_executor;       /* what auto runs it on */
    uint32_t large_n;                 /* the large work: MATMUL large_n^3 */
    const char *large_executor;       /* what auto runs it on */
    const char *threshold_executor;   /* the GPU executor that overtakes the cpu at the least
                                         work; NULL: none does, auto runs everything on the cpu */
    double threshold_flops_from_host; /* MATMUL work (flops) from which it does, counting the
                                         copies of the operands from the host */
    double threshold_flops_resident;  /* the same with the operands already on it */
} bib_info_placement_t;
BIB_API bib_status_t bib_info_placement(const bib_info_t *info, bib_info_placement_t *placement);

/* An MPI library a run under an MPI launcher would load (spec/scale-out.md),
 * found without starting MPI: $BIB_MPI_LIBRARY's alone when it is set, else
 * Open MPI's (selected by mpirun) and the MPICH ABI's (selected by Hydra's
 * mpiexec), in that order. Since 0.5.0. */
typedef struct bib_info_mpi_s {
    size_t size;          /* sizeof(bib_info_mpi_t) as the host compiled it */
    const char *launcher; /* what selects it: "mpirun (Open MPI)", "mpiexec (Hydra)",
                             "$BIB_MPI_LIBRARY" */
    const char *library;  /* the file it loads by (or the first name tried) */
    const char *abi;      /* "Open MPI" or "MPICH" (the MPICH ABI: MPICH, Intel MPI, Cray
                             MPICH, MVAPICH); NULL when it cannot be used */
    const char *version;  /* the first line of its MPI_Get_library_version; NULL when
                             it cannot be used */
    const char *absent;   /* why it cannot be used; NULL when it can */
    int selected;         /* this process's environment selects it (a launcher started it,
                             or $BIB_MPI_LIBRARY names it) */
} bib_info_mpi_t;
BIB_API uint32_t bib_info_mpi_count(const bib_info_t *info);
BIB_API bib_status_t bib_info_mpi(const bib_info_t *info, uint32_t index, bib_info_mpi_t *mpi);

#ifdef __cplusplus
}
#endif
#endif
