/* isa/isa.h: the instruction set as data.
 *
 * Expands isa/opcodes.def into an enum of dense opcode indices and a table of
 * opcode descriptors (with, for the opcodes that run a kernel, its row of
 * isa/kernels.def). This header owns instruction encoding facts (width,
 * operand kinds, flags); it knows nothing of modules, verification or running.
 */
#ifndef BIB_ISA_H
#define BIB_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "isa/kernels.h"

#define BIB_INSN_WORDS 5
#define BIB_INSN_BYTES 20
#define BIB_MAX_CASES 65536u /* entries in one JTAB table */

/* Operand kinds. The verifier checks each operand word against its kind. */
typedef enum bib_operand_kind {
    BIB_K_NONE,    /* unused: must be 0 */
    BIB_K_RD,      /* register written: index < the function's register count */
    BIB_K_RS,      /* register read: same range check */
    BIB_K_IMM,     /* signed 32-bit immediate */
    BIB_K_IMMLO,   /* low 32 bits of a 64-bit immediate */
    BIB_K_IMMHI,   /* high 32 bits of a 64-bit immediate */
    BIB_K_COUNT,   /* a count (of arguments, dimensions): range checked per opcode */
    BIB_K_CONST,   /* constant-pool index */
    BIB_K_TGT,     /* jump target: instruction index inside the same function */
    BIB_K_FN,      /* function index */
    BIB_K_HOST,    /* host-function import index */
    BIB_K_TD,      /* tensor register written */
    BIB_K_TS,      /* tensor register read: must be live */
    BIB_K_TM,      /* tensor register modified in place (or freed): must be live */
    BIB_K_DTYPE,   /* tensor element type (bib_dtype_t) */
    BIB_K_SHADER,  /* user compute shader index (module section 17, spec/device-code.md) */
    BIB_K_KERNEL,  /* user CUDA kernel index (module section 18, spec/device-code.md) */
    BIB_K_SCALE,   /* an index's shift: 0..3, so the index counts 1, 2, 4 or 8 bytes */
    BIB_K_DIVISOR, /* signed 32-bit immediate that is not 0 */
    BIB_K_CASES,   /* a jump table's size: 1..BIB_MAX_CASES JMPs follow the instruction */
    BIB_K_RM,      /* register read, then written (a loop counter): same range as RD */
    BIB_K__N
} bib_operand_kind_t;

enum {
    BIB_F_BRANCH = 1u << 0,   /* may transfer control to a TGT operand */
    BIB_F_TERM = 1u << 1,     /* never falls through to the next instruction */
    BIB_F_CALL = 1u << 2,     /* CALL or HOSTCALL */
    BIB_F_MEM = 1u << 3,      /* accesses linear memory (bounds-checked at run time) */
    BIB_F_RESERVED = 1u << 4, /* code reserved, not implemented in this build */
    BIB_F_TALLOC = 1u << 5,   /* ALLOC: its TD operand must not be live */
    BIB_F_TFREE = 1u << 6,    /* FREE: its TM operand is dead afterwards */
    BIB_F_RANGE3 = 1u << 7,   /* its COUNT d sizes a range of 3*d registers (SLICE's triples) */
    /* A kernel along the last axis run on any axes (vm/tensor_layout.c): IMM c
     * names them (REDUCE: a bitmask, c = 0 every axis; ROWS and INDEX: one
     * axis, negative from the end); they are permuted to the end, the
     * kernel runs, and the result is reshaped (IMM d = keepdims) or, for a
     * ROWS kernel, permuted back. */
    BIB_F_AXES = 1u << 8,
};

typedef enum bib_opclass {
    BIB_CLASS_SCALAR,
    BIB_CLASS_TENSOR,
    BIB_CLASS_CUDA,
    BIB_CLASS_VULKAN,
    BIB_CLASS_COLLECTIVE, /* family 0x0004: between ranks (vm/collective.c) */
} bib_opclass_t;

/* Dense opcode index: the position of the row in isa/opcodes.def. */
typedef enum bib_opcode {
#define BIB_ISA_ROW(name, code, k0, k1, k2, k3, flags, sem) BIB_OP_##name,
#define BIB_ISA_KROW(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                          \
    BIB_ISA_ROW(name, code, k0, k1, k2, k3, flags, sem)
#define OP BIB_ISA_ROW
#define TOP BIB_ISA_ROW
#define KOP BIB_ISA_KROW
#define GOP BIB_ISA_ROW
#define GKOP BIB_ISA_KROW
#define VOP BIB_ISA_ROW
#define COP BIB_ISA_ROW
#include "isa/opcodes.def"
#undef BIB_ISA_KROW
#undef BIB_ISA_ROW
    BIB_OP__COUNT
} bib_opcode_t;

/* Encoded opcode words, as BIB_CODE_<name>. */
enum {
#define BIB_ISA_ROW(name, code, k0, k1, k2, k3, flags, sem) BIB_CODE_##name = (code),
#define BIB_ISA_KROW(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                          \
    BIB_ISA_ROW(name, code, k0, k1, k2, k3, flags, sem)
#define OP BIB_ISA_ROW
#define TOP BIB_ISA_ROW
#define KOP BIB_ISA_KROW
#define GOP BIB_ISA_ROW
#define GKOP BIB_ISA_KROW
#define VOP BIB_ISA_ROW
#define COP BIB_ISA_ROW
#include "isa/opcodes.def"
#undef BIB_ISA_KROW
#undef BIB_ISA_ROW
};

typedef struct bib_opinfo {
    const char *name;
    uint32_t code;
    uint8_t kinds[4]; /* bib_operand_kind_t */
    uint32_t flags;
    bib_opclass_t opclass;
    const char *semantics;
    /* KOP and GKOP rows: the kernel (bib_kernel_t) and its sub-operation;
       every other row: kernel -1. */
    int8_t kernel;
    uint8_t sub;
} bib_opinfo_t;

extern const bib_opinfo_t bib_isa_table[BIB_OP__COUNT];

/* One raw instruction as it is stored: five little-endian words. */
typedef struct bib_insn {
    uint32_t op;
    uint32_t a, b, c, d;
} bib_insn_t;

/* Finds the dense index of an opcode word; returns -1 when unknown. */
int bib_isa_find_code(uint32_t code);
/* Finds the dense index of a mnemonic (case-insensitive); returns -1 when unknown. */
int bib_isa_find_name(const char *name);
/* Name of an operand kind, for messages and the spec ("reg", "imm", ...). */
const char *bib_isa_kind_name(bib_operand_kind_t kind);

/* Encoding to and from the 20-byte little-endian form. */
void bib_insn_encode(const bib_insn_t *insn, uint8_t out[BIB_INSN_BYTES]);
void bib_insn_decode(const uint8_t in[BIB_INSN_BYTES], bib_insn_t *insn);

static inline uint32_t bib_read_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void bib_write_u32le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
/* FNV-1a 64, the hash of THASH (spec/isa.md) and of every other fingerprint
 * BIB takes: h continued over n bytes. Start from BIB_FNV1A64_BASIS. */
#define BIB_FNV1A64_BASIS 0xcbf29ce484222325ull
static inline uint64_t bib_fnv1a64(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = (const uint8_t *)data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static inline uint64_t bib_read_u64le(const uint8_t *p) {
    return (uint64_t)bib_read_u32le(p) | (uint64_t)bib_read_u32le(p + 4) << 32;
}
static inline void bib_write_u64le(uint8_t *p, uint64_t v) {
    bib_write_u32le(p, (uint32_t)v);
    bib_write_u32le(p + 4, (uint32_t)(v >> 32));
}

#endif
