/* backends/cuda/cu_memory.c: device memory for the CUDA executor.
 *
 * VM buffers are sub-ranges of a few large cuMemAlloc blocks (each block's
 * ranges kept by a bib_suballoc_t, backends/suballoc.h), so allocating a
 * buffer costs no driver call and buffers stay resident until freed; this
 * file decides how large blocks are and when they go back to the driver.
 * Freeing does not wait: all work is on one stream, so whatever uses a
 * range next is queued after whatever used it before. Uploads and downloads
 * go through one pinned staging area (cuMemHostAlloc): an upload copies into
 * it and queues an asynchronous copy (no wait until the staging area is
 * full); a download queues its copy and waits for the stream, which is the
 * one place besides synchronize that waits. When the device is out of
 * memory, blocks with nothing in them are released and the allocation is
 * tried once more; then it is BIB_E_NOMEM and the executor stays usable. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cu_internal.h"

#define BIB_CU_ALIGN ((size_t)256)
#define BIB_CU_GRANULE ((size_t)2 << 20)
#define BIB_CU_MIN_BLOCK ((size_t)64 << 20)
#define BIB_CU_MAX_BLOCK ((size_t)1 << 30)
#define BIB_CU_STAGING ((size_t)32 << 20)

bib_status_t bib_cu_memory_init(bib_executor_t *ex) {
    ex->staging_size = BIB_CU_STAGING;
    bib_status_t st = bib_cu_check(ex, ex->api.MemHostAlloc(&ex->staging, ex->staging_size, 0),
                                   "cuMemHostAlloc(%zu bytes)", ex->staging_size);
    if (st != BIB_OK)
        ex->staging = NULL;
    return st;
}

void bib_cu_memory_shutdown(bib_executor_t *ex) {
    for (uint32_t i = 0; i < ex->block_count; i++) {
        if (ex->blocks[i].base)
            ex->api.MemFree(ex->blocks[i].base);
        bib_suballoc_destroy(&ex->blocks[i].ranges);
    }
    free(ex->blocks);
    ex->blocks = NULL;
    ex->block_count = ex->block_cap = 0;
    if (ex->staging)
        ex->api.MemFreeHost(ex->staging);
    ex->staging = NULL;
}

static bool bib_cu_block_empty(const bib_cu_block_t *blk) {
    return blk->base && bib_suballoc_empty(&blk->ranges);
}

/* Gives the empty blocks back to the driver; their slots stay (base 0) so
 * the block indices of live buffers keep their meaning. */
static bib_status_t bib_cu_trim(bib_executor_t *ex, bool *released) {
    *released = false;
    for (uint32_t i = 0; i < ex->block_count; i++)
        if (bib_cu_block_empty(&ex->blocks[i]))
            *released = true;
    if (!*released)
        return BIB_OK;
    /* Work still queued may use the ranges that were freed without a wait. */
    bib_status_t st = bib_cu_wait(ex);
    if (st != BIB_OK)
        return st;
    for (uint32_t i = 0; i < ex->block_count; i++) {
        bib_cu_block_t *blk = &ex->blocks[i];
        if (!bib_cu_block_empty(blk))
            continue;
        ex->api.MemFree(blk->base);
        blk->base = 0;
        bib_suballoc_reset(&blk->ranges, 0);
    }
    return BIB_OK;
}

static bib_status_t bib_cu_new_block(bib_executor_t *ex, size_t need, uint32_t *index) {
    size_t total = 0;
    uint32_t slot = ex->block_count;
    for (uint32_t i = 0; i < ex->block_count; i++) {
        total += ex->blocks[i].ranges.size;
        if (!ex->blocks[i].base && slot == ex->block_count)
            slot = i;
    }
    /* Grow geometrically so a model of many tensors needs few blocks. */
    size_t minimal = bib_suballoc_round(need, BIB_CU_GRANULE);
    size_t size = total > BIB_CU_MIN_BLOCK ? total : BIB_CU_MIN_BLOCK;
    if (size > BIB_CU_MAX_BLOCK)
        size = BIB_CU_MAX_BLOCK;
    if (size < minimal)
        size = minimal;
    if (slot == ex->block_cap) {
        uint32_t cap = ex->block_cap ? ex->block_cap * 2 : 8;
        bib_cu_block_t *nb = realloc(ex->blocks, cap * sizeof *nb);
        if (!nb)
            return bib_cu_fail(ex, BIB_E_NOMEM, "cuda: out of host memory for pool blocks");
        ex->blocks = nb;
        ex->block_cap = cap;
    }
    bib_suballoc_t ranges;
    if (!bib_suballoc_init(&ranges, BIB_CU_ALIGN))
        return bib_cu_fail(ex, BIB_E_NOMEM, "cuda: out of host memory for pool blocks");
    CUdeviceptr base = 0;
    CUresult r = ex->api.MemAlloc(&base, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && size > minimal) {
        size = minimal;
        r = ex->api.MemAlloc(&base, size);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        bool released = false;
        bib_status_t st = bib_cu_trim(ex, &released);
        if (st != BIB_OK) {
            bib_suballoc_destroy(&ranges);
            return st;
        }
        if (released)
            r = ex->api.MemAlloc(&base, size);
    }
    bib_status_t st = bib_cu_check(ex, r, "cuMemAlloc_v2(%zu bytes)", size);
    if (st != BIB_OK) {
        bib_suballoc_destroy(&ranges);
        return st;
    }
    bib_cu_block_t *blk = &ex->blocks[slot];
    if (slot < ex->block_count)
        bib_suballoc_destroy(&blk->ranges); /* of the block released from this slot */
    bib_suballoc_reset(&ranges, size);
    *blk = (bib_cu_block_t){.base = base, .ranges = ranges};
    if (slot == ex->block_count)
        ex->block_count++;
    *index = slot;
    return BIB_OK;
}

bib_status_t bib_cu_buffer_alloc(bib_executor_t *ex, size_t bytes, void **buf) {
    *buf = NULL;
    if (bytes > ((size_t)1 << 62))
        return bib_cu_fail(ex, BIB_E_NOMEM, "cuda: a buffer of %zu bytes is too large", bytes);
    bib_status_t st = bib_cu_enter(ex);
    if (st != BIB_OK)
        return st;
    size_t size = bib_suballoc_round(bytes ? bytes : 4, BIB_CU_ALIGN);
    bib_cu_buffer_t *b = malloc(sizeof *b);
    if (!b)
        return bib_cu_fail(ex, BIB_E_NOMEM, "cuda: out of host memory");
    uint32_t index = UINT32_MAX;
    uint64_t offset = 0;
    for (uint32_t i = 0; i < ex->block_count && index == UINT32_MAX; i++)
        if (ex->blocks[i].base && bib_suballoc_take(&ex->blocks[i].ranges, size, &offset))
            index = i;
    if (index == UINT32_MAX) {
        if ((st = bib_cu_new_block(ex, size, &index)) != BIB_OK) {
            free(b);
            return st;
        }
        bib_suballoc_take(&ex->blocks[index].ranges, size, &offset);
    }
    *b = (bib_cu_buffer_t){index, offset, size, ex->blocks[index].base + offset};
    ex->in_use += size;
    *buf = b;
    return BIB_OK;
}

void bib_cu_buffer_free(bib_executor_t *ex, void *buf) {
    bib_cu_buffer_t *b = buf;
    if (!b)
        return;
    bib_suballoc_give(&ex->blocks[b->block].ranges, b->offset, b->size);
    ex->in_use -= b->size;
    free(b);
}

static bib_status_t bib_cu_range_check(bib_executor_t *ex, const bib_cu_buffer_t *b, size_t offset,
                                       size_t bytes, const char *what) {
    if (!b)
        return bib_cu_fail(ex, BIB_E_USAGE, "cuda: %s into no buffer", what);
    if (offset > b->size || bytes > b->size - offset)
        return bib_cu_fail(ex, BIB_E_USAGE,
                           "cuda: %s of %zu bytes at offset %zu overruns a buffer of %zu bytes",
                           what, bytes, offset, b->size);
    return BIB_OK;
}

bib_status_t bib_cu_upload(bib_executor_t *ex, void *buf, size_t offset, const void *src,
                           size_t bytes) {
    bib_cu_buffer_t *b = buf;
    bib_status_t st = bib_cu_range_check(ex, b, offset, bytes, "upload");
    if (st == BIB_OK)
        st = bib_cu_enter(ex);
    while (st == BIB_OK && bytes > 0) {
        if (ex->staging_used >= ex->staging_size && (st = bib_cu_wait(ex)) != BIB_OK)
            break;
        size_t room = ex->staging_size - ex->staging_used;
        size_t chunk = bytes < room ? bytes : room;
        uint8_t *stage = (uint8_t *)ex->staging + ex->staging_used;
        memcpy(stage, src, chunk);
        st = bib_cu_check(ex, ex->api.MemcpyHtoDAsync(b->ptr + offset, stage, chunk, ex->stream),
                          "cuMemcpyHtoDAsync_v2(%zu bytes)", chunk);
        ex->launches++;
        ex->staging_used += bib_suballoc_round(chunk, BIB_CU_ALIGN);
        src = (const uint8_t *)src + chunk;
        offset += chunk;
        bytes -= chunk;
    }
    return st;
}

bib_status_t bib_cu_download(bib_executor_t *ex, void *buf, size_t offset, void *dst,
                             size_t bytes) {
    bib_cu_buffer_t *b = buf;
    bib_status_t st = bib_cu_range_check(ex, b, offset, bytes, "download");
    if (st == BIB_OK)
        st = bib_cu_enter(ex);
    while (st == BIB_OK && bytes > 0) {
        size_t want = bytes < ex->staging_size ? bytes : ex->staging_size;
        /* Uploads queued into staging keep their room until the wait. */
        if (ex->staging_size - ex->staging_used < want && (st = bib_cu_wait(ex)) != BIB_OK)
            break;
        uint8_t *stage = (uint8_t *)ex->staging + ex->staging_used;
        st = bib_cu_check(ex, ex->api.MemcpyDtoHAsync(stage, b->ptr + offset, want, ex->stream),
                          "cuMemcpyDtoHAsync_v2(%zu bytes)", want);
        ex->launches++;
        if (st == BIB_OK)
            st = bib_cu_wait(ex);
        if (st != BIB_OK)
            break;
        memcpy(dst, stage, want);
        dst = (uint8_t *)dst + want;
        offset += want;
        bytes -= want;
    }
    return st;
}

bib_status_t bib_cu_memory_query(bib_executor_t *ex, uint64_t *free_bytes, uint64_t *total) {
    bib_status_t st = bib_cu_enter(ex);
    size_t dev_free = 0, dev_total = 0;
    if (st == BIB_OK)
        st = bib_cu_check(ex, ex->api.MemGetInfo(&dev_free, &dev_total), "cuMemGetInfo_v2");
    if (st != BIB_OK)
        return st;
    size_t pooled = 0;
    for (uint32_t i = 0; i < ex->block_count; i++)
        pooled += ex->blocks[i].ranges.size;
    /* Free inside the pool counts as free: it is there for the next buffer. */
    *free_bytes = (uint64_t)dev_free + (uint64_t)(pooled - ex->in_use);
    *total = (uint64_t)dev_total;
    return BIB_OK;
}
