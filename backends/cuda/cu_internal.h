/* backends/cuda/cu_internal.h: the CUDA executor's private state.
 *
 * Shared by cu_driver.c (libcuda.so.1 loaded at run time and its entry
 * points), cu_device.c (context, stream, modules, kernel handles, life
 * cycle), cu_memory.c (pooled device memory, pinned staging, transfers),
 * cu_kernels.c (one launch function per kernel, the ops table) and
 * cu_programs.c (user kernels from the module's PTX, for GPU_LAUNCH). cuda.h is
 * used for its types and constants only: nothing links against libcuda.
 * Nothing here is visible to the VM: it sees only bib_cuda_executor. */
#ifndef BIB_CU_INTERNAL_H
#define BIB_CU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "backends/backend.h"
#include "backends/cuda/cu_args.h"
#include "backends/cuda/cuda.h"
#include "backends/suballoc.h"

/* ---- the driver entry points -------------------------------------------
 * X(field, symbol, parameters): resolved with dlsym by the exported symbol
 * name, which carries the _v2 suffix where the driver has one, so the
 * signature is the one cuda.h declares for that version. */
#define BIB_CU_API(X)                                                                              \
    X(GetErrorName, "cuGetErrorName", (CUresult error, const char **str))                          \
    X(Init, "cuInit", (unsigned int flags))                                                        \
    X(DriverGetVersion, "cuDriverGetVersion", (int *version))                                      \
    X(DeviceGetCount, "cuDeviceGetCount", (int *count))                                            \
    X(DeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                                  \
    X(DeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice dev))                       \
    X(DeviceGetAttribute, "cuDeviceGetAttribute",                                                  \
      (int *value, CUdevice_attribute attrib, CUdevice dev))                                       \
    X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, CUdevice dev))                       \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice dev))         \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice dev))                     \
    X(CtxGetCurrent, "cuCtxGetCurrent", (CUcontext * ctx))                                         \
    X(CtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                                           \
    X(StreamCreate, "cuStreamCreate", (CUstream * stream, unsigned int flags))                     \
    X(StreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                      \
    X(StreamSynchronize, "cuStreamSynchronize", (CUstream stream))                                 \
    X(StreamQuery, "cuStreamQuery", (CUstream stream))                                             \
    X(ModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void *image))                  \
    X(ModuleLoadDataEx, "cuModuleLoadDataEx",                                                      \
      (CUmodule * module, const void *image, unsigned int count, CUjit_option *options,            \
       void **values))                                                                             \
    X(ModuleUnload, "cuModuleUnload", (CUmodule module))                                           \
    X(ModuleGetFunction, "cuModuleGetFunction",                                                    \
      (CUfunction * function, CUmodule module, const char *name))                                  \
    X(FuncGetAttribute, "cuFuncGetAttribute",                                                      \
      (int *value, CUfunction_attribute attrib, CUfunction function))                              \
    X(FuncSetAttribute, "cuFuncSetAttribute",                                                      \
      (CUfunction function, CUfunction_attribute attrib, int value))                               \
    X(LaunchKernel, "cuLaunchKernel",                                                              \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,           \
       unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params,      \
       void **extra))                                                                              \
    X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr * ptr, size_t bytes))                                \
    X(MemFree, "cuMemFree_v2", (CUdeviceptr ptr))                                                  \
    X(MemGetInfo, "cuMemGetInfo_v2", (size_t * free_bytes, size_t * total_bytes))                  \
    X(MemHostAlloc, "cuMemHostAlloc", (void **ptr, size_t bytes, unsigned int flags))              \
    X(MemFreeHost, "cuMemFreeHost", (void *ptr))                                                   \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                     \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                           \
    X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                     \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                                 \
    X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                     \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                           \
    X(MemsetD32Async, "cuMemsetD32Async",                                                          \
      (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream))

/* Entry points only the device timer (--profile) uses: X(field, symbol,
 * older symbol, parameters). A driver without one still runs everything
 * else, and its field stays NULL; where a newer driver renamed one (the _v2
 * of cuEventElapsedTime, CUDA 12.8) the older name, same signature, is
 * tried next (NULL: none). */
#define BIB_CU_API_TIMING(X)                                                                       \
    X(EventCreate, "cuEventCreate", NULL, (CUevent * event, unsigned int flags))                   \
    X(EventRecord, "cuEventRecord", NULL, (CUevent event, CUstream stream))                        \
    X(EventSynchronize, "cuEventSynchronize", NULL, (CUevent event))                               \
    X(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime",                             \
      (float *ms, CUevent start, CUevent end))                                                     \
    X(EventDestroy, "cuEventDestroy_v2", NULL, (CUevent event))

typedef struct bib_cu_api {
    void *library; /* dlopen handle */
#define BIB_CU_API_FIELD(field, symbol, params) CUresult(CUDAAPI *field) params;
    BIB_CU_API(BIB_CU_API_FIELD)
#undef BIB_CU_API_FIELD
#define BIB_CU_API_TIMING_FIELD(field, symbol, older, params) CUresult(CUDAAPI *field) params;
    BIB_CU_API_TIMING(BIB_CU_API_TIMING_FIELD)
#undef BIB_CU_API_TIMING_FIELD
} bib_cu_api_t;

/* ---- kernels -------------------------------------------------------------
 * X(id, module, symbol): every kernel of shaders/cuda, looked up once at
 * init. The module is the .cu file's name (one embedded fatbin each). The
 * unary kernels come first, one per elementwise unary opcode, from
 * cu_unary_rows.h (module "elementwise"). */
#define BIB_CU_FUNCTIONS(X)                                                                        \
    X(MATMUL_BIG_VEC_NONE, "matmul", "bib_matmul_big_vec_none")                                    \
    X(MATMUL_BIG_VEC_RELU, "matmul", "bib_matmul_big_vec_relu")                                    \
    X(MATMUL_BIG_VEC_GELU, "matmul", "bib_matmul_big_vec_gelu")                                    \
    X(MATMUL_BIG_VEC_GELU_ERF, "matmul", "bib_matmul_big_vec_gelu_erf")                            \
    X(MATMUL_BIG_ANY_NONE, "matmul", "bib_matmul_big_any_none")                                    \
    X(MATMUL_BIG_ANY_RELU, "matmul", "bib_matmul_big_any_relu")                                    \
    X(MATMUL_BIG_ANY_GELU, "matmul", "bib_matmul_big_any_gelu")                                    \
    X(MATMUL_BIG_ANY_GELU_ERF, "matmul", "bib_matmul_big_any_gelu_erf")                            \
    X(MATMUL_SMALL_VEC_NONE, "matmul", "bib_matmul_small_vec_none")                                \
    X(MATMUL_SMALL_VEC_RELU, "matmul", "bib_matmul_small_vec_relu")                                \
    X(MATMUL_SMALL_VEC_GELU, "matmul", "bib_matmul_small_vec_gelu")                                \
    X(MATMUL_SMALL_VEC_GELU_ERF, "matmul", "bib_matmul_small_vec_gelu_erf")                        \
    X(MATMUL_SMALL_ANY_NONE, "matmul", "bib_matmul_small_any_none")                                \
    X(MATMUL_SMALL_ANY_RELU, "matmul", "bib_matmul_small_any_relu")                                \
    X(MATMUL_SMALL_ANY_GELU, "matmul", "bib_matmul_small_any_gelu")                                \
    X(MATMUL_SMALL_ANY_GELU_ERF, "matmul", "bib_matmul_small_any_gelu_erf")                        \
    X(MATMUL_TUNE_BK8, "matmul", "bib_matmul_tune_bk8_vec_none")                                   \
    X(MATMUL_TUNE_M256, "matmul", "bib_matmul_tune_m256_vec_none")                                 \
    X(MATMUL_TUNE_K16S3, "matmul", "bib_matmul_tune_k16s3_vec_none")                               \
    X(MATMUL_TUNE_K32, "matmul", "bib_matmul_tune_k32_vec_none")                                   \
    X(MATMUL_TUNE_M256K16, "matmul", "bib_matmul_tune_m256k16_vec_none")                           \
    X(SCALE, "elementwise", "bib_scale")                                                           \
    X(BINARY_ADD_SAME, "elementwise", "bib_binary_add_same")                                       \
    X(BINARY_ADD_ROW, "elementwise", "bib_binary_add_row")                                         \
    X(BINARY_ADD_ONE, "elementwise", "bib_binary_add_one")                                         \
    X(BINARY_SUB_SAME, "elementwise", "bib_binary_sub_same")                                       \
    X(BINARY_SUB_ROW, "elementwise", "bib_binary_sub_row")                                         \
    X(BINARY_SUB_ONE, "elementwise", "bib_binary_sub_one")                                         \
    X(BINARY_MUL_SAME, "elementwise", "bib_binary_mul_same")                                       \
    X(BINARY_MUL_ROW, "elementwise", "bib_binary_mul_row")                                         \
    X(BINARY_MUL_ONE, "elementwise", "bib_binary_mul_one")                                         \
    X(BINARY_DIV_SAME, "elementwise", "bib_binary_div_same")                                       \
    X(BINARY_DIV_ROW, "elementwise", "bib_binary_div_row")                                         \
    X(BINARY_DIV_ONE, "elementwise", "bib_binary_div_one")                                         \
    X(BINARY_POW_SAME, "elementwise", "bib_binary_pow_same")                                       \
    X(BINARY_POW_ROW, "elementwise", "bib_binary_pow_row")                                         \
    X(BINARY_POW_ONE, "elementwise", "bib_binary_pow_one")                                         \
    X(BINARY_MIN_SAME, "elementwise", "bib_binary_min_same")                                       \
    X(BINARY_MIN_ROW, "elementwise", "bib_binary_min_row")                                         \
    X(BINARY_MIN_ONE, "elementwise", "bib_binary_min_one")                                         \
    X(BINARY_MAX_SAME, "elementwise", "bib_binary_max_same")                                       \
    X(BINARY_MAX_ROW, "elementwise", "bib_binary_max_row")                                         \
    X(BINARY_MAX_ONE, "elementwise", "bib_binary_max_one")                                         \
    X(TRANSPOSE, "elementwise", "bib_transpose")                                                   \
    X(GATHER, "elementwise", "bib_gather")                                                         \
    X(RNG, "elementwise", "bib_rng")                                                               \
    X(STRIDED, "elementwise", "bib_strided")                                                       \
    X(TAKE, "elementwise", "bib_take")                                                             \
    X(SOFTMAX_S, "rows", "bib_softmax_s")                                                          \
    X(SOFTMAX_R1, "rows", "bib_softmax_r1")                                                        \
    X(SOFTMAX_R2, "rows", "bib_softmax_r2")                                                        \
    X(SOFTMAX_R4, "rows", "bib_softmax_r4")                                                        \
    X(SOFTMAX_R8, "rows", "bib_softmax_r8")                                                        \
    X(SOFTMAX_R16, "rows", "bib_softmax_r16")                                                      \
    X(SOFTMAX_R32, "rows", "bib_softmax_r32")                                                      \
    X(SOFTMAX_R64, "rows", "bib_softmax_r64")                                                      \
    X(LOGSOFTMAX_S, "rows", "bib_logsoftmax_s")                                                    \
    X(LOGSOFTMAX_R1, "rows", "bib_logsoftmax_r1")                                                  \
    X(LOGSOFTMAX_R2, "rows", "bib_logsoftmax_r2")                                                  \
    X(LOGSOFTMAX_R4, "rows", "bib_logsoftmax_r4")                                                  \
    X(LOGSOFTMAX_R8, "rows", "bib_logsoftmax_r8")                                                  \
    X(LOGSOFTMAX_R16, "rows", "bib_logsoftmax_r16")                                                \
    X(LOGSOFTMAX_R32, "rows", "bib_logsoftmax_r32")                                                \
    X(LOGSOFTMAX_R64, "rows", "bib_logsoftmax_r64")                                                \
    X(REDUCE_SUM, "rows", "bib_reduce_sum")                                                        \
    X(REDUCE_MAX, "rows", "bib_reduce_max")                                                        \
    X(REDUCE_MEAN, "rows", "bib_reduce_mean")                                                      \
    X(REDUCE_MIN, "rows", "bib_reduce_min")                                                        \
    X(REDUCE_PROD, "rows", "bib_reduce_prod")                                                      \
    X(ARGMAX, "rows", "bib_argmax")                                                                \
    X(ARGSORT, "rows", "bib_argsort")                                                              \
    X(CUMSUM, "rows", "bib_cumsum")                                                                \
    X(LAYERNORM, "rows", "bib_layernorm")                                                          \
    X(RMSNORM, "rows", "bib_rmsnorm")                                                              \
    X(ATTENTION, "attention", "bib_attention")                                                     \
    X(CAST, "dtypes", "bib_cast")                                                                  \
    X(COMPARE, "dtypes", "bib_compare")                                                            \
    X(WHERE, "dtypes", "bib_where")                                                                \
    X(LOGIC, "dtypes", "bib_logic")                                                                \
    X(BINARY_I32, "dtypes", "bib_binary_i32")                                                      \
    X(UNARY_I32, "dtypes", "bib_unary_i32")                                                        \
    X(CONV, "conv", "bib_conv")                                                                    \
    X(POOL_MAX, "conv", "bib_pool_max")                                                            \
    X(POOL_AVG, "conv", "bib_pool_avg")                                                            \
    X(POOL_AVG_PAD, "conv", "bib_pool_avg_pad")                                                    \
    X(BATCHNORM, "conv", "bib_batchnorm")                                                          \
    X(BATCHNORM_RELU, "conv", "bib_batchnorm_relu")

typedef enum bib_cu_fn {
#define BIB_CU_UNARY_ROW(id, symbol) BIB_CU_FN_##id,
#include "backends/cuda/cu_unary_rows.h"
#undef BIB_CU_UNARY_ROW
#define BIB_CU_FN_ENUM(id, module, symbol) BIB_CU_FN_##id,
    BIB_CU_FUNCTIONS(BIB_CU_FN_ENUM)
#undef BIB_CU_FN_ENUM
        BIB_CU_FN__COUNT
} bib_cu_fn_t;

/* The embedded fatbins (generated by cuda.mk from the .cu files in shaders/cuda). */
typedef struct bib_cu_fatbin {
    const char *name;      /* the .cu file's name without .cu */
    const uint64_t *image; /* 8-byte aligned, as cuModuleLoadData wants */
    size_t bytes;
} bib_cu_fatbin_t;

/* Terminated by an entry whose name is NULL. */
extern const bib_cu_fatbin_t bib_cu_fatbins[];

#define BIB_CU_MAX_MODULES 8

/* ---- memory --------------------------------------------------------------- */

/* One cuMemAlloc; VM buffers are sub-ranges of blocks. */
typedef struct bib_cu_block {
    CUdeviceptr base;      /* 0: released to the driver, the slot is free */
    bib_suballoc_t ranges; /* offsets from base; ranges.size is the block's size */
} bib_cu_block_t;

/* The handle behind a bib_view_t's buf. */
typedef struct bib_cu_buffer {
    uint32_t block;
    size_t offset; /* bytes from the start of the block */
    size_t size;   /* rounded up to the pool's alignment */
    CUdeviceptr ptr;
} bib_cu_buffer_t;

struct bib_executor {
    char error[512];
    char describe[512];
    bib_device_facts_t facts;
    bib_cu_api_t api;

    /* device */
    CUdevice device;
    int ordinal;
    CUcontext ctx; /* the device's primary context, retained */
    CUstream stream;
    char name[256];
    int cc_major, cc_minor, sm_count, driver_version;
    size_t total_memory;

    /* kernels */
    CUmodule modules[BIB_CU_MAX_MODULES];
    uint32_t module_count;
    CUfunction fn[BIB_CU_FN__COUNT];
    int binary_version;     /* what the driver loaded: SASS arch, or PTX JIT target */
    int matmul_tiles;       /* 0: by problem size; 64 or 128: forced (BIB_CUDA_MATMUL_TILES) */
    int matmul_tune;        /* 0, or a BIB_CU_FN_MATMUL_TUNE_* kernel for float4 MATMULs without
                               an activation (BIB_CUDA_MATMUL_TILES=bk8|m256|k16s3|k32|m256k16) */
    uint32_t matmul_tune_m; /* its tile's rows */
    uint32_t matmul_tune_shared; /* its dynamic shared memory in bytes, 0 for none */
    bool matmul_tune_opted;      /* cuFuncSetAttribute has allowed it that much */

    /* memory */
    bib_cu_block_t *blocks;
    uint32_t block_count, block_cap;
    size_t in_use; /* bytes of VM buffers handed out */
    void *staging; /* pinned host memory (cuMemHostAlloc) */
    size_t staging_size;
    size_t staging_used; /* bytes claimed by copies queued since the last wait */
    uint64_t launches;   /* kernels and transfer commands queued so far */
    uint64_t waits;      /* stream synchronizations so far */
    uint64_t timeout_ms; /* config.timeout_ms: the longest wait for the stream; 0 means none */
    bool lost;           /* a wait timed out: the work may still run, nothing touches the device */

    /* device timing (--profile): a pair of events around every timed
     * command, events[2i] before and events[2i+1] after; created on first
     * need and reused once elapsed has read them */
    bool timing;
    CUevent *events;
    uint32_t events_made, events_cap; /* created; room in the array */
    uint32_t events_used;             /* recorded since they were last read */
    double timed_ms;                  /* read but not yet returned by elapsed */
};

/* cu_driver.c */
/* Loads the driver library (BIB_CUDA_LIBRARY or libcuda.so.1) and resolves
 * every entry point. On failure writes why and returns BIB_E_UNAVAILABLE;
 * api is then unloaded. */
bib_status_t bib_cu_api_load(bib_cu_api_t *api, char *why, size_t why_len);
void bib_cu_api_unload(bib_cu_api_t *api);
/* "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult 2" when the driver cannot name it. */
const char *bib_cu_error_name(const bib_cu_api_t *api, CUresult r, char *buf, size_t len);

/* cu_device.c */
bib_executor_init_fn bib_cu_init;
bib_executor_shutdown_fn bib_cu_shutdown;
bib_executor_error_fn bib_cu_error;
bib_executor_describe_fn bib_cu_describe;
bib_executor_facts_fn bib_cu_facts;
bib_executor_wait_fn bib_cu_synchronize;
bib_status_t bib_cu_fail(bib_executor_t *ex, bib_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* BIB_OK for CUDA_SUCCESS; otherwise writes "<call>: <CUDA_ERROR_NAME>" and
 * returns BIB_E_NOMEM for out-of-memory errors, BIB_E_UNAVAILABLE for the
 * rest. call is a printf format for the call's text. */
bib_status_t bib_cu_check(bib_executor_t *ex, CUresult r, const char *call_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Makes the executor's context current on the calling thread. */
bib_status_t bib_cu_enter(bib_executor_t *ex);
/* Waits for everything queued on the stream, for at most config.timeout_ms
 * (BIB_E_TIMEOUT past it, and the executor is lost); the staging memory is
 * free again. Fails with BIB_E_STATE once the executor is lost (bib_cu_enter
 * too). */
bib_status_t bib_cu_wait(bib_executor_t *ex);
/* Device timing: bib_cu_time_begin records the event before a command
 * queued on the stream, bib_cu_time_end the one after it (nothing when
 * timing is off). An error of begin is the executor's: the command is not
 * queued. */
bib_status_t bib_cu_time_begin(bib_executor_t *ex);
void bib_cu_time_end(bib_executor_t *ex);
bib_executor_timing_fn bib_cu_timing;
bib_executor_elapsed_fn bib_cu_elapsed;
/* Queues fn over grid x block threads with dynamic shared bytes and args. */
bib_status_t bib_cu_launch(bib_executor_t *ex, bib_cu_fn_t fn, uint32_t gx, uint32_t gy,
                           uint32_t gz, uint32_t bx, uint32_t by, uint32_t shared,
                           const bib_cu_args_t *args);
extern const char *const bib_cu_fn_names[BIB_CU_FN__COUNT];

/* cu_memory.c */
bib_status_t bib_cu_memory_init(bib_executor_t *ex);
void bib_cu_memory_shutdown(bib_executor_t *ex);
bib_executor_buffer_alloc_fn bib_cu_buffer_alloc;
bib_executor_buffer_free_fn bib_cu_buffer_free;
bib_executor_upload_fn bib_cu_upload;
bib_executor_download_fn bib_cu_download;
bib_executor_memory_fn bib_cu_memory_query;

/* cu_kernels.c */
bib_executor_supports_fn bib_cu_supports;

/* cu_programs.c: user kernels (GPU_LAUNCH, spec/device-code.md). */
bib_executor_program_create_fn bib_cu_program_create;
bib_executor_program_dispatch_fn bib_cu_program_dispatch;
bib_executor_program_destroy_fn bib_cu_program_destroy;
bib_executor_wait_fn bib_cu_submit;

#endif
