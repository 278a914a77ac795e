/* backends/suballoc.c: first-fit ranges of one address space (suballoc.h).
 *
 * The free list is an array sorted by offset: blocks hold few free ranges
 * at a time (VM tensors come and go in stack-like order), so a linear scan
 * and a memmove beat a tree here, and the order makes coalescing a look at
 * the two neighbours. */
#include "backends/suballoc.h"

#include <stdlib.h>
#include <string.h>

#define BIB_SUBALLOC_FIRST_CAP 8

uint64_t bib_suballoc_round(uint64_t bytes, uint64_t align) {
    return (bytes + align - 1) & ~(align - 1);
}

bool bib_suballoc_init(bib_suballoc_t *a, uint64_t align) {
    *a = (bib_suballoc_t){.align = align};
    a->free = malloc(BIB_SUBALLOC_FIRST_CAP * sizeof *a->free);
    if (!a->free)
        return false;
    a->free_cap = BIB_SUBALLOC_FIRST_CAP;
    return true;
}

void bib_suballoc_reset(bib_suballoc_t *a, uint64_t size) {
    a->size = size;
    a->free_count = size ? 1 : 0;
    if (size)
        a->free[0] = (bib_suballoc_range_t){0, size};
}

void bib_suballoc_destroy(bib_suballoc_t *a) {
    free(a->free);
    *a = (bib_suballoc_t){0};
}

/* The size a request of bytes occupies. Never 0, so a taken range always
 * has an offset of its own, and never past the space when bytes is not. */
static uint64_t bib_suballoc_span(const bib_suballoc_t *a, uint64_t bytes) {
    return bib_suballoc_round(bytes ? bytes : 1, a->align);
}

bool bib_suballoc_take(bib_suballoc_t *a, uint64_t bytes, uint64_t *offset) {
    if (bytes > a->size)
        return false;
    uint64_t size = bib_suballoc_span(a, bytes);
    for (uint32_t i = 0; i < a->free_count; i++) {
        bib_suballoc_range_t *r = &a->free[i];
        if (r->size < size)
            continue;
        *offset = r->offset;
        r->offset += size;
        r->size -= size;
        if (r->size == 0) {
            memmove(r, r + 1, (a->free_count - i - 1) * sizeof *r);
            a->free_count--;
        }
        return true;
    }
    return false;
}

void bib_suballoc_give(bib_suballoc_t *a, uint64_t offset, uint64_t bytes) {
    uint64_t size = bib_suballoc_span(a, bytes);
    bib_suballoc_range_t *f = a->free;
    uint32_t i = 0;
    while (i < a->free_count && f[i].offset < offset)
        i++;
    bool left = i > 0 && f[i - 1].offset + f[i - 1].size == offset;
    bool right = i < a->free_count && offset + size == f[i].offset;
    if (left && right) {
        f[i - 1].size += size + f[i].size;
        memmove(&f[i], &f[i + 1], (a->free_count - i - 1) * sizeof *f);
        a->free_count--;
    } else if (left) {
        f[i - 1].size += size;
    } else if (right) {
        f[i].offset = offset;
        f[i].size += size;
    } else {
        if (a->free_count == a->free_cap) {
            bib_suballoc_range_t *grown = realloc(f, 2 * (size_t)a->free_cap * sizeof *grown);
            if (!grown)
                return; /* the range leaks inside the space; nothing is corrupted */
            a->free = f = grown;
            a->free_cap *= 2;
        }
        memmove(&f[i + 1], &f[i], (a->free_count - i) * sizeof *f);
        f[i] = (bib_suballoc_range_t){offset, size};
        a->free_count++;
    }
}

bool bib_suballoc_empty(const bib_suballoc_t *a) {
    return a->size == 0 || (a->free_count == 1 && a->free[0].size == a->size);
}
