/* tools/isa-gen.c: writes spec/isa.md from isa/opcodes.def.
 *
 * `make spec` regenerates the file; `make spec-check` fails when the
 * committed copy differs from what this program prints.
 */
#include <stdio.h>

#include "bib.h"
#include "isa/isa.h"

static const char *family_name(uint32_t family) {
    switch (family) {
    case 0x0000:
        return "control";
    case 0x0001:
        return "memory";
    case 0x0002:
        return "arithmetic";
    case 0x0003:
        return "tensor";
    case 0x0004:
        return "collective";
    case 0xC0DA:
        return "CUDA";
    case 0x564B:
        return "Vulkan";
    default:
        return "other";
    }
}

static void print_operands(const bib_opinfo_t *op) {
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (op->kinds[i] == BIB_K_NONE)
            continue;
        printf("%s%c:%s", n++ ? ", " : "", "abcd"[i], bib_isa_kind_name(op->kinds[i]));
    }
    if (n == 0)
        printf("none");
}

int main(void) {
    printf("# BIB instruction set\n\n");
    printf("Generated from isa/opcodes.def by tools/isa-gen.c; do not edit by hand "
           "(`make spec` rewrites it, `make spec-check` checks it).\n\n");
    printf("Every instruction is five little-endian 32-bit words, 20 bytes: the opcode word "
           "`family << 16 | op`, then the operand words a, b, c, d. Operands an opcode does "
           "not use must be zero.\n\n");
    printf("## Operand kinds\n\n| kind | meaning |\n| --- | --- |\n");
    printf("| rd | register written: index below the function's register count |\n");
    printf("| rs | register read: same range |\n");
    printf("| imm32 | signed 32-bit immediate |\n");
    printf("| imm64.lo, imm64.hi | the two halves of a 64-bit immediate |\n");
    printf("| count | a count of consecutive registers starting at the previous operand |\n");
    printf("| const | constant-pool index |\n");
    printf("| target | instruction index inside the same function |\n");
    printf("| func | function index |\n");
    printf("| host | host-function import index |\n");
    printf("| td | tensor register written: allocated with the result shape when empty, else the "
           "shapes must match |\n");
    printf("| ts | tensor register read: must be live |\n");
    printf("| tm | tensor register changed in place (or freed): must be live |\n");
    printf("| dtype | tensor element type |\n\n");
    printf("Status: `implemented`, or `reserved` (the code is fixed but this build's verifier "
           "rejects it).\n\n");
    printf("## Fuel\n\n");
    printf("A run with fuel (`--fuel N`, `bib_options_t.fuel`) charges every instruction before "
           "it runs. Scalar instructions (families control, memory, arithmetic) and device-program "
           "opcodes (VK_*, GPU_LAUNCH) take 1, so fuel N runs exactly N scalar instructions. A "
           "tensor opcode (family tensor, the CUDA "
           "family's GPU_* opcodes and the tensor collectives) takes 1 + floor(W / %d), W its work "
           "in elements from the "
           "operand shapes: the multiply-adds and results for MATMUL and LINEAR* (M*N*(K+1)) and "
           "ATTENTION* (S*H*D*(2T+1)), otherwise the elements read plus written (spec/cli.md "
           "lists each opcode's W). The charge depends on shapes only, so it is the same on every "
           "executor. When less fuel is left than an instruction takes, it does not run and the "
           "run traps `fuel exhausted` at its pc.\n",
           BIB_FUEL_WORK_UNIT);
    uint32_t family = 0xFFFFFFFF;
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        const bib_opinfo_t *op = &bib_isa_table[i];
        if (op->code >> 16 != family) {
            family = op->code >> 16;
            printf("\n## Family 0x%04X: %s\n\n", family, family_name(family));
            printf("| code | mnemonic | operands | status | semantics |\n");
            printf("| --- | --- | --- | --- | --- |\n");
        }
        printf("| 0x%08X | %s | ", op->code, op->name);
        print_operands(op);
        printf(" | %s | %s |\n", (op->flags & BIB_F_RESERVED) ? "reserved" : "implemented",
               op->semantics);
    }
    return 0;
}
