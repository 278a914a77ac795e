/* assembler/devcode.h: the assembler's helpers for user device code
 * (spec/device-code.md): GLSL compute shaders compiled with libshaderc,
 * SPIR-V reflection of bindings and push-constant size, CUDA C compiled to
 * PTX with nvcc, and reading the files a .shader or .kernel names. Used by
 * asm_devcode.c only; nothing here runs at module load or run time.
 */
#ifndef BIB_DEVCODE_H
#define BIB_DEVCODE_H

#include <stddef.h>
#include <stdint.h>

/* Compiles GLSL compute source to SPIR-V (Vulkan 1.1). On success returns 1
 * and *words (malloc'd, the caller frees) holds *count words. On failure
 * returns 0 and *errors (malloc'd) holds the compiler's messages, one per
 * line as "NAME:LINE: error: TEXT", LINE counted in src. */
int bib_devcode_glsl(const char *src, size_t len, const char *name, const char *entry,
                     uint32_t **words, uint32_t *count, char **errors);

/* Reads from SPIR-V the storage buffers it binds (descriptor set 0,
 * bindings 0..*bindings-1) and the size of its push-constant block (0 when
 * none). Returns 0 and a reason in why when the module is not a compute
 * shader this VM can bind (uniform blocks, images, another set). */
int bib_devcode_reflect(const uint32_t *words, uint32_t count, uint32_t *bindings,
                        uint32_t *push_bytes, char *why, size_t cap);

/* Reads a whole file (at most 256 MiB) into a malloc'd buffer with a NUL
 * after its last byte. Returns 0 and why on failure. */
int bib_devcode_read_file(const char *path, char **bytes, size_t *size, char *why, size_t cap);

/* Compiles CUDA C to PTX with nvcc (found on PATH). Returns 1 and a malloc'd
 * NUL-terminated *ptx, or 0 and why (no nvcc, or its messages). */
int bib_devcode_nvcc(const char *path, char **ptx, size_t *size, char *why, size_t cap);

#endif
