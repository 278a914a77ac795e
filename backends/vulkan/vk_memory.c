/* backends/vulkan/vk_memory.c: device memory for the Vulkan executor.
 *
 * VM buffers are sub-ranges of a few large device-local blocks (one
 * vkAllocateMemory and one VkBuffer per block; each block's ranges kept by a
 * bib_suballoc_t, backends/suballoc.h), so allocation costs no driver call
 * and kernels bind whole blocks, addressing tensors by element offset. This
 * file decides how large blocks are. Uploads and downloads go through one
 * host-visible staging buffer: uploads are recorded into the current command
 * buffer (no submit), a download submits and waits. */
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

#define BIB_VK_ALIGN 256u
#define BIB_VK_MIN_BLOCK (32ull << 20)
#define BIB_VK_MAX_BLOCK (1ull << 30)
#define BIB_VK_STAGING (16ull << 20)

static int bib_vk_memory_type(const bib_executor_t *ex, uint32_t bits, VkMemoryPropertyFlags want,
                              VkMemoryPropertyFlags avoid) {
    for (uint32_t i = 0; i < ex->memprops.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = ex->memprops.memoryTypes[i].propertyFlags;
        if ((bits & (1u << i)) && (f & want) == want && !(f & avoid))
            return (int)i;
    }
    return -1;
}

/* Creates a buffer and its memory of one memory type chosen from
 * preference lists (the first that exists wins). */
static bib_status_t bib_vk_make(bib_executor_t *ex, VkDeviceSize size, VkBufferUsageFlags usage,
                                const VkMemoryPropertyFlags *prefs, int nprefs, VkBuffer *buf,
                                VkDeviceMemory *mem, uint32_t *type_out) {
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = size,
                              .usage = usage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    bib_status_t st =
        bib_vk_check(ex, vkCreateBuffer(ex->device, &bci, NULL, buf), "vkCreateBuffer");
    if (st != BIB_OK)
        return st;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ex->device, *buf, &req);
    int type = -1;
    for (int p = 0; p < nprefs && type < 0; p++)
        type = bib_vk_memory_type(ex, req.memoryTypeBits, prefs[p], 0);
    if (type < 0) {
        vkDestroyBuffer(ex->device, *buf, NULL);
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE, "vulkan: no suitable memory type");
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)type};
    VkResult r = vkAllocateMemory(ex->device, &ai, NULL, mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(ex->device, *buf, NULL);
        return bib_vk_fail(ex, BIB_E_NOMEM,
                           "vulkan: vkAllocateMemory of %llu bytes failed (VkResult %d)",
                           (unsigned long long)req.size, (int)r);
    }
    if ((st = bib_vk_check(ex, vkBindBufferMemory(ex->device, *buf, *mem, 0),
                           "vkBindBufferMemory")) != BIB_OK) {
        vkDestroyBuffer(ex->device, *buf, NULL);
        vkFreeMemory(ex->device, *mem, NULL);
        return st;
    }
    *type_out = (uint32_t)type;
    return BIB_OK;
}

bib_status_t bib_vk_memory_init(bib_executor_t *ex) {
    VkDeviceSize limit = ex->props.limits.maxStorageBufferRange;
    ex->max_buffer = limit & ~(VkDeviceSize)(BIB_VK_ALIGN - 1);
    ex->block_size = ex->max_buffer < BIB_VK_MAX_BLOCK ? ex->max_buffer : BIB_VK_MAX_BLOCK;
    const VkMemoryPropertyFlags prefs[] = {
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
            VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT};
    ex->staging_size = BIB_VK_STAGING;
    bib_status_t st = bib_vk_make(
        ex, ex->staging_size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        prefs, 2, &ex->staging_buffer, &ex->staging_memory, &ex->staging_type_index);
    if (st != BIB_OK)
        return st;
    void *map = NULL;
    if ((st = bib_vk_check(ex,
                           vkMapMemory(ex->device, ex->staging_memory, 0, VK_WHOLE_SIZE, 0, &map),
                           "vkMapMemory")) != BIB_OK)
        return st;
    ex->staging_map = map;
    return BIB_OK;
}

void bib_vk_memory_shutdown(bib_executor_t *ex) {
    for (uint32_t i = 0; i < ex->block_count; i++) {
        if (ex->blocks[i].buffer)
            vkDestroyBuffer(ex->device, ex->blocks[i].buffer, NULL);
        if (ex->blocks[i].memory)
            vkFreeMemory(ex->device, ex->blocks[i].memory, NULL);
        bib_suballoc_destroy(&ex->blocks[i].ranges);
    }
    free(ex->blocks);
    if (ex->staging_buffer)
        vkDestroyBuffer(ex->device, ex->staging_buffer, NULL);
    if (ex->staging_memory)
        vkFreeMemory(ex->device, ex->staging_memory, NULL);
}

VkBuffer bib_vk_block_buffer(bib_executor_t *ex, const bib_vk_buffer_t *b) {
    return ex->blocks[b->block].buffer;
}

static bib_status_t bib_vk_new_block(bib_executor_t *ex, VkDeviceSize need, uint32_t *index) {
    VkDeviceSize total = 0;
    for (uint32_t i = 0; i < ex->block_count; i++)
        total += ex->blocks[i].ranges.size;
    /* Grow geometrically so a model of many tensors needs few blocks. */
    VkDeviceSize size = total > BIB_VK_MIN_BLOCK ? total : BIB_VK_MIN_BLOCK;
    if (size > ex->block_size)
        size = ex->block_size;
    if (size < need)
        size = need;
    if (ex->block_count == ex->block_cap) {
        uint32_t cap = ex->block_cap ? ex->block_cap * 2 : 8;
        bib_vk_block_t *nb = realloc(ex->blocks, cap * sizeof *nb);
        if (!nb)
            return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory for blocks");
        ex->blocks = nb;
        ex->block_cap = cap;
    }
    bib_vk_block_t *blk = &ex->blocks[ex->block_count];
    memset(blk, 0, sizeof *blk);
    const VkMemoryPropertyFlags prefs[] = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
    bib_status_t st =
        bib_vk_make(ex, size,
                    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                    prefs, 2, &blk->buffer, &blk->memory, &ex->device_type_index);
    if (st != BIB_OK)
        return st;
    if (!bib_suballoc_init(&blk->ranges, BIB_VK_ALIGN)) {
        vkDestroyBuffer(ex->device, blk->buffer, NULL);
        vkFreeMemory(ex->device, blk->memory, NULL);
        return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory for blocks");
    }
    bib_suballoc_reset(&blk->ranges, size);
    *index = ex->block_count++;
    return BIB_OK;
}

bib_status_t bib_vk_buffer_alloc(bib_executor_t *ex, size_t bytes, void **buf) {
    *buf = NULL;
    bib_status_t usable = bib_vk_usable(ex);
    if (usable != BIB_OK)
        return usable;
    VkDeviceSize want = bytes ? bytes : 4;
    /* Compared before rounding up, which wraps for sizes near 2^64; as
     * max_buffer is a multiple of the alignment, the rounded size is over it
     * exactly when want is. */
    if (want > ex->max_buffer)
        return bib_vk_fail(ex, BIB_E_NOMEM,
                           "vulkan: a buffer of %zu bytes exceeds the device's storage buffer "
                           "range (%llu bytes)",
                           bytes, (unsigned long long)ex->max_buffer);
    VkDeviceSize size = bib_suballoc_round(want, BIB_VK_ALIGN);
    bib_vk_buffer_t *b = malloc(sizeof *b);
    if (!b)
        return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory");
    uint32_t index = UINT32_MAX;
    VkDeviceSize offset = 0;
    for (uint32_t i = 0; i < ex->block_count && index == UINT32_MAX; i++)
        if (bib_suballoc_take(&ex->blocks[i].ranges, size, &offset))
            index = i;
    if (index == UINT32_MAX) {
        bib_status_t st = bib_vk_new_block(ex, size, &index);
        if (st != BIB_OK) {
            free(b);
            return st;
        }
        bib_suballoc_take(&ex->blocks[index].ranges, size, &offset);
    }
    *b = (bib_vk_buffer_t){index, offset, size};
    ex->allocated += size;
    *buf = b;
    return BIB_OK;
}

void bib_vk_buffer_free(bib_executor_t *ex, void *buf) {
    bib_vk_buffer_t *b = buf;
    if (!b)
        return;
    /* No wait: work recorded on this range stays ordered before any reuse
     * by the barriers bib_vk_hazard records for the new owner's accesses. */
    bib_suballoc_give(&ex->blocks[b->block].ranges, b->offset, b->size);
    ex->allocated -= b->size;
    free(b);
}

static bib_status_t bib_vk_range_check(bib_executor_t *ex, const bib_vk_buffer_t *b, size_t offset,
                                       size_t bytes, const char *what) {
    if (offset > b->size || bytes > b->size - offset)
        return bib_vk_fail(ex, BIB_E_USAGE,
                           "vulkan: %s of %zu bytes at offset %zu overruns a buffer of %llu bytes",
                           what, bytes, offset, (unsigned long long)b->size);
    if ((offset | bytes) & 3)
        return bib_vk_fail(ex, BIB_E_USAGE,
                           "vulkan: %s offset %zu and size %zu must be multiples of 4", what,
                           offset, bytes);
    return BIB_OK;
}

bib_status_t bib_vk_upload(bib_executor_t *ex, void *buf, size_t offset, const void *src,
                           size_t bytes) {
    bib_vk_buffer_t *b = buf;
    bib_status_t st = bib_vk_range_check(ex, b, offset, bytes, "upload");
    while (st == BIB_OK && bytes > 0) {
        if (ex->staging_used == ex->staging_size && (st = bib_vk_flush(ex)) != BIB_OK)
            break;
        VkDeviceSize room = ex->staging_size - ex->staging_used;
        size_t chunk = bytes < room ? bytes : (size_t)room;
        if ((st = bib_vk_begin(ex)) != BIB_OK)
            break;
        memcpy(ex->staging_map + ex->staging_used, src, chunk);
        bib_vk_access_t acc = {b->block, b->offset + offset, b->offset + offset + chunk, true};
        bib_vk_hazard(ex, &acc, 1);
        VkBufferCopy region = {ex->staging_used, b->offset + offset, chunk};
        vkCmdCopyBuffer(ex->cmd, ex->staging_buffer, ex->blocks[b->block].buffer, 1, &region);
        ex->staging_used += (chunk + BIB_VK_ALIGN - 1) & ~(size_t)(BIB_VK_ALIGN - 1);
        if (ex->staging_used > ex->staging_size)
            ex->staging_used = ex->staging_size;
        src = (const uint8_t *)src + chunk;
        offset += chunk;
        bytes -= chunk;
    }
    return st;
}

bib_status_t bib_vk_download(bib_executor_t *ex, void *buf, size_t offset, void *dst,
                             size_t bytes) {
    bib_vk_buffer_t *b = buf;
    bib_status_t st = bib_vk_range_check(ex, b, offset, bytes, "download");
    while (st == BIB_OK && bytes > 0) {
        /* Copies already recorded into staging (uploads) keep their room. */
        if (ex->staging_used == ex->staging_size && (st = bib_vk_flush(ex)) != BIB_OK)
            break;
        VkDeviceSize at = ex->staging_used;
        VkDeviceSize room = ex->staging_size - at;
        size_t chunk = bytes < room ? bytes : (size_t)room;
        if ((st = bib_vk_begin(ex)) != BIB_OK)
            break;
        bib_vk_access_t acc = {b->block, b->offset + offset, b->offset + offset + chunk, false};
        bib_vk_hazard(ex, &acc, 1);
        VkBufferCopy region = {b->offset + offset, at, chunk};
        vkCmdCopyBuffer(ex->cmd, ex->blocks[b->block].buffer, ex->staging_buffer, 1, &region);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(ex->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                             1, &mb, 0, NULL, 0, NULL);
        if ((st = bib_vk_flush(ex)) != BIB_OK)
            break;
        memcpy(dst, ex->staging_map + at, chunk);
        dst = (uint8_t *)dst + chunk;
        offset += chunk;
        bytes -= chunk;
    }
    return st;
}

bib_status_t bib_vk_memory_query(bib_executor_t *ex, uint64_t *free_bytes, uint64_t *total) {
    uint32_t heap = ex->memprops.memoryTypes[ex->device_type_index].heapIndex;
    uint64_t size = ex->memprops.memoryHeaps[heap].size;
    *total = size;
    *free_bytes = size > ex->allocated ? size - ex->allocated : 0;
    return BIB_OK;
}
