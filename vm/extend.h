/* vm/extend.h: growing a stepped run's module in place, for the REPL.
 *
 * bib_vm_reload swaps in a whole new module: it reads, verifies and decodes
 * all of it, so a session that reloads after each line does work that grows
 * with the square of its length. bib_vm_extend instead inserts a few
 * instructions ahead of the entry function's closing instruction (where the
 * REPL puts each new line of main) and verifies and decodes just them, with
 * the same verdict and the same results as a reload of the grown module.
 */
#ifndef BIB_VM_EXTEND_H
#define BIB_VM_EXTEND_H

#include <stdint.h>

#include "include/bib.h"
#include "module/module.h"

typedef struct bib_extension {
    const bib_insn_t *code; /* count instructions, as in a module */
    const uint32_t *lines;  /* their source lines; NULL: unknown (0) */
    uint32_t count;
    const char *const *labels; /* label_count new labels of the first new instruction */
    uint32_t label_count;      /* (of the closing one when count is 0) */
    const bib_const_t *consts; /* appended to the constant pool; code indexes the grown pool */
    uint32_t const_count;
    uint32_t nregs;       /* the entry function's register count from now on (>= before) */
    uint32_t tensor_regs; /* the tensor register file's size from now on (>= before) */
} bib_extension_t;

/* Inserts ext's instructions ahead of the last instruction of the loaded
 * module's entry function, which must be the module's last function, with
 * the labels that mark the first of them, and
 * pauses the stepped run at the entry function's instruction offset, as
 * bib_vm_reload does; registers, memory and tensors are kept. Imports,
 * functions, labels, data and tensor declarations stay as they are. On any
 * error nothing changes, and bib_vm_error says what and where, in the words
 * bib_vm_reload would use (name prefixes the message). */
bib_status_t bib_vm_extend(bib_vm_t *vm, const bib_extension_t *ext, const char *name,
                           uint32_t offset);

/* Starts a stepped run of function name with these arguments, as
 * bib_vm_call runs it (the same checks and messages), and executes nothing:
 * bib_vm_step and bib_vm_continue run it, so the REPL's :call can be
 * stopped by Ctrl-C as its other runs can. A RET from it halts the run with
 * the returned value as the exit value. */
bib_status_t bib_vm_start_call(bib_vm_t *vm, const char *name, const bib_value_t *args,
                               uint32_t nargs);

/* The loaded module (NULL when none), for checks that compare it with a
 * module built another way. */
const bib_module_t *bib_vm_module(const bib_vm_t *vm);

/* Lookups in the loaded module for whoever builds an extension of it, with
 * the results of bib_module_entry_label and bib_module_const_find (-1 also
 * when no module is loaded). */
int bib_vm_entry_label(bib_vm_t *vm, const char *name, uint32_t *pc);
int bib_vm_const_find(bib_vm_t *vm, bib_const_t k, uint32_t *index);

#endif
