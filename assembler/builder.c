/* assembler/builder.c: the module builder (bib_builder_* in include/bib.h) and
 * bib_opcode.
 *
 * A host compiler (or the assembler) declares functions, emits instructions
 * with symbolic operands (label, function, import and constant ids), and
 * finish turns that into a bib_module_t, runs the verifier on it and writes
 * the .bib bytes. Each function body is kept in its own buffer, so bodies may
 * be begun in any order; they are laid out in function-id order, which is what
 * the verifier requires (bodies tile the code section in index order).
 * Reading and writing the container belong to vm/; this file only fills a
 * module.
 */
#include "assembler/asm.h"
#include "module/names.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUILDER_NONE UINT32_MAX

typedef struct builder_func {
    char *name;
    int begun, ended;
    uint32_t nargs, nregs;
    bib_insn_t *code; /* TGT operands still hold label ids */
    uint32_t *lines;
    uint32_t count, cap;
} builder_func_t;

typedef struct builder_label {
    uint32_t func;  /* BUILDER_NONE until bound */
    uint32_t index; /* instruction index inside func */
} builder_label_t;

/* A code label's name, where it was given (bib_builder_label_name). */
typedef struct builder_name {
    uint32_t func, index;
    char *name;
} builder_name_t;

struct bib_builder {
    char error[512];
    bib_status_t failed; /* first failure; finish reports it */
    bool finished;       /* finish ran: the code and data moved into its module */

    builder_func_t *funcs;
    uint32_t func_count, func_cap;
    uint32_t current; /* function whose body is open, or BUILDER_NONE */

    builder_label_t *labels;
    uint32_t label_count, label_cap;

    char **imports;
    uint32_t import_count, import_cap;

    bib_const_t *consts;
    uint32_t const_count, const_cap;
    bib_const_index_t const_index; /* consts by value, for bib_builder_const_find */

    uint8_t *data;
    uint64_t data_size, data_cap;
    uint64_t memory_size;
    int memory_set;

    char *source_name;
    int debug;   /* source or line was set: write a debug section */
    int nodebug; /* ... unless told not to */
    int strip;   /* no debug section and no label names */
    builder_name_t *names;
    uint32_t name_count, name_cap;
    uint32_t line;

    uint32_t entry;
    int entry_set;

    bib_tensor_decl_t *tensors; /* init holds little-endian bytes, as in a module */
    uint32_t tensor_count, tensor_cap;
    char **dim_names;
    uint32_t dim_count, dim_cap;
    uint32_t tensor_regs;
    int tensor_regs_set;

    bib_shader_decl_t *shaders; /* user device code, moved into the module by finish */
    uint32_t shader_count, shader_cap;
    bib_kernel_decl_t *kernels;
    uint32_t kernel_count, kernel_cap;

    /* The names of the functions, imports, dimensions, tensors, shaders and
       kernels, each in its bib_builder_space_t: bib_builder_find. */
    bib_names_t index;
};

static bib_status_t fail(bib_builder_t *b, bib_status_t status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static bib_status_t fail(bib_builder_t *b, bib_status_t status, const char *format, ...) {
    /* The first failure is the one worth reporting: later ones are usually
       its consequences. */
    if (b->failed == BIB_OK) {
        va_list ap;
        va_start(ap, format);
        vsnprintf(b->error, sizeof b->error, format, ap);
        va_end(ap);
        b->failed = status;
    }
    return status;
}

/* Grows *array (elements of elem bytes) so that it holds at least need. */
static int grow(void **array, uint32_t *cap, uint64_t need, size_t elem) {
    if (need <= *cap)
        return 1;
    if (need > UINT32_MAX / 2)
        return 0;
    uint64_t n = *cap ? *cap : 8;
    while (n < need)
        n *= 2;
    void *p = realloc(*array, (size_t)n * elem);
    if (p == NULL)
        return 0;
    *array = p;
    *cap = (uint32_t)n;
    return 1;
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

int64_t bib_opcode(const char *mnemonic) {
    if (mnemonic == NULL)
        return -1;
    int index = bib_isa_find_name(mnemonic);
    return index < 0 ? -1 : (int64_t)bib_isa_table[index].code;
}

bib_builder_t *bib_builder_create(void) {
    bib_builder_t *b = calloc(1, sizeof *b);
    if (b != NULL)
        b->current = BUILDER_NONE;
    return b;
}

void bib_builder_destroy(bib_builder_t *b) {
    if (b == NULL)
        return;
    for (uint32_t i = 0; i < b->func_count; i++) {
        free(b->funcs[i].name);
        free(b->funcs[i].code);
        free(b->funcs[i].lines);
    }
    free(b->funcs);
    free(b->labels);
    for (uint32_t i = 0; i < b->name_count; i++)
        free(b->names[i].name);
    free(b->names);
    for (uint32_t i = 0; i < b->import_count; i++)
        free(b->imports[i]);
    free(b->imports);
    free(b->consts);
    free(b->data);
    free(b->source_name);
    for (uint32_t i = 0; i < b->tensor_count; i++) {
        free(b->tensors[i].name);
        free(b->tensors[i].init);
    }
    free(b->tensors);
    for (uint32_t i = 0; i < b->dim_count; i++)
        free(b->dim_names[i]);
    free(b->dim_names);
    for (uint32_t i = 0; i < b->shader_count; i++) {
        free(b->shaders[i].name);
        free(b->shaders[i].entry);
        free(b->shaders[i].spirv);
    }
    free(b->shaders);
    for (uint32_t i = 0; i < b->kernel_count; i++) {
        free(b->kernels[i].name);
        free(b->kernels[i].entry);
        free(b->kernels[i].params);
        free(b->kernels[i].ptx);
    }
    free(b->kernels);
    bib_names_free(&b->index);
    bib_const_index_free(&b->const_index);
    free(b);
}

/* Names entry index in space (the first of a name keeps it); 0 when out of
   memory, after failing the builder with what. */
static int name_entry(bib_builder_t *b, bib_builder_space_t space, const char *name, uint32_t index,
                      const char *what) {
    if (bib_names_add(&b->index, space, name, index) != BIB_NAMES_NONE)
        return 1;
    fail(b, BIB_E_NOMEM, "out of memory naming %s '%s'", what, name);
    return 0;
}

uint32_t bib_builder_find(const bib_builder_t *b, bib_builder_space_t space, const char *name) {
    return bib_names_find(&b->index, space, name);
}

bib_status_t bib_builder_status(const bib_builder_t *b) {
    return b->failed;
}

const char *bib_builder_function_name(const bib_builder_t *b, uint32_t func) {
    return func < b->func_count ? b->funcs[func].name : NULL;
}

uint32_t bib_builder_tensor_count(const bib_builder_t *b) {
    return b->tensor_count;
}

const bib_tensor_decl_t *bib_builder_tensor_decl(const bib_builder_t *b, uint32_t index) {
    return index < b->tensor_count ? &b->tensors[index] : NULL;
}

const bib_shader_decl_t *bib_builder_shader_decl(const bib_builder_t *b, uint32_t index) {
    return index < b->shader_count ? &b->shaders[index] : NULL;
}

const bib_kernel_decl_t *bib_builder_kernel_decl(const bib_builder_t *b, uint32_t index) {
    return index < b->kernel_count ? &b->kernels[index] : NULL;
}

uint32_t bib_builder_shader(bib_builder_t *b, const char *name, const char *entry,
                            uint32_t bindings, uint32_t push_bytes, const uint32_t *words,
                            uint32_t count) {
    if (b->failed != BIB_OK)
        return UINT32_MAX;
    if (!grow((void **)&b->shaders, &b->shader_cap, (uint64_t)b->shader_count + 1,
              sizeof *b->shaders)) {
        fail(b, BIB_E_NOMEM, "shader '%s': out of memory", name);
        return UINT32_MAX;
    }
    bib_shader_decl_t *sh = &b->shaders[b->shader_count];
    memset(sh, 0, sizeof *sh);
    sh->name = copy_string(name);
    sh->entry = copy_string(entry);
    sh->spirv = malloc(count > 0 ? (size_t)count * 4 : 1);
    if (sh->name == NULL || sh->entry == NULL || sh->spirv == NULL ||
        !name_entry(b, BIB_BUILDER_SHADER, name, b->shader_count, "shader")) {
        free(sh->name);
        free(sh->entry);
        free(sh->spirv);
        fail(b, BIB_E_NOMEM, "shader '%s': out of memory", name);
        return UINT32_MAX;
    }
    if (count > 0)
        memcpy(sh->spirv, words, (size_t)count * 4);
    sh->words = count;
    sh->bindings = bindings;
    sh->push_bytes = push_bytes;
    return b->shader_count++;
}

uint32_t bib_builder_kernel(bib_builder_t *b, const char *name, const char *entry,
                            const char *params, const char *ptx, uint32_t bytes) {
    if (b->failed != BIB_OK)
        return UINT32_MAX;
    if (!grow((void **)&b->kernels, &b->kernel_cap, (uint64_t)b->kernel_count + 1,
              sizeof *b->kernels)) {
        fail(b, BIB_E_NOMEM, "kernel '%s': out of memory", name);
        return UINT32_MAX;
    }
    bib_kernel_decl_t *k = &b->kernels[b->kernel_count];
    memset(k, 0, sizeof *k);
    k->name = copy_string(name);
    k->entry = copy_string(entry);
    k->params = copy_string(params != NULL ? params : "");
    k->ptx = malloc((size_t)bytes + 1);
    if (k->name == NULL || k->entry == NULL || k->params == NULL || k->ptx == NULL ||
        !name_entry(b, BIB_BUILDER_KERNEL, name, b->kernel_count, "kernel")) {
        free(k->name);
        free(k->entry);
        free(k->params);
        free(k->ptx);
        fail(b, BIB_E_NOMEM, "kernel '%s': out of memory", name);
        return UINT32_MAX;
    }
    memcpy(k->ptx, ptx, bytes);
    k->ptx[bytes] = '\0';
    k->ptx_bytes = bytes;
    return b->kernel_count++;
}

const char *bib_builder_error(const bib_builder_t *b) {
    return b == NULL ? "no builder" : b->error;
}

void bib_builder_source(bib_builder_t *b, const char *filename) {
    if (b == NULL)
        return;
    free(b->source_name);
    b->source_name = NULL;
    if (filename != NULL && (b->source_name = copy_string(filename)) == NULL)
        fail(b, BIB_E_NOMEM, "out of memory copying the source name");
    b->debug = 1;
}

void bib_builder_line(bib_builder_t *b, uint32_t line) {
    if (b == NULL)
        return;
    b->line = line;
    b->debug = 1;
}

void bib_builder_nodebug(bib_builder_t *b) {
    b->nodebug = 1;
}

void bib_builder_strip(bib_builder_t *b) {
    b->nodebug = 1;
    b->strip = 1;
}

void bib_builder_label_name(bib_builder_t *b, const char *name) {
    if (b->current == BUILDER_NONE || name == NULL || name[0] == '\0')
        return;
    if (!grow((void **)&b->names, &b->name_cap, (uint64_t)b->name_count + 1, sizeof *b->names) ||
        (b->names[b->name_count].name = copy_string(name)) == NULL) {
        fail(b, BIB_E_NOMEM, "out of memory naming label '%s'", name);
        return;
    }
    b->names[b->name_count].func = b->current;
    b->names[b->name_count].index = b->funcs[b->current].count;
    b->name_count++;
}

static int compare_labels(const void *x, const void *y) {
    const bib_label_t *a = x, *b = y;
    if (a->pc != b->pc)
        return a->pc < b->pc ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The label names, as absolute pcs in the module's one order. A name past
   its function's last instruction marks no pc and is left out, as is one
   the disassembler would give (L<number>). */
static bool place_label_names(const bib_builder_t *b, bib_module_t *m) {
    if (b->strip || b->name_count == 0)
        return true;
    m->labels = calloc(b->name_count, sizeof *m->labels);
    if (m->labels == NULL)
        return false;
    for (uint32_t i = 0; i < b->name_count; i++) {
        const builder_name_t *n = &b->names[i];
        const bib_function_t *f = &m->funcs[n->func];
        const char *p = n->name + 1;
        while (n->name[0] == 'L' && *p >= '0' && *p <= '9')
            p++;
        if (n->index >= f->count || (n->name[0] == 'L' && p > n->name + 1 && *p == '\0'))
            continue;
        bib_label_t *l = &m->labels[m->label_count];
        if ((l->name = copy_string(n->name)) == NULL)
            return false;
        l->pc = f->entry + n->index;
        m->label_count++;
    }
    if (m->label_count == 0) {
        free(m->labels);
        m->labels = NULL;
        return true;
    }
    qsort(m->labels, m->label_count, sizeof *m->labels, compare_labels);
    return true;
}

void bib_builder_entry(bib_builder_t *b, uint32_t func) {
    b->entry = func;
    b->entry_set = 1;
}

uint32_t bib_builder_declare(bib_builder_t *b, const char *name) {
    if (b == NULL)
        return BUILDER_NONE;
    if (!grow((void **)&b->funcs, &b->func_cap, (uint64_t)b->func_count + 1, sizeof *b->funcs)) {
        fail(b, BIB_E_NOMEM, "out of memory declaring function '%s'", name ? name : "");
        return BUILDER_NONE;
    }
    builder_func_t *f = &b->funcs[b->func_count];
    memset(f, 0, sizeof *f);
    if ((f->name = copy_string(name ? name : "")) == NULL) {
        fail(b, BIB_E_NOMEM, "out of memory declaring function '%s'", name ? name : "");
        return BUILDER_NONE;
    }
    if (!name_entry(b, BIB_BUILDER_FUNCTION, f->name, b->func_count, "function")) {
        free(f->name);
        return BUILDER_NONE;
    }
    return b->func_count++;
}

bib_status_t bib_builder_begin(bib_builder_t *b, uint32_t func, uint32_t nargs, uint32_t nregs) {
    if (b == NULL)
        return BIB_E_USAGE;
    if (func >= b->func_count)
        return fail(b, BIB_E_USAGE, "begin: function id %u was never declared (%u declared)", func,
                    b->func_count);
    builder_func_t *f = &b->funcs[func];
    if (b->current != BUILDER_NONE)
        return fail(b, BIB_E_USAGE, "begin '%s': the body of '%s' is still open (call end first)",
                    f->name, b->funcs[b->current].name);
    if (f->begun)
        return fail(b, BIB_E_USAGE, "begin '%s': its body was already begun", f->name);
    if (nregs == 0 || nregs > BIB_MAX_REGS || nargs > nregs)
        return fail(b, BIB_E_USAGE,
                    "begin '%s': %u arguments and %u registers (need 1 <= registers <= %u and "
                    "arguments <= registers)",
                    f->name, nargs, nregs, BIB_MAX_REGS);
    f->begun = 1;
    f->nargs = nargs;
    f->nregs = nregs;
    b->current = func;
    return BIB_OK;
}

bib_status_t bib_builder_end(bib_builder_t *b) {
    if (b == NULL)
        return BIB_E_USAGE;
    if (b->current == BUILDER_NONE)
        return fail(b, BIB_E_USAGE, "end: no function body is open");
    b->funcs[b->current].ended = 1;
    b->current = BUILDER_NONE;
    return BIB_OK;
}

uint32_t bib_builder_label(bib_builder_t *b) {
    if (b == NULL)
        return BUILDER_NONE;
    if (!grow((void **)&b->labels, &b->label_cap, (uint64_t)b->label_count + 1,
              sizeof *b->labels)) {
        fail(b, BIB_E_NOMEM, "out of memory creating label %u", b->label_count);
        return BUILDER_NONE;
    }
    b->labels[b->label_count].func = BUILDER_NONE;
    b->labels[b->label_count].index = 0;
    return b->label_count++;
}

bib_status_t bib_builder_bind(bib_builder_t *b, uint32_t label) {
    if (b == NULL)
        return BIB_E_USAGE;
    if (label >= b->label_count)
        return fail(b, BIB_E_USAGE, "bind: label %u was never created (%u created)", label,
                    b->label_count);
    if (b->current == BUILDER_NONE)
        return fail(b, BIB_E_USAGE, "bind: label %u bound outside a function body", label);
    builder_label_t *l = &b->labels[label];
    if (l->func != BUILDER_NONE)
        return fail(b, BIB_E_USAGE, "bind: label %u is already bound in function '%s'", label,
                    b->funcs[l->func].name);
    l->func = b->current;
    l->index = b->funcs[b->current].count;
    return BIB_OK;
}

uint32_t bib_builder_import(bib_builder_t *b, const char *name) {
    if (b == NULL)
        return BUILDER_NONE;
    if (name == NULL)
        name = "";
    uint32_t known = bib_names_find(&b->index, BIB_BUILDER_IMPORT, name);
    if (known != BIB_NAMES_NONE)
        return known;
    if (!grow((void **)&b->imports, &b->import_cap, (uint64_t)b->import_count + 1,
              sizeof *b->imports) ||
        (b->imports[b->import_count] = copy_string(name)) == NULL) {
        fail(b, BIB_E_NOMEM, "out of memory importing '%s'", name);
        return BUILDER_NONE;
    }
    if (!name_entry(b, BIB_BUILDER_IMPORT, name, b->import_count, "import")) {
        free(b->imports[b->import_count]);
        return BUILDER_NONE;
    }
    return b->import_count++;
}

uint32_t bib_builder_const_bits(bib_builder_t *b, uint32_t type, uint64_t bits) {
    if (!grow((void **)&b->consts, &b->const_cap, (uint64_t)b->const_count + 1,
              sizeof *b->consts)) {
        fail(b, BIB_E_NOMEM, "out of memory adding constant %u", b->const_count);
        return BUILDER_NONE;
    }
    b->consts[b->const_count].type = type;
    b->consts[b->const_count].bits = bits;
    return b->const_count++;
}

uint32_t bib_builder_const_find(bib_builder_t *b, uint32_t type, uint64_t bits) {
    uint32_t i;
    int found = bib_const_index_find(&b->const_index, b->consts, b->const_count, type, bits, &i);
    if (found < 0)
        fail(b, BIB_E_NOMEM, "out of memory indexing %u constants", b->const_count);
    return found > 0 ? i : BUILDER_NONE;
}

uint32_t bib_builder_const_i64(bib_builder_t *b, int64_t value) {
    if (b == NULL)
        return BUILDER_NONE;
    return bib_builder_const_bits(b, BIB_CONST_I64, (uint64_t)value);
}

uint32_t bib_builder_const_f64(bib_builder_t *b, double value) {
    if (b == NULL)
        return BUILDER_NONE;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bib_builder_const_bits(b, BIB_CONST_F64, bits);
}

bib_status_t bib_builder_emit(bib_builder_t *b, uint32_t opcode, uint32_t a, uint32_t bb,
                              uint32_t c, uint32_t d) {
    if (b == NULL)
        return BIB_E_USAGE;
    int index = bib_isa_find_code(opcode);
    if (index < 0)
        return fail(b, BIB_E_USAGE, "emit: unknown opcode word 0x%08X", opcode);
    const bib_opinfo_t *info = &bib_isa_table[index];
    if (b->current == BUILDER_NONE)
        return fail(b, BIB_E_USAGE, "emit %s: no function body is open", info->name);
    builder_func_t *f = &b->funcs[b->current];
    const uint32_t words[4] = {a, bb, c, d};
    /* Ids are checked now, where the caller can still tell which emit was
       wrong; function ids only at finish, since functions may be declared
       after the call that names them. */
    for (int k = 0; k < 4; k++) {
        uint32_t v = words[k];
        switch ((bib_operand_kind_t)info->kinds[k]) {
        case BIB_K_TGT:
            if (v >= b->label_count)
                return fail(b, BIB_E_USAGE,
                            "emit %s in '%s': operand %c is label %u, which was never created",
                            info->name, f->name, 'a' + k, v);
            break;
        case BIB_K_HOST:
            if (v >= b->import_count)
                return fail(b, BIB_E_USAGE,
                            "emit %s in '%s': operand %c is import %u, but there are %u imports",
                            info->name, f->name, 'a' + k, v, b->import_count);
            break;
        case BIB_K_CONST:
            if (v >= b->const_count)
                return fail(b, BIB_E_USAGE,
                            "emit %s in '%s': operand %c is constant %u, but the pool has %u",
                            info->name, f->name, 'a' + k, v, b->const_count);
            break;
        default:
            break;
        }
    }
    if (f->count >= BIB_MAX_CODE ||
        !grow((void **)&f->code, &f->cap, (uint64_t)f->count + 1, sizeof *f->code))
        return fail(b, BIB_E_NOMEM, "emit %s in '%s': out of memory or over %u instructions",
                    info->name, f->name, BIB_MAX_CODE);
    uint32_t *lines = realloc(f->lines, (size_t)f->cap * sizeof *lines);
    if (lines == NULL)
        return fail(b, BIB_E_NOMEM, "emit %s in '%s': out of memory", info->name, f->name);
    f->lines = lines;
    f->code[f->count] = (bib_insn_t){opcode, a, bb, c, d};
    f->lines[f->count] = b->line;
    f->count++;
    return BIB_OK;
}

bib_status_t bib_builder_memory(bib_builder_t *b, uint64_t size) {
    if (b == NULL)
        return BIB_E_USAGE;
    if (size > BIB_MAX_MEMORY)
        return fail(b, BIB_E_USAGE, "memory: %llu bytes is more than the limit %llu",
                    (unsigned long long)size, (unsigned long long)BIB_MAX_MEMORY);
    b->memory_size = size;
    b->memory_set = 1;
    return BIB_OK;
}

/* Makes room for data up to end (at most 4 GiB), zeroing what lies between
   the data so far and end; the data size becomes end when that is more. */
static bib_status_t data_extend(bib_builder_t *b, uint64_t end) {
    if (end > b->data_cap || b->data == NULL) {
        uint64_t cap = b->data_cap ? b->data_cap : 64;
        while (cap < end)
            cap *= 2;
        uint8_t *p = realloc(b->data, (size_t)cap);
        if (p == NULL)
            return fail(b, BIB_E_NOMEM, "data: out of memory for %llu bytes",
                        (unsigned long long)end);
        b->data = p;
        b->data_cap = cap;
    }
    if (end > b->data_size) {
        memset(b->data + b->data_size, 0, (size_t)(end - b->data_size));
        b->data_size = end;
    }
    return BIB_OK;
}

bib_status_t bib_builder_data(bib_builder_t *b, uint64_t offset, const void *bytes, size_t size) {
    if (b == NULL)
        return BIB_E_USAGE;
    if (size == 0)
        return BIB_OK;
    if (bytes == NULL || offset > UINT32_MAX || size > UINT32_MAX - offset)
        return fail(b, BIB_E_USAGE,
                    "data: %zu bytes at offset %llu do not fit the 4 GiB data limit", size,
                    (unsigned long long)offset);
    bib_status_t st = data_extend(b, offset + size);
    if (st == BIB_OK)
        memcpy(b->data + offset, bytes, size);
    return st;
}

uint64_t bib_builder_data_size(const bib_builder_t *b) {
    return b->data_size;
}

uint8_t *bib_builder_data_append(bib_builder_t *b, uint64_t size) {
    uint64_t at = b->data_size;
    if (size > UINT32_MAX - at) {
        fail(b, BIB_E_USAGE, "data: %llu more bytes after %llu do not fit the 4 GiB data limit",
             (unsigned long long)size, (unsigned long long)at);
        return NULL;
    }
    return data_extend(b, at + size) == BIB_OK ? b->data + at : NULL;
}

int64_t bib_builder_tensor_dim(bib_builder_t *b, const char *name) {
    if (b == NULL)
        return 0;
    if (name == NULL) {
        fail(b, BIB_E_USAGE, "tensor_dim: a symbolic dimension needs a name");
        return 0;
    }
    uint32_t known = bib_names_find(&b->index, BIB_BUILDER_DIM, name);
    if (known != BIB_NAMES_NONE)
        return BIB_DIM_SYMBOL(known);
    if (!grow((void **)&b->dim_names, &b->dim_cap, (uint64_t)b->dim_count + 1,
              sizeof *b->dim_names) ||
        (b->dim_names[b->dim_count] = copy_string(name)) == NULL) {
        fail(b, BIB_E_NOMEM, "out of memory declaring dimension '%s'", name);
        return 0;
    }
    if (!name_entry(b, BIB_BUILDER_DIM, name, b->dim_count, "dimension")) {
        free(b->dim_names[b->dim_count]);
        return 0;
    }
    return BIB_DIM_SYMBOL(b->dim_count++);
}

static bib_status_t add_tensor(bib_builder_t *b, const char *what, uint32_t flags, const char *name,
                               uint32_t reg, bib_dtype_t dtype, uint32_t rank, const int64_t *dims,
                               const void *data) {
    if (name == NULL || rank > BIB_MAX_RANK || (rank > 0 && dims == NULL))
        return fail(b, BIB_E_USAGE, "%s '%s': needs a name, and dims for its rank %u (at most %u)",
                    what, name ? name : "", rank, BIB_MAX_RANK);
    bib_tensor_decl_t t;
    memset(&t, 0, sizeof t);
    t.reg = reg;
    t.flags = flags;
    t.dtype = (uint32_t)dtype;
    t.rank = rank;
    for (uint32_t k = 0; k < rank; k++)
        t.dims[k] = dims[k];
    if (flags == BIB_TENSOR_CONST) {
        /* Fixed dims are checked by the verifier; here only what sizes the copy. */
        uint64_t numel = 1;
        for (uint32_t k = 0; k < rank; k++) {
            if (dims[k] < 0 || dims[k] > BIB_MAX_TENSOR_DIM ||
                (dims[k] != 0 && numel > (UINT32_MAX / 4) / (uint64_t)dims[k]))
                return fail(b, BIB_E_USAGE,
                            "%s '%s': dimension %u is %lld; a constant needs fixed sizes whose "
                            "data fits 4 GiB",
                            what, name, k, (long long)dims[k]);
            numel *= (uint64_t)dims[k];
        }
        if (data == NULL && numel != 0)
            return fail(b, BIB_E_USAGE, "%s '%s': no data", what, name);
        t.init_size = numel * 4;
        /* An empty constant (a 0 size) carries no data: init stays NULL. */
        if (numel != 0 && (t.init = malloc((size_t)t.init_size)) == NULL)
            return fail(b, BIB_E_NOMEM, "%s '%s': out of memory for %llu bytes", what, name,
                        (unsigned long long)t.init_size);
        for (uint64_t i = 0; i < numel; i++) {
            uint32_t v;
            memcpy(&v, (const uint8_t *)data + i * 4, 4);
            bib_write_u32le(t.init + i * 4, v);
        }
    }
    if (!grow((void **)&b->tensors, &b->tensor_cap, (uint64_t)b->tensor_count + 1,
              sizeof *b->tensors) ||
        (t.name = copy_string(name)) == NULL ||
        !name_entry(b, BIB_BUILDER_TENSOR, name, b->tensor_count, "tensor")) {
        free(t.name);
        free(t.init);
        return fail(b, BIB_E_NOMEM, "%s '%s': out of memory", what, name);
    }
    b->tensors[b->tensor_count++] = t;
    return BIB_OK;
}

bib_status_t bib_builder_tensor_input(bib_builder_t *b, const char *name, uint32_t reg,
                                      bib_dtype_t dtype, uint32_t rank, const int64_t *dims) {
    if (b == NULL)
        return BIB_E_USAGE;
    return add_tensor(b, "tensor input", BIB_TENSOR_INPUT, name, reg, dtype, rank, dims, NULL);
}

bib_status_t bib_builder_tensor_output(bib_builder_t *b, const char *name, uint32_t reg,
                                       bib_dtype_t dtype, uint32_t rank, const int64_t *dims) {
    if (b == NULL)
        return BIB_E_USAGE;
    return add_tensor(b, "tensor output", BIB_TENSOR_OUTPUT, name, reg, dtype, rank, dims, NULL);
}

bib_status_t bib_builder_tensor_const(bib_builder_t *b, const char *name, uint32_t reg,
                                      bib_dtype_t dtype, uint32_t rank, const int64_t *dims,
                                      const void *data) {
    if (b == NULL)
        return BIB_E_USAGE;
    return add_tensor(b, "tensor constant", BIB_TENSOR_CONST, name, reg, dtype, rank, dims, data);
}

void bib_builder_tensor_regs(bib_builder_t *b, uint32_t count) {
    if (b == NULL)
        return;
    b->tensor_regs = count;
    b->tensor_regs_set = 1;
}

/* Hands the tensor declarations to m (moved, not copied) and sizes the
   register file. */
static bib_status_t build_tensors(bib_builder_t *b, bib_module_t *m) {
    uint64_t used =
        bib_module_tensor_regs_named(m->code, m->code_count, b->tensors, b->tensor_count);
    if (b->tensor_regs_set && b->tensor_regs < used)
        return fail(b, BIB_E_USAGE,
                    "finish: %u tensor registers set, but t%llu is used (need at least %llu)",
                    b->tensor_regs, (unsigned long long)used - 1, (unsigned long long)used);
    if (used > BIB_MAX_TENSOR_REGS)
        return fail(b, BIB_E_USAGE, "finish: tensor register t%llu is past the limit of %u",
                    (unsigned long long)used - 1, BIB_MAX_TENSOR_REGS);
    m->tensor_regs = b->tensor_regs_set ? b->tensor_regs : (uint32_t)used;
    m->tensors = b->tensors;
    m->tensor_count = b->tensor_count;
    m->dim_names = b->dim_names;
    m->dim_name_count = b->dim_count;
    b->tensors = NULL;
    b->tensor_count = b->tensor_cap = 0;
    b->dim_names = NULL;
    b->dim_count = b->dim_cap = 0;
    return BIB_OK;
}

static int compare_names(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Checks what only the whole program can show, lays the bodies out and fills
   a module. On failure the partial module is released. */
static bib_status_t build_module(bib_builder_t *b, bib_module_t **out) {
    if (b->current != BUILDER_NONE)
        return fail(b, BIB_E_USAGE, "finish: the body of '%s' was begun but never ended",
                    b->funcs[b->current].name);
    if (b->func_count == 0)
        return fail(b, BIB_E_USAGE, "finish: the module declares no functions");
    uint64_t total = 0;
    for (uint32_t i = 0; i < b->func_count; i++) {
        if (!b->funcs[i].begun)
            return fail(b, BIB_E_USAGE, "finish: function %u '%s' was declared but has no body", i,
                        b->funcs[i].name);
        total += b->funcs[i].count;
    }
    /* The verifier does not require unique function names, but text names
       functions, so a module with two of the same name could not be
       disassembled and re-assembled. Sorted, so big modules stay fast. */
    const char **names = malloc(b->func_count * sizeof *names);
    if (names == NULL)
        return fail(b, BIB_E_NOMEM, "finish: out of memory");
    for (uint32_t i = 0; i < b->func_count; i++)
        names[i] = b->funcs[i].name;
    qsort(names, b->func_count, sizeof *names, compare_names);
    for (uint32_t i = 1; i < b->func_count; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            bib_status_t st =
                fail(b, BIB_E_USAGE, "finish: two functions are named '%s'", names[i]);
            free(names);
            return st;
        }
    }
    free(names);
    if (total > BIB_MAX_CODE)
        return fail(b, BIB_E_USAGE, "finish: %llu instructions, more than the limit %u",
                    (unsigned long long)total, BIB_MAX_CODE);

    bib_module_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return fail(b, BIB_E_NOMEM, "finish: out of memory");
    int debug = b->debug && !b->nodebug;
    m->code_count = (uint32_t)total;
    m->funcs = calloc(b->func_count, sizeof *m->funcs);
    m->func_count = b->func_count;
    if (m->funcs == NULL)
        goto nomem;
    /* The code moves into the module, as the data does below: the first
       function's arrays grow into the module's and every other function's
       are copied after them and freed, so a large program is not held twice
       (the module is written out while it is held). */
    builder_func_t *first = &b->funcs[0];
    size_t room = total ? total : 1;
    bib_insn_t *code = realloc(first->code, room * sizeof *code);
    if (code == NULL)
        goto nomem;
    m->code = code;
    first->code = NULL;
    if (debug) {
        uint32_t *lines = realloc(first->lines, room * sizeof *lines);
        if (lines == NULL)
            goto nomem;
        m->lines = lines;
    } else {
        free(first->lines);
    }
    first->lines = NULL;
    first->cap = 0;

    uint32_t pc = 0;
    for (uint32_t i = 0; i < b->func_count; i++) {
        builder_func_t *f = &b->funcs[i];
        bib_function_t *mf = &m->funcs[i];
        if ((mf->name = copy_string(f->name)) == NULL)
            goto nomem;
        mf->entry = pc;
        mf->count = f->count;
        mf->nargs = f->nargs;
        mf->nregs = f->nregs;
        if (i > 0 && f->count > 0) {
            memcpy(m->code + pc, f->code, f->count * sizeof *f->code);
            if (debug)
                memcpy(m->lines + pc, f->lines, f->count * sizeof *f->lines);
        }
        if (i > 0) {
            free(f->code);
            free(f->lines);
            f->code = NULL;
            f->lines = NULL;
            f->cap = 0;
        }
        pc += f->count;
    }

    /* Labels become absolute instruction indices now that bodies are placed. */
    for (uint32_t i = 0; i < b->func_count; i++) {
        const bib_function_t *mf = &m->funcs[i];
        for (uint32_t at = mf->entry; at < mf->entry + mf->count; at++) {
            bib_insn_t *insn = &m->code[at];
            const bib_opinfo_t *info = &bib_isa_table[bib_isa_find_code(insn->op)];
            uint32_t *words[4] = {&insn->a, &insn->b, &insn->c, &insn->d};
            for (int k = 0; k < 4; k++) {
                if (info->kinds[k] == BIB_K_FN && *words[k] >= b->func_count) {
                    fail(b, BIB_E_USAGE,
                         "finish: pc %u (%s) in '%s' calls function id %u, which was never "
                         "declared",
                         at, info->name, mf->name, *words[k]);
                    goto failed;
                }
                if (info->kinds[k] != BIB_K_TGT)
                    continue;
                uint32_t id = *words[k];
                const builder_label_t *l = &b->labels[id];
                if (l->func == BUILDER_NONE) {
                    fail(b, BIB_E_USAGE,
                         "finish: label %u, used by pc %u (%s) in '%s', was never bound", id, at,
                         info->name, mf->name);
                    goto failed;
                }
                if (l->func != i) {
                    fail(b, BIB_E_USAGE,
                         "finish: label %u is bound in '%s' but pc %u (%s) in '%s' jumps to it", id,
                         m->funcs[l->func].name, at, info->name, mf->name);
                    goto failed;
                }
                if (l->index >= mf->count) {
                    fail(b, BIB_E_USAGE,
                         "finish: label %u is bound after the last instruction of '%s' (pc %u "
                         "jumps to it)",
                         id, mf->name, at);
                    goto failed;
                }
                *words[k] = mf->entry + l->index;
            }
        }
    }

    if (!place_label_names(b, m))
        goto nomem;
    if (b->const_count > 0) {
        if ((m->consts = malloc(b->const_count * sizeof *m->consts)) == NULL)
            goto nomem;
        memcpy(m->consts, b->consts, b->const_count * sizeof *m->consts);
    }
    m->const_count = b->const_count;
    if (b->import_count > 0) {
        if ((m->imports = calloc(b->import_count, sizeof *m->imports)) == NULL)
            goto nomem;
        m->import_count = b->import_count;
        for (uint32_t i = 0; i < b->import_count; i++)
            if ((m->imports[i] = copy_string(b->imports[i])) == NULL)
                goto nomem;
    }
    /* The data moves into the module, as the device code does below: a
       builder finishes once, and a large data section is not held twice. */
    if (b->data_size > 0) {
        m->data = b->data;
        b->data = NULL;
        b->data_cap = 0;
    }
    m->data_size = (uint32_t)b->data_size;
    m->memory_size = b->memory_set ? b->memory_size : b->data_size;
    if (m->memory_size < m->data_size) {
        fail(b, BIB_E_USAGE, "finish: memory of %llu bytes is smaller than the %u bytes of data",
             (unsigned long long)m->memory_size, m->data_size);
        goto failed;
    }

    if (b->entry_set) {
        m->entry_func = b->entry;
    } else {
        m->entry_func = 0;
        for (uint32_t i = 0; i < b->func_count; i++) {
            if (strcmp(b->funcs[i].name, "main") == 0) {
                m->entry_func = i;
                break;
            }
        }
    }
    if (debug && b->source_name != NULL && (m->source_name = copy_string(b->source_name)) == NULL)
        goto nomem;
    if (build_tensors(b, m) != BIB_OK)
        goto failed;
    /* Device code moves into the module: a builder finishes once. */
    m->shaders = b->shaders;
    m->shader_count = b->shader_count;
    m->kernels = b->kernels;
    m->kernel_count = b->kernel_count;
    b->shaders = NULL;
    b->kernels = NULL;
    b->shader_count = b->shader_cap = b->kernel_count = b->kernel_cap = 0;

    *out = m;
    return BIB_OK;

nomem:
    fail(b, BIB_E_NOMEM, "finish: out of memory");
failed:
    bib_module_free(m);
    return b->failed;
}

bib_status_t bib_builder_finish_module(bib_builder_t *b, bib_module_t **module, uint8_t **out,
                                       size_t *size) {
    if (module != NULL)
        *module = NULL;
    if (out != NULL)
        *out = NULL;
    if (size != NULL)
        *size = 0;
    if (b->failed != BIB_OK)
        return b->failed;
    /* A builder makes one module: its code and data move into it. */
    if (b->finished)
        return fail(b, BIB_E_STATE, "finish: the builder has made its module already");
    b->finished = true;
    bib_module_t *m = NULL;
    bib_status_t st = build_module(b, &m);
    if (st != BIB_OK)
        return st;
    bib_diag_t diag;
    diag.msg[0] = '\0';
    st = bib_module_verify(m, &diag);
    if (st == BIB_OK && out != NULL)
        st = bib_module_write(m, out, size, &diag);
    if (st != BIB_OK) {
        fail(b, st, "%s", diag.msg);
        bib_module_free(m);
        return st;
    }
    if (module != NULL)
        *module = m;
    else
        bib_module_free(m);
    return BIB_OK;
}

bib_status_t bib_builder_finish(bib_builder_t *b, uint8_t **out, size_t *size) {
    if (b == NULL)
        return BIB_E_USAGE;
    if (out == NULL || size == NULL)
        return fail(b, BIB_E_USAGE, "finish: out and size must not be NULL");
    return bib_builder_finish_module(b, NULL, out, size);
}
