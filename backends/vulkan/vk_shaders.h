/* backends/vulkan/vk_shaders.h: the embedded SPIR-V table.
 *
 * The table itself is generated at build time (vulkan.mk) from
 * the shaders in shaders/vulkan; this header only says its shape. */
#ifndef BIB_VK_SHADERS_H
#define BIB_VK_SHADERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bib_vk_shader {
    const char *name;        /* file name without .comp */
    const uint32_t *spv_f64; /* built with the fp64 fma emulation */
    size_t spv_f64_bytes;
    const uint32_t *spv_f32; /* built without fp64 (fused-fma devices only) */
    size_t spv_f32_bytes;
} bib_vk_shader_t;

/* Terminated by an entry whose name is NULL. */
extern const bib_vk_shader_t bib_vk_shaders[];

#endif
