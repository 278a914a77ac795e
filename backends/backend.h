/* backends/backend.h: the executor interface.
 *
 * Every executor (cpu, vulkan, cuda) fills one bib_executor_ops_t. The VM
 * dispatches tensor opcodes through it and knows no Vulkan or CUDA type. All
 * executors obey spec/numerics.md, so every kernel gives the same bits on
 * every executor; the CPU executor's scalar reference defines those bits.
 *
 * Buffers are opaque handles owned by the executor that made them. Tensors
 * are passed to kernels as views (buffer + element offset + shape), always
 * contiguous and row-major. The VM, not the executor, decides where a
 * tensor's valid copy lives and moves it with upload/download.
 */
#ifndef BIB_BACKEND_H
#define BIB_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"
#include "isa/kernels.h"

/* bib_dtype_t and BIB_MAX_RANK come from include/bib.h. */

/* A tensor as a kernel sees it. */
typedef struct bib_view {
    void *buf;      /* executor buffer handle (the CPU executor: the host pointer) */
    size_t offset;  /* in elements, from the start of buf */
    uint32_t dtype; /* bib_dtype_t */
    uint32_t rank;  /* 0..BIB_MAX_RANK; rank 0 is a scalar */
    uint32_t dims[BIB_MAX_RANK];
} bib_view_t;

/* Executor operations: bib_kernel_t, the sub-operation enums and each
 * kernel's descriptor (dtypes, shape rule, cost, the executors that have it)
 * come from isa/kernels.def through isa/kernels.h. */

/* The integer parameters a call can carry beyond i[] (bib_call_t.p). */
#define BIB_CALL_PARAMS 16

/* One kernel invocation. Shapes have been checked by the VM before the call. */
typedef struct bib_call {
    bib_kernel_t kernel;
    uint32_t sub; /* below bib_kernel_table[kernel].subs: bib_act_t, bib_unary_t, ... */
    bib_view_t out;
    bib_view_t in[3]; /* unused inputs have buf == NULL */
    float f[2];
    int64_t i[2];
    int64_t p[BIB_CALL_PARAMS]; /* the kernel's own integer parameters (axes, strides, pads: its
                                   row in isa/kernels.def says which); zero when unused */
} bib_call_t;

typedef struct bib_executor bib_executor_t; /* each executor's own state */

/* The code a user device program is written in (program_create). */
typedef enum bib_program_kind {
    BIB_PROGRAM_SPIRV = 1, /* a Vulkan compute shader */
    BIB_PROGRAM_PTX = 2,   /* a CUDA kernel */
} bib_program_kind_t;

typedef struct bib_executor_config {
    uint32_t threads;    /* CPU worker threads; 0 means one per core */
    const char *device;  /* device selector for GPU executors; NULL means the best one */
    bool validation;     /* GPU executors: enable validation layers / extra checks */
    uint64_t timeout_ms; /* GPU executors: the longest one wait for device work may take; 0: no
                            limit. A wait that runs past it returns BIB_E_TIMEOUT and leaves the
                            executor lost: the work may still be running, so from then on every
                            call that would touch the device fails with BIB_E_STATE, buffer_free
                            and program_destroy release nothing the device may still use, and
                            shutdown abandons (leaks) what it cannot destroy without waiting.
                            Neither the work nor the process is ever waited for without bound */
} bib_executor_config_t;

/* What a device is and how it computes, field by field (`bib info --json`).
 * A string is "" and a number 0 where the executor does not know. */
typedef struct bib_device_facts {
    char name[256];
    char kind[32];                /* "discrete GPU", "integrated GPU", "CPU" (lavapipe)... */
    char fma[224];                /* how fma is computed: "native (fused, probed)"... */
    char denormals[192];          /* "preserved (probed)", "flushed"... */
    char rounding[96];            /* "nearest-even (probed)"... */
    int fp64;                     /* 1: the device computes f64 */
    uint64_t memory_bytes;        /* device memory */
    uint64_t max_buffer_bytes;    /* the largest buffer a tensor may take */
    uint32_t max_workgroup;       /* threads in one workgroup (block) at most */
    uint64_t shared_memory_bytes; /* workgroup (block) shared memory */
    uint32_t compute_units;       /* SMs (CUDA); 0 where not reported */
    uint32_t max_threads;         /* the CPU executor's thread cap */
    uint32_t loop_limit;          /* loop iterations an invocation may run; 0: none found */
} bib_device_facts_t;

/* What the host machine offers the CPU executor, for `bib info` (the
 * host_facts slot): its instruction-set features, whether the OS saves the
 * wide registers, and the kernel level the executor would run at. */
typedef struct bib_host_facts {
    const char *features[16]; /* the features it can use ("avx2", "fma", ...) */
    uint32_t nfeatures;
    bool os_saves_ymm, os_saves_zmm;
    bool level_ok;          /* level names the kernel level; else it says why there is none */
    char level[200];        /* "avx2", or why the forced level cannot be used */
    const char *best_level; /* the best level this CPU supports */
} bib_host_facts_t;

/* The slots' function types, so that an executor declares the functions
 * it fills them with by type (`bib_executor_upload_fn bib_cu_upload;`) and
 * each signature is written here once. */
typedef bib_status_t bib_executor_init_fn(const bib_executor_config_t *config, bib_executor_t **out,
                                          char *why, size_t why_len);
typedef void bib_executor_shutdown_fn(bib_executor_t *ex);
typedef const char *bib_executor_error_fn(const bib_executor_t *ex);
typedef bib_status_t bib_executor_buffer_alloc_fn(bib_executor_t *ex, size_t bytes, void **buf);
typedef void bib_executor_buffer_free_fn(bib_executor_t *ex, void *buf);
typedef bib_status_t bib_executor_upload_fn(bib_executor_t *ex, void *buf, size_t offset_bytes,
                                            const void *src, size_t bytes);
typedef bib_status_t bib_executor_download_fn(bib_executor_t *ex, void *buf, size_t offset_bytes,
                                              void *dst, size_t bytes);
/* synchronize and submit */
typedef bib_status_t bib_executor_wait_fn(bib_executor_t *ex);
typedef bib_status_t bib_executor_memory_fn(bib_executor_t *ex, uint64_t *free_bytes,
                                            uint64_t *total_bytes);
typedef bool bib_executor_supports_fn(bib_executor_t *ex, const bib_call_t *call);
typedef bib_status_t bib_executor_kernel_fn(bib_executor_t *ex, const bib_call_t *call);
typedef const char *bib_executor_describe_fn(bib_executor_t *ex);
typedef void bib_executor_facts_fn(bib_executor_t *ex, bib_device_facts_t *out);
typedef void bib_executor_host_facts_fn(bib_host_facts_t *facts);
typedef bib_status_t bib_executor_program_create_fn(bib_executor_t *ex, bib_program_kind_t kind,
                                                    const void *code, size_t size,
                                                    const char *entry, uint32_t bindings,
                                                    uint32_t push_bytes, const char *signature,
                                                    void **prog);
typedef bib_status_t bib_executor_program_dispatch_fn(bib_executor_t *ex, void *prog,
                                                      void *const *buffers, const uint64_t *sizes,
                                                      uint32_t nbuffers, const void *push,
                                                      uint32_t push_bytes, const uint32_t groups[3],
                                                      const uint32_t block[3]);
typedef void bib_executor_program_destroy_fn(bib_executor_t *ex, void *prog);
typedef bib_status_t bib_executor_timing_fn(bib_executor_t *ex, bool on);
typedef bib_status_t bib_executor_elapsed_fn(bib_executor_t *ex, double *ms);

typedef struct bib_executor_ops {
    const char *name;     /* "cpu", "vulkan", "cuda" */
    bib_executor_id_t id; /* its column in isa/kernels.def */

    /* Probes and starts the executor. When it cannot run here it returns
     * BIB_E_UNAVAILABLE and writes why ("no Vulkan loader", "no device") to
     * why[0..why_len). The caller owns *out and ends it with shutdown. */
    bib_executor_init_fn *init;
    bib_executor_shutdown_fn *shutdown;

    /* The last error's one-line message. */
    bib_executor_error_fn *error;

    bib_executor_buffer_alloc_fn *buffer_alloc;
    bib_executor_buffer_free_fn *buffer_free;
    bib_executor_upload_fn *upload;
    bib_executor_download_fn *download;

    /* Waits until every recorded kernel has finished. */
    bib_executor_wait_fn *synchronize;
    bib_executor_memory_fn *memory;

    /* Whether this executor runs the call at all: its device limits (grid
     * sizes, index widths, buffer ranges) on shapes the VM has checked, for a
     * kernel the descriptor says it has. */
    bib_executor_supports_fn *supports;
    /* One entry per kernel: runs (or records) the call. Exactly the kernels
     * whose EXECUTORS column in isa/kernels.def names this executor have an
     * entry, the others NULL; tools/isa-gen.c fails the build otherwise. The
     * VM sends a call for a kernel this executor lacks to the CPU executor
     * (bib_kernel_runs_on), never here. */
    bib_executor_kernel_fn *kernels[BIB_KERNEL__COUNT];

    /* Optional (may be NULL): a line describing the device and its numerics
     * paths, for `bib info`. */
    bib_executor_describe_fn *describe;
    /* Optional (may be NULL): the same facts one by one, for `bib info
     * --json`. */
    bib_executor_facts_fn *facts;

    /* Optional (NULL but for the CPU executor): the host's facts for `bib
     * info`, without starting the executor. */
    bib_executor_host_facts_fn *host_facts;

    /* Optional (NULL when unsupported): user device programs carried in the
     * module (spec/device-code.md), run by VK_COMPUTE and GPU_LAUNCH.
     * program_create compiles code (SPIR-V words for BIB_PROGRAM_SPIRV, PTX
     * text with its NUL for BIB_PROGRAM_PTX) once; *prog belongs to the
     * executor until program_destroy. bindings is the shader's storage-buffer
     * count and push_bytes its push-constant size (SPIR-V); signature is the
     * kernel's parameter letters (PTX; NULL for SPIR-V). */
    bib_executor_program_create_fn *program_create;
    /* Records (or launches) one run of prog. buffers are this executor's
     * buffers: a shader's bindings 0..nbuffers-1, a kernel's t parameters in
     * order; sizes[i] is the bytes of buffers[i] the program may use. push holds a shader's push
     * constants (push_bytes), or a kernel's other parameters as one 8-byte little-endian slot each,
     * in order. groups: workgroups (SPIR-V) or the grid (PTX); block: the CUDA block (NULL for
     * SPIR-V). Ordered after earlier work on this executor. */
    bib_executor_program_dispatch_fn *program_dispatch;
    bib_executor_program_destroy_fn *program_destroy;
    /* Optional: starts the recorded work without waiting for it
     * (synchronize waits). */
    bib_executor_wait_fn *submit;

    /* Optional (NULL when unsupported): the device's own clock (--profile).
     * timing(ex, true) starts timing every kernel and program dispatch
     * recorded from then on and zeroes the elapsed time; it returns
     * BIB_E_UNAVAILABLE, with error() saying why, on a device that has no
     * timer (a Vulkan queue whose timestampValidBits is 0). timing(ex, false)
     * stops it. elapsed writes the device time, in milliseconds, of the timed
     * work that has finished since its last call and starts counting again
     * from zero: call it after synchronize to have everything recorded so
     * far. Overlapping work is counted once (the time the device was busy
     * with it); copies between host and device are not included. */
    bib_executor_timing_fn *timing;
    bib_executor_elapsed_fn *elapsed;
} bib_executor_ops_t;

extern const bib_executor_ops_t bib_cpu_executor;

/* The executors compiled into this build (backends/executors.c): the CPU
 * executor first, then GPU executors in order of preference (CUDA, Vulkan). */
uint32_t bib_executor_count(void);
const bib_executor_ops_t *bib_executor_at(uint32_t index);
/* The executor called name, or NULL when this build has none. */
const bib_executor_ops_t *bib_executor_find(const char *name);
/* Whether a GPU executor's device number index, called name, is the one a
 * non-empty selector (bib_executor_config_t.device) names: its index when
 * the selector is all digits, else any device whose name contains it,
 * ignoring case. */
bool bib_device_selector_matches(const char *selector, uint32_t index, const char *name);

#endif
