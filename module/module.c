/* module/module.c: ownership of an in-memory module and the diagnostic helper.
 *
 * Every array a bib_module_t points to comes from malloc and is released here
 * with free; whoever fills a module (reader, builder, assembler) must allocate
 * with malloc. Reading, writing and verifying live in format.c and verify.c.
 */
#include "module/module.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    bib_names_free(&m->entry_labels);
    bib_const_index_free(&m->const_index);
    bib_liveness_tail_free(m->liveness_tail);
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

/* Grows *p, of elements elem bytes each with room for *room of them (count
   in use when *room is 0), to hold need: twice as many at least. */
static bool grow(void **p, uint32_t *room, uint32_t count, uint32_t need, size_t elem) {
    uint32_t have = *room > count ? *room : count;
    if (need <= have && (*p != NULL || need == 0))
        return true;
    uint64_t want = (uint64_t)have * 2 > need ? (uint64_t)have * 2 : need;
    if (want > UINT32_MAX)
        want = need;
    void *q = realloc(*p, (size_t)want * elem);
    if (q == NULL)
        return false;
    *p = q;
    *room = (uint32_t)want;
    return true;
}

bib_status_t bib_module_reserve(bib_module_t *m, uint32_t code, uint32_t consts, uint32_t labels) {
    /* code, lines and ops share code_room: each grows to the same room. */
    uint32_t room = m->code_room;
    bool ok = grow((void **)&m->code, &room, m->code_count, code, sizeof *m->code);
    if (ok && room != m->code_room) {
        uint32_t lines_room = m->code_room, ops_room = m->code_room;
        ok = (m->lines == NULL ||
              grow((void **)&m->lines, &lines_room, m->code_count, room, sizeof *m->lines)) &&
             (m->ops == NULL ||
              grow((void **)&m->ops, &ops_room, m->code_count, room, sizeof *m->ops));
        if (ok)
            m->code_room = room;
    }
    ok = ok && grow((void **)&m->consts, &m->const_room, m->const_count, consts, sizeof *m->consts);
    ok = ok && grow((void **)&m->labels, &m->label_room, m->label_count, labels, sizeof *m->labels);
    return ok ? BIB_OK : BIB_E_NOMEM;
}

bib_status_t bib_module_add_labels(bib_module_t *m, uint32_t pc, const char *const *names,
                                   uint32_t n) {
    if (n == 0)
        return BIB_OK;
    if (bib_module_reserve(m, m->code_count, m->const_count, m->label_count + n) != BIB_OK)
        return BIB_E_NOMEM;
    bib_label_t *labels = m->labels;
    char **copies = calloc(n, sizeof *copies);
    bool ok = copies != NULL;
    for (uint32_t i = 0; ok && i < n; i++)
        ok = (copies[i] = strdup(names[i])) != NULL;
    if (!ok) {
        for (uint32_t i = 0; copies != NULL && i < n; i++)
            free(copies[i]);
        free(copies);
        return BIB_E_NOMEM;
    }
    /* Each goes in after the labels of lower pc, and among those of its pc
       after the names that sort before its own. */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = m->label_count;
        while (at > 0 && labels[at - 1].pc == pc && strcmp(labels[at - 1].name, copies[i]) > 0)
            at--;
        memmove(&labels[at + 1], &labels[at], (m->label_count - at) * sizeof *labels);
        labels[at] = (bib_label_t){pc, copies[i]};
        m->label_count++;
    }
    free(copies);
    /* The index, when built, learns the names (the first pc a name has stays,
       as in bib_module_entry_label's scan). */
    const bib_function_t *f = &m->funcs[m->entry_func];
    for (uint32_t i = 0; m->entry_labels_built && i < n; i++)
        if (pc >= f->entry && bib_names_add(&m->entry_labels, 0, names[i], pc) == BIB_NAMES_NONE) {
            bib_names_free(&m->entry_labels);
            m->entry_labels_built = 0;
        }
    return BIB_OK;
}

int64_t bib_module_label_at(const bib_module_t *m, uint32_t pc) {
    uint32_t lo = 0, hi = m->label_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->labels[mid].pc < pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->label_count && m->labels[lo].pc == pc ? (int64_t)lo : -1;
}

int bib_module_entry_label(bib_module_t *m, const char *name, uint32_t *pc) {
    const bib_function_t *f = &m->funcs[m->entry_func];
    if (!m->entry_labels_built) {
        uint32_t first = m->label_count;
        while (first > 0 && m->labels[first - 1].pc >= f->entry)
            first--;
        for (uint32_t i = first; i < m->label_count; i++)
            if (m->labels[i].pc < f->entry + f->count &&
                bib_names_add(&m->entry_labels, 0, m->labels[i].name, m->labels[i].pc) ==
                    BIB_NAMES_NONE) {
                bib_names_free(&m->entry_labels);
                return -1;
            }
        m->entry_labels_built = 1;
    }
    uint32_t v = bib_names_find(&m->entry_labels, 0, name);
    if (v == BIB_NAMES_NONE)
        return 0;
    *pc = v;
    return 1;
}

int bib_module_const_find(bib_module_t *m, bib_const_t k, uint32_t *index) {
    return bib_const_index_find(&m->const_index, m->consts, m->const_count, k.type, k.bits, index);
}
