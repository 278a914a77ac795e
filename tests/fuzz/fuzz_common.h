/* tests/fuzz/fuzz_common.h: what the .bib harnesses (fuzz_load.c, fuzz_run.c)
 * share: making mutated bytes pass the container's integrity fields, and a
 * custom mutator that knows the container's layout.
 *
 * The reader rejects any file whose CRC-32 or file-size field is wrong, so
 * plain byte mutation would almost never get past read_header. Each harness
 * therefore fixes both fields on a copy of its input before reading it, and
 * the custom mutator fixes them on what it writes, so the corpus and every
 * crasher libFuzzer saves are valid files that `bib run` or `bib test`
 * reproduce as they are. Half of the mutations are layout-aware: they pick an
 * instruction of the code section and give it a real opcode or small operand
 * words (so mutants get past the verifier's opcode and range checks), or set
 * a 32-bit field of a random section to an interesting value.
 *
 * Not a library file: included once by each harness, which defines
 * BIB_FUZZ_WANT_MUTATOR to get the mutator.
 */
#ifndef BIB_FUZZ_COMMON_H
#define BIB_FUZZ_COMMON_H

#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "isa/isa.h"
#include "module/module.h"

/* Header fields the fix-up rewrites (spec/bib-format.md). */
#define FUZZ_HDR_SECTION_COUNT 12u
#define FUZZ_HDR_SECTION_TABLE 16u
#define FUZZ_HDR_FILE_SIZE 20u
#define FUZZ_HDR_CHECKSUM 24u

/* Rewrites the file-size and checksum fields of what looks like a .bib file,
   so the reader judges everything after them. */
static void bib_fuzz_fixup(uint8_t *b, size_t size) {
    if (size < BIB_HEADER_BYTES || size > UINT32_MAX || memcmp(b, BIB_MAGIC, BIB_MAGIC_BYTES) != 0)
        return;
    bib_write_u32le(b + FUZZ_HDR_FILE_SIZE, (uint32_t)size);
    bib_write_u32le(b + FUZZ_HDR_CHECKSUM, 0);
    bib_write_u32le(b + FUZZ_HDR_CHECKSUM, (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)size));
}

/* A fixed-up copy of the input (malloc'd; NULL when out of memory). */
static inline uint8_t *bib_fuzz_copy(const uint8_t *data, size_t size) {
    uint8_t *bytes = malloc(size > 0 ? size : 1);
    if (bytes != NULL && size > 0) {
        memcpy(bytes, data, size);
        bib_fuzz_fixup(bytes, size);
    }
    return bytes;
}

#ifdef BIB_FUZZ_WANT_MUTATOR

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint32_t fuzz_rand(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* The in-bounds section table entry of type `type`, or NULL. */
static const uint8_t *fuzz_section(const uint8_t *b, size_t size, uint32_t want, uint32_t index,
                                   uint32_t *off, uint32_t *len) {
    if (size < BIB_HEADER_BYTES)
        return NULL;
    uint32_t count = bib_read_u32le(b + FUZZ_HDR_SECTION_COUNT);
    uint32_t table = bib_read_u32le(b + FUZZ_HDR_SECTION_TABLE);
    if (count > BIB_MAX_SECTIONS || table > size || (size - table) / 16 < count)
        return NULL;
    uint32_t seen = 0;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = b + table + 16 * i;
        uint32_t type = bib_read_u32le(e), o = bib_read_u32le(e + 8), n = bib_read_u32le(e + 12);
        if ((uint64_t)o + n > size || (want != 0 && type != want))
            continue;
        if (want == 0 && seen++ != index)
            continue;
        *off = o;
        *len = n;
        return e;
    }
    return NULL;
}

static const uint32_t fuzz_interesting[] = {
    0,           1,           2,           3,          4,         5,          7,
    8,           15,          16,          31,         32,        63,         64,
    255,         256,         0x7FFF,      0xFFFF,     0x10000,   0x7FFFFFFF, 0x80000000u,
    0xFFFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFF0u, 0x01000000, 0x00100000};

static uint32_t fuzz_operand(uint32_t *s) {
    uint32_t r = fuzz_rand(s);
    if (r % 4 != 0)
        return r % 16; /* registers, counts, small indices */
    return fuzz_interesting[(r >> 8) % (sizeof fuzz_interesting / sizeof fuzz_interesting[0])];
}

/* Gives one instruction of the code section a real opcode, a small operand
   word, or the contents of another instruction. Returns 0 when the bytes have
   no code section to work on. */
static int fuzz_mutate_code(uint8_t *b, size_t size, uint32_t *s) {
    uint32_t off, len;
    if (fuzz_section(b, size, BIB_SEC_CODE, 0, &off, &len) == NULL || len < BIB_INSN_BYTES)
        return 0;
    uint32_t n = len / BIB_INSN_BYTES;
    uint8_t *insn = b + off + (size_t)(fuzz_rand(s) % n) * BIB_INSN_BYTES;
    switch (fuzz_rand(s) % 4) {
    case 0: { /* a real opcode with operands that fit its kinds often enough */
        const bib_opinfo_t *info = &bib_isa_table[fuzz_rand(s) % BIB_OP__COUNT];
        bib_write_u32le(insn, info->code);
        for (int k = 0; k < 4; k++)
            bib_write_u32le(insn + 4 + 4 * k, info->kinds[k] == BIB_K_NONE    ? 0
                                              : info->kinds[k] == BIB_K_TGT   ? fuzz_rand(s) % n
                                              : info->kinds[k] == BIB_K_DTYPE ? 1 + fuzz_rand(s) % 2
                                                                              : fuzz_operand(s));
        break;
    }
    case 1: /* one operand word */
        bib_write_u32le(insn + 4 + 4 * (fuzz_rand(s) % 4), fuzz_operand(s));
        break;
    case 2: { /* a copy of another instruction */
        uint8_t *from = b + off + (size_t)(fuzz_rand(s) % n) * BIB_INSN_BYTES;
        memmove(insn, from, BIB_INSN_BYTES);
        break;
    }
    default: /* just the opcode */
        bib_write_u32le(insn, bib_isa_table[fuzz_rand(s) % BIB_OP__COUNT].code);
        break;
    }
    return 1;
}

/* Sets an aligned 32-bit word of a random section to an interesting value:
   counts, sizes, register numbers and flags all live in such words. */
static int fuzz_mutate_field(uint8_t *b, size_t size, uint32_t *s) {
    uint32_t off, len;
    if (fuzz_section(b, size, 0, fuzz_rand(s) % 8, &off, &len) == NULL || len < 4)
        return 0;
    uint32_t at = off + (fuzz_rand(s) % (len / 4)) * 4;
    bib_write_u32le(b + at, fuzz_operand(s));
    return 1;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    uint32_t s = seed | 1u;
    size_t n = size;
    switch (fuzz_rand(&s) % 4) {
    case 0:
        if (!fuzz_mutate_code(data, size, &s))
            n = LLVMFuzzerMutate(data, size, max_size);
        break;
    case 1:
        if (!fuzz_mutate_field(data, size, &s))
            n = LLVMFuzzerMutate(data, size, max_size);
        break;
    default:
        n = LLVMFuzzerMutate(data, size, max_size);
        break;
    }
    bib_fuzz_fixup(data, n);
    return n;
}

#endif /* BIB_FUZZ_WANT_MUTATOR */
#endif
