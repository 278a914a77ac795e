/* tests/unit/test_verify.c: the verifier accepts a well-formed module and
 * rejects each class of error with its exact one-line message. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "module/module.h"

static char *dup_str(const char *s) {
    char *d = malloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

static bib_insn_t insn(uint32_t op, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    bib_insn_t i = {op, a, b, c, d};
    return i;
}

/* main(nregs 4): LDI, LDK, CALL inc, HOSTCALL, JZ, NOP, HALT
 * inc(nargs 1, nregs 2): ADDI, RET */
static bib_module_t *small_module(void) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code_count = 9;
    m->code = malloc(m->code_count * sizeof *m->code);
    m->code[0] = insn(BIB_CODE_LDI, 0, 5, 0, 0);
    m->code[1] = insn(BIB_CODE_LDK, 1, 0, 0, 0);
    m->code[2] = insn(BIB_CODE_CALL, 2, 1, 0, 1);
    m->code[3] = insn(BIB_CODE_HOSTCALL, 3, 0, 2, 1);
    m->code[4] = insn(BIB_CODE_JZ, 3, 6, 0, 0);
    m->code[5] = insn(BIB_CODE_NOP, 0, 0, 0, 0);
    m->code[6] = insn(BIB_CODE_HALT, 2, 0, 0, 0);
    m->code[7] = insn(BIB_CODE_ADDI, 1, 0, 1, 0);
    m->code[8] = insn(BIB_CODE_RET, 1, 0, 0, 0);
    m->const_count = 1;
    m->consts = malloc(sizeof *m->consts);
    m->consts[0] = (bib_const_t){BIB_CONST_I64, 42};
    m->memory_size = 64;
    m->data_size = 2;
    m->data = malloc(2);
    memcpy(m->data, "hi", 2);
    m->func_count = 2;
    m->funcs = calloc(2, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){dup_str("main"), 0, 7, 0, 4};
    m->funcs[1] = (bib_function_t){dup_str("inc"), 7, 2, 1, 2};
    m->entry_func = 0;
    m->import_count = 1;
    m->imports = malloc(sizeof *m->imports);
    m->imports[0] = dup_str("print_i64");
    return m;
}

static bib_diag_t diag;

static void expect_error(bib_module_t *m, const char *msg) {
    diag.msg[0] = '\0';
    bib_status_t st = bib_module_verify(m, &diag);
    cr_expect_eq(st, BIB_E_VERIFY, "status %d, message: %s", st, diag.msg);
    cr_expect_str_eq(diag.msg, msg);
    bib_module_free(m);
}

Test(verify, accepts_small_module) {
    bib_module_t *m = small_module();
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

/* Decode once: verifying stores each instruction's dense opcode index, which
   the pre-decoder, traces and the disassembler read; verifying again after
   the code changed decodes it again. */
Test(verify, decodes_every_opcode_once_into_the_module) {
    bib_module_t *m = small_module();
    cr_assert_null(m->ops);
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    cr_assert_not_null(m->ops);
    for (uint32_t pc = 0; pc < m->code_count; pc++) {
        cr_expect_eq(m->ops[pc], (uint16_t)bib_isa_find_code(m->code[pc].op), "pc %u", pc);
        cr_expect_eq(bib_module_op(m, pc), bib_isa_find_code(m->code[pc].op), "pc %u", pc);
    }
    m->code[0].op = 0x0003FFFF; /* no row has it */
    cr_expect_eq(bib_module_verify(m, &diag), BIB_E_VERIFY);
    cr_expect_eq(m->ops[0], BIB_OP__COUNT);
    cr_expect_eq(bib_module_op(m, 0), -1);
    bib_module_free(m);
}

Test(verify, unknown_opcode) {
    bib_module_t *m = small_module();
    m->code[3].op = 0x00991234;
    expect_error(m, "pc 3: unknown opcode 0x00991234");
}

Test(verify, unused_operand_nonzero) {
    bib_module_t *m = small_module();
    m->code[5].c = 7;
    expect_error(m, "pc 5 (NOP): operand c is unused and must be 0, got 7");
}

Test(verify, destination_register_out_of_frame) {
    bib_module_t *m = small_module();
    m->code[0].a = 4;
    expect_error(m, "pc 0 (LDI): operand a names register r4 but function 'main' has 4 registers "
                    "(r0..r3)");
}

Test(verify, source_register_out_of_frame) {
    bib_module_t *m = small_module();
    m->code[7].b = 2;
    expect_error(m, "pc 7 (ADDI): operand b names register r2 but function 'inc' has 2 registers "
                    "(r0..r1)");
}

Test(verify, immediates_take_any_value) {
    bib_module_t *m = small_module();
    m->code[0] = insn(BIB_CODE_LDI64, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0);
    m->code[7].c = 0x80000000;
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

Test(verify, jump_target_outside_function) {
    bib_module_t *m = small_module();
    m->code[4].b = 99;
    expect_error(m, "pc 4 (JZ): jump target 99 is outside function 'main' (pc 0..6)");
}

Test(verify, jump_target_into_next_function) {
    bib_module_t *m = small_module();
    m->code[4].b = 7;
    expect_error(m, "pc 4 (JZ): jump target 7 is outside function 'main' (pc 0..6)");
}

Test(verify, jump_target_before_function) {
    bib_module_t *m = small_module();
    m->code[7] = insn(BIB_CODE_JMP, 6, 0, 0, 0);
    expect_error(m, "pc 7 (JMP): jump target 6 is outside function 'inc' (pc 7..8)");
}

Test(verify, function_index_out_of_range) {
    bib_module_t *m = small_module();
    m->code[2].b = 2;
    expect_error(m, "pc 2 (CALL): function index 2 out of range (module has 2 functions)");
}

Test(verify, import_index_out_of_range) {
    bib_module_t *m = small_module();
    m->code[3].b = 1;
    expect_error(m, "pc 3 (HOSTCALL): import index 1 out of range (module has 1 imports)");
}

Test(verify, constant_index_out_of_range) {
    bib_module_t *m = small_module();
    m->code[1].b = 1;
    expect_error(m, "pc 1 (LDK): constant index 1 out of range (pool has 1 constants)");
}

Test(verify, call_argument_range_outside_frame) {
    bib_module_t *m = small_module();
    m->code[2].c = 3;
    m->code[2].d = 2;
    m->funcs[1].nargs = 2;
    expect_error(m,
                 "pc 2 (CALL): register range r3..r4 (c=3, d=2) is outside function 'main' frame "
                 "of 4 registers");
}

Test(verify, call_argument_range_does_not_overflow) {
    bib_module_t *m = small_module();
    m->code[3].c = 2;
    m->code[3].d = 0xFFFFFFFF;
    expect_error(m,
                 "pc 3 (HOSTCALL): register range r2..r4294967296 (c=2, d=4294967295) is outside "
                 "function 'main' frame of 4 registers");
}

Test(verify, call_argument_count_mismatch) {
    bib_module_t *m = small_module();
    m->code[2].d = 2;
    expect_error(m, "pc 2 (CALL): passes 2 arguments but function 1 'inc' takes 1");
}

Test(verify, hostcall_too_many_arguments) {
    bib_module_t *m = small_module();
    m->funcs[0].nregs = 40;
    m->code[3].d = 17;
    expect_error(m, "pc 3 (HOSTCALL): passes 17 arguments, more than the host-call limit 16");
}

Test(verify, hostcall_at_argument_limit) {
    bib_module_t *m = small_module();
    m->funcs[0].nregs = 40;
    m->code[3].d = 16;
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

Test(verify, fall_through_off_function_end) {
    bib_module_t *m = small_module();
    m->code[6] = insn(BIB_CODE_NOP, 0, 0, 0, 0);
    expect_error(m, "pc 6 (NOP): function 'main' falls off its end (its last instruction must be "
                    "JMP, RET, TRAP, JTAB, RETN or HALT)");
}

Test(verify, conditional_branch_is_not_a_terminator) {
    bib_module_t *m = small_module();
    m->code[6] = insn(BIB_CODE_JZ, 0, 0, 0, 0);
    expect_error(m, "pc 6 (JZ): function 'main' falls off its end (its last instruction must be "
                    "JMP, RET, TRAP, JTAB, RETN or HALT)");
}

Test(verify, no_code) {
    bib_module_t *m = small_module();
    m->code_count = 0;
    m->funcs[0].count = 0;
    expect_error(m, "module has no code");
}

Test(verify, no_functions) {
    bib_module_t *m = small_module();
    for (uint32_t i = 0; i < m->func_count; i++)
        free(m->funcs[i].name);
    free(m->funcs);
    m->funcs = NULL;
    m->func_count = 0;
    expect_error(m, "module has no functions");
}

Test(verify, empty_function) {
    bib_module_t *m = small_module();
    m->funcs[1].count = 0;
    expect_error(m, "function 1 'inc': has no instructions");
}

Test(verify, functions_leave_gap) {
    bib_module_t *m = small_module();
    m->funcs[0].count = 6;
    expect_error(m, "function 1 'inc': starts at pc 7, expected pc 6 (functions must tile the code "
                    "section in order)");
}

Test(verify, function_runs_past_code) {
    bib_module_t *m = small_module();
    m->funcs[1].count = 3;
    expect_error(m, "function 1 'inc': pc 7..9 runs past the end of the code (9 instructions)");
}

Test(verify, code_after_last_function) {
    bib_module_t *m = small_module();
    m->funcs[1].count = 1;
    expect_error(m, "functions cover pc 0..7 but the code has 9 instructions (pc 8 onwards belongs "
                    "to no function)");
}

Test(verify, zero_registers) {
    bib_module_t *m = small_module();
    m->funcs[0].nregs = 0;
    expect_error(m, "function 0 'main': register count 0 is outside 1..65536");
}

Test(verify, too_many_registers) {
    bib_module_t *m = small_module();
    m->funcs[0].nregs = BIB_MAX_REGS + 1;
    expect_error(m, "function 0 'main': register count 65537 is outside 1..65536");
}

Test(verify, more_arguments_than_registers) {
    bib_module_t *m = small_module();
    m->funcs[1].nargs = 3;
    expect_error(m, "function 1 'inc': takes 3 arguments but has only 2 registers");
}

Test(verify, entry_function_out_of_range) {
    bib_module_t *m = small_module();
    m->entry_func = 2;
    expect_error(m, "entry function index 2 out of range (module has 2 functions)");
}

Test(verify, entry_function_takes_arguments) {
    bib_module_t *m = small_module();
    m->entry_func = 1;
    expect_error(m, "entry function 1 'inc' takes 1 arguments; it must take none");
}

Test(verify, function_name_invalid) {
    bib_module_t *m = small_module();
    m->funcs[1].name[1] = '\n';
    expect_error(m, "function 1: name is missing, empty, longer than 255 bytes or holds control "
                    "characters");
}

Test(verify, duplicate_import) {
    bib_module_t *m = small_module();
    m->import_count = 3;
    m->imports = realloc(m->imports, 3 * sizeof *m->imports);
    m->imports[1] = dup_str("print_f64");
    m->imports[2] = dup_str("print_i64");
    expect_error(m, "import 2: duplicate name 'print_i64' (also import 0)");
}

Test(verify, import_name_empty) {
    bib_module_t *m = small_module();
    m->imports[0][0] = '\0';
    expect_error(m, "import 0: name is missing, empty, longer than 255 bytes or holds control "
                    "characters");
}

Test(verify, unknown_constant_type) {
    bib_module_t *m = small_module();
    m->consts[0].type = 7;
    expect_error(m, "constant 0: unknown type 7 (expected 1 = i64 or 2 = f64)");
}

Test(verify, memory_smaller_than_data) {
    bib_module_t *m = small_module();
    m->memory_size = 1;
    expect_error(m, "memory size 1 bytes is smaller than the 2 bytes of initial data");
}

Test(verify, memory_over_limit) {
    bib_module_t *m = small_module();
    m->memory_size = BIB_MAX_MEMORY + 1;
    expect_error(m, "memory size 1099511627777 bytes is more than the limit 1099511627776");
}

Test(verify, func_at_finds_containing_function) {
    bib_module_t *m = small_module();
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    for (uint32_t pc = 0; pc < 7; pc++)
        cr_expect_eq(bib_module_func_at(m, pc), 0u, "pc %u", pc);
    for (uint32_t pc = 7; pc < 9; pc++)
        cr_expect_eq(bib_module_func_at(m, pc), 1u, "pc %u", pc);
    bib_module_free(m);
}

Test(verify, func_at_many_functions) {
    bib_module_t m = {0};
    bib_function_t funcs[5] = {
        {NULL, 0, 1, 0, 1}, {NULL, 1, 3, 0, 1}, {NULL, 4, 1, 0, 1},
        {NULL, 5, 2, 0, 1}, {NULL, 7, 1, 0, 1},
    };
    m.funcs = funcs;
    m.func_count = 5;
    m.code_count = 8;
    const uint32_t want[8] = {0, 1, 1, 1, 2, 3, 3, 4};
    for (uint32_t pc = 0; pc < 8; pc++)
        cr_expect_eq(bib_module_func_at(&m, pc), want[pc], "pc %u", pc);
}

Test(verify, code_over_limit) {
    bib_module_t *m = small_module();
    uint32_t real = m->code_count;
    m->code_count = BIB_MAX_CODE + 1;
    diag.msg[0] = '\0';
    cr_expect_eq(bib_module_verify(m, &diag), BIB_E_VERIFY);
    cr_expect_str_eq(diag.msg, "module has 16777217 instructions, more than the limit 16777216");
    m->code_count = real;
    bib_module_free(m);
}

Test(verify, count_without_array) {
    bib_module_t *m = small_module();
    free(m->consts);
    m->consts = NULL;
    expect_error(m, "module has 1 constants but no constant pool");
    m = small_module();
    free(m->data);
    m->data = NULL;
    expect_error(m, "module declares 2 data bytes but holds none");
    m = small_module();
    free(m->imports[0]);
    free(m->imports);
    m->imports = NULL;
    expect_error(m, "module has 1 imports but no import table");
}

Test(verify, too_many_imports) {
    bib_module_t *m = small_module();
    m->import_count = BIB_MAX_IMPORTS + 1;
    diag.msg[0] = '\0';
    cr_expect_eq(bib_module_verify(m, &diag), BIB_E_VERIFY);
    cr_expect_str_eq(diag.msg, "module has 65537 imports, more than the limit 65536");
    m->import_count = 1;
    bib_module_free(m);
}

/* ---- tensors ------------------------------------------------------------- */

/* One function main(nregs 4) with the given code, 4 tensor registers and
   the declarations: x input f32[n, 4] on t0, y output on t1, w constant
   f32[2] on t2, symbolic dimension "n". */
static bib_module_t *tensor_module(const bib_insn_t *code, uint32_t count) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code_count = count;
    m->code = malloc(count * sizeof *m->code);
    memcpy(m->code, code, count * sizeof *code);
    m->func_count = 1;
    m->funcs = calloc(1, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){dup_str("main"), 0, count, 0, 4};
    m->tensor_regs = 4;
    m->dim_name_count = 1;
    m->dim_names = malloc(sizeof *m->dim_names);
    m->dim_names[0] = dup_str("n");
    m->tensor_count = 3;
    m->tensors = calloc(3, sizeof *m->tensors);
    m->tensors[0] = (bib_tensor_decl_t){
        dup_str("x"), 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 2, {BIB_DIM_SYMBOL(0), 4, 0, 0}, NULL, 0};
    m->tensors[1] = (bib_tensor_decl_t){dup_str("y"), 1, BIB_TENSOR_OUTPUT, 0, 0, {0}, NULL, 0};
    m->tensors[2] = (bib_tensor_decl_t){
        dup_str("w"), 2, BIB_TENSOR_CONST, BIB_DTYPE_F32, 1, {2, 0, 0, 0}, calloc(1, 8), 8};
    return m;
}

static const bib_insn_t halt_only[] = {{BIB_CODE_HALT, 0, 0, 0, 0}};

static bib_module_t *decl_module(void) {
    return tensor_module(halt_only, 1);
}

static void expect_ok(bib_module_t *m) {
    diag.msg[0] = '\0';
    cr_expect_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

/* A code array literal and its length, for tensor_module. */
#define CODE(...)                                                                                  \
    (const bib_insn_t[]){__VA_ARGS__},                                                             \
        sizeof((const bib_insn_t[]){__VA_ARGS__}) / sizeof(bib_insn_t)

Test(verify_tensors, accepts_declarations) {
    expect_ok(decl_module());
}

Test(verify_tensors, register_outside_the_file) {
    bib_module_t *m = decl_module();
    m->tensors[2].reg = 4;
    expect_error(m, "tensor 2 'w': register t4 is outside the 4 tensor registers (t0..t3)");
}

Test(verify_tensors, flags_must_be_one_role) {
    bib_module_t *m = decl_module();
    m->tensors[0].flags = BIB_TENSOR_INPUT | BIB_TENSOR_CONST;
    expect_error(m, "tensor 0 'x': flags 0x5 must be exactly one of input (1), output (2) or "
                    "constant (4)");
    m = decl_module();
    m->tensors[1].flags = 8;
    expect_error(m, "tensor 1 'y': flags 0x8 must be exactly one of input (1), output (2) or "
                    "constant (4)");
}

Test(verify_tensors, dtype_must_be_f32_or_i32) {
    bib_module_t *m = decl_module();
    m->tensors[0].dtype = 3;
    expect_error(m, "tensor 0 'x': dtype 3 is not 1 (f32) or 2 (i32)");
}

Test(verify_tensors, untyped_only_for_rank_zero_outputs) {
    bib_module_t *m = decl_module();
    m->tensors[0].dtype = 0;
    expect_error(m, "tensor 0 'x': dtype 0 (untyped) is allowed only for an output of rank 0");
    m = decl_module();
    m->tensors[1].rank = 1;
    m->tensors[1].dims[0] = 3;
    expect_error(m, "tensor 1 'y': dtype 0 (untyped) is allowed only for an output of rank 0");
}

Test(verify_tensors, rank_over_six) {
    bib_module_t *m = decl_module();
    m->tensors[0].rank = 7;
    expect_error(m, "tensor 0 'x': rank 7 is more than the limit 6");
}

Test(verify_tensors, bad_dimensions) {
    bib_module_t *m = decl_module();
    m->tensors[0].dims[1] = -5;
    expect_error(m, "tensor 0 'x': dimension 1 is -5; expected 0..2147483647, -1 (any) or a "
                    "symbol -2-i for i < 1");
    /* 0 is a size: an empty tensor. */
    m = decl_module();
    m->tensors[0].dims[1] = 0;
    expect_ok(m);
    m = decl_module();
    m->tensors[0].dims[0] = BIB_DIM_SYMBOL(1);
    expect_error(m, "tensor 0 'x': dimension 0 is -3; expected 0..2147483647, -1 (any) or a "
                    "symbol -2-i for i < 1");
    m = decl_module();
    m->tensors[0].dims[1] = 0x80000000ll;
    expect_error(m, "tensor 0 'x': dimension 1 is 2147483648; expected 0..2147483647, -1 (any) "
                    "or a symbol -2-i for i < 1");
}

Test(verify_tensors, constants_have_fixed_dimensions) {
    bib_module_t *m = decl_module();
    m->tensors[2].dims[0] = BIB_DIM_ANY;
    expect_error(m, "tensor 2 'w': dimension 0 of a constant must be a fixed size, not '?'");
    m = decl_module();
    m->tensors[2].dims[0] = BIB_DIM_SYMBOL(0);
    expect_error(m, "tensor 2 'w': dimension 0 of a constant must be a fixed size, not a symbol");
}

Test(verify_tensors, constant_data_size_is_numel_times_four) {
    bib_module_t *m = decl_module();
    m->tensors[2].init_size = 4;
    expect_error(m, "tensor 2 'w': the constant has 2 elements, so its data must be 8 bytes, "
                    "not 4");
    m = decl_module();
    free(m->tensors[2].init);
    m->tensors[2].init = NULL;
    m->tensors[2].init_size = 0;
    expect_error(m, "tensor 2 'w': the constant has 2 elements, so its data must be 8 bytes, "
                    "not 0");
}

Test(verify_tensors, constant_element_count_overflow) {
    bib_module_t *m = decl_module();
    m->tensors[2].rank = 4;
    for (int k = 0; k < 4; k++)
        m->tensors[2].dims[k] = BIB_MAX_TENSOR_DIM;
    expect_error(m, "tensor 2 'w': the constant's element count overflows 64 bits");
}

Test(verify_tensors, only_constants_carry_data) {
    bib_module_t *m = decl_module();
    m->tensors[0].init = calloc(1, 4);
    m->tensors[0].init_size = 4;
    expect_error(m, "tensor 0 'x': only constants carry data, but this input has 4 bytes");
}

Test(verify_tensors, names_unique_and_valid) {
    bib_module_t *m = decl_module();
    free(m->tensors[2].name);
    m->tensors[2].name = dup_str("x");
    expect_error(m, "tensor 2 'x': duplicate name (also tensor 0)");
    m = decl_module();
    m->tensors[1].name[0] = '\t';
    expect_error(m, "tensor 1: name is missing, empty, longer than 255 bytes or holds control "
                    "characters");
}

Test(verify_tensors, dimension_names_unique_and_valid) {
    bib_module_t *m = decl_module();
    m->dim_names = realloc(m->dim_names, 2 * sizeof *m->dim_names);
    m->dim_names[1] = dup_str("n");
    m->dim_name_count = 2;
    expect_error(m, "dimension name 1: duplicate name 'n' (also dimension name 0)");
    m = decl_module();
    m->dim_names[0][0] = '\0';
    expect_error(m, "dimension name 0: name is missing, empty, longer than 255 bytes or holds "
                    "control characters");
}

Test(verify_tensors, one_input_or_constant_per_register) {
    bib_module_t *m = decl_module();
    m->tensors[2].reg = 0;
    expect_error(m, "tensor 2 'w': register t0 already holds input tensor 0 'x' (a register "
                    "carries at most one input or constant)");
}

Test(verify_tensors, output_may_share_an_input_register) {
    bib_module_t *m = decl_module();
    m->tensors[1].reg = 0;
    expect_ok(m);
}

Test(verify_tensors, register_file_limits) {
    bib_module_t *m = decl_module();
    m->tensor_regs = BIB_MAX_TENSOR_REGS + 1;
    expect_error(m, "module has 65537 tensor registers, more than the limit 65536");
    m = decl_module();
    m->tensor_regs = 0;
    expect_error(m, "module declares 3 tensors and 1 dimension names but no tensor registers");
}

Test(verify_tensors, operand_register_outside_the_file) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_COPY, 4, 0, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (COPY): operand a names tensor register t4 but the module has 4 tensor "
                    "registers (t0..t3)");
    m = small_module();
    m->code[5] = insn(BIB_CODE_TGET, 0, 0, 0, 0);
    expect_error(m, "pc 5 (TGET): operand b names tensor register t0 but the module has no tensor "
                    "registers");
}

Test(verify_tensors, dtype_operand) {
    bib_module_t *m =
        tensor_module(CODE({BIB_CODE_ALLOC, 3, 7, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (ALLOC): operand b is dtype 7; expected 1 (f32) or 2 (i32)");
}

Test(verify_tensors, dimension_counts_at_most_six) {
    bib_module_t *m =
        tensor_module(CODE({BIB_CODE_ALLOC, 3, 1, 0, 7}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (ALLOC): operand d gives 7 dimensions, more than the limit 6");
    m = tensor_module(CODE({BIB_CODE_RESHAPE, 3, 0, 0, 7}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (RESHAPE): operand d gives 7 dimensions, more than the limit 6");
    m = tensor_module(CODE({BIB_CODE_ALLOC, 3, 1, 1, 4}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (ALLOC): register range r1..r4 (c=1, d=4) is outside function 'main' "
                    "frame of 4 registers");
    expect_ok(tensor_module(CODE({BIB_CODE_ALLOC, 3, 2, 0, 4}, {BIB_CODE_HALT, 0, 0, 0, 0})));
}

Test(verify_tensors, slice_reads_three_registers_per_axis) {
    /* SLICE t3, t0, r1, d reads the triples r1..r[1+3d); the frame has 4. */
    bib_module_t *m =
        tensor_module(CODE({BIB_CODE_SLICE, 3, 0, 1, 2}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (SLICE): register range r1..r6 (c=1, d=2) is outside function 'main' "
                    "frame of 4 registers");
    expect_ok(tensor_module(CODE({BIB_CODE_SLICE, 3, 0, 1, 1}, {BIB_CODE_HALT, 0, 0, 0, 0})));
    /* PERMUTE's range is one register per axis. */
    expect_ok(tensor_module(CODE({BIB_CODE_PERMUTE, 3, 0, 1, 3}, {BIB_CODE_HALT, 0, 0, 0, 0})));
}

Test(verify_tensors, every_tensor_row_with_in_range_operands_verifies) {
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        const bib_opinfo_t *info = &bib_isa_table[i];
        if (info->opclass != BIB_CLASS_TENSOR)
            continue;
        /* Reads of t0 (an input, live) and writes to t3 (never allocated),
           so liveness has nothing to say. */
        uint32_t w[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4; k++) {
            switch (info->kinds[k]) {
            case BIB_K_TD:
                w[k] = 3;
                break;
            case BIB_K_TM:
                w[k] = info->flags & BIB_F_TFREE ? 3 : 0;
                break;
            case BIB_K_DTYPE:
                w[k] = BIB_DTYPE_F32;
                break;
            case BIB_K_COUNT:
                w[k] = info->flags & BIB_F_RANGE3 ? 1 : 2; /* 3 registers: r0..r2 */
                break;
            default:
                break;
            }
        }
        bib_insn_t code[3] = {{BIB_CODE_COPY, 3, 0, 0, 0},
                              {info->code, w[0], w[1], w[2], w[3]},
                              {BIB_CODE_HALT, 0, 0, 0, 0}};
        if (info->flags & BIB_F_TALLOC)
            code[0] = (bib_insn_t){BIB_CODE_NOP, 0, 0, 0, 0};
        bib_module_t *m = tensor_module(code, 3);
        m->funcs[0].nregs = BIB_PARAM_BLOCK; /* room for a parameter block at r0 */
        diag.msg[0] = '\0';
        cr_expect_eq(bib_module_verify(m, &diag), BIB_OK, "%s: %s", info->name, diag.msg);
        bib_module_free(m);
    }
}

/* CONV's and the pools' parameter block r[x..x+12) must lie in the frame:
   the last register of it, not only the first. */
Test(verify_tensors, parameter_block_past_the_frame) {
    bib_module_t *m =
        tensor_module(CODE({BIB_CODE_MAXPOOL, 3, 0, 1, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    m->funcs[0].nregs = BIB_PARAM_BLOCK;
    expect_error(m, "pc 0 (MAXPOOL): operand c starts the 12-register parameter block r1..r12, "
                    "outside function 'main' frame of 12 registers");
    m = tensor_module(CODE({BIB_CODE_CONV, 3, 0, 2, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    m->funcs[0].nregs = BIB_PARAM_BLOCK;
    expect_ok(m);
}

/* ---- tensor liveness ------------------------------------------------------ */

Test(liveness, allocated_twice) {
    bib_module_t *m =
        tensor_module(CODE({BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_NOP, 0, 0, 0, 0},
                           {BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 2 (ALLOC): t3 is already allocated (allocated twice)");
}

Test(liveness, alloc_of_an_input_or_constant) {
    bib_module_t *m =
        tensor_module(CODE({BIB_CODE_ALLOC, 2, 1, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (ALLOC): t2 is already allocated (allocated twice)");
}

Test(liveness, freed_twice) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_FREE, 0, 0, 0, 0}, {BIB_CODE_FREE, 0, 0, 0, 0},
                                         {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 1 (FREE): t0 is already freed (freed twice)");
}

Test(liveness, freed_before_allocation) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_FREE, 1, 0, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (FREE): t1 was never allocated (freed before allocation)");
}

Test(liveness, used_after_free) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_FREE, 2, 0, 0, 0}, {BIB_CODE_TADD, 3, 0, 2, 0},
                                         {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 1 (TADD): operand c reads t2, which is freed (used after free)");
}

Test(liveness, modified_after_free) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_FREE, 0, 0, 0, 0}, {BIB_CODE_FILL, 0, 1, 0, 0},
                                         {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 1 (FILL): operand a modifies t0, which is freed (used after free)");
}

Test(liveness, used_before_allocation) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_TGET, 0, 3, 1, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (TGET): operand b reads t3, which was never allocated (used before "
                    "allocation)");
}

Test(liveness, reads_come_before_the_write_of_one_instruction) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_TADD, 3, 3, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 0 (TADD): operand b reads t3, which was never allocated (used before "
                    "allocation)");
}

Test(liveness, dead_on_every_path_in_two_ways) {
    /* Paths 0-3-4 and 0-1-2-4 both reach pc 4 with t1 never allocated. */
    bib_module_t *m = tensor_module(CODE({BIB_CODE_JZ, 0, 3, 0, 0}, {BIB_CODE_FREE, 0, 0, 0, 0},
                                         {BIB_CODE_JMP, 4, 0, 0, 0}, {BIB_CODE_NOP, 0, 0, 0, 0},
                                         {BIB_CODE_COPY, 3, 1, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    /* t1 is never allocated on either path: still definite */
    expect_error(m, "pc 4 (COPY): operand b reads t1, which was never allocated (used before "
                    "allocation)");
    m = tensor_module(CODE({BIB_CODE_JZ, 0, 3, 0, 0}, {BIB_CODE_COPY, 1, 0, 0, 0},
                           {BIB_CODE_FREE, 1, 0, 0, 0}, {BIB_CODE_COPY, 3, 1, 0, 0},
                           {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 3 (COPY): operand b reads t1, which is not allocated on any path here "
                    "(used after free or before allocation)");
}

Test(liveness, allocated_on_one_path_only_is_not_an_error) {
    expect_ok(tensor_module(CODE({BIB_CODE_JZ, 0, 2, 0, 0}, {BIB_CODE_ALLOC, 3, 1, 0, 0},
                                 {BIB_CODE_FREE, 3, 0, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0})));
}

Test(liveness, loop_that_allocates_and_frees_each_iteration) {
    /* 0: ALLOC t3; 1: RELU t1, t3; 2: FREE t3; 3: FREE t1; 4: JNZ r0 -> 0; 5: HALT */
    expect_ok(tensor_module(CODE({BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_RELU, 1, 3, 0, 0},
                                 {BIB_CODE_FREE, 3, 0, 0, 0}, {BIB_CODE_FREE, 1, 0, 0, 0},
                                 {BIB_CODE_JNZ, 0, 0, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0})));
}

Test(liveness, loop_that_allocates_without_freeing_is_caught) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_JNZ, 0, 0, 0, 0},
                                         {BIB_CODE_HALT, 0, 0, 0, 0}));
    /* The second iteration meets t3 live on the back edge but never-allocated
       on entry: not definite, so no error. */
    expect_ok(m);
    m = tensor_module(CODE({BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_NOP, 0, 0, 0, 0},
                           {BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_JNZ, 0, 1, 0, 0},
                           {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_error(m, "pc 2 (ALLOC): t3 is already allocated (allocated twice)");
}

Test(liveness, writes_allocate_empty_registers) {
    /* MATMUL into the output, reuse it, free it, write it again. */
    expect_ok(tensor_module(CODE({BIB_CODE_MATMUL, 1, 0, 0, 0}, {BIB_CODE_TADD, 1, 1, 2, 0},
                                 {BIB_CODE_FREE, 1, 0, 0, 0}, {BIB_CODE_COPY, 1, 0, 0, 0},
                                 {BIB_CODE_HALT, 0, 0, 0, 0})));
}

Test(liveness, a_call_makes_everything_unknown) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_FREE, 0, 0, 0, 0}, {BIB_CODE_CALL, 0, 1, 0, 0},
                                         {BIB_CODE_COPY, 3, 0, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0},
                                         {BIB_CODE_COPY, 0, 2, 0, 0}, {BIB_CODE_RET, 0, 0, 0, 0}));
    m->funcs = realloc(m->funcs, 2 * sizeof *m->funcs);
    m->funcs[0].count = 4;
    m->funcs[1] = (bib_function_t){dup_str("remake"), 4, 2, 0, 1};
    m->func_count = 2;
    expect_ok(m);
}

Test(liveness, other_functions_start_unknown) {
    bib_module_t *m = tensor_module(
        CODE({BIB_CODE_HALT, 0, 0, 0, 0}, {BIB_CODE_FREE, 3, 0, 0, 0}, {BIB_CODE_RET, 0, 0, 0, 0}));
    m->funcs = realloc(m->funcs, 2 * sizeof *m->funcs);
    m->funcs[0].count = 1;
    m->funcs[1] = (bib_function_t){dup_str("release"), 1, 2, 0, 1};
    m->func_count = 2;
    expect_ok(m);
}

Test(liveness, an_entry_function_that_is_called_starts_unknown) {
    /* main frees the input then calls itself: the second entry must not
       assume the input is live, nor report the FREE. */
    bib_module_t *m = tensor_module(CODE({BIB_CODE_FREE, 0, 0, 0, 0}, {BIB_CODE_JZ, 0, 3, 0, 0},
                                         {BIB_CODE_CALL, 0, 0, 0, 0}, {BIB_CODE_HALT, 0, 0, 0, 0}));
    expect_ok(m);
}

Test(liveness, errors_inside_a_non_entry_function_after_its_own_free) {
    bib_module_t *m = tensor_module(CODE({BIB_CODE_HALT, 0, 0, 0, 0}, {BIB_CODE_FREE, 3, 0, 0, 0},
                                         {BIB_CODE_FREE, 3, 0, 0, 0}, {BIB_CODE_RET, 0, 0, 0, 0}));
    m->funcs = realloc(m->funcs, 2 * sizeof *m->funcs);
    m->funcs[0].count = 1;
    m->funcs[1] = (bib_function_t){dup_str("release"), 1, 3, 0, 1};
    m->func_count = 2;
    expect_error(m, "pc 2 (FREE): t3 is already freed (freed twice)");
}

Test(liveness, unreachable_code_is_not_judged) {
    expect_ok(tensor_module(CODE({BIB_CODE_HALT, 0, 0, 0, 0}, {BIB_CODE_FREE, 3, 0, 0, 0},
                                 {BIB_CODE_HALT, 0, 0, 0, 0})));
}

Test(liveness, a_use_proves_the_register_live_afterwards) {
    /* The ALLOC after a successful read of an unknown register is definite. */
    bib_module_t *m = tensor_module(CODE({BIB_CODE_HALT, 0, 0, 0, 0}, {BIB_CODE_THASH, 0, 3, 0, 0},
                                         {BIB_CODE_ALLOC, 3, 1, 0, 0}, {BIB_CODE_RET, 0, 0, 0, 0}));
    m->funcs = realloc(m->funcs, 2 * sizeof *m->funcs);
    m->funcs[0].count = 1;
    m->funcs[1] = (bib_function_t){dup_str("f"), 1, 3, 0, 1};
    m->func_count = 2;
    expect_error(m, "pc 2 (ALLOC): t3 is already allocated (allocated twice)");
}

Test(liveness, large_function_stays_fast_and_quiet) {
    /* 200000 instructions, a block every few, 4 registers: must finish
       quickly and find the one error at the end. */
    uint32_t n = 200000;
    bib_insn_t *code = malloc(n * sizeof *code);
    for (uint32_t pc = 0; pc + 3 < n; pc += 3) {
        code[pc] = (bib_insn_t){BIB_CODE_ALLOC, 3, 1, 0, 0};
        code[pc + 1] = (bib_insn_t){BIB_CODE_JZ, 0, pc + 2, 0, 0};
        code[pc + 2] = (bib_insn_t){BIB_CODE_FREE, 3, 0, 0, 0};
    }
    uint32_t last = n - 3 - (n - 3) % 3 + 3;
    for (uint32_t pc = last; pc < n - 1; pc++)
        code[pc] = (bib_insn_t){BIB_CODE_FREE, 3, 0, 0, 0};
    code[n - 1] = (bib_insn_t){BIB_CODE_HALT, 0, 0, 0, 0};
    bib_module_t *m = tensor_module(code, n);
    free(code);
    char want[128];
    snprintf(want, sizeof want, "pc %u (FREE): t3 is already freed (freed twice)", last);
    expect_error(m, want);
}

Test(liveness, too_many_blocks_times_registers_falls_back_to_unknown) {
    /* 4096 blocks x 8192 registers is over the state budget: the definite
       double FREE at the end goes unreported (the VM traps on it), and the
       verifier does not run out of memory or time. */
    uint32_t regs = 8192, n = regs + 2 * 4096 + 2;
    bib_insn_t *code = calloc(n, sizeof *code);
    uint32_t pc = 0;
    for (uint32_t r = 0; r < regs; r++)
        code[pc++] = (bib_insn_t){BIB_CODE_COPY, r, 0, 0, 0};
    for (uint32_t k = 0; k < 4096; k++, pc += 2) {
        code[pc] = (bib_insn_t){BIB_CODE_JZ, 0, pc + 1, 0, 0};
        code[pc + 1] = (bib_insn_t){BIB_CODE_NOP, 0, 0, 0, 0};
    }
    code[pc++] = (bib_insn_t){BIB_CODE_FREE, 1, 0, 0, 0};
    code[pc++] = (bib_insn_t){BIB_CODE_HALT, 0, 0, 0, 0};
    code[regs + 2 * 4096 - 2] = (bib_insn_t){BIB_CODE_FREE, 1, 0, 0, 0};
    bib_module_t *m = tensor_module(code, n);
    free(code);
    m->tensor_regs = regs;
    expect_ok(m);
}

/* The labels section (spec/bib-format.md, type 6). */
static bib_module_t *labelled(const char *a, uint32_t pa, const char *b, uint32_t pb) {
    bib_module_t *m = small_module();
    m->label_count = 2;
    m->labels = calloc(2, sizeof *m->labels);
    m->labels[0] = (bib_label_t){pa, dup_str(a)};
    m->labels[1] = (bib_label_t){pb, dup_str(b)};
    return m;
}

Test(verify, labels_accepted) {
    bib_module_t *m = labelled("skip", 5, "done", 6);
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
    /* The same name in two functions. */
    m = labelled("top", 0, "top", 7);
    cr_assert_eq(bib_module_verify(m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
}

Test(verify, label_outside_the_code) {
    expect_error(labelled("skip", 5, "done", 9),
                 "label 1 'done' marks pc 9, outside the 9 instructions of the code");
}

Test(verify, labels_out_of_order) {
    expect_error(labelled("done", 6, "skip", 5),
                 "label 1 'skip' at pc 5 comes after label 0 'done' at pc 6: labels must ascend "
                 "by pc, then by name");
    expect_error(labelled("b", 5, "a", 5),
                 "label 1 'a' at pc 5 comes after label 0 'b' at pc 5: labels must ascend by pc, "
                 "then by name");
}

Test(verify, label_named_twice_in_a_function) {
    expect_error(labelled("x", 1, "x", 5), "label 'x' is given twice in function 'main' (labels 0 "
                                           "and 1)");
}

Test(verify, label_named_like_a_generated_one) {
    expect_error(labelled("L5", 5, "done", 6), "label 0 'L5' at pc 5 has the form L<number> the "
                                               "disassembler gives unnamed targets");
}

/* The section survives writing and reading, and a hostile count is refused
   before anything is allocated for it. */
Test(verify, labels_round_trip_through_the_format) {
    bib_module_t *m = labelled("skip", 5, "done", 6);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_module_write(m, &bytes, &size, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    cr_assert_eq(back->label_count, 2);
    cr_expect_str_eq(back->labels[0].name, "skip");
    cr_expect_eq(back->labels[1].pc, 6);
    bib_module_free(back);
    free(bytes);
}
