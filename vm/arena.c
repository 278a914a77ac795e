/* vm/arena.c: bump allocation over blocks, large requests as tracked buffers.
 * See arena.h. */
#include "vm/arena.h"

#include <string.h>

/* A large allocation: this header sits BIB_BLOCK_ALIGN bytes before the
   payload, so the payload keeps the buffer's alignment. */
struct bib_arena_big {
    bib_arena_big_t *next, *prev;
    uint64_t charged; /* header + payload, as charged to the blocks */
};

_Static_assert(sizeof(bib_arena_big_t) <= BIB_BLOCK_ALIGN, "big header fits its slot");

/* The first word of every block links the arena's chunks. */
#define CHUNK_HEADER sizeof(void *)

void bib_arena_init(bib_arena_t *a, bib_blocks_t *blocks) {
    memset(a, 0, sizeof *a);
    a->blocks = blocks;
}

void bib_arena_reset(bib_arena_t *a) {
    void *c = a->chunks;
    while (c != NULL) {
        void *next;
        memcpy(&next, c, sizeof next);
        bib_blocks_free(a->blocks, c);
        c = next;
    }
    a->chunks = NULL;
    a->cur = a->end = NULL;
    bib_arena_big_t *g = a->bigs;
    while (g != NULL) {
        bib_arena_big_t *next = g->next;
        bib_blocks_big_free(a->blocks, g, g->charged);
        g = next;
    }
    a->bigs = NULL;
    a->used = 0;
}

void bib_arena_destroy(bib_arena_t *a) {
    bib_arena_reset(a);
}

/* Requests above this go to their own buffer, so a block is never more than
   half wasted by one allocation that did not fit. */
static int is_big(const bib_arena_t *a, size_t size) {
    return size > (a->blocks->block_size - CHUNK_HEADER) / 2;
}

static bib_status_t alloc_big(bib_arena_t *a, size_t size, void **out) {
    uint64_t charged = (uint64_t)size + BIB_BLOCK_ALIGN;
    void *raw;
    bib_status_t st = bib_blocks_big_alloc(a->blocks, charged, BIB_BLOCK_ALIGN, 0, &raw);
    if (st != BIB_OK)
        return st;
    bib_arena_big_t *g = raw;
    g->charged = charged;
    g->prev = NULL;
    g->next = a->bigs;
    if (a->bigs != NULL)
        a->bigs->prev = g;
    a->bigs = g;
    a->used += size;
    *out = (uint8_t *)raw + BIB_BLOCK_ALIGN;
    return BIB_OK;
}

static void free_big(bib_arena_t *a, void *payload) {
    bib_arena_big_t *g = (bib_arena_big_t *)((uint8_t *)payload - BIB_BLOCK_ALIGN);
    if (g->prev != NULL)
        g->prev->next = g->next;
    else
        a->bigs = g->next;
    if (g->next != NULL)
        g->next->prev = g->prev;
    a->used -= g->charged - BIB_BLOCK_ALIGN;
    bib_blocks_big_free(a->blocks, g, g->charged);
}

bib_status_t bib_arena_alloc(bib_arena_t *a, size_t size, size_t align, void **out) {
    *out = NULL;
    if (align == 0)
        align = 1;
    if (align > BIB_BLOCK_ALIGN)
        align = BIB_BLOCK_ALIGN;
    if (is_big(a, size))
        return alloc_big(a, size, out);
    uintptr_t p = ((uintptr_t)a->cur + (align - 1)) & ~(uintptr_t)(align - 1);
    if (a->cur == NULL || p > (uintptr_t)a->end || (uintptr_t)a->end - p < size) {
        void *block;
        bib_status_t st = bib_blocks_alloc(a->blocks, &block);
        if (st != BIB_OK)
            return st;
        memcpy(block, &a->chunks, sizeof a->chunks);
        a->chunks = block;
        a->cur = (uint8_t *)block + CHUNK_HEADER;
        a->end = (uint8_t *)block + a->blocks->block_size;
        p = ((uintptr_t)a->cur + (align - 1)) & ~(uintptr_t)(align - 1);
    }
    a->used += (p - (uintptr_t)a->cur) + size;
    a->cur = (uint8_t *)(p + size);
    *out = (void *)p;
    return BIB_OK;
}

bib_status_t bib_arena_zalloc(bib_arena_t *a, size_t size, size_t align, void **out) {
    bib_status_t st = bib_arena_alloc(a, size, align, out);
    if (st == BIB_OK)
        memset(*out, 0, size);
    return st;
}

bib_status_t bib_arena_grow(bib_arena_t *a, void **ptr, size_t old_size, size_t new_size,
                            size_t align) {
    void *fresh;
    bib_status_t st = bib_arena_alloc(a, new_size, align, &fresh);
    if (st != BIB_OK)
        return st;
    if (*ptr != NULL) {
        memcpy(fresh, *ptr, old_size);
        if (is_big(a, old_size))
            free_big(a, *ptr);
    }
    *ptr = fresh;
    return BIB_OK;
}
