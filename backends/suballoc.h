/* backends/suballoc.h: ranges of one address space handed out first-fit.
 *
 * The GPU executors allocate a few large device blocks and hand VM buffers
 * out as sub-ranges of them, so a buffer costs no driver call. This is the
 * bookkeeping of one such block: offsets and sizes only, no device calls,
 * no knowledge of what the space is. Every range taken starts at a multiple
 * of the allocator's alignment and its size is rounded up to one; the free
 * ranges are kept sorted by offset and coalesced with their neighbours when
 * a range comes back. Which block to allocate, how large, and when to give
 * it back to the driver stays with the executor (cu_memory.c, vk_memory.c).
 */
#ifndef BIB_SUBALLOC_H
#define BIB_SUBALLOC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct bib_suballoc_range {
    uint64_t offset, size;
} bib_suballoc_range_t;

typedef struct bib_suballoc {
    uint64_t size;              /* the space is [0, size) */
    uint64_t align;             /* a power of two */
    bib_suballoc_range_t *free; /* sorted by offset, coalesced, none empty */
    uint32_t free_count, free_cap;
} bib_suballoc_t;

/* bytes rounded up to a multiple of align (a power of two). Like any
 * unsigned sum it wraps for bytes within align of UINT64_MAX: callers bound
 * bytes first. */
uint64_t bib_suballoc_round(uint64_t bytes, uint64_t align);

/* Makes an allocator over an empty space (size 0) whose ranges are aligned
 * to align, a power of two. Returns false when host memory for the free list
 * runs out; *a is then zeroed. The caller ends it with bib_suballoc_destroy. */
bool bib_suballoc_init(bib_suballoc_t *a, uint64_t align);

/* The space becomes [0, size), all of it free; what was taken is forgotten.
 * size is a multiple of the alignment (0: no space). */
void bib_suballoc_reset(bib_suballoc_t *a, uint64_t size);

/* Frees the free list; *a is zeroed. */
void bib_suballoc_destroy(bib_suballoc_t *a);

/* Takes bytes (rounded up to the alignment; 0 counts as 1) from the lowest
 * free range that holds them and writes its offset. Returns false, taking
 * nothing, when no free range is large enough. */
bool bib_suballoc_take(bib_suballoc_t *a, uint64_t bytes, uint64_t *offset);

/* Returns a range that bib_suballoc_take handed out (the same offset and
 * bytes) and merges it with the free ranges it touches. When the free list
 * cannot grow (host memory ran out) the range stays taken: it leaks inside
 * the space, and nothing else is affected. */
void bib_suballoc_give(bib_suballoc_t *a, uint64_t offset, uint64_t bytes);

/* Whether nothing is taken. */
bool bib_suballoc_empty(const bib_suballoc_t *a);

#endif
