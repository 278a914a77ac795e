/* tests/unit/test_format.c: the .bib reader and writer: round trips,
 * determinism, each format error with its message, and robustness against
 * truncated, bit-flipped and hostile files. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

/* The same small module as test_verify.c, plus debug info. */
static bib_module_t *small_module(void) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code_count = 9;
    m->code = malloc(m->code_count * sizeof *m->code);
    m->code[0] = insn(BIB_CODE_LDI, 0, 5, 0, 0);
    m->code[1] = insn(BIB_CODE_LDK, 1, 1, 0, 0);
    m->code[2] = insn(BIB_CODE_CALL, 2, 1, 0, 1);
    m->code[3] = insn(BIB_CODE_HOSTCALL, 3, 0, 2, 1);
    m->code[4] = insn(BIB_CODE_JZ, 3, 6, 0, 0);
    m->code[5] = insn(BIB_CODE_NOP, 0, 0, 0, 0);
    m->code[6] = insn(BIB_CODE_HALT, 2, 0, 0, 0);
    m->code[7] = insn(BIB_CODE_ADDI, 1, 0, 0xFFFFFFFF, 0);
    m->code[8] = insn(BIB_CODE_RET, 1, 0, 0, 0);
    m->const_count = 2;
    m->consts = malloc(2 * sizeof *m->consts);
    m->consts[0] = (bib_const_t){BIB_CONST_I64, 0x8000000000000001ull};
    m->consts[1] = (bib_const_t){BIB_CONST_F64, 0x400921FB54442D18ull};
    m->memory_size = 64;
    m->data_size = 3;
    m->data = malloc(3);
    memcpy(m->data, "hi\0", 3);
    m->func_count = 2;
    m->funcs = calloc(2, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){dup_str("main"), 0, 7, 0, 4};
    m->funcs[1] = (bib_function_t){dup_str("inc"), 7, 2, 1, 2};
    m->import_count = 2;
    m->imports = malloc(2 * sizeof *m->imports);
    m->imports[0] = dup_str("print_i64");
    m->imports[1] = dup_str("print_f64");
    m->source_name = dup_str("small.basm");
    m->lines = malloc(m->code_count * sizeof *m->lines);
    const uint32_t lines[9] = {3, 3, 4, 5, 5, 5, 6, 9, 9};
    memcpy(m->lines, lines, sizeof lines);
    return m;
}

/* The smallest useful module: one function, "HALT r0". */
static bib_module_t *tiny_module(void) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code_count = 1;
    m->code = malloc(sizeof *m->code);
    m->code[0] = insn(BIB_CODE_HALT, 0, 0, 0, 0);
    m->func_count = 1;
    m->funcs = calloc(1, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){dup_str("main"), 0, 1, 0, 1};
    return m;
}

static bib_diag_t diag;

static uint8_t *write_module(const bib_module_t *m, size_t *size) {
    uint8_t *bytes = NULL;
    cr_assert_eq(bib_module_write(m, &bytes, size, &diag), BIB_OK, "%s", diag.msg);
    return bytes;
}

static uint8_t *small_bytes(size_t *size) {
    bib_module_t *m = small_module();
    uint8_t *bytes = write_module(m, size);
    bib_module_free(m);
    return bytes;
}

/* Recomputes the header checksum after a test edits bytes on purpose, so the
   reader gets past the checksum to the check under test. */
static void fix_checksum(uint8_t *b, size_t size) {
    bib_write_u32le(b + 24, 0);
    bib_write_u32le(b + 24, (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)size));
}

static void fix_header(uint8_t *b, size_t size) {
    bib_write_u32le(b + 20, (uint32_t)size);
    fix_checksum(b, size);
}

/* Byte offset of the table entry of the section of the given type. */
static uint32_t entry_of(const uint8_t *b, uint32_t type) {
    uint32_t count = bib_read_u32le(b + 12), table = bib_read_u32le(b + 16);
    for (uint32_t i = 0; i < count; i++)
        if (bib_read_u32le(b + table + 16 * i) == type)
            return table + 16 * i;
    cr_assert_fail("no section of type %u", type);
    return 0;
}

static uint32_t section_offset(const uint8_t *b, uint32_t type) {
    return bib_read_u32le(b + entry_of(b, type) + 8);
}

static void expect_format_error(uint8_t *b, size_t size, const char *msg) {
    bib_module_t *m = NULL;
    diag.msg[0] = '\0';
    bib_status_t st = bib_module_read(b, size, &m, &diag);
    cr_expect_eq(st, BIB_E_FORMAT, "status %d, message: %s", st, diag.msg);
    cr_expect_null(m);
    if (msg != NULL)
        cr_expect_str_eq(diag.msg, msg);
}

static void expect_same_module(const bib_module_t *a, const bib_module_t *b) {
    cr_assert_eq(a->code_count, b->code_count);
    for (uint32_t i = 0; i < a->code_count; i++)
        cr_expect(memcmp(&a->code[i], &b->code[i], sizeof a->code[i]) == 0, "insn %u", i);
    cr_assert_eq(a->const_count, b->const_count);
    for (uint32_t i = 0; i < a->const_count; i++) {
        cr_expect_eq(a->consts[i].type, b->consts[i].type);
        cr_expect_eq(a->consts[i].bits, b->consts[i].bits);
    }
    cr_expect_eq(a->memory_size, b->memory_size);
    cr_assert_eq(a->data_size, b->data_size);
    if (a->data_size > 0)
        cr_expect(memcmp(a->data, b->data, a->data_size) == 0);
    cr_assert_eq(a->func_count, b->func_count);
    for (uint32_t i = 0; i < a->func_count; i++) {
        cr_expect_str_eq(a->funcs[i].name, b->funcs[i].name);
        cr_expect_eq(a->funcs[i].entry, b->funcs[i].entry);
        cr_expect_eq(a->funcs[i].count, b->funcs[i].count);
        cr_expect_eq(a->funcs[i].nargs, b->funcs[i].nargs);
        cr_expect_eq(a->funcs[i].nregs, b->funcs[i].nregs);
    }
    cr_expect_eq(a->entry_func, b->entry_func);
    cr_assert_eq(a->import_count, b->import_count);
    for (uint32_t i = 0; i < a->import_count; i++)
        cr_expect_str_eq(a->imports[i], b->imports[i]);
    cr_assert_eq(a->lines == NULL, b->lines == NULL);
    if (a->lines != NULL) {
        cr_expect(memcmp(a->lines, b->lines, a->code_count * sizeof *a->lines) == 0);
        cr_assert_eq(a->source_name == NULL, b->source_name == NULL);
        if (a->source_name != NULL)
            cr_expect_str_eq(a->source_name, b->source_name);
    }
}

/* ---- round trips ----------------------------------------------------------- */

Test(format, round_trip_preserves_every_field) {
    bib_module_t *m = small_module();
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    expect_same_module(m, back);
    bib_module_free(back);
    bib_module_free(m);
    free(bytes);
}

Test(format, write_read_write_gives_same_bytes) {
    size_t size1, size2;
    uint8_t *first = small_bytes(&size1);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(first, size1, &back, &diag), BIB_OK, "%s", diag.msg);
    uint8_t *second = write_module(back, &size2);
    cr_assert_eq(size1, size2);
    cr_expect(memcmp(first, second, size1) == 0);
    bib_module_free(back);
    free(first);
    free(second);
}

Test(format, writing_twice_gives_same_bytes) {
    bib_module_t *a = small_module(), *b = small_module();
    size_t size_a, size_b;
    uint8_t *bytes_a = write_module(a, &size_a), *bytes_b = write_module(b, &size_b);
    cr_assert_eq(size_a, size_b);
    cr_expect(memcmp(bytes_a, bytes_b, size_a) == 0);
    bib_module_free(a);
    bib_module_free(b);
    free(bytes_a);
    free(bytes_b);
}

Test(format, tiny_module_round_trip_and_size) {
    bib_module_t *m = tiny_module();
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    /* header 32 + 2 entries 32 + code 20 (+4 padding) + symbols 16+16+2+4 */
    cr_expect_eq(size, 32u + 32u + 24u + 38u);
    cr_expect(memcmp(bytes, BIB_MAGIC, 4) == 0);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    expect_same_module(m, back);
    cr_expect_null(back->lines);
    cr_expect_null(back->source_name);
    cr_expect_eq(back->memory_size, 0);
    bib_module_free(back);
    bib_module_free(m);
    free(bytes);
}

Test(format, no_debug_section_without_lines) {
    bib_module_t *m = small_module();
    free(m->lines);
    m->lines = NULL;
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    uint32_t count = bib_read_u32le(bytes + 12);
    for (uint32_t i = 0; i < count; i++)
        cr_expect_neq(bib_read_u32le(bytes + 32 + 16 * i), BIB_SEC_DEBUG);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    cr_expect_null(back->lines);
    cr_expect_null(back->source_name);
    bib_module_free(back);
    bib_module_free(m);
    free(bytes);
}

Test(format, debug_without_source_name) {
    bib_module_t *m = small_module();
    free(m->source_name);
    m->source_name = NULL;
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    expect_same_module(m, back);
    cr_expect_null(back->source_name);
    bib_module_free(back);
    bib_module_free(m);
    free(bytes);
}

Test(format, memory_without_data_round_trip) {
    bib_module_t *m = tiny_module();
    m->memory_size = 4096;
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    bib_module_t *back = NULL;
    cr_assert_eq(bib_module_read(bytes, size, &back, &diag), BIB_OK, "%s", diag.msg);
    cr_expect_eq(back->memory_size, 4096);
    cr_expect_eq(back->data_size, 0);
    bib_module_free(back);
    bib_module_free(m);
    free(bytes);
}

Test(format, read_runs_the_verifier) {
    bib_module_t *m = small_module();
    m->code[4].b = 99;
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    bib_module_t *back = NULL;
    cr_expect_eq(bib_module_read(bytes, size, &back, &diag), BIB_E_VERIFY);
    cr_expect_null(back);
    cr_expect_str_eq(diag.msg, "pc 4 (JZ): jump target 99 is outside function 'main' (pc 0..6)");
    bib_module_free(m);
    free(bytes);
}

Test(format, write_rejects_missing_name) {
    bib_module_t *m = tiny_module();
    free(m->funcs[0].name);
    m->funcs[0].name = NULL;
    uint8_t *bytes = NULL;
    size_t size;
    cr_expect_eq(bib_module_write(m, &bytes, &size, &diag), BIB_E_USAGE);
    cr_expect_str_eq(diag.msg, "cannot write module: function 0 has no name");
    cr_expect_null(bytes);
    bib_module_free(m);
}

/* The annotated example in spec/bib-format.md, byte for byte. */
static const uint8_t spec_example[] = {
    0x7f, 0x42, 0x49, 0x42, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
    0x20, 0x00, 0x00, 0x00, 0x0c, 0x01, 0x00, 0x00, 0x58, 0x00, 0x31, 0x0d, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x70, 0x00, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x98, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xa8, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
    0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xb8, 0x00, 0x00, 0x00, 0x31, 0x00, 0x00, 0x00,
    0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x68, 0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x6d, 0x61, 0x69, 0x6e, 0x09, 0x00,
    0x70, 0x72, 0x69, 0x6e, 0x74, 0x5f, 0x69, 0x36, 0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x06, 0x00, 0x74, 0x2e, 0x62, 0x61, 0x73, 0x6d, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
};

static bib_module_t *spec_example_module(void) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code_count = 2;
    m->code = malloc(2 * sizeof *m->code);
    m->code[0] = insn(BIB_CODE_LDK, 0, 0, 0, 0);
    m->code[1] = insn(BIB_CODE_HALT, 0, 0, 0, 0);
    m->const_count = 1;
    m->consts = malloc(sizeof *m->consts);
    m->consts[0] = (bib_const_t){BIB_CONST_I64, 42};
    m->memory_size = 16;
    m->data_size = 2;
    m->data = malloc(2);
    memcpy(m->data, "hi", 2);
    m->func_count = 1;
    m->funcs = calloc(1, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){dup_str("main"), 0, 2, 0, 1};
    m->import_count = 1;
    m->imports = malloc(sizeof *m->imports);
    m->imports[0] = dup_str("print_i64");
    m->source_name = dup_str("t.basm");
    m->lines = malloc(2 * sizeof *m->lines);
    m->lines[0] = 1;
    m->lines[1] = 2;
    return m;
}

Test(format, writes_the_spec_example_bytes) {
    bib_module_t *m = spec_example_module();
    size_t size;
    uint8_t *bytes = write_module(m, &size);
    cr_assert_eq(size, sizeof spec_example);
    for (size_t i = 0; i < size; i++)
        cr_expect_eq(bytes[i], spec_example[i], "byte 0x%zx", i);
    bib_module_free(m);
    free(bytes);
}

Test(format, reads_the_spec_example) {
    bib_module_t *m = NULL;
    cr_assert_eq(bib_module_read(spec_example, sizeof spec_example, &m, &diag), BIB_OK, "%s",
                 diag.msg);
    bib_module_t *want = spec_example_module();
    expect_same_module(want, m);
    bib_module_free(want);
    bib_module_free(m);
}

/* ---- header errors ------------------------------------------------------- */

Test(format, bad_magic) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    b[1] = 'X';
    expect_format_error(b, size,
                        "byte 0: not a .bib file (it does not start with the magic 7F 42 49 42, "
                        "\"\\x7fBIB\")");
    free(b);
}

Test(format, empty_input) {
    expect_format_error(NULL, 0, NULL);
    uint8_t one = 0x7f;
    expect_format_error(&one, 1, NULL);
}

Test(format, truncated_header) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    expect_format_error(b, 20, "byte 20: file ends inside the 32-byte header (file is 20 bytes)");
    free(b);
}

Test(format, unsupported_major_version) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    b[4] = 2;
    expect_format_error(b, size, "byte 4: unsupported format version 2.0 (this build reads 1.x)");
    free(b);
}

Test(format, newer_minor_version_is_read) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    b[6] = 7;
    fix_checksum(b, size);
    bib_module_t *m = NULL;
    cr_expect_eq(bib_module_read(b, size, &m, &diag), BIB_OK, "%s", diag.msg);
    bib_module_free(m);
    free(b);
}

Test(format, file_size_field_mismatch) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    char want[200];
    snprintf(want, sizeof want,
             "byte 20: file size field says %zu bytes but the file is %zu bytes (truncated, or "
             "trailing bytes)",
             size, size - 1);
    expect_format_error(b, size - 1, want);
    free(b);
}

Test(format, checksum_mismatch) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t stored = bib_read_u32le(b + 24);
    b[size - 1] ^= 0x40;
    fix_checksum(b, size);
    uint32_t actual = bib_read_u32le(b + 24);
    bib_write_u32le(b + 24, stored);
    char want[200];
    snprintf(want, sizeof want,
             "byte 24: checksum mismatch (header says 0x%08X, contents give 0x%08X): the file is "
             "corrupt",
             stored, actual);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, unknown_header_flags) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    b[8] = 1;
    fix_checksum(b, size);
    expect_format_error(b, size,
                        "byte 8: unknown header flags 0x00000001 (format 1.0 defines none)");
    free(b);
}

Test(format, reserved_header_word) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    b[29] = 1;
    fix_checksum(b, size);
    expect_format_error(b, size, "byte 28: reserved header word is 0x00000100, must be 0");
    free(b);
}

Test(format, too_many_sections) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    bib_write_u32le(b + 12, 0xFFFFFFFF);
    fix_checksum(b, size);
    expect_format_error(b, size, "byte 12: section count 4294967295 is more than the limit 64");
    free(b);
}

Test(format, section_table_past_end) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    bib_write_u32le(b + 16, 0xFFFFFFF0);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte 16: section table (offset 4294967280, 5 entries of 16 bytes) extends past end "
             "of file (%zu bytes)",
             size);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, section_table_overlaps_header) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    bib_write_u32le(b + 16, 16);
    fix_checksum(b, size);
    expect_format_error(b, size,
                        "byte 16: section table offset 16 overlaps the header (must be >= 32)");
    free(b);
}

/* ---- section table errors -------------------------------------------------- */

Test(format, section_past_end_of_file) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CONST);
    uint32_t offset = bib_read_u32le(b + e + 8);
    bib_write_u32le(b + e + 12, 4000);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: section 1 (const) extends past end of file (offset %u + size 4000 > %zu)",
             e + 8, offset, size);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, section_offset_size_sum_does_not_wrap) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CODE);
    bib_write_u32le(b + e + 8, 0xFFFFFFF0);
    bib_write_u32le(b + e + 12, 0x20);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: section 0 (code) extends past end of file (offset 4294967280 + size 32 > "
             "%zu)",
             e + 8, size);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, sections_overlap) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t code = section_offset(b, BIB_SEC_CODE);
    uint32_t e = entry_of(b, BIB_SEC_CONST);
    bib_write_u32le(b + e + 8, code + 20);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: section 1 (const) at bytes %u..%u overlaps section 0 at bytes %u..%u", e + 8,
             code + 20, code + 20 + 32 - 1, code, code + 9 * 20 - 1);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, section_overlaps_table) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CONST);
    bib_write_u32le(b + e + 8, 40);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: section 1 (const) at bytes 40..71 overlaps the section table (bytes "
             "32..111)",
             e + 8);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, duplicate_section) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_DATA);
    bib_write_u32le(b + e, BIB_SEC_CONST);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want, "byte %u: section 2 duplicates section 1 (both const)", e);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, unknown_section_flags) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CODE);
    b[e + 4] = 3;
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want, "byte %u: section 0 (code) has unknown flags 0x00000003", e + 4);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, unknown_required_section) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_DEBUG);
    bib_write_u32le(b + e, 99);
    bib_write_u32le(b + e + 4, BIB_SECTION_REQUIRED);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: section 4 has type 99 (unknown), which this build does not support, and "
             "is marked required",
             e);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, unknown_optional_section_is_skipped) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_DEBUG);
    bib_write_u32le(b + e, 99);
    fix_checksum(b, size);
    bib_module_t *m = NULL;
    cr_assert_eq(bib_module_read(b, size, &m, &diag), BIB_OK, "%s", diag.msg);
    cr_expect_null(m->lines);
    bib_module_free(m);
    free(b);
}

Test(format, missing_code_section) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CODE);
    bib_write_u32le(b + e, 99);
    bib_write_u32le(b + e + 4, 0); /* an optional unknown section, so it is skipped */
    fix_checksum(b, size);
    expect_format_error(b, size,
                        "byte 32: the section table has no code section (it is mandatory)");
    free(b);
}

Test(format, missing_symbols_section) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_SYMBOLS);
    bib_write_u32le(b + e, 99);
    bib_write_u32le(b + e + 4, 0); /* an optional unknown section, so it is skipped */
    fix_checksum(b, size);
    expect_format_error(b, size,
                        "byte 32: the section table has no symbols section (it is mandatory)");
    free(b);
}

/* ---- section content errors ------------------------------------------------ */

Test(format, code_size_not_multiple_of_instruction) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CODE);
    bib_write_u32le(b + e + 12, 9 * 20 - 1);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: code section size 179 is not a multiple of 20 (the instruction size)",
             e + 12);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, const_size_not_multiple_of_entry) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_CONST);
    bib_write_u32le(b + e + 12, 20);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: const section size 20 is not a multiple of 16 (the entry size)", e + 12);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, constant_unknown_type) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_CONST);
    bib_write_u32le(b + off + 16, 9);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: constant 1 has unknown type 9 (expected 1 = i64 or 2 = f64)", off + 16);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, data_section_too_small) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_DATA);
    bib_write_u32le(b + e + 12, 7);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: data section is 7 bytes, too small for its 8-byte memory size field",
             e + 12);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, memory_smaller_than_data) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_DATA);
    bib_write_u64le(b + off, 2);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: memory size 2 bytes is smaller than the 3 bytes of initial data that "
             "follow it",
             off);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, memory_size_over_limit) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_DATA);
    bib_write_u64le(b + off, UINT64_MAX);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: memory size 18446744073709551615 bytes is more than the limit "
             "1099511627776",
             off);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, hostile_function_count) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_SYMBOLS);
    bib_write_u32le(b + off, 0xFFFFFFFF);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: function count 4294967295 cannot fit in the %u bytes left in the symbols "
             "section (limit 1048576)",
             off, bib_read_u32le(b + entry_of(b, BIB_SEC_SYMBOLS) + 12) - 16);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, hostile_import_count) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_SYMBOLS);
    bib_write_u32le(b + off + 8, 60000);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: import count 60000 cannot fit in the symbols section (limit 65536)",
             off + 8);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, symbols_reserved_word) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_SYMBOLS);
    b[off + 12] = 5;
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want, "byte %u: symbols section reserved word is 0x00000005, must be 0",
             off + 12);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, name_too_long) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t at = section_offset(b, BIB_SEC_SYMBOLS) + 16 + 16;
    b[at] = 0;
    b[at + 1] = 1; /* 256 */
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: function 0 name is 256 bytes long, more than the limit 255", at);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, name_empty) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t at = section_offset(b, BIB_SEC_SYMBOLS) + 16 + 16;
    b[at] = 0;
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want, "byte %u: function 0 name is empty", at);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, name_with_nul) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t at = section_offset(b, BIB_SEC_SYMBOLS) + 16 + 16;
    b[at + 2 + 1] = 0; /* "m\0in" */
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: function 0 name holds byte 0x00 (names may not contain NUL or control "
             "characters)",
             at + 3);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, name_runs_past_section) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_SYMBOLS);
    uint32_t ssize = bib_read_u32le(b + entry_of(b, BIB_SEC_SYMBOLS) + 12);
    /* the last import name, "print_f64", is the section's last 11 bytes */
    uint32_t at = off + ssize - 11;
    b[at] = 10;
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: symbols section ends inside import 1 name (needs 10 bytes, 9 left)", at + 2);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, trailing_bytes_in_symbols) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_SYMBOLS);
    bib_write_u32le(b + off + 8, 1); /* one import fewer than stored */
    fix_checksum(b, size);
    uint32_t ssize = bib_read_u32le(b + entry_of(b, BIB_SEC_SYMBOLS) + 12);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: symbols section has 11 unexpected bytes after its last field",
             off + ssize - 11);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, line_runs_do_not_cover_code) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t off = section_offset(b, BIB_SEC_DEBUG);
    /* source "small.basm" (2+10), run count, then runs (3,2) (4,1) (5,3) (6,1) (9,2) */
    uint32_t runs_at = off + 12;
    cr_assert_eq(bib_read_u32le(b + runs_at), 5);
    bib_write_u32le(b + runs_at + 4 + 8 * 4 + 4, 1);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want, "byte %u: line runs cover 8 instructions but the code has 9",
             runs_at);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, line_run_past_code) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t runs_at = section_offset(b, BIB_SEC_DEBUG) + 12;
    bib_write_u32le(b + runs_at + 4 + 4, 0xFFFFFFFF);
    fix_checksum(b, size);
    char want[300];
    snprintf(want, sizeof want,
             "byte %u: line run 0 covers 4294967295 instructions from pc 0, outside the 9 "
             "instructions of the code (runs must be non-empty and cover each instruction once)",
             runs_at + 8);
    expect_format_error(b, size, want);
    free(b);
}

Test(format, hostile_line_run_count) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t runs_at = section_offset(b, BIB_SEC_DEBUG) + 12;
    bib_write_u32le(b + runs_at, 0x10000000);
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: line run count 268435456 cannot fit in the 40 bytes left in the debug "
             "section",
             runs_at);
    expect_format_error(b, size, want);
    free(b);
}

/* ---- robustness ------------------------------------------------------------ */

/* Reads b; a success must be a module that writes back without trouble. */
static void read_must_not_crash(const uint8_t *b, size_t size) {
    bib_module_t *m = NULL;
    bib_status_t st = bib_module_read(b, size, &m, &diag);
    if (st == BIB_OK) {
        cr_assert_not_null(m);
        uint8_t *again = NULL;
        size_t again_size;
        cr_assert_eq(bib_module_write(m, &again, &again_size, &diag), BIB_OK, "%s", diag.msg);
        free(again);
        bib_module_free(m);
    } else {
        cr_assert(st == BIB_E_FORMAT || st == BIB_E_VERIFY, "status %d", st);
        cr_assert_null(m);
        cr_assert(diag.msg[0] != '\0');
        cr_assert_null(strchr(diag.msg, '\n'), "message spans lines: %s", diag.msg);
    }
}

Test(robust, every_truncation_is_an_error) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    for (size_t n = 0; n < size; n++) {
        /* exact-size copy, so a read past n trips the sanitizers */
        uint8_t *cut = malloc(n > 0 ? n : 1);
        memcpy(cut, b, n);
        bib_module_t *m = NULL;
        cr_expect_eq(bib_module_read(cut, n, &m, &diag), BIB_E_FORMAT, "length %zu", n);
        free(cut);
    }
    free(b);
}

Test(robust, every_truncation_with_consistent_header) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    for (size_t n = 32; n < size; n++) {
        uint8_t *cut = malloc(n);
        memcpy(cut, b, n);
        fix_header(cut, n);
        read_must_not_crash(cut, n);
        free(cut);
    }
    free(b);
}

Test(robust, every_bit_flip_is_caught_by_checksum) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    for (size_t bit = 0; bit < size * 8; bit++) {
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        bib_module_t *m = NULL;
        cr_expect_eq(bib_module_read(b, size, &m, &diag), BIB_E_FORMAT, "bit %zu", bit);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    free(b);
}

Test(robust, every_bit_flip_past_checksum) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint8_t *copy = malloc(size);
    for (size_t bit = 0; bit < size * 8; bit++) {
        if (bit / 8 >= 24 && bit / 8 < 28)
            continue; /* the checksum itself: fix_checksum would undo the flip */
        memcpy(copy, b, size);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        fix_checksum(copy, size);
        read_must_not_crash(copy, size);
    }
    free(copy);
    free(b);
}

Test(robust, random_byte_mutations_past_checksum) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint8_t *copy = malloc(size);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int round = 0; round < 20000; round++) {
        memcpy(copy, b, size);
        int edits = 1 + round % 4;
        for (int k = 0; k < edits; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(state >> 33) % size;
            static const uint8_t interesting[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0x10, 0x14};
            copy[at] = (state >> 20) & 1 ? (uint8_t)(state >> 24)
                                         : interesting[(state >> 40) % sizeof interesting];
        }
        fix_header(copy, size);
        read_must_not_crash(copy, size);
    }
    free(copy);
    free(b);
}

/* ---- tensors section --------------------------------------------------- */

/* tiny_module plus tensors: x (input, f32[n, ?]) and y (output, untyped) on
   t0, w (constant i32[2] = 7, -1) on t3, 4 tensor registers. */
static bib_module_t *tensor_module(void) {
    bib_module_t *m = tiny_module();
    m->tensor_regs = 4;
    m->dim_name_count = 1;
    m->dim_names = malloc(sizeof *m->dim_names);
    m->dim_names[0] = dup_str("n");
    m->tensor_count = 3;
    m->tensors = calloc(3, sizeof *m->tensors);
    m->tensors[0] = (bib_tensor_decl_t){dup_str("x"),  0, BIB_TENSOR_INPUT,
                                        BIB_DTYPE_F32, 2, {BIB_DIM_SYMBOL(0), BIB_DIM_ANY, 0, 0},
                                        NULL,          0};
    m->tensors[1] = (bib_tensor_decl_t){dup_str("y"), 0, BIB_TENSOR_OUTPUT, 0, 0, {0}, NULL, 0};
    uint8_t *init = malloc(8);
    bib_write_u32le(init, 7);
    bib_write_u32le(init + 4, 0xFFFFFFFF);
    m->tensors[2] =
        (bib_tensor_decl_t){dup_str("w"), 3, BIB_TENSOR_CONST, BIB_DTYPE_I32, 1, {2}, init, 8};
    return m;
}

static uint8_t *tensor_bytes(size_t *size) {
    bib_module_t *m = tensor_module();
    uint8_t *bytes = write_module(m, size);
    bib_module_free(m);
    return bytes;
}

/* Offsets inside the tensors section of tensor_module's bytes (see
   spec/bib-format.md): header 16, dimension name "n" 3, then records. */
enum {
    TS_REGS = 0,
    TS_NAMES = 4,
    TS_COUNT = 8,
    TS_RESERVED = 12,
    TS_DIM0 = 16,
    TS_X = 19,             /* x: 16 fixed, name 3, dims 16, init size 8 */
    TS_Y = TS_X + 43,      /* y: 16 fixed, name 3, init size 8 */
    TS_W = TS_Y + 27,      /* w: 16 fixed, name 3, dims 8, init size 8, init 8 */
    TS_W_SIZE = TS_W + 27, /* w's init size */
    TS_END = TS_W + 43,
};

Test(tensors, round_trip_preserves_every_field) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    bib_module_t *m = NULL;
    cr_assert_eq(bib_module_read(b, size, &m, &diag), BIB_OK, "%s", diag.msg);
    cr_expect_eq(m->tensor_regs, 4);
    cr_assert_eq(m->dim_name_count, 1);
    cr_expect_str_eq(m->dim_names[0], "n");
    cr_assert_eq(m->tensor_count, 3);
    const bib_tensor_decl_t *x = &m->tensors[0], *y = &m->tensors[1], *w = &m->tensors[2];
    cr_expect_str_eq(x->name, "x");
    cr_expect_eq(x->flags, BIB_TENSOR_INPUT);
    cr_expect_eq(x->dtype, BIB_DTYPE_F32);
    cr_expect_eq(x->rank, 2);
    cr_expect_eq(x->dims[0], BIB_DIM_SYMBOL(0));
    cr_expect_eq(x->dims[1], BIB_DIM_ANY);
    cr_expect_null(x->init);
    cr_expect_str_eq(y->name, "y");
    cr_expect_eq(y->flags, BIB_TENSOR_OUTPUT);
    cr_expect_eq(y->dtype, 0);
    cr_expect_eq(y->rank, 0);
    cr_expect_eq(w->reg, 3);
    cr_expect_eq(w->init_size, 8);
    cr_expect_eq(bib_read_u32le(w->init + 4), 0xFFFFFFFF);
    size_t again_size;
    uint8_t *again = write_module(m, &again_size);
    cr_expect_eq(again_size, size);
    cr_expect(memcmp(again, b, size) == 0, "write(read(bytes)) differs");
    free(again);
    bib_module_free(m);
    free(b);
}

Test(tensors, section_is_type_16_required_and_laid_out_as_the_spec_says) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    uint32_t e = entry_of(b, BIB_SEC_TENSORS);
    cr_expect_eq(bib_read_u32le(b + e + 4), BIB_SECTION_REQUIRED);
    cr_expect_eq(bib_read_u32le(b + e + 12), TS_END);
    uint32_t o = section_offset(b, BIB_SEC_TENSORS);
    cr_expect_eq(bib_read_u32le(b + o + TS_REGS), 4);
    cr_expect_eq(bib_read_u32le(b + o + TS_NAMES), 1);
    cr_expect_eq(bib_read_u32le(b + o + TS_COUNT), 3);
    cr_expect_eq(b[o + TS_DIM0], 1);
    cr_expect_eq(b[o + TS_DIM0 + 2], 'n');
    cr_expect_eq(bib_read_u32le(b + o + TS_X + 12), 2, "x's rank");
    cr_expect_eq(bib_read_u64le(b + o + TS_X + 19), (uint64_t)BIB_DIM_SYMBOL(0));
    cr_expect_eq(bib_read_u32le(b + o + TS_W), 3, "w's register");
    cr_expect_eq(bib_read_u64le(b + o + TS_W_SIZE), 8);
    cr_expect_eq(bib_read_u32le(b + o + TS_W_SIZE + 8), 7);
    free(b);
}

Test(tensors, no_section_without_tensor_registers) {
    size_t size;
    uint8_t *b = small_bytes(&size);
    uint32_t count = bib_read_u32le(b + 12);
    for (uint32_t i = 0; i < count; i++)
        cr_expect_neq(bib_read_u32le(b + 32 + 16 * i), BIB_SEC_TENSORS);
    free(b);
}

Test(tensors, registers_without_declarations_round_trip) {
    bib_module_t *m = tiny_module();
    m->tensor_regs = 9;
    size_t size;
    uint8_t *b = write_module(m, &size);
    bib_module_free(m);
    cr_assert_eq(bib_module_read(b, size, &m, &diag), BIB_OK, "%s", diag.msg);
    cr_expect_eq(m->tensor_regs, 9);
    cr_expect_eq(m->tensor_count, 0);
    bib_module_free(m);
    free(b);
}

/* Patches a u32 (or u64 when wide) of the tensors section and expects msg,
   where %u in msg is the absolute byte offset of the field at fault
   (section offset + at_fault). */
static void expect_tensor_error(uint32_t at, uint64_t value, int wide, uint32_t at_fault,
                                const char *msg) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    uint32_t o = section_offset(b, BIB_SEC_TENSORS);
    if (wide)
        bib_write_u64le(b + o + at, value);
    else
        bib_write_u32le(b + o + at, (uint32_t)value);
    fix_checksum(b, size);
    char want[300];
    snprintf(want, sizeof want, msg, o + at_fault);
    expect_format_error(b, size, want);
    free(b);
}

Test(tensors, zero_registers_is_an_error) {
    expect_tensor_error(TS_REGS, 0, 0, TS_REGS,
                        "byte %u: tensors section declares 0 tensor registers (a module without "
                        "tensor registers has no tensors section)");
}

Test(tensors, reserved_word_must_be_zero) {
    expect_tensor_error(TS_RESERVED, 5, 0, TS_RESERVED,
                        "byte %u: tensors section reserved word is 0x00000005, must be 0");
}

Test(tensors, hostile_dimension_name_count) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "byte %%u: dimension name count 4294967295 cannot fit in the %u bytes left in the "
             "tensors section",
             TS_END - 16);
    expect_tensor_error(TS_NAMES, 0xFFFFFFFF, 0, TS_NAMES, msg);
}

Test(tensors, hostile_tensor_count) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "byte %%u: tensor count 4294967295 cannot fit in the %u bytes left in the tensors "
             "section",
             TS_END - 16);
    expect_tensor_error(TS_COUNT, 0xFFFFFFFF, 0, TS_COUNT, msg);
}

Test(tensors, rank_over_six_is_rejected_before_reading_dims) {
    expect_tensor_error(TS_X + 12, 7, 0, TS_X + 12,
                        "byte %u: tensor 0 has rank 7, more than the limit 6");
}

Test(tensors, data_size_past_the_section) {
    expect_tensor_error(TS_W_SIZE, 9, 1, TS_W_SIZE,
                        "byte %u: tensor 2 'w' has 9 data bytes but only 8 are left in the "
                        "tensors section");
    expect_tensor_error(TS_W_SIZE, UINT64_MAX, 1, TS_W_SIZE,
                        "byte %u: tensor 2 'w' has 18446744073709551615 data bytes but only 8 are "
                        "left in the tensors section");
}

Test(tensors, fewer_data_bytes_leave_trailing_bytes) {
    expect_tensor_error(TS_W_SIZE, 4, 1, TS_W_SIZE + 12,
                        "byte %u: tensors section has 4 unexpected bytes after its last field");
}

Test(tensors, empty_tensor_name) {
    expect_tensor_error(TS_X + 16, 0, 0, TS_X + 16, "byte %u: tensor 0 name is empty");
}

Test(tensors, dimension_name_with_control_byte) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    uint32_t o = section_offset(b, BIB_SEC_TENSORS);
    b[o + TS_DIM0 + 2] = '\n';
    fix_checksum(b, size);
    char want[200];
    snprintf(want, sizeof want,
             "byte %u: dimension name 0 holds byte 0x0A (names may not contain NUL or control "
             "characters)",
             o + TS_DIM0 + 2);
    expect_format_error(b, size, want);
    free(b);
}

Test(tensors, meaning_is_left_to_the_verifier) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    uint32_t o = section_offset(b, BIB_SEC_TENSORS);
    bib_write_u32le(b + o + TS_W, 4); /* w on t4 of 4 registers */
    fix_checksum(b, size);
    bib_module_t *m = NULL;
    cr_expect_eq(bib_module_read(b, size, &m, &diag), BIB_E_VERIFY);
    cr_expect_str_eq(diag.msg, "tensor 2 'w': register t4 is outside the 4 tensor registers "
                               "(t0..t3)");
    free(b);
}

Test(tensors, write_rejects_rank_over_six) {
    bib_module_t *m = tensor_module();
    m->tensors[0].rank = 7;
    uint8_t *bytes = NULL;
    size_t size;
    cr_expect_eq(bib_module_write(m, &bytes, &size, &diag), BIB_E_USAGE);
    cr_expect_null(bytes);
    bib_module_free(m);
}

Test(robust, tensor_module_every_truncation_and_bit_flip) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    uint8_t *copy = malloc(size);
    for (size_t n = 32; n < size; n++) {
        memcpy(copy, b, n);
        fix_header(copy, n);
        read_must_not_crash(copy, n);
    }
    for (size_t bit = 0; bit < size * 8; bit++) {
        if (bit / 8 >= 24 && bit / 8 < 28)
            continue;
        memcpy(copy, b, size);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        fix_checksum(copy, size);
        read_must_not_crash(copy, size);
    }
    free(copy);
    free(b);
}

Test(robust, tensor_module_random_mutations) {
    size_t size;
    uint8_t *b = tensor_bytes(&size);
    uint32_t o = section_offset(b, BIB_SEC_TENSORS);
    uint8_t *copy = malloc(size);
    uint64_t state = 0x2545F4914F6CDD1Dull;
    for (int round = 0; round < 20000; round++) {
        memcpy(copy, b, size);
        for (int k = 0; k < 1 + round % 3; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = o + (size_t)(state >> 33) % TS_END; /* inside the tensors section */
            static const uint8_t interesting[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0x02, 0x04, 0xFE};
            copy[at] = (state >> 20) & 1 ? (uint8_t)(state >> 24)
                                         : interesting[(state >> 40) % sizeof interesting];
        }
        fix_checksum(copy, size);
        read_must_not_crash(copy, size);
    }
    free(copy);
    free(b);
}
