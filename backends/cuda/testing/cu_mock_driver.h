/* backends/cuda/testing/cu_mock_driver.h: what the mock CUDA driver records.
 *
 * The mock (cu_mock_driver.c, built as $(BUILD)/tests/libcuda_mock.so by
 * backends/cuda/cuda.mk) stands in for libcuda.so.1 through
 * BIB_CUDA_LIBRARY, so the CUDA executor's host logic (parameter marshalling,
 * error messages, module life cycle) is tested on machines without a GPU.
 * It is a test double only: it computes no built-in kernel, and of user
 * kernels it runs only "saxpy" (tests and examples/gpu_custom.basm), on host
 * memory. A test reads its state with dlsym(handle, "bib_mock_cuda"). */
#ifndef BIB_CU_MOCK_DRIVER_H
#define BIB_CU_MOCK_DRIVER_H

#include <stdint.h>

#define BIB_MOCK_CUDA_PARAMS 32

typedef struct bib_mock_cuda {
    int modules_live;    /* cuModuleLoadData* minus cuModuleUnload */
    int stream_syncs;    /* cuStreamSynchronize calls */
    int stream_queries;  /* cuStreamQuery calls */
    int launches;        /* cuLaunchKernel calls that succeeded */
    int fail_launch;     /* when nonzero, cuLaunchKernel returns it */
    int stream_busy;     /* > 0: the next stream_busy cuStreamQuery calls say NOT_READY;
                            -1: the stream never finishes (every query says NOT_READY).
                            BIB_MOCK_CUDA_STREAM_BUSY=1 in the environment sets -1 at cuInit */
    char last_entry[64]; /* the last launched function's name */
    unsigned grid[3], block[3], shared;
    void *stream;     /* the stream of the last launch */
    unsigned nparams; /* parameters of the last launch, from its PTX */
    unsigned param_size[BIB_MOCK_CUDA_PARAMS];
    uint8_t param[BIB_MOCK_CUDA_PARAMS][8]; /* their bytes, as the driver copied them */
    /* Events (the device timer): an event records the mock device clock,
     * which each cuLaunchKernel advances by 1 ms and each copy or memset by
     * 0.5 ms, so the time between two events is exact. */
    int events_live;       /* cuEventCreate minus cuEventDestroy */
    int event_records;     /* cuEventRecord calls that succeeded */
    int fail_event_record; /* when nonzero, cuEventRecord returns it */
} bib_mock_cuda_t;

#endif
