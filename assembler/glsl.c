/* assembler/glsl.c: GLSL compute shaders compiled to SPIR-V with libshaderc.
 *
 * The one place that calls libshaderc (and, through it, glslang and
 * SPIRV-Tools, several megabytes of C++). libbib.a and the programs built
 * from it link this file; libbib.so does not: it loads this file's build,
 * libbib-glsl.so.N, the first time a .basm file has GLSL in it
 * (assembler/devcode.c), so that embedding the VM costs no shader compiler.
 */
#include "assembler/glsl.h"

#include <shaderc/shaderc.h>
#include <stdlib.h>
#include <string.h>

BIB_GLSL_EXPORT int bib_glsl_compile(const char *src, size_t len, const char *name,
                                     const char *entry, uint32_t **words, uint32_t *count,
                                     char **errors) {
    *words = NULL;
    *count = 0;
    *errors = NULL;
    shaderc_compiler_t compiler = shaderc_compiler_initialize();
    shaderc_compile_options_t options = shaderc_compile_options_initialize();
    if (compiler == NULL || options == NULL) {
        shaderc_compile_options_release(options);
        shaderc_compiler_release(compiler);
        *errors = strdup("the shader compiler (libshaderc) could not start");
        return 0;
    }
    shaderc_compile_options_set_source_language(options, shaderc_source_language_glsl);
    shaderc_compile_options_set_target_env(options, shaderc_target_env_vulkan,
                                           shaderc_env_version_vulkan_1_1);
    shaderc_compile_options_set_optimization_level(options, shaderc_optimization_level_performance);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(compiler, src, len, shaderc_compute_shader, name, entry, options);
    int ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    if (ok) {
        size_t bytes = shaderc_result_get_length(r);
        *words = malloc(bytes > 0 ? bytes : 4);
        if (*words != NULL) {
            memcpy(*words, shaderc_result_get_bytes(r), bytes);
            *count = (uint32_t)(bytes / 4);
        } else {
            ok = 0;
            *errors = strdup("out of memory for the compiled shader");
        }
    } else {
        const char *msg = shaderc_result_get_error_message(r);
        *errors = strdup(msg != NULL && msg[0] != '\0' ? msg : "the shader did not compile");
    }
    shaderc_result_release(r);
    shaderc_compile_options_release(options);
    shaderc_compiler_release(compiler);
    return ok;
}
