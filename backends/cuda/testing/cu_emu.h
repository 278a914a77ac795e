/* backends/cuda/testing/cu_emu.h: the CUDA dialect of shaders/cuda on the
 * host, for the kernel emulator (tests only).
 *
 * g++ compiles the real kernel sources, shaders/cuda/<name>.cu, with this header
 * forced in first (-include) and BIB_CU_EMULATE defined (cuda.mk builds
 * $(BUILD)/tests/libcuda_emu.so from them, the mock driver and
 * cu_emu_sched.cpp). Each CUDA thread of a launch is a fiber of
 * cu_emu_sched.cpp; what the kernels use of CUDA maps to:
 *
 *   threadIdx, blockIdx, blockDim, gridDim   globals the scheduler sets
 *                        before it resumes a fiber (one fiber runs at a time)
 *   __syncthreads, __shfl_down_sync           scheduler barriers, which abort
 *                        on a barrier some threads cannot reach
 *   __shared__           a static without initializer, so in .bss, which
 *                        cuda.mk renames to section "bib_cu_shared" (kernels
 *                        are compiled with -fno-zero-initialized-in-bss, so
 *                        that a __device__ global, which has an initializer,
 *                        stays out of it). The scheduler poisons that
 *                        section before every block: shared memory starts as
 *                        garbage on a GPU, and a kernel that reads what it
 *                        did not write must give wrong bits, not lucky zeros.
 *                        (GCC ignores section attributes on the statics of
 *                        function templates, hence the renaming.)
 *   __fadd_rn, __fmaf_rn, ...  the IEEE binary32 operation each one names:
 *                        SSE arithmetic, fmaf, sqrtf (built with
 *                        -ffp-contract=off -fno-fast-math, so nothing fuses)
 *   cp.async             bib_cu_emu_cp_async / _commit / _wait, called by the
 *                        kernels' BIB_CU_EMULATE branches (shaders/cuda)
 *   dynamic shared memory  bib_cu_emu_dynamic_shared (common.cuh's
 *                        BIB_CU_DYNAMIC_SHARED)
 *
 * Only what shaders/cuda uses is here: a kernel that uses more fails to
 * compile in the emulator build, which is the point. Not for nvcc, and not
 * part of libbib. */
#ifndef BIB_CU_EMU_H
#define BIB_CU_EMU_H

#ifndef __cplusplus
#error "cu_emu.h is for the g++ build of shaders/cuda/<name>.cu"
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
};

/* The running fiber's coordinates and its launch's shape. */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
/* One block runs at a time, so one static copy per variable is the block's
 * shared memory (see the top of this file for how it is found). */
#define __shared__ static
/* Constant memory: a host array (the declarations say static themselves). */
#define __constant__

struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
    return float4{x, y, z, w};
}

/* Scheduler entry points (cu_emu_sched.cpp). */
void bib_cu_emu_syncthreads(const char *file, int line);
uint32_t bib_cu_emu_shfl_down(uint32_t mask, uint32_t value, int delta);
void *bib_cu_emu_dynamic_shared(void);
void bib_cu_emu_cp_async(void *dst, const void *src, int bytes);
void bib_cu_emu_cp_commit(void);
void bib_cu_emu_cp_wait(int pending);

/* Where it is written, so that threads at different __syncthreads of the
 * source are told apart (return addresses would not do: the compiler may
 * duplicate one call into several places). */
#define __syncthreads() bib_cu_emu_syncthreads(__FILE__, __LINE__)

/* Correctly rounded binary32 operations, round to nearest even: what the
 * _rn intrinsics are on the device. */
inline float __fadd_rn(float a, float b) {
    return a + b;
}
inline float __fsub_rn(float a, float b) {
    return a - b;
}
inline float __fmul_rn(float a, float b) {
    return a * b;
}
inline float __fdiv_rn(float a, float b) {
    return a / b;
}
inline float __fsqrt_rn(float a) {
    return sqrtf(a);
}
inline float __fmaf_rn(float a, float b, float c) {
    return fmaf(a, b, c);
}

inline uint32_t __float_as_uint(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
inline float __uint_as_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
inline int32_t __float_as_int(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i;
}
inline float __int_as_float(int32_t i) {
    float x;
    memcpy(&x, &i, sizeof x);
    return x;
}
/* The kernels convert only floats in int range (truncated toward zero). */
inline int __float2int_rz(float x) {
    return static_cast<int>(x);
}
/* Round to nearest even: the host's mode, never changed. */
inline float __int2float_rn(int x) {
    return static_cast<float>(x);
}
/* Exact for the 24-bit values the kernels convert. */
inline float __uint2float_rn(uint32_t x) {
    return static_cast<float>(x);
}
/* Leading zeros of x (32 for 0). */
inline int __clz(uint32_t x) {
    return x ? __builtin_clz(x) : 32;
}
inline uint32_t __umulhi(uint32_t a, uint32_t b) {
    return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

inline int max(int a, int b) {
    return a > b ? a : b;
}
inline unsigned max(unsigned a, unsigned b) {
    return a > b ? a : b;
}
inline int min(int a, int b) {
    return a < b ? a : b;
}
inline unsigned min(unsigned a, unsigned b) {
    return a < b ? a : b;
}

inline uint32_t __shfl_down_sync(uint32_t mask, uint32_t v, int delta) {
    return bib_cu_emu_shfl_down(mask, v, delta);
}
inline int32_t __shfl_down_sync(uint32_t mask, int32_t v, int delta) {
    return static_cast<int32_t>(bib_cu_emu_shfl_down(mask, static_cast<uint32_t>(v), delta));
}
inline float __shfl_down_sync(uint32_t mask, float v, int delta) {
    return __uint_as_float(bib_cu_emu_shfl_down(mask, __float_as_uint(v), delta));
}

#endif
