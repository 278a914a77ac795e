/* module/format.c: the .bib container, bytes to module and back
 * (spec/bib-format.md documents every byte).
 *
 * The reader treats its input as hostile: every offset and size is checked
 * before use, sums are done in 64 bits, and each allocation is bounded by what
 * the bytes present can actually hold, so a corrupt or malicious file costs at
 * most a few times its own size and yields one line naming the bad byte. The
 * reader then hands the module to the verifier (verify.c); it does not judge
 * instructions itself.
 */
#include "module/module.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* Header fields, by byte offset. */
enum {
    HDR_MAGIC = 0,
    HDR_MAJOR = 4,
    HDR_MINOR = 6,
    HDR_FLAGS = 8,
    HDR_SECTION_COUNT = 12,
    HDR_SECTION_TABLE = 16,
    HDR_FILE_SIZE = 20,
    HDR_CHECKSUM = 24,
    HDR_RESERVED = 28,
};

/* Section table entry fields, by byte offset inside the entry. */
enum {
    SEC_TYPE = 0,
    SEC_FLAGS = 4,
    SEC_OFFSET = 8,
    SEC_SIZE = 12,
};

#define CONST_ENTRY_BYTES 16u
#define DATA_HEADER_BYTES 8u
#define SYMBOLS_HEADER_BYTES 16u
#define FUNC_FIXED_BYTES 16u /* entry, count, nargs, nregs; the name follows */
#define NAME_LENGTH_BYTES 2u
#define LINE_RUN_BYTES 8u
#define TENSORS_HEADER_BYTES 16u
#define TENSOR_FIXED_BYTES 16u /* reg, flags, dtype, rank; the name follows */
#define TENSOR_DIM_BYTES 8u
#define TENSOR_INIT_SIZE_BYTES 8u
#define TENSOR_MAX_RANK BIB_MAX_RANK
#define DEVCODE_HEADER_BYTES 8u /* count, reserved: shaders and kernels sections */
#define SHADER_FIXED_BYTES 12u  /* bindings, push bytes, word count (after the names) */
#define KERNEL_SIZE_BYTES 4u    /* PTX byte count (after the names) */
/* Sections start on 8-byte boundaries in files this writer produces. */
#define SECTION_ALIGN 8u

_Static_assert(BIB_MAX_NAME <= 0xFFFF && BIB_MAX_SOURCE_NAME <= 0xFFFF,
               "names carry a 16-bit length");

static uint16_t read_u16le(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static void write_u16le(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static const char *section_name(uint32_t type) {
    switch (type) {
    case BIB_SEC_CODE:
        return "code";
    case BIB_SEC_CONST:
        return "const";
    case BIB_SEC_DATA:
        return "data";
    case BIB_SEC_SYMBOLS:
        return "symbols";
    case BIB_SEC_DEBUG:
        return "debug";
    case BIB_SEC_LABELS:
        return "labels";
    case BIB_SEC_TENSORS:
        return "tensors";
    case BIB_SEC_SHADERS:
        return "shaders";
    case BIB_SEC_KERNELS:
        return "kernels";
    default:
        return "unknown";
    }
}

/* The smallest label record: a pc and a one-byte name. */
#define LABEL_MIN_BYTES (4u + 2u + 1u)
#define TENSORS_SLOT 5
#define SHADERS_SLOT 6
#define KERNELS_SLOT 7
#define LABELS_SLOT 8
#define KNOWN_SLOTS 9

/* Sections this build parses; the slot index into reader_t.found. */
static int known_slot(uint32_t type) {
    switch (type) {
    case BIB_SEC_CODE:
    case BIB_SEC_CONST:
    case BIB_SEC_DATA:
    case BIB_SEC_SYMBOLS:
    case BIB_SEC_DEBUG:
        return (int)type - 1;
    case BIB_SEC_TENSORS:
        return TENSORS_SLOT;
    case BIB_SEC_SHADERS:
        return SHADERS_SLOT;
    case BIB_SEC_KERNELS:
        return KERNELS_SLOT;
    case BIB_SEC_LABELS:
        return LABELS_SLOT;
    default:
        return -1;
    }
}

/* ---- reading ------------------------------------------------------------ */

typedef struct section {
    uint32_t index;     /* position in the section table */
    uint32_t entry_pos; /* byte offset of its table entry */
    uint32_t offset, size;
} section_t;

/* A bounded view of one section. pos and end are file offsets, so every
   message can name the absolute byte. */
typedef struct cursor {
    const uint8_t *file;
    uint32_t pos, end;
    const char *what; /* section name, for messages */
    bib_diag_t *diag;
} cursor_t;

static cursor_t cursor_open(const uint8_t *file, const section_t *s, const char *what,
                            bib_diag_t *diag) {
    cursor_t c = {file, s->offset, s->offset + s->size, what, diag};
    return c;
}

static uint32_t cursor_left(const cursor_t *c) {
    return c->end - c->pos;
}

static bib_status_t cursor_need(cursor_t *c, uint32_t n, const char *field) {
    if (cursor_left(c) < n)
        return bib_diag_set(c->diag, BIB_E_FORMAT,
                            "byte %u: %s section ends inside %s (needs %u bytes, %u left)", c->pos,
                            c->what, field, n, cursor_left(c));
    return BIB_OK;
}

static bib_status_t cursor_u32(cursor_t *c, const char *field, uint32_t *v) {
    bib_status_t st = cursor_need(c, 4, field);
    if (st != BIB_OK)
        return st;
    *v = bib_read_u32le(c->file + c->pos);
    c->pos += 4;
    return BIB_OK;
}

/* Reads a length-prefixed name into a fresh NUL-terminated string. An empty
   name is allowed only when allow_empty (then *out stays NULL). */
static bib_status_t cursor_name(cursor_t *c, const char *field, uint32_t limit, int allow_empty,
                                char **out) {
    *out = NULL;
    bib_status_t st = cursor_need(c, NAME_LENGTH_BYTES, field);
    if (st != BIB_OK)
        return st;
    uint32_t at = c->pos;
    uint32_t n = read_u16le(c->file + c->pos);
    c->pos += NAME_LENGTH_BYTES;
    if (n == 0) {
        if (allow_empty)
            return BIB_OK;
        return bib_diag_set(c->diag, BIB_E_FORMAT, "byte %u: %s is empty", at, field);
    }
    if (n > limit)
        return bib_diag_set(c->diag, BIB_E_FORMAT,
                            "byte %u: %s is %u bytes long, more than the limit %u", at, field, n,
                            limit);
    st = cursor_need(c, n, field);
    if (st != BIB_OK)
        return st;
    const uint8_t *p = c->file + c->pos;
    for (uint32_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] == 0x7f)
            return bib_diag_set(c->diag, BIB_E_FORMAT,
                                "byte %u: %s holds byte 0x%02X (names may not contain NUL or "
                                "control characters)",
                                c->pos + i, field, p[i]);
    char *s = malloc(n + 1);
    if (s == NULL)
        return bib_diag_set(c->diag, BIB_E_NOMEM, "out of memory reading %s", field);
    memcpy(s, p, n);
    s[n] = '\0';
    c->pos += n;
    *out = s;
    return BIB_OK;
}

static bib_status_t cursor_finish(const cursor_t *c) {
    if (c->pos != c->end)
        return bib_diag_set(c->diag, BIB_E_FORMAT,
                            "byte %u: %s section has %u unexpected bytes after its last field",
                            c->pos, c->what, cursor_left(c));
    return BIB_OK;
}

static bib_status_t read_header(const uint8_t *b, size_t size, uint32_t *count, uint32_t *table,
                                bib_diag_t *diag) {
    if (size < BIB_MAGIC_BYTES || memcmp(b, BIB_MAGIC, BIB_MAGIC_BYTES) != 0)
        return bib_diag_set(
            diag, BIB_E_FORMAT,
            "byte 0: not a .bib file (it does not start with the magic 7F 42 49 42, "
            "\"\\x7fBIB\")");
    if (size < BIB_HEADER_BYTES)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %zu: file ends inside the %u-byte header (file is %zu bytes)",
                            size, BIB_HEADER_BYTES, size);
    unsigned major = read_u16le(b + HDR_MAJOR), minor = read_u16le(b + HDR_MINOR);
    if (major != BIB_FORMAT_MAJOR)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: unsupported format version %u.%u (this build reads %u.x)",
                            HDR_MAJOR, major, minor, BIB_FORMAT_MAJOR);
    uint32_t declared = bib_read_u32le(b + HDR_FILE_SIZE);
    if (size > UINT32_MAX || declared != size)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: file size field says %u bytes but the file is %zu bytes "
                            "(truncated, or trailing bytes)",
                            HDR_FILE_SIZE, declared, size);
    static const uint8_t zeros[4] = {0, 0, 0, 0};
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, b, HDR_CHECKSUM);
    crc = crc32(crc, zeros, 4);
    crc = crc32(crc, b + HDR_CHECKSUM + 4, (uInt)(size - HDR_CHECKSUM - 4));
    uint32_t stored = bib_read_u32le(b + HDR_CHECKSUM);
    if ((uint32_t)crc != stored)
        return bib_diag_set(
            diag, BIB_E_FORMAT,
            "byte %u: checksum mismatch (header says 0x%08X, contents give 0x%08X): "
            "the file is corrupt",
            HDR_CHECKSUM, stored, (uint32_t)crc);
    uint32_t flags = bib_read_u32le(b + HDR_FLAGS);
    if (flags != 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: unknown header flags 0x%08X (format %u.%u defines none)",
                            HDR_FLAGS, flags, BIB_FORMAT_MAJOR, BIB_FORMAT_MINOR);
    uint32_t reserved = bib_read_u32le(b + HDR_RESERVED);
    if (reserved != 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: reserved header word is 0x%08X, must be 0", HDR_RESERVED,
                            reserved);
    *count = bib_read_u32le(b + HDR_SECTION_COUNT);
    if (*count > BIB_MAX_SECTIONS)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: section count %u is more than the limit %u",
                            HDR_SECTION_COUNT, *count, BIB_MAX_SECTIONS);
    *table = bib_read_u32le(b + HDR_SECTION_TABLE);
    if (*table < BIB_HEADER_BYTES)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: section table offset %u overlaps the header (must be >= %u)",
                            HDR_SECTION_TABLE, *table, BIB_HEADER_BYTES);
    uint64_t table_end = (uint64_t)*table + (uint64_t)*count * BIB_SECTION_ENTRY_BYTES;
    if (table_end > size)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: section table (offset %u, %u entries of %u bytes) extends "
                            "past end of file (%zu bytes)",
                            HDR_SECTION_TABLE, *table, *count, BIB_SECTION_ENTRY_BYTES, size);
    return BIB_OK;
}

/* Reads the section table: bounds, overlaps, duplicates and unknown required
   sections. found[slot] receives each known section (size 0 when absent). */
static bib_status_t read_section_table(const uint8_t *b, size_t size, uint32_t count,
                                       uint32_t table, section_t found[KNOWN_SLOTS],
                                       bib_diag_t *diag) {
    section_t all[BIB_MAX_SECTIONS];
    int present[KNOWN_SLOTS] = {0};
    uint32_t table_end = table + count * BIB_SECTION_ENTRY_BYTES;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t at = table + i * BIB_SECTION_ENTRY_BYTES;
        uint32_t type = bib_read_u32le(b + at + SEC_TYPE);
        uint32_t flags = bib_read_u32le(b + at + SEC_FLAGS);
        section_t s = {i, at, bib_read_u32le(b + at + SEC_OFFSET),
                       bib_read_u32le(b + at + SEC_SIZE)};
        const char *name = section_name(type);
        if (flags & ~BIB_SECTION_REQUIRED)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: section %u (%s) has unknown flags 0x%08X", at + SEC_FLAGS,
                                i, name, flags);
        uint64_t end = (uint64_t)s.offset + s.size;
        if (end > size)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: section %u (%s) extends past end of file (offset %u + "
                                "size %u > %zu)",
                                at + SEC_OFFSET, i, name, s.offset, s.size, size);
        if (s.size > 0 && s.offset < BIB_HEADER_BYTES)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: section %u (%s) at bytes %u..%llu overlaps the header",
                                at + SEC_OFFSET, i, name, s.offset, (unsigned long long)end - 1);
        if (s.size > 0 && s.offset < table_end && end > table)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: section %u (%s) at bytes %u..%llu overlaps the section "
                                "table (bytes %u..%u)",
                                at + SEC_OFFSET, i, name, s.offset, (unsigned long long)end - 1,
                                table, table_end - 1);
        for (uint32_t j = 0; j < i; j++) {
            const section_t *o = &all[j];
            if (s.size > 0 && o->size > 0 && s.offset < (uint64_t)o->offset + o->size &&
                o->offset < end)
                return bib_diag_set(diag, BIB_E_FORMAT,
                                    "byte %u: section %u (%s) at bytes %u..%llu overlaps section "
                                    "%u at bytes %u..%u",
                                    at + SEC_OFFSET, i, name, s.offset, (unsigned long long)end - 1,
                                    j, o->offset, o->offset + o->size - 1);
        }
        all[i] = s;
        int slot = known_slot(type);
        if (slot < 0) {
            if (flags & BIB_SECTION_REQUIRED)
                return bib_diag_set(diag, BIB_E_FORMAT,
                                    "byte %u: section %u has type %u (%s), which this build does "
                                    "not support, and is marked required",
                                    at + SEC_TYPE, i, type, name);
            continue; /* optional and unknown: skipped, as the spec promises */
        }
        if (present[slot])
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: section %u duplicates section %u (both %s)",
                                at + SEC_TYPE, i, found[slot].index, name);
        present[slot] = 1;
        found[slot] = s;
    }
    static const uint32_t mandatory[] = {BIB_SEC_CODE, BIB_SEC_SYMBOLS};
    for (size_t k = 0; k < sizeof mandatory / sizeof mandatory[0]; k++)
        if (!present[known_slot(mandatory[k])])
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: the section table has no %s section (it is mandatory)",
                                table, section_name(mandatory[k]));
    return BIB_OK;
}

static bib_status_t read_code(const uint8_t *b, const section_t *s, bib_module_t *m,
                              bib_diag_t *diag) {
    if (s->size % BIB_INSN_BYTES != 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: code section size %u is not a multiple of %u (the "
                            "instruction size)",
                            s->entry_pos + SEC_SIZE, s->size, BIB_INSN_BYTES);
    uint32_t count = s->size / BIB_INSN_BYTES;
    if (count > BIB_MAX_CODE)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: code section holds %u instructions, more than the limit %u",
                            s->entry_pos + SEC_SIZE, count, BIB_MAX_CODE);
    if (count == 0)
        return BIB_OK;
    m->code = malloc((size_t)count * sizeof *m->code);
    if (m->code == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u instructions", count);
    for (uint32_t i = 0; i < count; i++)
        bib_insn_decode(b + s->offset + (size_t)i * BIB_INSN_BYTES, &m->code[i]);
    m->code_count = count;
    return BIB_OK;
}

static bib_status_t read_consts(const uint8_t *b, const section_t *s, bib_module_t *m,
                                bib_diag_t *diag) {
    if (s->size % CONST_ENTRY_BYTES != 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: const section size %u is not a multiple of %u (the entry "
                            "size)",
                            s->entry_pos + SEC_SIZE, s->size, CONST_ENTRY_BYTES);
    uint32_t count = s->size / CONST_ENTRY_BYTES;
    if (count > BIB_MAX_CONSTS)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: const section holds %u entries, more than the limit %u",
                            s->entry_pos + SEC_SIZE, count, BIB_MAX_CONSTS);
    if (count == 0)
        return BIB_OK;
    m->consts = malloc((size_t)count * sizeof *m->consts);
    if (m->consts == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u constants", count);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t at = s->offset + i * CONST_ENTRY_BYTES;
        uint32_t type = bib_read_u32le(b + at);
        if (type != BIB_CONST_I64 && type != BIB_CONST_F64)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: constant %u has unknown type %u (expected 1 = i64 or 2 "
                                "= f64)",
                                at, i, type);
        uint32_t reserved = bib_read_u32le(b + at + 4);
        if (reserved != 0)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: constant %u reserved word is 0x%08X, must be 0", at + 4,
                                i, reserved);
        m->consts[i].type = type;
        m->consts[i].bits = bib_read_u64le(b + at + 8);
    }
    m->const_count = count;
    return BIB_OK;
}

static bib_status_t read_data(const uint8_t *b, const section_t *s, bib_module_t *m,
                              bib_diag_t *diag) {
    if (s->size < DATA_HEADER_BYTES)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: data section is %u bytes, too small for its %u-byte memory "
                            "size field",
                            s->entry_pos + SEC_SIZE, s->size, DATA_HEADER_BYTES);
    m->memory_size = bib_read_u64le(b + s->offset);
    uint32_t n = s->size - DATA_HEADER_BYTES;
    if (m->memory_size < n)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: memory size %llu bytes is smaller than the %u bytes of "
                            "initial data that follow it",
                            s->offset, (unsigned long long)m->memory_size, n);
    if (m->memory_size > BIB_MAX_MEMORY)
        return bib_diag_set(
            diag, BIB_E_FORMAT, "byte %u: memory size %llu bytes is more than the limit %llu",
            s->offset, (unsigned long long)m->memory_size, (unsigned long long)BIB_MAX_MEMORY);
    if (n == 0)
        return BIB_OK;
    m->data = malloc(n);
    if (m->data == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u data bytes", n);
    memcpy(m->data, b + s->offset + DATA_HEADER_BYTES, n);
    m->data_size = n;
    return BIB_OK;
}

static bib_status_t read_symbols(const uint8_t *b, const section_t *s, bib_module_t *m,
                                 bib_diag_t *diag) {
    cursor_t c = cursor_open(b, s, "symbols", diag);
    uint32_t func_count, entry_func, import_count, reserved;
    bib_status_t st = cursor_u32(&c, "the function count", &func_count);
    if (st == BIB_OK)
        st = cursor_u32(&c, "the entry function index", &entry_func);
    if (st == BIB_OK)
        st = cursor_u32(&c, "the import count", &import_count);
    uint32_t reserved_at = c.pos;
    if (st == BIB_OK)
        st = cursor_u32(&c, "the reserved word", &reserved);
    if (st != BIB_OK)
        return st;
    if (reserved != 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: symbols section reserved word is 0x%08X, must be 0",
                            reserved_at, reserved);
    /* Bound each count by the smallest record it could take before
       allocating, so a hostile count cannot request more than the file. */
    uint64_t min_func = FUNC_FIXED_BYTES + NAME_LENGTH_BYTES + 1;
    if (func_count > BIB_MAX_FUNCS || func_count > cursor_left(&c) / min_func)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: function count %u cannot fit in the %u bytes left in the "
                            "symbols section (limit %u)",
                            s->offset, func_count, cursor_left(&c), BIB_MAX_FUNCS);
    uint64_t min_import = NAME_LENGTH_BYTES + 1;
    if (import_count > BIB_MAX_IMPORTS ||
        import_count > (cursor_left(&c) - func_count * min_func) / min_import)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: import count %u cannot fit in the symbols section (limit %u)",
                            s->offset + 8, import_count, BIB_MAX_IMPORTS);
    m->entry_func = entry_func;
    if (func_count > 0) {
        m->funcs = calloc(func_count, sizeof *m->funcs);
        if (m->funcs == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u functions", func_count);
        m->func_count = func_count;
    }
    char field[64];
    for (uint32_t i = 0; i < func_count; i++) {
        bib_function_t *f = &m->funcs[i];
        snprintf(field, sizeof field, "function %u", i);
        st = cursor_need(&c, FUNC_FIXED_BYTES, field);
        if (st != BIB_OK)
            return st;
        const uint8_t *p = b + c.pos;
        f->entry = bib_read_u32le(p);
        f->count = bib_read_u32le(p + 4);
        f->nargs = bib_read_u32le(p + 8);
        f->nregs = bib_read_u32le(p + 12);
        c.pos += FUNC_FIXED_BYTES;
        snprintf(field, sizeof field, "function %u name", i);
        st = cursor_name(&c, field, BIB_MAX_NAME, 0, &f->name);
        if (st != BIB_OK)
            return st;
    }
    if (import_count > 0) {
        m->imports = calloc(import_count, sizeof *m->imports);
        if (m->imports == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u imports", import_count);
        m->import_count = import_count;
    }
    for (uint32_t i = 0; i < import_count; i++) {
        snprintf(field, sizeof field, "import %u name", i);
        st = cursor_name(&c, field, BIB_MAX_NAME, 0, &m->imports[i]);
        if (st != BIB_OK)
            return st;
    }
    return cursor_finish(&c);
}

static bib_status_t read_debug(const uint8_t *b, const section_t *s, bib_module_t *m,
                               bib_diag_t *diag) {
    cursor_t c = cursor_open(b, s, "debug", diag);
    bib_status_t st =
        cursor_name(&c, "the source file name", BIB_MAX_SOURCE_NAME, 1, &m->source_name);
    uint32_t runs = 0;
    uint32_t runs_at = c.pos;
    if (st == BIB_OK)
        st = cursor_u32(&c, "the line run count", &runs);
    if (st != BIB_OK)
        return st;
    if (runs > cursor_left(&c) / LINE_RUN_BYTES)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: line run count %u cannot fit in the %u bytes left in the "
                            "debug section",
                            runs_at, runs, cursor_left(&c));
    if (m->code_count == 0)
        return runs == 0 ? cursor_finish(&c)
                         : bib_diag_set(diag, BIB_E_FORMAT,
                                        "byte %u: debug section has line runs but there is no code",
                                        runs_at);
    m->lines = malloc((size_t)m->code_count * sizeof *m->lines);
    if (m->lines == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u line numbers", m->code_count);
    uint64_t covered = 0;
    for (uint32_t i = 0; i < runs; i++) {
        uint32_t at = c.pos;
        uint32_t line = bib_read_u32le(b + at), length = bib_read_u32le(b + at + 4);
        c.pos += LINE_RUN_BYTES;
        if (length == 0 || covered + length > m->code_count)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: line run %u covers %u instructions from pc %llu, "
                                "outside the %u instructions of the code (runs must be non-empty "
                                "and cover each instruction once)",
                                at + 4, i, length, (unsigned long long)covered, m->code_count);
        for (uint32_t k = 0; k < length; k++)
            m->lines[covered + k] = line;
        covered += length;
    }
    if (covered != m->code_count)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: line runs cover %llu instructions but the code has %u",
                            runs_at, (unsigned long long)covered, m->code_count);
    return cursor_finish(&c);
}

/* The labels section: a count, then per label its pc and name. What they
   mean (pcs in the code, the order, the names) is the verifier's. */
static bib_status_t read_labels(const uint8_t *b, const section_t *s, bib_module_t *m,
                                bib_diag_t *diag) {
    cursor_t c = cursor_open(b, s, "labels", diag);
    uint32_t count = 0;
    bib_status_t st = cursor_u32(&c, "the label count", &count);
    if (st != BIB_OK)
        return st;
    if (count == 0 || count > cursor_left(&c) / LABEL_MIN_BYTES)
        return bib_diag_set(diag, BIB_E_FORMAT, "byte %u: label count %u %s", s->offset, count,
                            count == 0 ? "is 0 (a module without labels has no labels section)"
                                       : "cannot fit in the bytes left in the labels section");
    m->labels = calloc(count, sizeof *m->labels);
    if (m->labels == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u labels", count);
    m->label_count = count;
    char field[64];
    for (uint32_t i = 0; i < count; i++) {
        snprintf(field, sizeof field, "the pc of label %u", i);
        st = cursor_u32(&c, field, &m->labels[i].pc);
        snprintf(field, sizeof field, "the name of label %u", i);
        if (st == BIB_OK)
            st = cursor_name(&c, field, BIB_MAX_NAME, 0, &m->labels[i].name);
        if (st != BIB_OK)
            return st;
    }
    return cursor_finish(&c);
}

static bib_status_t cursor_u64(cursor_t *c, const char *field, uint64_t *v) {
    bib_status_t st = cursor_need(c, 8, field);
    if (st != BIB_OK)
        return st;
    *v = bib_read_u64le(c->file + c->pos);
    c->pos += 8;
    return BIB_OK;
}

/* Copies a tensor's bytes out of the module's; with consume (the bytes are
 * the caller's private anonymous mapping, bib_module_read_consuming), the
 * whole pages behind each piece copied go back to the system as soon as it
 * is copied, so that a constant is never in memory twice, however large. */
#define COPY_PIECE ((size_t)8 << 20)

static void copy_out(uint8_t *to, const uint8_t *from, size_t n, bool consume) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t given = ((uintptr_t)from + page - 1) & ~(page - 1);
    for (size_t done = 0; done < n;) {
        size_t piece = n - done < COPY_PIECE ? n - done : COPY_PIECE;
        memcpy(to + done, from + done, piece);
        done += piece;
        uintptr_t end = ((uintptr_t)from + done) & ~(page - 1);
        if (consume && end > given) {
            madvise((void *)given, end - given, MADV_DONTNEED);
            given = end;
        }
    }
}

/* The tensors section. Only the layout is judged here (counts that fit,
   ranks that size the dims array, init bytes that are present); what the
   values mean (registers, dtypes, dims, element counts, unique names) is the
   verifier's, so modules built in memory get the same checks. */
static bib_status_t read_tensors(const uint8_t *b, const section_t *s, bool consume,
                                 bib_module_t *m, bib_diag_t *diag) {
    cursor_t c = cursor_open(b, s, "tensors", diag);
    uint32_t regs, names, count, reserved;
    bib_status_t st = cursor_u32(&c, "the tensor register count", &regs);
    if (st == BIB_OK)
        st = cursor_u32(&c, "the dimension name count", &names);
    if (st == BIB_OK)
        st = cursor_u32(&c, "the tensor count", &count);
    if (st == BIB_OK)
        st = cursor_u32(&c, "the reserved word", &reserved);
    if (st != BIB_OK)
        return st;
    if (regs == 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: tensors section declares 0 tensor registers (a module "
                            "without tensor registers has no tensors section)",
                            s->offset);
    if (reserved != 0)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: tensors section reserved word is 0x%08X, must be 0",
                            s->offset + 12, reserved);
    /* Bounded by the smallest record each could take, before allocating. */
    uint64_t min_name = NAME_LENGTH_BYTES + 1;
    uint64_t min_tensor = TENSOR_FIXED_BYTES + min_name + TENSOR_INIT_SIZE_BYTES;
    if (names > cursor_left(&c) / min_name)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: dimension name count %u cannot fit in the %u bytes left in "
                            "the tensors section",
                            s->offset + 4, names, cursor_left(&c));
    if (count > (cursor_left(&c) - names * min_name) / min_tensor)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: tensor count %u cannot fit in the %u bytes left in the "
                            "tensors section",
                            s->offset + 8, count, cursor_left(&c));
    m->tensor_regs = regs;
    if (names > 0) {
        m->dim_names = calloc(names, sizeof *m->dim_names);
        if (m->dim_names == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u dimension names", names);
        m->dim_name_count = names;
    }
    char field[64];
    for (uint32_t i = 0; i < names; i++) {
        snprintf(field, sizeof field, "dimension name %u", i);
        st = cursor_name(&c, field, BIB_MAX_NAME, 0, &m->dim_names[i]);
        if (st != BIB_OK)
            return st;
    }
    if (count > 0) {
        m->tensors = calloc(count, sizeof *m->tensors);
        if (m->tensors == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u tensors", count);
        m->tensor_count = count;
    }
    for (uint32_t i = 0; i < count; i++) {
        bib_tensor_decl_t *t = &m->tensors[i];
        snprintf(field, sizeof field, "tensor %u", i);
        st = cursor_need(&c, TENSOR_FIXED_BYTES, field);
        if (st != BIB_OK)
            return st;
        const uint8_t *p = b + c.pos;
        t->reg = bib_read_u32le(p);
        t->flags = bib_read_u32le(p + 4);
        t->dtype = bib_read_u32le(p + 8);
        t->rank = bib_read_u32le(p + 12);
        if (t->rank > TENSOR_MAX_RANK)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: tensor %u has rank %u, more than the limit %u",
                                c.pos + 12, i, t->rank, TENSOR_MAX_RANK);
        c.pos += TENSOR_FIXED_BYTES;
        snprintf(field, sizeof field, "tensor %u name", i);
        st = cursor_name(&c, field, BIB_MAX_NAME, 0, &t->name);
        if (st != BIB_OK)
            return st;
        snprintf(field, sizeof field, "tensor %u dimensions", i);
        st = cursor_need(&c, t->rank * TENSOR_DIM_BYTES, field);
        if (st != BIB_OK)
            return st;
        for (uint32_t k = 0; k < t->rank; k++) {
            t->dims[k] = (int64_t)bib_read_u64le(b + c.pos);
            c.pos += TENSOR_DIM_BYTES;
        }
        uint32_t size_at = c.pos;
        snprintf(field, sizeof field, "tensor %u data size", i);
        st = cursor_u64(&c, field, &t->init_size);
        if (st != BIB_OK)
            return st;
        if (t->init_size > cursor_left(&c))
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: tensor %u '%s' has %llu data bytes but only %u are left "
                                "in the tensors section",
                                size_at, i, t->name, (unsigned long long)t->init_size,
                                cursor_left(&c));
        if (t->init_size > 0) {
            /* 64-byte aligned, as a tensor's buffer is: the VM's tensors
               share these bytes instead of copying them. */
            t->init = aligned_alloc(64, ((size_t)t->init_size + 63) & ~(size_t)63);
            if (t->init == NULL)
                return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %llu bytes of tensor %u",
                                    (unsigned long long)t->init_size, i);
            copy_out(t->init, b + c.pos, (size_t)t->init_size, consume);
            c.pos += (uint32_t)t->init_size;
        }
    }
    return cursor_finish(&c);
}

static bib_status_t cursor_header(cursor_t *c, const char *what, uint32_t *count) {
    uint32_t reserved;
    bib_status_t st = cursor_u32(c, "the entry count", count);
    uint32_t reserved_at = c->pos;
    if (st == BIB_OK)
        st = cursor_u32(c, "the reserved word", &reserved);
    if (st == BIB_OK && reserved != 0)
        st = bib_diag_set(c->diag, BIB_E_FORMAT,
                          "byte %u: %s section reserved word is 0x%08X, must be 0", reserved_at,
                          what, reserved);
    return st;
}

/* The shaders section. Layout only (counts and sizes that fit the bytes
   present); the SPIR-V header, binding and push limits and unique names are
   the verifier's. */
static bib_status_t read_shaders(const uint8_t *b, const section_t *s, bib_module_t *m,
                                 bib_diag_t *diag) {
    cursor_t c = cursor_open(b, s, "shaders", diag);
    uint32_t count;
    bib_status_t st = cursor_header(&c, "shaders", &count);
    if (st != BIB_OK)
        return st;
    uint64_t min_shader = 2 * (NAME_LENGTH_BYTES + 1) + SHADER_FIXED_BYTES;
    if (count > BIB_MAX_SHADERS || count > cursor_left(&c) / min_shader)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: shader count %u cannot fit in the %u bytes left in the "
                            "shaders section (limit %u)",
                            s->offset, count, cursor_left(&c), BIB_MAX_SHADERS);
    if (count > 0) {
        m->shaders = calloc(count, sizeof *m->shaders);
        if (m->shaders == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u shaders", count);
        m->shader_count = count;
    }
    char field[64];
    for (uint32_t i = 0; i < count; i++) {
        bib_shader_decl_t *sh = &m->shaders[i];
        snprintf(field, sizeof field, "shader %u name", i);
        st = cursor_name(&c, field, BIB_MAX_NAME, 0, &sh->name);
        if (st == BIB_OK) {
            snprintf(field, sizeof field, "shader %u entry point", i);
            st = cursor_name(&c, field, BIB_MAX_NAME, 0, &sh->entry);
        }
        if (st == BIB_OK) {
            snprintf(field, sizeof field, "shader %u sizes", i);
            st = cursor_need(&c, SHADER_FIXED_BYTES, field);
        }
        if (st != BIB_OK)
            return st;
        sh->bindings = bib_read_u32le(b + c.pos);
        sh->push_bytes = bib_read_u32le(b + c.pos + 4);
        uint32_t words_at = c.pos + 8;
        uint32_t words = bib_read_u32le(b + words_at);
        c.pos += SHADER_FIXED_BYTES;
        if (words > BIB_MAX_SPIRV_WORDS || words > cursor_left(&c) / 4)
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: shader %u '%s' has %u SPIR-V words but only %u bytes are "
                                "left in the shaders section (limit %u words)",
                                words_at, i, sh->name, words, cursor_left(&c), BIB_MAX_SPIRV_WORDS);
        if (words > 0) {
            sh->spirv = malloc((size_t)words * 4);
            if (sh->spirv == NULL)
                return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for shader %u (%u words)", i,
                                    words);
            for (uint32_t k = 0; k < words; k++)
                sh->spirv[k] = bib_read_u32le(b + c.pos + 4 * k);
            c.pos += 4 * words;
        }
        sh->words = words;
    }
    return cursor_finish(&c);
}

/* The kernels section: layout only, as for shaders. */
static bib_status_t read_kernels(const uint8_t *b, const section_t *s, bib_module_t *m,
                                 bib_diag_t *diag) {
    cursor_t c = cursor_open(b, s, "kernels", diag);
    uint32_t count;
    bib_status_t st = cursor_header(&c, "kernels", &count);
    if (st != BIB_OK)
        return st;
    uint64_t min_kernel = 3 * NAME_LENGTH_BYTES + 2 + KERNEL_SIZE_BYTES;
    if (count > BIB_MAX_KERNELS || count > cursor_left(&c) / min_kernel)
        return bib_diag_set(diag, BIB_E_FORMAT,
                            "byte %u: kernel count %u cannot fit in the %u bytes left in the "
                            "kernels section (limit %u)",
                            s->offset, count, cursor_left(&c), BIB_MAX_KERNELS);
    if (count > 0) {
        m->kernels = calloc(count, sizeof *m->kernels);
        if (m->kernels == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u kernels", count);
        m->kernel_count = count;
    }
    char field[64];
    for (uint32_t i = 0; i < count; i++) {
        bib_kernel_decl_t *k = &m->kernels[i];
        snprintf(field, sizeof field, "kernel %u name", i);
        st = cursor_name(&c, field, BIB_MAX_NAME, 0, &k->name);
        if (st == BIB_OK) {
            snprintf(field, sizeof field, "kernel %u entry", i);
            st = cursor_name(&c, field, BIB_MAX_NAME, 0, &k->entry);
        }
        if (st == BIB_OK) {
            snprintf(field, sizeof field, "kernel %u parameter signature", i);
            st = cursor_name(&c, field, BIB_MAX_KERNEL_PARAMS, 1, &k->params);
        }
        if (st == BIB_OK && k->params == NULL && (k->params = calloc(1, 1)) == NULL)
            st = bib_diag_set(diag, BIB_E_NOMEM, "out of memory reading kernel %u", i);
        uint32_t size_at = c.pos, size = 0;
        if (st == BIB_OK) {
            snprintf(field, sizeof field, "kernel %u PTX size", i);
            st = cursor_u32(&c, field, &size);
        }
        if (st != BIB_OK)
            return st;
        if (size > BIB_MAX_PTX_BYTES || size > cursor_left(&c))
            return bib_diag_set(diag, BIB_E_FORMAT,
                                "byte %u: kernel %u '%s' has %u PTX bytes but only %u are left in "
                                "the kernels section (limit %u)",
                                size_at, i, k->name, size, cursor_left(&c), BIB_MAX_PTX_BYTES);
        k->ptx = malloc((size_t)size + 1);
        if (k->ptx == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for kernel %u (%u bytes)", i,
                                size);
        memcpy(k->ptx, b + c.pos, size);
        k->ptx[size] = '\0';
        k->ptx_bytes = size;
        c.pos += size;
    }
    return cursor_finish(&c);
}

static bib_status_t module_read(const uint8_t *bytes, size_t size, bool consume, bib_module_t **out,
                                bib_diag_t *diag) {
    if (out == NULL || (bytes == NULL && size > 0))
        return bib_diag_set(diag, BIB_E_USAGE, "bib_module_read: NULL argument");
    *out = NULL;
    if (bytes == NULL)
        bytes = (const uint8_t *)"";
    uint32_t count = 0, table = 0;
    bib_status_t st = read_header(bytes, size, &count, &table, diag);
    if (st != BIB_OK)
        return st;
    section_t found[KNOWN_SLOTS];
    memset(found, 0, sizeof found);
    st = read_section_table(bytes, size, count, table, found, diag);
    if (st != BIB_OK)
        return st;
    bib_module_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for a module");
    /* An absent section has entry_pos 0 (no table entry lies inside the
       header) and reads as empty. */
    st = read_code(bytes, &found[BIB_SEC_CODE - 1], m, diag);
    if (st == BIB_OK && found[BIB_SEC_CONST - 1].entry_pos != 0)
        st = read_consts(bytes, &found[BIB_SEC_CONST - 1], m, diag);
    if (st == BIB_OK && found[BIB_SEC_DATA - 1].entry_pos != 0)
        st = read_data(bytes, &found[BIB_SEC_DATA - 1], m, diag);
    if (st == BIB_OK)
        st = read_symbols(bytes, &found[BIB_SEC_SYMBOLS - 1], m, diag);
    if (st == BIB_OK && found[BIB_SEC_DEBUG - 1].entry_pos != 0)
        st = read_debug(bytes, &found[BIB_SEC_DEBUG - 1], m, diag);
    if (st == BIB_OK && found[LABELS_SLOT].entry_pos != 0)
        st = read_labels(bytes, &found[LABELS_SLOT], m, diag);
    if (st == BIB_OK && found[TENSORS_SLOT].entry_pos != 0)
        st = read_tensors(bytes, &found[TENSORS_SLOT], consume, m, diag);
    if (st == BIB_OK && found[SHADERS_SLOT].entry_pos != 0)
        st = read_shaders(bytes, &found[SHADERS_SLOT], m, diag);
    if (st == BIB_OK && found[KERNELS_SLOT].entry_pos != 0)
        st = read_kernels(bytes, &found[KERNELS_SLOT], m, diag);
    if (st == BIB_OK)
        st = bib_module_verify(m, diag);
    if (st != BIB_OK) {
        bib_module_free(m);
        return st;
    }
    *out = m;
    return BIB_OK;
}

bib_status_t bib_module_read(const uint8_t *bytes, size_t size, bib_module_t **out,
                             bib_diag_t *diag) {
    return module_read(bytes, size, false, out, diag);
}

bib_status_t bib_module_read_consuming(uint8_t *bytes, size_t size, bib_module_t **out,
                                       bib_diag_t *diag) {
    return module_read(bytes, size, true, out, diag);
}

/* ---- writing ------------------------------------------------------------ */

static uint64_t align_up(uint64_t v) {
    return (v + SECTION_ALIGN - 1) & ~(uint64_t)(SECTION_ALIGN - 1);
}

typedef struct out_section {
    uint32_t type, flags;
    uint64_t offset, size;
} out_section_t;

/* Number of (line, length) runs the debug section needs: adjacent equal lines
   merge, so one module always gives the same bytes. */
static uint32_t line_runs(const bib_module_t *m) {
    uint32_t runs = 0;
    for (uint32_t i = 0; i < m->code_count; i++)
        if (i == 0 || m->lines[i] != m->lines[i - 1])
            runs++;
    return runs;
}

static uint8_t *put_name(uint8_t *p, const char *name) {
    size_t n = name != NULL ? strlen(name) : 0;
    write_u16le(p, (uint16_t)n);
    if (n > 0)
        memcpy(p + NAME_LENGTH_BYTES, name, n);
    return p + NAME_LENGTH_BYTES + n;
}

static bib_status_t check_name(const char *name, const char *what, uint32_t index,
                               bib_diag_t *diag) {
    if (name == NULL)
        return bib_diag_set(diag, BIB_E_USAGE, "cannot write module: %s %u has no name", what,
                            index);
    if (strlen(name) > 0xFFFF)
        return bib_diag_set(diag, BIB_E_USAGE,
                            "cannot write module: %s %u name is %zu bytes, more than 65535", what,
                            index, strlen(name));
    return BIB_OK;
}

bib_status_t bib_module_write(const bib_module_t *m, uint8_t **out, size_t *size,
                              bib_diag_t *diag) {
    if (m == NULL || out == NULL || size == NULL)
        return bib_diag_set(diag, BIB_E_USAGE, "bib_module_write: NULL argument");
    *out = NULL;
    *size = 0;
    if ((m->code_count > 0 && m->code == NULL) || (m->const_count > 0 && m->consts == NULL) ||
        (m->data_size > 0 && m->data == NULL) || (m->func_count > 0 && m->funcs == NULL) ||
        (m->import_count > 0 && m->imports == NULL))
        return bib_diag_set(diag, BIB_E_USAGE,
                            "cannot write module: a count is nonzero but its array is NULL");
    uint64_t symbols_size = SYMBOLS_HEADER_BYTES;
    for (uint32_t i = 0; i < m->func_count; i++) {
        bib_status_t st = check_name(m->funcs[i].name, "function", i, diag);
        if (st != BIB_OK)
            return st;
        symbols_size += FUNC_FIXED_BYTES + NAME_LENGTH_BYTES + strlen(m->funcs[i].name);
    }
    for (uint32_t i = 0; i < m->import_count; i++) {
        bib_status_t st = check_name(m->imports[i], "import", i, diag);
        if (st != BIB_OK)
            return st;
        symbols_size += NAME_LENGTH_BYTES + strlen(m->imports[i]);
    }
    size_t source_len = m->source_name != NULL ? strlen(m->source_name) : 0;
    if (m->lines != NULL && source_len > BIB_MAX_SOURCE_NAME)
        return bib_diag_set(diag, BIB_E_USAGE,
                            "cannot write module: source file name is %zu bytes, more than %u",
                            source_len, BIB_MAX_SOURCE_NAME);
    uint32_t runs = m->lines != NULL ? line_runs(m) : 0;
    if ((m->tensor_count > 0 && m->tensors == NULL) ||
        (m->dim_name_count > 0 && m->dim_names == NULL))
        return bib_diag_set(diag, BIB_E_USAGE,
                            "cannot write module: a count is nonzero but its array is NULL");
    int has_tensors = m->tensor_regs > 0 || m->tensor_count > 0 || m->dim_name_count > 0;
    uint64_t tensors_size = TENSORS_HEADER_BYTES;
    for (uint32_t i = 0; i < m->dim_name_count; i++) {
        bib_status_t st = check_name(m->dim_names[i], "dimension name", i, diag);
        if (st != BIB_OK)
            return st;
        tensors_size += NAME_LENGTH_BYTES + strlen(m->dim_names[i]);
    }
    for (uint32_t i = 0; i < m->tensor_count; i++) {
        const bib_tensor_decl_t *t = &m->tensors[i];
        bib_status_t st = check_name(t->name, "tensor", i, diag);
        if (st != BIB_OK)
            return st;
        if (t->rank > TENSOR_MAX_RANK || (t->init_size > 0 && t->init == NULL) ||
            t->init_size > UINT32_MAX)
            return bib_diag_set(diag, BIB_E_USAGE,
                                "cannot write module: tensor %u has rank %u (at most %u) or %llu "
                                "data bytes it does not hold",
                                i, t->rank, TENSOR_MAX_RANK, (unsigned long long)t->init_size);
        tensors_size += TENSOR_FIXED_BYTES + NAME_LENGTH_BYTES + strlen(t->name) +
                        (uint64_t)t->rank * TENSOR_DIM_BYTES + TENSOR_INIT_SIZE_BYTES +
                        t->init_size;
    }

    if ((m->shader_count > 0 && m->shaders == NULL) || (m->kernel_count > 0 && m->kernels == NULL))
        return bib_diag_set(diag, BIB_E_USAGE,
                            "cannot write module: a count is nonzero but its array is NULL");
    uint64_t shaders_size = DEVCODE_HEADER_BYTES;
    for (uint32_t i = 0; i < m->shader_count; i++) {
        const bib_shader_decl_t *sh = &m->shaders[i];
        bib_status_t st = check_name(sh->name, "shader", i, diag);
        if (st == BIB_OK)
            st = check_name(sh->entry, "shader entry point", i, diag);
        if (st != BIB_OK)
            return st;
        if (sh->words > 0 && sh->spirv == NULL)
            return bib_diag_set(diag, BIB_E_USAGE,
                                "cannot write module: shader %u has %u words it does not hold", i,
                                sh->words);
        shaders_size += 2 * NAME_LENGTH_BYTES + strlen(sh->name) + strlen(sh->entry) +
                        SHADER_FIXED_BYTES + (uint64_t)sh->words * 4;
    }
    uint64_t kernels_size = DEVCODE_HEADER_BYTES;
    for (uint32_t i = 0; i < m->kernel_count; i++) {
        const bib_kernel_decl_t *k = &m->kernels[i];
        bib_status_t st = check_name(k->name, "kernel", i, diag);
        if (st == BIB_OK)
            st = check_name(k->entry, "kernel entry", i, diag);
        if (st != BIB_OK)
            return st;
        if ((k->ptx_bytes > 0 && k->ptx == NULL) ||
            (k->params != NULL && strlen(k->params) > 0xFFFF))
            return bib_diag_set(diag, BIB_E_USAGE,
                                "cannot write module: kernel %u has %u PTX bytes it does not hold "
                                "or an oversized signature",
                                i, k->ptx_bytes);
        kernels_size += 3 * NAME_LENGTH_BYTES + strlen(k->name) + strlen(k->entry) +
                        (k->params != NULL ? strlen(k->params) : 0) + KERNEL_SIZE_BYTES +
                        k->ptx_bytes;
    }

    /* Sections in type order; empty const and data sections are left out. */
    out_section_t sec[KNOWN_SLOTS];
    uint32_t n = 0;
    sec[n++] = (out_section_t){BIB_SEC_CODE, BIB_SECTION_REQUIRED, 0,
                               (uint64_t)m->code_count * BIB_INSN_BYTES};
    if (m->const_count > 0)
        sec[n++] = (out_section_t){BIB_SEC_CONST, BIB_SECTION_REQUIRED, 0,
                                   (uint64_t)m->const_count * CONST_ENTRY_BYTES};
    if (m->memory_size > 0 || m->data_size > 0)
        sec[n++] = (out_section_t){BIB_SEC_DATA, BIB_SECTION_REQUIRED, 0,
                                   DATA_HEADER_BYTES + (uint64_t)m->data_size};
    sec[n++] = (out_section_t){BIB_SEC_SYMBOLS, BIB_SECTION_REQUIRED, 0, symbols_size};
    if (m->lines != NULL)
        sec[n++] =
            (out_section_t){BIB_SEC_DEBUG, 0, 0,
                            NAME_LENGTH_BYTES + source_len + 4 + (uint64_t)runs * LINE_RUN_BYTES};
    uint64_t labels_size = 4;
    for (uint32_t i = 0; i < m->label_count; i++) {
        bib_status_t st = check_name(m->labels[i].name, "label", i, diag);
        if (st != BIB_OK)
            return st;
        labels_size += 4 + NAME_LENGTH_BYTES + strlen(m->labels[i].name);
    }
    if (m->label_count > 0)
        sec[n++] = (out_section_t){BIB_SEC_LABELS, 0, 0, labels_size};
    if (has_tensors)
        sec[n++] = (out_section_t){BIB_SEC_TENSORS, BIB_SECTION_REQUIRED, 0, tensors_size};
    if (m->shader_count > 0)
        sec[n++] = (out_section_t){BIB_SEC_SHADERS, BIB_SECTION_REQUIRED, 0, shaders_size};
    if (m->kernel_count > 0)
        sec[n++] = (out_section_t){BIB_SEC_KERNELS, BIB_SECTION_REQUIRED, 0, kernels_size};
    uint64_t total = BIB_HEADER_BYTES + (uint64_t)n * BIB_SECTION_ENTRY_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        sec[i].offset = align_up(total);
        total = sec[i].offset + sec[i].size;
    }
    if (total > UINT32_MAX)
        return bib_diag_set(
            diag, BIB_E_USAGE,
            "cannot write module: it needs %llu bytes, more than the format's 4 GiB",
            (unsigned long long)total);
    uint8_t *buf = calloc(1, (size_t)total);
    if (buf == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %llu bytes of module",
                            (unsigned long long)total);

    memcpy(buf + HDR_MAGIC, BIB_MAGIC, BIB_MAGIC_BYTES);
    write_u16le(buf + HDR_MAJOR, BIB_FORMAT_MAJOR);
    write_u16le(buf + HDR_MINOR, BIB_FORMAT_MINOR);
    bib_write_u32le(buf + HDR_SECTION_COUNT, n);
    bib_write_u32le(buf + HDR_SECTION_TABLE, BIB_HEADER_BYTES);
    bib_write_u32le(buf + HDR_FILE_SIZE, (uint32_t)total);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *e = buf + BIB_HEADER_BYTES + i * BIB_SECTION_ENTRY_BYTES;
        bib_write_u32le(e + SEC_TYPE, sec[i].type);
        bib_write_u32le(e + SEC_FLAGS, sec[i].flags);
        bib_write_u32le(e + SEC_OFFSET, (uint32_t)sec[i].offset);
        bib_write_u32le(e + SEC_SIZE, (uint32_t)sec[i].size);
        uint8_t *p = buf + sec[i].offset;
        switch (sec[i].type) {
        case BIB_SEC_CODE:
            for (uint32_t k = 0; k < m->code_count; k++)
                bib_insn_encode(&m->code[k], p + (size_t)k * BIB_INSN_BYTES);
            break;
        case BIB_SEC_CONST:
            for (uint32_t k = 0; k < m->const_count; k++) {
                bib_write_u32le(p + (size_t)k * CONST_ENTRY_BYTES, m->consts[k].type);
                bib_write_u64le(p + (size_t)k * CONST_ENTRY_BYTES + 8, m->consts[k].bits);
            }
            break;
        case BIB_SEC_DATA:
            bib_write_u64le(p, m->memory_size);
            if (m->data_size > 0)
                memcpy(p + DATA_HEADER_BYTES, m->data, m->data_size);
            break;
        case BIB_SEC_SYMBOLS:
            bib_write_u32le(p, m->func_count);
            bib_write_u32le(p + 4, m->entry_func);
            bib_write_u32le(p + 8, m->import_count);
            p += SYMBOLS_HEADER_BYTES;
            for (uint32_t k = 0; k < m->func_count; k++) {
                const bib_function_t *f = &m->funcs[k];
                bib_write_u32le(p, f->entry);
                bib_write_u32le(p + 4, f->count);
                bib_write_u32le(p + 8, f->nargs);
                bib_write_u32le(p + 12, f->nregs);
                p = put_name(p + FUNC_FIXED_BYTES, f->name);
            }
            for (uint32_t k = 0; k < m->import_count; k++)
                p = put_name(p, m->imports[k]);
            break;
        case BIB_SEC_DEBUG:
            p = put_name(p, m->source_name);
            bib_write_u32le(p, runs);
            p += 4;
            for (uint32_t k = 0; k < m->code_count;) {
                uint32_t len = 1;
                while (k + len < m->code_count && m->lines[k + len] == m->lines[k])
                    len++;
                bib_write_u32le(p, m->lines[k]);
                bib_write_u32le(p + 4, len);
                p += LINE_RUN_BYTES;
                k += len;
            }
            break;
        case BIB_SEC_LABELS:
            bib_write_u32le(p, m->label_count);
            p += 4;
            for (uint32_t k = 0; k < m->label_count; k++) {
                bib_write_u32le(p, m->labels[k].pc);
                p = put_name(p + 4, m->labels[k].name);
            }
            break;
        case BIB_SEC_TENSORS:
            bib_write_u32le(p, m->tensor_regs);
            bib_write_u32le(p + 4, m->dim_name_count);
            bib_write_u32le(p + 8, m->tensor_count);
            p += TENSORS_HEADER_BYTES;
            for (uint32_t k = 0; k < m->dim_name_count; k++)
                p = put_name(p, m->dim_names[k]);
            for (uint32_t k = 0; k < m->tensor_count; k++) {
                const bib_tensor_decl_t *t = &m->tensors[k];
                bib_write_u32le(p, t->reg);
                bib_write_u32le(p + 4, t->flags);
                bib_write_u32le(p + 8, t->dtype);
                bib_write_u32le(p + 12, t->rank);
                p = put_name(p + TENSOR_FIXED_BYTES, t->name);
                for (uint32_t j = 0; j < t->rank; j++, p += TENSOR_DIM_BYTES)
                    bib_write_u64le(p, (uint64_t)t->dims[j]);
                bib_write_u64le(p, t->init_size);
                p += TENSOR_INIT_SIZE_BYTES;
                if (t->init_size > 0)
                    memcpy(p, t->init, (size_t)t->init_size);
                p += t->init_size;
            }
            break;
        case BIB_SEC_SHADERS:
            bib_write_u32le(p, m->shader_count);
            p += DEVCODE_HEADER_BYTES;
            for (uint32_t k = 0; k < m->shader_count; k++) {
                const bib_shader_decl_t *sh = &m->shaders[k];
                p = put_name(p, sh->name);
                p = put_name(p, sh->entry);
                bib_write_u32le(p, sh->bindings);
                bib_write_u32le(p + 4, sh->push_bytes);
                bib_write_u32le(p + 8, sh->words);
                p += SHADER_FIXED_BYTES;
                for (uint32_t w = 0; w < sh->words; w++, p += 4)
                    bib_write_u32le(p, sh->spirv[w]);
            }
            break;
        case BIB_SEC_KERNELS:
            bib_write_u32le(p, m->kernel_count);
            p += DEVCODE_HEADER_BYTES;
            for (uint32_t k = 0; k < m->kernel_count; k++) {
                const bib_kernel_decl_t *kd = &m->kernels[k];
                p = put_name(p, kd->name);
                p = put_name(p, kd->entry);
                p = put_name(p, kd->params);
                bib_write_u32le(p, kd->ptx_bytes);
                p += KERNEL_SIZE_BYTES;
                if (kd->ptx_bytes > 0)
                    memcpy(p, kd->ptx, kd->ptx_bytes);
                p += kd->ptx_bytes;
            }
            break;
        }
    }
    bib_write_u32le(buf + HDR_CHECKSUM, (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)total));
    *out = buf;
    *size = (size_t)total;
    return BIB_OK;
}
