/* tests/unit/extend_compare.h: what bib_vm_extend must give, compared with
 * a reload of the same grown module: the decoded program and the liveness
 * record. Shared by tests/unit/test_extend.c and tests/fuzz/fuzz_extend.c;
 * each function returns NULL when the two agree, else what differs (in why).
 */
#ifndef BIB_TESTS_EXTEND_COMPARE_H
#define BIB_TESTS_EXTEND_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "module/module.h"
#include "vm/vm.h"

/* The labels section's order: by pc, then by name. */
static int extend_compare_labels(const void *x, const void *y) {
    const bib_label_t *a = x, *b = y;
    if (a->pc != b->pc)
        return a->pc < b->pc ? -1 : 1;
    return strcmp(a->name, b->name);
}

static bool extend_is_latch(int xop) {
    return xop >= BIB_XOP_L_JMP_EQ_JZ && xop < BIB_XOP_L_JMP_EQ_JZ + 4 * BIB_LATCH_TEST_COUNT;
}

/* x as something comparable across two programs: an index where it points
   into the program's code, functions or hosts, else its bits. */
static uint64_t extend_x_key(const bib_program_t *p, const bib_dinsn_t *d) {
    uintptr_t v = (uintptr_t)d->x.target;
    uintptr_t code = (uintptr_t)p->code, funcs = (uintptr_t)p->funcs;
    if (v >= code && v < code + (uintptr_t)p->code_cap * sizeof *p->code)
        return 1000000000ull + (v - code) / sizeof *p->code;
    if (v >= funcs && v < funcs + p->func_count * sizeof *p->funcs)
        return 2000000000ull + (v - funcs) / sizeof *p->funcs;
    if (p->hosts != NULL && v >= (uintptr_t)p->hosts &&
        v < (uintptr_t)p->hosts + p->host_count * sizeof *p->hosts)
        return 3000000000ull + (v - (uintptr_t)p->hosts) / sizeof *p->hosts;
    return d->x.bits;
}

/* The extended program (a) against the reloaded one (b): every field, except
   that a latch the reload forms may be missing from the extension (groups
   only make the plain loop faster) and the entry function may zero more of
   its frame on a call (all of it), never less. */
static const char *extend_same_program(const bib_vm_t *a, const bib_vm_t *b, char why[160]) {
    const bib_program_t *pa = &a->program, *pb = &b->program;
    if (pa->code_count != pb->code_count || pa->func_count != pb->func_count)
        return "the code or function count differs";
    for (uint32_t i = 0; i < pa->func_count; i++) {
        const bib_dfunc_t *x = &pa->funcs[i], *y = &pb->funcs[i];
        bool zero_ok = i == a->module->entry_func ? x->nzero >= y->nzero : x->nzero == y->nzero;
        if (x->entry - pa->code != y->entry - pb->code || x->nregs != y->nregs ||
            x->nargs != y->nargs || !zero_ok) {
            snprintf(why, 160, "function %u differs (nregs %u/%u, nzero %u/%u)", i, x->nregs,
                     y->nregs, x->nzero, y->nzero);
            return why;
        }
    }
    for (uint32_t pc = 0; pc < pa->code_count; pc++) {
        const bib_dinsn_t *x = &pa->code[pc], *y = &pb->code[pc];
        const char *what = NULL;
        if (x->op != y->op || x->a != y->a || x->b != y->b || x->c != y->c || x->d != y->d)
            what = "the instruction";
        else if (x->xop != y->xop && (!extend_is_latch(y->xop) || extend_is_latch(x->xop)))
            what = "the superinstruction";
        else if (x->xop == y->xop && extend_x_key(pa, x) != extend_x_key(pb, y))
            what = "x";
        if (what != NULL) {
            snprintf(why, 160, "pc %u: %s differs (op %u, xop %u extended, %u reloaded)", pc, what,
                     x->op, x->xop, y->xop);
            return why;
        }
    }
    return NULL;
}

/* The liveness record the extensions kept up (a) against the one a check of
   the whole grown module made (b): the same verdict, work, states and all.
   *had says whether a had one (an extension taken back drops it). */
static const char *extend_same_liveness(const bib_module_t *a, const bib_module_t *b, bool *had) {
    const bib_liveness_tail_t *x = a->liveness_tail, *y = b->liveness_tail;
    *had = x != NULL;
    if (x == NULL)
        return NULL;
    if (y == NULL)
        return "the reload has no liveness record";
    if (x->verdict != y->verdict || x->reached != y->reached || x->regs != y->regs ||
        x->nlocal != y->nlocal || x->nblocks != y->nblocks)
        return "the liveness record's verdict or shape differs";
    if (x->work != y->work || x->visits != y->visits || x->tail_visits != y->tail_visits)
        return "the liveness record's work differs";
    if (memcmp(x->named, y->named, x->regs) != 0)
        return "the liveness record's registers differ";
    if (x->reached && x->verdict == BIB_LV_COMPLETE &&
        (memcmp(x->state, y->state, x->regs) != 0 || x->ghost != y->ghost))
        return "the liveness states differ";
    return NULL;
}

#endif
