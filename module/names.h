/* module/names.h: a hashed index of names, each in a numbered space, to
 * a value. The builder finds its functions, imports, dimensions, tensors,
 * shaders and kernels by name through one; the assembler's symbol table
 * (asm_lex.c) keeps its labels, constants and .equ names in another; a
 * module keeps its entry function's labels in a third (module.h).
 *
 * Beside it, a hashed index of a constant pool by value, which the builder
 * and a module keep to find a constant again without a search of the pool.
 * Internal to libbib.
 */
#ifndef BIB_NAMES_H
#define BIB_NAMES_H

#include <stdint.h>

#define BIB_NAMES_NONE UINT32_MAX

struct bib_const; /* module.h */

typedef struct bib_name {
    char *name; /* owned copy */
    uint64_t space;
    uint32_t value;
} bib_name_t;

/* Zeroed, it is empty. Release it with bib_names_free. */
typedef struct bib_names {
    bib_name_t *entries;
    uint32_t count, cap;
    uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
    uint32_t nslots;
} bib_names_t;

/* The value of name in space, or BIB_NAMES_NONE when it has none. */
uint32_t bib_names_find(const bib_names_t *t, uint64_t space, const char *name);

/* Gives name in space the value, unless it has one already: the first value
   given stays. Returns the value the name has now, or BIB_NAMES_NONE when out
   of memory (nothing is added then). */
uint32_t bib_names_add(bib_names_t *t, uint64_t space, const char *name, uint32_t value);

void bib_names_free(bib_names_t *t);

/* Indexes a constant pool, pool[0..n) of whoever keeps it, by value: built
   on first use, extended by each lookup over what was appended since.
   Zeroed, it is empty. A pool that loses entries must be forgotten
   (bib_const_index_free) before it grows again. */
typedef struct bib_const_index {
    uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
    uint32_t nslots;
    uint32_t count; /* pool[0..count) is indexed */
} bib_const_index_t;

/* The first i with pool[i] of this type and bits, indexing pool[count..n)
   first: 1 and *index when there is one, 0 when there is none, -1 when out
   of memory (the index is then empty and the next lookup builds it). */
int bib_const_index_find(bib_const_index_t *x, const struct bib_const *pool, uint32_t n,
                         uint32_t type, uint64_t bits, uint32_t *index);

void bib_const_index_free(bib_const_index_t *x);

#endif
