/* vm/module.c: ownership of an in-memory module and the diagnostic helper.
 *
 * Every array a bib_module_t points to comes from malloc and is released here
 * with free; whoever fills a module (reader, builder, assembler) must allocate
 * with malloc. Reading, writing and verifying live in format.c and verify.c.
 */
#include "module.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bib_status_t bib_diag_set(bib_diag_t *diag, bib_status_t status, const char *format, ...) {
    if (diag == NULL)
        return status;
    va_list ap;
    va_start(ap, format);
    vsnprintf(diag->msg, sizeof diag->msg, format, ap);
    va_end(ap);
    return status;
}

void bib_module_free(bib_module_t *m) {
    if (m == NULL)
        return;
    free(m->code);
    free(m->consts);
    free(m->data);
    if (m->funcs != NULL)
        for (uint32_t i = 0; i < m->func_count; i++)
            free(m->funcs[i].name);
    free(m->funcs);
    if (m->imports != NULL)
        for (uint32_t i = 0; i < m->import_count; i++)
            free(m->imports[i]);
    free(m->imports);
    free(m->source_name);
    free(m->lines);
    for (uint32_t i = 0; i < m->label_count; i++)
        free(m->labels[i].name);
    free(m->labels);
    if (m->tensors != NULL)
        for (uint32_t i = 0; i < m->tensor_count; i++) {
            free(m->tensors[i].name);
            free(m->tensors[i].init);
        }
    free(m->tensors);
    if (m->dim_names != NULL)
        for (uint32_t i = 0; i < m->dim_name_count; i++)
            free(m->dim_names[i]);
    free(m->dim_names);
    if (m->shaders != NULL)
        for (uint32_t i = 0; i < m->shader_count; i++) {
            free(m->shaders[i].name);
            free(m->shaders[i].entry);
            free(m->shaders[i].spirv);
        }
    free(m->shaders);
    if (m->kernels != NULL)
        for (uint32_t i = 0; i < m->kernel_count; i++) {
            free(m->kernels[i].name);
            free(m->kernels[i].entry);
            free(m->kernels[i].params);
            free(m->kernels[i].ptx);
        }
    free(m->kernels);
    free(m);
}
