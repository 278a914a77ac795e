/* tests/unit/test_isa.c: the opcode table (isa/opcodes.def) is consistent and
 * holds the codes the issue fixes; instructions encode and decode exactly;
 * the kernel table (isa/kernels.def) agrees with the opcodes that use it. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "isa/isa.h"

Test(isa, encode_is_little_endian_words) {
    bib_insn_t in = {0x00020000, 0x04030201, 0x08070605, 0x0C0B0A09, 0x100F0E0D};
    uint8_t bytes[BIB_INSN_BYTES];
    bib_insn_encode(&in, bytes);
    const uint8_t want[BIB_INSN_BYTES] = {0x00, 0x00, 0x02, 0x00, 1,  2,  3,  4,  5,  6,
                                          7,    8,    9,    10,   11, 12, 13, 14, 15, 16};
    cr_expect(memcmp(bytes, want, sizeof want) == 0);
}

Test(isa, decode_inverts_encode) {
    const uint32_t samples[] = {0,     1,          0x7F,       0x80,       0xFF,
                                0x100, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xC0DA00F0};
    const size_t n = sizeof samples / sizeof samples[0];
    for (size_t i = 0; i < n; i++) {
        bib_insn_t in = {samples[i], samples[(i + 1) % n], samples[(i + 2) % n],
                         samples[(i + 3) % n], samples[(i + 4) % n]};
        uint8_t bytes[BIB_INSN_BYTES];
        bib_insn_encode(&in, bytes);
        bib_insn_t out;
        bib_insn_decode(bytes, &out);
        cr_expect_eq(out.op, in.op);
        cr_expect_eq(out.a, in.a);
        cr_expect_eq(out.b, in.b);
        cr_expect_eq(out.c, in.c);
        cr_expect_eq(out.d, in.d);
    }
}

Test(isa, decode_then_encode_gives_same_bytes) {
    uint8_t bytes[BIB_INSN_BYTES], again[BIB_INSN_BYTES];
    for (int i = 0; i < BIB_INSN_BYTES; i++)
        bytes[i] = (uint8_t)(0xA5 ^ (i * 37));
    bib_insn_t insn;
    bib_insn_decode(bytes, &insn);
    bib_insn_encode(&insn, again);
    cr_expect(memcmp(bytes, again, BIB_INSN_BYTES) == 0);
}

Test(isa, instruction_is_five_words) {
    cr_expect_eq(BIB_INSN_BYTES, 20);
    cr_expect_eq(BIB_INSN_WORDS * 4, BIB_INSN_BYTES);
}

Test(isa, codes_are_unique) {
    for (int i = 0; i < BIB_OP__COUNT; i++)
        for (int j = i + 1; j < BIB_OP__COUNT; j++)
            cr_expect_neq(bib_isa_table[i].code, bib_isa_table[j].code, "%s and %s share 0x%08X",
                          bib_isa_table[i].name, bib_isa_table[j].name, bib_isa_table[i].code);
}

Test(isa, names_are_unique_ignoring_case) {
    for (int i = 0; i < BIB_OP__COUNT; i++)
        for (int j = i + 1; j < BIB_OP__COUNT; j++)
            cr_expect(strcasecmp(bib_isa_table[i].name, bib_isa_table[j].name) != 0,
                      "rows %d and %d are both %s", i, j, bib_isa_table[i].name);
}

Test(isa, fixed_codes_from_the_issue) {
    static const struct {
        const char *name;
        uint32_t code;
    } fixed[] = {
        {"NOP", 0x00000000},
        {"HALT", 0x000000FF},
        {"ALLOC", 0x00010000},
        {"FREE", 0x00010001},
        {"LOAD", 0x00010010},
        {"STORE", 0x00010011},
        {"ADD", 0x00020000},
        {"SUB", 0x00020001},
        {"MUL", 0x00020002},
        {"DIV", 0x00020003},
        {"MATMUL", 0x00030000},
        {"TRANSPOSE", 0x00030001},
        {"SOFTMAX", 0x00030002},
        {"RELU", 0x00030003},
        {"GPU_INIT", 0xC0DA0001},
        {"GPU_ALLOC", 0xC0DA0010},
        {"GPU_MATMUL", 0xC0DA0020},
        {"GPU_SYNC", 0xC0DA00F0},
        {"VK_INIT", 0x564B0001},
        {"VK_COMPUTE", 0x564B0010},
        {"VK_SUBMIT", 0x564B0020},
        {"VK_SYNC", 0x564B00F0},
        {"RANK", 0x00040000},
        {"WORLD", 0x00040001},
        {"BARRIER", 0x00040002},
        {"BROADCAST", 0x00040010},
        {"ALLGATHER", 0x00040011},
        {"ALLREDUCE", 0x00040012},
        {"REDUCE_SCATTER", 0x00040014},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        int index = bib_isa_find_name(fixed[i].name);
        cr_assert_geq(index, 0, "%s missing", fixed[i].name);
        cr_expect_eq(bib_isa_table[index].code, fixed[i].code, "%s is 0x%08X, want 0x%08X",
                     fixed[i].name, bib_isa_table[index].code, fixed[i].code);
        cr_expect_eq(bib_isa_find_code(fixed[i].code), index, "%s", fixed[i].name);
    }
}

Test(isa, enum_codes_match_table) {
    cr_expect_eq(BIB_CODE_NOP, 0x00000000);
    cr_expect_eq(BIB_CODE_ADD, 0x00020000);
    cr_expect_eq(bib_isa_table[BIB_OP_ADD].code, (uint32_t)BIB_CODE_ADD);
    cr_expect_str_eq(bib_isa_table[BIB_OP_HALT].name, "HALT");
    cr_expect_eq(bib_isa_table[BIB_OP_VK_SYNC].code, 0x564B00F0u);
}

Test(isa, family_is_high_half_of_code) {
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        const bib_opinfo_t *op = &bib_isa_table[i];
        uint32_t family = op->code >> 16;
        switch (op->opclass) {
        case BIB_CLASS_CUDA:
            cr_expect_eq(family, 0xC0DAu, "%s", op->name);
            break;
        case BIB_CLASS_VULKAN:
            cr_expect_eq(family, 0x564Bu, "%s", op->name);
            break;
        case BIB_CLASS_TENSOR:
            cr_expect(family == 0x0001 || family == 0x0003, "%s family 0x%04X", op->name, family);
            break;
        case BIB_CLASS_SCALAR:
            cr_expect_leq(family, 0x0002u, "%s family 0x%04X", op->name, family);
            break;
        case BIB_CLASS_COLLECTIVE:
            cr_expect_eq(family, 0x0004u, "%s", op->name);
            break;
        }
    }
    cr_expect_eq(BIB_CODE_MATMUL >> 16, 0x0003);
    cr_expect_eq(BIB_CODE_LOAD >> 16, 0x0001);
    cr_expect_eq(BIB_CODE_HALT >> 16, 0x0000);
}

Test(isa, find_code_and_name_round_trip) {
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        cr_expect_eq(bib_isa_find_code(bib_isa_table[i].code), i);
        cr_expect_eq(bib_isa_find_name(bib_isa_table[i].name), i);
    }
    cr_expect_eq(bib_isa_find_name("add"), BIB_OP_ADD);
    cr_expect_eq(bib_isa_find_name("Matmul"), BIB_OP_MATMUL);
    cr_expect_eq(bib_isa_find_name("NOSUCH"), -1);
    cr_expect_eq(bib_isa_find_code(0x00991234), -1);
    /* Every mnemonic in any case; with a letter more or less, none (or the
       row that is so named). */
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        char name[64];
        size_t n = strlen(bib_isa_table[i].name);
        cr_assert_lt(n + 2, sizeof name);
        for (size_t j = 0; j <= n; j++)
            name[j] = (char)(j % 2 ? tolower((unsigned char)bib_isa_table[i].name[j])
                                   : toupper((unsigned char)bib_isa_table[i].name[j]));
        cr_expect_eq(bib_isa_find_name(name), i, "%s", name);
        for (size_t j = 0; j <= n; j++)
            name[j] = (char)tolower((unsigned char)bib_isa_table[i].name[j]);
        cr_expect_eq(bib_isa_find_name(name), i, "%s", name);
        memcpy(name + n, "X", 2);
        int longer = bib_isa_find_name(name);
        cr_expect(longer == -1 || strcasecmp(bib_isa_table[longer].name, name) == 0, "%s", name);
        name[n - 1] = '\0';
        int shorter = bib_isa_find_name(name);
        cr_expect(shorter == -1 || strcasecmp(bib_isa_table[shorter].name, name) == 0, "%s", name);
    }
    cr_expect_eq(bib_isa_find_name(""), -1);
    cr_expect_eq(bib_isa_find_name("ADD\xc3\xa9"), -1);
}

Test(isa, rows_are_well_formed) {
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        const bib_opinfo_t *op = &bib_isa_table[i];
        cr_expect(op->name != NULL && op->name[0] != '\0', "row %d", i);
        cr_expect(op->semantics != NULL && op->semantics[0] != '\0', "%s", op->name);
        int has_target = 0, has_count = 0;
        for (int k = 0; k < 4; k++) {
            cr_expect_lt(op->kinds[k], BIB_K__N, "%s operand %d", op->name, k);
            cr_expect_neq(bib_isa_kind_name((bib_operand_kind_t)op->kinds[k]), NULL);
            has_target |= op->kinds[k] == BIB_K_TGT;
            has_count |= op->kinds[k] == BIB_K_COUNT;
        }
        /* the verifier relies on these pairings */
        cr_expect_eq(!!(op->flags & BIB_F_BRANCH), has_target, "%s: BRANCH iff a TGT operand",
                     op->name);
        if (op->flags & BIB_F_CALL)
            cr_expect(has_count, "%s: a call has an argument count", op->name);
        for (int k = 0; k < 4; k++)
            if (op->kinds[k] == BIB_K_COUNT)
                cr_expect(k > 0 && op->kinds[k - 1] == BIB_K_RS,
                          "%s: a COUNT follows the RS that starts its register range", op->name);
        if (op->kinds[0] == BIB_K_IMMHI || op->kinds[1] == BIB_K_IMMHI ||
            op->kinds[2] == BIB_K_IMMHI)
            cr_expect(op->kinds[1] == BIB_K_IMMLO && op->kinds[2] == BIB_K_IMMHI, "%s", op->name);
    }
}

Test(isa, scalar_rows_are_implemented) {
    for (int i = 0; i < BIB_OP__COUNT; i++)
        if (bib_isa_table[i].opclass == BIB_CLASS_SCALAR)
            cr_expect(!(bib_isa_table[i].flags & BIB_F_RESERVED), "%s", bib_isa_table[i].name);
}

Test(isa, terminators) {
    cr_expect(bib_isa_table[BIB_OP_JMP].flags & BIB_F_TERM);
    cr_expect(bib_isa_table[BIB_OP_RET].flags & BIB_F_TERM);
    cr_expect(bib_isa_table[BIB_OP_HALT].flags & BIB_F_TERM);
    cr_expect(bib_isa_table[BIB_OP_TRAP].flags & BIB_F_TERM);
    cr_expect(!(bib_isa_table[BIB_OP_JZ].flags & BIB_F_TERM));
    cr_expect(!(bib_isa_table[BIB_OP_CALL].flags & BIB_F_TERM));
}

/* ---- the tensor kernels (isa/kernels.def) and the KOP rows that run them ---- */

#include "backends/callcheck.h"
#include "vm/tensor_ops.h"

Test(kernels, every_kernel_row_is_well_formed) {
    for (int k = 0; k < BIB_KERNEL__COUNT; k++) {
        const bib_kernel_info_t *d = &bib_kernel_table[k];
        cr_expect(d->name != NULL && d->contract != NULL && d->contract[0] != '\0', "kernel %d", k);
        cr_expect_lt((int)d->dtype, BIB_DTYPES__COUNT, "%s", d->name);
        cr_expect_lt((int)d->shape, BIB_SHAPE__COUNT, "%s", d->name);
        cr_expect_lt((int)d->args, BIB_ARGS__COUNT, "%s", d->name);
        cr_expect_lt((int)d->cost, BIB_COST__COUNT, "%s", d->name);
        cr_expect_geq(d->subs, 1u, "%s", d->name);
        /* Every call can fall back to the CPU executor: it has every kernel. */
        cr_expect(bib_kernel_runs_on((bib_kernel_t)k, BIB_EXECUTOR_CPU), "%s", d->name);
    }
}

Test(kernels, every_kernel_opcode_names_a_kernel_its_operands_fit) {
    int used[BIB_KERNEL__COUNT] = {0};
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        const bib_opinfo_t *op = &bib_isa_table[i];
        if (op->kernel < 0)
            continue;
        cr_assert_lt(op->kernel, BIB_KERNEL__COUNT, "%s", op->name);
        const bib_kernel_info_t *d = &bib_kernel_table[op->kernel];
        used[op->kernel]++;
        cr_expect(op->opclass == BIB_CLASS_TENSOR || op->opclass == BIB_CLASS_CUDA, "%s", op->name);
        cr_expect_lt(op->sub, d->subs, "%s: sub %u of kernel %s", op->name, op->sub, d->name);
        int inputs = 0;
        for (int w = 1; w < 4; w++)
            inputs += op->kinds[w] == BIB_K_TS;
        if (d->shape == BIB_SHAPE_IN_PLACE) {
            cr_expect_eq(op->kinds[0], BIB_K_TM, "%s: an in-place kernel modifies operand a",
                         op->name);
            cr_expect_eq(inputs, 0, "%s", op->name);
        } else {
            cr_expect_eq(op->kinds[0], BIB_K_TD, "%s: the result is operand a", op->name);
            cr_expect(inputs >= 1 && inputs <= 3, "%s has %d tensor inputs", op->name, inputs);
        }
    }
    for (int k = 0; k < BIB_KERNEL__COUNT; k++)
        cr_expect_gt(used[k], 0, "no opcode runs kernel %s", bib_kernel_table[k].name);
}

/* The sub-operation enums are the KOP rows of their kernel, in row order: the
   GLSL and CUDA kernels number them so. */
Test(kernels, sub_operation_enums_follow_the_rows) {
    uint32_t next[BIB_KERNEL__COUNT] = {0};
    int rows[BIB_KERNEL__COUNT] = {0};
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        const bib_opinfo_t *op = &bib_isa_table[i];
        if (op->kernel != BIB_KERNEL_UNARY && op->kernel != BIB_KERNEL_BINARY &&
            op->kernel != BIB_KERNEL_REDUCE)
            continue;
        /* A USE(x) row (BIB_F_AXES) runs a member an earlier row added. */
        if ((op->flags & BIB_F_AXES) && op->sub < next[op->kernel])
            continue;
        cr_expect_eq(op->sub, next[op->kernel]++, "%s", op->name);
        rows[op->kernel]++;
    }
    cr_expect_eq(rows[BIB_KERNEL_UNARY], BIB_UNARY__COUNT);
    cr_expect_eq(rows[BIB_KERNEL_BINARY], BIB_BINARY__COUNT);
    cr_expect_eq(rows[BIB_KERNEL_REDUCE], BIB_REDUCE__COUNT);
    cr_expect_eq(bib_isa_table[BIB_OP_RELU].sub, BIB_UNARY_RELU);
    cr_expect_eq(bib_isa_table[BIB_OP_EXP].sub, BIB_UNARY_EXP);
    cr_expect_eq(bib_isa_table[BIB_OP_TDIV].sub, BIB_BINARY_DIV);
    cr_expect_eq(bib_isa_table[BIB_OP_MEAN].sub, BIB_REDUCE_MEAN);
    cr_expect_eq(bib_isa_table[BIB_OP_REDUCE_MEAN].sub, BIB_REDUCE_MEAN);
    cr_expect_eq(bib_isa_table[BIB_OP_REDUCE_PROD].sub, BIB_REDUCE_PROD);
    cr_expect_eq(bib_isa_table[BIB_OP_SLICE].kernel, BIB_KERNEL_STRIDED);
    cr_expect_eq(bib_isa_table[BIB_OP_CONCAT].sub, BIB_STRIDED_CONCAT);
    cr_expect_eq(bib_isa_table[BIB_OP_LINEAR_GELU].sub, BIB_ACT_GELU);
    cr_expect_eq(bib_isa_table[BIB_OP_GPU_ATTENTION_CAUSAL].kernel, BIB_KERNEL_ATTENTION);
    cr_expect_eq(bib_isa_table[BIB_OP_GPU_ATTENTION_CAUSAL].sub, BIB_ATTENTION_CAUSAL);
    cr_expect_eq(bib_isa_table[BIB_OP_ALLOC].kernel, -1);
}

static bib_view_t f32_view(uint32_t rank, uint32_t d0, uint32_t d1) {
    static float cell;
    bib_view_t v = {.buf = &cell, .dtype = BIB_DTYPE_F32, .rank = rank, .dims = {d0, d1}};
    return v;
}

/* The GPU call check takes every sub-operation the descriptor gives a kernel
   (it once stopped at BIB_UNARY_EXP, refusing the next unary op) and none
   beyond. */
Test(kernels, call_check_takes_exactly_the_kernels_sub_operations) {
    for (int k = 0; k < BIB_KERNEL__COUNT; k++) {
        if (k != BIB_KERNEL_UNARY && k != BIB_KERNEL_BINARY && k != BIB_KERNEL_REDUCE)
            continue;
        bib_call_t c = {.kernel = (bib_kernel_t)k, .in = {f32_view(2, 3, 4), f32_view(2, 3, 4)}};
        c.out = k == BIB_KERNEL_REDUCE ? f32_view(1, 3, 0) : f32_view(2, 3, 4);
        for (uint32_t sub = 0; sub < bib_kernel_table[k].subs; sub++) {
            c.sub = sub;
            cr_expect(bib_call_shapes_ok(&c, 0), "%s sub %u", bib_kernel_table[k].name, sub);
        }
        c.sub = bib_kernel_table[k].subs;
        cr_expect_not(bib_call_shapes_ok(&c, 0), "%s sub %u", bib_kernel_table[k].name, c.sub);
    }
}

/* The GPU kernels trust a STRIDED or TAKE call's indices: the check refuses
   any call whose p[] would read outside its views. */
Test(kernels, call_check_refuses_strided_and_take_reads_outside_the_views) {
    /* out [3,4] from in0 [4,3] transposed: strides (1, 3), padded in front. */
    bib_call_t c = {.kernel = BIB_KERNEL_STRIDED,
                    .out = f32_view(2, 3, 4),
                    .in = {f32_view(2, 4, 3)},
                    .p = {[5] = 1, [6] = 3, [14] = 0, [15] = 1}};
    cr_expect(bib_call_shapes_ok(&c, 0));
    c.p[0] = 1; /* the last element would be in0[12] */
    cr_expect_not(bib_call_shapes_ok(&c, 0));
    c.p[0] = 0;
    c.p[6] = -3; /* from the start backwards: in0[-9] */
    cr_expect_not(bib_call_shapes_ok(&c, 0));
    c.p[0] = 9; /* from the last row backwards: in0[9 + 2 + 0], in0[0 + 0] */
    cr_expect(bib_call_shapes_ok(&c, 0));
    /* A split reachable on axis 5 needs in1, and in1's reads inside it. */
    c.p[0] = 0;
    c.p[6] = 3;
    c.p[14] = 5;
    c.p[15] = 2;
    cr_expect_not(bib_call_shapes_ok(&c, 0));
    c.in[1] = f32_view(2, 3, 2);
    c.p[7] = -2;
    c.p[12] = 2;
    c.p[13] = 1;
    cr_expect(bib_call_shapes_ok(&c, 0));
    c.p[7] = -1; /* in1[-1 + 2*2 + 3] = in1[6]: past its 6 elements */
    cr_expect_not(bib_call_shapes_ok(&c, 0));
    /* TAKE: out [3] picks in0 [5] at 3 indices; the axis has 5 elements. */
    static int32_t idx[3];
    bib_view_t iv = {.buf = idx, .dtype = BIB_DTYPE_I32, .rank = 1, .dims = {3}};
    bib_call_t t = {.kernel = BIB_KERNEL_TAKE,
                    .out = f32_view(1, 3, 0),
                    .in = {f32_view(1, 5, 0), iv},
                    .p = {[11] = 1, [12] = 1, [13] = 5}};
    cr_expect(bib_call_shapes_ok(&t, 0));
    t.p[13] = 6; /* an axis longer than in0 */
    cr_expect_not(bib_call_shapes_ok(&t, 0));
    t.p[13] = 0; /* positions to fill, no element to pick */
    cr_expect_not(bib_call_shapes_ok(&t, 0));
    t.p[13] = 5;
    t.p[11] = 2; /* indices read past in1 */
    cr_expect_not(bib_call_shapes_ok(&t, 0));
}

Test(kernels, one_cost_model_gives_work_flops_and_estimate) {
    /* [5,7] . [7,3] + bias: fuel work M*N*(K+1), flops 2MNK, estimate 2MNK + 2MN. */
    bib_call_t mm = {.kernel = BIB_KERNEL_MATMUL,
                     .out = f32_view(2, 5, 3),
                     .in = {f32_view(2, 5, 7), f32_view(2, 7, 3), f32_view(1, 3, 0)}};
    bib_tensor_cost_t c = bib_tensor_cost(&mm);
    cr_expect_eq(c.work, 5u * 3 * 8);
    cr_expect_eq(c.flops, 2u * 5 * 3 * 7);
    cr_expect_eq(c.ops, 2.0 * 15 * 7 + 2 * 15);
    /* Elementwise: inputs plus the result; no flops; 20 per element for exp. */
    bib_call_t ex = {.kernel = BIB_KERNEL_UNARY,
                     .sub = BIB_UNARY_EXP,
                     .out = f32_view(2, 4, 6),
                     .in = {f32_view(2, 4, 6)}};
    c = bib_tensor_cost(&ex);
    cr_expect_eq(c.work, 48u);
    cr_expect_eq(c.flops, 0u);
    cr_expect_eq(c.ops, 20.0 * 24);
    /* A reduction's estimate counts the input it reads. */
    bib_call_t sum = {
        .kernel = BIB_KERNEL_REDUCE, .out = f32_view(1, 4, 0), .in = {f32_view(2, 4, 6)}};
    c = bib_tensor_cost(&sum);
    cr_expect_eq(c.work, 28u);
    cr_expect_eq(c.ops, 24.0);
}
