/* backends/executors.c: the executors this build contains, found by name,
 * and the rule by which a GPU executor finds its device by selector.
 *
 * Each executor's build fragment (backends/<name>/<name>.mk) defines
 * BIB_HAVE_<NAME> when it compiles the executor in; the CPU executor is
 * always present. The VM looks executors up here and nowhere else.
 */
#include <ctype.h>
#include <stdlib.h>
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

static bool contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

bool bib_device_selector_matches(const char *selector, uint32_t index, const char *name) {
    bool numeric = *selector != '\0';
    for (const char *p = selector; numeric && *p; p++)
        numeric = isdigit((unsigned char)*p) != 0;
    return numeric ? (uint32_t)atoi(selector) == index : contains_nocase(name, selector);
}
