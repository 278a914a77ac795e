/* tests/unit/test_verify.c: the verifier accepts a well-formed module and
 * rejects each class of error with its exact one-line message. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "vm/module.h"

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

Test(verify, unknown_opcode) {
    bib_module_t *m = small_module();
    m->code[3].op = 0x00991234;
    expect_error(m, "pc 3: unknown opcode 0x00991234");
}

Test(verify, reserved_opcode) {
    bib_module_t *m = small_module();
    m->code[3] = insn(BIB_CODE_MATMUL, 0, 0, 0, 0);
    expect_error(m, "pc 3: opcode MATMUL (0x00030000) is reserved: not implemented in this build");
}

Test(verify, every_reserved_row_is_rejected) {
    for (int i = 0; i < BIB_OP__COUNT; i++) {
        if (!(bib_isa_table[i].flags & BIB_F_RESERVED))
            continue;
        bib_module_t *m = small_module();
        m->code[5] = insn(bib_isa_table[i].code, 0, 0, 0, 0);
        char want[200];
        snprintf(want, sizeof want,
                 "pc 5: opcode %s (0x%08X) is reserved: not implemented in this build",
                 bib_isa_table[i].name, bib_isa_table[i].code);
        expect_error(m, want);
    }
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
                    "JMP, RET, TRAP or HALT)");
}

Test(verify, conditional_branch_is_not_a_terminator) {
    bib_module_t *m = small_module();
    m->code[6] = insn(BIB_CODE_JZ, 0, 0, 0, 0);
    expect_error(m, "pc 6 (JZ): function 'main' falls off its end (its last instruction must be "
                    "JMP, RET, TRAP or HALT)");
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
