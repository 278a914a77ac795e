/* vm/blocks.h: the VM's memory budget and its fixed-size block allocator.
 *
 * One bib_blocks_t per VM holds the memory cap (bib_options_t.max_memory) and
 * charges against it everything the VM allocates: fixed-size blocks (handed to
 * arenas, recycled through a free list) and large aligned buffers (linear
 * memory, big arena allocations) taken from mimalloc. Asking past the cap
 * fails with BIB_E_NOMEM and a message naming the request and the cap; it
 * never aborts.
 *
 * The cap applies to bytes in use (blocks handed out plus live large
 * buffers), so whether a request succeeds depends only on what the program
 * has asked for, never on what earlier runs left in the free list: the same
 * program uses the same memory on every run. Blocks parked on the free list
 * are given back to mimalloc whenever keeping them would push the memory held
 * past the cap.
 *
 * Large buffers of BIB_BIG_PARK_MIN bytes and more are parked too when freed
 * (up to BIB_BIG_PARKED of them) and handed out again for a request of the
 * same size and alignment. mimalloc returns buffers of that size to the
 * system when they are freed, so without parking every run of a kept VM
 * faulted its large tensors in again, page by page (a 16 MB tensor: 4,096
 * faults, most of a memory-bound kernel's time). Parked buffers never take
 * the memory held (in use, parked blocks and parked buffers) past the most
 * the VM has had in use at once, nor past the cap: they are given back
 * first, and before a host allocation is reported as failed. A kept VM may
 * hold up to that high-water mark between runs.
 *
 * This file knows nothing of modules or registers; arena.h builds on it.
 */
#ifndef BIB_BLOCKS_H
#define BIB_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

#define BIB_BLOCK_SIZE_DEFAULT 4096u
#define BIB_BLOCK_COUNT_DEFAULT 65536u
#define BIB_MEMORY_CAP_DEFAULT ((uint64_t)BIB_BLOCK_SIZE_DEFAULT * BIB_BLOCK_COUNT_DEFAULT)
/* Alignment of every block and the minimum alignment of large buffers. */
#define BIB_BLOCK_ALIGN 64u

#define BIB_BIG_PARKED 16
#define BIB_BIG_PARK_MIN ((uint64_t)1 << 20)

typedef struct bib_big_parked {
    void *ptr;
    uint64_t size;
} bib_big_parked_t;

typedef struct bib_blocks {
    size_t block_size; /* bytes per block, a multiple of BIB_BLOCK_ALIGN */
    uint64_t cap;      /* bytes: blocks in use + large buffers may not exceed it */
    uint64_t in_use;   /* bytes charged now */
    uint64_t peak;     /* highest in_use since the last bib_blocks_reset_peak */
    uint64_t high;     /* highest in_use ever: parked buffers stay within it */
    void *free_list;   /* recycled blocks, linked through their first word */
    uint64_t free_count;
    bib_big_parked_t big[BIB_BIG_PARKED]; /* freed large buffers, oldest first */
    uint32_t big_count;
    uint64_t big_bytes; /* the parked buffers' sizes */
    char error[192];    /* the last failure, one line */
} bib_blocks_t;

/* Sets up an empty allocator. block_size 0 means BIB_BLOCK_SIZE_DEFAULT;
 * otherwise it is rounded up to a multiple of BIB_BLOCK_ALIGN. cap 0 means
 * BIB_MEMORY_CAP_DEFAULT. */
void bib_blocks_init(bib_blocks_t *b, size_t block_size, uint64_t cap);

/* Releases the free list. Blocks and buffers still handed out must have been
 * returned first (arenas: bib_arena_destroy). */
void bib_blocks_destroy(bib_blocks_t *b);

/* Hands out one block of block_size bytes (contents undefined), reusing the
 * free list first. BIB_E_NOMEM when the cap would be exceeded or mimalloc
 * fails; b->error says how much was asked and the cap. */
bib_status_t bib_blocks_alloc(bib_blocks_t *b, void **out);
/* Returns a block to the free list. */
void bib_blocks_free(bib_blocks_t *b, void *block);

/* A large buffer of size bytes aligned to align (a power of two; at least
 * BIB_BLOCK_ALIGN is used), zero-filled when zero is non-zero, charged
 * against the cap. Release it with bib_blocks_big_free and the same size. */
bib_status_t bib_blocks_big_alloc(bib_blocks_t *b, uint64_t size, size_t align, int zero,
                                  void **out);
void bib_blocks_big_free(bib_blocks_t *b, void *ptr, uint64_t size);
/* Charges size bytes (at least 1, as bib_blocks_big_alloc does) for a buffer
 * the VM holds without allocating it here: a tensor that shares a kept input's
 * or a constant's bytes counts against the cap as its own copy would.
 * BIB_E_NOMEM past the cap, with b->error set; bib_blocks_uncharge gives the
 * bytes back. */
bib_status_t bib_blocks_charge(bib_blocks_t *b, uint64_t size);
void bib_blocks_uncharge(bib_blocks_t *b, uint64_t size);
/* Asks the system to back the whole 2 MB pages inside [p, p + size) with
 * huge pages (Linux's madvise MADV_HUGEPAGE; nothing elsewhere, or under
 * 4 MB). Advice only: the buffer's contents and use are unchanged. */
void bib_host_advise_large(void *p, uint64_t size);

/* Starts a new peak measurement from the bytes in use now. */
void bib_blocks_reset_peak(bib_blocks_t *b);

#endif
