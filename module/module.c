/* module/module.c: ownership of an in-memory module and the diagnostic helper.
 *
 * Every array a bib_module_t points to comes from malloc and is released here
 * with free; whoever fills a module (reader, builder, assembler) must allocate
 * with malloc. Reading, writing and verifying live in format.c and verify.c.
 */
#include "module/module.h"

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
    free(m->ops);
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

uint64_t bib_module_tensor_regs_named(const bib_insn_t *code, uint32_t count,
                                      const bib_tensor_decl_t *decls, uint32_t ndecls) {
    uint64_t used = 0;
    for (uint32_t pc = 0; pc < count; pc++) {
        int op = bib_isa_find_code(code[pc].op);
        if (op < 0)
            continue;
        const bib_opinfo_t *info = &bib_isa_table[op];
        const uint32_t words[4] = {code[pc].a, code[pc].b, code[pc].c, code[pc].d};
        for (int k = 0; k < 4; k++) {
            uint32_t kind = info->kinds[k];
            if ((kind == BIB_K_TD || kind == BIB_K_TS || kind == BIB_K_TM) && words[k] >= used)
                used = (uint64_t)words[k] + 1;
        }
    }
    for (uint32_t i = 0; i < ndecls; i++)
        if (decls[i].reg >= used)
            used = (uint64_t)decls[i].reg + 1;
    return used;
}
