/* module/verify.c: the verifier, which makes untrusted modules safe to run.
 *
 * It proves, once, every fact the interpreter relies on without checking:
 * every opcode known and implemented, every operand in range for its kind,
 * every jump inside its function, every call passing the callee's argument
 * count, functions tiling the code with no fall-through off their ends. It is
 * driven only by bib_isa_table (operand kinds and flags): no opcode is named
 * here. It also checks the tensor declarations and, per function, that no
 * tensor register is definitely allocated twice, freed twice or used while
 * dead (the rest is left to the VM's traps). It does not parse bytes
 * (format.c) and does not link imports (vm).
 */
#include "module/module.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Operand slots are named a..d in messages, as in isa/opcodes.def. */
static const char operand_letter[4] = {'a', 'b', 'c', 'd'};

static const char *function_name(const bib_function_t *f) {
    return f->name != NULL ? f->name : "?";
}

/* A name the container can carry: 1..BIB_MAX_NAME bytes, no control bytes
 * (a newline or escape in a name would break one-line diagnostics). */
static int name_is_valid(const char *name) {
    if (name == NULL)
        return 0;
    size_t n = 0;
    for (; name[n] != '\0'; n++) {
        unsigned char ch = (unsigned char)name[n];
        if (ch < 0x20 || ch == 0x7f || n >= BIB_MAX_NAME)
            return 0;
    }
    return n > 0;
}

static int compare_names(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static bib_status_t verify_imports(const bib_module_t *m, bib_diag_t *diag) {
    if (m->import_count > BIB_MAX_IMPORTS)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has %u imports, more than the limit %u",
                            m->import_count, BIB_MAX_IMPORTS);
    if (m->import_count == 0)
        return BIB_OK;
    if (m->imports == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has %u imports but no import table",
                            m->import_count);
    for (uint32_t i = 0; i < m->import_count; i++)
        if (!name_is_valid(m->imports[i]))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "import %u: name is missing, empty, longer than %u bytes or holds "
                                "control characters",
                                i, BIB_MAX_NAME);
    /* Sorted copy: a quadratic scan would let a hostile module with 65536
       imports stall the loader. */
    const char **sorted = malloc(m->import_count * sizeof *sorted);
    if (sorted == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking %u imports",
                            m->import_count);
    memcpy(sorted, m->imports, m->import_count * sizeof *sorted);
    qsort(sorted, m->import_count, sizeof *sorted, compare_names);
    for (uint32_t i = 1; i < m->import_count; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            uint32_t first = 0, second = 0;
            int seen = 0;
            for (uint32_t j = 0; j < m->import_count; j++) {
                if (strcmp(m->imports[j], sorted[i]) == 0) {
                    if (seen++ == 0) {
                        first = j;
                    } else {
                        second = j;
                        break;
                    }
                }
            }
            bib_status_t st =
                bib_diag_set(diag, BIB_E_VERIFY, "import %u: duplicate name '%s' (also import %u)",
                             second, m->imports[second], first);
            free(sorted);
            return st;
        }
    }
    free(sorted);
    return BIB_OK;
}

/* Function i's frame: 1..BIB_MAX_REGS registers, its arguments among them. */
static bib_status_t verify_frame(const bib_module_t *m, uint32_t i, bib_diag_t *diag) {
    const bib_function_t *f = &m->funcs[i];
    if (f->nregs == 0 || f->nregs > BIB_MAX_REGS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "function %u '%s': register count %u is outside 1..%u", i, f->name,
                            f->nregs, BIB_MAX_REGS);
    if (f->nargs > f->nregs)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "function %u '%s': takes %u arguments but has only %u registers", i,
                            f->name, f->nargs, f->nregs);
    return BIB_OK;
}

static bib_status_t verify_functions(const bib_module_t *m, bib_diag_t *diag) {
    if (m->func_count == 0 || m->funcs == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has no functions");
    if (m->func_count > BIB_MAX_FUNCS)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has %u functions, more than the limit %u",
                            m->func_count, BIB_MAX_FUNCS);
    uint64_t expected_entry = 0;
    for (uint32_t i = 0; i < m->func_count; i++) {
        const bib_function_t *f = &m->funcs[i];
        if (!name_is_valid(f->name))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "function %u: name is missing, empty, longer than %u bytes or "
                                "holds control characters",
                                i, BIB_MAX_NAME);
        if (f->count == 0)
            return bib_diag_set(diag, BIB_E_VERIFY, "function %u '%s': has no instructions", i,
                                f->name);
        if (f->entry != expected_entry)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "function %u '%s': starts at pc %u, expected pc %llu (functions "
                                "must tile the code section in order)",
                                i, f->name, f->entry, (unsigned long long)expected_entry);
        expected_entry += f->count;
        if (expected_entry > m->code_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "function %u '%s': pc %u..%llu runs past the end of the code (%u "
                                "instructions)",
                                i, f->name, f->entry, (unsigned long long)expected_entry - 1,
                                m->code_count);
        bib_status_t st = verify_frame(m, i, diag);
        if (st != BIB_OK)
            return st;
    }
    if (expected_entry != m->code_count)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "functions cover pc 0..%llu but the code has %u instructions (pc %llu "
                            "onwards belongs to no function)",
                            (unsigned long long)expected_entry - 1, m->code_count,
                            (unsigned long long)expected_entry);
    if (m->entry_func >= m->func_count)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "entry function index %u out of range (module has %u functions)",
                            m->entry_func, m->func_count);
    const bib_function_t *entry = &m->funcs[m->entry_func];
    if (entry->nargs != 0)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "entry function %u '%s' takes %u arguments; it must take none",
                            m->entry_func, entry->name, entry->nargs);
    return BIB_OK;
}

/* Constants from index first on: an i64 or an f64 each. */
static bib_status_t verify_consts(const bib_module_t *m, uint32_t first, bib_diag_t *diag) {
    if (m->const_count > BIB_MAX_CONSTS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "constant pool has %u entries, more than the limit %u", m->const_count,
                            BIB_MAX_CONSTS);
    for (uint32_t i = first; i < m->const_count; i++)
        if (m->consts[i].type != BIB_CONST_I64 && m->consts[i].type != BIB_CONST_F64)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "constant %u: unknown type %u (expected 1 = i64 or 2 = f64)", i,
                                m->consts[i].type);
    return BIB_OK;
}

static bib_status_t verify_pools(const bib_module_t *m, bib_diag_t *diag) {
    if (m->const_count > BIB_MAX_CONSTS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "constant pool has %u entries, more than the limit %u", m->const_count,
                            BIB_MAX_CONSTS);
    if (m->const_count > 0 && m->consts == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has %u constants but no constant pool",
                            m->const_count);
    bib_status_t st = verify_consts(m, 0, diag);
    if (st != BIB_OK)
        return st;
    if (m->data_size > 0 && m->data == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module declares %u data bytes but holds none",
                            m->data_size);
    if (m->memory_size > BIB_MAX_MEMORY)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "memory size %llu bytes is more than the limit %llu",
                            (unsigned long long)m->memory_size, (unsigned long long)BIB_MAX_MEMORY);
    if (m->memory_size < m->data_size)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "memory size %llu bytes is smaller than the %u bytes of initial data",
                            (unsigned long long)m->memory_size, m->data_size);
    return BIB_OK;
}

static const char *role_name(uint32_t flags) {
    return flags == BIB_TENSOR_INPUT ? "input" : flags == BIB_TENSOR_CONST ? "constant" : "output";
}

/* Finds a repeated string among n names (sorted copy, so a hostile module
   with many names cannot stall the loader). Returns 1 and the two indices of
   the first repeat found; 0 when all differ; -1 when out of memory. */
static int find_duplicate(const char *const *names, size_t stride, uint32_t n, uint32_t *first,
                          uint32_t *second) {
    if (n < 2)
        return 0;
    const char **sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        sorted[i] = *(const char *const *)((const char *)names + (size_t)i * stride);
    qsort(sorted, n, sizeof *sorted, compare_names);
    const char *dup = NULL;
    for (uint32_t i = 1; i < n && dup == NULL; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            dup = sorted[i];
    free(sorted);
    if (dup == NULL)
        return 0;
    int seen = 0;
    for (uint32_t j = 0; j < n; j++) {
        const char *name = *(const char *const *)((const char *)names + (size_t)j * stride);
        if (strcmp(name, dup) == 0) {
            if (seen++ == 0) {
                *first = j;
            } else {
                *second = j;
                break;
            }
        }
    }
    return 1;
}

/* Element count of a constant's fixed dims; 0 when it overflows 64 bits. */
/* The element count of fixed dims; false when 4 bytes each would overflow. */
static bool fixed_numel(const bib_tensor_decl_t *t, uint64_t *out) {
    uint64_t n = 1;
    for (uint32_t k = 0; k < t->rank; k++) {
        uint64_t d = (uint64_t)t->dims[k];
        if (d != 0 && n > UINT64_MAX / 4 / d)
            return false;
        n *= d;
    }
    *out = n;
    return true;
}

static bib_status_t verify_tensor_decl(const bib_module_t *m, uint32_t i, bib_diag_t *diag) {
    const bib_tensor_decl_t *t = &m->tensors[i];
    if (!name_is_valid(t->name))
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "tensor %u: name is missing, empty, longer than %u bytes or holds "
                            "control characters",
                            i, BIB_MAX_NAME);
    if (t->reg >= m->tensor_regs)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "tensor %u '%s': register t%u is outside the %u tensor registers "
                            "(t0..t%u)",
                            i, t->name, t->reg, m->tensor_regs, m->tensor_regs - 1);
    if (t->flags != BIB_TENSOR_INPUT && t->flags != BIB_TENSOR_OUTPUT &&
        t->flags != BIB_TENSOR_CONST)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "tensor %u '%s': flags 0x%X must be exactly one of input (1), output "
                            "(2) or constant (4)",
                            i, t->name, t->flags);
    if (t->rank > BIB_MAX_RANK)
        return bib_diag_set(diag, BIB_E_VERIFY, "tensor %u '%s': rank %u is more than the limit %u",
                            i, t->name, t->rank, BIB_MAX_RANK);
    if (t->dtype == 0) {
        if (t->flags != BIB_TENSOR_OUTPUT || t->rank != 0)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "tensor %u '%s': dtype 0 (untyped) is allowed only for an output "
                                "of rank 0",
                                i, t->name);
    } else if (t->dtype != BIB_DTYPE_F32 && t->dtype != BIB_DTYPE_I32) {
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "tensor %u '%s': dtype %u is not 1 (f32) or 2 (i32)", i, t->name,
                            t->dtype);
    }
    int is_const = t->flags == BIB_TENSOR_CONST;
    for (uint32_t k = 0; k < t->rank; k++) {
        int64_t d = t->dims[k];
        int fixed = d >= 0 && d <= BIB_MAX_TENSOR_DIM; /* 0: an empty tensor */
        /* The symbol index is judged in 64 bits: BIB_DIM_SYMBOL_INDEX keeps
           only 32, so -2 - (2^32 + i) would pass as symbol i and the module
           would not survive disassembly. */
        int symbol = d <= -2 && (uint64_t)(-2 - d) < m->dim_name_count;
        if (!fixed && d != BIB_DIM_ANY && !symbol)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "tensor %u '%s': dimension %u is %lld; expected 0..%d, -1 (any) "
                                "or a symbol -2-i for i < %u",
                                i, t->name, k, (long long)d, BIB_MAX_TENSOR_DIM, m->dim_name_count);
        if (is_const && !fixed)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "tensor %u '%s': dimension %u of a constant must be a fixed size, "
                                "not %s",
                                i, t->name, k, d == BIB_DIM_ANY ? "'?'" : "a symbol");
    }
    if (!is_const) {
        if (t->init_size != 0 || t->init != NULL)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "tensor %u '%s': only constants carry data, but this %s has %llu "
                                "bytes",
                                i, t->name, role_name(t->flags), (unsigned long long)t->init_size);
        return BIB_OK;
    }
    uint64_t numel;
    if (!fixed_numel(t, &numel))
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "tensor %u '%s': the constant's element count overflows 64 bits", i,
                            t->name);
    if (t->init_size != numel * 4 || (t->init == NULL && numel != 0))
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "tensor %u '%s': the constant has %llu elements, so its data must be "
                            "%llu bytes, not %llu",
                            i, t->name, (unsigned long long)numel, (unsigned long long)numel * 4,
                            (unsigned long long)(t->init != NULL ? t->init_size : 0));
    return BIB_OK;
}

static bib_status_t verify_tensors(const bib_module_t *m, bib_diag_t *diag) {
    if (m->tensor_regs > BIB_MAX_TENSOR_REGS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u tensor registers, more than the limit %u",
                            m->tensor_regs, BIB_MAX_TENSOR_REGS);
    if ((m->tensor_count > 0 && m->tensors == NULL) ||
        (m->dim_name_count > 0 && m->dim_names == NULL))
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u tensors and %u dimension names but not their tables",
                            m->tensor_count, m->dim_name_count);
    if (m->tensor_regs == 0 && (m->tensor_count > 0 || m->dim_name_count > 0))
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module declares %u tensors and %u dimension names but no tensor "
                            "registers",
                            m->tensor_count, m->dim_name_count);
    for (uint32_t i = 0; i < m->dim_name_count; i++)
        if (!name_is_valid(m->dim_names[i]))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "dimension name %u: name is missing, empty, longer than %u bytes "
                                "or holds control characters",
                                i, BIB_MAX_NAME);
    uint32_t first = 0, second = 0;
    int dup = find_duplicate((const char *const *)m->dim_names, sizeof *m->dim_names,
                             m->dim_name_count, &first, &second);
    if (dup < 0)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking dimension names");
    if (dup > 0)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "dimension name %u: duplicate name '%s' (also dimension name %u)",
                            second, m->dim_names[second], first);
    for (uint32_t i = 0; i < m->tensor_count; i++) {
        bib_status_t st = verify_tensor_decl(m, i, diag);
        if (st != BIB_OK)
            return st;
    }
    dup = m->tensor_count < 2
              ? 0
              : find_duplicate((const char *const *)&m->tensors[0].name, sizeof *m->tensors,
                               m->tensor_count, &first, &second);
    if (dup < 0)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking tensor names");
    if (dup > 0)
        return bib_diag_set(diag, BIB_E_VERIFY, "tensor %u '%s': duplicate name (also tensor %u)",
                            second, m->tensors[second].name, first);
    if (m->tensor_count == 0)
        return BIB_OK;
    /* The declaration that sets each register at the start of a run. */
    uint32_t *owner = malloc(m->tensor_regs * sizeof *owner);
    if (owner == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking tensor registers");
    memset(owner, 0xFF, m->tensor_regs * sizeof *owner);
    bib_status_t st = BIB_OK;
    for (uint32_t i = 0; i < m->tensor_count && st == BIB_OK; i++) {
        const bib_tensor_decl_t *t = &m->tensors[i];
        if (t->flags == BIB_TENSOR_OUTPUT)
            continue;
        uint32_t prev = owner[t->reg];
        if (prev != UINT32_MAX)
            st = bib_diag_set(diag, BIB_E_VERIFY,
                              "tensor %u '%s': register t%u already holds %s tensor %u '%s' (a "
                              "register carries at most one input or constant)",
                              i, t->name, t->reg, role_name(m->tensors[prev].flags), prev,
                              m->tensors[prev].name);
        owner[t->reg] = i;
    }
    free(owner);
    return st;
}

/* ---- user device code (spec/device-code.md) ---------------------------- */

/* A SPIR-V module header: magic, a version 1.0..1.6 (0x00MMmm00), an id
   bound above 0 and a zero schema word. */
static bib_status_t verify_spirv_header(const bib_shader_decl_t *sh, uint32_t i, bib_diag_t *diag) {
    if (sh->words < BIB_SPIRV_HEADER_WORDS || sh->spirv == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "shader %u '%s': %u SPIR-V words is shorter than the %u-word header", i,
                            sh->name, sh->words, BIB_SPIRV_HEADER_WORDS);
    if (sh->spirv[0] != BIB_SPIRV_MAGIC)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "shader %u '%s': SPIR-V word 0 is 0x%08X, not the magic 0x%08X", i,
                            sh->name, sh->spirv[0], BIB_SPIRV_MAGIC);
    uint32_t v = sh->spirv[1];
    uint32_t major = v >> 16 & 0xFF, minor = v >> 8 & 0xFF;
    if ((v & 0xFF0000FFu) != 0 || major != 1 || minor > 6)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "shader %u '%s': SPIR-V version word 0x%08X is not 1.0..1.6", i,
                            sh->name, v);
    if (sh->spirv[3] == 0 || sh->spirv[3] > BIB_MAX_SPIRV_WORDS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "shader %u '%s': SPIR-V id bound %u is outside 1..%u", i, sh->name,
                            sh->spirv[3], BIB_MAX_SPIRV_WORDS);
    if (sh->spirv[4] != 0)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "shader %u '%s': SPIR-V schema word is %u, must be 0", i, sh->name,
                            sh->spirv[4]);
    return BIB_OK;
}

static bib_status_t verify_devcode(const bib_module_t *m, bib_diag_t *diag) {
    if (m->shader_count > BIB_MAX_SHADERS || m->kernel_count > BIB_MAX_KERNELS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u shaders and %u kernels (limits %u and %u)",
                            m->shader_count, m->kernel_count, BIB_MAX_SHADERS, BIB_MAX_KERNELS);
    if ((m->shader_count > 0 && m->shaders == NULL) || (m->kernel_count > 0 && m->kernels == NULL))
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u shaders and %u kernels but not their tables",
                            m->shader_count, m->kernel_count);
    for (uint32_t i = 0; i < m->shader_count; i++) {
        const bib_shader_decl_t *sh = &m->shaders[i];
        if (!name_is_valid(sh->name) || !name_is_valid(sh->entry))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "shader %u: name or entry point is missing, empty, longer than %u "
                                "bytes or holds control characters",
                                i, BIB_MAX_NAME);
        if (sh->bindings == 0 || sh->bindings > BIB_MAX_SHADER_BINDINGS)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "shader %u '%s': binding count %u is outside 1..%u (a shader "
                                "returns its results through the tensors it binds)",
                                i, sh->name, sh->bindings, BIB_MAX_SHADER_BINDINGS);
        if (sh->push_bytes % 4 != 0 || sh->push_bytes > BIB_MAX_PUSH_BYTES)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "shader %u '%s': push-constant size %u bytes is not a multiple of "
                                "4 up to %u",
                                i, sh->name, sh->push_bytes, BIB_MAX_PUSH_BYTES);
        bib_status_t st = verify_spirv_header(sh, i, diag);
        if (st != BIB_OK)
            return st;
    }
    for (uint32_t i = 0; i < m->kernel_count; i++) {
        const bib_kernel_decl_t *k = &m->kernels[i];
        if (!name_is_valid(k->name) || !name_is_valid(k->entry))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "kernel %u: name or entry is missing, empty, longer than %u bytes "
                                "or holds control characters",
                                i, BIB_MAX_NAME);
        if (k->params == NULL || strlen(k->params) > BIB_MAX_KERNEL_PARAMS ||
            strspn(k->params, "tilfd") != strlen(k->params))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "kernel %u '%s': parameter signature '%s' must be at most %u of "
                                "the letters t, i, l, f, d",
                                i, k->name, k->params != NULL ? k->params : "",
                                BIB_MAX_KERNEL_PARAMS);
        if (strchr(k->params, 't') == NULL)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "kernel %u '%s': parameter signature '%s' has no tensor (t): a "
                                "kernel returns its results through the tensors it is given",
                                i, k->name, k->params);
        if (k->ptx == NULL || k->ptx_bytes == 0 || k->ptx_bytes > BIB_MAX_PTX_BYTES ||
            memchr(k->ptx, '\0', k->ptx_bytes) != NULL || k->ptx[k->ptx_bytes] != '\0')
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "kernel %u '%s': PTX text is empty, longer than %u bytes or holds "
                                "a NUL byte",
                                i, k->name, BIB_MAX_PTX_BYTES);
    }
    uint32_t first = 0, second = 0;
    int dup = m->shader_count < 2
                  ? 0
                  : find_duplicate((const char *const *)&m->shaders[0].name, sizeof *m->shaders,
                                   m->shader_count, &first, &second);
    if (dup < 0)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking shader names");
    if (dup > 0)
        return bib_diag_set(diag, BIB_E_VERIFY, "shader %u '%s': duplicate name (also shader %u)",
                            second, m->shaders[second].name, first);
    dup = m->kernel_count < 2
              ? 0
              : find_duplicate((const char *const *)&m->kernels[0].name, sizeof *m->kernels,
                               m->kernel_count, &first, &second);
    if (dup < 0)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking kernel names");
    if (dup > 0)
        return bib_diag_set(diag, BIB_E_VERIFY, "kernel %u '%s': duplicate name (also kernel %u)",
                            second, m->kernels[second].name, first);
    return BIB_OK;
}

/* The device program an instruction names (its SHADER or KERNEL operand),
   with the number of arguments its COUNT operand must give, the registers of
   launch geometry its first RS operand starts and the registers of pushed
   words that follow the arguments. Returns 0 when it names none; the operand
   itself was range-checked first (it precedes the count). */
static int device_program(const bib_module_t *m, const bib_opinfo_t *info, const uint32_t words[4],
                          const char **name, uint32_t *args, uint32_t *geometry, uint32_t *extra) {
    for (int j = 0; j < 4; j++) {
        if (info->kinds[j] == BIB_K_SHADER && words[j] < m->shader_count) {
            *name = m->shaders[words[j]].name;
            *args = m->shaders[words[j]].bindings;
            *geometry = 3;
            *extra = m->shaders[words[j]].push_bytes / 4;
            return 1;
        }
        if (info->kinds[j] == BIB_K_KERNEL && words[j] < m->kernel_count) {
            *name = m->kernels[words[j]].name;
            *args = (uint32_t)strlen(m->kernels[words[j]].params);
            *geometry = 6;
            *extra = 0;
            return 1;
        }
    }
    return 0;
}

/* The mnemonics of implemented terminators, from the table, for the
   fall-through message ("JMP, RET, TRAP or HALT"). */
static void terminator_names(char *out, size_t cap) {
    int total = 0;
    for (int i = 0; i < BIB_OP__COUNT; i++)
        if ((bib_isa_table[i].flags & (BIB_F_TERM | BIB_F_RESERVED)) == BIB_F_TERM)
            total++;
    size_t used = 0;
    int n = 0;
    out[0] = '\0';
    for (int i = 0; i < BIB_OP__COUNT && used < cap; i++) {
        if ((bib_isa_table[i].flags & (BIB_F_TERM | BIB_F_RESERVED)) != BIB_F_TERM)
            continue;
        const char *sep = n == 0 ? "" : (n == total - 1 ? " or " : ", ");
        int w = snprintf(out + used, cap - used, "%s%s", sep, bib_isa_table[i].name);
        if (w < 0)
            break;
        used += (size_t)w;
        n++;
    }
}

/* Checks operand slot k of the instruction at pc against its kind. */
static bib_status_t verify_operand(const bib_module_t *m, const bib_function_t *f, uint32_t pc,
                                   const bib_opinfo_t *info, const uint32_t words[4], int k,
                                   bib_diag_t *diag) {
    uint32_t v = words[k];
    char slot = operand_letter[k];
    switch ((bib_operand_kind_t)info->kinds[k]) {
    case BIB_K_NONE:
        if (v != 0)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c is unused and must be 0, got %u", pc,
                                info->name, slot, v);
        return BIB_OK;
    case BIB_K_RD:
    case BIB_K_RS:
    case BIB_K_RM:
        if (v >= f->nregs)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c names register r%u but function '%s' has "
                                "%u registers (r0..r%u)",
                                pc, info->name, slot, v, f->name, f->nregs, f->nregs - 1);
        /* A kernel's parameter block (CONV, the pools) is the register range
           r[v..v+BIB_PARAM_BLOCK). */
        if (info->kinds[k] == BIB_K_RS && info->kernel >= 0 &&
            bib_kernel_table[info->kernel].args == BIB_ARGS_BLOCK &&
            (uint64_t)v + BIB_PARAM_BLOCK > f->nregs)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c starts the %d-register parameter block "
                                "r%u..r%u, outside function '%s' frame of %u registers",
                                pc, info->name, slot, BIB_PARAM_BLOCK, v, v + BIB_PARAM_BLOCK - 1,
                                f->name, f->nregs);
        return BIB_OK;
    case BIB_K_IMM:
    case BIB_K_IMMLO:
    case BIB_K_IMMHI:
        return BIB_OK;
    case BIB_K_SCALE:
        if (v > 3)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c is scale %u; a scale is 0..3", pc,
                                info->name, slot, v);
        return BIB_OK;
    case BIB_K_DIVISOR:
        if (v == 0)
            return bib_diag_set(diag, BIB_E_VERIFY, "pc %u (%s): operand %c divides by zero", pc,
                                info->name, slot);
        return BIB_OK;
    case BIB_K_CASES:
        /* The table: the v instructions after this one, JMPs of the same
           function (their targets are checked as every JMP's are). */
        if (v == 0 || v > BIB_MAX_CASES)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): a jump table has 1..%u entries, found %u", pc,
                                info->name, BIB_MAX_CASES, v);
        if (v > f->entry + f->count - 1 - pc) {
            uint32_t after = f->entry + f->count - 1 - pc;
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): a jump table of %u entries needs %u JMPs after it; "
                                "function '%s' has %u instruction%s after pc %u",
                                pc, info->name, v, v, f->name, after, after == 1 ? "" : "s", pc);
        }
        for (uint32_t i = 1; i <= v; i++)
            if (bib_module_op(m, pc + i) != BIB_OP_JMP)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u (%s): entry %u of its jump table, pc %u, is not a JMP",
                                    pc, info->name, i - 1, pc + i);
        return BIB_OK;
    case BIB_K_TGT:
        if (v < f->entry || v - f->entry >= f->count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): jump target %u is outside function '%s' (pc %u..%u)",
                                pc, info->name, v, f->name, f->entry, f->entry + f->count - 1);
        return BIB_OK;
    case BIB_K_FN:
        if (v >= m->func_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): function index %u out of range (module has %u "
                                "functions)",
                                pc, info->name, v, m->func_count);
        return BIB_OK;
    case BIB_K_HOST:
        if (v >= m->import_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): import index %u out of range (module has %u imports)",
                                pc, info->name, v, m->import_count);
        return BIB_OK;
    case BIB_K_CONST:
        if (v >= m->const_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): constant index %u out of range (pool has %u "
                                "constants)",
                                pc, info->name, v, m->const_count);
        return BIB_OK;
    case BIB_K_COUNT: {
        /* Beside a device program, a count is its argument count: the
           shader's bindings or the kernel's parameters, exactly. */
        const char *prog = NULL;
        uint32_t args = 0, geometry = 0, extra = 0;
        if (device_program(m, info, words, &prog, &args, &geometry, &extra)) {
            if (v != args)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u (%s): operand %c gives %u %s but '%s' declares %u", pc,
                                    info->name, slot, v,
                                    geometry == 3 ? "bindings" : "kernel arguments", prog, args);
            uint64_t end = (uint64_t)words[k - 1] + v + extra;
            uint32_t first_rs = 4;
            for (int j = 0; j < 4 && first_rs == 4; j++)
                if (info->kinds[j] == BIB_K_RS)
                    first_rs = (uint32_t)j;
            uint64_t gend = first_rs < 4 ? (uint64_t)words[first_rs] + geometry : 0;
            if (end > f->nregs || gend > f->nregs)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u (%s): '%s' needs registers r%u..r%llu (launch size) and "
                                    "r%u..r%llu (%u arguments, %u pushed words), outside function "
                                    "'%s' frame of %u registers",
                                    pc, info->name, prog, first_rs < 4 ? words[first_rs] : 0,
                                    (unsigned long long)gend - 1, words[k - 1],
                                    (unsigned long long)(end > words[k - 1] ? end - 1 : end), v,
                                    extra, f->name, f->nregs);
            return BIB_OK;
        }
        /* Outside calls a count is a number of tensor dimensions (ALLOC,
           RESHAPE). */
        if (info->opclass != BIB_CLASS_SCALAR && !(info->flags & BIB_F_CALL) && v > BIB_MAX_RANK)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c gives %u dimensions, more than the limit "
                                "%u",
                                pc, info->name, slot, v, BIB_MAX_RANK);
        /* A count after a register operand sizes the register range that
           starts there (r[c..c+d) for CALL, HOSTCALL and ALLOC; r[c..c+3d)
           for a range of triples, SLICE's). */
        if (k > 0 && info->kinds[k - 1] == BIB_K_RS) {
            uint64_t end = (uint64_t)words[k - 1] + (info->flags & BIB_F_RANGE3 ? 3ull * v : v);
            if (end > f->nregs)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u (%s): register range r%u..r%llu (%c=%u, %c=%u) is "
                                    "outside function '%s' frame of %u registers",
                                    pc, info->name, words[k - 1], (unsigned long long)end - 1,
                                    operand_letter[k - 1], words[k - 1], slot, v, f->name,
                                    f->nregs);
        }
        if (info->flags & BIB_F_CALL) {
            for (int j = 0; j < 4; j++) {
                if (info->kinds[j] == BIB_K_FN && words[j] < m->func_count) {
                    const bib_function_t *callee = &m->funcs[words[j]];
                    if (v != callee->nargs)
                        return bib_diag_set(diag, BIB_E_VERIFY,
                                            "pc %u (%s): passes %u arguments but function %u "
                                            "'%s' takes %u",
                                            pc, info->name, v, words[j], function_name(callee),
                                            callee->nargs);
                } else if (info->kinds[j] == BIB_K_HOST && v > BIB_MAX_HOST_ARGS) {
                    return bib_diag_set(diag, BIB_E_VERIFY,
                                        "pc %u (%s): passes %u arguments, more than the host-call "
                                        "limit %u",
                                        pc, info->name, v, BIB_MAX_HOST_ARGS);
                }
            }
        }
        return BIB_OK;
    }
    case BIB_K_SHADER:
        if (v >= m->shader_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): shader index %u out of range (module has %u shaders)",
                                pc, info->name, v, m->shader_count);
        return BIB_OK;
    case BIB_K_KERNEL:
        if (v >= m->kernel_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): kernel index %u out of range (module has %u kernels)",
                                pc, info->name, v, m->kernel_count);
        return BIB_OK;
    case BIB_K_TD:
    case BIB_K_TS:
    case BIB_K_TM:
        if (v >= m->tensor_regs) {
            if (m->tensor_regs == 0)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u (%s): operand %c names tensor register t%u but the "
                                    "module has no tensor registers",
                                    pc, info->name, slot, v);
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c names tensor register t%u but the module "
                                "has %u tensor registers (t0..t%u)",
                                pc, info->name, slot, v, m->tensor_regs, m->tensor_regs - 1);
        }
        return BIB_OK;
    case BIB_K_DTYPE:
        if (v != BIB_DTYPE_F32 && v != BIB_DTYPE_I32)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c is dtype %u; expected 1 (f32) or 2 (i32)",
                                pc, info->name, slot, v);
        return BIB_OK;
    case BIB_K__N:
        break;
    }
    /* A kind added to the table must bring its check here first; until then
       it fails loudly rather than passing unchecked. */
    return bib_diag_set(diag, BIB_E_VERIFY,
                        "pc %u (%s): operand %c has kind %s, which this verifier cannot check", pc,
                        info->name, slot, bib_isa_kind_name((bib_operand_kind_t)info->kinds[k]));
}

/* The instructions at pc from..to-1 of function fi, each operand against its
   kind, and the function's last instruction a terminator. */
static bib_status_t verify_code_range(const bib_module_t *m, uint32_t fi, uint32_t from,
                                      uint32_t to, bib_diag_t *diag) {
    const bib_function_t *f = &m->funcs[fi];
    const uint32_t last = f->entry + f->count - 1;
    for (uint32_t pc = from; pc < to; pc++) {
        const bib_insn_t *insn = &m->code[pc];
        int index = bib_module_op(m, pc);
        if (index < 0)
            return bib_diag_set(diag, BIB_E_VERIFY, "pc %u: unknown opcode 0x%08X", pc, insn->op);
        const bib_opinfo_t *info = &bib_isa_table[index];
        if (info->flags & BIB_F_RESERVED)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u: opcode %s (0x%08X) is reserved: not implemented in this "
                                "build",
                                pc, info->name, insn->op);
        const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
        /* Slots are checked in order, so the FN/HOST index a COUNT refers to
           (always an earlier slot) is already known to be in range. */
        for (int k = 0; k < 4; k++) {
            bib_status_t st = verify_operand(m, f, pc, info, words, k, diag);
            if (st != BIB_OK)
                return st;
        }
        if (pc == last && !(info->flags & BIB_F_TERM)) {
            char terminators[128];
            terminator_names(terminators, sizeof terminators);
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): function '%s' falls off its end (its last "
                                "instruction must be %s)",
                                pc, info->name, f->name, terminators);
        }
    }
    return BIB_OK;
}

static bib_status_t verify_code(const bib_module_t *m, bib_diag_t *diag) {
    for (uint32_t fi = 0; fi < m->func_count; fi++) {
        const bib_function_t *f = &m->funcs[fi];
        bib_status_t st = verify_code_range(m, fi, f->entry, f->entry + f->count, diag);
        if (st != BIB_OK)
            return st;
    }
    return BIB_OK;
}

/* ---- static tensor liveness ------------------------------------------------
 *
 * A forward dataflow per function over its basic blocks, with one state per
 * tensor register the function names. Only definite errors are reported (a
 * state that holds on every path reaching the instruction), so a program the
 * VM would run without a liveness trap is never rejected; the VM traps on
 * what is left unknown. Errors are judged only once the fixed point is
 * reached: before it, a state may still widen to unknown. */

enum {
    LV_NEVER = 1, /* dead: not allocated on any path since the run began */
    LV_FREED,     /* dead: freed on every path */
    LV_DEAD,      /* dead: freed on some paths, never allocated on others */
    LV_LIVE,
    LV_UNKNOWN,
};

/* Memory for block states (blocks x registers) per function, and work for
   the whole module, beyond which liveness gives up (everything unknown). */
#define LV_MAX_STATE_BYTES (1u << 24)
#define LV_MAX_WORK (1ull << 27)

typedef struct liveness {
    const bib_module_t *m;
    bib_diag_t *diag;
    uint64_t work;
    uint32_t *local;     /* tensor register -> index among the function's registers */
    uint32_t *regs;      /* index -> tensor register */
    uint8_t *entry_live; /* per tensor register: set by the host or a constant at run start */
    int entry_called;    /* some CALL enters the entry function again */
    uint32_t *block_of;  /* per pc of the function: block index at a leader, else UINT32_MAX */
    uint32_t *starts;    /* first pc of each block */
    bib_liveness_tail_t *tail; /* what the entry function ends with (see below) */
} liveness_t;

/* The record of what the check found at the entry function's last
   instruction (bib_liveness_tail_t, module.h). Registers are independent in
   this dataflow, so a register the function never names has the state of
   one of two extra columns the entry function carries: one set at the
   start, one not. A register that only code inserted ahead of the last
   instruction names behaves in the code before it as such a column did, so
   it changes no other state and no block is processed more often: the
   verdict of the whole check, its work included, can be had from the
   record when straight-line code is inserted. */
void bib_liveness_tail_free(bib_liveness_tail_t *t) {
    if (t == NULL)
        return;
    free(t->state);
    free(t->named);
    free(t);
}

static uint8_t lv_join(uint8_t a, uint8_t b) {
    if (a == b)
        return a;
    if (a <= LV_DEAD && b <= LV_DEAD)
        return LV_DEAD;
    return LV_UNKNOWN;
}

static bib_status_t lv_report(liveness_t *lv, uint32_t pc, const bib_opinfo_t *info, int k,
                              uint32_t reg, uint8_t state) {
    if (info->flags & BIB_F_TALLOC)
        return bib_diag_set(lv->diag, BIB_E_VERIFY,
                            "pc %u (%s): t%u is already allocated (allocated twice)", pc,
                            info->name, reg);
    if (info->flags & BIB_F_TFREE)
        return bib_diag_set(lv->diag, BIB_E_VERIFY, "pc %u (%s): t%u %s", pc, info->name, reg,
                            state == LV_FREED   ? "is already freed (freed twice)"
                            : state == LV_NEVER ? "was never allocated (freed before allocation)"
                                                : "is not allocated on any path here (freed twice "
                                                  "or never allocated)");
    const char *verb = info->kinds[k] == BIB_K_TM ? "modifies" : "reads";
    return bib_diag_set(lv->diag, BIB_E_VERIFY, "pc %u (%s): operand %c %s t%u, which %s", pc,
                        info->name, operand_letter[k], verb, reg,
                        state == LV_FREED ? "is freed (used after free)"
                        : state == LV_NEVER
                            ? "was never allocated (used before allocation)"
                            : "is not allocated on any path here (used after free or before "
                              "allocation)");
}

/* Applies the instruction at pc to cur. With report set, a definite error is
   returned as BIB_E_VERIFY; without, the state just moves on. */
static bib_status_t lv_step(liveness_t *lv, uint8_t *cur, uint32_t nlocal, uint32_t pc,
                            int report) {
    const bib_insn_t *insn = &lv->m->code[pc];
    const bib_opinfo_t *info = bib_module_info(lv->m, pc);
    if (info->opclass != BIB_CLASS_TENSOR && info->opclass != BIB_CLASS_CUDA &&
        info->opclass != BIB_CLASS_COLLECTIVE) {
        if (info->flags & BIB_F_CALL)
            memset(cur, LV_UNKNOWN, nlocal);
        return BIB_OK;
    }
    const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
    /* Reads happen before the write: "TADD t1, t1, t2" needs t1 live. */
    for (int k = 0; k < 4; k++) {
        uint32_t kind = info->kinds[k];
        if (kind != BIB_K_TS && kind != BIB_K_TM &&
            !(kind == BIB_K_TD && (info->flags & BIB_F_TALLOC)))
            continue;
        uint8_t st = cur[lv->local[words[k]]];
        int bad = kind == BIB_K_TD ? st == LV_LIVE : st <= LV_DEAD;
        if (bad && report)
            return lv_report(lv, pc, info, k, words[k], st);
    }
    /* An instruction that did not trap leaves what it read live; FREE leaves
       its register freed, and a write allocates when the register is empty. */
    for (int k = 0; k < 4; k++) {
        uint32_t kind = info->kinds[k];
        if (kind == BIB_K_TS || kind == BIB_K_TM || kind == BIB_K_TD)
            cur[lv->local[words[k]]] =
                kind == BIB_K_TM && (info->flags & BIB_F_TFREE) ? LV_FREED : LV_LIVE;
    }
    return BIB_OK;
}

/* Control leaves the last instruction of a block for these blocks: out[0..n),
   then, after a JTAB, the *table_count blocks from *table_first (its JMPs,
   each a block of its own). */
static uint32_t lv_successors(const liveness_t *lv, const bib_function_t *f, uint32_t last,
                              uint32_t out[5], uint32_t *table_first, uint32_t *table_count) {
    const bib_insn_t *insn = &lv->m->code[last];
    const bib_opinfo_t *info = bib_module_info(lv->m, last);
    const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
    uint32_t n = 0;
    *table_count = 0;
    if (info->flags & BIB_F_BRANCH)
        for (int k = 0; k < 4; k++) {
            if (info->kinds[k] == BIB_K_TGT)
                out[n++] = lv->block_of[words[k] - f->entry];
            if (info->kinds[k] == BIB_K_CASES) {
                *table_first = lv->block_of[last + 1 - f->entry];
                *table_count = words[k];
            }
        }
    if (!(info->flags & BIB_F_TERM) && last + 1 < f->entry + f->count)
        out[n++] = lv->block_of[last + 1 - f->entry];
    return n;
}

static bib_status_t lv_function(liveness_t *lv, uint32_t fi) {
    const bib_module_t *m = lv->m;
    const bib_function_t *f = &m->funcs[fi];
    uint32_t nlocal = 0;
    for (uint32_t pc = f->entry; pc < f->entry + f->count; pc++) {
        const bib_insn_t *insn = &m->code[pc];
        const bib_opinfo_t *info = bib_module_info(m, pc);
        const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
        for (int k = 0; k < 4; k++) {
            uint32_t kind = info->kinds[k];
            if ((kind == BIB_K_TD || kind == BIB_K_TS || kind == BIB_K_TM) &&
                lv->local[words[k]] == UINT32_MAX) {
                lv->local[words[k]] = nlocal;
                lv->regs[nlocal++] = words[k];
            }
        }
    }
    bib_status_t st = BIB_OK;
    const int entry = fi == m->entry_func;
    if (nlocal == 0 && !entry)
        return BIB_OK;
    /* The entry function's two extra columns: a register it does not name,
       set at the start or not. */
    const uint32_t ncols = nlocal + (entry ? 2 : 0);
    bib_liveness_tail_t *tail = entry ? lv->tail : NULL;

    /* Leaders: the entry, every jump target, and whatever follows a jump. */
    memset(lv->block_of, 0, f->count * sizeof *lv->block_of);
    lv->block_of[0] = 1;
    for (uint32_t pc = f->entry; pc < f->entry + f->count; pc++) {
        const bib_insn_t *insn = &m->code[pc];
        const bib_opinfo_t *info = bib_module_info(m, pc);
        if (!(info->flags & (BIB_F_BRANCH | BIB_F_TERM)))
            continue;
        const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
        for (int k = 0; k < 4; k++)
            if (info->kinds[k] == BIB_K_TGT)
                lv->block_of[words[k] - f->entry] = 1;
        if (pc + 1 < f->entry + f->count)
            lv->block_of[pc + 1 - f->entry] = 1;
    }
    uint32_t nblocks = 0;
    for (uint32_t i = 0; i < f->count; i++) {
        if (lv->block_of[i]) {
            lv->starts[nblocks] = f->entry + i;
            lv->block_of[i] = nblocks++;
        } else {
            lv->block_of[i] = UINT32_MAX;
        }
    }
    if (tail != NULL) {
        tail->nlocal = nlocal;
        tail->nblocks = nblocks;
        tail->verdict = BIB_LV_UNTRACKED;
    }
    if ((uint64_t)nblocks * nlocal > LV_MAX_STATE_BYTES)
        goto done; /* too big to track: everything stays unknown */
    if (tail != NULL)
        tail->verdict = BIB_LV_GAVE_UP;
    uint8_t *in = malloc((size_t)nblocks * ncols + ncols);
    uint8_t *visited = calloc(nblocks, 1);
    uint8_t *queued = calloc(nblocks, 1);
    uint32_t *stack = malloc(nblocks * sizeof *stack);
    if (in == NULL || visited == NULL || queued == NULL || stack == NULL) {
        st = bib_diag_set(lv->diag, BIB_E_NOMEM, "out of memory checking tensor liveness");
        goto release;
    }
    uint8_t *cur = in + (size_t)nblocks * ncols;
    int initial = entry && !lv->entry_called;
    for (uint32_t l = 0; l < ncols; l++) {
        int set = l < nlocal ? lv->entry_live[lv->regs[l]] : l == nlocal;
        in[l] = !initial ? LV_UNKNOWN : set ? LV_LIVE : LV_NEVER;
    }
    visited[0] = queued[0] = 1;
    uint32_t top = 0;
    stack[top++] = 0;
    while (top > 0) {
        uint32_t blk = stack[--top];
        queued[blk] = 0;
        uint32_t end = blk + 1 < nblocks ? lv->starts[blk + 1] : f->entry + f->count;
        lv->work += (end - lv->starts[blk]) + nlocal;
        if (lv->work > LV_MAX_WORK)
            goto release; /* out of budget: no verdict, so no error */
        if (tail != NULL) {
            tail->visits++;
            tail->tail_visits += blk + 1 == nblocks;
        }
        memcpy(cur, in + (size_t)blk * ncols, ncols);
        for (uint32_t pc = lv->starts[blk]; pc < end; pc++)
            lv_step(lv, cur, ncols, pc, 0);
        uint32_t out[5], table_first = 0, table_count = 0;
        uint32_t n = lv_successors(lv, f, end - 1, out, &table_first, &table_count);
        for (uint32_t i = 0; i < n + table_count; i++) {
            const uint32_t next = i < n ? out[i] : table_first + (i - n);
            uint8_t *dst = in + (size_t)next * ncols;
            int changed = 0;
            if (!visited[next]) {
                visited[next] = 1;
                memcpy(dst, cur, ncols);
                changed = 1;
            } else {
                for (uint32_t l = 0; l < ncols; l++) {
                    uint8_t j = lv_join(dst[l], cur[l]);
                    changed |= j != dst[l];
                    dst[l] = j;
                }
            }
            if (changed && !queued[next]) {
                queued[next] = 1;
                stack[top++] = next;
            }
        }
    }
    /* Fixed point: now every remaining dead state holds on all paths. */
    for (uint32_t blk = 0; blk < nblocks && st == BIB_OK; blk++) {
        if (!visited[blk])
            continue; /* unreachable code cannot misuse anything */
        uint32_t end = blk + 1 < nblocks ? lv->starts[blk + 1] : f->entry + f->count;
        memcpy(cur, in + (size_t)blk * ncols, ncols);
        for (uint32_t pc = lv->starts[blk]; pc < end && st == BIB_OK; pc++)
            st = lv_step(lv, cur, ncols, pc, 1);
    }
    /* The states before the last instruction, from its block's. */
    if (tail != NULL && st == BIB_OK) {
        const uint32_t last = nblocks - 1;
        tail->verdict = BIB_LV_COMPLETE;
        tail->reached = visited[last];
        memcpy(cur, in + (size_t)last * ncols, ncols);
        for (uint32_t pc = lv->starts[last]; pc + 1 < f->entry + f->count; pc++)
            lv_step(lv, cur, ncols, pc, 0);
        for (uint32_t r = 0; r < tail->regs; r++) {
            tail->named[r] = lv->local[r] != UINT32_MAX;
            tail->state[r] = tail->named[r]      ? cur[lv->local[r]]
                             : lv->entry_live[r] ? cur[nlocal]
                                                 : cur[nlocal + 1];
        }
        tail->ghost = cur[nlocal + 1];
    }
release:
    free(in);
    free(visited);
    free(queued);
    free(stack);
done:
    for (uint32_t l = 0; l < nlocal; l++)
        lv->local[lv->regs[l]] = UINT32_MAX;
    return st;
}

static bib_status_t verify_liveness(bib_module_t *m, bib_diag_t *diag) {
    liveness_t lv;
    memset(&lv, 0, sizeof lv);
    lv.m = m;
    lv.diag = diag;
    bib_liveness_tail_free(m->liveness_tail);
    m->liveness_tail = NULL;
    lv.tail = calloc(1, sizeof *lv.tail);
    if (lv.tail != NULL) {
        lv.tail->regs = m->tensor_regs;
        lv.tail->state = malloc(m->tensor_regs);
        lv.tail->named = malloc(m->tensor_regs);
    }
    uint32_t biggest = 1;
    for (uint32_t i = 0; i < m->func_count; i++)
        if (m->funcs[i].count > biggest)
            biggest = m->funcs[i].count;
    lv.local = malloc(m->tensor_regs * sizeof *lv.local);
    lv.regs = malloc(m->tensor_regs * sizeof *lv.regs);
    lv.entry_live = calloc(m->tensor_regs, 1);
    lv.block_of = malloc(biggest * sizeof *lv.block_of);
    lv.starts = malloc(biggest * sizeof *lv.starts);
    bib_status_t st = BIB_OK;
    if (lv.local == NULL || lv.regs == NULL || lv.entry_live == NULL || lv.block_of == NULL ||
        lv.starts == NULL || lv.tail == NULL || lv.tail->state == NULL || lv.tail->named == NULL) {
        st = bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking tensor liveness");
        goto out;
    }
    memset(lv.local, 0xFF, m->tensor_regs * sizeof *lv.local);
    for (uint32_t i = 0; i < m->tensor_count; i++)
        if (m->tensors[i].flags != BIB_TENSOR_OUTPUT)
            lv.entry_live[m->tensors[i].reg] = 1;
    for (uint32_t pc = 0; pc < m->code_count && !lv.entry_called; pc++) {
        const bib_insn_t *insn = &m->code[pc];
        const bib_opinfo_t *info = bib_module_info(m, pc);
        const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
        /* A CALL of the entry function, or any CALLR (whose callee is a
           value), may enter it again. */
        int callee = 0;
        for (int k = 0; k < 4; k++) {
            callee |= info->kinds[k] == BIB_K_FN || info->kinds[k] == BIB_K_HOST;
            if (info->kinds[k] == BIB_K_FN && words[k] == m->entry_func &&
                (info->flags & BIB_F_CALL))
                lv.entry_called = 1;
        }
        if ((info->flags & BIB_F_CALL) && !callee)
            lv.entry_called = 1;
    }
    for (uint32_t fi = 0; fi < m->func_count && st == BIB_OK; fi++)
        st = lv_function(&lv, fi);
    if (st == BIB_OK) {
        lv.tail->work = lv.work;
        m->liveness_tail = lv.tail;
        lv.tail = NULL;
    }
out:
    bib_liveness_tail_free(lv.tail);
    free(lv.local);
    free(lv.regs);
    free(lv.entry_live);
    free(lv.block_of);
    free(lv.starts);
    return st;
}

/* Whether name is what the disassembler calls an unnamed target: L<digits>. */
static bool generated_label(const char *name) {
    if (name[0] != 'L' || name[1] == '\0')
        return false;
    for (const char *p = name + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

typedef struct label_key {
    uint32_t func;
    const char *name;
    uint32_t index;
} label_key_t;

static int compare_label_keys(const void *a, const void *b) {
    const label_key_t *x = a, *y = b;
    if (x->func != y->func)
        return x->func < y->func ? -1 : 1;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (x->index < y->index ? -1 : x->index > y->index);
}

/* The labels section: each label names a pc of the code, in ascending order
   of pc and then name (one order, so one module has one encoding), and no
   name is given twice in one function, nor is an L<digits> name the
   disassembler would print for an unnamed target. */
static bib_status_t verify_labels(const bib_module_t *m, bib_diag_t *diag) {
    if (m->label_count == 0)
        return BIB_OK;
    if (m->labels == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has %u labels but no label table",
                            m->label_count);
    for (uint32_t i = 0; i < m->label_count; i++) {
        const bib_label_t *l = &m->labels[i];
        if (l->name == NULL || l->name[0] == '\0')
            return bib_diag_set(diag, BIB_E_VERIFY, "label %u has no name", i);
        if (l->pc >= m->code_count)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "label %u '%s' marks pc %u, outside the %u instructions of the "
                                "code",
                                i, l->name, l->pc, m->code_count);
        if (generated_label(l->name))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "label %u '%s' at pc %u has the form L<number> the disassembler "
                                "gives unnamed targets",
                                i, l->name, l->pc);
        if (i > 0) {
            const bib_label_t *prev = &m->labels[i - 1];
            if (prev->pc > l->pc || (prev->pc == l->pc && strcmp(prev->name, l->name) >= 0))
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "label %u '%s' at pc %u comes after label %u '%s' at pc %u: "
                                    "labels must ascend by pc, then by name",
                                    i, l->name, l->pc, i - 1, prev->name, prev->pc);
        }
    }
    label_key_t *keys = malloc((size_t)m->label_count * sizeof *keys);
    if (keys == NULL)
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u labels", m->label_count);
    for (uint32_t i = 0; i < m->label_count; i++)
        keys[i] = (label_key_t){bib_module_func_at(m, m->labels[i].pc), m->labels[i].name, i};
    qsort(keys, m->label_count, sizeof *keys, compare_label_keys);
    bib_status_t st = BIB_OK;
    for (uint32_t i = 1; i < m->label_count && st == BIB_OK; i++)
        if (keys[i].func == keys[i - 1].func && strcmp(keys[i].name, keys[i - 1].name) == 0)
            st = bib_diag_set(
                diag, BIB_E_VERIFY, "label '%s' is given twice in function '%s' (labels %u and %u)",
                keys[i].name, m->funcs[keys[i].func].name, keys[i - 1].index, keys[i].index);
    free(keys);
    return st;
}

/* Decodes the opcode words from pc from on once (m->ops). */
static bib_status_t decode_ops(bib_module_t *m, uint32_t from, bib_diag_t *diag) {
    _Static_assert(BIB_OP__COUNT < UINT16_MAX, "dense opcode indices fit m->ops");
    /* Past pc 0 the module grew inside the room bib_module_reserve made. */
    uint16_t *ops = m->ops;
    if (ops == NULL || from == 0) {
        size_t room = m->code_room > m->code_count ? m->code_room : m->code_count;
        ops = realloc(m->ops, room * sizeof *ops);
        if (ops == NULL)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory decoding %u instructions",
                                m->code_count);
        m->ops = ops;
    }
    for (uint32_t pc = from; pc < m->code_count; pc++) {
        int index = bib_isa_find_code(m->code[pc].op);
        ops[pc] = (uint16_t)(index < 0 ? BIB_OP__COUNT : index);
    }
    return BIB_OK;
}

bib_status_t bib_module_verify(bib_module_t *m, bib_diag_t *diag) {
    if (m == NULL)
        return bib_diag_set(diag, BIB_E_USAGE, "no module to verify");
    if (m->code_count == 0 || m->code == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has no code");
    if (m->code_count > BIB_MAX_CODE)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u instructions, more than the limit %u", m->code_count,
                            BIB_MAX_CODE);
    bib_status_t st = decode_ops(m, 0, diag);
    if (st == BIB_OK)
        st = verify_pools(m, diag);
    if (st == BIB_OK)
        st = verify_imports(m, diag);
    if (st == BIB_OK)
        st = verify_functions(m, diag);
    if (st == BIB_OK)
        st = verify_labels(m, diag);
    if (st == BIB_OK)
        st = verify_tensors(m, diag);
    if (st == BIB_OK)
        st = verify_devcode(m, diag);
    if (st == BIB_OK)
        st = verify_code(m, diag);
    if (st == BIB_OK && m->tensor_regs > 0)
        st = verify_liveness(m, diag);
    return st;
}

/* What the instructions at pc from..to-1 do to the liveness dataflow:
   LV_PLAIN, nothing it tracks; LV_TENSORS, they name tensor registers in
   straight-line code, whose states go on from those before them; LV_FLOW,
   they change what comes before them: they branch (a new way into that
   code), end the function early, or may enter the entry function again
   (which makes its starting states unknown). The caller also takes the
   function's last instruction as LV_FLOW when it branches. */
enum { LV_PLAIN, LV_TENSORS, LV_FLOW };
static int liveness_change(const bib_module_t *m, uint32_t from, uint32_t to) {
    int change = LV_PLAIN;
    for (uint32_t pc = from; pc < to; pc++) {
        const bib_insn_t *insn = &m->code[pc];
        const bib_opinfo_t *info = bib_module_info(m, pc);
        const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
        if (info->flags & (BIB_F_BRANCH | BIB_F_TERM))
            return LV_FLOW;
        bool callee = false;
        for (int k = 0; k < 4; k++) {
            uint32_t kind = info->kinds[k];
            if (kind == BIB_K_TGT || kind == BIB_K_CASES)
                return LV_FLOW;
            if (kind == BIB_K_FN && words[k] == m->entry_func && (info->flags & BIB_F_CALL))
                return LV_FLOW;
            if (kind == BIB_K_TD || kind == BIB_K_TS || kind == BIB_K_TM)
                change = LV_TENSORS;
            callee |= kind == BIB_K_FN || kind == BIB_K_HOST;
        }
        if ((info->flags & BIB_F_CALL) && !callee)
            return LV_FLOW;
    }
    return change;
}

/* The liveness verdict on the module with count straight-line instructions
   inserted at pc at, ahead of the entry function's last, from the record
   of the check before (see bib_liveness_tail): the same verdict the whole
   check gives, and the record brought up to date. */
static bib_status_t extend_liveness(bib_module_t *m, uint32_t at, uint32_t count,
                                    bib_diag_t *diag) {
    bib_liveness_tail_t *t = m->liveness_tail;
    const uint32_t nregs = m->tensor_regs;
    /* The states over every tensor register (the extra columns last), and
       which registers become the function's own. */
    uint8_t *cur = malloc((size_t)nregs + 2);
    uint32_t *local = malloc((size_t)nregs * sizeof *local);
    uint8_t *named = t->named, *state = t->state;
    if (nregs > t->regs) {
        if ((named = realloc(t->named, nregs)) != NULL)
            t->named = named;
        if (named != NULL && (state = realloc(t->state, nregs)) != NULL)
            t->state = state;
    }
    if (cur == NULL || local == NULL || named == NULL || state == NULL) {
        free(cur);
        free(local);
        return bib_diag_set(diag, BIB_E_NOMEM, "out of memory checking tensor liveness");
    }
    for (uint32_t r = t->regs; r < nregs; r++) {
        named[r] = 0;
        state[r] = t->ghost;
    }
    t->regs = nregs;
    uint32_t added = 0;
    for (uint32_t pc = at; pc < at + count; pc++) {
        const bib_insn_t *insn = &m->code[pc];
        const bib_opinfo_t *info = bib_module_info(m, pc);
        const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
        for (int k = 0; k < 4; k++) {
            uint32_t kind = info->kinds[k];
            if ((kind == BIB_K_TD || kind == BIB_K_TS || kind == BIB_K_TM) && !named[words[k]]) {
                named[words[k]] = 1;
                added++;
            }
        }
    }
    /* The whole check's order: too many states leaves the function
       untracked; else its work, every block it processed, runs out. */
    const uint64_t nlocal = (uint64_t)t->nlocal + added;
    const uint64_t work = t->work + t->tail_visits * count + t->visits * added;
    t->nlocal = (uint32_t)nlocal;
    if (t->verdict == BIB_LV_COMPLETE && (uint64_t)t->nblocks * nlocal > LV_MAX_STATE_BYTES)
        t->verdict = BIB_LV_UNTRACKED;
    if (t->verdict == BIB_LV_COMPLETE && work > LV_MAX_WORK)
        t->verdict = BIB_LV_GAVE_UP;
    t->work = work;
    bib_status_t st = BIB_OK;
    if (t->verdict == BIB_LV_COMPLETE && t->reached) {
        liveness_t lv;
        memset(&lv, 0, sizeof lv);
        lv.m = m;
        lv.diag = diag;
        lv.local = local;
        for (uint32_t r = 0; r < nregs; r++)
            local[r] = r;
        memcpy(cur, state, nregs);
        cur[nregs] = cur[nregs + 1] = t->ghost;
        for (uint32_t pc = at; pc < at + count && st == BIB_OK; pc++)
            st = lv_step(&lv, cur, nregs + 2, pc, 1);
        memcpy(state, cur, nregs);
        t->ghost = cur[nregs + 1];
    }
    free(cur);
    free(local);
    return st;
}

/* New labels of the entry function, all to mark pc at, as verify_labels
   would check them: named, not in the disassembler's L<number> form, and no
   name given twice in the function. */
static bib_status_t verify_new_labels(bib_module_t *m, uint32_t at, const char *const *names,
                                      uint32_t n, bib_diag_t *diag) {
    const bib_function_t *f = &m->funcs[m->entry_func];
    for (uint32_t i = 0; i < n; i++) {
        if (names[i] == NULL || names[i][0] == '\0')
            return bib_diag_set(diag, BIB_E_VERIFY, "label %u has no name", m->label_count + i);
        if (generated_label(names[i]))
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "label '%s' at pc %u has the form L<number> the disassembler "
                                "gives unnamed targets",
                                names[i], at);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "label '%s' is given twice in function '%s'", names[i],
                                    f->name);
        uint32_t pc;
        int found = bib_module_entry_label(m, names[i], &pc);
        if (found < 0)
            return bib_diag_set(diag, BIB_E_NOMEM, "out of memory for %u labels", m->label_count);
        if (found)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "label '%s' is given twice in function '%s' (at pc %u and %u)",
                                names[i], f->name, pc, at);
    }
    return BIB_OK;
}

bib_status_t bib_module_verify_extension(bib_module_t *m, uint32_t at, uint32_t count,
                                         uint32_t first_const, const char *const *labels,
                                         uint32_t label_count, bib_diag_t *diag) {
    if (m->code_count > BIB_MAX_CODE)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u instructions, more than the limit %u", m->code_count,
                            BIB_MAX_CODE);
    const bib_function_t *f = &m->funcs[m->entry_func];
    /* The checks bib_module_verify would fail on first, in its order: the
       new constants, the entry function's frame, the new labels, the new
       instructions and the moved last one, then liveness. Nothing else has
       changed, and every check passed before can only pass again:
       registers, tensor registers, constants and the function's pcs only
       grew. */
    bib_status_t st = decode_ops(m, at, diag);
    if (st == BIB_OK)
        st = verify_consts(m, first_const, diag);
    if (st == BIB_OK)
        st = verify_frame(m, m->entry_func, diag);
    if (st == BIB_OK)
        st = verify_new_labels(m, at, labels, label_count, diag);
    if (st == BIB_OK)
        st = verify_code_range(m, m->entry_func, at, f->entry + f->count, diag);
    /* Liveness: from the record of the last check when the new code is
       straight-line, else checked again over the module. */
    if (st == BIB_OK && m->tensor_regs > 0) {
        /* A last instruction that jumps (back into the new code, say) makes
           the new code part of a flow the record does not know. */
        int change = (bib_module_info(m, at + count)->flags & BIB_F_BRANCH)
                         ? LV_FLOW
                         : liveness_change(m, at, at + count);
        if (change == LV_FLOW || (change == LV_TENSORS && m->liveness_tail == NULL))
            st = verify_liveness(m, diag);
        else if (m->liveness_tail != NULL)
            st = extend_liveness(m, at, count, diag);
    }
    return st;
}

uint32_t bib_module_func_at(const bib_module_t *m, uint32_t pc) {
    /* Last function whose entry is <= pc; bodies tile the code in order. */
    uint32_t lo = 0, hi = m->func_count;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->funcs[mid].entry <= pc)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
