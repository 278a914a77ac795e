/* assembler/glsl.h: the GLSL compiler entry point (assembler/glsl.c), the
 * one function of libbib-glsl.so.N. assembler/devcode.c calls it directly in
 * libbib.a and through dlopen in libbib.so; the signature is the contract
 * between the two libraries of one version.
 */
#ifndef BIB_GLSL_H
#define BIB_GLSL_H

#include <stddef.h>
#include <stdint.h>

/* Exported from libbib-glsl.so, which is built with -fvisibility=hidden. */
#define BIB_GLSL_EXPORT __attribute__((visibility("default")))
#define BIB_GLSL_SYMBOL "bib_glsl_compile"

/* As bib_devcode_glsl (devcode.h): 1 and *words, or 0 and *errors; both
 * malloc'd, for the caller to free. */
BIB_GLSL_EXPORT int bib_glsl_compile(const char *src, size_t len, const char *name,
                                     const char *entry, uint32_t **words, uint32_t *count,
                                     char **errors);

#endif
