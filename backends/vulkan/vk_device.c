/* backends/vulkan/vk_device.c: the Vulkan executor's device side.
 *
 * Owns the instance (with the validation layer and a counting debug
 * messenger on request), device selection, the start-up probes that choose
 * the numerics paths, the shader modules (with float-controls execution
 * modes inserted into the SPIR-V), the lazily built pipeline cache (persisted
 * under $XDG_CACHE_HOME/bib), and command recording: kernels are recorded
 * into one command buffer with the barriers their hazards need and submitted
 * only when the host must wait. Also the device clock of --profile: a
 * timestamp query pool written around every timed command and read back
 * when its command buffer has finished. Memory lives in vk_memory.c, kernels
 * in vk_kernels.c. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cpu/bmath.h"
#include "backends/vulkan/vk_internal.h"
#include "backends/vulkan/vk_shaders.h"
#include "vm/fileio.h"

#define BIB_VK_SETS_PER_POOL 1024

/* SPIR-V numbers for the float-controls additions (SPIR-V spec, 3.x). */
enum {
    SPV_OP_EXTENSION = 10,
    SPV_OP_ENTRY_POINT = 15,
    SPV_OP_EXECUTION_MODE = 16,
    SPV_OP_CAPABILITY = 17,
    SPV_CAP_FLOAT64 = 10,
    SPV_CAP_DENORM_PRESERVE = 4464,
    SPV_CAP_SIGNED_ZERO_INF_NAN_PRESERVE = 4466,
    SPV_CAP_ROUNDING_MODE_RTE = 4467,
    SPV_MODE_DENORM_PRESERVE = 4459,
    SPV_MODE_SIGNED_ZERO_INF_NAN_PRESERVE = 4461,
    SPV_MODE_ROUNDING_MODE_RTE = 4462,
};

bib_status_t bib_vk_fail(bib_executor_t *ex, bib_status_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->error, sizeof ex->error, fmt, ap);
    va_end(ap);
    return status;
}

bib_status_t bib_vk_check(bib_executor_t *ex, VkResult r, const char *what) {
    if (r == VK_SUCCESS)
        return BIB_OK;
    bib_status_t st = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                          ? BIB_E_NOMEM
                          : BIB_E_UNAVAILABLE;
    return bib_vk_fail(ex, st, "vulkan: %s failed (VkResult %d)", what, (int)r);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL bib_vk_debug_cb(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    bib_executor_t *ex = user;
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        ex->validation_messages++;
        fprintf(stderr, "vulkan validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

static bool bib_vk_has_layer(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *l = calloc(n, sizeof *l);
    bool found = false;
    if (l && vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(l[i].layerName, name) == 0;
    free(l);
    return found;
}

static bool bib_vk_has_instance_ext(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    bool found = false;
    if (e && vkEnumerateInstanceExtensionProperties(NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

static bool bib_vk_has_device_ext(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

static const char *bib_vk_type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "CPU";
    default:
        return "other";
    }
}

static int bib_vk_type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return 1;
    default:
        return 0;
    }
}

static bool bib_vk_compute_family(VkPhysicalDevice pd, uint32_t *family) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q)
        return false;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    /* Prefer a compute queue without graphics (a dedicated compute engine). */
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            best = (int)i;
    }
    free(q);
    if (best < 0)
        return false;
    *family = (uint32_t)best;
    return true;
}

/* Picks the physical device: the selector (index or name substring) when
 * given, else the best type (discrete, integrated, virtual, CPU). from names
 * the environment variable the selector came from (NULL: the caller's
 * --device), for the message when no device matches. */
static bib_status_t bib_vk_pick_device(bib_executor_t *ex, const char *selector, const char *from,
                                       char *why, size_t why_len) {
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(ex->instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        snprintf(why, why_len, "no Vulkan device (vkEnumeratePhysicalDevices: %d devices, %d)",
                 (int)n, (int)r);
        return BIB_E_UNAVAILABLE;
    }
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    if (!pds)
        return BIB_E_NOMEM;
    vkEnumeratePhysicalDevices(ex->instance, &n, pds);
    int chosen = -1, best_rank = -1;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties pr;
        vkGetPhysicalDeviceProperties(pds[i], &pr);
        uint32_t fam;
        if (!bib_vk_compute_family(pds[i], &fam))
            continue;
        if (selector && *selector) {
            if (bib_device_selector_matches(selector, i, pr.deviceName) && chosen < 0)
                chosen = (int)i;
            continue;
        }
        int rank = bib_vk_type_rank(pr.deviceType);
        if (rank > best_rank) {
            best_rank = rank;
            chosen = (int)i;
        }
    }
    if (chosen < 0) {
        if (selector && *selector) {
            /* The devices there are, so that the selector can be mended. */
            size_t used = (size_t)snprintf(why, why_len,
                                           "no Vulkan device matches '%s'%s%s%s; %u %s:", selector,
                                           from ? " (from " : "", from ? from : "", from ? ")" : "",
                                           n, n == 1 ? "device" : "devices");
            for (uint32_t i = 0; i < n && used < why_len; i++) {
                VkPhysicalDeviceProperties pr;
                vkGetPhysicalDeviceProperties(pds[i], &pr);
                used += (size_t)snprintf(why + used, why_len - used, "%s %u '%s'", i ? "," : "", i,
                                         pr.deviceName);
            }
        } else {
            snprintf(why, why_len, "no Vulkan device with a compute queue");
        }
        free(pds);
        return BIB_E_UNAVAILABLE;
    }
    ex->physical = pds[chosen];
    free(pds);
    bib_vk_compute_family(ex->physical, &ex->queue_family);
    vkGetPhysicalDeviceProperties(ex->physical, &ex->props);
    vkGetPhysicalDeviceMemoryProperties(ex->physical, &ex->memprops);
    return BIB_OK;
}

static bib_status_t bib_vk_create_device(bib_executor_t *ex, char *why, size_t why_len) {
    VkPhysicalDeviceFeatures feats;
    vkGetPhysicalDeviceFeatures(ex->physical, &feats);
    ex->has_f64 = feats.shaderFloat64 == VK_TRUE;

    bool api12 = VK_API_VERSION_MINOR(ex->props.apiVersion) >= 2 ||
                 VK_API_VERSION_MAJOR(ex->props.apiVersion) > 1;
    bool fc_ext = bib_vk_has_device_ext(ex->physical, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
    ex->float_controls = api12 || fc_ext;
    if (ex->float_controls) {
        VkPhysicalDeviceFloatControlsPropertiesKHR fc = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES_KHR};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &fc};
        vkGetPhysicalDeviceProperties2(ex->physical, &p2);
        ex->rte32 = fc.shaderRoundingModeRTEFloat32;
        ex->rte64 = fc.shaderRoundingModeRTEFloat64 && ex->has_f64;
        ex->denorm32 = fc.shaderDenormPreserveFloat32;
        ex->denorm64 = fc.shaderDenormPreserveFloat64 && ex->has_f64;
        ex->szinp32 = fc.shaderSignedZeroInfNanPreserveFloat32;
        ex->szinp64 = fc.shaderSignedZeroInfNanPreserveFloat64 && ex->has_f64;
        ex->rte16 = fc.shaderRoundingModeRTEFloat16;
        ex->denorm16 = fc.shaderDenormPreserveFloat16;
        ex->round_indep = fc.roundingModeIndependence;
        ex->denorm_indep = fc.denormBehaviorIndependence;
        /* Lets tests take the stricter independence rules of other drivers
           (32: 32_BIT_ONLY, none: NONE, none-no16: NONE without 16-bit
           modes) on any device; never looser. */
        const char *indep = getenv("BIB_VK_FLOAT_INDEPENDENCE");
        if (indep && strcmp(indep, "none-no16") == 0) {
            ex->rte16 = ex->denorm16 = false;
            indep = "none";
        }
        if (indep && (strcmp(indep, "32") == 0 || strcmp(indep, "none") == 0)) {
            VkShaderFloatControlsIndependence f =
                strcmp(indep, "32") == 0 ? VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY
                                         : VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE;
            if (ex->round_indep != VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE)
                ex->round_indep = f;
            if (ex->denorm_indep != VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE)
                ex->denorm_indep = f;
        }
    }

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = ex->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkPhysicalDeviceFeatures enable = {0};
    enable.shaderFloat64 = ex->has_f64 ? VK_TRUE : VK_FALSE;
    /* User shaders (VK_COMPUTE) come from untrusted modules: accesses
       outside a bound range must stay inside it (every device offers it). */
    enable.robustBufferAccess = feats.robustBufferAccess;
    const char *exts[1];
    uint32_t next = 0;
    if (!api12 && fc_ext)
        exts[next++] = VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = next,
                              .ppEnabledExtensionNames = exts,
                              .pEnabledFeatures = &enable};
    VkResult r = vkCreateDevice(ex->physical, &dci, NULL, &ex->device);
    if (r != VK_SUCCESS) {
        snprintf(why, why_len, "vkCreateDevice failed on '%s' (VkResult %d)", ex->props.deviceName,
                 (int)r);
        return BIB_E_UNAVAILABLE;
    }
    vkGetDeviceQueue(ex->device, ex->queue_family, 0, &ex->queue);
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(ex->physical, &nf, NULL);
    VkQueueFamilyProperties *qf = calloc(nf ? nf : 1, sizeof *qf);
    if (qf) {
        vkGetPhysicalDeviceQueueFamilyProperties(ex->physical, &nf, qf);
        if (ex->queue_family < nf && ex->props.limits.timestampPeriod > 0)
            ex->timestamp_bits = qf[ex->queue_family].timestampValidBits;
        free(qf);
    }
    /* Lets tests take the path of a device without timestamps on any device. */
    const char *none = getenv("BIB_VK_NO_TIMESTAMPS");
    if (none && *none && strcmp(none, "0") != 0)
        ex->timestamp_bits = 0;
    return BIB_OK;
}

/* ---- pipeline cache file ------------------------------------------------- */

static void bib_vk_cache_path(bib_executor_t *ex) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char dir[900];
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/bib", xdg);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache/bib", home);
    else {
        ex->cache_path[0] = 0;
        return;
    }
    snprintf(ex->cache_path, sizeof ex->cache_path, "%s/vulkan-%08x-%08x.pcache", dir,
             ex->props.vendorID, ex->props.deviceID);
}

/* Whether data starts with a pipeline cache header written for this device
 * (Vulkan spec: header length, version, vendor, device, UUID). A cache from
 * another device or a corrupt file is ignored, never fatal. */
static bool bib_vk_cache_valid(const bib_executor_t *ex, const uint8_t *data, size_t size) {
    if (size < 16 + VK_UUID_SIZE)
        return false;
    uint32_t w[4];
    memcpy(w, data, sizeof w);
    return w[0] >= 16 + VK_UUID_SIZE && w[0] <= size &&
           w[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && w[2] == ex->props.vendorID &&
           w[3] == ex->props.deviceID &&
           memcmp(data + 16, ex->props.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

static void bib_vk_cache_load(bib_executor_t *ex) {
    bib_vk_cache_path(ex);
    uint8_t *data = NULL;
    size_t size = 0;
    FILE *f = ex->cache_path[0] ? fopen(ex->cache_path, "rb") : NULL;
    if (f) {
        if (fseek(f, 0, SEEK_END) == 0) {
            long len = ftell(f);
            if (len > 0 && len < (64l << 20) && fseek(f, 0, SEEK_SET) == 0) {
                data = malloc((size_t)len);
                if (data && fread(data, 1, (size_t)len, f) == (size_t)len)
                    size = (size_t)len;
            }
        }
        fclose(f);
    }
    bool valid = data && bib_vk_cache_valid(ex, data, size);
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = valid ? size : 0,
                                    .pInitialData = valid ? data : NULL};
    if (vkCreatePipelineCache(ex->device, &ci, NULL, &ex->pipeline_cache) != VK_SUCCESS) {
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        if (vkCreatePipelineCache(ex->device, &ci, NULL, &ex->pipeline_cache) != VK_SUCCESS)
            ex->pipeline_cache = VK_NULL_HANDLE;
    }
    free(data);
}

static void bib_vk_mkdirs(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash)
        return;
    *slash = 0;
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

/* Best effort: a cache that cannot be written costs only start-up time. */
static void bib_vk_cache_save(bib_executor_t *ex) {
    if (!ex->pipeline_cache || !ex->cache_path[0] || ex->pipeline_count == 0)
        return;
    size_t size = 0;
    if (vkGetPipelineCacheData(ex->device, ex->pipeline_cache, &size, NULL) != VK_SUCCESS ||
        size == 0)
        return;
    void *data = malloc(size);
    if (!data)
        return;
    if (vkGetPipelineCacheData(ex->device, ex->pipeline_cache, &size, data) == VK_SUCCESS) {
        bib_vk_mkdirs(ex->cache_path);
        char why[1200];
        (void)bib_file_write(ex->cache_path, data, size, why, sizeof why);
    }
    free(data);
}

/* ---- shader modules with float controls -------------------------------- */

/* Which bit widths (bit 0: 16, 1: 32, 2: 64) get a rounding or denormal
 * execution mode, given which widths support it (ok16/32/64) and the device's
 * independence rule (VUID-RuntimeSpirv-roundingModeIndependence-06291/06292,
 * -denormBehaviorIndependence-06289/06290):
 * - under 32_BIT_ONLY the 16- and 64-bit modes must match each other, so 64
 *   is declared only together with 16;
 * - under NONE the entry point must use one mode for all its float types:
 *   the widths it uses (32, and 64 where it computes in double; no shader
 *   uses 16) all get the mode when each supports it, 16 beside them where
 *   it does too, or none does. (Declaring 32 alone, since the shader has no
 *   16-bit floats, is what lets NVIDIA's driver, which ties the widths,
 *   keep denormals in fma().)
 * A width not declared is left to the device's default, which the start-up
 * probe checks. */
static uint32_t bib_vk_mode_widths(VkShaderFloatControlsIndependence indep, bool uses64, bool ok16,
                                   bool ok32, bool ok64) {
    switch (indep) {
    case VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL:
        return (ok32 ? 2u : 0u) | (uses64 && ok64 ? 4u : 0u);
    case VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY:
        return (ok32 ? 2u : 0u) | (uses64 && ok64 && ok16 ? 5u : 0u);
    default: /* NONE */
        if (!ok32 || (uses64 && !ok64))
            return 0u;
        return 2u | (uses64 ? 4u : 0u) | (ok16 ? 1u : 0u);
    }
}

/* Returns a copy of the SPIR-V with the float-controls capabilities,
 * extension and execution modes the device supports: RTE rounding,
 * denormal preservation, signed zero / Inf / NaN preservation. The caller
 * frees it. */
static uint32_t *bib_vk_patch_spirv(const bib_executor_t *ex, const uint32_t *code, size_t words,
                                    size_t *out_words) {
    bool uses64 = false;
    uint32_t entry = 0;
    for (size_t i = 5; i < words;) {
        uint32_t op = code[i] & 0xffff, len = code[i] >> 16;
        if (len == 0)
            break;
        if (op == SPV_OP_CAPABILITY && code[i + 1] == SPV_CAP_FLOAT64)
            uses64 = true;
        if (op == SPV_OP_ENTRY_POINT)
            entry = code[i + 2];
        i += len;
    }
    uint32_t caps[3], ncaps = 0, modes[9][2], nmodes = 0;
    if (ex->float_controls) {
        /* rte64 and denorm64 are false without shaderFloat64, so under NONE
           such a device declares no mode at all and the probe decides. */
        uint32_t rte = bib_vk_mode_widths(ex->round_indep, uses64, ex->rte16, ex->rte32, ex->rte64);
        uint32_t den =
            bib_vk_mode_widths(ex->denorm_indep, uses64, ex->denorm16, ex->denorm32, ex->denorm64);
        uint32_t sz = (ex->szinp32 ? 2u : 0u) | (uses64 && ex->szinp64 ? 4u : 0u);
        if (rte)
            caps[ncaps++] = SPV_CAP_ROUNDING_MODE_RTE;
        if (den)
            caps[ncaps++] = SPV_CAP_DENORM_PRESERVE;
        if (sz)
            caps[ncaps++] = SPV_CAP_SIGNED_ZERO_INF_NAN_PRESERVE;
        for (uint32_t w = 0; w < 3; w++) {
            uint32_t width = 16u << w;
            if (rte & (1u << w))
                modes[nmodes][0] = SPV_MODE_ROUNDING_MODE_RTE, modes[nmodes++][1] = width;
            if (den & (1u << w))
                modes[nmodes][0] = SPV_MODE_DENORM_PRESERVE, modes[nmodes++][1] = width;
            if (sz & (1u << w))
                modes[nmodes][0] = SPV_MODE_SIGNED_ZERO_INF_NAN_PRESERVE,
                modes[nmodes++][1] = width;
        }
    }
    static const char ext_name[] = "SPV_KHR_float_controls"; /* 23 bytes with NUL: 6 words */
    size_t ext_words = 1 + (sizeof ext_name + 3) / 4;
    size_t extra = ncaps ? ncaps * 2 + ext_words + nmodes * 4 : 0;
    uint32_t *out = malloc((words + extra) * sizeof *out);
    if (!out)
        return NULL;
    if (!ncaps) {
        memcpy(out, code, words * sizeof *out);
        *out_words = words;
        return out;
    }
    size_t o = 0;
    memcpy(out, code, 5 * sizeof *out);
    o = 5;
    for (uint32_t c = 0; c < ncaps; c++) {
        out[o++] = (2u << 16) | SPV_OP_CAPABILITY;
        out[o++] = caps[c];
    }
    bool ext_done = false;
    for (size_t i = 5; i < words;) {
        uint32_t op = code[i] & 0xffff, len = code[i] >> 16;
        if (!ext_done && op != SPV_OP_CAPABILITY) {
            /* SPIR-V 1.3 (Vulkan 1.1) needs the extension for float controls. */
            out[o++] = ((uint32_t)ext_words << 16) | SPV_OP_EXTENSION;
            uint32_t packed[6] = {0};
            memcpy(packed, ext_name, sizeof ext_name);
            memcpy(out + o, packed, (ext_words - 1) * sizeof *out);
            o += ext_words - 1;
            ext_done = true;
        }
        memcpy(out + o, code + i, len * sizeof *out);
        o += len;
        if (op == SPV_OP_ENTRY_POINT) {
            for (uint32_t m = 0; m < nmodes; m++) {
                out[o++] = (4u << 16) | SPV_OP_EXECUTION_MODE;
                out[o++] = entry;
                out[o++] = modes[m][0];
                out[o++] = modes[m][1];
            }
        }
        i += len;
    }
    *out_words = o;
    return out;
}

static int bib_vk_shader_index(const char *name) {
    for (int i = 0; bib_vk_shaders[i].name; i++)
        if (strcmp(bib_vk_shaders[i].name, name) == 0)
            return i;
    return -1;
}

static bib_status_t bib_vk_module(bib_executor_t *ex, uint32_t index, VkShaderModule *out) {
    if (!ex->modules) {
        uint32_t n = 0;
        while (bib_vk_shaders[n].name)
            n++;
        ex->modules = calloc(n, sizeof *ex->modules);
        if (!ex->modules)
            return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory for shader modules");
        ex->module_count = n;
    }
    if (ex->modules[index]) {
        *out = ex->modules[index];
        return BIB_OK;
    }
    const bib_vk_shader_t *s = &bib_vk_shaders[index];
    const uint32_t *code = ex->has_f64 ? s->spv_f64 : s->spv_f32;
    size_t bytes = ex->has_f64 ? s->spv_f64_bytes : s->spv_f32_bytes;
    size_t words = 0;
    uint32_t *patched = bib_vk_patch_spirv(ex, code, bytes / 4, &words);
    if (!patched)
        return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory patching %s", s->name);
    VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = words * 4,
                                   .pCode = patched};
    VkResult r = vkCreateShaderModule(ex->device, &ci, NULL, &ex->modules[index]);
    free(patched);
    if (r != VK_SUCCESS)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: vkCreateShaderModule(%s) failed (VkResult %d)", s->name,
                           (int)r);
    *out = ex->modules[index];
    return BIB_OK;
}

static bib_status_t bib_vk_pipeline(bib_executor_t *ex, const char *name, const uint32_t *spec,
                                    VkPipeline *out) {
    int index = bib_vk_shader_index(name);
    if (index < 0)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE, "vulkan: no embedded shader '%s'", name);
    for (uint32_t i = 0; i < ex->pipeline_count; i++) {
        bib_vk_pipeline_t *p = &ex->pipelines[i];
        if (p->shader == (uint32_t)index && memcmp(p->spec, spec, sizeof p->spec) == 0) {
            *out = p->pipeline;
            return BIB_OK;
        }
    }
    VkShaderModule module = VK_NULL_HANDLE;
    bib_status_t st = bib_vk_module(ex, (uint32_t)index, &module);
    if (st != BIB_OK)
        return st;
    VkSpecializationMapEntry map[BIB_VK_SPEC_MAX];
    for (uint32_t i = 0; i < BIB_VK_SPEC_MAX; i++)
        map[i] = (VkSpecializationMapEntry){i, i * 4, 4};
    VkSpecializationInfo si = {BIB_VK_SPEC_MAX, map, sizeof(uint32_t) * BIB_VK_SPEC_MAX, spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main",
                  .pSpecializationInfo = &si},
        .layout = ex->pipeline_layout};
    if (ex->pipeline_count == ex->pipeline_cap) {
        uint32_t cap = ex->pipeline_cap ? ex->pipeline_cap * 2 : 16;
        bib_vk_pipeline_t *np = realloc(ex->pipelines, cap * sizeof *np);
        if (!np)
            return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory for pipelines");
        ex->pipelines = np;
        ex->pipeline_cap = cap;
    }
    bib_vk_pipeline_t *p = &ex->pipelines[ex->pipeline_count];
    VkResult r =
        vkCreateComputePipelines(ex->device, ex->pipeline_cache, 1, &ci, NULL, &p->pipeline);
    if (r != VK_SUCCESS)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: vkCreateComputePipelines(%s) failed (VkResult %d)", name,
                           (int)r);
    p->shader = (uint32_t)index;
    memcpy(p->spec, spec, sizeof p->spec);
    ex->pipeline_count++;
    *out = p->pipeline;
    return BIB_OK;
}

/* ---- device timing -------------------------------------------------------- */

/* The command buffer that wrote the timestamps is over: when it finished
 * (done), adds the busy time of its timestamp pairs to timed_ns. A pair's
 * first timestamp is written once the commands before it have finished
 * (BOTTOM_OF_PIPE), so a kernel is not charged for the copies recorded
 * ahead of it; pairs that still overlap are counted once. Results of a
 * command buffer that failed are never read: its timestamps may be unwritten. */
static void bib_vk_time_collect(bib_executor_t *ex, bool done) {
    uint32_t n = ex->queries_used & ~1u;
    ex->queries_used = 0;
    ex->queries_reset = false;
    ex->query_open = false;
    if (!done || n == 0)
        return;
    if (vkGetQueryPoolResults(ex->device, ex->query_pool, 0, n, n * sizeof *ex->stamps, ex->stamps,
                              sizeof *ex->stamps,
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
        return;
    const uint64_t mask =
        ex->timestamp_bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << ex->timestamp_bits) - 1;
    /* Ticks from the first timestamp, so a counter narrower than 64 bits
       that wraps inside the command buffer still subtracts right. */
    const uint64_t base = ex->stamps[0];
    uint64_t busy = 0, reached = 0;
    for (uint32_t i = 0; i < n; i += 2) {
        uint64_t start = (ex->stamps[i] - base) & mask, end = (ex->stamps[i + 1] - base) & mask;
        if (start < reached)
            start = reached;
        if (end > start)
            busy += end - start;
        if (end > reached)
            reached = end;
    }
    ex->timed_ns += (double)busy * (double)ex->props.limits.timestampPeriod;
}

bib_status_t bib_vk_time_reserve(bib_executor_t *ex) {
    if (ex->timing && ex->queries_used + 2 > BIB_VK_QUERIES)
        return bib_vk_flush(ex);
    return BIB_OK;
}

void bib_vk_time_begin(bib_executor_t *ex) {
    if (!ex->timing || !ex->queries_reset || ex->queries_used + 2 > BIB_VK_QUERIES)
        return;
    vkCmdWriteTimestamp(ex->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ex->query_pool,
                        ex->queries_used++);
    ex->query_open = true;
}

void bib_vk_time_end(bib_executor_t *ex) {
    if (!ex->query_open)
        return;
    vkCmdWriteTimestamp(ex->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ex->query_pool,
                        ex->queries_used++);
    ex->query_open = false;
}

bib_status_t bib_vk_timing(bib_executor_t *ex, bool on) {
    if (!on) {
        /* What was timed so far is collected for the next elapsed(). */
        bib_status_t st = bib_vk_flush(ex);
        ex->timing = false;
        return st;
    }
    if (ex->timestamp_bits == 0)
        return bib_vk_fail(ex, BIB_E_UNAVAILABLE,
                           "vulkan: queue family %u of '%s' has no timestamps "
                           "(timestampValidBits 0)",
                           ex->queue_family, ex->props.deviceName);
    if (!ex->query_pool) {
        ex->stamps = calloc(BIB_VK_QUERIES, sizeof *ex->stamps);
        if (!ex->stamps)
            return bib_vk_fail(ex, BIB_E_NOMEM, "vulkan: out of host memory for timestamps");
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = BIB_VK_QUERIES};
        bib_status_t st = bib_vk_check(
            ex, vkCreateQueryPool(ex->device, &qci, NULL, &ex->query_pool), "vkCreateQueryPool");
        if (st != BIB_OK) {
            ex->query_pool = VK_NULL_HANDLE;
            return st;
        }
    }
    /* Queries are reset at the start of a command buffer: the one being
       recorded has no reset, so it is finished first. */
    bib_status_t st = bib_vk_flush(ex);
    ex->timing = st == BIB_OK;
    ex->timed_ns = 0;
    return st;
}

bib_status_t bib_vk_elapsed(bib_executor_t *ex, double *ms) {
    *ms = ex->timed_ns * 1e-6;
    ex->timed_ns = 0;
    return BIB_OK;
}

/* ---- recording ----------------------------------------------------------- */

bib_status_t bib_vk_usable(bib_executor_t *ex) {
    if (!ex->lost)
        return BIB_OK;
    return bib_vk_fail(ex, BIB_E_STATE,
                       "vulkan: unusable after device work ran past the device timeout (%llu ms)",
                       (unsigned long long)ex->timeout_ms);
}

/* Waits for the fence of submitted work, for at most the timeout. Past it
 * the work may still be running and still using the command buffer, its
 * descriptor sets and its buffers: the executor is lost from then on, and
 * nothing of that is reset or freed. */
static bib_status_t bib_vk_wait(bib_executor_t *ex) {
    uint64_t ns = UINT64_MAX;
    if (ex->timeout_ms > 0 && ex->timeout_ms < UINT64_MAX / 1000000u)
        ns = ex->timeout_ms * 1000000u;
    VkResult r = vkWaitForFences(ex->device, 1, &ex->fence, VK_TRUE, ns);
    if (r == VK_TIMEOUT) {
        ex->lost = true;
        return bib_vk_fail(ex, BIB_E_TIMEOUT,
                           "vulkan: device work ran past the device timeout (%llu ms); the "
                           "executor is unusable from now on",
                           (unsigned long long)ex->timeout_ms);
    }
    return bib_vk_check(ex, r, "vkWaitForFences");
}

/* Waits for work started by bib_vk_submit, then frees what it held (the
 * command buffer and descriptor sets), so recording can start again. */
static bib_status_t bib_vk_settle(bib_executor_t *ex) {
    if (!ex->inflight)
        return BIB_OK;
    ex->inflight = false;
    bib_status_t st = bib_vk_wait(ex);
    if (ex->lost)
        return st;
    bib_vk_time_collect(ex, st == BIB_OK);
    vkResetFences(ex->device, 1, &ex->fence);
    vkResetCommandPool(ex->device, ex->command_pool, 0);
    vkResetDescriptorPool(ex->device, ex->descriptor_pool, 0);
    ex->sets_used = 0;
    bib_vk_programs_reset(ex);
    return st;
}

/* Ends the command buffer being recorded and submits it to signal the
 * fence (submit and flush). */
static bib_status_t bib_vk_end_and_submit(bib_executor_t *ex) {
    ex->recording = false;
    ex->pending_count = 0;
    bib_status_t st = bib_vk_check(ex, vkEndCommandBuffer(ex->cmd), "vkEndCommandBuffer");
    if (st != BIB_OK)
        return st;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &ex->cmd};
    st = bib_vk_check(ex, vkQueueSubmit(ex->queue, 1, &si, ex->fence), "vkQueueSubmit");
    if (st == BIB_OK)
        ex->submits++;
    return st;
}

bib_status_t bib_vk_submit(bib_executor_t *ex) {
    bib_status_t usable = bib_vk_usable(ex);
    if (usable != BIB_OK || !ex->recording)
        return usable;
    bib_status_t st = bib_vk_end_and_submit(ex);
    if (st == BIB_OK)
        ex->inflight = true;
    return st;
}

bib_status_t bib_vk_begin(bib_executor_t *ex) {
    bib_status_t usable = bib_vk_usable(ex);
    if (usable != BIB_OK || ex->recording)
        return usable;
    bib_status_t settled = bib_vk_settle(ex);
    if (settled != BIB_OK)
        return settled;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    bib_status_t st = bib_vk_check(ex, vkBeginCommandBuffer(ex->cmd, &bi), "vkBeginCommandBuffer");
    if (st == BIB_OK)
        ex->recording = true;
    if (st == BIB_OK && ex->timing) {
        vkCmdResetQueryPool(ex->cmd, ex->query_pool, 0, BIB_VK_QUERIES);
        ex->queries_reset = true;
        ex->queries_used = 0;
    }
    return st;
}

bib_status_t bib_vk_flush(bib_executor_t *ex) {
    bib_status_t usable = bib_vk_usable(ex);
    if (usable != BIB_OK)
        return usable;
    if (!ex->recording)
        return bib_vk_settle(ex);
    bib_status_t st = bib_vk_end_and_submit(ex);
    bool done = false;
    if (st == BIB_OK) {
        st = bib_vk_wait(ex);
        if (ex->lost)
            return st;
        done = st == BIB_OK;
        vkResetFences(ex->device, 1, &ex->fence);
    }
    bib_vk_time_collect(ex, done);
    vkResetCommandPool(ex->device, ex->command_pool, 0);
    vkResetDescriptorPool(ex->device, ex->descriptor_pool, 0);
    ex->sets_used = 0;
    bib_vk_programs_reset(ex);
    ex->staging_used = 0;
    return st;
}

void bib_vk_hazard(bib_executor_t *ex, const bib_vk_access_t *acc, uint32_t count) {
    bool need = ex->pending_count + count > BIB_VK_PENDING_MAX;
    for (uint32_t i = 0; i < count && !need; i++)
        for (uint32_t j = 0; j < ex->pending_count && !need; j++) {
            const bib_vk_access_t *a = &acc[i], *p = &ex->pending[j];
            need = (a->write || p->write) && a->block == p->block && a->lo < p->hi && p->lo < a->hi;
        }
    if (need) {
        VkMemoryBarrier mb = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                             VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
        VkPipelineStageFlags stages =
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
        vkCmdPipelineBarrier(ex->cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
        ex->pending_count = 0;
    }
    for (uint32_t i = 0; i < count && ex->pending_count < BIB_VK_PENDING_MAX; i++)
        ex->pending[ex->pending_count++] = acc[i];
}

bib_status_t bib_vk_dispatch(bib_executor_t *ex, const char *name, const uint32_t *spec,
                             uint32_t spec_count, bib_vk_buffer_t *const *bufs,
                             const bib_vk_push_t *push, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (gx == 0 || gy == 0 || gz == 0)
        return BIB_OK;
    uint32_t all[BIB_VK_SPEC_MAX] = {(uint32_t)ex->fma_path};
    for (uint32_t i = 0; i < spec_count && i + 1 < BIB_VK_SPEC_MAX; i++)
        all[i + 1] = spec[i];
    VkPipeline pipeline = VK_NULL_HANDLE;
    bib_status_t st = bib_vk_pipeline(ex, name, all, &pipeline);
    if (st != BIB_OK)
        return st;
    if (ex->sets_used == BIB_VK_SETS_PER_POOL && (st = bib_vk_flush(ex)) != BIB_OK)
        return st;
    if ((st = bib_vk_time_reserve(ex)) != BIB_OK || (st = bib_vk_begin(ex)) != BIB_OK)
        return st;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = ex->descriptor_pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &ex->set_layout};
    VkDescriptorSet set;
    st = bib_vk_check(ex, vkAllocateDescriptorSets(ex->device, &ai, &set),
                      "vkAllocateDescriptorSets");
    if (st != BIB_OK)
        return st;
    ex->sets_used++;
    VkDescriptorBufferInfo info[BIB_VK_BINDINGS];
    VkWriteDescriptorSet writes[BIB_VK_BINDINGS];
    bib_vk_access_t acc[BIB_VK_BINDINGS];
    uint32_t nacc = 0;
    for (uint32_t b = 0; b < BIB_VK_BINDINGS; b++) {
        /* Unused bindings alias the output so every declared binding is valid. */
        const bib_vk_buffer_t *buf = bufs[b] ? bufs[b] : bufs[0];
        info[b] = (VkDescriptorBufferInfo){bib_vk_block_buffer(ex, buf), buf->offset, buf->size};
        writes[b] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = set,
                                           .dstBinding = b,
                                           .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &info[b]};
        if (bufs[b])
            acc[nacc++] = (bib_vk_access_t){bufs[b]->block, bufs[b]->offset,
                                            bufs[b]->offset + bufs[b]->size, b == 0 || b == 4};
    }
    vkUpdateDescriptorSets(ex->device, BIB_VK_BINDINGS, writes, 0, NULL);
    bib_vk_hazard(ex, acc, nacc);
    vkCmdBindPipeline(ex->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdBindDescriptorSets(ex->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ex->pipeline_layout, 0, 1,
                            &set, 0, NULL);
    vkCmdPushConstants(ex->cmd, ex->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *push,
                       push);
    bib_vk_time_begin(ex);
    vkCmdDispatch(ex->cmd, gx, gy, gz);
    bib_vk_time_end(ex);
    return BIB_OK;
}

/* ---- probes -------------------------------------------------------------- */

typedef struct bib_vk_case {
    float x, y, z;
} bib_vk_case_t;

static uint32_t bib_vk_rand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

#define BIB_VK_FMA_CASES 64
#define BIB_VK_DEN_CASES 12
#define BIB_VK_RTE_CASES 68

/* Cases where fused and unfused fma differ, then denormal cases, then
 * rounding cases (ties, both signs, random). */
static uint32_t bib_vk_probe_cases(bib_vk_case_t *c) {
    uint64_t s = 0x5eedb1bull;
    uint32_t n = 0;
    while (n < BIB_VK_FMA_CASES) {
        float x = bib_f32_from_bits(0x3f800000u | (bib_vk_rand(&s) & 0x7fffff));
        float y = bib_f32_from_bits(0x3f800000u | (bib_vk_rand(&s) & 0x7fffff));
        if (n & 1)
            x = -x;
        volatile float p = x * y;
        float z = (n & 2) ? -p : bib_f32_from_bits(bib_f32_bits(-p) ^ 1u);
        volatile float unfused = p + z;
        if (fmaf(x, y, z) != unfused)
            c[n++] = (bib_vk_case_t){x, y, z};
    }
    const float t70 = ldexpf(1.0f, -70), d149 = ldexpf(1.0f, -149);
    bib_vk_case_t den[BIB_VK_DEN_CASES] = {
        {t70, t70, 0.0f},                    /* mul: normal * normal -> denormal */
        {3 * d149, d149, 0.0f},              /* add: denormal + denormal */
        {ldexpf(1.5f, -140), 0x1p20f, 0.0f}, /* mul: denormal input -> normal */
        {-ldexpf(1.0f, -130), 0.5f, d149},   /* mul -> denormal; fma with denormal */
        {ldexpf(1.0f, -75), ldexpf(1.0f, -75), d149},
        {ldexpf(1.0f, -126), -ldexpf(1.0f, -127), 0.0f}, /* add -> denormal */
        {ldexpf(1.0f, -100), ldexpf(1.0f, -30), -ldexpf(1.0f, -131)},
        {-d149, -d149, d149},
        {ldexpf(1.75f, -127), 1.5f, -ldexpf(1.0f, -127)},
        {0x1p-20f, 0x1p-110f, ldexpf(1.0f, -148)},
        {ldexpf(1.0f, -149), 0.5f, ldexpf(1.0f, -149)}, /* mul: tie at the bottom */
        {ldexpf(3.0f, -149), 0.5f, 0.0f},
    };
    memcpy(c + n, den, sizeof den);
    n += BIB_VK_DEN_CASES;
    bib_vk_case_t ties[4] = {
        {1.0f, 0x1p-24f, 0.0f},
        {1.0f + 0x1p-23f, 0x1p-24f, 0.0f},
        {-1.0f, -0x1p-24f, 0.0f},
        {1.0f + 0x1p-12f, 1.0f + 0x1p-11f, 0.0f},
    };
    memcpy(c + n, ties, sizeof ties);
    n += 4;
    for (uint32_t i = 0; i < BIB_VK_RTE_CASES - 4; i++) {
        float x = bib_f32_from_bits(bib_vk_rand(&s) & 0xbfffffffu);
        float y =
            bib_f32_from_bits((bib_vk_rand(&s) & 0x807fffffu) | (bib_f32_bits(x) & 0x7f800000u));
        c[n++] = (bib_vk_case_t){x, y, 0.0f};
    }
    return n;
}

/* The first of cases [0, n) whose fma in res (every third float) is not the
 * host's, or -1. */
static int bib_vk_first_wrong(const bib_vk_case_t *c, const float *res, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (bib_f32_bits(res[3 * i]) != bib_f32_bits(fmaf(c[i].x, c[i].y, c[i].z)))
            return (int)i;
    return -1;
}

/* "WHAT (case: fma(x, y, z) gave G, want W)" with the operands' bits. */
static void bib_vk_case_note(char *out, size_t len, const char *what, const bib_vk_case_t *c,
                             float got) {
    snprintf(out, len, "%s: fma(0x%08x, 0x%08x, 0x%08x) gave 0x%08x, want 0x%08x", what,
             bib_f32_bits(c->x), bib_f32_bits(c->y), bib_f32_bits(c->z), bib_f32_bits(got),
             bib_f32_bits(fmaf(c->x, c->y, c->z)));
}

/* The loop probe (loops.comp): how many loop iterations one invocation may
 * run, counting every loop of it, before the driver stops them. Mesa's
 * llvmpipe (lavapipe) ends each loop of an invocation once 65535 iterations
 * of all its loops together have run (LP_MAX_TGSI_LOOP_ITERATIONS), with no
 * error: the rest of the work is silently left undone. The probe runs a
 * single loop of 2^20 iterations and 1024 loops of 1024 inside one; where
 * either stops short, the fewer iterations that ran are the limit, and
 * bib_vk_supports sends every call whose shader could loop more to the CPU
 * executor. Where both run in full no limit is found (0) and nothing
 * changes. Where there is a limit, a loop of 4096 iterations that each
 * divide through bib_div says whether the 27 steps of its loop count too:
 * they do unless the driver unrolls them (lavapipe does, though not
 * bib_sqrt's, which the kernels run once a row at most). */
static bib_status_t bib_vk_probe_loops(bib_executor_t *ex, char *why, size_t why_len) {
    enum { SINGLE = 1u << 20, OUTER = 1024, INNER = 1024, DIVIDING = 4096 };
    const uint32_t single[3] = {SINGLE, 0, 0}, nested[3] = {0, OUTER, INNER},
                   dividing[3] = {DIVIDING, 0, 0};
    uint32_t a[3] = {0}, b[3] = {0}, d[3] = {0};
    bib_status_t st = bib_vk_run_loops(ex, single, false, a);
    if (st == BIB_OK)
        st = bib_vk_run_loops(ex, nested, false, b);
    ex->loop_limit = 0;
    ex->loop_fixed = false;
    if (st == BIB_OK && (a[0] < SINGLE || b[1] < OUTER * INNER)) {
        /* The nested loops' iterations in all: the inner ones that ran,
           and for each inner loop begun its outer iteration and the pass
           that leaves it. */
        uint32_t all = b[1] + 2 * ((b[1] + INNER - 1) / INNER);
        ex->loop_limit = a[0] < all ? a[0] : all;
        st = bib_vk_run_loops(ex, dividing, true, d);
        ex->loop_fixed = d[0] < DIVIDING;
    }
    if (st != BIB_OK)
        snprintf(why, why_len, "loop probe failed: %s", ex->error);
    return st;
}

/* Runs the probes and chooses the fma path. Returns BIB_E_UNAVAILABLE (with
 * why) for a device on which no exact path exists. */
static bib_status_t bib_vk_probe(bib_executor_t *ex, char *why, size_t why_len) {
    enum { N = BIB_VK_FMA_CASES + BIB_VK_DEN_CASES + BIB_VK_RTE_CASES };
    bib_vk_case_t cases[N];
    float res[3 * N];
    uint32_t n = bib_vk_probe_cases(cases);
    bib_status_t st = bib_vk_run_probe(ex, BIB_VK_FMA_NATIVE, &cases[0].x, res, n);
    if (st != BIB_OK) {
        snprintf(why, why_len, "probe failed: %s", ex->error);
        return st;
    }
    ex->probe_denormals = true;
    ex->probe_rte = true;
    for (uint32_t i = 0; i < n; i++) {
        volatile float p = cases[i].x * cases[i].y, s = cases[i].x + cases[i].y;
        bool den = i >= BIB_VK_FMA_CASES && i < BIB_VK_FMA_CASES + BIB_VK_DEN_CASES;
        bool ok_ps = bib_f32_bits(res[3 * i + 1]) == bib_f32_bits(p) &&
                     bib_f32_bits(res[3 * i + 2]) == bib_f32_bits(s);
        if (den && !ok_ps)
            ex->probe_denormals = false;
        if (i >= BIB_VK_FMA_CASES + BIB_VK_DEN_CASES && !ok_ps)
            ex->probe_rte = false;
    }
    ex->fma_path = BIB_VK_FMA_NATIVE;
    if (!ex->probe_rte) {
        snprintf(why, why_len, "'%s' does not round float add/mul to nearest-even",
                 ex->props.deviceName);
        return BIB_E_UNAVAILABLE;
    }
    if (!ex->probe_denormals) {
        snprintf(why, why_len, "'%s' flushes float denormals (no DenormPreserve)",
                 ex->props.deviceName);
        return BIB_E_UNAVAILABLE;
    }
    /* The fused path must also handle the denormal cases exactly. */
    int bad = bib_vk_first_wrong(cases, res, BIB_VK_FMA_CASES + BIB_VK_DEN_CASES);
    /* BIB_VK_FMA (tests) takes one of the other paths where fma() would do. */
    const char *force = getenv("BIB_VK_FMA");
    bib_vk_fma_path_t forced = BIB_VK_FMA_NATIVE;
    if (force != NULL && strcmp(force, "emulated") == 0)
        forced = BIB_VK_FMA_EMULATED;
    else if (force != NULL && strcmp(force, "flushing-simulated") == 0)
        forced = BIB_VK_FMA_FLUSHING_SIMULATED;
    if (bad < 0 && forced == BIB_VK_FMA_NATIVE)
        return BIB_OK;
    if (forced != BIB_VK_FMA_NATIVE)
        snprintf(ex->fma_note, sizeof ex->fma_note, "BIB_VK_FMA=%s", force);
    else
        bib_vk_case_note(ex->fma_note, sizeof ex->fma_note,
                         bad < BIB_VK_FMA_CASES ? "fma() not fused" : "fma() flushes denormals",
                         &cases[bad], res[3 * bad]);
    if (!ex->has_f64) {
        snprintf(why, why_len,
                 "'%s' has no exact fma() (%s) and no shaderFloat64 for its emulation",
                 ex->props.deviceName, ex->fma_note);
        return BIB_E_UNAVAILABLE;
    }
    /* The candidates, fastest first: where fma() is fused on every normal
       case and only loses denormals, fma() with the emulation for those;
       else, or where that fails its probe, the emulation throughout. */
    bib_vk_fma_path_t try[2] = {BIB_VK_FMA_EMULATED, BIB_VK_FMA_EMULATED};
    uint32_t ntry = 1;
    if (forced != BIB_VK_FMA_NATIVE)
        try[0] = forced;
    else if (bad >= BIB_VK_FMA_CASES)
        try[0] = BIB_VK_FMA_FLUSHING, ntry = 2;
    char notes[2][160];
    for (uint32_t t = 0; t < ntry; t++) {
        st = bib_vk_run_probe(ex, try[t], &cases[0].x, res, n);
        if (st != BIB_OK) {
            snprintf(why, why_len, "probe failed: %s", ex->error);
            return st;
        }
        int wrong = bib_vk_first_wrong(cases, res, n);
        if (wrong < 0) {
            ex->fma_path = try[t];
            return BIB_OK;
        }
        bib_vk_case_note(notes[t], sizeof notes[t],
                         try[t] == BIB_VK_FMA_EMULATED
                             ? "fp64 emulation wrong"
                             : "fma() with the emulation for denormals wrong",
                         &cases[wrong], res[3 * wrong]);
    }
    snprintf(why, why_len, "'%s': no exact fma: %s; %s%s%s", ex->props.deviceName, ex->fma_note,
             notes[0], ntry > 1 ? "; " : "", ntry > 1 ? notes[1] : "");
    return BIB_E_UNAVAILABLE;
}

/* ---- init and shutdown --------------------------------------------------- */

/* A lost executor's device may still run the work that timed out (on
 * lavapipe a CPU thread spinning in the shader): destroying the device, its
 * memory or its pipelines under it is undefined, and waiting for it may never
 * end. Unless the work has finished since, the device and everything made
 * from it are abandoned (leaked) until the process ends. */
static void bib_vk_abandon(bib_executor_t *ex) {
    free(ex->pipelines);
    free(ex->modules);
    free(ex->stamps);
    free(ex);
}

void bib_vk_shutdown(bib_executor_t *ex) {
    if (!ex)
        return;
    if (ex->lost && ex->device && vkGetFenceStatus(ex->device, ex->fence) != VK_SUCCESS) {
        bib_vk_abandon(ex);
        return;
    }
    ex->lost = false; /* the work finished: everything can be destroyed as usual */
    if (ex->device) {
        bib_vk_flush(ex); /* waits at most the timeout */
        if (ex->lost) {
            bib_vk_abandon(ex);
            return;
        }
        vkDeviceWaitIdle(ex->device);
        bib_vk_cache_save(ex);
        for (uint32_t i = 0; i < ex->pipeline_count; i++)
            vkDestroyPipeline(ex->device, ex->pipelines[i].pipeline, NULL);
        for (uint32_t i = 0; i < ex->module_count; i++)
            if (ex->modules[i])
                vkDestroyShaderModule(ex->device, ex->modules[i], NULL);
        if (ex->pipeline_cache)
            vkDestroyPipelineCache(ex->device, ex->pipeline_cache, NULL);
        if (ex->query_pool)
            vkDestroyQueryPool(ex->device, ex->query_pool, NULL);
        bib_vk_memory_shutdown(ex);
        if (ex->program_pool)
            vkDestroyDescriptorPool(ex->device, ex->program_pool, NULL);
        if (ex->descriptor_pool)
            vkDestroyDescriptorPool(ex->device, ex->descriptor_pool, NULL);
        if (ex->pipeline_layout)
            vkDestroyPipelineLayout(ex->device, ex->pipeline_layout, NULL);
        if (ex->set_layout)
            vkDestroyDescriptorSetLayout(ex->device, ex->set_layout, NULL);
        if (ex->fence)
            vkDestroyFence(ex->device, ex->fence, NULL);
        if (ex->command_pool)
            vkDestroyCommandPool(ex->device, ex->command_pool, NULL);
        vkDestroyDevice(ex->device, NULL);
    }
    if (ex->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                ex->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy)
            destroy(ex->instance, ex->messenger, NULL);
    }
    if (ex->instance)
        vkDestroyInstance(ex->instance, NULL);
    free(ex->pipelines);
    free(ex->modules);
    free(ex->stamps);
    free(ex);
}

static bib_status_t bib_vk_create_instance(bib_executor_t *ex, bool validation, char *why,
                                           size_t why_len) {
    uint32_t version = VK_API_VERSION_1_0;
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (enum_version)
        enum_version(&version);
    if (version < VK_API_VERSION_1_1) {
        snprintf(why, why_len, "the Vulkan loader supports only Vulkan 1.0 (need 1.1)");
        return BIB_E_UNAVAILABLE;
    }
    uint32_t api = version < VK_API_VERSION_1_3 ? version : VK_API_VERSION_1_3;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "bib",
                             .pEngineName = "bib",
                             .apiVersion = api};
    const char *layers[1], *exts[2];
    uint32_t nlayers = 0, nexts = 0;
    ex->validation = validation && bib_vk_has_layer("VK_LAYER_KHRONOS_validation") &&
                     bib_vk_has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (ex->validation) {
        layers[nlayers++] = "VK_LAYER_KHRONOS_validation";
        exts[nexts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }
    VkInstanceCreateFlags flags = 0;
    if (bib_vk_has_instance_ext(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        exts[nexts++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = bib_vk_debug_cb,
        .pUserData = ex};
    /* Synchronization validation checks the barriers of bib_vk_hazard. */
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT vf = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                  .pNext = &mci,
                                  .enabledValidationFeatureCount = 1,
                                  .pEnabledValidationFeatures = enables};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pNext = ex->validation ? &vf : NULL,
                               .flags = flags,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = nlayers,
                               .ppEnabledLayerNames = layers,
                               .enabledExtensionCount = nexts,
                               .ppEnabledExtensionNames = exts};
    VkResult r = vkCreateInstance(&ci, NULL, &ex->instance);
    if (r != VK_SUCCESS) {
        ex->instance = VK_NULL_HANDLE;
        snprintf(why, why_len, "no Vulkan instance (vkCreateInstance: VkResult %d%s)", (int)r,
                 r == VK_ERROR_INCOMPATIBLE_DRIVER ? ", no Vulkan driver installed" : "");
        return BIB_E_UNAVAILABLE;
    }
    if (ex->validation) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                ex->instance, "vkCreateDebugUtilsMessengerEXT");
        if (create)
            create(ex->instance, &mci, NULL, &ex->messenger);
    }
    return BIB_OK;
}

static bib_status_t bib_vk_create_objects(bib_executor_t *ex) {
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                   .queueFamilyIndex = ex->queue_family};
    bib_status_t st = bib_vk_check(
        ex, vkCreateCommandPool(ex->device, &pci, NULL, &ex->command_pool), "vkCreateCommandPool");
    if (st != BIB_OK)
        return st;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = ex->command_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    if ((st = bib_vk_check(ex, vkAllocateCommandBuffers(ex->device, &cai, &ex->cmd),
                           "vkAllocateCommandBuffers")) != BIB_OK)
        return st;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((st = bib_vk_check(ex, vkCreateFence(ex->device, &fci, NULL, &ex->fence),
                           "vkCreateFence")) != BIB_OK)
        return st;
    VkDescriptorSetLayoutBinding b[BIB_VK_BINDINGS];
    for (uint32_t i = 0; i < BIB_VK_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                              VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo lci = {.sType =
                                               VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = BIB_VK_BINDINGS,
                                           .pBindings = b};
    if ((st = bib_vk_check(ex, vkCreateDescriptorSetLayout(ex->device, &lci, NULL, &ex->set_layout),
                           "vkCreateDescriptorSetLayout")) != BIB_OK)
        return st;
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(bib_vk_push_t)};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1,
                                       .pSetLayouts = &ex->set_layout,
                                       .pushConstantRangeCount = 1,
                                       .pPushConstantRanges = &pr};
    if ((st =
             bib_vk_check(ex, vkCreatePipelineLayout(ex->device, &plci, NULL, &ex->pipeline_layout),
                          "vkCreatePipelineLayout")) != BIB_OK)
        return st;
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               BIB_VK_BINDINGS * BIB_VK_SETS_PER_POOL};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = BIB_VK_SETS_PER_POOL,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &ps};
    return bib_vk_check(ex, vkCreateDescriptorPool(ex->device, &dpci, NULL, &ex->descriptor_pool),
                        "vkCreateDescriptorPool");
}

bib_status_t bib_vk_init(const bib_executor_config_t *config, bib_executor_t **out, char *why,
                         size_t why_len) {
    *out = NULL;
    if (why_len)
        why[0] = 0;
    bib_executor_t *ex = calloc(1, sizeof *ex);
    if (!ex) {
        snprintf(why, why_len, "out of host memory");
        return BIB_E_NOMEM;
    }
    const char *selector = getenv("BIB_VK_DEVICE"), *from = "BIB_VK_DEVICE";
    /* Lets tests run the GPU tile configuration on any device. */
    const char *tiles = getenv("BIB_VK_MATMUL_TILES");
    ex->matmul_tiles = bib_vk_matmul_tiles(tiles);
    if (config && config->device && *config->device)
        selector = config->device, from = NULL;
    bib_status_t st = bib_vk_create_instance(ex, config && config->validation, why, why_len);
    if (st == BIB_OK)
        st = bib_vk_pick_device(ex, selector, from, why, why_len);
    if (st == BIB_OK)
        st = bib_vk_create_device(ex, why, why_len);
    if (st == BIB_OK && (st = bib_vk_create_objects(ex)) != BIB_OK)
        snprintf(why, why_len, "%s", ex->error);
    if (st == BIB_OK) {
        bib_vk_cache_load(ex);
        if ((st = bib_vk_memory_init(ex)) != BIB_OK)
            snprintf(why, why_len, "%s", ex->error);
    }
    if (st == BIB_OK)
        st = bib_vk_probe(ex, why, why_len);
    if (st == BIB_OK)
        st = bib_vk_probe_loops(ex, why, why_len);
    if (st != BIB_OK) {
        bib_vk_shutdown(ex);
        return st == BIB_E_NOMEM ? st : BIB_E_UNAVAILABLE;
    }
    /* The probes above are BIB's own short work: the limit is for what
       follows. */
    ex->timeout_ms = config ? config->timeout_ms : 0;
    /* Whether the 32-bit modes are really in the shaders (the independence
       rules may leave them out; the widths do not depend on fp64 use). */
    bool den32 = ex->float_controls && (bib_vk_mode_widths(ex->denorm_indep, false, ex->denorm16,
                                                           ex->denorm32, ex->denorm64) &
                                        2u);
    bool rte32 = ex->float_controls &&
                 (bib_vk_mode_widths(ex->round_indep, false, ex->rte16, ex->rte32, ex->rte64) & 2u);
    /* Where DenormPreserve is left out, the device's rule and support say why. */
    char den_desc[160];
    static const char *const indep_name[] = {"32-bit only", "all", "none"};
    if (den32)
        snprintf(den_desc, sizeof den_desc, ", DenormPreserve declared");
    else if (!ex->float_controls)
        snprintf(den_desc, sizeof den_desc, ", no float controls");
    else
        snprintf(den_desc, sizeof den_desc,
                 ", DenormPreserve not declared (independence %s; preserve 16/32/64: %d/%d/%d)",
                 (unsigned)ex->denorm_indep < 3 ? indep_name[ex->denorm_indep] : "unknown",
                 ex->denorm16, ex->denorm32, ex->denorm64);
    char fma_desc[224];
    if (ex->fma_path == BIB_VK_FMA_NATIVE)
        snprintf(fma_desc, sizeof fma_desc, "native (fused, probed)");
    else if (ex->fma_path == BIB_VK_FMA_EMULATED)
        snprintf(fma_desc, sizeof fma_desc, "emulated (fp64 round-to-odd; %s)", ex->fma_note);
    else
        snprintf(fma_desc, sizeof fma_desc,
                 "fused fma(), emulated where denormals meet it (probed; %s)", ex->fma_note);
    bib_device_facts_t *f = &ex->facts;
    snprintf(f->name, sizeof f->name, "%s", ex->props.deviceName);
    snprintf(f->kind, sizeof f->kind, "%s", bib_vk_type_name(ex->props.deviceType));
    snprintf(f->fma, sizeof f->fma, "%s", fma_desc);
    snprintf(f->denormals, sizeof f->denormals, "%s%s",
             ex->probe_denormals ? "preserved (probed)" : "flushed", den_desc);
    snprintf(f->rounding, sizeof f->rounding, "%s%s",
             ex->probe_rte ? "nearest-even (probed)" : "not nearest-even",
             rte32 ? ", RoundingModeRTE declared" : "");
    f->fp64 = ex->has_f64;
    char loops[160] = "no limit found (probed)";
    if (ex->loop_limit)
        snprintf(loops, sizeof loops,
                 "%u iterations an invocation (probed%s; calls that could loop more run on "
                 "the CPU)",
                 ex->loop_limit, ex->loop_fixed ? ", bib_div's 27 steps counted" : "");
    snprintf(ex->describe, sizeof ex->describe,
             "vulkan: %s (%s, Vulkan %u.%u); fma: %s; denormals: %s; rounding: %s; fp64: %s; "
             "loops: %s",
             f->name, f->kind, VK_API_VERSION_MAJOR(ex->props.apiVersion),
             VK_API_VERSION_MINOR(ex->props.apiVersion), f->fma, f->denormals, f->rounding,
             f->fp64 ? "yes" : "no", loops);
    uint64_t free_bytes = 0;
    if (bib_vk_memory_query(ex, &free_bytes, &f->memory_bytes) != BIB_OK)
        f->memory_bytes = 0;
    f->max_buffer_bytes = ex->props.limits.maxStorageBufferRange;
    f->max_workgroup = ex->props.limits.maxComputeWorkGroupInvocations;
    f->shared_memory_bytes = ex->props.limits.maxComputeSharedMemorySize;
    f->loop_limit = ex->loop_limit;
    *out = ex;
    return BIB_OK;
}

const char *bib_vk_error(const bib_executor_t *ex) {
    return ex ? ex->error : "";
}

void bib_vk_facts(bib_executor_t *ex, bib_device_facts_t *out) {
    *out = ex->facts;
}

const char *bib_vk_describe(bib_executor_t *ex) {
    return ex->describe;
}

bib_status_t bib_vk_synchronize(bib_executor_t *ex) {
    return bib_vk_flush(ex);
}

uint32_t bib_vulkan_validation_messages(const bib_executor_t *ex) {
    return ex->validation_messages;
}

int bib_vulkan_validation_active(const bib_executor_t *ex) {
    return ex->validation && ex->messenger != VK_NULL_HANDLE;
}

uint64_t bib_vulkan_submits(const bib_executor_t *ex) {
    return ex->submits;
}

uint32_t bib_vulkan_loop_limit(const bib_executor_t *ex) {
    return ex->loop_limit;
}
