/* tests/unit/test_interp.c: the interpreter and the VM API (vm/api.c,
 * vm/decode.c, vm/interp.c, vm/trace.c): each opcode family, traps and their
 * messages, calls, fuel, host functions, several VMs, reuse after a trap,
 * traces. Programs come from .basm text (bib_assemble + bib_vm_load) or are
 * built as bib_module_t in memory (bib_vm_load_module). */
#include <criterion/criterion.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/bib.h"
#include "vm/vm.h"

/* ---- helpers ---------------------------------------------------------------- */

static bib_vm_t *vm_new(const bib_options_t *opt) {
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(opt, &vm), BIB_OK);
    cr_assert_not_null(vm);
    return vm;
}

static void load_src(bib_vm_t *vm, const char *src) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bib_status_t st = bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag);
    cr_assert_eq(st, BIB_OK, "assembly failed: %s", diag ? diag : "");
    bib_free(diag);
    st = bib_vm_load(vm, bytes, size, "t.basm");
    bib_free(bytes);
    cr_assert_eq(st, BIB_OK, "load failed: %s", bib_vm_error(vm));
}

/* Runs src in a fresh VM; returns the status and the exit value. */
static bib_status_t run_src(const char *src, int64_t *exit_value, char *err, size_t errcap) {
    bib_vm_t *vm = vm_new(NULL);
    load_src(vm, src);
    int64_t v = 0;
    bib_status_t st = bib_vm_run(vm, &v);
    if (exit_value != NULL)
        *exit_value = v;
    if (err != NULL)
        snprintf(err, errcap, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    return st;
}

static int64_t eval(const char *src) {
    int64_t v = 0;
    char err[512];
    bib_status_t st = run_src(src, &v, err, sizeof err);
    cr_assert_eq(st, BIB_OK, "run failed: %s", err);
    return v;
}

/* A one-function module built in memory; the VM takes ownership. */
static bib_module_t *module_of(const bib_insn_t *code, uint32_t n, uint32_t nregs) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code = malloc(n * sizeof *code);
    memcpy(m->code, code, n * sizeof *code);
    m->code_count = n;
    m->funcs = calloc(1, sizeof *m->funcs);
    m->funcs[0].name = strdup("main");
    m->funcs[0].entry = 0;
    m->funcs[0].count = n;
    m->funcs[0].nargs = 0;
    m->funcs[0].nregs = nregs;
    m->func_count = 1;
    return m;
}

static uint64_t f2u(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double u2f(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- modules built in memory ------------------------------------------------ */

Test(interp, in_memory_module_adds_and_halts) {
    const bib_insn_t code[] = {
        {BIB_CODE_LDI, 0, 40, 0, 0},
        {BIB_CODE_LDI, 1, 2, 0, 0},
        {BIB_CODE_ADD, 2, 0, 1, 0},
        {BIB_CODE_HALT, 2, 0, 0, 0},
    };
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_load_module(vm, module_of(code, 4, 3), "mem"), BIB_OK, "%s",
                 bib_vm_error(vm));
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(v, 42);
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    cr_assert_eq(s.instructions, 4);
    bib_vm_destroy(vm);
}

Test(interp, in_memory_module_is_verified_before_running) {
    const bib_insn_t code[] = {
        {BIB_CODE_ADD, 7, 0, 0, 0}, /* r7 does not exist */
        {BIB_CODE_HALT, 0, 0, 0, 0},
    };
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_load_module(vm, module_of(code, 2, 2), "mem"), BIB_E_VERIFY);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_STATE);
    bib_vm_destroy(vm);
}

Test(interp, in_memory_ldi64_combines_halves_and_ldk_inlines_constants) {
    const bib_insn_t code[] = {
        {BIB_CODE_LDI64, 0, 0x89ABCDEFu, 0x01234567u, 0},
        {BIB_CODE_LDK, 1, 0, 0, 0},
        {BIB_CODE_SUB, 2, 0, 1, 0},
        {BIB_CODE_HALT, 2, 0, 0, 0},
    };
    bib_module_t *m = module_of(code, 4, 3);
    m->consts = calloc(1, sizeof *m->consts);
    m->consts[0].type = BIB_CONST_I64;
    m->consts[0].bits = 0x0123456789ABCDE0ull;
    m->const_count = 1;
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_load_module(vm, m, "mem"), BIB_OK, "%s", bib_vm_error(vm));
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK);
    cr_assert_eq(v, 0xF);
    bib_vm_destroy(vm);
}

/* ---- integer arithmetic ------------------------------------------------------ */

Test(integer, add_wraps_around) {
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x7FFFFFFFFFFFFFFF\n LDI r1, 1\n ADD r2, r0, r1\n"
                      " HALT r2\n.end\n"),
                 INT64_MIN);
}

Test(integer, sub_and_neg_wrap_around) {
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x8000000000000000\n LDI r1, 1\n SUB r2, r0, r1\n"
                      " HALT r2\n.end\n"),
                 INT64_MAX);
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x8000000000000000\n NEG r1, r0\n HALT r1\n.end\n"),
                 INT64_MIN);
}

Test(integer, mul_keeps_low_64_bits) {
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x100000001\n LDI64 r1, 0x100000001\n"
                      " MUL r2, r0, r1\n HALT r2\n.end\n"),
                 0x200000001);
}

Test(integer, int64_min_divided_by_minus_one_is_int64_min) {
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x8000000000000000\n LDI r1, -1\n DIV r2, r0, r1\n"
                      " HALT r2\n.end\n"),
                 INT64_MIN);
}

Test(integer, int64_min_rem_minus_one_is_zero) {
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x8000000000000000\n LDI r1, -1\n REM r2, r0, r1\n"
                      " HALT r2\n.end\n"),
                 0);
}

Test(integer, signed_division_truncates_and_rem_takes_dividend_sign) {
    cr_assert_eq(eval(".func main\n LDI r0, -7\n LDI r1, 2\n DIV r2, r0, r1\n HALT r2\n.end\n"),
                 -3);
    cr_assert_eq(eval(".func main\n LDI r0, -7\n LDI r1, 2\n REM r2, r0, r1\n HALT r2\n.end\n"),
                 -1);
}

Test(integer, unsigned_division_reads_bits_unsigned) {
    cr_assert_eq(eval(".func main\n LDI r0, -1\n LDI r1, 2\n DIVU r2, r0, r1\n HALT r2\n.end\n"),
                 INT64_MAX);
    cr_assert_eq(eval(".func main\n LDI r0, -1\n LDI r1, 10\n REMU r2, r0, r1\n HALT r2\n.end\n"),
                 5); /* 18446744073709551615 % 10 */
}

Test(integer, division_by_zero_traps_naming_pc_instruction_and_line) {
    char err[512];
    bib_status_t st = run_src(".func main regs=4\n"
                              "    LDI r1, 7\n"
                              "    LDI r2, 0\n"
                              "    DIV r3, r1, r2\n"
                              "    HALT r3\n"
                              ".end\n",
                              NULL, err, sizeof err);
    cr_assert_eq(st, BIB_E_TRAP);
    cr_assert_str_eq(err, "trap at pc 2 (DIV r3, r1, r2) line 4: division by zero");
}

Test(integer, every_division_opcode_traps_on_zero) {
    const char *ops[] = {"DIV", "REM", "DIVU", "REMU"};
    for (int i = 0; i < 4; i++) {
        char src[200], err[512];
        snprintf(src, sizeof src, ".func main\n LDI r1, 5\n %s r0, r1, r2\n HALT r0\n.end\n",
                 ops[i]);
        cr_assert_eq(run_src(src, NULL, err, sizeof err), BIB_E_TRAP, "%s", ops[i]);
        cr_assert_not_null(strstr(err, "division by zero"), "%s", err);
    }
}

Test(integer, shift_counts_are_masked_by_63) {
    cr_assert_eq(eval(".func main\n LDI r0, 1\n LDI r1, 65\n SHL r2, r0, r1\n HALT r2\n.end\n"), 2);
    cr_assert_eq(eval(".func main\n LDI r0, -16\n LDI r1, 66\n SHR r2, r0, r1\n HALT r2\n.end\n"),
                 (int64_t)(UINT64_MAX << 4 >> 2));
    cr_assert_eq(eval(".func main\n LDI r0, -16\n LDI r1, 66\n SAR r2, r0, r1\n HALT r2\n.end\n"),
                 -4);
    cr_assert_eq(eval(".func main\n LDI r0, -16\n LDI r1, 64\n SAR r2, r0, r1\n HALT r2\n.end\n"),
                 -16);
}

Test(integer, bitwise_operations) {
    cr_assert_eq(eval(".func main\n LDI r0, 12\n LDI r1, 10\n AND r2, r0, r1\n OR r3, r0, r1\n"
                      " XOR r4, r0, r1\n NOT r5, r0\n ADD r6, r2, r3\n ADD r6, r6, r4\n"
                      " ADD r6, r6, r5\n HALT r6\n.end\n"),
                 8 + 14 + 6 + ~12LL);
}

Test(integer, comparisons_signed_and_unsigned) {
    cr_assert_eq(eval(".func main\n LDI r0, -1\n LDI r1, 1\n LT r2, r0, r1\n LTU r3, r0, r1\n"
                      " SHL r3, r3, r1\n OR r2, r2, r3\n LE r3, r0, r0\n LDI r4, 2\n"
                      " SHL r3, r3, r4\n OR r2, r2, r3\n LEU r3, r1, r0\n LDI r4, 3\n"
                      " SHL r3, r3, r4\n OR r2, r2, r3\n EQ r3, r0, r0\n LDI r4, 4\n"
                      " SHL r3, r3, r4\n OR r2, r2, r3\n NE r3, r0, r0\n LDI r4, 5\n"
                      " SHL r3, r3, r4\n OR r2, r2, r3\n HALT r2\n.end\n"),
                 1 | 0 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 0 << 5);
}

Test(integer, ldi_sign_extends_and_addi_wraps) {
    cr_assert_eq(eval(".func main\n LDI r0, -5\n HALT r0\n.end\n"), -5);
    cr_assert_eq(eval(".func main\n LDI64 r0, 0x7FFFFFFFFFFFFFFF\n ADDI r0, r0, 1\n HALT r0\n"
                      ".end\n"),
                 INT64_MIN);
}

/* ---- branches ------------------------------------------------------------------ */

Test(branch, every_conditional_branch_takes_and_falls_through) {
    const struct {
        const char *op;
        int64_t a, b;
        int taken;
    } cases[] = {
        {"JEQ", 3, 3, 1},   {"JEQ", 3, 4, 0},   {"JNE", 3, 4, 1},  {"JNE", 3, 3, 0},
        {"JLT", -1, 0, 1},  {"JLT", 0, -1, 0},  {"JLE", 2, 2, 1},  {"JLE", 3, 2, 0},
        {"JLTU", 0, -1, 1}, {"JLTU", -1, 0, 0}, {"JLEU", 5, 5, 1}, {"JLEU", -1, 5, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[300];
        snprintf(src, sizeof src,
                 ".func main\n LDI r0, %lld\n LDI r1, %lld\n %s r0, r1, yes\n LDI r2, 0\n"
                 " HALT r2\nyes:\n LDI r2, 1\n HALT r2\n.end\n",
                 (long long)cases[i].a, (long long)cases[i].b, cases[i].op);
        cr_assert_eq(eval(src), cases[i].taken, "%s %lld %lld", cases[i].op, (long long)cases[i].a,
                     (long long)cases[i].b);
    }
    cr_assert_eq(eval(".func main\n LDI r0, 0\n JZ r0, y\n HALT r0\ny:\n LDI r0, 9\n HALT r0\n"
                      ".end\n"),
                 9);
    cr_assert_eq(eval(".func main\n LDI r0, 0\n JNZ r0, y\n LDI r0, 4\n HALT r0\ny:\n HALT r0\n"
                      ".end\n"),
                 4);
}

Test(branch, loop_sums_with_fused_compare_and_branch) {
    cr_assert_eq(eval(".func main\n LDI r0, 0\n LDI r1, 1000\n LDI r2, 0\nloop:\n"
                      " JLE r1, r0, done\n ADD r2, r2, r0\n ADDI r0, r0, 1\n JMP loop\n"
                      "done:\n HALT r2\n.end\n"),
                 499500);
}

/* ---- memory ---------------------------------------------------------------------- */

Test(memory, loads_and_stores_every_width_little_endian) {
    cr_assert_eq(eval(".memory 64\n.func main\n LDI64 r0, 0x1122334455667788\n LDI r1, 8\n"
                      " STORE r0, r1, 0\n LOAD8U r2, r1, 0\n HALT r2\n.end\n"),
                 0x88);
    cr_assert_eq(eval(".memory 64\n.func main\n LDI64 r0, 0x1122334455667788\n LDI r1, 8\n"
                      " STORE r0, r1, 0\n LOAD16U r2, r1, 1\n HALT r2\n.end\n"),
                 0x6677);
    cr_assert_eq(eval(".memory 64\n.func main\n LDI64 r0, 0x1122334455667788\n LDI r1, 8\n"
                      " STORE r0, r1, 0\n LOAD32U r2, r1, 4\n HALT r2\n.end\n"),
                 0x11223344);
    cr_assert_eq(eval(".memory 64\n.func main\n LDI r0, -2\n LDI r1, 0\n STORE8 r0, r1, 3\n"
                      " LOAD8S r2, r1, 3\n HALT r2\n.end\n"),
                 -2);
    cr_assert_eq(eval(".memory 64\n.func main\n LDI r0, -3\n LDI r1, 0\n STORE16 r0, r1, 3\n"
                      " LOAD16S r2, r1, 3\n HALT r2\n.end\n"),
                 -3);
    cr_assert_eq(eval(".memory 64\n.func main\n LDI r0, -4\n LDI r1, 0\n STORE32 r0, r1, 3\n"
                      " LOAD32S r2, r1, 3\n LOAD32U r3, r1, 3\n ADD r2, r2, r3\n HALT r2\n.end\n"),
                 -4 + 0xFFFFFFFCll);
}

Test(memory, negative_offset_reaches_below_the_base) {
    cr_assert_eq(eval("d: .byte 1, 2, 3, 4\n.func main\n LDI r1, 3\n LOAD8U r0, r1, -2\n"
                      " HALT r0\n.end\n"),
                 2);
}

Test(memory, out_of_bounds_load_names_address_width_and_size) {
    char err[512];
    cr_assert_eq(run_src(".memory 16\n.func main regs=2\n LDI r1, 12\n LOAD r0, r1, 0\n"
                         " HALT r0\n.end\n",
                         NULL, err, sizeof err),
                 BIB_E_TRAP);
    cr_assert_str_eq(err, "trap at pc 1 (LOAD r0, r1, 0) line 4: out-of-bounds memory access: "
                          "address 12 (r1 = 12, offset 0), width 8, memory size 16 bytes");
}

Test(memory, last_byte_is_in_bounds_and_one_past_is_not) {
    cr_assert_eq(eval(".memory 16\n.func main\n LDI r1, 15\n LOAD8U r0, r1, 0\n HALT r0\n.end\n"),
                 0);
    char err[512];
    cr_assert_eq(run_src(".memory 16\n.func main\n LDI r1, 16\n LOAD8U r0, r1, 0\n HALT r0\n"
                         ".end\n",
                         NULL, err, sizeof err),
                 BIB_E_TRAP);
    cr_assert_eq(run_src(".memory 16\n.func main\n LDI r1, 9\n STORE r0, r1, 0\n HALT r0\n"
                         ".end\n",
                         NULL, err, sizeof err),
                 BIB_E_TRAP);
}

Test(memory, address_arithmetic_never_wraps_into_bounds) {
    char err[512];
    /* 2^64 - 1 + 1 would wrap to 0 in 64 bits. */
    cr_assert_eq(run_src(".memory 16\n.func main\n LDI r1, -1\n LOAD8U r0, r1, 1\n HALT r0\n"
                         ".end\n",
                         NULL, err, sizeof err),
                 BIB_E_TRAP);
    cr_assert_not_null(strstr(err, "beyond 64 bits"), "%s", err);
    /* base + offset below zero. */
    cr_assert_eq(run_src(".memory 16\n.func main\n LDI r1, 2\n LOAD8U r0, r1, -3\n HALT r0\n"
                         ".end\n",
                         NULL, err, sizeof err),
                 BIB_E_TRAP);
    /* the last 8 bytes of the address space */
    cr_assert_eq(run_src(".memory 16\n.func main\n LDI r1, -4\n LOAD r0, r1, 0\n HALT r0\n"
                         ".end\n",
                         NULL, err, sizeof err),
                 BIB_E_TRAP);
}

Test(memory, module_without_memory_traps_on_any_access) {
    char err[512];
    cr_assert_eq(run_src(".func main\n LDI r1, 0\n LOAD8U r0, r1, 0\n HALT r0\n.end\n", NULL, err,
                         sizeof err),
                 BIB_E_TRAP);
    cr_assert_not_null(strstr(err, "memory size 0 bytes"), "%s", err);
}

Test(memory, memsize_and_data_initialise_memory_each_run) {
    bib_vm_t *vm = vm_new(NULL);
    load_src(vm, "d: .byte 5\n.memory 100\n.func main\n LDI r1, 0\n LOAD8U r0, r1, 0\n"
                 " ADDI r2, r0, 1\n STORE8 r2, r1, 0\n STORE8 r2, r1, 50\n MEMSIZE r3\n"
                 " ADD r0, r0, r3\n HALT r0\n.end\n");
    for (int run = 0; run < 3; run++) {
        int64_t v = 0;
        cr_assert_eq(bib_vm_run(vm, &v), BIB_OK);
        cr_assert_eq(v, 105, "run %d", run);
    }
    uint64_t size = 0;
    uint8_t *mem = bib_vm_memory(vm, &size);
    cr_assert_eq(size, 100);
    cr_assert_eq(mem[0], 6);
    cr_assert_eq(mem[50], 6);
    bib_vm_destroy(vm);
}

Test(memory, f32_loads_widen_and_stores_round_to_nearest_even) {
    /* 1 + 2^-24 is a tie between two binary32 values: rounds to even, 1.0. */
    int64_t v = eval(".memory 8\n.func main\n LDI64 r0, 1.000000059604644775390625\n LDI r1, 0\n"
                     " STOREF32 r0, r1, 0\n LOADF32 r2, r1, 0\n HALT r2\n.end\n");
    cr_assert_eq(u2f((uint64_t)v), 1.0);
    v = eval(".memory 8\n.func main\n LDI64 r0, 0.1\n LDI r1, 0\n STOREF32 r0, r1, 0\n"
             " LOADF32 r2, r1, 0\n HALT r2\n.end\n");
    cr_assert_eq(u2f((uint64_t)v), (double)0.1f);
}

/* ---- floating point ------------------------------------------------------------- */

static double feval2(const char *op, double x, double y) {
    char src[300];
    snprintf(src, sizeof src,
             ".func main\n LDI64 r0, bits(0x%016llX)\n LDI64 r1, bits(0x%016llX)\n"
             " %s r2, r0, r1\n HALT r2\n.end\n",
             (unsigned long long)f2u(x), (unsigned long long)f2u(y), op);
    return u2f((uint64_t)eval(src));
}

static int64_t ieval1(const char *op, uint64_t x) {
    char src[300];
    snprintf(src, sizeof src,
             ".func main\n LDI64 r0, bits(0x%016llX)\n %s r2, r0\n HALT r2\n.end\n",
             (unsigned long long)x, op);
    return eval(src);
}

Test(floating, arithmetic_is_ieee_binary64) {
    cr_assert_eq(feval2("FADD", 0.1, 0.2), 0.1 + 0.2);
    cr_assert_eq(feval2("FSUB", 1.0, 0.25), 0.75);
    cr_assert_eq(feval2("FMUL", 1.5, -2.0), -3.0);
    cr_assert_eq(feval2("FDIV", 1.0, 0.0), INFINITY);
    cr_assert(isnan(feval2("FDIV", 0.0, 0.0)));
    cr_assert_eq(u2f((uint64_t)ieval1("FSQRT", f2u(2.0))), sqrt(2.0));
}

Test(floating, fneg_and_fabs_touch_only_the_sign_bit) {
    cr_assert_eq((uint64_t)ieval1("FNEG", 0x7FF8000000000001ull), 0xFFF8000000000001ull);
    cr_assert_eq((uint64_t)ieval1("FABS", 0xFFF0000000000000ull), 0x7FF0000000000000ull);
    cr_assert_eq((uint64_t)ieval1("FNEG", f2u(0.0)), f2u(-0.0));
}

Test(floating, fmin_fmax_propagate_nan_and_order_signed_zeros) {
    cr_assert(isnan(feval2("FMIN", NAN, 1.0)));
    cr_assert(isnan(feval2("FMIN", 1.0, NAN)));
    cr_assert(isnan(feval2("FMAX", NAN, 1.0)));
    cr_assert(isnan(feval2("FMAX", 1.0, NAN)));
    cr_assert_eq(f2u(feval2("FMIN", 0.0, -0.0)), f2u(-0.0));
    cr_assert_eq(f2u(feval2("FMIN", -0.0, 0.0)), f2u(-0.0));
    cr_assert_eq(f2u(feval2("FMAX", -0.0, 0.0)), f2u(0.0));
    cr_assert_eq(f2u(feval2("FMAX", 0.0, -0.0)), f2u(0.0));
    cr_assert_eq(feval2("FMIN", 2.0, -3.0), -3.0);
    cr_assert_eq(feval2("FMAX", 2.0, -3.0), 2.0);
}

Test(floating, comparisons_with_nan) {
    cr_assert_eq(f2u(feval2("FEQ", NAN, NAN)), 0);
    cr_assert_eq(f2u(feval2("FNE", NAN, NAN)), 1);
    cr_assert_eq(f2u(feval2("FLT", NAN, 1.0)), 0);
    cr_assert_eq(f2u(feval2("FLE", 1.0, NAN)), 0);
    cr_assert_eq(f2u(feval2("FLE", 1.0, 1.0)), 1);
    cr_assert_eq(f2u(feval2("FEQ", 0.0, -0.0)), 1);
}

Test(floating, ftoi_maps_nan_to_zero_and_saturates) {
    cr_assert_eq(ieval1("FTOI", f2u(NAN)), 0);
    cr_assert_eq(ieval1("FTOI", f2u(1e300)), INT64_MAX);
    cr_assert_eq(ieval1("FTOI", f2u(-1e300)), INT64_MIN);
    cr_assert_eq(ieval1("FTOI", f2u(INFINITY)), INT64_MAX);
    cr_assert_eq(ieval1("FTOI", f2u(9223372036854775808.0)), INT64_MAX);
    cr_assert_eq(ieval1("FTOI", f2u(-9223372036854775808.0)), INT64_MIN);
    cr_assert_eq(ieval1("FTOI", f2u(-2.9)), -2);
    cr_assert_eq(ieval1("FTOI", f2u(2.9)), 2);
}

Test(floating, integer_conversions_round_to_nearest) {
    cr_assert_eq(u2f((uint64_t)ieval1("ITOF", (uint64_t)-3)), -3.0);
    cr_assert_eq(u2f((uint64_t)ieval1("UTOF", UINT64_MAX)), 18446744073709551616.0);
    cr_assert_eq(u2f((uint64_t)ieval1("ITOF", (1ull << 53) + 1)), 9007199254740992.0);
}

/* ---- calls ------------------------------------------------------------------------ */

Test(call, fib_recursion_returns_through_windows) {
    cr_assert_eq(eval(".func main regs=2\n LDI r0, 20\n CALL r1, fib, r0, 1\n HALT r1\n.end\n"
                      ".func fib args=1 regs=4\n LDI r1, 2\n JLT r0, r1, small\n"
                      " ADDI r1, r0, -1\n CALL r2, fib, r1, 1\n ADDI r1, r0, -2\n"
                      " CALL r3, fib, r1, 1\n ADD r0, r2, r3\nsmall:\n RET r0\n.end\n"),
                 6765);
}

Test(call, callee_window_is_zeroed_and_arguments_copied) {
    /* f sums its arguments and its never-written registers (which must be 0),
       after the caller filled its own registers with junk. */
    cr_assert_eq(eval(".func main regs=8\n LDI r0, 99\n LDI r1, 99\n LDI r2, 99\n LDI r3, 1\n"
                      " LDI r4, 2\n LDI r5, 99\n CALL r6, f, r3, 2\n HALT r6\n.end\n"
                      ".func f args=2 regs=6\n ADD r0, r0, r1\n ADD r0, r0, r2\n ADD r0, r0, r3\n"
                      " ADD r0, r0, r4\n ADD r0, r0, r5\n RET r0\n.end\n"),
                 3);
}

Test(call, caller_registers_survive_the_call) {
    cr_assert_eq(eval(".func main regs=3\n LDI r0, 7\n LDI r1, 5\n CALL r2, f, r1, 1\n"
                      " ADD r0, r0, r2\n HALT r0\n.end\n"
                      ".func f args=1 regs=3\n LDI r1, 1000\n LDI r2, 1000\n ADD r0, r0, r0\n"
                      " RET r0\n.end\n"),
                 17);
}

Test(call, entry_function_return_ends_the_run) {
    cr_assert_eq(eval(".func main\n LDI r0, 31\n RET r0\n.end\n"), 31);
}

Test(call, call_stack_overflow_traps_at_depth_10000) {
    char err[512];
    cr_assert_eq(
        run_src(".func main\n CALL r0, main, r0, 0\n RET r0\n.end\n", NULL, err, sizeof err),
        BIB_E_TRAP);
    cr_assert_str_eq(err, "trap at pc 0 (CALL r0, main, r0, 0) line 2: call stack overflow "
                          "(depth 10000)");
}

Test(call, call_depth_comes_from_options) {
    bib_options_t o;
    bib_options_init(&o);
    o.max_call_depth = 50;
    bib_vm_t *vm = vm_new(&o);
    /* depth(n) recurses n times: 49 nested calls fit under a limit of 50 frames. */
    const char *src = ".func main regs=2\n LDI r0, %d\n CALL r1, d, r0, 1\n HALT r1\n.end\n"
                      ".func d args=1 regs=2\n JZ r0, out\n ADDI r0, r0, -1\n"
                      " CALL r1, d, r0, 1\n ADDI r0, r1, 1\nout:\n RET r0\n.end\n";
    char text[400];
    snprintf(text, sizeof text, src, 48);
    load_src(vm, text);
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(v, 48);
    snprintf(text, sizeof text, src, 49);
    load_src(vm, text);
    cr_assert_eq(bib_vm_run(vm, &v), BIB_E_TRAP);
    cr_assert_not_null(strstr(bib_vm_error(vm), "call stack overflow (depth 50)"), "%s",
                       bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(call, deep_recursion_with_wide_frames_grows_the_stacks) {
    /* 5000 frames of 200 registers: the register stack and frame array grow
       (and move) many times; values in saved windows must survive. */
    int64_t v = eval(".func main regs=2\n LDI r0, 5000\n CALL r1, d, r0, 1\n HALT r1\n.end\n"
                     ".func d args=1 regs=200\n MOV r199, r0\n JZ r0, out\n ADDI r0, r0, -1\n"
                     " CALL r1, d, r0, 1\n ADD r0, r1, r199\nout:\n RET r0\n.end\n");
    cr_assert_eq(v, 5000LL * 5001 / 2);
}

Test(call, register_stack_past_the_memory_cap_fails_with_nomem) {
    bib_options_t o;
    bib_options_init(&o);
    o.max_memory = 1 << 20;
    bib_vm_t *vm = vm_new(&o);
    load_src(vm, ".func main regs=2\n LDI r0, 9000\n CALL r1, d, r0, 1\n HALT r1\n.end\n"
                 ".func d args=1 regs=1000\n JZ r0, out\n ADDI r0, r0, -1\n"
                 " CALL r1, d, r0, 1\nout:\n RET r0\n.end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_NOMEM);
    cr_assert_not_null(strstr(bib_vm_error(vm), "cap 1048576 bytes"), "%s", bib_vm_error(vm));
    cr_assert_not_null(strstr(bib_vm_error(vm), "asked for"), "%s", bib_vm_error(vm));
    cr_assert_not_null(strstr(bib_vm_error(vm), "(CALL r1, d, r0, 1)"), "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

/* ---- forwarding superinstructions (vm/vm.h, BIB_FORWARD_ROWS) ------------------------ */

/* Every row, from the table itself: its opcodes, side and dispatch index. */
typedef struct fwd_row {
    uint32_t first, second; /* opcode words */
    uint16_t first_op;      /* bib_opcode_t */
    char side;              /* 'L', 'R' or 'S' */
    uint16_t xop;
    const char *name;
} fwd_row_t;

static const fwd_row_t fwd_rows[] = {
#define FWD_ROW(op1, op2, s)                                                                       \
    {BIB_CODE_##op1,                                                                               \
     BIB_CODE_##op2,                                                                               \
     BIB_OP_##op1,                                                                                 \
     #s[0],                                                                                        \
     BIB_XOP_F_##op1##_##op2##_##s,                                                                \
     #op1 " then " #op2 " (" #s ")"},
    BIB_FORWARD_ROWS(FWD_ROW)
#undef FWD_ROW
};

/* Whether the opcode's result is f64 arithmetic's (ITOF's is exact, no NaN). */
static bool fwd_is_f64_op(uint32_t code) {
    return code == BIB_CODE_FADD || code == BIB_CODE_FSUB || code == BIB_CODE_FMUL ||
           code == BIB_CODE_FDIV || code == BIB_CODE_FSQRT || code == BIB_CODE_FADDK ||
           code == BIB_CODE_FSUBK || code == BIB_CODE_FMULK || code == BIB_CODE_FDIVK ||
           code == BIB_CODE_FRSUBK || code == BIB_CODE_FRDIVK;
}

/* Whether the second takes one register operand and a constant or immediate. */
static bool fwd_is_unary_second(uint32_t code) {
    return code == BIB_CODE_ADDI || code == BIB_CODE_MULI || code == BIB_CODE_DIVI ||
           code == BIB_CODE_ITOF || code == BIB_CODE_FADDK || code == BIB_CODE_FSUBK ||
           code == BIB_CODE_FMULK || code == BIB_CODE_FDIVK || code == BIB_CODE_FRSUBK ||
           code == BIB_CODE_FRDIVK;
}

/* K[0] of every program, the constant of FADDK .. FRDIVK: 0.3. */
#define FWD_K 0x3FD3333333333333ull

/* The first instruction's result from r1 = a, r2 = b (a load reads a). */
static uint64_t fwd_ref_first(uint32_t code, uint64_t a, uint64_t b) {
    double x = u2f(a), y = u2f(b);
    switch (code) {
    case BIB_CODE_FADD:
        return f2u(x + y);
    case BIB_CODE_FSUB:
        return f2u(x - y);
    case BIB_CODE_FMUL:
        return f2u(x * y);
    case BIB_CODE_FDIV:
        return f2u(x / y);
    case BIB_CODE_FSQRT:
        return f2u(sqrt(x));
    case BIB_CODE_ADD:
        return a + b;
    case BIB_CODE_SUB:
        return a - b;
    case BIB_CODE_ADDI:
        return a + (uint64_t)-7;
    case BIB_CODE_MUL:
        return a * b;
    case BIB_CODE_MULI:
        return a * (uint64_t)-3;
    case BIB_CODE_DIVI:
        return (uint64_t)((int64_t)a / 3);
    case BIB_CODE_ITOF:
        return f2u((double)(int64_t)a);
    default:
        return a; /* LOAD, LOADX */
    }
}

/* The second instruction's result from operands x and y. */
static uint64_t fwd_ref_second(uint32_t code, uint64_t x, uint64_t y) {
    switch (code) {
    case BIB_CODE_FADD:
        return f2u(u2f(x) + u2f(y));
    case BIB_CODE_FSUB:
        return f2u(u2f(x) - u2f(y));
    case BIB_CODE_FMUL:
        return f2u(u2f(x) * u2f(y));
    case BIB_CODE_FDIV:
        return f2u(u2f(x) / u2f(y));
    case BIB_CODE_ADD:
        return x + y;
    case BIB_CODE_SUB:
        return x - y;
    case BIB_CODE_ADDI:
        return x + 11;
    case BIB_CODE_MUL:
        return x * y;
    case BIB_CODE_ITOF:
        return f2u((double)(int64_t)x);
    case BIB_CODE_MULI:
        return x * 5;
    case BIB_CODE_DIVI:
        return (uint64_t)((int64_t)x / -7);
    case BIB_CODE_FADDK:
        return f2u(u2f(x) + u2f(FWD_K));
    case BIB_CODE_FSUBK:
        return f2u(u2f(x) - u2f(FWD_K));
    case BIB_CODE_FMULK:
        return f2u(u2f(x) * u2f(FWD_K));
    case BIB_CODE_FDIVK:
        return f2u(u2f(x) / u2f(FWD_K));
    case BIB_CODE_FRSUBK:
        return f2u(u2f(FWD_K) - u2f(x));
    case BIB_CODE_FRDIVK:
        return f2u(u2f(FWD_K) / u2f(x));
    default:
        return 0; /* a store writes no register: r7 stays 0 */
    }
}

/* Equal bits, or two NaNs where f64 arithmetic made them: which NaN an
   operation returns is the hardware's (spec/numerics.md). */
static bool fwd_same(uint64_t x, uint64_t y, bool f64) {
    return x == y || (f64 && isnan(u2f(x)) && isnan(u2f(y)));
}

typedef struct fwd_outcome {
    bib_status_t load, run;
    int64_t exit;
    uint16_t xop;
    uint64_t insns;
    char error[256];
    uint8_t mem[64];
} fwd_outcome_t;

static fwd_outcome_t fwd_run(const bib_insn_t *code, uint32_t n, int profiled, uint64_t fuel) {
    fwd_outcome_t o;
    memset(&o, 0, sizeof o);
    bib_options_t opt;
    bib_options_init(&opt);
    if (fuel != 0)
        opt.fuel = fuel;
    bib_vm_t *vm = vm_new(&opt);
    bib_module_t *m = module_of(code, n, 8);
    m->memory_size = sizeof o.mem;
    m->consts = calloc(1, sizeof *m->consts);
    m->consts[0].type = BIB_CONST_F64;
    m->consts[0].bits = FWD_K;
    m->const_count = 1;
    o.load = bib_vm_load_module(vm, m, "fwd");
    cr_assert_eq(o.load, BIB_OK, "%s", bib_vm_error(vm));
    o.xop = vm->program.code[6].xop;
    cr_assert_eq(bib_vm_profile(vm, profiled), BIB_OK);
    o.run = bib_vm_run(vm, &o.exit);
    snprintf(o.error, sizeof o.error, "%s", o.run == BIB_OK ? "" : bib_vm_error(vm));
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    o.insns = s.instructions;
    uint64_t size = 0;
    const uint8_t *mem = bib_vm_memory(vm, &size);
    cr_assert_eq(size, sizeof o.mem);
    memcpy(o.mem, mem, sizeof o.mem);
    bib_vm_destroy(vm);
    return o;
}

static uint64_t fwd_word(const uint8_t *mem, uint64_t at) {
    uint64_t v;
    memcpy(&v, mem + at, sizeof v);
    return v;
}

/* pc 6 is the first of the pair, pc 7 the second: r1 = a, r2 = b, r3 = c,
   r4 = base, r6 = 2 (an index: LOADX scales it by 4, STOREX by 8),
   m[base + 8] = a; the first writes rd, the second r7
   (or stores rd to m[base + 16]); then rd and r7 are stored to m[base + 24]
   and m[base + 32]. both: the second reads rd as both operands. */
static uint32_t fwd_program(bib_insn_t *code, const fwd_row_t *row, uint64_t a, uint64_t b,
                            uint64_t c, uint32_t base, uint32_t rd, bool both) {
    const uint64_t v[3] = {a, b, c};
    for (uint32_t k = 0; k < 3; k++)
        code[k] = (bib_insn_t){BIB_CODE_LDI64, k + 1, (uint32_t)v[k], (uint32_t)(v[k] >> 32), 0};
    code[3] = (bib_insn_t){BIB_CODE_LDI, 4, base, 0, 0};
    code[4] = (bib_insn_t){BIB_CODE_LDI, 6, 2, 0, 0};
    code[5] = (bib_insn_t){BIB_CODE_STORE, 1, 4, 8, 0};
    switch (row->first) {
    case BIB_CODE_FSQRT:
    case BIB_CODE_ITOF:
        code[6] = (bib_insn_t){row->first, rd, 1, 0, 0};
        break;
    case BIB_CODE_ADDI:
        code[6] = (bib_insn_t){row->first, rd, 1, (uint32_t)-7, 0};
        break;
    case BIB_CODE_MULI:
        code[6] = (bib_insn_t){row->first, rd, 1, (uint32_t)-3, 0};
        break;
    case BIB_CODE_DIVI:
        code[6] = (bib_insn_t){row->first, rd, 1, 3, 0};
        break;
    case BIB_CODE_LOAD:
        code[6] = (bib_insn_t){row->first, rd, 4, 8, 0};
        break;
    case BIB_CODE_LOADX:
        code[6] = (bib_insn_t){row->first, rd, 4, 6, 2};
        break;
    default:
        code[6] = (bib_insn_t){row->first, rd, 1, 2, 0};
        break;
    }
    if (row->second == BIB_CODE_STORE)
        code[7] = (bib_insn_t){row->second, rd, 4, 16, 0};
    else if (row->second == BIB_CODE_STOREX)
        code[7] = (bib_insn_t){row->second, rd, 4, 6, 3};
    else if (row->second == BIB_CODE_ADDI)
        code[7] = (bib_insn_t){row->second, 7, rd, 11, 0};
    else if (row->second == BIB_CODE_MULI)
        code[7] = (bib_insn_t){row->second, 7, rd, 5, 0};
    else if (row->second == BIB_CODE_DIVI)
        code[7] = (bib_insn_t){row->second, 7, rd, (uint32_t)-7, 0};
    else if (fwd_is_unary_second(row->second))
        code[7] = (bib_insn_t){row->second, 7, rd, 0, 0}; /* ITOF, or K[0] */
    else if (both)
        code[7] = (bib_insn_t){row->second, 7, rd, rd, 0};
    else if (row->side == 'L')
        code[7] = (bib_insn_t){row->second, 7, rd, 3, 0};
    else
        code[7] = (bib_insn_t){row->second, 7, 3, rd, 0};
    code[8] = (bib_insn_t){BIB_CODE_STORE, rd, 4, 24, 0};
    code[9] = (bib_insn_t){BIB_CODE_STORE, 7, 4, 32, 0};
    code[10] = (bib_insn_t){BIB_CODE_HALT, 7, 0, 0, 0};
    return 11;
}

Test(forward, every_row_fuses_and_matches_the_reference_and_the_instrumented_loop) {
    static const uint64_t values[][3] = {
        {0x3FF8000000000000ull, 0xC002000000000000ull, 0x4008000000000000ull}, /* 1.5 -2.25 3 */
        {0x7FF8000000000123ull, 0xFFF8000000000456ull, 0x3FF0000000000000ull}, /* NaN NaN 1 */
        {0x7FF800000000BEEFull, 0x4000000000000000ull, 0xFFF800000000CAFEull}, /* NaN 2 NaN */
        {0x8000000000000000ull, 0x0000000000000000ull, 0x8000000000000000ull}, /* -0 +0 -0 */
        {0x7FE1CCF385EBC8A0ull, 0x7FE1CCF385EBC8A0ull, 0x0000000000000001ull}, /* 1e308 1e308 dn */
        {0x7FFFFFFFFFFFFFFFull, 0x0000000000000005ull, 0xFFFFFFFFFFFFFFFDull}, /* MAX 5 -3 */
        {0x0000010000000000ull, 0xFFFFFFFFFFFFFFFFull, 0x0000000000000007ull}, /* 2^40 -1 7 */
    };
    size_t nrows = sizeof fwd_rows / sizeof fwd_rows[0];
    cr_assert_eq(nrows, (size_t)(BIB_XOP__COUNT - BIB_XOP_F_FADD_FADD_L));
    for (size_t r = 0; r < nrows; r++) {
        const fwd_row_t *row = &fwd_rows[r];
        bool f64_first = fwd_is_f64_op(row->first);
        bool f64_second = fwd_is_f64_op(row->second);
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++)
            for (int variant = 0; variant < 4; variant++) {
                /* 0: rd r5; 1: rd r1, the first's own source; 2: the second reads rd
                   twice; 3: base 48, where a store at base + 16 traps */
                bool both = variant == 2;
                if (both && row->side == 'S')
                    continue;
                if (both && fwd_is_unary_second(row->second))
                    continue;
                uint32_t rd = variant == 1 ? 1 : 5, base = variant == 3 ? 48 : 8;
                const uint64_t *x = values[v];
                bib_insn_t code[16];
                uint32_t n = fwd_program(code, row, x[0], x[1], x[2], base, rd, both);
                fwd_outcome_t plain = fwd_run(code, n, 0, 0);
                fwd_outcome_t slow = fwd_run(code, n, 1, 0);
                const char *what = row->name;
                if (!both)
                    cr_assert_eq(plain.xop, row->xop, "%s: decoded as xop %u", what, plain.xop);
                else
                    cr_assert_neq(plain.xop, row->first_op, "%s (both): not fused", what);
                cr_assert_eq(slow.run, plain.run, "%s values %zu variant %d", what, v, variant);
                cr_assert_str_eq(slow.error, plain.error, "%s values %zu", what, v);
                cr_assert_eq(slow.insns, plain.insns, "%s values %zu", what, v);
                for (uint64_t at = 0; at < sizeof plain.mem; at += 8) {
                    bool f64 = (at == base + 16 || at == base + 24) ? f64_first : f64_second;
                    cr_assert(fwd_same(fwd_word(plain.mem, at), fwd_word(slow.mem, at), f64),
                              "%s values %zu variant %d: m[%llu] %016llx, instrumented %016llx",
                              what, v, variant, (unsigned long long)at,
                              (unsigned long long)fwd_word(plain.mem, at),
                              (unsigned long long)fwd_word(slow.mem, at));
                }
                if (variant == 3) {
                    cr_assert_eq(plain.run, BIB_E_TRAP, "%s", what);
                    cr_assert(strstr(plain.error,
                                     row->side == 'S' ? "trap at pc 7 " : "trap at pc 8 ") != NULL,
                              "%s: %s", what, plain.error);
                    continue;
                }
                cr_assert_eq(plain.run, BIB_OK, "%s: %s", what, plain.error);
                uint64_t a = x[0], t = fwd_ref_first(row->first, a, x[1]);
                uint64_t y = both ? t : x[2];
                uint64_t want = row->side == 'R' ? fwd_ref_second(row->second, y, t)
                                                 : fwd_ref_second(row->second, t, y);
                cr_assert(fwd_same(fwd_word(plain.mem, base + 24), t, f64_first),
                          "%s values %zu variant %d: first gave %016llx, want %016llx", what, v,
                          variant, (unsigned long long)fwd_word(plain.mem, base + 24),
                          (unsigned long long)t);
                cr_assert(fwd_same(fwd_word(plain.mem, base + 32), want, f64_second),
                          "%s values %zu variant %d: second gave %016llx, want %016llx", what, v,
                          variant, (unsigned long long)fwd_word(plain.mem, base + 32),
                          (unsigned long long)want);
                if (row->side == 'S')
                    cr_assert(fwd_same(fwd_word(plain.mem, base + 16), t, f64_first),
                              "%s values %zu: stored %016llx, want %016llx", what, v,
                              (unsigned long long)fwd_word(plain.mem, base + 16),
                              (unsigned long long)t);
            }
    }
}

/* Fuel that ends between the two instructions of a pair stops at the second,
   as the instrumented loop does, with the first's result written. */
Test(forward, fuel_ending_inside_a_pair_stops_at_the_second) {
    for (size_t r = 0; r < sizeof fwd_rows / sizeof fwd_rows[0]; r++) {
        bib_insn_t code[16];
        uint32_t n = fwd_program(code, &fwd_rows[r], 0x3FF8000000000000ull, 0x4000000000000000ull,
                                 0x4008000000000000ull, 8, 5, false);
        fwd_outcome_t plain = fwd_run(code, n, 0, 7);
        fwd_outcome_t slow = fwd_run(code, n, 1, 7);
        cr_assert_eq(plain.xop, fwd_rows[r].xop);
        cr_assert_eq(plain.run, BIB_E_TRAP, "%s", fwd_rows[r].name);
        cr_assert(strstr(plain.error, "trap at pc 7 ") != NULL &&
                      strstr(plain.error, "fuel") != NULL,
                  "%s: %s", fwd_rows[r].name, plain.error);
        cr_assert_str_eq(slow.error, plain.error);
        cr_assert_eq(plain.insns, 7);
        cr_assert_eq(slow.insns, 7);
        cr_assert_eq(memcmp(plain.mem, slow.mem, sizeof plain.mem), 0, "%s", fwd_rows[r].name);
    }
}

/* A jump that lands on the second instruction of a pair runs it alone, with
   its operand read from the register file. */
Test(forward, a_jump_to_the_second_of_a_pair_runs_it_alone) {
    int64_t v = eval(".func main regs=8\n LDK r3, =1.0\n LDI r5, 0\n LDI r6, 0\n JMP second\n"
                     "first:\n FMUL r5, r3, r3\nsecond:\n FADD r7, r5, r3\n ADDI r6, r6, 1\n"
                     " JLTI r6, 3, first\n HALT r7\n.end\n");
    cr_assert_eq((uint64_t)v, f2u(2.0));
    v = eval(".func main regs=8\n LDI r5, 40\n LDI r6, 0\n JMP second\nfirst:\n ADDI r5, r5, 1\n"
             "second:\n MUL r7, r5, r5\n ADDI r6, r6, 1\n JLTI r6, 2, first\n HALT r7\n.end\n");
    cr_assert_eq(v, 41 * 41);
}

/* ---- traps, fuel, reuse -------------------------------------------------------------- */

Test(trap, trap_opcode_names_its_code) {
    char err[512];
    cr_assert_eq(run_src(".func main\n TRAP 7\n.end\n", NULL, err, sizeof err), BIB_E_TRAP);
    cr_assert_str_eq(err, "trap at pc 0 (TRAP 7) line 2: TRAP with code 7");
}

Test(trap, fuel_exhaustion_stops_after_exactly_the_fuel) {
    bib_options_t o;
    bib_options_init(&o);
    o.fuel = 1000;
    bib_vm_t *vm = vm_new(&o);
    load_src(vm, ".func main\nloop:\n JMP loop\n.end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_TRAP);
    cr_assert_str_eq(bib_vm_error(vm),
                     "trap at pc 0 (JMP loop) line 3: fuel exhausted (1000 instructions)");
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    cr_assert_eq(s.instructions, 1000);
    bib_vm_destroy(vm);
}

Test(trap, fuel_is_enough_for_a_program_that_fits) {
    bib_options_t o;
    bib_options_init(&o);
    o.fuel = 3;
    bib_vm_t *vm = vm_new(&o);
    load_src(vm, ".func main\n LDI r0, 1\n ADDI r0, r0, 1\n HALT r0\n.end\n");
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(v, 2);
    bib_vm_destroy(vm);
}

/* ALLOC, FILL and THASH of a [1024,1024] tensor: 1 + 1048576/1024 = 1025
   fuel each (spec/cli.md, --fuel), 8 instructions, 3080 fuel in all. */
static const char *tensor_fuel_src = ".func main regs=4\n LDI r0, 1024\n LDI r1, 1024\n"
                                     " ALLOC t0, f32, r0, 2\n LDI r2, 0\n FILL t0, r2\n"
                                     " THASH r3, t0\n LDI r0, 7\n HALT r0\n.end\n";

static bib_vm_t *fuel_vm(uint64_t fuel, bib_trace_format_t trace, FILE *out) {
    bib_options_t o;
    bib_options_init(&o);
    o.fuel = fuel;
    o.trace_format = trace;
    o.trace = out;
    bib_vm_t *vm = vm_new(&o);
    load_src(vm, tensor_fuel_src);
    return vm;
}

Test(trap, stats_count_instructions_and_fuel_apart_when_tensor_work_is_charged) {
    bib_vm_t *vm = fuel_vm(0, BIB_TRACE_OFF, NULL);
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(v, 7);
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    cr_expect_eq(s.instructions, 8);
    cr_expect_eq(s.fuel, 8 + 3 * 1024);
    bib_vm_destroy(vm);
}

Test(trap, fuel_of_a_scalar_program_equals_its_instructions) {
    bib_vm_t *vm = vm_new(NULL);
    load_src(vm, ".func main\n LDI r0, 1\n ADDI r0, r0, 1\n HALT r0\n.end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    cr_expect_eq(s.instructions, 3);
    cr_expect_eq(s.fuel, 3);
    bib_vm_destroy(vm);
}

Test(trap, tensor_op_short_of_fuel_does_not_run_and_is_not_counted) {
    bib_vm_t *vm = fuel_vm(2000, BIB_TRACE_OFF, NULL);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_TRAP);
    cr_assert_str_eq(bib_vm_error(vm),
                     "trap at pc 4 (FILL t0, r2) line 6: fuel exhausted (FILL costs 1025 for "
                     "1048576 elements of work, 972 left after 4 instructions)");
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    cr_expect_eq(s.instructions, 4);
    cr_expect_eq(s.fuel, 4 + 1024);
    bib_vm_destroy(vm);
}

Test(trap, scalar_fuel_trap_after_tensor_work_splits_the_fuel) {
    bib_vm_t *vm = fuel_vm(3079, BIB_TRACE_OFF, NULL);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_TRAP);
    cr_assert_str_eq(bib_vm_error(vm), "trap at pc 7 (HALT r0) line 9: fuel exhausted (3079: 7 "
                                       "instructions, 3072 for tensor work)");
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    cr_expect_eq(s.instructions, 7);
    cr_expect_eq(s.fuel, 3079);
    bib_vm_destroy(vm);
}

/* The fuel of one tensor opcode over [64,64] operands, when the VM copies an
   operand before the kernel (a broadcast expanded, an axis moved last) and
   when it does not: the same W from the shapes (spec/cli.md), so the order of
   the operands or the axis named does not change it, and a run short of it
   traps before the copy. */
static uint64_t fuel_of(const char *op, uint64_t fuel, bib_status_t *st) {
    char src[512];
    snprintf(src, sizeof src,
             ".func main regs=4\n LDI r0, 64\n LDI r1, 64\n ALLOC t0, f32, r0, 2\n"
             " ALLOC t1, f32, r0, 1\n ALLOC t4, i32, r1, 1\n LDI r2, 1\n ALLOC t5, f32, r2, 1\n"
             " %s\n HALT r2\n.end\n",
             op);
    bib_options_t o;
    bib_options_init(&o);
    o.fuel = fuel;
    bib_vm_t *vm = vm_new(&o);
    load_src(vm, src);
    *st = bib_vm_run(vm, NULL);
    bib_run_stats_t s;
    bib_vm_stats(vm, &s);
    bib_vm_destroy(vm);
    return s.fuel;
}

Test(trap, copies_inside_a_tensor_opcode_cost_no_fuel_of_their_own) {
    /* 7 instructions before, 1 after; ALLOCs of 4096, 64, 64 and 1 zeroes
       cost 4 extra; the opcode its own 1 + W / 1024. */
    static const struct {
        const char *op;
        uint64_t w;
    } cases[] = {
        {"TADD t2, t0, t5", 4096 + 1 + 4096},           /* b one element: no copy */
        {"TADD t2, t5, t0", 1 + 4096 + 4096},           /* a one element: expanded first */
        {"TADD t2, t1, t0", 64 + 4096 + 4096},          /* a row: expanded first */
        {"WHERE t2, t4, t0, t5", 64 + 4096 + 1 + 4096}, /* the condition a row */
        {"REDUCE_SUM t2, t0, 2, 0", 4096 + 64},         /* the last axis: no copy */
        {"REDUCE_SUM t2, t0, 1, 0", 4096 + 64},         /* axis 0: down the columns */
        {"SOFTMAX_AXIS t2, t0, 0", 4096 + 4096},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint64_t want = 9 + 4 + cases[i].w / 1024;
        bib_status_t st;
        uint64_t got = fuel_of(cases[i].op, 0, &st);
        cr_expect_eq(got, want, "%s: %" PRIu64 " fuel, not %" PRIu64 " (%s)", cases[i].op, got,
                     want, st == BIB_OK ? "ran" : "trapped");
        cr_expect_eq(st, BIB_OK, "%s", cases[i].op);
        /* One unit short of the opcode (HALT needs the last): it traps, charged nothing beyond its
           instruction count (no copy ran first). */
        cr_expect_eq(fuel_of(cases[i].op, want - 2, &st), 7 + 4, "%s", cases[i].op);
        cr_expect_eq(st, BIB_E_TRAP, "%s", cases[i].op);
    }
}

/* The instrumented loop (traced, stepped) charges as the plain one does: the
   same trap at the same pc, the same counts, for every fuel around the
   tensor opcodes' costs. */
Test(trap, traced_and_stepped_runs_charge_tensor_work_as_plain_runs_do) {
    static const uint64_t fuels[] = {1, 3, 4, 1028, 1029, 2052, 2053, 3076, 3077, 3079, 3080};
    for (size_t i = 0; i < sizeof fuels / sizeof fuels[0]; i++) {
        bib_vm_t *plain = fuel_vm(fuels[i], BIB_TRACE_OFF, NULL);
        bib_status_t want = bib_vm_run(plain, NULL);
        char want_err[512];
        snprintf(want_err, sizeof want_err, "%s", bib_vm_error(plain));
        bib_run_stats_t want_s;
        bib_vm_stats(plain, &want_s);
        bib_vm_destroy(plain);

        FILE *sink = fopen("/dev/null", "w");
        cr_assert_not_null(sink);
        bib_vm_t *traced = fuel_vm(fuels[i], BIB_TRACE_TEXT, sink);
        cr_expect_eq(bib_vm_run(traced, NULL), want, "fuel %llu", (unsigned long long)fuels[i]);
        cr_expect_str_eq(bib_vm_error(traced), want_err, "fuel %llu", (unsigned long long)fuels[i]);
        bib_run_stats_t s;
        bib_vm_stats(traced, &s);
        cr_expect_eq(s.instructions, want_s.instructions, "fuel %llu",
                     (unsigned long long)fuels[i]);
        cr_expect_eq(s.fuel, want_s.fuel, "fuel %llu", (unsigned long long)fuels[i]);
        bib_vm_destroy(traced);
        fclose(sink);

        bib_vm_t *stepped = fuel_vm(fuels[i], BIB_TRACE_OFF, NULL);
        cr_assert_eq(bib_vm_start(stepped), BIB_OK, "%s", bib_vm_error(stepped));
        bib_stop_t stop = BIB_STOP_PAUSED;
        bib_status_t st = BIB_OK;
        while (st == BIB_OK && stop == BIB_STOP_PAUSED)
            st = bib_vm_step(stepped, 1, &stop);
        cr_expect_eq(st, want, "fuel %llu", (unsigned long long)fuels[i]);
        cr_expect_str_eq(bib_vm_error(stepped), want_err, "fuel %llu",
                         (unsigned long long)fuels[i]);
        bib_vm_stats(stepped, &s);
        cr_expect_eq(s.instructions, want_s.instructions, "fuel %llu",
                     (unsigned long long)fuels[i]);
        cr_expect_eq(s.fuel, want_s.fuel, "fuel %llu", (unsigned long long)fuels[i]);
        bib_position_t pos;
        cr_assert_eq(bib_vm_position(stepped, &pos), BIB_OK);
        cr_expect_eq(pos.instructions, want_s.instructions, "fuel %llu",
                     (unsigned long long)fuels[i]);
        bib_vm_destroy(stepped);
    }
}

Test(trap, vm_is_reusable_after_a_trap) {
    bib_vm_t *vm = vm_new(NULL);
    load_src(vm, ".memory 8\n.func main\n LDI r1, 0\n LOAD8U r0, r1, 0\n ADDI r2, r0, 1\n"
                 " STORE8 r2, r1, 0\n JNZ r0, boom\n HALT r2\nboom:\n TRAP 1\n.end\n");
    int64_t v = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(bib_vm_run(vm, &v), BIB_OK, "run %d: %s", i, bib_vm_error(vm));
        cr_assert_eq(v, 1);
    }
    load_src(vm, ".func main\n LDI r1, 0\n DIV r0, r1, r1\n HALT r0\n.end\n");
    cr_assert_eq(bib_vm_run(vm, &v), BIB_E_TRAP);
    cr_assert_eq(bib_vm_run(vm, &v), BIB_E_TRAP);
    load_src(vm, ".func main\n LDI r0, 77\n HALT r0\n.end\n");
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK);
    cr_assert_eq(v, 77);
    cr_assert_str_eq(bib_vm_error(vm), "");
    bib_vm_destroy(vm);
}

Test(trap, peak_memory_is_the_same_on_every_run) {
    bib_vm_t *vm = vm_new(NULL);
    load_src(vm, ".memory 100000\n.func main regs=2\n LDI r0, 300\n CALL r1, d, r0, 1\n HALT r1\n"
                 ".end\n.func d args=1 regs=50\n JZ r0, out\n ADDI r0, r0, -1\n"
                 " CALL r1, d, r0, 1\nout:\n RET r0\n.end\n");
    bib_run_stats_t first, again;
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    bib_vm_stats(vm, &first);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
        bib_vm_stats(vm, &again);
        cr_assert_eq(again.peak_memory, first.peak_memory);
        cr_assert_eq(again.instructions, first.instructions);
    }
    cr_assert_geq(first.peak_memory, 100000);
    bib_vm_destroy(vm);
}

Test(trap, linear_memory_past_the_cap_is_a_load_error) {
    bib_options_t o;
    bib_options_init(&o);
    o.max_memory = 1 << 20;
    bib_vm_t *vm = vm_new(&o);
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    const char *src = ".memory 2000000\n.func main\n HALT r0\n.end\n";
    cr_assert_eq(bib_assemble(src, strlen(src), "big.basm", &bytes, &size, &diag), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "big.basm"), BIB_E_NOMEM);
    cr_assert_not_null(strstr(bib_vm_error(vm), "linear memory of 2000000 bytes"), "%s",
                       bib_vm_error(vm));
    cr_assert_not_null(strstr(bib_vm_error(vm), "cap 1048576 bytes"), "%s", bib_vm_error(vm));
    bib_free(bytes);
    bib_free(diag);
    bib_vm_destroy(vm);
}

Test(trap, run_before_load_is_a_state_error) {
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_STATE);
    cr_assert_str_neq(bib_vm_error(vm), "");
    cr_assert_null(bib_vm_memory(vm, NULL));
    bib_vm_destroy(vm);
}

/* ---- host functions ------------------------------------------------------------------ */

static bib_status_t host_weighted(bib_vm_t *vm, void *user, const bib_value_t *args, uint32_t nargs,
                                  bib_value_t *result) {
    (void)vm;
    int64_t sum = 0;
    for (uint32_t i = 0; i < nargs; i++)
        sum += args[i].i * (int64_t)(i + 1);
    result->i = sum + *(int64_t *)user;
    return BIB_OK;
}

static bib_status_t host_fails(bib_vm_t *vm, void *user, const bib_value_t *args, uint32_t nargs,
                               bib_value_t *result) {
    (void)user;
    (void)nargs;
    (void)result;
    bib_vm_trap(vm, "sensor %lld unplugged", (long long)args[0].i);
    return BIB_E_TRAP;
}

Test(host, hostcall_passes_arguments_and_returns_a_result) {
    bib_vm_t *vm = vm_new(NULL);
    int64_t bias = 1000;
    cr_assert_eq(bib_vm_register_host(vm, "weighted", host_weighted, &bias), BIB_OK);
    load_src(vm, ".func main regs=4\n LDI r0, 1\n LDI r1, 2\n LDI r2, 3\n"
                 " HOSTCALL r3, weighted, r0, 3\n HALT r3\n.end\n");
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(v, 1000 + 1 + 4 + 9);
    bib_vm_destroy(vm);
}

Test(host, host_failure_traps_with_its_message) {
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_register_host(vm, "probe", host_fails, NULL), BIB_OK);
    load_src(vm, ".func main\n LDI r0, 4\n HOSTCALL r1, probe, r0, 1\n HALT r1\n.end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_TRAP);
    cr_assert_str_eq(bib_vm_error(vm), "trap at pc 1 (HOSTCALL r1, probe, r0, 1) line 3: host "
                                       "function 'probe' failed: sensor 4 unplugged");
    bib_vm_destroy(vm);
}

Test(host, unresolved_import_is_a_link_error_naming_it) {
    bib_vm_t *vm = vm_new(NULL);
    const char *src = ".func main\n HOSTCALL r0, foo, r0, 0\n HALT r0\n.end\n";
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t.basm"), BIB_E_LINK);
    cr_assert_not_null(strstr(bib_vm_error(vm), "import 'foo' names no registered host function"),
                       "%s", bib_vm_error(vm));
    bib_free(bytes);
    bib_free(diag);
    bib_vm_destroy(vm);
}

static char *run_stdio(const char *src, bib_status_t *st, char *err, size_t errcap) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_register_stdio(vm, out), BIB_OK);
    load_src(vm, src);
    *st = bib_vm_run(vm, NULL);
    snprintf(err, errcap, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    fclose(out);
    return buf;
}

Test(host, stdio_prints_integers_floats_chars_and_strings) {
    bib_status_t st;
    char err[512];
    char *out = run_stdio("m: .ascii \"hi!\"\n.func main regs=4\n LDI r0, -42\n"
                          " HOSTCALL r3, print_i64, r0, 1\n HOSTCALL r3, print_u64, r0, 1\n"
                          " LDI64 r0, 0.1\n HOSTCALL r3, print_f64, r0, 1\n"
                          " LDI64 r0, 1e300\n HOSTCALL r3, print_f64, r0, 1\n"
                          " LDI r0, 'x'\n HOSTCALL r3, print_char, r0, 1\n LDI r0, m\n LDI r1, 3\n"
                          " HOSTCALL r3, print_str, r0, 2\n HALT r3\n.end\n",
                          &st, err, sizeof err);
    cr_assert_eq(st, BIB_OK, "%s", err);
    cr_assert_str_eq(out, "-42\n18446744073709551574\n0.1\n1e+300\nxhi!");
    free(out);
}

/* print_f64(value, digits) in a program of its own: what it printed, and the
   status and error of the run. */
static char *print_f64_digits(const char *value, int64_t digits, bib_status_t *st, char *err,
                              size_t errcap) {
    char src[256];
    snprintf(src, sizeof src,
             ".func main regs=4\n LDI64 r0, %s\n LDI64 r1, %lld\n"
             " HOSTCALL r3, print_f64, r0, 2\n HALT r3\n.end\n",
             value, (long long)digits);
    return run_stdio(src, st, err, errcap);
}

Test(host, print_f64_with_a_second_argument_prints_that_many_decimals) {
    /* 0.1 is 0.1000000000000000055511151231257827...; 2.5 and 0.125 are
       exact, so their halves round to even as "%.*f" does. */
    static const struct {
        const char *value;
        int digits;
        const char *want;
    } cases[] = {
        {"0.1", 9, "0.100000000\n"},
        {"0.1", 20, "0.10000000000000000555\n"},
        {"2.5", 0, "2\n"},
        {"0.125", 2, "0.12\n"},
        {"-1.5e10", 1, "-15000000000.0\n"},
        {"-0.0", 3, "-0.000\n"},
        {"1e-9", 40, "0.0000000010000000000000000622815914577799\n"},
        {"-inf", 9, "-inf\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bib_status_t st;
        char err[512];
        char *out = print_f64_digits(cases[i].value, cases[i].digits, &st, err, sizeof err);
        cr_expect_eq(st, BIB_OK, "%s", err);
        cr_expect_str_eq(out, cases[i].want, "%s with %d digits", cases[i].value, cases[i].digits);
        free(out);
    }
}

Test(host, print_f64_digits_outside_0_to_40_trap_naming_them) {
    const int64_t bad[] = {-1, 41, INT64_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bib_status_t st;
        char err[512], want[128];
        char *out = print_f64_digits("1.5", bad[i], &st, err, sizeof err);
        cr_expect_eq(st, BIB_E_TRAP);
        snprintf(want, sizeof want,
                 "host function 'print_f64' failed: print_f64: %lld digits after the point is "
                 "out of range (0..40)",
                 (long long)bad[i]);
        cr_expect_not_null(strstr(err, want), "%s", err);
        cr_expect_str_eq(out, "", "nothing is printed");
        free(out);
    }
}

Test(host, print_f64_with_three_arguments_traps_naming_both_forms) {
    bib_status_t st;
    char err[512];
    char *out = run_stdio(".func main regs=4\n HOSTCALL r3, print_f64, r0, 3\n HALT r3\n.end\n",
                          &st, err, sizeof err);
    cr_assert_eq(st, BIB_E_TRAP);
    cr_expect_not_null(strstr(err, "print_f64 takes 1 or 2 arguments (the value, then the digits "
                                   "after the point), got 3"),
                       "%s", err);
    free(out);
}

Test(host, print_str_out_of_bounds_traps) {
    bib_status_t st;
    char err[512];
    char *out = run_stdio("m: .ascii \"hi!\"\n.func main regs=4\n LDI r0, 2\n LDI r1, 2\n"
                          " HOSTCALL r3, print_str, r0, 2\n HALT r3\n.end\n",
                          &st, err, sizeof err);
    cr_assert_eq(st, BIB_E_TRAP);
    cr_assert_not_null(strstr(err, "print_str: 2 bytes at address 2 are outside linear memory of "
                                   "3 bytes"),
                       "%s", err);
    free(out);
}

/* ---- several VMs -------------------------------------------------------------------- */

Test(vms, several_vms_run_independently_in_one_process) {
    bib_vm_t *a = vm_new(NULL), *b = vm_new(NULL);
    int64_t bias_a = 1, bias_b = 2;
    cr_assert_eq(bib_vm_register_host(a, "weighted", host_weighted, &bias_a), BIB_OK);
    cr_assert_eq(bib_vm_register_host(b, "weighted", host_weighted, &bias_b), BIB_OK);
    const char *src = ".memory 8\n.func main regs=3\n LDI r1, 0\n LOAD8U r0, r1, 0\n"
                      " ADDI r0, r0, 10\n STORE8 r0, r1, 0\n HOSTCALL r2, weighted, r0, 1\n"
                      " HALT r2\n.end\n";
    load_src(a, src);
    load_src(b, ".func main\n LDI r0, 0\n DIV r0, r0, r0\n HALT r0\n.end\n");
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(b, &v), BIB_E_TRAP);
    cr_assert_eq(bib_vm_run(a, &v), BIB_OK, "%s", bib_vm_error(a));
    cr_assert_eq(v, 11);
    cr_assert_str_eq(bib_vm_error(a), "");
    cr_assert_not_null(strstr(bib_vm_error(b), "division by zero"));
    load_src(b, src);
    cr_assert_eq(bib_vm_run(b, &v), BIB_OK);
    cr_assert_eq(v, 12);
    bib_vm_destroy(a);
    bib_vm_destroy(b);
}

/* ---- tracing --------------------------------------------------------------------------- */

static char *trace_of(const char *src, bib_trace_format_t format) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    bib_options_t o;
    bib_options_init(&o);
    o.trace_format = format;
    o.trace = out;
    bib_vm_t *vm = vm_new(&o);
    load_src(vm, src);
    bib_vm_run(vm, NULL);
    bib_vm_destroy(vm);
    fclose(out);
    return buf;
}

static const char *trace_src = ".func main regs=4\n LDI r1, 40\n LDI r2, 2\n ADD r3, r1, r2\n"
                               " CALL r0, f, r3, 1\n ITOF r1, r0\n HALT r0\n.end\n"
                               ".func f args=1 regs=2\n ADDI r1, r0, -1\n RET r1\n.end\n";

Test(trace, text_trace_is_deterministic_and_shows_writes) {
    char *a = trace_of(trace_src, BIB_TRACE_TEXT);
    char *b = trace_of(trace_src, BIB_TRACE_TEXT);
    cr_assert_str_eq(a, b);
    cr_assert_str_eq(a, "[      0] LDI r1, 40                r1=40 (0x28)\n"
                        "[      1] LDI r2, 2                 r2=2 (0x2)\n"
                        "[      2] ADD r3, r1, r2            r3=42 (0x2a)\n"
                        "[      3] CALL r0, f, r3, 1\n"
                        "[      6] ADDI r1, r0, -1           r1=41 (0x29)\n"
                        "[      7] RET r1                    ret=41 (0x29)\n"
                        "[      4] ITOF r1, r0               r1=4630967054332067840 "
                        "(0x4044800000000000) f64 41\n"
                        "[      5] HALT r0\n");
    free(a);
    free(b);
}

Test(trace, json_trace_has_one_object_per_instruction) {
    char *a = trace_of(trace_src, BIB_TRACE_JSON);
    cr_assert_not_null(
        strstr(
            a,
            "{\"pc\":2,\"op\":\"ADD\",\"args\":[\"r3\",\"r1\",\"r2\"],\"writes\":{\"r3\":42}}\n"),
        "%s", a);
    cr_assert_not_null(strstr(a, "{\"pc\":4,\"op\":\"ITOF\",\"args\":[\"r1\",\"r0\"],\"writes\":{"
                                 "\"r1\":4630967054332067840},\"f64\":{\"r1\":41}}\n"),
                       "%s", a);
    int lines = 0;
    for (const char *p = a; *p != '\0'; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 8);
    free(a);
}

/* An instruction that traps while it runs has its line, marked: it ran and is
   counted, as --profile counts it (spec/cli.md, Traces). */
Test(trace, the_instruction_that_traps_has_a_line_marked_trap) {
    char *a = trace_of(".func main regs=3\n LDI r0, 1\n DIV r1, r0, r2\n HALT r0\n.end\n",
                       BIB_TRACE_TEXT);
    cr_assert_str_eq(a, "[      0] LDI r0, 1                 r0=1 (0x1)\n"
                        "[      1] DIV r1, r0, r2            trap\n");
    free(a);
    a = trace_of(".func main regs=1\n TRAP 7\n.end\n", BIB_TRACE_JSON);
    cr_assert_str_eq(a,
                     "{\"pc\":0,\"op\":\"TRAP\",\"args\":[\"7\"],\"trap\":true,\"writes\":{}}\n");
    free(a);
}

Test(trace, untraced_run_writes_nothing_to_the_trace_stream) {
    char *a = trace_of(trace_src, BIB_TRACE_OFF);
    cr_assert_str_eq(a, "");
    free(a);
}

/* ---- misc API ------------------------------------------------------------------------- */

Test(api, build_info_names_version_simd_and_executors) {
    const char *info = bib_build_info();
    cr_assert_eq(strncmp(info, "bib " BIB_VERSION_STRING " (simd: ",
                         strlen("bib " BIB_VERSION_STRING " (simd: ")),
                 0, "%s", info);
    cr_assert_not_null(strstr(info, "executors: cpu"), "%s", info);
    cr_assert_not_null(strstr(info, BIB_EXECUTORS ")"), "%s", info);
}

Test(api, status_names_are_short_words) {
    cr_assert_str_eq(bib_status_name(BIB_OK), "ok");
    cr_assert_str_eq(bib_status_name(BIB_E_TRAP), "trap");
    cr_assert_str_eq(bib_status_name(BIB_E_NOMEM), "nomem");
    cr_assert_str_eq(bib_status_name((bib_status_t)99), "unknown");
}

Test(api, options_init_fills_the_defaults) {
    bib_options_t o;
    bib_options_init(&o);
    cr_assert_eq(o.max_memory, 256ull << 20);
    cr_assert_eq(o.max_call_depth, 10000);
    cr_assert_eq(o.fuel, 0);
    cr_assert_eq(o.trace_format, BIB_TRACE_OFF);
}

Test(api, load_file_assembles_basm_and_reports_diagnostics) {
    char path[] = "/tmp/bib_test_XXXXXX.basm";
    int fd = mkstemps(path, 5);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(".func main\n ADDD r0, r0, r0\n HALT r0\n.end\n", f);
    fclose(f);
    bib_vm_t *vm = vm_new(NULL);
    cr_assert_eq(bib_vm_load_file(vm, path), BIB_E_ASM);
    cr_assert_not_null(strstr(bib_vm_error(vm), "ADDD"), "%s", bib_vm_error(vm));
    f = fopen(path, "w");
    fputs(".func main\n LDI r0, 5\n HALT r0\n.end\n", f);
    fclose(f);
    cr_assert_eq(bib_vm_load_file(vm, path), BIB_OK, "%s", bib_vm_error(vm));
    int64_t v = 0;
    cr_assert_eq(bib_vm_run(vm, &v), BIB_OK);
    cr_assert_eq(v, 5);
    remove(path);
    cr_assert_eq(bib_vm_load_file(vm, path), BIB_E_IO);
    bib_vm_destroy(vm);
}
