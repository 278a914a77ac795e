/* tests/fuzz/mimalloc_shim.c: the few mimalloc functions libbib and its
 * tests call, mapped onto the C allocator for the fuzz and sanitizer builds
 * only (tests/fuzz/fuzz.mk, `make sanitize`).
 *
 * libbib takes linear memory, tensor buffers and executor state from
 * mimalloc, whose heaps AddressSanitizer cannot see into: an overflow of a
 * tensor buffer would land in a neighbour silently. Linked instead of
 * -lmimalloc, these give every such block its own ASan redzones, and
 * mi_usable_size the exact requested size, so range checks built on it
 * (backends/cpu/cpu.c) are held to the bytes asked for.
 *
 * The CPU GEMM takes megabytes of packing scratch on every call; under ASan
 * each such malloc/free maps, poisons and unmaps fresh pages, which made a
 * loop of tiny MATMULs take a minute. So the last few big blocks freed are
 * kept, poisoned (a use after free still reports), and handed out again for
 * the same size. The cache is guarded by a mutex: executor threads free too.
 */
#include <malloc.h>
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <mimalloc.h>
#include <stdlib.h>
#include <string.h>

#define SHIM_BIG (256u << 10)
#define SHIM_SLOTS 4

static pthread_mutex_t shim_lock = PTHREAD_MUTEX_INITIALIZER;
static void *shim_cache[SHIM_SLOTS];
static size_t shim_size[SHIM_SLOTS];

void *mi_malloc_aligned(size_t size, size_t alignment) {
    void *p = NULL;
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    if (size == 0)
        size = 1;
    if (size >= SHIM_BIG) {
        pthread_mutex_lock(&shim_lock);
        for (int i = 0; i < SHIM_SLOTS && p == NULL; i++)
            if (shim_cache[i] != NULL && shim_size[i] == size &&
                (uintptr_t)shim_cache[i] % alignment == 0) {
                p = shim_cache[i];
                shim_cache[i] = NULL;
            }
        pthread_mutex_unlock(&shim_lock);
        if (p != NULL) {
            ASAN_UNPOISON_MEMORY_REGION(p, size);
            return p;
        }
    }
    return posix_memalign(&p, alignment, size) == 0 ? p : NULL;
}

void *mi_zalloc_aligned(size_t size, size_t alignment) {
    void *p = mi_malloc_aligned(size, alignment);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void *mi_malloc(size_t size) {
    return malloc(size > 0 ? size : 1);
}

void *mi_zalloc(size_t size) {
    return calloc(1, size > 0 ? size : 1);
}

void *mi_calloc(size_t count, size_t size) {
    return calloc(count, size);
}

void mi_free(void *p) {
    size_t size = p != NULL ? malloc_usable_size(p) : 0;
    if (size >= SHIM_BIG) {
        pthread_mutex_lock(&shim_lock);
        for (int i = 0; i < SHIM_SLOTS && p != NULL; i++)
            if (shim_cache[i] == NULL) {
                ASAN_POISON_MEMORY_REGION(p, size);
                shim_cache[i] = p;
                shim_size[i] = size;
                p = NULL;
            }
        pthread_mutex_unlock(&shim_lock);
    }
    free(p);
}

size_t mi_usable_size(const void *p) {
    return p != NULL ? malloc_usable_size((void *)p) : 0;
}
