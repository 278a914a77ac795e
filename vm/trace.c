/* vm/trace.c: instructions as text, for trace lines and trap messages.
 *
 * Owns the one function that prints an instruction from the ISA table's
 * operand kinds (bib_insn_operands), the trace line formats (text and JSON
 * Lines) and the trap message format. Trace output is deterministic: pcs,
 * operands and values only, never addresses or times; a tensor opcode adds
 * the shapes, the executor that ran it and its result's hash
 * (bib_tensor_trace), so one program traced on two executors differs only in
 * the executor names. Reads the loaded
 * module; never changes VM state except the error text.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "vm/json.h"
#include "vm/vm.h"

static bool is_plain_name(const char *s) {
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (const char *p = s + 1; *p != '\0'; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '.'))
            return false;
    return true;
}

/* A name as the assembler reads it: plain, or quoted with escapes. */
static void format_name(const char *name, char *out, size_t cap) {
    if (name == NULL)
        name = "";
    if (is_plain_name(name)) {
        snprintf(out, cap, "%s", name);
        return;
    }
    size_t n = 0;
    if (n + 1 < cap)
        out[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)name; *p != '\0' && n + 5 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7F) {
            n += (size_t)snprintf(out + n, cap - n, "\\x%02X", *p);
        } else {
            out[n++] = (char)*p;
        }
    }
    if (n + 1 < cap)
        out[n++] = '"';
    out[n < cap ? n : cap - 1] = '\0';
}

int bib_insn_operands(const bib_module_t *m, uint32_t pc, char out[4][BIB_OPERAND_TEXT]) {
    const bib_insn_t *in = &m->code[pc];
    int op = bib_module_op(m, pc);
    if (op < 0)
        return 0;
    const bib_opinfo_t *info = &bib_isa_table[op];
    const uint32_t words[4] = {in->a, in->b, in->c, in->d};
    int n = 0;
    for (int k = 0; k < 4; k++) {
        uint32_t w = words[k];
        char *o = out[n];
        switch ((bib_operand_kind_t)info->kinds[k]) {
        case BIB_K_NONE:
        case BIB_K_IMMHI: /* printed with its IMMLO half */
        case BIB_K__N:
            continue;
        case BIB_K_RD:
        case BIB_K_RS:
        case BIB_K_RM:
            snprintf(o, BIB_OPERAND_TEXT, "r%" PRIu32, w);
            break;
        case BIB_K_TD:
        case BIB_K_TS:
        case BIB_K_TM:
            snprintf(o, BIB_OPERAND_TEXT, "t%" PRIu32, w);
            break;
        case BIB_K_IMM:
        case BIB_K_DIVISOR:
            snprintf(o, BIB_OPERAND_TEXT, "%" PRId32, (int32_t)w);
            break;
        case BIB_K_IMMLO: {
            uint64_t hi = 0;
            for (int j = 0; j < 4; j++)
                if (info->kinds[j] == BIB_K_IMMHI)
                    hi = words[j];
            snprintf(o, BIB_OPERAND_TEXT, "%" PRId64, (int64_t)(hi << 32 | w));
            break;
        }
        case BIB_K_DTYPE: /* as the disassembler prints it */
            if (w == BIB_DTYPE_F32 || w == BIB_DTYPE_I32)
                snprintf(o, BIB_OPERAND_TEXT, "%s", w == BIB_DTYPE_I32 ? "i32" : "f32");
            else
                snprintf(o, BIB_OPERAND_TEXT, "%" PRIu32, w);
            break;
        case BIB_K_COUNT:
        case BIB_K_SCALE:
        case BIB_K_CASES:
            snprintf(o, BIB_OPERAND_TEXT, "%" PRIu32, w);
            break;
        case BIB_K_CONST:
            snprintf(o, BIB_OPERAND_TEXT, "k%" PRIu32, w);
            break;
        case BIB_K_TGT: { /* the label's name, as the disassembler prints it */
            int64_t l = bib_module_label_at(m, w);
            if (l >= 0)
                format_name(m->labels[l].name, o, BIB_OPERAND_TEXT);
            else
                snprintf(o, BIB_OPERAND_TEXT, "L%" PRIu32, w);
            break;
        }
        case BIB_K_FN:
            if (w < m->func_count && m->funcs[w].name != NULL && m->funcs[w].name[0] != '\0')
                format_name(m->funcs[w].name, o, BIB_OPERAND_TEXT);
            else
                snprintf(o, BIB_OPERAND_TEXT, "f%" PRIu32, w);
            break;
        case BIB_K_SHADER:
            if (w < m->shader_count && m->shaders[w].name != NULL)
                format_name(m->shaders[w].name, o, BIB_OPERAND_TEXT);
            else
                snprintf(o, BIB_OPERAND_TEXT, "s%" PRIu32, w);
            break;
        case BIB_K_KERNEL:
            if (w < m->kernel_count && m->kernels[w].name != NULL)
                format_name(m->kernels[w].name, o, BIB_OPERAND_TEXT);
            else
                snprintf(o, BIB_OPERAND_TEXT, "k%" PRIu32, w);
            break;
        case BIB_K_HOST:
            if (w < m->import_count)
                format_name(m->imports[w], o, BIB_OPERAND_TEXT);
            else
                snprintf(o, BIB_OPERAND_TEXT, "h%" PRIu32, w);
            break;
        }
        n++;
    }
    return n;
}

void bib_insn_format(const bib_module_t *m, uint32_t pc, char *buf, size_t cap) {
    char ops[4][BIB_OPERAND_TEXT];
    int op = bib_module_op(m, pc);
    int n = bib_insn_operands(m, pc, ops);
    size_t used = (size_t)snprintf(buf, cap, "%s", op >= 0 ? bib_isa_table[op].name : "?");
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i == 0 ? " " : ", ", ops[i]);
}

void bib_format_f64(double value, char *buf, size_t cap) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, value);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &value, sizeof value) == 0 || value != value)
            return;
    }
}

bib_status_t bib_vm_trap_at(bib_vm_t *vm, bib_status_t status, uint32_t pc, const char *format,
                            ...) {
    char cause[768];
    va_list ap;
    va_start(ap, format);
    vsnprintf(cause, sizeof cause, format, ap);
    va_end(ap);
    char insn[512];
    bib_insn_format(vm->module, pc, insn, sizeof insn);
    const bib_module_t *m = vm->module;
    if (m->lines != NULL && m->lines[pc] != 0)
        return bib_vm_fail(vm, status, "trap at pc %" PRIu32 " (%s) line %" PRIu32 ": %s", pc, insn,
                           m->lines[pc], cause);
    return bib_vm_fail(vm, status, "trap at pc %" PRIu32 " (%s): %s", pc, insn, cause);
}

/* Whether the opcode's result is an f64 (shown as a float as well). */
static bool writes_f64(const bib_module_t *m, const bib_insn_t *in, int op) {
    switch ((bib_opcode_t)op) {
    case BIB_OP_FADD:
    case BIB_OP_FSUB:
    case BIB_OP_FMUL:
    case BIB_OP_FDIV:
    case BIB_OP_FNEG:
    case BIB_OP_FABS:
    case BIB_OP_FSQRT:
    case BIB_OP_FMIN:
    case BIB_OP_FMAX:
    case BIB_OP_ITOF:
    case BIB_OP_UTOF:
    case BIB_OP_LOADF32:
        return true;
    case BIB_OP_LDK:
        return in->b < m->const_count && m->consts[in->b].type == BIB_CONST_F64;
    default:
        return false;
    }
}

void bib_trace_step(bib_vm_t *vm, uint32_t pc, const uint64_t *regs, bib_trace_write_t kind,
                    uint64_t value) {
    const bib_module_t *m = vm->module;
    const bib_insn_t *in = &m->code[pc];
    int op = bib_module_op(m, pc);
    const bib_opinfo_t *info = &bib_isa_table[op];
    FILE *out = vm->trace;

    /* What was written: "r3" = value, or "ret" = value, or nothing. */
    char dest[16] = "";
    bool is_float = false;
    if (kind == BIB_TRACE_WRITE_DEST &&
        (info->kinds[0] == BIB_K_RD || info->kinds[0] == BIB_K_RM)) {
        snprintf(dest, sizeof dest, "r%" PRIu32, in->a);
        value = regs[in->a];
        is_float = writes_f64(m, in, op);
    } else if (kind == BIB_TRACE_WRITE_RET) {
        snprintf(dest, sizeof dest, "ret");
    }
    char fl[40] = "";
    if (is_float) {
        double d;
        memcpy(&d, &value, sizeof d);
        bib_format_f64(d, fl, sizeof fl);
    }

    char ops[4][BIB_OPERAND_TEXT];
    int n = bib_insn_operands(m, pc, ops);
    /* Tensor opcodes (and the GPU_* ones, the device programs VK_* and
       GPU_LAUNCH, and the tensor collectives) add operand shapes, the
       executor and the result's hash; one that trapped wrote nothing. */
    char tensor[768] = "";
    const bool tensor_op = info->opclass == BIB_CLASS_TENSOR || info->opclass == BIB_CLASS_CUDA ||
                           info->opclass == BIB_CLASS_VULKAN ||
                           (info->opclass == BIB_CLASS_COLLECTIVE && info->kinds[0] != BIB_K_RD &&
                            info->kinds[0] != BIB_K_NONE);
    if (tensor_op && kind != BIB_TRACE_WRITE_TRAP)
        bib_tensor_trace(vm, pc, vm->options.trace_format == BIB_TRACE_JSON, tensor, sizeof tensor);
    if (vm->options.trace_format == BIB_TRACE_JSON) {
        fprintf(out, "{\"pc\":%" PRIu32 ",\"op\":\"%s\",\"args\":[", pc, info->name);
        for (int i = 0; i < n; i++) {
            if (i > 0)
                fputc(',', out);
            bib_json_string(out, ops[i]);
        }
        fputs(kind == BIB_TRACE_WRITE_TRAP ? "],\"trap\":true,\"writes\":{" : "],\"writes\":{",
              out);
        if (dest[0] != '\0')
            fprintf(out, "\"%s\":%" PRId64, dest, (int64_t)value);
        fputc('}', out);
        if (is_float) {
            /* JSON has no NaN or infinity: those go as strings. */
            bool finite = strchr(fl, 'n') == NULL && strchr(fl, 'N') == NULL;
            fprintf(out, ",\"f64\":{\"%s\":%s%s%s}", dest, finite ? "" : "\"", fl,
                    finite ? "" : "\"");
        }
        if (tensor[0] != '\0')
            fprintf(out, ",%s", tensor);
        fputs("}\n", out);
        return;
    }
    char text[2048];
    size_t used = (size_t)snprintf(text, sizeof text, "%s", info->name);
    for (int i = 0; i < n && used < sizeof text; i++)
        used +=
            (size_t)snprintf(text + used, sizeof text - used, "%s%s", i == 0 ? " " : ", ", ops[i]);
    if (kind == BIB_TRACE_WRITE_TRAP) {
        fprintf(out, "[%7" PRIu32 "] %-25s trap\n", pc, text);
        return;
    }
    if (dest[0] == '\0') {
        if (tensor[0] != '\0') /* " on vulkan" when no tensor operand came first */
            fprintf(out, "[%7" PRIu32 "] %-25s %s\n", pc, text, tensor + (tensor[0] == ' '));
        else
            fprintf(out, "[%7" PRIu32 "] %s\n", pc, text);
        return;
    }
    fprintf(out, "[%7" PRIu32 "] %-25s %s=%" PRId64 " (0x%" PRIx64 ")%s%s%s%s\n", pc, text, dest,
            (int64_t)value, value, is_float ? " f64 " : "", fl, tensor[0] ? " " : "", tensor);
}
