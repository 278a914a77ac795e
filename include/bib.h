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
 *   - Functions that can fail return bib_status_t. The VM or builder keeps a
 *     one-line message for the last failure: bib_vm_error / bib_builder_error.
 *   - Memory returned through an out-pointer (uint8_t **, char **) belongs to
 *     the caller, who releases it with bib_free.
 *   - There is no global mutable state: any number of VMs and builders can
 *     live in one process. One VM must not be used by two threads at once.
 */
#ifndef BIB_H
#define BIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BIB_VERSION_MAJOR 0
#define BIB_VERSION_MINOR 1
#define BIB_VERSION_PATCH 0
#define BIB_VERSION_STRING "0.1.0"

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
} bib_status_t;

/* Short name of a status ("trap", "format", ...). Never NULL. */
const char *bib_status_name(bib_status_t status);

/* Releases memory that the library handed to the caller. */
void bib_free(void *ptr);

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

typedef struct bib_options {
    uint64_t max_memory;     /* cap on VM memory in bytes; 0 means the default, 256 MiB */
    uint64_t fuel;           /* instructions a run may execute; 0 means unlimited */
    uint32_t max_call_depth; /* frames; 0 means the default, 10000 */
    bib_trace_format_t trace_format;
    FILE *trace; /* where the trace goes when trace_format is not OFF; NULL means stderr */
    const char *backend; /* tensor executor: "cpu" (default when NULL), "vulkan", "cuda", "auto" */
    const char *device;  /* GPU device selector (index or name substring); NULL: the best one */
    uint32_t threads;    /* CPU executor threads; 0 means one per core */
    int validation;      /* GPU executors: enable validation layers and extra checks */
} bib_options_t;

/* Fills *options with the defaults. */
void bib_options_init(bib_options_t *options);

/* ---- the VM ------------------------------------------------------------ */

typedef struct bib_vm bib_vm_t;

/* Creates a VM. options may be NULL for the defaults. The caller owns *out and
 * releases it with bib_vm_destroy. */
bib_status_t bib_vm_create(const bib_options_t *options, bib_vm_t **out);
void bib_vm_destroy(bib_vm_t *vm);

/* The message for the last failure on this VM ("" when none). The text stays
 * valid until the next call on the VM. */
const char *bib_vm_error(const bib_vm_t *vm);

/* Loads a module from bytes. The whole module is validated and verified before
 * this returns; nothing runs. The bytes are copied. name is used in messages
 * (may be NULL). Replaces any module loaded before. */
bib_status_t bib_vm_load(bib_vm_t *vm, const void *bytes, size_t size, const char *name);

/* Loads a .bib file, or assembles a .basm file (by extension, or when the file
 * does not start with the .bib magic) and loads the result. */
bib_status_t bib_vm_load_file(bib_vm_t *vm, const char *path);

/* Runs the loaded module's entry function from a fresh state: registers,
 * linear memory (re-initialised from the data section) and per-run memory are
 * reset each time. On BIB_OK, *exit_value (may be NULL) is the value given to
 * HALT or returned by the entry function. On BIB_E_TRAP, bib_vm_error names
 * the pc, the instruction, the source line when known, and the cause; the VM
 * stays usable. */
bib_status_t bib_vm_run(bib_vm_t *vm, int64_t *exit_value);

/* Counters from the last run. */
typedef struct bib_run_stats {
    uint64_t instructions; /* instructions executed */
    uint64_t peak_memory;  /* highest VM memory use in bytes */
} bib_run_stats_t;
void bib_vm_stats(const bib_vm_t *vm, bib_run_stats_t *stats);

/* The linear memory of the last (or current) run. *size receives its length.
 * Returns NULL before the first run. Valid until the next run, load or destroy. */
uint8_t *bib_vm_memory(bib_vm_t *vm, uint64_t *size);

/* ---- tensors ----------------------------------------------------------- */

typedef enum bib_dtype {
    BIB_DTYPE_F32 = 1,
    BIB_DTYPE_I32 = 2,
} bib_dtype_t;

#define BIB_MAX_RANK 4

/* A tensor the loaded module declares with .input, .output or .tensor. */
typedef struct bib_tensor_info {
    const char *name;
    int is_input, is_output, is_const;
    bib_dtype_t dtype; /* 0 for an output declared without a type */
    uint32_t rank;
    int64_t dims[BIB_MAX_RANK]; /* -1 for an open ('?') or symbolic dimension */
} bib_tensor_info_t;

/* The number of declared tensors, and each one's description (valid while the
 * module stays loaded). */
uint32_t bib_vm_tensor_count(const bib_vm_t *vm);
bib_status_t bib_vm_tensor_info(const bib_vm_t *vm, uint32_t index, bib_tensor_info_t *info);

/* Gives the value of input `name` for the following runs; the data (rank
 * dims, row-major, little-endian) is copied. A wrong dtype or a shape that does
 * not fit the declaration (or the sizes other inputs gave its symbolic
 * dimensions) is BIB_E_USAGE with a message naming the tensor, the expected
 * and the given shape. */
bib_status_t bib_vm_set_input(bib_vm_t *vm, const char *name, bib_dtype_t dtype, uint32_t rank,
                              const uint32_t *dims, const void *data);

/* After a run: the value of output `name`. *data points into the VM (valid
 * until the next run, load or destroy); the tensor is brought to the host
 * from whichever executor holds it. */
bib_status_t bib_vm_get_output(bib_vm_t *vm, const char *name, bib_dtype_t *dtype, uint32_t *rank,
                               uint32_t dims[BIB_MAX_RANK], const void **data);

/* ---- host functions ---------------------------------------------------- */

/* A host function receives the arguments of HOSTCALL and writes its result.
 * It returns BIB_OK, or another status after calling bib_vm_trap to say why;
 * the run then stops with a trap that names the HOSTCALL's pc. */
typedef bib_status_t (*bib_host_fn)(bib_vm_t *vm, void *user, const bib_value_t *args,
                                    uint32_t nargs, bib_value_t *result);

/* Registers (or replaces) a host function by name. A module's imports are
 * resolved by name when it is loaded; an unresolved import is a BIB_E_LINK
 * error naming it. Register before loading. */
bib_status_t bib_vm_register_host(bib_vm_t *vm, const char *name, bib_host_fn fn, void *user);

/* Registers the standard output functions, writing to out:
 *   print_i64(x)        the decimal integer and a newline
 *   print_u64(x)        the unsigned decimal integer and a newline
 *   print_f64(x)        the shortest decimal that reads back as the same f64, and a newline
 *   print_char(c)       one byte
 *   print_str(addr,len) len bytes of linear memory from addr (bounds-checked)
 * Each returns 0. */
bib_status_t bib_vm_register_stdio(bib_vm_t *vm, FILE *out);

/* For host functions: sets the message of the trap they are about to return.
 * printf-style. */
void bib_vm_trap(bib_vm_t *vm, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- opcodes ----------------------------------------------------------- */

/* The opcode word of a mnemonic ("ADD" -> 0x00020000), or -1 when unknown.
 * spec/isa.md lists every opcode, its operands and its meaning. */
int64_t bib_opcode(const char *mnemonic);

/* ---- emitting bytecode: the builder ------------------------------------ */

typedef struct bib_builder bib_builder_t;

/* Creates an empty module builder. The caller releases it with bib_builder_destroy. */
bib_builder_t *bib_builder_create(void);
void bib_builder_destroy(bib_builder_t *b);
const char *bib_builder_error(const bib_builder_t *b);

/* Names the source file for debug info (may be NULL). */
void bib_builder_source(bib_builder_t *b, const char *filename);
/* Sets the source line recorded for the instructions emitted after this call. */
void bib_builder_line(bib_builder_t *b, uint32_t line);

/* Declares a function and returns its id (its index in the module). A function
 * may be declared before it is defined, so calls can refer to it. The first
 * function named "main" is the entry; without one, function 0 is. */
uint32_t bib_builder_declare(bib_builder_t *b, const char *name);
/* Starts the body of a declared function. nargs arguments arrive in r0..;
 * nregs is the register count of its frame (nregs >= nargs, at least 1).
 * Bodies are laid out in declaration (function id) order. */
bib_status_t bib_builder_begin(bib_builder_t *b, uint32_t func, uint32_t nargs, uint32_t nregs);
/* Ends the current function body. */
bib_status_t bib_builder_end(bib_builder_t *b);

/* Labels: create one, then bind it to the next instruction emitted. */
uint32_t bib_builder_label(bib_builder_t *b);
bib_status_t bib_builder_bind(bib_builder_t *b, uint32_t label);

/* Imports a host function by name; returns its import id (deduplicated). */
uint32_t bib_builder_import(bib_builder_t *b, const char *name);
/* Adds a constant-pool entry; returns its index. */
uint32_t bib_builder_const_i64(bib_builder_t *b, int64_t value);
uint32_t bib_builder_const_f64(bib_builder_t *b, double value);

/* Emits one instruction. The operand words are taken as the opcode's operand
 * kinds say: a jump-target operand is a label id, a function operand a
 * function id, a host operand an import id, a constant operand a pool index.
 * Every other operand is the raw word. */
bib_status_t bib_builder_emit(bib_builder_t *b, uint32_t opcode, uint32_t a, uint32_t bb, uint32_t c,
                              uint32_t d);

/* Linear memory: its size in bytes, and initial contents at an offset. */
bib_status_t bib_builder_memory(bib_builder_t *b, uint64_t size);
bib_status_t bib_builder_data(bib_builder_t *b, uint64_t offset, const void *bytes, size_t size);

/* Tensors: declarations of named inputs and outputs and of constant tensors.
 * dims[] entries are sizes, BIB_DIM_ANY for an open dimension, or a value
 * from bib_builder_tensor_dim for a symbolic one (the same symbol must get the
 * same size from every input that uses it). A constant's data is element
 * count x 4-byte elements in host order. The tensor register file is as large
 * as the highest register named, unless bib_builder_tensor_regs says more. */
#define BIB_DIM_ANY (-1)
int64_t bib_builder_tensor_dim(bib_builder_t *b, const char *name); /* 0 on failure */
bib_status_t bib_builder_tensor_input(bib_builder_t *b, const char *name, uint32_t reg,
                                      bib_dtype_t dtype, uint32_t rank, const int64_t *dims);
bib_status_t bib_builder_tensor_output(bib_builder_t *b, const char *name, uint32_t reg,
                                       bib_dtype_t dtype, uint32_t rank, const int64_t *dims);
bib_status_t bib_builder_tensor_const(bib_builder_t *b, const char *name, uint32_t reg,
                                      bib_dtype_t dtype, uint32_t rank, const int64_t *dims,
                                      const void *data);
void bib_builder_tensor_regs(bib_builder_t *b, uint32_t count);

/* Resolves labels, checks the module, and writes the .bib bytes to *out
 * (caller frees with bib_free). The builder can be destroyed afterwards. */
bib_status_t bib_builder_finish(bib_builder_t *b, uint8_t **out, size_t *size);

/* ---- assembly text ----------------------------------------------------- */

/* Assembles .basm source. On success *out and *size hold the .bib bytes. On
 * BIB_E_ASM, *diagnostics holds every error found, one per line, written
 * "file:line:col: error: message" followed by the offending source line.
 * Either out-pointer result is the caller's to bib_free. filename is used in
 * messages and debug info. */
bib_status_t bib_assemble(const char *source, size_t length, const char *filename, uint8_t **out,
                          size_t *size, char **diagnostics);

/* Disassembles .bib bytes into .basm text that re-assembles to the same bytes.
 * On failure *diagnostics holds the reason. */
bib_status_t bib_disassemble(const void *bytes, size_t size, char **text, char **diagnostics);

/* ---- build features ---------------------------------------------------- */

/* One line describing the build: version, SIMD level, executors compiled in. */
const char *bib_build_info(void);

#ifdef __cplusplus
}
#endif
#endif
