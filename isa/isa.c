/* isa/isa.c: the opcode table as data, and instruction encoding. */
#include "isa/isa.h"

#include <pthread.h>
#include <strings.h>

const bib_opinfo_t bib_isa_table[BIB_OP__COUNT] = {
#define BIB_ISA_ROW(cls, name, code, k0, k1, k2, k3, fl, sem)                                      \
    {#name, (code), {BIB_K_##k0, BIB_K_##k1, BIB_K_##k2, BIB_K_##k3}, (fl), cls, sem, -1, 0},
#define BIB_ISA_KROW(cls, name, code, k0, k1, k2, k3, fl, kernel, sub, sem)                        \
    {#name,                                                                                        \
     (code),                                                                                       \
     {BIB_K_##k0, BIB_K_##k1, BIB_K_##k2, BIB_K_##k3},                                             \
     (fl),                                                                                         \
     cls,                                                                                          \
     sem,                                                                                          \
     BIB_KERNEL_##kernel,                                                                          \
     BIB_KOP_SUB(kernel, sub)},
#define OP(...) BIB_ISA_ROW(BIB_CLASS_SCALAR, __VA_ARGS__)
#define TOP(...) BIB_ISA_ROW(BIB_CLASS_TENSOR, __VA_ARGS__)
#define KOP(...) BIB_ISA_KROW(BIB_CLASS_TENSOR, __VA_ARGS__)
#define GOP(...) BIB_ISA_ROW(BIB_CLASS_CUDA, __VA_ARGS__)
#define GKOP(...) BIB_ISA_KROW(BIB_CLASS_CUDA, __VA_ARGS__)
#define VOP(...) BIB_ISA_ROW(BIB_CLASS_VULKAN, __VA_ARGS__)
#define COP(...) BIB_ISA_ROW(BIB_CLASS_COLLECTIVE, __VA_ARGS__)
#include "isa/opcodes.def"
#undef BIB_ISA_KROW
#undef BIB_ISA_ROW
};

/* Codes to rows, and mnemonics to rows: open-addressing hashes built once,
   since the loader, the verifier and the disassembler look up every
   instruction, and the assembler every mnemonic. The interpreter never
   looks codes up. */
#define CODE_SLOTS 1024u /* a power of two, over four times BIB_OP__COUNT */
_Static_assert(BIB_OP__COUNT * 4 <= CODE_SLOTS, "CODE_SLOTS must grow with the opcode table");
static int16_t code_slots[CODE_SLOTS]; /* row + 1; 0 is empty */
static int16_t name_slots[CODE_SLOTS]; /* the same, by mnemonic */
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static uint32_t code_hash(uint32_t code) {
    return (code * 2654435761u) >> 22; /* the top 10 bits: 0..CODE_SLOTS-1 */
}

/* Of the name in lower case: names compare without case. */
static uint32_t name_hash(const char *name) {
    uint64_t h = BIB_FNV1A64_BASIS;
    for (; *name != '\0'; name++) {
        unsigned char c = (unsigned char)*name;
        c = c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
        h = bib_fnv1a64(h, &c, 1);
    }
    return (uint32_t)(h ^ h >> 32) & (CODE_SLOTS - 1);
}

static void place(int16_t *slots, uint32_t h, int row) {
    while (slots[h] != 0)
        h = (h + 1) & (CODE_SLOTS - 1);
    slots[h] = (int16_t)(row + 1);
}

static void build_slots(void) {
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        place(code_slots, code_hash(bib_isa_table[i].code), i);
        place(name_slots, name_hash(bib_isa_table[i].name), i);
    }
}

const bib_kernel_info_t bib_kernel_table[BIB_KERNEL__COUNT] = {
#define KERNEL(name, dtype, shape, args, cost, per_element, subs, executors, contract)             \
    {#name, dtype, shape, args, cost, per_element, subs, executors, contract},
#include "isa/kernels.def"
#undef KERNEL
};

/* Every sub-operation fits the opinfo's byte, and the GLSL and CUDA kernels
   number the unary, binary and reduce ops as these enums do. */
_Static_assert(BIB_UNARY__COUNT <= 256 && BIB_BINARY__COUNT <= 256 && BIB_REDUCE__COUNT <= 256,
               "sub-operations fit bib_opinfo_t.sub");
_Static_assert(BIB_KERNEL__COUNT <= 127, "kernels fit bib_opinfo_t.kernel");

int bib_isa_find_code(uint32_t code) {
    pthread_once(&slots_once, build_slots);
    for (uint32_t h = code_hash(code);; h = (h + 1) & (CODE_SLOTS - 1)) {
        int row = code_slots[h] - 1;
        if (row < 0 || bib_isa_table[row].code == code)
            return row;
    }
}

int bib_isa_find_name(const char *name) {
    pthread_once(&slots_once, build_slots);
    for (uint32_t h = name_hash(name);; h = (h + 1) & (CODE_SLOTS - 1)) {
        int row = name_slots[h] - 1;
        if (row < 0 || strcasecmp(bib_isa_table[row].name, name) == 0)
            return row;
    }
}

const char *bib_isa_kind_name(bib_operand_kind_t kind) {
    static const char *const names[BIB_K__N] = {
        [BIB_K_NONE] = "-",          [BIB_K_RD] = "rd",          [BIB_K_RS] = "rs",
        [BIB_K_IMM] = "imm32",       [BIB_K_IMMLO] = "imm64.lo", [BIB_K_IMMHI] = "imm64.hi",
        [BIB_K_COUNT] = "count",     [BIB_K_CONST] = "const",    [BIB_K_TGT] = "target",
        [BIB_K_FN] = "func",         [BIB_K_HOST] = "host",      [BIB_K_TD] = "td",
        [BIB_K_TS] = "ts",           [BIB_K_TM] = "tm",          [BIB_K_DTYPE] = "dtype",
        [BIB_K_SHADER] = "shader",   [BIB_K_KERNEL] = "kernel",  [BIB_K_SCALE] = "scale",
        [BIB_K_DIVISOR] = "divisor", [BIB_K_CASES] = "cases",    [BIB_K_RM] = "rm",
    };
    return (unsigned)kind < BIB_K__N ? names[kind] : "?";
}

void bib_insn_encode(const bib_insn_t *insn, uint8_t out[BIB_INSN_BYTES]) {
    bib_write_u32le(out, insn->op);
    bib_write_u32le(out + 4, insn->a);
    bib_write_u32le(out + 8, insn->b);
    bib_write_u32le(out + 12, insn->c);
    bib_write_u32le(out + 16, insn->d);
}

void bib_insn_decode(const uint8_t in[BIB_INSN_BYTES], bib_insn_t *insn) {
    insn->op = bib_read_u32le(in);
    insn->a = bib_read_u32le(in + 4);
    insn->b = bib_read_u32le(in + 8);
    insn->c = bib_read_u32le(in + 12);
    insn->d = bib_read_u32le(in + 16);
}
