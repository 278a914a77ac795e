/* module/module.h: a module in memory, and the functions that read, write and
 * verify the .bib container (spec/bib-format.md).
 *
 * The container is the contract between the assembler, which writes modules,
 * and the VM, which runs them: both include this directory (module/), which
 * depends on isa/ alone.
 *
 * A bib_module_t owns every array it points to; bib_module_free releases them.
 * The reader returns only modules that passed the verifier, so everything past
 * the loader may trust every index and target in them.
 */
#ifndef BIB_MODULE_H
#define BIB_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"
#include "isa/isa.h"
#include "module/names.h"

/* File format version this build writes, and the versions it reads. */
#define BIB_FORMAT_MAJOR 1
#define BIB_FORMAT_MINOR 0

/* Section types (spec/bib-format.md). */
typedef enum bib_section_type {
    BIB_SEC_CODE = 1,
    BIB_SEC_CONST = 2,
    BIB_SEC_DATA = 3,
    BIB_SEC_SYMBOLS = 4,
    BIB_SEC_DEBUG = 5,
    BIB_SEC_LABELS = 6,
    BIB_SEC_TENSORS = 16,
    BIB_SEC_SHADERS = 17,
    BIB_SEC_KERNELS = 18,
} bib_section_type_t;

/* Limits the verifier enforces, so sizes never overflow downstream. */
#define BIB_MAX_CODE (1u << 24) /* instructions */
#define BIB_MAX_REGS 65536u     /* registers per frame */
#define BIB_MAX_FUNCS (1u << 20)
#define BIB_MAX_CONSTS (1u << 24)
#define BIB_MAX_IMPORTS 65536u
#define BIB_MAX_MEMORY (1ull << 40) /* declared linear memory, bytes */
#define BIB_MAX_NAME 255u           /* bytes in a symbol name */
#define BIB_MAX_HOST_ARGS 16u       /* arguments a HOSTCALL may pass */

/* Container layout constants (spec/bib-format.md). */
#define BIB_MAGIC                                                                                  \
    "\x7f"                                                                                         \
    "BIB" /* the first 4 bytes of every .bib file */
#define BIB_MAGIC_BYTES 4u
#define BIB_HEADER_BYTES 32u
#define BIB_SECTION_ENTRY_BYTES 16u
#define BIB_MAX_SECTIONS 64u /* entries in the section table */
/* Section flag: a reader that does not know the section's type must fail. */
#define BIB_SECTION_REQUIRED 1u
#define BIB_MAX_SOURCE_NAME 4095u /* bytes in the debug source file name */

/* A code label's name and the pc it marks. */
typedef struct bib_label {
    uint32_t pc;
    char *name; /* owned */
} bib_label_t;

typedef enum bib_const_type {
    BIB_CONST_I64 = 1,
    BIB_CONST_F64 = 2,
} bib_const_type_t;

typedef struct bib_const {
    uint32_t type; /* bib_const_type_t */
    uint64_t bits; /* the integer, or the f64 bit pattern */
} bib_const_t;

typedef struct bib_function {
    char *name;     /* NUL-terminated, owned */
    uint32_t entry; /* first instruction index */
    uint32_t count; /* instructions in the body; bodies tile the code section in order */
    uint32_t nargs;
    uint32_t nregs; /* nargs <= nregs, 1 <= nregs <= BIB_MAX_REGS */
} bib_function_t;

/* A named or constant tensor that the module declares (.input, .output,
 * .tensor). Dimensions: >= 0 fixed; BIB_DIM_ANY ('?') matches any size;
 * BIB_DIM_SYMBOL(i) is the symbolic size dim_names[i], which must be the same
 * wherever it appears among the inputs. */
/* BIB_DIM_ANY (-1) comes from include/bib.h. */
#define BIB_DIM_SYMBOL(i) (-2 - (int64_t)(i))
#define BIB_DIM_SYMBOL_INDEX(d) ((uint32_t)(-2 - (d)))
#define BIB_MAX_TENSOR_REGS 65536u
#define BIB_MAX_TENSOR_DIM 0x7FFFFFFF

enum {
    BIB_TENSOR_INPUT = 1u << 0,  /* set by the host before the run */
    BIB_TENSOR_OUTPUT = 1u << 1, /* read by the host after the run */
    BIB_TENSOR_CONST = 1u << 2,  /* initialised from init[] at the start of each run */
};

typedef struct bib_tensor_decl {
    char *name;     /* owned; unique among the module's declarations */
    uint32_t reg;   /* tensor register, < tensor_regs */
    uint32_t flags; /* BIB_TENSOR_*: INPUT and CONST exclude each other */
    uint32_t dtype; /* bib_dtype_t; 0 for an output that takes what the register holds */
    uint32_t rank;  /* 0..BIB_MAX_RANK (an output without a declared shape: rank 0, dtype 0) */
    int64_t dims[BIB_MAX_RANK]; /* see above; CONST tensors have fixed dims only */
    uint8_t *init;              /* CONST: numel * 4 bytes, little-endian elements; NULL otherwise */
    uint64_t init_size;
} bib_tensor_decl_t;

/* User device code (spec/device-code.md). A compute shader for VK_COMPUTE:
 * SPIR-V words, the storage-buffer bindings 0..bindings-1 it declares in
 * descriptor set 0, and its push-constant block size. */
#define BIB_MAX_SHADERS 4096u
#define BIB_MAX_SHADER_BINDINGS 16u /* storage buffers per shader */
#define BIB_MAX_PUSH_BYTES 128u     /* the push-constant size every Vulkan device offers */
#define BIB_MAX_SPIRV_WORDS (1u << 24)
#define BIB_SPIRV_MAGIC 0x07230203u
#define BIB_SPIRV_HEADER_WORDS 5u

typedef struct bib_shader_decl {
    char *name;          /* owned; unique among the module's shaders */
    char *entry;         /* owned: the entry point, usually "main" */
    uint32_t bindings;   /* 1..BIB_MAX_SHADER_BINDINGS */
    uint32_t push_bytes; /* 0..BIB_MAX_PUSH_BYTES, a multiple of 4 */
    uint32_t *spirv;     /* owned, words host-endian */
    uint32_t words;
} bib_shader_decl_t;

/* A CUDA kernel for GPU_LAUNCH: PTX text, its entry (the .entry name), and
 * the parameter signature, one letter per kernel parameter in order:
 * t (tensor: device pointer), i (32-bit integer), l (64-bit integer),
 * f (binary32), d (binary64). */
#define BIB_MAX_KERNELS 4096u
#define BIB_MAX_KERNEL_PARAMS 32u
#define BIB_MAX_PTX_BYTES (1u << 26)

typedef struct bib_kernel_decl {
    char *name;         /* owned; unique among the module's kernels */
    char *entry;        /* owned */
    char *params;       /* owned signature, "" when the kernel takes none */
    char *ptx;          /* owned, NUL-terminated, no NUL inside */
    uint32_t ptx_bytes; /* without the terminating NUL */
} bib_kernel_decl_t;

typedef struct bib_module {
    bib_insn_t *code;
    uint32_t code_count;
    /* Per instruction, its opcode decoded once: the dense index of its row
       (bib_opcode_t), BIB_OP__COUNT for a word no row has. bib_module_verify
       fills it first; NULL until then. Read it with bib_module_op. */
    uint16_t *ops;

    bib_const_t *consts;
    uint32_t const_count;

    uint8_t *data; /* initial bytes of linear memory, placed at offset 0 */
    uint32_t data_size;
    uint64_t memory_size; /* linear memory size in bytes, >= data_size */

    bib_function_t *funcs;
    uint32_t func_count;
    uint32_t entry_func;

    char **imports; /* host-function names, owned */
    uint32_t import_count;

    char *source_name; /* debug: may be NULL */
    uint32_t *lines;   /* debug: source line per instruction (0 = unknown); NULL when absent */

    /* Code label names (section BIB_SEC_LABELS, optional), ascending by pc
       and then by name. */
    bib_label_t *labels;
    uint32_t label_count;

    /* Tensors (section BIB_SEC_TENSORS, present when tensor_regs > 0). */
    uint32_t tensor_regs; /* size of the tensor register file; TD/TS/TM operands are below it */
    bib_tensor_decl_t *tensors;
    uint32_t tensor_count;
    char **dim_names; /* symbolic dimension names, owned */
    uint32_t dim_name_count;

    /* User device code (sections BIB_SEC_SHADERS and BIB_SEC_KERNELS). */
    bib_shader_decl_t *shaders;
    uint32_t shader_count;
    bib_kernel_decl_t *kernels;
    uint32_t kernel_count;

    /* Room grown ahead by bib_module_reserve (0: just the count): code,
       lines and ops hold code_room instructions, consts const_room entries,
       labels label_room. */
    uint32_t code_room, const_room, label_room;

    /* The entry function's labels by name, to their pcs: built on first use
       by bib_module_entry_label and kept up by bib_module_add_labels (the
       REPL's lines); empty until then. */
    bib_names_t entry_labels;
    int entry_labels_built;

    /* The constant pool by value, for bib_module_const_find; empty until its
       first use, forgotten when the pool loses entries. */
    bib_const_index_t const_index;

    /* What the tensor liveness check found at the entry function's last
       instruction (verify.c), for bib_module_verify_extension; NULL when no
       check has run since the code last changed other than by it. */
    struct bib_liveness_tail *liveness_tail;
} bib_module_t;

/* Where a diagnostic comes from, and its one-line message. */
typedef struct bib_diag {
    char msg[512];
} bib_diag_t;

/* printf into diag->msg (no-op when diag is NULL). Returns BIB_E_... given. */
bib_status_t bib_diag_set(bib_diag_t *diag, bib_status_t status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Parses and verifies .bib bytes. On success *out is a verified module the
 * caller releases with bib_module_free. On failure returns BIB_E_FORMAT or
 * BIB_E_VERIFY and diag says what and where (byte offset, or pc). Never reads
 * outside bytes[0..size). */
bib_status_t bib_module_read(const uint8_t *bytes, size_t size, bib_module_t **out,
                             bib_diag_t *diag);

/* bib_module_read of bytes in a private anonymous mapping of the caller's
 * (bib_file_read_pages) that it will not read again: the whole pages behind
 * each tensor's data go back to the system once the data is copied (they
 * read as zeros after), so a module's constants are never in memory twice.
 * The caller still unmaps bytes, on success or failure. */
bib_status_t bib_module_read_consuming(uint8_t *bytes, size_t size, bib_module_t **out,
                                       bib_diag_t *diag);

/* Serialises a module (verified or not) to .bib bytes; *out is malloc'd. */
bib_status_t bib_module_write(const bib_module_t *m, uint8_t **out, size_t *size, bib_diag_t *diag);

/* Verifies a module built in memory: every opcode known and implemented,
 * every operand of the right kind and in range, every target inside its
 * function, functions tiling the code, no fall-through off a function's end.
 * First decodes every opcode word once into m->ops (which the module owns);
 * the verifier, the pre-decoder, traces and the disassembler then read the
 * index, never the table. */
bib_status_t bib_module_verify(bib_module_t *m, bib_diag_t *diag);

/* Verifies a change to a module that passed bib_module_verify, giving the
 * verdict bib_module_verify gives the whole module, in time that grows with
 * the change rather than the module (the REPL's lines). The change: count
 * instructions inserted at pc at, ahead of the last instruction of the
 * entry function, which is the module's last function; label_count labels
 * to mark pc at, checked here and added by the caller after (with
 * bib_module_add_labels); constants appended
 * from index first_const on; the entry function's register count and the
 * tensor register file grown or kept. Nothing else may differ. Liveness is
 * checked again over the module when the new instructions name a tensor
 * register, branch, or may call the entry function. */
bib_status_t bib_module_verify_extension(bib_module_t *m, uint32_t at, uint32_t count,
                                         uint32_t first_const, const char *const *labels,
                                         uint32_t label_count, bib_diag_t *diag);

/* The one decode of an instruction's opcode: the dense index of the row of
 * instruction pc, or -1 for a word no row has. From m->ops once the module
 * is verified; a module not verified yet is looked up in the table. */
static inline int bib_module_op(const bib_module_t *m, uint32_t pc) {
    if (m->ops != NULL)
        return m->ops[pc] < BIB_OP__COUNT ? (int)m->ops[pc] : -1;
    return bib_isa_find_code(m->code[pc].op);
}

/* The row of instruction pc, which must be a known opcode (verified). */
static inline const bib_opinfo_t *bib_module_info(const bib_module_t *m, uint32_t pc) {
    return &bib_isa_table[bib_module_op(m, pc)];
}

/* The function containing instruction pc (binary search); the module must be verified. */
uint32_t bib_module_func_at(const bib_module_t *m, uint32_t pc);

/* The highest tensor register that an instruction of code[0..count) (by its
 * operand kinds) or a declaration of decls[0..ndecls) names, + 1; 0 when none
 * does. The builder sizes the register file with it, and the disassembler
 * writes .tensors only when a module's count differs from it. Unknown opcodes
 * name nothing. */
uint64_t bib_module_tensor_regs_named(const bib_insn_t *code, uint32_t count,
                                      const bib_tensor_decl_t *decls, uint32_t ndecls);

/* Releases m and every array it points to with free(): the struct and its
 * arrays must come from malloc (as bib_module_read's do). NULL is a no-op. */
void bib_module_free(bib_module_t *m);

/* Makes room for code instructions (code, lines and ops, where present),
 * consts constants and labels labels, growing each array to twice what it
 * held at least, so that a module grown a line at a time (the REPL's) is
 * copied a bounded number of times. Returns BIB_E_NOMEM when memory runs
 * out; m says the same as before either way. */
bib_status_t bib_module_reserve(bib_module_t *m, uint32_t code, uint32_t consts, uint32_t labels);

/* Adds n labels, copies of names, all marking pc, which no label of m
 * passes: the labels section keeps its order (by pc, then by name). Returns
 * BIB_E_NOMEM, m unchanged, when memory runs out. */
bib_status_t bib_module_add_labels(bib_module_t *m, uint32_t pc, const char *const *names,
                                   uint32_t n);

/* What the tensor liveness check (verify.c) found at the entry function's
 * last instruction, for bib_module_verify_extension to go on from when
 * straight-line code is inserted ahead of it. */
enum { BIB_LV_COMPLETE, BIB_LV_GAVE_UP, BIB_LV_UNTRACKED };
typedef struct bib_liveness_tail {
    int verdict;      /* BIB_LV_COMPLETE; _GAVE_UP: out of work; _UNTRACKED: too many states */
    int reached;      /* the last instruction's block is reached */
    uint32_t regs;    /* tensor registers state and named cover */
    uint8_t *state;   /* per tensor register: its state before the last instruction */
    uint8_t *named;   /* per tensor register: the function names it */
    uint8_t ghost;    /* before the last instruction: a register neither named nor set at start */
    uint32_t nlocal;  /* registers the function names */
    uint32_t nblocks; /* its blocks */
    uint64_t work;    /* the liveness check's work over the module (the entry function last) */
    uint64_t visits, tail_visits; /* the function's blocks processed; of them, its last */
} bib_liveness_tail_t;
void bib_liveness_tail_free(bib_liveness_tail_t *t);

/* The first label naming pc (the labels ascend by pc, then by name), or -1
 * when none does (a stripped module has no labels). The disassembler and the
 * trace print a jump target by it. */
int64_t bib_module_label_at(const bib_module_t *m, uint32_t pc);

/* Looks name up among the entry function's labels: 1 with *pc its pc, 0 when
 * it has no such label, -1 when memory runs out building the index. */
int bib_module_entry_label(bib_module_t *m, const char *name, uint32_t *pc);

/* Looks k up in the constant pool: 1 with *index the first entry of its
 * type and bits, 0 when there is none, -1 when memory runs out building the
 * index. Whoever shortens the pool calls bib_const_index_free on
 * m->const_index. */
int bib_module_const_find(bib_module_t *m, bib_const_t k, uint32_t *index);

#endif
