/* backends/cuda/cu_driver.c: the CUDA driver, loaded at run time.
 *
 * Owns dlopen of libcuda.so.1 (or $BIB_CUDA_LIBRARY), the table of entry
 * points resolved from it by their exported names (the _v2 ones where the
 * driver has them; BIB_CU_API in cu_internal.h; the optional ones of the
 * device timer, BIB_CU_API_TIMING), and naming driver errors.
 * Nothing in the library links against libcuda or libcudart, so a machine
 * without the NVIDIA driver loads libbib and simply finds no CUDA executor.
 * The device, memory and kernels live in the other cu_*.c files. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cu_internal.h"

#define BIB_CU_DEFAULT_LIBRARY "libcuda.so.1"

typedef struct bib_cu_symbol {
    const char *name;
    size_t offset; /* of the function pointer in bib_cu_api_t */
} bib_cu_symbol_t;

static const bib_cu_symbol_t bib_cu_symbols[] = {
#define BIB_CU_API_SYMBOL(field, symbol, params) {symbol, offsetof(bib_cu_api_t, field)},
    BIB_CU_API(BIB_CU_API_SYMBOL)
#undef BIB_CU_API_SYMBOL
};

typedef struct bib_cu_timing_symbol {
    const char *name, *older;
    size_t offset;
} bib_cu_timing_symbol_t;

static const bib_cu_timing_symbol_t bib_cu_timing_symbols[] = {
#define BIB_CU_API_TIMING_SYMBOL(field, symbol, older, params)                                     \
    {symbol, older, offsetof(bib_cu_api_t, field)},
    BIB_CU_API_TIMING(BIB_CU_API_TIMING_SYMBOL)
#undef BIB_CU_API_TIMING_SYMBOL
};

void bib_cu_api_unload(bib_cu_api_t *api) {
    if (api->library)
        dlclose(api->library);
    memset(api, 0, sizeof *api);
}

bib_status_t bib_cu_api_load(bib_cu_api_t *api, char *why, size_t why_len) {
    memset(api, 0, sizeof *api);
    const char *name = getenv("BIB_CUDA_LIBRARY");
    if (!name || !*name)
        name = BIB_CU_DEFAULT_LIBRARY;
    dlerror();
    api->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!api->library) {
        const char *err = dlerror();
        if (!err || strstr(err, "No such file"))
            snprintf(why, why_len, "%s not found: no NVIDIA driver", name);
        else
            snprintf(why, why_len, "%s could not be loaded: %s", name, err);
        return BIB_E_UNAVAILABLE;
    }
    for (size_t i = 0; i < sizeof bib_cu_timing_symbols / sizeof bib_cu_timing_symbols[0]; i++) {
        const bib_cu_timing_symbol_t *t = &bib_cu_timing_symbols[i];
        void *sym = dlsym(api->library, t->name);
        if (!sym && t->older)
            sym = dlsym(api->library, t->older);
        if (sym)
            memcpy((char *)api + t->offset, &sym, sizeof sym);
    }
    for (size_t i = 0; i < sizeof bib_cu_symbols / sizeof bib_cu_symbols[0]; i++) {
        dlerror();
        void *sym = dlsym(api->library, bib_cu_symbols[i].name);
        if (!sym) {
            snprintf(why, why_len, "%s has no %s: not a CUDA driver, or one too old", name,
                     bib_cu_symbols[i].name);
            bib_cu_api_unload(api);
            return BIB_E_UNAVAILABLE;
        }
        /* dlsym returns functions as void *; POSIX guarantees the round trip. */
        memcpy((char *)api + bib_cu_symbols[i].offset, &sym, sizeof sym);
    }
    return BIB_OK;
}

/* Names for the results a driver that cannot name them (the toolkit's stub
 * library, a broken install) gives while starting up. */
static const char *bib_cu_known_name(CUresult r) {
    switch (r) {
    case CUDA_ERROR_INVALID_VALUE:
        return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
        return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
        return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case CUDA_ERROR_NO_DEVICE:
        return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
        return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    default:
        return NULL;
    }
}

const char *bib_cu_error_name(const bib_cu_api_t *api, CUresult r, char *buf, size_t len) {
    const char *s = NULL;
    if (api->GetErrorName && api->GetErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    if ((s = bib_cu_known_name(r)) != NULL)
        return s;
    snprintf(buf, len, "CUresult %d", (int)r);
    return buf;
}
