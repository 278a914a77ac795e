/* tests/unit/test_asm.c: the assembler, the disassembler and the builder.
 *
 * Programs are assembled and the resulting bytes read back with
 * bib_module_read, so each test checks the module the bytes describe rather
 * than the bytes' layout (that is tests/unit/test_format.c's job).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assembler/asm.h"

/* ---- helpers -------------------------------------------------------------- */

static bib_module_t *assemble_ok(const char *src) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bib_status_t st = bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag);
    cr_assert_eq(st, BIB_OK, "assembly failed:\n%s", diag ? diag : "(no diagnostics)");
    bib_module_t *m = NULL;
    bib_diag_t d;
    st = bib_module_read(bytes, size, &m, &d);
    cr_assert_eq(st, BIB_OK, "read back failed: %s", d.msg);
    bib_free(bytes);
    return m;
}

/* The diagnostics of a source that must fail. Caller frees. */
static char *assemble_fail(const char *src) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bib_status_t st = bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag);
    cr_assert_eq(st, BIB_E_ASM, "expected BIB_E_ASM, got %d", st);
    cr_assert_null(bytes);
    cr_assert_not_null(diag);
    return diag;
}

static int count_of(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Assembles a source that must fail and checks that its diagnostics hold
   each of the n messages wanted and no other error. */
static void expect_only_errors(const char *src, const char *const *want, int n) {
    char *d = assemble_fail(src);
    for (int i = 0; i < n; i++)
        cr_expect(strstr(d, want[i]) != NULL, "missing: %s\n%s", want[i], d);
    cr_expect_eq(count_of(d, ": error: "), n, "%s", d);
    bib_free(d);
}

/* Disassembles bytes, re-assembles the text, and checks the bytes match. */
static void assert_round_trip(const uint8_t *bytes, size_t size) {
    char *text = NULL, *diag = NULL;
    bib_status_t st = bib_disassemble(bytes, size, &text, &diag);
    cr_assert_eq(st, BIB_OK, "disassembly failed: %s", diag ? diag : "");
    uint8_t *again = NULL;
    size_t again_size = 0;
    st = bib_assemble(text, strlen(text), "dis.basm", &again, &again_size, &diag);
    cr_assert_eq(st, BIB_OK, "re-assembly failed:\n%s\n--- text ---\n%s", diag ? diag : "", text);
    cr_assert_eq(again_size, size, "size %zu != %zu\n%s", again_size, size, text);
    cr_assert(memcmp(again, bytes, size) == 0, "bytes differ after round trip\n%s", text);
    bib_free(again);
    bib_free(text);
}

static void assert_source_round_trips(const char *src) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    bib_status_t st = bib_assemble(src, strlen(src), "rt.basm", &bytes, &size, &diag);
    cr_assert_eq(st, BIB_OK, "assembly failed:\n%s", diag ? diag : "");
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

static uint64_t f64_bits(double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* ---- literals --------------------------------------------------------- */

Test(asm_literals, decimal_negative_hex_binary_and_char_immediates) {
    bib_module_t *m = assemble_ok(".func main regs=1\n"
                                  "  LDI r0, 42\n"
                                  "  LDI r0, -7\n"
                                  "  LDI r0, 0x1F\n"
                                  "  LDI r0, -0x80\n"
                                  "  LDI r0, 0b1010\n"
                                  "  LDI r0, 'a'\n"
                                  "  LDI r0, '\\n'\n"
                                  "  LDI r0, '\\0'\n"
                                  "  LDI r0, '\\\\'\n"
                                  "  LDI r0, '\\''\n"
                                  "  LDI r0, 2147483647\n"
                                  "  LDI r0, -2147483648\n"
                                  "  HALT r0\n.end\n");
    const int32_t want[] = {42, -7, 31, -128, 10, 'a', '\n', 0, '\\', '\'', INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq((int32_t)m->code[i].b, want[i], "insn %zu: %d", i, (int32_t)m->code[i].b);
    bib_module_free(m);
}

Test(asm_literals, ldi64_takes_integers_and_floats_as_bit_patterns) {
    bib_module_t *m = assemble_ok(".func main regs=1\n"
                                  "  LDI64 r0, 1.5\n"
                                  "  LDI64 r0, -2e10\n"
                                  "  LDI64 r0, -1\n"
                                  "  LDI64 r0, 0xFFFFFFFFFFFFFFFF\n"
                                  "  LDI64 r0, 0x123456789\n"
                                  "  LDI64 r0, inf\n"
                                  "  LDI64 r0, -0.0\n"
                                  "  HALT r0\n.end\n");
    uint64_t want[] = {f64_bits(1.5),  f64_bits(-2e10),    UINT64_MAX,    UINT64_MAX,
                       0x123456789ull, f64_bits(INFINITY), f64_bits(-0.0)};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        uint64_t got = (uint64_t)m->code[i].b | (uint64_t)m->code[i].c << 32;
        cr_expect_eq(got, want[i], "insn %zu: %llx", i, (unsigned long long)got);
    }
    bib_module_free(m);
}

Test(asm_literals, imm32_out_of_range_suggests_ldi64) {
    char *d = assemble_fail(".func main\n  LDI r0, 5000000000\n  HALT r0\n.end\n");
    cr_expect(strstr(d, "t.basm:2:11: error: value 5000000000 does not fit a signed 32-bit "
                        "immediate; use LDI64") != NULL,
              "%s", d);
    bib_free(d);
}

Test(asm_literals, float_in_an_integer_operand_is_an_error) {
    char *d = assemble_fail(".func main\n  LDI r0, 1.5\n  HALT r0\n.end\n");
    cr_expect(strstr(d, "2:11: error: expected an integer, found '1.5'") != NULL, "%s", d);
    bib_free(d);
}

/* ---- labels, functions, imports ------------------------------------- */

Test(asm_labels, forward_and_backward_jumps_resolve_to_absolute_pcs) {
    bib_module_t *m = assemble_ok(".func helper args=0 regs=1\n  LDI r0, 1\n  RET r0\n.end\n"
                                  ".func main regs=2\n"
                                  "  LDI r0, 3\n"          /* pc 2 */
                                  "top: ADDI r0, r0, -1\n" /* pc 3 */
                                  "  JZ r0, done\n"        /* pc 4 */
                                  "  JMP top\n"            /* pc 5 */
                                  "done:\n"
                                  "  HALT r0\n" /* pc 6 */
                                  ".end\n");
    cr_expect_eq(m->code[4].b, 6u);
    cr_expect_eq(m->code[5].a, 3u);
    cr_expect_eq(m->entry_func, 1u, "main is the entry");
    bib_module_free(m);
}

Test(asm_labels, same_label_name_in_two_functions_is_local) {
    bib_module_t *m = assemble_ok(".func main\n loop: JMP out\n out: HALT r0\n.end\n"
                                  ".func g\n loop: JMP out\n out: RET r0\n.end\n");
    cr_expect_eq(m->code[0].a, 1u);
    cr_expect_eq(m->code[2].a, 3u);
    bib_module_free(m);
}

Test(asm_functions, calls_by_name_before_definition_and_default_regs) {
    bib_module_t *m = assemble_ok(".func main\n"
                                  "  LDI r1, 5\n"
                                  "  CALL r0, twice, r1, 1\n"
                                  "  CALL r0, sum3, r4, 3\n"
                                  "  HALT r0\n.end\n"
                                  ".func twice args=1\n  ADD r0, r0, r0\n  RET r0\n.end\n"
                                  ".func sum3 args=3\n  ADD r0, r0, r1\n  RET r0\n.end\n");
    cr_expect_eq(m->code[1].b, 1u, "twice is function 1");
    cr_expect_eq(m->funcs[0].nregs, 7u, "r4..r6 passed to sum3 count");
    cr_expect_eq(m->funcs[1].nregs, 1u);
    cr_expect_eq(m->funcs[2].nregs, 3u, "at least args");
    bib_module_free(m);
}

Test(asm_functions, hostcall_imports_in_first_use_order_deduplicated) {
    bib_module_t *m = assemble_ok(".import first\n"
                                  ".func main regs=2\n"
                                  "  HOSTCALL r0, print_i64, r1, 1\n"
                                  "  HOSTCALL r0, first, r1, 1\n"
                                  "  HOSTCALL r0, print_i64, r1, 1\n"
                                  "  HOSTCALL r0, \"odd name\", r1, 0\n"
                                  "  HALT r0\n.end\n");
    cr_assert_eq(m->import_count, 3u);
    cr_expect_str_eq(m->imports[0], "first");
    cr_expect_str_eq(m->imports[1], "print_i64");
    cr_expect_str_eq(m->imports[2], "odd name");
    cr_expect_eq(m->code[0].b, 1u);
    cr_expect_eq(m->code[1].b, 0u);
    cr_expect_eq(m->code[3].b, 2u);
    bib_module_free(m);
}

Test(asm_functions, entry_directive_overrides_main) {
    bib_module_t *m = assemble_ok(".entry start\n.func main\n HALT r0\n.end\n"
                                  ".func start\n HALT r0\n.end\n");
    cr_expect_eq(m->entry_func, 1u);
    bib_module_free(m);
}

/* ---- data -------------------------------------------------------------- */

Test(asm_data, directives_lay_out_bytes_from_zero_in_order) {
    bib_module_t *m = assemble_ok(".data\n"
                                  "a:  .byte 1, 0xFF, -1, 'z'\n"
                                  "b:  .i16 0x1234\n"
                                  "    .align 8\n"
                                  "c:  .i32 -2\n"
                                  "d:  .i64 0x0102030405060708\n"
                                  "e:  .f32 1.5\n"
                                  "f:  .f64 -2.0\n"
                                  "g:  .ascii \"hi\\n\"\n"
                                  "h:  .asciz \"x\"\n"
                                  "i:  .zero 3\n"
                                  "j:  .i32 h, g+1\n"
                                  ".func main\n"
                                  "  LDI r0, c\n  LDI r0, j\n  LDI r0, h+1\n  HALT r0\n.end\n");
    const uint8_t want[] = {1,    0xFF, 0xFF, 'z',  0x34, 0x12, 0, 0,                 /* 0 */
                            0xFE, 0xFF, 0xFF, 0xFF,                                   /* 8 */
                            8,    7,    6,    5,    4,    3,    2, 1,                 /* 12 */
                            0,    0,    0xC0, 0x3F,                                   /* 20 */
                            0,    0,    0,    0,    0,    0,    0, 0xC0,              /* 24 */
                            'h',  'i',  '\n', 'x',  0,    0,    0, 0,    35, 0, 0, 0, /* 32 */
                            33,   0,    0,    0};
    cr_assert_eq(m->data_size, sizeof want);
    cr_expect(memcmp(m->data, want, sizeof want) == 0);
    cr_expect_eq(m->memory_size, sizeof want, "memory defaults to the data size");
    cr_expect_eq(m->code[0].b, 8u);
    cr_expect_eq(m->code[1].b, 40u);
    cr_expect_eq(m->code[2].b, 36u);
    bib_module_free(m);
}

Test(asm_data, zero_bytes_before_any_data_are_an_empty_section) {
    /* The data buffer does not exist yet when .zero 0 reserves nothing. */
    bib_module_t *m = assemble_ok(".data\nempty: .zero 0\n.func main\n  LDI r0, empty\n"
                                  "  HALT r0\n.end\n");
    cr_expect_eq(m->data_size, 0u);
    cr_expect_eq(m->code[0].b, 0u);
    bib_module_free(m);
}

Test(asm_data, memory_directive_sets_the_size_and_must_hold_the_data) {
    bib_module_t *m =
        assemble_ok(".memory 65536\nmsg: .ascii \"abc\"\n.func main\n HALT r0\n.end\n");
    cr_expect_eq(m->memory_size, 65536u);
    bib_module_free(m);
    char *d = assemble_fail(".memory 2\n.ascii \"abc\"\n.func main\n HALT r0\n.end\n");
    cr_expect(strstr(d, "1:1: error: memory size 2 is smaller than the 3 bytes of data"), "%s", d);
    bib_free(d);
}

/* ---- .equ ----------------------------------------------------------------- */

Test(asm_equ, names_stand_for_integers_wherever_a_literal_is_accepted) {
    bib_module_t *m = assemble_ok(".equ N, 100\n"
                                  ".equ M, N+2\n" /* an earlier .equ, with an offset */
                                  ".equ ALIGN, 8\n"
                                  ".equ NARGS, 1\n"
                                  ".equ REGS, 4\n"
                                  ".equ MEM, 4096\n"
                                  ".equ LINE, 70\n"
                                  ".equ CH, 'z'\n"
                                  ".memory MEM\n"
                                  "a:  .byte CH, M-100\n"
                                  "    .i16 N\n"
                                  "    .zero NARGS\n"
                                  "    .align ALIGN\n"
                                  "b:  .i32 M, b\n"
                                  "    .i64 -N\n"
                                  ".func main regs=REGS\n"
                                  "  LDI r0, M\n"
                                  "  LOAD r1, r0, N-1\n"
                                  "  LDI64 r2, N\n"
                                  "  CALL r3, f, r0, NARGS\n"
                                  ".line LINE\n"
                                  "  HALT r0\n.end\n"
                                  ".func f args=NARGS\n  RET r0\n.end\n"
                                  ".func g\n  CALL r0, f, r6, NARGS\n  RET r0\n.end\n");
    const uint8_t want[] = {'z', 2,   100, 0,   0,   0,   0,   0, /* .byte, .i16, .zero, .align */
                            102, 0,   0,   0,   8,   0,   0,   0, /* .i32 M, b */
                            156, 255, 255, 255, 255, 255, 255, 255};
    cr_assert_eq(m->data_size, sizeof want);
    cr_expect(memcmp(m->data, want, sizeof want) == 0);
    /* .memory, regs=, args=, g's default regs (r6 is passed: the count
       counts), LDI M, LOAD's offset N-1, LDI64 N's two words, CALL's count,
       .line */
    const uint64_t got[] = {m->memory_size, m->funcs[0].nregs, m->funcs[1].nargs, m->funcs[2].nregs,
                            m->code[0].b,   m->code[1].c,      m->code[2].b,      m->code[2].c,
                            m->code[3].d,   m->lines[4]};
    const uint64_t want_values[] = {4096, 4, 1, 7, 102, 99, 100, 0, 1, 70};
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++)
        cr_expect_eq(got[i], want_values[i], "value %zu: %llu", i, (unsigned long long)got[i]);
    bib_module_free(m);
}

Test(asm_equ, a_float_value_gives_ldi64_f64_f32_and_constants_their_bits) {
    bib_module_t *m = assemble_ok(".equ TENTH, 0.1\n"
                                  ".equ ALSO, TENTH\n"
                                  ".equ SEVEN, 7\n"
                                  ".equ RAW, bits(0x7FF8000000000001)\n"
                                  ".const k f64 ALSO\n"
                                  ".const i i64 SEVEN\n"
                                  ".const s f64 SEVEN\n"
                                  "x: .f64 TENTH, SEVEN, RAW\n"
                                  "   .f32 TENTH, SEVEN\n"
                                  ".func main regs=1\n"
                                  "  LDI64 r0, TENTH\n"
                                  "  LDI64 r0, SEVEN\n"
                                  "  LDK r0, =ALSO\n"  /* reuses k */
                                  "  LDK r0, =SEVEN\n" /* reuses i */
                                  "  HALT r0\n.end\n");
    uint64_t d[3];
    uint32_t f[2];
    cr_assert_eq(m->data_size, 32u);
    memcpy(d, m->data, sizeof d);
    memcpy(f, m->data + 24, sizeof f);
    cr_expect_eq(d[0], f64_bits(0.1));
    cr_expect_eq(d[1], f64_bits(7.0));
    cr_expect_eq(d[2], 0x7FF8000000000001ull);
    float tenth = 0.1f, seven = 7.0f; /* read from the text, not narrowed from the f64 */
    uint32_t want0, want1;
    memcpy(&want0, &tenth, 4);
    memcpy(&want1, &seven, 4);
    cr_expect_eq(f[0], want0);
    cr_expect_eq(f[1], want1);
    const bib_const_t want_pool[] = {
        {BIB_CONST_F64, f64_bits(0.1)}, {BIB_CONST_I64, 7}, {BIB_CONST_F64, f64_bits(7.0)}};
    cr_assert_eq(m->const_count, 3u);
    for (size_t i = 0; i < 3; i++)
        cr_expect(m->consts[i].type == want_pool[i].type && m->consts[i].bits == want_pool[i].bits,
                  "k%zu", i);
    /* LDI64's two words; LDK's pool index and a zero word. SEVEN stays an
       integer in LDI64. */
    const uint64_t want_code[] = {f64_bits(0.1), 7, 0, 1};
    for (size_t i = 0; i < 4; i++)
        cr_expect_eq((uint64_t)m->code[i].b | (uint64_t)m->code[i].c << 32, want_code[i],
                     "insn %zu", i);
    bib_module_free(m);
}

Test(asm_equ, tensor_shapes_and_values_take_them) {
    bib_module_t *m = assemble_ok(".equ ROWS, 2\n.equ C, 3\n.equ HALF, 0.5\n"
                                  ".input x t0 f32[n, C]\n"
                                  ".tensor w t1 f32[ROWS] = HALF, C\n"
                                  ".tensor k t2 i32[ROWS] = C, -C\n"
                                  ".func main\n HALT r0\n.end\n");
    cr_assert_eq(m->tensor_count, 3u);
    cr_expect_eq(m->tensors[0].dims[1], 3);
    cr_expect_eq(m->tensors[1].dims[0], 2);
    float w[2];
    memcpy(w, m->tensors[1].init, sizeof w);
    cr_expect(w[0] == 0.5f && w[1] == 3.0f, "%g %g", w[0], w[1]);
    int32_t k[2];
    memcpy(k, m->tensors[2].init, sizeof k);
    cr_expect(k[0] == 3 && k[1] == -3, "%d %d", k[0], k[1]);
    bib_module_free(m);
}

Test(asm_equ, redefinition_names_both_lines) {
    const char *want[] = {"t.basm:2:6: error: '.equ' name 'N' is already defined on line 1\n"
                          ".equ N, 2\n     ^\n"};
    expect_only_errors(".equ N, 1\n.equ N, 2\n.func main\n HALT r0\n.end\n", want, 1);
}

Test(asm_equ, a_use_before_the_definition_is_an_error_naming_it) {
    /* One error each, none for the uses of A. */
    const char *want[] = {
        "t.basm:1:9: error: 'B' is used before its '.equ' on line 2 (define it first)",
        "t.basm:3:9: error: '.equ' 'S' refers to itself",
        "t.basm:4:10: error: 'C' is used before its '.equ' on line 9",
        "t.basm:6:10: error: 'C' is used before its '.equ' on line 9",
    };
    expect_only_errors(".equ A, B+1\n"
                       ".equ B, 2\n"
                       ".equ S, S\n"
                       "x: .byte C\n"
                       ".func main\n LDI r0, C\n HALT r0\n.end\n"
                       ".equ C, 3\n",
                       want, 4);
}

Test(asm_equ, values_of_the_wrong_kind_are_errors) {
    const char *want[] = {
        "4:11: error: malformed float '1.2.3'",
        "5:13: error: expected an integer, a float or the name of an earlier '.equ', found 'msg'",
        "6:6: error: 'r2' reads as a register or a float; it cannot name an '.equ'",
        "7:1: error: '.equ' takes a name and a value (.equ N, 10); found 0 operands",
        "8:9: error: NEG = -1 is out of range for a memory size in bytes",
        "9:7: error: value 256 does not fit 1 bytes",
        "11:11: error: 'PI' is a float '.equ' (line 1); an integer is expected here",
        "12:11: error: 'PI+1' adds to a float '.equ'",
        "13:14: error: expected '+N' or '-N' after an '.equ' name, found '*2'",
        "16:14: error: 'PI' is a float '.equ'; an i64 value is expected here",
    };
    expect_only_errors(".equ PI, 3.5\n"
                       ".equ NEG, -1\n"
                       ".equ BIG, 0x100\n"
                       ".equ bad, 1.2.3\n"
                       ".equ worse, msg\n"
                       ".equ r2, 1\n"
                       ".equ\n"
                       ".memory NEG\n"
                       ".byte BIG\n"
                       ".func main regs=2\n"
                       "  LDI r0, PI\n"
                       "  LDI r0, PI+1\n"
                       "  LDI r0, BIG*2\n"
                       "  HALT r0\n.end\n"
                       ".const k i64 PI\n",
                       want, 10);
}

Test(asm_equ, names_share_one_space_with_data_labels_and_dimensions_only) {
    const char *want[] = {
        "2:1: error: label 'x' is already defined by '.equ' on line 1",
        "4:6: error: '.equ' name 'y' is already a data label on line 3",
        "5:6: error: 'x' is an '.equ' (line 1), not a dimension name",
    };
    expect_only_errors(".equ x, 1\n"
                       "x: .byte 1\n"
                       "y: .byte 2\n"
                       ".equ y, 3\n"
                       ".dim x\n"
                       ".func main\n HALT r0\n.end\n",
                       want, 3);
    /* Functions, constants, imports, tensors and code labels are other
       spaces: the operand's kind says which. */
    bib_module_t *m = assemble_ok(".equ f, 5\n.equ k, 6\n.equ loop, 7\n.equ w, 8\n"
                                  ".const k i64 9\n.tensor w t0 i32[1] = w\n"
                                  ".func main regs=2\n"
                                  "loop: LDI r0, loop\n  LDK r1, k\n  CALL r0, f, r0, 0\n"
                                  "  JZ r0, loop\n  HALT r0\n.end\n"
                                  ".func f\n  LDI r0, f\n  RET r0\n.end\n");
    /* LDI loop, LDK k (the .const), CALL f (the function), JZ loop (the
       code label), LDI f */
    const uint32_t want_b[] = {7, 0, 1, 0, 5};
    for (size_t i = 0; i < 5; i++)
        cr_expect_eq(m->code[i + (i == 4)].b, want_b[i], "insn %zu", i);
    bib_module_free(m);
}

/* ---- .bss ----------------------------------------------------------------- */

Test(asm_bss, a_megabyte_reserved_costs_no_bytes_in_the_module) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    const char *src =
        ".equ MB, 1048576\n"
        "msg: .ascii \"abc\"\n"
        "buf: .bss MB\n"
        "big: .bss 100, 4096\n"
        "tail: .byte 9\n" /* data after a reservation still follows the data */
        "odd: .bss 3, 1\n"
        "none: .bss 0\n"
        ".func main regs=1\n"
        "  LDI r0, buf\n  LDI r0, big\n  LDI r0, tail\n  LDI r0, odd\n  LDI r0, none\n"
        "  HALT r0\n.end\n";
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK, "%s",
                 diag);
    cr_expect_lt(size, 1024u, "a 1 MiB reservation is not stored: %zu bytes", size);
    bib_module_t *m = NULL;
    bib_diag_t d;
    cr_assert_eq(bib_module_read(bytes, size, &m, &d), BIB_OK, "%s", d.msg);
    cr_expect_eq(m->data_size, 4u);
    cr_expect_eq(m->code[0].b, 8u, "after the 4 data bytes, at a multiple of 8");
    cr_expect_eq(m->code[1].b, 1052672u, "8 + 1 MiB, up to a multiple of 4096");
    cr_expect_eq(m->code[2].b, 3u);
    cr_expect_eq(m->code[3].b, 1052772u);
    cr_expect_eq(m->code[4].b, 1052776u, "a size 0 reservation marks an address");
    cr_expect_eq(m->memory_size, 1052776u);
    bib_module_free(m);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

Test(asm_bss, memory_directive_may_give_more_but_not_less) {
    bib_module_t *m = assemble_ok(".memory 65536\nbuf: .bss 100\n.func main\n HALT r0\n.end\n");
    cr_expect_eq(m->memory_size, 65536u);
    cr_expect_eq(m->data_size, 0u);
    bib_module_free(m);
    char *d = assemble_fail(".memory 99\nbuf: .bss 100\n.func main\n HALT r0\n.end\n");
    cr_expect(strstr(d, "1:1: error: memory size 99 is smaller than the 100 bytes of data and "
                        "'.bss' reservations"),
              "%s", d);
    bib_free(d);
}

Test(asm_bss, bad_operands_are_errors) {
    const char *want[] = {
        "1:4: error: '.bss' takes 1 to 2 operands, found 0",
        "2:12: error: alignment 3 is not a power of two",
        "3:9: error: -1 is out of range for a byte count",
        "5:4: error: '.bss' of 1 bytes at address 1099511627776 ends past 1099511627776 bytes",
        "7:4: error: '.bss' inside function 'main'",
    };
    expect_only_errors("a: .bss\n"
                       "b: .bss 8, 3\n"
                       "c: .bss -1\n"
                       "d: .bss 1099511627776\n"
                       "e: .bss 1\n"
                       ".func main\n"
                       "f: .bss 8\n"
                       "  HALT r0\n.end\n",
                       want, 5);
}

/* ---- constants ----------------------------------------------------------- */

Test(asm_consts, named_constants_come_first_then_inline_ones_reused_by_value) {
    bib_module_t *m = assemble_ok(".func main regs=1\n"
                                  "  LDK r0, pi\n"   /* forward reference */
                                  "  LDK r0, =7\n"   /* new: k2 */
                                  "  LDK r0, =3.5\n" /* reuses pi */
                                  "  LDK r0, =7\n"   /* reuses k2 */
                                  "  LDK r0, =7.0\n" /* f64 7: new k3 */
                                  "  LDK r0, big\n"
                                  "  HALT r0\n.end\n"
                                  ".const pi f64 3.5\n"
                                  ".const big i64 -9223372036854775808\n");
    cr_assert_eq(m->const_count, 4u);
    cr_expect_eq(m->consts[0].type, (uint32_t)BIB_CONST_F64);
    cr_expect_eq(m->consts[0].bits, f64_bits(3.5));
    cr_expect_eq(m->consts[1].bits, (uint64_t)INT64_MIN);
    cr_expect_eq(m->consts[2].type, (uint32_t)BIB_CONST_I64);
    cr_expect_eq(m->consts[2].bits, 7u);
    cr_expect_eq(m->consts[3].bits, f64_bits(7.0));
    const uint32_t want[] = {0, 2, 0, 2, 3, 1};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(m->code[i].b, want[i], "insn %d", i);
    bib_module_free(m);
}

/* ---- debug info ------------------------------------------------------- */

Test(asm_debug, each_instruction_records_its_source_line) {
    bib_module_t *m = assemble_ok("; comment\n.func main\n\n  LDI r0, 1 ; one\n"
                                  "here:\n\n  NOP\n  HALT r0\n.end\n");
    cr_assert_not_null(m->lines);
    cr_expect_eq(m->lines[0], 4u);
    cr_expect_eq(m->lines[1], 7u, "label, blank and comment lines count without .line");
    cr_expect_eq(m->lines[2], 8u);
    cr_expect_str_eq(m->source_name, "t.basm");
    bib_module_free(m);
}

Test(asm_debug, line_sets_the_next_instruction_and_later_ones_count_up) {
    bib_module_t *m = assemble_ok(".func main\n  LDI r0, 1\n  .line 100\n  NOP\nx:\n\n  NOP\n"
                                  "  .line 7\n  NOP\n  HALT r0\n.end\n");
    const uint32_t want[] = {2, 100, 101, 7, 8};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(m->lines[i], want[i], "insn %d: %u", i, m->lines[i]);
    bib_module_free(m);
}

Test(asm_debug, line_counts_on_into_the_next_function) {
    bib_module_t *m = assemble_ok(".line 50\n.func main\n  CALL r0, f, r0, 0\n  HALT r0\n.end\n"
                                  ".func f\n  RET r0\n.end\n");
    cr_expect_eq(m->lines[0], 50u);
    cr_expect_eq(m->lines[1], 51u);
    cr_expect_eq(m->lines[2], 52u);
    bib_module_free(m);
}

Test(asm_debug, line_zero_stays_unknown_and_the_top_line_wraps_to_unknown) {
    bib_module_t *m = assemble_ok(".func main\n  .line 0\n  NOP\n  NOP\n  .line 4294967295\n"
                                  "  NOP\n  NOP\n  HALT r0\n.end\n");
    const uint32_t want[] = {0, 0, UINT32_MAX, 0, 0};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(m->lines[i], want[i], "insn %d: %u", i, m->lines[i]);
    bib_module_free(m);
}

Test(asm_debug, source_and_nodebug_directives) {
    bib_module_t *m = assemble_ok(".source \"gen/x.c\"\n.func main\n HALT r0\n.end\n");
    cr_expect_str_eq(m->source_name, "gen/x.c");
    bib_module_free(m);
    m = assemble_ok(".nodebug\n.func main\n HALT r0\n.end\n");
    cr_expect_null(m->lines);
    bib_module_free(m);
}

/* ---- errors -------------------------------------------------------------- */

Test(asm_errors, message_has_file_line_col_source_line_and_caret) {
    char *d = assemble_fail(".func main\n  ADDD r1, r2, r3\n  HALT r0\n.end\n");
    cr_expect_str_eq(d, "t.basm:2:3: error: unknown mnemonic 'ADDD'\n"
                        "  ADDD r1, r2, r3\n"
                        "  ^~~~\n");
    bib_free(d);
}

Test(asm_errors, every_error_in_one_pass_in_source_order) {
    char *d = assemble_fail(".func main regs=2\n"
                            "  ADD r1, r2\n"    /* 2: count */
                            "  ADD r1, 5, r0\n" /* 3: kind */
                            "  MOV r7, r0\n"    /* 4: register range */
                            "  JMP nowhere\n"   /* 5: label */
                            "x: NOP\n"
                            "x: NOP\n"                  /* 7: duplicate */
                            "  LDI r0, \"open\n"        /* 8: string */
                            "  CALL r0, ghost, r0, 0\n" /* 9: function */
                            "  HALT r0\n.end\n");
    cr_expect(strstr(d, "t.basm:2:3: error: 'ADD' takes 3 operands (rd, rs, rs), found 2"), "%s",
              d);
    cr_expect(strstr(d, "t.basm:3:11: error: expected a register (r0, r1, ...), found '5'"), "%s",
              d);
    cr_expect(strstr(d, "t.basm:4:7: error: register r7 is out of range: function 'main' has "
                        "regs=2 (r0..r1)"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:5:7: error: unknown label 'nowhere'"), "%s", d);
    cr_expect(strstr(d, "t.basm:7:1: error: label 'x' is already defined on line 6"), "%s", d);
    cr_expect(strstr(d, "t.basm:8:11: error: unterminated string"), "%s", d);
    cr_expect(strstr(d, "t.basm:9:12: error: unknown function 'ghost'"), "%s", d);
    cr_expect_eq(count_of(d, ": error: "), 7, "%s", d);
    cr_expect(strstr(d, ":2:") < strstr(d, ":9:"), "sorted by line");
    bib_free(d);
}

Test(asm_errors, stops_after_fifty_errors) {
    char src[4096] = ".func main\n";
    for (int i = 0; i < 60; i++)
        strcat(src, "  BAD r0\n");
    strcat(src, "  HALT r0\n.end\n");
    char *d = assemble_fail(src);
    cr_expect_eq(count_of(d, "unknown mnemonic"), 50);
    cr_expect(strstr(d, "t.basm: error: too many errors; stopped after 50"), "%s", d);
    bib_free(d);
}

Test(asm_errors, structural_errors) {
    char *d = assemble_fail(".func main\n  NOP\n.end\n"               /* falls off */
                            ".func f args=2 regs=1\n  RET r0\n.end\n" /* args > regs */
                            "  NOP\n"                                 /* outside */
                            ".func g\n  RET r0\n");                   /* no .end */
    cr_expect(strstr(d, "3:1: error: function 'main' falls off its end"), "%s", d);
    cr_expect(strstr(d, "4:1: error: function 'f' takes 2 arguments but has regs=1"), "%s", d);
    cr_expect(strstr(d, "7:3: error: instruction outside a function"), "%s", d);
    cr_expect(strstr(d, "8:1: error: function 'g' has no '.end'"), "%s", d);
    bib_free(d);
}

Test(asm_errors, call_argument_count_must_match_the_callee) {
    char *d = assemble_fail(".func main regs=3\n  CALL r0, f, r1, 2\n  HALT r0\n.end\n"
                            ".func f args=1\n  RET r0\n.end\n");
    cr_expect(strstr(d, "2:19: error: function 'f' takes 1 argument, this call passes 2"), "%s", d);
    bib_free(d);
}

/* ---- builder ------------------------------------------------------------- */

Test(builder, builds_a_module_with_labels_calls_imports_and_constants) {
    bib_builder_t *b = bib_builder_create();
    uint32_t fmain = bib_builder_declare(b, "main");
    uint32_t fsq = bib_builder_declare(b, "square");
    uint32_t print = bib_builder_import(b, "print_i64");
    cr_expect_eq(bib_builder_import(b, "print_i64"), print, "imports are deduplicated");
    uint32_t k = bib_builder_const_i64(b, 6);
    /* Bodies begun out of id order are still laid out in id order. */
    cr_assert_eq(bib_builder_begin(b, fsq, 1, 1), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_MUL, 0, 0, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_RET, 0, 0, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_end(b), BIB_OK);
    cr_assert_eq(bib_builder_begin(b, fmain, 0, 2), BIB_OK);
    uint32_t done = bib_builder_label(b);
    bib_builder_line(b, 7);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_LDK, 0, k, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_CALL, 1, fsq, 0, 1), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_JMP, done, 0, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_bind(b, done), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_HOSTCALL, 0, print, 1, 1), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_HALT, 1, 0, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_end(b), BIB_OK);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_builder_finish(b, &bytes, &size), BIB_OK, "%s", bib_builder_error(b));
    bib_builder_destroy(b);

    bib_module_t *m;
    bib_diag_t d;
    cr_assert_eq(bib_module_read(bytes, size, &m, &d), BIB_OK, "%s", d.msg);
    cr_expect_eq(m->entry_func, 0u);
    cr_expect_eq(m->funcs[0].entry, 0u, "main (id 0) is laid out first");
    cr_expect_eq(m->funcs[1].entry, 5u);
    cr_expect_eq(m->code[2].a, 3u, "label resolved to an absolute pc");
    cr_expect_eq(m->lines[0], 7u);
    bib_module_free(m);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

/* A builder makes one module: its code moves into it, so a second finish
 * is refused (it crashed on the moved-out code of a second function). */
Test(builder, a_second_finish_is_refused) {
    bib_builder_t *b = bib_builder_create();
    uint32_t fmain = bib_builder_declare(b, "main"), f = bib_builder_declare(b, "f");
    cr_assert_eq(bib_builder_begin(b, fmain, 0, 1), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_LDI, 0, 7, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_end(b), BIB_OK);
    cr_assert_eq(bib_builder_begin(b, f, 0, 1), BIB_OK);
    cr_assert_eq(bib_builder_emit(b, BIB_CODE_RET, 0, 0, 0, 0), BIB_OK);
    cr_assert_eq(bib_builder_end(b), BIB_OK);
    uint8_t *bytes = NULL, *again = NULL;
    size_t size = 0, size2 = 0;
    cr_assert_eq(bib_builder_finish(b, &bytes, &size), BIB_OK, "%s", bib_builder_error(b));
    cr_assert_eq(bib_builder_finish(b, &again, &size2), BIB_E_STATE);
    cr_expect_null(again);
    cr_expect_str_eq(bib_builder_error(b), "finish: the builder has made its module already");
    assert_round_trip(bytes, size);
    bib_free(bytes);
    bib_builder_destroy(b);
}

Test(builder, calls_on_no_builder_are_refused_not_crashes) {
    uint8_t *out = NULL;
    size_t size = 0;
    int64_t dims[1] = {2};
    float data[2] = {1, 2};
    bib_builder_source(NULL, "x");
    bib_builder_line(NULL, 1);
    bib_builder_tensor_regs(NULL, 4);
    cr_expect_eq(bib_builder_declare(NULL, "main"), UINT32_MAX);
    cr_expect_eq(bib_builder_label(NULL), UINT32_MAX);
    cr_expect_eq(bib_builder_import(NULL, "print_i64"), UINT32_MAX);
    cr_expect_eq(bib_builder_const_i64(NULL, 1), UINT32_MAX);
    cr_expect_eq(bib_builder_const_f64(NULL, 1.5), UINT32_MAX);
    cr_expect_eq(bib_builder_begin(NULL, 0, 0, 1), BIB_E_USAGE);
    cr_expect_eq(bib_builder_end(NULL), BIB_E_USAGE);
    cr_expect_eq(bib_builder_bind(NULL, 0), BIB_E_USAGE);
    cr_expect_eq(bib_builder_emit(NULL, 0, 0, 0, 0, 0), BIB_E_USAGE);
    cr_expect_eq(bib_builder_memory(NULL, 64), BIB_E_USAGE);
    cr_expect_eq(bib_builder_data(NULL, 0, data, 4), BIB_E_USAGE);
    cr_expect_eq(bib_builder_tensor_dim(NULL, "n"), 0);
    cr_expect_eq(bib_builder_tensor_input(NULL, "x", 0, BIB_DTYPE_F32, 1, dims), BIB_E_USAGE);
    cr_expect_eq(bib_builder_tensor_output(NULL, "y", 1, BIB_DTYPE_F32, 1, dims), BIB_E_USAGE);
    cr_expect_eq(bib_builder_tensor_const(NULL, "k", 2, BIB_DTYPE_F32, 1, dims, data), BIB_E_USAGE);
    cr_expect_eq(bib_builder_finish(NULL, &out, &size), BIB_E_USAGE);
    cr_expect_null(out);
    cr_expect_str_eq(bib_builder_error(NULL), "no builder");
    bib_builder_destroy(NULL);
    /* A symbolic dimension without a name is a failure (0), not a symbol. */
    bib_builder_t *b = bib_builder_create();
    cr_expect_eq(bib_builder_tensor_dim(b, NULL), 0);
    cr_expect_str_eq(bib_builder_error(b), "tensor_dim: a symbolic dimension needs a name");
    bib_builder_destroy(b);
}

Test(builder, unbound_label_is_an_error_naming_it) {
    bib_builder_t *b = bib_builder_create();
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    uint32_t l = bib_builder_label(b);
    bib_builder_emit(b, BIB_CODE_JMP, l, 0, 0, 0);
    bib_builder_end(b);
    uint8_t *bytes;
    size_t size;
    cr_expect_neq(bib_builder_finish(b, &bytes, &size), BIB_OK);
    cr_expect(strstr(bib_builder_error(b), "label 0") &&
                  strstr(bib_builder_error(b), "never bound"),
              "%s", bib_builder_error(b));
    bib_builder_destroy(b);
}

Test(builder, declared_function_without_body_and_open_body_are_errors) {
    bib_builder_t *b = bib_builder_create();
    bib_builder_declare(b, "ghost");
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    uint8_t *bytes;
    size_t size;
    cr_expect_neq(bib_builder_finish(b, &bytes, &size), BIB_OK);
    cr_expect(strstr(bib_builder_error(b), "never ended"), "%s", bib_builder_error(b));
    bib_builder_destroy(b);

    b = bib_builder_create();
    bib_builder_declare(b, "ghost");
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    cr_expect_neq(bib_builder_finish(b, &bytes, &size), BIB_OK);
    cr_expect(strstr(bib_builder_error(b), "'ghost' was declared but has no body"), "%s",
              bib_builder_error(b));
    bib_builder_destroy(b);
}

Test(builder, verifier_errors_come_back_through_finish) {
    bib_builder_t *b = bib_builder_create();
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    bib_builder_emit(b, BIB_CODE_MOV, 5, 0, 0, 0); /* r5 of a 1-register frame */
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    uint8_t *bytes;
    size_t size;
    cr_expect_eq(bib_builder_finish(b, &bytes, &size), BIB_E_VERIFY);
    cr_expect(strstr(bib_builder_error(b), "r5"), "%s", bib_builder_error(b));
    bib_builder_destroy(b);
}

Test(builder, opcode_lookup_by_mnemonic) {
    cr_expect_eq(bib_opcode("ADD"), 0x00020000);
    cr_expect_eq(bib_opcode("halt"), 0x000000FF);
    cr_expect_eq(bib_opcode("ADDD"), -1);
}

/* ---- round trips --------------------------------------------------------- */

Test(asm_round_trip, spec_example_and_every_construct) {
    assert_source_round_trips(
        "; fib\n.func main args=0 regs=2\n  LDI r0, 30\n  CALL r1, fib, r0, 1\n"
        "  HOSTCALL r1, print_i64, r1, 1\n  HALT r1\n.end\n"
        ".func fib args=1 regs=4\n  LDI r1, 2\n  JLT r0, r1, small\n  ADDI r1, r0, -1\n"
        "  CALL r2, fib, r1, 1\n  ADDI r1, r0, -2\n  CALL r3, fib, r1, 1\n  ADD r0, r2, r3\n"
        "small:\n  RET r0\n.end\nmsg: .asciz \"hello\\n\"\n");
    assert_source_round_trips(
        ".memory 4096\n"
        "tab: .i64 1, -1, tab\n  .byte 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18\n"
        "  .zero 40\n  .ascii \"quote\\\" back\\\\ tab\\t;semi\"\n  .f64 nan, -inf, -0.0\n"
        "  .f32 0.1\n  .byte 0x80, 0x7F\n"
        ".const a i64 5\n.const b f64 0.1\n.const c f64 bits(0x7FF8000000000001)\n"
        ".const d f64 -0.0\n.const e f64 1e300\n.const f i64 5\n"
        ".func main regs=8\n"
        "  LDK r0, a\n  LDK r1, b\n  LDK r2, c\n  LDK r3, =2.5\n  LDK r4, f\n"
        "  LDI64 r5, 3.141592653589793\n  LDI64 r5, -9223372036854775808\n  LDI r6, tab\n"
        "  LOAD r7, r6, 8\n  STORE8 r7, r6, -1\n  MEMSIZE r7\n  FSQRT r1, r1\n"
        "  TRAP 42\n.end\n");
}

Test(asm_round_trip, equ_and_bss_leave_text_that_gives_the_same_bytes) {
    /* The disassembly has neither: values in place, and '.memory' for the
       reservations. */
    assert_source_round_trips(".equ N, 3\n.equ PI, 3.25\n.equ MB, 1048576\n"
                              "t: .i32 N\nbuf: .bss MB, 64\n.zero N\n"
                              ".func main regs=N\n  LDI r0, buf\n  LDI64 r1, PI\n"
                              "  ADDI r2, r0, N\n  HALT r2\n.end\n");
}

Test(asm_round_trip, no_debug_entry_not_main_and_quoted_names) {
    assert_source_round_trips(".nodebug\n.entry \"start here\"\n"
                              ".func main\n  HALT r0\n.end\n"
                              ".func \"start here\"\n  HOSTCALL r0, \"host \\\"q\\\"\", r0, 0\n"
                              "  RET r0\n.end\n");
    assert_source_round_trips(".source\n.func main\n  HALT r0\n.end\n");
}

Test(asm_round_trip, builder_module_with_duplicate_pool_entries_and_no_main) {
    bib_builder_t *b = bib_builder_create();
    uint32_t f0 = bib_builder_declare(b, "zero");
    uint32_t f1 = bib_builder_declare(b, "one");
    uint32_t k0 = bib_builder_const_f64(b, 1.0);
    uint32_t k1 = bib_builder_const_f64(b, 1.0); /* same value: a separate entry */
    uint32_t k2 = bib_builder_const_i64(b, 1);
    double nan_payload;
    uint64_t bits = 0xFFF0000000000ABCull;
    memcpy(&nan_payload, &bits, sizeof bits);
    uint32_t k3 = bib_builder_const_f64(b, nan_payload);
    uint32_t h1 = bib_builder_import(b, "z_last");
    uint32_t h0 = bib_builder_import(b, "a_first");
    bib_builder_source(b, NULL);
    bib_builder_begin(b, f1, 0, 2);
    bib_builder_line(b, 3);
    bib_builder_emit(b, BIB_CODE_LDK, 0, k3, 0, 0);
    bib_builder_line(b, 0);
    bib_builder_emit(b, BIB_CODE_HOSTCALL, 1, h0, 0, 1);
    bib_builder_emit(b, BIB_CODE_HOSTCALL, 1, h1, 0, 1);
    bib_builder_emit(b, BIB_CODE_RET, 1, 0, 0, 0);
    bib_builder_end(b);
    bib_builder_begin(b, f0, 0, 1);
    bib_builder_line(b, 3);
    bib_builder_emit(b, BIB_CODE_LDK, 0, k1, 0, 0);
    bib_builder_emit(b, BIB_CODE_LDK, 0, k0, 0, 0);
    bib_builder_emit(b, BIB_CODE_LDK, 0, k2, 0, 0);
    bib_builder_emit(b, BIB_CODE_CALL, 0, f1, 0, 0);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    static const uint8_t bytes_in[5] = {9, 0, 0, 0, 'x'};
    bib_builder_data(b, 2, bytes_in, sizeof bytes_in);
    bib_builder_memory(b, 100);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_builder_finish(b, &bytes, &size), BIB_OK, "%s", bib_builder_error(b));
    bib_builder_destroy(b);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

Test(asm_round_trip, disassembly_names_constants_and_labels) {
    uint8_t *bytes;
    size_t size;
    char *diag, *text;
    const char *src = ".func main regs=1\n  LDK r0, =1.5\nback:\n  JNZ r0, back\n  HALT r0\n.end\n";
    cr_assert_eq(bib_assemble(src, strlen(src), "x.basm", &bytes, &size, &diag), BIB_OK);
    cr_assert_eq(bib_disassemble(bytes, size, &text, &diag), BIB_OK);
    cr_expect(strstr(text, ".const k0 f64 1.5\n"), "%s", text);
    cr_expect(strstr(text, "back:\n"), "%s", text);
    cr_expect(strstr(text, "JNZ      r0, back\n"), "%s", text);
    cr_expect(strstr(text, ".func main args=0 regs=1"), "%s", text);
    cr_expect_eq(count_of(text, "L0:"), 0, "labels only where targeted");
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
    /* Stripped, the names are gone and the targets get L<pc>. */
    cr_assert_eq(bib_assemble_stripped(src, strlen(src), "x.basm", 0, &bytes, &size, &diag),
                 BIB_OK);
    cr_assert_eq(bib_disassemble(bytes, size, &text, &diag), BIB_OK);
    cr_expect(strstr(text, "L1:\n"), "%s", text);
    cr_expect(strstr(text, "JNZ      r0, L1\n"), "%s", text);
    cr_expect(strstr(text, "back") == NULL && strstr(text, ".source") == NULL &&
                  strstr(text, ".nodebug") != NULL,
              "%s", text);
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

/* A label named like the disassembler's own (L<number>) is not stored: the
   disassembler prints L<pc> for it, and the text reassembles to the same
   bytes. */
Test(asm_round_trip, labels_named_like_generated_ones_are_not_stored) {
    uint8_t *bytes;
    size_t size;
    char *diag, *text;
    const char *src = ".func main regs=1\nL7:\n  JNZ r0, L7\nend:\n  HALT r0\n.end\n";
    cr_assert_eq(bib_assemble(src, strlen(src), "x.basm", &bytes, &size, &diag), BIB_OK);
    cr_assert_eq(bib_disassemble(bytes, size, &text, &diag), BIB_OK);
    cr_expect(strstr(text, "L0:\n") && strstr(text, "JNZ      r0, L0\n") && strstr(text, "end:\n"),
              "%s", text);
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

/* The example in spec/assembly.md: labels on their own lines, comments and
   blank lines between functions. */
static const char *typical_program = "; fib.basm: prints fib(30)\n"
                                     ".func main args=0 regs=2\n"
                                     "    LDI      r0, 30\n"
                                     "    CALL     r1, fib, r0, 1        ; fib is defined below\n"
                                     "    HOSTCALL r1, print_i64, r1, 1  ; imports print_i64\n"
                                     "    HALT     r1\n"
                                     ".end\n"
                                     "\n"
                                     ".func fib args=1 regs=4\n"
                                     "    LDI      r1, 2\n"
                                     "    JLT      r0, r1, small         ; n < 2: return n\n"
                                     "    ADDI     r1, r0, -1\n"
                                     "    CALL     r2, fib, r1, 1\n"
                                     "    ADDI     r1, r0, -2\n"
                                     "    CALL     r3, fib, r1, 1\n"
                                     "    ADD      r0, r2, r3\n"
                                     "small:\n"
                                     "    RET      r0\n"
                                     ".end\n";

Test(asm_round_trip, typical_program_needs_line_only_at_functions_and_gaps) {
    uint8_t *bytes;
    size_t size;
    char *diag = NULL, *text = NULL;
    cr_assert_eq(
        bib_assemble(typical_program, strlen(typical_program), "fib.basm", &bytes, &size, &diag),
        BIB_OK, "%s", diag ? diag : "");
    cr_assert_eq(bib_disassemble(bytes, size, &text, &diag), BIB_OK);
    /* 12 instructions: one .line per function, one after the label line. */
    cr_expect_eq(count_of(text, ".line"), 3, "%s", text);
    cr_expect(strstr(text, "    .line 3\n    LDI      r0, 30\n    CALL"), "%s", text);
    cr_expect(strstr(text, "    .line 10\n    LDI      r1, 2\n"), "%s", text);
    cr_expect(strstr(text, "small:\n    .line 18\n    RET      r0\n"), "%s", text);
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

Test(asm_round_trip, lines_that_repeat_go_back_or_are_unknown) {
    bib_builder_t *b = bib_builder_create();
    uint32_t f = bib_builder_declare(b, "main");
    bib_builder_begin(b, f, 0, 1);
    const uint32_t lines[] = {9, 9, 10, 4, 0, 0, 1, UINT32_MAX, 0, 5};
    const size_t n = sizeof lines / sizeof lines[0];
    for (size_t i = 0; i < n; i++) {
        bib_builder_line(b, lines[i]);
        bib_builder_emit(b, i + 1 < n ? BIB_CODE_NOP : BIB_CODE_HALT, 0, 0, 0, 0);
    }
    bib_builder_end(b);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_builder_finish(b, &bytes, &size), BIB_OK, "%s", bib_builder_error(b));
    bib_builder_destroy(b);
    char *text = NULL;
    cr_assert_eq(bib_disassemble(bytes, size, &text, NULL), BIB_OK);
    /* 9, 9 (repeat), 4 (back), 0 (unknown), 1, UINT32_MAX, 5: the 10 after
       9, the second 0 and the 0 after UINT32_MAX follow by the rule. */
    cr_expect_eq(count_of(text, ".line"), 7, "%s", text);
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

/* A long text run is printed 64 bytes to an '.ascii' line, each line
   looking no further than its own 64 bytes: scanning the rest of the run for
   every line made 1 MiB of text take 5 s and 4 MiB about 80 (quadratic);
   now 4 MiB takes well under a second, under the sanitizers too. */
Test(asm_round_trip, a_4_mib_text_run_disassembles_line_by_line, .timeout = 60) {
    const uint32_t size = 4u << 20;
    bib_builder_t *b = bib_builder_create();
    uint8_t *d = bib_builder_data_append(b, size);
    cr_assert_not_null(d);
    for (uint32_t i = 0; i < size; i++)
        d[i] = (uint8_t)('a' + i % 26);
    uint32_t f = bib_builder_declare(b, "main");
    bib_builder_begin(b, f, 0, 1);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    uint8_t *bytes;
    size_t bytes_size;
    cr_assert_eq(bib_builder_finish(b, &bytes, &bytes_size), BIB_OK, "%s", bib_builder_error(b));
    bib_builder_destroy(b);
    char *text = NULL;
    cr_assert_eq(bib_disassemble(bytes, bytes_size, &text, NULL), BIB_OK);
    /* Line by line (strstr under ASan measures the whole rest each call). */
    int lines = 0;
    for (const char *p = text; p != NULL && *p != '\0';) {
        lines += strncmp(p, "    .ascii  \"", 12) == 0;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    cr_expect_eq(lines, (int)(size / 64));
    bib_free(text);
    assert_round_trip(bytes, bytes_size);
    bib_free(bytes);
}

Test(asm_round_trip, disassembling_bad_bytes_reports_why) {
    char *text = NULL, *diag = NULL;
    const uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cr_expect_neq(bib_disassemble(junk, sizeof junk, &text, &diag), BIB_OK);
    cr_expect_null(text);
    cr_expect(diag != NULL && diag[0] != '\0');
    bib_free(diag);
}

Test(builder, two_functions_with_one_name_are_refused) {
    bib_builder_t *b = bib_builder_create();
    uint32_t f0 = bib_builder_declare(b, "main");
    uint32_t f1 = bib_builder_declare(b, "main");
    bib_builder_begin(b, f0, 0, 1);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    bib_builder_begin(b, f1, 0, 1);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    uint8_t *bytes;
    size_t size;
    cr_expect_eq(bib_builder_finish(b, &bytes, &size), BIB_E_USAGE);
    cr_expect(strstr(bib_builder_error(b), "two functions are named 'main'"), "%s",
              bib_builder_error(b));
    bib_builder_destroy(b);
}

Test(asm_errors, duplicate_function_and_unknown_directive) {
    char *d = assemble_fail(".func main\n HALT r0\n.end\n.func main\n HALT r0\n.end\n.bogus 1\n");
    cr_expect(strstr(d, "4:7: error: function 'main' is already defined on line 1"), "%s", d);
    cr_expect(strstr(d, "7:1: error: unknown directive '.bogus'"), "%s", d);
    bib_free(d);
}

/* Some editors start a UTF-8 file with a byte order mark: it is skipped,
   and line 1's columns count from the byte after it. */
Test(asm_source, a_utf8_byte_order_mark_at_the_start_is_skipped) {
    const char plain[] = ".func main\n  HALT r0\n.end\n";
    const char marked[] = "\xEF\xBB\xBF.func main\n  HALT r0\n.end\n";
    uint8_t *a = NULL, *b = NULL;
    size_t a_size = 0, b_size = 0;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(plain, strlen(plain), "t.basm", &a, &a_size, &diag), BIB_OK);
    cr_assert_eq(bib_assemble(marked, strlen(marked), "t.basm", &b, &b_size, &diag), BIB_OK, "%s",
                 diag ? diag : "");
    cr_expect(a_size == b_size && memcmp(a, b, a_size) == 0);
    bib_free(a);
    bib_free(b);
    const char *const want[] = {"t.basm:1:12: error: expected 'args=N' or 'regs=N', found 'bogus'"};
    expect_only_errors("\xEF\xBB\xBF.func main bogus\n  HALT r0\n.end\n", want, 1);
}

/* spec/assembly.md has no 'cu-text' form: it is refused with the list of
   forms, and nothing is compiled. */
/* An unknown form of a block's shape (cu-text) is the one error: its block
   is skipped whole, not read as code, and nothing runs nvcc. */
Test(asm_errors, a_kernel_form_cu_text_is_unknown) {
    const char *const want[] = {"t.basm:1:11: error: unknown kernel form 'cu-text' (expected ptx, "
                                "cu, ptx-text or ptx-bytes)"};
    expect_only_errors(".kernel k cu-text params=t\n"
                       "extern \"C\" __global__ void k(float *x) {}\n"
                       ".endkernel\n"
                       ".func main regs=1\n  HALT r0\n.end\n",
                       want, 1);
    const char *const shader[] = {"t.basm:1:11: error: unknown shader form 'wgsl-text' (expected "
                                  "file, glsl, spirv or spirv-words)"};
    expect_only_errors(".shader s wgsl-text\n@compute fn main() {}\n.endshader\n"
                       ".func main regs=1\n  HALT r0\n.end\n",
                       shader, 1);
}

/* Without regs= the count is inferred, so the message names the limit of
   any function rather than a regs= the source does not have. */
Test(asm_errors, a_register_past_the_limit_names_the_limit) {
    const char *const want[] = {
        "t.basm:2:7: error: r70000 is above r65535 (a function has at most 65536 registers)",
        "t.basm:3:7: error: r99999999999 is above r65535 (a function has at most 65536 "
        "registers)",
        "t.basm:4:8: error: tensor register t99999999999 is out of range (t0..t65535)"};
    expect_only_errors(".func main\n"
                       "  LDI r70000, 1\n"
                       "  LDI r99999999999, 1\n"
                       "  FREE t99999999999\n"
                       "  HALT r0\n.end\n",
                       want, 3);
}

/* Each count states its own name and its true range, once. */
Test(asm_errors, counts_out_of_range_state_their_name_and_range) {
    const char *const want[] = {
        "t.basm:2:21: error: 4 is out of range for a scale (0..3)\n",
        "t.basm:3:12: error: 65537 is out of range for a jump table size (1..65536)\n",
        "t.basm:4:12: error: 0 is out of range for a jump table size (1..65536)\n",
        "t.basm:8:14: error: 70000 is out of range for an argument count (0..65536)\n",
        "t.basm:11:14: error: 0 is out of range for a register count (1..65536)\n",
        "t.basm:14:14: error: 65537 is out of range for a register count (1..65536)\n"};
    expect_only_errors(".func main regs=3\n"
                       "  LOADX r0, r1, r2, 4\n"
                       "  JTAB r0, 65537, d\n"
                       "  JTAB r0, 0, d\n"
                       "d:\n"
                       "  HALT r0\n"
                       ".end\n"
                       ".func f args=70000\n"
                       "  RET r0\n"
                       ".end\n"
                       ".func g regs=0\n"
                       "  RET r0\n"
                       ".end\n"
                       ".func h regs=65537\n"
                       "  RET r0\n"
                       ".end\n",
                       want, 6);
}

/* The offset after a data label is well formed but past 2^40: the message
   gives the range, not the syntax. */
Test(asm_errors, a_data_label_offset_past_the_cap_states_the_range) {
    const char *const want[] = {
        "t.basm:3:14: error: the offset +18446744073709551615 after a data label is out of "
        "range (-1099511627776..+1099511627776)",
        "t.basm:4:14: error: expected '+N' or '-N' after a data label, found '*2'"};
    expect_only_errors("a: .byte 1\n"
                       ".func main regs=1\n"
                       "  LDI64 r0, a+18446744073709551615\n"
                       "  LDI64 r0, a*2\n"
                       "  HALT r0\n.end\n",
                       want, 2);
}

/* A table longer than the instructions left in the function says how many
   it needs and how many there are. */
Test(asm_errors, a_jump_table_past_the_function_end_counts_both) {
    const char *const want[] = {
        "pc 0 (JTAB): a jump table of 3 entries needs 3 JMPs after it; function 'main' has 2 "
        "instructions after pc 0"};
    expect_only_errors(".func main regs=2\n  JTAB r0, 3, d\n  JMP d\nd:\n  HALT r0\n.end\n", want,
                       1);
}

/* The loader accepts two functions of one name (spec/bib-format.md), but
   text names functions: the module is a bad input to the disassembler,
   BIB_E_FORMAT (exit 65), not a usage error. */
Test(asm_round_trip, two_functions_of_one_name_are_a_format_error) {
    const char src[] = ".func main regs=1\n  HALT r0\n.end\n.func aa regs=1\n  RET r0\n.end\n"
                       ".func ab regs=1\n  RET r0\n.end\n";
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK);
    bib_module_t *m = NULL;
    bib_diag_t d;
    cr_assert_eq(bib_module_read(bytes, size, &m, &d), BIB_OK, "%s", d.msg);
    bib_free(bytes);
    m->funcs[2].name[1] = 'a';
    cr_assert_eq(bib_module_write(m, &bytes, &size, &d), BIB_OK, "%s", d.msg);
    bib_module_free(m);
    char *text = NULL;
    cr_expect_eq(bib_disassemble(bytes, size, &text, &diag), BIB_E_FORMAT);
    cr_expect_null(text);
    cr_expect(diag != NULL && strstr(diag, "two functions are named 'aa'"), "%s", diag ? diag : "");
    bib_free(diag);
    bib_free(bytes);
}

/* ---- tensors ----------------------------------------------------------- */

static const char tensor_program[] = ".input x t0 f32[n, 4]\n"
                                     ".input idx t5 i32[?]\n"
                                     ".output y t1 f32[n, 4]\n"
                                     ".output any t2\n"
                                     ".tensor w t3 f32[4, 2] = 1, -0.5, 0x1p-3,\n"
                                     "    2.5, 3, \\\n"
                                     "    4, 5, 6          ; comment inside the list\n"
                                     ".tensor b t4 i32[] = -7\n"
                                     ".func main\n"
                                     "    LDI r0, 3\n"
                                     "    ALLOC t2, i32, r0, 1\n"
                                     "    FILL any, r0\n"
                                     "    MATMUL y, x, w\n"
                                     "    GATHER t6, x, idx\n"
                                     "    FREE t6\n"
                                     "    HALT r0\n"
                                     ".end\n";

static uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

Test(asm_tensors, declarations_fill_the_module) {
    bib_module_t *m = assemble_ok(tensor_program);
    cr_expect_eq(m->tensor_regs, 7, "t6 is the highest named");
    cr_assert_eq(m->dim_name_count, 1);
    cr_expect_str_eq(m->dim_names[0], "n");
    cr_assert_eq(m->tensor_count, 6);
    const bib_tensor_decl_t *t = m->tensors;
    cr_expect_str_eq(t[0].name, "x");
    cr_expect_eq(t[0].flags, BIB_TENSOR_INPUT);
    cr_expect_eq(t[0].dtype, BIB_DTYPE_F32);
    cr_expect_eq(t[0].rank, 2);
    cr_expect_eq(t[0].dims[0], BIB_DIM_SYMBOL(0));
    cr_expect_eq(t[0].dims[1], 4);
    cr_expect_eq(t[1].dtype, BIB_DTYPE_I32);
    cr_expect_eq(t[1].dims[0], BIB_DIM_ANY);
    cr_expect_eq(t[2].flags, BIB_TENSOR_OUTPUT);
    cr_expect_eq(t[2].dims[0], BIB_DIM_SYMBOL(0), "symbols are shared");
    cr_expect_eq(t[3].dtype, 0, "an output without a type");
    cr_expect_eq(t[3].rank, 0);
    cr_expect_eq(t[4].flags, BIB_TENSOR_CONST);
    cr_assert_eq(t[4].init_size, 32);
    const float want[8] = {1, -0.5f, 0.125f, 2.5f, 3, 4, 5, 6};
    for (int i = 0; i < 8; i++)
        cr_expect_eq(bib_read_u32le(t[4].init + 4 * i), f32_bits(want[i]), "element %d", i);
    cr_expect_eq(t[5].rank, 0);
    cr_expect_eq(t[5].init_size, 4);
    cr_expect_eq((int32_t)bib_read_u32le(t[5].init), -7);
    bib_module_free(m);
}

Test(asm_tensors, tensor_info_names_the_symbolic_dimensions) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    cr_assert_eq(
        bib_assemble(tensor_program, strlen(tensor_program), "t.basm", &bytes, &size, &diag),
        BIB_OK, "%s", diag ? diag : "");
    bib_free(diag);
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t.basm"), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
    bib_tensor_info_t info;
    cr_assert_eq(bib_vm_tensor_info(vm, 0, &info), BIB_OK); /* x f32[n, 4] */
    cr_expect_eq(info.dims[0], -1);
    cr_assert_not_null(info.dim_names[0]);
    cr_expect_str_eq(info.dim_names[0], "n");
    cr_expect_eq(info.dims[1], 4);
    cr_expect_null(info.dim_names[1]);
    cr_assert_eq(bib_vm_tensor_info(vm, 1, &info), BIB_OK); /* idx i32[?] */
    cr_expect_eq(info.dims[0], -1);
    cr_expect_null(info.dim_names[0], "'?' has no name");
    bib_vm_destroy(vm);
}

Test(asm_tensors, operands_by_register_or_name_and_dtype_names) {
    bib_module_t *m = assemble_ok(tensor_program);
    /* LDI, ALLOC t2 i32 r0 1, FILL t2 r0, MATMUL t1 t0 t3, GATHER t6 t0 t5 */
    cr_expect_eq(m->code[1].op, BIB_CODE_ALLOC);
    cr_expect_eq(m->code[1].a, 2);
    cr_expect_eq(m->code[1].b, BIB_DTYPE_I32);
    cr_expect_eq(m->code[1].d, 1);
    cr_expect_eq(m->code[2].a, 2);
    cr_expect_eq(m->code[3].a, 1);
    cr_expect_eq(m->code[3].b, 0);
    cr_expect_eq(m->code[3].c, 3);
    cr_expect_eq(m->code[4].c, 5);
    bib_module_free(m);
}

Test(asm_tensors, tensors_directive_sets_the_register_count) {
    bib_module_t *m =
        assemble_ok(".tensors 16\n.func main\n  ALLOC t1, f32, r0, 0\n  HALT r0\n.end\n");
    cr_expect_eq(m->tensor_regs, 16);
    bib_module_free(m);
    m = assemble_ok(".func main\n  HALT r0\n.end\n");
    cr_expect_eq(m->tensor_regs, 0);
    cr_expect_null(m->tensors);
    bib_module_free(m);
}

Test(asm_tensors, value_list_over_lines_and_special_floats) {
    bib_module_t *m = assemble_ok(".tensor k t0 f32[6] =\n"
                                  "   inf, -inf,\n"
                                  "\n"
                                  "   ; a comment line inside the list\n"
                                  "   bits(0x7FC00001), -0.0, \\\n"
                                  "   1e-45, 16777217\n"
                                  ".func main\n  HALT r0\n.end\n");
    cr_assert_eq(m->tensors[0].init_size, 24);
    const uint32_t want[6] = {0x7F800000, 0xFF800000, 0x7FC00001,
                              0x80000000, 0x00000001, 0x4B800000};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(bib_read_u32le(m->tensors[0].init + 4 * i), want[i], "element %d", i);
    bib_module_free(m);
}

Test(asm_tensors, zero_sizes_declare_empty_tensors) {
    /* A 0 size is an empty tensor: in an input, and in a constant, which then
       has no values and may leave out '='; both survive disassembly. */
    const char *src = ".input x t0 f32[n, 0, 3]\n"
                      ".tensor e t1 f32[0, 4]\n"
                      ".tensor k t2 i32[2, 0]\n"
                      ".func main\n  HALT r0\n.end\n";
    bib_module_t *m = assemble_ok(src);
    cr_assert_eq(m->tensor_count, 3);
    cr_expect_eq(m->tensors[0].dims[1], 0);
    cr_expect_eq(m->tensors[1].dims[0], 0);
    cr_expect_eq(m->tensors[1].init_size, 0);
    cr_expect_eq(m->tensors[2].init_size, 0);
    bib_module_free(m);
    uint8_t *bytes;
    size_t size;
    char *diag = NULL, *text = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK);
    cr_assert_eq(bib_disassemble(bytes, size, &text, &diag), BIB_OK);
    cr_expect(strstr(text, ".tensor e t1 f32[0, 4]\n"), "%s", text);
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

Test(asm_tensors, declaration_errors_with_places) {
    char *d = assemble_fail(".input x t0 f32[n, 4, n, 2, 1, 1, 3]\n" /* 1 */
                            ".tensor z t1 f32[3, 2]\n"               /* 2 */
                            ".input q t2 g32[n]\n"                   /* 3 */
                            ".tensor w t3 f32[?, 4] = 1\n"           /* 4 */
                            ".tensor v t4 f32[2] = 1, 2, 3\n"        /* 5 */
                            ".tensor u t5 f32[2] = 1, zz\n"          /* 6 */
                            ".output o t6 f32[2] = 1\n"              /* 7 */
                            ".input x2 r7 f32[2]\n"                  /* 8 */
                            ".input dup t8 f32\n"                    /* 9 */
                            ".input dup t9 f32\n"                    /* 10 */
                            ".tensor c t8 i32[1] = 5000000000\n"     /* 11 */
                            ".input\n"                               /* 12 */
                            ".func main\n  HALT r0\n.end\n");
    cr_expect(strstr(d, "t.basm:1:35: error: a tensor has at most 6 dimensions; '3' is a seventh"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:2:1: error: '.tensor' takes a name, a tensor register, a type, "
                        "'=' and the values (.tensor w t2 f32[2] = 1.5, -2); only a constant with "
                        "a 0 size may leave them out"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:3:13: error: unknown element type 'g32' (expected f32 or i32, "
                        "as in f32[2, 3])"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:4:18: error: a constant tensor needs fixed dimension sizes, "
                        "found '?'"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:5:1: error: tensor 'v' has 2 elements but 3 values are given"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:6:26: error: expected an f32 value, found 'zz'"), "%s", d);
    cr_expect(strstr(d, "t.basm:7:21: error: '=' values belong to '.tensor' declarations only"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:8:11: error: expected a tensor register (t0 .. t65535), found "
                        "'r7'"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:10:8: error: tensor 'dup' is already declared on line 9"), "%s", d);
    cr_expect(strstr(d, "t.basm:11:11: error: t8 already holds input 'dup' (line 9): a register "
                        "carries at most one input or constant"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:12:1: error: '.input' takes a name, a tensor register and a type "
                        "(.input x t0 f32[n, 4]); found 0 operands"),
              "%s", d);
    cr_expect_eq(count_of(d, ": error: "), 11, "%s", d);
    bib_free(d);
}

Test(asm_tensors, value_errors_point_at_their_continuation_line) {
    char *d = assemble_fail(".tensor c t0 i32[3] = 1,\n  2,\n  3.5\n"
                            ".tensor e t1 f32[2] = 1,\n  ,2\n"
                            ".func main\n  HALT r0\n.end\n");
    cr_expect(strstr(d, "t.basm:3:3: error: expected an i32 value, found '3.5'"), "%s", d);
    cr_expect(strstr(d, "t.basm:5:3: error: missing value"), "%s", d);
    bib_free(d);
    d = assemble_fail(".func main\n  HALT r0\n.end\n.tensor c t0 i32[2] = 1,");
    cr_expect(strstr(d, "t.basm:4:1: error: the value list goes on past the end of the file"), "%s",
              d);
    bib_free(d);
}

Test(asm_tensors, operand_and_directive_errors) {
    char *d = assemble_fail(".tensors 2\n"             /* 1 */
                            ".tensors 3\n"             /* 2 */
                            ".func main\n"             /* 3 */
                            "  MATMUL t2, nope, t0\n"  /* 4 */
                            "  ALLOC t1, f64, r0, 0\n" /* 5 */
                            "  COPY t70000, t0\n"      /* 6 */
                            "  COPY 5, t0\n"           /* 7 */
                            "  .input x t0 f32\n"      /* 8 */
                            "  HALT r0\n.end\n");
    cr_expect(strstr(d, "t.basm:1:1: error: '.tensors 2' is smaller than the 3 tensor registers "
                        "used (t2 is named on line 4)"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:2:1: error: '.tensors' is already given on line 1"), "%s", d);
    cr_expect(strstr(d, "t.basm:4:14: error: unknown tensor 'nope' (declare it with .input, "
                        ".output or .tensor, or name a register t0, t1, ...)"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:5:13: error: expected an element type (f32 or i32), found 'f64'"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:6:8: error: tensor register t70000 is out of range (t0..t65535)"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:7:8: error: expected a tensor register (t0, t1, ...) or name, "
                        "found '5'"),
              "%s", d);
    cr_expect(strstr(d, "t.basm:8:3: error: '.input' inside function 'main' (declare tensors "
                        "outside '.func' ... '.end')"),
              "%s", d);
    bib_free(d);
}

Test(asm_tensors, liveness_errors_point_at_the_instruction) {
    char *d = assemble_fail(".func main\n  ALLOC t0, f32, r0, 0\n  FREE t0\n  FREE t0\n"
                            "  HALT r0\n.end\n");
    cr_expect_str_eq(d, "t.basm:4:3: error: pc 2 (FREE): t0 is already freed (freed twice)\n"
                        "  FREE t0\n"
                        "  ^~~~\n");
    bib_free(d);
}

Test(asm_round_trip, tensor_programs) {
    assert_source_round_trips(tensor_program);
    assert_source_round_trips(".tensors 9\n.dim unused, b, a\n"
                              ".input x t0 f32[a, b, ?, 7]\n.output \"out put\" t0 f32[a]\n"
                              ".tensor k t1 f32[3, 3] = 0.1, -0.0, bits(0x7FC00001), nan, -inf,\n"
                              "  1e-45, 3.4028235e38, 16777216, 1e10\n"
                              ".tensor i t2 i32[2] = -2147483648, 4294967295\n"
                              ".func main\n  RESHAPE t3, t0, r0, 1\n  THASH r0, t3\n"
                              "  DIM r0, t3, -1\n  TSET t3, r0, r0\n  RNG t1, r0, 7\n"
                              "  HALT r0\n.end\n");
}

Test(builder, tensor_declarations_and_register_count) {
    bib_builder_t *b = bib_builder_create();
    int64_t n = bib_builder_tensor_dim(b, "n");
    cr_expect_eq(bib_builder_tensor_dim(b, "n"), n, "one symbol per name");
    const int64_t xd[2] = {n, 3};
    cr_expect_eq(bib_builder_tensor_input(b, "x", 0, BIB_DTYPE_F32, 2, xd), BIB_OK);
    cr_expect_eq(bib_builder_tensor_output(b, "y", 1, 0, 0, NULL), BIB_OK);
    const float w[3] = {1.5f, -2, 0.25f};
    const int64_t wd[1] = {3};
    cr_expect_eq(bib_builder_tensor_const(b, "w", 2, BIB_DTYPE_F32, 1, wd, w), BIB_OK);
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    bib_builder_emit(b, BIB_CODE_TMUL, 1, 0, 2, 0);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    bib_module_t *m = NULL;
    cr_assert_eq(bib_builder_finish_module(b, &m, NULL, NULL), BIB_OK, "%s", bib_builder_error(b));
    cr_expect_eq(m->tensor_regs, 3);
    cr_assert_eq(m->tensor_count, 3);
    cr_expect_eq(m->tensors[0].dims[0], BIB_DIM_SYMBOL(0));
    cr_expect_eq(bib_read_u32le(m->tensors[2].init + 4), f32_bits(-2));
    bib_module_free(m);
    bib_builder_destroy(b);
}

Test(builder, tensor_register_count_smaller_than_used_is_an_error) {
    bib_builder_t *b = bib_builder_create();
    bib_builder_tensor_regs(b, 2);
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    bib_builder_emit(b, BIB_CODE_COPY, 2, 0, 0, 0);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    uint8_t *bytes;
    size_t size;
    cr_expect_eq(bib_builder_finish(b, &bytes, &size), BIB_E_USAGE);
    cr_expect_str_eq(bib_builder_error(b),
                     "finish: 2 tensor registers set, but t2 is used (need at least 3)");
    bib_builder_destroy(b);
}

Test(builder, names_keep_their_first_index_past_many_declarations) {
    /* Enough names, alike in the three spaces, that the builder's name index
       grows several times. */
    enum { N = 500 };
    bib_builder_t *b = bib_builder_create();
    int64_t dims[N];
    char name[32];
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "n%u", i);
        cr_assert_eq(bib_builder_import(b, name), i);
        dims[i] = bib_builder_tensor_dim(b, name);
        cr_assert_eq(bib_builder_declare(b, name), i);
    }
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "n%u", i);
        cr_expect_eq(bib_builder_import(b, name), i, "import '%s' keeps its index", name);
        cr_expect_eq(bib_builder_tensor_dim(b, name), dims[i], "dimension '%s' keeps it", name);
    }
    cr_expect_eq(bib_builder_declare(b, "n7"), N, "a second function of one name is a new id");
    bib_builder_destroy(b);
}

Test(asm_functions, many_imports_and_tensors_keep_the_order_of_first_use) {
    bib_asm_text_t src = {0};
    for (int i = 0; i < 200; i++)
        bib_asm_text_printf(&src, ".input x%d t%d f32[d%d]\n", i, i, 199 - i);
    bib_asm_text_printf(&src, ".func main regs=2\n");
    for (int i = 199; i >= 0; i--)
        bib_asm_text_printf(
            &src, "    HOSTCALL r0, host%d, r1, 1\n    HOSTCALL r0, host%d, r1, 1\n", i, i);
    bib_asm_text_printf(&src, "    HALT r0\n.end\n");
    cr_assert(!src.failed);
    bib_module_t *m = assemble_ok(src.p);
    free(src.p);
    cr_assert_eq(m->import_count, 200);
    cr_assert_eq(m->tensor_count, 200);
    cr_assert_eq(m->dim_name_count, 200);
    for (uint32_t i = 0; i < 200; i++) {
        char want[16];
        snprintf(want, sizeof want, "host%u", 199 - i);
        cr_expect_str_eq(m->imports[i], want, "import %u", i);
        snprintf(want, sizeof want, "d%u", 199 - i);
        cr_expect_str_eq(m->dim_names[i], want, "dimension %u", i);
        cr_expect_eq(m->code[2 * i].b, i, "HOSTCALL %u names import %u", 2 * i, i);
        cr_expect_eq(m->code[2 * i + 1].b, i);
    }
    bib_module_free(m);
}

Test(asm_round_trip, builder_tensor_module_with_unusual_symbol_order) {
    bib_builder_t *b = bib_builder_create();
    int64_t late = bib_builder_tensor_dim(b, "late");
    int64_t early = bib_builder_tensor_dim(b, "early");
    bib_builder_tensor_dim(b, "never used");
    const int64_t d[2] = {early, late};
    bib_builder_tensor_input(b, "x", 4, BIB_DTYPE_I32, 2, d);
    bib_builder_tensor_regs(b, 40);
    bib_builder_begin(b, bib_builder_declare(b, "main"), 0, 1);
    bib_builder_emit(b, BIB_CODE_HALT, 0, 0, 0, 0);
    bib_builder_end(b);
    uint8_t *bytes;
    size_t size;
    cr_assert_eq(bib_builder_finish(b, &bytes, &size), BIB_OK, "%s", bib_builder_error(b));
    bib_builder_destroy(b);
    char *text = NULL;
    cr_assert_eq(bib_disassemble(bytes, size, &text, NULL), BIB_OK);
    cr_expect(strstr(text, ".tensors 40\n.dim late, early, \"never used\"\n"
                           ".input x t4 i32[early, late]\n"),
              "%s", text);
    bib_free(text);
    assert_round_trip(bytes, size);
    bib_free(bytes);
}

/* ---- the constant pool's index ---------------------------------------------- */

/* The first entry of pool[0..n) with this type and bits, searched. */
static int linear_find(const bib_const_t *pool, uint32_t n, bib_const_t k, uint32_t *index) {
    for (uint32_t i = 0; i < n; i++)
        if (pool[i].type == k.type && pool[i].bits == k.bits) {
            *index = i;
            return 1;
        }
    return 0;
}

/* A value drawn from few, so that the pool repeats itself: both types, both
   zeros, NaNs with payloads, and integers with the same bits as floats. */
static bib_const_t random_const(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = *state >> 33;
    static const uint64_t special[] = {0,
                                       0x8000000000000000ull,
                                       0x7FF8000000000000ull,
                                       0xFFF0000000000ABCull,
                                       0x3FF0000000000000ull,
                                       1};
    uint64_t bits = r % 4 == 0 ? special[(r >> 2) % 6] : (r >> 2) % 5000;
    return (bib_const_t){(r >> 20) % 2 ? BIB_CONST_F64 : BIB_CONST_I64, bits};
}

Test(const_index, finds_the_first_equal_entry_as_a_search_does_while_the_pool_grows_and_shrinks) {
    uint64_t state = 7;
    uint32_t cap = 60000, n = 0;
    bib_const_t *pool = malloc(cap * sizeof *pool);
    cr_assert_not_null(pool);
    bib_const_index_t x = {0};
    for (int step = 0; step < 100000; step++) {
        uint64_t r = (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33;
        if (r % 1000 == 0 && n > 0) {
            /* Entries taken back: whoever shortens the pool forgets the index. */
            n -= (uint32_t)(r >> 8) % (n < 300 ? n : 300) + 1;
            bib_const_index_free(&x);
        } else if (r % 2 == 0 && n < cap) {
            pool[n++] = random_const(&state);
        } else {
            bib_const_t k = random_const(&state);
            uint32_t want = UINT32_MAX, got = UINT32_MAX;
            int w = linear_find(pool, n, k, &want);
            int g = bib_const_index_find(&x, pool, n, k.type, k.bits, &got);
            cr_assert_eq(g, w, "step %d: found %d, a search %d (type %u, bits %#llx, %u entries)",
                         step, g, w, k.type, (unsigned long long)k.bits, n);
            cr_assert_eq(got, want, "step %d: entry %u, a search %u", step, got, want);
        }
    }
    cr_expect_gt(n, 10000, "the pool grew past several rehashes (%u entries)", n);
    bib_const_index_free(&x);
    free(pool);
}

Test(const_index, the_assembler_pools_each_literal_once_in_order_of_first_use) {
    /* 3000 literals, repeating, with both zeros and integer twins of floats:
       the pool holds each (type, bits) once, in the order first used. */
    size_t cap = 3000 * 40 + 100, len = 0;
    char *src = malloc(cap);
    cr_assert_not_null(src);
    len += (size_t)snprintf(src + len, cap - len, ".func main regs=2\n");
    uint64_t state = 11;
    bib_const_t want[3000];
    uint32_t nwant = 0;
    for (int i = 0; i < 3000; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = state >> 33;
        int v = (int)(r % 1200) - 600;
        bool is_float = (r >> 12) % 2;
        bib_const_t k;
        if (is_float) {
            double d = v == 0 && (r >> 14) % 2 ? -0.0 : v / 4.0;
            if (d == 0 && signbit(d))
                len += (size_t)snprintf(src + len, cap - len, "    LDK r1, =-0.0\n");
            else
                len += (size_t)snprintf(src + len, cap - len, "    LDK r1, =%.2f\n", d);
            k = (bib_const_t){BIB_CONST_F64, f64_bits(d)};
        } else {
            len += (size_t)snprintf(src + len, cap - len, "    LDK r1, =%d\n", v);
            k = (bib_const_t){BIB_CONST_I64, (uint64_t)(int64_t)v};
        }
        uint32_t at;
        if (!linear_find(want, nwant, k, &at))
            want[nwant++] = k;
    }
    len += (size_t)snprintf(src + len, cap - len, "    HALT r0\n.end\n");
    bib_module_t *m = assemble_ok(src);
    cr_assert_eq(m->const_count, nwant);
    for (uint32_t i = 0; i < nwant; i++) {
        cr_expect_eq(m->consts[i].type, want[i].type, "entry %u", i);
        cr_expect_eq(m->consts[i].bits, want[i].bits, "entry %u: %#llx, want %#llx", i,
                     (unsigned long long)m->consts[i].bits, (unsigned long long)want[i].bits);
    }
    /* The module's own index finds each entry where the pool has it. */
    for (uint32_t i = 0; i < nwant; i++) {
        uint32_t at = UINT32_MAX;
        cr_expect_eq(bib_module_const_find(m, want[i], &at), 1);
        cr_expect_eq(at, i);
    }
    uint32_t at;
    cr_expect_eq(bib_module_const_find(m, (bib_const_t){BIB_CONST_I64, 1u << 30}, &at), 0);
    bib_module_free(m);
    free(src);
}
