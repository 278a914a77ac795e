/* backends/cuda/cu_args.h: the one kernel parameter block of the CUDA
 * executor, shared by the host (C, cu_kernels.c) and the kernels (CUDA C++,
 * the .cu files in shaders/cuda), so both sides see one layout.
 *
 * Every kernel takes one bib_cu_args_t by value: the host fills it on its
 * stack and passes its address as the launch's only parameter, so a launch
 * allocates nothing. Addresses are device addresses of each view's first
 * element; what n[] and u[] hold is written at each kernel in
 * shaders/cuda. This header owns no code. */
#ifndef BIB_CU_ARGS_H
#define BIB_CU_ARGS_H

#include <stdint.h>

typedef struct bib_cu_args {
    uint64_t out, in0, in1, in2; /* device addresses (bytes); 0 when unused */
    uint64_t scratch;            /* kernel scratch (attention's probabilities); 0 when unused */
    uint64_t n[6];               /* kernel-specific sizes */
    uint32_t u[4];               /* kernel-specific words (float parameters travel as bits) */
    int64_t s[16];               /* kernel-specific signed words (STRIDED's p[]) */
} bib_cu_args_t;

/* Threads of one row group: THE reduction tree's 64 lanes (bmath.h). */
#define BIB_CU_ROW_THREADS 64
/* Attention keeps a (query, head) row of probabilities in shared memory up
 * to this many keys; longer rows go through global scratch. */
#define BIB_CU_ATTN_SMEM_KEYS 8192u

#endif
