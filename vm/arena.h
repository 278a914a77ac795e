/* vm/arena.h: bump allocation over the VM's blocks, released all at once.
 *
 * An arena carves small allocations out of blocks from a bib_blocks_t and
 * hands requests too big for a block to bib_blocks_big_alloc; everything is
 * charged against the VM's memory cap. Nothing is freed one by one except
 * through bib_arena_grow; bib_arena_reset gives every block and buffer back
 * at once. The VM keeps one arena for what lives as long as a loaded module
 * (the decoded program) and one reset at the start of every run (register
 * stack, call frames, per-run scratch).
 */
#ifndef BIB_ARENA_H
#define BIB_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "vm/blocks.h"

typedef struct bib_arena_big bib_arena_big_t;

typedef struct bib_arena {
    bib_blocks_t *blocks; /* not owned */
    void *chunks;         /* blocks in use, linked through their first word */
    uint8_t *cur, *end;   /* free space in the newest block */
    bib_arena_big_t *bigs;
    uint64_t used; /* bytes handed out since the last reset, padding included */
} bib_arena_t;

void bib_arena_init(bib_arena_t *a, bib_blocks_t *blocks);
/* Gives everything back to the block allocator; the arena can be reused. */
void bib_arena_reset(bib_arena_t *a);
/* Same as reset: the arena holds nothing afterwards. */
void bib_arena_destroy(bib_arena_t *a);

/* size bytes aligned to align (a power of two, at most BIB_BLOCK_ALIGN), with
 * undefined contents. BIB_E_NOMEM as bib_blocks_alloc; the message is in
 * a->blocks->error. A zero size returns a valid unique pointer. */
bib_status_t bib_arena_alloc(bib_arena_t *a, size_t size, size_t align, void **out);
/* Same, zero-filled. */
bib_status_t bib_arena_zalloc(bib_arena_t *a, size_t size, size_t align, void **out);

/* Moves *ptr (an allocation of old_size bytes from this arena) to a new one of
 * new_size >= old_size bytes, copying the old contents. When the old one was a
 * large buffer it is released at once, so a stack that doubles costs no more
 * than its final size. On failure *ptr is unchanged. */
bib_status_t bib_arena_grow(bib_arena_t *a, void **ptr, size_t old_size, size_t new_size,
                            size_t align);

#endif
