/* assembler/asm.h: what builder.c, the assembler and disasm.c share beyond
 * the public API in include/bib.h.
 *
 * The builder controls exist so that every module the disassembler prints can
 * be rebuilt byte for byte: an explicit entry function, and a module without
 * debug info. The read-backs (names found in the builder, declarations by
 * index, the pool and the data) let the assembler drive one builder from its
 * first pass on, with no copy of what it declared. The text helpers keep the
 * one rule for writing names and floats (what the assembler reads back) in
 * asm_text.c. All of this is internal to libbib; embedders use the public
 * builder only.
 */
#ifndef BIB_ASM_H
#define BIB_ASM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"
#include "module/module.h"

/* Makes func the entry function instead of the default (the first "main",
   else function 0). */
void bib_builder_entry(bib_builder_t *b, uint32_t func);

/* The line of the instruction after one with LINE when no '.line' comes
   between them: LINE + 1, so one '.line' covers a run of one-instruction
   source lines. 0 (unknown) stays unknown, and the line after UINT32_MAX
   wraps to 0. The assembler numbers instructions by it and the disassembler
   prints '.line' only where it does not hold. */
static inline uint32_t bib_asm_line_after(uint32_t line) {
    return line == 0 ? 0 : line + 1;
}

/* Leaves the debug section out even if bib_builder_source or
   bib_builder_line were called. */
void bib_builder_nodebug(bib_builder_t *b);

/* Leaves out the debug section and the label names: `bib asm --strip`. */
void bib_builder_strip(bib_builder_t *b);

/* Names the code label bound here (at the next instruction of the function
   being built), for the module's labels section and the disassembler. */
void bib_builder_label_name(bib_builder_t *b, const char *name);

/* bib_assemble_capped without the source name, line numbers and label names
   (bib asm --strip). */
bib_status_t bib_assemble_stripped(const char *source, size_t length, const char *filename,
                                   uint64_t max_size, uint8_t **out, size_t *size,
                                   char **diagnostics);

/* Like bib_builder_finish, but hands back the verified module as well as its
   bytes (either out-pointer may be NULL). The caller releases *module with
   bib_module_free and *out with bib_free. */
bib_status_t bib_builder_finish_module(bib_builder_t *b, bib_module_t **module, uint8_t **out,
                                       size_t *size);

/* bib_builder_tensor_dim/_input/_output/_const/_regs are public: include/bib.h. */

/* ---- what the assembler reads back while it drives a builder ---- */

/* The builder's name spaces: each entry is found by its name in its own. */
typedef enum bib_builder_space {
    BIB_BUILDER_FUNCTION, /* bib_builder_declare: function ids */
    BIB_BUILDER_IMPORT,   /* bib_builder_import: import ids */
    BIB_BUILDER_DIM,      /* bib_builder_tensor_dim: symbolic dimension indices */
    BIB_BUILDER_TENSOR,   /* bib_builder_tensor_*: declarations, in the order given */
    BIB_BUILDER_SHADER,   /* bib_builder_shader */
    BIB_BUILDER_KERNEL,   /* bib_builder_kernel */
} bib_builder_space_t;

/* The index of the first entry declared with name in space, or UINT32_MAX
   when none was. */
uint32_t bib_builder_find(const bib_builder_t *b, bib_builder_space_t space, const char *name);

/* BIB_OK, or the status of the first failure, which finish reports. */
bib_status_t bib_builder_status(const bib_builder_t *b);

/* What was declared, by index (NULL past the end). The pointers stay valid
   until the next declaration of their kind, or finish. */
const char *bib_builder_function_name(const bib_builder_t *b, uint32_t func);
uint32_t bib_builder_tensor_count(const bib_builder_t *b);
const bib_tensor_decl_t *bib_builder_tensor_decl(const bib_builder_t *b, uint32_t index);
const bib_shader_decl_t *bib_builder_shader_decl(const bib_builder_t *b, uint32_t index);
const bib_kernel_decl_t *bib_builder_kernel_decl(const bib_builder_t *b, uint32_t index);

/* Appends a pool entry of type BIB_CONST_* with these bits (no value goes
   through a double); UINT32_MAX when out of memory. */
uint32_t bib_builder_const_bits(bib_builder_t *b, uint32_t type, uint64_t bits);

/* The first pool entry with this type and these bits, or UINT32_MAX. */
uint32_t bib_builder_const_find(bib_builder_t *b, uint32_t type, uint64_t bits);

/* The data bytes so far; the next appended byte goes at this address. */
uint64_t bib_builder_data_size(const bib_builder_t *b);

/* Appends size zero bytes to the data and returns where they start, for the
   caller to fill before the next data call; NULL after a failure (past
   4 GiB, or out of memory) that the builder keeps for finish. */
uint8_t *bib_builder_data_append(bib_builder_t *b, uint64_t size);

/* User device code (spec/device-code.md). Each returns the new entry's index
   (in declaration order), or UINT32_MAX after a failure the builder keeps
   for finish. The module's verifier judges the contents (SPIR-V header,
   binding and push sizes, the signature letters). */
uint32_t bib_builder_shader(bib_builder_t *b, const char *name, const char *entry,
                            uint32_t bindings, uint32_t push_bytes, const uint32_t *words,
                            uint32_t count);
uint32_t bib_builder_kernel(bib_builder_t *b, const char *name, const char *entry,
                            const char *params, const char *ptx, uint32_t bytes);

/* bib_assemble for a VM whose load policy denies device code
   (BIB_DENY_DEVICE_CODE): every .shader and .kernel is an error at its line,
   before any file it names is read or any compiler (libshaderc, nvcc) runs.
   max_size caps the module as in bib_assemble_capped. */
bib_status_t bib_assemble_without_device_code(const char *source, size_t length,
                                              const char *filename, uint64_t max_size,
                                              uint8_t **out, size_t *size, char **diagnostics);

/* bib_vm_load_file for the bytes of the file at path, already read (path
   names it in messages and, by its extension, says module or source). The
   bytes stay the caller's. */
bib_status_t bib_vm_load_file_bytes(bib_vm_t *vm, const uint8_t *buf, size_t size,
                                    const char *path);

/* A growing NUL-terminated text buffer. On allocation failure it sets failed
   and stops growing; the text so far stays valid. */
typedef struct bib_asm_text {
    char *p;
    size_t len, cap;
    int failed;
} bib_asm_text_t;

void bib_asm_text_put(bib_asm_text_t *t, const char *s, size_t n);
void bib_asm_text_printf(bib_asm_text_t *t, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends name as the assembler reads it: bare when it is an identifier
   ([A-Za-z_][A-Za-z0-9_.]*), else in double quotes with escapes. */
void bib_asm_text_name(bib_asm_text_t *t, const char *name);

/* Appends the shortest literal that the assembler reads back as exactly the
   f64 with these bits: a decimal float, inf/nan, or bits(0x...) for NaN
   payloads. */
void bib_asm_text_f64(bib_asm_text_t *t, uint64_t bits);

/* The same for a binary32 value (read back by strtof): an element of a
   .tensor f32 declaration. */
void bib_asm_text_f32(bib_asm_text_t *t, uint32_t bits);

#endif
