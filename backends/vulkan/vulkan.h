/* backends/vulkan/vulkan.h: the Vulkan executor.
 *
 * bib_vulkan_executor runs BIB's tensor kernels with compute shaders and
 * gives the CPU executor's bits (spec/numerics.md). The functions below are
 * for tests, benchmarks and `bib info`; the VM needs only the ops table. */
#ifndef BIB_VULKAN_H
#define BIB_VULKAN_H

#include <stdint.h>

#include "backends/backend.h"

extern const bib_executor_ops_t bib_vulkan_executor;

/* Messages (warnings and errors) the validation layer has reported since
 * init; always 0 when validation is off. */
uint32_t bib_vulkan_validation_messages(const bib_executor_t *ex);
/* Whether VK_LAYER_KHRONOS_validation is really active on this executor. */
int bib_vulkan_validation_active(const bib_executor_t *ex);
/* Queue submissions so far (a run of kernels then a download costs one). */
uint64_t bib_vulkan_submits(const bib_executor_t *ex);

/* The loop iterations one invocation may run, all its loops together,
 * that the start-up probe found (lavapipe: 65535); 0 where it found none. */
uint32_t bib_vulkan_loop_limit(const bib_executor_t *ex);

/* Runs the shaders' exact division and square root over n pairs: q[i] =
 * a[i] / b[i] and r[i] = sqrt(a[i]), for comparison with IEEE. */
bib_status_t bib_vulkan_divsqrt(bib_executor_t *ex, const float *a, const float *b, float *q,
                                float *r, uint32_t n);

#endif
