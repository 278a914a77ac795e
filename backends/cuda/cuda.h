/* backends/cuda/cuda.h: the CUDA executor.
 *
 * bib_cuda_executor runs BIB's tensor kernels on an NVIDIA GPU through the
 * CUDA Driver API and gives the CPU executor's bits (spec/numerics.md). The
 * driver (libcuda.so.1) is loaded at run time, so one build runs on machines
 * with and without it; without it init returns BIB_E_UNAVAILABLE and says
 * why. BIB_CUDA_LIBRARY names another driver library to load (tests use it
 * to exercise the failure paths). The functions below are for tests,
 * benchmarks and `bib info`; the VM needs only the ops table.
 *
 * Not to be confused with the toolkit's <cuda.h>: this header never
 * includes it, so its users need no CUDA toolkit. */
#ifndef BIB_CUDA_H
#define BIB_CUDA_H

#include <stdint.h>

#include "backends/backend.h"

extern const bib_executor_ops_t bib_cuda_executor;

/* Stream synchronizations so far (a run of kernels then a download costs one). */
uint64_t bib_cuda_waits(const bib_executor_t *ex);
/* Kernels and transfer commands queued so far. */
uint64_t bib_cuda_launches(const bib_executor_t *ex);
/* Pool state: device blocks (cuMemAlloc calls alive) and the bytes of VM
 * buffers handed out (each rounded up to the pool's alignment). */
void bib_cuda_pool_stats(const bib_executor_t *ex, uint32_t *blocks, uint64_t *in_use);

#endif
