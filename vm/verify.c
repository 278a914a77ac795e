/* vm/verify.c: the verifier, which makes untrusted modules safe to run.
 *
 * It proves, once, every fact the interpreter relies on without checking:
 * every opcode known and implemented, every operand in range for its kind,
 * every jump inside its function, every call passing the callee's argument
 * count, functions tiling the code with no fall-through off their ends. It is
 * driven only by bib_isa_table (operand kinds and flags): no opcode is named
 * here. It does not parse bytes (format.c) and does not link imports (vm).
 */
#include "module.h"

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
        if (f->nregs == 0 || f->nregs > BIB_MAX_REGS)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "function %u '%s': register count %u is outside 1..%u", i, f->name,
                                f->nregs, BIB_MAX_REGS);
        if (f->nargs > f->nregs)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "function %u '%s': takes %u arguments but has only %u registers", i,
                                f->name, f->nargs, f->nregs);
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

static bib_status_t verify_pools(const bib_module_t *m, bib_diag_t *diag) {
    if (m->const_count > BIB_MAX_CONSTS)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "constant pool has %u entries, more than the limit %u", m->const_count,
                            BIB_MAX_CONSTS);
    if (m->const_count > 0 && m->consts == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has %u constants but no constant pool",
                            m->const_count);
    for (uint32_t i = 0; i < m->const_count; i++)
        if (m->consts[i].type != BIB_CONST_I64 && m->consts[i].type != BIB_CONST_F64)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "constant %u: unknown type %u (expected 1 = i64 or 2 = f64)", i,
                                m->consts[i].type);
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
        if (v >= f->nregs)
            return bib_diag_set(diag, BIB_E_VERIFY,
                                "pc %u (%s): operand %c names register r%u but function '%s' has "
                                "%u registers (r0..r%u)",
                                pc, info->name, slot, v, f->name, f->nregs, f->nregs - 1);
        return BIB_OK;
    case BIB_K_IMM:
    case BIB_K_IMMLO:
    case BIB_K_IMMHI:
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
    case BIB_K_COUNT:
        /* A count after a register operand sizes the register range that
           starts there (r[c..c+d) for CALL, HOSTCALL and ALLOC). */
        if (k > 0 && info->kinds[k - 1] == BIB_K_RS) {
            uint64_t end = (uint64_t)words[k - 1] + v;
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
    case BIB_K_TD:
    case BIB_K_TS:
    case BIB_K_DTYPE:
    case BIB_K__N:
        break;
    }
    /* Tensor operand kinds only occur in reserved rows, rejected before their
       operands are looked at; a row that drops BIB_F_RESERVED must bring its
       operand checks here first, and until then it fails loudly. */
    return bib_diag_set(diag, BIB_E_VERIFY,
                        "pc %u (%s): operand %c has kind %s, which this verifier cannot check", pc,
                        info->name, slot, bib_isa_kind_name((bib_operand_kind_t)info->kinds[k]));
}

static bib_status_t verify_code(const bib_module_t *m, bib_diag_t *diag) {
    char terminators[128];
    terminators[0] = '\0';
    for (uint32_t fi = 0; fi < m->func_count; fi++) {
        const bib_function_t *f = &m->funcs[fi];
        uint32_t last = f->entry + f->count - 1;
        for (uint32_t pc = f->entry; pc <= last; pc++) {
            const bib_insn_t *insn = &m->code[pc];
            int index = bib_isa_find_code(insn->op);
            if (index < 0)
                return bib_diag_set(diag, BIB_E_VERIFY, "pc %u: unknown opcode 0x%08X", pc,
                                    insn->op);
            const bib_opinfo_t *info = &bib_isa_table[index];
            if (info->flags & BIB_F_RESERVED)
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u: opcode %s (0x%08X) is reserved: not implemented in "
                                    "this build",
                                    pc, info->name, insn->op);
            const uint32_t words[4] = {insn->a, insn->b, insn->c, insn->d};
            /* Slots are checked in order, so the FN/HOST index a COUNT refers
               to (always an earlier slot) is already known to be in range. */
            for (int k = 0; k < 4; k++) {
                bib_status_t st = verify_operand(m, f, pc, info, words, k, diag);
                if (st != BIB_OK)
                    return st;
            }
            if (pc == last && !(info->flags & BIB_F_TERM)) {
                if (terminators[0] == '\0')
                    terminator_names(terminators, sizeof terminators);
                return bib_diag_set(diag, BIB_E_VERIFY,
                                    "pc %u (%s): function '%s' falls off its end (its last "
                                    "instruction must be %s)",
                                    pc, info->name, f->name, terminators);
            }
        }
    }
    return BIB_OK;
}

bib_status_t bib_module_verify(const bib_module_t *m, bib_diag_t *diag) {
    if (m == NULL)
        return bib_diag_set(diag, BIB_E_USAGE, "no module to verify");
    if (m->code_count == 0 || m->code == NULL)
        return bib_diag_set(diag, BIB_E_VERIFY, "module has no code");
    if (m->code_count > BIB_MAX_CODE)
        return bib_diag_set(diag, BIB_E_VERIFY,
                            "module has %u instructions, more than the limit %u", m->code_count,
                            BIB_MAX_CODE);
    bib_status_t st = verify_pools(m, diag);
    if (st == BIB_OK)
        st = verify_imports(m, diag);
    if (st == BIB_OK)
        st = verify_functions(m, diag);
    if (st == BIB_OK)
        st = verify_code(m, diag);
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
