/* module/names.c: the name index (names.h): the project's FNV-1a of the
 * space and the name, open addressing with linear probing, at most half full.
 */
#include "module/names.h"

#include <stdlib.h>
#include <string.h>

#include "isa/isa.h"

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
