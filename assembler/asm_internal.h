/* assembler/asm_internal.h: what the assembler's files share (asm.c,
 * asm_text.c, asm_lex.c, asm_equ.c, asm_directives.c, asm_devcode.c,
 * asm_operands.c): the parsed lines, the symbol table, the assembler state
 * and the functions one file calls in another. Not installed and not part of the library's
 * interface; everything else stays static in its file.
 *
 * The module being made lives in the builder (asm_state_t.b), which the
 * passes drive as they meet each declaration: functions, imports, constants,
 * dimensions, tensors, shaders, kernels and data go into it in the order the
 * module lists them, and are found there again by name (bib_builder_find).
 * The state here holds only what the text adds: where each thing was
 * defined, the labels, constants and .equ names, and what a directive
 * decides for the whole module once every line is read.
 */
#ifndef BIB_ASM_INTERNAL_H
#define BIB_ASM_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "assembler/asm.h"
#include "assembler/devcode.h"
#include "module/names.h"

#define ASM_MAX_ERRORS 50
#define ASM_NONE UINT32_MAX

/* ---- symbols ------------------------------------------------------------ */

/* The names only the text has; code labels also carry their function as
   scope, so two functions can each have "loop". Functions, imports,
   dimensions, tensors, shaders and kernels are the builder's to name
   (bib_builder_find). */
typedef enum sym_kind {
    SYM_DATA,
    SYM_CONST,
    SYM_CODE,
    /* A .shader or .kernel whose declaration failed (its error is already
       reported): uses of the name say nothing more. */
    SYM_BROKEN_SHADER,
    SYM_BROKEN_KERNEL,
    SYM_EQU, /* value: index in asm_state_t.equs */
} sym_kind_t;

typedef struct sym {
    uint32_t kind, scope;
    uint64_t value;    /* data address, pool index, instruction index */
    uint32_t label_id; /* code labels: the builder's label id */
    uint32_t stmt;     /* statement that defines it */
} sym_t;

typedef struct symtab {
    sym_t *syms;
    uint32_t count, cap;
    bib_names_t index; /* name in (kind, scope) -> index in syms */
} symtab_t;

/* ---- parsed lines ------------------------------------------------------- */

typedef struct span {
    const char *p;
    uint32_t len;
    uint32_t col; /* 1-based byte column */
} span_t;

/* An operand or label as the statements keep it: where it lies in its own
   statement's line (col, 1-based, and len), which gives back the span_t
   (bib_asm_operand, bib_asm_label). Half a span_t, one per operand and label
   of the source. */
typedef struct span_at {
    uint32_t col, len;
} span_at_t;

/* One per source line, so its size is most of the assembler's memory on a
   large program: the fields are ordered to leave no padding (56 bytes on a
   64-bit host). */
typedef struct stmt {
    const char *text; /* the source line, for diagnostics */
    span_at_t word;   /* mnemonic or directive (bib_asm_word); len 0 when none */
    uint32_t line;
    uint32_t text_len;
    uint32_t label_first, label_count; /* in asm_t.spans */
    uint32_t op_first, op_count;       /* in asm_t.spans */
    uint32_t func;                     /* enclosing function, ASM_NONE at top level */
    uint32_t owner;    /* continuation line: 1 + the '.tensor' statement it belongs to; else 0 */
    uint32_t body_of;  /* raw line of a '.shader'/'.kernel' block: 1 + that statement; else 0 */
    uint8_t bad;       /* a syntax error was reported: skip it */
    uint8_t continued; /* a '.tensor' value list goes on on the next line */
} stmt_t;

/* What the text says of a function; its id is the builder's, its name is in
   the builder. */
typedef struct asm_func {
    uint32_t stmt; /* its .func line */
    uint32_t nargs, nregs;
    int regs_given;
    uint32_t regs_used; /* highest register named + 1 */
    uint32_t insn_count;
    int last_op; /* opcode index of the last instruction, -1 when none */
    int ended;
} asm_func_t;

typedef struct asm_int {
    int neg;
    uint64_t mag;
} asm_int_t;

/* A .equ, defined before pass 1 (asm_equ.c). */
typedef enum equ_state {
    EQU_PENDING, /* its value is not read yet */
    EQU_OK,
    EQU_FAILED, /* its value was wrong (reported): uses say nothing more */
} equ_state_t;

typedef struct asm_equ {
    uint32_t stmt;
    uint32_t state; /* equ_state_t */
    int is_float;
    asm_int_t value;   /* an integer .equ */
    uint64_t f64_bits; /* a float .equ: its binary64 bits */
    uint64_t f32_bits; /* and its binary32 bits, read from the same text */
    int f32_fits;      /* 0 for raw bits(...) wider than 32 */
} asm_equ_t;

/* A '.bss' reservation: placed after all the data once pass 1 has laid it
   out (bib_asm_place_bss). */
typedef struct asm_bss {
    uint32_t stmt;
    uint64_t size, align;
    uint64_t addr; /* set by bib_asm_place_bss */
} asm_bss_t;

typedef struct data_fixup {
    uint32_t offset, width, stmt;
    span_t op;
} data_fixup_t;

/* One error. Passes find errors out of line order; they are sorted by place
   before they are printed. */
typedef struct asm_diag {
    uint32_t line, col, seq;
    char *text;
} asm_diag_t;

typedef struct asm_state {
    const char *file;
    asm_diag_t *diags;
    uint32_t errors, diag_cap;
    int stopped;

    stmt_t *stmts;
    uint32_t stmt_count, stmt_cap;
    span_at_t *spans; /* every statement's labels and operands, in source order */
    uint32_t span_count, span_cap;

    /* The module: every declaration and data byte goes into it as pass 1
       meets it, and pass 2 emits the code. */
    bib_builder_t *b;

    symtab_t syms;
    asm_func_t *funcs; /* by function id, as the builder numbers them */
    uint32_t func_count, func_cap;
    uint32_t *tensor_stmts; /* the statement of each tensor declaration, by builder index */
    uint32_t tensor_stmt_cap;

    data_fixup_t *fixups;
    uint32_t fixup_count, fixup_cap;
    uint64_t memory_size;
    uint32_t memory_stmt; /* ASM_NONE when no .memory */
    asm_bss_t *bss;
    uint32_t bss_count, bss_cap;
    uint64_t bss_end; /* the end of the last reservation; the data size when none */
    asm_equ_t *equs;
    uint32_t equ_count, equ_cap;
    uint32_t entry_stmt; /* ASM_NONE when no .entry */

    uint32_t tregs_used;   /* highest tensor register named + 1 */
    uint32_t tregs_stmt;   /* where that highest register is named */
    uint32_t tensors_stmt; /* ASM_NONE when no .tensors */
    uint32_t tensors_given;
    int deny_device_code; /* .shader and .kernel are errors (the load policy, vm/api.c) */
    uint32_t *pc_stmt;    /* the statement of each emitted instruction, by pc */
    uint32_t pc_count, pc_cap;
    const char *default_source; /* the file name given, or NULL */

    int oom;
    uint64_t max_size;     /* the cap on the data and tensor bytes (bib_assemble_capped) */
    uint64_t tensor_bytes; /* the .tensor values so far */
    int too_large;         /* a directive passed max_size: BIB_E_NOMEM */
} asm_state_t;

typedef struct bib_asm_pass2 {
    asm_state_t *a;
    uint32_t func; /* current function */
    uint32_t line; /* the next instruction's line, once a .line has set it */
    int line_set;
    uint32_t callee;    /* FN operand of the instruction being parsed */
    uint32_t host_call; /* the instruction has a HOST operand */
    /* SHADER or KERNEL operand of the instruction, or NULL */
    const bib_shader_decl_t *shader;
    const bib_kernel_decl_t *kernel;
} pass2_t;

/* ---- operand values ----------------------------------------------------- */

typedef enum parse_result {
    PARSE_OK,
    PARSE_NOT,      /* not this kind of literal */
    PARSE_RANGE,    /* a literal, but its value does not fit */
    PARSE_BAD_CHAR, /* a malformed character literal */
} parse_result_t;

/* ---- diagnostics (asm_lex.c) ----------------------------------------------- */

void bib_asm_diag_at(asm_state_t *a, uint32_t stmt, uint32_t col, uint32_t len, const char *format,
                     ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* ---- text buffer and identifier helpers (asm_text.c) ---- */

void bib_asm_text_vprintf(bib_asm_text_t *t, const char *format, va_list ap);
int bib_asm_is_ident_start(int c);
int bib_asm_is_ident_char(int c);

/* ---- lexer, symbols and diagnostics (asm_lex.c) ---- */

sym_t *bib_asm_sym_find(symtab_t *st, const char *name, uint32_t kind, uint32_t scope);
sym_t *bib_asm_sym_add(symtab_t *st, const char *name, uint32_t kind, uint32_t scope,
                       uint64_t value, uint32_t stmt);
void bib_asm_symtab_free(symtab_t *st);
int bib_asm_grow_array(void **array, uint32_t *cap, uint32_t need, size_t elem);
char *bib_asm_diags_text(asm_state_t *a);
void bib_asm_diag_span(asm_state_t *a, uint32_t stmt, span_t sp, const char *format,
                       const char *arg);
void bib_asm_out_of_memory(asm_state_t *a);
void bib_asm_builder_failed(asm_state_t *a);
int bib_asm_is_space(int c);
const char *bib_asm_skip_quoted(const char *p, const char *end);
long bib_asm_unescape(const char *p, uint32_t n, uint8_t *out, uint32_t *bad_at, const char **why);
span_t bib_asm_operand(const asm_state_t *a, const stmt_t *s, uint32_t index);
span_t bib_asm_label(const asm_state_t *a, const stmt_t *s, uint32_t index);
span_t bib_asm_word(const stmt_t *s);
span_t bib_asm_make_span(const stmt_t *s, const char *p, const char *end);
uint32_t bib_asm_name_length(const char *p, const char *end);
int bib_asm_is_tensor_decl(span_t w);
uint64_t bib_asm_int_bits(asm_int_t v);
int bib_asm_int_fits(asm_int_t v, int64_t lo, uint64_t hi);
void bib_asm_int_text(asm_int_t v, char *out, size_t cap);
parse_result_t bib_asm_parse_int(span_t sp, asm_int_t *out);
int bib_asm_looks_float(span_t sp);
parse_result_t bib_asm_parse_float(span_t sp, int width, uint64_t *bits);
uint64_t bib_asm_int_float_bits(asm_int_t v, int width);
char *bib_asm_parse_name(asm_state_t *a, uint32_t si, span_t sp, const char *what);
int bib_asm_parse_reg(span_t sp, char prefix, uint32_t *index);
int bib_asm_find_mnemonic(span_t w);
int bib_asm_word_is(span_t w, const char *name);
int bib_asm_parse_count(asm_state_t *a, uint32_t si, span_t sp, uint64_t min, uint64_t max,
                        uint64_t *out, const char *what);
int bib_asm_parse_unsigned(asm_state_t *a, uint32_t si, span_t sp, uint64_t max, uint64_t *out,
                           const char *what);
int bib_asm_parse_int_expr(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out, int floats_ok);
int bib_asm_span_is(span_t sp, const char *text);
const char *bib_asm_block_end(const asm_state_t *a, const stmt_t *s);
void bib_asm_split_lines(asm_state_t *a, const char *src, size_t length);

/* ---- pass 1 definitions and directives (asm_directives.c) ---- */

int bib_asm_parse_dtype(span_t sp, uint32_t *dtype);
int bib_asm_parse_const_value(asm_state_t *a, uint32_t si, span_t op, uint32_t type,
                              uint64_t *bits);
int bib_asm_expect_operands(asm_state_t *a, uint32_t si, uint32_t lo, uint32_t hi);
void bib_asm_pass1(asm_state_t *a);
void bib_asm_resolve_fixups(asm_state_t *a);

void bib_asm_place_bss(asm_state_t *a);

/* ---- .equ, the symbolic constants (asm_equ.c) ---- */

void bib_asm_pass_equ(asm_state_t *a);
int bib_asm_equ_value(asm_state_t *a, uint32_t si, span_t sp, asm_equ_t *out);
int bib_asm_equ_int(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out);
int bib_asm_equ_peek_int(asm_state_t *a, uint32_t si, span_t sp, asm_int_t *out);
parse_result_t bib_asm_equ_float_bits(const asm_equ_t *e, int width, uint64_t *bits);

/* ---- .shader and .kernel declarations (asm_devcode.c) ---- */

void bib_asm_pass1_devcode(asm_state_t *a, uint32_t si);

/* ---- pass 2 instruction operands (asm_operands.c) ---- */

void bib_asm_pass2(pass2_t *p);

#endif
