/* backends/vulkan/vk_programs.c: user compute shaders (VK_COMPUTE).
 *
 * Owns the Vulkan side of spec/device-code.md: a program is the module's
 * SPIR-V as a shader module, a descriptor set layout of `bindings` storage
 * buffers (set 0, bindings 0..n-1), a pipeline layout with `push_bytes` of
 * push constants and one compute pipeline, all built once by program_create.
 * A dispatch takes a descriptor set from a pool of its own (reset whenever
 * the command buffer's work has finished), binds each tensor's exact byte
 * range and is recorded into the executor's one command buffer after the
 * barriers its hazards need, exactly like a built-in kernel, so user and
 * built-in work interleave in program order. The SPIR-V is used as given:
 * no float-controls patching, since BIB's numerics contract covers only its
 * own kernels. The device runs with robustBufferAccess, so a shader's stray
 * access stays inside the ranges it was given. */
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

#define BIB_VK_PROGRAM_SETS 256     /* descriptor sets per pool reset */
#define BIB_VK_PROGRAM_BINDINGS 16u /* storage buffers per program (BIB_MAX_SHADER_BINDINGS) */

typedef struct bib_vk_program {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    uint32_t bindings, push_bytes;
} bib_vk_program_t;

void bib_vk_program_destroy(bib_executor_t *ex, void *prog) {
    bib_vk_program_t *p = prog;
    if (!p)
        return;
    /* Recorded dispatches may still use the pipeline. */
    bib_vk_flush(ex);
    if (ex->lost) {
        /* The work that timed out may be running this pipeline: it stays. */
        free(p);
        return;
    }
    if (p->pipeline)
        vkDestroyPipeline(ex->device, p->pipeline, NULL);
    if (p->layout)
        vkDestroyPipelineLayout(ex->device, p->layout, NULL);
    if (p->set_layout)
        vkDestroyDescriptorSetLayout(ex->device, p->set_layout, NULL);
    if (p->module)
        vkDestroyShaderModule(ex->device, p->module, NULL);
    free(p);
}

static bib_status_t bib_vk_program_pool(bib_executor_t *ex) {
    if (ex->program_pool)
        return BIB_OK;
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               BIB_VK_PROGRAM_BINDINGS * BIB_VK_PROGRAM_SETS};
    VkDescriptorPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = BIB_VK_PROGRAM_SETS,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &ps};
    return bib_vk_check(ex, vkCreateDescriptorPool(ex->device, &ci, NULL, &ex->program_pool),
                        "vkCreateDescriptorPool (user programs)");
}

void bib_vk_programs_reset(bib_executor_t *ex) {
    if (ex->program_pool && ex->program_sets_used > 0)
        vkResetDescriptorPool(ex->device, ex->program_pool, 0);
    ex->program_sets_used = 0;
}

bib_status_t bib_vk_program_create(bib_executor_t *ex, bib_program_kind_t kind, const void *code,
                                   size_t size, const char *entry, uint32_t bindings,
                                   uint32_t push_bytes, const char *signature, void **prog) {
    (void)signature;
    *prog = NULL;
    bib_status_t usable = bib_vk_usable(ex);
    if (usable != BIB_OK)
        return usable;
    if (kind != BIB_PROGRAM_SPIRV)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: runs SPIR-V compute shaders only, not program kind %d",
                           (int)kind);
    const VkPhysicalDeviceLimits *lim = &ex->props.limits;
    if (size == 0 || size % 4 != 0)
        return bib_vk_fail(ex, BIB_E_USAGE, "vulkan: SPIR-V of %zu bytes is not whole words", size);
    if (bindings == 0 || bindings > BIB_VK_PROGRAM_BINDINGS ||
        bindings > lim->maxPerStageDescriptorStorageBuffers)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: shader '%s' binds %u storage buffers; '%s' allows 1..%u", entry,
                           bindings, ex->props.deviceName,
                           lim->maxPerStageDescriptorStorageBuffers < BIB_VK_PROGRAM_BINDINGS
                               ? lim->maxPerStageDescriptorStorageBuffers
                               : BIB_VK_PROGRAM_BINDINGS);
    if (push_bytes % 4 != 0 || push_bytes > lim->maxPushConstantsSize)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: shader '%s' pushes %u bytes; '%s' allows %u", entry, push_bytes,
                           ex->props.deviceName, lim->maxPushConstantsSize);
    bib_status_t st = bib_vk_program_pool(ex);
    if (st != BIB_OK)
        return st;
    bib_vk_program_t *p = calloc(1, sizeof *p);
    if (!p)
        return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory for a program");
    p->bindings = bindings;
    p->push_bytes = push_bytes;
    VkShaderModuleCreateInfo mci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size, .pCode = code};
    VkResult r = vkCreateShaderModule(ex->device, &mci, NULL, &p->module);
    if (r != VK_SUCCESS) {
        p->module = VK_NULL_HANDLE;
        bib_vk_program_destroy(ex, p);
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: the driver rejected shader '%s' (vkCreateShaderModule: "
                           "VkResult %d)",
                           entry, (int)r);
    }
    VkDescriptorSetLayoutBinding b[BIB_VK_PROGRAM_BINDINGS];
    for (uint32_t i = 0; i < bindings; i++)
        b[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                              VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo lci = {.sType =
                                               VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = bindings,
                                           .pBindings = b};
    st = bib_vk_check(ex, vkCreateDescriptorSetLayout(ex->device, &lci, NULL, &p->set_layout),
                      "vkCreateDescriptorSetLayout (user program)");
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1,
                                       .pSetLayouts = &p->set_layout,
                                       .pushConstantRangeCount = push_bytes > 0 ? 1 : 0,
                                       .pPushConstantRanges = &pr};
    if (st == BIB_OK)
        st = bib_vk_check(ex, vkCreatePipelineLayout(ex->device, &plci, NULL, &p->layout),
                          "vkCreatePipelineLayout (user program)");
    if (st == BIB_OK) {
        VkComputePipelineCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = p->module,
                      .pName = entry},
            .layout = p->layout};
        r = vkCreateComputePipelines(ex->device, ex->pipeline_cache, 1, &ci, NULL, &p->pipeline);
        if (r != VK_SUCCESS) {
            p->pipeline = VK_NULL_HANDLE;
            st = bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                             "vulkan: the driver could not build a pipeline for shader entry "
                             "'%s' (vkCreateComputePipelines: VkResult %d)",
                             entry, (int)r);
        }
    }
    if (st != BIB_OK) {
        char keep[sizeof ex->error];
        memcpy(keep, ex->error, sizeof keep);
        bib_vk_program_destroy(ex, p);
        memcpy(ex->error, keep, sizeof keep);
        return st;
    }
    *prog = p;
    return BIB_OK;
}

bib_status_t bib_vk_program_dispatch(bib_executor_t *ex, void *prog, void *const *buffers,
                                     const uint64_t *sizes, uint32_t nbuffers, const void *push,
                                     uint32_t push_bytes, const uint32_t groups[3],
                                     const uint32_t block[3]) {
    (void)block;
    bib_vk_program_t *p = prog;
    if (nbuffers != p->bindings || push_bytes != p->push_bytes)
        return bib_vk_fail(ex, BIB_E_USAGE,
                           "vulkan: dispatch gives %u buffers and %u push bytes; the shader takes "
                           "%u and %u",
                           nbuffers, push_bytes, p->bindings, p->push_bytes);
    const uint32_t *most = ex->props.limits.maxComputeWorkGroupCount;
    for (int i = 0; i < 3; i++)
        if (groups[i] > most[i])
            return bib_vk_fail(ex, BIB_E_USAGE,
                               "vulkan: %u workgroups along %c exceed the device's limit %u",
                               groups[i], "xyz"[i], most[i]);
    if (groups[0] == 0 || groups[1] == 0 || groups[2] == 0)
        return BIB_OK;
    bib_status_t st;
    if (ex->program_sets_used == BIB_VK_PROGRAM_SETS && (st = bib_vk_flush(ex)) != BIB_OK)
        return st;
    if ((st = bib_vk_time_reserve(ex)) != BIB_OK || (st = bib_vk_begin(ex)) != BIB_OK)
        return st;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = ex->program_pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &p->set_layout};
    VkDescriptorSet set;
    st = bib_vk_check(ex, vkAllocateDescriptorSets(ex->device, &ai, &set),
                      "vkAllocateDescriptorSets (user program)");
    if (st != BIB_OK)
        return st;
    ex->program_sets_used++;
    VkDescriptorBufferInfo info[BIB_VK_PROGRAM_BINDINGS];
    VkWriteDescriptorSet writes[BIB_VK_PROGRAM_BINDINGS];
    bib_vk_access_t acc[BIB_VK_PROGRAM_BINDINGS];
    for (uint32_t i = 0; i < nbuffers; i++) {
        const bib_vk_buffer_t *b = buffers[i];
        /* A zero-element tensor still needs a valid (non-empty) range. */
        VkDeviceSize range = sizes[i] > 0 && sizes[i] <= b->size ? sizes[i] : b->size;
        info[i] = (VkDescriptorBufferInfo){bib_vk_block_buffer(ex, b), b->offset, range};
        writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = set,
                                           .dstBinding = i,
                                           .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &info[i]};
        /* What a user shader does with a binding is unknown: treat each as
           written, so later readers and writers wait for it. */
        acc[i] = (bib_vk_access_t){b->block, b->offset, b->offset + b->size, true};
    }
    vkUpdateDescriptorSets(ex->device, nbuffers, writes, 0, NULL);
    bib_vk_hazard(ex, acc, nbuffers);
    vkCmdBindPipeline(ex->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    vkCmdBindDescriptorSets(ex->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0,
                            NULL);
    if (push_bytes > 0)
        vkCmdPushConstants(ex->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    bib_vk_time_begin(ex);
    vkCmdDispatch(ex->cmd, groups[0], groups[1], groups[2]);
    bib_vk_time_end(ex);
    return BIB_OK;
}
