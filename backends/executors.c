/* backends/executors.c: the executors this build contains, found by name.
 *
 * Each executor's build fragment (backends/<name>/<name>.mk) defines
 * BIB_HAVE_<NAME> when it compiles the executor in; the CPU executor is
 * always present. The VM looks executors up here and nowhere else.
 */
#include <string.h>

#include "backends/backend.h"
#ifdef BIB_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef BIB_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

static const bib_executor_ops_t *const executors[] = {
    &bib_cpu_executor,
#ifdef BIB_HAVE_CUDA
    &bib_cuda_executor,
#endif
#ifdef BIB_HAVE_VULKAN
    &bib_vulkan_executor,
#endif
};

uint32_t bib_executor_count(void) {
    return (uint32_t)(sizeof executors / sizeof executors[0]);
}

const bib_executor_ops_t *bib_executor_at(uint32_t index) {
    return index < bib_executor_count() ? executors[index] : NULL;
}

const bib_executor_ops_t *bib_executor_find(const char *name) {
    for (uint32_t i = 0; i < bib_executor_count(); i++)
        if (strcmp(executors[i]->name, name) == 0)
            return executors[i];
    return NULL;
}
