/* vm/blocks.c: the VM's memory budget, fixed-size blocks and large buffers.
 * See blocks.h for the accounting rules. */
#include "vm/blocks.h"

#include <mimalloc.h>
#include <stdio.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

void bib_blocks_init(bib_blocks_t *b, size_t block_size, uint64_t cap) {
    memset(b, 0, sizeof *b);
    if (block_size == 0)
        block_size = BIB_BLOCK_SIZE_DEFAULT;
    block_size = (block_size + BIB_BLOCK_ALIGN - 1) & ~(size_t)(BIB_BLOCK_ALIGN - 1);
    b->block_size = block_size;
    b->cap = cap == 0 ? BIB_MEMORY_CAP_DEFAULT : cap;
}

/* Gives the oldest parked large buffer back to mimalloc. */
static void unpark_oldest(bib_blocks_t *b) {
    mi_free(b->big[0].ptr);
    b->big_bytes -= b->big[0].size;
    memmove(&b->big[0], &b->big[1], (b->big_count - 1) * sizeof b->big[0]);
    b->big_count--;
}

/* Gives parked large buffers back, the oldest first, while the memory held
   with `extra` more bytes in use would pass the cap or the highest in_use
   (counting the new bytes as in use). */
static void trim_parked(bib_blocks_t *b, uint64_t extra) {
    const uint64_t use = b->in_use + extra, high = use > b->high ? use : b->high;
    while (b->big_count > 0 &&
           (use + b->free_count * (uint64_t)b->block_size + b->big_bytes > b->cap ||
            use + b->free_count * (uint64_t)b->block_size + b->big_bytes > high))
        unpark_oldest(b);
}

void bib_blocks_destroy(bib_blocks_t *b) {
    while (b->big_count > 0)
        unpark_oldest(b);
    void *p = b->free_list;
    while (p != NULL) {
        void *next;
        memcpy(&next, p, sizeof next);
        mi_free(p);
        p = next;
    }
    b->free_list = NULL;
    b->free_count = 0;
}

static bib_status_t over_cap(bib_blocks_t *b, uint64_t size) {
    snprintf(b->error, sizeof b->error,
             "memory cap reached: asked for %llu bytes with %llu in use, cap %llu bytes "
             "(max_memory: bib's --max-memory raises it)",
             (unsigned long long)size, (unsigned long long)b->in_use, (unsigned long long)b->cap);
    return BIB_E_NOMEM;
}

static bib_status_t host_oom(bib_blocks_t *b, uint64_t size) {
    snprintf(b->error, sizeof b->error, "host out of memory allocating %llu bytes",
             (unsigned long long)size);
    return BIB_E_NOMEM;
}

/* Charges size bytes, first giving parked large buffers and blocks back to
   mimalloc if holding them as well would take the memory held past the cap. */
static bib_status_t charge(bib_blocks_t *b, uint64_t size) {
    if (size > b->cap || b->in_use > b->cap - size)
        return over_cap(b, size);
    trim_parked(b, size);
    while (b->free_list != NULL &&
           b->in_use + size + b->free_count * (uint64_t)b->block_size > b->cap) {
        void *p = b->free_list;
        memcpy(&b->free_list, p, sizeof b->free_list);
        b->free_count--;
        mi_free(p);
    }
    b->in_use += size;
    if (b->in_use > b->peak)
        b->peak = b->in_use;
    if (b->in_use > b->high)
        b->high = b->in_use;
    return BIB_OK;
}

bib_status_t bib_blocks_alloc(bib_blocks_t *b, void **out) {
    *out = NULL;
    if (b->free_list != NULL) {
        /* Reuse does not change what is held, only what is in use. */
        if (b->block_size > b->cap || b->in_use > b->cap - b->block_size)
            return over_cap(b, b->block_size);
        void *p = b->free_list;
        memcpy(&b->free_list, p, sizeof b->free_list);
        b->free_count--;
        trim_parked(b, b->block_size);
        b->in_use += b->block_size;
        if (b->in_use > b->peak)
            b->peak = b->in_use;
        if (b->in_use > b->high)
            b->high = b->in_use;
        *out = p;
        return BIB_OK;
    }
    bib_status_t st = charge(b, b->block_size);
    if (st != BIB_OK)
        return st;
    void *p = mi_malloc_aligned(b->block_size, BIB_BLOCK_ALIGN);
    if (p == NULL) {
        b->in_use -= b->block_size;
        return host_oom(b, b->block_size);
    }
    *out = p;
    return BIB_OK;
}

void bib_blocks_free(bib_blocks_t *b, void *block) {
    if (block == NULL)
        return;
    memcpy(block, &b->free_list, sizeof b->free_list);
    b->free_list = block;
    b->free_count++;
    b->in_use -= b->block_size;
}

void bib_host_advise_large(void *p, uint64_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Transparent huge pages where the system grants them on request: a
       64 MB tensor then faults in 32 times instead of 16384, which is most
       of the time of reading it from a file or filling it with a kernel. */
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (size < 2 * huge)
        return;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + (uintptr_t)size) & ~(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice only: refusal is harmless */
#else
    (void)p, (void)size;
#endif
}

bib_status_t bib_blocks_big_alloc(bib_blocks_t *b, uint64_t size, size_t align, int zero,
                                  void **out) {
    *out = NULL;
    if (align < BIB_BLOCK_ALIGN)
        align = BIB_BLOCK_ALIGN;
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX)
        return over_cap(b, size);
    for (uint32_t i = b->big_count; i-- > 0;) {
        bib_big_parked_t *k = &b->big[i];
        if (k->size != size || (uintptr_t)k->ptr % align != 0)
            continue;
        /* Reuse does not change what is held, only what is in use. */
        if (size > b->cap || b->in_use > b->cap - size)
            return over_cap(b, size);
        void *p = k->ptr;
        b->big_bytes -= size;
        memmove(k, k + 1, (b->big_count - 1 - i) * sizeof *k);
        b->big_count--;
        b->in_use += size;
        if (b->in_use > b->peak)
            b->peak = b->in_use;
        if (b->in_use > b->high)
            b->high = b->in_use;
        if (zero)
            memset(p, 0, (size_t)size);
        *out = p;
        return BIB_OK;
    }
    bib_status_t st = charge(b, size);
    if (st != BIB_OK)
        return st;
    void *p =
        zero ? mi_zalloc_aligned((size_t)size, align) : mi_malloc_aligned((size_t)size, align);
    if (p == NULL && b->big_count > 0) {
        /* The host is short: what is parked goes back first. */
        while (b->big_count > 0)
            unpark_oldest(b);
        p = zero ? mi_zalloc_aligned((size_t)size, align) : mi_malloc_aligned((size_t)size, align);
    }
    if (p == NULL) {
        b->in_use -= size;
        return host_oom(b, size);
    }
    if (!zero)
        bib_host_advise_large(p, size);
    *out = p;
    return BIB_OK;
}

void bib_blocks_big_free(bib_blocks_t *b, void *ptr, uint64_t size) {
    if (ptr == NULL)
        return;
    if (size == 0)
        size = 1;
    b->in_use -= size;
    const uint64_t held = b->in_use + b->free_count * (uint64_t)b->block_size + b->big_bytes;
    if (size >= BIB_BIG_PARK_MIN && held + size <= b->high && held + size <= b->cap) {
        if (b->big_count == BIB_BIG_PARKED)
            unpark_oldest(b);
        b->big[b->big_count++] = (bib_big_parked_t){.ptr = ptr, .size = size};
        b->big_bytes += size;
        return;
    }
    mi_free(ptr);
}

bib_status_t bib_blocks_charge(bib_blocks_t *b, uint64_t size) {
    return charge(b, size ? size : 1);
}

void bib_blocks_uncharge(bib_blocks_t *b, uint64_t size) {
    b->in_use -= size ? size : 1;
}

void bib_blocks_reset_peak(bib_blocks_t *b) {
    b->peak = b->in_use;
}
