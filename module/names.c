/* module/names.c: the name index and the constant index (names.h): the
 * project's FNV-1a of the space and the name (of the constant's type and
 * bits), open addressing with linear probing, at most half full.
 */
#include "module/names.h"

#include <stdlib.h>
#include <string.h>

#include "isa/isa.h"
#include "module/module.h"

static uint32_t name_hash(uint64_t space, const char *name) {
    uint64_t h = bib_fnv1a64(BIB_FNV1A64_BASIS, &space, sizeof space);
    h = bib_fnv1a64(h, name, strlen(name));
    return (uint32_t)(h ^ h >> 32);
}

/* The slot that holds (space, name), or the empty slot where it would go. */
static uint32_t probe(const bib_names_t *t, uint64_t space, const char *name) {
    uint32_t mask = t->nslots - 1;
    for (uint32_t i = name_hash(space, name) & mask;; i = (i + 1) & mask) {
        uint32_t s = t->slots[i];
        if (s == 0)
            return i;
        const bib_name_t *e = &t->entries[s - 1];
        if (e->space == space && strcmp(e->name, name) == 0)
            return i;
    }
}

uint32_t bib_names_find(const bib_names_t *t, uint64_t space, const char *name) {
    if (t->nslots == 0)
        return BIB_NAMES_NONE;
    uint32_t s = t->slots[probe(t, space, name)];
    return s == 0 ? BIB_NAMES_NONE : t->entries[s - 1].value;
}

/* Room for one more entry: slots at most half full, and an entry free. */
static int make_room(bib_names_t *t) {
    if ((uint64_t)(t->count + 1) * 2 > t->nslots) {
        if (t->nslots > UINT32_MAX / 4)
            return 0;
        uint32_t n = t->nslots ? t->nslots * 2 : 64;
        uint32_t *slots = calloc(n, sizeof *slots);
        if (slots == NULL)
            return 0;
        for (uint32_t i = 0; i < t->count; i++) {
            const bib_name_t *e = &t->entries[i];
            uint32_t j = name_hash(e->space, e->name) & (n - 1);
            while (slots[j] != 0)
                j = (j + 1) & (n - 1);
            slots[j] = i + 1;
        }
        free(t->slots);
        t->slots = slots;
        t->nslots = n;
    }
    if (t->count < t->cap)
        return 1;
    /* The slots, half full at most, bound the entries well below overflow. */
    bib_name_t *entries = realloc(t->entries, (size_t)t->nslots / 2 * sizeof *entries);
    if (entries == NULL)
        return 0;
    t->entries = entries;
    t->cap = t->nslots / 2;
    return 1;
}

uint32_t bib_names_add(bib_names_t *t, uint64_t space, const char *name, uint32_t value) {
    if (!make_room(t))
        return BIB_NAMES_NONE;
    uint32_t slot = probe(t, space, name);
    if (t->slots[slot] != 0)
        return t->entries[t->slots[slot] - 1].value;
    char *copy = strdup(name);
    if (copy == NULL)
        return BIB_NAMES_NONE;
    t->entries[t->count] = (bib_name_t){copy, space, value};
    t->slots[slot] = ++t->count;
    return value;
}

void bib_names_free(bib_names_t *t) {
    for (uint32_t i = 0; i < t->count; i++)
        free(t->entries[i].name);
    free(t->entries);
    free(t->slots);
    t->entries = NULL;
    t->slots = NULL;
    t->count = t->cap = t->nslots = 0;
}

/* ---- constants by value ------------------------------------------------------ */

static uint32_t const_hash(uint32_t type, uint64_t bits) {
    uint64_t h = bib_fnv1a64(BIB_FNV1A64_BASIS, &type, sizeof type);
    h = bib_fnv1a64(h, &bits, sizeof bits);
    return (uint32_t)(h ^ h >> 32);
}

/* The slot that holds pool[i] equal to (type, bits), or the empty slot where
   it would go. */
static uint32_t const_probe(const bib_const_index_t *x, const bib_const_t *pool, uint32_t type,
                            uint64_t bits) {
    uint32_t mask = x->nslots - 1;
    for (uint32_t i = const_hash(type, bits) & mask;; i = (i + 1) & mask) {
        uint32_t s = x->slots[i];
        if (s == 0 || (pool[s - 1].type == type && pool[s - 1].bits == bits))
            return i;
    }
}

/* Indexes pool[x->count..n): the first of equal constants keeps the slot. */
static int const_index_grow(bib_const_index_t *x, const bib_const_t *pool, uint32_t n) {
    if ((uint64_t)n * 2 > x->nslots) {
        uint64_t want = x->nslots ? x->nslots : 64;
        while (want < (uint64_t)n * 2)
            want *= 2;
        if (want > (uint64_t)UINT32_MAX / 2 + 1)
            return 0;
        uint32_t *slots = calloc((size_t)want, sizeof *slots);
        if (slots == NULL)
            return 0;
        free(x->slots);
        x->slots = slots;
        x->nslots = (uint32_t)want;
        x->count = 0; /* rebuilt below, in pool order */
    }
    for (; x->count < n; x->count++) {
        const bib_const_t *k = &pool[x->count];
        uint32_t slot = const_probe(x, pool, k->type, k->bits);
        if (x->slots[slot] == 0)
            x->slots[slot] = x->count + 1;
    }
    return 1;
}

int bib_const_index_find(bib_const_index_t *x, const bib_const_t *pool, uint32_t n, uint32_t type,
                         uint64_t bits, uint32_t *index) {
    if (x->count > n)
        bib_const_index_free(x);
    if (!const_index_grow(x, pool, n)) {
        bib_const_index_free(x);
        return -1;
    }
    if (n == 0)
        return 0;
    uint32_t s = x->slots[const_probe(x, pool, type, bits)];
    if (s == 0)
        return 0;
    *index = s - 1;
    return 1;
}

void bib_const_index_free(bib_const_index_t *x) {
    free(x->slots);
    x->slots = NULL;
    x->nslots = 0;
    x->count = 0;
}
