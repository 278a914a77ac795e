/* tools/isa-gen.c: writes spec/isa.md from isa/opcodes.def and
 * isa/kernels.def, and checks the executors' kernel tables against them.
 *
 * `make spec` regenerates the file; `make spec-check` fails when the
 * committed copy differs from what this program prints. `isa-gen --check`
 * (run by every `make`, which fails with it) checks each executor compiled
 * into this build: its id names it, and its kernels[] has an entry for
 * exactly the kernels whose EXECUTORS column names it; and the CPU executor,
 * where every call can fall back, has every kernel.
 */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/null/null.h"
#include "include/bib.h"
#include "isa/isa.h"

static const char *const executor_names[BIB_EXECUTOR__COUNT] = {
    [BIB_EXECUTOR_CPU] = "cpu",
    [BIB_EXECUTOR_VULKAN] = "vulkan",
    [BIB_EXECUTOR_CUDA] = "cuda",
    [BIB_EXECUTOR_NULL] = "null",
};

static int check_executors(void) {
    int errors = 0;
    for (int k = 0; k < BIB_KERNEL__COUNT; k++)
        if (!bib_kernel_runs_on((bib_kernel_t)k, BIB_EXECUTOR_CPU)) {
            fprintf(stderr,
                    "isa-gen: isa/kernels.def: kernel %s does not name the cpu executor, where "
                    "every call falls back\n",
                    bib_kernel_table[k].name);
            errors++;
        }
    /* The build's executors, then the null executor (the template, which no
       run uses but the conformance suite runs). */
    for (uint32_t e = 0; e <= bib_executor_count(); e++) {
        const bib_executor_ops_t *ops =
            e < bib_executor_count() ? bib_executor_at(e) : &bib_null_executor;
        if ((unsigned)ops->id >= BIB_EXECUTOR__COUNT ||
            strcmp(executor_names[ops->id], ops->name) != 0) {
            fprintf(stderr, "isa-gen: executor '%s' has id %d, which isa/kernels.h names '%s'\n",
                    ops->name, (int)ops->id,
                    (unsigned)ops->id < BIB_EXECUTOR__COUNT ? executor_names[ops->id] : "nothing");
            errors++;
            continue;
        }
        for (int k = 0; k < BIB_KERNEL__COUNT; k++) {
            bool has = ops->kernels[k] != NULL;
            bool says = bib_kernel_runs_on((bib_kernel_t)k, ops->id);
            if (has == says)
                continue;
            fprintf(stderr,
                    "isa-gen: executor '%s': kernel %s %s in its kernels[] table but "
                    "isa/kernels.def %s\n",
                    ops->name, bib_kernel_table[k].name, has ? "has an entry" : "has no entry",
                    has ? "does not name this executor in its row (add it)"
                        : "names this executor in its row (give it the kernel, or take the "
                          "executor out of the row: its calls then run on the cpu executor)");
            errors++;
        }
    }
    if (errors == 0)
        printf("isa-gen: %u executors (null included) agree with isa/kernels.def (%d kernels)\n",
               bib_executor_count() + 1, BIB_KERNEL__COUNT);
    return errors ? 1 : 0;
}

static void print_kernels(void) {
    static const char *const dtypes[BIB_DTYPES__COUNT] = {
        [BIB_DTYPES_F32] = "f32",
        [BIB_DTYPES_ANY] = "any (the result keeps it)",
        [BIB_DTYPES_F32_TO_I32] = "f32 in, i32 out",
        [BIB_DTYPES_GATHER] = "any table, i32 indices",
        [BIB_DTYPES_F32_OR_I32] = "f32, or i32 (one dtype) for the subs with an i32 form",
        [BIB_DTYPES_CAST] = "any in, the opcode's dtype out",
        [BIB_DTYPES_COMPARE] = "f32 or i32 (one dtype) in, i32 out",
        [BIB_DTYPES_WHERE] = "i32 condition, values of one dtype (the result's)",
        [BIB_DTYPES_I32] = "i32",
    };
    static const char *const shapes[BIB_SHAPE__COUNT] = {
        [BIB_SHAPE_SAME] = "same, elementwise",
        [BIB_SHAPE_ROWS] = "same, by rows (rank >= 1)",
        [BIB_SHAPE_BROADCAST] = "same; in1 same, a row, or one element",
        [BIB_SHAPE_PRODUCT] = "[M,K] . [K,N] -> [M,N]",
        [BIB_SHAPE_TRANSPOSE] = "last two axes swapped",
        [BIB_SHAPE_REDUCE] = "last axis dropped",
        [BIB_SHAPE_INDEX] = "last axis (not empty) dropped",
        [BIB_SHAPE_NORM] = "same; gamma (and beta) rows of the last axis",
        [BIB_SHAPE_ATTENTION] = "q's",
        [BIB_SHAPE_GATHER] = "indices' then the table's after the first",
        [BIB_SHAPE_IN_PLACE] = "operand a's, in place",
        [BIB_SHAPE_WHERE] = "numpy's broadcast of all three (expanded by the VM)",
        [BIB_SHAPE_CONV] = "[N,O,OH,OW] (or [N,O,OL])",
        [BIB_SHAPE_POOL] = "[N,C,OH,OW] (or [N,C,OL])",
        [BIB_SHAPE_CHANNELS] = "same; [4,C] per channel of axis 1",
        [BIB_SHAPE_FIRST] = "same, the last axis cut to its first k",
        [BIB_SHAPE_SCAN] = "same, by rows (rank >= 1); flags in c",
    };
    static const char *const costs[BIB_COST__COUNT] = {
        [BIB_COST_ELEMENTS] = "inputs + result",    [BIB_COST_ROWS] = "inputs + result",
        [BIB_COST_PRODUCT] = "M*N*(K+1)",           [BIB_COST_ATTENTION] = "S*H*D*(2T+1)",
        [BIB_COST_GATHER] = "indices + 2 * result", [BIB_COST_CONV] = "result * (taps + 1)",
        [BIB_COST_POOL] = "result * (window + 1)",
    };
    printf("\n## Tensor kernels\n\n");
    printf("Generated from isa/kernels.def. Each opcode of the tensor and CUDA families that "
           "runs a kernel names it in the kernel column below; its tensor operands are "
           "the call's result (operand a) and inputs (its ts operands, in order). W is the "
           "work that fuel charges. An executor that lacks a kernel leaves its calls to the "
           "cpu executor. (The null executor of backends/, a template for new executors that "
           "no run uses, has every kernel.)\n\n");
    printf("| kernel | dtypes | result shape | W | executors | call |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    for (int k = 0; k < BIB_KERNEL__COUNT; k++) {
        const bib_kernel_info_t *d = &bib_kernel_table[k];
        printf("| %s | %s | %s | %s | ", d->name, dtypes[d->dtype], shapes[d->shape],
               costs[d->cost]);
        int n = 0;
        for (int e = 0; e < BIB_EXECUTOR__COUNT; e++)
            if (e != BIB_EXECUTOR_NULL && bib_kernel_runs_on((bib_kernel_t)k, (bib_executor_id_t)e))
                printf("%s%s", n++ ? ", " : "", executor_names[e]);
        printf(" | %s |\n", d->contract);
    }
}

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

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--check") == 0)
        return check_executors();
    if (argc != 1) {
        fprintf(stderr, "usage: isa-gen [--check]\n");
        return 64;
    }
    printf("# BIB instruction set\n\n");
    printf("Generated from isa/opcodes.def by tools/isa-gen.c; do not edit by hand "
           "(`make spec` rewrites it, `make spec-check` checks it).\n\n");
    printf("Every instruction is five little-endian 32-bit words, 20 bytes: the opcode word "
           "`family << 16 | op`, then the operand words a, b, c, d. Operands an opcode does "
           "not use must be zero.\n\n");
    printf("## Operand kinds\n\n| kind | meaning |\n| --- | --- |\n");
    printf("| rd | register written: index below the function's register count |\n");
    printf("| rs | register read: same range |\n");
    printf("| rm | register read, then written (a loop counter): same range |\n");
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
    printf("| dtype | tensor element type |\n");
    printf("| scale | an index's shift, 0..3: the index counts 1, 2, 4 or 8 bytes |\n");
    printf("| divisor | signed 32-bit immediate that is not 0 |\n");
    printf("| cases | a jump table's size, 1..%u: that many JMPs follow the instruction, "
           "its table |\n\n",
           BIB_MAX_CASES);
    printf("## Calls\n\n");
    printf("Each call gets a register window of the callee's `regs` registers, right after "
           "the caller's. CALL and CALLR copy the arguments r[c..c+d) to the callee's r[0..d); "
           "every other register of the callee reads 0 until the callee writes it (the VM "
           "zeroes only the registers a callee may read before writing them, found from its "
           "code at load time, so a large frame costs nothing to enter). RET returns one value "
           "to the CALL's r[a]; RETN returns b values to r[a..a+b) of the caller, which must "
           "lie in the caller's frame (a trap otherwise): a function that returns a pair is "
           "called with a destination that has room for two. A function value is a function's "
           "index (FNREF); CALLR checks when it runs that the index names a function and that "
           "the function takes the count it passes. JTAB's table is the JMP instructions after "
           "it: it goes straight to the target of the chosen JMP in one instruction (the JMP is "
           "not executed), or to its default target when the index is past the table "
           "(unsigned, so a negative index too).\n\n");
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
            printf("| code | mnemonic | operands | status | kernel | semantics |\n");
            printf("| --- | --- | --- | --- | --- | --- |\n");
        }
        printf("| 0x%08X | %s | ", op->code, op->name);
        print_operands(op);
        printf(" | %s | ", (op->flags & BIB_F_RESERVED) ? "reserved" : "implemented");
        if (op->kernel >= 0)
            printf("%s", bib_kernel_table[op->kernel].name);
        printf(" | %s |\n", op->semantics);
    }
    print_kernels();
    return 0;
}
