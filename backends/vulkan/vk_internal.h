/* backends/vulkan/vk_internal.h: the Vulkan executor's private state.
 *
 * Shared by vk_device.c (instance, device, probes, pipelines, command
 * recording), vk_memory.c (pooled device memory, staging, transfers) and
 * vk_kernels.c (one recording function per kernel). Nothing here is visible
 * to the VM: it sees only bib_vulkan_executor. */
#ifndef BIB_VK_INTERNAL_H
#define BIB_VK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "backends/backend.h"
#include "backends/suballoc.h"
#include "backends/vulkan/vulkan.h"

#define BIB_VK_SPEC_MAX 9     /* specialization constants per pipeline */
#define BIB_VK_PENDING_MAX 64 /* buffer ranges tracked between barriers */
#define BIB_VK_QUERIES 4096   /* timestamps per command buffer: two per timed command */

/* The fma path chosen by the start-up probe (specialization constant 0). */
typedef enum bib_vk_fma_path {
    BIB_VK_FMA_NATIVE = 0,             /* GLSL fma() is fused and exact on this device */
    BIB_VK_FMA_EMULATED = 1,           /* exact emulation through fp64 round-to-odd */
    BIB_VK_FMA_FLUSHING = 2,           /* fma() fused but flushing denormals: the
                                          emulation where an operand or the result is
                                          denormal */
    BIB_VK_FMA_FLUSHING_SIMULATED = 3, /* 2 over a simulated flushing fma()
                                          (BIB_VK_FMA=flushing-simulated, tests) */
} bib_vk_fma_path_t;

/* One big device-local allocation with one VkBuffer over all of it. Buffers
 * handed to the VM are sub-ranges of blocks. */
typedef struct bib_vk_block {
    VkDeviceMemory memory;
    VkBuffer buffer;
    bib_suballoc_t ranges; /* ranges.size is the block's size */
} bib_vk_block_t;

/* The handle behind a bib_view_t's buf. */
typedef struct bib_vk_buffer {
    uint32_t block;
    VkDeviceSize offset; /* bytes from the start of the block */
    VkDeviceSize size;
} bib_vk_buffer_t;

typedef struct bib_vk_pipeline {
    uint32_t shader; /* index into bib_vk_shaders */
    uint32_t spec[BIB_VK_SPEC_MAX];
    VkPipeline pipeline;
} bib_vk_pipeline_t;

/* A byte range of a block touched by recorded work since the last barrier. */
typedef struct bib_vk_access {
    uint32_t block;
    VkDeviceSize lo, hi;
    bool write;
} bib_vk_access_t;

/* Push constants, mirroring `Push` in shaders/vulkan/common.glsl. */
typedef struct bib_vk_push {
    uint32_t off_out, off_in0, off_in1, off_in2;
    uint32_t n[6];
    uint32_t u[4];
    uint32_t off_scratch;
    int32_t s[16]; /* STRIDED's p[] */
} bib_vk_push_t;

#define BIB_VK_BINDINGS 5 /* out, in0, in1, in2, scratch */

struct bib_executor {
    char error[512];
    char describe[1024];
    bib_device_facts_t facts;

    /* instance and device */
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    uint32_t validation_messages;
    bool validation;
    VkPhysicalDevice physical;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;

    /* numerics: what the device supports and what the probes chose */
    bool has_f64;
    bool rte32, rte64, denorm32, denorm64, szinp32, szinp64;
    bool rte16, denorm16; /* only for the independence rules below */
    /* VkShaderFloatControlsIndependence of rounding and of denormal modes:
       which bit widths may carry a mode different from the others */
    VkShaderFloatControlsIndependence round_indep, denorm_indep;
    bool float_controls; /* VK_KHR_shader_float_controls or Vulkan 1.2 */
    bool probe_denormals, probe_rte;
    /* Loop iterations one invocation may run in all, its loops together,
       before the driver stops them (bib_vk_probe_loops); 0: no limit found. */
    uint32_t loop_limit;
    /* Where there is a limit: bib_div's loop of 27 steps counts against it
       (the driver does not unroll it). */
    bool loop_fixed;
    bib_vk_fma_path_t fma_path;
    char fma_note[160]; /* why fma() was not taken, when it was not */
    int matmul_tiles;   /* 0: by device and size; else 1 + a forced configuration's index
                           (BIB_VK_MATMUL_TILES, bib_vk_matmul_tiles) */

    /* pipelines */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipeline_layout;
    VkPipelineCache pipeline_cache;
    char cache_path[1024];
    bib_vk_pipeline_t *pipelines;
    uint32_t pipeline_count, pipeline_cap;
    VkShaderModule *modules; /* per shader index, created on first use */
    uint32_t module_count;

    /* recording */
    VkCommandPool command_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool descriptor_pool;
    uint32_t sets_used;
    bool recording;
    bib_vk_access_t pending[BIB_VK_PENDING_MAX];
    uint32_t pending_count;
    uint64_t submits;    /* for tests and benchmarks: queue submissions so far */
    bool inflight;       /* bib_vk_submit started cmd; the fence is not waited for yet */
    uint64_t timeout_ms; /* config.timeout_ms: the longest fence wait; 0 means none */
    bool lost; /* a fence wait timed out: the work may still run, nothing touches the device */

    /* device timing (--profile): two timestamps around every dispatch, fill
     * and copy while timing is on; the pool is reset at the start of each
     * command buffer and read when its fence has signalled */
    VkQueryPool query_pool;
    bool timing;
    bool queries_reset;      /* the current command buffer reset the pool first */
    bool query_open;         /* a command's first timestamp is written, its second not yet */
    uint32_t queries_used;   /* timestamps recorded in the current command buffer */
    uint64_t *stamps;        /* BIB_VK_QUERIES results, read back from the pool */
    uint32_t timestamp_bits; /* timestampValidBits of the queue family */
    double timed_ns;         /* busy time of timed work collected since elapsed() */

    /* user programs (vk_programs.c): descriptor sets of VK_COMPUTE dispatches
     * come from their own pool, reset with the command buffer */
    VkDescriptorPool program_pool;
    uint32_t program_sets_used;

    /* memory */
    uint32_t device_type_index;  /* memory type of device-local blocks */
    uint32_t staging_type_index; /* host-visible, coherent */
    VkDeviceSize block_size;     /* growth cap for shared blocks */
    VkDeviceSize max_buffer;     /* largest buffer: maxStorageBufferRange (one binding) */
    bib_vk_block_t *blocks;
    uint32_t block_count, block_cap;
    VkDeviceSize allocated; /* bytes of VM buffers handed out */
    VkDeviceMemory staging_memory;
    VkBuffer staging_buffer;
    VkDeviceSize staging_size;
    VkDeviceSize staging_used; /* bytes of staging reserved by recorded copies */
    uint8_t *staging_map;
};

/* vk_device.c: the executor's lifecycle entries of bib_vulkan_executor */
bib_executor_init_fn bib_vk_init;
bib_executor_shutdown_fn bib_vk_shutdown;
bib_executor_error_fn bib_vk_error;
bib_executor_describe_fn bib_vk_describe;
bib_executor_facts_fn bib_vk_facts;
bib_executor_wait_fn bib_vk_synchronize;
bib_status_t bib_vk_fail(bib_executor_t *ex, bib_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bib_status_t bib_vk_check(bib_executor_t *ex, VkResult r, const char *what);
/* Starts the command buffer if it is not recording yet. */
bib_status_t bib_vk_begin(bib_executor_t *ex);
/* BIB_OK, or BIB_E_STATE with the message when a timeout left the executor
   lost (backend.h, bib_executor_config_t.timeout_ms). */
bib_status_t bib_vk_usable(bib_executor_t *ex);
/* 1 + the index of MATMUL's tile configuration NAME ("64", "128", "128x64",
 * "64x128"), or 0 for none of them. */
int bib_vk_matmul_tiles(const char *name);
/* Submits what is recorded and waits for it (and for earlier submits). */
bib_status_t bib_vk_flush(bib_executor_t *ex);
/* Submits what is recorded without waiting; the next begin or flush waits. */
bib_executor_wait_fn bib_vk_submit;
/* Records a barrier first if an access overlaps a pending one, then notes
 * the accesses. */
void bib_vk_hazard(bib_executor_t *ex, const bib_vk_access_t *acc, uint32_t count);
/* Device timing (--profile). Before starting to record a command that
 * bib_vk_time_begin/end will bracket: flushes when the query pool has no room
 * for two more timestamps, so call it before allocating descriptor sets. */
bib_status_t bib_vk_time_reserve(bib_executor_t *ex);
/* The timestamps around one recorded command (nothing when timing is off). */
void bib_vk_time_begin(bib_executor_t *ex);
void bib_vk_time_end(bib_executor_t *ex);
bib_executor_timing_fn bib_vk_timing;
bib_executor_elapsed_fn bib_vk_elapsed;
/* Records one dispatch of shader `name` with spec[0..spec_count) as
 * specialization constants 1..spec_count (constant 0, the fma path, is filled
 * in here) over buffers bound at 0..4 (bufs[0] and bufs[4], the scratch,
 * are written, the others read; NULL: unused), with the barrier the hazards
 * need. */
bib_status_t bib_vk_dispatch(bib_executor_t *ex, const char *name, const uint32_t *spec,
                             uint32_t spec_count, bib_vk_buffer_t *const *bufs,
                             const bib_vk_push_t *push, uint32_t gx, uint32_t gy, uint32_t gz);

/* vk_memory.c */
bib_status_t bib_vk_memory_init(bib_executor_t *ex);
void bib_vk_memory_shutdown(bib_executor_t *ex);
bib_executor_buffer_alloc_fn bib_vk_buffer_alloc;
bib_executor_buffer_free_fn bib_vk_buffer_free;
bib_executor_upload_fn bib_vk_upload;
bib_executor_download_fn bib_vk_download;
bib_executor_memory_fn bib_vk_memory_query;
VkBuffer bib_vk_block_buffer(bib_executor_t *ex, const bib_vk_buffer_t *b);

/* vk_programs.c: user programs (VK_COMPUTE) */
bib_executor_program_create_fn bib_vk_program_create;
bib_executor_program_dispatch_fn bib_vk_program_dispatch;
bib_executor_program_destroy_fn bib_vk_program_destroy;
/* The command buffer's work has finished: its program descriptor sets are free. */
void bib_vk_programs_reset(bib_executor_t *ex);

/* vk_kernels.c */
bib_executor_supports_fn bib_vk_supports;
/* Runs the probe shader on (x, y, z) triples: out gets fma, mul, add. */
bib_status_t bib_vk_run_probe(bib_executor_t *ex, bib_vk_fma_path_t path, const float *xyz,
                              float *res, uint32_t count);
/* Runs loops.comp on one invocation: a loop of counts[0] iterations (each
 * with a bib_div where divide), then one of counts[1] around one of
 * counts[2]; ran gets the iterations of the first loop and of the inner
 * loop that ran, and the hash. */
bib_status_t bib_vk_run_loops(bib_executor_t *ex, const uint32_t counts[3], bool divide,
                              uint32_t ran[3]);

#endif
